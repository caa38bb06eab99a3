#!/bin/sh
# The stall: how long a membership change stops the running members, in place
# (--rebuild=inprocess), with boots gated (the default, --join_ready_timeout=300)
# and not (--join_ready_timeout=0: a new process starts when its node is
# admitted, as before boots were gated), for the C example (linreg, Gloo) and
# the torch example (torch_ddp.py, DDP over Gloo; TORCH_DDP_BACKEND=nccl on a
# GPU machine).  Prints the figures; asserts nothing.
#
#   tests/bench/bench_stall.sh [REPS=3]
#   env: PROGS ("c torch"), MODES ("gated ungated"), EVENTS ("startup join
#        workerkill nodekill leave"), K (nodes at the start, 3), DELAY_MS (the
#        step's sleep, 10), BOOT_MS (extra sleep before a program starts, 0:
#        none: a slow import, a CUDA context), TORCH_DDP_BACKEND, KEEP=1
#
# One job per repetition, mode and program: K nodes x 1 process at
# --np=2:K+1 --elastic_timeout=1, then, in this order, each event on a node
# that does not lead:
#   startup     the K agents start (t0: just before)
#   join        one more agent starts
#   workerkill  kill -9 of one process (its agent starts a new one)
#   nodekill    kill -9 of an agent and its process
#   leave       SIGTERM to an agent
# Per event:
#   stall       the longest time any running member went without a step, from
#               t0 to the moment every rank steps at the new world (startup:
#               none, every process is new)
#   newcomer    t0 -> the new process's first step (join, workerkill; startup:
#               the last rank's first step)
#   boot        (startup, gated) the slowest node's boot: its processes'
#               start -> every one ready (the node record's boot)
#   share       (startup) newcomer - max(boot, the elastic window): what
#               ecoord adds to the program's own start
# Every step line carries its wall-clock time (linreg --timestamps,
# TORCH_DDP_TIMESTAMPS=1).
set -u
cd "$(dirname "$0")/../.." || exit 1
TOP=$(pwd)
REPS=${1:-3}; K=${K:-3}; DELAY_MS=${DELAY_MS:-10}; BOOT_MS=${BOOT_MS:-0}
PY=${PYTHON:-/usr/bin/python3}
ECOORD=${ECOORD:-$TOP/ecoord}; LINREG=${ECW_LINREG:-$TOP/worker/examples/linreg}
TORCHP=$TOP/worker/examples/torch_ddp.py
[ -x "$ECOORD" ] && [ -x "$LINREG" ] || { echo "build first: make" >&2; exit 1; }
PROGS=${PROGS:-c torch}
if ! $PY -c 'import torch.distributed' 2>/dev/null; then
    echo "no torch under $PY: the torch example is left out" >&2
    PROGS=$(echo "$PROGS" | sed 's/torch//')
fi
export ECOORD_LIBECWORKER=${ECOORD_LIBECWORKER:-$TOP/.libs/libecworker.so.0}
export OMP_NUM_THREADS=1 TORCH_DDP_TIMESTAMPS=1
W=$(mktemp -d /tmp/ec-bench-stall-XXXXXX)
EPID=""
PIDS=""; JOB_AGENTS=""
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; kill "$EPID" 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$W"; }
trap cleanup EXIT
. deploy/local/hold.sh  # TERM and INT: exit, and cleanup runs on the way out
etcd_held "$W/etcd"
now_ms() { date +%s%3N; }   # wall clock: the step lines' and the records' clock

