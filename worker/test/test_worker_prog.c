/* A training process for tests/t4000-worker (not a test itself): ecw_init
 * from the environment, as a program `ecoord launch` starts does, one
 * allreduce of 1.0 (sum; under NCCL on a buffer in the GPU's memory, through
 * the CUDA runtime the process has loaded), then one line each: what ran, and whether
 * libnccl and libcudart are in the process; the library's log goes to
 * stdout too.  With --preload it first loads libnccl.so.2 and the CUDA
 * runtime itself, from the loader's path, as torch does before a program
 * gets to ecw_init.  Exit 0 when init and the allreduce succeeded, 2 when
 * init failed ("init failed: <code> <message>"), 1 otherwise. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ecw.h"

static void print_log(ecw_log_level_t lvl, const char *msg, void *arg)
{
    (void)lvl;
    (void)arg;
    printf("log: %s\n", msg);
    fflush(stdout);
}

/* The CUDA runtime calls a device buffer needs, from the libcudart the
 * process loaded (NCCL loaded it): cudaMalloc, cudaMemcpyAsync (to pageable
 * host memory it returns once copied), cudaFree, and cudaDeviceSynchronize
 * when there is one. */
typedef int (*cuda_malloc_fn)(void **, size_t);
typedef int (*cuda_memcpy_fn)(void *, const void *, size_t, int, void *);
typedef int (*cuda_free_fn)(void *);
typedef int (*cuda_sync_fn)(void);

static int device_allreduce(ecw_t *w, double *v, ecw_error_t *err)
{
    void *rt = NULL;
    const char *names[] = {"libcudart.so.13", "libcudart.so.12", NULL};
    for (int i = 0; names[i] && !rt; i++)
        rt = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
    cuda_malloc_fn cmalloc = rt ? (cuda_malloc_fn)dlsym(rt, "cudaMalloc") : NULL;
    cuda_memcpy_fn cmemcpy = rt ? (cuda_memcpy_fn)dlsym(rt, "cudaMemcpyAsync") : NULL;
    cuda_free_fn cfree = rt ? (cuda_free_fn)dlsym(rt, "cudaFree") : NULL;
    cuda_sync_fn csync = rt ? (cuda_sync_fn)dlsym(rt, "cudaDeviceSynchronize") : NULL;
    void *d = NULL;
    if (!cmalloc || !cmemcpy || !cfree || cmalloc(&d, sizeof(*v)) != 0) {
        snprintf(err->msg, sizeof(err->msg), "no device buffer: libcudart %s",
                 rt ? "lacks a call or cudaMalloc failed" : "is not loaded");
        return err->code = ECW_ENOMEM;
    }
    int rc = ECW_EINVAL;
    snprintf(err->msg, sizeof(err->msg), "cudaMemcpyAsync or cudaDeviceSynchronize failed");
    if (cmemcpy(d, v, sizeof(*v), 1 /* host to device */, NULL) == 0 && (!csync || csync() == 0)) {
        rc = ecw_allreduce(w, d, 1, ECW_F64, ECW_SUM, err);
        if (rc == 0 && (cmemcpy(v, d, sizeof(*v), 2 /* device to host */, NULL) != 0 ||
                        (csync && csync() != 0)))
            rc = ECW_EINVAL;
    }
    cfree(d);
    return rc;
}

static int loaded(const char *const *names)
{
    for (; *names; names++)
        if (dlopen(*names, RTLD_NOW | RTLD_NOLOAD))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *nccl[] = {"libnccl.so.2", NULL};
    const char *cudart[] = {"libcudart.so.13", "libcudart.so.12", NULL};
    if (argc > 1 && !strcmp(argv[1], "--preload")) {
        void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
        void *r = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
        if (!r)
            r = dlopen("libcudart.so.12", RTLD_NOW | RTLD_GLOBAL);
        printf("preloaded nccl=%d cudart=%d\n", h != NULL, r != NULL);
        if (!h || !r)
            return 3;
    }
    ecw_options_t o = ECW_OPTIONS_INIT;
    o.log_cb = print_log;
    o.log_level = ECW_LOG_INFO;
    ecw_t *w = NULL;
    ecw_error_t err = {0};
    if (ecw_init(&o, &w, &err) < 0) {
        printf("init failed: %s %s\n", ecw_err_name(err.code), err.msg);
        printf("loaded nccl=%d cudart=%d\n", loaded(nccl), loaded(cudart));
        return 2;
    }
    /* the legacy default stream: what NULL means; Gloo ignores it */
    if (ecw_set_stream(w, NULL, &err) < 0)
        printf("ecw_set_stream failed: %s\n", err.msg);
    double v = 1.0;
    /* NCCL takes device memory only (a host buffer is refused) */
    int rc = ecw_backend(w) == ECW_BACKEND_NCCL ? device_allreduce(w, &v, &err)
                                                : ecw_allreduce(w, &v, 1, ECW_F64, ECW_SUM, &err);
    printf("ran backend=%s allreduce=%s sum=%g%s%s\n", ecw_backend_name(ecw_backend(w)),
           ecw_err_name(rc), v, rc ? " " : "", rc ? err.msg : "");
    printf("loaded nccl=%d cudart=%d\n", loaded(nccl), loaded(cudart));
    ecw_finalize(w);
    return rc == 0 ? 0 : 1;
}
