/* A fake CUDA runtime and NCCL, for tests on machines without a GPU
 * (t4000-worker, nccl_shrinks_an_epoch_that_only_removes_ranks).
 *
 * Host memory stands for device memory, every stream is idle, every
 * collective completes at once and leaves the buffer as it is, and a
 * communicator is a record of its rank and size.  It checks the library's
 * flow (which NCCL call, with which ranks, in which order), never NCCL's
 * behaviour: that needs a GPU run.
 *
 *   CUDA_STUB_LOG=<file>    append one line per init, shrink and abort
 *   CUDA_STUB_SHRINK=fail   the communicator a shrink makes fails
 *                           (ncclRemoteError), as when a member died
 *   CUDA_STUB_STREAM=busy   work completes only once an abort begins (a
 *                           collective waiting for a peer)
 *
 * Built with the real headers, so each definition has the declared type. */
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct ncclComm {
    int rank, nranks;
    ncclResult_t async;
};

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    const char *path = getenv("CUDA_STUB_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* ---- CUDA runtime ---- */

cudaError_t cudaGetDeviceCount(int *count) { *count = 8; return cudaSuccess; }
static int cur_device;
cudaError_t cudaSetDevice(int device) { cur_device = device; return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t error) { return error ? "stub error" : "no error"; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    *s = (cudaStream_t)malloc(16);
    return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}

/* Aborts begun so far (ncclCommAbort entered, or a shrink with
 * NCCL_SHRINK_ABORT): NCCL's abort first raises the flag its kernels poll,
 * so work in flight ends once one begins. */
static int aborts_begun;

/* CUDA_STUB_STREAM=busy: work on every stream stays in flight (a
 * collective waiting for a peer) until an abort begins after the stream was
 * first seen busy; the first query of each stream says so in the log, so a
 * test knows the call is waiting, and the first query after such an abort
 * logs "stream drained". */
static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    cudaStream_t s;
    int gen;     /* aborts_begun when first seen busy */
    bool drained;
} seen[64];
static int nseen;

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    pthread_mutex_lock(&streams_mu);
    for (int i = 0; i < nseen; i++)
        if (seen[i].s == s) /* an address malloc hands out again is a new stream */
            seen[i] = seen[--nseen];
    pthread_mutex_unlock(&streams_mu);
    free(s);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    const char *mode = getenv("CUDA_STUB_STREAM");
    if (!mode || strcmp(mode, "busy"))
        return cudaSuccess;
    cudaError_t r = cudaErrorNotReady;
    pthread_mutex_lock(&streams_mu);
    int i = 0;
    while (i < nseen && seen[i].s != s)
        i++;
    if (i == nseen && nseen < 64) {
        seen[nseen].s = s;
        seen[nseen].gen = __atomic_load_n(&aborts_begun, __ATOMIC_ACQUIRE);
        seen[nseen++].drained = false;
        note("stream busy");
    } else if (i < nseen && __atomic_load_n(&aborts_begun, __ATOMIC_ACQUIRE) > seen[i].gen) {
        if (!seen[i].drained)
            note("stream drained");
        seen[i].drained = true;
        r = cudaSuccess;
    }
    pthread_mutex_unlock(&streams_mu);
    return r;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)s, (void)e, (void)flags;
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    *e = (cudaEvent_t)calloc(1, 16);
    return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}

/* An event stands for the work on its stream when it was recorded: it is
 * done when that stream would say so (CUDA_STUB_STREAM=busy). */
typedef struct stub_event {
    cudaStream_t s;
} stub_event_t;

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    ((stub_event_t *)e)->s = s;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    cudaStream_t s = ((stub_event_t *)e)->s;
    return s ? cudaStreamQuery(s) : cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }

/* What cudaMalloc gave (and not freed): "device memory" to
 * cudaPointerGetAttributes; anything else is host memory, as on a GPU, so a
 * host buffer handed to NCCL is refused here too. */
static pthread_mutex_t dev_mu = PTHREAD_MUTEX_INITIALIZER;
static void *dev_ptrs[1024];
static int dev_of[1024];

static int dev_find(const void *p)
{
    for (int i = 0; i < 1024; i++)
        if (dev_ptrs[i] && dev_ptrs[i] == p)
            return i;
    return -1;
}

cudaError_t cudaMalloc(void **p, size_t size)
{
    *p = malloc(size ? size : 1);
    if (!*p)
        return cudaErrorMemoryAllocation;
    pthread_mutex_lock(&dev_mu);
    int i;
    for (i = 0; i < 1024 && dev_ptrs[i]; i++)
        ;
    if (i < 1024) {
        dev_ptrs[i] = *p;
        dev_of[i] = cur_device;
    }
    pthread_mutex_unlock(&dev_mu);
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    pthread_mutex_lock(&dev_mu);
    int i = p ? dev_find(p) : -1;
    if (i >= 0)
        dev_ptrs[i] = NULL;
    pthread_mutex_unlock(&dev_mu);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    (void)kind, (void)s;
    memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
    memset(a, 0, sizeof(*a));
    pthread_mutex_lock(&dev_mu);
    int i = dev_find(p);
    if (i >= 0) {
        a->type = cudaMemoryTypeDevice;
        a->device = dev_of[i];
        a->devicePointer = (void *)p;
    } else {
        a->type = cudaMemoryTypeUnregistered; /* pageable host memory */
    }
    pthread_mutex_unlock(&dev_mu);
    return cudaSuccess;
}

