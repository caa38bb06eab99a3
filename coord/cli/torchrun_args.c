/* torchrun's command line onto ecoord's knobs (see torchrun_args.h). */
#define _GNU_SOURCE /* open_memstream */
#include "torchrun_args.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum {
    T_NNODES, T_NPROC, T_BACKEND, T_ENDPOINT, T_ID, T_CONF, T_STANDALONE, T_MAX_RESTARTS,
    T_MONITOR, T_START_METHOD, T_ROLE, T_MODULE, T_NO_PYTHON, T_RUN_PATH, T_LOG_DIR,
    T_REDIRECTS, T_TEE, T_LOCAL_ADDR, T_NODE_RANK, T_MASTER_ADDR, T_MASTER_PORT,
    T_LOCAL_RANKS_FILTER, T__COUNT
} tflag_t;

static const struct {
    tflag_t id;
    const char *name; /* underscores; torch 2 spells it with dashes, both work */
    char shortopt;    /* -m, -r, -t */
    int boolean;
    const char *what; /* for "did you mean" */
} tflags[] = {
    {T_NNODES, "nnodes", 0, 0, "number of nodes, N or MIN:MAX"},
    {T_NPROC, "nproc_per_node", 0, 0, "processes per node"},
    {T_BACKEND, "rdzv_backend", 0, 0, "rendezvous backend"},
    {T_ENDPOINT, "rdzv_endpoint", 0, 0, "rendezvous endpoint"},
    {T_ID, "rdzv_id", 0, 0, "job id"},
    {T_CONF, "rdzv_conf", 0, 0, "rendezvous settings"},
    {T_STANDALONE, "standalone", 0, 1, "single-node job"},
    {T_MAX_RESTARTS, "max_restarts", 0, 0, "restarts before failing"},
    {T_MONITOR, "monitor_interval", 0, 0, "worker polling interval"},
    {T_START_METHOD, "start_method", 0, 0, "how workers are started"},
    {T_ROLE, "role", 0, 0, "the workers' role name"},
    {T_MODULE, "module", 'm', 1, "run a Python module"},
    {T_NO_PYTHON, "no_python", 0, 1, "run the program as given"},
    {T_RUN_PATH, "run_path", 0, 1, "run the script with runpy"},
    {T_LOG_DIR, "log_dir", 0, 0, "log directory"},
    {T_REDIRECTS, "redirects", 'r', 0, "redirect output to files"},
    {T_TEE, "tee", 't', 0, "copy output to files"},
    {T_LOCAL_ADDR, "local_addr", 0, 0, "this node's address"},
    {T_NODE_RANK, "node_rank", 0, 0, "this node's rank"},
    {T_MASTER_ADDR, "master_addr", 0, 0, "static rendezvous address"},
    {T_MASTER_PORT, "master_port", 0, 0, "static rendezvous port"},
    {T_LOCAL_RANKS_FILTER, "local_ranks_filter", 0, 0, "the local ranks the console shows"},
};
#define NTFLAGS (sizeof(tflags) / sizeof(tflags[0]))

#define ETCD_DEFAULT_PORT "2379" /* torch's etcd rendezvous assumes it too */
#define C10D_DEFAULT_PORT 29400  /* torch's c10d rendezvous endpoint without a port */
#define MASTER_ADDR_DEFAULT "127.0.0.1" /* torchrun's --master_addr default */
#define MASTER_PORT_DEFAULT 29500       /* and --master_port's */

typedef struct {
    char **v;
    int n, cap;
    int oom;
} vec_t;

static void push(vec_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void push(vec_t *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    if (b->n + 2 > b->cap) {
        int nc = b->cap ? b->cap * 2 : 32;
        char **nv = realloc(b->v, (size_t)nc * sizeof(char *));
        if (!nv) {
            b->oom = 1;
            return;
        }
        b->v = nv;
        b->cap = nc;
    }
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&b->v[b->n], fmt, ap);
    va_end(ap);
    if (rc < 0) {
        b->oom = 1;
        return;
    }
    b->v[++b->n] = NULL;
}

static void warn(ec_torchrun_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(ec_torchrun_t *t, const char *fmt, ...)
{
    if (t->nwarnings >= EC_TORCHRUN_MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->warnings[t->nwarnings++], sizeof(t->warnings[0]), fmt, ap);
    va_end(ap);
}

static int find_tflag(const char *norm, char shortopt)
{
    for (size_t i = 0; i < NTFLAGS; i++)
        if (shortopt ? tflags[i].shortopt == shortopt : strcmp(norm, tflags[i].name) == 0)
            return (int)i;
    return -1;
}

/* "did you mean --rdzv_endpoint (rendezvous endpoint)?": torchrun names that
 * the typed one begins, else the closest within a typo's distance. */
static int suggest(const char *typed, char *buf, size_t len)
{
    size_t tl = strlen(typed), used = 0;
    int found = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NTFLAGS && tl; i++)
        if (strncasecmp(typed, tflags[i].name, tl) == 0 && found < 4)
            used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s--%s (%s)",
                                     found++ ? ", " : "", tflags[i].name, tflags[i].what);
    if (found)
        return 1;
    int best = 99;
    size_t bi = 0;
    for (size_t i = 0; i < NTFLAGS; i++) {
        int d = ec_config_distance(typed, tflags[i].name);
        if (d < best)
            best = d, bi = i;
    }
    int limit = tl <= 4 ? 1 : (int)(tl / 3 > 2 ? tl / 3 : 2);
    if (best > limit)
        return 0;
    snprintf(buf, len, "--%s (%s)", tflags[bi].name, tflags[bi].what);
    return 1;
}

