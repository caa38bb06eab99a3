/* Records: the only file that touches the generated protobuf-c types.
 *
 * Each record has one validator that works on the plain C struct and is run
 * both before encoding (a failure is the writer's bug: EC_EINVAL) and after
 * decoding (a failure means the stored value is not ours or is damaged:
 * EC_ECORRUPT).  Conversion from the wire type does the checks that must
 * happen before narrowing (counts, uint32 -> int, port -> uint16), with the
 * same message style.
 */
#include "records.h"

#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecoord.pb-c.h"
#include "keys.h"

/* Our enums are the wire values; the build breaks if they ever diverge. */
#define EC__SAME(prefix, pbprefix, n, v, t)                                            \
    _Static_assert((int)prefix##n == (int)pbprefix##n, "enum " #n " differs from proto");
#define EC__NODE_SAME(n, v, t) EC__SAME(EC_NODE_, ECOORD__NODE_STATE__NODE_STATE_, n, v, t)
#define EC__REASON_SAME(n, v, t) \
    EC__SAME(EC_REASON_, ECOORD__EPOCH_REASON__EPOCH_REASON_, n, v, t)
#define EC__JOB_SAME(n, v, t) EC__SAME(EC_JOB_, ECOORD__JOB_STATE__JOB_STATE_, n, v, t)
#define EC__FAIL_SAME(n, v, t) \
    EC__SAME(EC_FAILURE_, ECOORD__FAILURE_KIND__FAILURE_KIND_, n, v, t)
EC_NODE_STATE_MAP(EC__NODE_SAME)
EC_EPOCH_REASON_MAP(EC__REASON_SAME)
EC_JOB_STATE_MAP(EC__JOB_SAME)
EC_FAILURE_KIND_MAP(EC__FAIL_SAME)
#define EC__BOOT_SAME(n, v, t) EC__SAME(EC_BOOT_, ECOORD__BOOT_PHASE__BOOT_PHASE_, n, v, t)
EC_BOOT_PHASE_MAP(EC__BOOT_SAME)

/* ---- enum names; a value is "known" iff it has a name and is not 0 -------- */

#define EC__NAME_CASE(n, v, t) \
    case (v):                  \
        return t;

const char *ec_node_state_name(ec_node_state_t s)
{
    switch ((int)s) { EC_NODE_STATE_MAP(EC__NAME_CASE) }
    return "unknown";
}

const char *ec_epoch_reason_name(ec_epoch_reason_t r)
{
    switch ((int)r) { EC_EPOCH_REASON_MAP(EC__NAME_CASE) }
    return "unknown";
}

const char *ec_job_state_name(ec_job_state_t s)
{
    switch ((int)s) { EC_JOB_STATE_MAP(EC__NAME_CASE) }
    return "unknown";
}

void ec_failure_what(const ec_failure_t *f, char *buf, size_t len)
{
    switch (f->kind) {
    case EC_FAILURE_EXITED:
        snprintf(buf, len, "exited with code %d", f->exit_code);
        break;
    case EC_FAILURE_SIGNALED:
        snprintf(buf, len, "killed by signal %d (%s)", f->signal, strsignal(f->signal));
        break;
    case EC_FAILURE_NODE_LOST:
        snprintf(buf, len, "node lost");
        break;
    case EC_FAILURE_NOT_READY:
        snprintf(buf, len, "not ready within --join_ready_timeout");
        break;
    default:
        snprintf(buf, len, "%s", ec_failure_kind_name(f->kind));
    }
}

bool ec_job_state_ended(ec_job_state_t s)
{
    return s == EC_JOB_COMPLETED || s == EC_JOB_FAILED || s == EC_JOB_INTERRUPTED;
}

const char *ec_failure_kind_name(ec_failure_kind_t k)
{
    switch ((int)k) { EC_FAILURE_KIND_MAP(EC__NAME_CASE) }
    return "unknown";
}

const char *ec_boot_phase_name(int phase)
{
    switch (phase) { EC_BOOT_PHASE_MAP(EC__NAME_CASE) }
    return "unknown";
}

#define EC__KNOWN_CASE(n, v, t) case (v):
static int node_state_known(int s)
{
    switch (s) { EC_NODE_STATE_MAP(EC__KNOWN_CASE) return s != 0; }
    return 0;
}
static int epoch_reason_known(int r)
{
    switch (r) { EC_EPOCH_REASON_MAP(EC__KNOWN_CASE) return r != 0; }
    return 0;
}
static int job_state_known(int s)
{
    switch (s) { EC_JOB_STATE_MAP(EC__KNOWN_CASE) return s != 0; }
    return 0;
}
static int failure_kind_known(int k)
{
    switch (k) { EC_FAILURE_KIND_MAP(EC__KNOWN_CASE) return k != 0; }
    return 0;
}
static int boot_phase_known(int p)
{
    switch (p) { EC_BOOT_PHASE_MAP(EC__KNOWN_CASE) return p != 0; }
    return 0;
}

/* ---- validation context and messages -------------------------------------- */

typedef struct vctx {
    ec_error_t *err;
    int code;          /* EC_EINVAL when encoding, EC_ECORRUPT when decoding */
    const char *what;  /* "epoch record" */
    const char *key;   /* may be NULL */
} vctx_t;

int ec_record_vcorrupt(ec_error_t *err, const char *what, const char *key, const char *fmt,
                       va_list ap)
{
    char detail[EC_ERRMSG_MAX];
    vsnprintf(detail, sizeof(detail), fmt, ap);
    return ec_errorf(err, EC_ECORRUPT,
                     "%s%s%.160s: %s; the key may have been written by another tool or "
                     "an incompatible ecoord version",
                     what, key ? " at " : "", key ? key : "", detail);
}

__attribute__((format(printf, 2, 3))) static int bad(const vctx_t *v, const char *fmt, ...)
{
    char detail[EC_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    if (v->code == EC_ECORRUPT) {
        int rc = ec_record_vcorrupt(v->err, v->what, v->key, fmt, ap);
        va_end(ap);
        return rc;
    }
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    return ec_errorf(v->err, v->code, "%s not encoded: %s (a bug in the writer)", v->what,
                     detail);
}

static int printable_token(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (n >= max || (unsigned char)s[n] <= 0x20 || (unsigned char)s[n] >= 0x7f ||
            s[n] == ',')
            return 0;
    return n > 0;
}

int ec_host_valid(const char *host)
{
    if (!host)
        return 0;
    size_t n = 0;
    for (; host[n]; n++) {
        int c = (unsigned char)host[n];
        if (n >= EC_HOST_MAX ||
            !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':' || c == '%'))
            return 0;
    }
    return n > 0;
}

static int node_id_ok(const char *id)
{
    return id && ec_node_id_valid(id, strnlen(id, EC_NODE_ID_MAX + 1));
}

/* Show an untrusted string in a message: bounded, never NULL. */
#define SHOW(s) ((s) ? (s) : "(null)")

static char *dup_str(const char *s)
{
    return strdup(s ? s : "");
}

/* The wire side of an optional C string. */
static char *pb_str(const char *s)
{
    return (char *)(s ? s : "");
}

static int pack(const ProtobufCMessage *m, const vctx_t *v, void **buf, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > EC_RECORD_MAX_BYTES)
        return ec_errorf(v->err, EC_ETOOLARGE,
                         "%s would be %zu bytes, above the %d-byte limit for one etcd value; "
                         "shorten node ids/hosts or use fewer nodes",
                         v->what, n, EC_RECORD_MAX_BYTES);
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return ec_errorf(v->err, EC_ENOMEM, "%s: out of memory encoding %zu bytes", v->what, n);
    protobuf_c_message_pack(m, b);
    *buf = b;
    *len = n;
    return 0;
}

static void *unpack(const ProtobufCMessageDescriptor *d, const void *buf, size_t len,
                    const vctx_t *v, int *rc)
{
    if (!buf && len) {
        *rc = ec_errorf(v->err, EC_EINVAL, "%s: no buffer given for %zu bytes", v->what, len);
        return NULL;
    }
    static const uint8_t empty[1];
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, buf ? buf : empty);
    if (!m)
        *rc = bad(v, "%zu bytes do not decode as protobuf %s", len, d->name);
    return m;
}

static int enomem(const vctx_t *v)
{
    return ec_errorf(v->err, EC_ENOMEM, "%s: out of memory", v->what);
}

/* Copy n wire ports into a uint16_t array after range checks. */
static int ports_from_pb(const vctx_t *v, const char *whose, const uint32_t *src, size_t n,
                         uint16_t **out)
{
    for (size_t i = 0; i < n; i++)
        if (src[i] < 1 || src[i] > 65535)
            return bad(v, "%s port %zu is %u, outside 1..65535", whose, i, src[i]);
    *out = malloc((n ? n : 1) * sizeof(**out));
    if (!*out)
        return enomem(v);
    for (size_t i = 0; i < n; i++)
        (*out)[i] = (uint16_t)src[i];
    return 0;
}

/* ---- node record ---------------------------------------------------------- */

ec_node_rec_t *ec_node_rec_new(int nproc, int ndevices)
{
    if (nproc < 1 || nproc > EC_NPROC_MAX || ndevices < 0 || ndevices > EC_NPROC_MAX)
        return NULL;
    ec_node_rec_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->nproc = nproc;
    r->ndevices = ndevices;
    r->ports = calloc((size_t)nproc, sizeof(*r->ports));
    r->device_ids = calloc((size_t)ndevices + 1, sizeof(*r->device_ids));
    if (!r->ports || !r->device_ids) {
        ec_node_rec_free(r);
        return NULL;
    }
    return r;
}

void ec_node_rec_free(ec_node_rec_t *r)
{
    if (!r)
        return;
    int saved = errno;
    free(r->node_id);
    free(r->host);
    free(r->ports);
    if (r->device_ids)
        for (int i = 0; i < r->ndevices; i++)
            free(r->device_ids[i]);
    free(r->device_ids);
    free(r->agent_version);
    free(r->reason);
    free(r);
    errno = saved;
}

