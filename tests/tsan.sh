#!/bin/sh
# The coordinator's and the worker library's threads under ThreadSanitizer:
# a second build configured with --enable-tsan in build/tsan, and the tests
# that run those threads, which pass only with no TSan report from any
# process they start (agents, test nodes and training processes included).
# tests/run-all.sh runs it after the main suite; EC_SKIP_TSAN=1 skips it.
#
#   sh tests/tsan.sh [DIR]        default DIR: build/tsan (git-ignored)
#
# Why a copy of the sources and not a VPATH build: run-all.sh configures in
# the source tree, and automake refuses a VPATH build of a configured tree
# (make would take the in-tree objects for the build's own).  The copy keeps
# each file's time, so a second run recompiles only what changed.
#
# Reports: each process writes its own to DIR/reports (TSAN_OPTIONS
# log_path), halts at the first (exit 66), and the step fails when any file
# is there (EC_TSAN_OPTIONS=halt_on_error=0 to see every report of a run).
# Environment: EC_SKIP_TSAN=1, EC_TSAN_ONLY (below), EC_TSAN_OPTIONS,
# TSAN_CC (the compiler tried first; gcc), EC_TSAN_JOBS (make -j).
# Suppressions (tests/tsan.supp) name third-party libraries only.
#
# Exit 0: built, ran, no report.  77: skipped (EC_SKIP_TSAN=1, or no
# compiler that links -fsanitize=thread).  Anything else: a failure.  The
# last line is the step's summary, "tsan: N reports; N passed, N failed, ...".
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-build/tsan}

if [ "${EC_SKIP_TSAN:-}" = 1 ]; then
    echo "tsan: skipped (EC_SKIP_TSAN=1)"
    exit 77
fi
# run-all.sh's make passes its flags down; this build is make's own.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

# The unit tests with threads of ours (probe server, metrics prober, port
# listeners, the in-memory etcd's reaper, keepalives and watches, and every
# coordinator thread on it), the worker library's off-thread calls and Gloo
# shim (below, where Gloo is), the etcd client's lease keepalive and watch threads
# (t1100, t1200), t2000 (every coordinator thread) and the cases of t4000
# that run every worker library thread (CASES).
UNIT="coord/node/test/test_probe coord/agent/test/test_metrics coord/check/test/test_check \
coord/node/test/test_node_policy worker/test/test_offthread coord/etcd/test/test_etcd_mem \
coord/node/test/test_node_mem"
INTEG="tests/t1100-etcd-lease tests/t1200-etcd-watch tests/t2000-coord tests/t4000-worker"
# t2000's and t4000's cases, by name (EC_TEST_ONLY; no other test above
# selects by it).  t2000 whole (its names read from its source): 75 s under
# TSan on an idle 2-core machine.  t4000's: the library's epoch follower,
# fence threads (poll and watchdog) and request thread, with the Gloo and
# none backends: a collective released by an epoch, an ecw_iallreduce,
# ecw_wait_epoch woken and fenced, the per-epoch store; its other cases
# train through more membership changes with the same threads.
# EC_TSAN_ONLY=name,... runs those cases instead; EC_TSAN_ONLY=all runs
# t2000 and t4000 whole.
T2000_ALL=$(sed -n 's/^ *ec_tcase_add(t, \([a-z0-9_]*\));/\1/p' "$SRC/tests/t2000-coord.c" | paste -sd, -)
CASES=${EC_TSAN_ONLY:-$T2000_ALL,silent_peer_released_by_epoch_change,\
iallreduce_waits_with_a_deadline_and_is_released_by_an_epoch,\
none_backend_follows_epochs_and_claims_ranks,wait_epoch_wakes_on_new_epoch_and_times_out,\
wait_epoch_returns_unconfirmed_when_fence_trips,epoch_kv_put_by_one_member_got_by_another}
# TSan slows each process several times: stretch every test deadline (run-all.sh sets 2).
EC_TEST_TIMEOUT_MULTIPLIER=$(( ${EC_TEST_TIMEOUT_MULTIPLIER:-1} * 2 ))
export EC_TEST_TIMEOUT_MULTIPLIER

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
T0=$(date +%s)

