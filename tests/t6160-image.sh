#!/bin/sh
# Rule checked: deploy/docker/Dockerfile builds and its image does what
# deploy/README.md says: built by deploy/docker/build-local.sh (buildah on a
# Debian 12 base made by mmdebstrap: no registry needed), it runs as uid
# 10001 under tini with the OCI labels set; inside it the agent and the
# example trainer run a one-node job to completion against an etcd on this
# host (every runtime library present); the header's recipe for adding
# software (USER root, install, a venv that sees the ecoord package, USER
# ecoord) builds, and the ecoord package imports as uid 10001.
# Opt-in, because it takes minutes and gigabytes (buildah's vfs storage
# copies every layer): EC_TEST_IMAGE=1 make check TESTS=tests/t6160-image.sh.
# Skips (TAP "1..0 # SKIP") without it, or without buildah, mmdebstrap or etcd.
set -u
src=${EC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
skip() { echo "1..0 # SKIP $*"; exit 0; }
[ "${EC_TEST_IMAGE:-}" = 1 ] || skip "set EC_TEST_IMAGE=1 to build the image (minutes, several GB of disk)"
for t in buildah mmdebstrap node; do command -v "$t" >/dev/null 2>&1 || skip "$t is not installed"; done
ETCD=${ETCD:-$(command -v etcd || echo /usr/bin/etcd)}
[ -x "$ETCD" ] || skip "no etcd binary"
STORAGE=${STORAGE:-vfs}
export STORAGE
b() { buildah --storage-driver="$STORAGE" "$@"; }
tag=localhost/ecoord:t6160
tmp=$(mktemp -d /tmp/ec-t6160-XXXXXX)
etcd_pid=
ctr=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    [ -n "$ctr" ] && b rm "$ctr" >/dev/null 2>&1
    [ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null && wait "$etcd_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
echo "1..5"
n=0
fails=0
result() { # STATUS NAME
    n=$((n + 1))
    if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}

t0=$(date +%s)
sh "$src/deploy/docker/build-local.sh" "$tag" >"$tmp/build.log" 2>&1
rc=$?
[ $rc = 0 ] || tail -n 30 "$tmp/build.log" | sed 's/^/# /'
result $rc "build-local.sh builds the Dockerfile on a Debian base made here ($(($(date +%s) - t0)) s)"
[ $rc = 0 ] || exit 1
echo "# $(b images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$tag" 2>/dev/null)"

cfg=$(b inspect --type image "$tag")
# shellcheck disable=SC2016 # JavaScript, not shell
printf '%s' "$cfg" | node -e '
let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
  const c = JSON.parse(s).Docker.config, l = c.Labels || {};
  console.log(`# User ${c.User}, Entrypoint ${JSON.stringify(c.Entrypoint)}, labels ${Object.keys(l).filter((k) => k.startsWith("org.opencontainers")).join(" ")}`);
  const ok = c.User === "ecoord" && JSON.stringify(c.Entrypoint) === "[\"/usr/bin/tini\",\"--\"]" &&
    l["org.opencontainers.image.title"] === "ecoord" && l["org.opencontainers.image.version"] &&
    l["org.opencontainers.image.base.name"];
  process.exit(ok ? 0 : 1);
});'
result $? "the image runs as ecoord under tini and carries the OCI labels"

ctr=$(b from "$tag") || exit 1
out=$(b run --isolation=chroot "$ctr" -- sh -c 'id -u; ecoord --version' 2>&1)
echo "$out" | sed 's/^/# /'
[ "$(echo "$out" | head -n 1)" = 10001 ] && echo "$out" | grep -q '^ecoord '
result $? "inside the image: uid 10001, ecoord runs"

# An etcd on this host; the container shares its network (chroot isolation).
port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
pport=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
(
    trap - INT TERM
    exec "$ETCD" --name t6160 --data-dir "$tmp/etcd" --listen-client-urls "http://127.0.0.1:$port" \
        --advertise-client-urls "http://127.0.0.1:$port" --listen-peer-urls "http://127.0.0.1:$pport" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pport" --initial-cluster "t6160=http://127.0.0.1:$pport"
) >"$tmp/etcd.log" 2>&1 &
etcd_pid=$!
out=$(timeout $((120 * ${EC_TEST_TIMEOUT_MULTIPLIER:-1})) buildah --storage-driver="$STORAGE" run --isolation=chroot "$ctr" -- \
    ecoord launch --elastic_server="127.0.0.1:$port" --join_timeout=60 --job_id=t6160 --np=1 --node_id=n1 \
    --host=127.0.0.1 --log_dir=/tmp/log -- /usr/local/libexec/ecoord/linreg --steps=5 2>&1)
rc=$?
echo "$out" | tail -n 3 | sed 's/^/# /'
[ $rc = 0 ] && echo "$out" | grep -q 'job t6160 completed'
result $? "inside the image the agent and the example trainer run a one-node job to completion (exit $rc)"

# The header's recipe, with a small package in place of torch.
mkdir -p "$tmp/recipe"
cat >"$tmp/recipe/Containerfile" <<EOT
FROM $tag
USER root
RUN apt-get update \\
    && apt-get install -y --no-install-recommends python3 python3-venv \\
    && rm -rf /var/lib/apt/lists/* \\
    && python3 -m venv --system-site-packages /opt/torch
ENV PATH=/opt/torch/bin:\$PATH
USER ecoord
RUN python3 -c 'import sys, ecoord; print(sys.executable, ecoord.library_path())' && id -u
EOT
(cd "$tmp/recipe" && b bud --format=docker --isolation=chroot -t localhost/ecoord-recipe:t6160 .) >"$tmp/recipe.log" 2>&1
rc=$?
grep -E '^/opt/torch/bin/python3 |^10001$' "$tmp/recipe.log" | sed 's/^/# /'
[ $rc = 0 ] && grep -q '^/opt/torch/bin/python3 .*libecworker' "$tmp/recipe.log" && grep -qx 10001 "$tmp/recipe.log"
result $? "the Dockerfile header's recipe (USER root, apt-get, a venv, USER ecoord) builds and imports ecoord as uid 10001"
b rmi localhost/ecoord-recipe:t6160 >/dev/null 2>&1
[ "$fails" = 0 ]