/* Ports on one host must be distinct: two ranks cannot listen on one port. */
static int ports_distinct(const vctx_t *v, const char *whose, const uint16_t *ports, int n,
                          uint16_t master)
{
    /* n <= EC_NPROC_MAX: a bitmap of 65536 bits is cheap and sort-free */
    uint8_t seen[65536 / 8];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i <= n; i++) {
        uint16_t p = i < n ? ports[i] : master;
        if (p == 0)
            return i < n ? bad(v, "%s port %d is 0, outside 1..65535", whose, i)
                         : bad(v, "%s master port is 0, outside 1..65535", whose);
        if (seen[p / 8] & (1u << (p % 8)))
            return bad(v, "%s uses port %u twice (local ranks and master port must differ)",
                       whose, p);
        seen[p / 8] |= (uint8_t)(1u << (p % 8));
    }
    return 0;
}

static int node_validate(const ec_node_rec_t *r, const vctx_t *v)
{
    if (!node_id_ok(r->node_id))
        return bad(v, "node id '%.64s' is not 1..%d characters from [A-Za-z0-9._-]",
                   SHOW(r->node_id), EC_NODE_ID_MAX);
    if (!ec_host_valid(r->host))
        return bad(v, "node %s: host '%.64s' is not a host name or address", r->node_id,
                   SHOW(r->host));
    if (r->nproc < 1 || r->nproc > EC_NPROC_MAX)
        return bad(v, "node %s: nproc is %d, outside 1..%d", r->node_id, r->nproc,
                   EC_NPROC_MAX);
    if (!r->ports)
        return bad(v, "node %s: no ports for nproc=%d", r->node_id, r->nproc);
    char whose[EC_NODE_ID_MAX + 16];
    snprintf(whose, sizeof(whose), "node %s", r->node_id);
    int rc = ports_distinct(v, whose, r->ports, r->nproc, r->master_port);
    if (rc < 0)
        return rc;
    if (r->ndevices != 0 && r->ndevices != r->nproc)
        return bad(v, "node %s has %d device ids, expected 0 or nproc=%d", r->node_id,
                   r->ndevices, r->nproc);
    for (int i = 0; i < r->ndevices; i++)
        if (!r->device_ids || !r->device_ids[i] || !printable_token(r->device_ids[i], 128))
            return bad(v, "node %s: device id %d '%.64s' is empty or has spaces or commas",
                       r->node_id, i, r->device_ids ? SHOW(r->device_ids[i]) : "(null)");
    if (!node_state_known(r->state))
        return bad(v, "node %s: state %d is not a known node state", r->node_id, (int)r->state);
    if (r->boot.phase != EC_BOOT_UNKNOWN) {
        if (!boot_phase_known(r->boot.phase))
            return bad(v, "node %s: boot phase %d is not a known phase", r->node_id,
                       (int)r->boot.phase);
        if (r->boot.nready < 0 || r->boot.nready > r->nproc || r->boot.started_at_ms < 0 ||
            r->boot.ready_at_ms < 0)
            return bad(v, "node %s: boot says %d of nproc=%d ready (started at %lld, ready at "
                       "%lld): outside the record's bounds", r->node_id, r->boot.nready,
                       r->nproc, (long long)r->boot.started_at_ms,
                       (long long)r->boot.ready_at_ms);
    }
    return 0;
}

int ec_node_rec_encode(const ec_node_rec_t *r, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "node record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_node_rec_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!r)
        return ec_errorf(err, EC_EINVAL, "ec_node_rec_encode: no record given");
    int rc = node_validate(r, &v);
    if (rc < 0)
        return rc;
    Ecoord__NodeRecord m = ECOORD__NODE_RECORD__INIT;
    uint32_t *ports = malloc((size_t)r->nproc * sizeof(*ports));
    if (!ports)
        return enomem(&v);
    for (int i = 0; i < r->nproc; i++)
        ports[i] = r->ports[i];
    m.node_id = r->node_id;
    m.host = r->host;
    m.nproc = (uint32_t)r->nproc;
    m.n_ports = (size_t)r->nproc;
    m.ports = ports;
    m.master_port = r->master_port;
    m.n_device_ids = (size_t)r->ndevices;
    m.device_ids = r->device_ids;
    m.incarnation = r->incarnation;
    m.agent_version = pb_str(r->agent_version);
    m.state = (Ecoord__NodeState)r->state;
    m.reason = pb_str(r->reason);
    m.registered_at_ms = r->registered_at_ms;
    m.probe_port = r->probe_port;
    m.place = r->place;
    m.fence_stops = r->fence_stops;
    m.run = r->run;
    m.epoch_seen = r->epoch_seen;
    Ecoord__NodeProgress pg = ECOORD__NODE_PROGRESS__INIT;
    if (r->progress.seq) {
        const ec_node_progress_t *p = &r->progress;
        pg.seq = p->seq;
        pg.reporting = p->reporting != 0;
        pg.step = p->step;
        pg.silent_ms = p->silent_ms;
        pg.silent_rank = p->silent_rank;
        pg.waiting = p->waiting != 0;
        pg.stopped = p->stopped != 0;
        pg.paused = p->paused != 0;
        pg.step_p50_us = p->step_p50_us;
        pg.slowest_us = p->slowest_us;
        pg.slowest_rank = p->slowest_rank;
        m.progress = &pg;
    }
    Ecoord__NodeBoot bt = ECOORD__NODE_BOOT__INIT;
    if (r->boot.phase != EC_BOOT_UNKNOWN) {
        bt.phase = (Ecoord__BootPhase)r->boot.phase;
        bt.started_at_ms = r->boot.started_at_ms;
        bt.ready_at_ms = r->boot.ready_at_ms;
        bt.nready = (uint32_t)r->boot.nready;
        bt.why = (char *)r->boot.why;
        m.boot = &bt;
    }
    rc = pack(&m.base, &v, buf, len);
    free(ports);
    return rc;
}

