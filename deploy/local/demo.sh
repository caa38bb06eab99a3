#!/bin/sh
# The elastic training demo: 3 simulated nodes x 2 processes of the example
# trainer (worker/examples/linreg, Gloo on loopback) under
# `ecoord launch --rebuild=inprocess`, through three membership changes:
#   1. one node killed with kill -9 (agent and processes): its peers' collectives fail,
#      they report it, the leader probes its agent and evicts it long before
#      its 10 s lease would expire
#   2. a fourth node added
#   3. one node stopped with SIGTERM (graceful leave)
# It prints the epoch timeline with how long each recovery took and the loss
# before and after each change (it keeps falling: no restart from scratch),
# then cleans up.  Installs and builds what is missing first.
set -eu
cd "$(dirname "$0")/../.."
TOP=$(pwd)
sh tests/install-deps.sh build >&2
if [ ! -x ./ecoord ] || [ ! -x worker/examples/linreg ]; then
    [ -x configure ] || autoreconf -fi >&2
    [ -f Makefile ] || ./configure >&2
    make -j"$(nproc)" >&2
fi
ECOORD=$TOP/ecoord
LINREG=$TOP/worker/examples/linreg
W=$(mktemp -d /tmp/ecoord-demo-XXXXXX)
EPID=""
PIDS=""
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    kill "$EPID" 2>/dev/null || true
    wait 2>/dev/null || true
    [ -n "${DEMO_KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
. deploy/local/hold.sh  # TERM and INT: exit, and cleanup runs on the way out
etcd_held "$W/etcd"
now_ms() { date +%s%3N; }
say() { printf '%s  %s\n' "$(date +%H:%M:%S.%3N)" "$*"; }
STEPS=${DEMO_STEPS:-600}
agent() {  # agent NODE
    hold
    "$ECOORD" launch --elastic_server="$EP" --job_id=demo --np=2:4 --nproc_per_node=2 \
        --node_id="$1" --rebuild=inprocess --elastic_timeout=1 --lease_ttl=10 --grace_period=2 \
        --log_dir="$W/log-$1" -- "$LINREG" --steps "$STEPS" --delay-ms 15 > "$W/$1.console" 2>&1 &
    eval "PID_$(echo "$1" | tr - _)=$!"
    PIDS="$PIDS $!"
    release
}
epoch() { "$ECOORD" status --elastic_server="$EP" --job_id=demo --json 2>/dev/null |
          sed -n 's/.*"epoch":{"number":\([0-9]*\).*/\1/p'; }
world() { "$ECOORD" status --elastic_server="$EP" --job_id=demo --json 2>/dev/null |
          sed -n 's/.*"epoch":{"number":[0-9]*,"world_size":\([0-9]*\).*/\1/p'; }
# wait_epoch N SECONDS: until the job's epoch is >= N
wait_epoch() {
    deadline=$(( $(date +%s) + $2 ))
    while [ "$(epoch || echo 0)" -lt "$1" ] 2>/dev/null; do
        [ "$(date +%s)" -gt "$deadline" ] && { say "no epoch $1 within $2 s"; exit 1; }
        sleep 0.02
    done
}
# first_step_ms E NODE...: when every listed node's ranks logged a step in epoch E
wait_step() {
    e=$1; shift
    deadline=$(( $(date +%s) + 30 ))
    for n in "$@"; do
        for r in 0 1; do
            until grep -q "epoch=$e rank=" "$W/log-$n/workerlog.$r" 2>/dev/null &&
                  grep "^linreg step=.* epoch=$e " "$W/log-$n/workerlog.$r" >/dev/null 2>&1; do
                [ "$(date +%s)" -gt "$deadline" ] && { say "node $n rank $r never stepped in epoch $e"; exit 1; }
                sleep 0.005
            done
        done
    done
}
loss_at() {  # loss_at EPOCH first|last: rank 0's loss (node-a)
    grep -h "^linreg step=.* epoch=$1 rank=0 " "$W"/log-*/workerlog.* 2>/dev/null |
        if [ "$2" = first ]; then head -n1; else tail -n1; fi |
        sed -n 's/.*step=\([0-9]*\).*loss=\([^ ]*\).*/step \1 loss \2/p'
}
run_steps() {  # run_steps COUNT: let training advance
    sleep "$(awk "BEGIN {print $1 * 0.015}")"
}

say "etcd at $EP; logs under $W"
for n in node-a node-b node-c; do agent $n; done
wait_epoch 1 30
wait_step 1 node-a node-b node-c
say "epoch 1: world $(world), 3 nodes x 2 ranks; training ($(loss_at 1 first))"
run_steps 60
TL="$W/timeline"

change() {  # change LABEL EXPECTED_EPOCH SURVIVORS... ; the action already happened at $T0
    label=$1; want=$2; shift 2
    before=$(loss_at $((want - 1)) last)
    wait_epoch "$want" 30
    t_epoch=$(now_ms)
    wait_step "$want" "$@"
    t_step=$(now_ms)
    after=$(loss_at "$want" first)
    printf '%-34s epoch %-2s world %-2s  new epoch after %5d ms, every rank stepping after %5d ms;  before: %s  after: %s\n' \
        "$label" "$want" "$(world)" $((t_epoch - T0)) $((t_step - T0)) "$before" "$after" >> "$TL"
    say "$label: epoch $want, world $(world), recovered in $((t_step - T0)) ms ($after)"
}

T0=$(now_ms)
# shellcheck disable=SC2154 # PID_node_b and PID_node_c: set by agent() through eval
kill -9 "$PID_node_b"
say "kill -9 node-b (agent and its processes die; lease TTL 10 s)"
change "kill -9 node-b (peers report, evicted)" 2 node-a node-c
run_steps 60
T0=$(now_ms); agent node-d
say "node-d joins"
change "node-d joins" 3 node-a node-c node-d
run_steps 60
T0=$(now_ms)
# shellcheck disable=SC2154
kill -TERM "$PID_node_c"
say "SIGTERM node-c (graceful leave)"
change "SIGTERM node-c (graceful leave)" 4 node-a node-d
say "training to the end (--steps $STEPS)"
for n in node-a node-d; do
    eval "p=\$PID_$(echo "$n" | tr - _)"
    wait "$p" || { say "agent $n failed: see $W/$n.console"; exit 1; }
done

echo
echo "Epoch timeline (times from the change to the new epoch and to every survivor's first step in it):"
cat "$TL"
echo
echo "Loss over the whole run (rank 0; epochs change, the loss never jumps back):"
for e in 1 2 3 4; do printf '  epoch %s: first %s, last %s\n' "$e" "$(loss_at $e first)" "$(loss_at $e last)"; done
restarts=$(grep -l "linreg event=rebuilt" "$W"/log-*/workerlog.* | wc -l)
echo "processes that rebuilt in place: $restarts; processes restarted: 0 (in-process rebuilds only)"
"$ECOORD" status --elastic_server="$EP" --job_id=demo 2>/dev/null | head -8
