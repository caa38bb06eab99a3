#!/bin/sh
# Recovery benchmark: K simulated nodes x 2 processes of the example trainer
# (worker/examples/linreg, Gloo on loopback) through seven scenarios, in both
# rebuild modes, REPS repetitions each; prints p50 and max (ms) per phase
# and writes a JSON file.  Not a pass/fail test.
#
#   tests/bench/bench_recovery.sh [REPS=3] [K=3] [JSON=bench_recovery.json]
#   env: MODES, SCENARIOS (subsets of the lists below), NPROC (processes per
#   node, 2), LINREG_ARGS (e.g. "--backend nccl"), ONE_GPU=1 (every node's
#   processes on the one GPU, each agent's NCCL seeing a host of its own:
#   NCCL_HOSTID=<node> and NCCL's shared-memory and P2P paths off, see
#   tests/gpu/README.md), and ECOORD, ECW_LINREG (the binaries).
#
# Scenarios (each on a fresh job; lease TTL 10 s, so a node loss that waited
# for its lease would show as ~10 s; elastic_timeout 30 s, which none of the
# scenarios waits on: the first epoch forms at MAX):
#   leave     SIGTERM a non-leader agent
#   crash     kill -9 one training process
#   node      kill -9 a non-leader agent (its processes die with it)
#   leader    kill -9 the leader's agent
#   scaleup   one more agent joins a job at --np=K:K+1 (MAX reached: no window)
#   standby   K+1 agents at --np=1:K, kill -9 a member: the standby takes its place
#   starting  kill -9 a non-leader agent while its peers start their processes
#             (right after the epoch that a crash on the leader's node brought)
#   nodemid   kill -9 a non-leader agent that is not the last member: the
#             members after it are renumbered and take its ranks (restart
#             mode: the stop barrier lets them start at once, its agent
#             having refused probes)
#   frozen    SIGSTOP that agent instead: the ring evicts it, and in restart
#             mode its ranks' new holder waits for the stop barrier (the
#             frozen node's lease time left, its processes living until its
#             janitor's watchdog); SIGCONT once measured
# (node, leader, standby and starting take the last non-leader member, whose
# ranks go away with it: nothing is renumbered.)
# Phases, from the change (t0, just before the kill/start):
#   detect    the leader observed the change (epoch record observed_at_ms)
#   decide    the leader decided (decided_at_ms)
#   publish   etcd acknowledged the new epoch to the leader (the time on the
#             leader's "+published epoch" log line)
#   step      every rank of the new epoch had done a training step in it: the
#             latest of the ranks' first step lines in it, by the time each
#             rank wrote on its line (linreg --timestamps: t=<wall ms>)
#   polled    the same, as this script saw it by polling `ecoord status` and
#             the logs (the figure before 2026-11-28: it adds the polls'
#             own latency, 10-25 ms on a 2-core VM)
set -u
cd "$(dirname "$0")/../.." || exit 1
TOP=$(pwd)
REPS=${1:-3}; K=${2:-3}; JSON=${3:-bench_recovery.json}
ECOORD=${ECOORD:-$TOP/ecoord}; LINREG=${ECW_LINREG:-$TOP/worker/examples/linreg}
[ -x "$ECOORD" ] && [ -x "$LINREG" ] || { echo "build first: make && make bench" >&2; exit 1; }
W=$(mktemp -d /tmp/ec-bench-recovery-XXXXXX)
EPID=""
PIDS=""
JOB_AGENTS=""
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; kill "$EPID" 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$W"; }
trap cleanup EXIT
. deploy/local/hold.sh  # TERM and INT: exit, and cleanup runs on the way out
etcd_held "$W/etcd"
now_ms() { date +%s%3N; }   # wall clock ms: compared with the epoch record's times