int ec_node_rec_decode(const void *buf, size_t len, const char *key, ec_node_rec_t **out,
                       ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "node record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_node_rec_decode: no output given");
    *out = NULL;
    int rc = 0;
    ec_node_rec_t *r = NULL;
    Ecoord__NodeRecord *m = unpack(&ecoord__node_record__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    if (m->nproc < 1 || m->nproc > EC_NPROC_MAX) {
        rc = bad(&v, "node '%.64s': nproc is %u, outside 1..%d", m->node_id, m->nproc,
                 EC_NPROC_MAX);
        goto error;
    }
    if (m->n_ports != m->nproc) {
        rc = bad(&v, "node '%.64s' has %zu endpoints, expected nproc=%u", m->node_id,
                 m->n_ports, m->nproc);
        goto error;
    }
    if (m->master_port > 65535) {
        rc = bad(&v, "node '%.64s': master port %u is outside 1..65535", m->node_id,
                 m->master_port);
        goto error;
    }
    if (m->n_device_ids != 0 && m->n_device_ids != m->nproc) {
        rc = bad(&v, "node '%.64s' has %zu device ids, expected 0 or nproc=%u", m->node_id,
                 m->n_device_ids, m->nproc);
        goto error;
    }
    r = ec_node_rec_new((int)m->nproc, (int)m->n_device_ids);
    if (!r) {
        rc = enomem(&v);
        goto error;
    }
    free(r->ports);
    r->ports = NULL;
    if ((rc = ports_from_pb(&v, "node", m->ports, m->n_ports, &r->ports)) < 0)
        goto error;
    r->master_port = (uint16_t)m->master_port;
    r->node_id = dup_str(m->node_id);
    r->host = dup_str(m->host);
    r->agent_version = dup_str(m->agent_version);
    r->reason = dup_str(m->reason);
    if (!r->node_id || !r->host || !r->agent_version || !r->reason) {
        rc = enomem(&v);
        goto error;
    }
    for (int i = 0; i < r->ndevices; i++)
        if (!(r->device_ids[i] = dup_str(m->device_ids[i]))) {
            rc = enomem(&v);
            goto error;
        }
    r->incarnation = m->incarnation;
    r->state = (ec_node_state_t)m->state;
    r->registered_at_ms = m->registered_at_ms;
    if (m->probe_port > 65535) {
        rc = bad(&v, "node '%.64s': probe port %u is outside 0..65535", m->node_id, m->probe_port);
        goto error;
    }
    r->probe_port = (uint16_t)m->probe_port;
    r->place = m->place;
    r->fence_stops = m->fence_stops;
    r->run = m->run ? m->run : 1;
    r->epoch_seen = m->epoch_seen;
    r->progress.silent_rank = r->progress.slowest_rank = -1;
    if (m->progress && m->progress->seq) {
        const Ecoord__NodeProgress *p = m->progress;
        if (p->silent_ms < 0 || p->step_p50_us < 0 || p->slowest_us < 0) {
            rc = bad(&v, "node '%.64s': progress has a negative duration", m->node_id);
            goto error;
        }
        r->progress = (ec_node_progress_t){
            .seq = p->seq, .reporting = p->reporting, .step = p->step, .silent_ms = p->silent_ms,
            .silent_rank = p->silent_rank, .waiting = p->waiting, .stopped = p->stopped,
            .paused = p->paused, .step_p50_us = p->step_p50_us, .slowest_us = p->slowest_us,
            .slowest_rank = p->slowest_rank};
    }
    if (m->boot) {
        const Ecoord__NodeBoot *b = m->boot;
        if (!boot_phase_known((int)b->phase)) {
            rc = bad(&v, "node '%.64s': boot phase %d is not a known phase", m->node_id,
                     (int)b->phase);
            goto error;
        }
        if (b->nready > m->nproc) {
            rc = bad(&v, "node '%.64s': boot says %u ready of nproc=%u", m->node_id, b->nready,
                     m->nproc);
            goto error;
        }
        r->boot.phase = (ec_boot_phase_t)b->phase;
        r->boot.started_at_ms = b->started_at_ms;
        r->boot.ready_at_ms = b->ready_at_ms;
        r->boot.nready = (int)b->nready;
        snprintf(r->boot.why, sizeof(r->boot.why), "%s", b->why ? b->why : "");
    }
    if ((rc = node_validate(r, &v)) < 0)
        goto error;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = r;
    return 0;
error:
    ec_node_rec_free(r);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

/* ---- epoch ------------------------------------------------------------------ */

ec_epoch_t *ec_epoch_new(int nmembers, int nproc)
{
    if (nmembers < 1 || nmembers > EC_MEMBERS_MAX || nproc < 1 || nproc > EC_NPROC_MAX)
        return NULL;
    ec_epoch_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return NULL;
    ep->nproc = nproc;
    ep->nmembers = nmembers;
    ep->present = nmembers;
    ep->world_size = nmembers * nproc;
    ep->members = calloc((size_t)nmembers, sizeof(*ep->members));
    if (!ep->members)
        goto error;
    for (int i = 0; i < nmembers; i++) {
        ep->members[i].m_id = i;
        if (!(ep->members[i].ports = calloc((size_t)nproc, sizeof(uint16_t))))
            goto error;
    }
    return ep;
error:
    ec_epoch_free(ep);
    return NULL;
}

static uint64_t *u64dup(const uint64_t *src, size_t n)
{
    uint64_t *d = malloc(n ? n * sizeof(*d) : 1);
    if (d && n)
        memcpy(d, src, n * sizeof(*d));
    return d;
}

ec_epoch_t *ec_epoch_dup(const ec_epoch_t *src)
{
    if (!src)
        return NULL;
    ec_epoch_t *ep = ec_epoch_new(src->nmembers, src->nproc);
    if (!ep)
        return NULL;
    ep->number = src->number;
    ep->reason = src->reason;
    ep->leader_rev = src->leader_rev;
    ep->observed_at_ms = src->observed_at_ms;
    ep->decided_at_ms = src->decided_at_ms;
    ep->planner_us = src->planner_us;
    ep->published_at_ms = src->published_at_ms;
    ep->run = src->run;
    ep->np_min = src->np_min;
    ep->np_max = src->np_max;
    ep->present = src->present;
    ep->chunk_members = src->chunk_members;
    ep->nchunks = src->nchunks;
    ep->nbuckets = src->nbuckets;
    bool ok = (!src->reason_detail || (ep->reason_detail = strdup(src->reason_detail))) &&
              (!src->job_id || (ep->job_id = strdup(src->job_id))) &&
              (!src->leader_id || (ep->leader_id = strdup(src->leader_id))) &&
              (!src->chunk_digest ||
               (ep->chunk_digest = u64dup(src->chunk_digest, (size_t)src->nchunks))) &&
              (!src->index_digest ||
               (ep->index_digest = u64dup(src->index_digest, (size_t)src->nbuckets)));
    for (int i = 0; ok && i < src->nmembers; i++) {
        const ec_member_t *a = &src->members[i];
        ec_member_t *b = &ep->members[i];
        if (!a->node_id) { /* not held by this view */
            free(b->ports);
            b->ports = NULL;
            continue;
        }
        b->master_port = a->master_port;
        b->incarnation = a->incarnation;
        memcpy(b->ports, a->ports, (size_t)src->nproc * sizeof(uint16_t));
        ok = (b->node_id = strdup(a->node_id)) && (b->host = strdup(a->host));
    }
    if (!ok) {
        ec_epoch_free(ep);
        return NULL;
    }
    return ep;
}

void ec_epoch_free(ec_epoch_t *ep)
{
    if (!ep)
        return;
    int saved = errno;
    if (ep->members)
        for (int i = 0; i < ep->nmembers; i++) {
            free(ep->members[i].node_id);
            free(ep->members[i].host);
            free(ep->members[i].ports);
        }
    free(ep->members);
    free(ep->reason_detail);
    free(ep->leader_id);
    free(ep->job_id);
    free(ep->chunk_digest);
    free(ep->index_digest);
    free(ep);
    errno = saved;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef struct hostport {
    const char *host;
    int member;
    uint16_t port;
} hostport_t;

static int cmp_hostport(const void *a, const void *b)
{
    const hostport_t *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    if (c)
        return c;
    return (int)x->port - (int)y->port;
}

/* No node twice and no (host, port) twice across the whole epoch. */
static int epoch_unique(const ec_epoch_t *ep, const vctx_t *v)
{
    int rc = 0;
    size_t nm = (size_t)ep->nmembers, np = (size_t)ep->nproc;
    const char **ids = malloc(nm * sizeof(*ids));
    hostport_t *hp = malloc(nm * (np + 1) * sizeof(*hp));
    if (!ids || !hp) {
        rc = enomem(v);
        goto out;
    }
    size_t nall = nm;
    nm = 0; /* the members held (a view holds some) */
    for (size_t i = 0; i < nall; i++)
        if (ep->members[i].node_id)
            ids[nm++] = ep->members[i].node_id;
    qsort(ids, nm, sizeof(*ids), cmp_str_ptr);
    for (size_t i = 1; i < nm; i++)
        if (strcmp(ids[i - 1], ids[i]) == 0) {
            int a = -1, b = -1;
            for (int j = 0; j < ep->nmembers; j++)
                if (ep->members[j].node_id && strcmp(ep->members[j].node_id, ids[i]) == 0) {
                    if (a < 0)
                        a = j;
                    else if (b < 0)
                        b = j;
                }
            rc = bad(v, "node %s appears twice (members %d and %d)", ids[i], a, b);
            goto out;
        }
    size_t k = 0;
    for (size_t i = 0; i < nall; i++) {
        const ec_member_t *m = &ep->members[i];
        if (!m->node_id)
            continue;
        for (size_t j = 0; j <= np; j++)
            hp[k++] = (hostport_t){m->host, (int)i, j < np ? m->ports[j] : m->master_port};
    }
    qsort(hp, k, sizeof(*hp), cmp_hostport);
    for (size_t i = 1; i < k; i++)
        if (cmp_hostport(&hp[i - 1], &hp[i]) == 0) {
            int a = hp[i - 1].member < hp[i].member ? hp[i - 1].member : hp[i].member;
            int b = hp[i - 1].member < hp[i].member ? hp[i].member : hp[i - 1].member;
            rc = bad(v, "endpoint %.64s:%u is used twice (members %d and %d)", hp[i].host,
                     hp[i].port, a, b);
            goto out;
        }
out:
    free(ids);
    free(hp);
    return rc;
}

static int epoch_validate(const ec_epoch_t *ep, const vctx_t *v)
{
    if (ep->number < 1)
        return bad(v, "epoch number is 0; numbers start at 1");
    if (ep->nproc < 1 || ep->nproc > EC_NPROC_MAX)
        return bad(v, "epoch %llu: nproc is %d, outside 1..%d", (unsigned long long)ep->number,
                   ep->nproc, EC_NPROC_MAX);
    if (ep->nmembers < 1 || ep->nmembers > EC_MEMBERS_MAX || !ep->members)
        return bad(v, "epoch %llu has %d members, expected 1..%d",
                   (unsigned long long)ep->number, ep->nmembers, EC_MEMBERS_MAX);
    if ((long long)ep->world_size != (long long)ep->nmembers * ep->nproc)
        return bad(v, "epoch %llu: world size %d != %d members x nproc %d",
                   (unsigned long long)ep->number, ep->world_size, ep->nmembers, ep->nproc);
    bool view = ep->present != ep->nmembers;
    if (view && (ep->chunk_members < 1 || ep->present < 1 || ep->present > ep->nmembers ||
                 !ep->members[0].node_id))
        return bad(v, "epoch %llu: a view of %d of its %d members must be of a split epoch "
                   "and hold member 0", (unsigned long long)ep->number, ep->present,
                   ep->nmembers);
    int held = 0;
    for (int i = 0; i < ep->nmembers; i++) {
        const ec_member_t *m = &ep->members[i];
        if (view && !m->node_id)
            continue;
        held++;
        if (m->m_id != i)
            return bad(v, "member at index %d has M_id %d; members must be in M_id order 0..%d",
                       i, m->m_id, ep->nmembers - 1);
        if (!node_id_ok(m->node_id))
            return bad(v, "member %d: node id '%.64s' is not 1..%d characters from "
                          "[A-Za-z0-9._-]",
                       i, SHOW(m->node_id), EC_NODE_ID_MAX);
        if (!ec_host_valid(m->host))
            return bad(v, "member %d (%s): host '%.64s' is not a host name or address", i,
                       m->node_id, SHOW(m->host));
        if (!m->ports)
            return bad(v, "member %d (%s) has no endpoints, expected nproc=%d", i, m->node_id,
                       ep->nproc);
        char whose[EC_NODE_ID_MAX + 32];
        snprintf(whose, sizeof(whose), "member %d (%s)", i, m->node_id);
        int rc = ports_distinct(v, whose, m->ports, ep->nproc, m->master_port);
        if (rc < 0)
            return rc;
    }
    if (held != ep->present)
        return bad(v, "epoch %llu: a view says it holds %d members but holds %d",
                   (unsigned long long)ep->number, ep->present, held);
    int rc = epoch_unique(ep, v);
    if (rc < 0)
        return rc;
    if (!epoch_reason_known(ep->reason))
        return bad(v, "epoch %llu: reason %d is not a known epoch reason",
                   (unsigned long long)ep->number, (int)ep->reason);
    if (!node_id_ok(ep->leader_id))
        return bad(v, "epoch %llu: leader id '%.64s' is not a valid node id",
                   (unsigned long long)ep->number, SHOW(ep->leader_id));
    if (ep->leader_rev < 1)
        return bad(v, "epoch %llu: leader revision %lld is not a revision (>= 1)",
                   (unsigned long long)ep->number, (long long)ep->leader_rev);
    return 0;
}

/* pb member d from src; its ports go into ports (np of them). */
static void member_to_pb(const ec_member_t *src, size_t np, uint32_t *ports, Ecoord__Member *d)
{
    ecoord__member__init(d);
    d->node_id = src->node_id;
    d->m_id = (uint32_t)src->m_id;
    d->host = src->host;
    d->n_ports = np;
    d->ports = ports;
    for (size_t j = 0; j < np; j++)
        d->ports[j] = src->ports[j];
    d->master_port = src->master_port;
    d->incarnation = src->incarnation;
}

static int pack_cap(const ProtobufCMessage *m, const vctx_t *v, void **buf, size_t *len,
                    bool capped)
{
    if (capped)
        return pack(m, v, buf, len);
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return ec_errorf(v->err, EC_ENOMEM, "%s: out of memory encoding %zu bytes", v->what, n);
    protobuf_c_message_pack(m, b);
    *buf = b;
    *len = n;
    return 0;
}

/* What a split epoch's head adds (NULL: a whole record). */
typedef struct head_extra {
    uint32_t chunk_members, index_buckets;
    size_t nchunks;
    uint64_t *chunk_digest, *index_digest;
} head_extra_t;

/* The Epoch message of ep: every member (hx NULL, !view), member 0 only
 * and the split's fields (hx: a head), or the members a view holds and
 * its split fields (view). */
static int epoch_pack(const ec_epoch_t *ep, const head_extra_t *hx, bool view, bool capped,
                      void **buf, size_t *len, const vctx_t *v)
{
    head_extra_t vx = {0};
    if (view && !hx) {
        vx = (head_extra_t){(uint32_t)ep->chunk_members, (uint32_t)ep->nbuckets,
                            (size_t)ep->nchunks, ep->chunk_digest, ep->index_digest};
        hx = &vx;
    }
    size_t nm = view ? (size_t)ep->present : hx ? 1 : (size_t)ep->nmembers, np = (size_t)ep->nproc;
    Ecoord__Epoch m = ECOORD__EPOCH__INIT;
    Ecoord__Member *mem = malloc(nm * sizeof(*mem));
    Ecoord__Member **memp = malloc(nm * sizeof(*memp));
    uint32_t *ports = malloc(nm * np * sizeof(*ports));
    char rank0[EC_ENDPOINT_MAX];
    int rc;
    if (!mem || !memp || !ports) {
        rc = enomem(v);
        goto out;
    }
    for (size_t i = 0, j = 0; i < nm; j++) {
        if (!ep->members[j].node_id)
            continue; /* not held by the view */
        member_to_pb(&ep->members[j], np, &ports[i * np], &mem[i]);
        memp[i] = &mem[i];
        i++;
    }
    ec_epoch_rank0_endpoint(ep, rank0, sizeof(rank0)); /* fits: host validated */
    m.number = ep->number;
    m.world_size = (uint32_t)ep->world_size;
    m.nproc = (uint32_t)ep->nproc;
    m.n_members = nm;
    m.members = memp;
    m.rank0_endpoint = rank0;
    m.master_addr = ep->members[0].host;
    m.master_port = ep->members[0].master_port;
    m.reason = (Ecoord__EpochReason)ep->reason;
    m.reason_detail = pb_str(ep->reason_detail);
    m.leader_id = ep->leader_id;
    m.leader_rev = ep->leader_rev;
    m.observed_at_ms = ep->observed_at_ms;
    m.decided_at_ms = ep->decided_at_ms;
    m.planner_us = ep->planner_us;
    m.published_at_ms = ep->published_at_ms;
    m.run = ep->run;
    m.job_id = pb_str(ep->job_id);
    m.np_min = ep->np_min > 0 ? (uint32_t)ep->np_min : 0;
    m.np_max = ep->np_max > 0 ? (uint32_t)ep->np_max : 0;
    if (hx) {
        m.members_total = (uint32_t)ep->nmembers;
        m.chunk_members = hx->chunk_members;
        m.n_chunk_digest = hx->nchunks;
        m.chunk_digest = hx->chunk_digest;
        m.index_buckets = hx->index_buckets;
        m.n_index_digest = hx->index_digest ? hx->index_buckets : 0;
        m.index_digest = hx->index_digest;
    }
    rc = pack_cap(&m.base, v, buf, len, capped);
out:
    free(mem);
    free(memp);
    free(ports);
    return rc;
}

int ec_epoch_encode(const ec_epoch_t *ep, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "epoch record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!ep)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_encode: no epoch given");
    int rc = epoch_validate(ep, &v);
    if (rc < 0)
        return rc;
    if (ep->present != ep->nmembers)
        return ec_errorf(err, EC_EINVAL, "epoch %llu: a view (%d of %d members) is not a "
                         "whole record: ec_epoch_encode_view", (unsigned long long)ep->number,
                         ep->present, ep->nmembers);
    return epoch_pack(ep, NULL, false, true, buf, len, &v);
}

int ec_epoch_encode_whole(const ec_epoch_t *ep, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "epoch record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_encode_whole: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!ep)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_encode_whole: no epoch given");
    int rc = epoch_validate(ep, &v);
    if (rc < 0)
        return rc;
    if (ep->present != ep->nmembers)
        return ec_errorf(err, EC_EINVAL, "epoch %llu: a view (%d of %d members) is not a "
                         "whole record: ec_epoch_encode_view", (unsigned long long)ep->number,
                         ep->present, ep->nmembers);
    return epoch_pack(ep, NULL, false, false, buf, len, &v);
}