static int positive_int(const char *v, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 0)
        return -1;
    *out = x;
    return 0;
}

/* torchrun's -r/-t value: 0..3, or local_rank:value pairs ("0:1,1:2"). */
static int std_streams_ok(const char *v)
{
    if (strlen(v) == 1)
        return *v >= '0' && *v <= '3';
    for (const char *p = v; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *colon = memchr(p, ':', n);
        if (!colon || colon == p || (size_t)(colon - p) + 2 != n || colon[1] < '0' || colon[1] > '3')
            return 0;
        for (const char *q = p; q < colon; q++)
            if (!isdigit((unsigned char)*q))
                return 0;
        p = e ? e + 1 : p + n;
    }
    return 1;
}

typedef struct {
    const char *val[T__COUNT]; /* the last value given; booleans "1" */
    const char *as[T__COUNT];  /* how it was typed, for messages */
    char env_as[T__COUNT][96]; /* "PET_NNODES=2": a value from the environment */
} seen_t;

/* --rdzv_conf=k=v,k=v: the keys ecoord has a knob for, into b. */
static int rdzv_conf(const char *conf, vec_t *b, const char **protocol, int *is_host,
                     ec_torchrun_t *t, ec_error_t *err)
{
    char item[512];
    for (const char *p = conf; p && *p;) {
        const char *start = p, *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        p = e ? e + 1 : NULL;
        if (n == 0)
            continue;
        if (n >= sizeof(item))
            return ec_errorf(err, EC_EINVAL, "--rdzv_conf: an entry is longer than %zu characters",
                             sizeof(item) - 1);
        memcpy(item, start, n);
        item[n] = '\0';
        char *eq = strchr(item, '=');
        if (!eq)
            return ec_errorf(err, EC_EINVAL,
                             "--rdzv_conf=%s: '%s' is not KEY=VALUE; write e.g. "
                             "--rdzv_conf=last_call_timeout=30",
                             conf, item);
        *eq = '\0';
        const char *k = item, *v = eq + 1;
        if (!strcmp(k, "last_call_timeout")) {
            push(b, "--elastic_timeout=%s", v);
        } else if (!strcmp(k, "join_timeout") || !strcmp(k, "timeout")) {
            /* c10d's join_timeout, etcd's timeout: how long the rendezvous
             * may take before the agent gives up */
            push(b, "--join_timeout=%s", v);
            t->join_timeout_set = 1;
        } else if (!strcmp(k, "cacert")) {
            push(b, "--etcd_cacert=%s", v);
        } else if (!strcmp(k, "cert")) {
            push(b, "--etcd_cert=%s", v);
        } else if (!strcmp(k, "key")) {
            push(b, "--etcd_key=%s", v);
        } else if (!strcmp(k, "is_host")) {
            /* c10d: whether this node hosts the store (here: the etcd) */
            if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes"))
                *is_host = 1;
            else if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no"))
                *is_host = 0;
            else
                return ec_errorf(err, EC_EINVAL, "--rdzv_conf is_host=%s: write true or false", v);
        } else if (!strcmp(k, "protocol")) {
            if (strcasecmp(v, "http") && strcasecmp(v, "https"))
                return ec_errorf(err, EC_EINVAL,
                                 "--rdzv_conf protocol=%s: etcd speaks http or https", v);
            *protocol = strcasecmp(v, "https") == 0 ? "https" : NULL;
        } else {
            warn(t, "--rdzv_conf %s=%s is ignored: ecoord has no such setting (its etcd "
                    "coordination is configured by its own flags, see ecoord launch --help)",
                 k, v);
        }
    }
    return 0;
}

/* The endpoint as --elastic_server: HOST[:PORT], port 2379 when left out. */
static void push_endpoint(vec_t *b, const char *ep, const char *protocol)
{
    const char *host = ep;
    const char *scheme = strstr(ep, "://");
    if (scheme)
        host = scheme + 3;
    int has_port = host[0] == '[' ? strstr(host, "]:") != NULL : strchr(host, ':') != NULL;
    if (protocol && !scheme)
        push(b, "--elastic_server=%s://%s%s%s", protocol, ep, has_port ? "" : ":",
             has_port ? "" : ETCD_DEFAULT_PORT);
    else
        push(b, "--elastic_server=%s%s%s", ep, has_port ? "" : ":",
             has_port ? "" : ETCD_DEFAULT_PORT);
}

/* Largest node count of an --nnodes value ("2" or "1:4"); 0 when not a count
 * (the knob table says why later). */
static long nnodes_max(const char *v)
{
    const char *c = strchr(v, ':');
    long x;
    return positive_int(c ? c + 1 : v, &x) == 0 ? x : 0;
}

/* The MIN of "MIN:MAX": -1 when not a count. */
static int positive_int_prefix(const char *v, long *out)
{
    char buf[32];
    const char *c = strchr(v, ':');
    size_t n = c ? (size_t)(c - v) : strlen(v);
    if (n == 0 || n >= sizeof(buf))
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    return positive_int(buf, out);
}

/* HOST[:PORT] as torch parses a rendezvous endpoint ([v6]:port too, the
 * last ':' separating the port); port def_port when left out, -1 when not
 * a port number.  host into buf. */
