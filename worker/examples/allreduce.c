/* ecoord-allreduce: the collective `ecoord check` runs on every node through
 * `ecoord launch` (contract in coord/check/command.h).
 *
 *   ecoord-allreduce --bytes=B
 *
 * Every rank fills B bytes of f32 with rank+1, allreduces (sum), and checks
 * every element is W(W+1)/2; local rank 0 of every node prints one line:
 *   ecoord-allreduce: ok backend=nccl|gloo ranks=W bytes=B seconds=S busbw_gbps=X
 * or
 *   ecoord-allreduce: FAIL <why>
 * Bus bandwidth follows nccl-tests: algbw * 2(W-1)/W.  Exit 0 only on ok. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw.h"
#ifdef HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int fail(int local_rank, const char *why, const char *detail)
{
    if (local_rank <= 0)
        printf("ecoord-allreduce: FAIL %s%s%s\n", why, detail ? ": " : "", detail ? detail : "");
    fflush(stdout);
    return 1;
}

int main(int argc, char **argv)
{
    size_t bytes = 64u << 20;
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--bytes=", 8))
            bytes = strtoull(argv[i] + 8, NULL, 10);
    size_t count = bytes / sizeof(float);
    if (count == 0)
        count = 1;
    ecw_t *w = NULL;
    ecw_error_t err = {0};
    if (ecw_init(NULL, &w, &err) < 0)
        return fail(0, "cannot join the collective", err.msg);
    int rank = ecw_rank(w), world = ecw_world_size(w), lr = ecw_local_rank(w);
    float *host = malloc(count * sizeof(float));
    if (!host)
        return fail(lr, "out of memory", NULL);
    for (size_t i = 0; i < count; i++)
        host[i] = (float)(rank + 1);
    void *buf = host;
    bool device = ecw_backend(w) == ECW_BACKEND_NCCL;
#ifdef HAVE_NCCL
    if (device) {
        if (cudaMalloc(&buf, count * sizeof(float)) != cudaSuccess ||
            cudaMemcpy(buf, host, count * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
            return fail(lr, "cannot allocate the buffer on the GPU", NULL);
    }
#else
    if (device)
        return fail(lr, "NCCL backend without CUDA support in this build", NULL);
#endif
    /* The buffer was written on the legacy default stream (cudaMemcpy): the
     * collectives wait for that stream unless ecw_set_stream names another
     * (ecw.h, "stream order"), and are complete when they return. */
    /* one warm-up round, then the timed one */
    if (ecw_allreduce(w, buf, 1, ECW_F32, ECW_SUM, &err) < 0)
        return fail(lr, "warm-up allreduce failed", err.msg);
#ifdef HAVE_NCCL
    if (device)
        cudaMemcpy(buf, host, sizeof(float), cudaMemcpyHostToDevice);
#endif
    if (!device)
        host[0] = (float)(rank + 1);
    double t0 = now_s();
    if (ecw_allreduce(w, buf, count, ECW_F32, ECW_SUM, &err) < 0)
        return fail(lr, "allreduce failed", err.msg);
    double secs = now_s() - t0;
#ifdef HAVE_NCCL
    if (device)
        cudaMemcpy(host, buf, count * sizeof(float), cudaMemcpyDeviceToHost);
#endif
    float want = (float)world * (float)(world + 1) / 2.0f;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++)
        bad += host[i] != want;
    /* every rank learns whether any rank saw a wrong value (host memory:
     * Gloo only; with NCCL each rank judges its own copy) */
    int64_t wrong = (int64_t)bad;
    if (!device && ecw_allreduce(w, &wrong, 1, ECW_I64, ECW_SUM, &err) < 0)
        return fail(lr, "result exchange failed", err.msg);
    if (wrong) {
        char d[96];
        snprintf(d, sizeof(d), "%lld wrong elements (expected %.0f everywhere)", (long long)wrong, want);
        return fail(lr, "the allreduce result is wrong", d);
    }
    double algbw = (double)(count * sizeof(float)) / secs / 1e9;
    double busbw = world > 1 ? algbw * 2.0 * (world - 1) / world : algbw;
    if (lr == 0)
        printf("ecoord-allreduce: ok backend=%s ranks=%d bytes=%zu seconds=%.6f busbw_gbps=%.3f\n",
               ecw_backend_name(ecw_backend(w)), world, count * sizeof(float), secs, busbw);
    fflush(stdout);
    ecw_finalize(w);
    free(host);
    return 0;
}