start_agent() {  # JOB NODE MODE PROG: prints the agent's pid
    flags=""; [ "$3" = ungated ] && flags="--join_ready_timeout=0"
    if [ "$4" = torch ]; then prog="$PY $TORCHP --steps 100000000 --delay-ms $DELAY_MS"
    else prog="$LINREG --steps 100000000 --delay-ms $DELAY_MS --timestamps"; fi
    [ "$BOOT_MS" -gt 0 ] && prog="/bin/sh -c 'sleep $(awk "BEGIN {print $BOOT_MS / 1000}"); exec $prog'"
    mkdir -p "$W/$1"
    # sh -c, not eval: dash's `eval ... &` keeps the command substitution's pipe open
    sh -c "exec \"$ECOORD\" launch --elastic_server=\"$EP\" --job_id=\"$1\" --np=2:$((K + 1)) \
        --nproc_per_node=1 --node_id=\"$2\" --rebuild=inprocess --elastic_timeout=1 --lease_ttl=10 \
        --grace_period=2 --log_dir=\"$W/$1/$2\" $flags -- $prog" > "$W/$1.$2.console" 2>&1 &
    echo $!
}
status_json() { "$ECOORD" status --elastic_server="$EP" --job_id="$1" --json 2>/dev/null; }
leader_of() { status_json "$1" | sed -n 's/.*"leader":"\([^"]*\)".*/\1/p'; }
# Step lines of NODE after wall ms AFTER at world WORLD (0: any), not of
# process NOTPID (a killed one): "t" per line.
steps_after() {  # JOB NODE AFTER WORLD [NOTPID]
    grep -h "step=.* t=" "$W/$1/$2/workerlog.0" 2>/dev/null |
        awk -v a="$3" -v w="$4" -v np="${5:-0}" '{ t = $NF; sub(/t=/, "", t); if (t + 0 <= a) next
            if (w > 0 && index($0, " world=" w " ") == 0) next
            if (np > 0 && index($0, " pid=" np " ") > 0) next; print t }'
}
first_step() { steps_after "$@" | head -n1; }
# until every node of NODES stepped at world WORLD after AFTER; prints the latest first step
all_stepped() {  # JOB WORLD AFTER NODES...
    job=$1; world=$2; after=$3; shift 3; dl=$(( $(now_ms) + 90000 )); last=0
    for n in "$@"; do
        until t=$(first_step "$job" "$n" "$after" "$world") && [ -n "$t" ]; do
            [ "$(now_ms)" -gt "$dl" ] && return 1; sleep 0.02
        done
        [ "$t" -gt "$last" ] && last=$t
    done
    echo "$last"
}
# the longest gap between steps of NODE in [FROM, TO] (the gap over FROM included)
gap() {  # JOB NODE FROM TO
    grep -h "step=.* t=" "$W/$1/$2/workerlog.0" 2>/dev/null |
        awk -v f="$3" -v e="$4" 'BEGIN { p = -1; g = 0 }
            { t = $NF; sub(/t=/, "", t); t += 0
              if (t <= f) { p = t; next }
              if (p >= 0 && t - p > g) g = t - p
              p = t; if (t >= e) exit }
            END { print g }'
}
stall() {  # JOB FROM TO NODES...: the longest gap of any of NODES
    job=$1; from=$2; to=$3; shift 3; worst=0
    for n in "$@"; do g=$(gap "$job" "$n" "$from" "$to"); [ "$g" -gt "$worst" ] && worst=$g; done
    echo "$worst"
}
pid_of() { grep -h "step=" "$W/$1/$2/workerlog.0" | tail -n1 | sed -n 's/.* pid=\([0-9]*\).*/\1/p'; }
boot_ms() {  # JOB NODE: the node's last boot (record), ms
    status_json "$1" | tr '{' '\n' | grep -A1 "\"node_id\":\"$2\"" | tr -d '\n' |
        sed -n 's/.*"boot":\(.*\)/\1/p' | sed -n 's/.*"phase":"ready","started_at_ms":\([0-9]*\),"ready_at_ms":\([0-9]*\).*/\1 \2/p' |
        awk '{ if ($2 > $1) print $2 - $1 }'
}
record() { printf '%s %s %s %s %s\n' "$1" "$2" "$3" "$4" "$5" >> "$W/results"; }  # prog mode event what ms

