/* `ecoord check`'s facts and verdicts (see check/rules.h): encoding, the
 * comparison that turns every node's facts into one report, and the report's
 * text and JSON forms.  Pure: no clock, no files, no environment, no network.
 *
 * Each check is one function `ck_<name>(cx, result)` that reads the sorted
 * facts and fills its result; the worst finding wins its status, and every
 * finding names the node(s) it concerns and what to do.  The thresholds come
 * from ec_check_limits_t, so the tests can move them.
 */
#define _GNU_SOURCE /* vasprintf */
#include "rules.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Caps applied while decoding, so a corrupt value cannot ask for absurd
 * allocations.  Values this large would not fit etcd's request limit. */
#define MAX_PORTS 1025
#define MAX_IFACES 256
#define MAX_GPUS 1024
#define MAX_P2P 8192
#define MAX_ENV 1024
#define MAX_PROBES 262144
#define MAX_RESULTS 64
#define MAX_LIST 65536
#define SHOW_NODES 8 /* node names listed in one finding before "+N more" */

const char *const ec_check_names[] = {
    "nodes", "node-ids", "etcd", "clock", "host-names", "address", "socket-ifname", "ports",
    "gpu-count", "gpu-devices", "gpu-busy", "gpu-p2p", "cuda", "nccl", "shm", "memlock",
    "environment", "allreduce", NULL,
};

/* ------------------------------------------------------------------------ */
/* string building                                                          */

typedef struct sb {
    char *s;
    size_t len, cap;
    int oom;
} sb_t;

