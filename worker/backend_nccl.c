/* The NCCL backend.
 *
 * CUDA and NCCL are called only through the table cuda_dl.c loads at run
 * time (the library links neither); `cu` below is that table.
 *
 * Each epoch: rank 0 creates the unique id and publishes it under the
 * epoch's keys (epochs/<n>/comm/nccl.id, on the node's lease); the others
 * read it; every rank then initialises a non-blocking communicator
 * (ncclConfig_t.blocking = 0) and polls ncclCommGetAsyncError against its
 * deadline and the abort flag.  A blocking init waits forever for a rank that
 * never arrives (NCCL issue #593); this one gives up at the deadline.
 *
 * Abort: ncclCommAbort frees the communicator, so no other thread may touch
 * it afterwards.  The watcher thread therefore only raises abort_req; the
 * training thread, which polls every wait here (init, enqueue, stream),
 * sees it within a poll interval (~50 us) and aborts the communicator
 * itself.  A communicator that is idle when the flag rises is aborted by the
 * next call or by destroy.  Every local rank aborts its own (#863); the
 * epoch, not ncclCommGetAsyncError, is the source of truth about dead
 * remote ranks (#279).  ncclCommAbort, and the cudaFree calls that follow it
 * (cudaFree waits for the device), run off the training thread with a
 * deadline (offthread.c): NCCL documents no bound on them, and a GPU that
 * is wedged never returns from them.  Past the deadline the process's GPU
 * state is unknown: the call returns ECW_ERESTART, and so does every later
 * one on the handle (ecw__restart), instead of building a new communicator
 * on that GPU.
 *
 * Errors go through the tables of gpu_policy.c: every argument NCCL would
 * check is checked here first (a non-blocking communicator keeps a refused
 * call as its error, see there), including that each buffer is device
 * memory of this rank's GPU (cudaPointerGetAttributes).
 *
 * Order (ecw.h, "Stream order"): each collective first makes the library's
 * stream wait for an event recorded on the caller's stream (ecw_set_stream;
 * the legacy default stream when none was set), so it reads what the
 * caller's earlier work wrote; it runs on the library's stream and returns
 * once it completed there, so the caller's later work reads its result,
 * and nothing of an aborted communicator is left on the caller's streams. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "ecw_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_dl.h"
#include "gpu_policy.h"
#include "offthread.h"

/* gpu_policy.c's tables are by number: hold them to the headers. */
_Static_assert(ncclSuccess == 0 && ncclUnhandledCudaError == 1 && ncclSystemError == 2 &&
                   ncclInternalError == 3 && ncclInvalidArgument == 4 &&
                   ncclInvalidUsage == 5 && ncclRemoteError == 6 && ncclInProgress == 7,
               "ncclResult_t values differ from gpu_policy.c's");
_Static_assert(cudaErrorInvalidValue == 1 && cudaErrorMemoryAllocation == 2 &&
                   cudaErrorInsufficientDriver == 35 && cudaErrorNoDevice == 100 &&
                   cudaErrorNotReady == 600 && cudaErrorIllegalAddress == 700 &&
                   cudaErrorLaunchFailure == 719 && cudaErrorECCUncorrectable == 214 &&
                   cudaErrorUnknown == 999,
               "cudaError_t values differ from gpu_policy.c's");
_Static_assert(cudaMemoryTypeUnregistered == 0 && cudaMemoryTypeHost == 1 &&
                   cudaMemoryTypeDevice == 2 && cudaMemoryTypeManaged == 3,
               "cudaMemoryType values differ from gpu_policy.c's");

static const ecw__cuda_t *cu; /* set by ecw__nccl_device_count, before any comm */

typedef struct ncomm {
    ecw_t *w;
    uint64_t epoch;
    int rank, world, device, timeout_ms;
    int64_t deadline_ms;
    ncclComm_t comm;     /* NULL once aborted */
    cudaStream_t stream;
    cudaEvent_t ordered; /* recorded on the caller's stream, waited for on ours */
    void *scratch;       /* device memory for host-memory agreements */
    size_t scratch_len;
    _Atomic int abort_req;
    bool aborted;
    bool lost;           /* an abort or free did not return by its deadline */
} ncomm_t;

