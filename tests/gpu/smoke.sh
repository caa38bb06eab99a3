#!/bin/sh
# Build tests/gpu/smoke.c (the NCCL backend's pieces against a real GPU, no
# etcd needed) with the CUDA under $CUDA (default /usr/local/cuda) and run
# it.  Not part of `make check`: it needs a GPU.  Exit 0 when every check
# passed; the output says what each one saw.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
cuda=${CUDA:-/usr/local/cuda}
out=${1:-${TMPDIR:-/tmp}/ecw-gpu-smoke}
${CC:-cc} -std=gnu11 -O1 -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation \
    -DECW__CUDA_LIBDIR_DEFAULT="\"$cuda/lib64\"" -I"$cuda/include" -I"$src/worker" -I"$src/coord/util" \
    "$src/tests/gpu/smoke.c" "$src/worker/cuda_dl.c" "$src/worker/gpu_policy.c" \
    "$src/worker/offthread.c" "$src/coord/util/error.c" \
    -L"$cuda/lib64" -Wl,-rpath,"$cuda/lib64" -lcudart -ldl -pthread -o "$out"
exec "$out"
