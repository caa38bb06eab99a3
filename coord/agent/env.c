/* Training-process environment: one function, one table of names. */
#define _GNU_SOURCE /* vasprintf */
#include "env.h"
#include "env_contract.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "connect.h"
#include "knobs.h"
#include "log.h"
#include "rank.h"

/* One environment string ("NAME=value") may not exceed MAX_ARG_STRLEN
 * (32 pages: 131072 bytes with its NUL) or execve fails with E2BIG; a
 * list of every rank's endpoint passes it at about 6,500 ranks. */
#define EC_ENV_STRING_MAX (32 * 4096)

/* Never passed on to a training process. */
static const char *const secret_vars[] = {EC_ENV_ETCD_PASSWORD, NULL};

/* Nor these, as Paddle's launcher removes them (launch/main.py, fleet's
 * launch_utils.py): many clusters set them, and a training process's
 * collectives, torch's store and the worker library's etcd client would go
 * through the site's proxy instead of straight to their peers (gRPC honours
 * them, loopback included).  no_proxy and NO_PROXY stay: harmless alone. */
static const char *const proxy_vars[] = {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                                         "all_proxy", "ALL_PROXY", "grpc_proxy", NULL};

static bool is_named(const char *kv, const char *const *names)
{
    for (int i = 0; names[i]; i++) {
        size_t nl = strlen(names[i]);
        if (!strncmp(kv, names[i], nl) && kv[nl] == '=')
            return true;
    }
    return false;
}

static bool withheld(const char *kv)
{
    return is_named(kv, secret_vars) || is_named(kv, proxy_vars);
}

size_t ec_env_proxies(char *const *base, char *names, size_t len)
{
    size_t n = 0, used = 0;
    if (len)
        names[0] = '\0';
    for (int i = 0; proxy_vars[i]; i++) {
        if (!ec_env_get(base, proxy_vars[i]))
            continue;
        if (used < len)
            used += (size_t)snprintf(names + used, len - used, "%s%s", n ? ", " : "",
                                     proxy_vars[i]);
        n++;
    }
    return n;
}

/* ---- the password file the agent writes for its workers --------------------------- */

static pthread_mutex_t pw_mu = PTHREAD_MUTEX_INITIALIZER;
static char pw_dir[PATH_MAX], pw_path[PATH_MAX + 32];
static pid_t pw_owner; /* a forked child that exit()s must not remove it */

static void pw_remove(void)
{
    if (getpid() != pw_owner)
        return;
    if (pw_path[0])
        unlink(pw_path);
    if (pw_dir[0])
        rmdir(pw_dir);
}

/* The file holding password, written once per agent process: 0600 in a
 * fresh 0700 directory, removed at exit.  (A SIGKILLed agent leaves it, in
 * a directory only its user can enter.) */
static const char *pw_file(const char *password, ec_error_t *err)
{
    pthread_mutex_lock(&pw_mu);
    if (pw_path[0]) {
        pthread_mutex_unlock(&pw_mu);
        return pw_path;
    }
    const char *base = ec_config_environ("XDG_RUNTIME_DIR", NULL);
    if (!base || !*base || access(base, W_OK) != 0)
        base = ec_config_environ("TMPDIR", NULL);
    if (!base || !*base)
        base = "/tmp";
    snprintf(pw_dir, sizeof(pw_dir), "%s/ecoord-secret-XXXXXX", base);
    if (!mkdtemp(pw_dir)) {
        ec_errorf(err, EC_ESYS, "cannot create a private directory under %s for the etcd "
                  "password of the training processes: %s (set TMPDIR to a writable "
                  "directory)", base, strerror(errno));
        pw_dir[0] = '\0';
        goto fail;
    }
    snprintf(pw_path, sizeof(pw_path), "%s/etcd-password", pw_dir);
    pw_owner = getpid();
    int fd = open(pw_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    size_t len = strlen(password);
    bool ok = fd >= 0 && write(fd, password, len) == (ssize_t)len;
    int saved = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        ec_errorf(err, EC_ESYS, "cannot write the etcd password file %s for the training "
                  "processes: %s", pw_path, strerror(saved));
        pw_remove();
        pw_path[0] = pw_dir[0] = '\0';
        goto fail;
    }
    atexit(pw_remove);
    pthread_mutex_unlock(&pw_mu);
    return pw_path;
fail:
    pthread_mutex_unlock(&pw_mu);
    return NULL;
}

