/* The check's records on the wire: ec_check_facts_t and ec_check_report_t
 * <-> the protobuf messages CheckFacts and CheckReport of proto/ecoord.proto.
 * The only file of coord/check that touches the generated types (as
 * coord/core's record codecs, coord/core/records_impl.h, are for the job's
 * records).
 *
 * Decoding trusts nothing: every count is capped before anything is
 * allocated, every string must fit its C field, every number its range, so
 * a value that is not ours becomes EC_ECORRUPT with a message naming the key
 * and the field, never a crash or an absurd allocation.  Fields a newer
 * ecoord adds are skipped by protobuf; a different version is refused (the
 * meaning changed), and so is the text encoding of version 1.
 */
#include "facts.h"
#include "records.h"
#include "report.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecoord.pb-c.h"

/* Our enums are the wire values (status: wire = C + 1, 0 being unknown). */
_Static_assert((int)EC_CHECK_COLL_NONE == (int)ECOORD__CHECK_COLL__CHECK_COLL_NONE, "coll");
_Static_assert((int)EC_CHECK_COLL_SKIP == (int)ECOORD__CHECK_COLL__CHECK_COLL_SKIP, "coll");
_Static_assert((int)EC_CHECK_COLL_OK == (int)ECOORD__CHECK_COLL__CHECK_COLL_OK, "coll");
_Static_assert((int)EC_CHECK_COLL_FAIL == (int)ECOORD__CHECK_COLL__CHECK_COLL_FAIL, "coll");
_Static_assert((int)EC_CHECK_PASS + 1 == (int)ECOORD__CHECK_STATUS__CHECK_STATUS_PASS, "status");
_Static_assert((int)EC_CHECK_WARN + 1 == (int)ECOORD__CHECK_STATUS__CHECK_STATUS_WARN, "status");
_Static_assert((int)EC_CHECK_FAIL + 1 == (int)ECOORD__CHECK_STATUS__CHECK_STATUS_FAIL, "status");
_Static_assert((int)EC_CHECK_SKIP + 1 == (int)ECOORD__CHECK_STATUS__CHECK_STATUS_SKIP, "status");

/* ---- messages and helpers shared by both records ------------------------ */

typedef struct vctx {
    ec_error_t *err;
    const char *what; /* "check facts" */
    const char *key;  /* may be NULL */
} vctx_t;

__attribute__((format(printf, 2, 3))) static int bad(const vctx_t *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = ec_record_vcorrupt(v->err, v->what, v->key, fmt, ap); /* the records' message */
    va_end(ap);
    return rc;
}

static int enomem(const vctx_t *v, const char *doing)
{
    return ec_errorf(v->err, EC_ENOMEM, "out of memory %s %s", doing, v->what);
}

/* Earlier ecoords (version 1) wrote text starting with magic: say so, rather
 * than "not protobuf".  0 when buf is not such a text. */
static int old_text(const vctx_t *v, const void *buf, size_t len, const char *magic, int want)
{
    size_t ml = strlen(magic);
    if (!buf || len < ml || memcmp(buf, magic, ml))
        return 0;
    return ec_errorf(v->err, EC_ECORRUPT,
                     "%s%s%.160s: written by an older ecoord (text encoding, version 1), this "
                     "ecoord reads version %d: run the same ecoord version on every node",
                     v->what, v->key ? " at " : "", v->key ? v->key : "", want);
}

/* A decoded message's version: the one this ecoord writes, or refused. */
static int check_version(const vctx_t *v, uint32_t got, int want)
{
    if (got == 0)
        return bad(v, "no version field: not written by ecoord check");
    if (got != (uint32_t)want)
        return ec_errorf(v->err, EC_ECORRUPT,
                         "%s%s%.160s: version %u, this ecoord reads version %d: run the same "
                         "ecoord version on every node",
                         v->what, v->key ? " at " : "", v->key ? v->key : "", got, want);
    return 0;
}

static void *unpack(const ProtobufCMessageDescriptor *d, const void *buf, size_t len,
                    const vctx_t *v, int *rc)
{
    static const uint8_t empty[1];
    if (!buf && len) {
        *rc = ec_errorf(v->err, EC_EINVAL, "%s: no buffer given for %zu bytes", v->what, len);
        return NULL;
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, buf ? buf : empty);
    if (!m)
        *rc = bad(v, "%zu bytes do not decode as protobuf %s (truncated or not ours)", len,
                  d->name);
    return m;
}

