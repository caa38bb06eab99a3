/* The epoch as one whole record (`epoch`, epochs/<n>): its lifecycle, its
 * validation, its encoding, the decoding of every Epoch message (a whole
 * record, or a view of a split epoch: one decoder, see ec__epoch_from_pb),
 * and the endpoint tables walked in rank order (records.h; the shared
 * machinery: records_impl.h; splits: epoch_split.c; views: epoch_view.c).
 */
#include "records_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int epoch_reason_known(int r)
{
    switch (r) { EC_EPOCH_REASON_MAP(EC__KNOWN_CASE) return r != 0; }
    return 0;
}

/* ---- lifecycle ----------------------------------------------------------- */

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
        b->probe_port = a->probe_port;
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

/* ---- validation ---------------------------------------------------------- */

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

int ec__epoch_validate(const ec_epoch_t *ep, const vctx_t *v)
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
        int rc = ec__rec_ports_distinct(v, whose, m->ports, ep->nproc, m->master_port);
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

/* ---- encoding ------------------------------------------------------------ */

void ec__member_to_pb(const ec_member_t *src, size_t np, uint32_t *ports, Ecoord__Member *d)
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
    d->probe_port = src->probe_port;
}

int ec__epoch_pack(const ec_epoch_t *ep, const head_extra_t *hx, bool view, bool capped,
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
        ec__member_to_pb(&ep->members[j], np, &ports[i * np], &mem[i]);
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
    rc = ec__rec_pack(&m.base, v, capped, buf, len);
out:
    free(mem);
    free(memp);
    free(ports);
    return rc;
}

/* ep as one whole record: capped for one etcd value (ec_epoch_encode), or
 * not (ec_epoch_encode_whole); fn names the caller in its messages. */
static int encode_whole(const ec_epoch_t *ep, void **buf, size_t *len, bool capped,
                        const char *fn, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "epoch record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "%s: no output buffer given", fn);
    *buf = NULL;
    *len = 0;
    if (!ep)
        return ec_errorf(err, EC_EINVAL, "%s: no epoch given", fn);
    int rc = ec__epoch_validate(ep, &v);
    if (rc < 0)
        return rc;
    if (ep->present != ep->nmembers)
        return ec_errorf(err, EC_EINVAL, "epoch %llu: a view (%d of %d members) is not a "
                         "whole record: ec_epoch_encode_view", (unsigned long long)ep->number,
                         ep->present, ep->nmembers);
    return ec__epoch_pack(ep, NULL, false, capped, buf, len, &v);
}

int ec_epoch_encode(const ec_epoch_t *ep, void **buf, size_t *len, ec_error_t *err)
{
    return encode_whole(ep, buf, len, true, "ec_epoch_encode", err);
}

int ec_epoch_encode_whole(const ec_epoch_t *ep, void **buf, size_t *len, ec_error_t *err)
{
    return encode_whole(ep, buf, len, false, "ec_epoch_encode_whole", err);
}

/* ---- decoding ------------------------------------------------------------ */

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

int ec__member_from_pb(const Ecoord__Member *pm, uint32_t nproc, const vctx_t *v,
                       ec_member_t *d)
{
    char whose[EC_NODE_ID_MAX + 32];
    snprintf(whose, sizeof(whose), "member %u (%.64s)", pm->m_id, pm->node_id);
    if (pm->n_ports != nproc)
        return bad(v, "%s has %zu endpoints, expected nproc=%u", whose, pm->n_ports, nproc);
    if (pm->master_port > 65535)
        return bad(v, "%s: master port %u is outside 1..65535", whose, pm->master_port);
    if (pm->probe_port > 65535)
        return bad(v, "%s: probe port %u is outside 1..65535", whose, pm->probe_port);
    free(d->ports);
    d->ports = NULL;
    int rc = ec__rec_ports_from_pb(v, whose, pm->ports, pm->n_ports, &d->ports);
    if (rc < 0)
        return rc;
    d->master_port = (uint16_t)pm->master_port;
    d->incarnation = pm->incarnation;
    d->probe_port = (uint16_t)pm->probe_port;
    if (!(d->node_id = dup_str(pm->node_id)) || !(d->host = dup_str(pm->host)))
        return enomem(v);
    return 0;
}

/* A whole record's shape, before its members are decoded: its member
 * count, its world size, its members in M_id order. */
