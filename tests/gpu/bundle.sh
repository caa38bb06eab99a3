#!/bin/sh
# Build the GPU suite's bundle from a build tree: what tests/gpu/run.sh needs
# on a GPU machine that has the driver, CUDA and NCCL but none of ecoord's
# Debian build dependencies and no network (the lent machines: Ubuntu 24.04,
# glibc 2.39).  The bundle keeps the build tree's layout, so the benchmarks
# run from it as from a checkout:
#   ecoord, .libs/libecworker.so.0, worker/examples/linreg, worker/test/test_worker_prog,
#   tests/t4000-worker, tests/gpu/smoke (when CUDA's headers are here),
#   tests/gpu/illegal (when CUDA's compiler is: nvcc),
#   worker/python/ecoord/, worker/examples/torch_ddp.py, tests/bench/*.sh,
#   deploy/local/etcd.sh and hold.sh, bin/etcd (Debian's, a static Go binary), run.sh,
#   lib/ (the Debian libraries those load; RUNPATH $ORIGIN-relative, set with
#   patchelf), and a .tar.gz of it all.
# Left to the GPU machine: glibc and the C++ runtime (libc, libm, libstdc++,
# libgcc_s, ld-linux: newer there, and one copy per process), the driver,
# CUDA and NCCL (loaded at run time from the machine's own).
#
#   tests/gpu/bundle.sh [BUILD_DIR=.] [OUT_DIR=/tmp/ecoord-gpu]
#   -> OUT_DIR/ecoord-gpu/ and OUT_DIR/ecoord-gpu.tar.gz; prints the tarball's path.
# Needs: a built tree (make && make check TESTS=), patchelf (apt-get install
# patchelf; tests/install-deps.sh installs it), etcd.
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-.}" && pwd)
OUT=${2:-/tmp/ecoord-gpu}
B=$OUT/ecoord-gpu
die() { echo "bundle.sh: $*" >&2; exit 1; }
command -v patchelf >/dev/null 2>&1 || die "patchelf is missing: apt-get install patchelf (or sh tests/install-deps.sh)"
ETCD_BIN=${ETCD:-$(command -v etcd || true)}
[ -x "$ETCD_BIN" ] || die "no etcd binary: apt-get install etcd-server"
for f in ecoord .libs/libecworker.so.0 worker/examples/linreg worker/test/test_worker_prog tests/t4000-worker; do
    [ -e "$BUILD/$f" ] || die "$BUILD/$f is missing: build first (make && make check TESTS=)"
done
rm -rf "$B"
mkdir -p "$B/lib" "$B/bin" "$B/.libs" "$B/worker/examples" "$B/worker/test" "$B/tests/gpu" \
    "$B/tests/bench" "$B/deploy/local" "$B/worker/python"

# the ELF files, at their build-tree places
cp "$BUILD/ecoord" "$B/ecoord"
cp -L "$BUILD/.libs/libecworker.so.0" "$B/.libs/libecworker.so.0"
cp "$BUILD/worker/examples/linreg" "$B/worker/examples/linreg"
cp "$BUILD/worker/test/test_worker_prog" "$B/worker/test/test_worker_prog"
cp "$BUILD/tests/t4000-worker" "$B/tests/t4000-worker"
cp "$ETCD_BIN" "$B/bin/etcd"
CUDA=${CUDA:-/usr/local/cuda}
if [ -r "$CUDA/include/cuda_runtime_api.h" ] && { [ -r "$CUDA/include/nccl.h" ] || [ -r /usr/include/nccl.h ]; }; then
    # the NCCL backend's pieces against a real GPU (tests/gpu/smoke.sh's build);
    # libcudart from the GPU machine's CUDA, found through its usual places
    ${CC:-cc} -std=gnu11 -O1 -w -DECW__CUDA_LIBDIR_DEFAULT="\"$CUDA/lib64\"" -I"$CUDA/include" \
        -I"$SRC/worker" -I"$SRC/coord/util" "$SRC/tests/gpu/smoke.c" "$SRC/worker/cuda_dl.c" \
        "$SRC/worker/gpu_policy.c" "$SRC/worker/offthread.c" "$SRC/coord/util/error.c" \
        -L"$CUDA/lib64" -Wl,-rpath,"$CUDA/lib64:/usr/lib/x86_64-linux-gnu" -lcudart -ldl -pthread \
        -o "$B/tests/gpu/smoke" 2>/dev/null || echo "bundle.sh: tests/gpu/smoke not built (CUDA headers or libcudart unusable here); run.sh will skip it" >&2
