/* The worker library's knobs: one table gives each option its environment
 * variables (what `ecoord launch` sets, coord/agent/env.c), type, bounds, default
 * and meaning.  The same table resolves ecw_options_t and describes the
 * result for the start-up log; no other file of the library reads the
 * environment. */
#include "ecw_impl.h"
#include "env_contract.h"
#include "nccl_plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    K_STR,     /* const char * -> char * (copied) */
    K_INT,     /* int, bounds */
    K_U64,     /* uint64_t, decimal */
    K_LEASE,   /* int64_t, hex as the agent writes it */
    K_BACKEND, /* ecw_backend_t from "auto|gloo|nccl|none" */
    K_HOSTOF,  /* const char * from "host:port" / "[v6]:port" */
    K_REBUILD, /* const char * "auto|shrink|init" -> int (ecw__rebuild_mode_t) */
    K_RESTART, /* environment only: "restart" -> bool true, anything else false */
} kind_t;

#define NO_IN ((size_t)-1) /* a knob ecw_options_t has no field for: environment only */

typedef struct knob {
    const char *name;
    const char *env[2]; /* first set one wins */
    kind_t kind;
    size_t in_off, out_off;
    long long unset;    /* K_INT/K_U64/K_LEASE: the "not given" value in ecw_options_t */
    long long min, max; /* K_INT */
    const char *def;    /* default when neither given nor in the environment; NULL: none */
    const char *help;
} knob_t;

#define IN(f) offsetof(ecw_options_t, f)
#define OUT(f) offsetof(ecw__opts_t, f)