static void sb_putn(sb_t *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(sb_t *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf(sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    sb_putn(b, s, (size_t)n);
    free(s);
}

/* "; " between parts of one finding. */
static void sb_sep(sb_t *b, const char *sep)
{
    if (b->len)
        sb_puts(b, sep);
}

/* Take the string (never NULL unless out of memory). */
static char *sb_take(sb_t *b)
{
    if (b->oom) {
        free(b->s);
        return NULL;
    }
    if (!b->s)
        return strdup("");
    char *s = b->s;
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}

static void sb_free(sb_t *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

/* Append one escaped token (see the header for the escaping). */
static void sb_tok(sb_t *b, const char *s)
{
    sb_putn(b, " ", 1);
    if (!*s) {
        sb_puts(b, "%-");
        return;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= 0x20 || *p == '%' || *p >= 0x7f) {
            char e[4];
            snprintf(e, sizeof(e), "%%%02X", *p);
            sb_putn(b, e, 3);
        } else {
            sb_putn(b, (const char *)p, 1);
        }
    }
}

static void sb_tokf(sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_tokf(sb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    sb_tok(b, s);
    free(s);
}

/* Unescape a token in place; -1 on a malformed escape or an embedded NUL. */
static int unescape(char *t)
{
    if (!strcmp(t, "%-")) {
        t[0] = '\0';
        return 0;
    }
    char *w = t;
    for (char *r = t; *r; r++) {
        if (*r != '%') {
            *w++ = *r;
            continue;
        }
        if (!isxdigit((unsigned char)r[1]) || !isxdigit((unsigned char)r[2]))
            return -1;
        char hex[3] = {r[1], r[2], 0};
        long v = strtol(hex, NULL, 16);
        if (v == 0)
            return -1;
        *w++ = (char)v;
        r += 2;
    }
    *w = '\0';
    return 0;
}

static int parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_dbl(const char *s, double *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || v != v)
        return -1;
    *out = v;
    return 0;
}

static int copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

/* Grow an array by one element (zeroed); NULL when out of memory. */
static void *grow(void **arr, int *n, size_t elem)
{
    void *p = realloc(*arr, ((size_t)*n + 1) * elem);
    if (!p)
        return NULL;
    *arr = p;
    char *e = (char *)p + (size_t)*n * elem;
    memset(e, 0, elem);
    (*n)++;
    return e;
}

/* A line-and-token reader over a copy of the value. */
#define MAX_TOKENS 16

typedef struct reader {
    char *buf, *pos;
    int line;
    int ntok;
    char *tok[MAX_TOKENS];
} reader_t;

static int reader_open(reader_t *r, const void *buf, size_t len)
{
    memset(r, 0, sizeof(*r));
    if (memchr(buf, '\0', len))
        return -1;
    if (!(r->buf = malloc(len + 1)))
        return -2;
    memcpy(r->buf, buf, len);
    r->buf[len] = '\0';
    r->pos = r->buf;
    return 0;
}

/* Next line split into unescaped tokens: 1, 0 at the end, -1 malformed. */
static int reader_next(reader_t *r)
{
    if (!*r->pos)
        return 0;
    char *line = r->pos;
    char *nl = strchr(line, '\n');
    if (!nl)
        return -1; /* every line ends with \n, the last one too */
    *nl = '\0';
    r->pos = nl + 1;
    r->line++;
    r->ntok = 0;
    for (char *save = NULL, *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (r->ntok == MAX_TOKENS || unescape(t) < 0)
            return -1;
        r->tok[r->ntok++] = t;
    }
    return r->ntok ? 1 : -1;
}

static void reader_close(reader_t *r) { free(r->buf); }

/* ------------------------------------------------------------------------ */
/* facts                                                                     */

void ec_check_facts_clear(ec_check_facts_t *f)
{
    if (!f)
        return;
    int saved = errno;
    for (int i = 0; i < f->nenv; i++) {
        free(f->env[i].name);
        free(f->env[i].value);
    }
    free(f->env);
    free(f->ports);
    free(f->gpus_flag);
    free(f->ifaces);
    free(f->gpus);
    free(f->p2p);
    free(f->probes);
    memset(f, 0, sizeof(*f));
    errno = saved;
}

int ec_check_facts_add_env(ec_check_facts_t *f, const char *name, const char *value)
{
    char *n = strdup(name), *v = strdup(value);
    ec_check_env_t *e = n && v ? grow((void **)&f->env, &f->nenv, sizeof(*e)) : NULL;
    if (!e) {
        free(n);
        free(v);
        return EC_ENOMEM;
    }
    e->name = n;
    e->value = v;
    return 0;
}

int ec_check_facts_add_iface(ec_check_facts_t *f, const char *name, const char *addr, int up)
{
    ec_check_iface_t *e = grow((void **)&f->ifaces, &f->nifaces, sizeof(*e));
    if (!e)
        return EC_ENOMEM;
    snprintf(e->name, sizeof(e->name), "%s", name);
    snprintf(e->addr, sizeof(e->addr), "%s", addr);
    e->up = up;
    return 0;
}

int ec_check_facts_add_probe(ec_check_facts_t *f, const ec_check_probe_t *p)
{
    ec_check_probe_t *e = grow((void **)&f->probes, &f->nprobes, sizeof(*e));
    if (!e)
        return EC_ENOMEM;
    *e = *p;
    return 0;
}

int ec_check_facts_add_gpu(ec_check_facts_t *f, const ec_check_gpu_t *g)
{
    ec_check_gpu_t *e = grow((void **)&f->gpus, &f->ngpus, sizeof(*e));
    if (!e)
        return EC_ENOMEM;
    *e = *g;
    return 0;
}

int ec_check_facts_add_p2p(ec_check_facts_t *f, const ec_check_p2p_t *p)
{
    ec_check_p2p_t *e = grow((void **)&f->p2p, &f->np2p, sizeof(*e));
    if (!e)
        return EC_ENOMEM;
    *e = *p;
    return 0;
}

const char *ec_check_facts_env(const ec_check_facts_t *f, const char *name)
{
    for (int i = 0; i < f->nenv; i++)
        if (!strcmp(f->env[i].name, name))
            return f->env[i].value;
    return NULL;
}

/* The scalar fields, one record each: "<key> <value>". */
typedef enum { F_STR, F_INT, F_I64, F_LL, F_DBL } ftype_t;

typedef struct field {
    const char *key;
    ftype_t type;
    size_t off, size;
} field_t;

#define FM(m) offsetof(ec_check_facts_t, m), sizeof(((ec_check_facts_t *)0)->m)
static const field_t fields[] = {
    {"phase", F_INT, FM(phase)},
    {"node_id", F_STR, FM(node_id)},
    {"nonce", F_STR, FM(nonce)},
    {"hostname", F_STR, FM(hostname)},
    {"boot_id", F_STR, FM(boot_id)},
    {"host_id", F_STR, FM(host_id)},
    {"pid", F_INT, FM(pid)},
    {"pidns", F_STR, FM(pidns)},
    {"wall_ms", F_I64, FM(wall_ms)},
    {"etcd", F_STR, FM(etcd)},
    {"etcd_version", F_STR, FM(etcd_version)},
    {"etcd_rtt_us", F_I64, FM(etcd_rtt_us)},
    {"etcd_rtt_max_us", F_I64, FM(etcd_rtt_max_us)},
    {"host", F_STR, FM(host)},
    {"host_given", F_INT, FM(host_given)},
    {"ifname", F_STR, FM(ifname)},
    {"ports_err", F_STR, FM(ports_err)},
    {"hostname_addr", F_STR, FM(hostname_addr)},
    {"nproc", F_INT, FM(nproc)},
    {"cvd_set", F_INT, FM(cvd_set)},
    {"cvd", F_STR, FM(cvd)},
    {"cvd_count", F_INT, FM(cvd_count)},
    {"driver", F_INT, FM(driver)},
    {"driver_why", F_STR, FM(driver_why)},
    {"driver_version", F_STR, FM(driver_version)},
    {"cuda_driver_version", F_INT, FM(cuda_driver_version)},
    {"visible", F_INT, FM(visible)},
    {"cudart_version", F_INT, FM(cudart_version)},
    {"cudart_path", F_STR, FM(cudart_path)},
    {"nccl_version", F_INT, FM(nccl_version)},
    {"nccl_path", F_STR, FM(nccl_path)},
    {"shm_path", F_STR, FM(shm_path)},
    {"shm_bytes", F_LL, FM(shm_bytes)},
    {"shm_free", F_LL, FM(shm_free)},
    {"shm_err", F_STR, FM(shm_err)},
    {"memlock_cur", F_LL, FM(memlock_cur)},
    {"nib", F_INT, FM(nib)},
    {"coll_prog", F_INT, FM(coll_prog)},
    {"coll", F_INT, FM(coll)},
    {"coll_why", F_STR, FM(coll_why)},
    {"coll_backend", F_STR, FM(coll_backend)},
    {"coll_ranks", F_INT, FM(coll_ranks)},
    {"coll_bytes", F_LL, FM(coll_bytes)},
    {"coll_seconds", F_DBL, FM(coll_seconds)},
    {"coll_busbw_gbps", F_DBL, FM(coll_busbw_gbps)},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

int ec_check_facts_encode(const ec_check_facts_t *f, char **buf, size_t *len, ec_error_t *err)
{
    sb_t b = {0};
    sb_printf(&b, "ecoord-check-facts %d\n", EC_CHECK_FACTS_VERSION);
    for (size_t i = 0; i < NFIELDS; i++) {
        const field_t *fd = &fields[i];
        const char *p = (const char *)f + fd->off;
        sb_puts(&b, fd->key);
        switch (fd->type) {
        case F_STR:
            sb_tok(&b, p);
            break;
        case F_INT:
            sb_tokf(&b, "%d", *(const int *)p);
            break;
        case F_I64:
            sb_tokf(&b, "%" PRId64, *(const int64_t *)p);
            break;
        case F_LL:
            sb_tokf(&b, "%lld", *(const long long *)p);
            break;
        case F_DBL:
            sb_tokf(&b, "%.9g", *(const double *)p);
            break;
        }
        sb_puts(&b, "\n");
    }
    for (int i = 0; i < f->nports; i++)
        sb_printf(&b, "port %d\n", f->ports[i]);
    for (int i = 0; i < f->ngpus_flag; i++)
        sb_printf(&b, "gpuflag %d\n", f->gpus_flag[i]);
    for (int i = 0; i < f->nifaces; i++) {
        sb_puts(&b, "if");
        sb_tok(&b, f->ifaces[i].name);
        sb_tok(&b, f->ifaces[i].addr);
        sb_tokf(&b, "%d", f->ifaces[i].up);
        sb_puts(&b, "\n");
    }
    for (int i = 0; i < f->ngpus; i++) {
        const ec_check_gpu_t *g = &f->gpus[i];
        sb_puts(&b, "gpu");
        sb_tokf(&b, "%d", g->rank);
        sb_tokf(&b, "%d", g->ordinal);
        sb_tokf(&b, "%d", g->physical);
        sb_tok(&b, g->bus_id);
        sb_tok(&b, g->name);
        sb_tokf(&b, "%d", g->nprocs);
        sb_tok(&b, g->procs);
        sb_tokf(&b, "%lld", g->mem_used_mib);
        sb_tokf(&b, "%lld", g->mem_total_mib);
        sb_puts(&b, "\n");
    }
    for (int i = 0; i < f->np2p; i++) {
        sb_puts(&b, "p2p");
        sb_tokf(&b, "%d", f->p2p[i].a);
        sb_tokf(&b, "%d", f->p2p[i].b);
        sb_tokf(&b, "%d", f->p2p[i].ok);
        sb_tok(&b, f->p2p[i].status);
        sb_puts(&b, "\n");
    }
    for (int i = 0; i < f->nenv; i++) {
        sb_puts(&b, "env");
        sb_tok(&b, f->env[i].name);
        sb_tok(&b, f->env[i].value);
        sb_puts(&b, "\n");
    }
    for (int i = 0; i < f->nprobes; i++) {
        const ec_check_probe_t *p = &f->probes[i];
        sb_puts(&b, "probe");
        sb_tok(&b, p->peer);
        sb_tok(&b, p->nonce);
        sb_tok(&b, p->addr);
        sb_tokf(&b, "%d", p->port);
        sb_tokf(&b, "%d", p->ok);
        sb_tok(&b, p->why);
        sb_tokf(&b, "%" PRId64, p->rtt_us);
        sb_tokf(&b, "%" PRId64, p->offset_us);
        sb_puts(&b, "\n");
    }
    sb_puts(&b, "end\n");
    if (b.oom) {
        sb_free(&b);
        return ec_errorf(err, EC_ENOMEM, "out of memory encoding the check facts");
    }
    *len = b.len;
    *buf = sb_take(&b);
    return 0;
}

#define BAD(...)                                                  \
    do {                                                          \
        rc = ec_errorf(err, EC_ECORRUPT, __VA_ARGS__);            \
        goto out;                                                 \
    } while (0)

static int need(const reader_t *r, int n) { return r->ntok == n; }

int ec_check_facts_decode(const void *buf, size_t len, ec_check_facts_t *f, ec_error_t *err)
{
    memset(f, 0, sizeof(*f));
    reader_t r;
    int rc = reader_open(&r, buf, len);
    if (rc == -2)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    if (rc < 0)
        return ec_errorf(err, EC_ECORRUPT, "check facts hold a NUL byte: not written by ecoord");
    long long v;
    int ended = 0, got;
    if (reader_next(&r) != 1 || r.ntok != 2 || strcmp(r.tok[0], "ecoord-check-facts"))
        BAD("check facts do not start with 'ecoord-check-facts': not written by ecoord check");
    if (parse_ll(r.tok[1], 1, INT_MAX, &v) < 0)
        BAD("check facts have a bad version '%.16s'", r.tok[1]);
    if (v != EC_CHECK_FACTS_VERSION)
        BAD("check facts are version %lld, this ecoord reads version %d: run the same ecoord "
            "version on every node", v, EC_CHECK_FACTS_VERSION);
    f->version = (int)v;
    while ((got = reader_next(&r)) == 1) {
        const char *k = r.tok[0];
        if (ended)
            BAD("check facts continue after 'end' (line %d)", r.line);
        if (!strcmp(k, "end")) {
            ended = 1;
            continue;
        }
        const field_t *fd = NULL;
        for (size_t i = 0; i < NFIELDS && !fd; i++)
            if (!strcmp(fields[i].key, k))
                fd = &fields[i];
        if (fd) {
            if (!need(&r, 2))
                BAD("check facts: '%s' takes one value (line %d)", k, r.line);
            char *p = (char *)f + fd->off;
            const char *t = r.tok[1];
            int bad = 0;
            switch (fd->type) {
            case F_STR:
                bad = copy_str(p, fd->size, t);
                break;
            case F_INT:
                bad = parse_ll(t, INT_MIN, INT_MAX, &v);
                if (!bad)
                    *(int *)p = (int)v;
                break;
            case F_I64:
            case F_LL:
                bad = parse_ll(t, LLONG_MIN, LLONG_MAX, &v);
                if (!bad && fd->type == F_I64)
                    *(int64_t *)p = v;
                else if (!bad)
                    *(long long *)p = v;
                break;
            case F_DBL:
                bad = parse_dbl(t, (double *)p);
                break;
            }
            if (bad)
                BAD("check facts: bad value for '%s' (line %d)", k, r.line);
        } else if (!strcmp(k, "port") || !strcmp(k, "gpuflag")) {
            int port = !strcmp(k, "port");
            if (!need(&r, 2) || parse_ll(r.tok[1], port ? 1 : 0, port ? 65535 : 4095, &v) < 0)
                BAD("check facts: bad '%s' (line %d)", k, r.line);
            int **arr = port ? &f->ports : &f->gpus_flag;
            int *n = port ? &f->nports : &f->ngpus_flag;
            int *e;
            if (*n >= (port ? MAX_PORTS : MAX_GPUS))
                BAD("check facts: too many '%s' records", k);
            if (!(e = grow((void **)arr, n, sizeof(int))))
                goto oom;
            *e = (int)v;
        } else if (!strcmp(k, "if")) {
            if (!need(&r, 4) || parse_ll(r.tok[3], 0, 1, &v) < 0 ||
                strlen(r.tok[1]) >= sizeof(f->ifaces[0].name) ||
                strlen(r.tok[2]) >= sizeof(f->ifaces[0].addr))
                BAD("check facts: bad interface record (line %d)", r.line);
            if (f->nifaces >= MAX_IFACES)
                BAD("check facts: too many interfaces");
            if (ec_check_facts_add_iface(f, r.tok[1], r.tok[2], (int)v) < 0)
                goto oom;
        } else if (!strcmp(k, "gpu")) {
            ec_check_gpu_t g = {0};
            long long a[3], np, mu, mt;
            if (!need(&r, 10) || parse_ll(r.tok[1], 0, MAX_GPUS, &a[0]) < 0 ||
                parse_ll(r.tok[2], -1, INT_MAX, &a[1]) < 0 ||
                parse_ll(r.tok[3], -1, INT_MAX, &a[2]) < 0 ||
                copy_str(g.bus_id, sizeof(g.bus_id), r.tok[4]) < 0 ||
                copy_str(g.name, sizeof(g.name), r.tok[5]) < 0 ||
                parse_ll(r.tok[6], 0, INT_MAX, &np) < 0 ||
                copy_str(g.procs, sizeof(g.procs), r.tok[7]) < 0 ||
                parse_ll(r.tok[8], -1, LLONG_MAX, &mu) < 0 ||
                parse_ll(r.tok[9], -1, LLONG_MAX, &mt) < 0)
                BAD("check facts: bad gpu record (line %d)", r.line);
            if (f->ngpus >= MAX_GPUS)
                BAD("check facts: too many gpu records");
            g.rank = (int)a[0];
            g.ordinal = (int)a[1];
            g.physical = (int)a[2];
            g.nprocs = (int)np;
            g.mem_used_mib = mu;
            g.mem_total_mib = mt;
            if (ec_check_facts_add_gpu(f, &g) < 0)
                goto oom;
        } else if (!strcmp(k, "p2p")) {
            ec_check_p2p_t p = {0};
            long long a, b2, ok;
            if (!need(&r, 5) || parse_ll(r.tok[1], 0, MAX_GPUS, &a) < 0 ||
                parse_ll(r.tok[2], 0, MAX_GPUS, &b2) < 0 || parse_ll(r.tok[3], 0, 1, &ok) < 0 ||
                copy_str(p.status, sizeof(p.status), r.tok[4]) < 0)
                BAD("check facts: bad p2p record (line %d)", r.line);
            if (f->np2p >= MAX_P2P)
                BAD("check facts: too many p2p records");
            p.a = (int)a;
            p.b = (int)b2;
            p.ok = (int)ok;
            if (ec_check_facts_add_p2p(f, &p) < 0)
                goto oom;
        } else if (!strcmp(k, "env")) {
            if (!need(&r, 3) || !r.tok[1][0])
                BAD("check facts: bad env record (line %d)", r.line);
            if (f->nenv >= MAX_ENV)
                BAD("check facts: too many env records");
            if (ec_check_facts_add_env(f, r.tok[1], r.tok[2]) < 0)
                goto oom;
        } else if (!strcmp(k, "probe")) {
            ec_check_probe_t p = {0};
            long long port, ok, rtt, off;
            if (!need(&r, 9) || copy_str(p.peer, sizeof(p.peer), r.tok[1]) < 0 ||
                copy_str(p.nonce, sizeof(p.nonce), r.tok[2]) < 0 ||
                copy_str(p.addr, sizeof(p.addr), r.tok[3]) < 0 ||
                parse_ll(r.tok[4], 1, 65535, &port) < 0 || parse_ll(r.tok[5], 0, 1, &ok) < 0 ||
                copy_str(p.why, sizeof(p.why), r.tok[6]) < 0 ||
                parse_ll(r.tok[7], LLONG_MIN, LLONG_MAX, &rtt) < 0 ||
                parse_ll(r.tok[8], LLONG_MIN, LLONG_MAX, &off) < 0)
                BAD("check facts: bad probe record (line %d)", r.line);
            if (f->nprobes >= MAX_PROBES)
                BAD("check facts: too many probe records");
            p.port = (int)port;
            p.ok = (int)ok;
            p.rtt_us = rtt;
            p.offset_us = off;
            if (ec_check_facts_add_probe(f, &p) < 0)
                goto oom;
        }
        /* else: a record a newer ecoord added; skip it */
    }
    if (got < 0)
        BAD("check facts: malformed line %d", r.line + 1);
    if (!ended)
        BAD("check facts are truncated (no 'end' line)");
    if (!ec_node_id_valid(f->node_id, strlen(f->node_id)))
        BAD("check facts carry an invalid node id '%.64s'", f->node_id);
    if (f->phase < EC_CHECK_PHASE_LOCAL || f->phase > EC_CHECK_PHASE_DONE)
        BAD("check facts of %s have an unknown phase %d", f->node_id, f->phase);
    if (f->nproc < 1 || f->nproc > MAX_GPUS)
        BAD("check facts of %s have a bad process count %d", f->node_id, f->nproc);
    rc = 0;
out:
    reader_close(&r);
    return rc;
oom:
    reader_close(&r);
    return ec_errorf(err, EC_ENOMEM, "out of memory decoding check facts");
}

/* ------------------------------------------------------------------------ */
/* pure helpers                                                              */

int ec_check_cvd_parse(const char *cvd, int *ids, int max)
{
    int n = 0;
    const char *p = cvd;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char item[128];
        while (len && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len && isspace((unsigned char)p[len - 1]))
            len--;
        if (len == 0 || len >= sizeof(item))
            break;
        memcpy(item, p, len);
        item[len] = '\0';
        long long v;
        int id;
        if (parse_ll(item, 0, INT_MAX, &v) == 0)
            id = (int)v;
        else if (!strncmp(item, "GPU-", 4) || !strncmp(item, "MIG-", 4))
            id = -1;
        else
            break; /* CUDA stops at the first invalid entry: "-1" hides all */
        if (ids && n < max)
            ids[n] = id;
        n++;
        if (!e)
            break;
        p = e + 1;
    }
    return n;
}

int ec_check_nccl_ifname_match(const char *spec, const char *ifname)
{
    if (!spec || !*spec)
        return 1;
    int exclude = 0, exact = 0;
    if (*spec == '^') {
        exclude = 1;
        spec++;
    }
    if (*spec == '=') {
        exact = 1;
        spec++;
    }
    int hit = 0;
    const char *p = spec;
    while (*p && !hit) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0)
            hit = exact ? (strlen(ifname) == len && !strncmp(ifname, p, len))
                        : !strncmp(ifname, p, len);
        if (!e)
            break;
        p = e + 1;
    }
    return exclude ? !hit : hit;
}

