/* linreg: a data-parallel trainer that survives membership changes in place.
 *
 *   linreg [--steps N] [--delay-ms MS] [--dim D] [--samples N] [--lr X]
 *          [--backend auto|gloo|nccl] [--timestamps] [--verbose]
 *
 * Run it under `ecoord launch --rebuild=inprocess`.  It fits a linear model
 * to a synthetic data set (sample i is a pure function of i, so every
 * process can make any shard of it) by full-batch gradient descent: each
 * epoch, rank r of W owns the samples i with i % W == r; one allreduce per
 * step sums the shard gradients, squared errors, sample counts and a 1 per
 * rank, so every rank gets the exact gradient of the whole data set, the
 * global loss and the world size it was computed over.  After each step an
 * allreduce of (checksum, -checksum) with MAX checks that every rank holds
 * bit-identical parameters.  On ECW_EEPOCHCHANGED it rebuilds, recovers the
 * parameters and step from its peers (ecw_sync_state) and redoes the step;
 * a joiner or a restarted process starts with no state and gets the live one.
 * On ECW_EUNCONFIRMED (etcd cannot confirm this node's membership) it keeps
 * its state, waits 200 ms and tries again.
 *
 * One line per step on stdout (tests parse them):
 *   linreg step=S epoch=E rank=R world=W sum=W' loss=L cs=HEX pid=P node=N lr=K
 * (with --timestamps a last field t=<wall clock ms>, for benchmarks) and events:
 *   linreg event=epoch-changed op=OP blocked_ms=MS epoch=E pid=P
 *   linreg event=rebuilt epoch=E rank=R world=W step=S src=R' ms=MS pid=P
 *   linreg event=fenced op=OP code=ECW_EUNCONFIRMED pid=P: MESSAGE
 *   linreg done steps=S pid=P
 * Exit 0 after --steps steps; 1 on a library error; 3 if the ranks' parameters
 * ever differ.  Data-parallel on the CPU: host buffers, so the Gloo backend
 * (the default here).  Under NCCL (--backend nccl, or auto on a GPU machine)
 * each collective and the state sync go through a buffer in the GPU's
 * memory, copied in and out with the CUDA runtime the library loaded
 * (dlopen: linreg itself links no CUDA). */
#include <dlfcn.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ecw.h"

typedef struct {
    long long steps;
    int delay_ms, dim, samples;
    double lr;
    ecw_backend_t backend;
    int verbose, timestamps;
} cfg_t;

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* splitmix64: the data set is a pure function of (sample, feature). */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double unit(uint64_t h) /* [-1, 1) */
{
    return (double)(h >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static double feature(uint64_t i, int j) { return unit(mix(i * 1000003ULL + (uint64_t)j)); }
static double true_w(int j) { return 2.0 * unit(mix(0xabcdefULL + (uint64_t)j)); }

static double label(uint64_t i, int dim)
{
    double y = 0.0;
    for (int j = 0; j < dim; j++)
        y += true_w(j) * feature(i, j);
    return y + 0.01 * unit(mix(i ^ 0x5eedULL));
}

/* 52-bit FNV-1a of the parameters: exact as a double, so MAX over ranks of
 * (cs, -cs) shows whether all are equal. */
static uint64_t checksum(const double *p, int n)
{
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < (size_t)n * sizeof(double); i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h & ((1ULL << 52) - 1);
}

static void on_log(ecw_log_level_t lvl, const char *msg, void *arg)
{
    (void)arg;
    static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    fprintf(stderr, "ecw %s: %s\n", names[lvl], msg);
}

static void usage(void)
{
    fprintf(stderr, "usage: linreg [--steps N] [--delay-ms MS] [--dim D] [--samples N] "
                    "[--lr X] [--backend auto|gloo|nccl] [--timestamps] [--verbose]\n");
}

static int parse(int argc, char **argv, cfg_t *c)
{
    static const struct option opts[] = {
        {"steps", required_argument, 0, 's'},   {"delay-ms", required_argument, 0, 'd'},
        {"dim", required_argument, 0, 'D'},     {"samples", required_argument, 0, 'n'},
        {"lr", required_argument, 0, 'l'},      {"backend", required_argument, 0, 'b'},
        {"verbose", no_argument, 0, 'v'},       {"help", no_argument, 0, 'h'},
        {"timestamps", no_argument, 0, 't'},
        {0, 0, 0, 0},
    };
    *c = (cfg_t){.steps = 200, .delay_ms = 0, .dim = 16, .samples = 2048, .lr = 0.05,
                 .backend = ECW_BACKEND_GLOO};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's': c->steps = atoll(optarg); break;
        case 'd': c->delay_ms = atoi(optarg); break;
        case 'D': c->dim = atoi(optarg); break;
        case 'n': c->samples = atoi(optarg); break;
        case 'l': c->lr = atof(optarg); break;
        case 'v': c->verbose = 1; break;
        case 't': c->timestamps = 1; break;
        case 'b':
            if (!strcmp(optarg, "auto"))
                c->backend = ECW_BACKEND_AUTO;
            else if (!strcmp(optarg, "nccl"))
                c->backend = ECW_BACKEND_NCCL;
            else if (!strcmp(optarg, "gloo"))
                c->backend = ECW_BACKEND_GLOO;
            else
                return -1;
            break;
        default: return -1;
        }
    }
    if (c->steps < 1 || c->delay_ms < 0 || c->dim < 1 || c->dim > 4096 || c->samples < 1 ||
        !(c->lr > 0))
        return -1;
    return 0;
}

