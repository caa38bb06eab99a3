#!/bin/sh
# Rule checked: the GPU suite's bundle (tests/gpu/bundle.sh) runs where none
# of ecoord's Debian dependencies are: every binary in it loads its libraries
# from the bundle (only glibc, the C++ runtime and the GPU stack from the
# machine), it fits what a device call may carry (64 MiB), and from a clean
# environment its run.sh passes the loader check and, without a GPU, says
# SKIP for every GPU check (a GPU machine runs them); the benchmark and the
# test program it carries run from it as from a build tree (here over Gloo).
set -u
src=${EC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${EC_BUILDDIR:-$src}
tmp=$(mktemp -d /tmp/ec-t0070-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() {
    n=$((n + 1))
    echo "not ok $n - $1"
    [ -n "${2:-}" ] && sed 's/^/# /' "$2" | tail -n 30
    return 0
}
if ! command -v patchelf >/dev/null 2>&1; then
    echo "1..0 # SKIP patchelf is missing (apt-get install patchelf; tests/install-deps.sh does)"
    exit 0
fi
echo "1..6"
B=$tmp/out/ecoord-gpu
if sh "$src/tests/gpu/bundle.sh" "$build" "$tmp/out" > "$tmp/bundle.txt" 2>&1 &&
    [ -s "$tmp/out/ecoord-gpu.tar.gz" ]; then
    ok "bundle built"
else
    notok "bundle built" "$tmp/bundle.txt"
    exit 0
fi
size=$(wc -c < "$tmp/out/ecoord-gpu.tar.gz")
echo "# bundle: $((size / 1048576)) MiB compressed, $(find "$B/lib" -name "*.so*" | wc -l) libraries"
if [ "$size" -lt $((64 * 1048576)) ]; then
    ok "the bundle fits a device call's 64 MiB ($((size / 1048576)) MiB)"
else
    notok "the bundle fits a device call's 64 MiB ($((size / 1048576)) MiB)"
fi

# nothing loads from this machine but glibc, the C++ runtime and the GPU stack
outside=""
for f in "$B/ecoord" "$B/.libs/libecworker.so.0" "$B/worker/examples/linreg" \
    "$B/worker/test/test_worker_prog" "$B/tests/t4000-worker" "$B"/lib/*.so*; do
    o=$(ldd "$f" | awk -v b="$B" '$2 == "=>" && $3 ~ /^\// && index($3, b) != 1 { print $1 }' |
        grep -v -E '^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so' || true)
    [ -n "$o" ] && outside="$outside ${f#"$B"/}: $o;"
done
if [ -z "$outside" ]; then
    ok "every binary and library loads the bundle's libraries"
else
    echo "$outside" > "$tmp/outside.txt"
    notok "every binary and library loads the bundle's libraries" "$tmp/outside.txt"
fi

# run.sh from a clean environment
(cd "$tmp" && env -i PATH=/usr/bin:/bin HOME="$tmp" sh "$B/run.sh" "$tmp/run") > "$tmp/run.txt" 2>&1
rc=$?
gpu=$(grep -c '^device:' "$tmp/run.txt")
skips=$(grep -c '^SKIP' "$tmp/run.txt")
if [ $rc -eq 0 ] && grep -q '^PASS loader' "$tmp/run.txt" &&
    { [ "$gpu" -gt 0 ] || [ "$skips" -eq 8 ]; }; then
    ok "run.sh: loader PASS, $skips SKIP without a GPU, exit 0"
else
    notok "run.sh: loader PASS, 8 SKIP without a GPU, exit 0 (rc $rc)" "$tmp/run.txt"
fi

# the benchmark the GPU checks use, from the bundle, over Gloo
(cd "$tmp" && env -i PATH=/usr/bin:/bin HOME="$tmp" NPROC=1 MODES=inprocess SCENARIOS=leave \
    timeout 120 sh "$B/tests/bench/bench_recovery.sh" 1 2 "$tmp/bench.json") > "$tmp/bench.txt" 2>&1
# five phases, each p50/max in ms, none negative (step: the ranks' own clocks)
if grep -Eq '^inprocess +leave( +[0-9]+/[0-9]+){5} *$' "$tmp/bench.txt"; then
    ok "bench_recovery.sh runs from the bundle: $(grep '^inprocess  leave' "$tmp/bench.txt" | tr -s ' ')"
else
    notok "bench_recovery.sh runs from the bundle" "$tmp/bench.txt"
fi

# t4000-worker from the bundle, with its etcd and test program
(cd "$B" && env -i PATH=/usr/bin:/bin HOME="$tmp" ETCD="$B/bin/etcd" \
    ECW_TEST_WORKER="$B/worker/test/test_worker_prog" \
    EC_TEST_ONLY=gloo_runs_where_cuda_libraries_cannot_be_loaded \
    timeout 120 "$B/tests/t4000-worker") > "$tmp/t4000.txt" 2>&1
if grep -q '^ok 1 ' "$tmp/t4000.txt" && ! grep -q '^not ok' "$tmp/t4000.txt"; then
    ok "t4000-worker runs from the bundle with its etcd"
else
    notok "t4000-worker runs from the bundle with its etcd" "$tmp/t4000.txt"
fi
