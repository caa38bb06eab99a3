#!/bin/sh
# Rule checked: the demo and the recovery benchmarks stop when told.  Each
# runs agents in the background; sent SIGTERM (what `timeout` and `kill`
# send, to the script alone) as soon as its first agent runs, so while the
# next ones start, a script stops every agent and exits at once.  Before,
# it cleaned up and went on with its next scenario (whose agents waited for
# an etcd that was gone); then, exiting, it missed an agent started just
# before the signal and not yet recorded (8 of 12 runs), which
# deploy/local/hold.sh closes.  SIGINT is trapped the same way (a script
# started in the background by a non-interactive shell, as here, ignores it
# from birth).  Each script runs in a session of its own, so its agents are
# found by process group; the agents' own processes are their janitors' to
# stop.
set -u
src=${EC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${EC_BUILDDIR:-.}
ECOORD=${ECOORD:-$build/ecoord}
LINREG=${ECW_LINREG:-$build/worker/examples/linreg}
mult=${EC_TEST_TIMEOUT_MULTIPLIER:-1}
command -v etcd >/dev/null 2>&1 || { echo "1..0 # SKIP no etcd binary"; exit 0; }
[ -x "$ECOORD" ] && [ -x "$LINREG" ] || { echo "1..0 # SKIP ecoord or linreg not built"; exit 0; }
command -v setsid >/dev/null 2>&1 || { echo "1..0 # SKIP no setsid"; exit 0; }
tmp=$(mktemp -d /tmp/ec-t0075-XXXXXX)
spid=""
cleanup() {
    [ -n "$spid" ] && kill -9 "-$spid" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s%3N; }
agents_of() { pgrep -g "$1" -f "ecoord launch" 2>/dev/null; }
alive() { kill -0 "$1" 2>/dev/null; }
n=0
result() { # STATUS NAME LOG
    n=$((n + 1))
    if [ "$1" = 0 ]; then echo "ok $n - $2"; else
        echo "not ok $n - $2"; tail -n 15 "$3" 2>/dev/null | sed 's/^/# /'
    fi
}
# run NAME SIGNAL COMMAND...: start it, wait for its agents, signal the script
run() {
    name=$1; sig=$2; shift 2
    log="$tmp/$name.$sig.log"
    (cd "$src" && ECOORD="$ECOORD" ECW_LINREG="$LINREG" exec setsid "$@") > "$log" 2>&1 &
    spid=$!
    dl=$(( $(now) + 60000 * mult ))
    while [ -z "$(agents_of "$spid")" ]; do
        if [ "$(now)" -gt "$dl" ] || ! alive "$spid"; then
            result 1 "$name: its agents never started" "$log"; kill -9 "-$spid" 2>/dev/null
            wait "$spid" 2>/dev/null; spid=""; return
        fi
        sleep 0.05
    done
    kill "-$sig" "$spid"
    dl=$(( $(now) + 10000 * mult ))
    while alive "$spid" || [ -n "$(agents_of "$spid")" ]; do
        [ "$(now)" -gt "$dl" ] && break
        sleep 0.05
    done
    left=$(agents_of "$spid" | wc -l)
    if alive "$spid"; then st=1; what="still running 10 s after SIG$sig"
    elif [ "$left" -gt 0 ]; then st=1; what="exited, $left of its agents left running"
    else st=0; what="exited, no agent left"; fi
    result $st "$name stops on SIG$sig: $what" "$log"
    kill -9 "-$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    spid=""
}
echo "1..3"
if [ -x "$src/ecoord" ] && [ -x "$src/worker/examples/linreg" ]; then
    run demo TERM env DEMO_STEPS=100000 sh deploy/local/demo.sh
else  # the demo builds in the source tree when it finds no build there
    n=$((n + 1)); echo "ok $n # SKIP demo: no build in the source tree (a VPATH build)"
fi

run bench_recovery TERM env MODES=inprocess SCENARIOS=leave sh tests/bench/bench_recovery.sh 1 2 "$tmp/r.json"
run bench_stall TERM sh tests/bench/bench_stall.sh 1