/* ECW_EUNCONFIRMED: etcd cannot confirm this node's membership (the fence).
 * Say so (once every 5 s at most), keep the state, wait a little: the
 * caller retries. */
static void fenced(const char *op, const ecw_error_t *err)
{
    static int64_t said_at;
    static long refused;
    refused++;
    if (!said_at || now_ms() - said_at >= 5000) {
        printf("linreg event=fenced op=%s code=%s refused=%ld pid=%d: %s\n", op,
               ecw_err_name(err->code), refused, (int)getpid(), err->msg);
        fflush(stdout);
        said_at = now_ms();
    }
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
}

/* The GPU side under NCCL: one device buffer, copies on the legacy default
 * stream (the library's stream here: ecw_set_stream's NULL) followed by a
 * device synchronize.  off: host buffers (Gloo). */
typedef struct {
    int on;
    void *d;
    size_t cap;
    int (*dmalloc)(void **, size_t);
    int (*dcopy)(void *, const void *, size_t, int, void *);
    int (*dsync)(void);
} gpu_t;

static gpu_t gpu;

static int gpu_open(size_t cap)
{
    void *rt = NULL;
    const char *names[] = {"libcudart.so.13", "libcudart.so.12", NULL};
    for (int i = 0; names[i] && !rt; i++)
        rt = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
    if (!rt)
        return -1;
    gpu.dmalloc = (int (*)(void **, size_t))dlsym(rt, "cudaMalloc");
    gpu.dcopy = (int (*)(void *, const void *, size_t, int, void *))dlsym(rt, "cudaMemcpyAsync");
    gpu.dsync = (int (*)(void))dlsym(rt, "cudaDeviceSynchronize");
    if (!gpu.dmalloc || !gpu.dcopy || !gpu.dsync || gpu.dmalloc(&gpu.d, cap) != 0)
        return -1;
    gpu.cap = cap;
    gpu.on = 1;
    return 0;
}

/* host -> device (to 1) or device -> host (to 0), then wait for it */
static int gpu_copy(void *host, size_t n, int to)
{
    int rc = to ? gpu.dcopy(gpu.d, host, n, 1, NULL) : gpu.dcopy(host, gpu.d, n, 2, NULL);
    return rc == 0 && gpu.dsync() == 0 ? 0 : -1;
}

static int reduce(ecw_t *w, double *v, size_t n, ecw_op_t op, ecw_error_t *err)
{
    if (!gpu.on)
        return ecw_allreduce(w, v, n, ECW_F64, op, err);
    if (gpu_copy(v, n * sizeof(double), 1) < 0) {
        snprintf(err->msg, sizeof(err->msg), "copying to the GPU failed");
        return err->code = ECW_EINVAL;
    }
    int rc = ecw_allreduce(w, gpu.d, n, ECW_F64, op, err);
    if (rc == 0 && gpu_copy(v, n * sizeof(double), 0) < 0) {
        snprintf(err->msg, sizeof(err->msg), "copying from the GPU failed");
        return err->code = ECW_EINVAL;
    }
    return rc;
}