run_job() {  # PROG MODE REP
    prog=$1; mode=$2; job="s-$prog-$mode-$3"; nodes=""; i=0
    t0=$(now_ms)
    while [ $i -lt "$K" ]; do
        hold; pid=$(start_agent "$job" "n$i" "$mode" "$prog"); PIDS="$PIDS $pid"; JOB_AGENTS="$JOB_AGENTS $pid"; release
        eval "A_n$i=$pid"; nodes="$nodes n$i"; i=$((i + 1))
    done
    t=$(all_stepped "$job" "$K" "$t0" $nodes) || { echo "  $job: never trained at world $K" >&2; return 1; }
    case " ${EVENTS:-startup join workerkill nodekill leave} " in *" startup "*)
        record "$prog" "$mode" startup newcomer $((t - t0))
        worst=0
        for n in $nodes; do b=$(boot_ms "$job" "$n"); [ -n "$b" ] && [ "$b" -gt "$worst" ] && worst=$b; done
        if [ "$mode" = gated ]; then
            record "$prog" "$mode" startup boot "$worst"
            base=$worst; [ "$base" -lt 1000 ] && base=1000   # the elastic window: 1 s
            record "$prog" "$mode" startup share $((t - t0 - base))
        fi ;;
    esac
    world=$K
    leader=$(leader_of "$job")
    others=""; for n in $nodes; do [ "$n" != "$leader" ] && others="$others $n"; done
    for ev in ${EVENTS:-startup join workerkill nodekill leave}; do
        [ "$ev" = startup ] && continue
        sleep 0.5   # steady steps between events: not a synchronisation, every wait below polls
        t0=$(now_ms); victim=$(echo $others | awk '{ print $NF }')
        case $ev in
        join)
            j="n$i"; i=$((i + 1))
            hold; pid=$(start_agent "$job" "$j" "$mode" "$prog"); PIDS="$PIDS $pid"; JOB_AGENTS="$JOB_AGENTS $pid"; release
            eval "A_$j=$pid"
            world=$((world + 1))
            te=$(all_stepped "$job" "$world" "$t0" $nodes "$j") || { echo "  $job: no join" >&2; return 1; }
            tn=$(first_step "$job" "$j" "$t0" "$world")
            record "$prog" "$mode" join stall "$(stall "$job" "$t0" "$te" $nodes)"
            record "$prog" "$mode" join newcomer $((tn - t0))
            nodes="$nodes $j"; others="$others $j" ;;
        workerkill)
            old=$(pid_of "$job" "$victim"); kill -9 "$old"
            rest=""; for n in $nodes; do [ "$n" != "$victim" ] && rest="$rest $n"; done
            dl=$(( $(now_ms) + 90000 ))
            until tn=$(first_step "$job" "$victim" "$t0" "$world" "$old") && [ -n "$tn" ]; do
                [ "$(now_ms)" -gt "$dl" ] && { echo "  $job: $victim never back" >&2; return 1; }
                sleep 0.02
            done
            te=$(all_stepped "$job" "$world" "$tn" $rest) || { echo "  $job: no step after $victim's return" >&2; return 1; }
            record "$prog" "$mode" workerkill stall "$(stall "$job" "$t0" "$te" $rest)"
            record "$prog" "$mode" workerkill newcomer $((tn - t0)) ;;
        nodekill|leave)
            if [ "$ev" = nodekill ]; then eval "kill -9 \$A_$victim"; else eval "kill -TERM \$A_$victim"; fi
            rest=""; for n in $nodes; do [ "$n" != "$victim" ] && rest="$rest $n"; done
            world=$((world - 1))
            te=$(all_stepped "$job" "$world" "$t0" $rest) || { echo "  $job: no epoch without $victim" >&2; return 1; }
            record "$prog" "$mode" "$ev" stall "$(stall "$job" "$t0" "$te" $rest)"
            nodes=$rest; o=""; for n in $others; do [ "$n" != "$victim" ] && o="$o $n"; done; others=$o ;;
        esac
    done
    return 0
}

echo "stall benchmark: $K nodes x 1 process, in place, --np=2:$((K + 1)) --elastic_timeout=1, step delay ${DELAY_MS} ms, extra boot ${BOOT_MS} ms, $REPS repetitions; load $(cut -d' ' -f1-3 /proc/loadavg); etcd $EP"
for prog in $PROGS; do
    for mode in ${MODES:-gated ungated}; do
        rep=0
        while [ $rep -lt "$REPS" ]; do
            run_job "$prog" "$mode" "$rep" || true
            for a in $JOB_AGENTS; do kill -9 "$a" 2>/dev/null; done
            JOB_AGENTS=""
            rep=$((rep + 1))
        done
    done
done
[ -s "$W/results" ] || { echo "no results" >&2; exit 1; }
echo "ms, p50/max over the repetitions (stall: the longest time a running member went without a step)"
awk '
function pct(a, n, p,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((n - 1) * p) + 1] }
{ key = $1 " " $2 " " $3 " " $4; n[key]++; v[key, n[key]] = $5; if (!(key in seen)) { seen[key] = 1; order[++no] = key } }
END {
    printf "%-6s %-8s %-11s %-9s %16s\n", "prog", "mode", "event", "figure", "p50/max (ms)"
    for (o = 1; o <= no; o++) { k = order[o]; m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]
        split(k, f, " "); printf "%-6s %-8s %-11s %-9s %7d/%-8d\n", f[1], f[2], f[3], f[4], pct(a, m, 0.5), pct(a, m, 1.0) }
}' "$W/results"
