/* What NCCL's and CUDA's results mean for the job (gpu_policy.h).
 *
 * The arguments, from NCCL's and CUDA's own documentation and source:
 *
 * - ncclInvalidArgument / ncclInvalidUsage are the caller's mistake, but on
 *   a non-blocking communicator (ours: config.blocking = 0) NCCL stores the
 *   failed check as the communicator's asynchronous error
 *   (ncclEnqueueCheck's fail path calls ncclCommSetAsyncError, src/enqueue.cc
 *   in 2.28), and ncclCommEnsureReady returns that error to every later call:
 *   the communicator is done.  So the library checks every argument NCCL
 *   would (dtype, op, root, NULL buffers, and where the buffers live) before
 *   calling it, and those refusals keep the communicator; one NCCL still
 *   refuses is EC_EINVAL too, returned at once, but the communicator goes.
 * - ncclSystemError (a socket or system call failed: typically a peer's
 *   process died), ncclRemoteError (the remote rank or the network reported
 *   it) and ncclTimeout (NCCL 2.29 and later) are the peers' failures: the
 *   peer-failure path, where the coordinator's next epoch is awaited (the
 *   epoch, not NCCL, says who is dead: NCCL issue #279).
 * - ncclInternalError: NCCL's own state is wrong; drop the communicator.
 * - ncclUnhandledCudaError: a CUDA call inside NCCL failed.  The CUDA error
 *   is not returned, so the library asks CUDA (a stream query on this
 *   process's context): a sticky error there means the context is lost.
 * - CUDA's documentation of cudaErrorIllegalAddress, cudaErrorLaunchFailure,
 *   cudaErrorHardwareStackError, cudaErrorIllegalInstruction,
 *   cudaErrorMisalignedAddress, cudaErrorInvalidAddressSpace,
 *   cudaErrorInvalidPc, cudaErrorAssert and cudaErrorLaunchTimeout says "This
 *   leaves the process in an inconsistent state and any further CUDA work
 *   will return the same error.  To continue using CUDA, the process must be
 *   terminated and relaunched": FATAL, ECW_ERESTART.  An uncorrectable ECC or
 *   NVLink error, a contained error, a destroyed context, a lost MPS server
 *   and "unknown" leave nothing this process can trust either.
 * - cudaErrorNoDevice, cudaErrorInsufficientDriver (35, what this machine's
 *   runtime answers without a driver), cudaErrorInitializationError: no GPU
 *   for this process, which AUTO turns into Gloo. */
#include "gpu_policy.h"

#include <stdio.h>

typedef struct verdict_row {
    int value;
    ecw__gpu_class_t cls;
    int code;
    bool keeps_comm;
    const char *name;
} verdict_row_t;

/* Every ncclResult_t of nccl.h (2.28; ncclTimeout from 2.29). */
static const verdict_row_t nccl_rows[] = {
    {0, ECW__GPU_OK, 0, true, "ncclSuccess"},
    {1, ECW__GPU_ASK_CUDA, EC_EINTERNAL, false, "ncclUnhandledCudaError"},
    {2, ECW__GPU_PEER, EC_EIO, false, "ncclSystemError"},
    {3, ECW__GPU_BROKEN, EC_EINTERNAL, false, "ncclInternalError"},
    {4, ECW__GPU_BAD_ARG, EC_EINVAL, false, "ncclInvalidArgument"},
    {5, ECW__GPU_BAD_ARG, EC_EINVAL, false, "ncclInvalidUsage"},
    {6, ECW__GPU_PEER, EC_EIO, false, "ncclRemoteError"},
    {7, ECW__GPU_PENDING, 0, true, "ncclInProgress"},
    {8, ECW__GPU_PEER, EC_ETIMEDOUT, false, "ncclTimeout"},
};

/* The cudaError_t values the backend can meet, by what they mean.  Values
 * from CUDA 13's driver_types.h (stable since CUDA 10 for these). */
