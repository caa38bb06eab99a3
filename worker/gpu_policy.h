/* The NCCL backend's decisions, as pure functions of numbers: what each
 * ncclResult_t and cudaError_t means for the job (one table each), and
 * whether a buffer may be handed to NCCL.  No CUDA or NCCL header is needed:
 * this builds, and is tested (worker/test/test_gpu_policy.c), on a machine
 * without either; backend_nccl.c checks the numbers against the headers it
 * was built with. */
#ifndef ECW_GPU_POLICY_H
#define ECW_GPU_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

typedef enum {
    ECW__GPU_OK = 0,
    ECW__GPU_PENDING,   /* ncclInProgress, cudaErrorNotReady: poll again */
    ECW__GPU_BAD_ARG,   /* the caller's mistake: ECW_EINVAL */
    ECW__GPU_NOMEM,     /* ECW_ENOMEM */
    ECW__GPU_NO_DEVICE, /* no usable GPU for this process: ECW_ENOTFOUND */
    ECW__GPU_PEER,      /* a remote rank or the network failed: the peer-failure path */
    ECW__GPU_FATAL,     /* this process's CUDA context is lost: ECW_ERESTART */
    ECW__GPU_ASK_CUDA,  /* ncclUnhandledCudaError: the state of CUDA decides (see below) */
    ECW__GPU_BROKEN,    /* NCCL internal or unknown: this communicator is done */
} ecw__gpu_class_t;

typedef struct ecw__gpu_verdict {
    ecw__gpu_class_t cls;
    int code;         /* EC_* code to return; 0 for OK and PENDING */
    bool keeps_comm;  /* the communicator may still be used afterwards */
    const char *name; /* "ncclRemoteError", "cudaErrorIllegalAddress"; "unknown" */
} ecw__gpu_verdict_t;

/* The verdict on an ncclResult_t / a cudaError_t, by value.  A value the
 * table does not know (a newer NCCL or CUDA) is BROKEN with EC_EINTERNAL:
 * the communicator is dropped, the process kept. */
ecw__gpu_verdict_t ecw__nccl_verdict(int nccl_result);
ecw__gpu_verdict_t ecw__cuda_verdict(int cuda_error);

/* ncclUnhandledCudaError says a CUDA call inside NCCL failed, not which:
 * cuda_now is what CUDA answers now for a call on this process's context (a
 * query of the backend's stream).  A sticky error there is FATAL; anything
 * else leaves the communicator BROKEN and the process usable. */
ecw__gpu_verdict_t ecw__nccl_cuda_verdict(int cuda_now);

/* cudaPointerGetAttributes, reduced to what the check needs: returns a
 * cudaError_t value and sets *type (cudaMemoryType: 0 unregistered, 1 host,
 * 2 device, 3 managed) and *device. */
typedef int (*ecw__ptr_attr_fn)(const void *p, int *type, int *device, void *arg);

/* May `which` (a buffer of `bytes` bytes at p) go to the NCCL collective
 * `what` on a communicator of CUDA device `device`?  0, or EC_EINVAL with a
 * message (host or unregistered memory, another device's memory, NULL with
 * bytes > 0), or the verdict's code when the attribute query itself fails
 * with an error other than an invalid value.  bytes 0: always 0 (NCCL
 * touches nothing). */
int ecw__gpu_check_buffer(const char *what, const char *which, const void *p, size_t bytes,
                          int device, ecw__ptr_attr_fn attr, void *arg, ec_error_t *err);

#endif