static const knob_t knobs[] = {
    {"etcd_endpoints", {EC_ENV_ELASTIC_SERVER}, K_STR, IN(etcd_endpoints), OUT(etcd_endpoints),
     0, 0, 0, NULL, "etcd endpoints of the job (set by ecoord launch)"},
    {"etcd_prefix", {EC_ENV_ETCD_PREFIX}, K_STR, IN(etcd_prefix), OUT(etcd_prefix), 0, 0, 0, "",
     "key prefix in front of /<job_id>/"},
    {"job_id", {EC_ENV_JOB_ID, EC_ENV_PADDLE_JOB_ID}, K_STR, IN(job_id), OUT(job_id), 0, 0, 0, NULL,
     "the job's id"},
    {"node_id", {EC_ENV_NODE_ID, EC_ENV_POD_NAME}, K_STR, IN(node_id), OUT(node_id), 0, 0, 0, NULL,
     "this node's id in the epoch records"},
    {"local_rank", {EC_ENV_LOCAL_RANK, EC_ENV_PADDLE_LOCAL_RANK}, K_INT, IN(local_rank), OUT(local_rank), -1,
     0, EC_NPROC_MAX - 1, NULL, "this process's index on its node"},
    {"start_epoch", {EC_ENV_EPOCH}, K_U64, IN(start_epoch), OUT(start_epoch), 0, 0, 0, "0",
     "epoch the agent started this process in: never join an older one"},
    {"incarnation", {EC_ENV_INCARNATION}, K_U64, NO_IN, OUT(incarnation), 0, 0, 0, "0",
     "the incarnation of its node this process was started for (ecoord launch sets it when it "
     "starts a process before its node is admitted): it joins only an epoch that admitted that "
     "incarnation or a later one (0: any)"},
    {"admit_timeout_ms", {"ECOORD_WORKER_ADMIT_TIMEOUT_MS"}, K_INT, NO_IN, OUT(admit_timeout_ms),
     0, 0, 86400000, "0", "how long ecw_init and ecw_rebuild wait for an epoch that includes "
     "this node (0: as long as it takes; the agent stops a process its node no longer needs)"},
    {"lease", {EC_ENV_LEASE}, K_LEASE, IN(lease), OUT(lease), 0, 0, 0, "0",
     "etcd lease (hex) of this node: every key the library writes is attached to it"},
    {"backend", {"ECOORD_WORKER_BACKEND"}, K_BACKEND, IN(backend), OUT(backend), ECW_BACKEND_AUTO,
     0, 0, "auto", "auto (NCCL when a GPU is visible), gloo, nccl, or none (follow epochs "
     "and claim ranks, build no communicator)"},
    {"host", {EC_ENV_PADDLE_CURRENT_ENDPOINT}, K_HOSTOF, IN(host), OUT(host), 0, 0, 0, "",
     "address Gloo binds (default: this node's host in the epoch)"},
    {"device", {EC_ENV_SELECTED_GPUS}, K_INT, IN(device), OUT(device), -1, -1, 4095, "-1",
     "CUDA device of this process (-1: local rank modulo the visible devices)"},
    {"timeout_ms", {"ECOORD_WORKER_TIMEOUT_MS"}, K_INT, IN(timeout_ms), OUT(timeout_ms), 0, 1,
     86400000, "30000", "bound on each connect and collective"},
    {"rebuild_timeout_ms", {"ECOORD_WORKER_REBUILD_TIMEOUT_MS"}, K_INT, IN(rebuild_timeout_ms),
     OUT(rebuild_timeout_ms), 0, 1, 86400000, "120000",
     "bound on one rebuild, waiting for a membership included"},
    {"epoch_wait_ms", {"ECOORD_WORKER_EPOCH_WAIT_MS"}, K_INT, IN(epoch_wait_ms),
     OUT(epoch_wait_ms), 0, 0, 86400000, "60000",
     "after a peer failure, how long to wait for the epoch that replaces it"},
    {"etcd_cacert", {EC_ENV_ETCD_CACERT}, K_STR, IN(etcd_cacert), OUT(etcd_cacert), 0, 0, 0, "",
     "CA certificate of etcd's (TLS; set by ecoord launch from --etcd_cacert)"},
    {"etcd_cert", {EC_ENV_ETCD_CERT}, K_STR, IN(etcd_cert), OUT(etcd_cert), 0, 0, 0, "",
     "client certificate for etcd (TLS)"},
    {"etcd_key", {EC_ENV_ETCD_KEY}, K_STR, IN(etcd_key), OUT(etcd_key), 0, 0, 0, "",
     "key of the client certificate"},
    {"etcd_user", {EC_ENV_ETCD_USER}, K_STR, IN(etcd_user), OUT(etcd_user), 0, 0, 0, "",
     "etcd user (authentication)"},
    {"etcd_password_file", {EC_ENV_ETCD_PASSWORD_FILE}, K_STR, IN(etcd_password_file),
     OUT(etcd_password_file), 0, 0, 0, "",
     "file holding the etcd user's password (ecoord launch writes one, mode 0600)"},
    {"etcd_proxy", {EC_ENV_ETCD_PROXY}, K_STR, NO_IN, OUT(etcd_proxy), 0, 0, 0, "",
     "HTTP CONNECT proxy (http://HOST:PORT) etcd is reached through (set by ecoord launch from "
     "--etcd_proxy); empty: straight to etcd, whatever http_proxy or https_proxy say"},
    {"suspect_after_ms", {"ECOORD_WORKER_SUSPECT_AFTER_MS"}, K_INT, IN(suspect_after_ms),
     OUT(suspect_after_ms), 0, 1, 86400000, "1000",
     "a build waiting this long for a peer reports the members whose agents do not answer"},
    {"lease_ttl_ms", {EC_ENV_LEASE_TTL_MS}, K_INT, IN(lease_ttl_ms), OUT(lease_ttl_ms), 0, 0,
     86400000, "0", "the node's lease TTL: with a lease, collectives are fenced on it (0: off)"},
    {"lease_margin_ms", {EC_ENV_LEASE_MARGIN_MS}, K_INT, IN(lease_margin_ms),
     OUT(lease_margin_ms), 0, 0, 86400000, "0",
     "refuse collectives once the lease may expire within this (0: a fifth of the TTL)"},
    {"cuda_libdir", {"ECOORD_WORKER_CUDA_LIBDIR"}, K_STR, IN(cuda_libdir), OUT(cuda_libdir), 0, 0,
     0, "", "NCCL: directory to load libcudart and libnccl from (default: an NCCL already in the "
     "process, then the loader's path, then the CUDA directory configure found)"},
    {"nccl_rebuild", {"ECOORD_WORKER_NCCL_REBUILD"}, K_REBUILD, IN(nccl_rebuild),
     OUT(nccl_rebuild), 0, 0, 0, "auto", "NCCL: auto (shrink the previous communicator when an "
     "epoch only removes ranks and it is healthy, else a full init), shrink (also shrink a "
     "failed one, NCCL_SHRINK_ABORT) or init (always a full init)"},
    {"nccl_roots", {"ECOORD_WORKER_NCCL_ROOTS"}, K_INT, IN(nccl_roots), OUT(nccl_roots), 0, 0,
     65536, "0", "NCCL: unique ids (bootstrap roots) of a scalable init (0: one per 128 ranks; "
     "never more than the nodes)"},
    {"nccl_scalable_min", {"ECOORD_WORKER_NCCL_SCALABLE_MIN"}, K_INT, IN(nccl_scalable_min),
     OUT(nccl_scalable_min), 0, 1, 1 << 30, "128",
     "NCCL: world size from which a full init uses ncclCommInitRankScalable with several roots"},
    {"nccl_warm", {"ECOORD_WORKER_NCCL_WARM"}, K_INT, IN(nccl_warm), OUT(nccl_warm), -1, 0, 1, "1",
     "NCCL: 1 builds a one-rank communicator while the process boots and drops it off the "
     "training thread (NCCL's one-time set-up, ~0.4 s on an H200, paid before the process says "
     "it is ready instead of in the first epoch's build, which a joiner's peers wait for); 0: "
     "not"},
    {"progress_file", {EC_ENV_PROGRESS_FILE}, K_STR, NO_IN, OUT(progress_file), 0, 0, 0, "",
     "the file the agent samples this process's progress from (coord/core/progress_file.h; "
     "worker/progress.c writes it, also without ecw_init)"},
    {"restart_mode", {EC_ENV_REBUILD}, K_RESTART, NO_IN, OUT(restart_mode), 0, 0, 0, "",
     "started by `ecoord launch --rebuild=restart`: this process lives for exactly its start "
     "epoch (the agent replaces it on the next one)"},
};

