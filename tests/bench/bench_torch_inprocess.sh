#!/bin/sh
# PyTorch recovery benchmark: K nodes x 2 processes of worker/examples/torch_ddp.py
# (DDP, Gloo on loopback, ecoord.torch) through a graceful leave (SIGTERM to a
# non-leader agent), a node kill (kill -9 of a non-leader agent: its
# processes die with it) and a join (SCENARIOS=join: one more agent, its
# processes booted before the epoch admits it; timed from the members' first
# notice) and a hang (SCENARIOS=hang, in place: one process of the last node
# sleeps forever outside its collectives while the others wait in DDP's
# allreduce, --hang_timeout=3; "detect" is the leader naming that node, from
# the moment the process was told to hang, and its evidence is printed; its
# "ranks" column counts repetitions), in place (--rebuild=inprocess) and by restart
# (--rebuild=restart); each on a fresh job, REPS repetitions.  Prints p50 and
# max (ms) per phase over every survivor rank.  Not a pass/fail test.
#
#   tests/bench/bench_torch_inprocess.sh [REPS=3] [K=3]
#   env: TTL (lease TTL, s; default 10), MODES, SCENARIOS, DELAY_MS (step delay, 10),
#   NPROC (processes per node, 2), PY (the interpreter with torch, /usr/bin/python3),
#   TORCH_DDP_BACKEND=nccl and ONE_GPU=1 (every node's processes on the one GPU,
#   each agent's NCCL seeing a host of its own, as in bench_recovery.sh)
#
# Phases, from t0 (just before the signal), per survivor rank; in place they
# come from the rank's own "torch_ddp rebuilt" line, in wall-clock ms:
#   detect   the rank first learned of the change (its collective failed or
#            its watcher saw the new epoch)
#   epoch    it joined the new epoch (ecw_rebuild returned)
#   group    its new store and process group were up
#   synced   state recovered from the most advanced rank and DDP re-wrapped
#   step     its first training step at the new world size was done
# Restart mode has "step" only: the agent restarts every process (torch
# import and env:// rendezvous included; the example keeps no checkpoint,
# so it also starts again from step 0 there).
set -u
cd "$(dirname "$0")/../.." || exit 1
TOP=$(pwd)
REPS=${1:-3}; K=${2:-3}; TTL=${TTL:-10}; DELAY_MS=${DELAY_MS:-10}
PY=${PY:-/usr/bin/python3}; NPROC=${NPROC:-2}
ECOORD=${ECOORD:-$TOP/ecoord}; PROG=$TOP/worker/examples/torch_ddp.py
[ -x "$ECOORD" ] || { echo "build first: make" >&2; exit 1; }
$PY -c 'import torch.distributed' 2>/dev/null || { echo "no torch under $PY (apt-get install python3-torch)" >&2; exit 1; }
export ECOORD_LIBECWORKER=${ECOORD_LIBECWORKER:-$TOP/.libs/libecworker.so.0}
export OMP_NUM_THREADS=1 TORCH_DDP_TIMESTAMPS=1
W=$(mktemp -d /tmp/ec-bench-torch-XXXXXX)
EPID=""
PIDS=""; JOB_AGENTS=""
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; kill "$EPID" 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$W"; }
trap cleanup EXIT
. deploy/local/hold.sh  # TERM and INT: exit, and cleanup runs on the way out
etcd_held "$W/etcd"
now_ms() { date +%s%3N; }

