#!/bin/sh
# A PyTorch DDP program on ecoord.torch (worker/examples/torch_ddp.py, Gloo
# on CPU) survives every membership change in place under `ecoord launch
# --rebuild=inprocess`: a join (of a node whose program sleeps before it
# imports torch: the others never wait for its boot), a graceful leave
# (SIGTERM to an agent), a node gone silent (agent and process SIGSTOPped
# mid-collective: released by the epoch change, with a group timeout far
# longer than the release), a training process killed (its node steps out
# and comes back once its new process is ready), a node killed (kill -9 of
# its agent) and an etcd restart shorter than the lease TTL.  Through all of them no survivor process is restarted (same
# PIDs), its steps keep increasing (the state comes from the most advanced
# rank, never step 0 again) and the world size follows the membership.  The
# same program, unchanged, runs under --rebuild=restart and plain torchrun
# (an ordinary env:// group).  Debian's torch is under /usr/bin/python3.
set -u
PY=/usr/bin/python3
if ! $PY -c 'import torch.distributed' 2>/dev/null; then
    echo "1..0 # SKIP Debian's python3-torch is not installed (apt-get install python3-torch)"
    exit 0
fi
ETCD=${ETCD:-etcd}
ECOORD=${ECOORD:-./ecoord}
SRCDIR=${EC_SRCDIR:-${srcdir:-.}}
BUILDDIR=${EC_BUILDDIR:-.}
command -v "$ETCD" >/dev/null 2>&1 || { echo "1..0 # SKIP no etcd binary"; exit 0; }
# The package finds the library of this build tree, also in a VPATH build.
ECOORD_LIBECWORKER=$BUILDDIR/.libs/libecworker.so.0
[ -f "$ECOORD_LIBECWORKER" ] || { echo "1..0 # SKIP libecworker not built"; exit 0; }
export ECOORD_LIBECWORKER OMP_NUM_THREADS=1
PROG="$(cd "$SRCDIR" && pwd)/worker/examples/torch_ddp.py"
T=$(mktemp -d /tmp/ec-t3300-XXXXXX)
mkdir -p "$T/j" "$T/r"
mult=${EC_TEST_TIMEOUT_MULTIPLIER:-1}
pids=""
EPID=""
cleanup() {
    for p in $pids; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
    [ -n "$EPID" ] && kill -9 "$EPID" 2>/dev/null
    wait 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
echo "1..11"
n=0
result() { # STATUS NAME [DIAG-FILES...]
    n=$((n + 1)); st=$1; name=$2; shift 2
    if [ "$st" = 0 ]; then echo "ok $n - $name"; else
        echo "not ok $n - $name"
        for f in "$@"; do echo "# --- $f"; tail -n 15 "$f" 2>/dev/null | sed 's/^/# /'; done
    fi
}
now() { date +%s%3N; }
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port); peer=$(free_port)
start_etcd() {
    "$ETCD" --name t --data-dir "$T/etcd" --listen-client-urls "http://127.0.0.1:$port" \
        --advertise-client-urls "http://127.0.0.1:$port" --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "t=http://127.0.0.1:$peer" --heartbeat-interval=50 \
        --election-timeout=250 --logger=zap --log-outputs=stderr >> "$T/etcd.log" 2>&1 &
    EPID=$!
}
# until COMMAND succeeds, polling, or SECONDS pass (stretched by the multiplier)
wait_until() {
    secs=$1; shift
    dl=$(( $(now) + secs * 1000 * mult ))
    until "$@"; do [ "$(now)" -gt "$dl" ] && return 1; sleep 0.05; done
}
served() { [ "$(grep -c 'serving client traffic' "$T/etcd.log" 2>/dev/null)" -ge "$1" ]; }
start_etcd
wait_until 15 served 1 || { echo "Bail out! etcd did not start"; exit 1; }