int ec_check_nccl_version_norm(int code)
{
    if (code <= 0)
        return 0;
    if (code >= 20900) /* 2.9 onwards: major*10000 + minor*100 + patch */
        return code;
    return (code / 1000) * 10000 + ((code % 1000) / 100) * 100 + code % 100;
}

const char *ec_check_status_name(ec_check_status_t s)
{
    switch (s) {
    case EC_CHECK_PASS:
        return "PASS";
    case EC_CHECK_WARN:
        return "WARN";
    case EC_CHECK_FAIL:
        return "FAIL";
    case EC_CHECK_SKIP:
        return "SKIP";
    }
    return "?";
}

/* ------------------------------------------------------------------------ */
/* the comparison                                                            */

typedef struct cx {
    const ec_check_input_t *in;
    const ec_check_facts_t **f; /* sorted by node id, then nonce */
    int n;
    int any_driver;             /* some node has an NVIDIA driver */
    int oom;
} cx_t;

/* A finding under construction: the worst status wins. */
typedef struct rb {
    ec_check_result_t *r;
    ec_check_status_t st;
    sb_t found, fix;
    int oom;
} rb_t;

static int severity(ec_check_status_t s)
{
    return s == EC_CHECK_FAIL ? 3 : s == EC_CHECK_WARN ? 2 : s == EC_CHECK_PASS ? 1 : 0;
}

static void rb_status(rb_t *b, ec_check_status_t s)
{
    if (severity(s) > severity(b->st))
        b->st = s;
}

/* Add a fix sentence once. */
static void rb_fix(rb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rb_fix(rb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if (!b->fix.s || !strstr(b->fix.s, s)) {
        sb_sep(&b->fix, "; ");
        sb_puts(&b->fix, s);
    }
    free(s);
}

static void rb_node(rb_t *b, const char *id)
{
    ec_check_result_t *r = b->r;
    for (int i = 0; i < r->nnodes; i++)
        if (!strcmp(r->nodes[i], id))
            return;
    char *d = strdup(id);
    char **e = d ? grow((void **)&r->nodes, &r->nnodes, sizeof(char *)) : NULL;
    if (!e) {
        free(d);
        b->oom = 1;
        return;
    }
    *e = d;
}

static void rb_detail(rb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rb_detail(rb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    char **e = n >= 0 ? grow((void **)&b->r->details, &b->r->ndetails, sizeof(char *)) : NULL;
    if (!e) {
        free(n >= 0 ? s : NULL);
        b->oom = 1;
        return;
    }
    *e = s;
}

static void rb_init(rb_t *b, ec_check_result_t *r, const char *name)
{
    memset(b, 0, sizeof(*b));
    b->r = r;
    b->st = EC_CHECK_SKIP;
    snprintf(r->name, sizeof(r->name), "%s", name);
}

/* PASS and SKIP concern every node; WARN and FAIL the nodes named. */
static void rb_done(cx_t *cx, rb_t *b)
{
    ec_check_result_t *r = b->r;
    r->status = b->st;
    if (r->status == EC_CHECK_PASS || r->status == EC_CHECK_SKIP) {
        for (int i = 0; i < r->nnodes; i++)
            free(r->nodes[i]);
        r->nnodes = 0;
        for (int i = 0; i < cx->n; i++)
            rb_node(b, cx->f[i]->node_id);
        sb_free(&b->fix);
    }
    r->found = sb_take(&b->found);
    r->fix = sb_take(&b->fix);
    if (!r->found || !r->fix || b->oom || b->found.oom)
        cx->oom = 1;
}

/* "a, b, c" (at most SHOW_NODES names, then "+N more"). */
static void sb_names(sb_t *b, const char *const *ids, int n)
{
    for (int i = 0; i < n && i < SHOW_NODES; i++)
        sb_printf(b, "%s%s", i ? ", " : "", ids[i]);
    if (n > SHOW_NODES)
        sb_printf(b, ", +%d more", n - SHOW_NODES);
}

static void sb_all_names(sb_t *b, cx_t *cx)
{
    const char **ids = calloc((size_t)cx->n + 1, sizeof(char *));
    if (!ids) {
        b->oom = 1;
        return;
    }
    for (int i = 0; i < cx->n; i++)
        ids[i] = cx->f[i]->node_id;
    sb_names(b, ids, cx->n);
    free(ids);
}

/* "V1 on a, b; V2 on c": nodes grouped by vals[i] (cx order).  Returns the
 * number of distinct values. */
static int sb_groups(sb_t *b, cx_t *cx, char **vals)
{
    int ngroups = 0;
    const char **ids = calloc((size_t)cx->n + 1, sizeof(char *));
    if (!ids) {
        b->oom = 1;
        return 0;
    }
    for (int i = 0; i < cx->n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(vals[i], vals[j]);
        if (seen)
            continue;
        int k = 0;
        for (int j = i; j < cx->n; j++)
            if (!strcmp(vals[i], vals[j]))
                ids[k++] = cx->f[j]->node_id;
        sb_printf(b, "%s%s on ", ngroups ? "; " : "", vals[i]);
        if (k == cx->n && cx->n > 1)
            sb_puts(b, "every node");
        else
            sb_names(b, ids, k);
        ngroups++;
    }
    free(ids);
    return ngroups;
}

static char **vals_new(cx_t *cx)
{
    char **v = calloc((size_t)cx->n + 1, sizeof(char *));
    if (!v)
        cx->oom = 1;
    return v;
}

static void vals_free(cx_t *cx, char **v)
{
    if (!v)
        return;
    for (int i = 0; i < cx->n; i++)
        free(v[i]);
    free(v);
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* Fill v[i] = fn(f[i]); 0 or -1 when out of memory. */
static int vals_fill(cx_t *cx, char **v, char *(*fn)(const ec_check_facts_t *))
{
    for (int i = 0; i < cx->n; i++)
        if (!(v[i] = fn(cx->f[i]))) {
            cx->oom = 1;
            return -1;
        }
    return 0;
}

static void fmt_bytes(long long b, char *buf, size_t len)
{
    if (b < 0)
        snprintf(buf, len, "unknown");
    else if (b >= (1LL << 30))
        snprintf(buf, len, "%.1f GiB", (double)b / (double)(1LL << 30));
    else
        snprintf(buf, len, "%lld MiB", b >> 20);
}

static void fmt_cuda(int v, char *buf, size_t len)
{
    if (v <= 0)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

static void fmt_nccl(int v, char *buf, size_t len)
{
    if (v <= 0)
        snprintf(buf, len, "not found");
    else
        snprintf(buf, len, "%d.%d.%d", v / 10000, (v % 10000) / 100, v % 100);
}

static void fmt_us(int64_t us, char *buf, size_t len)
{
    if (us < 0)
        us = -us;
    if (us >= 1000000)
        snprintf(buf, len, "%.2f s", (double)us / 1e6);
    else
        snprintf(buf, len, "%.1f ms", (double)us / 1e3);
}

static void fmt_np(const ec_check_input_t *in, char *buf, size_t len)
{
    if (in->np_min == in->np_max)
        snprintf(buf, len, "--np=%d", in->np_max);
    else
        snprintf(buf, len, "--np=%d:%d", in->np_min, in->np_max);
}

static int same_machine(const ec_check_facts_t *a, const ec_check_facts_t *b)
{
    return a->boot_id[0] && !strcmp(a->boot_id, b->boot_id);
}

/* Whether some other node runs on another machine. */
static int has_remote_peer(cx_t *cx, const ec_check_facts_t *f)
{
    for (int i = 0; i < cx->n; i++)
        if (cx->f[i] != f && !same_machine(cx->f[i], f))
            return 1;
    return 0;
}

static int is_loopback_addr(const char *a)
{
    return !strncmp(a, "127.", 4) || !strcmp(a, "::1") || !strcmp(a, "localhost");
}

static int is_bridge_if(const char *ifname)
{
    return !strncmp(ifname, "docker", 6) || !strncmp(ifname, "br-", 3) ||
           !strncmp(ifname, "virbr", 5);
}

static int is_complete(cx_t *cx, const ec_check_facts_t *f)
{
    return !f->gone && f->phase >= cx->in->final_phase;
}

static int etcd_down(cx_t *cx)
{
    return cx->in->etcd_error && *cx->in->etcd_error;
}

static void iface_names(const ec_check_facts_t *f, sb_t *b)
{
    int k = 0;
    for (int i = 0; i < f->nifaces; i++) {
        int dup = 0;
        for (int j = 0; j < i && !dup; j++)
            dup = !strcmp(f->ifaces[i].name, f->ifaces[j].name);
        if (!dup)
            sb_printf(b, "%s%s", k++ ? ", " : "", f->ifaces[i].name);
    }
    if (!k)
        sb_puts(b, "none");
}

/* ---- nodes ------------------------------------------------------------- */

static void ck_nodes(cx_t *cx, rb_t *b)
{
    const ec_check_input_t *in = cx->in;
    char np[32];
    fmt_np(in, np, sizeof(np));
    double waited = (double)in->waited_ms / 1000.0;
    rb_status(b, EC_CHECK_PASS);
    if (etcd_down(cx)) {
        rb_status(b, EC_CHECK_FAIL);
        sb_printf(&b->found, "only this node (%s) was checked: it cannot reach etcd, so it "
                             "cannot meet the others", cx->n ? cx->f[0]->node_id : "?");
        rb_fix(b, "make etcd reachable from this node (see the etcd check), then run the check "
                  "on every node");
        if (cx->n)
            rb_node(b, cx->f[0]->node_id);
        return;
    }
    if (in->embedded && in->np_max > 1) {
        rb_status(b, EC_CHECK_FAIL);
        sb_printf(&b->found, "no --elastic_server: this node ran an etcd of its own, which the "
                             "other nodes of %s cannot find; only this node was checked", np);
        rb_fix(b, "start etcd where every node can reach it and pass --elastic_server=HOST:PORT "
                  "to `ecoord check` on every node");
        for (int i = 0; i < cx->n; i++)
            rb_node(b, cx->f[i]->node_id);
    } else if (cx->n < in->np_max) {
        int fail = cx->n < in->np_min || in->np_min == in->np_max;
        rb_status(b, fail ? EC_CHECK_FAIL : EC_CHECK_WARN);
        sb_sep(&b->found, "; ");
        sb_printf(&b->found, "%d of %s nodes arrived within %.1f s (", cx->n, np, waited);
        sb_all_names(&b->found, cx);
        sb_printf(&b->found, "); %d never arrived", in->np_max - cx->n);
        int named = 0;
        for (int k = 0; k < in->nknown; k++) {
            int here = 0;
            for (int i = 0; i < cx->n && !here; i++)
                here = !strcmp(cx->f[i]->node_id, in->known[k]);
            for (int j = 0; j < k && !here; j++)
                here = !strcmp(in->known[j], in->known[k]); /* listed twice */
            if (here)
                continue;
            sb_printf(&b->found, "%s%s", named++ ? ", " : ": ", in->known[k]);
            rb_node(b, in->known[k]);
        }
        if (named)
            sb_puts(&b->found, " (known to the job's epoch or registrations, absent here)");
        if (!fail)
            sb_printf(&b->found, " (training can start with %d nodes, but not at full size)",
                      cx->n);
        rb_fix(b, "start `ecoord check` with the same --elastic_server and --job_id on every "
                  "node within --elastic_timeout (%.0f s here), or lower --np; a node that "
                  "cannot reach etcd never arrives: run the check on it to see why",
               waited);
    } else if (cx->n > in->np_max) {
        rb_status(b, EC_CHECK_WARN);
        sb_sep(&b->found, "; ");
        sb_printf(&b->found, "%d processes arrived for %s (", cx->n, np);
        sb_all_names(&b->found, cx);
        sb_puts(&b->found, ")");
        rb_fix(b, "run exactly one `ecoord check` per node, with --np set to the node count");
    }
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (is_complete(cx, f))
            continue;
        rb_status(b, EC_CHECK_FAIL);
        rb_node(b, f->node_id);
        sb_sep(&b->found, "; ");
        sb_printf(&b->found, "%s arrived but never finished: %s", f->node_id,
                  f->gone ? "its key vanished (it exited, was killed, or lost etcd)"
                  : f->phase < EC_CHECK_PHASE_PROBED ? "it never reported its port probes"
                                                    : "it never reported the allreduce");
        rb_fix(b, "read the output of `ecoord check` on %s: it says why it stopped; every node "
                  "must keep running until the report is printed",
               f->node_id);
    }
    if (b->st == EC_CHECK_PASS) {
        sb_printf(&b->found, "%d of %s nodes arrived in %.1f s: ", cx->n, np, waited);
        sb_all_names(&b->found, cx);
    }
}

static void ck_node_ids(cx_t *cx, rb_t *b)
{
    rb_status(b, EC_CHECK_PASS);
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (i > 0 && !strcmp(cx->f[i - 1]->node_id, f->node_id))
            continue; /* sorted: a group starts here */
        int k = 1;
        while (i + k < cx->n && !strcmp(cx->f[i + k]->node_id, f->node_id))
            k++;
        if (k == 1)
            continue;
        rb_status(b, EC_CHECK_FAIL);
        rb_node(b, f->node_id);
        sb_sep(&b->found, "; ");
        sb_printf(&b->found, "node id %s is used by %d processes:", f->node_id, k);
        for (int j = 0; j < k; j++)
            sb_printf(&b->found, "%s pid %d on %s (%s)", j ? "," : "", cx->f[i + j]->pid,
                      cx->f[i + j]->hostname, cx->f[i + j]->host);
        rb_fix(b, "give every node its own --node_id (or ECOORD_NODE_ID, or a distinct "
                  "POD_NAME): two agents with one id overwrite each other's record and the "
                  "job never forms");
    }
    if (b->st == EC_CHECK_PASS)
        sb_printf(&b->found, "%d distinct node id%s", cx->n, cx->n == 1 ? "" : "s");
}

static void ck_etcd(cx_t *cx, rb_t *b)
{
    const ec_check_input_t *in = cx->in;
    if (etcd_down(cx)) {
        rb_status(b, EC_CHECK_FAIL);
        sb_printf(&b->found, "%s", in->etcd_error);
        rb_fix(b, "check that etcd runs and that this node reaches it: the address and port in "
                  "--elastic_server, firewalls on the way, and the TLS/auth flags (--etcd_cacert, "
                  "--etcd_cert, --etcd_user)");
        if (cx->n)
            rb_node(b, cx->f[0]->node_id);
        return;
    }
    rb_status(b, EC_CHECK_PASS);
    const ec_check_facts_t *f0 = cx->n ? cx->f[0] : NULL;
    if (in->embedded)
        sb_printf(&b->found, "embedded etcd %s at %s (single-node check)",
                  f0 ? f0->etcd_version : "", f0 ? f0->etcd : "");
    else
        sb_printf(&b->found, "etcd %s reachable from %d node%s", f0 ? f0->etcd_version : "",
                  cx->n, cx->n == 1 ? "" : "s");
    int64_t lo = INT64_MAX, hi = -1;
    int ihi = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (f->etcd_rtt_us < lo)
            lo = f->etcd_rtt_us;
        if (f->etcd_rtt_us > hi) {
            hi = f->etcd_rtt_us;
            ihi = i;
        }
        if (f->etcd_rtt_us > in->limits.etcd_warn_us) {
            char t[32];
            fmt_us(f->etcd_rtt_us, t, sizeof(t));
            rb_status(b, EC_CHECK_WARN);
            rb_node(b, f->node_id);
            rb_detail(b, "%s: median round trip %s", f->node_id, t);
            rb_fix(b, "etcd answers slowly: leases, elections and epoch changes lag by as much; "
                      "put etcd near the nodes and on fast disks (etcd fsyncs every write)");
        }
    }
    if (cx->n <= SHOW_NODES) {
        sb_puts(&b->found, "; round trip ");
        for (int i = 0; i < cx->n; i++) {
            char t[32];
            fmt_us(cx->f[i]->etcd_rtt_us, t, sizeof(t));
            sb_printf(&b->found, "%s%s %s", i ? ", " : "", cx->f[i]->node_id, t);
        }
    } else if (cx->n) {
        char a[32], z[32];
        fmt_us(lo, a, sizeof(a));
        fmt_us(hi, z, sizeof(z));
        sb_printf(&b->found, "; round trip %s to %s (slowest: %s)", a, z, cx->f[ihi]->node_id);
    }
}

/* ---- clock --------------------------------------------------------------- */

static void ck_clock(cx_t *cx, rb_t *b)
{
    const ec_check_limits_t *L = &cx->in->limits;
    if (etcd_down(cx)) {
        sb_puts(&b->found, "not measured: etcd is unreachable, so the peers are unknown");
        return;
    }
    if (cx->n < 2) {
        sb_puts(&b->found, "single node: no clock to compare with");
        return;
    }
    /* Best estimate per pair: the measurement with the shortest round trip. */
    int64_t best_skew = -1, best_rtt = 0;
    int bi = -1, bj = -1, pairs = 0, machines_differ = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        for (int j = 0; j < cx->n; j++) {
            if (j == i)
                continue;
            int64_t off = 0, rtt = INT64_MAX;
            int got = 0;
            for (int p = 0; p < f->nprobes; p++) {
                const ec_check_probe_t *pr = &f->probes[p];
                if (!pr->ok || strcmp(pr->nonce, cx->f[j]->nonce))
                    continue;
                if (pr->rtt_us < rtt) {
                    rtt = pr->rtt_us;
                    off = pr->offset_us;
                    got = 1;
                }
            }
            if (!got)
                continue;
            pairs++;
            if (!same_machine(f, cx->f[j]))
                machines_differ = 1;
            /* The skew is at least |offset| - rtt/2. */
            int64_t skew = (off < 0 ? -off : off) - rtt / 2;
            if (skew < 0)
                skew = 0;
            if (skew > best_skew) {
                best_skew = skew;
                best_rtt = rtt;
                bi = i;
                bj = j;
            }
        }
    }
    if (!pairs) {
        sb_puts(&b->found, "not measured: no node reached another's ports (see ports)");
        return;
    }
    char t[32], u[32];
    fmt_us(best_skew, t, sizeof(t));
    fmt_us(best_rtt / 2, u, sizeof(u));
    sb_printf(&b->found, "largest skew %s between %s and %s (+-%s)%s", t, cx->f[bi]->node_id,
              cx->f[bj]->node_id, u, machines_differ ? "" : "; every node shares one machine's clock");
    if (best_skew > L->clock_fail_us || best_skew > L->clock_warn_us) {
        rb_status(b, best_skew > L->clock_fail_us ? EC_CHECK_FAIL : EC_CHECK_WARN);
        rb_node(b, cx->f[bi]->node_id);
        rb_node(b, cx->f[bj]->node_id);
        rb_fix(b, "synchronize the clocks (chrony or systemd-timesyncd against one NTP source on "
                  "every node): skewed clocks misorder logs and timings, and TLS rejects "
                  "certificates as not yet valid");
    } else {
        rb_status(b, EC_CHECK_PASS);
    }
}