static int pack(const ProtobufCMessage *m, const vctx_t *v, void **buf, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return enomem(v, "encoding");
    protobuf_c_message_pack(m, b);
    *buf = b;
    *len = n;
    return 0;
}

/* Copy a decoded string into a fixed C field; -1 when it does not fit. */
static int put_str(const vctx_t *v, const char *field, char *dst, size_t size, const char *src)
{
    size_t n = strlen(src ? src : "");
    if (n >= size)
        return bad(v, "field %s is %zu bytes, longer than the %zu this ecoord keeps", field, n,
                   size - 1);
    memcpy(dst, src ? src : "", n + 1);
    return 0;
}

static int in_int(const vctx_t *v, const char *field, long long x, long long lo, long long hi,
                  int *out)
{
    if (x < lo || x > hi)
        return bad(v, "field %s is %lld, outside %lld..%lld", field, x, lo, hi);
    *out = (int)x;
    return 0;
}

/* A count of n items, at most max. */
static int count_ok(const vctx_t *v, const char *field, size_t n, size_t max)
{
    if (n > max)
        return bad(v, "%zu %s entries, more than the %zu allowed", n, field, max);
    return 0;
}

/* The wire side of a C string (protobuf-c wants non-const char *). */
#define PB_STR(s) ((char *)(s))

/* ---- facts -------------------------------------------------------------- */

/* The arrays an encoded message points into, with their lengths (each
 * allocated one longer, so that none is NULL); freed together. */
typedef struct {
    size_t nports, nflag, nif, ngpu, np2p, nenv, nprobe;
    uint32_t *ports, *flag;
    Ecoord__CheckIface *ifs, **ifp;
    Ecoord__CheckGpu *gpus, **gpup;
    Ecoord__CheckP2p *p2p, **p2pp;
    Ecoord__CheckEnv *env, **envp;
    Ecoord__CheckProbe *pr, **prp;
} facts_pb_t;

static size_t count_of(int n)
{
    return n > 0 ? (size_t)n : 0;
}

static void facts_pb_free(facts_pb_t *a)
{
    free(a->ports);
    free(a->flag);
    free(a->ifs);
    free(a->ifp);
    free(a->gpus);
    free(a->gpup);
    free(a->p2p);
    free(a->p2pp);
    free(a->env);
    free(a->envp);
    free(a->pr);
    free(a->prp);
}

/* 0, or -1 when out of memory; the caller frees with facts_pb_free either way. */
static int facts_pb_alloc(facts_pb_t *a, const ec_check_facts_t *f)
{
    a->nports = count_of(f->nports);
    a->nflag = count_of(f->ngpus_flag);
    a->nif = count_of(f->nifaces);
    a->ngpu = count_of(f->ngpus);
    a->np2p = count_of(f->np2p);
    a->nenv = count_of(f->nenv);
    a->nprobe = count_of(f->nprobes);
    a->ports = calloc(a->nports + 1, sizeof(*a->ports));
    a->flag = calloc(a->nflag + 1, sizeof(*a->flag));
    a->ifs = calloc(a->nif + 1, sizeof(*a->ifs));
    a->ifp = calloc(a->nif + 1, sizeof(*a->ifp));
    a->gpus = calloc(a->ngpu + 1, sizeof(*a->gpus));
    a->gpup = calloc(a->ngpu + 1, sizeof(*a->gpup));
    a->p2p = calloc(a->np2p + 1, sizeof(*a->p2p));
    a->p2pp = calloc(a->np2p + 1, sizeof(*a->p2pp));
    a->env = calloc(a->nenv + 1, sizeof(*a->env));
    a->envp = calloc(a->nenv + 1, sizeof(*a->envp));
    a->pr = calloc(a->nprobe + 1, sizeof(*a->pr));
    a->prp = calloc(a->nprobe + 1, sizeof(*a->prp));
    return a->ports && a->flag && a->ifs && a->ifp && a->gpus && a->gpup && a->p2p && a->p2pp &&
                   a->env && a->envp && a->pr && a->prp
               ? 0
               : -1;
}