TTL=3
agent() { # JOB NODE MODE ARGS...
    job=$1; node=$2; mode=$3; shift 3
    "$ECOORD" launch --elastic_server="127.0.0.1:$port" --job_id="$job" --np=2:3 \
        --nproc_per_node=1 --node_id="$node" --elastic_timeout=1 --lease_ttl=$TTL \
        --log_dir="$T/$job/$node" --grace_period=2 --rebuild="$mode" -- \
        $PY "$PROG" "$@" > "$T/$job.$node.console" 2>&1 &
    pids="$pids $!"
    eval "A_$node=$!"
}
# agent_slow JOB NODE SECONDS ARGS...: its program sleeps before it starts python
agent_slow() {
    job=$1; node=$2; boot=$3; shift 3
    "$ECOORD" launch --elastic_server="127.0.0.1:$port" --job_id="$job" --np=2:3 \
        --nproc_per_node=1 --node_id="$node" --elastic_timeout=1 --lease_ttl=$TTL \
        --log_dir="$T/$job/$node" --grace_period=2 --rebuild=inprocess -- \
        /bin/sh -c "sleep $boot; exec $PY $PROG $*" > "$T/$job.$node.console" 2>&1 &
    pids="$pids $!"
    eval "A_$node=$!"
}
# gap NODE FROM TO: the longest time NODE went without a step between wall ms FROM and TO
gap() {
    steps "$1" | awk -v f="$2" -v e="$3" 'BEGIN { p = -1; g = 0 }
        { t = $NF; sub(/t=/, "", t); t += 0; if (t <= f) { p = t; next }
          if (p >= 0 && t - p > g) g = t - p; p = t; if (t >= e) exit } END { print g }'
}
log() { echo "$T/j/$1/workerlog.0"; }
steps() { grep -h '^torch_ddp step=' "$(log "$1")" 2>/dev/null; }
last() { steps "$1" | tail -n 1; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
lastf() { last "$1" | sed -n "s/.*[ ]$2=\([^ ]*\).*/\1/p"; }
# at_world NODE W: this node's latest step ran at world size W
at_world() { [ "$(lastf "$1" world)" = "$2" ]; }
all_at_world() { w=$1; shift; for x in "$@"; do at_world "$x" "$w" || return 1; done; }
# after NODE STEP: the node logged a step beyond STEP
after() { s=$(lastf "$1" step); [ -n "$s" ] && [ "$s" -gt "$2" ]; }
pids_of() { steps "$1" | field pid | sort -u | tr '\n' ' '; }
increasing() { steps "$1" | field step | awk 'NR > 1 && $1 <= p { bad = 1 } { p = $1 } END { exit bad }'; }
# cs_at NODE STEP: the parameters' checksum NODE logged after STEP
cs_at() { steps "$1" | grep " step=$2 " | field cs; }
# survivors NODE...: each has one PID only and strictly increasing steps
survivors_ok() {
    for x in "$@"; do
        [ "$(pids_of "$x" | wc -w)" = 1 ] || { echo "# $x: several PIDs: $(pids_of "$x")"; return 1; }
        increasing "$x" || { echo "# $x: steps went back"; return 1; }
        # a collective held to the group timeout instead of released by the epoch
        ! grep -q 'Timed out' "$(log "$x")" || { echo "# $x: a collective timed out"; return 1; }
    done
}

# ---- in place ----------------------------------------------------------------------------
# The group timeout is 120 s: every release below must come from an epoch.
export TORCH_DDP_TIMEOUT=120 TORCH_DDP_TIMESTAMPS=1
agent j a inprocess --steps 100000 --delay-ms 20
agent j b inprocess --steps 100000 --delay-ms 20
wait_until 60 all_at_world 2 a b && wait_until 20 after a 5
result $? "two nodes train at world 2 under --rebuild=inprocess" "$T/j.a.console" "$(log a)"
loss1=$(steps a | head -n 1 | field loss)

s0=$(lastf a step)
t0=$(now)
boot=3   # c's program sleeps this long before python starts: its boot, with torch's import
agent_slow j c $boot --steps 100000 --delay-ms 20
ok=1
if wait_until 60 all_at_world 3 a b c; then
    cfirst=$(steps c | head -n 1 | field step)
    closs=$(steps c | head -n 1 | field loss)
    tc=$(steps c | head -n 1 | sed 's/.* t=//')
    wait_until 10 after a "$cfirst"
    # the members trained through c's boot: their longest stall is a rebuild, far below it
    ga=$(gap a "$t0" "$tc"); gb=$(gap b "$t0" "$tc")
    echo "# join: a was at step $s0; c's first step $cfirst (loss $closs; step 1's was $loss1), parameters a=$(cs_at a "$cfirst") c=$(cs_at c "$cfirst"); c booted ${boot}+ s, a's longest stall ${ga} ms, b's ${gb} ms"
    survivors_ok a b && [ "$cfirst" -gt "$s0" ] && [ -n "$(cs_at c "$cfirst")" ] &&
        [ "$(cs_at a "$cfirst")" = "$(cs_at c "$cfirst")" ] &&
        [ "$ga" -lt $((boot * 500)) ] && [ "$gb" -lt $((boot * 500)) ] &&
        [ "$((cfirst - s0))" -gt 20 ] && ok=0
fi
result $ok "a join of a node slow to boot: world 3, the members never wait for its boot, same PIDs, the joiner resumes at the live step with identical parameters and momentum" \
    "$(log a)" "$(log c)"

s0=$(lastf a step)
kill -TERM "$A_c"
wait_until 30 all_at_world 2 a b && wait_until 10 after a "$s0" && survivors_ok a b
result $? "a graceful leave (SIGTERM to an agent): world 2, same PIDs, steps continue" "$(log a)"

# A node gone silent mid-training: its agent and process stopped.  The
# survivors' next collective blocks on it until its lease expires and the
# new epoch releases it (not the 120 s group timeout).
agent j d inprocess --steps 100000 --delay-ms 20
wait_until 60 all_at_world 3 a b d
dproc=$(lastf d pid)
s0=$(lastf a step)
t0=$(now)
kill -STOP "$A_d" "$dproc"
ok=1
if wait_until 30 all_at_world 2 a b && wait_until 10 after a "$s0"; then
    rel=$(( $(now) - t0 ))
    why=$(grep -h '^torch_ddp rebuilt' "$(log a)" | tail -n 1 | field why)
    echo "# silent node: survivors trained again $rel ms after it stopped (lease TTL ${TTL} s, group timeout 120 s; $why)"
    survivors_ok a b && [ "$rel" -lt $((30000 * mult)) ] && ok=0
fi
result $ok "a SIGSTOPped node: the blocked collective is released by the epoch, far within the group timeout" "$(log a)" "$(log b)"
kill -9 "$A_d" "$dproc" 2>/dev/null; kill -CONT "$A_d" "$dproc" 2>/dev/null

agent j e inprocess --steps 100000 --delay-ms 20
wait_until 60 all_at_world 3 a b e
# A training process killed: its node steps out (the others go on at world
# 2 at once), and comes back once the new process is ready; nobody else
# restarts, the agent stays.
eproc=$(lastf e pid)
s0=$(lastf a step)
kill -9 "$eproc"
ok=1
if wait_until 30 all_at_world 2 a b && wait_until 60 all_at_world 3 a b e &&
    wait_until 10 after a "$s0" && survivors_ok a b; then
    enew=$(lastf e pid)
    echo "# process killed: e's process $eproc replaced by $enew; a and b kept theirs"
    [ -n "$enew" ] && [ "$enew" != "$eproc" ] && kill -0 "$A_e" 2>/dev/null &&
        grep -q '+step-out node e' "$T/j.e.console" && ok=0
fi
result $ok "a training process killed in place: its node steps out and comes back once its new process is ready, nobody else restarts" "$(log a)" "$(log e)" "$T/j.e.console"
s0=$(lastf a step)
kill -9 "$A_e"
ok=1
if wait_until 30 all_at_world 2 a b && wait_until 10 after a "$s0" && survivors_ok a b; then
    s1=$(lastf a step)
    wait_until 10 after b "$((s1 - 1))" && [ "$(cs_at a "$s1")" = "$(cs_at b "$s1")" ] && ok=0
fi
result $ok "a node killed (kill -9 of its agent): world 2, same PIDs, steps continue, same parameters" "$(log a)" "$(log b)"

# etcd down and back within the lease TTL: nothing restarts, training goes on.
s0=$(lastf a step)
kill -9 "$EPID"; wait "$EPID" 2>/dev/null
start_etcd
wait_until 15 served 2
s1=$(lastf a step)
wait_until 20 after a "$((s1 + 5))" && wait_until 10 after b "$((s1 + 5))" && survivors_ok a b
result $? "an etcd restart shorter than the TTL: same PIDs, steps continue ($s0 -> $(lastf a step))" \
    "$(log a)" "$T/j.a.console"

# etcd silent for most of the TTL (SIGSTOP; the sleep is the outage, not a
# synchronisation): the fence trips before etcd could expire the leases, the
# watcher aborts the group (ecoord.torch.Fenced) and the processes keep their
# state; when etcd answers the job re-forms and they rebuild in place.
s0=$(lastf a step)
kill -STOP "$EPID"; sleep 2.8; kill -CONT "$EPID"
fenced() { grep -q 'fenced' "$(log a)" && grep -q 'fenced' "$(log b)"; }
ok=1
if wait_until 30 after a "$((s0 + 5))" && wait_until 10 after b "$((s0 + 5))" && survivors_ok a b; then
    fenced && ok=0 || echo "# no fence seen (etcd paused 2.8 s, lease TTL ${TTL} s)"
fi
result $ok "etcd unreachable near the TTL: the fence stops collectives, then the same processes go on ($s0 -> $(lastf a step))" \
    "$(log a)" "$(log b)"
grep -h '^torch_ddp rebuilt' "$T"/j/*/workerlog.0 | sed 's/ why=.*//; s/^/# /' | tail -n 12
kill -TERM "$A_a" "$A_b" 2>/dev/null

# ---- DDP's buckets on a group that is gone --------------------------------------------------
# Context.wrap's comm hook: once the group is aborted (as on a new epoch),
# backward starts no bucket allreduce on it (over NCCL such a call waits for
# torch's abort of the group) and the step raises EpochChanged naming the
# bucket; a comm hook of the program's own runs behind the same check, and
# ctx.all_reduce (a collective of the program's own) refuses the same way.
"$ECOORD" launch --elastic_server="127.0.0.1:$port" --job_id=hook --np=1 --nproc_per_node=1 \
    --node_id=h --log_dir="$T/hook" --grace_period=2 --rebuild=inprocess -- \
    $PY "$(cd "$SRCDIR" && pwd)/tests/progs/torch_bucket_refused.py" > "$T/hook.console" 2>&1 &
hpid=$!
pids="$pids $hpid"
hook_done() { ! kill -0 "$hpid" 2>/dev/null; }
wait_until 120 hook_done && wait "$hpid" && grep -q '^OK$' "$T/hook/workerlog.0"
result $? "DDP's gradient buckets and ctx.all_reduce start no allreduce on a group that is gone (the step says which bucket)" \
    "$T/hook.console" "$T/hook/workerlog.0"
grep -h '^backward on the aborted' "$T/hook/workerlog.0" 2>/dev/null | cut -c1-200 | sed 's/^/# /'

# ---- the same program without rebuilds -----------------------------------------------------
for x in a b; do
    "$ECOORD" launch --elastic_server="127.0.0.1:$port" --job_id=r --np=2 --nproc_per_node=1 \
        --node_id="$x" --elastic_timeout=1 --log_dir="$T/r/$x" --grace_period=2 \
        --rebuild=restart -- $PY "$PROG" --steps 20 > "$T/r.$x.console" 2>&1 &
    pids="$pids $!"
    eval "R_$x=$!"
done
done_ok() { grep -q '^torch_ddp done steps=20' "$T/r/$1/workerlog.0" 2>/dev/null; }
wait_until 90 done_ok a && wait_until 10 done_ok b &&
    grep -q '^torch_ddp step=20 .* world=2 ' "$T/r/a/workerlog.0"
result $? "--rebuild=restart: the same program trains 20 steps at world 2 (env:// fallback)" \
    "$T/r.a.console" "$T/r/a/workerlog.0"

# Debian's torchrun (1.13 on Python 3.11) fails with the default --redirects 0
# (an enum iteration change): redirect stdout and tee it back.  torchrun is
# the reference here, not the code under test: under a CPU hog it once did
# not finish within 120 s (rc 124), so a timeout gets one more try.
for try in 1 2; do
    (cd "$T" && timeout $((150 * mult)) $PY -m torch.distributed.run --redirects 1 --tee 1 \
        --log_dir "$T/trun$try" --nproc_per_node=2 --master_port="$(free_port)" "$PROG" \
        --steps 10 > "$T/torchrun.out" 2>&1)
    rc=$?
    [ $rc = 124 ] || break
done
[ $rc = 0 ] && [ "$(grep -c 'torch_ddp done steps=10' "$T/torchrun.out")" = 2 ] &&
    grep -q 'torch_ddp step=10 .* world=2 ' "$T/torchrun.out"
result $? "plain torchrun: the same program trains 10 steps at world 2 (rc $rc)" "$T/torchrun.out"