static char *v_hostname(const ec_check_facts_t *f) { return strdup(f->hostname); }

static void ck_host_names(cx_t *cx, rb_t *b)
{
    rb_status(b, EC_CHECK_PASS);
    int machines = 0;
    for (int i = 0; i < cx->n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = same_machine(cx->f[i], cx->f[j]);
        machines += !seen;
    }
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = strcmp(cx->f[j]->hostname, f->hostname) != 0;
        if (!first)
            continue;
        /* Machines as frameworks see them: NCCL_HOSTID when set (NCCL's own
         * override), else the boot id. */
        int nm = 0;
        sb_t who = {0};
        for (int j = i; j < cx->n; j++) {
            const ec_check_facts_t *g = cx->f[j];
            if (strcmp(g->hostname, f->hostname))
                continue;
            int dup = 0;
            for (int k = i; k < j && !dup; k++) {
                const ec_check_facts_t *h = cx->f[k];
                if (strcmp(h->hostname, f->hostname))
                    continue;
                dup = (g->host_id[0] || h->host_id[0]) ? !strcmp(g->host_id, h->host_id)
                                                       : same_machine(g, h);
            }
            if (dup)
                continue;
            nm++;
            sb_printf(&who, "%s%s (%s %s)", nm > 1 ? ", " : "", g->node_id,
                      g->host_id[0] ? "NCCL_HOSTID" : "boot id",
                      g->host_id[0] ? g->host_id : g->boot_id);
        }
        if (nm > 1) {
            rb_status(b, EC_CHECK_FAIL);
            for (int j = i; j < cx->n; j++)
                if (!strcmp(cx->f[j]->hostname, f->hostname))
                    rb_node(b, cx->f[j]->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "host name %s is used by %d different machines: %s",
                      f->hostname, nm, who.s ? who.s : "");
            rb_fix(b, "give every machine its own host name (hostnamectl set-hostname, docker "
                      "run --hostname, a pod's hostname): launchers and NCCL that group processes "
                      "by host name treat those machines as one and compute wrong local ranks");
        }
        sb_free(&who);
    }
    if (b->st == EC_CHECK_PASS) {
        char **v = vals_new(cx);
        if (v && vals_fill(cx, v, v_hostname) == 0) {
            sb_printf(&b->found, "%d node%s on %d machine%s: ", cx->n, cx->n == 1 ? "" : "s",
                      machines, machines == 1 ? "" : "s");
            sb_groups(&b->found, cx, v);
        }
        vals_free(cx, v);
    }
}

/* ---- network --------------------------------------------------------------- */

static const char *iface_of(const ec_check_facts_t *f) { return f->ifname[0] ? f->ifname : "?"; }

/* "eth0 10.0.0.1, ib0 10.1.0.1": the addresses a node could publish instead. */
static void other_addrs(const ec_check_facts_t *f, sb_t *s)
{
    int k = 0;
    for (int i = 0; i < f->nifaces; i++) {
        const ec_check_iface_t *x = &f->ifaces[i];
        if (!x->up || !strcmp(x->name, "lo") || is_loopback_addr(x->addr) ||
            is_bridge_if(x->name) || !strncmp(x->addr, "fe80:", 5))
            continue;
        sb_printf(s, "%s%s %s", k++ ? ", " : "", x->name, x->addr);
    }
    if (!k)
        sb_puts(s, "none besides loopback and bridges");
}

static void ck_address(cx_t *cx, rb_t *b)
{
    rb_status(b, EC_CHECK_PASS);
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        int remote = has_remote_peer(cx, f);
        sb_t alt = {0};
        other_addrs(f, &alt);
        if (f->ports_err[0]) {
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "%s cannot use %s: %s", f->node_id, f->host, f->ports_err);
            rb_fix(b, "pass --host with an address of one of %s's own interfaces (%s)",
                   f->node_id, alt.s ? alt.s : "");
        } else if (!f->ifname[0]) {
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "%s publishes %s, which no interface of %s holds", f->node_id,
                      f->host, f->node_id);
            rb_fix(b, "pass --host with an address of one of %s's own interfaces (%s)",
                   f->node_id, alt.s ? alt.s : "");
        } else if (remote && (!strcmp(f->ifname, "lo") || is_loopback_addr(f->host))) {
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "%s publishes %s (lo), but other nodes run on other machines "
                                 "and cannot reach it", f->node_id, f->host);
            rb_fix(b, "pass --host=ADDR with the address of the interface that faces the other "
                      "nodes (%s has: %s), or reach etcd through that interface instead of "
                      "loopback", f->node_id, alt.s ? alt.s : "");
        } else if (remote && is_bridge_if(f->ifname)) {
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "%s publishes %s on %s, a host-only container bridge the "
                                 "other machines cannot reach", f->node_id, f->host, f->ifname);
            rb_fix(b, "run the container with --network=host, or pass --host with the machine's "
                      "own address (%s) and publish the port range (-p LO-HI:LO-HI)",
                   alt.s ? alt.s : "");
        }
        sb_free(&alt);
    }
    if (b->st == EC_CHECK_PASS) {
        int all_local = 1;
        for (int i = 0; i < cx->n && all_local; i++)
            all_local = !has_remote_peer(cx, cx->f[i]);
        for (int i = 0; i < cx->n && i < SHOW_NODES; i++)
            sb_printf(&b->found, "%s%s %s (%s)", i ? ", " : "", cx->f[i]->node_id,
                      cx->f[i]->host, iface_of(cx->f[i]));
        if (cx->n > SHOW_NODES)
            sb_printf(&b->found, ", +%d more", cx->n - SHOW_NODES);
        if (all_local && cx->n > 1)
            sb_puts(&b->found, "; every node on one machine");
    }
}