static int split_endpoint(const char *ep, int def_port, char *buf, size_t len)
{
    const char *colon = NULL;
    if (ep[0] == '[') {
        const char *close = strchr(ep, ']');
        if (close && close[1] == ':')
            colon = close + 1;
    } else {
        colon = strrchr(ep, ':');
    }
    size_t hl = colon ? (size_t)(colon - ep) : strlen(ep);
    if (hl >= 2 && ep[0] == '[' && ep[hl - 1] == ']') { /* [::1] -> ::1 */
        snprintf(buf, len, "%.*s", (int)(hl - 2), ep + 1);
    } else {
        snprintf(buf, len, "%.*s", (int)hl, ep);
    }
    if (!colon)
        return def_port;
    long port;
    if (positive_int(colon + 1, &port) < 0 || port > 65535)
        return -1;
    return (int)port;
}

/* torchrun reads PET_<FLAG> for each flag not on its command line (torch's
 * argparse_util: env and check_env): the same here, the flag winning.  An
 * empty variable counts as unset, as everywhere in ecoord; a boolean is an
 * integer, non-zero for true, as torchrun's int() reads it. */
static int apply_pet(seen_t *s, ec_getenv_fn env, void *env_arg, ec_error_t *err)
{
    if (!env)
        return 0;
    for (size_t i = 0; i < NTFLAGS; i++) {
        tflag_t id = tflags[i].id;
        if (s->val[id])
            continue;
        char name[64];
        size_t n = (size_t)snprintf(name, sizeof(name), "PET_%s", tflags[i].name);
        for (size_t j = 4; j < n && j < sizeof(name); j++)
            name[j] = (char)toupper((unsigned char)name[j]);
        const char *v = env(name, env_arg);
        if (!v || !*v)
            continue;
        snprintf(s->env_as[id], sizeof(s->env_as[id]), "%s=%.60s", name, v);
        s->as[id] = s->env_as[id];
        if (tflags[i].boolean) {
            long x;
            char *end;
            errno = 0;
            x = strtol(v, &end, 10);
            if (errno || end == v || *end)
                return ec_errorf(err, EC_EINVAL, "%s: torchrun reads %s as an integer (0: off, "
                                                 "anything else: on); write %s=1 or unset it",
                                 s->as[id], name, name);
            if (x)
                s->val[id] = "1";
            continue;
        }
        s->val[id] = v;
    }
    return 0;
}

/* torchrun's flags, up to the program, into s; ecoord's own flags into own,
 * as typed; *prog: where the program starts (-1: not given); t->help on
 * -h/--help. */
static int parse_flags(int argc, char *const *argv, ec_torchrun_t *t, seen_t *s, vec_t *own,
                       int *prog, ec_error_t *err)
{
    int rc = 0;
    char norm[64];

    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            *prog = i + 1 < argc ? i + 1 : -1;
            break;
        }
        if (a[0] != '-' || a[1] == '\0') {
            *prog = i;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            t->help = 1;
            goto out;
        }
        int single = a[1] != '-';
        const char *name = a + (single ? 1 : 2);
        const char *eq = strchr(name, '=');
        size_t nl = eq ? (size_t)(eq - name) : strlen(name);
        if (nl >= sizeof(norm))
            nl = sizeof(norm) - 1;
        for (size_t j = 0; j < nl; j++)
            norm[j] = name[j] == '-' ? '_' : name[j];
        norm[nl] = '\0';
        int f = single ? (nl == 1 ? find_tflag("", norm[0]) : -1) : find_tflag(norm, 0);
        if (f < 0) {
            char sug[300];
            if (single) {
                rc = ec_errorf(err, EC_EINVAL,
                               "unknown flag %s; torchrun's single-dash flags are -m, -r and -t "
                               "(see ecoord torchrun --help)",
                               a);
                goto out;
            }
            const ec_knob_t *k = ec_config_find_flag(norm);
            if (!k && suggest(norm, sug, sizeof(sug))) {
                rc = ec_errorf(err, EC_EINVAL,
                               "unknown flag --%s; did you mean %s? Flags must be spelled in "
                               "full (abbreviations are never expanded); see ecoord torchrun "
                               "--help",
                               norm, sug);
                goto out;
            }
            /* ecoord's own flag (or an unknown one, which the knob table
             * answers with its own "did you mean"), with its value */
            push(own, "%s", a);
            if (k && k->type != EC_KT_BOOL && !eq && i + 1 < argc)
                push(own, "%s", argv[++i]);
            continue;
        }
        const char *v;
        if (tflags[f].boolean) {
            if (eq) {
                rc = ec_errorf(err, EC_EINVAL, "%s: --%s takes no value; write --%s", a,
                               tflags[f].name, tflags[f].name);
                goto out;
            }
            v = "1";
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc && (argv[i + 1][0] != '-' || argv[i + 1][1] == '\0')) {
            v = argv[++i];
        } else {
            rc = ec_errorf(err, EC_EINVAL, "%s needs a value; write --%s=VALUE (see ecoord "
                                           "torchrun --help)",
                           a, tflags[f].name);
            goto out;
        }
        s->val[tflags[f].id] = v;
        s->as[tflags[f].id] = a;
    }
out:
    return rc;
}

/* Where the store is served: the endpoint's HOST:PORT (c10d's default
 * port when it has none; the static rendezvous needs one), else
 * --master_addr:--master_port with torchrun's defaults.  where: the flag to
 * name in an error.  0, or EC_EINVAL with err filled. */
