#!/bin/sh
# A program written for torchrun (init_process_group(init_method="env://"),
# gloo, CPU) runs unchanged under `ecoord launch`, through a membership
# change: 2 nodes form world 2, a third joins, and the restarted processes
# rendezvous again at world 3.  Debian's torch lives under /usr/bin/python3,
# which may not be the first python3 on PATH.  Then the same under
# `ecoord torchrun` with torchrun's etcd rendezvous flags: --nnodes=1:2 on one
# node gives world 1, a second node joining restarts both at world 2, and
# both agents exit 0 when the program ends (tests 9-11).  `ecoord torchrun`
# finds the interpreter torchrun would use, one that imports torch, past a
# python3 without it first on PATH, and says which (tests 12-13).  Its
# console and files are torchrun's: every rank's lines, --tee's prefix,
# --log_dir's layout, nothing in the working directory (tests 14-15).
# torchrun's rendezvous forms where one node hosts the store, static
# (--node_rank, --master_addr/--master_port) and c10d (--rdzv_endpoint),
# work between two agents on loopback (tests 16-17).  What torchrun reads of
# its environment: PYTHON_EXEC runs the script under both (test 18), and
# TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE shapes --tee's prefix (test 19).
set -u
PY=/usr/bin/python3
if ! $PY -c 'import torch.distributed' 2>/dev/null; then
    echo "1..0 # SKIP Debian's python3-torch is not installed (apt-get install python3-torch)"
    exit 0
fi
ETCD=${ETCD:-etcd}
ECOORD=${ECOORD:-$(pwd)/ecoord}
SRCDIR=$(cd "${srcdir:-.}" && pwd)
T=$(mktemp -d /tmp/ec-t3100-XXXXXX)
mult=${EC_TEST_TIMEOUT_MULTIPLIER:-1}
pids=""
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    [ -n "${EPID:-}" ] && kill -9 "$EPID" 2>/dev/null
    wait 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
echo "1..19"
port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
peer=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$ETCD" --name t --data-dir "$T/etcd" --listen-client-urls "http://127.0.0.1:$port" \
    --advertise-client-urls "http://127.0.0.1:$port" --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" --initial-cluster "t=http://127.0.0.1:$peer" \
    --heartbeat-interval=50 --election-timeout=250 --logger=zap --log-outputs=stderr > "$T/etcd.log" 2>&1 &
EPID=$!
# wait_for FILE_GLOB COUNT SECONDS: poll until COUNT files match, with a deadline
wait_for() {
    deadline=$(( $(date +%s) + $3 * mult ))
    while [ "$(ls $1 2>/dev/null | wc -l)" -lt "$2" ]; do
        [ "$(date +%s)" -gt "$deadline" ] && return 1
        sleep 0.05
    done
    return 0
}
wait_for "$T/etcd.log" 1 10
deadline=$(( $(date +%s) + 15 ))
until grep -q "serving client traffic" "$T/etcd.log"; do
    [ "$(date +%s)" -gt "$deadline" ] && { echo "Bail out! etcd did not start"; exit 1; }
    sleep 0.05
done
mkdir -p "$T/out"
start() {
    OUT_DIR="$T/out" "$ECOORD" launch --elastic_server="127.0.0.1:$port" --job_id=torch \
        --np=2:3 --nproc_per_node=1 --node_id="$1" --elastic_timeout=1 --log_dir="$T/log-$1" \
        --grace_period=3 -- $PY "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/$1.console" 2>&1 &
    pids="$pids $!"
}
start a
start b
if wait_for "$T/out/torch.1.*" 2 60 && [ "$(cat $T/out/torch.1.* | awk '{s+=($4==2 && $3==2)} END {print s}')" = 2 ]; then
    echo "ok 1 - two nodes: init_process_group(env://) and all_reduce see world 2"