int ecw__nccl_device_count(ecw_t *w, ec_error_t *err)
{
    const ecw__cuda_t *t = NULL;
    int rc = ecw__cuda_load(w->o.cuda_libdir, &t, err);
    if (rc < 0)
        return 0; /* err names the library that is missing */
    ecw__log(w, ECW_LOG_INFO, "+cuda %s", t->how); /* every handle's log says which */
    cu = t;
    int n = 0;
    cudaError_t ce = cu->cudaGetDeviceCount(&n);
    if (ce != cudaSuccess) {
        /* Without a driver this is error 35: not a crash, just no GPU here. */
        ec_errorf(err, EC_ENOTFOUND, "no usable GPU: CUDA says %s (%s, error %d)",
                  cu->cudaGetErrorString(ce), ecw__cuda_verdict((int)ce).name, (int)ce);
        cu->cudaGetLastError(); /* clear the error */
        return 0;
    }
    if (n == 0)
        ec_errorf(err, EC_ENOTFOUND, "no GPU visible to this process (check "
                  "CUDA_VISIBLE_DEVICES)");
    return n;
}

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

/* ---- aborting, off the training thread ---- */

typedef struct teardown {
    int device;
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ordered;
    void *scratch;
} teardown_t;

static void teardown_run(void *p)
{
    teardown_t *t = p;
    /* A new thread's current device is 0: without this, the frees below
     * would create a context on GPU 0 for a communicator of another GPU. */
    cu->cudaSetDevice(t->device);
    if (t->comm)
        cu->ncclCommAbort(t->comm);
    if (t->ordered)
        cu->cudaEventDestroy(t->ordered);
    if (t->stream)
        cu->cudaStreamDestroy(t->stream);
    if (t->scratch)
        cu->cudaFree(t->scratch);
}

/* ncclCommAbort took 1.0 s on an idle one-rank communicator (H200, NCCL
 * 2.28.3): a short collective timeout must not make a normal abort look
 * stuck. */
#define ABORT_MIN_MS 10000

/* Run t (copied) off this thread within the communicator's timeout (at least
 * ABORT_MIN_MS).  false when it did not return: the GPU state is unknown,
 * restart the process. */
static bool teardown_bounded(ncomm_t *c, const teardown_t *t, const char *what)
{
    int limit = c->timeout_ms > ABORT_MIN_MS ? c->timeout_ms : ABORT_MIN_MS;
    teardown_t *copy = malloc(sizeof(*copy));
    int rc = EC_ENOMEM;
    if (copy) {
        *copy = *t;
        rc = ecw__run_with_deadline(teardown_run, copy, free, limit);
    }
    if (rc == 0) {
        free(copy);
        return true;
    }
    if (rc != EC_ETIMEDOUT) {
        /* No thread to spare: do it here, unbounded, rather than leak a live comm. */
        free(copy);
        teardown_t here = *t;
        teardown_run(&here);
        return true;
    }
    /* copy is the stuck thread's now */
    c->lost = true;
    ecw__restart(c->w, "%s of epoch %" PRIu64 " on CUDA device %d did not return within %d ms "
                 "(%d such calls still running): this GPU's state is unknown", what, c->epoch,
                 c->device, limit, ecw__stuck_calls());
    return false;
}

/* Abort the communicator (training thread).  false when the abort did not
 * return by its deadline (ecw__restart was called). */
static bool do_abort(ncomm_t *c)
{
    bool ok = true;
    if (c->comm && !c->lost) {
        teardown_t t = {.device = c->device, .comm = c->comm};
        ok = teardown_bounded(c, &t, "ncclCommAbort");
    }
    c->comm = NULL;
    c->aborted = true;
    return ok;
}

/* The error for a restart-class failure, after ecw__restart recorded why. */
static int restart_err(ncomm_t *c, const char *what, ec_error_t *err)
{
    return ec_errorf(err, EC_ERESTART, "nccl %s on rank %d of %d (epoch %" PRIu64 "): %s", what,
                     c->rank, c->world, c->epoch, ecw__restart_why(c->w));
}

/* ---- errors, by gpu_policy.c's tables ---- */

/* A failed NCCL call: its verdict decides the code and whether the
 * communicator survives. */