static int served_address(const seen_t *s, const char *ep, int c10d, char *ep_host,
                          size_t hostlen, char *where, size_t wherelen, int *port_out,
                          ec_error_t *err)
{
    int port;
    if (ep) {
        port = split_endpoint(ep, c10d ? C10D_DEFAULT_PORT : -2, ep_host, hostlen);
        snprintf(where, wherelen, "%s", s->as[T_ENDPOINT]);
        if (port == -2)
            return ec_errorf(err, EC_EINVAL,
                             "%s: the static rendezvous needs a port; write "
                             "--rdzv_endpoint=HOST:PORT, as torchrun does",
                             where);
    } else {
        snprintf(ep_host, hostlen, "%s",
                 s->val[T_MASTER_ADDR] ? s->val[T_MASTER_ADDR] : MASTER_ADDR_DEFAULT);
        if (ep_host[0] == '[' && ep_host[strlen(ep_host) - 1] == ']') { /* [::1] */
            memmove(ep_host, ep_host + 1, strlen(ep_host));
            ep_host[strlen(ep_host) - 1] = '\0';
        }
        long p = MASTER_PORT_DEFAULT;
        if (s->val[T_MASTER_PORT] && (positive_int(s->val[T_MASTER_PORT], &p) < 0 || p > 65535))
            p = -1;
        port = (int)p;
        snprintf(where, wherelen, "%s", s->val[T_MASTER_PORT] ? s->as[T_MASTER_PORT]
                                                               : "--master_port");
    }
    if (port < 0 || !ep_host[0])
        return ec_errorf(err, EC_EINVAL, "%s: write HOST:PORT, a port from 1 to 65535", where);
    *port_out = port;
    return 0;
}

/* The static rendezvous: a fixed set of maxn nodes, each told its place
 * (--node_rank); node 0 serves the store at ep_host:port.  0, or EC_EINVAL
 * with err filled. */
static int static_place(const seen_t *s, ec_torchrun_t *t, long maxn, const char *ep_host,
                        int port, ec_error_t *err)
{
    const char *nn = s->val[T_NNODES] ? s->val[T_NNODES] : "1";
    long nmin = 0;
    if (strchr(nn, ':') &&
        (positive_int_prefix(nn, &nmin) < 0 || nmin != maxn))
        return ec_errorf(err, EC_EINVAL,
                         "--nnodes=%s with the static rendezvous (--node_rank, "
                         "--master_addr): its size is fixed; write --nnodes=N, or for an "
                         "elastic job --rdzv_backend=c10d --rdzv_endpoint=%s:%d",
                         nn, ep_host, port);
    if (maxn > 1 && !s->val[T_NODE_RANK])
        return ec_errorf(err, EC_EINVAL,
                         "--nnodes=%ld with the static rendezvous (torchrun's default "
                         "backend): each node needs its --node_rank, 0 to %ld, node 0 on "
                         "the machine --master_addr names (%s:%d); or let the nodes meet "
                         "in any order with --rdzv_backend=c10d --rdzv_endpoint=%s:%d",
                         maxn, maxn - 1, ep_host, port, ep_host, port);
    long rank = 0;
    if (s->val[T_NODE_RANK] && positive_int(s->val[T_NODE_RANK], &rank) < 0)
        return ec_errorf(err, EC_EINVAL, "%s: write a node rank from 0 to --nnodes - 1",
                         s->as[T_NODE_RANK]);
    if (rank >= maxn)
        return ec_errorf(err, EC_EINVAL,
                         "%s but --nnodes=%ld: node ranks go from 0 to %ld; number the "
                         "nodes 0 to N-1, node_rank 0 on the node --master_addr names",
                         s->as[T_NODE_RANK], maxn, maxn - 1);
    t->static_rdzv = 1;
    t->node_rank = (int)rank;
    t->serve = rank == 0 ? 1 : 0;
    return 0;
}

/* c10d and static: one node hosts the store the others meet at; ecoord's
 * store is etcd, so that node serves an etcd of its own there (or, for one
 * node and no address, an etcd on a free loopback port). */
static int rdzv_served(const seen_t *s, ec_torchrun_t *t, vec_t *b, const char *ep, long maxn,
                       int c10d, int is_static, int is_host, ec_error_t *err)
{
    int rc = 0;
    /* One node hosts the store the others meet at (c10d: the one the
     * endpoint names; static: node_rank 0, at --master_addr:
     * --master_port): ecoord's store is etcd, so that node serves an
     * etcd of its own there and every node, itself included, uses it
     * as --elastic_server. */
    int given = ep || (is_static && (s->val[T_NODE_RANK] || s->val[T_MASTER_ADDR] ||
                                     s->val[T_MASTER_PORT]));
    if (!given && maxn <= 1) {
        /* one node and no address: an etcd of this node's own on a
         * free loopback port (torchrun would take 127.0.0.1:29500,
         * where two such jobs on one machine collide) */
        if (s->val[T_ID])
            push(b, "--job_id=%s", s->val[T_ID]);
        else
            push(b, "--job_id=standalone");
        return 0;
    }
    if (c10d && !ep)
        return ec_errorf(err, EC_EINVAL,
                         "--nnodes=%s with --rdzv_backend=c10d: the nodes meet at the node "
                         "--rdzv_endpoint names; pass --rdzv_endpoint=HOST:PORT (HOST one of "
                         "the nodes, the same on every node), or --standalone for one node",
                         s->val[T_NNODES]);
    char ep_host[256], where[300];
    int port = -1;
    if ((rc = served_address(s, ep, c10d, ep_host, sizeof(ep_host), where, sizeof(where), &port,
                             err)) < 0)
        return rc;
    if (port == 0) {
        if (maxn > 1)
            return ec_errorf(err, EC_EINVAL,
                             "%s: port 0 (a free port) works for one node only; give the "
                             "port the other nodes reach, e.g. HOST:29400",
                             where);
        push(b, "--job_id=%s", s->val[T_ID] ? s->val[T_ID] : "none");
        return 0;
    }
    if (is_static) {
        if ((rc = static_place(s, t, maxn, ep_host, port, err)) < 0)
            return rc;
    } else {
        t->serve = is_host < 0 ? 2 : is_host;
    }
    snprintf(t->serve_host, sizeof(t->serve_host), "%s", ep_host);
    t->serve_port = port;
    /* the node that serves it reaches it on loopback; the others here */
    if (t->serve != 1)
        push(b, "--elastic_server=%s%s%s:%d", strchr(ep_host, ':') ? "[" : "", ep_host,
             strchr(ep_host, ':') ? "]" : "", port);
    /* the etcd is the job's own: torchrun's default run id is safe */
    push(b, "--job_id=%s", s->val[T_ID] ? s->val[T_ID] : "none");
    return 0;
}