/* path made absolute (the training process may change directory). */
static void abs_path(const char *path, char *out, size_t len)
{
    char buf[PATH_MAX];
    snprintf(out, len, "%s", realpath(path, buf) ? buf : path);
}

typedef struct {
    char **v;
    size_t n, cap;
    int oom;
} envb_t;

static void add(envb_t *b, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(envb_t *b, const char *name, const char *fmt, ...)
{
    /* no fixed cap: PADDLE_TRAINER_ENDPOINTS and PADDLE_WORLD_DEVICE_IDS
     * grow with the world */
    char *val = NULL;
    va_list ap;
    va_start(ap, fmt);
    int vl = vasprintf(&val, fmt, ap);
    va_end(ap);
    if (vl < 0) {
        b->oom = 1;
        return;
    }
    size_t nl = strlen(name);
    for (size_t i = 0; i < b->n; i++) /* ours replace anything inherited */
        if (!strncmp(b->v[i], name, nl) && b->v[i][nl] == '=') {
            free(b->v[i]);
            b->v[i] = b->v[--b->n];
            break;
        }
    if (b->n + 2 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 128;
        char **nv = realloc(b->v, nc * sizeof(char *));
        if (!nv) {
            b->oom = 1;
            free(val);
            return;
        }
        b->v = nv;
        b->cap = nc;
    }
    char *kv = malloc(nl + (size_t)vl + 2);
    if (!kv) {
        b->oom = 1;
        free(val);
        return;
    }
    sprintf(kv, "%s=%s", name, val);
    free(val);
    b->v[b->n++] = kv;
    b->v[b->n] = NULL;
}

/* Remove name from b (an inherited value nothing of ours replaces). */
static void drop(envb_t *b, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < b->n; i++)
        if (!strncmp(b->v[i], name, nl) && b->v[i][nl] == '=') {
            free(b->v[i]);
            b->v[i] = b->v[--b->n];
            b->v[b->n] = NULL;
            return;
        }
}

/* What only an epoch says: set by add_epoch, removed from what a process
 * started before admission inherits (a stale RANK from the agent's own
 * environment would be a lie). */
static const char *const epoch_vars[] = {
    "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_MASTER",
    "PADDLE_GLOBAL_SIZE", "PADDLE_GLOBAL_RANK", "PADDLE_NNODES", "PADDLE_WORLD_DEVICE_IDS",
    "RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", EC_ENV_PADDLE_CURRENT_ENDPOINT, NULL};