static int whole_shape(const Ecoord__Epoch *m, const vctx_t *v)
{
    unsigned long long num = (unsigned long long)m->number;
    if (m->n_members < 1 || m->n_members > EC_MEMBERS_MAX)
        return bad(v, "epoch %llu has %zu members, expected 1..%d", num, m->n_members,
                   EC_MEMBERS_MAX);
    if ((unsigned long long)m->world_size != (unsigned long long)m->n_members * m->nproc)
        return bad(v, "epoch %llu: world size %u != %zu members x nproc %u", num, m->world_size,
                   m->n_members, m->nproc);
    for (size_t i = 0; i < m->n_members; i++)
        if (m->members[i]->m_id != i)
            return bad(v, "member at index %zu has M_id %u; members must be in M_id order 0..%zu",
                       i, m->members[i]->m_id, m->n_members - 1);
    return 0;
}

/* m's members into ep (new, of m's size), each at its M_id.  A whole
 * record lists every member (whole_shape checked their order); a view
 * those it holds, M_ids increasing from 0, and the others hold nothing
 * (no ports). */
static int members_from_pb(const Ecoord__Epoch *m, bool view, ec_epoch_t *ep, const vctx_t *v)
{
    if (view)
        for (int i = 0; i < ep->nmembers; i++) { /* none held until read */
            free(ep->members[i].ports);
            ep->members[i].ports = NULL;
        }
    int64_t last = -1;
    for (size_t i = 0; i < m->n_members; i++) {
        const Ecoord__Member *pm = m->members[i];
        if (view && ((int64_t)pm->m_id <= last || pm->m_id >= m->members_total ||
                     (i == 0 && pm->m_id)))
            return bad(v, "epoch %llu: the members of a split record must start at M_id 0 and "
                       "increase below %u (member %zu has M_id %u)",
                       (unsigned long long)m->number, m->members_total, i, pm->m_id);
        last = pm->m_id;
        int rc = ec__member_from_pb(pm, m->nproc, v, &ep->members[pm->m_id]);
        if (rc < 0)
            return rc;
    }
    ep->present = (int)m->n_members;
    return 0;
}

/* A view's split fields: its chunking and the digests its head lists. */
static int split_from_pb(const Ecoord__Epoch *m, ec_epoch_t *ep, const vctx_t *v)
{
    ep->chunk_members = (int)m->chunk_members;
    ep->nchunks = (int)m->n_chunk_digest;
    ep->nbuckets = m->n_index_digest ? (int)m->index_buckets : 0;
    if (!(ep->chunk_digest = u64dup(m->chunk_digest, m->n_chunk_digest)) ||
        !(ep->index_digest = u64dup(m->index_digest, m->n_index_digest)))
        return enomem(v);
    return 0;
}

int ec__epoch_from_pb(const Ecoord__Epoch *m, bool view, const vctx_t *v, ec_epoch_t **out)
{
    unsigned long long num = (unsigned long long)m->number;
    int rc = view ? ec__epoch_split_check(m, true, v) : 0;
    if (rc < 0)
        return rc;
    if (m->nproc < 1 || m->nproc > EC_NPROC_MAX)
        return bad(v, "epoch %llu: nproc is %u, outside 1..%d", num, m->nproc, EC_NPROC_MAX);
    if (!view && (rc = whole_shape(m, v)) < 0)
        return rc;
    ec_epoch_t *ep = ec_epoch_new(view ? (int)m->members_total : (int)m->n_members, (int)m->nproc);
    if (!ep)
        return enomem(v);
    if ((rc = members_from_pb(m, view, ep, v)) < 0 ||
        (view && (rc = split_from_pb(m, ep, v)) < 0) || (rc = header_from_pb(m, ep, v)) < 0 ||
        (rc = ec__epoch_validate(ep, v)) < 0 || (rc = derived_match(m, ep, v)) < 0) {
        ec_epoch_free(ep);
        return rc;
    }
    *out = ep;
    return 0;
}

int ec_epoch_decode(const void *buf, size_t len, const char *key, ec_epoch_t **out,
                    ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "epoch record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_decode: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__Epoch *m = ec__rec_unpack(&ecoord__epoch__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    if (m->members_total > 0) /* not a whole record (junk says the same) */
        rc = bad(&v, "epoch %llu is split (%u members in %zu chunks under "
                 "epochs/<n>/members/): read it whole with ec_epoch_fetch",
                 (unsigned long long)m->number, m->members_total, m->n_chunk_digest);
    else
        rc = ec__epoch_from_pb(m, false, &v, out);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

/* ---- rank and endpoint tables -------------------------------------------- */

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