static int nccl_fail(ncomm_t *c, const char *what, ncclResult_t r, ec_error_t *err)
{
    const char *last = cu->ncclGetLastError(c->comm);
    ecw__gpu_verdict_t v = ecw__nccl_verdict((int)r);
    if (v.cls == ECW__GPU_ASK_CUDA) {
        /* A sticky CUDA error shows in any call on the context. */
        cudaError_t now = cu->cudaStreamQuery(c->stream ? c->stream : cudaStreamLegacy);
        v = ecw__nccl_cuda_verdict((int)now);
        if (v.cls == ECW__GPU_FATAL)
            ecw__restart(c->w, "CUDA on device %d: %s (%s, error %d)", c->device,
                         cu->cudaGetErrorString(now), v.name, (int)now);
    }
    const char *advice = "";
    if (v.cls == ECW__GPU_BAD_ARG) {
        /* NCCL keeps the refusal as the communicator's error: it is done. */
        advice = "; NCCL keeps a refused call as the communicator's error, so this "
                 "communicator is done: fix the call; ecw_rebuild waits for the next epoch";
        atomic_store(&c->w->broken, 1);
    }
    int rc = ec_errorf(err, v.code ? v.code : EC_EINTERNAL, "nccl %s on rank %d of %d (epoch %"
                       PRIu64 "): %s (%s)%s%s%s", what, c->rank, c->world, c->epoch,
                       cu->ncclGetErrorString(r), ecw__nccl_verdict((int)r).name,
                       last && *last ? ": " : "", last ? last : "", advice);
    if (!v.keeps_comm && !do_abort(c))
        return restart_err(c, what, err);
    if (v.cls == ECW__GPU_FATAL)
        return restart_err(c, what, err);
    return rc;
}

/* A failed CUDA call of the library's own (copies, stream, events). */
static int cuda_fail(ncomm_t *c, const char *what, cudaError_t ce, ec_error_t *err)
{
    ecw__gpu_verdict_t v = ecw__cuda_verdict((int)ce);
    if (v.cls == ECW__GPU_FATAL) {
        ecw__restart(c->w, "CUDA on device %d: %s (%s, error %d)", c->device,
                     cu->cudaGetErrorString(ce), v.name, (int)ce);
        do_abort(c); /* best effort: the process goes anyway */
        return restart_err(c, what, err);
    }
    if (v.keeps_comm)
        cu->cudaGetLastError(); /* not sticky: clear it */
    int rc = ec_errorf(err, v.cls == ECW__GPU_PEER || v.cls == ECW__GPU_BROKEN ? EC_EIO : v.code,
                       "nccl %s on rank %d of %d (epoch %" PRIu64 "), CUDA device %d: %s (%s, "
                       "error %d)", what, c->rank, c->world, c->epoch, c->device,
                       cu->cudaGetErrorString(ce), v.name, (int)ce);
    if (!v.keeps_comm && !do_abort(c))
        return restart_err(c, what, err);
    return rc;
}

static int aborted_err(ncomm_t *c, const char *what, ec_error_t *err)
{
    if (!do_abort(c))
        return restart_err(c, what, err);
    return ec_errorf(err, EC_EABORTED, "nccl %s on rank %d of %d (epoch %" PRIu64 ") aborted: "
                     "a newer epoch was published; rebuild", what, c->rank, c->world, c->epoch);
}

static int n_create(ecw_t *w, const ecw__build_t *b, void **out, ec_error_t *err)
{
    if (!cu)
        return ec_errorf(err, EC_EINTERNAL, "nccl: CUDA and NCCL were never loaded");
    ncomm_t *c = calloc(1, sizeof(*c));
    if (!c)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    c->w = w;
    c->epoch = b->epoch;
    c->rank = b->rank;
    c->world = b->world;
    c->device = b->device;
    c->timeout_ms = b->timeout_ms;
    c->deadline_ms = b->deadline_ms;
    *out = c;
    return 0;
}