/* The single-valued fields: identity, etcd, address, GPU driver and
 * libraries, memory, the collective's outcome. */
static void scalars_to_pb(const ec_check_facts_t *f, Ecoord__CheckFacts *m)
{
    m->version = EC_CHECK_FACTS_VERSION;
    m->phase = f->phase > 0 ? (uint32_t)f->phase : 0;
    m->node_id = PB_STR(f->node_id);
    m->nonce = PB_STR(f->nonce);
    m->hostname = PB_STR(f->hostname);
    m->boot_id = PB_STR(f->boot_id);
    m->host_id = PB_STR(f->host_id);
    m->pid = f->pid;
    m->pidns = PB_STR(f->pidns);
    m->wall_ms = f->wall_ms;
    m->etcd = PB_STR(f->etcd);
    m->etcd_version = PB_STR(f->etcd_version);
    m->etcd_rtt_us = f->etcd_rtt_us;
    m->etcd_rtt_max_us = f->etcd_rtt_max_us;
    m->host = PB_STR(f->host);
    m->host_given = f->host_given != 0;
    m->ifname = PB_STR(f->ifname);
    m->ports_err = PB_STR(f->ports_err);
    m->hostname_addr = PB_STR(f->hostname_addr);
    m->nproc = f->nproc > 0 ? (uint32_t)f->nproc : 0;
    m->cvd_set = f->cvd_set != 0;
    m->cvd = PB_STR(f->cvd);
    m->cvd_count = f->cvd_count;
    m->driver = f->driver != 0;
    m->driver_why = PB_STR(f->driver_why);
    m->driver_version = PB_STR(f->driver_version);
    m->cuda_driver_version = f->cuda_driver_version;
    m->visible = f->visible;
    m->cudart_version = f->cudart_version;
    m->cudart_path = PB_STR(f->cudart_path);
    m->nccl_version = f->nccl_version;
    m->nccl_path = PB_STR(f->nccl_path);
    m->shm_path = PB_STR(f->shm_path);
    m->shm_bytes = f->shm_bytes;
    m->shm_free = f->shm_free;
    m->shm_err = PB_STR(f->shm_err);
    m->memlock_cur = f->memlock_cur;
    m->nib = f->nib;
    m->coll_prog = f->coll_prog != 0;
    m->coll = (Ecoord__CheckColl)f->coll;
    m->coll_why = PB_STR(f->coll_why);
    m->coll_backend = PB_STR(f->coll_backend);
    m->coll_ranks = f->coll_ranks;
    m->coll_bytes = f->coll_bytes;
    m->coll_seconds = f->coll_seconds;
    m->coll_busbw_gbps = f->coll_busbw_gbps;
}

/* The reserved ports and the interfaces. */
static void net_lists_to_pb(const ec_check_facts_t *f, Ecoord__CheckFacts *m, facts_pb_t *a)
{
    for (size_t i = 0; i < a->nports; i++)
        a->ports[i] = f->ports[i] > 0 ? (uint32_t)f->ports[i] : 0;
    m->n_ports = a->nports;
    m->ports = a->ports;
    for (size_t i = 0; i < a->nif; i++) {
        ecoord__check_iface__init(&a->ifs[i]);
        a->ifs[i].name = PB_STR(f->ifaces[i].name);
        a->ifs[i].addr = PB_STR(f->ifaces[i].addr);
        a->ifs[i].up = f->ifaces[i].up != 0;
        a->ifp[i] = &a->ifs[i];
    }
    m->n_ifaces = a->nif;
    m->ifaces = a->ifp;
}