/* Where the nodes meet: --rdzv_* (and --standalone, --master_*) into
 * ecoord's --elastic_server and --job_id, then the rendezvous's conf. */
static int rendezvous(const seen_t *s, ec_torchrun_t *t, vec_t *b, vec_t *conf, ec_error_t *err)
{
    int rc = 0;
    const char *backend = s->val[T_BACKEND] ? s->val[T_BACKEND] : "static";
    const char *ep = s->val[T_ENDPOINT];
    long maxn = s->val[T_NNODES] ? nnodes_max(s->val[T_NNODES]) : 1;
    const char *protocol = NULL;
    int is_host = -1;
    if (s->val[T_CONF] && (rc = rdzv_conf(s->val[T_CONF], conf, &protocol, &is_host, t, err)))
        goto out;
    int etcd = !strcmp(backend, "etcd") || !strcmp(backend, "etcd-v2") ||
               !strcmp(backend, "etcd_v2") || !strcmp(backend, "etcd-v3");
    int c10d = !strcmp(backend, "c10d");
    int is_static = !strcmp(backend, "static");
    if (!etcd && !c10d && !is_static) {
        rc = ec_errorf(err, EC_EINVAL,
                       "--rdzv_backend=%s: ecoord coordinates through etcd; write "
                       "--rdzv_backend=etcd (etcd-v2, etcd-v3, c10d and static are accepted too)",
                       backend);
        goto out;
    }
    /* torchrun uses --node_rank and --master_addr/--master_port only for
     * its static rendezvous without an endpoint (run.py) */
    if (!is_static || s->val[T_STANDALONE]) {
        for (int k = T_NODE_RANK; k <= T_MASTER_PORT; k++)
            if (s->val[k])
                warn(t, "%s is ignored, as torchrun ignores it: it belongs to the static "
                        "rendezvous (--rdzv_backend=static, torchrun's default); with %s the "
                        "leader assigns node ranks in the order nodes join",
                     s->as[k], s->val[T_STANDALONE] ? "--standalone" : "this backend");
    } else if (ep) {
        for (int k = T_MASTER_ADDR; k <= T_MASTER_PORT; k++)
            if (s->val[k])
                warn(t, "%s is ignored, as torchrun ignores it: --rdzv_endpoint=%s names the "
                        "static rendezvous's store", s->as[k], ep);
    }
    if (s->val[T_STANDALONE]) {
        if (maxn > 1) {
            rc = ec_errorf(err, EC_EINVAL,
                           "--standalone runs a single-node job (ecoord starts an etcd of its "
                           "own on loopback) but --nnodes=%s asks for more; drop --standalone "
                           "and pass --rdzv_backend=c10d --rdzv_endpoint=HOST:PORT (HOST one of "
                           "the nodes) or --rdzv_backend=etcd --rdzv_endpoint=ETCD_HOST:2379 on "
                           "every node",
                           s->val[T_NNODES]);
            goto out;
        }
        if (s->val[T_BACKEND] || ep || s->val[T_ID])
            warn(t, "--standalone: --rdzv_backend, --rdzv_endpoint and --rdzv_id are ignored, "
                    "as torchrun ignores them (an etcd of this node's own is used)");
        /* the etcd is this node's alone: no other job can share the id */
        push(b, "--job_id=standalone");
    } else if (etcd) {
        if (!ep) {
            rc = ec_errorf(err, EC_EINVAL,
                           "--rdzv_backend=%s needs the etcd's address: pass "
                           "--rdzv_endpoint=ETCD_HOST:2379 (the same on every node)",
                           backend);
            goto out;
        }
        push_endpoint(b, ep, protocol);
    } else if (c10d || is_static) {
        if ((rc = rdzv_served(s, t, b, ep, maxn, c10d, is_static, is_host, err)))
            goto out;
        goto rdzv_done;
    }
    if (s->val[T_ID] && !s->val[T_STANDALONE])
        push(b, "--job_id=%s", s->val[T_ID]);
rdzv_done:
    for (int i = 0; i < conf->n; i++)
        push(b, "%s", conf->v[i]);
out:
    return rc;
}

/* The job and this node: --nnodes, --nproc_per_node (gpu, cpu, auto),
 * --max_restarts, --role, --log_dir, --local_addr, -m, --no_python. */
