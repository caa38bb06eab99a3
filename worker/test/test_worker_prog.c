/* A training process for tests/t4000-worker (not a test itself): ecw_init
 * from the environment, as a program `ecoord launch` starts does, one
 * allreduce of 1.0 (sum), then one line each: what ran, and whether
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
    int rc = ecw_allreduce(w, &v, 1, ECW_F64, ECW_SUM, &err);
    printf("ran backend=%s allreduce=%s sum=%g%s%s\n", ecw_backend_name(ecw_backend(w)),
           ecw_err_name(rc), v, rc ? " " : "", rc ? err.msg : "");
    printf("loaded nccl=%d cudart=%d\n", loaded(nccl), loaded(cudart));
    ecw_finalize(w);
    return rc == 0 ? 0 : 1;
}
