/* What a GPU run must confirm of the NCCL backend's pieces (issue 14), on one
 * GPU, without etcd: not built by make (it needs a GPU); tests/gpu/smoke.sh
 * builds and runs it.  One line per check, "ok"/"FAIL"/"info".
 *   load     worker/cuda_dl.c finds libnccl and the CUDA runtime (this program
 *            links libcudart itself, as torch does: it must be taken as
 *            already loaded) and resolves every symbol
 *   buffers  gpu_policy.c's check with the real cudaPointerGetAttributes:
 *            malloc'd and cudaMallocHost'ed memory refused, cudaMalloc'ed and
 *            managed memory accepted
 *   init     a one-rank non-blocking communicator, polled to ready
 *   order    a collective whose library stream waits for an event recorded on
 *            the caller's stream reads what the caller's copy wrote
 *   badarg   what NCCL does with a refused argument on a non-blocking
 *            communicator (gpu_policy.c says: keeps it as the async error)
 *   abort    ncclCommAbort through offthread.c, timed */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cuda_dl.h"
#include "gpu_policy.h"
#include "offthread.h"

static const ecw__cuda_t *cu;
static int fails;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void report(int ok, const char *what, const char *detail)
{
    printf("%s %s%s%s\n", ok ? "ok" : "FAIL", what, detail ? ": " : "", detail ? detail : "");
    fails += !ok;
}

static int attr(const void *p, int *type, int *device, void *arg)
{
    (void)arg;
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof(a));
    cudaError_t e = cu->cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess)
        cu->cudaGetLastError();
    *type = (int)a.type;
    *device = a.device;
    return (int)e;
}

static int wait_comm(ncclComm_t comm, double deadline_ms, ncclResult_t *st)
{
    for (;;) {
        *st = ncclInProgress;
        if (cu->ncclCommGetAsyncError(comm, st) != ncclSuccess)
            return -1;
        if (*st != ncclInProgress)
            return *st == ncclSuccess ? 0 : -1;
        if (now_ms() > deadline_ms)
            return -1;
    }
}

static void abort_job(void *p)
{
    cu->ncclCommAbort(*(ncclComm_t *)p);
}

