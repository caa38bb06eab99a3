/* The comparison (see rules.h): ec_check_compare runs every rule of the
 * table below over the sorted facts, and the helpers the rules share to
 * build a finding (rules_impl.h).  Each rule is one function
 * `rule_<name>(cx, finding)` in the rules_<topic>.c file of its topic; the
 * worst finding wins its status, and every finding names the node(s) it
 * concerns and what to do.  Pure: no clock, no files, no environment, no
 * network. */
#define _GNU_SOURCE
#include "rules_impl.h"

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

/* ------------------------------------------------------------------------ */
/* building a finding (rules_impl.h)                                         */

static int severity(ec_check_status_t s)
{
    return s == EC_CHECK_FAIL ? 3 : s == EC_CHECK_WARN ? 2 : s == EC_CHECK_PASS ? 1 : 0;
}

void ck_status(rb_t *b, ec_check_status_t s)
{
    if (severity(s) > severity(b->st))
        b->st = s;
}

/* Add a fix sentence once. */
void ck_fix(rb_t *b, const char *fmt, ...)
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
        ec_strbuf_sep(&b->fix, "; ");
        ec_strbuf_puts(&b->fix, s);
    }
    free(s);
}

void ck_node(rb_t *b, const char *id)
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

void ck_detail(rb_t *b, const char *fmt, ...)
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

static void ck_init(rb_t *b, ec_check_result_t *r, const char *name)
{
    memset(b, 0, sizeof(*b));
    b->r = r;
    b->st = EC_CHECK_SKIP;
    snprintf(r->name, sizeof(r->name), "%s", name);
}

/* PASS and SKIP concern every node; WARN and FAIL the nodes named. */
static void ck_done(cx_t *cx, rb_t *b)
{
    ec_check_result_t *r = b->r;
    r->status = b->st;
    if (r->status == EC_CHECK_PASS || r->status == EC_CHECK_SKIP) {
        for (int i = 0; i < r->nnodes; i++)
            free(r->nodes[i]);
        r->nnodes = 0;
        for (int i = 0; i < cx->n; i++)
            ck_node(b, cx->f[i]->node_id);
        ec_strbuf_free(&b->fix);
    }
    r->found = ec_strbuf_take(&b->found);
    r->fix = ec_strbuf_take(&b->fix);
    if (!r->found || !r->fix || b->oom || b->found.oom)
        cx->oom = 1;
}

void ck_names(ec_strbuf_t *b, const char *const *ids, int n)
{
    for (int i = 0; i < n && i < EC_CHECK_SHOW_NODES; i++)
        ec_strbuf_printf(b, "%s%s", i ? ", " : "", ids[i]);
    if (n > EC_CHECK_SHOW_NODES)
        ec_strbuf_printf(b, ", +%d more", n - EC_CHECK_SHOW_NODES);
}

void ck_all_names(ec_strbuf_t *b, cx_t *cx)
{
    const char **ids = calloc((size_t)cx->n + 1, sizeof(char *));
    if (!ids) {
        b->oom = 1;
        return;
    }
    for (int i = 0; i < cx->n; i++)
        ids[i] = cx->f[i]->node_id;
    ck_names(b, ids, cx->n);
    free(ids);
}

/* "V1 on a, b; V2 on c": nodes grouped by vals[i] (cx order).  Returns the
 * number of distinct values. */
int ck_groups(ec_strbuf_t *b, cx_t *cx, char **vals)
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
        ec_strbuf_printf(b, "%s%s on ", ngroups ? "; " : "", vals[i]);
        if (k == cx->n && cx->n > 1)
            ec_strbuf_puts(b, "every node");
        else
            ck_names(b, ids, k);
        ngroups++;
    }
    free(ids);
    return ngroups;
}

char **ck_vals_new(cx_t *cx)
{
    char **v = calloc((size_t)cx->n + 1, sizeof(char *));
    if (!v)
        cx->oom = 1;
    return v;
}