/* ---- NCCL ---- */

ncclResult_t ncclGetVersion(int *version) { *version = NCCL_VERSION_CODE; return ncclSuccess; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0x5a, sizeof(*id));
    return ncclSuccess;
}

static ncclResult_t new_comm(ncclComm_t *out, int nranks, int rank)
{
    struct ncclComm *c = calloc(1, sizeof(*c));
    if (!c)
        return ncclSystemError;
    c->rank = rank;
    c->nranks = nranks;
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    (void)id, (void)config;
    note("init rank=%d nranks=%d roots=1", rank, nranks);
    return new_comm(comm, nranks, rank);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int myrank, int nId,
                                      ncclUniqueId *ids, ncclConfig_t *config)
{
    (void)ids, (void)config;
    note("init rank=%d nranks=%d roots=%d", myrank, nranks, nId);
    return new_comm(comm, nranks, myrank);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state)
{
    *state = comm->async;
    return ncclSuccess;
}

/* CUDA_STUB_ABORT_GATE=PATH: an abort takes until PATH exists (at most
 * 20 s), as NCCL's takes about a second; "aborting" and "abort" are logged
 * as it starts and as it returns. */
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    const char *gate = getenv("CUDA_STUB_ABORT_GATE");
    /* "aborting" is in the log before work in flight can end, so a
     * "stream drained" of this abort always comes after it */
    if (comm && gate)
        note("aborting rank=%d nranks=%d", comm->rank, comm->nranks);
    if (comm)
        __atomic_add_fetch(&aborts_begun, 1, __ATOMIC_RELEASE);
    if (comm && gate) {
        for (int i = 0; i < 20000 && access(gate, F_OK) != 0; i++) {
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (comm)
        note("abort rank=%d nranks=%d", comm->rank, comm->nranks);
    free(comm);
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) { return r ? "stub failure" : "no error"; }
const char *ncclGetLastError(ncclComm_t comm) { (void)comm; return ""; }

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t st)
{
    (void)s, (void)r, (void)n, (void)t, (void)op, (void)st;
    return comm->async;
}

ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t st)
{
    (void)s, (void)r, (void)n, (void)t, (void)root, (void)st;
    return comm->async;
}

ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t st)
{
    (void)s, (void)r, (void)n, (void)t, (void)st;
    return comm->async;
}

/* The new communicator is stored by another thread a little later, as
 * NCCL's own thread does when a non-blocking shrink's init ends. */
typedef struct delivery {
    ncclComm_t *slot;
    ncclComm_t child;
} delivery_t;

static void *deliver(void *p)
{
    delivery_t *d = p;
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    __atomic_store_n(d->slot, d->child, __ATOMIC_RELEASE);
    free(d);
    return NULL;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int *excl, int nexcl, ncclComm_t *newcomm,
                            ncclConfig_t *config, int flags)
{
    if (!comm || !excl || nexcl < 1 || !newcomm)
        return ncclInvalidArgument;
    char list[256] = "";
    int below = 0;
    for (int i = 0; i < nexcl; i++) {
        if (excl[i] == comm->rank || (i && excl[i] <= excl[i - 1]) || excl[i] < 0 ||
            excl[i] >= comm->nranks)
            return ncclInvalidArgument; /* NCCL sorts; ours must come sorted anyway */
        if (excl[i] < comm->rank)
            below++;
        size_t n = strlen(list);
        snprintf(list + n, sizeof(list) - n, "%s%d", i ? "," : "", excl[i]);
    }
    *newcomm = NULL;
    struct ncclComm *child = NULL;
    if (new_comm(&child, comm->nranks - nexcl, comm->rank - below) != ncclSuccess)
        return ncclSystemError;
    if (flags & NCCL_SHRINK_ABORT)
        __atomic_add_fetch(&aborts_begun, 1, __ATOMIC_RELEASE);
    const char *mode = getenv("CUDA_STUB_SHRINK");
    if (mode && !strcmp(mode, "fail"))
        child->async = ncclRemoteError;
    note("shrink rank=%d nranks=%d excl=%s flags=%d share=%d -> rank %d of %d%s", comm->rank,
         comm->nranks, list, flags, config ? config->shrinkShare : -1, child->rank,
         child->nranks, child->async ? " (fails)" : "");
    delivery_t *d = malloc(sizeof(*d));
    pthread_t t;
    if (!d) {
        free(child);
        return ncclSystemError;
    }
    d->slot = newcomm;
    d->child = child;
    if (pthread_create(&t, NULL, deliver, d) != 0) {
        free(d);
        free(child);
        return ncclSystemError;
    }
    pthread_detach(t);
    return ncclInProgress;
}
