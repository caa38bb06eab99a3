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
#include "clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_dl.h"
#include "gpu_policy.h"
#include "nccl_plan.h"
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
    /* For the next epoch's plan (nccl_plan.h): this epoch's members, and
     * what became of this communicator. */
    int nmembers, nproc;
    char **node_ids;     /* NULL: membership unknown (no shrink from it) */
    struct ncomm *prev;  /* the previous epoch's, handed over: connect shrinks or drops it */
    bool ready;          /* connected */
    bool shrunk;         /* made by ncclCommShrink */
    bool errored;        /* a call failed and NCCL kept the communicator */
    bool interrupted;    /* an epoch cut a call off and the communicator was kept to be
                            shrunk with NCCL_SHRINK_ABORT (ECOORD_WORKER_NCCL_REBUILD=shrink) */
    bool doomed;         /* cut off or failed: no call goes into it again; its abort is
                            left to its teardown (retire.c: off the training thread) */
} ncomm_t;

static void n_destroy(void *comm);

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

/* ncclCommAbort took 1.0 s on an idle one-rank communicator (H200, NCCL
 * 2.28.3): a short collective timeout must not make a normal abort look
 * stuck. */
#define ABORT_MIN_MS 10000

static void nap_us(long us);

/* NCCL's one-time set-up in this process (its init, the network's, loading
 * its kernels: ~0.4 s of the first init on an H200, against ~11 ms for a
 * later one), paid at boot: a one-rank communicator, built here and handed
 * to its teardown off this thread (retire.c).  A joiner's peers wait for
 * its first epoch's build; its boot they do not wait for.  Best effort: a
 * failure is logged and the first epoch pays instead. */
static void warm_nccl(ecw_t *w, int device)
{
    int64_t t0 = ec_mono_ms();
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = cu->ncclGetUniqueId(&id);
    if (r == ncclSuccess)
        r = cu->ncclCommInitRankConfig(&comm, 1, id, 0, &cfg);
    ncclResult_t st = r;
    while (comm && (r == ncclSuccess || r == ncclInProgress)) {
        if (cu->ncclCommGetAsyncError(comm, &st) != ncclSuccess || st != ncclInProgress)
            break;
        if (ec_mono_ms() - t0 > ABORT_MIN_MS) {
            st = ncclInProgress;
            break;
        }
        nap_us(200);
    }
    ncomm_t *shell = comm ? calloc(1, sizeof(*shell)) : NULL;
    if (shell) {
        shell->w = w;
        shell->device = device;
        shell->world = 1;
        shell->comm = comm;
        ecw__retire(w, &ecw__nccl_backend, shell);
    } else if (comm) {
        cu->ncclCommAbort(comm);
    }
    if (st == ncclSuccess)
        ecw__log(w, ECW_LOG_INFO, "+nccl warmed up in %" PRId64 " ms: a one-rank communicator "
                 "(NCCL's one-time set-up, before this process says it is ready; "
                 "ECOORD_WORKER_NCCL_WARM=0: not)", ec_mono_ms() - t0);
    else
        ecw__log(w, ECW_LOG_WARN, "nccl warm-up (a one-rank communicator at boot) failed after "
                 "%" PRId64 " ms: %s; the first epoch's build pays NCCL's set-up instead",
                 ec_mono_ms() - t0, cu->ncclGetErrorString(st == ncclSuccess ? r : st));
}