void ck_vals_free(cx_t *cx, char **v)
{
    if (!v)
        return;
    for (int i = 0; i < cx->n; i++)
        free(v[i]);
    free(v);
}

/* Fill v[i] = fn(f[i]); 0 or -1 when out of memory. */
int ck_vals_fill(cx_t *cx, char **v, char *(*fn)(const ec_check_facts_t *))
{
    for (int i = 0; i < cx->n; i++)
        if (!(v[i] = fn(cx->f[i]))) {
            cx->oom = 1;
            return -1;
        }
    return 0;
}

void ck_fmt_bytes(long long b, char *buf, size_t len)
{
    if (b < 0)
        snprintf(buf, len, "unknown");
    else if (b >= (1LL << 30))
        snprintf(buf, len, "%.1f GiB", (double)b / (double)(1LL << 30));
    else
        snprintf(buf, len, "%lld MiB", b >> 20);
}

void ck_fmt_cuda(int v, char *buf, size_t len)
{
    if (v <= 0)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

void ck_fmt_nccl(int v, char *buf, size_t len)
{
    if (v <= 0)
        snprintf(buf, len, "not found");
    else
        snprintf(buf, len, "%d.%d.%d", v / 10000, (v % 10000) / 100, v % 100);
}

void ck_fmt_us(int64_t us, char *buf, size_t len)
{
    if (us < 0)
        us = -us;
    if (us >= 1000000)
        snprintf(buf, len, "%.2f s", (double)us / 1e6);
    else
        snprintf(buf, len, "%.1f ms", (double)us / 1e3);
}

void ck_fmt_np(const ec_check_input_t *in, char *buf, size_t len)
{
    if (in->np_min == in->np_max)
        snprintf(buf, len, "--np=%d", in->np_max);
    else
        snprintf(buf, len, "--np=%d:%d", in->np_min, in->np_max);
}

/* Whether some other node runs on another machine. */
int ck_has_remote_peer(cx_t *cx, const ec_check_facts_t *f)
{
    for (int i = 0; i < cx->n; i++)
        if (cx->f[i] != f && !same_machine(cx->f[i], f))
            return 1;
    return 0;
}

void ck_iface_names(const ec_check_facts_t *f, ec_strbuf_t *b)
{
    int k = 0;
    for (int i = 0; i < f->nifaces; i++) {
        int dup = 0;
        for (int j = 0; j < i && !dup; j++)
            dup = !strcmp(f->ifaces[i].name, f->ifaces[j].name);
        if (!dup)
            ec_strbuf_printf(b, "%s%s", k++ ? ", " : "", f->ifaces[i].name);
    }
    if (!k)
        ec_strbuf_puts(b, "none");
}

/* ------------------------------------------------------------------------ */
/* the table of rules, in report order, and the comparison                   */

const char *const ec_check_names[] = {
    "nodes", "node-ids", "etcd", "clock", "host-names", "address", "socket-ifname", "ports",
    "gpu-count", "gpu-devices", "gpu-busy", "gpu-p2p", "cuda", "nccl", "shm", "memlock",
    "environment", "allreduce", NULL,
};

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
    {"nodes", rule_nodes},
    {"node-ids", rule_node_ids},
    {"etcd", rule_etcd},
    {"clock", rule_clock},
    {"host-names", rule_host_names},
    {"address", rule_address},
    {"socket-ifname", rule_socket_ifname},
    {"ports", rule_ports},
    {"gpu-count", rule_gpu_count},
    {"gpu-devices", rule_gpu_devices},
    {"gpu-busy", rule_gpu_busy},
    {"gpu-p2p", rule_gpu_p2p},
    {"cuda", rule_cuda},
    {"nccl", rule_nccl},
    {"shm", rule_shm},
    {"memlock", rule_memlock},
    {"environment", rule_environment},
    {"allreduce", rule_allreduce},
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
        ck_init(&b, &rep->results[k], checks[k].name);
        rep->nresults++;
        checks[k].fn(&cx, &b);
        ck_done(&cx, &b);
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
