/* The Gloo backend: the C shim (gloo_shim.h) with its rendezvous store backed
 * by etcd under the epoch's keys.  The shim names keys "<prefix>/<rank>";
 * the store turns "gloo/3" into the comm key name "gloo.3", so the path
 * itself is built by keys.h like every other (epochs/<n>/comm/gloo.3), and
 * each value is attached to the node's lease. */
#include "ecw_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gloo_shim.h"

typedef struct gcomm {
    ecw_t *w;
    uint64_t epoch;
    ecw_gloo_store_t vt;
    ecw_gloo_t *g;
} gcomm_t;

#define GLOO_PREFIX "gloo"

/* "gloo/<rank>" -> "gloo.<rank>"; EC_EINVAL for anything else. */
static int key_name(const char *key, char *name, size_t len, ec_error_t *err)
{
    size_t pl = strlen(GLOO_PREFIX);
    if (strncmp(key, GLOO_PREFIX "/", pl + 1) != 0 || strlen(key) >= len)
        return ec_errorf(err, EC_EINVAL, "unexpected Gloo store key '%s'", key);
    snprintf(name, len, "%s.%s", GLOO_PREFIX, key + pl + 1);
    return 0;
}

static int store_set(void *arg, const char *key, const void *val, size_t len, ec_error_t *err)
{
    gcomm_t *c = arg;
    char name[64];
    int rc = key_name(key, name, sizeof(name), err);
    return rc < 0 ? rc : ecw__comm_put(c->w, c->epoch, name, val, len, err);
}

static int store_get(void *arg, const char *key, void **val, size_t *len, int timeout_ms,
                     ec_error_t *err)
{
    gcomm_t *c = arg;
    char name[64];
    int rc = key_name(key, name, sizeof(name), err);
    return rc < 0 ? rc : ecw__comm_get(c->w, c->epoch, name, val, len, timeout_ms, NULL, err);
}

static int g_create(ecw_t *w, const ecw__build_t *b, void **out, ec_error_t *err)
{
    gcomm_t *c = calloc(1, sizeof(*c));
    if (!c)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    c->w = w;
    c->epoch = b->epoch;
    c->vt.arg = c;
    c->vt.set = store_set;
    c->vt.get = store_get;
    ecw_gloo_options_t go = ECW_GLOO_OPTIONS_INIT;
    go.rank = b->rank;
    go.nranks = b->world;
    go.hostname = b->host;
    go.store = &c->vt;
    go.prefix = GLOO_PREFIX;
    go.timeout_ms = b->timeout_ms;
    c->g = ecw_gloo_new(&go, err);
    if (!c->g) {
        free(c);
        return err && err->code ? err->code : EC_EINVAL;
    }
    *out = c;
    return 0;
}

static int g_connect(void *comm, ec_error_t *err)
{
    gcomm_t *c = comm;
    return ecw_gloo_connect(c->g, err);
}

static void g_abort(void *comm)
{
    gcomm_t *c = comm;
    if (c)
        ecw_gloo_abort(c->g);
}

static void g_destroy(void *comm)
{
    gcomm_t *c = comm;
    if (!c)
        return;
    ecw_gloo_destroy(c->g);
    free(c);
}

static int dtype_of(ecw_dtype_t dt, ecw_gloo_dtype_t *out, ec_error_t *err)
{
    switch (dt) {
    case ECW_F32: *out = ECW_GLOO_F32; return 0;
    case ECW_F64: *out = ECW_GLOO_F64; return 0;
    case ECW_I32: *out = ECW_GLOO_I32; return 0;
    case ECW_I64: *out = ECW_GLOO_I64; return 0;
    case ECW_U8: *out = ECW_GLOO_U8; return 0;
    case ECW_F16:
    case ECW_BF16:
        return ec_errorf(err, EC_EINVAL, "the Gloo backend has no %s: convert to f32, or use "
                         "the NCCL backend", dt == ECW_F16 ? "f16" : "bf16");
    }
    return ec_errorf(err, EC_EINVAL, "unknown dtype %d", (int)dt);
}

static int g_allreduce(void *comm, void *buf, size_t count, ecw_dtype_t dt, ecw_op_t op,
                       bool host, ec_error_t *err)
{
    gcomm_t *c = comm;
    (void)host; /* always host memory */
    ecw_gloo_dtype_t gd = ECW_GLOO_U8;
    int rc = dtype_of(dt, &gd, err);
    if (rc < 0)
        return rc;
    ecw_gloo_op_t go;
    switch (op) {
    case ECW_SUM: go = ECW_GLOO_SUM; break;
    case ECW_AVG: go = ECW_GLOO_AVG; break;
    case ECW_MIN: go = ECW_GLOO_MIN; break;
    case ECW_MAX: go = ECW_GLOO_MAX; break;
    default: return ec_errorf(err, EC_EINVAL, "unknown reduction %d", (int)op);
    }
    return ecw_gloo_allreduce(c->g, buf, count, gd, go, err);
}

static int g_broadcast(void *comm, void *buf, size_t count, ecw_dtype_t dt, int root,
                       ec_error_t *err)
{
    gcomm_t *c = comm;
    ecw_gloo_dtype_t gd = ECW_GLOO_U8;
    int rc = dtype_of(dt, &gd, err);
    return rc < 0 ? rc : ecw_gloo_broadcast(c->g, buf, count, gd, root, err);
}

static int g_allgather(void *comm, const void *sendbuf, void *recvbuf, size_t count,
                       ecw_dtype_t dt, ec_error_t *err)
{
    gcomm_t *c = comm;
    ecw_gloo_dtype_t gd = ECW_GLOO_U8;
    int rc = dtype_of(dt, &gd, err);
    return rc < 0 ? rc : ecw_gloo_allgather(c->g, sendbuf, recvbuf, count, gd, err);
}

static int g_barrier(void *comm, ec_error_t *err)
{
    gcomm_t *c = comm;
    return ecw_gloo_barrier(c->g, err);
}

const ecw__backend_t ecw__gloo_backend = {
    .name = "gloo",
    .create = g_create,
    .connect = g_connect,
    .abort = g_abort,
    .destroy = g_destroy,
    .allreduce = g_allreduce,
    .broadcast = g_broadcast,
    .allgather = g_allgather,
    .barrier = g_barrier,
};