/* What only an epoch says: the rank, the world and every endpoint. */
static int add_epoch(envb_t *b, const ec_epoch_t *ep, int m_id, int n_id, const ec_env_ctx_t *ctx,
                     ec_error_t *err)
{
    int64_t rank = ec_rank(m_id, ep->nproc, n_id);
    char *endpoints = NULL;
    /* Every rank's endpoint: from a whole epoch, and only when it fits one
     * environment string (a view of a split epoch holds a few members; the
     * launcher completes it when the list would fit). */
    const char *omit = NULL;
    if (ep->present != ep->nmembers)
        omit = "this node holds a view of the epoch (its members are in chunks)";
    else if (ec_epoch_endpoints(ep, ",", &endpoints, err) < 0)
        return err && err->code ? err->code : EC_ENOMEM;
    else if (strlen(endpoints) + sizeof("PADDLE_TRAINER_ENDPOINTS=") > EC_ENV_STRING_MAX)
        omit = "the list is longer than one environment string may be (131072 bytes)";
    if (omit && n_id == 0)
        ec_log(EC_LOG_WARN, "epoch %llu: PADDLE_TRAINER_ENDPOINTS is not set (%d endpoints): %s; "
               "rank 0's is PADDLE_MASTER; a process that needs every rank's reads them when it "
               "needs them: `ecoord status --json` (nodes[].endpoints, in rank order; "
               "ECOORD_ELASTIC_SERVER and ECOORD_JOB_ID are set)",
               (unsigned long long)ep->number, ep->world_size, omit);
    if (omit) {
        free(endpoints);
        endpoints = NULL;
    }
    char cur[EC_ENDPOINT_MAX], rank0[EC_ENDPOINT_MAX];
    ec_epoch_endpoint(ep, m_id, n_id, cur, sizeof(cur));
    ec_epoch_rank0_endpoint(ep, rank0, sizeof(rank0));
    const char *maddr;
    int mport;
    ec_epoch_master(ep, &maddr, &mport);
    int W = ep->world_size, N = ep->nproc, M = ep->nmembers;

    /* Paddle (conventions.md) */
    add(b, "PADDLE_TRAINER_ID", "%lld", (long long)rank);
    add(b, "PADDLE_TRAINERS_NUM", "%d", W);
    if (endpoints)
        add(b, "PADDLE_TRAINER_ENDPOINTS", "%s", endpoints);
    free(endpoints);
    add(b, EC_ENV_PADDLE_CURRENT_ENDPOINT, "%s", cur);
    add(b, "PADDLE_MASTER", "%s", rank0);
    add(b, "PADDLE_GLOBAL_SIZE", "%d", W);
    add(b, "PADDLE_GLOBAL_RANK", "%lld", (long long)rank);
    add(b, "PADDLE_NNODES", "%d", M);
    if (n_id < ctx->ngpus) {
        /* Paddle's format (fleet's launch_utils.py): every rank's ids in
         * rank order comma-separated (a rank's several ids ':'-joined: one
         * each here).  Every member runs the same N, so rank r's id is r % N. */
        size_t wl = (size_t)W * 12 + 1;
        char *world = malloc(wl);
        if (!world)
            return ec_errorf(err, EC_ENOMEM, "out of memory building the environment");
        size_t used = 0;
        for (int r = 0; r < W; r++)
            used += (size_t)snprintf(world + used, wl - used, "%s%d", r ? "," : "", r % N);
        if (used + sizeof("PADDLE_WORLD_DEVICE_IDS=") <= EC_ENV_STRING_MAX)
            add(b, "PADDLE_WORLD_DEVICE_IDS", "%s", world); /* else E2BIG: left out */
        free(world);
    }
    /* torchrun */
    add(b, "RANK", "%lld", (long long)rank);
    add(b, "WORLD_SIZE", "%d", W);
    add(b, "GROUP_RANK", "%d", m_id);
    add(b, "GROUP_WORLD_SIZE", "%d", M);
    add(b, "ROLE_RANK", "%lld", (long long)rank);
    add(b, "ROLE_WORLD_SIZE", "%d", W);
    add(b, "MASTER_ADDR", "%s", maddr);
    add(b, "MASTER_PORT", "%d", mport);
    return 0;
}

/* The inherited environment, less what is withheld.  -1 when out of memory. */
static int copy_base(envb_t *b, char *const *base)
{
    for (size_t i = 0; base && base[i]; i++) {
        if (withheld(base[i]))
            continue;
        if (b->n + 2 > b->cap) {
            size_t nc = b->cap ? b->cap * 2 : 128;
            char **nv = realloc(b->v, nc * sizeof(char *));
            if (!nv)
                return -1;
            b->v = nv;
            b->cap = nc;
        }
        if (!(b->v[b->n] = strdup(base[i])))
            return -1;
        b->v[++b->n] = NULL;
    }
    return 0;
}

/* Paddle: this process's place on its node (N processes), and its GPU. */
static void add_node_place(envb_t *b, int n_id, int N, const ec_env_ctx_t *ctx,
                           char *const *base)
{
    add(b, "PADDLE_RANK_IN_NODE", "%d", n_id);
    add(b, "PADDLE_LOCAL_SIZE", "%d", N);
    add(b, EC_ENV_PADDLE_LOCAL_RANK, "%d", n_id);
    add(b, EC_ENV_PADDLE_JOB_ID, "%s", ctx->job_id);
    add(b, "PADDLE_LOG_DIR", "%s", ctx->log_dir);
    add(b, EC_ENV_POD_NAME, "%s", ctx->node_id);
    if (n_id < ctx->ngpus) {
        /* The node's GPUs narrowed to the ones it uses, so an index into
         * them is the local rank (coord/util/gpus.h); a process's ids
         * comma-separated (fleet's launch_utils.py). */
        if (ctx->visible_devices)
            add(b, "CUDA_VISIBLE_DEVICES", "%s", ctx->visible_devices);
        add(b, EC_ENV_SELECTED_GPUS, "%d", n_id);
        add(b, "PADDLE_LOCAL_DEVICE_IDS", "%d", n_id);
        if (!ec_env_get(base, "PADDLE_DISTRI_BACKEND"))
            add(b, "PADDLE_DISTRI_BACKEND", "nccl");
    } else {
        add(b, "PADDLE_DISTRI_BACKEND", "gloo");
    }
}