fi

# a kernel with an illegal address (tests/gpu/illegal.cu), where CUDA's
# compiler is: the CUDA runtime shared (the one libecworker takes), found
# on the GPU machine under its CUDA; libecworker from the bundle
NVCC=${NVCC:-$CUDA/bin/nvcc}
if [ -x "$NVCC" ]; then
    if "$NVCC" -O1 -cudart shared -I"$SRC/worker" "$SRC/tests/gpu/illegal.cu" -L"$BUILD/.libs" \
        -lecworker -o "$B/tests/gpu/illegal" >/dev/null 2>&1; then
        # shellcheck disable=SC2016 # the loader's $ORIGIN
        patchelf --set-rpath '$ORIGIN/../../.libs:$ORIGIN/../../lib:'"$CUDA/lib64:/usr/local/cuda/lib64" \
            --force-rpath "$B/tests/gpu/illegal"
    else
        echo "bundle.sh: tests/gpu/illegal not built ($NVCC failed); run.sh will skip it" >&2
    fi
fi

# the scripts and the Python package
cp "$SRC/tests/gpu/run.sh" "$B/run.sh"
cp "$SRC/tests/gpu/README.md" "$B/README.md"
cp "$SRC/tests/bench/bench_recovery.sh" "$SRC/tests/bench/bench_torch_inprocess.sh" "$B/tests/bench/"
cp "$SRC/deploy/local/etcd.sh" "$SRC/deploy/local/hold.sh" "$B/deploy/local/"
cp "$SRC/worker/examples/torch_ddp.py" "$B/worker/examples/"
mkdir -p "$B/tests/progs"
cp "$SRC/tests/progs/torch_nccl_smoke.py" "$B/tests/progs/"
cp -R "$SRC/worker/python/ecoord" "$B/worker/python/"
find "$B/worker/python" -name __pycache__ -prune -exec rm -rf {} +

# Which libraries the GPU machine provides itself: glibc's, the C++ runtime,
# and the GPU stack.
system_lib() {
    case $1 in
        linux-vdso.so.*|ld-linux*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*) return 0 ;;
        libresolv.so.*|libutil.so.*|libstdc++.so.*|libgcc_s.so.*) return 0 ;;
        libcuda.so*|libcudart.so*|libnccl.so*|libnvidia*|libcublas*) return 0 ;;
    esac
    return 1
}
# every library the ELF files load, copied into lib/ (transitively: ldd)
for f in "$B/ecoord" "$B/.libs/libecworker.so.0" "$B/worker/examples/linreg" \
    "$B/worker/test/test_worker_prog" "$B/tests/t4000-worker"; do
    ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
    system_lib "$name" && continue
    [ -e "$B/lib/$name" ] || cp -L "$path" "$B/lib/$name"
done
# RUNPATHs: the bundle's lib/ first, relative to each file
rel_lib() {  # DIR of a file under $B -> the path from it to $B/lib
    d=${1#"$B"}; up=""
    while [ -n "$d" ] && [ "$d" != / ]; do up="$up/.."; d=$(dirname "$d"); done
    # shellcheck disable=SC2016 # $ORIGIN is the loader's, not the shell's
    printf '$ORIGIN%s/lib' "$up"
}
for f in "$B/ecoord" "$B/.libs/libecworker.so.0" "$B/worker/examples/linreg" \
    "$B/worker/test/test_worker_prog" "$B/tests/t4000-worker"; do
    patchelf --set-rpath "$(rel_lib "$(dirname "$f")")" --force-rpath "$f"
done
for f in "$B"/lib/*.so*; do
    # shellcheck disable=SC2016 # the loader's $ORIGIN
    patchelf --set-rpath '$ORIGIN' --force-rpath "$f"
done
# nothing of the bundle may still point into this machine's library folders
for f in "$B/ecoord" "$B/.libs/libecworker.so.0" "$B/worker/examples/linreg" \
    "$B/worker/test/test_worker_prog" "$B/tests/t4000-worker" "$B"/lib/*.so*; do
    ldd "$f" | awk -v b="$B" '$2 == "=>" && $3 ~ /^\// && index($3, b) != 1 { print $1 }' |
        while read -r name; do
            system_lib "$name" || die "$f still loads $name from outside the bundle"
        done
done
(cd "$OUT" && tar czf ecoord-gpu.tar.gz ecoord-gpu)
echo "$OUT/ecoord-gpu.tar.gz"
