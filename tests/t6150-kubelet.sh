#!/bin/sh
# Rule checked: the Kubernetes job of deploy/k8s behaves as its manifests
# promise when a kubelet and the Job controller run it.  tests/t6150-kubelet.mjs
# plays both on this host for the rendered overlays/cpu-demo: each pod runs
# the container's command with the manifest's environment, volumes and
# Secrets (made by deploy/k8s/secure/make-certs.sh) against a local etcd run
# with the rendered etcd StatefulSet's own ETCD_* environment (TLS, client
# certificates; t6150-etcd-env.mjs maps it to this host) and authentication,
# the job's role set up by deploy/k8s/secure/etcd-auth.sh; scale-down sends SIGTERM and waits
# terminationGracePeriodSeconds; a pod that fails is replaced only as the
# podFailurePolicy says.  It shows that the job forms, scales up and down,
# replaces a failed node under its old node id, refuses a wrongly sized pod
# (whose own Job fails) without disturbing the running job, and runs to
# completion with every agent exiting 0.  Also checked here: the role lets
# the job's user reach only its own keys.
# A missing tool (node and the validator's npm packages, kubectl kustomize,
# etcd, etcdctl, openssl) skips with the reason (TAP "1..0 # SKIP").
set -u
src=${EC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${EC_BUILDDIR:-$src}
work=$build/deploy/k8s/.validate
skip() { echo "1..0 # SKIP $*"; exit 0; }
for t in node openssl; do command -v "$t" >/dev/null 2>&1 || skip "$t is not installed"; done
ETCD=${ETCD:-$(command -v etcd || echo /usr/bin/etcd)}
ETCDCTL=${ETCDCTL:-$(command -v etcdctl || echo /usr/bin/etcdctl)}
{ [ -x "$ETCD" ] && [ -x "$ETCDCTL" ]; } || skip "no etcd/etcdctl (apt-get install etcd-server etcd-client)"
{ [ -x "$build/ecoord" ] && [ -x "$build/worker/examples/linreg" ]; } || skip "ecoord or worker/examples/linreg is not built"
if command -v kustomize >/dev/null 2>&1; then render() { kustomize build "$1"; }
elif kubectl version --client 2>/dev/null | grep -q 'Kustomize Version: v[4-9]'; then render() { kubectl kustomize "$1"; }
else skip "no kustomize v4+ to render the overlay"; fi
# The validator's npm packages (yaml) are what the player reads manifests with.
sh "$src/deploy/k8s/validate.sh" --docker "$work" >/dev/null 2>&1
[ -d "$work/node_modules/yaml" ] || skip "the validator's npm packages could not be installed (deploy/k8s/validate.sh)"

tmp=$(mktemp -d /tmp/ec-t6150-XXXXXX)
etcd_pid=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    [ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null && wait "$etcd_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Certificates and Secrets, as an operator makes them.
sh "$src/deploy/k8s/secure/make-certs.sh" -n ecoord -m 1 "$tmp/certs" train >"$tmp/certs.log" 2>&1 ||
    { cat "$tmp/certs.log"; echo "Bail out! make-certs.sh failed"; exit 1; }

render "$src/deploy/k8s/overlays/cpu-demo" >"$tmp/rendering.yaml" || { echo "Bail out! the overlay does not render"; exit 1; }

# etcd as the manifest configures it: its container's ETCD_* environment
# (TLS for clients and peers, client certificates required), mapped to this
# host by t6150-etcd-env.mjs.
ports=$(node -e 'const n=require("net");const a=[];let k=3;for(let i=0;i<3;i++){const s=n.createServer();s.listen(0,"127.0.0.1",()=>{a.push(s.address().port);s.close();if(!--k)console.log(a.join(" "))})}')
cport=${ports%% *} mport=${ports##* } pport=${ports#* } pport=${pport%% *}
c=$tmp/certs
mkdir -p "$tmp/etcd"
EC_VALIDATE_DIR=$work node "$src/tests/t6150-etcd-env.mjs" "$tmp/rendering.yaml" "$c" "$tmp/etcd" \
    "$cport" "$pport" "$mport" >"$tmp/etcd.env" || { echo "Bail out! cannot read etcd's environment from the rendering"; exit 1; }
sed 's/^/# etcd env: /' "$tmp/etcd.env"
(
    trap - INT TERM
    # shellcheck disable=SC2046 # one NAME=VALUE word per line, no spaces in them
    exec env -i PATH="$PATH" $(cat "$tmp/etcd.env") "$ETCD"
) >"$tmp/etcd.log" 2>&1 &
etcd_pid=$!
ctl="$ETCDCTL --endpoints=https://127.0.0.1:$cport --cacert=$c/ca.crt"
deadline=$(($(date +%s) + 30 * ${EC_TEST_TIMEOUT_MULTIPLIER:-1}))
until ETCDCTL_API=3 $ctl --cert="$c/root.crt" --key="$c/root.key" endpoint health >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 "$etcd_pid" 2>/dev/null; then
        tail -n 20 "$tmp/etcd.log" | sed 's/^/# /'
        echo "Bail out! etcd did not become healthy"
        exit 1
    fi
    sleep 0.2 # polling etcd's health with a deadline
done

# Every ETCD_* variable of the manifest is one etcd knows (it only warns
# about the others), and the probes' /health answers on the metrics port.
etcdok=0
if grep -i 'unrecognized environment variable' "$tmp/etcd.log" | sed 's/^/# /' | grep .; then etcdok=1; fi
node -e 'require("http").get("http://127.0.0.1:'"$mport"'/health",(r)=>process.exit(r.statusCode===200?0:1)).on("error",()=>process.exit(1))' ||
    { echo "# etcd's /health on the metrics port did not answer 200"; etcdok=1; }

# The job's role, as deploy/README.md says to set it up.
if ! ETCDCTL="$ctl --cert=$c/root.crt --key=$c/root.key" sh "$src/deploy/k8s/secure/etcd-auth.sh" train "$c/train.password" >"$tmp/auth.log" 2>&1; then
    sed 's/^/# /' "$tmp/auth.log"
    echo "Bail out! etcd-auth.sh failed"
    exit 1
fi
# What the role allows: the job's user reaches /train/ and nothing else.
as_job() { ETCDCTL_API=3 $ctl --cert="$c/train.crt" --key="$c/train.key" --user="ecoord-job-train:$(cat "$c/train.password")" "$@" 2>&1; }
roleok=0
as_job put /train/probe 1 | grep -q '^OK' || { echo "# the job's user cannot write /train/"; roleok=1; }
as_job put /other/probe 1 | grep -q 'permission denied' || { echo "# the job's user can write /other/"; roleok=1; }
as_job put /trainx 1 | grep -q 'permission denied' || { echo "# the job's user can write /trainx (outside /train/)"; roleok=1; }
ETCDCTL_API=3 $ctl put /train/probe 1 >/dev/null 2>&1 && { echo "# a client without a certificate was let in"; roleok=1; }
as_job del /train/probe >/dev/null

EC_VALIDATE_DIR=$work EC_ETCD="https://127.0.0.1:$cport" EC_BUILDDIR=$build \
    EC_KUBELET_MAP="{\"ecoord\":\"$build/ecoord\",\"/usr/local/libexec/ecoord/linreg\":\"$build/worker/examples/linreg\"}" \
    node "$src/tests/t6150-kubelet.mjs" "$tmp/rendering.yaml" "$c/secrets.yaml" "$tmp/pods" >"$tmp/tap" 2>&1
rc=$?
# Renumber: the role check is test 15, etcd's environment test 16.
sed 's/^1\.\.14$/1..16/' "$tmp/tap"
if [ "$roleok" = 0 ]; then
    echo "ok 15 - the job's etcd user (etcd-auth.sh) writes under /train/ only; no client without a certificate gets in"
else
    echo "not ok 15 - the job's etcd user (etcd-auth.sh) writes under /train/ only; no client without a certificate gets in"
fi
if [ "$etcdok" = 0 ]; then
    echo "ok 16 - etcd runs with the manifest's ETCD_* environment (every variable known to etcd, TLS, /health on the metrics port)"
else
    echo "not ok 16 - etcd runs with the manifest's ETCD_* environment (every variable known to etcd, TLS, /health on the metrics port)"
fi
if [ "$rc" != 0 ] || [ "$roleok" != 0 ] || [ "$etcdok" != 0 ]; then
    for f in "$tmp"/pods/*/container.log; do
        [ -f "$f" ] || continue
        echo "# --- $f"
        tail -n 8 "$f" | sed 's/^/#   /'
    done
    exit 1
fi
exit 0
