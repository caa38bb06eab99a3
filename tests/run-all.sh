#!/bin/sh
# The one test command: install dependencies, build, run every test.
# Usage: tests/run-all.sh            (from the top of a checkout)
# Environment: CI=true turns warnings into errors; EC_TEST_TIMEOUT_MULTIPLIER
# stretches every test deadline on slow machines.
set -eu
cd "$(dirname "$0")/.."
sh tests/install-deps.sh
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi
[ -f Makefile ] || ./configure ${CONFIGURE_FLAGS:-}
make -j"$(nproc)"
status=0
# Tests run one at a time: the integration tests start etcd, agents and
# training processes, and two at once on a 2-core machine starve each other's
# deadlines.  EC_TEST_TIMEOUT_MULTIPLIER stretches every deadline.
export EC_TEST_TIMEOUT_MULTIPLIER="${EC_TEST_TIMEOUT_MULTIPLIER:-2}"
make -j"$(nproc)" check TESTS= >/dev/null   # build the test programs in parallel
make -j1 check || status=$?
# One closing line for any reader: "N passed, N failed, N skipped".
if [ -f test-suite.log ]; then
    pass=$(sed -n 's/^# PASS: *//p' test-suite.log | head -n1)
    fail=$(sed -n 's/^# FAIL: *//p' test-suite.log | head -n1)
    err=$(sed -n 's/^# ERROR: *//p' test-suite.log | head -n1)
    skip=$(sed -n 's/^# SKIP: *//p' test-suite.log | head -n1)
    [ "$status" = 0 ] || cat test-suite.log | grep -E '^(FAIL|ERROR|not ok)' | head -n 40 || true
    echo "${pass:-0} passed, $(( ${fail:-0} + ${err:-0} )) failed, ${skip:-0} skipped"
fi
exit "$status"