/* The header of m (everything but the members and a split's fields)
 * into ep. */
static int header_from_pb(const Ecoord__Epoch *m, ec_epoch_t *ep, const vctx_t *v)
{
    ep->number = m->number;
    ep->reason = (ec_epoch_reason_t)m->reason;
    ep->leader_rev = m->leader_rev;
    ep->observed_at_ms = m->observed_at_ms;
    ep->decided_at_ms = m->decided_at_ms;
    ep->planner_us = m->planner_us;
    ep->published_at_ms = m->published_at_ms;
    ep->run = m->run ? m->run : 1;
    /* informational (a node compares its own --np): out of range reads as
     * not recorded rather than refusing the epoch */
    if (m->np_min >= 1 && m->np_min <= m->np_max && m->np_max <= INT_MAX) {
        ep->np_min = (int)m->np_min;
        ep->np_max = (int)m->np_max;
    }
    if (!(ep->reason_detail = dup_str(m->reason_detail)) ||
        !(ep->leader_id = dup_str(m->leader_id)) || !(ep->job_id = dup_str(m->job_id)))
        return enomem(v);
    return 0;
}

/* The stored copies of derived values must agree with member 0. */
static int derived_match(const Ecoord__Epoch *m, const ec_epoch_t *ep, const vctx_t *v)
{
    unsigned long long num = (unsigned long long)m->number;
    char rank0[EC_ENDPOINT_MAX];
    ec_epoch_rank0_endpoint(ep, rank0, sizeof(rank0));
    if (strcmp(m->rank0_endpoint, rank0) != 0)
        return bad(v, "epoch %llu: rank 0 endpoint '%.64s' != member 0's %s", num,
                   m->rank0_endpoint, rank0);
    if (strcmp(m->master_addr, ep->members[0].host) != 0 ||
        m->master_port != ep->members[0].master_port)
        return bad(v, "epoch %llu: master %.64s:%u != member 0's %s:%u", num, m->master_addr,
                   m->master_port, ep->members[0].host, ep->members[0].master_port);
    return 0;
}

/* The epoch in m (whole: every member in m->members), validated. */
/* One member of a record (whole or split), checked: its endpoints, its
 * master port. */
static int member_from_pb(const Ecoord__Member *pm, uint32_t nproc, const vctx_t *v,
                          ec_member_t *d)
{
    char whose[EC_NODE_ID_MAX + 32];
    snprintf(whose, sizeof(whose), "member %u (%.64s)", pm->m_id, pm->node_id);
    if (pm->n_ports != nproc)
        return bad(v, "%s has %zu endpoints, expected nproc=%u", whose, pm->n_ports, nproc);
    if (pm->master_port > 65535)
        return bad(v, "%s: master port %u is outside 1..65535", whose, pm->master_port);
    free(d->ports);
    d->ports = NULL;
    int rc = ports_from_pb(v, whose, pm->ports, pm->n_ports, &d->ports);
    if (rc < 0)
        return rc;
    d->master_port = (uint16_t)pm->master_port;
    d->incarnation = pm->incarnation;
    if (!(d->node_id = dup_str(pm->node_id)) || !(d->host = dup_str(pm->host)))
        return enomem(v);
    return 0;
}

static int epoch_from_pb(const Ecoord__Epoch *m, const vctx_t *vp, ec_epoch_t **out)
{
    vctx_t v = *vp;
    int rc = 0;
    ec_epoch_t *ep = NULL;
    unsigned long long num = (unsigned long long)m->number;
    if (m->nproc < 1 || m->nproc > EC_NPROC_MAX) {
        rc = bad(&v, "epoch %llu: nproc is %u, outside 1..%d", num, m->nproc, EC_NPROC_MAX);
        goto error;
    }
    if (m->n_members < 1 || m->n_members > EC_MEMBERS_MAX) {
        rc = bad(&v, "epoch %llu has %zu members, expected 1..%d", num, m->n_members,
                 EC_MEMBERS_MAX);
        goto error;
    }
    if ((unsigned long long)m->world_size != (unsigned long long)m->n_members * m->nproc) {
        rc = bad(&v, "epoch %llu: world size %u != %zu members x nproc %u", num, m->world_size,
                 m->n_members, m->nproc);
        goto error;
    }
    for (size_t i = 0; i < m->n_members; i++)
        if (m->members[i]->m_id != i) {
            rc = bad(&v, "member at index %zu has M_id %u; members must be in M_id order 0..%zu",
                     i, m->members[i]->m_id, m->n_members - 1);
            goto error;
        }
    ep = ec_epoch_new((int)m->n_members, (int)m->nproc);
    if (!ep) {
        rc = enomem(&v);
        goto error;
    }
    /* each member as a view decodes its own (member_from_pb) */
    for (size_t i = 0; i < m->n_members; i++)
        if ((rc = member_from_pb(m->members[i], m->nproc, &v, &ep->members[i])) < 0)
            goto error;
    if ((rc = header_from_pb(m, ep, &v)) < 0 || (rc = epoch_validate(ep, &v)) < 0 ||
        (rc = derived_match(m, ep, &v)) < 0)
        goto error;
    *out = ep;
    return 0;
error:
    ec_epoch_free(ep);
    return rc;
}