static int sync_state(ecw_t *w, double *params, size_t bytes, int64_t *step, int *src,
                      ecw_error_t *err)
{
    if (!gpu.on)
        return ecw_sync_state(w, params, bytes, step, src, err);
    if (gpu_copy(params, bytes, 1) < 0) {
        snprintf(err->msg, sizeof(err->msg), "copying to the GPU failed");
        return err->code = ECW_EINVAL;
    }
    int rc = ecw_sync_state(w, gpu.d, bytes, step, src, err);
    if (rc == 0 && gpu_copy(params, bytes, 0) < 0) {
        snprintf(err->msg, sizeof(err->msg), "copying from the GPU failed");
        return err->code = ECW_EINVAL;
    }
    return rc;
}

/* Rebuild for the newest epoch and take the most advanced state of the
 * members.  Returns 0 or exits. */
static void recover(ecw_t *w, double *params, int dim, int64_t *step)
{
    for (;;) {
        int64_t t0 = now_ms();
        ecw_error_t err;
        int rc = ecw_rebuild(w, &err);
        if (rc == ECW_EUNCONFIRMED) {
            fenced("rebuild", &err);
            continue; /* etcd still away: wait longer */
        }
        if (rc < 0) {
            fprintf(stderr, "linreg: rebuild failed: %s\n", err.msg);
            exit(1);
        }
        int src = -1;
        rc = sync_state(w, params, sizeof(double) * (size_t)dim, step, &src, &err);
        if (rc == ECW_EEPOCHCHANGED)
            continue; /* yet another epoch: again */
        if (rc == ECW_EUNCONFIRMED) {
            fenced("sync_state", &err);
            continue;
        }
        if (rc < 0) {
            fprintf(stderr, "linreg: state recovery failed: %s\n", err.msg);
            exit(1);
        }
        if (*step < 0) { /* nobody held state: a fresh job */
            memset(params, 0, sizeof(double) * (size_t)dim);
            *step = 0;
        }
        printf("linreg event=rebuilt epoch=%" PRIu64 " rank=%d world=%d step=%" PRId64
               " src=%d ms=%" PRId64 " pid=%d\n", ecw_epoch(w), ecw_rank(w), ecw_world_size(w),
               *step, src, now_ms() - t0, (int)getpid());
        fflush(stdout);
        return;
    }
}

