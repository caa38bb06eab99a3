#!/bin/sh
# Lifecycle soak as a benchmark: tests/t7200-lifecycle-soak for as long as
# you like, with a seed you can replay.  Not part of `make check` (CI runs
# the same program for SOAK_SECONDS=30).
#
#   tests/bench/soak.sh [SOAK_SECONDS=600] [SEED=time] [SOAK_PERIOD_MS=1200]
#
# Prints the soak's TAP and its summary line (events survived per kind,
# epochs, leaked processes, leftover keys, fd/RSS of the long-lived agents);
# exits 0 when every rule held.  Replay a failure with the seed it printed:
#   SOAK_SEED=<seed> tests/bench/soak.sh 60
# (the event sequence follows the seed; timing on a loaded machine can still
# make runs differ).  EC_TEST_TIMEOUT_MULTIPLIER stretches every deadline.
set -u
cd "$(dirname "$0")/../.." || exit 1
TOP=$(pwd)
SOAK_SECONDS=${1:-${SOAK_SECONDS:-600}}
SOAK_SEED=${2:-${SEED:-${SOAK_SEED:-$(date +%s)}}}
SOAK_PERIOD_MS=${3:-${SOAK_PERIOD_MS:-1200}}
case "$SOAK_SECONDS$SOAK_SEED$SOAK_PERIOD_MS" in
*[!0-9]*) echo "soak.sh: SOAK_SECONDS, SEED and SOAK_PERIOD_MS must be whole numbers" \
    "(got '$SOAK_SECONDS', '$SOAK_SEED', '$SOAK_PERIOD_MS')" >&2; exit 2 ;;
esac
T=$TOP/tests/t7200-lifecycle-soak
[ -x "$T" ] || { echo "soak.sh: $T not built: run 'make check TESTS=' (or make tests/t7200-lifecycle-soak) first" >&2; exit 1; }
ECOORD=${ECOORD:-$TOP/ecoord}
EC_TEST_PROG=${EC_TEST_PROG:-$TOP/tests/ec-test-prog}
[ -x "$ECOORD" ] && [ -x "$EC_TEST_PROG" ] || { echo "soak.sh: build first: make && make check TESTS=" >&2; exit 1; }
export ECOORD EC_TEST_PROG SOAK_SECONDS SOAK_SEED SOAK_PERIOD_MS
echo "# soak.sh: $SOAK_SECONDS s, seed $SOAK_SEED, an event every ~$SOAK_PERIOD_MS ms"
exec "$T"