int ec_epoch_decode(const void *buf, size_t len, const char *key, ec_epoch_t **out,
                    ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "epoch record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_decode: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__Epoch *m = unpack(&ecoord__epoch__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    if (m->members_total > 0) /* not a whole record (junk says the same) */
        rc = bad(&v, "epoch %llu is split (%u members in %zu chunks under "
                 "epochs/<n>/members/): read it whole with ec_epoch_fetch",
                 (unsigned long long)m->number, m->members_total, m->n_chunk_digest);
    else
        rc = epoch_from_pb(m, &v, out);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

/* ---- split epochs ------------------------------------------------------------ */

static uint64_t fnv(const void *buf, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

size_t ec_epoch_index_bucket(const char *node_id, int nbuckets)
{
    return nbuckets > 0 ? (size_t)(fnv(node_id, strlen(node_id)) % (uint64_t)nbuckets) : 0;
}

void ec_epoch_parts_free(ec_epoch_parts_t *p)
{
    if (!p)
        return;
    free(p->head);
    for (int i = 0; p->chunk && i < p->nchunks; i++)
        free(p->chunk[i]);
    for (int i = 0; p->bucket && i < p->nbuckets; i++)
        free(p->bucket[i]);
    free(p->chunk);
    free(p->chunk_len);
    free(p->bucket);
    free(p->bucket_len);
    memset(p, 0, sizeof(*p));
}

typedef struct idx_ent {
    const char *id;
    uint32_t m_id;
    size_t bucket;
} idx_ent_t;

static int cmp_idx(const void *a, const void *b)
{
    const idx_ent_t *x = a, *y = b;
    if (x->bucket != y->bucket)
        return x->bucket < y->bucket ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* Chunk k (C members each) of ep, which holds all of it; scratch arrays of
 * C members. */
static int chunk_pack(const ec_epoch_t *ep, size_t C, size_t k, Ecoord__Member *mem,
                      Ecoord__Member **memp, uint32_t *ports, void **buf, size_t *len,
                      const vctx_t *v)
{
    size_t N = (size_t)ep->nmembers, np = (size_t)ep->nproc;
    size_t from = k * C, n = N - from < C ? N - from : C;
    for (size_t i = 0; i < n; i++) {
        if (!ep->members[from + i].node_id)
            return ec_errorf(v->err, EC_EINVAL, "epoch %llu: chunk %zu is not held whole",
                             (unsigned long long)ep->number, k);
        member_to_pb(&ep->members[from + i], np, &ports[i * np], &mem[i]);
        memp[i] = &mem[i];
    }
    Ecoord__EpochChunk c = ECOORD__EPOCH_CHUNK__INIT;
    c.number = ep->number;
    c.chunk = (uint32_t)k;
    c.n_members = n;
    c.members = memp;
    return pack(&c.base, v, buf, len);
}

int ec_epoch_chunk_encode(const ec_epoch_t *ep, int k, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "epoch chunk", NULL};
    *buf = NULL;
    *len = 0;
    if (!ep || ep->chunk_members < 1 || k < 0 ||
        (size_t)k * (size_t)ep->chunk_members >= (size_t)ep->nmembers)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_chunk_encode: no chunk %d", k);
    size_t C = (size_t)ep->chunk_members, np = (size_t)ep->nproc;
    Ecoord__Member *mem = malloc(C * sizeof(*mem));
    Ecoord__Member **memp = malloc(C * sizeof(*memp));
    uint32_t *ports = malloc(C * np * sizeof(*ports));
    int rc = !mem || !memp || !ports ? enomem(&v)
                                     : chunk_pack(ep, C, (size_t)k, mem, memp, ports, buf, len, &v);
    free(mem);
    free(memp);
    free(ports);
    return rc;
}

int ec_epoch_split(const ec_epoch_t *ep, int chunk_members, ec_epoch_parts_t *out,
                   ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "epoch record", NULL};
    memset(out, 0, sizeof(*out));
    if (!ep)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_split: no epoch given");
    if (chunk_members < 1 || chunk_members > EC_MEMBERS_MAX)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_split: %d members per chunk, expected "
                         "1..%d", chunk_members, EC_MEMBERS_MAX);
    int rc = epoch_validate(ep, &v);
    if (rc < 0)
        return rc;
    if (ep->present != ep->nmembers)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_split: epoch %llu is a view",
                         (unsigned long long)ep->number);
    if (ep->nmembers <= chunk_members)
        return epoch_pack(ep, NULL, false, true, &out->head, &out->head_len, &v);
    size_t N = (size_t)ep->nmembers, np = (size_t)ep->nproc, C = (size_t)chunk_members;
    size_t K = (N + C - 1) / C;
    out->nchunks = out->nbuckets = (int)K;
    out->chunk = calloc(K, sizeof(void *));
    out->chunk_len = calloc(K, sizeof(size_t));
    out->bucket = calloc(K, sizeof(void *));
    out->bucket_len = calloc(K, sizeof(size_t));
    uint64_t *cd = calloc(K, sizeof(uint64_t)), *bd = calloc(K, sizeof(uint64_t));
    Ecoord__Member *mem = malloc(C * sizeof(*mem));
    Ecoord__Member **memp = malloc(C * sizeof(*memp));
    uint32_t *ports = malloc(C * np * sizeof(*ports));
    idx_ent_t *ix = malloc(N * sizeof(*ix));
    Ecoord__EpochIndexEntry *ent = malloc(N * sizeof(*ent));
    Ecoord__EpochIndexEntry **entp = malloc(N * sizeof(*entp));
    if (!out->chunk || !out->chunk_len || !out->bucket || !out->bucket_len || !cd || !bd ||
        !mem || !memp || !ports || !ix || !ent || !entp) {
        rc = enomem(&v);
        goto out;
    }
    v.what = "epoch chunk";
    for (size_t k = 0; k < K; k++) {
        if ((rc = chunk_pack(ep, C, k, mem, memp, ports, &out->chunk[k], &out->chunk_len[k],
                             &v)) < 0) {
            ec_error_prefix(err, "epoch %llu, chunk %zu of %zu members (lower "
                            "--epoch_chunk_members)", (unsigned long long)ep->number, k, C);
            goto out;
        }
        cd[k] = fnv(out->chunk[k], out->chunk_len[k]);
    }
    v.what = "epoch index";
    for (size_t i = 0; i < N; i++)
        ix[i] = (idx_ent_t){ep->members[i].node_id, (uint32_t)i,
                            ec_epoch_index_bucket(ep->members[i].node_id, (int)K)};
    qsort(ix, N, sizeof(*ix), cmp_idx);
    for (size_t i = 0, b = 0; b < K; b++) {
        size_t first = i;
        for (; i < N && ix[i].bucket == b; i++) {
            ecoord__epoch_index_entry__init(&ent[i]);
            ent[i].node_id = (char *)ix[i].id;
            ent[i].m_id = ix[i].m_id;
            entp[i] = &ent[i];
        }
        Ecoord__EpochIndex x = ECOORD__EPOCH_INDEX__INIT;
        x.number = ep->number;
        x.bucket = (uint32_t)b;
        x.n_entries = i - first;
        x.entries = &entp[first];
        if ((rc = pack(&x.base, &v, &out->bucket[b], &out->bucket_len[b])) < 0)
            goto out;
        bd[b] = fnv(out->bucket[b], out->bucket_len[b]);
    }
    v.what = "epoch record";
    head_extra_t hx = {(uint32_t)C, (uint32_t)K, K, cd, bd};
    rc = epoch_pack(ep, &hx, false, true, &out->head, &out->head_len, &v);
out:
    free(cd);
    free(bd);
    free(mem);
    free(memp);
    free(ports);
    free(ix);
    free(ent);
    free(entp);
    if (rc < 0)
        ec_epoch_parts_free(out);
    return rc;
}

/* The head in m: its split fields are consistent (a view: members held,
 * index digests optional). */
static int split_check(const Ecoord__Epoch *m, bool view, const vctx_t *v)
{
    unsigned long long num = (unsigned long long)m->number;
    if (m->members_total < 1 || m->members_total > EC_MEMBERS_MAX)
        return bad(v, "epoch %llu: %u members, expected 1..%d", num, m->members_total,
                   EC_MEMBERS_MAX);
    if (m->chunk_members < 1 || m->chunk_members >= m->members_total)
        return bad(v, "epoch %llu: %u members per chunk for %u members (a split epoch has "
                   "at least two chunks)", num, m->chunk_members, m->members_total);
    size_t K = ((size_t)m->members_total + m->chunk_members - 1) / m->chunk_members;
    if (m->n_chunk_digest != K)
        return bad(v, "epoch %llu: %zu chunk digests for %zu chunks", num, m->n_chunk_digest, K);
    if (m->index_buckets > EC_MEMBERS_MAX || (!view && m->index_buckets < 1) ||
        (m->n_index_digest != m->index_buckets && !(view && m->n_index_digest == 0)))
        return bad(v, "epoch %llu: %zu index digests for %u buckets", num, m->n_index_digest,
                   m->index_buckets);
    if (view ? m->n_members < 1 || m->n_members > m->members_total : m->n_members != 1)
        return bad(v, "epoch %llu: a split epoch's head holds member 0 only, not %zu members",
                   num, m->n_members);
    if ((unsigned long long)m->world_size != (unsigned long long)m->members_total * m->nproc)
        return bad(v, "epoch %llu: world size %u != %u members x nproc %u", num, m->world_size,
                   m->members_total, m->nproc);
    return 0;
}