static int node_flags(const seen_t *s, const ec_torchrun_host_t *host, ec_torchrun_t *t,
                      vec_t *b, ec_error_t *err)
{
    int rc = 0;
    if (s->val[T_NNODES])
        push(b, "--np=%s", s->val[T_NNODES]);
    if (s->val[T_NPROC]) {
        const char *v = s->val[T_NPROC];
        long n;
        if (!strcmp(v, "gpu")) {
            if (host->ngpus < 1) {
                rc = ec_errorf(err, EC_EINVAL,
                               "--nproc_per_node=gpu: this node shows no GPU (check "
                               "CUDA_VISIBLE_DEVICES and the driver), or pass a number");
                goto out;
            }
            push(b, "--nproc_per_node=%d", host->ngpus);
        } else if (!strcmp(v, "cpu")) {
            push(b, "--nproc_per_node=%d", host->ncpus > 0 ? host->ncpus : 1);
        } else if (!strcmp(v, "auto")) {
            push(b, "--nproc_per_node=%d",
                 host->ngpus > 0 ? host->ngpus : host->ncpus > 0 ? host->ncpus : 1);
        } else if (positive_int(v, &n) == 0) {
            push(b, "--nproc_per_node=%s", v);
        } else {
            rc = ec_errorf(err, EC_EINVAL,
                           "--nproc_per_node=%s: write a number, gpu (one per GPU), cpu (one per "
                           "CPU) or auto (gpu if there are GPUs, else cpu)",
                           v);
            goto out;
        }
    }
    if (s->val[T_MAX_RESTARTS]) {
        push(b, "--max_restart=%s", s->val[T_MAX_RESTARTS]);
        t->max_restarts_set = 1;
    }
    if (s->val[T_ROLE])
        push(b, "--role=%s", s->val[T_ROLE]);
    if (s->val[T_LOG_DIR])
        push(b, "--log_dir=%s", s->val[T_LOG_DIR]);
    if (s->val[T_LOCAL_ADDR])
        push(b, "--host=%s", s->val[T_LOCAL_ADDR]);
    if (s->val[T_MODULE])
        push(b, "--module");
    if (s->val[T_NO_PYTHON])
        push(b, "--no_python");

out:
    return rc;
}

/* Flags accepted with what ecoord does instead (--monitor_interval,
 * --start_method, --run_path), and the output routing (-r, -t,
 * --local_ranks_filter). */
static int accepted_flags(const seen_t *s, ec_torchrun_t *t, ec_error_t *err)
{
    int rc = 0;
    long x;
    if (s->val[T_MONITOR]) {
        if (positive_int(s->val[T_MONITOR], &x) < 0 && strspn(s->val[T_MONITOR], "0123456789.") !=
                                                          strlen(s->val[T_MONITOR])) {
            rc = ec_errorf(err, EC_EINVAL, "%s: not a number of seconds", s->as[T_MONITOR]);
            goto out;
        }
        warn(t, "--monitor_interval=%s has no effect: ecoord learns of a process's exit at once "
                "(SIGCHLD), not by polling",
             s->val[T_MONITOR]);
    }
    if (s->val[T_START_METHOD]) {
        const char *m = s->val[T_START_METHOD];
        if (strcmp(m, "spawn") && strcmp(m, "fork") && strcmp(m, "forkserver")) {
            rc = ec_errorf(err, EC_EINVAL, "--start_method=%s: write spawn, fork or forkserver", m);
            goto out;
        }
        warn(t, "--start_method=%s has no effect: ecoord starts every process as a new program "
                "(fork and exec)",
             m);
    }
    /* which streams of which local ranks go to files and the console, as
     * torchrun's -r/-t say (coord/agent/procs.h does it) */
    for (int k = T_REDIRECTS; k <= T_TEE; k++)
        if (s->val[k]) {
            if (!std_streams_ok(s->val[k]) || strlen(s->val[k]) >= sizeof(t->tee)) {
                rc = ec_errorf(err, EC_EINVAL,
                               "%s: write 0 (none), 1 (stdout), 2 (stderr), 3 (both), or "
                               "LOCAL_RANK:N pairs such as 0:1,1:2",
                               s->as[k]);
                goto out;
            }
            snprintf(k == T_TEE ? t->tee : t->redirects, sizeof(t->tee), "%s", s->val[k]);
        }
    if (s->val[T_LOCAL_RANKS_FILTER]) {
        const char *v = s->val[T_LOCAL_RANKS_FILTER];
        if (strspn(v, "0123456789,") != strlen(v) || !strpbrk(v, "0123456789") ||
            strlen(v) >= sizeof(t->ranks_filter)) {
            rc = ec_errorf(err, EC_EINVAL,
                           "%s: write the local ranks the console shows, comma separated, e.g. "
                           "--local_ranks_filter=0,1",
                           s->as[T_LOCAL_RANKS_FILTER]);
            goto out;
        }
        snprintf(t->ranks_filter, sizeof(t->ranks_filter), "%s", v);
    }
    if (s->val[T_RUN_PATH] && !s->val[T_MODULE])
        warn(t, "--run_path: the script runs under the interpreter as with torchrun's default "
                "(python3 -u SCRIPT), not through runpy");

out:
    return rc;
}