else
    echo "not ok 1 - epoch 1 allreduce"; cat "$T"/out/* "$T"/a.console 2>/dev/null | tail -20 | sed 's/^/# /'
fi
start c
if wait_for "$T/out/torch.2.*" 3 60 && [ "$(cat $T/out/torch.2.* | awk '{s+=($4==3 && $3==3)} END {print s}')" = 3 ]; then
    echo "ok 2 - a third node joins: the restarted processes rendezvous again at world 3"
else
    echo "not ok 2 - epoch 2 allreduce"; cat "$T"/out/* "$T"/c.console 2>/dev/null | tail -20 | sed 's/^/# /'
fi
ranks=$(cat $T/out/torch.2.* | awk '{print $2}' | sort | tr '\n' ' ')
if [ "$ranks" = "0 1 2 " ]; then
    echo "ok 3 - ranks in epoch 2 are exactly 0..2"
else
    echo "not ok 3 - ranks in epoch 2: $ranks"
fi

# An exception raised under torch's @record reaches ecoord's console and
# `ecoord status` (TORCHELASTIC_ERROR_FILE, one per process), with its type,
# message and where it was raised.  A .py program runs under --python.
OUT_DIR="$T/out" "$ECOORD" launch --elastic_server="127.0.0.1:$port" --job_id=torcherr \
    --np=1 --nproc_per_node=1 --node_id=e --max_restart=0 --log_dir="$T/log-e" \
    --python=$PY -- "$SRCDIR/tests/progs/torch_raise.py" > "$T/e.console" 2>&1 &
epid=$!
pids="$pids $epid"
deadline=$(( $(date +%s) + 60 * mult ))
while kill -0 "$epid" 2>/dev/null; do
    [ "$(date +%s)" -gt "$deadline" ] && break
    sleep 0.05
done
# (the log's tail shows the traceback anyway: look for the agent's own lines)
if grep -q "LAUNCH ERROR .* exception: ValueError: loss is nan at step 7 (ec15)" "$T/e.console" &&
   grep -q "LAUNCH ERROR .* raised at: .*torch_raise.py\", line [0-9]*, in step" "$T/e.console" &&
   grep -q "LAUNCH ERROR .* entered at: .*torch_raise.py\", line [0-9]*, in main" "$T/e.console"; then
    echo "ok 4 - the console shows the exception raised under @record and where"
else
    echo "not ok 4 - no exception in the console"; tail -30 "$T/e.console" | sed 's/^/# /'
fi
"$ECOORD" status --elastic_server="127.0.0.1:$port" --job_id=torcherr > "$T/e.status" 2>&1
"$ECOORD" status --elastic_server="127.0.0.1:$port" --job_id=torcherr --json > "$T/e.json" 2>&1
if grep -q "ValueError: loss is nan at step 7 (ec15)" "$T/e.status" &&
   grep -q '"message":"ValueError: loss is nan at step 7 (ec15)"' "$T/e.json"; then
    echo "ok 5 - ecoord status (text and --json) carries the exception"
else
    echo "not ok 5 - status lacks the exception"; cat "$T/e.status" "$T/e.json" | sed 's/^/# /'
fi

# Switching is changing one word: the same program with the same arguments
# under torchrun and under `ecoord torchrun` sees the same ranks and world
# size and ends with the same exit code.  (ECOORD_PYTHON: Debian's torch is
# under /usr/bin/python3, which may not be the first python3 on PATH;
# torchrun uses its own interpreter.  Debian's torch 1.13 torchrun dies at
# once under Python 3.11; tests/progs/torchrun_py311.py is torchrun with the
# one-line fix, used when the plain one is broken.)
ARGS="--standalone --nnodes=1 --nproc_per_node=2"
TORCHRUN="$PY -m torch.distributed.run"
if ! $PY -c 'from torch.distributed.elastic.multiprocessing.api import Std; import sys; sys.exit(Std.from_str("0") is None)' 2>/dev/null; then
    TORCHRUN="$PY $SRCDIR/tests/progs/torchrun_py311.py"
fi
mkdir -p "$T/tr-torch" "$T/tr-ecoord"
(cd "$T" && OUT_DIR="$T/tr-torch" STEPS=1 timeout $((120 * mult)) $TORCHRUN \
    $ARGS "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/tr-torch.console" 2>&1)
rc_torch=$?
(cd "$T" && OUT_DIR="$T/tr-ecoord" STEPS=1 ECOORD_PYTHON=$PY timeout $((120 * mult)) "$ECOORD" torchrun \
    $ARGS "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/tr-ecoord.console" 2>&1)
rc_ecoord=$?
seen() { cat "$1"/torch.* 2>/dev/null | awk '{print $2, $3, $4}' | sort | tr '\n' ';'; }
if [ "$(seen "$T/tr-torch")" = "0 2 2;1 2 2;" ] && [ "$(seen "$T/tr-ecoord")" = "$(seen "$T/tr-torch")" ]; then
    echo "ok 6 - torchrun $ARGS and ecoord torchrun $ARGS: ranks 0 and 1 of world 2 in both"
else
    echo "not ok 6 - torchrun saw '$(seen "$T/tr-torch")', ecoord torchrun '$(seen "$T/tr-ecoord")'"
    tail -n 15 "$T/tr-torch.console" "$T/tr-ecoord.console" | sed 's/^/# /'
fi
if [ "$rc_torch" = 0 ] && [ "$rc_ecoord" = "$rc_torch" ]; then
    echo "ok 7 - both exit $rc_torch"
else
    echo "not ok 7 - torchrun exited $rc_torch, ecoord torchrun $rc_ecoord"
fi

# ... and a program that fails ends both the same way: torchrun exits 1 (not
# Paddle's 101, which ecoord launch uses for a fixed-size job).
(cd "$T" && timeout $((120 * mult)) $TORCHRUN $ARGS "$SRCDIR/tests/progs/torch_raise.py" \
    > "$T/tr-torch-fail.console" 2>&1)
rc_torch=$?
(cd "$T" && ECOORD_PYTHON=$PY timeout $((120 * mult)) "$ECOORD" torchrun $ARGS \
    "$SRCDIR/tests/progs/torch_raise.py" > "$T/tr-ecoord-fail.console" 2>&1)
rc_ecoord=$?
# ecoord's closing block explains torchrun's 1 as torchrun's, and names
# no log directory: without --log_dir the logs are the console's
logs=$(grep -h '  logs: ' "$T/tr-ecoord-fail.console")
means=$(grep -h '  exit code: ' "$T/tr-ecoord-fail.console")
if [ "$rc_torch" = 1 ] && [ "$rc_ecoord" = "$rc_torch" ] &&
    ! printf '%s\n' "$logs" | grep -q 'ecoord-torchrun-' && printf '%s\n' "$logs" | grep -q 'console' &&
    printf '%s\n' "$means" | grep -q 'as torchrun'; then
    echo "ok 8 - a failing program: both exit $rc_torch; ecoord says why and where its logs are"
else
    echo "not ok 8 - a failing program: torchrun exited $rc_torch, ecoord torchrun $rc_ecoord ($means; $logs)"
    tail -n 5 "$T/tr-torch-fail.console" "$T/tr-ecoord-fail.console" | sed 's/^/# /'
fi

# torchrun's elastic form through a membership change, under `ecoord
# torchrun`: two "nodes" (agents with their own --node_id on loopback) run
# `--nnodes=1:2 --rdzv_backend=etcd --rdzv_endpoint=<this etcd> --rdzv_id=J`.
# The first alone forms world 1 after last_call_timeout; the second joining
# restarts the processes at world 2 (ranks 0 and 1), as torchrun's agent
# restarts its workers when a node waits at the rendezvous; both agents exit
# 0 once the program ends.  torchrun itself is not run here: Debian's torch
# 1.13 has no python-etcd, so its etcd backend cannot start; its single-node
# behaviour is compared in tests 6-8, and these results against the world
# sizes torchrun's etcd rendezvous gives (1, then 2).
mkdir -p "$T/el"
ELARGS="--nnodes=1:2 --rdzv_backend=etcd --rdzv_endpoint=127.0.0.1:$port --rdzv_id=torchel \
    --nproc_per_node=1 --rdzv_conf=last_call_timeout=1"
elastic() { # NODE_ID: one agent in the background; its pid in $epid
    (cd "$T" && OUT_DIR="$T/el" STEPS=20 UNTIL_WORLD=2 ECOORD_PYTHON=$PY \
        timeout $((120 * mult)) "$ECOORD" torchrun $ELARGS --node_id="$1" --log_dir="$T/log-$1" \
        "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/$1.console" 2>&1) &
    epid=$!
    pids="$pids $epid"
}
elastic ta
pid_a=$epid
if wait_for "$T/el/torch.1.*" 1 60 && [ "$(cat "$T"/el/torch.1.*)" = "1 0 1 1" ]; then
    echo "ok 9 - ecoord torchrun --nnodes=1:2 --rdzv_backend=etcd: one node alone is rank 0 of world 1"
else
    echo "not ok 9 - one node alone: $(cat "$T"/el/torch.1.* 2>/dev/null)"
    tail -n 15 "$T/ta.console" | sed 's/^/# /'
fi
elastic tb
pid_b=$epid
if wait_for "$T/el/torch.2.*" 2 60 && [ "$(cat "$T"/el/torch.2.* | sort | tr '\n' ';')" = "2 0 2 2;2 1 2 2;" ]; then
    echo "ok 10 - a second node joins: both restart at world 2, ranks 0 and 1"
else
    echo "not ok 10 - after the join: $(cat "$T"/el/torch.2.* 2>/dev/null | tr '\n' ';')"
    tail -n 15 "$T/ta.console" "$T/tb.console" | sed 's/^/# /'
fi
wait "$pid_a"
rc_a=$?
wait "$pid_b"
rc_b=$?
if [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ]; then
    echo "ok 11 - both agents exit 0 when the program ends at world 2"
else
    echo "not ok 11 - the agents exited $rc_a and $rc_b"
    tail -n 10 "$T/ta.console" "$T/tb.console" | sed 's/^/# /'
fi

# The interpreter torchrun would use: torchrun runs the script with its own
# interpreter, which imports torch.  With no ECOORD_PYTHON and a python3
# without torch first on PATH (a virtualenv, pyenv), `ecoord torchrun` asks
# each python3 on PATH in turn and runs the script with the first that
# imports torch, saying which and why; with none, it exits 1 before
# anything starts, naming those it tried and the fix.
mkdir -p "$T/notorch" "$T/tr-path"
cat > "$T/notorch/python3" <<'PY'
#!/bin/sh
echo "ModuleNotFoundError: No module named 'torch'" >&2
exit 1
PY
chmod +x "$T/notorch/python3"
(cd "$T" && OUT_DIR="$T/tr-path" STEPS=1 timeout $((120 * mult)) \
    env -u ECOORD_PYTHON PATH="$T/notorch:$PATH" "$ECOORD" torchrun $ARGS "$SRCDIR/tests/progs/torch_allreduce.py" \
    > "$T/tr-path.console" 2>&1)
rc=$?
if [ "$rc" = 0 ] && [ "$(seen "$T/tr-path")" = "0 2 2;1 2 2;" ] &&
   grep -q "LAUNCH INFO .* interpreter [^ ]*python3: the first python3 on PATH that imports torch" "$T/tr-path.console" &&
   grep -q "skipped $T/notorch/python3 (ModuleNotFoundError: No module named 'torch')" "$T/tr-path.console"; then
    echo "ok 12 - a python3 without torch first on PATH: ecoord torchrun runs the script with the next, which has torch, and says so"
else
    echo "not ok 12 - first python3 on PATH lacks torch: exit $rc, saw '$(seen "$T/tr-path")'"
    grep -i "interpreter\|python" "$T/tr-path.console" | tail -n 5 | sed 's/^/# /'
fi
(cd "$T" && timeout $((60 * mult)) env -u ECOORD_PYTHON PATH="$T/notorch" "$ECOORD" torchrun \
    $ARGS "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/tr-nopath.console" 2>&1)
rc=$?
if [ "$rc" = 1 ] && grep -q "imports torch" "$T/tr-nopath.console" &&
   grep -q "$T/notorch/python3 (ModuleNotFoundError" "$T/tr-nopath.console" &&
   grep -q -- "--python=" "$T/tr-nopath.console" && grep -q "ECOORD_PYTHON" "$T/tr-nopath.console" &&
   ! grep -q "registered" "$T/tr-nopath.console"; then
    echo "ok 13 - no python3 with torch on PATH: exit 1 before joining, naming the one tried and the fix"
else
    echo "not ok 13 - no python3 with torch: exit $rc"; tail -n 5 "$T/tr-nopath.console" | sed 's/^/# /'
fi

# torchrun's console: each worker writes to torchrun's own stdout and
# stderr (no --redirects/--tee: workers inherit them, torchrun's
# multiprocessing/api.py), so every rank's lines show, unprefixed; and
# torchrun writes no file in the working directory.  Tests 6-7 ran both in
# $T: the same lines, and no ./log.
# Each rank's line, wherever it starts: two workers that share one console
# under torchrun can interleave a line's text and its newline (python -u
# writes them apart), gluing "...allreduce=2torch rank 1/2 ...".
lines() { grep -ao 'torch rank [0-9]*/[0-9]* allreduce=[0-9.]*' "$1" | sort | tr '\n' ';'; }
if [ "$(lines "$T/tr-torch.console")" = "torch rank 0/2 allreduce=2;torch rank 1/2 allreduce=2;" ] &&
   [ "$(lines "$T/tr-ecoord.console")" = "$(lines "$T/tr-torch.console")" ] && [ ! -e "$T/log" ]; then
    echo "ok 14 - every rank's output on the console as under torchrun, and no ./log"