/* Split a comma list into a static-size array of names. */
static int split_names(const char *s, char names[][32], int max)
{
    int n = 0;
    const char *p = s;
    while (*p && n < max) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && len < 32) {
            memcpy(names[n], p, len);
            names[n][len] = '\0';
            n++;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return n;
}

static void ck_socket_ifname(cx_t *cx, rb_t *b)
{
    rb_status(b, EC_CHECK_PASS);
    int any_set = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        int remote = has_remote_peer(cx, f);
        const char *nccl = ec_check_facts_env(f, "NCCL_SOCKET_IFNAME");
        const char *gloo = ec_check_facts_env(f, "GLOO_SOCKET_IFNAME");
        sb_t have = {0};
        iface_names(f, &have);
        if (nccl && *nccl) {
            any_set = 1;
            int sel = 0, sel_up = 0, sel_lo_only = 1;
            for (int k = 0; k < f->nifaces; k++) {
                const ec_check_iface_t *x = &f->ifaces[k];
                if (!ec_check_nccl_ifname_match(nccl, x->name))
                    continue;
                sel++;
                if (x->up) {
                    sel_up++;
                    if (strcmp(x->name, "lo"))
                        sel_lo_only = 0;
                }
            }
            if (!sel || !sel_up) {
                rb_status(b, EC_CHECK_FAIL);
                rb_node(b, f->node_id);
                sb_sep(&b->found, "; ");
                sb_printf(&b->found, "NCCL_SOCKET_IFNAME=%s on %s %s (%s has: %s)", nccl,
                          f->node_id, sel ? "selects only interfaces that are down"
                                          : "matches no interface",
                          f->node_id, have.s ? have.s : "");
                rb_fix(b, "set NCCL_SOCKET_IFNAME to an interface that exists and is up on every "
                          "node (%s has: %s), or unset it; NCCL fails to bootstrap with 'no socket "
                          "interface found'", f->node_id, have.s ? have.s : "");
            } else if (remote && sel_lo_only) {
                rb_status(b, EC_CHECK_FAIL);
                rb_node(b, f->node_id);
                sb_sep(&b->found, "; ");
                sb_printf(&b->found, "NCCL_SOCKET_IFNAME=%s on %s selects only lo, but other "
                                     "nodes run on other machines", nccl, f->node_id);
                rb_fix(b, "set NCCL_SOCKET_IFNAME to the interface that faces the other nodes "
                          "(%s has: %s)", f->node_id, have.s ? have.s : "");
            }
        }
        if (gloo && *gloo) {
            any_set = 1;
            char names[16][32];
            int nn = split_names(gloo, names, 16);
            for (int k = 0; k < nn; k++) {
                int exists = 0, up = 0;
                for (int m = 0; m < f->nifaces; m++)
                    if (!strcmp(f->ifaces[m].name, names[k])) {
                        exists = 1;
                        up |= f->ifaces[m].up;
                    }
                if (exists && up)
                    continue;
                rb_status(b, EC_CHECK_FAIL);
                rb_node(b, f->node_id);
                sb_sep(&b->found, "; ");
                sb_printf(&b->found, "GLOO_SOCKET_IFNAME=%s on %s: interface %s %s (%s has: %s)",
                          gloo, f->node_id, names[k], exists ? "is down" : "does not exist",
                          f->node_id, have.s ? have.s : "");
                rb_fix(b, "set GLOO_SOCKET_IFNAME to interface names that exist and are up on "
                          "every node (%s has: %s), or unset it", f->node_id,
                       have.s ? have.s : "");
            }
        } else if (remote && f->hostname_addr[0] && is_loopback_addr(f->hostname_addr)) {
            /* Gloo binds the address the host name resolves to. */
            rb_status(b, cx->any_driver ? EC_CHECK_WARN : EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "GLOO_SOCKET_IFNAME is unset on %s and its host name %s "
                                 "resolves to %s (loopback): Gloo would listen there",
                      f->node_id, f->hostname, f->hostname_addr);
            rb_fix(b, "set GLOO_SOCKET_IFNAME to the interface that faces the other nodes on "
                      "every node, or make the host name resolve to the machine's address "
                      "(/etc/hosts)");
        }
        if ((!nccl || !*nccl) && remote && cx->any_driver && f->driver) {
            int k = 0;
            char first[32] = "";
            for (int m = 0; m < f->nifaces; m++) {
                const ec_check_iface_t *x = &f->ifaces[m];
                if (!x->up || !strcmp(x->name, "lo") || is_bridge_if(x->name) ||
                    !strncmp(x->addr, "fe80:", 5) || !strcmp(x->name, first))
                    continue;
                if (!k)
                    snprintf(first, sizeof(first), "%s", x->name);
                k++;
            }
            if (k > 1) {
                rb_status(b, EC_CHECK_WARN);
                rb_node(b, f->node_id);
                sb_sep(&b->found, "; ");
                sb_printf(&b->found, "NCCL_SOCKET_IFNAME is unset on %s, which has several "
                                     "interfaces (%s): NCCL picks one in its own order",
                          f->node_id, have.s ? have.s : "");
                rb_fix(b, "set NCCL_SOCKET_IFNAME=%s (the interface of the published address) on "
                          "%s", iface_of(f), f->node_id);
            }
        }
        sb_free(&have);
    }
    if (b->st == EC_CHECK_PASS) {
        if (!any_set) {
            sb_puts(&b->found, "NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME are unset: NCCL and "
                               "Gloo choose the interface themselves");
        } else {
            sb_puts(&b->found, "the interfaces named exist and are up: ");
            for (int i = 0; i < cx->n && i < SHOW_NODES; i++) {
                const char *nv = ec_check_facts_env(cx->f[i], "NCCL_SOCKET_IFNAME");
                const char *gv = ec_check_facts_env(cx->f[i], "GLOO_SOCKET_IFNAME");
                sb_printf(&b->found, "%s%s NCCL=%s GLOO=%s", i ? ", " : "", cx->f[i]->node_id,
                          nv && *nv ? nv : "-", gv && *gv ? gv : "-");
            }
        }
    }
}

static void ck_ports(cx_t *cx, rb_t *b)
{
    if (etcd_down(cx)) {
        sb_puts(&b->found, "not probed: etcd is unreachable, so the peers are unknown");
        return;
    }
    int tried = 0, failed = 0, missing = 0, lo = 65536, hi = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *a = cx->f[i];
        if (a->phase < EC_CHECK_PHASE_PROBED)
            continue; /* reported by the nodes check */
        for (int j = 0; j < cx->n; j++) {
            const ec_check_facts_t *t = cx->f[j];
            if (t->ports_err[0] || t->nports == 0)
                continue; /* reported by the address check */
            for (int p = 0; p < t->nports; p++) {
                int port = t->ports[p];
                if (port < lo)
                    lo = port;
                if (port > hi)
                    hi = port;
                const ec_check_probe_t *pr = NULL;
                for (int k = 0; k < a->nprobes && !pr; k++)
                    if (a->probes[k].port == port && !strcmp(a->probes[k].nonce, t->nonce))
                        pr = &a->probes[k];
                if (!pr) {
                    missing++;
                    rb_status(b, EC_CHECK_FAIL);
                    rb_node(b, a->node_id);
                    if (missing <= 16)
                        rb_detail(b, "%s -> %s %s:%d  not probed (%s arrived after %s probed)",
                                  a->node_id, t->node_id, t->host, port, t->node_id, a->node_id);
                    rb_fix(b, "start every node's check within a few seconds of the others");
                    continue;
                }
                tried++;
                if (pr->ok)
                    continue;
                failed++;
                rb_status(b, EC_CHECK_FAIL);
                rb_node(b, a->node_id);
                rb_node(b, t->node_id);
                if (failed <= 16)
                    rb_detail(b, "%s -> %s %s:%d  %s", a->node_id, t->node_id, pr->addr, port,
                              pr->why);
            }
        }
    }
    int shown = (failed > 16 ? 16 : failed) + (missing > 16 ? 16 : missing);
    if (failed + missing > shown)
        rb_detail(b, "... and %d more", failed + missing - shown);
    if (!tried && !missing) {
        sb_puts(&b->found, "not probed: no node reserved ports and reported probes");
        return;
    }
    if (failed) {
        sb_printf(&b->found, "%d of %d TCP connections to published ports failed", failed, tried);
        rb_fix(b, "open TCP ports %d-%d between the nodes (firewall, security group, Kubernetes "
                  "NetworkPolicy), or give every node a range that is open with "
                  "--port_range=LO-HI", lo, hi);
    } else {
        rb_status(b, EC_CHECK_PASS);
        sb_printf(&b->found, "%d TCP connection%s made, every node to every node's ports "
                             "(%d-%d), each answered by the right node",
                  tried, tried == 1 ? "" : "s", lo, hi);
    }
    if (missing)
        sb_printf(&b->found, "%s%d not probed", b->found.len ? "; " : "", missing);
}

/* ---- devices ----------------------------------------------------------------- */

static void ck_gpu_count(cx_t *cx, rb_t *b)
{
    int skip = 1;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (f->cvd_set && f->cvd_count < f->nproc) {
            skip = 0;
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "%s: CUDA_VISIBLE_DEVICES='%s' shows %d GPU%s for %d process%s",
                      f->node_id, f->cvd, f->cvd_count, f->cvd_count == 1 ? "" : "s", f->nproc,
                      f->nproc == 1 ? "" : "es");
            rb_fix(b, "give every process a GPU: list at least %d devices in CUDA_VISIBLE_DEVICES "
                      "(or unset it) or lower --nproc_per_node to the GPUs there are; with fewer "
                      "GPUs than processes one fails to select a device and the others hang in "
                      "ncclCommInitRank (for a CPU-only Gloo run, leave CUDA_VISIBLE_DEVICES "
                      "unset on machines without GPUs)", f->nproc);
        } else if (f->driver && f->visible >= 0 && f->visible < f->nproc) {
            skip = 0;
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "%s: CUDA sees %d GPU%s for %d process%s", f->node_id,
                      f->visible, f->visible == 1 ? "" : "s", f->nproc, f->nproc == 1 ? "" : "es");
            rb_fix(b, "lower --nproc_per_node to the GPUs the node has, or free or add GPUs "
                      "(nvidia-smi lists them; a container needs --gpus all)");
        } else if (!f->driver && f->ngpus_flag > 0) {
            skip = 0;
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "%s: --gpus names %d GPU%s, but %s", f->node_id, f->ngpus_flag,
                      f->ngpus_flag == 1 ? "" : "s", f->driver_why);
            rb_fix(b, "install the NVIDIA driver on %s or run its container with GPUs (docker run "
                      "--gpus all, the NVIDIA container toolkit); for a CPU-only run drop --gpus",
                   f->node_id);
        } else if (!f->driver && cx->any_driver) {
            skip = 0;
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "%s has no usable NVIDIA driver (%s) while other nodes have "
                                 "GPUs", f->node_id, f->driver_why);
            rb_fix(b, "install the NVIDIA driver on %s, or run its container with GPUs (docker "
                      "run --gpus all, the NVIDIA container toolkit)", f->node_id);
        } else if (f->driver) {
            skip = 0;
        }
    }
    if (b->st != EC_CHECK_SKIP)
        return;
    if (skip) {
        sb_printf(&b->found, "no GPU visible on any node (%s): GPU checks skipped, collectives "
                             "use Gloo", cx->n ? cx->f[0]->driver_why : "no facts");
        return;
    }
    rb_status(b, EC_CHECK_PASS);
    for (int i = 0; i < cx->n && i < SHOW_NODES; i++)
        sb_printf(&b->found, "%s%s: %d visible for %d process%s", i ? ", " : "",
                  cx->f[i]->node_id, cx->f[i]->visible, cx->f[i]->nproc,
                  cx->f[i]->nproc == 1 ? "" : "es");
    if (cx->n > SHOW_NODES)
        sb_printf(&b->found, ", +%d more", cx->n - SHOW_NODES);
}

