/* A kernel's illegal address reaching the caller as ECW_ERESTART (issue 25;
 * docs/worker-api.md, "GPU notes"): one rank under `ecoord launch --np=1`
 * on a GPU.  An allreduce first (the communicator works), then a kernel on
 * the legacy default stream writes to an address no allocation holds, then
 * an allreduce on a device buffer and a barrier: both must return
 * ECW_ERESTART ("restart this process").  One line, "illegal-address PASS"
 * or "FAIL", and exit 0 on PASS.  Built by tests/gpu/bundle.sh with nvcc
 * where CUDA's compiler is (the CUDA runtime shared: one runtime per
 * process, the one libecworker takes). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "ecw.h"

__global__ void write_to(double *p)
{
    p[threadIdx.x] = 1.0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ecw_options_t o = ECW_OPTIONS_INIT;
    o.backend = ECW_BACKEND_NCCL;
    ecw_t *w = NULL;
    ecw_error_t err;
    if (ecw_init(&o, &w, &err) < 0) {
        printf("illegal-address FAIL: ecw_init: %s: %s\n", ecw_err_name(err.code), err.msg);
        return 1;
    }
    double *d = NULL;
    if (cudaMalloc((void **)&d, 8 * sizeof(double)) != cudaSuccess ||
        cudaMemset(d, 0, 8 * sizeof(double)) != cudaSuccess) {
        printf("illegal-address FAIL: cudaMalloc\n");
        return 1;
    }
    int rc = ecw_allreduce(w, d, 8, ECW_F64, ECW_SUM, &err);
    if (rc != 0) {
        printf("illegal-address FAIL: the first allreduce: %s: %s\n", ecw_err_name(rc), err.msg);
        return 1;
    }
    write_to<<<1, 8>>>((double *)(uintptr_t)0x10);
    cudaError_t launch = cudaGetLastError();
    rc = ecw_allreduce(w, d, 8, ECW_F64, ECW_SUM, &err);
    char first[600];
    snprintf(first, sizeof(first), "%s: %s", ecw_err_name(rc), err.msg);
    int rc2 = ecw_barrier(w, &err);
    int ok = rc == ECW_ERESTART && rc2 == ECW_ERESTART;
    printf("illegal-address %s: launch %s; the allreduce after the faulting kernel: %s; the "
           "next call: %s\n", ok ? "PASS" : "FAIL", cudaGetErrorString(launch), first,
           ecw_err_name(rc2));
    return ok ? 0 : 1;
}