int ec_epoch_head_info(const void *buf, size_t len, const char *key, ec_epoch_split_t *info,
                       ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "epoch record", key};
    memset(info, 0, sizeof(*info));
    int rc = 0;
    Ecoord__Epoch *m = unpack(&ecoord__epoch__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    info->number = m->number;
    if (m->members_total == 0) {
        protobuf_c_message_free_unpacked(&m->base, NULL);
        return 0;
    }
    if ((rc = split_check(m, false, &v)) == 0) {
        info->nmembers = (int)m->members_total;
        info->chunk_members = (int)m->chunk_members;
        info->nchunks = (int)m->n_chunk_digest;
        info->nbuckets = (int)m->index_buckets;
        info->chunk_digest = malloc(m->n_chunk_digest * sizeof(uint64_t));
        info->index_digest = malloc(m->n_index_digest * sizeof(uint64_t));
        if (!info->chunk_digest || !info->index_digest) {
            ec_epoch_split_free(info);
            rc = enomem(&v);
        } else {
            memcpy(info->chunk_digest, m->chunk_digest, m->n_chunk_digest * sizeof(uint64_t));
            memcpy(info->index_digest, m->index_digest, m->n_index_digest * sizeof(uint64_t));
            rc = 1;
        }
    }
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

void ec_epoch_split_free(ec_epoch_split_t *info)
{
    if (!info)
        return;
    free(info->chunk_digest);
    free(info->index_digest);
    info->chunk_digest = info->index_digest = NULL;
}

int ec_epoch_assemble(const void *head, size_t head_len, const void *const *chunk,
                      const size_t *chunk_len, int nchunks, const char *key, ec_epoch_t **out,
                      ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "epoch record", key};
    *out = NULL;
    int rc = 0;
    Ecoord__Epoch *m = unpack(&ecoord__epoch__descriptor, head, head_len, &v, &rc);
    if (!m)
        return rc;
    Ecoord__EpochChunk **cs = calloc(nchunks > 0 ? (size_t)nchunks : 1, sizeof(*cs));
    Ecoord__Member **all = NULL;
    unsigned long long num = (unsigned long long)m->number;
    if (!cs) {
        rc = enomem(&v);
        goto out;
    }
    if (m->members_total == 0) {
        rc = epoch_from_pb(m, &v, out); /* a whole record: nothing to assemble */
        goto out;
    }
    if ((rc = split_check(m, false, &v)) < 0)
        goto out;
    if ((size_t)nchunks != m->n_chunk_digest) {
        rc = bad(&v, "epoch %llu: %d chunks given, its head lists %zu", num, nchunks,
                 m->n_chunk_digest);
        goto out;
    }
    if (!(all = malloc((size_t)m->members_total * sizeof(*all)))) {
        rc = enomem(&v);
        goto out;
    }
    size_t C = m->chunk_members, N = m->members_total, got = 0;
    for (int k = 0; k < nchunks; k++) {
        if (!chunk[k] || fnv(chunk[k], chunk_len[k]) != m->chunk_digest[k]) {
            rc = bad(&v, "epoch %llu: chunk %d %s its head's digest (a newer epoch's, or "
                     "written by another tool)", num, k, chunk[k] ? "does not match" : "is missing;");
            goto out;
        }
        vctx_t cv = {err, EC_ECORRUPT, "epoch chunk", key};
        if (!(cs[k] = unpack(&ecoord__epoch_chunk__descriptor, chunk[k], chunk_len[k], &cv, &rc)))
            goto out;
        size_t want = N - (size_t)k * C < C ? N - (size_t)k * C : C;
        if (cs[k]->number != m->number || cs[k]->chunk != (uint32_t)k ||
            cs[k]->n_members != want) {
            rc = bad(&v, "epoch %llu: chunk %d is epoch %llu's chunk %u with %zu members, "
                     "expected %zu", num, k, (unsigned long long)cs[k]->number, cs[k]->chunk,
                     cs[k]->n_members, want);
            goto out;
        }
        for (size_t i = 0; i < cs[k]->n_members; i++)
            all[got++] = cs[k]->members[i];
    }
    if (strcmp(all[0]->node_id, m->members[0]->node_id) != 0) {
        rc = bad(&v, "epoch %llu: member 0 is %.64s in its head but %.64s in chunk 0", num,
                 m->members[0]->node_id, all[0]->node_id);
        goto out;
    }
    Ecoord__Member **head_m = m->members;
    size_t head_n = m->n_members;
    m->members = all;
    m->n_members = N;
    rc = epoch_from_pb(m, &v, out);
    m->members = head_m;
    m->n_members = head_n;
out:
    for (int k = 0; cs && k < nchunks; k++)
        if (cs[k])
            protobuf_c_message_free_unpacked(&cs[k]->base, NULL);
    free(cs);
    free(all);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

int ec_epoch_index_find(const void *buf, size_t len, uint64_t digest, uint64_t number,
                        int bucket, const char *node_id, int *m_id, ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "epoch index", NULL};
    *m_id = -1;
    if (fnv(buf, len) != digest)
        return bad(&v, "epoch %llu: index bucket %d does not match its head's digest (a newer "
                   "epoch's, or written by another tool)", (unsigned long long)number, bucket);
    int rc = 0;
    Ecoord__EpochIndex *x = unpack(&ecoord__epoch_index__descriptor, buf, len, &v, &rc);
    if (!x)
        return rc;
    if (x->number != number || x->bucket != (uint32_t)bucket) {
        rc = bad(&v, "epoch %llu: index bucket %d is epoch %llu's bucket %u", 
                 (unsigned long long)number, bucket, (unsigned long long)x->number, x->bucket);
    } else {
        for (size_t i = 0; i < x->n_entries; i++)
            if (!strcmp(x->entries[i]->node_id, node_id)) {
                *m_id = (int)x->entries[i]->m_id;
                break;
            }
        rc = *m_id >= 0 ? 1 : 0;
    }
    protobuf_c_message_free_unpacked(&x->base, NULL);
    return rc;
}

/* ---- rank and endpoint tables ---------------------------------------------- */

int ec_endpoint_format(const char *host, unsigned port, char *buf, size_t len)
{
    if (!ec_host_valid(host) || port < 1 || port > 65535 || !buf)
        return EC_EINVAL;
    int v6 = strchr(host, ':') != NULL;
    int n = snprintf(buf, len, v6 ? "[%s]:%u" : "%s:%u", host, port);
    if (n < 0 || (size_t)n >= len) {
        if (len)
            buf[0] = '\0';
        return EC_ETOOLARGE;
    }
    return n;
}

int ec_epoch_endpoint(const ec_epoch_t *ep, int m_id, int n_id, char *buf, size_t len)
{
    if (!ep || !ep->members || m_id < 0 || m_id >= ep->nmembers || n_id < 0 ||
        n_id >= ep->nproc)
        return EC_EINVAL;
    const ec_member_t *m = &ep->members[m_id];
    return ec_endpoint_format(m->host, m->ports[n_id], buf, len);
}

int ec_epoch_endpoints(const ec_epoch_t *ep, const char *sep, char **out, ec_error_t *err)
{
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_endpoints: no output given");
    *out = NULL;
    if (!ep || !ep->members || ep->nmembers < 1 || ep->nproc < 1)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_endpoints: no epoch given");
    if (!sep)
        sep = ",";
    size_t seplen = strlen(sep);
    size_t total = 1;
    for (int i = 0; i < ep->nmembers; i++)
        total += (size_t)ep->nproc * (strlen(SHOW(ep->members[i].host)) + 2 + 1 + 5 + seplen);
    char *s = malloc(total), *p = s;
    if (!s)
        return ec_errorf(err, EC_ENOMEM, "out of memory for %d endpoints", ep->world_size);
    /* Members in M_id order, then local ranks in order: that is rank order,
     * rank = M_id * N + N_id (ec_rank() in coord/core/rank.h). */
    for (int mi = 0; mi < ep->nmembers; mi++)
        for (int ni = 0; ni < ep->nproc; ni++) {
            if (p != s) {
                memcpy(p, sep, seplen);
                p += seplen;
            }
            int n = ec_epoch_endpoint(ep, mi, ni, p, total - (size_t)(p - s));
            if (n < 0) {
                free(s);
                return ec_errorf(err, EC_EINVAL,
                                 "epoch %llu: member %d local rank %d has no valid endpoint",
                                 (unsigned long long)ep->number, mi, ni);
            }
            p += n;
        }
    *p = '\0';
    *out = s;
    return 0;
}

int ec_epoch_rank0_endpoint(const ec_epoch_t *ep, char *buf, size_t len)
{
    return ec_epoch_endpoint(ep, 0, 0, buf, len);
}

int ec_epoch_master(const ec_epoch_t *ep, const char **addr, int *port)
{
    if (!ep || !ep->members || ep->nmembers < 1 || !ec_host_valid(ep->members[0].host) ||
        ep->members[0].master_port == 0)
        return EC_EINVAL;
    if (addr)
        *addr = ep->members[0].host;
    if (port)
        *port = ep->members[0].master_port;
    return 0;
}

int ec_epoch_find_member(const ec_epoch_t *ep, const char *node_id)
{
    if (!ep || !ep->members || !node_id)
        return EC_ENOTFOUND;
    for (int i = 0; i < ep->nmembers; i++)
        if (ep->members[i].node_id && strcmp(ep->members[i].node_id, node_id) == 0)
            return i;
    return EC_ENOTFOUND;
}

/* ---- job status ------------------------------------------------------------- */

void ec_job_status_free(ec_job_status_t *st)
{
    if (!st)
        return;
    int saved = errno;
    free(st->reason);
    free(st->updated_by);
    free(st->leader_id);
    free(st);
    errno = saved;
}

static int status_validate(const ec_job_status_t *st, const vctx_t *v)
{
    if (!job_state_known(st->state))
        return bad(v, "state %d is not a known job state", (int)st->state);
    if ((st->state == EC_JOB_FAILED || st->state == EC_JOB_INTERRUPTED) &&
        (!st->reason || !st->reason[0]))
        return bad(v, "state is %s but no reason is given", ec_job_state_name(st->state));
    if (st->updated_by && st->updated_by[0] && !node_id_ok(st->updated_by))
        return bad(v, "updated_by '%.64s' is not a valid node id", st->updated_by);
    if (st->updated_at_ms < 0)
        return bad(v, "updated_at_ms %lld is negative", (long long)st->updated_at_ms);
    return 0;
}

int ec_job_status_encode(const ec_job_status_t *st, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "job status record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_job_status_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!st)
        return ec_errorf(err, EC_EINVAL, "ec_job_status_encode: no record given");
    int rc = status_validate(st, &v);
    if (rc < 0)
        return rc;
    Ecoord__JobStatus m = ECOORD__JOB_STATUS__INIT;
    m.state = (Ecoord__JobState)st->state;
    m.reason = pb_str(st->reason);
    m.epoch = st->epoch;
    m.updated_at_ms = st->updated_at_ms;
    m.updated_by = pb_str(st->updated_by);
    m.run = st->run;
    m.leader_id = pb_str(st->leader_id);
    m.leader_rev = st->leader_rev;
    return pack(&m.base, &v, buf, len);
}