static void gpu_label(const ec_check_gpu_t *g, char *buf, size_t len)
{
    if (g->physical >= 0)
        snprintf(buf, len, "GPU %d%s%s%s", g->physical, g->bus_id[0] ? " (" : "", g->bus_id,
                 g->bus_id[0] ? ")" : "");
    else
        snprintf(buf, len, "GPU %s", g->bus_id[0] ? g->bus_id : "(by UUID)");
}

static int same_gpu(const ec_check_gpu_t *a, const ec_check_gpu_t *b)
{
    if (a->bus_id[0] && b->bus_id[0])
        return !strcmp(a->bus_id, b->bus_id);
    return a->physical >= 0 && a->physical == b->physical;
}

static void ck_gpu_devices(cx_t *cx, rb_t *b)
{
    int relevant = 0, total = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (!f->ngpus)
            continue;
        relevant++;
        total += f->ngpus;
        /* CUDA_VISIBLE_DEVICES against --gpus (physical ids) */
        if (f->cvd_set && f->ngpus_flag) {
            int ids[MAX_GPUS];
            int n = ec_check_cvd_parse(f->cvd, ids, MAX_GPUS), uuid = 0;
            for (int k = 0; k < n && k < MAX_GPUS; k++)
                uuid |= ids[k] < 0;
            for (int g = 0; g < f->ngpus_flag && !uuid; g++) {
                int in = 0;
                for (int k = 0; k < n && k < MAX_GPUS && !in; k++)
                    in = ids[k] == f->gpus_flag[g];
                if (in)
                    continue;
                rb_status(b, EC_CHECK_FAIL);
                rb_node(b, f->node_id);
                sb_sep(&b->found, "; ");
                sb_printf(&b->found, "%s: --gpus names GPU %d, which CUDA_VISIBLE_DEVICES='%s' "
                                     "hides", f->node_id, f->gpus_flag[g], f->cvd);
                rb_fix(b, "list every --gpus device in CUDA_VISIBLE_DEVICES, or give only one of "
                          "the two");
            }
        }
        /* two local ranks on one GPU */
        for (int x = 0; x < f->ngpus; x++)
            for (int y = x + 1; y < f->ngpus; y++) {
                if (!same_gpu(&f->gpus[x], &f->gpus[y]))
                    continue;
                char l[96];
                gpu_label(&f->gpus[x], l, sizeof(l));
                rb_status(b, EC_CHECK_FAIL);
                rb_node(b, f->node_id);
                sb_sep(&b->found, "; ");
                sb_printf(&b->found, "%s: local ranks %d and %d both use %s", f->node_id,
                          f->gpus[x].rank, f->gpus[y].rank, l);
                rb_fix(b, "give each process its own GPU: list distinct devices in --gpus and "
                          "CUDA_VISIBLE_DEVICES (two processes on one GPU fail with NCCL error "
                          "5, invalid usage)");
            }
    }
    /* two agents on one machine sharing a GPU */
    for (int i = 0; i < cx->n; i++)
        for (int j = i + 1; j < cx->n; j++) {
            const ec_check_facts_t *f = cx->f[i], *g = cx->f[j];
            if (!same_machine(f, g))
                continue;
            for (int x = 0; x < f->ngpus; x++)
                for (int y = 0; y < g->ngpus; y++) {
                    if (!same_gpu(&f->gpus[x], &g->gpus[y]))
                        continue;
                    char l[96];
                    gpu_label(&f->gpus[x], l, sizeof(l));
                    rb_status(b, EC_CHECK_FAIL);
                    rb_node(b, f->node_id);
                    rb_node(b, g->node_id);
                    sb_sep(&b->found, "; ");
                    sb_printf(&b->found, "%s and %s run on one machine and both use %s (local "
                                         "rank %d and %d)", f->node_id, g->node_id, l,
                              f->gpus[x].rank, g->gpus[y].rank);
                    rb_fix(b, "split the machine's GPUs between its agents, e.g. --gpus=0,1 for "
                              "one and --gpus=2,3 for the other");
                }
        }
    if (!relevant) {
        sb_puts(&b->found, "no GPUs assigned (no driver, no --gpus, no CUDA_VISIBLE_DEVICES)");
        return;
    }
    if (b->st == EC_CHECK_SKIP) {
        rb_status(b, EC_CHECK_PASS);
        sb_printf(&b->found, "every process has a GPU of its own (%d process%s on %d node%s)",
                  total, total == 1 ? "" : "es", relevant, relevant == 1 ? "" : "s");
    }
}

static void ck_gpu_busy(cx_t *cx, rb_t *b)
{
    if (!cx->any_driver) {
        sb_puts(&b->found, "no NVIDIA driver on any node");
        return;
    }
    int gpus = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (!f->driver)
            continue;
        for (int k = 0; k < f->ngpus; k++) {
            const ec_check_gpu_t *g = &f->gpus[k];
            gpus++;
            if (g->nprocs <= 0)
                continue;
            char l[96];
            gpu_label(g, l, sizeof(l));
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            sb_sep(&b->found, "; ");
            sb_printf(&b->found, "%s: %s (local rank %d) is in use by %s", f->node_id, l,
                      g->rank, g->procs[0] ? g->procs : "another process");
            rb_fix(b, "stop those processes (nvidia-smi lists them) or give this job other GPUs "
                      "with --gpus; a busy GPU runs out of memory or is refused in "
                      "exclusive-process mode");
        }
    }
    if (b->st == EC_CHECK_SKIP) {
        rb_status(b, EC_CHECK_PASS);
        sb_printf(&b->found, "no other process runs on the %d GPU%s this job uses", gpus,
                  gpus == 1 ? "" : "s");
    }
}

static void ck_gpu_p2p(cx_t *cx, rb_t *b)
{
    if (!cx->any_driver) {
        sb_puts(&b->found, "no NVIDIA driver on any node");
        return;
    }
    int pairs = 0, unknown = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (!f->driver || f->ngpus < 2)
            continue;
        if (!f->np2p)
            unknown++;
        for (int k = 0; k < f->np2p; k++) {
            const ec_check_p2p_t *p = &f->p2p[k];
            pairs++;
            if (p->ok)
                continue;
            rb_status(b, EC_CHECK_WARN);
            rb_node(b, f->node_id);
            rb_detail(b, "%s: local ranks %d and %d: %s", f->node_id, p->a, p->b, p->status);
            rb_fix(b, "NCCL falls back to shared memory between those GPUs (slower); on VMs "
                      "enable peer-to-peer (ACS off, IOMMU passthrough); if P2P is reported but "
                      "hangs, set NCCL_P2P_DISABLE=1 on every node");
        }
    }
    if (b->st == EC_CHECK_WARN) {
        sb_printf(&b->found, "%d of %d GPU pairs cannot access each other directly",
                  b->r->ndetails, pairs);
        return;
    }
    if (pairs) {
        rb_status(b, EC_CHECK_PASS);
        sb_printf(&b->found, "peer-to-peer access between all %d local GPU pair%s", pairs,
                  pairs == 1 ? "" : "s");
    } else if (unknown) {
        sb_puts(&b->found, "the driver did not report peer-to-peer capability");
    } else {
        rb_status(b, EC_CHECK_PASS);
        sb_puts(&b->found, "one GPU per node: no peer-to-peer traffic inside a node");
    }
}

static char *v_cuda_driver(const ec_check_facts_t *f)
{
    char c[16];
    fmt_cuda(f->cuda_driver_version, c, sizeof(c));
    return f->driver ? xasprintf("driver %s (CUDA %s)", f->driver_version[0] ? f->driver_version
                                                                              : "?", c)
                     : strdup("no driver");
}

static char *v_cudart(const ec_check_facts_t *f)
{
    char c[16];
    fmt_cuda(f->cudart_version, c, sizeof(c));
    return f->cudart_version ? xasprintf("runtime %s", c) : strdup("no runtime found");
}

static void ck_cuda(cx_t *cx, rb_t *b)
{
    char **dv = vals_new(cx), **rv = vals_new(cx);
    if (!dv || !rv || vals_fill(cx, dv, v_cuda_driver) < 0 || vals_fill(cx, rv, v_cudart) < 0)
        goto out;
    if (!cx->any_driver) {
        sb_puts(&b->found, "no NVIDIA driver on any node; ");
        sb_groups(&b->found, cx, rv);
        goto out;
    }
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (f->driver && f->cudart_version && f->cuda_driver_version &&
            f->cudart_version > f->cuda_driver_version) {
            char r[16], d[16];
            fmt_cuda(f->cudart_version, r, sizeof(r));
            fmt_cuda(f->cuda_driver_version, d, sizeof(d));
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            rb_detail(b, "%s: the CUDA runtime %s (%s) needs a newer driver than %s's, which "
                         "supports CUDA %s", f->node_id, r, f->cudart_path, f->node_id, d);
            rb_fix(b, "upgrade the NVIDIA driver on %s or use a CUDA %s build of the framework "
                      "(otherwise: 'CUDA driver version is insufficient for CUDA runtime "
                      "version')", f->node_id, d);
        }
    }
    sb_t tmp = {0};
    int nd = sb_groups(&tmp, cx, dv);
    sb_free(&tmp);
    int nr = sb_groups(&tmp, cx, rv);
    sb_free(&tmp);
    if (nd > 1 || nr > 1) {
        rb_status(b, EC_CHECK_WARN);
        for (int i = 0; i < cx->n; i++)
            rb_node(b, cx->f[i]->node_id);
        rb_fix(b, "install the same driver and CUDA runtime on every node (one container image "
                  "everywhere): mixed versions behave differently and may not interoperate");
    }
    sb_groups(&b->found, cx, dv);
    sb_puts(&b->found, "; ");
    sb_groups(&b->found, cx, rv);
    rb_status(b, EC_CHECK_PASS);
out:
    vals_free(cx, dv);
    vals_free(cx, rv);
}

static char *v_nccl(const ec_check_facts_t *f)
{
    char c[16];
    fmt_nccl(f->nccl_version, c, sizeof(c));
    return f->nccl_version ? xasprintf("NCCL %s", c) : strdup("NCCL not found");
}

static void ck_nccl(cx_t *cx, rb_t *b)
{
    const ec_check_limits_t *L = &cx->in->limits;
    char **v = vals_new(cx);
    if (!v || vals_fill(cx, v, v_nccl) < 0)
        goto out;
    if (!cx->any_driver) {
        sb_puts(&b->found, "no NVIDIA driver on any node (Gloo is used); ");
        sb_groups(&b->found, cx, v);
        goto out;
    }
    char min[16];
    fmt_nccl(L->nccl_min_version, min, sizeof(min));
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (!f->driver)
            continue;
        if (!f->nccl_version) {
            rb_status(b, EC_CHECK_WARN);
            rb_node(b, f->node_id);
            rb_fix(b, "make libnccl.so.2 findable on %s (LD_LIBRARY_PATH, ldconfig) so the check "
                      "sees the NCCL training will use; frameworks that bundle NCCL (PyTorch "
                      "wheels) load their own copy", f->node_id);
        } else if (f->nccl_version < L->nccl_min_version) {
            char c[16];
            fmt_nccl(f->nccl_version, c, sizeof(c));
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            rb_detail(b, "%s: NCCL %s (%s) is older than %s", f->node_id, c, f->nccl_path, min);
            rb_fix(b, "install NCCL %s or newer on every node (older releases lack the "
                      "communicator abort and error reporting elastic training relies on)", min);
        }
    }
    sb_t tmp = {0};
    int ng = sb_groups(&tmp, cx, v);
    sb_free(&tmp);
    if (ng > 1) {
        rb_status(b, EC_CHECK_FAIL);
        for (int i = 0; i < cx->n; i++)
            rb_node(b, cx->f[i]->node_id);
        rb_fix(b, "install one NCCL version on every node (one container image everywhere): "
                  "ranks with different NCCL versions hang or fail in ncclCommInitRank");
    }
    sb_groups(&b->found, cx, v);
    if (b->st == EC_CHECK_SKIP)
        sb_printf(&b->found, " (at least %s needed)", min);
    rb_status(b, EC_CHECK_PASS);
out:
    vals_free(cx, v);
}

/* ---- memory ------------------------------------------------------------------- */

static char *v_shm(const ec_check_facts_t *f)
{
    char s[32], fr[32];
    if (f->shm_bytes < 0)
        return xasprintf("%s unreadable", f->shm_path);
    fmt_bytes(f->shm_bytes, s, sizeof(s));
    fmt_bytes(f->shm_free, fr, sizeof(fr));
    return xasprintf("%s (%s free)", s, fr);
}