static int translate(int argc, char *const *argv, const ec_torchrun_host_t *host,
                     ec_getenv_fn env, void *env_arg, ec_torchrun_t *t, vec_t *b, ec_error_t *err)
{
    seen_t s = {0};
    vec_t own = {0}; /* ecoord's own flags, passed through as typed */
    vec_t conf = {0}; /* --rdzv_conf's, translated */
    int prog = -1, rc = 0;

    if ((rc = parse_flags(argc, argv, t, &s, &own, &prog, err)) || t->help)
        goto out;
    if (prog < 0) {
        rc = ec_errorf(err, EC_EINVAL, "no training script given; write it after the flags, as "
                                       "for torchrun: ecoord torchrun [FLAGS] SCRIPT [ARGS...], "
                                       "e.g. ecoord torchrun --standalone --nproc_per_node=2 "
                                       "train.py");
        goto out;
    }

    if ((rc = apply_pet(&s, env, env_arg, err)))
        goto out;
    if (s.val[T_RUN_PATH] && s.val[T_NO_PYTHON]) {
        rc = ec_errorf(err, EC_EINVAL, "--run_path and --no_python contradict each other (torchrun "
                                       "refuses them together too): drop one");
        goto out;
    }

    if ((rc = rendezvous(&s, t, b, &conf, err)) || (rc = node_flags(&s, host, t, b, err)) ||
        (rc = accepted_flags(&s, t, err)))
        goto out;

    /* ecoord's own flags, then the program: argv[prog..] untouched */
    for (int i = 0; i < own.n; i++)
        push(b, "%s", own.v[i]);
    push(b, "--");
    for (int i = prog; i < argc; i++)
        push(b, "%s", argv[i]);
out:
    for (int i = 0; i < conf.n; i++)
        free(conf.v[i]);
    free(conf.v);
    for (int i = 0; i < own.n; i++)
        free(own.v[i]);
    free(own.v);
    if (!rc && (b->oom || own.oom))
        rc = ec_errorf(err, EC_ENOMEM, "out of memory translating the torchrun command line");
    return rc;
}