else
    echo "not ok 14 - console: torchrun '$(lines "$T/tr-torch.console")', ecoord '$(lines "$T/tr-ecoord.console")'; ./log: $(ls -d "$T/log" 2>&1)"
fi

# --tee=3 --log_dir=D: each line of each rank on the console after
# "[<role><local_rank>]:" (torchrun's tail_log.py), and both streams in
# D/<run_id>_*/attempt_0/<local_rank>/{stdout,stderr}.log, the same files
# torchrun makes.
(cd "$T" && OUT_DIR="$T/tr-torch" STEPS=1 timeout $((120 * mult)) $TORCHRUN $ARGS --tee=3 \
    --log_dir="$T/tl-torch" "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/tee-torch.console" 2>&1)
(cd "$T" && OUT_DIR="$T/tr-ecoord" STEPS=1 ECOORD_PYTHON=$PY timeout $((120 * mult)) "$ECOORD" torchrun \
    $ARGS --tee=3 --log_dir="$T/tl-ecoord" "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/tee-ecoord.console" 2>&1)
tee_lines() { grep -a '^\[default[01]\]:torch rank' "$1" | sort | tr '\n' ';'; }
layout() { (cd "$1" 2>/dev/null && find . -type f | sed 's|^\./[^/]*/|RUN/|' | sort | tr '\n' ' '); }
want_tee="[default0]:torch rank 0/2 allreduce=2;[default1]:torch rank 1/2 allreduce=2;"
if [ "$(tee_lines "$T/tee-torch.console")" = "$want_tee" ] && [ "$(tee_lines "$T/tee-ecoord.console")" = "$want_tee" ] &&
   [ -n "$(layout "$T/tl-torch")" ] && [ "$(layout "$T/tl-ecoord")" = "$(layout "$T/tl-torch")" ] &&
   grep -q "^torch rank 1/2 allreduce=2" "$T"/tl-ecoord/*/attempt_0/1/stdout.log; then
    echo "ok 15 - --tee=3 --log_dir: torchrun's [default<N>]: prefix and its files ($(layout "$T/tl-ecoord"))"
else
    echo "not ok 15 - tee: torchrun '$(tee_lines "$T/tee-torch.console")' files '$(layout "$T/tl-torch")'; ecoord '$(tee_lines "$T/tee-ecoord.console")' files '$(layout "$T/tl-ecoord")'"
    tail -n 5 "$T/tee-ecoord.console" | sed 's/^/# /'
fi

# torchrun's static rendezvous, as SLURM recipes write it: every node runs
# --nnodes=2 --node_rank=K --master_addr=A --master_port=P.  Node 0 serves
# the job's etcd at A:P; node 1, started first, waits for it; each node's
# node_rank is its place (RANK = node_rank * nproc + local rank), whatever
# order they registered in; both exit 0.
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sport=$(free_port)
mkdir -p "$T/st0" "$T/st1"
static_node() { # NODE_RANK
    (cd "$T" && OUT_DIR="$T/st$1" STEPS=1 ECOORD_PYTHON=$PY timeout $((120 * mult)) "$ECOORD" torchrun \
        --nnodes=2 --node_rank="$1" --master_addr=127.0.0.1 --master_port="$sport" --nproc_per_node=1 \
        --node_id="static$1" "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/static$1.console" 2>&1) &
    epid=$!
    pids="$pids $epid"
}
static_node 1
pid_s1=$epid
wait_for "$T/static1.console" 1 10
static_node 0
pid_s0=$epid
wait "$pid_s0"; rc0=$?
wait "$pid_s1"; rc1=$?
if [ "$rc0" = 0 ] && [ "$rc1" = 0 ] && [ "$(cat "$T"/st0/torch.* 2>/dev/null)" = "1 0 2 2" ] &&
   [ "$(cat "$T"/st1/torch.* 2>/dev/null)" = "1 1 2 2" ] &&
   grep -q "this node serves the job's etcd at 127.0.0.1:$sport" "$T/static0.console"; then
    echo "ok 16 - static rendezvous (--node_rank, --master_addr/--master_port): node 0 serves the etcd, each node_rank is its place, both exit 0"
else
    echo "not ok 16 - static: exit $rc0 and $rc1, node 0 saw '$(cat "$T"/st0/torch.* 2>/dev/null)', node 1 '$(cat "$T"/st1/torch.* 2>/dev/null)'"
    tail -n 8 "$T/static0.console" "$T/static1.console" | sed 's/^/# /'
fi

# torchrun's c10d rendezvous: --rdzv_backend=c10d --rdzv_endpoint=HOST:PORT
# on every node; the node that owns HOST serves the etcd there (on loopback
# both do: the first to start serves it, the other uses it).
cport=$(free_port)
mkdir -p "$T/c10d"
c10d_node() { # NODE_ID
    (cd "$T" && OUT_DIR="$T/c10d" STEPS=1 ECOORD_PYTHON=$PY timeout $((120 * mult)) "$ECOORD" torchrun \
        --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$cport" --rdzv_id=c10djob \
        --nproc_per_node=1 --node_id="$1" "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/$1.console" 2>&1) &
    epid=$!
    pids="$pids $epid"
}
c10d_node c10da
pid_a=$epid
c10d_node c10db
pid_b=$epid
wait "$pid_a"; rc_a=$?
wait "$pid_b"; rc_b=$?
served=$(grep -l "this node serves the job's etcd at 127.0.0.1:$cport" "$T/c10da.console" "$T/c10db.console" 2>/dev/null | wc -l)
if [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] && [ "$served" = 1 ] &&
   [ "$(cat "$T"/c10d/torch.* 2>/dev/null | sort | tr '\n' ';')" = "1 0 2 2;1 1 2 2;" ]; then
    echo "ok 17 - c10d rendezvous (--rdzv_endpoint=HOST:PORT): one node serves the etcd there, world 2, both exit 0"
else
    echo "not ok 17 - c10d: exit $rc_a and $rc_b, $served serving, saw '$(cat "$T"/c10d/torch.* 2>/dev/null | tr '\n' ';')'"
    tail -n 8 "$T/c10da.console" "$T/c10db.console" | sed 's/^/# /'
fi

# PYTHON_EXEC: torchrun's interpreter override (torch's run.py reads it), the
# same under `ecoord torchrun` with no --python or ECOORD_PYTHON: a wrapper
# that notes each script it runs and then runs Debian's python3.
printf '#!/bin/sh\necho "$*" >> "$PYEXEC_LOG"\nexec %s "$@"\n' "$PY" > "$T/pyexec"
chmod +x "$T/pyexec"
mkdir -p "$T/pe-torch" "$T/pe-ecoord"
(cd "$T" && PYTHON_EXEC="$T/pyexec" PYEXEC_LOG="$T/pe-torch.log" OUT_DIR="$T/pe-torch" STEPS=1 \
    timeout $((120 * mult)) $TORCHRUN $ARGS "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/pe-torch.console" 2>&1)
(cd "$T" && PYTHON_EXEC="$T/pyexec" PYEXEC_LOG="$T/pe-ecoord.log" OUT_DIR="$T/pe-ecoord" STEPS=1 \
    timeout $((120 * mult)) "$ECOORD" torchrun $ARGS "$SRCDIR/tests/progs/torch_allreduce.py" \
    > "$T/pe-ecoord.console" 2>&1)
ran() { grep -c "torch_allreduce.py" "$1" 2>/dev/null; }
if [ "$(ran "$T/pe-torch.log")" = 2 ] && [ "$(ran "$T/pe-ecoord.log")" = 2 ] &&
   [ "$(lines "$T/pe-ecoord.console")" = "torch rank 0/2 allreduce=2;torch rank 1/2 allreduce=2;" ] &&
   grep -q "interpreter $T/pyexec: PYTHON_EXEC, imports torch" "$T/pe-ecoord.console"; then
    echo "ok 18 - PYTHON_EXEC runs the script under torchrun and ecoord torchrun alike (2 ranks each), and ecoord says so"
else
    echo "not ok 18 - PYTHON_EXEC: torchrun ran $(ran "$T/pe-torch.log"), ecoord $(ran "$T/pe-ecoord.log"); '$(lines "$T/pe-ecoord.console")'"
    tail -n 5 "$T/pe-ecoord.console" | sed 's/^/# /'
fi

# TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (torch >= 2.2 reads it; Debian's 1.13
# does not, so the lines are checked against what torch's
# string.Template.safe_substitute gives): each rank's lines after its global
# and local rank, and $$ as one $.
(cd "$T" && TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[rank${rank}/$local_rank $$]: ' OUT_DIR="$T/tr-ecoord" \
    STEPS=1 ECOORD_PYTHON=$PY timeout $((120 * mult)) "$ECOORD" torchrun $ARGS --tee=3 \
    "$SRCDIR/tests/progs/torch_allreduce.py" > "$T/tpl.console" 2>&1)
tpl_lines() { grep -a '^\[rank[01]/[01] \$\]: torch rank' "$1" | sort | tr '\n' ';'; }
want_tpl='[rank0/0 $]: torch rank 0/2 allreduce=2;[rank1/1 $]: torch rank 1/2 allreduce=2;'
if [ "$(tpl_lines "$T/tpl.console")" = "$want_tpl" ] && ! grep -q '^\[default[01]\]:' "$T/tpl.console"; then
    echo "ok 19 - TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: --tee's lines after the filled template"
else
    echo "not ok 19 - template: '$(tpl_lines "$T/tpl.console")'"
    tail -n 5 "$T/tpl.console" | sed 's/^/# /'
fi
