/* Loading the CUDA runtime and NCCL at run time (cuda_dl.h).
 *
 * Where from, in order:
 *   1. A library of that soname already in the process (dlopen with
 *      RTLD_NOLOAD): the NCCL and the CUDA runtime torch loaded, say.  A
 *      second NCCL beside it would be a second copy of its global state in
 *      one process; theirs is also the one the program's own GPU work runs
 *      with.
 *   2. With a directory named (ECOORD_WORKER_CUDA_LIBDIR): that directory
 *      only, so that a deployment says exactly which files it runs.
 *   3. Otherwise the loader's search (LD_LIBRARY_PATH, ld.so.cache), then
 *      the directory configure found CUDA in (ECW__CUDA_LIBDIR_DEFAULT; it
 *      is not on the default loader path on our machines, see
 *      shared/docs/collectives.md).
 * Both libraries are opened RTLD_LOCAL: their symbols never interpose on
 * the program's.
 *
 * NCCL must be 2.14 or newer: ncclCommInitRankConfig and non-blocking
 * communicators came with 2.14.  ncclConfig_t from the build's header
 * (2.28) is accepted by an older NCCL: ncclCommInitRankConfig copies
 * min(config->size, its own sizeof) bytes and resets the fields newer than
 * config->version to their defaults (parseCommConfig, src/init.cc), and
 * fields are only ever appended.
 *
 * The CUDA runtime: the soname of the header's major version (13 here); an
 * already loaded 12 or 11 is taken too (torch's wheels bring 12): the few
 * functions in the table have kept their signatures and
 * cudaPointerAttributes its layout since CUDA 11. */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "cuda_dl.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#ifndef ECW__CUDA_LIBDIR_DEFAULT
#define ECW__CUDA_LIBDIR_DEFAULT "/usr/local/cuda/lib64"
#endif

#define NCCL_MIN_VERSION 21400 /* 2.14.0 */

typedef struct sym {
    const char *name;
    size_t off;
    bool nccl;
} sym_t;

#define S(fn, nccl) {#fn, offsetof(ecw__cuda_t, fn), nccl}
static const sym_t syms[] = {
    S(cudaGetDeviceCount, false), S(cudaSetDevice, false), S(cudaGetErrorString, false),
    S(cudaGetLastError, false), S(cudaStreamCreateWithFlags, false),
    S(cudaStreamDestroy, false), S(cudaStreamQuery, false), S(cudaStreamWaitEvent, false),
    S(cudaEventCreateWithFlags, false), S(cudaEventRecord, false), S(cudaEventDestroy, false),
    S(cudaEventQuery, false),
    S(cudaMalloc, false), S(cudaFree, false), S(cudaMemcpyAsync, false),
    S(cudaPointerGetAttributes, false),
    S(ncclGetVersion, true), S(ncclGetUniqueId, true), S(ncclCommInitRankConfig, true),
    S(ncclCommGetAsyncError, true), S(ncclCommAbort, true), S(ncclGetErrorString, true),
    S(ncclGetLastError, true), S(ncclAllReduce, true), S(ncclBroadcast, true),
    S(ncclAllGather, true),
};

/* Resolved when present, NULL otherwise: their absence only means the
 * older way (a full init with one root; nccl_plan.c decides). */
static const sym_t opt_syms[] = {
#if ECW__NCCL_HDR_SHRINK
    S(ncclCommShrink, true),
#endif
#if ECW__NCCL_HDR_SCALABLE
    S(ncclCommInitRankScalable, true),
#endif
    {NULL, 0, true},
};
#undef S

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static ecw__cuda_t table;
static bool loaded;

static void path_of(void *h, char *out, size_t len)
{
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name)
        snprintf(out, len, "%s", lm->l_name);
}

/* Append "; what" to a bounded buffer. */
static void add(char *buf, size_t len, const char *what)
{
    size_t n = strlen(buf);
    if (n + 3 < len)
        snprintf(buf + n, len - n, "%s%s", n ? "; " : "", what);
}

/* Open one library by the rules above.  names: its sonames, preferred first;
 * fresh: how many of them may be loaded anew (the rest only if already
 * loaded).  NULL with `tried` saying where it was looked for. */