/* Poll the communicator until it leaves ncclInProgress. */
static int wait_ready(ncomm_t *c, const char *what, int64_t deadline, ec_error_t *err)
{
    for (;;) {
        if (atomic_load(&c->abort_req))
            return aborted_err(c, what, err);
        ncclResult_t st = ncclInProgress;
        ncclResult_t r = cu->ncclCommGetAsyncError(c->comm, &st);
        if (r != ncclSuccess)
            return nccl_fail(c, what, r, err);
        if (st == ncclSuccess)
            return 0;
        if (st != ncclInProgress)
            return nccl_fail(c, what, st, err);
        if (ecw__mono_ms() > deadline) {
            if (!do_abort(c))
                return restart_err(c, what, err);
            return ec_errorf(err, EC_ETIMEDOUT, "nccl %s on rank %d of %d (epoch %" PRIu64
                             ") did not finish by its deadline: a member is missing or "
                             "stalled; wait for the next epoch", what, c->rank, c->world,
                             c->epoch);
        }
        nap_us(50);
    }
}

static int n_connect(void *comm, ec_error_t *err)
{
    ncomm_t *c = comm;
    cudaError_t ce = cu->cudaSetDevice(c->device);
    if (ce != cudaSuccess) {
        ecw__gpu_verdict_t v = ecw__cuda_verdict((int)ce);
        if (v.cls == ECW__GPU_FATAL)
            return cuda_fail(c, "cudaSetDevice", ce, err);
        return ec_errorf(err, EC_ENOTFOUND, "CUDA device %d is not usable by rank %d: %s (%s)",
                         c->device, c->rank, cu->cudaGetErrorString(ce), v.name);
    }
    ncclUniqueId id;
    int rc;
    if (c->rank == 0) {
        ncclResult_t r = cu->ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            return nccl_fail(c, "ncclGetUniqueId", r, err);
        rc = ecw__comm_put(c->w, c->epoch, "nccl.id", &id, sizeof(id), err);
        if (rc < 0)
            return rc;
    } else {
        void *val = NULL;
        size_t len = 0;
        int64_t left = c->deadline_ms - ecw__mono_ms();
        rc = ecw__comm_get(c->w, c->epoch, "nccl.id", &val, &len, left > 0 ? (int)left : 0,
                           &c->abort_req, err);
        if (rc < 0)
            return rc;
        if (len != sizeof(id)) {
            free(val);
            return ec_errorf(err, EC_EPROTO, "the NCCL id of epoch %" PRIu64 " is %zu bytes, "
                             "not %zu (another NCCL version on rank 0?)", c->epoch, len,
                             sizeof(id));
        }
        memcpy(&id, val, sizeof(id));
        free(val);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = cu->ncclCommInitRankConfig(&c->comm, c->world, id, c->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_fail(c, "ncclCommInitRankConfig", r, err);
    rc = wait_ready(c, "init", c->deadline_ms, err);
    if (rc < 0)
        return rc;
    ce = cu->cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess)
        ce = cu->cudaEventCreateWithFlags(&c->ordered, cudaEventDisableTiming);
    if (ce == cudaSuccess) {
        c->scratch_len = 64;
        ce = cu->cudaMalloc(&c->scratch, c->scratch_len);
    }
    if (ce != cudaSuccess)
        return cuda_fail(c, "setting up its stream", ce, err);
    return 0;
}

static void n_abort(void *comm)
{
    ncomm_t *c = comm;
    if (c)
        atomic_store(&c->abort_req, 1);
}

static void n_destroy(void *comm)
{
    ncomm_t *c = comm;
    if (!c)
        return;
    /* Abort, not finalize: peers may be gone, and finalize would wait for
     * them.  After an abort or a free that never returned, nothing more is
     * touched: the stream and memory are left to the process's exit. */
    if (!c->lost) {
        teardown_t t = {.device = c->device, .comm = c->comm, .stream = c->stream,
                        .ordered = c->ordered, .scratch = c->scratch};
        teardown_bounded(c, &t, c->comm ? "ncclCommAbort" : "freeing the stream and memory");
    }
    free(c);
}

/* Make the library's stream wait for what the caller enqueued so far on its
 * stream (ecw_set_stream; the legacy default stream when none). */
static int order_after_caller(ncomm_t *c, const char *what, ec_error_t *err)
{
    void *s = ecw__user_stream(c->w);
    cudaStream_t theirs = s ? (cudaStream_t)s : cudaStreamLegacy;
    cudaError_t ce = cu->cudaEventRecord(c->ordered, theirs);
    if (ce == cudaSuccess)
        ce = cu->cudaStreamWaitEvent(c->stream, c->ordered, 0);
    if (ce != cudaSuccess) {
        int rc = cuda_fail(c, what, ce, err);
        if (rc == EC_EINVAL)
            ec_error_prefix(err, "ordering after the stream set by ecw_set_stream (%p)", s);
        return rc;
    }
    return 0;
}

/* Wait for what was enqueued on our stream, polling, within deadline. */
static int drain_stream(ncomm_t *c, const char *what, int64_t deadline, ec_error_t *err)
{
    for (;;) {
        if (atomic_load(&c->abort_req))
            return aborted_err(c, what, err);
        cudaError_t q = cu->cudaStreamQuery(c->stream);
        if (q == cudaSuccess)
            return 0;
        if (q != cudaErrorNotReady)
            return cuda_fail(c, what, q, err);
        if (c->comm) {
            ncclResult_t st = ncclSuccess;
            if (cu->ncclCommGetAsyncError(c->comm, &st) == ncclSuccess && st != ncclSuccess &&
                st != ncclInProgress)
                return nccl_fail(c, what, st, err);
        }
        if (ecw__mono_ms() > deadline) {
            if (!do_abort(c))
                return restart_err(c, what, err);
            return ec_errorf(err, EC_ETIMEDOUT, "nccl %s on rank %d of %d made no progress "
                             "within %d ms: a member is stalled or cut off; wait for the next "
                             "epoch", what, c->rank, c->world, c->timeout_ms);
        }
        nap_us(50);
    }
}

/* Wait for the operation just enqueued (r) to complete on our stream. */
static int complete(ncomm_t *c, const char *what, ncclResult_t r, ec_error_t *err)
{
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_fail(c, what, r, err);
    int64_t deadline = ecw__mono_ms() + c->timeout_ms;
    int rc = wait_ready(c, what, deadline, err); /* enqueue of a non-blocking comm */
    if (rc < 0)
        return rc;
    return drain_stream(c, what, deadline, err);
}

static int usable(ncomm_t *c, const char *what, ec_error_t *err)
{
    if (c->lost)
        return restart_err(c, what, err);
    if (atomic_load(&c->abort_req) || c->aborted || !c->comm)
        return aborted_err(c, what, err);
    return 0;
}

static int nccl_type(ecw_dtype_t dt, ncclDataType_t *out, size_t *size, ec_error_t *err)
{
    switch (dt) {
    case ECW_F32: *out = ncclFloat32; *size = 4; return 0;
    case ECW_F64: *out = ncclFloat64; *size = 8; return 0;
    case ECW_I32: *out = ncclInt32; *size = 4; return 0;
    case ECW_I64: *out = ncclInt64; *size = 8; return 0;
    case ECW_F16: *out = ncclFloat16; *size = 2; return 0;
    case ECW_BF16: *out = ncclBfloat16; *size = 2; return 0;
    case ECW_U8: *out = ncclUint8; *size = 1; return 0;
    }
    return ec_errorf(err, EC_EINVAL, "unknown dtype %d", (int)dt);
}

/* cudaPointerGetAttributes, in gpu_policy.h's terms. */
static int ptr_attr(const void *p, int *type, int *device, void *arg)
{
    (void)arg;
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof(a));
    cudaError_t ce = cu->cudaPointerGetAttributes(&a, p);
    if (ce != cudaSuccess && ecw__cuda_verdict((int)ce).keeps_comm)
        cu->cudaGetLastError(); /* not sticky: clear it */
    *type = (int)a.type;
    *device = a.device;
    return (int)ce;
}