static const verdict_row_t cuda_rows[] = {
    {0, ECW__GPU_OK, 0, true, "cudaSuccess"},
    {600, ECW__GPU_PENDING, 0, true, "cudaErrorNotReady"},
    /* the caller's arguments: nothing happened */
    {1, ECW__GPU_BAD_ARG, EC_EINVAL, true, "cudaErrorInvalidValue"},
    {16, ECW__GPU_BAD_ARG, EC_EINVAL, true, "cudaErrorInvalidHostPointer"},
    {17, ECW__GPU_BAD_ARG, EC_EINVAL, true, "cudaErrorInvalidDevicePointer"},
    {21, ECW__GPU_BAD_ARG, EC_EINVAL, true, "cudaErrorInvalidMemcpyDirection"},
    {400, ECW__GPU_BAD_ARG, EC_EINVAL, true, "cudaErrorInvalidResourceHandle"},
    {900, ECW__GPU_BAD_ARG, EC_EINVAL, true, "cudaErrorStreamCaptureUnsupported"},
    {901, ECW__GPU_BAD_ARG, EC_EINVAL, true, "cudaErrorStreamCaptureInvalidated"},
    {906, ECW__GPU_BAD_ARG, EC_EINVAL, true, "cudaErrorStreamCaptureImplicit"},
    {908, ECW__GPU_BAD_ARG, EC_EINVAL, true, "cudaErrorStreamCaptureWrongThread"},
    {2, ECW__GPU_NOMEM, EC_ENOMEM, true, "cudaErrorMemoryAllocation"},
    /* no GPU for this process */
    {3, ECW__GPU_NO_DEVICE, EC_ENOTFOUND, true, "cudaErrorInitializationError"},
    {34, ECW__GPU_NO_DEVICE, EC_ENOTFOUND, true, "cudaErrorStubLibrary"},
    {35, ECW__GPU_NO_DEVICE, EC_ENOTFOUND, true, "cudaErrorInsufficientDriver"},
    {36, ECW__GPU_NO_DEVICE, EC_ENOTFOUND, true, "cudaErrorCallRequiresNewerDriver"},
    {100, ECW__GPU_NO_DEVICE, EC_ENOTFOUND, true, "cudaErrorNoDevice"},
    {101, ECW__GPU_NO_DEVICE, EC_ENOTFOUND, true, "cudaErrorInvalidDevice"},
    {802, ECW__GPU_NO_DEVICE, EC_ENOTFOUND, true, "cudaErrorSystemNotReady"},
    {803, ECW__GPU_NO_DEVICE, EC_ENOTFOUND, true, "cudaErrorSystemDriverMismatch"},
    {804, ECW__GPU_NO_DEVICE, EC_ENOTFOUND, true, "cudaErrorCompatNotSupportedOnDevice"},
    /* the context is lost: restart the process */
    {46, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorDevicesUnavailable"},
    {201, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorDeviceUninitialized"},
    {214, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorECCUncorrectable"},
    {220, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorNvlinkUncorrectable"},
    {226, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorContained"},
    {700, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorIllegalAddress"},
    {702, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorLaunchTimeout"},
    {709, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorContextIsDestroyed"},
    {710, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorAssert"},
    {714, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorHardwareStackError"},
    {715, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorIllegalInstruction"},
    {716, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorMisalignedAddress"},
    {717, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorInvalidAddressSpace"},
    {718, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorInvalidPc"},
    {719, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorLaunchFailure"},
    {721, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorTensorMemoryLeak"},
    {805, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorMpsConnectionFailed"},
    {806, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorMpsRpcFailure"},
    {807, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorMpsServerNotReady"},
    {810, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorMpsClientTerminated"},
    {999, ECW__GPU_FATAL, EC_ERESTART, false, "cudaErrorUnknown"},
    /* the process is exiting: the runtime is being unloaded */
    {4, ECW__GPU_BROKEN, EC_EABORTED, false, "cudaErrorCudartUnloading"},
};

static ecw__gpu_verdict_t lookup(const verdict_row_t *rows, size_t n, int value)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].value == value)
            return (ecw__gpu_verdict_t){rows[i].cls, rows[i].code, rows[i].keeps_comm,
                                        rows[i].name};
    return (ecw__gpu_verdict_t){ECW__GPU_BROKEN, EC_EINTERNAL, false, "unknown"};
}

ecw__gpu_verdict_t ecw__nccl_verdict(int r)
{
    return lookup(nccl_rows, sizeof(nccl_rows) / sizeof(nccl_rows[0]), r);
}

ecw__gpu_verdict_t ecw__cuda_verdict(int e)
{
    return lookup(cuda_rows, sizeof(cuda_rows) / sizeof(cuda_rows[0]), e);
}

ecw__gpu_verdict_t ecw__nccl_cuda_verdict(int cuda_now)
{
    ecw__gpu_verdict_t v = ecw__cuda_verdict(cuda_now);
    if (v.cls == ECW__GPU_FATAL)
        return v;
    return (ecw__gpu_verdict_t){ECW__GPU_BROKEN, EC_EINTERNAL, false, "ncclUnhandledCudaError"};
}

int ecw__gpu_check_buffer(const char *what, const char *which, const void *p, size_t bytes,
                          int device, ecw__ptr_attr_fn attr, void *arg, ec_error_t *err)
{
    if (!bytes)
        return 0;
    if (!p)
        return ec_errorf(err, EC_EINVAL, "nccl %s: %s is NULL for %zu bytes", what, which, bytes);
    int type = 0, dev = -1;
    int rc = attr(p, &type, &dev, arg);
    if (rc != 0) {
        ecw__gpu_verdict_t v = ecw__cuda_verdict(rc);
        /* Before CUDA 11 an unregistered host pointer was refused with
         * cudaErrorInvalidValue: that is host memory too. */
        if (v.cls != ECW__GPU_BAD_ARG)
            return ec_errorf(err, v.code, "nccl %s: CUDA cannot tell where %s (%p) lives: %s "
                             "(error %d)%s", what, which, p, v.name, rc,
                             v.cls == ECW__GPU_FATAL ? "; this process's GPU state is lost: "
                             "exit so that the agent restarts it" : "");
        type = 0;
    }
    switch (type) {
    case 2: /* device */
        if (dev != device)
            return ec_errorf(err, EC_EINVAL, "nccl %s: %s (%p) is memory of CUDA device %d, "
                             "but this process's communicator is on device %d: allocate it on "
                             "device %d (the options' device, or FLAGS_selected_gpus)", what,
                             which, p, dev, device, device);
        return 0;
    case 3: /* managed: reachable from the device */
        return 0;
    default:
        return ec_errorf(err, EC_EINVAL, "nccl %s: %s (%p) is %s memory; NCCL needs device "
                         "memory of CUDA device %d: copy it there first (cudaMalloc), or run "
                         "with backend gloo (ECOORD_WORKER_BACKEND=gloo) for host buffers", what,
                         which, p, type == 1 ? "pinned host" : "host (pageable)", device);
    }
}