static void ck_shm(cx_t *cx, rb_t *b)
{
    const ec_check_limits_t *L = &cx->in->limits;
    char fail[32], warn[32];
    fmt_bytes(L->shm_fail_bytes, fail, sizeof(fail));
    fmt_bytes(L->shm_warn_bytes, warn, sizeof(warn));
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        char s[32];
        fmt_bytes(f->shm_bytes, s, sizeof(s));
        if (f->shm_bytes < 0) {
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            rb_detail(b, "%s: %s: %s", f->node_id, f->shm_path, f->shm_err);
        } else if (f->shm_bytes < L->shm_fail_bytes) {
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            rb_detail(b, "%s: %s is %s, below %s", f->node_id, f->shm_path, s, fail);
        } else if (f->shm_bytes < L->shm_warn_bytes) {
            rb_status(b, EC_CHECK_WARN);
            rb_node(b, f->node_id);
            rb_detail(b, "%s: %s is %s, below %s", f->node_id, f->shm_path, s, warn);
        } else {
            continue;
        }
        rb_fix(b, "give /dev/shm at least %s: docker run --shm-size=8g (Docker's default is "
                  "64 MB) or --ipc=host; in Kubernetes mount an emptyDir with medium: Memory on "
                  "/dev/shm; too little shared memory makes NCCL fail with 'unhandled system "
                  "error' (error 2) and DataLoader workers die with a bus error", warn);
    }
    char **v = vals_new(cx);
    if (v && vals_fill(cx, v, v_shm) == 0) {
        sb_printf(&b->found, "%s: ", cx->n ? cx->f[0]->shm_path : "/dev/shm");
        sb_groups(&b->found, cx, v);
    }
    vals_free(cx, v);
    rb_status(b, EC_CHECK_PASS);
}

static char *v_memlock(const ec_check_facts_t *f)
{
    char s[32];
    fmt_bytes(f->memlock_cur, s, sizeof(s));
    return f->memlock_cur < 0 ? strdup("unlimited")
                              : f->memlock_cur < (1LL << 20) ? xasprintf("%lld KiB",
                                                                         f->memlock_cur >> 10)
                                                             : strdup(s);
}

static void ck_memlock(cx_t *cx, rb_t *b)
{
    const ec_check_limits_t *L = &cx->in->limits;
    int rdma = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (f->nib <= 0)
            continue;
        rdma++;
        if (f->memlock_cur < 0)
            continue;
        rb_status(b, f->memlock_cur < L->memlock_fail_bytes ? EC_CHECK_FAIL : EC_CHECK_WARN);
        rb_node(b, f->node_id);
        rb_fix(b, "raise the locked-memory limit to unlimited: ulimit -l unlimited, docker run "
                  "--ulimit memlock=-1, or '* - memlock unlimited' in "
                  "/etc/security/limits.conf; RDMA (InfiniBand, RoCE) registers NCCL's buffers as "
                  "locked memory and fails with a small limit");
    }
    char **v = vals_new(cx);
    if (v && vals_fill(cx, v, v_memlock) == 0) {
        sb_puts(&b->found, "ulimit -l ");
        sb_groups(&b->found, cx, v);
    }
    vals_free(cx, v);
    if (!rdma)
        sb_puts(&b->found, "; no RDMA devices, so it does not matter");
    rb_status(b, EC_CHECK_PASS);
}

/* ---- environment --------------------------------------------------------------- */

/* NCCL variables that name per-machine things and may differ on purpose. */
static int env_per_machine(const char *name)
{
    static const char *const per[] = {
        "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE", NULL,
    };
    for (int i = 0; per[i]; i++)
        if (!strcmp(name, per[i]))
            return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void ck_environment(cx_t *cx, rb_t *b)
{
    /* every name any node set, sorted, once */
    int total = 0;
    for (int i = 0; i < cx->n; i++)
        total += cx->f[i]->nenv;
    const char **names = calloc((size_t)total + 1, sizeof(char *));
    char **v = vals_new(cx);
    if (!names || !v) {
        cx->oom = 1;
        goto out;
    }
    int nn = 0;
    for (int i = 0; i < cx->n; i++)
        for (int k = 0; k < cx->f[i]->nenv; k++)
            names[nn++] = cx->f[i]->env[k].name;
    qsort(names, (size_t)nn, sizeof(char *), cmp_str);
    int distinct = 0, differ = 0;
    sb_t list = {0};
    for (int k = 0; k < nn; k++) {
        if (k && !strcmp(names[k], names[k - 1]))
            continue;
        distinct++;
        const char *name = names[k];
        int diff = 0;
        for (int i = 0; i < cx->n; i++) {
            const char *x = ec_check_facts_env(cx->f[i], name);
            free(v[i]);
            v[i] = x ? xasprintf("'%s'", x) : strdup("(unset)");
            if (!v[i]) {
                cx->oom = 1;
                goto out;
            }
            if (i && strcmp(v[i], v[0]))
                diff = 1;
        }
        if (!diff)
            continue;
        differ++;
        int nccl = !strncmp(name, "NCCL_", 5) && !env_per_machine(name);
        rb_status(b, nccl ? EC_CHECK_FAIL : EC_CHECK_WARN);
        sb_t row = {0};
        sb_groups(&row, cx, v);
        rb_detail(b, "%-24s %s", name, row.s ? row.s : "");
        sb_free(&row);
        sb_sep(&list, ", ");
        sb_puts(&list, name);
        for (int i = 0; i < cx->n; i++)
            rb_node(b, cx->f[i]->node_id);
        if (nccl)
            rb_fix(b, "set NCCL_* variables the same way on every node (in the job spec, not in "
                      "one machine's shell profile): nodes that disagree on NCCL settings hang or "
                      "fail in ncclCommInitRank");
        else
            rb_fix(b, "check that the variables listed are meant to differ; library paths and "
                      "CUDA settings set on one node only are the usual cause of 'works on one "
                      "node' failures");
    }
    if (differ) {
        sb_printf(&b->found, "%d variable%s differ%s between nodes: %s", differ,
                  differ == 1 ? "" : "s", differ == 1 ? "s" : "", list.s ? list.s : "");
    } else if (cx->n < 2) {
        rb_status(b, EC_CHECK_PASS);
        sb_printf(&b->found, "single node: nothing to compare (%d variable%s seen)", distinct,
                  distinct == 1 ? "" : "s");
    } else {
        rb_status(b, EC_CHECK_PASS);
        sb_printf(&b->found, "%d variable%s (NCCL_*, CUDA_*, library paths) compared: equal on "
                             "every node", distinct, distinct == 1 ? "" : "s");
    }
    sb_free(&list);
out:
    free(names);
    vals_free(cx, v);
}

/* ---- the collective ------------------------------------------------------------ */

static void ck_allreduce(cx_t *cx, rb_t *b)
{
    if (etcd_down(cx)) {
        sb_puts(&b->found, "not run: etcd is unreachable");
        return;
    }
    int ok = 0, fail = 0, skip = 0, ranks = 0;
    double worst_bw = -1, worst_s = 0;
    long long bytes = 0;
    const char *backend = "", *slowest = "";
    const char *skip_why = NULL;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        switch (f->coll) {
        case EC_CHECK_COLL_OK:
            ok++;
            ranks = f->coll_ranks;
            bytes = f->coll_bytes;
            backend = f->coll_backend;
            if (worst_bw < 0 || f->coll_busbw_gbps < worst_bw) {
                worst_bw = f->coll_busbw_gbps;
                worst_s = f->coll_seconds;
                slowest = f->node_id;
            }
            break;
        case EC_CHECK_COLL_FAIL:
            fail++;
            rb_status(b, EC_CHECK_FAIL);
            rb_node(b, f->node_id);
            rb_detail(b, "%s: %s", f->node_id, f->coll_why);
            rb_fix(b, "read the worker logs the failing nodes name, then run the check again "
                      "with NCCL_DEBUG=INFO (or NCCL_DEBUG=WARN) on every node");
            break;
        case EC_CHECK_COLL_SKIP:
            skip++;
            if (!skip_why)
                skip_why = f->coll_why;
            break;
        default:
            break; /* never finished: the nodes check says so */
        }
    }
    if (fail) {
        sb_printf(&b->found, "the allreduce failed on %d node%s", fail, fail == 1 ? "" : "s");
        return;
    }
    if (ok && !skip) {
        rb_status(b, EC_CHECK_PASS);
        sb_printf(&b->found, "allreduce of %lld MiB over %d ranks (%s) verified; slowest node %s: "
                             "%.3f s, bus bandwidth %.2f GB/s",
                  bytes >> 20, ranks, backend, slowest, worst_s, worst_bw);
        return;
    }
    if (ok && skip) {
        rb_status(b, EC_CHECK_FAIL);
        sb_printf(&b->found, "the allreduce ran on %d node%s but not on %d: %s", ok,
                  ok == 1 ? "" : "s", skip, skip_why ? skip_why : "");
        rb_fix(b, "run the same ecoord build, with the worker library, on every node");
        return;
    }
    sb_printf(&b->found, "not run: %s", skip_why ? skip_why : "no node reported it");
}

/* ------------------------------------------------------------------------ */

static int cmp_facts(const void *a, const void *b)
{
    const ec_check_facts_t *x = *(const ec_check_facts_t *const *)a;
    const ec_check_facts_t *y = *(const ec_check_facts_t *const *)b;
    int c = strcmp(x->node_id, y->node_id);
    return c ? c : strcmp(x->nonce, y->nonce);
}

typedef void (*ck_fn)(cx_t *, rb_t *);

static const struct {
    const char *name;
    ck_fn fn;
} checks[] = {
    {"nodes", ck_nodes},
    {"node-ids", ck_node_ids},
    {"etcd", ck_etcd},
    {"clock", ck_clock},
    {"host-names", ck_host_names},
    {"address", ck_address},
    {"socket-ifname", ck_socket_ifname},
    {"ports", ck_ports},
    {"gpu-count", ck_gpu_count},
    {"gpu-devices", ck_gpu_devices},
    {"gpu-busy", ck_gpu_busy},
    {"gpu-p2p", ck_gpu_p2p},
    {"cuda", ck_cuda},
    {"nccl", ck_nccl},
    {"shm", ck_shm},
    {"memlock", ck_memlock},
    {"environment", ck_environment},
    {"allreduce", ck_allreduce},
};
#define NCHECKS (sizeof(checks) / sizeof(checks[0]))
_Static_assert(NCHECKS + 1 == sizeof(ec_check_names) / sizeof(ec_check_names[0]),
               "ec_check_names and checks[] disagree");

int ec_check_compare(const ec_check_input_t *in, ec_check_report_t *rep, ec_error_t *err)
{
    memset(rep, 0, sizeof(*rep));
    rep->version = EC_CHECK_REPORT_VERSION;
    snprintf(rep->job_id, sizeof(rep->job_id), "%s", in->job_id ? in->job_id : "");
    snprintf(rep->leader, sizeof(rep->leader), "%s", in->leader ? in->leader : "");
    snprintf(rep->leader_nonce, sizeof(rep->leader_nonce), "%s",
             in->leader_nonce ? in->leader_nonce : "");
    rep->np_min = in->np_min;
    rep->np_max = in->np_max;
    cx_t cx = {.in = in, .n = in->nfacts};
    cx.f = calloc((size_t)in->nfacts + 1, sizeof(*cx.f));
    rep->results = calloc(NCHECKS, sizeof(*rep->results));
    rep->nodes = calloc((size_t)in->nfacts + 1, sizeof(char *));
    if (!cx.f || !rep->results || !rep->nodes)
        goto oom;
    for (int i = 0; i < in->nfacts; i++) {
        cx.f[i] = &in->facts[i];
        cx.any_driver |= in->facts[i].driver;
    }
    qsort(cx.f, (size_t)cx.n, sizeof(*cx.f), cmp_facts);
    for (int i = 0; i < cx.n; i++) {
        if (i && !strcmp(cx.f[i]->node_id, cx.f[i - 1]->node_id))
            continue;
        if (!(rep->nodes[rep->nnodes++] = strdup(cx.f[i]->node_id)))
            goto oom;
    }
    for (size_t k = 0; k < NCHECKS; k++) {
        rb_t b;
        rb_init(&b, &rep->results[k], checks[k].name);
        rep->nresults++;
        checks[k].fn(&cx, &b);
        rb_done(&cx, &b);
        if (cx.oom)
            goto oom;
    }
    free(cx.f);
    return 0;
oom:
    free(cx.f);
    ec_check_report_clear(rep);
    return ec_errorf(err, EC_ENOMEM, "out of memory comparing the check facts");
}

