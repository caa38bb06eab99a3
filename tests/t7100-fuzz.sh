#!/bin/sh
# A short libFuzzer run of every target in tests/fuzz/ (records, flags,
# endpoints, planner), as a TAP test: one result per target.  Each starts
# from the seeds tests/fuzz/seeds writes (generated from our encoders, plus
# regression inputs of bugs the targets found) and runs EC_FUZZ_SECONDS
# (default 4) seconds.  Skips, saying why, when clang or libFuzzer is missing.
#
# A longer run (documented in README.md, "Fault injection and fuzzing"):
#   EC_FUZZ_SECONDS=600 EC_FUZZ_CORPUS=fuzz-corpus sh tests/t7100-fuzz.sh
# keeps its corpus in EC_FUZZ_CORPUS between runs; a failing input is saved as
# $EC_FUZZ_OUT/crash-<target>-* and replays with `build/fuzz/<target> FILE`.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${EC_FUZZ_OUT:-build/fuzz}
SECS=${EC_FUZZ_SECONDS:-4}
TARGETS="records flags endpoints planner"

if ! msg=$(sh "$SRC/tests/fuzz/build.sh" "$OUT" 2>&1); then
    rc=$?
    if [ "$rc" = 77 ]; then
        echo "1..0 # SKIP $(echo "$msg" | tail -n1)"
        exit 0
    fi
    echo "1..1"
    echo "not ok 1 - building the fuzz targets"
    echo "$msg" | sed 's/^/# /'
    exit 1
fi
OUT=$(cd "$OUT" && pwd)
CORPUS=${EC_FUZZ_CORPUS:-$OUT/corpus}
rm -rf "$OUT/seed"
"$OUT/seeds" "$OUT/seed" || { echo "1..0 # SKIP cannot write seeds"; exit 0; }

echo "1..4"
n=0
fail=0
for t in $TARGETS; do
    n=$((n + 1))
    mkdir -p "$CORPUS/$t"
    log="$OUT/fuzz_$t.log"
    # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: a leak
    # or runaway allocation; -error_exitcode: any crash or failed property.
    "$OUT/fuzz_$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=1024 -error_exitcode=1 \
        -print_final_stats=1 -artifact_prefix="$OUT/crash-$t-" "$CORPUS/$t" "$OUT/seed/$t" \
        >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
    if [ "$rc" = 0 ]; then
        echo "ok $n - fuzz_$t: ${runs:-?} inputs in ${SECS} s, no failure"
    else
        fail=1
        echo "not ok $n - fuzz_$t failed (log $log)"
        grep -E "property failed|ERROR: |SUMMARY|Test unit written" "$log" | head -n 8 | sed 's/^/# /'
    fi
done
exit $fail