int main(int argc, char **argv)
{
    cfg_t c;
    if (parse(argc, argv, &c) < 0) {
        usage();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    ecw_options_t o = ECW_OPTIONS_INIT;
    o.backend = c.backend;
    o.log_cb = on_log;
    if (c.verbose)
        o.log_level = ECW_LOG_DEBUG;
    ecw_t *w = NULL;
    ecw_error_t err;
    if (ecw_init(&o, &w, &err) < 0) {
        fprintf(stderr, "linreg: %s: %s\n", ecw_err_name(err.code), err.msg);
        return 1;
    }
    int dim = c.dim;
    double *params = calloc((size_t)dim, sizeof(double));
    double *buf = calloc((size_t)dim + 3, sizeof(double));
    if (!params || !buf)
        return 1;
    if (ecw_backend(w) == ECW_BACKEND_NCCL &&
        gpu_open(sizeof(double) * ((size_t)dim + 3)) < 0) {
        fprintf(stderr, "linreg: backend nccl, but no buffer in the GPU's memory (no CUDA "
                        "runtime loaded, or cudaMalloc failed)\n");
        return 1;
    }
    int64_t step = -1; /* no state: take it from the peers, if any hold one */
    {
        int src = -1;
        int64_t t0 = now_ms();
        int rc = sync_state(w, params, sizeof(double) * (size_t)dim, &step, &src, &err);
        if (rc == ECW_EEPOCHCHANGED || rc == ECW_EUNCONFIRMED) {
            recover(w, params, dim, &step);
        } else if (rc < 0) {
            fprintf(stderr, "linreg: state recovery failed: %s\n", err.msg);
            return 1;
        } else {
            if (step < 0)
                step = 0;
            printf("linreg event=rebuilt epoch=%" PRIu64 " rank=%d world=%d step=%" PRId64
                   " src=%d ms=%" PRId64 " pid=%d\n", ecw_epoch(w), ecw_rank(w),
                   ecw_world_size(w), step, src, now_ms() - t0, (int)getpid());
        }
    }
    char node[256];
    snprintf(node, sizeof(node), "%s", ecw_node_id(w));
    while (step < c.steps) {
        if (ecw_epoch_pending(w)) {
            recover(w, params, dim, &step);
            continue;
        }
        int rank = ecw_rank(w), world = ecw_world_size(w);
        memset(buf, 0, sizeof(double) * ((size_t)dim + 3));
        for (int i = rank; i < c.samples; i += world) {
            double pred = 0.0;
            for (int j = 0; j < dim; j++)
                pred += params[j] * feature((uint64_t)i, j);
            double e = pred - label((uint64_t)i, dim);
            for (int j = 0; j < dim; j++)
                buf[j] += e * feature((uint64_t)i, j);
            buf[dim] += e * e;
            buf[dim + 1] += 1.0;
        }
        buf[dim + 2] = 1.0;
        int64_t t0 = now_ms();
        int rc = reduce(w, buf, (size_t)dim + 3, ECW_SUM, &err);
        if (rc == ECW_EEPOCHCHANGED) {
            printf("linreg event=epoch-changed op=allreduce blocked_ms=%" PRId64 " epoch=%" PRIu64
                   " pid=%d\n", now_ms() - t0, ecw_epoch(w), (int)getpid());
            recover(w, params, dim, &step);
            continue;
        }
        if (rc == ECW_EUNCONFIRMED) {
            fenced("allreduce", &err);
            continue; /* the step again, or a rebuild if the job re-formed */
        }
        if (rc < 0) {
            fprintf(stderr, "linreg: allreduce failed: %s: %s\n", ecw_err_name(rc), err.msg);
            return 1;
        }
        double n = buf[dim + 1];
        double loss = buf[dim] / (2.0 * n);
        for (int j = 0; j < dim; j++)
            params[j] -= c.lr * buf[j] / n;
        int64_t done = step++;
        uint64_t cs = checksum(params, dim);
        double chk[2] = {(double)cs, -(double)cs};
        t0 = now_ms();
        rc = reduce(w, chk, 2, ECW_MAX, &err);
        if (rc == ECW_EEPOCHCHANGED) {
            printf("linreg event=epoch-changed op=checksum blocked_ms=%" PRId64 " epoch=%" PRIu64
                   " pid=%d\n", now_ms() - t0, ecw_epoch(w), (int)getpid());
            recover(w, params, dim, &step);
            continue;
        }
        if (rc == ECW_EUNCONFIRMED) {
            /* The step is applied here; whether the peers applied it is
             * settled by the next ecw_sync_state (the most advanced wins). */
            fenced("checksum", &err);
            recover(w, params, dim, &step);
            continue;
        }
        if (rc < 0) {
            fprintf(stderr, "linreg: checksum allreduce failed: %s\n", err.msg);
            return 1;
        }
        if (chk[0] != -chk[1]) {
            printf("linreg FAIL params differ across ranks at step %" PRId64 " (epoch %" PRIu64
                   ", rank %d)\n", done, ecw_epoch(w), rank);
            return 3;
        }
        char stamp[32] = "";
        if (c.timestamps)
            snprintf(stamp, sizeof(stamp), " t=%lld", wall_ms());
        printf("linreg step=%" PRId64 " epoch=%" PRIu64 " rank=%d world=%d sum=%d loss=%.17g "
               "cs=%013" PRIx64 " pid=%d node=%s lr=%d%s\n", done, ecw_epoch(w), rank, world,
               (int)buf[dim + 2], loss, cs, (int)getpid(), node, ecw_local_rank(w), stamp);
        ecw_progress_step(); /* for the agent's hang and straggler detection */
        if (c.delay_ms > 0) {
            struct timespec ts = {c.delay_ms / 1000, (long)(c.delay_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    /* Everyone leaves together: a peer that exits while another still reads
     * its last bytes would look like a failure to that one. */
    ecw_barrier(w, NULL);
    printf("linreg done steps=%" PRId64 " pid=%d\n", step, (int)getpid());
    free(params);
    free(buf);
    ecw_finalize(w);
    return 0;
}