/* --gpus, each rank's GPU and the peer-to-peer pairs. */
static void gpu_lists_to_pb(const ec_check_facts_t *f, Ecoord__CheckFacts *m, facts_pb_t *a)
{
    for (size_t i = 0; i < a->nflag; i++)
        a->flag[i] = f->gpus_flag[i] > 0 ? (uint32_t)f->gpus_flag[i] : 0;
    m->n_gpus_flag = a->nflag;
    m->gpus_flag = a->flag;
    for (size_t i = 0; i < a->ngpu; i++) {
        const ec_check_gpu_t *g = &f->gpus[i];
        Ecoord__CheckGpu *e = &a->gpus[i];
        ecoord__check_gpu__init(e);
        e->rank = g->rank > 0 ? (uint32_t)g->rank : 0;
        e->ordinal = g->ordinal;
        e->physical = g->physical;
        e->bus_id = PB_STR(g->bus_id);
        e->name = PB_STR(g->name);
        e->nprocs = g->nprocs > 0 ? (uint32_t)g->nprocs : 0;
        e->procs = PB_STR(g->procs);
        e->mem_used_mib = g->mem_used_mib;
        e->mem_total_mib = g->mem_total_mib;
        a->gpup[i] = e;
    }
    m->n_gpus = a->ngpu;
    m->gpus = a->gpup;
    for (size_t i = 0; i < a->np2p; i++) {
        ecoord__check_p2p__init(&a->p2p[i]);
        a->p2p[i].a = f->p2p[i].a > 0 ? (uint32_t)f->p2p[i].a : 0;
        a->p2p[i].b = f->p2p[i].b > 0 ? (uint32_t)f->p2p[i].b : 0;
        a->p2p[i].ok = f->p2p[i].ok != 0;
        a->p2p[i].status = PB_STR(f->p2p[i].status);
        a->p2pp[i] = &a->p2p[i];
    }
    m->n_p2p = a->np2p;
    m->p2p = a->p2pp;
}

/* The environment kept and the probes of the peers. */
static void env_probes_to_pb(const ec_check_facts_t *f, Ecoord__CheckFacts *m, facts_pb_t *a)
{
    for (size_t i = 0; i < a->nenv; i++) {
        ecoord__check_env__init(&a->env[i]);
        a->env[i].name = PB_STR(f->env[i].name ? f->env[i].name : "");
        a->env[i].value = PB_STR(f->env[i].value ? f->env[i].value : "");
        a->envp[i] = &a->env[i];
    }
    m->n_env = a->nenv;
    m->env = a->envp;
    for (size_t i = 0; i < a->nprobe; i++) {
        const ec_check_probe_t *p = &f->probes[i];
        Ecoord__CheckProbe *e = &a->pr[i];
        ecoord__check_probe__init(e);
        e->peer = PB_STR(p->peer);
        e->nonce = PB_STR(p->nonce);
        e->addr = PB_STR(p->addr);
        e->port = p->port > 0 ? (uint32_t)p->port : 0;
        e->ok = p->ok != 0;
        e->why = PB_STR(p->why);
        e->rtt_us = p->rtt_us;
        e->offset_us = p->offset_us;
        a->prp[i] = e;
    }
    m->n_probes = a->nprobe;
    m->probes = a->prp;
}

int ec_check_facts_encode(const ec_check_facts_t *f, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, "check facts", NULL};
    Ecoord__CheckFacts m = ECOORD__CHECK_FACTS__INIT;
    facts_pb_t a = {0};
    int rc;
    if (facts_pb_alloc(&a, f) < 0) {
        rc = enomem(&v, "encoding");
    } else {
        scalars_to_pb(f, &m);
        net_lists_to_pb(f, &m, &a);
        gpu_lists_to_pb(f, &m, &a);
        env_probes_to_pb(f, &m, &a);
        rc = pack(&m.base, &v, buf, len);
    }
    facts_pb_free(&a);
    return rc;
}