#define NKNOBS (sizeof(knobs) / sizeof(knobs[0]))

static const char *env_of(const knob_t *k, const char **which)
{
    for (int i = 0; i < 2 && k->env[i]; i++) {
        const char *v = getenv(k->env[i]);
        if (v && *v) {
            *which = k->env[i];
            return v;
        }
    }
    return NULL;
}

/* Whether the caller gave the field. */
static bool given(const knob_t *k, const ecw_options_t *in)
{
    if (k->in_off == NO_IN)
        return false;
    const char *p = (const char *)in + k->in_off;
    switch (k->kind) {
    case K_RESTART:
        return false;
    case K_STR:
    case K_HOSTOF:
    case K_REBUILD:
        return *(const char *const *)p != NULL;
    case K_INT:
        return *(const int *)p != (int)k->unset;
    case K_U64:
        return *(const uint64_t *)p != (uint64_t)k->unset;
    case K_LEASE:
        return *(const int64_t *)p != (int64_t)k->unset;
    case K_BACKEND:
        return *(const ecw_backend_t *)p != (ecw_backend_t)k->unset;
    }
    return false;
}

/* "host:port", "[v6]:port" or a bare host -> host, malloc'd. */
static char *host_of(const char *ep)
{
    if (ep[0] == '[') {
        const char *end = strchr(ep, ']');
        return end ? strndup(ep + 1, (size_t)(end - ep - 1)) : NULL;
    }
    const char *colon = strrchr(ep, ':');
    if (colon && strchr(ep, ':') == colon)
        return strndup(ep, (size_t)(colon - ep));
    return strdup(ep);
}