/* ------------------------------------------------------------------------ */
/* the report                                                                */

static void result_clear(ec_check_result_t *r)
{
    free(r->found);
    free(r->fix);
    for (int i = 0; i < r->ndetails; i++)
        free(r->details[i]);
    free(r->details);
    for (int i = 0; i < r->nnodes; i++)
        free(r->nodes[i]);
    free(r->nodes);
    memset(r, 0, sizeof(*r));
}

void ec_check_report_clear(ec_check_report_t *rep)
{
    if (!rep)
        return;
    int saved = errno;
    for (int i = 0; i < rep->nresults; i++)
        result_clear(&rep->results[i]);
    free(rep->results);
    for (int i = 0; i < rep->nnodes; i++)
        free(rep->nodes[i]);
    free(rep->nodes);
    memset(rep, 0, sizeof(*rep));
    errno = saved;
}

const ec_check_result_t *ec_check_report_find(const ec_check_report_t *rep, const char *name)
{
    for (int i = 0; i < rep->nresults; i++)
        if (!strcmp(rep->results[i].name, name))
            return &rep->results[i];
    return NULL;
}

void ec_check_report_counts(const ec_check_report_t *rep, int counts[4])
{
    counts[0] = counts[1] = counts[2] = counts[3] = 0;
    for (int i = 0; i < rep->nresults; i++)
        if ((int)rep->results[i].status >= 0 && rep->results[i].status <= EC_CHECK_SKIP)
            counts[rep->results[i].status]++;
}

int ec_check_report_encode(const ec_check_report_t *rep, char **buf, size_t *len, ec_error_t *err)
{
    sb_t b = {0};
    sb_printf(&b, "ecoord-check-report %d\n", EC_CHECK_REPORT_VERSION);
    sb_puts(&b, "job");
    sb_tok(&b, rep->job_id);
    sb_puts(&b, "\nleader");
    sb_tok(&b, rep->leader);
    sb_tok(&b, rep->leader_nonce);
    sb_printf(&b, "\nnp %d %d\n", rep->np_min, rep->np_max);
    for (int i = 0; i < rep->nnodes; i++) {
        sb_puts(&b, "node");
        sb_tok(&b, rep->nodes[i]);
        sb_puts(&b, "\n");
    }
    for (int i = 0; i < rep->nresults; i++) {
        const ec_check_result_t *r = &rep->results[i];
        sb_puts(&b, "result");
        sb_tok(&b, r->name);
        sb_tok(&b, ec_check_status_name(r->status));
        sb_tok(&b, r->found ? r->found : "");
        sb_tok(&b, r->fix ? r->fix : "");
        sb_puts(&b, "\n");
        for (int k = 0; k < r->ndetails; k++) {
            sb_puts(&b, "detail");
            sb_tok(&b, r->details[k]);
            sb_puts(&b, "\n");
        }
        for (int k = 0; k < r->nnodes; k++) {
            sb_puts(&b, "about");
            sb_tok(&b, r->nodes[k]);
            sb_puts(&b, "\n");
        }
    }
    sb_puts(&b, "end\n");
    if (b.oom) {
        sb_free(&b);
        return ec_errorf(err, EC_ENOMEM, "out of memory encoding the check report");
    }
    *len = b.len;
    *buf = sb_take(&b);
    return 0;
}

static int push_str(char ***arr, int *n, const char *s)
{
    char *d = strdup(s);
    char **e = d ? grow((void **)arr, n, sizeof(char *)) : NULL;
    if (!e) {
        free(d);
        return -1;
    }
    *e = d;
    return 0;
}

int ec_check_report_decode(const void *buf, size_t len, ec_check_report_t *rep, ec_error_t *err)
{
    memset(rep, 0, sizeof(*rep));
    reader_t r;
    int rc = reader_open(&r, buf, len);
    if (rc == -2)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    if (rc < 0)
        return ec_errorf(err, EC_ECORRUPT, "the check report holds a NUL byte: not written by "
                                           "ecoord");
    long long v, w;
    int ended = 0, got;
    ec_check_result_t *cur = NULL;
    if (reader_next(&r) != 1 || r.ntok != 2 || strcmp(r.tok[0], "ecoord-check-report"))
        BAD("the check report does not start with 'ecoord-check-report'");
    if (parse_ll(r.tok[1], 1, INT_MAX, &v) < 0)
        BAD("the check report has a bad version '%.16s'", r.tok[1]);
    if (v != EC_CHECK_REPORT_VERSION)
        BAD("the check report is version %lld, this ecoord reads version %d: run the same "
            "ecoord version on every node", v, EC_CHECK_REPORT_VERSION);
    rep->version = (int)v;
    while ((got = reader_next(&r)) == 1) {
        const char *k = r.tok[0];
        if (ended)
            BAD("the check report continues after 'end' (line %d)", r.line);
        if (!strcmp(k, "end")) {
            ended = 1;
        } else if (!strcmp(k, "job")) {
            if (!need(&r, 2) || copy_str(rep->job_id, sizeof(rep->job_id), r.tok[1]) < 0)
                BAD("the check report has a bad job line");
        } else if (!strcmp(k, "leader")) {
            if (!need(&r, 3) || copy_str(rep->leader, sizeof(rep->leader), r.tok[1]) < 0 ||
                copy_str(rep->leader_nonce, sizeof(rep->leader_nonce), r.tok[2]) < 0)
                BAD("the check report has a bad leader line");
        } else if (!strcmp(k, "np")) {
            if (!need(&r, 3) || parse_ll(r.tok[1], 0, INT_MAX, &v) < 0 ||
                parse_ll(r.tok[2], 0, INT_MAX, &w) < 0)
                BAD("the check report has a bad np line");
            rep->np_min = (int)v;
            rep->np_max = (int)w;
        } else if (!strcmp(k, "node")) {
            if (!need(&r, 2) || !ec_node_id_valid(r.tok[1], strlen(r.tok[1])))
                BAD("the check report has a bad node line (line %d)", r.line);
            if (rep->nnodes >= MAX_LIST)
                BAD("the check report lists too many nodes");
            if (push_str(&rep->nodes, &rep->nnodes, r.tok[1]) < 0)
                goto oom;
        } else if (!strcmp(k, "result")) {
            ec_check_status_t st;
            if (!need(&r, 5))
                BAD("the check report has a bad result line (line %d)", r.line);
            if (!strcmp(r.tok[2], "PASS"))
                st = EC_CHECK_PASS;
            else if (!strcmp(r.tok[2], "WARN"))
                st = EC_CHECK_WARN;
            else if (!strcmp(r.tok[2], "FAIL"))
                st = EC_CHECK_FAIL;
            else if (!strcmp(r.tok[2], "SKIP"))
                st = EC_CHECK_SKIP;
            else
                BAD("the check report has an unknown status '%.8s' (line %d)", r.tok[2], r.line);
            if (rep->nresults >= MAX_RESULTS)
                BAD("the check report has too many results");
            if (!(cur = grow((void **)&rep->results, &rep->nresults, sizeof(*cur))))
                goto oom;
            if (copy_str(cur->name, sizeof(cur->name), r.tok[1]) < 0)
                BAD("the check report has a bad check name (line %d)", r.line);
            cur->status = st;
            if (!(cur->found = strdup(r.tok[3])) || !(cur->fix = strdup(r.tok[4])))
                goto oom;
        } else if (!strcmp(k, "detail") || !strcmp(k, "about")) {
            int detail = !strcmp(k, "detail");
            if (!cur || !need(&r, 2))
                BAD("the check report has a stray '%s' line (line %d)", k, r.line);
            if ((detail ? cur->ndetails : cur->nnodes) >= MAX_LIST)
                BAD("the check report has too many '%s' lines", k);
            if (push_str(detail ? &cur->details : &cur->nodes,
                         detail ? &cur->ndetails : &cur->nnodes, r.tok[1]) < 0)
                goto oom;
        }
        /* else: a record a newer ecoord added */
    }
    if (got < 0)
        BAD("the check report has a malformed line %d", r.line + 1);
    if (!ended)
        BAD("the check report is truncated (no 'end' line)");
    rc = 0;
out:
    reader_close(&r);
    if (rc < 0)
        ec_check_report_clear(rep);
    return rc;
oom:
    reader_close(&r);
    ec_check_report_clear(rep);
    return ec_errorf(err, EC_ENOMEM, "out of memory decoding the check report");
}

#define NAME_WIDTH 14

void ec_check_report_print(const ec_check_report_t *rep, FILE *out)
{
    fprintf(out, "ecoord check: job %s, %d node%s (", rep->job_id, rep->nnodes,
            rep->nnodes == 1 ? "" : "s");
    for (int i = 0; i < rep->nnodes && i < SHOW_NODES; i++)
        fprintf(out, "%s%s", i ? ", " : "", rep->nodes[i]);
    if (rep->nnodes > SHOW_NODES)
        fprintf(out, ", +%d more", rep->nnodes - SHOW_NODES);
    if (rep->np_min == rep->np_max)
        fprintf(out, ") of --np=%d, report by %s\n", rep->np_max, rep->leader);
    else
        fprintf(out, ") of --np=%d:%d, report by %s\n", rep->np_min, rep->np_max, rep->leader);
    for (int i = 0; i < rep->nresults; i++) {
        const ec_check_result_t *r = &rep->results[i];
        fprintf(out, "%s  %-*s  %s\n", ec_check_status_name(r->status), NAME_WIDTH, r->name,
                r->found ? r->found : "");
        for (int k = 0; k < r->ndetails; k++)
            fprintf(out, "        %s\n", r->details[k]);
        if ((r->status == EC_CHECK_WARN || r->status == EC_CHECK_FAIL) && r->fix && *r->fix)
            fprintf(out, "      fix: %s\n", r->fix);
    }
    int c[4];
    ec_check_report_counts(rep, c);
    fprintf(out, "%d passed, %d warning%s, %d failed, %d skipped\n", c[EC_CHECK_PASS],
            c[EC_CHECK_WARN], c[EC_CHECK_WARN] == 1 ? "" : "s", c[EC_CHECK_FAIL],
            c[EC_CHECK_SKIP]);
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

static void json_strs(FILE *out, char *const *v, int n)
{
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        if (i)
            fputc(',', out);
        json_str(out, v[i]);
    }
    fputc(']', out);
}

void ec_check_report_print_json(const ec_check_report_t *rep, FILE *out)
{
    int c[4];
    ec_check_report_counts(rep, c);
    fputs("{\"job_id\":", out);
    json_str(out, rep->job_id);
    fputs(",\"leader\":", out);
    json_str(out, rep->leader);
    fprintf(out, ",\"np\":{\"min\":%d,\"max\":%d},\"nodes\":", rep->np_min, rep->np_max);
    json_strs(out, rep->nodes, rep->nnodes);
    fputs(",\"checks\":[", out);
    for (int i = 0; i < rep->nresults; i++) {
        const ec_check_result_t *r = &rep->results[i];
        fputs(i ? ",{\"name\":" : "{\"name\":", out);
        json_str(out, r->name);
        fputs(",\"status\":", out);
        json_str(out, ec_check_status_name(r->status));
        fputs(",\"found\":", out);
        json_str(out, r->found);
        fputs(",\"fix\":", out);
        json_str(out, r->fix);
        fputs(",\"details\":", out);
        json_strs(out, r->details, r->ndetails);
        fputs(",\"nodes\":", out);
        json_strs(out, r->nodes, r->nnodes);
        fputc('}', out);
    }
    fprintf(out, "],\"summary\":{\"passed\":%d,\"warnings\":%d,\"failed\":%d,\"skipped\":%d},"
                 "\"ok\":%s}\n",
            c[EC_CHECK_PASS], c[EC_CHECK_WARN], c[EC_CHECK_FAIL], c[EC_CHECK_SKIP],
            c[EC_CHECK_FAIL] ? "false" : "true");
}