/* The single-valued fields of a decoded message into f, each in its range. */
static int scalars_from_pb(const vctx_t *v, const Ecoord__CheckFacts *m, ec_check_facts_t *f)
{
    int rc;
#define STR(field)                                                                   \
    if ((rc = put_str(v, #field, f->field, sizeof(f->field), m->field)) < 0)         \
        return rc;
#define INT(field, lo, hi)                                                           \
    if ((rc = in_int(v, #field, (long long)m->field, (lo), (hi), &f->field)) < 0)    \
        return rc;
    if (m->phase < EC_CHECK_PHASE_LOCAL || m->phase > EC_CHECK_PHASE_DONE)
        return bad(v, "field phase is %u, outside %d..%d", m->phase, EC_CHECK_PHASE_LOCAL,
                   EC_CHECK_PHASE_DONE);
    f->phase = (int)m->phase;
    STR(node_id)
    if (!ec_node_id_valid(f->node_id, strlen(f->node_id)))
        return bad(v, "field node_id '%.64s' is not a valid node id", f->node_id);
    STR(nonce)
    STR(hostname)
    STR(boot_id)
    STR(host_id)
    INT(pid, 0, INT_MAX)
    STR(pidns)
    f->wall_ms = m->wall_ms;
    STR(etcd)
    STR(etcd_version)
    f->etcd_rtt_us = m->etcd_rtt_us;
    f->etcd_rtt_max_us = m->etcd_rtt_max_us;
    STR(host)
    f->host_given = m->host_given;
    STR(ifname)
    STR(ports_err)
    STR(hostname_addr)
    INT(nproc, 1, EC_CHECK_MAX_GPUS)
    f->cvd_set = m->cvd_set;
    STR(cvd)
    INT(cvd_count, 0, INT_MAX)
    f->driver = m->driver;
    STR(driver_why)
    STR(driver_version)
    INT(cuda_driver_version, 0, INT_MAX)
    INT(visible, -1, INT_MAX)
    INT(cudart_version, 0, INT_MAX)
    STR(cudart_path)
    INT(nccl_version, 0, INT_MAX)
    STR(nccl_path)
    STR(shm_path)
    if (m->shm_bytes < -1 || m->shm_free < -1)
        return bad(v, "field shm_bytes/shm_free is below -1");
    f->shm_bytes = m->shm_bytes;
    f->shm_free = m->shm_free;
    STR(shm_err)
    if (m->memlock_cur < -1)
        return bad(v, "field memlock_cur is %lld, below -1", (long long)m->memlock_cur);
    f->memlock_cur = m->memlock_cur;
    INT(nib, 0, INT_MAX)
    f->coll_prog = m->coll_prog;
    if ((int)m->coll < EC_CHECK_COLL_NONE || (int)m->coll > EC_CHECK_COLL_FAIL)
        return bad(v, "field coll is %d, not a known collective outcome", (int)m->coll);
    f->coll = (int)m->coll;
    STR(coll_why)
    STR(coll_backend)
    INT(coll_ranks, 0, INT_MAX)
    if (m->coll_bytes < 0)
        return bad(v, "field coll_bytes is negative");
    f->coll_bytes = m->coll_bytes;
    if (m->coll_seconds != m->coll_seconds || m->coll_busbw_gbps != m->coll_busbw_gbps)
        return bad(v, "field coll_seconds/coll_busbw_gbps is not a number");
    f->coll_seconds = m->coll_seconds;
    f->coll_busbw_gbps = m->coll_busbw_gbps;
#undef STR
#undef INT
    return 0;
}

/* The reserved ports and --gpus, each in its range. */
static int int_lists_from_pb(const vctx_t *v, const Ecoord__CheckFacts *m, ec_check_facts_t *f)
{
    if (m->n_ports) {
        if (!(f->ports = calloc(m->n_ports, sizeof(int))))
            return enomem(v, "decoding");
        for (size_t i = 0; i < m->n_ports; i++, f->nports++)
            if (m->ports[i] < 1 || m->ports[i] > 65535)
                return bad(v, "ports[%zu] is %u, outside 1..65535", i, m->ports[i]);
            else
                f->ports[i] = (int)m->ports[i];
    }
    if (m->n_gpus_flag) {
        if (!(f->gpus_flag = calloc(m->n_gpus_flag, sizeof(int))))
            return enomem(v, "decoding");
        for (size_t i = 0; i < m->n_gpus_flag; i++, f->ngpus_flag++)
            if (m->gpus_flag[i] > 4095)
                return bad(v, "gpus_flag[%zu] is %u, outside 0..4095", i, m->gpus_flag[i]);
            else
                f->gpus_flag[i] = (int)m->gpus_flag[i];
    }
    return 0;
}

static int ifaces_from_pb(const vctx_t *v, const Ecoord__CheckFacts *m, ec_check_facts_t *f)
{
    int rc;
    for (size_t i = 0; i < m->n_ifaces; i++) {
        const Ecoord__CheckIface *e = m->ifaces[i];
        ec_check_iface_t x = {0};
        if ((rc = put_str(v, "ifaces.name", x.name, sizeof(x.name), e->name)) < 0 ||
            (rc = put_str(v, "ifaces.addr", x.addr, sizeof(x.addr), e->addr)) < 0)
            return rc;
        if (ec_check_facts_add_iface(f, x.name, x.addr, e->up) < 0)
            return enomem(v, "decoding");
    }
    return 0;
}

/* Each rank's GPU, then the peer-to-peer pairs. */
static int gpus_from_pb(const vctx_t *v, const Ecoord__CheckFacts *m, ec_check_facts_t *f)
{
    int rc;
    for (size_t i = 0; i < m->n_gpus; i++) {
        const Ecoord__CheckGpu *e = m->gpus[i];
        ec_check_gpu_t g = {0};
        if ((rc = in_int(v, "gpus.rank", e->rank, 0, EC_CHECK_MAX_GPUS, &g.rank)) < 0 ||
            (rc = in_int(v, "gpus.ordinal", e->ordinal, -1, INT_MAX, &g.ordinal)) < 0 ||
            (rc = in_int(v, "gpus.physical", e->physical, -1, INT_MAX, &g.physical)) < 0 ||
            (rc = put_str(v, "gpus.bus_id", g.bus_id, sizeof(g.bus_id), e->bus_id)) < 0 ||
            (rc = put_str(v, "gpus.name", g.name, sizeof(g.name), e->name)) < 0 ||
            (rc = in_int(v, "gpus.nprocs", e->nprocs, 0, INT_MAX, &g.nprocs)) < 0 ||
            (rc = put_str(v, "gpus.procs", g.procs, sizeof(g.procs), e->procs)) < 0)
            return rc;
        if (e->mem_used_mib < -1 || e->mem_total_mib < -1)
            return bad(v, "gpus[%zu]: memory below -1 MiB", i);
        g.mem_used_mib = e->mem_used_mib;
        g.mem_total_mib = e->mem_total_mib;
        if (ec_check_facts_add_gpu(f, &g) < 0)
            return enomem(v, "decoding");
    }
    for (size_t i = 0; i < m->n_p2p; i++) {
        const Ecoord__CheckP2p *e = m->p2p[i];
        ec_check_p2p_t p = {0};
        if ((rc = in_int(v, "p2p.a", e->a, 0, EC_CHECK_MAX_GPUS, &p.a)) < 0 ||
            (rc = in_int(v, "p2p.b", e->b, 0, EC_CHECK_MAX_GPUS, &p.b)) < 0 ||
            (rc = put_str(v, "p2p.status", p.status, sizeof(p.status), e->status)) < 0)
            return rc;
        p.ok = e->ok;
        if (ec_check_facts_add_p2p(f, &p) < 0)
            return enomem(v, "decoding");
    }
    return 0;
}

/* The environment kept, then the probes of the peers. */
static int env_probes_from_pb(const vctx_t *v, const Ecoord__CheckFacts *m, ec_check_facts_t *f)
{
    int rc;
    for (size_t i = 0; i < m->n_env; i++) {
        const Ecoord__CheckEnv *e = m->env[i];
        if (!e->name || !e->name[0])
            return bad(v, "env[%zu] has no name", i);
        if (ec_check_facts_add_env(f, e->name, e->value ? e->value : "") < 0)
            return enomem(v, "decoding");
    }
    for (size_t i = 0; i < m->n_probes; i++) {
        const Ecoord__CheckProbe *e = m->probes[i];
        ec_check_probe_t p = {0};
        if ((rc = put_str(v, "probes.peer", p.peer, sizeof(p.peer), e->peer)) < 0 ||
            (rc = put_str(v, "probes.nonce", p.nonce, sizeof(p.nonce), e->nonce)) < 0 ||
            (rc = put_str(v, "probes.addr", p.addr, sizeof(p.addr), e->addr)) < 0 ||
            (rc = in_int(v, "probes.port", e->port, 1, 65535, &p.port)) < 0 ||
            (rc = put_str(v, "probes.why", p.why, sizeof(p.why), e->why)) < 0)
            return rc;
        p.ok = e->ok;
        p.rtt_us = e->rtt_us;
        p.offset_us = e->offset_us;
        if (ec_check_facts_add_probe(f, &p) < 0)
            return enomem(v, "decoding");
    }
    return 0;
}

/* The scalar fields and the lists of a decoded message into f: the
 * scalars, then the lists' counts, then each entry. */
static int facts_from_pb(const vctx_t *v, const Ecoord__CheckFacts *m, ec_check_facts_t *f)
{
    int rc;
    if ((rc = scalars_from_pb(v, m, f)) < 0 ||
        (rc = count_ok(v, "ports", m->n_ports, EC_CHECK_MAX_PORTS)) < 0 ||
        (rc = count_ok(v, "gpus_flag", m->n_gpus_flag, EC_CHECK_MAX_GPUS)) < 0 ||
        (rc = count_ok(v, "ifaces", m->n_ifaces, EC_CHECK_MAX_IFACES)) < 0 ||
        (rc = count_ok(v, "gpus", m->n_gpus, EC_CHECK_MAX_GPUS)) < 0 ||
        (rc = count_ok(v, "p2p", m->n_p2p, EC_CHECK_MAX_P2P)) < 0 ||
        (rc = count_ok(v, "env", m->n_env, EC_CHECK_MAX_ENV)) < 0 ||
        (rc = count_ok(v, "probes", m->n_probes, EC_CHECK_MAX_PROBES)) < 0)
        return rc;
    if ((rc = int_lists_from_pb(v, m, f)) < 0 || (rc = ifaces_from_pb(v, m, f)) < 0 ||
        (rc = gpus_from_pb(v, m, f)) < 0 || (rc = env_probes_from_pb(v, m, f)) < 0)
        return rc;
    return 0;
}

int ec_check_facts_decode(const void *buf, size_t len, const char *key, ec_check_facts_t *f,
                          ec_error_t *err)
{
    vctx_t v = {err, "check facts", key};
    memset(f, 0, sizeof(*f));
    int rc = old_text(&v, buf, len, "ecoord-check-facts ", EC_CHECK_FACTS_VERSION);
    if (rc < 0)
        return rc;
    Ecoord__CheckFacts *m = unpack(&ecoord__check_facts__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    if ((rc = check_version(&v, m->version, EC_CHECK_FACTS_VERSION)) < 0)
        goto out;
    f->version = (int)m->version;
    rc = facts_from_pb(&v, m, f);
out:
    protobuf_c_message_free_unpacked(&m->base, NULL);
    if (rc < 0)
        ec_check_facts_clear(f);
    return rc;
}

/* ---- report ------------------------------------------------------------- */

int ec_check_report_encode(const ec_check_report_t *rep, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, "check report", NULL};
    Ecoord__CheckReport m = ECOORD__CHECK_REPORT__INIT;
    size_t nres = rep->nresults > 0 ? (size_t)rep->nresults : 0;
    Ecoord__CheckResult *res = calloc(nres + 1, sizeof(*res));
    Ecoord__CheckResult **resp = calloc(nres + 1, sizeof(*resp));
    int rc;
    if (!res || !resp) {
        rc = enomem(&v, "encoding");
        goto out;
    }
    m.version = EC_CHECK_REPORT_VERSION;
    m.job_id = PB_STR(rep->job_id);
    m.leader = PB_STR(rep->leader);
    m.leader_nonce = PB_STR(rep->leader_nonce);
    m.np_min = rep->np_min > 0 ? (uint32_t)rep->np_min : 0;
    m.np_max = rep->np_max > 0 ? (uint32_t)rep->np_max : 0;
    m.n_nodes = rep->nnodes > 0 ? (size_t)rep->nnodes : 0;
    m.nodes = rep->nodes;
    m.pending = rep->pending != 0;
    for (size_t i = 0; i < nres; i++) {
        const ec_check_result_t *r = &rep->results[i];
        ecoord__check_result__init(&res[i]);
        res[i].name = PB_STR(r->name);
        res[i].status = (Ecoord__CheckStatus)((int)r->status + 1);
        res[i].found = PB_STR(r->found ? r->found : "");
        res[i].fix = PB_STR(r->fix ? r->fix : "");
        res[i].n_details = r->ndetails > 0 ? (size_t)r->ndetails : 0;
        res[i].details = r->details;
        res[i].n_nodes = r->nnodes > 0 ? (size_t)r->nnodes : 0;
        res[i].nodes = r->nodes;
        resp[i] = &res[i];
    }
    m.n_results = nres;
    m.results = resp;
    rc = pack(&m.base, &v, buf, len);
out:
    free(res);
    free(resp);
    return rc;
}

/* A copy of n decoded strings (none empty when ids); -1 after bad() or enomem(). */
static int copy_strs(const vctx_t *v, const char *field, char *const *src, size_t n, int ids,
                     char ***out, int *nout)
{
    int rc;
    if ((rc = count_ok(v, field, n, EC_CHECK_MAX_LIST)) < 0)
        return rc;
    if (!n)
        return 0;
    if (!(*out = calloc(n, sizeof(char *))))
        return enomem(v, "decoding");
    for (size_t i = 0; i < n; i++) {
        const char *s = src[i] ? src[i] : "";
        if (ids && !ec_node_id_valid(s, strlen(s)))
            return bad(v, "%s[%zu] '%.64s' is not a valid node id", field, i, s);
        if (!((*out)[i] = strdup(s)))
            return enomem(v, "decoding");
        (*nout)++;
    }
    return 0;
}

static int report_from_pb(const vctx_t *v, const Ecoord__CheckReport *m, ec_check_report_t *rep)
{
    int rc;
    if ((rc = put_str(v, "job_id", rep->job_id, sizeof(rep->job_id), m->job_id)) < 0 ||
        (rc = put_str(v, "leader", rep->leader, sizeof(rep->leader), m->leader)) < 0 ||
        (rc = put_str(v, "leader_nonce", rep->leader_nonce, sizeof(rep->leader_nonce),
                      m->leader_nonce)) < 0 ||
        (rc = in_int(v, "np_min", m->np_min, 0, INT_MAX, &rep->np_min)) < 0 ||
        (rc = in_int(v, "np_max", m->np_max, 0, INT_MAX, &rep->np_max)) < 0)
        return rc;
    rep->pending = m->pending;
    if (rep->pending && m->n_results)
        return bad(v, "a pending claim carries %zu results", m->n_results);
    if ((rc = copy_strs(v, "nodes", m->nodes, m->n_nodes, 1, &rep->nodes, &rep->nnodes)) < 0 ||
        (rc = count_ok(v, "results", m->n_results, EC_CHECK_MAX_RESULTS)) < 0)
        return rc;
    if (m->n_results && !(rep->results = calloc(m->n_results, sizeof(*rep->results))))
        return enomem(v, "decoding");
    for (size_t i = 0; i < m->n_results; i++) {
        const Ecoord__CheckResult *e = m->results[i];
        ec_check_result_t *r = &rep->results[rep->nresults++];
        if ((rc = put_str(v, "results.name", r->name, sizeof(r->name), e->name)) < 0)
            return rc;
        if (e->status < ECOORD__CHECK_STATUS__CHECK_STATUS_PASS ||
            e->status > ECOORD__CHECK_STATUS__CHECK_STATUS_SKIP)
            return bad(v, "results[%zu] (%s) has an unknown status %d", i, r->name,
                       (int)e->status);
        r->status = (ec_check_status_t)((int)e->status - 1);
        if (!(r->found = strdup(e->found ? e->found : "")) ||
            !(r->fix = strdup(e->fix ? e->fix : "")))
            return enomem(v, "decoding");
        if ((rc = copy_strs(v, "results.details", e->details, e->n_details, 0, &r->details,
                            &r->ndetails)) < 0 ||
            (rc = copy_strs(v, "results.nodes", e->nodes, e->n_nodes, 1, &r->nodes,
                            &r->nnodes)) < 0)
            return rc;
    }
    return 0;
}

int ec_check_report_decode(const void *buf, size_t len, const char *key, ec_check_report_t *rep,
                           ec_error_t *err)
{
    vctx_t v = {err, "check report", key};
    memset(rep, 0, sizeof(*rep));
    /* "ecoord-check-report 1" and the claim "ecoord-check-pending ..." */
    int rc = old_text(&v, buf, len, "ecoord-check-", EC_CHECK_REPORT_VERSION);
    if (rc < 0)
        return rc;
    Ecoord__CheckReport *m = unpack(&ecoord__check_report__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    if ((rc = check_version(&v, m->version, EC_CHECK_REPORT_VERSION)) < 0)
        goto out;
    rep->version = (int)m->version;
    rc = report_from_pb(&v, m, rep);
out:
    protobuf_c_message_free_unpacked(&m->base, NULL);
    if (rc < 0)
        ec_check_report_clear(rep);
    return rc;
}
