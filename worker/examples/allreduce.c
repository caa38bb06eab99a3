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
 * Bus bandwidth follows nccl-tests: algbw * 2(W-1)/W.  Exit 0 only on ok.
 *
 * Like libecworker it links no CUDA library: under NCCL it takes the CUDA
 * runtime the library loaded (rt_open), so the installed program starts
 * where CUDA is absent, or of another version than the build's. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecw.h"

/* The two calls of the CUDA runtime this program makes (cudaMemcpyKind:
 * 1 host to device, 2 device to host). */
typedef struct {
    int (*dmalloc)(void **, size_t);
    int (*copy)(void *, const void *, size_t, int);
} rt_t;

/* The runtime libecworker loaded for NCCL (RTLD_NOLOAD: never another). */
static bool rt_open(rt_t *rt)
{
    const char *names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", NULL};
    void *h = NULL;
    for (int i = 0; names[i] && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return false;
    rt->dmalloc = (int (*)(void **, size_t))dlsym(h, "cudaMalloc");
    rt->copy = (int (*)(void *, const void *, size_t, int))dlsym(h, "cudaMemcpy");
    return rt->dmalloc && rt->copy;
}

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
    rt_t rt = {0};
    if (device && !rt_open(&rt))
        return fail(lr, "backend nccl, but the CUDA runtime libecworker loaded is not found "
                    "in this process", NULL);
    if (device && (rt.dmalloc(&buf, count * sizeof(float)) != 0 ||
                   rt.copy(buf, host, count * sizeof(float), 1) != 0))
        return fail(lr, "cannot allocate the buffer on the GPU", NULL);
    /* The buffer was written on the legacy default stream (cudaMemcpy): the
     * collectives wait for that stream unless ecw_set_stream names another
     * (ecw.h, "stream order"), and are complete when they return. */
    /* one warm-up round, then the timed one */
    if (ecw_allreduce(w, buf, 1, ECW_F32, ECW_SUM, &err) < 0)
        return fail(lr, "warm-up allreduce failed", err.msg);
    if (device)
        rt.copy(buf, host, sizeof(float), 1);
    else
        host[0] = (float)(rank + 1);
    double t0 = now_s();
    if (ecw_allreduce(w, buf, count, ECW_F32, ECW_SUM, &err) < 0)
        return fail(lr, "allreduce failed", err.msg);
    double secs = now_s() - t0;
    if (device && rt.copy(host, buf, count * sizeof(float), 2) != 0)
        return fail(lr, "cannot copy the result from the GPU", NULL);
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