/* The caller's buffer, before NCCL sees it: a refusal keeps the comm. */
static int check_buffer(ncomm_t *c, const char *what, const char *which, const void *p,
                        size_t bytes, ec_error_t *err)
{
    int rc = ecw__gpu_check_buffer(what, which, p, bytes, c->device, ptr_attr, NULL, err);
    if (rc == EC_ERESTART) {
        ecw__restart(c->w, "%s", err ? err->msg : "CUDA context lost");
        do_abort(c);
    }
    return rc;
}

static size_t mul_ok(size_t a, size_t b)
{
    return b && a > SIZE_MAX / b ? 0 : a * b;
}

static int n_allreduce(void *comm, void *buf, size_t count, ecw_dtype_t dt, ecw_op_t op,
                       bool host, ec_error_t *err)
{
    ncomm_t *c = comm;
    ncclDataType_t nt = ncclFloat32;
    size_t es = 0;
    int rc = nccl_type(dt, &nt, &es, err);
    if (rc < 0)
        return rc;
    ncclRedOp_t no;
    switch (op) {
    case ECW_SUM: no = ncclSum; break;
    case ECW_AVG: no = ncclAvg; break;
    case ECW_MIN: no = ncclMin; break;
    case ECW_MAX: no = ncclMax; break;
    default: return ec_errorf(err, EC_EINVAL, "unknown reduction %d", (int)op);
    }
    size_t bytes = mul_ok(count, es);
    if (count && !bytes)
        return ec_errorf(err, EC_EINVAL, "nccl allreduce: %zu elements overflow", count);
    if (count && !buf)
        return ec_errorf(err, EC_EINVAL, "nccl allreduce: NULL buffer");
    if ((rc = usable(c, "allreduce", err)) < 0)
        return rc;
    if (!count)
        return 0;
    /* ecw_iallreduce calls from a thread of its own, whose current device
     * is 0 until set */
    cudaError_t dce = cu->cudaSetDevice(c->device);
    if (dce != cudaSuccess)
        return cuda_fail(c, "allreduce: cudaSetDevice", dce, err);
    if (!host && (rc = check_buffer(c, "allreduce", "buf", buf, bytes, err)) < 0)
        return rc;
    void *dev = buf;
    if (host) {
        /* the library's own small agreements: staged through device memory */
        if (bytes > c->scratch_len) {
            void *p = NULL;
            cudaError_t ce = cu->cudaMalloc(&p, bytes);
            if (ce != cudaSuccess)
                return cuda_fail(c, "allreduce staging", ce, err);
            teardown_t t = {.device = c->device, .scratch = c->scratch};
            c->scratch = p;
            c->scratch_len = bytes;
            if (!teardown_bounded(c, &t, "cudaFree"))
                return restart_err(c, "allreduce", err);
        }
        dev = c->scratch;
        cudaError_t ce = cu->cudaMemcpyAsync(dev, buf, bytes, cudaMemcpyHostToDevice,
                                             c->stream);
        if (ce != cudaSuccess)
            return cuda_fail(c, "allreduce: copying to the device", ce, err);
    } else if ((rc = order_after_caller(c, "allreduce", err)) < 0) {
        return rc;
    }
    rc = complete(c, "allreduce",
                  cu->ncclAllReduce(dev, dev, count, nt, no, c->comm, c->stream), err);
    if (rc == 0 && host) {
        /* an asynchronous copy, polled within the collective's timeout: a
         * blocking cudaMemcpy could wait forever on a wedged device */
        cudaError_t ce = cu->cudaMemcpyAsync(buf, dev, bytes, cudaMemcpyDeviceToHost,
                                             c->stream);
        if (ce != cudaSuccess)
            return cuda_fail(c, "allreduce: copying from the device", ce, err);
        rc = drain_stream(c, "allreduce: copying from the device",
                          ecw__mono_ms() + c->timeout_ms, err);
    }
    return rc;
}