# The sources: what git tracks or would track, and what autoreconf made.
if git -C "$SRC" rev-parse --git-dir > /dev/null 2>&1; then
    (cd "$SRC" && git ls-files --cached --others --exclude-standard | tar -cf - -T -) |
        tar -xf - -C "$DIR" 2>/dev/null ||
        { echo "tsan: could not copy the sources into $DIR"; exit 1; }
else
    echo "tsan: $SRC is not a git checkout: no list of its sources to copy"
    exit 77
fi
for f in configure config.h.in Makefile.in aclocal.m4 build-aux m4; do
    [ -e "$SRC/$f" ] || continue
    rm -rf "${DIR:?}/$f"
    cp -pR "$SRC/$f" "$DIR/"
done
[ -x "$DIR/configure" ] || { echo "tsan: no configure in $SRC (run autoreconf -fi)"; exit 1; }

cd "$DIR"
# shellcheck disable=SC3013 # -nt: dash and bash have it (run-all.sh uses it too)
if [ ! -f Makefile ] || [ configure -nt config.status ]; then
    # gcc's runtime (libtsan2) is tried first; clang (libclang-rt-14-dev) after.
    ok=no
    for cc in "${TSAN_CC:-gcc}" clang; do
        command -v "$cc" > /dev/null 2>&1 || continue
        if ./configure --enable-tsan CC="$cc" CXX="$(echo "$cc" | sed 's/gcc$/g++/;s/clang$/clang++/')" \
            > configure.out 2>&1; then
            ok=yes
            break
        fi
    done
    if [ $ok = no ]; then
        echo "tsan: configure --enable-tsan failed with gcc and clang: $(grep -m1 'error:' configure.out)"
        echo "tsan: skipped (install libtsan2 for gcc, or libclang-rt-14-dev for clang)"
        exit 77
    fi
fi
# The Gloo shim's own test (its abort thread and Gloo's pair threads), where
# configure found Gloo.
if grep -qx "found gloo yes" config.deps 2> /dev/null; then
    UNIT="$UNIT worker/test/test_gloo_shim"
fi
# Only what the chosen tests need, not every test program.
PROGS="ecoord tests/ec-test-node tests/ec-test-prog worker/examples/linreg worker/test/test_worker_prog"
# shellcheck disable=SC2086 # word lists, on purpose
make -j"${EC_TSAN_JOBS:-$(nproc)}" $PROGS $UNIT $INTEG > make.out 2>&1 ||
    { tail -n 30 make.out; echo "tsan: the TSan build failed ($DIR/make.out)"; exit 1; }
T1=$(date +%s)

rm -rf reports
mkdir reports
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 \
suppressions=$SRC/tests/tsan.supp log_path=$DIR/reports/tsan ${EC_TSAN_OPTIONS:-}"
export TSAN_OPTIONS
if [ "$CASES" = all ]; then unset EC_TEST_ONLY; else export EC_TEST_ONLY="$CASES"; fi
status=0
make check-TESTS check_PROGRAMS="$PROGS" TESTS="$UNIT $INTEG" > check.out 2>&1 || status=$?
T2=$(date +%s)

# Any report, from any process, fails the step.
nrep=$(find reports -type f | wc -l)
if [ "$nrep" != 0 ]; then
    status=1
    for r in reports/*; do
        echo "---- $DIR/$r"
        head -n 40 "$r"
    done
fi
[ "$status" = 0 ] || grep -E '^(FAIL|ERROR|not ok)' test-suite.log | head -n 20 || true
field() {
    v=$(sed -n "s/^# $1: *//p" test-suite.log 2> /dev/null | head -n1)
    echo "${v:-0}"
}
nprog=$(echo "$UNIT $INTEG" | wc -w)
if [ "$CASES" = all ]; then ncases=all; else ncases=$(echo "$CASES" | tr , '\n' | wc -l); fi
echo "tsan: ${nrep} reports; $(field PASS) passed, $(($(field FAIL) + $(field ERROR) + $(field XPASS))) failed," \
    "$(field SKIP) skipped ($(field TOTAL) results of $nprog test programs," \
    "t2000 and t4000: $ncases cases); build $((T1 - T0)) s, tests $((T2 - T1)) s"
exit "$status"