int ec_torchrun_translate(int argc, char *const *argv, const ec_torchrun_host_t *host,
                          ec_getenv_fn env, void *env_arg, ec_torchrun_t *out, ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    vec_t b = {0};
    ec_torchrun_host_t none = {0, 0};
    int rc = translate(argc, argv, host ? host : &none, env, env_arg, out, &b, err);
    if (rc) {
        for (int i = 0; i < b.n; i++)
            free(b.v[i]);
        free(b.v);
        memset(out, 0, sizeof(*out));
        return rc;
    }
    if (!b.v) { /* --help, or nothing pushed */
        if (!(b.v = calloc(1, sizeof(char *))))
            return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    out->argc = b.n;
    out->argv = b.v;
    return 0;
}

/* What torchrun itself reads from its environment besides PET_*: its
 * interpreter (PYTHON_EXEC, where ecoord's --python/ECOORD_PYTHON is not
 * given) and its tee's line prefix (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE). */
static int torchrun_environ(ec_config_t *cfg, ec_getenv_fn env, void *env_arg, ec_error_t *err)
{
    const char *py = env ? env("PYTHON_EXEC", env_arg) : NULL;
    if (py && *py && cfg->src[EC_K_PYTHON].kind == EC_SRC_DEFAULT) {
        char *p = strdup(py);
        if (!p)
            return ec_errorf(err, EC_ENOMEM, "out of memory");
        free(cfg->python);
        cfg->python = p;
        cfg->src[EC_K_PYTHON] = (ec_source_t){.kind = EC_SRC_ENV, .name = "PYTHON_EXEC"};
    }
    const char *tpl = env ? env("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", env_arg) : NULL;
    if (tpl && strlen(tpl) >= sizeof(cfg->torchrun.prefix_template))
        return ec_errorf(err, EC_EINVAL,
                         "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE is %zu characters long; ecoord "
                         "takes at most %zu (a prefix such as '[rank${rank}]: ')",
                         strlen(tpl), sizeof(cfg->torchrun.prefix_template) - 1);
    snprintf(cfg->torchrun.prefix_template, sizeof(cfg->torchrun.prefix_template), "%s",
             tpl ? tpl : "");
    return 0;
}

int ec_torchrun_apply(const ec_torchrun_t *t, ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                      ec_error_t *err)
{
    /* torchrun's failure policy, not Paddle's: a failed process group is
     * restarted --max_restarts times (0 unless told), then this node's agent
     * exits 1 and the others go on or wait, as each torchrun agent decides
     * for itself; the job is not failed by the first failure. */
    cfg->fail_fast = 0;
    if (!t->max_restarts_set && cfg->src[EC_K_MAX_RESTART].kind == EC_SRC_DEFAULT) {
        cfg->max_restart = 0;
        cfg->src[EC_K_MAX_RESTART].name = "torchrun's --max_restarts";
    }
    /* torchrun gives up a rendezvous after 600 s (join_timeout, timeout) */
    if (!t->join_timeout_set && cfg->src[EC_K_JOIN_TIMEOUT].kind == EC_SRC_DEFAULT) {
        cfg->join_timeout_ms = 600000;
        cfg->src[EC_K_JOIN_TIMEOUT].name = "torchrun's join_timeout";
    }
    /* torchrun puts the interpreter before any script unless --no_python,
     * its own, which imports torch (coord/agent/program.h) */
    cfg->prog_always_python = 1;
    cfg->torchrun.on = 1;
    snprintf(cfg->torchrun.redirects, sizeof(cfg->torchrun.redirects), "%s", t->redirects);
    snprintf(cfg->torchrun.tee, sizeof(cfg->torchrun.tee), "%s", t->tee);
    snprintf(cfg->torchrun.ranks_filter, sizeof(cfg->torchrun.ranks_filter), "%s",
             t->ranks_filter);
    /* torchrun's run id is --rdzv_id (a uuid with --standalone): the job id */
    snprintf(cfg->torchrun.run_id, sizeof(cfg->torchrun.run_id), "%s", cfg->job_id);
    cfg->torchrun.serve = t->serve;
    snprintf(cfg->torchrun.serve_host, sizeof(cfg->torchrun.serve_host), "%s", t->serve_host);
    cfg->torchrun.serve_port = t->serve_port;
    cfg->torchrun.static_rdzv = t->static_rdzv;
    cfg->torchrun.node_rank = t->node_rank;
    /* torchrun writes no files unless --log_dir names where (then under
     * <log_dir>/<rdzv_id>_XXXXXXXX/attempt_<n>/<local_rank>/), nothing in
     * the working directory: no Paddle-style ./log */
    if (cfg->src[EC_K_LOG_DIR].kind == EC_SRC_DEFAULT) {
        char *none_dir = strdup("");
        if (!none_dir)
            return ec_errorf(err, EC_ENOMEM, "out of memory");
        free(cfg->log_dir);
        cfg->log_dir = none_dir;
        cfg->src[EC_K_LOG_DIR].name = "torchrun's: none";
    }
    /* a failed torchrun exits 1, whatever the job's size */
    if (cfg->src[EC_K_FIXED_FAILURE_EXIT].kind == EC_SRC_DEFAULT) {
        cfg->fixed_failure_exit = 1;
        cfg->src[EC_K_FIXED_FAILURE_EXIT].name = "torchrun's exit code";
    }
    int rc = torchrun_environ(cfg, env, env_arg, err);
    if (rc < 0)
        return rc;
    for (int i = 0; i < t->nwarnings && cfg->nwarnings < EC_CONFIG_MAX_WARNINGS; i++)
        snprintf(cfg->warnings[cfg->nwarnings++], sizeof(cfg->warnings[0]), "%s", t->warnings[i]);
    return ec_config_validate(cfg, env, env_arg, err);
}

void ec_torchrun_release(ec_torchrun_t *t)
{
    if (!t)
        return;
    int saved = errno;
    for (int i = 0; i < t->argc; i++)
        free(t->argv[i]);
    free(t->argv);
    memset(t, 0, sizeof(*t));
    errno = saved;
}

char *ec_torchrun_help(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fputs(
        "usage: ecoord torchrun [TORCHRUN FLAGS] [ECOORD FLAGS] [--] SCRIPT [ARGS...]\n"
        "\n"
        "Run a torchrun command line with ecoord as the agent: change `torchrun` (or\n"
        "`python -m torch.distributed.run`) to `ecoord torchrun`. Flags are spelled in\n"
        "full (never abbreviated); dashes and underscores are the same; each flag not\n"
        "given is read from PET_<FLAG> (PET_NNODES, PET_NODE_RANK, ...), as torchrun\n"
        "reads them. SCRIPT runs as PYTHON -u SCRIPT, as torchrun runs it with its own\n"
        "interpreter: PYTHON is --python (ECOORD_PYTHON) when given, else PYTHON_EXEC\n"
        "(torchrun's), else the first python3 on PATH that imports torch; --no_python\n"
        "runs it as given. TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE ($role_name, $rank,\n"
        "$local_rank, $hostname) is --tee's line prefix, as torchrun reads it.\n"
        "\n"
        "torchrun flag                    ecoord\n"
        "  --nnodes=N|MIN:MAX               --np\n"
        "  --nproc_per_node=N|gpu|cpu|auto  --nproc_per_node (gpu: GPUs shown, cpu: CPUs)\n"
        "  --rdzv_backend=etcd|etcd-v2|etcd-v3\n"
        "  --rdzv_endpoint=HOST[:PORT]      --elastic_server (an etcd; port 2379 if left out)\n"
        "  --rdzv_backend=c10d --rdzv_endpoint=HOST[:PORT]\n"
        "                                   the node that owns HOST serves an etcd at\n"
        "                                   HOST:PORT (29400 if left out) and every node\n"
        "                                   uses it (rdzv_conf is_host=1|0 decides too)\n"
        "  --node_rank=K --master_addr=A --master_port=P (static, torchrun's default)\n"
        "                                   node_rank 0 serves an etcd at A:P (defaults\n"
        "                                   127.0.0.1:29500), every node uses it; K is\n"
        "                                   the node's place (GROUP_RANK) in the first\n"
        "                                   epoch; --nnodes fixed\n"
        "  --rdzv_id=ID                     --job_id\n"
        "  --rdzv_conf=K=V,...              last_call_timeout: --elastic_timeout;\n"
        "                                   join_timeout, timeout: --join_timeout\n"
        "                                   (600 s when not given, as torchrun's);\n"
        "                                   cacert, cert, key, protocol: etcd TLS;\n"
        "                                   is_host: c10d; other keys ignored with a warning\n"
        "  --standalone                     an etcd of this node's own (one node)\n"
        "  --max_restarts=N                 --max_restart (default 0, as torchrun's: a\n"
        "                                   failure ends this node's run, exit 1)\n"
        "  --role=NAME                      --role (ROLE_NAME, the prefix of --tee's lines)\n"
        "  --log_dir=DIR                    DIR/RUN_ID_XXXXXX/attempt_N/LOCAL_RANK/\n"
        "                                   {stdout,stderr}.log, error.json, as torchrun's;\n"
        "                                   none without it (nothing in the working dir)\n"
        "  -r, --redirects=0|1|2|3|LR:N,... streams into those files instead of the console\n"
        "  -t, --tee=0|1|2|3|LR:N,...       into the files and the console, each line after\n"
        "                                   [ROLE<LOCAL_RANK>]:; without either, every rank\n"
        "                                   writes to the console as is (stderr to stderr)\n"
        "  --local_ranks_filter=0,1         only these local ranks on the console\n"
        "  --local_addr=ADDR                --host\n"
        "  -m, --module                     --module\n"
        "  --no_python                      --no_python\n"
        "  --run_path                       accepted (the script runs under python3)\n"
        "  --monitor_interval, --start_method\n"
        "                                   accepted, no effect (a warning says why)\n"
        "\n"
        "Any other flag is ecoord's own (ecoord launch --help).\n",
        f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