static int n_broadcast(void *comm, void *buf, size_t count, ecw_dtype_t dt, int root,
                       ec_error_t *err)
{
    ncomm_t *c = comm;
    ncclDataType_t nt = ncclFloat32;
    size_t es = 0;
    int rc = nccl_type(dt, &nt, &es, err);
    if (rc < 0)
        return rc;
    if (root < 0 || root >= c->world)
        return ec_errorf(err, EC_EINVAL, "nccl broadcast: root %d is not in 0..%d", root,
                         c->world - 1);
    size_t bytes = mul_ok(count, es);
    if (count && !bytes)
        return ec_errorf(err, EC_EINVAL, "nccl broadcast: %zu elements overflow", count);
    if ((rc = usable(c, "broadcast", err)) < 0 || !count)
        return rc;
    if ((rc = check_buffer(c, "broadcast", "buf", buf, bytes, err)) < 0 ||
        (rc = order_after_caller(c, "broadcast", err)) < 0)
        return rc;
    return complete(c, "broadcast",
                    cu->ncclBroadcast(buf, buf, count, nt, root, c->comm, c->stream), err);
}

static int n_allgather(void *comm, const void *sendbuf, void *recvbuf, size_t count,
                       ecw_dtype_t dt, ec_error_t *err)
{
    ncomm_t *c = comm;
    ncclDataType_t nt = ncclFloat32;
    size_t es = 0;
    int rc = nccl_type(dt, &nt, &es, err);
    if (rc < 0)
        return rc;
    size_t bytes = mul_ok(count, es), all = mul_ok(bytes, (size_t)c->world);
    if (count && !all)
        return ec_errorf(err, EC_EINVAL, "nccl allgather: %zu elements overflow", count);
    if ((rc = usable(c, "allgather", err)) < 0 || !count)
        return rc;
    if ((rc = check_buffer(c, "allgather", "recvbuf", recvbuf, all, err)) < 0)
        return rc;
    if (!sendbuf) /* NCCL's in-place form */
        sendbuf = (const char *)recvbuf + (size_t)c->rank * bytes;
    else if ((rc = check_buffer(c, "allgather", "sendbuf", sendbuf, bytes, err)) < 0)
        return rc;
    if ((rc = order_after_caller(c, "allgather", err)) < 0)
        return rc;
    return complete(c, "allgather",
                    cu->ncclAllGather(sendbuf, recvbuf, count, nt, c->comm, c->stream), err);
}