NPROC=${NPROC:-2}
one_gpu_env() {  # NODE: what makes NCCL take this agent's processes for another host
    [ "${ONE_GPU:-0}" = 1 ] || return 0
    echo "NCCL_HOSTID=$1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 NCCL_COLLNET_ENABLE=0"
}
start_agent() {  # JOB NODE NP MODE [ELASTIC_TIMEOUT]
    # shellcheck disable=SC2046,SC2086
    env $(one_gpu_env "$2") "$ECOORD" launch --elastic_server="$EP" --job_id="$1" --np="$3" \
        --nproc_per_node="$NPROC" --node_id="$2" \
        --rebuild="$4" --elastic_timeout="${5:-30}" --lease_ttl=10 --grace_period=2 --log_dir="$W/$1/$2" \
        -- "$LINREG" --steps 100000 --delay-ms 10 --timestamps ${LINREG_ARGS:-} > "$W/$1.$2.console" 2>&1 &
    echo $!
}
status_json() { "$ECOORD" status --elastic_server="$EP" --job_id="$1" --json 2>/dev/null; }
jfield() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" <<EOT
$1
EOT
}
epoch_of() { status_json "$1" | sed -n 's/.*"epoch":{"number":\([0-9]*\).*/\1/p'; }
leader_of() { status_json "$1" | sed -n 's/.*"leader":"\([^"]*\)".*/\1/p'; }
wait_epoch() {  # JOB N: until epoch >= N; prints the time it was seen
    dl=$(( $(now_ms) + 30000 ))
    # no epoch yet prints nothing: not a number to compare (it ended the wait)
    until e=$(epoch_of "$1"); [ -n "$e" ] && [ "$e" -ge "$2" ]; do
        [ "$(now_ms)" -gt "$dl" ] && return 1
        sleep 0.005
    done
    now_ms
}
wait_steps() {  # JOB EPOCH NODES...: until every rank of NODES logged a step in EPOCH
    job=$1; e=$2; shift 2; dl=$(( $(now_ms) + 30000 ))
    for wn in "$@"; do for wr in $(seq 0 $((NPROC - 1))); do
        until grep -q "^linreg step=[0-9]* epoch=$e " "$W/$job/$wn/workerlog.$wr" 2>/dev/null; do
            [ "$(now_ms)" -gt "$dl" ] && return 1; sleep 0.005
        done
    done; done
    now_ms
}
members_of() { printf '%s' "$1" | grep -o '"node_id":"n[0-9]*","m_id":[0-9][0-9]*' | sed 's/"node_id":"\(n[0-9]*\)".*/\1/' | tr '\n' ' '; }
# The epoch that completes the change, as status --json: the first seen
# after BASE without VICTIM (a removal) or, with no victim (a crash in place,
# whose node goes out and comes back once its new process is ready; a
# scale-up), at world WANT.
wait_change() {  # JOB BASE VICTIM WANT
    dl=$(( $(now_ms) + 30000 ))
    while :; do
        js=$(status_json "$1")
        e=$(printf '%s' "$js" | sed -n 's/.*"epoch":{"number":\([0-9]*\).*/\1/p')
        if [ -n "$e" ] && [ "$e" -gt "$2" ]; then
            if [ -n "$3" ]; then
                case " $(members_of "$js") " in *" $3 "*) ;; *) printf '%s' "$js"; return 0 ;; esac
            else
                w=$(printf '%s' "$js" | sed -n 's/.*"epoch":{"number":[0-9]*,"world_size":\([0-9]*\).*/\1/p')
                [ "$w" = "$4" ] && { printf '%s' "$js"; return 0; }
            fi
        fi
        [ "$(now_ms)" -gt "$dl" ] && return 1
        sleep 0.005
    done
}
own_step() {  # JOB EPOCH T0 NODES...: the latest of the ranks' first step in EPOCH at or after T0 (their t=)
    job=$1; e=$2; t=$3; shift 3; last=0
    for wn in "$@"; do for wr in $(seq 0 $((NPROC - 1))); do
        s=$(grep "^linreg step=[0-9]* epoch=$e " "$W/$job/$wn/workerlog.$wr" 2>/dev/null |
            awk -v a="$t" '{ sub(/.* t=/, ""); if ($1 + 0 >= a) { printf "%.0f\n", $1; exit } }')
        [ -n "$s" ] || return 1
        [ "$s" -gt "$last" ] && last=$s
    done; done
    echo "$last"
}
published_ms() {  # JOB EPOCH: when etcd acknowledged the epoch to its leader (the "+published" log line)
    l=$(grep -h "+published epoch $2 " "$W/$1".*.console 2>/dev/null | head -n 1) || return 1
    [ -n "$l" ] || return 1
    set -- $l  # LAUNCH INFO DATE HH:MM:SS,mmm ...
    echo $(( $(date -d "$3 ${4%,*}" +%s) * 1000 + 1${4#*,} - 1000 ))
}
record() { printf '%s %s %s %s\n' "$1" "$2" "$3" "$4" >> "$W/results"; }  # mode scenario phase ms

run_one() {  # MODE SCENARIO REP (its agents are killed whatever happens)
    run_scenario "$@"; rc=$?
    for a in $JOB_AGENTS; do kill -9 "$a" 2>/dev/null; done
    JOB_AGENTS=""
    return $rc
}

run_scenario() {
    mode=$1; sc=$2; job="r-$mode-$sc-$3"; mkdir -p "$W/$job"
    nodes=""; i=0; np="1:$K"; total=$K; eto=30
    # scaleup: the first epoch forms with K of K+1 after a short window (at
    # 30 s it came after wait_epoch's 30 s); the joiner's, at MAX, at once
    [ "$sc" = scaleup ] && { np="$K:$((K + 1))"; eto=2; }
    [ "$sc" = standby ] && total=$((K + 1))
    while [ $i -lt $total ]; do
        hold; pid=$(start_agent "$job" "n$i" "$np" "$mode" "$eto"); PIDS="$PIDS $pid"; JOB_AGENTS="$JOB_AGENTS $pid"; release
        eval "A_n$i=$pid"; nodes="$nodes n$i"
        i=$((i + 1))
        [ "$sc" = standby ] && [ $i -eq $K ] && { wait_epoch "$job" 1 >/dev/null || return 1; }
    done
    wait_epoch "$job" 1 >/dev/null || { echo "  $job: no first epoch" >&2; return 1; }
    members=$(members_of "$(status_json "$job")")
    wait_steps "$job" 1 $members >/dev/null || { echo "  $job: never trained" >&2; return 1; }
    sleep 0.3
    base=$(epoch_of "$job")   # the change must bring the epoch after this one
    leader=$(leader_of "$job")
    victim=""
    for n in $members; do [ "$n" != "$leader" ] && victim=$n; done
    if [ "$sc" = nodemid ] || [ "$sc" = frozen ]; then
        last=$(echo $members | awk '{print $NF}'); victim=""
        for n in $members; do
            if [ "$n" != "$leader" ] && [ "$n" != "$last" ]; then victim=$n; break; fi
        done
        [ -n "$victim" ] || { echo "  $job: no member but the leader and the last (K=$K): K >= 3" >&2; return 1; }
    fi
    if [ "$sc" = starting ]; then
        # a process of the leader's node crashes: every node (re)starts its
        # processes in the next epoch; the victim dies while they start
        pid=$(grep -h "^linreg step=.* node=$leader " "$W/$job/$leader/workerlog.$((NPROC - 1))" | tail -n1 | sed -n 's/.* pid=\([0-9]*\).*/\1/p')
        kill -9 "$pid"
        wait_epoch "$job" $((base + 1)) >/dev/null || { echo "  $job: no restart epoch" >&2; return 1; }
        base=$(epoch_of "$job")
    fi
    t0=$(now_ms)
    case $sc in
        leave)   eval "kill -TERM \$A_$victim" ;;
        crash)   pid=$(grep -h "^linreg step=.* node=$victim " "$W/$job/$victim/workerlog.$((NPROC - 1))" | tail -n1 | sed -n 's/.* pid=\([0-9]*\).*/\1/p'); kill -9 "$pid" ;;
        node)    eval "kill -9 \$A_$victim" ;;
        leader)  victim=$leader; eval "kill -9 \$A_$victim" ;;
        scaleup) hold; pid=$(start_agent "$job" "n$K" "$np" "$mode" "$eto"); PIDS="$PIDS $pid"; JOB_AGENTS="$JOB_AGENTS $pid"; release; victim="" ;;
        standby) eval "kill -9 \$A_$victim" ;;
        starting) eval "kill -9 \$A_$victim" ;;
        nodemid) eval "kill -9 \$A_$victim" ;;
        frozen)  eval "kill -STOP \$A_$victim" ;;
    esac
    want=$((K * NPROC)); [ "$sc" = scaleup ] && want=$(((K + 1) * NPROC))
    gone=$victim; [ "$sc" = crash ] && gone=""  # a crashed process's node stays (or comes back)
    js=$(wait_change "$job" "$base" "$gone" "$want") || { echo "  $job: no epoch after $base without '$gone' at world $want" >&2; return 1; }
    e=$(printf '%s' "$js" | sed -n 's/.*"epoch":{"number":\([0-9]*\).*/\1/p')
    obs=$(jfield "$js" observed_at_ms); dec=$(jfield "$js" decided_at_ms); pub=$(published_ms "$job" "$e") || { echo "  $job: no +published line" >&2; return 1; }
    survivors=$(members_of "$js")
    t_step=$(wait_steps "$job" "$e" $survivors) || { echo "  $job: no step in epoch $e" >&2; return 1; }
    t_own=$(own_step "$job" "$e" "$t0" $survivors) || { echo "  $job: a step line without t=" >&2; return 1; }
    [ "$sc" = frozen ] && eval "kill -CONT \$A_$victim"
    record "$mode" "$sc" detect $((obs - t0))
    record "$mode" "$sc" decide $((dec - t0))
    record "$mode" "$sc" publish $((pub - t0))
    record "$mode" "$sc" step $((t_own - t0))
    record "$mode" "$sc" polled $((t_step - t0))
    return 0
}

