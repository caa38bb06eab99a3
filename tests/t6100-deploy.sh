#!/bin/sh
# Rule checked: everything under deploy/ is valid for the tool that will read
# it, checked by that tool's own rules rather than by hand: every Kubernetes
# manifest against the API schemas (and no field the API does not define),
# the custom resources of the examples (PyTorchJob, PaddleJob, JobSet)
# structurally and through the pod and Job templates they embed, every
# kustomization (base/*, overlays/*) renders and its rendering keeps the
# cross-object rules (selectors, governing Services, Pod Security
# "restricted", the job's pod failure policy and node ids, TLS and the job's
# etcd user, every etcd member listed, etcd's TLS and NetworkPolicy); the
# validator does refuse a misspelt field, a wrongly typed value, an unknown
# kind and each broken rule; the Dockerfile lints clean; the systemd units
# pass `systemd-analyze verify` and keep their hardening; the shell scripts
# pass shellcheck (the demo's, the benchmarks' and the GPU suite's: its
# warnings and errors).
# A missing tool skips its step with the reason (TAP "# SKIP").
set -u
src=${EC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${EC_BUILDDIR:-$src}
work=$build/deploy/k8s/.validate
tmp=$(mktemp -d /tmp/ec-t6100-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

n=0
fails=0
echo "1..9"
# step NAME CMD...: run, then ok / not ok / ok # SKIP (exit 77), output as diagnostics
step() {
    name=$1
    shift
    n=$((n + 1))
    "$@" >"$tmp/out" 2>&1
    rc=$?
    if [ "$rc" = 0 ]; then
        echo "ok $n - $name"
    elif [ "$rc" = 77 ]; then
        echo "ok $n - $name # SKIP $(grep -m1 '^SKIP' "$tmp/out" | sed 's/^SKIP:* *//')"
    else
        echo "not ok $n - $name"
        fails=$((fails + 1))
    fi
    sed 's/^/# /' "$tmp/out"
}

validate() { sh "$src/deploy/k8s/validate.sh" "$@" "$work"; }

# The validator must refuse what an API server would.
negatives() {
    validate --docker >/dev/null 2>&1 # installs the toolbox; 77 if it cannot
    if [ ! -f "$work/validate.mjs" ] || [ ! -d "$work/node_modules" ]; then
        echo "SKIP: the validator could not be installed (see step 1)"
        return 77
    fi
    job=$src/deploy/k8s/base/job/job.yaml
    bad=0
    expect_fail() { # WHAT FILE NEEDLE [--rules]
        if out=$(node "$work/validate.mjs" ${4:+"$4"} "$2" 2>&1); then
            echo "accepted $1"
            bad=1
        elif ! printf '%s' "$out" | grep -q -- "$3"; then
            echo "refused $1 without saying '$3': $out"
            bad=1
        else
            echo "refused $1: $(printf '%s' "$out" | grep -m1 FAIL)"
        fi
    }
    sed 's/imagePullPolicy:/imagePullPolicyy:/' "$job" >"$tmp/typo.yaml"
    expect_fail "a misspelt field" "$tmp/typo.yaml" "imagePullPolicyy"
    sed 's/containerPort: 9400/containerPort: "9400"/' "$job" >"$tmp/type.yaml"
    expect_fail "a string port" "$tmp/type.yaml" "must be integer"
    sed 's/^kind: Job/kind: Jobb/' "$job" >"$tmp/kind.yaml"
    expect_fail "an unknown kind" "$tmp/kind.yaml" "no schema"
    sed 's/action: FailJob/action: Fail/' "$job" >"$tmp/action.yaml"
    expect_fail "an unknown podFailurePolicy action" "$tmp/action.yaml" "action"
    # the custom resources: their own fields, and the templates inside
    pt=$src/deploy/k8s/examples/pytorchjob.yaml
    sed 's/pytorchReplicaSpecs:/pytorchReplicaSpec:/' "$pt" >"$tmp/pt1.yaml"
    expect_fail "a misspelt PyTorchJob field" "$tmp/pt1.yaml" "unknown field spec.pytorchReplicaSpec"
    sed 's/readOnlyRootFilesystem:/readOnlyRootFilesystemm:/' "$pt" >"$tmp/pt2.yaml"
    expect_fail "a misspelt field in a PyTorchJob's pod template" "$tmp/pt2.yaml" "readOnlyRootFilesystemm"
    sed 's/--fixed_failure_exit=142/--fixed_failure_exit=101/' "$pt" >"$tmp/pt3.yaml"
    expect_fail "a PyTorchJob whose restart code ExitCode treats as permanent" "$tmp/pt3.yaml" "128-255" --rules
    sed 's/completionMode: Indexed/completionMode: Indexedd/' "$src/deploy/k8s/examples/jobset.yaml" >"$tmp/js.yaml"
    expect_fail "a JobSet whose Job template is invalid" "$tmp/js.yaml" "completionMode"
    # rules, on a rendering of a broken copy
    if command -v kustomize >/dev/null 2>&1 || kubectl version --client 2>/dev/null | grep -q 'Kustomize Version: v[4-9]'; then
        mkdir -p "$tmp/k8s"
        cp -r "$src/deploy/k8s/base" "$src/deploy/k8s/overlays" "$tmp/k8s/"
        sed -i 's/medium: Memory/medium: ""/; s/terminationGracePeriodSeconds: 60/terminationGracePeriodSeconds: 20/;
            s/action: FailJob/action: Count/; s/restartPolicy: Never/restartPolicy: OnFailure/;
            s/completionMode: Indexed/completionMode: NonIndexed/; s/type: RuntimeDefault/type: Unconfined/;
            s/readOnlyRootFilesystem: true/readOnlyRootFilesystem: false/;
            s/ECOORD_ETCD_USER/ECOORD_ETCD_USR/' \
            "$tmp/k8s/base/job/job.yaml"
        sed -i 's/replicas: 1/replicas: 2/; s|https://ecoord-etcd-0.ecoord-etcd-peer:2379|https://ecoord-etcd:2379|' \
            "$tmp/k8s/overlays/etcd-dev/single-member.yaml" "$tmp/k8s/overlays/cpu-demo/demo-job.yaml"
        sed -i '/name: ETCD_CLIENT_CERT_AUTH/{n;s/"true"/"false"/}; s/runAsNonRoot: true/runAsNonRoot: false/;
            s/type: OnDelete/type: RollingUpdate/' \
            "$tmp/k8s/base/etcd/statefulset.yaml"
        sed -i 's/app.kubernetes.io\/name: ecoord-job/app.kubernetes.io\/name: anything/' "$tmp/k8s/base/etcd/networkpolicy.yaml"
        if command -v kustomize >/dev/null 2>&1; then kustomize build "$tmp/k8s/overlays/cpu-demo"; else kubectl kustomize "$tmp/k8s/overlays/cpu-demo"; fi >"$tmp/broken.yaml"
        out=$(node "$work/validate.mjs" --rules "$tmp/broken.yaml" 2>&1)
        for needle in "memory-backed" "terminationGracePeriodSeconds" "ETCD_INITIAL_CLUSTER" \
            "exit 1 (this node cannot go on) must be FailJob" "restartPolicy must be Never" \
            "completionMode must be Indexed" "seccompProfile RuntimeDefault" "readOnlyRootFilesystem" \
            "ECOORD_ETCD_USER must be" "list every one of the 2 etcd member" "ETCD_CLIENT_CERT_AUTH" \
            "must run as non-root" "admit only pods" "update OnDelete"; do
            if printf '%s' "$out" | grep -q -- "$needle"; then
                echo "rules refused: $needle"
            else
                echo "rules missed: $needle"
                bad=1
            fi
        done
    else
        echo "(no kustomize v4+: the rules' negative cases were not rendered)"
    fi
    return $bad
}

units() {
    command -v systemd-analyze >/dev/null 2>&1 || { echo "SKIP: systemd-analyze is not installed"; return 77; }
    [ -x "$build/ecoord" ] || { echo "SKIP: ecoord is not built"; return 77; }
    mkdir -p "$tmp/units"
    for u in ecoord-agent@.service ecoord-etcd.service; do
        # the paths make install would substitute, pointing at this build
        out=$tmp/units/$(echo "$u" | sed 's/@\./@job1./')
        sed -e "s|@bindir@|$build|g" -e "s|@sysconfdir@|$tmp/etc|g" -e "s|@localstatedir@|$tmp/var|g" \
            -e "s|@ETCD@|${ETCD:-/usr/bin/etcd}|g" "$src/deploy/systemd/$u.in" >"$out"
        if grep -n '@[a-zA-Z_]*@' "$out"; then
            echo "$u: a placeholder make install would not substitute"
            return 1
        fi
    done
    [ -x "${ETCD:-/usr/bin/etcd}" ] || { echo "SKIP: no etcd binary for the etcd unit's ExecStart"; return 77; }
    (cd "$tmp/units" && systemd-analyze verify --man=no ./*.service)
}

# The units run as users of their own, without capabilities, on a read-only
# system; systemd's own score of that is shown where it can be computed.
hardening() {
    [ -f "$tmp/units/ecoord-etcd.service" ] || { echo "SKIP: the units were not made (step 5 skipped)"; return 77; }
    bad=0
    for u in ecoord-agent@job1.service ecoord-etcd.service; do
        for d in DynamicUser=yes NoNewPrivileges=yes ProtectSystem=strict CapabilityBoundingSet= \
            PrivateTmp=yes ProtectKernelTunables=yes RestrictNamespaces=yes RestrictSUIDSGID=yes; do
            grep -qx "$d" "$tmp/units/$u" || { echo "$u lacks $d"; bad=1; }
        done
        if out=$(cd "$tmp/units" && systemd-analyze security --offline=true "./$u" 2>/dev/null | tail -n 1); then
            echo "$out"
        fi
    done
    grep -qx 'RestartPreventExitStatus=1' "$tmp/units/ecoord-agent@job1.service" ||
        { echo "ecoord-agent@.service restarts after exit 1 (this node cannot go on)"; bad=1; }
    return $bad
}

scripts() {
    command -v shellcheck >/dev/null 2>&1 || { echo "SKIP: shellcheck is not installed (apt-get install shellcheck)"; return 77; }
    shellcheck "$src/deploy/k8s/validate.sh" "$src/deploy/k8s/secure/make-certs.sh" \
        "$src/deploy/k8s/secure/etcd-auth.sh" "$src/deploy/docker/build-local.sh" \
        "$src/tests/t6100-deploy.sh" "$src/tests/t6150-kubelet.sh" "$src/tests/t6160-image.sh" \
        "$src/tests/t6200-install.sh" || return 1
    # The demo, the benchmarks and the GPU suite (run on a lent machine,
    # where a script error costs device time): warnings and errors.
    shellcheck -S warning "$src"/deploy/local/*.sh "$src"/tests/bench/*.sh "$src"/tests/gpu/*.sh \
        "$src/tests/run-all.sh"
}

step "Dockerfile lints clean (dockerfile-utils)" validate --docker
step "every manifest file matches the Kubernetes API schemas" validate --files
step "every kustomization renders and its rendering is valid" validate --overlays
step "the validator refuses broken manifests" negatives
step "systemd units pass systemd-analyze verify" units
step "systemd units run unprivileged and hardened" hardening
step "deploy scripts pass shellcheck (the demo, benchmark and GPU scripts: its warnings)" scripts
# The Kubernetes job runs what the README and the issue promise.
n=$((n + 1))
j=$src/deploy/k8s/base/job/job.yaml
# shellcheck disable=SC2016 # $(NODE_INDEX) is Kubernetes' syntax, matched literally
if grep -q -- '--node_id=$(ECOORD_JOB_ID)-$(NODE_INDEX)' "$j" && grep -q -- '--host=$(POD_IP)' "$j" &&
    grep -q 'completionMode: Indexed' "$j" && grep -q 'restartPolicy: Never' "$j" &&
    [ ! -e "$src/deploy/k8s/base/job/statefulset.yaml" ]; then
    echo "ok $n - the job is an Indexed Job that runs to completion, node ids from the index, the pod IP published"
else
    echo "not ok $n - the job is an Indexed Job that runs to completion, node ids from the index, the pod IP published"
    fails=$((fails + 1))
fi
n=$((n + 1))
if [ -f "$build/deploy/ecoord-worker.pc" ] && grep -q '^Libs: .*-lecworker' "$build/deploy/ecoord-worker.pc"; then
    echo "ok $n - configure made the worker library's pkg-config file"
else
    echo "not ok $n - configure made the worker library's pkg-config file"
    fails=$((fails + 1))
fi
[ "$fails" = 0 ]