static int n_barrier(void *comm, ec_error_t *err)
{
    int32_t one = 1;
    return n_allreduce(comm, &one, 1, ECW_I32, ECW_SUM, true, err);
}

/* Staging for ecw_sync_state: device memory on this rank's GPU; the copy
 * into the caller's buffer runs on our stream, after the caller's stream,
 * and is complete on return. */
static int n_stage_alloc(void *comm, size_t len, void **buf, ec_error_t *err)
{
    ncomm_t *c = comm;
    cudaError_t ce = cu->cudaMalloc(buf, len);
    if (ce != cudaSuccess) {
        *buf = NULL;
        if (ecw__cuda_verdict((int)ce).cls != ECW__GPU_NOMEM)
            return cuda_fail(c, "ecw_sync_state: staging", ce, err);
        cu->cudaGetLastError();
        return ec_errorf(err, EC_ENOMEM, "ecw_sync_state: cannot stage %zu bytes of state on "
                         "device %d (%s): it needs twice the state's size while it receives",
                         len, c->device, cu->cudaGetErrorString(ce));
    }
    return 0;
}

static int n_stage_commit(void *comm, void *dst, const void *src, size_t len, ec_error_t *err)
{
    ncomm_t *c = comm;
    int rc = check_buffer(c, "ecw_sync_state", "state", dst, len, err);
    if (rc < 0 || (rc = order_after_caller(c, "ecw_sync_state", err)) < 0)
        return rc;
    cudaError_t ce = cu->cudaMemcpyAsync(dst, src, len, cudaMemcpyDeviceToDevice, c->stream);
    if (ce != cudaSuccess)
        return cuda_fail(c, "ecw_sync_state: copying the received state", ce, err);
    return drain_stream(c, "ecw_sync_state: copying the received state",
                        ecw__mono_ms() + c->timeout_ms, err);
}

static void n_stage_free(void *comm, void *buf)
{
    ncomm_t *c = comm;
    if (!buf || c->lost)
        return;
    teardown_t t = {.device = c->device, .scratch = buf};
    teardown_bounded(c, &t, "cudaFree");
}

const ecw__backend_t ecw__nccl_backend = {
    .name = "nccl",
    .create = n_create,
    .connect = n_connect,
    .abort = n_abort,
    .destroy = n_destroy,
    .allreduce = n_allreduce,
    .broadcast = n_broadcast,
    .allgather = n_allgather,
    .barrier = n_barrier,
    .stage_alloc = n_stage_alloc,
    .stage_commit = n_stage_commit,
    .stage_free = n_stage_free,
};