/* torchrun's per-process variables and defaults. */
static void add_torchrun(envb_t *b, int n_id, int N, const ec_env_ctx_t *ctx, char *const *base)
{
    add(b, EC_ENV_LOCAL_RANK, "%d", n_id);
    add(b, "LOCAL_WORLD_SIZE", "%d", N);
    add(b, "ROLE_NAME", "%s", ctx->role && *ctx->role ? ctx->role : "default");
    add(b, "TORCHELASTIC_RESTART_COUNT", "%d", ctx->restart_count);
    add(b, "TORCHELASTIC_MAX_RESTARTS", "%d", ctx->max_restarts);
    add(b, "TORCHELASTIC_RUN_ID", "%s", ctx->job_id);
    /* the program's env:// rendezvous hosts its own store on rank 0 (at
     * MASTER_PORT): there is no agent store to use, whatever was inherited */
    add(b, "TORCHELASTIC_USE_AGENT_STORE", "False");
    if (ctx->error_file)
        add(b, "TORCHELASTIC_ERROR_FILE", "%s", ctx->error_file);
    /* torchrun's: a NCCL error or timeout tears the process down instead of
     * leaving it hung in a collective.  torch 2.2 and later read the second
     * name and warn that the first is deprecated; older ones read only the
     * first, which is set too when the program's torch is known to be one.
     * A user who set either keeps exactly theirs. */
    if (!ec_env_get(base, "NCCL_ASYNC_ERROR_HANDLING") &&
        !ec_env_get(base, "TORCH_NCCL_ASYNC_ERROR_HANDLING")) {
        add(b, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
        if (ec_env_torch_before(ctx->torch_version, 2, 2))
            add(b, "NCCL_ASYNC_ERROR_HANDLING", "1");
    }
    /* torchrun's default against N processes each starting a thread per core */
    if (ec_env_omp_default(N, base))
        add(b, "OMP_NUM_THREADS", "1");
}

/* ecoord: what the worker library needs to follow epochs itself. */
static void add_ecoord(envb_t *b, const ec_epoch_t *ep, const ec_env_ctx_t *ctx)
{
    add(b, EC_ENV_ELASTIC_SERVER, "%s", ctx->elastic_server ? ctx->elastic_server : "");
    add(b, EC_ENV_ETCD_PREFIX, "%s", ctx->etcd_prefix ? ctx->etcd_prefix : "");
    add(b, EC_ENV_JOB_ID, "%s", ctx->job_id);
    add(b, EC_ENV_EPOCH, "%llu", (unsigned long long)(ep ? ep->number : ctx->start_epoch));
    add(b, EC_ENV_NODE_ID, "%s", ctx->node_id);
    if (ctx->incarnation)
        add(b, EC_ENV_INCARNATION, "%llu", (unsigned long long)ctx->incarnation);
    add(b, EC_ENV_LEASE, "%llx", ctx->lease);
    if (ctx->lease_ttl_ms > 0) {
        add(b, EC_ENV_LEASE_TTL_MS, "%lld", ctx->lease_ttl_ms);
        add(b, EC_ENV_LEASE_MARGIN_MS, "%lld", ctx->lease_margin_ms);
    }
    add(b, EC_ENV_REBUILD, "%s", ctx->rebuild ? ctx->rebuild : "restart");
    if (ctx->progress_file)
        add(b, EC_ENV_PROGRESS_FILE, "%s", ctx->progress_file);
}

/* etcd's TLS and authentication, as the agent connects.  -1 (err filled)
 * when the password file cannot be written. */
static int add_etcd_auth(envb_t *b, const ec_env_ctx_t *ctx, ec_error_t *err)
{
    const ec_config_t *cfg = ctx->etcd ? ctx->etcd : ec_connect_config();
    if (!cfg)
        return 0;
    const char *files[][2] = {{EC_ENV_ETCD_CACERT, cfg->etcd_cacert},
                              {EC_ENV_ETCD_CERT, cfg->etcd_cert},
                              {EC_ENV_ETCD_KEY, cfg->etcd_key}};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char p[PATH_MAX] = "";
        if (files[i][1] && *files[i][1])
            abs_path(files[i][1], p, sizeof(p));
        add(b, files[i][0], "%s", p);
    }
    add(b, EC_ENV_ETCD_USER, "%s", cfg->etcd_user ? cfg->etcd_user : "");
    const char *pwf = "";
    char p[PATH_MAX];
    if (cfg->etcd_user && *cfg->etcd_user && cfg->etcd_password && *cfg->etcd_password) {
        if (cfg->etcd_password_file && *cfg->etcd_password_file) {
            abs_path(cfg->etcd_password_file, p, sizeof(p));
            pwf = p;
        } else if (!(pwf = pw_file(cfg->etcd_password, err))) {
            return -1;
        }
    }
    add(b, EC_ENV_ETCD_PASSWORD_FILE, "%s", pwf);
    /* the proxy etcd is reached through, only when one is given: the
     * processes have none of the environment's (proxy_vars) */
    if (cfg->etcd_proxy && *cfg->etcd_proxy)
        add(b, EC_ENV_ETCD_PROXY, "%s", cfg->etcd_proxy);
    else
        drop(b, EC_ENV_ETCD_PROXY);
    return 0;
}