one_gpu_env() {  # NODE: what makes NCCL take this agent's processes for another host
    [ "${ONE_GPU:-0}" = 1 ] || return 0
    echo "NCCL_HOSTID=$1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 NCCL_COLLNET_ENABLE=0"
}
start_agent() {  # JOB NODE MODE [NP ELASTIC_TIMEOUT]
    mkdir -p "$W/$1"
    # shellcheck disable=SC2046
    env $(one_gpu_env "$2") ${HANG_ENV:+"$HANG_ENV"} "$ECOORD" launch --elastic_server="$EP" \
        --job_id="$1" --np="${4:-1:$K}" --nproc_per_node="$NPROC" --node_id="$2" $AGENT_FLAGS \
        --rebuild="$3" --elastic_timeout="${5:-30}" --lease_ttl="$TTL" --grace_period=2 --log_dir="$W/$1/$2" \
        -- $PY "$PROG" --steps 1000000 --delay-ms "$DELAY_MS" > "$W/$1.$2.console" 2>&1 &
    echo $!
}
leader_of() { "$ECOORD" status --elastic_server="$EP" --job_id="$1" --json 2>/dev/null | sed -n 's/.*"leader":"\([^"]*\)".*/\1/p'; }
# until every rank of NODES logged a step at world WORLD (a grep pattern) after wall ms AFTER
all_stepped() {  # JOB WORLD AFTER NODES...
    job=$1; world=$2; after=$3; shift 3
    for n in "$@"; do for r in $(seq 0 $((NPROC - 1))); do
        grep "^torch_ddp step=.* world=$world " "$W/$job/$n/workerlog.$r" 2>/dev/null |
            awk -v a="$after" '{ sub(/.* t=/, ""); if ($1 + 0 > a) { f = 1; exit } } END { exit !f }' || return 1
    done; done
}
wait_cond() {  # SECONDS COMMAND...
    dl=$(( $(now_ms) + $1 * 1000 )); shift
    until "$@"; do [ "$(now_ms)" -gt "$dl" ] && return 1; sleep 0.02; done
}
record() { printf '%s %s %s %s\n' "$1" "$2" "$3" "$4" >> "$W/results"; }  # mode scenario phase ms
# the wall ms of the first console line of JOB matching PATTERN (the agents'
# "LAUNCH INFO YYYY-MM-DD HH:MM:SS,mmm" lines, local time)
console_ms() {  # JOB PATTERN
    l=$(grep -h -- "$2" "$W/$1".*.console 2>/dev/null | head -n 1)
    [ -n "$l" ] || return 1
    d=$(printf '%s\n' "$l" | awk '{ print $3 " " $4 }')
    s=$(date -d "${d%,*}" +%s) || return 1
    echo $((s * 1000 + $(printf '%s' "${d#*,}" | sed 's/^0*//;s/^$/0/')))
}

run_scenario() {  # MODE SCENARIO REP
    mode=$1; sc=$2; job="t-$mode-$sc-$3"; nodes=""; i=0
    # join: room for one more node (--np=1:K+1), the first epoch after a
    # short window; the joiner's epoch comes at MAX, once it is ready
    np="1:$K"; eto=30; neww=$((NPROC * (K - 1)))
    [ "$sc" = join ] && { np="1:$((K + 1))"; eto=2; neww=$((NPROC * (K + 1))); }
    AGENT_FLAGS=""; [ "$sc" = hang ] && AGENT_FLAGS="--hang_timeout=3"
    while [ $i -lt "$K" ]; do
        HANG_ENV=""; [ "$sc" = hang ] && [ $i -eq $((K - 1)) ] && HANG_ENV="TORCH_DDP_HANG=$W/$job.hang"
        hold; pid=$(start_agent "$job" "n$i" "$mode" "$np" "$eto"); PIDS="$PIDS $pid"; JOB_AGENTS="$JOB_AGENTS $pid"; release
        eval "A_n$i=$pid"; nodes="$nodes n$i"; i=$((i + 1))
    done
    HANG_ENV=""
    wait_cond 90 all_stepped "$job" $((NPROC * K)) 0 $nodes || { echo "  $job: never trained at world $((NPROC * K))" >&2; return 1; }
    sleep 0.5   # steady state: not a synchronisation, every wait below polls
    leader=$(leader_of "$job"); victim=""
    for n in $nodes; do [ "$n" != "$leader" ] && victim=$n; done
    [ "$sc" = join ] && victim=""
    [ "$sc" = hang ] && victim=n$((K - 1))  # its agent leads or not: its process hangs
    survivors=""; for n in $nodes; do [ "$n" != "$victim" ] && survivors="$survivors $n"; done
    t0=$(now_ms)
    case $sc in
        leave) eval "kill -TERM \$A_$victim" ;;
        kill9) eval "kill -9 \$A_$victim" ;;
        join)  hold; pid=$(start_agent "$job" "n$K" "$mode" "$np" "$eto"); PIDS="$PIDS $pid"; JOB_AGENTS="$JOB_AGENTS $pid"; release ;;
        hang)  : > "$W/$job.hang" ;;
    esac
    if [ "$sc" = hang ]; then
        wait_cond 30 console_ms "$job" "+hang-suspect $victim " >/dev/null ||
            { echo "  $job: $victim never named; the leader said: $(grep -h '+hang-' "$W/$job".*.console | head -n 3)" >&2; return 1; }
        tn=$(console_ms "$job" "+hang-suspect $victim ")
        record "$mode" "$sc" detect $((tn - t0))
        # at whichever world comes first: without the hung node, or with its
        # restarted processes
        wait_cond 60 all_stepped "$job" "[0-9]*" "$tn" $survivors ||
            { echo "  $job: survivors never stepped after the hang" >&2; return 1; }
        t_step=$(for n in $survivors; do for r in $(seq 0 $((NPROC - 1))); do
            grep "^torch_ddp step=" "$W/$job/$n/workerlog.$r" |
                awk -v a="$tn" '{ sub(/.* t=/, ""); if ($1 + 0 > a) { print $1; exit } }'
        done; done | sort -n | tail -n 1)
        record "$mode" "$sc" step $((t_step - t0))
        grep -h "+hang-suspect $victim " "$W/$job".*.console | head -n 1 | sed 's/.*+hang-suspect/  evidence: +hang-suspect/' | cut -c1-400
        return 0
    fi
    wait_cond $((TTL + 60)) all_stepped "$job" "$neww" "$t0" $survivors ||
        { echo "  $job: survivors never stepped at world $neww" >&2; return 1; }
    for n in $survivors; do for r in $(seq 0 $((NPROC - 1))); do
        f="$W/$job/$n/workerlog.$r"
        line=$(grep "^torch_ddp rebuilt .* world=$neww " "$f" | head -n 1)
        get() { printf '%s\n' "$line" | sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
        # a join is timed from the members' first notice of it (the epoch
        # that admits the booted joiner), not from its agent's start
        t0r=$t0
        [ "$sc" = join ] && { [ -n "$line" ] || continue; t0r=$(get detect_at); }
        t_step=$(grep "^torch_ddp step=.* world=$neww " "$f" |
            awk -v a="$t0r" '{ sub(/.* t=/, ""); if ($1 + 0 > a) { print $1; exit } }')
        record "$mode" "$sc" step $((t_step - t0r))
        [ "$mode" = inprocess ] || continue
        [ -n "$line" ] || continue
        det=$(( $(get detect_at) - t0r ))
        record "$mode" "$sc" detect "$det"
        e=$(awk -v d="$det" -v a="$(get epoch_ms)" 'BEGIN { printf "%d", d + a }')
        record "$mode" "$sc" epoch "$e"
        g=$(awk -v d="$e" -v a="$(get group_ms)" 'BEGIN { printf "%d", d + a }')
        record "$mode" "$sc" group "$g"
        s=$(awk -v d="$g" -v a="$(get sync_ms)" 'BEGIN { printf "%d", d + a }')
        record "$mode" "$sc" synced "$s"
    done; done
    return 0
}

