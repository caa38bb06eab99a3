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
# is there (EC_TSAN_OPTIONS=halt_on_error=0 to see every report of a run).  Suppressions (tests/tsan.supp) name third-party libraries only.
#
# Exit 0: built, ran, no report.  77: skipped (EC_SKIP_TSAN=1, or no
# compiler that links -fsanitize=thread).  Anything else: a failure.  The
# last line is the step's summary, "tsan: N passed, N failed, ...".
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
# listeners, Check's harness around the node), the worker library's
# off-thread calls, the etcd client's lease keepalive and watch threads, and
# t2000's cases that run every coordinator thread (see T2000_ONLY).
UNIT="coord/test/test_probe coord/test/test_metrics coord/test/test_check \
coord/test/test_node_policy worker/test/test_offthread"
INTEG="tests/t1100-etcd-lease tests/t1200-etcd-watch tests/t2000-coord"
# t2000 whole takes minutes under TSan.  These cases run the election,
# registration, publishing, a follower's model, eviction with probes (the
# ring and probe server threads), a leader killed and a graceful leave:
# every thread of the node, through the changes that hand state between
# them, and leadership read from another thread.  Left out: the cases that
# repeat those paths with longer waits (lease expiry, TTLs), and those that
# depend on the order nodes start in (standby_promotion_keeps_ranks: under
# TSan the standby registers before the first epoch forms and is a member).
T2000_ONLY=${EC_TSAN_T2000_ONLY:-leadership_is_read_from_another_thread,first_epoch_at_max_at_once,graceful_leave_reforms_at_once,leader_kill9_replaced,silent_member_evicted_before_its_ttl}
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
# Only what the chosen tests need, not every test program.
PROGS="ecoord tests/ec-test-node tests/ec-test-prog"
make -j"${EC_TSAN_JOBS:-$(nproc)}" $PROGS $UNIT $INTEG > make.out 2>&1 ||
    { tail -n 30 make.out; echo "tsan: the TSan build failed (build/tsan/make.out)"; exit 1; }
T1=$(date +%s)

rm -rf reports
mkdir reports
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 \
suppressions=$SRC/tests/tsan.supp log_path=$DIR/reports/tsan ${EC_TSAN_OPTIONS:-}"
export TSAN_OPTIONS
export EC_TEST_ONLY="$T2000_ONLY"
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
field() { sed -n "s/^# $1: *//p" test-suite.log 2> /dev/null | head -n1; }
echo "tsan: ${nrep} reports; $(field PASS) passed, $(($(field FAIL) + $(field ERROR) + $(field XPASS))) failed," \
    "$(field SKIP) skipped ($(field TOTAL) results of $(echo $UNIT $INTEG | wc -w) test programs," \
    "t2000: $T2000_ONLY); build $((T1 - T0)) s, tests $((T2 - T1)) s"
exit "$status"