int ec_env_build(const ec_epoch_t *ep, int m_id, int n_id, const ec_env_ctx_t *ctx,
                 char *const *base, char ***out, ec_error_t *err)
{
    *out = NULL;
    if (ep && (m_id < 0 || m_id >= ep->nmembers || n_id < 0 || n_id >= ep->nproc))
        return ec_errorf(err, EC_EINVAL, "no local rank %d on member %d of epoch %llu", n_id, m_id,
                         (unsigned long long)ep->number);
    if (!ep && (n_id < 0 || n_id >= ctx->nproc))
        return ec_errorf(err, EC_EINVAL, "no local rank %d on a node of %d processes", n_id,
                         ctx->nproc);
    envb_t b = {0};
    if (copy_base(&b, base) < 0)
        goto oom;
    int N = ep ? ep->nproc : ctx->nproc;
    if (ep) {
        if (add_epoch(&b, ep, m_id, n_id, ctx, err) < 0)
            goto fail;
    } else {
        for (int i = 0; epoch_vars[i]; i++)
            drop(&b, epoch_vars[i]);
    }
    if (!ep && ctx->host && *ctx->host && ctx->port) {
        /* Before its node is admitted: where it will listen is the node's,
         * not the epoch's (the worker library and ecoord.torch bind it). */
        char cur[EC_ENDPOINT_MAX];
        if (ec_endpoint_format(ctx->host, ctx->port, cur, sizeof(cur)) > 0)
            add(&b, EC_ENV_PADDLE_CURRENT_ENDPOINT, "%s", cur);
    }
    add_node_place(&b, n_id, N, ctx, base);
    add_torchrun(&b, n_id, N, ctx, base);
    add_ecoord(&b, ep, ctx);
    if (add_etcd_auth(&b, ctx, err) < 0)
        goto fail;
    if (b.oom)
        goto oom;
    *out = b.v;
    return 0;
oom:
    ec_errorf(err, EC_ENOMEM, "out of memory building the environment");
fail:
    ec_env_free(b.v);
    return err && err->code ? err->code : EC_ENOMEM;
}

void ec_env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

bool ec_env_omp_default(int nproc, char *const *base)
{
    return nproc > 1 && !ec_env_get(base, "OMP_NUM_THREADS");
}

const char *ec_env_get(char *const *env, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], name, nl) && env[i][nl] == '=')
            return env[i] + nl + 1;
    return NULL;
}

bool ec_env_torch_before(const char *version, int major, int minor)
{
    int ma = 0, mi = 0;
    if (!version || sscanf(version, "%d.%d", &ma, &mi) != 2)
        return false; /* unknown: the current name only */
    return ma < major || (ma == major && mi < minor);
}