/* Parse text (from the environment or the default) into the knob's field. */
static int parse(const knob_t *k, const char *text, const char *src, ecw__opts_t *out,
                 ec_error_t *err)
{
    char *p = (char *)out + k->out_off;
    char *end = NULL;
    errno = 0;
    switch (k->kind) {
    case K_STR:
        if (!(*(char **)p = strdup(text)))
            return ec_errorf(err, EC_ENOMEM, "out of memory");
        return 0;
    case K_HOSTOF:
        if (!(*(char **)p = host_of(text)))
            return ec_errorf(err, EC_EINVAL, "%s='%s' is not host:port", src, text);
        return 0;
    case K_INT: {
        long long v = strtoll(text, &end, 10);
        if (errno || end == text || *end || v < k->min || v > k->max)
            return ec_errorf(err, EC_EINVAL, "%s='%s': %s must be an integer in %lld..%lld",
                             src, text, k->name, k->min, k->max);
        *(int *)p = (int)v;
        return 0;
    }
    case K_U64: {
        unsigned long long v = strtoull(text, &end, 10);
        if (errno || end == text || *end || text[0] == '-')
            return ec_errorf(err, EC_EINVAL, "%s='%s': %s must be a non-negative integer", src,
                             text, k->name);
        *(uint64_t *)p = v;
        return 0;
    }
    case K_LEASE: {
        unsigned long long v = strtoull(text, &end, 16);
        if (errno || end == text || *end || text[0] == '-' || v > INT64_MAX)
            return ec_errorf(err, EC_EINVAL, "%s='%s': %s must be an etcd lease id in hex "
                             "(as ecoord launch writes it)", src, text, k->name);
        *(int64_t *)p = (int64_t)v;
        return 0;
    }
    case K_BACKEND: {
        ecw_backend_t b;
        if (!strcmp(text, "auto"))
            b = ECW_BACKEND_AUTO;
        else if (!strcmp(text, "gloo"))
            b = ECW_BACKEND_GLOO;
        else if (!strcmp(text, "nccl"))
            b = ECW_BACKEND_NCCL;
        else if (!strcmp(text, "none"))
            b = ECW_BACKEND_NONE;
        else
            return ec_errorf(err, EC_EINVAL, "%s='%s': %s must be auto, gloo, nccl or none", src,
                             text, k->name);
        *(ecw_backend_t *)p = b;
        return 0;
    }
    case K_RESTART:
        *(bool *)p = !strcmp(text, "restart");
        return 0;
    case K_REBUILD: {
        int m = ecw__rebuild_mode_parse(text);
        if (m < 0)
            return ec_errorf(err, EC_EINVAL, "%s='%s': %s must be auto, shrink or init", src,
                             text, k->name);
        *(int *)p = m;
        return 0;
    }
    }
    return ec_errorf(err, EC_EINTERNAL, "knob %s has no parser", k->name);
}

/* Copy the caller's value into the resolved field. */
static int take(const knob_t *k, const ecw_options_t *in, ecw__opts_t *out, ec_error_t *err)
{
    const char *ip = (const char *)in + k->in_off;
    char *op = (char *)out + k->out_off;
    switch (k->kind) {
    case K_STR:
    case K_HOSTOF:
        if (!(*(char **)op = strdup(*(const char *const *)ip)))
            return ec_errorf(err, EC_ENOMEM, "out of memory");
        return 0;
    case K_INT: {
        int v = *(const int *)ip;
        if (v < k->min || v > k->max)
            return ec_errorf(err, EC_EINVAL, "option %s=%d is outside %lld..%lld", k->name, v,
                             k->min, k->max);
        *(int *)op = v;
        return 0;
    }
    case K_U64:
        *(uint64_t *)op = *(const uint64_t *)ip;
        return 0;
    case K_LEASE:
        if (*(const int64_t *)ip < 0)
            return ec_errorf(err, EC_EINVAL, "option lease=%lld is negative",
                             (long long)*(const int64_t *)ip);
        *(int64_t *)op = *(const int64_t *)ip;
        return 0;
    case K_BACKEND: {
        ecw_backend_t b = *(const ecw_backend_t *)ip;
        if (b != ECW_BACKEND_GLOO && b != ECW_BACKEND_NCCL && b != ECW_BACKEND_AUTO &&
            b != ECW_BACKEND_NONE)
            return ec_errorf(err, EC_EINVAL, "option backend=%d is not an ecw_backend_t", (int)b);
        *(ecw_backend_t *)op = b;
        return 0;
    }
    case K_REBUILD:
        return parse(k, *(const char *const *)ip, "options.nccl_rebuild", out, err);
    case K_RESTART:
        break;
    }
    return ec_errorf(err, EC_EINTERNAL, "knob %s has no copier", k->name);
}

