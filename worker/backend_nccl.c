/* The NCCL backend.
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
 * remote ranks (#279).
 *
 * Collectives run on a stream of the library's own and return once they
 * completed on this rank, so nothing of an aborted communicator is left on
 * the caller's streams. */
#include "ecw_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

typedef struct ncomm {
    ecw_t *w;
    uint64_t epoch;
    int rank, world, device, timeout_ms;
    int64_t deadline_ms;
    ncclComm_t comm;     /* NULL once aborted */
    cudaStream_t stream;
    void *scratch;       /* device memory for host-memory agreements */
    size_t scratch_len;
    _Atomic int abort_req;
    bool aborted;
} ncomm_t;

int ecw__nccl_device_count(ec_error_t *err)
{
    int n = 0;
    cudaError_t ce = cudaGetDeviceCount(&n);
    if (ce != cudaSuccess) {
        /* Without a driver this is error 35: not a crash, just no GPU here. */
        ec_errorf(err, EC_ENOTFOUND, "no usable GPU: CUDA says %s (error %d)",
                  cudaGetErrorString(ce), (int)ce);
        cudaGetLastError(); /* clear the sticky error */
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

static int nccl_fail(ncomm_t *c, const char *what, ncclResult_t r, ec_error_t *err)
{
    const char *last = c->comm ? ncclGetLastError(c->comm) : ncclGetLastError(NULL);
    return ec_errorf(err, r == ncclRemoteError || r == ncclSystemError ? EC_EIO : EC_EINTERNAL,
                     "nccl %s on rank %d of %d (epoch %" PRIu64 "): %s%s%s", what, c->rank,
                     c->world, c->epoch, ncclGetErrorString(r), last && *last ? ": " : "",
                     last ? last : "");
}

static void do_abort(ncomm_t *c)
{
    if (c->comm) {
        ncclCommAbort(c->comm);
        c->comm = NULL;
    }
    c->aborted = true;
}

static int aborted_err(ncomm_t *c, const char *what, ec_error_t *err)
{
    do_abort(c);
    return ec_errorf(err, EC_EABORTED, "nccl %s on rank %d of %d (epoch %" PRIu64 ") aborted: "
                     "a newer epoch was published; rebuild", what, c->rank, c->world, c->epoch);
}

static int n_create(ecw_t *w, const ecw__build_t *b, void **out, ec_error_t *err)
{
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
        ncclResult_t r = ncclCommGetAsyncError(c->comm, &st);
        if (r != ncclSuccess) {
            int rc = nccl_fail(c, what, r, err);
            do_abort(c);
            return rc;
        }
        if (st == ncclSuccess)
            return 0;
        if (st != ncclInProgress) {
            int rc = nccl_fail(c, what, st, err);
            do_abort(c);
            return rc;
        }
        if (ecw__mono_ms() > deadline) {
            do_abort(c);
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
    cudaError_t ce = cudaSetDevice(c->device);
    if (ce != cudaSuccess)
        return ec_errorf(err, EC_ENOTFOUND, "CUDA device %d is not usable by rank %d: %s",
                         c->device, c->rank, cudaGetErrorString(ce));
    ncclUniqueId id;
    int rc;
    if (c->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
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
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, c->world, id, c->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        rc = nccl_fail(c, "ncclCommInitRankConfig", r, err);
        do_abort(c);
        return rc;
    }
    rc = wait_ready(c, "init", c->deadline_ms, err);
    if (rc < 0)
        return rc;
    ce = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess) {
        c->scratch_len = 64;
        ce = cudaMalloc(&c->scratch, c->scratch_len);
    }
    if (ce != cudaSuccess) {
        do_abort(c);
        return ec_errorf(err, EC_ENOMEM, "CUDA on device %d: %s", c->device,
                         cudaGetErrorString(ce));
    }
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
    /* Abort, not finalize: peers may be gone, and finalize would wait for them. */
    do_abort(c);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    cudaFree(c->scratch);
    free(c);
}

/* Wait for the operation just enqueued (r) to complete on our stream. */
static int complete(ncomm_t *c, const char *what, ncclResult_t r, ec_error_t *err)
{
    if (r != ncclSuccess && r != ncclInProgress) {
        int rc = nccl_fail(c, what, r, err);
        do_abort(c);
        return rc;
    }
    int64_t deadline = ecw__mono_ms() + c->timeout_ms;
    int rc = wait_ready(c, what, deadline, err); /* enqueue of a non-blocking comm */
    if (rc < 0)
        return rc;
    for (;;) {
        if (atomic_load(&c->abort_req))
            return aborted_err(c, what, err);
        cudaError_t q = cudaStreamQuery(c->stream);
        if (q == cudaSuccess)
            return 0;
        if (q != cudaErrorNotReady) {
            do_abort(c);
            return ec_errorf(err, EC_EIO, "nccl %s on rank %d of %d: CUDA stream: %s", what,
                             c->rank, c->world, cudaGetErrorString(q));
        }
        ncclResult_t st = ncclSuccess;
        if (ncclCommGetAsyncError(c->comm, &st) == ncclSuccess && st != ncclSuccess &&
            st != ncclInProgress) {
            rc = nccl_fail(c, what, st, err);
            do_abort(c);
            return rc;
        }
        if (ecw__mono_ms() > deadline) {
            do_abort(c);
            return ec_errorf(err, EC_ETIMEDOUT, "nccl %s on rank %d of %d made no progress "
                             "within %d ms: a member is stalled or cut off; wait for the next "
                             "epoch", what, c->rank, c->world, c->timeout_ms);
        }
        nap_us(50);
    }
}

static int usable(ncomm_t *c, const char *what, ec_error_t *err)
{
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
    if (count && !buf)
        return ec_errorf(err, EC_EINVAL, "nccl allreduce: NULL buffer");
    if ((rc = usable(c, "allreduce", err)) < 0)
        return rc;
    if (!count)
        return 0;
    void *dev = buf;
    size_t bytes = count * es;
    if (host) {
        if (bytes > c->scratch_len) {
            void *p = NULL;
            if (cudaMalloc(&p, bytes) != cudaSuccess)
                return ec_errorf(err, EC_ENOMEM, "cudaMalloc(%zu) failed", bytes);
            cudaFree(c->scratch);
            c->scratch = p;
            c->scratch_len = bytes;
        }
        dev = c->scratch;
        if (cudaMemcpyAsync(dev, buf, bytes, cudaMemcpyHostToDevice, c->stream) != cudaSuccess)
            return ec_errorf(err, EC_EIO, "copying %zu bytes to device %d failed", bytes,
                             c->device);
    }
    rc = complete(c, "allreduce", ncclAllReduce(dev, dev, count, nt, no, c->comm, c->stream),
                  err);
    if (rc == 0 && host &&
        cudaMemcpy(buf, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        return ec_errorf(err, EC_EIO, "copying %zu bytes from device %d failed", bytes,
                         c->device);
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
    if ((rc = usable(c, "broadcast", err)) < 0 || !count)
        return rc;
    return complete(c, "broadcast",
                    ncclBroadcast(buf, buf, count, nt, root, c->comm, c->stream), err);
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
    if ((rc = usable(c, "allgather", err)) < 0 || !count)
        return rc;
    if (!sendbuf) /* NCCL's in-place form */
        sendbuf = (const char *)recvbuf + (size_t)c->rank * count * es;
    return complete(c, "allgather",
                    ncclAllGather(sendbuf, recvbuf, count, nt, c->comm, c->stream), err);
}

static int n_barrier(void *comm, ec_error_t *err)
{
    int32_t one = 1;
    return n_allreduce(comm, &one, 1, ECW_I32, ECW_SUM, true, err);
}

/* Staging for ecw_sync_state: device memory on this rank's GPU; the copy
 * into the caller's buffer runs on our stream and is complete on return. */
static int n_stage_alloc(void *comm, size_t len, void **buf, ec_error_t *err)
{
    ncomm_t *c = comm;
    cudaError_t ce = cudaMalloc(buf, len);
    if (ce != cudaSuccess) {
        *buf = NULL;
        return ec_errorf(err, EC_ENOMEM, "ecw_sync_state: cannot stage %zu bytes of state on "
                         "device %d (%s): it needs twice the state's size while it receives",
                         len, c->device, cudaGetErrorString(ce));
    }
    return 0;
}

static int n_stage_commit(void *comm, void *dst, const void *src, size_t len, ec_error_t *err)
{
    ncomm_t *c = comm;
    cudaError_t ce = cudaMemcpyAsync(dst, src, len, cudaMemcpyDeviceToDevice, c->stream);
    if (ce == cudaSuccess)
        ce = cudaStreamSynchronize(c->stream);
    if (ce != cudaSuccess)
        return ec_errorf(err, EC_EIO, "ecw_sync_state: copying %zu bytes of received state "
                         "on device %d failed: %s", len, c->device, cudaGetErrorString(ce));
    return 0;
}

static void n_stage_free(void *comm, void *buf)
{
    (void)comm;
    cudaFree(buf);
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