int main(void)
{
    ec_error_t err = {0};
    /* what torch does before a program gets to the library */
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    if (ecw__cuda_load(NULL, &cu, &err) < 0) {
        report(0, "load", err.msg);
        return 1;
    }
    report(strstr(cu->how, "libcudart") && strstr(cu->how, "already loaded") != NULL, "load",
           cu->how);
    int n = 0;
    cudaError_t ce = cu->cudaGetDeviceCount(&n);
    char line[1024];
    snprintf(line, sizeof(line), "%d device(s), %s", n, cu->cudaGetErrorString(ce));
    report(ce == cudaSuccess && n > 0, "devices", line);
    if (ce != cudaSuccess || n == 0)
        return 1;
    cu->cudaSetDevice(0);

    /* buffers */
    const size_t count = 64u << 20; /* floats: 256 MiB */
    void *host = malloc(64), *pinned = NULL, *dev = NULL, *out = NULL, *managed = NULL;
    cudaMallocHost(&pinned, count * sizeof(float));
    cu->cudaMalloc(&dev, count * sizeof(float));
    cu->cudaMalloc(&out, count * sizeof(float));
    cudaMallocManaged(&managed, 64, cudaMemAttachGlobal);
    int r1 = ecw__gpu_check_buffer("allreduce", "buf", host, 64, 0, attr, NULL, &err);
    snprintf(line, sizeof(line), "malloc'd: %s", err.msg);
    report(r1 == EC_EINVAL, "buffers host refused", line);
    int r2 = ecw__gpu_check_buffer("allreduce", "buf", pinned, 64, 0, attr, NULL, &err);
    snprintf(line, sizeof(line), "cudaMallocHost'd: %s", err.msg);
    report(r2 == EC_EINVAL, "buffers pinned refused", line);
    /* err keeps the last refusal's text: cleared, so an acceptance says so */
    err.msg[0] = '\0';
    int r3 = ecw__gpu_check_buffer("allreduce", "buf", dev, 64, 0, attr, NULL, &err);
    report(r3 == 0, "buffers device accepted", r3 == 0 ? "cudaMalloc'd: accepted" : err.msg);
    err.msg[0] = '\0';
    int r4 = ecw__gpu_check_buffer("allreduce", "buf", managed, 64, 0, attr, NULL, &err);
    report(r4 == 0, "buffers managed accepted", r4 == 0 ? "cudaMallocManaged: accepted" : err.msg);

    /* init */
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    double t0 = now_ms();
    ncclResult_t st = ncclSuccess;
    ncclResult_t r = cu->ncclGetUniqueId(&id);
    if (r == ncclSuccess)
        r = cu->ncclCommInitRankConfig(&comm, 1, id, 0, &cfg);
    int ok = (r == ncclSuccess || r == ncclInProgress) && wait_comm(comm, t0 + 30000, &st) == 0;
    snprintf(line, sizeof(line), "%.1f ms, %s", now_ms() - t0, cu->ncclGetErrorString(st));
    report(ok, "init one-rank non-blocking", line);
    if (!ok)
        return 1;

    /* order: the caller's stream fills dev with 1.0 from pinned memory (slow,
     * 256 MiB); the library's stream waits for an event recorded after it,
     * then allreduces dev -> out (one rank: a copy) */
    for (size_t i = 0; i < count; i++)
        ((float *)pinned)[i] = 1.0f;
    cudaStream_t theirs, ours;
    cudaEvent_t ev;
    cu->cudaStreamCreateWithFlags(&theirs, cudaStreamNonBlocking);
    cu->cudaStreamCreateWithFlags(&ours, cudaStreamNonBlocking);
    cu->cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    cudaMemsetAsync(out, 0, count * sizeof(float), ours);
    cudaStreamSynchronize(ours);
    cudaMemsetAsync(dev, 0, count * sizeof(float), theirs);
    cu->cudaMemcpyAsync(dev, pinned, count * sizeof(float), cudaMemcpyHostToDevice, theirs);
    cu->cudaEventRecord(ev, theirs);
    cu->cudaStreamWaitEvent(ours, ev, 0);
    r = cu->ncclAllReduce(dev, out, count, ncclFloat32, ncclSum, comm, ours);
    ok = (r == ncclSuccess || r == ncclInProgress) && wait_comm(comm, now_ms() + 30000, &st) == 0;
    while (ok && (ce = cu->cudaStreamQuery(ours)) == cudaErrorNotReady)
        ;
    float *back = malloc(count * sizeof(float));
    cudaMemcpy(back, out, count * sizeof(float), cudaMemcpyDeviceToHost);
    size_t bad = 0;
    for (size_t i = 0; i < count; i++)
        bad += back[i] != 1.0f;
    snprintf(line, sizeof(line), "%zu of %zu elements not 1.0 after the ordered allreduce", bad,
             count);
    report(ok && bad == 0, "order", line);

    /* badarg: a datatype NCCL refuses */
    r = cu->ncclAllReduce(dev, out, 16, (ncclDataType_t)99, ncclSum, comm, ours);
    ncclResult_t after = ncclSuccess;
    cu->ncclCommGetAsyncError(comm, &after);
    ncclResult_t next = cu->ncclAllReduce(dev, out, 16, ncclFloat32, ncclSum, comm, ours);
    snprintf(line, sizeof(line), "refused with %s; async error afterwards %s; a valid call "
             "afterwards returns %s (gpu_policy.c assumes the communicator is done)",
             cu->ncclGetErrorString(r), cu->ncclGetErrorString(after),
             cu->ncclGetErrorString(next));
    printf("info badarg: %s\n", line);

    /* abort, off this thread with a deadline */
    t0 = now_ms();
    int rc = ecw__run_with_deadline(abort_job, &comm, NULL, 20000);
    snprintf(line, sizeof(line), "ncclCommAbort returned in %.1f ms (rc %d)", now_ms() - t0, rc);
    report(rc == 0, "abort", line);
    printf("%s\n", fails ? "SMOKE FAILED" : "SMOKE OK");
    return fails ? 1 : 0;
}