echo "torch recovery benchmark: $K nodes x $NPROC processes of torch_ddp.py (DDP, ${TORCH_DDP_BACKEND:-gloo}, loopback${ONE_GPU:+, one GPU}), $REPS repetitions, lease TTL ${TTL} s, etcd $EP"
for mode in ${MODES:-inprocess restart}; do
    for sc in ${SCENARIOS:-leave kill9}; do
        rep=0
        while [ $rep -lt "$REPS" ]; do
            run_scenario $mode $sc $rep || true
            for a in $JOB_AGENTS; do kill -9 "$a" 2>/dev/null; done
            JOB_AGENTS=""
            rep=$((rep + 1))
        done
    done
done
[ -s "$W/results" ] || { echo "no results" >&2; exit 1; }
awk '
function pct(a, n, p,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((n - 1) * p) + 1] }
{ key = $1 " " $2 " " $3; n[key]++; v[key, n[key]] = $4; if (!(($1 " " $2) in seen)) { seen[$1 " " $2] = 1; order[++no] = $1 " " $2 } }
END {
    printf "%-10s %-6s %5s %14s %14s %14s %14s %14s\n", "mode", "change", "ranks", "detect p50/max", "epoch p50/max", "group p50/max", "synced p50/max", "step p50/max"
    split("detect epoch group synced step", ph, " ")
    for (o = 1; o <= no; o++) {
        split(order[o], mp, " "); line = sprintf("%-10s %-6s %5d", mp[1], mp[2], n[order[o] " step"])
        for (q = 1; q <= 5; q++) { key = order[o] " " ph[q]; m = n[key]
            if (!m) { line = line sprintf(" %14s", "-"); continue }
            for (i = 1; i <= m; i++) a[i] = v[key, i]
            line = line sprintf(" %6d/%-7d", pct(a, m, 0.5), pct(a, m, 1.0)) }
        print line }
}' "$W/results"