int ec_job_status_decode(const void *buf, size_t len, const char *key, ec_job_status_t **out,
                         ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "job status record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_job_status_decode: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__JobStatus *m = unpack(&ecoord__job_status__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    ec_job_status_t *st = calloc(1, sizeof(*st));
    if (!st || !(st->reason = dup_str(m->reason)) || !(st->updated_by = dup_str(m->updated_by)) ||
        !(st->leader_id = dup_str(m->leader_id))) {
        rc = enomem(&v);
        goto error;
    }
    st->state = (ec_job_state_t)m->state;
    st->epoch = m->epoch;
    st->updated_at_ms = m->updated_at_ms;
    st->run = m->run ? m->run : 1;
    st->leader_rev = m->leader_rev;
    if ((rc = status_validate(st, &v)) < 0)
        goto error;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = st;
    return 0;
error:
    ec_job_status_free(st);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

/* ---- failure record --------------------------------------------------------- */

void ec_failure_free(ec_failure_t *f)
{
    if (!f)
        return;
    int saved = errno;
    free(f->node_id);
    free(f->log_path);
    if (f->last_lines)
        for (int i = 0; i < f->nlines; i++)
            free(f->last_lines[i]);
    free(f->last_lines);
    free(f->message);
    free(f->raised_at);
    free(f);
    errno = saved;
}

static int failure_validate(const ec_failure_t *f, const vctx_t *v)
{
    if (!node_id_ok(f->node_id))
        return bad(v, "node id '%.64s' is not 1..%d characters from [A-Za-z0-9._-]",
                   SHOW(f->node_id), EC_NODE_ID_MAX);
    if (!failure_kind_known(f->kind))
        return bad(v, "node %s: kind %d is not a known failure kind", f->node_id, (int)f->kind);
    if (f->kind != EC_FAILURE_NODE_LOST) {
        if (f->local_rank < 0 || f->local_rank >= EC_NPROC_MAX)
            return bad(v, "node %s: local rank %d is outside 0..%d", f->node_id, f->local_rank,
                       EC_NPROC_MAX - 1);
        if (f->global_rank < 0 || f->global_rank >= EC_NPROC_MAX * EC_MEMBERS_MAX)
            return bad(v, "node %s: global rank %d is out of range", f->node_id,
                       f->global_rank);
    }
    if (f->kind == EC_FAILURE_EXITED && (f->exit_code < 0 || f->exit_code > 255))
        return bad(v, "node %s: exit code %d is outside 0..255", f->node_id, f->exit_code);
    if (f->kind == EC_FAILURE_SIGNALED && (f->signal < 1 || f->signal > 127))
        return bad(v, "node %s: signal %d is outside 1..127", f->node_id, f->signal);
    if (f->time_ms < 0)
        return bad(v, "node %s: time_ms %lld is negative", f->node_id, (long long)f->time_ms);
    if (f->nlines < 0 || (f->nlines > 0 && !f->last_lines))
        return bad(v, "node %s: %d log lines but no lines given", f->node_id, f->nlines);
    for (int i = 0; i < f->nlines; i++)
        if (!f->last_lines[i])
            return bad(v, "node %s: log line %d is missing", f->node_id, i);
    return 0;
}

int ec_failure_encode(const ec_failure_t *f, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "failure record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_failure_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!f)
        return ec_errorf(err, EC_EINVAL, "ec_failure_encode: no record given");
    int rc = failure_validate(f, &v);
    if (rc < 0)
        return rc;
    int ranks = f->kind != EC_FAILURE_NODE_LOST;
    Ecoord__Failure m = ECOORD__FAILURE__INIT;
    m.node_id = f->node_id;
    m.kind = (Ecoord__FailureKind)f->kind;
    m.local_rank = ranks ? (uint32_t)f->local_rank : 0;
    m.global_rank = ranks ? (uint32_t)f->global_rank : 0;
    m.exit_code = f->kind == EC_FAILURE_EXITED ? f->exit_code : 0;
    m.signal = f->kind == EC_FAILURE_SIGNALED ? f->signal : 0;
    m.epoch = f->epoch;
    m.time_ms = f->time_ms;
    m.log_path = pb_str(f->log_path);
    m.n_last_lines = (size_t)f->nlines;
    m.last_lines = f->last_lines;
    m.message = pb_str(f->message);
    m.raised_at = pb_str(f->raised_at);
    m.run = f->run;
    return pack(&m.base, &v, buf, len);
}

int ec_failure_decode(const void *buf, size_t len, const char *key, ec_failure_t **out,
                      ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "failure record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_failure_decode: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__Failure *m = unpack(&ecoord__failure__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    ec_failure_t *f = calloc(1, sizeof(*f));
    if (!f) {
        rc = enomem(&v);
        goto error;
    }
    if (m->local_rank > INT_MAX || m->global_rank > INT_MAX || m->n_last_lines > INT_MAX) {
        rc = bad(&v, "node '%.64s': local rank %u, global rank %u or %zu log lines out of range",
                 m->node_id, m->local_rank, m->global_rank, m->n_last_lines);
        goto error;
    }
    f->kind = (ec_failure_kind_t)m->kind;
    int ranks = f->kind != EC_FAILURE_NODE_LOST;
    f->local_rank = ranks ? (int)m->local_rank : -1;
    f->global_rank = ranks ? (int)m->global_rank : -1;
    f->exit_code = m->exit_code;
    f->signal = m->signal;
    f->epoch = m->epoch;
    f->time_ms = m->time_ms;
    f->run = m->run;
    if (!(f->node_id = dup_str(m->node_id)) || !(f->log_path = dup_str(m->log_path)) ||
        !(f->message = dup_str(m->message)) || !(f->raised_at = dup_str(m->raised_at)) ||
        !(f->last_lines = calloc(m->n_last_lines + 1, sizeof(char *)))) {
        rc = enomem(&v);
        goto error;
    }
    for (size_t i = 0; i < m->n_last_lines; i++, f->nlines++)
        if (!(f->last_lines[i] = dup_str(m->last_lines[i]))) {
            rc = enomem(&v);
            goto error;
        }
    if ((rc = failure_validate(f, &v)) < 0)
        goto error;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = f;
    return 0;
error:
    ec_failure_free(f);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

/* ---- worker timing ---------------------------------------------------------- */

void ec_worker_timing_free(ec_worker_timing_t *t)
{
    if (!t)
        return;
    int saved = errno;
    free(t->node_id);
    free(t->comm_method);
    free(t);
    errno = saved;
}

static int timing_validate(const ec_worker_timing_t *t, const vctx_t *v)
{
    if (t->epoch < 1)
        return bad(v, "epoch number is 0; numbers start at 1");
    if (t->rank < 0 || t->rank >= EC_NPROC_MAX * EC_MEMBERS_MAX)
        return bad(v, "epoch %llu: rank %d is out of range", (unsigned long long)t->epoch,
                   t->rank);
    if (!node_id_ok(t->node_id))
        return bad(v, "epoch %llu rank %d: node id '%.64s' is not a valid node id",
                   (unsigned long long)t->epoch, t->rank, SHOW(t->node_id));
    if (t->local_rank < 0 || t->local_rank >= EC_NPROC_MAX)
        return bad(v, "epoch %llu rank %d: local rank %d is outside 0..%d",
                   (unsigned long long)t->epoch, t->rank, t->local_rank, EC_NPROC_MAX - 1);
    const int64_t ts[] = {t->epoch_seen_at_us, t->comm_aborted_at_us, t->comm_ready_at_us,
                          t->state_synced_at_us, t->first_collective_at_us, t->shrink_us,
                          t->init_us};
    for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++)
        if (ts[i] < 0)
            return bad(v, "epoch %llu rank %d: time %zu is negative (%lld)",
                       (unsigned long long)t->epoch, t->rank, i, (long long)ts[i]);
    return 0;
}

int ec_worker_timing_encode(const ec_worker_timing_t *t, void **buf, size_t *len,
                            ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "worker timing record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_worker_timing_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!t)
        return ec_errorf(err, EC_EINVAL, "ec_worker_timing_encode: no record given");
    int rc = timing_validate(t, &v);
    if (rc < 0)
        return rc;
    Ecoord__WorkerTiming m = ECOORD__WORKER_TIMING__INIT;
    m.epoch = t->epoch;
    m.rank = (uint32_t)t->rank;
    m.node_id = t->node_id;
    m.local_rank = (uint32_t)t->local_rank;
    m.epoch_seen_at_us = t->epoch_seen_at_us;
    m.comm_aborted_at_us = t->comm_aborted_at_us;
    m.comm_ready_at_us = t->comm_ready_at_us;
    m.state_synced_at_us = t->state_synced_at_us;
    m.first_collective_at_us = t->first_collective_at_us;
    m.comm_method = t->comm_method ? t->comm_method : (char *)"";
    m.shrink_us = t->shrink_us;
    m.init_us = t->init_us;
    return pack(&m.base, &v, buf, len);
}

int ec_worker_timing_decode(const void *buf, size_t len, const char *key,
                            ec_worker_timing_t **out, ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "worker timing record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_worker_timing_decode: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__WorkerTiming *m = unpack(&ecoord__worker_timing__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    ec_worker_timing_t *t = calloc(1, sizeof(*t));
    if (!t || !(t->node_id = dup_str(m->node_id))) {
        rc = enomem(&v);
        goto error;
    }
    if (m->rank > INT_MAX || m->local_rank > INT_MAX) {
        rc = bad(&v, "epoch %llu: rank %u or local rank %u out of range",
                 (unsigned long long)m->epoch, m->rank, m->local_rank);
        goto error;
    }
    t->epoch = m->epoch;
    t->rank = (int)m->rank;
    t->local_rank = (int)m->local_rank;
    t->epoch_seen_at_us = m->epoch_seen_at_us;
    t->comm_aborted_at_us = m->comm_aborted_at_us;
    t->comm_ready_at_us = m->comm_ready_at_us;
    t->state_synced_at_us = m->state_synced_at_us;
    t->first_collective_at_us = m->first_collective_at_us;
    t->shrink_us = m->shrink_us;
    t->init_us = m->init_us;
    if (m->comm_method && *m->comm_method && !(t->comm_method = dup_str(m->comm_method))) {
        rc = enomem(&v);
        goto error;
    }
    if ((rc = timing_validate(t, &v)) < 0)
        goto error;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = t;
    return 0;
error:
    ec_worker_timing_free(t);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

/* ---- hang verdict ------------------------------------------------------- */

void ec_hang_verdict_free(ec_hang_verdict_t *h)
{
    if (!h)
        return;
    free(h->why);
    free(h);
}

static int hang_validate(const ec_hang_verdict_t *h, const vctx_t *v)
{
    if (h->epoch < 1)
        return bad(v, "epoch number is 0; numbers start at 1");
    if (h->local_rank < 0 || h->local_rank >= EC_NPROC_MAX)
        return bad(v, "epoch %llu: local rank %d is outside 0..%d", (unsigned long long)h->epoch,
                   h->local_rank, EC_NPROC_MAX - 1);
    if (h->why && strlen(h->why) > EC_HANG_WHY_MAX)
        return bad(v, "epoch %llu: the evidence is longer than %d bytes",
                   (unsigned long long)h->epoch, EC_HANG_WHY_MAX);
    return 0;
}

int ec_hang_verdict_encode(const ec_hang_verdict_t *h, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "hang verdict", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_hang_verdict_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!h)
        return ec_errorf(err, EC_EINVAL, "ec_hang_verdict_encode: no record given");
    int rc = hang_validate(h, &v);
    if (rc < 0)
        return rc;
    Ecoord__HangVerdict m = ECOORD__HANG_VERDICT__INIT;
    m.epoch = h->epoch;
    m.local_rank = (uint32_t)h->local_rank;
    m.why = h->why ? h->why : (char *)"";
    return pack(&m.base, &v, buf, len);
}

int ec_hang_verdict_decode(const void *buf, size_t len, const char *key, ec_hang_verdict_t **out,
                           ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "hang verdict", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_hang_verdict_decode: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__HangVerdict *m = unpack(&ecoord__hang_verdict__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    ec_hang_verdict_t *h = calloc(1, sizeof(*h));
    if (!h || !(h->why = dup_str(m->why))) {
        rc = enomem(&v);
        goto error;
    }
    if (m->local_rank > INT_MAX) {
        rc = bad(&v, "epoch %llu: local rank %u out of range", (unsigned long long)m->epoch,
                 m->local_rank);
        goto error;
    }
    h->epoch = m->epoch;
    h->local_rank = (int)m->local_rank;
    if ((rc = hang_validate(h, &v)) < 0)
        goto error;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = h;
    return 0;
error:
    ec_hang_verdict_free(h);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

/* ---- views of split epochs ------------------------------------------------- */

uint64_t ec_member_digest(const ec_member_t *m, int nproc)
{
    uint64_t h = 1469598103934665603ULL;
    char buf[64];
    const char *parts[2] = {m->node_id ? m->node_id : "", m->host ? m->host : ""};
    for (int i = 0; i < 2; i++)
        for (const unsigned char *p = (const unsigned char *)parts[i];; p++) {
            h = (h ^ *p) * 1099511628211ULL; /* the NUL too: a separator */
            if (!*p)
                break;
        }
    int n = snprintf(buf, sizeof(buf), "%u %llu", m->master_port,
                     (unsigned long long)m->incarnation);
    for (int i = 0; i < n; i++)
        h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
    for (int i = 0; m->ports && i < nproc; i++) {
        h = (h ^ (m->ports[i] & 0xff)) * 1099511628211ULL;
        h = (h ^ (m->ports[i] >> 8)) * 1099511628211ULL;
    }
    return h;
}

/* Member d of a view from pm (M_id checked by the caller). */
/* A view from a split record m (a head, or a view written by
 * ec_epoch_encode_view). */
static int view_from_pb(const Ecoord__Epoch *m, const vctx_t *vp, ec_epoch_t **out)
{
    vctx_t v = *vp;
    unsigned long long num = (unsigned long long)m->number;
    int rc = split_check(m, true, &v);
    if (rc < 0)
        return rc;
    if (m->nproc < 1 || m->nproc > EC_NPROC_MAX)
        return bad(&v, "epoch %llu: nproc is %u, outside 1..%d", num, m->nproc, EC_NPROC_MAX);
    ec_epoch_t *ep = ec_epoch_new((int)m->members_total, (int)m->nproc);
    if (!ep)
        return enomem(&v);
    for (int i = 0; i < ep->nmembers; i++) { /* none held until read */
        free(ep->members[i].ports);
        ep->members[i].ports = NULL;
    }
    ep->present = 0;
    int64_t last = -1;
    for (size_t i = 0; i < m->n_members; i++) {
        const Ecoord__Member *pm = m->members[i];
        if ((int64_t)pm->m_id <= last || pm->m_id >= m->members_total || (i == 0 && pm->m_id)) {
            rc = bad(&v, "epoch %llu: the members of a split record must start at M_id 0 and "
                     "increase below %u (member %zu has M_id %u)", num, m->members_total, i,
                     pm->m_id);
            goto error;
        }
        last = pm->m_id;
        if ((rc = member_from_pb(pm, m->nproc, &v, &ep->members[pm->m_id])) < 0)
            goto error;
        ep->present++;
    }
    ep->chunk_members = (int)m->chunk_members;
    ep->nchunks = (int)m->n_chunk_digest;
    ep->nbuckets = m->n_index_digest ? (int)m->index_buckets : 0;
    if (!(ep->chunk_digest = u64dup(m->chunk_digest, m->n_chunk_digest)) ||
        !(ep->index_digest = u64dup(m->index_digest, m->n_index_digest))) {
        rc = enomem(&v);
        goto error;
    }
    if ((rc = header_from_pb(m, ep, &v)) < 0 || (rc = epoch_validate(ep, &v)) < 0 ||
        (rc = derived_match(m, ep, &v)) < 0)
        goto error;
    *out = ep;
    return 0;
error:
    ec_epoch_free(ep);
    return rc;
}

int ec_epoch_decode_view(const void *buf, size_t len, const char *key, ec_epoch_t **out,
                         ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "epoch record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_decode_view: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__Epoch *m = unpack(&ecoord__epoch__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    rc = m->members_total > 0 ? view_from_pb(m, &v, out) : epoch_from_pb(m, &v, out);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

int ec_epoch_encode_view(const ec_epoch_t *ep, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "epoch record", NULL};
    if (!buf || !len || !ep)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_encode_view: no epoch or output given");
    *buf = NULL;
    *len = 0;
    int rc = epoch_validate(ep, &v);
    if (rc < 0)
        return rc;
    bool view = ep->chunk_members > 0 && ep->nchunks > 0;
    return epoch_pack(ep, NULL, view, !view, buf, len, &v);
}

int ec_epoch_view_has_chunk(const ec_epoch_t *ep, int k)
{
    if (!ep || ep->chunk_members < 1 || k < 0 || k >= ep->nchunks)
        return 0;
    int from = k * ep->chunk_members, to = from + ep->chunk_members;
    if (to > ep->nmembers)
        to = ep->nmembers;
    for (int i = from; i < to; i++)
        if (!ep->members[i].node_id)
            return 0;
    return 1;
}

int ec_epoch_view_add_chunk(ec_epoch_t *ep, int k, const void *buf, size_t len, ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "epoch chunk", NULL};
    if (!ep || ep->chunk_members < 1 || k < 0 || k >= ep->nchunks || !ep->chunk_digest)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_view_add_chunk: no chunk %d in this epoch", k);
    unsigned long long num = (unsigned long long)ep->number;
    if (!buf || fnv(buf, len) != ep->chunk_digest[k])
        return bad(&v, "epoch %llu: chunk %d %s its head's digest (a newer epoch's, or written "
                   "by another tool)", num, k, buf ? "does not match" : "is missing;");
    int rc = 0;
    Ecoord__EpochChunk *c = unpack(&ecoord__epoch_chunk__descriptor, buf, len, &v, &rc);
    if (!c)
        return rc;
    size_t C = (size_t)ep->chunk_members, N = (size_t)ep->nmembers, from = (size_t)k * C;
    size_t want = N - from < C ? N - from : C;
    if (c->number != ep->number || c->chunk != (uint32_t)k || c->n_members != want) {
        rc = bad(&v, "epoch %llu: chunk %d is epoch %llu's chunk %u with %zu members, expected "
                 "%zu", num, k, (unsigned long long)c->number, c->chunk, c->n_members, want);
        goto out;
    }
    for (size_t i = 0; i < want; i++)
        if (c->members[i]->m_id != from + i) {
            rc = bad(&v, "epoch %llu: chunk %d's member %zu has M_id %u, expected %zu", num, k,
                     i, c->members[i]->m_id, from + i);
            goto out;
        }
    /* into a copy: all or nothing */
    ec_epoch_t *t = ec_epoch_dup(ep);
    if (!t) {
        rc = enomem(&v);
        goto out;
    }
    for (size_t i = 0; i < want && rc == 0; i++) {
        ec_member_t *d = &t->members[from + i];
        if (d->node_id) {
            if (strcmp(d->node_id, c->members[i]->node_id)) {
                rc = bad(&v, "epoch %llu: chunk %d says member %zu is %.64s, the view holds %s",
                         num, k, from + i, c->members[i]->node_id, d->node_id);
            }
            continue;
        }
        if ((rc = member_from_pb(c->members[i], (uint32_t)t->nproc, &v, d)) == 0)
            t->present++;
    }
    if (rc == 0 && (rc = epoch_validate(t, &v)) == 0) {
        /* swap t's members into ep */
        ec_member_t *mm = ep->members;
        ep->members = t->members;
        ep->present = t->present;
        t->members = mm;
    }
    ec_epoch_free(t);
out:
    protobuf_c_message_free_unpacked(&c->base, NULL);
    return rc;
}
