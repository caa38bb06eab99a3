#!/bin/sh
# Rule checked: everything under deploy/ is valid for the tool that will read
# it, checked by that tool's own rules rather than by hand: every Kubernetes
# manifest against the API schemas (and no field the API does not define),
# every kustomization renders and its rendering keeps the cross-object rules
# (selectors, governing Services, ecoord's needs of a job and of etcd); the
# validator does refuse a misspelt field, a wrongly typed value, an unknown
# kind and a broken rule; the Dockerfile lints clean; the systemd units pass
# `systemd-analyze verify`; the shell scripts pass shellcheck.
# A missing tool skips its step with the reason (TAP "# SKIP").
set -u
src=${EC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${EC_BUILDDIR:-$src}
work=$build/deploy/k8s/.validate
tmp=$(mktemp -d /tmp/ec-t6100-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

n=0
fails=0
echo "1..8"
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
    job=$src/deploy/k8s/base/job/statefulset.yaml
    bad=0
    expect_fail() { # WHAT FILE NEEDLE
        if out=$(node "$work/validate.mjs" "$2" 2>&1); then
            echo "accepted $1"
            bad=1
        elif ! printf '%s' "$out" | grep -q "$3"; then
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
    sed 's/^kind: StatefulSet/kind: StatefulSett/' "$job" >"$tmp/kind.yaml"
    expect_fail "an unknown kind" "$tmp/kind.yaml" "no schema"
    sed '/^  selector:/,/^  template:/{/^  selector:/d;/matchLabels:/d;/app.kubernetes.io\/name: ecoord-job/d;/ecoord.io\/job: train/d}' \
        "$job" >"$tmp/nosel.yaml"
    expect_fail "a StatefulSet without a selector" "$tmp/nosel.yaml" "selector"
    # rules, on a rendering of a broken copy
    if command -v kustomize >/dev/null 2>&1 || kubectl version --client 2>/dev/null | grep -q 'Kustomize Version: v[4-9]'; then
        mkdir -p "$tmp/k8s"
        cp -r "$src/deploy/k8s/base" "$src/deploy/k8s/overlays" "$tmp/k8s/"
        sed -i 's/podManagementPolicy: Parallel/podManagementPolicy: OrderedReady/; s/medium: Memory/medium: ""/; s/terminationGracePeriodSeconds: 60/terminationGracePeriodSeconds: 20/' \
            "$tmp/k8s/base/job/statefulset.yaml"
        sed -i 's/replicas: 1/replicas: 2/' "$tmp/k8s/overlays/etcd-dev/single-member.yaml"
        if command -v kustomize >/dev/null 2>&1; then kustomize build "$tmp/k8s/overlays/cpu-demo"; else kubectl kustomize "$tmp/k8s/overlays/cpu-demo"; fi >"$tmp/broken.yaml"
        out=$(node "$work/validate.mjs" --rules "$tmp/broken.yaml" 2>&1)
        for needle in "must be Parallel" "memory-backed" "terminationGracePeriodSeconds" "ETCD_INITIAL_CLUSTER"; do
            if printf '%s' "$out" | grep -q "$needle"; then
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

scripts() {
    command -v shellcheck >/dev/null 2>&1 || { echo "SKIP: shellcheck is not installed (apt-get install shellcheck)"; return 77; }
    shellcheck "$src/deploy/k8s/validate.sh" "$src/tests/t6100-deploy.sh" "$src/tests/t6200-install.sh"
}

step "Dockerfile lints clean (dockerfile-utils)" validate --docker
step "every manifest file matches the Kubernetes API schemas" validate --files
step "every kustomization renders and its rendering is valid" validate --overlays
step "the validator refuses broken manifests" negatives
step "systemd units pass systemd-analyze verify" units
step "deploy scripts pass shellcheck" scripts
# The Kubernetes job runs what the README and the issue promise.
n=$((n + 1))
# shellcheck disable=SC2016 # $(POD_NAME) is Kubernetes' syntax, matched literally
if grep -q -- '--node_id=$(POD_NAME)' "$src/deploy/k8s/base/job/statefulset.yaml" &&
    grep -q -- '--host=$(POD_IP)' "$src/deploy/k8s/base/job/statefulset.yaml" &&
    grep -q 'podManagementPolicy: Parallel' "$src/deploy/k8s/base/job/statefulset.yaml"; then
    echo "ok $n - the job StatefulSet names nodes by pod name and publishes the pod IP"
else
    echo "not ok $n - the job StatefulSet names nodes by pod name and publishes the pod IP"
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
