#!/bin/sh
# The one test command: install dependencies, build, run every test.
# Usage: tests/run-all.sh            (from the top of a checkout)
# Environment: CI=true turns warnings into errors; EC_TEST_TIMEOUT_MULTIPLIER
# stretches every test deadline on slow machines; EC_SKIP_TSAN=1 skips the
# ThreadSanitizer step (tests/tsan.sh).
set -eu
cd "$(dirname "$0")/.."
. tests/lib/configured.sh
sh tests/install-deps.sh
# shellcheck disable=SC3013 # -nt: dash, bash and busybox sh all have it
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi
# Configured before a dependency was installed or changed (the demo
# configures without the test packages): configure again, or the tests run
# without what configure did not find (deps_stale, config.deps).
if [ -f Makefile ]; then configure_again_if_stale; else ./configure ${CONFIGURE_FLAGS:-}; fi
make -j"$(nproc)"
status=0
# Tests run one at a time: the integration tests start etcd, agents and
# training processes, and two at once on a 2-core machine starve each other's
# deadlines.  EC_TEST_TIMEOUT_MULTIPLIER stretches every deadline.
export EC_TEST_TIMEOUT_MULTIPLIER="${EC_TEST_TIMEOUT_MULTIPLIER:-2}"
make -j"$(nproc)" check TESTS= >/dev/null   # build the test programs in parallel
make -j1 check || status=$?
# The threaded tests again under ThreadSanitizer, in a build of their own
# (build/tsan: this build is untouched); its line follows the closing line.
if [ "${EC_SKIP_TSAN:-}" = 1 ]; then
    tsan_line="tsan: skipped (EC_SKIP_TSAN=1)"
else
    mkdir -p build
    tsan_rc=0
    sh tests/tsan.sh build/tsan > build/tsan.out 2>&1 || tsan_rc=$?
    tsan_line=$(tail -n1 build/tsan.out)
    case $tsan_rc in
    0) ;;
    77) tsan_line="$tsan_line; NOT RUN: the ThreadSanitizer step (build/tsan.out)" ;;
    *) sed '$d' build/tsan.out | tail -n 60
       tsan_line="$tsan_line; FAILED (build/tsan.out)" ;;
    esac
    # a step that could not run did not pass, as for the C tests (tests_summary)
    [ "$tsan_rc" = 0 ] || [ "$status" != 0 ] || status=1
fi
# One closing line for any reader: "N passed, N failed, N skipped (N results
# of N test programs)", and what configure compiled out (tests_summary).
if [ -f test-suite.log ]; then
    [ "$status" = 0 ] || grep -E '^(FAIL|ERROR|not ok)' test-suite.log | head -n 40 || true
    tests_summary "$status" test-suite.log config.deps "$(make -s list-tests | wc -l)" || status=$?
fi
echo "$tsan_line"
exit "$status"