int ecw__nccl_warm(ecw_t *w, int device, ec_error_t *err)
{
    if (!cu)
        return ec_errorf(err, EC_EINVAL, "CUDA is not loaded");
    int64_t t0 = ec_mono_ms();
    cudaError_t ce = cu->cudaSetDevice(device);
    if (ce == cudaSuccess)
        ce = cu->cudaFree(NULL); /* the documented way to create the context now */
    if (ce != cudaSuccess) {
        cu->cudaGetLastError();
        return ec_errorf(err, EC_ESYS, "cannot make the CUDA context of device %d: %s (%s, "
                         "error %d)", device, cu->cudaGetErrorString(ce),
                         ecw__cuda_verdict((int)ce).name, (int)ce);
    }
    ecw__log(w, ECW_LOG_INFO, "+cuda context of device %d made in %" PRId64 " ms (before this "
             "process says it is ready)", device, ec_mono_ms() - t0);
    if (w->o.nccl_warm)
        warm_nccl(w, device);
    return 0;
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

static bool n_reusable(void *comm);

/* Stop what a given-up communicator still runs on our stream.  Its kernels
 * run until its abort begins (NCCL's abort first raises the flag they poll)
 * and write into the caller's buffer all that time: on an H200 the kernel of
 * an allreduce an epoch cut off wrote into a buffer linreg had refilled after
 * ECW_EEPOCHCHANGED, and two ranks went on with different parameters.  So a
 * connected communicator that is not kept for NCCL_SHRINK_ABORT (n_reusable:
 * ECOORD_WORKER_NCCL_REBUILD=shrink, where the shrink in ecw_rebuild stops
 * them) is handed to its teardown now (retire.c: the abort runs off this
 * thread), and this thread waits only until our stream is idle: milliseconds,
 * not the abort's ~0.6 s; a collective queued behind the caller's own
 * kernels returns once they end.  false when it did not go idle within the
 * collective's timeout (at least ABORT_MIN_MS) or the device faulted
 * (ecw__restart was called). */
static bool stop_kernels(ncomm_t *c)
{
    if (!c->ready || !c->comm || c->lost || n_reusable(c))
        return true;
    ncomm_t *shell = calloc(1, sizeof(*shell));
    if (!shell)
        return true; /* left to its teardown at the next build, as before */
    shell->w = c->w;
    shell->epoch = c->epoch;
    shell->rank = c->rank;
    shell->world = c->world;
    shell->device = c->device;
    shell->timeout_ms = c->timeout_ms;
    shell->comm = c->comm;
    c->comm = NULL;
    c->aborted = true;
    /* What is in flight ends with the event recorded after it: the stream,
     * its event and the scratch memory go with the communicator, so this
     * one keeps nothing to tear down (and takes no second retirement). */
    cudaEvent_t done = NULL;
    if (c->stream && cu->cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess) {
        if (cu->cudaEventRecord(done, c->stream) == cudaSuccess) {
            shell->stream = c->stream;
            shell->ordered = c->ordered;
            shell->scratch = c->scratch;
            c->stream = NULL;
            c->ordered = NULL;
            c->scratch = NULL;
            c->scratch_len = 0;
        } else {
            cu->cudaEventDestroy(done);
            done = NULL;
        }
    }
    /* what is queued before ours on the stream (the caller's own kernels,
     * ordered before the collective) ends on its own time: the collective's
     * timeout bounds the wait, as it bounds an abort */
    int limit = c->timeout_ms > ABORT_MIN_MS ? c->timeout_ms : ABORT_MIN_MS;
    int64_t t0 = ec_mono_ms();
    ecw__retire(c->w, &ecw__nccl_backend, shell);
    if (!done && !c->stream)
        return true;
    for (;;) {
        cudaError_t q = done ? cu->cudaEventQuery(done) : cu->cudaStreamQuery(c->stream);
        if (q != cudaErrorNotReady || ec_mono_ms() - t0 > limit) {
            if (done)
                cu->cudaEventDestroy(done);
            if (q == cudaSuccess) {
                ecw__log(c->w, ECW_LOG_INFO, "-nccl epoch %" PRIu64 ": the given-up "
                         "communicator's kernels stopped %" PRId64 " ms after its abort began "
                         "(the abort goes on off this thread)", c->epoch, ec_mono_ms() - t0);
                return true;
            }
            ecw__gpu_verdict_t v = ecw__cuda_verdict((int)q);
            if (q != cudaErrorNotReady && v.cls != ECW__GPU_FATAL) {
                cu->cudaGetLastError();
                return true;
            }
            c->lost = true;
            if (q == cudaErrorNotReady)
                ecw__restart(c->w, "the work of epoch %" PRIu64 "'s communicator on CUDA "
                             "device %d still ran %d ms after its abort began: this GPU's "
                             "state is unknown", c->epoch, c->device, limit);
            else
                ecw__restart(c->w, "CUDA on device %d: %s (%s, error %d)", c->device,
                             cu->cudaGetErrorString(q), v.name, (int)q);
            return false;
        }
        nap_us(50);
    }
}

/* Give the communicator up: the call that found it cut off or failed
 * returns as soon as its kernels stopped (stop_kernels), not after NCCL's
 * abort (about a second), which runs off this thread; or, kept for
 * NCCL_SHRINK_ABORT, it is shrunk by the next build, which ends what is in
 * flight.  Nothing calls into it again.  false: restart the process. */
static bool doom(ncomm_t *c)
{
    c->doomed = true;
    return stop_kernels(c);
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
    c->errored = true; /* kept: for NCCL_SHRINK_ABORT, or aborted when dropped */
    if (v.cls == ECW__GPU_FATAL) {
        do_abort(c); /* best effort: the process goes anyway */
        return restart_err(c, what, err);
    }
    if (!v.keeps_comm && !doom(c))
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
    if (!v.keeps_comm) {
        c->errored = true;
        if (!doom(c))
            return restart_err(c, what, err);
    }
    return rc;
}

/* A call an epoch cut off returns at once: the communicator is kept, not
 * aborted here, either for ncclCommShrink(NCCL_SHRINK_ABORT) to end the call
 * and drop the dead ranks (ECOORD_WORKER_NCCL_REBUILD=shrink: n_reusable;
 * auto shrinks only a healthy communicator, nccl_plan.c) or for its
 * teardown off this thread beside the next build (retire.c). */
static int aborted_err(ncomm_t *c, const char *what, ec_error_t *err)
{
    c->interrupted = true;
    if (!doom(c))
        return restart_err(c, what, err);
    return ec_errorf(err, EC_EABORTED, "nccl %s on rank %d of %d (epoch %" PRIu64 ") cut off: "
                     "a newer epoch was published; rebuild", what, c->rank, c->world, c->epoch);
}

static int n_create(ecw_t *w, const ecw__build_t *b, void **out, ec_error_t *err)
{
    if (!cu) {
        n_destroy(b->prev);
        return ec_errorf(err, EC_EINTERNAL, "nccl: CUDA and NCCL were never loaded");
    }
    ncomm_t *c = calloc(1, sizeof(*c));
    if (!c) {
        n_destroy(b->prev); /* ours from here, success or not */
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    c->w = w;
    c->epoch = b->epoch;
    c->rank = b->rank;
    c->world = b->world;
    c->device = b->device;
    c->timeout_ms = b->timeout_ms;
    c->deadline_ms = b->deadline_ms;
    c->prev = b->prev;
    c->nmembers = b->nmembers;
    c->nproc = b->nproc;
    if (b->node_ids && b->nmembers > 0 && (c->node_ids = calloc((size_t)b->nmembers,
                                                                 sizeof(char *)))) {
        for (int i = 0; i < b->nmembers; i++)
            if (!(c->node_ids[i] = strdup(b->node_ids[i] ? b->node_ids[i] : ""))) {
                n_destroy(c);
                return ec_errorf(err, EC_ENOMEM, "out of memory");
            }
    } else if (b->node_ids && b->nmembers > 0) {
        n_destroy(c);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
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
        if (ec_mono_ms() > deadline) {
            if (!doom(c))
                return restart_err(c, what, err);
            return ec_errorf(err, EC_ETIMEDOUT, "nccl %s on rank %d of %d (epoch %" PRIu64
                             ") did not finish by its deadline: a member is missing or "
                             "stalled; wait for the next epoch", what, c->rank, c->world,
                             c->epoch);
        }
        nap_us(50);
    }
}

/* ---- building: shrink or init, by nccl_plan.c ---- */

static int ms_left(int64_t deadline)
{
    int64_t left = deadline - ec_mono_ms();
    return left > 0 ? (left > INT32_MAX ? INT32_MAX : (int)left) : 0;
}

static void plan_input(ncomm_t *c, ecw__nccl_plan_in_t *in, ecw__nccl_epoch_t *pv,
                       ecw__nccl_epoch_t *nx)
{
    memset(in, 0, sizeof(*in));
    *nx = (ecw__nccl_epoch_t){c->epoch, c->nmembers, c->nproc,
                              (const char *const *)c->node_ids};
    in->mode = (ecw__rebuild_mode_t)c->w->o.nccl_rebuild;
    in->nccl_version = cu->nccl_version;
#if ECW__NCCL_HDR_SHRINK
    in->have_shrink = cu->ncclCommShrink != NULL;
#endif
#if ECW__NCCL_HDR_SCALABLE
    in->have_scalable = cu->ncclCommInitRankScalable != NULL;
#endif
    in->next = nx;
    in->rank = c->rank;
    in->roots = c->w->o.nccl_roots;
    in->scalable_min = c->w->o.nccl_scalable_min;
    const ncomm_t *p = c->prev;
    if (p && p->node_ids) {
        *pv = (ecw__nccl_epoch_t){p->epoch, p->nmembers, p->nproc,
                                  (const char *const *)p->node_ids};
        in->prev = pv;
        in->prev_rank = p->rank;
        in->prev_alive = p->comm && !p->lost && !p->aborted;
        in->prev_errored = p->errored;
        in->prev_interrupted = p->interrupted;
        in->prev_shrunk = p->shrunk;
    }
}

/* Every member builds the same way: rank 0's.  The plan is computed from
 * the two epochs, the same for all, but what it rests on locally (the
 * previous communicator alive or failed, the NCCL version, the knobs) can
 * differ.  Rank 0 publishes "<shrink|init> <roots> <previous epoch> <why>"
 * (the previous epoch: whose communicator it shrinks) under the epoch's
 * keys (epochs/<n>/comm/nccl.plan); the others read it.  Rank 0 inits: every
 * rank inits, with rank 0's roots.  Rank 0 shrinks and this rank cannot:
 * it inits, and the shrinkers wait for it until the shrink's deadline, then
 * init too (bounded, logged). */
static int agree_plan(ncomm_t *c, const ecw__nccl_plan_in_t *in, ecw__nccl_plan_t *plan,
                      ec_error_t *err)
{
    char text[ECW__PLAN_WHY_MAX + 64];
    if (c->rank == 0) {
        ecw__nccl_plan_format(in, plan, text, sizeof(text));
        int rc = ecw__comm_put(c->w, c->epoch, "nccl.plan", text, strlen(text), err);
        return rc < 0 ? ec_error_prefix(err, "publishing how epoch %" PRIu64 "'s NCCL "
                                        "communicator is built", c->epoch) : 0;
    }
    void *val = NULL;
    size_t len = 0;
    int rc = ecw__comm_get(c->w, c->epoch, "nccl.plan", &val, &len, ms_left(c->deadline_ms),
                           &c->abort_req, err);
    if (rc == EC_ETIMEDOUT)
        return ec_errorf(err, EC_ETIMEDOUT, "rank 0 of epoch %" PRIu64 " did not say how the "
                         "NCCL communicator is built by the rebuild deadline (it has not "
                         "started, or died): wait for the next epoch", c->epoch);
    if (rc < 0)
        return rc;
    snprintf(text, sizeof(text), "%.*s", (int)(len < sizeof(text) ? len : sizeof(text) - 1),
             (const char *)val);
    free(val);
    bool holds_up = false;
    if ((rc = ecw__nccl_plan_follow(in, plan, text, &holds_up, err)) < 0)
        return ec_error_prefix(err, "epoch %" PRIu64, c->epoch);
    if (holds_up)
        ecw__log(c->w, ECW_LOG_WARN, "nccl epoch %" PRIu64 ": rank 0 shrinks, rank %d cannot "
                 "(%s): the shrink waits for it until its deadline, then every rank inits",
                 c->epoch, c->rank, plan->why);
    return 0;
}

/* ncclCommShrink, called off the training thread: with NCCL_SHRINK_ABORT
 * it first waits for the parent's kernels to stop, which nothing bounds.
 * slot is where NCCL's own thread stores the new communicator when its
 * (non-blocking) init ends: heap memory of its own, leaked if never
 * filled. */
typedef struct shrink_call {
    int device, flags, nexcl;
    ncclComm_t parent;
    ncclComm_t *slot;
    int *excl;
    ncclResult_t r;
} shrink_call_t;

static void shrink_free(void *p)
{
    shrink_call_t *s = p;
    if (s)
        free(s->excl);
    free(s);
}

static void shrink_run(void *p)
{
#if ECW__NCCL_HDR_SHRINK
    shrink_call_t *s = p;
    cu->cudaSetDevice(s->device);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    /* No shared resources: whether NCCL shares them depends on the flag,
     * which may differ between ranks (each knows only whether its own call
     * was cut off), and must not. */
    cfg.shrinkShare = 0;
    s->r = cu->ncclCommShrink(s->parent, s->excl, s->nexcl, s->slot, &cfg, s->flags);
#else
    ((shrink_call_t *)p)->r = ncclInvalidUsage;
#endif
}

/* Shrink c->prev into c->comm by plan, by deadline.  0; EC_EABORTED (a
 * newer epoch); EC_ERESTART (a call did not return: the GPU state is
 * unknown); any other code: the shrink failed and left nothing behind
 * (c->comm NULL, the parent aborted): init instead. */
static int do_shrink(ncomm_t *c, const ecw__nccl_plan_t *plan, int64_t deadline,
                     ec_error_t *err)
{
    ncomm_t *p = c->prev;
    ncclComm_t *slot = calloc(1, sizeof(*slot));
    shrink_call_t *s = calloc(1, sizeof(*s));
    int *excl = malloc(sizeof(int) * (size_t)plan->nexcluded);
    if (!slot || !s || !excl) {
        free(slot);
        free(s);
        free(excl);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    memcpy(excl, plan->excluded, sizeof(int) * (size_t)plan->nexcluded);
    *s = (shrink_call_t){.device = c->device, .nexcl = plan->nexcluded, .parent = p->comm,
                         .slot = slot, .excl = excl, .r = ncclInternalError,
#if ECW__NCCL_HDR_SHRINK
                         .flags = plan->abort ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT,
#endif
    };
    int limit = ms_left(deadline);
    int rc = ecw__run_with_deadline(shrink_run, s, shrink_free, limit > 0 ? limit : 1);
    if (rc == EC_ETIMEDOUT) {
        /* s and slot belong to the stuck call now; the parent is inside it */
        p->lost = true;
        c->lost = true;
        ecw__restart(c->w, "ncclCommShrink of epoch %" PRIu64 "'s communicator on CUDA device "
                     "%d did not return within %d ms (%d such calls still running): this "
                     "GPU's state is unknown", p->epoch, c->device, limit, ecw__stuck_calls());
        return restart_err(c, "ncclCommShrink", err);
    }
    if (rc < 0)
        shrink_run(s); /* no thread to spare: here, unbounded */
    ncclResult_t r = s->r;
    shrink_free(s);
    if (r != ncclSuccess && r != ncclInProgress) {
        ncclComm_t child = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        free(slot);
        c->comm = child;
        do_abort(c); /* if NCCL left one */
        c->aborted = c->doomed = c->interrupted = false; /* replaced by the init that follows */
        return ec_errorf(err, EC_EIO, "ncclCommShrink of epoch %" PRIu64 "'s communicator on "
                         "rank %d returned %s (%s)", p->epoch, p->rank, cu->ncclGetErrorString(r),
                         ecw__nccl_verdict((int)r).name);
    }
    /* NCCL's thread stores the child when its init ends, well or not. */
    const char *why = NULL;
    for (;;) {
        ncclComm_t child = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        if (child) {
            c->comm = child;
            break;
        }
        if (atomic_load(&c->abort_req))
            why = "a newer epoch was published";
        else if (ec_mono_ms() > deadline)
            why = "it did not finish by its deadline (a survivor is missing, or died)";
        if (why) {
            /* Aborting the parent aborts its child's init (NCCL raises the
             * child's abort flag with the parent's); the child then
             * appears, failed, and is aborted in turn. */
            do_abort(p);
            int64_t until = ec_mono_ms() + ABORT_MIN_MS;
            while (!(child = __atomic_load_n(slot, __ATOMIC_ACQUIRE)) &&
                   ec_mono_ms() < until)
                nap_us(200);
            if (!child) {
                c->lost = true;
                ecw__restart(c->w, "ncclCommShrink of epoch %" PRIu64 "'s communicator was "
                             "abandoned (%s), and its new communicator never appeared within "
                             "%d ms of aborting the old one: this GPU's state is unknown",
                             p->epoch, why, ABORT_MIN_MS);
                return restart_err(c, "ncclCommShrink", err); /* slot: NCCL's, leaked */
            }
            c->comm = child;
            free(slot);
            if (!do_abort(c))
                return restart_err(c, "ncclCommShrink", err);
            c->aborted = c->doomed = c->interrupted = false; /* replaced by the init that follows */
            return ec_errorf(err, atomic_load(&c->abort_req) ? EC_EABORTED : EC_ETIMEDOUT,
                             "ncclCommShrink on rank %d of epoch %" PRIu64 " given up: %s",
                             c->rank, c->epoch, why);
        }
        nap_us(50);
    }
    free(slot);
    rc = wait_ready(c, "ncclCommShrink", deadline, err);
    if (rc < 0) {
        /* an error NCCL would let a communicator keep still ends this one:
         * the init that follows replaces it */
        if (rc != EC_ERESTART && c->comm && !do_abort(c))
            return restart_err(c, "ncclCommShrink", err);
        c->aborted = c->doomed = c->interrupted = false; /* replaced by the init that follows */
        c->errored = false;
        return rc;
    }
    c->shrunk = true;
    return 0;
}

static void id_key(int root, char *key, size_t len)
{
    if (root == 0)
        snprintf(key, len, "nccl.id"); /* the one-root key, as before */
    else
        snprintf(key, len, "nccl.id.%d", root);
}

/* A full init with nroots unique ids: id i is created and published by the
 * first rank NCCL's bootstrap assigns to root i (nccl_plan.c), every rank
 * reads the others. */
static int do_init(ncomm_t *c, int nroots, ec_error_t *err)
{
    ncclUniqueId *ids = calloc((size_t)nroots, sizeof(*ids));
    if (!ids)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    int rc = 0;
    char key[32];
    for (int i = 0; i < nroots; i++) {
        if (ecw__nccl_root_rank(i, c->world, nroots) != c->rank)
            continue;
        ncclResult_t r = cu->ncclGetUniqueId(&ids[i]);
        if (r != ncclSuccess) {
            rc = nccl_fail(c, "ncclGetUniqueId", r, err);
            goto out;
        }
        id_key(i, key, sizeof(key));
        if ((rc = ecw__comm_put(c->w, c->epoch, key, &ids[i], sizeof(ids[i]), err)) < 0)
            goto out;
    }
    for (int i = 0; i < nroots; i++) {
        if (ecw__nccl_root_rank(i, c->world, nroots) == c->rank)
            continue;
        void *val = NULL;
        size_t len = 0;
        id_key(i, key, sizeof(key));
        rc = ecw__comm_get(c->w, c->epoch, key, &val, &len, ms_left(c->deadline_ms),
                           &c->abort_req, err);
        if (rc < 0)
            goto out;
        if (len != sizeof(ids[i])) {
            free(val);
            rc = ec_errorf(err, EC_EPROTO, "the NCCL id %d of epoch %" PRIu64 " is %zu bytes, "
                           "not %zu (another NCCL version on rank %d?)", i, c->epoch, len,
                           sizeof(ids[i]), ecw__nccl_root_rank(i, c->world, nroots));
            goto out;
        }
        memcpy(&ids[i], val, sizeof(ids[i]));
        free(val);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r;
    const char *fn = "ncclCommInitRankConfig";
    if (nroots == 1) {
        r = cu->ncclCommInitRankConfig(&c->comm, c->world, ids[0], c->rank, &cfg);
    } else {
#if ECW__NCCL_HDR_SCALABLE
        fn = "ncclCommInitRankScalable";
        r = cu->ncclCommInitRankScalable(&c->comm, c->world, c->rank, nroots, ids, &cfg);
#else
        r = ncclInvalidUsage; /* agree_plan refused this already */
#endif
    }
    if (r != ncclSuccess && r != ncclInProgress) {
        rc = nccl_fail(c, fn, r, err);
        goto out;
    }
    rc = wait_ready(c, "init", c->deadline_ms, err);
out:
    free(ids);
    return rc;
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
    ecw__nccl_plan_in_t in;
    ecw__nccl_epoch_t pv, nx;
    ecw__nccl_plan_t plan;
    plan_input(c, &in, &pv, &nx);
    int rc;
    if (c->node_ids) {
        if ((rc = ecw__nccl_plan(&in, &plan, err)) < 0)
            return rc;
    } else {
        memset(&plan, 0, sizeof(plan));
        plan.kind = ECW__PLAN_INIT;
        plan.nroots = 1;
        snprintf(plan.why, sizeof(plan.why), "epoch %" PRIu64 "'s members were not known here",
                 c->epoch);
    }
    if ((rc = agree_plan(c, &in, &plan, err)) < 0)
        goto out;
    int pworld = c->prev ? c->prev->world : 0;
    int64_t shrink_us = 0, init_us = 0, t0 = ec_mono_us();
    char failed[160] = "";
    if (plan.kind == ECW__PLAN_SHRINK) {
        /* leave the init that may follow half of what is left */
        int64_t now = ec_mono_ms(), deadline = c->deadline_ms;
        if (deadline - now > 2 * (int64_t)c->timeout_ms)
            deadline = now + c->timeout_ms;
        else
            deadline = now + (deadline - now) / 2;
        rc = do_shrink(c, &plan, deadline, err);
        shrink_us = ec_mono_us() - t0;
        if (rc == EC_EABORTED || rc == EC_ERESTART || rc == EC_ENOMEM)
            goto out;
        if (rc < 0) {
            snprintf(failed, sizeof(failed), "%.150s", err ? err->msg : ec_strerror(rc));
            ecw__log(c->w, ECW_LOG_WARN, "nccl epoch %" PRIu64 ": shrink from %d to %d ranks "
                     "failed after %" PRId64 " ms (%s): a full init instead", c->epoch, pworld,
                     c->world, shrink_us / 1000, failed);
            int roots = plan.nroots; /* rank 0's, agreed */
            ecw__nccl_plan_fallback(&in, &plan, failed);
            plan.nroots = roots;
        }
    }
    /* The old communicator goes now: after a shrink (its child no longer
     * needs it), or beside the init that follows, never before it (its
     * ncclCommAbort takes about a second: retire.c runs it off this thread;
     * NCCL requires that abort after NCCL_SHRINK_ABORT).  One whose teardown
     * never returned is not touched: this GPU's state is unknown. */
    if (c->prev) {
        bool lost = c->prev->lost;
        ecw__retire(c->w, &ecw__nccl_backend, c->prev);
        c->prev = NULL;
        if (lost)
            c->lost = true;
    }
    if (c->lost) {
        rc = restart_err(c, "dropping the previous communicator", err);
        goto out;
    }
    char method[32];
    if (plan.kind == ECW__PLAN_SHRINK && !failed[0]) {
        snprintf(method, sizeof(method), "shrink");
        ecw__log(c->w, ECW_LOG_INFO, "+nccl epoch %" PRIu64 ": shrink from %d to %d ranks in %"
                 PRId64 " ms (%s)", c->epoch, pworld, c->world, shrink_us / 1000, plan.why);
    } else {
        int64_t ti = ec_mono_us();
        if ((rc = do_init(c, plan.nroots, err)) < 0)
            goto out;
        init_us = ec_mono_us() - ti;
        snprintf(method, sizeof(method), "%sinit %d root%s", failed[0] ? "shrink failed, " : "",
                 plan.nroots, plan.nroots == 1 ? "" : "s");
        ecw__log(c->w, ECW_LOG_INFO, "+nccl epoch %" PRIu64 ": init (%d root%s) of %d ranks in "
                 "%" PRId64 " ms (%s)", c->epoch, plan.nroots, plan.nroots == 1 ? "" : "s",
                 c->world, init_us / 1000, plan.why);
    }
    ecw__timing_build(c->w, c->epoch, method, shrink_us, init_us);
    ce = cu->cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess)
        ce = cu->cudaEventCreateWithFlags(&c->ordered, cudaEventDisableTiming);
    if (ce == cudaSuccess) {
        c->scratch_len = 64;
        ce = cu->cudaMalloc(&c->scratch, c->scratch_len);
    }
    if (ce != cudaSuccess) {
        rc = cuda_fail(c, "setting up its stream", ce, err);
        goto out;
    }
    c->ready = true;
    rc = 0;
out:
    ecw__nccl_plan_free(&plan);
    return rc;
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
    if (!c->lost && (c->comm || c->stream || c->ordered || c->scratch)) {
        teardown_t t = {.device = c->device, .comm = c->comm, .stream = c->stream,
                        .ordered = c->ordered, .scratch = c->scratch};
        teardown_bounded(c, &t, c->comm ? "ncclCommAbort" : "freeing the stream and memory");
    }
    n_destroy(c->prev);
    for (int i = 0; c->node_ids && i < c->nmembers; i++)
        free(c->node_ids[i]);
    free(c->node_ids);
    free(c);
}

/* Whether rebuild should hand this communicator to the next epoch's build
 * (b->prev) instead of destroying it: it may be shrunk. */
static bool n_reusable(void *comm)
{
    ncomm_t *c = comm;
    bool have = false;
#if ECW__NCCL_HDR_SHRINK
    have = cu && cu->ncclCommShrink && cu->nccl_version >= ECW__NCCL_SHRINK_MIN;
#endif
    if (!have || !c || !c->ready || !c->comm || c->lost || c->aborted || !c->node_ids)
        return false;
    int mode = c->w->o.nccl_rebuild;
    if (mode == ECW__REBUILD_INIT)
        return false;
    /* auto never shrinks a failed one: drop it now, as before */
    return mode == ECW__REBUILD_SHRINK || !(c->errored || c->interrupted);
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
        if (ec_mono_ms() > deadline) {
            if (!doom(c))
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
    int64_t deadline = ec_mono_ms() + c->timeout_ms;
    int rc = wait_ready(c, what, deadline, err); /* enqueue of a non-blocking comm */
    if (rc < 0)
        return rc;
    return drain_stream(c, what, deadline, err);
}

static int usable(ncomm_t *c, const char *what, ec_error_t *err)
{
    if (c->lost)
        return restart_err(c, what, err);
    if (c->doomed && !atomic_load(&c->abort_req))
        return ec_errorf(err, EC_EABORTED, "nccl %s on rank %d of %d (epoch %" PRIu64 "): this "
                         "communicator failed earlier; rebuild", what, c->rank, c->world,
                         c->epoch);
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
                          ec_mono_ms() + c->timeout_ms, err);
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
                        ec_mono_ms() + c->timeout_ms, err);
}

static void n_stage_free(void *comm, void *buf)
{
    ncomm_t *c = comm;
    if (!buf || c->lost)
        return;
    teardown_t t = {.device = c->device, .scratch = buf};
    teardown_bounded(c, &t, "cudaFree");
}

/* Given up mid-collective (stop_kernels): its communicator, stream and
 * memory went to their own teardown; freeing this is free. */
static bool n_holds_nothing(void *comm)
{
    ncomm_t *c = comm;
    return !c->comm && !c->stream && !c->ordered && !c->scratch && !c->prev;
}

const ecw__backend_t ecw__nccl_backend = {
    .name = "nccl",
    .create = n_create,
    .connect = n_connect,
    .abort = n_abort,
    .destroy = n_destroy,
    .reusable = n_reusable,
    .allreduce = n_allreduce,
    .broadcast = n_broadcast,
    .allgather = n_allgather,
    .barrier = n_barrier,
    .stage_alloc = n_stage_alloc,
    .stage_commit = n_stage_commit,
    .stage_free = n_stage_free,
    .slow_teardown = true,
    .holds_nothing = n_holds_nothing,
};