int ecw__opts_resolve(const ecw_options_t *user, ecw__opts_t *out, ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    ecw_options_t in = ECW_OPTIONS_INIT;
    if (user) {
        if (user->size < offsetof(ecw_options_t, log_level) + sizeof(user->log_level) ||
            user->size > sizeof(ecw_options_t))
            return ec_errorf(err, EC_EINVAL, "ecw_options_t of %zu bytes, this library knows "
                             "%zu: initialise options with ECW_OPTIONS_INIT and rebuild "
                             "against this ecw.h", user->size, sizeof(ecw_options_t));
        memcpy(&in, user, user->size);
    }
    int rc = 0;
    for (size_t i = 0; i < NKNOBS; i++) {
        const knob_t *k = &knobs[i];
        const char *src = NULL;
        const char *v;
        if (given(k, &in))
            rc = take(k, &in, out, err);
        else if (in.from_env && (v = env_of(k, &src)))
            rc = parse(k, v, src, out, err);
        else if (k->def)
            rc = parse(k, k->def, "default", out, err);
        else
            rc = ec_errorf(err, EC_EINVAL, "%s is not set: pass it in ecw_options_t or run "
                           "under `ecoord launch --rebuild=inprocess`, which sets %s", k->name,
                           k->env[0]);
        if (rc < 0) {
            ecw__opts_free(out);
            return rc;
        }
    }
    out->log_cb = in.log_cb;
    out->log_arg = in.log_arg;
    out->log_level = in.log_level;
    if (out->host && !*out->host) {
        free(out->host);
        out->host = NULL;
    }
    if (ec_job_id_check(out->job_id, err) < 0 || ec_node_id_check(out->node_id, err) < 0) {
        ecw__opts_free(out);
        return EC_EINVAL;
    }
    if (!*out->etcd_endpoints) {
        ecw__opts_free(out);
        return ec_errorf(err, EC_EINVAL, "no etcd endpoints: set ECOORD_ELASTIC_SERVER or "
                         "options.etcd_endpoints");
    }
    return 0;
}

void ecw__opts_free(ecw__opts_t *o)
{
    if (!o)
        return;
    int saved = errno;
    free(o->etcd_endpoints);
    free(o->etcd_prefix);
    free(o->job_id);
    free(o->node_id);
    free(o->host);
    free(o->etcd_cacert);
    free(o->etcd_cert);
    free(o->etcd_key);
    free(o->etcd_user);
    free(o->etcd_password_file);
    free(o->etcd_proxy);
    free(o->cuda_libdir);
    free(o->progress_file);
    memset(o, 0, sizeof(*o));
    errno = saved;
}

void ecw__opts_describe(const ecw__opts_t *o, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NKNOBS && n < len; i++) {
        const knob_t *k = &knobs[i];
        const char *p = (const char *)o + k->out_off;
        int w = 0;
        switch (k->kind) {
        case K_STR:
        case K_HOSTOF:
            w = snprintf(buf + n, len - n, "%s%s=%s", n ? " " : "", k->name,
                         *(char *const *)p ? *(char *const *)p : "");
            break;
        case K_INT:
            w = snprintf(buf + n, len - n, "%s%s=%d", n ? " " : "", k->name, *(const int *)p);
            break;
        case K_U64:
            w = snprintf(buf + n, len - n, "%s%s=%" PRIu64, n ? " " : "", k->name,
                         *(const uint64_t *)p);
            break;
        case K_LEASE:
            w = snprintf(buf + n, len - n, "%s%s=%" PRIx64, n ? " " : "", k->name,
                         (uint64_t) * (const int64_t *)p);
            break;
        case K_BACKEND:
            w = snprintf(buf + n, len - n, "%s%s=%s", n ? " " : "", k->name,
                         ecw_backend_name(*(const ecw_backend_t *)p));
            break;
        case K_REBUILD:
            w = snprintf(buf + n, len - n, "%s%s=%s", n ? " " : "", k->name,
                         ecw__rebuild_mode_name((ecw__rebuild_mode_t) * (const int *)p));
            break;
        case K_RESTART:
            w = snprintf(buf + n, len - n, "%s%s=%d", n ? " " : "", k->name, *(const bool *)p);
            break;
        }
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

/* The progress file the agent made for this process (coord/core/progress_file.h;
 * worker/progress.c maps it, with or without ecw_init), or NULL: the table's
 * progress_file knob read from the environment. */
const char *ecw__progress_path(void)
{
    for (size_t i = 0; i < NKNOBS; i++)
        if (!strcmp(knobs[i].name, "progress_file")) {
            const char *which = NULL;
            return env_of(&knobs[i], &which);
        }
    return NULL;
}
