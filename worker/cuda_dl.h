/* The CUDA runtime and NCCL, loaded at run time (cuda_dl.c).
 *
 * libecworker links neither library: a process without CUDA (a CPU node, a
 * container without the toolkit) loads it and runs Gloo.  The NCCL backend
 * calls CUDA and NCCL only through this table.  The headers are needed at
 * build time, for the types (ncclConfig_t above all, whose layout NCCL
 * versions by its size and version fields); each pointer has the type of the
 * function it stands for (__typeof__), so a signature can never drift from
 * the header's. */
#ifndef ECW_CUDA_DL_H
#define ECW_CUDA_DL_H

#include <stddef.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "error.h"

#define ECW__DL(fn) __typeof__(fn) *fn

/* What the nccl.h built against declares (the library loaded may still
 * lack it: the pointers are then NULL). */
#define ECW__NCCL_HDR_SHRINK (NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0))
#define ECW__NCCL_HDR_SCALABLE (NCCL_VERSION_CODE >= NCCL_VERSION(2, 23, 0))

typedef struct ecw__cuda {
    /* CUDA runtime (libcudart) */
    ECW__DL(cudaGetDeviceCount);
    ECW__DL(cudaSetDevice);
    ECW__DL(cudaGetErrorString);
    ECW__DL(cudaGetLastError);
    ECW__DL(cudaStreamCreateWithFlags);
    ECW__DL(cudaStreamDestroy);
    ECW__DL(cudaStreamQuery);
    ECW__DL(cudaStreamWaitEvent);
    ECW__DL(cudaEventCreateWithFlags);
    ECW__DL(cudaEventRecord);
    ECW__DL(cudaEventDestroy);
    ECW__DL(cudaEventQuery);
    ECW__DL(cudaMalloc);
    ECW__DL(cudaFree);
    ECW__DL(cudaMemcpyAsync);
    ECW__DL(cudaPointerGetAttributes);
    /* NCCL (libnccl) */
    ECW__DL(ncclGetVersion);
    ECW__DL(ncclGetUniqueId);
    ECW__DL(ncclCommInitRankConfig);
    ECW__DL(ncclCommGetAsyncError);
    ECW__DL(ncclCommAbort);
    ECW__DL(ncclGetErrorString);
    ECW__DL(ncclGetLastError);
    ECW__DL(ncclAllReduce);
    ECW__DL(ncclBroadcast);
    ECW__DL(ncclAllGather);
    /* Optional: NULL when the NCCL loaded has none (cuda_dl.c, opt_syms);
     * only built against a header that declares them. */
#if ECW__NCCL_HDR_SHRINK
    ECW__DL(ncclCommShrink);           /* 2.27 */
#endif
#if ECW__NCCL_HDR_SCALABLE
    ECW__DL(ncclCommInitRankScalable); /* 2.23 */
#endif
    int nccl_version; /* ncclGetVersion: 22809 for 2.28.9 */
    char cudart_path[512], nccl_path[512];
    char how[1024];   /* one line: which files, and why those (for the log) */
} ecw__cuda_t;

#undef ECW__DL

/* Load both libraries and resolve the table, once per process: the first
 * success is kept for the life of the process (never unloaded: NCCL and the
 * CUDA runtime keep threads of their own).  libdir ("" or NULL: the default
 * search, see ecw_options_t.cuda_libdir).  A failure is not kept: a later
 * call tries again.  Returns 0 and *out, with (*out)->how saying which files
 * were taken; EC_ENOTFOUND naming the library that could not be loaded, or
 * the symbol missing from it, and where it was looked for. */
int ecw__cuda_load(const char *libdir, const ecw__cuda_t **out, ec_error_t *err);

#endif