static void *open_lib(const char *const *names, size_t n, size_t fresh, const char *libdir,
                      char *path, size_t plen, char *how, size_t hlen, char *tried, size_t tlen)
{
    for (size_t i = 0; i < n; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (h) {
            snprintf(path, plen, "%s", names[i]);
            path_of(h, path, plen);
            snprintf(how, hlen, "%s, already loaded in this process", path);
            return h;
        }
    }
    add(tried, tlen, "not already loaded in this process");
    char file[1024];
    const char *dirs[2] = {libdir && *libdir ? libdir : NULL, NULL};
    if (!dirs[0])
        dirs[1] = ECW__CUDA_LIBDIR_DEFAULT;
    for (int pass = 0; pass < 2; pass++) {
        const char *dir = dirs[pass];
        if (pass == 0 && !dir)
            dir = ""; /* the loader's search */
        if (!dir)
            continue;
        for (size_t i = 0; i < fresh; i++) {
            if (*dir)
                snprintf(file, sizeof(file), "%s/%s", dir, names[i]);
            else
                snprintf(file, sizeof(file), "%s", names[i]);
            void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
            if (h) {
                snprintf(path, plen, "%s", file);
                path_of(h, path, plen);
                snprintf(how, hlen, "%s, from %s", path,
                         !*dir ? "the loader's search path"
                         : pass == 0 ? "the directory ECOORD_WORKER_CUDA_LIBDIR names"
                                     : "the CUDA directory configure found");
                return h;
            }
            const char *e = dlerror();
            char one[600];
            /* dlerror names the file already */
            if (*dir)
                snprintf(one, sizeof(one), "%.580s", e ? e : file);
            else
                snprintf(one, sizeof(one), "the loader's search path: %.500s",
                         e ? e : "not found");
            add(tried, tlen, one);
        }
    }
    return NULL;
}

int ecw__cuda_load(const char *libdir, const ecw__cuda_t **out, ec_error_t *err)
{
    pthread_mutex_lock(&load_mu);
    if (loaded) {
        *out = &table;
        pthread_mutex_unlock(&load_mu);
        return 0;
    }
    ecw__cuda_t t;
    memset(&t, 0, sizeof(t));
    char cudart_major[32];
    snprintf(cudart_major, sizeof(cudart_major), "libcudart.so.%d", CUDART_VERSION / 1000);
    const char *cudart_names[] = {cudart_major, "libcudart.so.12", "libcudart.so.11.0"};
    const char *nccl_names[] = {"libnccl.so.2"};
    char how_nccl[600] = "", how_cudart[600] = "", tried[1500] = "";
    int rc = 0;
    void *hn = NULL, *hc = NULL;
    hn = open_lib(nccl_names, 1, 1, libdir, t.nccl_path, sizeof(t.nccl_path), how_nccl,
                  sizeof(how_nccl), tried, sizeof(tried));
    if (!hn) {
        rc = ec_errorf(err, EC_ENOTFOUND, "cannot load libnccl.so.2 (%s): install NCCL 2.14 or "
                       "newer, or name its directory in ECOORD_WORKER_CUDA_LIBDIR", tried);
        goto out;
    }
    tried[0] = '\0';
    hc = open_lib(cudart_names, 3, 1, libdir, t.cudart_path, sizeof(t.cudart_path), how_cudart,
                  sizeof(how_cudart), tried, sizeof(tried));
    if (!hc) {
        rc = ec_errorf(err, EC_ENOTFOUND, "cannot load the CUDA runtime %s (%s): install the "
                       "CUDA %d runtime, or name its directory in ECOORD_WORKER_CUDA_LIBDIR",
                       cudart_major, tried, CUDART_VERSION / 1000);
        goto out;
    }
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *f = dlsym(syms[i].nccl ? hn : hc, syms[i].name);
        if (!f) {
            rc = ec_errorf(err, EC_ENOTFOUND, "%s has no %s: %s", syms[i].nccl ? t.nccl_path
                           : t.cudart_path, syms[i].name, syms[i].nccl
                           ? "NCCL 2.14 or newer is needed (non-blocking communicators)"
                           : "a CUDA runtime of version 11 or newer is needed");
            goto out;
        }
        memcpy((char *)&t + syms[i].off, &f, sizeof(f));
    }
    for (size_t i = 0; opt_syms[i].name; i++) {
        void *f = dlsym(hn, opt_syms[i].name);
        memcpy((char *)&t + opt_syms[i].off, &f, sizeof(f));
    }
    if (t.ncclGetVersion(&t.nccl_version) != ncclSuccess || t.nccl_version < NCCL_MIN_VERSION) {
        rc = ec_errorf(err, EC_ENOTFOUND, "%s is NCCL version code %d; 2.14 (21400) or newer "
                       "is needed (non-blocking communicators)", t.nccl_path, t.nccl_version);
        goto out;
    }
    bool shrink = false, scalable = false;
#if ECW__NCCL_HDR_SHRINK
    shrink = t.ncclCommShrink != NULL;
#endif
#if ECW__NCCL_HDR_SCALABLE
    scalable = t.ncclCommInitRankScalable != NULL;
#endif
    snprintf(t.how, sizeof(t.how), "NCCL %d.%d.%d (ncclCommShrink: %s, "
             "ncclCommInitRankScalable: %s): %s; CUDA runtime: %s", t.nccl_version / 10000,
             t.nccl_version / 100 % 100, t.nccl_version % 100, shrink ? "yes" : "no",
             scalable ? "yes" : "no", how_nccl, how_cudart);
    table = t;
    loaded = true;
    *out = &table;
out:
    /* On failure the handles stay open: harmless, and a library that started
     * threads must not be unloaded under them. */
    pthread_mutex_unlock(&load_mu);
    return rc;
}