echo "recovery benchmark: $K nodes x $NPROC processes of linreg (${LINREG_ARGS:-Gloo}, loopback${ONE_GPU:+, one GPU}), $REPS repetitions, etcd $EP"
for mode in ${MODES:-inprocess restart}; do
    for sc in ${SCENARIOS:-leave crash node leader scaleup standby starting nodemid frozen}; do
        rep=0
        while [ $rep -lt "$REPS" ]; do
            run_one $mode $sc $rep || true
            rep=$((rep + 1))
        done
    done
done
awk -v json="$JSON" '
function pct(a, n, p,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((n - 1) * p) + 1] }
{ key = $1 " " $2 " " $3; n[key]++; v[key, n[key]] = $4; if (!(($1 " " $2) in seen)) { seen[$1 " " $2] = 1; order[++no] = $1 " " $2 } }
END {
    printf "%-10s %-8s %16s %16s %16s %16s %16s\n", "mode", "scenario", "detect p50/max", "decide p50/max", "publish p50/max", "step p50/max", "polled p50/max"
    printf "[\n" > json
    for (o = 1; o <= no; o++) {
        split(order[o], mp, " "); line = sprintf("%-10s %-8s", mp[1], mp[2])
        printf "  {\"mode\":\"%s\",\"scenario\":\"%s\"", mp[1], mp[2] > json
        split("detect decide publish step polled", ph, " ")
        for (q = 1; q <= 5; q++) { key = order[o] " " ph[q]; m = n[key]
            for (i = 1; i <= m; i++) a[i] = v[key, i]
            p50 = pct(a, m, 0.5); mx = pct(a, m, 1.0)
            line = line sprintf(" %7.0f/%-8.0f", p50, mx)
            printf ",\"%s_p50_ms\":%.0f,\"%s_max_ms\":%.0f", ph[q], p50, ph[q], mx > json }
        printf "}%s\n", (o < no ? "," : "") > json
        print line }
    printf "]\n" > json }' "$W/results"
echo "JSON: $JSON"
