/* Epoch deltas (see epoch_delta.h). */
#define _GNU_SOURCE
#include "epoch_delta.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecoord.pb-c.h"

#define EC_DELTA_VERSION 1

uint64_t ec_epoch_digest(const void *buf, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static bool same_member(const ec_member_t *a, const ec_member_t *b, int nproc)
{
    return !strcmp(a->node_id, b->node_id) && !strcmp(a->host, b->host) &&
           a->master_port == b->master_port && a->incarnation == b->incarnation &&
           a->probe_port == b->probe_port && !memcmp(a->ports, b->ports, (size_t)nproc * sizeof(uint16_t));
}

/* Copy the header (everything but the members) of src into dst. */
static bool copy_header(ec_epoch_t *dst, const ec_epoch_t *src)
{
    dst->number = src->number;
    dst->reason = src->reason;
    dst->leader_rev = src->leader_rev;
    dst->observed_at_ms = src->observed_at_ms;
    dst->decided_at_ms = src->decided_at_ms;
    dst->planner_us = src->planner_us;
    dst->published_at_ms = src->published_at_ms;
    dst->run = src->run;
    dst->np_min = src->np_min;
    dst->np_max = src->np_max;
    return (!src->reason_detail || (dst->reason_detail = strdup(src->reason_detail))) &&
           (!src->job_id || (dst->job_id = strdup(src->job_id))) &&
           (!src->leader_id || (dst->leader_id = strdup(src->leader_id)));
}

static bool copy_member(ec_member_t *b, const ec_member_t *a, int nproc)
{
    b->master_port = a->master_port;
    b->incarnation = a->incarnation;
    b->probe_port = a->probe_port;
    memcpy(b->ports, a->ports, (size_t)nproc * sizeof(uint16_t));
    return (b->node_id = strdup(a->node_id)) && (b->host = strdup(a->host));
}

typedef struct seg {
    char kind; /* 'b': base members, 'c': carrier members */
    int from, count;
} seg_t;

static int pack_delta(const Ecoord__EpochDelta *m, void **buf, size_t *len, ec_error_t *err)
{
    size_t n = ecoord__epoch_delta__get_packed_size(m);
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    ecoord__epoch_delta__pack(m, b);
    *buf = b;
    *len = n;
    return 0;
}

static int full_marker(const ec_epoch_t *ep, const void *raw, size_t raw_len, void **buf,
                       size_t *len, ec_error_t *err)
{
    Ecoord__EpochDelta m = ECOORD__EPOCH_DELTA__INIT;
    m.version = EC_DELTA_VERSION;
    m.number = ep->number;
    m.digest = ec_epoch_digest(raw, raw_len);
    return pack_delta(&m, buf, len, err);
}

/* The base's members by node id: open addressing, index + 1 (0: empty),
 * cap slots (a power of two).  NULL when out of memory. */
static int *base_index(const ec_epoch_t *base, size_t *cap_out)
{
    int B = base->nmembers;
    size_t cap = 16;
    while (cap < 2 * (size_t)B)
        cap *= 2;
    int *tab = calloc(cap, sizeof(int));
    for (int j = 0; tab && j < B; j++) {
        const char *id = base->members[j].node_id;
        size_t h = (size_t)ec_epoch_digest(id, strlen(id)) & (cap - 1);
        while (tab[h])
            h = (h + 1) & (cap - 1);
        tab[h] = j + 1;
    }
    *cap_out = cap;
    return tab;
}

/* The base member that new member i (m) is unchanged from, or -1: the one
 * after the previous match (prev) first, else by id. */
static int base_member_of(const ec_epoch_t *base, const int *tab, size_t cap,
                          const ec_epoch_t *ep, int i, int prev)
{
    const ec_member_t *m = &ep->members[i];
    int j = -1;
    if (prev >= 0 && prev + 1 < base->nmembers &&
        same_member(&base->members[prev + 1], m, ep->nproc)) {
        j = prev + 1;
    } else {
        size_t h = (size_t)ec_epoch_digest(m->node_id, strlen(m->node_id)) & (cap - 1);
        for (; tab[h]; h = (h + 1) & (cap - 1))
            if (!strcmp(base->members[tab[h] - 1].node_id, m->node_id)) {
                if (same_member(&base->members[tab[h] - 1], m, ep->nproc))
                    j = tab[h] - 1;
                break;
            }
    }
    /* A split epoch's new member 0 that was another base member goes
     * in the carrier: a follower's view holds base member 0 only, and
     * would otherwise read its chunks again to learn the new master. */
    if (i == 0 && j > 0 && ep->chunk_members > 0 && ep->nchunks > 0)
        j = -1;
    return j;
}

/* The new members as runs: of base members ('b', from = base index) and of
 * carrier members ('c', from = index among lits[], the new members that
 * are literal).  Returns the number of runs; *nlit the literals. */
static int segment_members(const ec_epoch_t *base, const ec_epoch_t *ep, const int *tab,
                           size_t cap, seg_t *segs, int *lits, int *nlit_out)
{
    int nseg = 0, nlit = 0, prev = -2;
    for (int i = 0; i < ep->nmembers; i++) {
        int j = base_member_of(base, tab, cap, ep, i, prev);
        seg_t *last = nseg ? &segs[nseg - 1] : NULL;
        if (j >= 0) {
            if (last && last->kind == 'b' && last->from + last->count == j)
                last->count++;
            else
                segs[nseg++] = (seg_t){'b', j, 1};
            prev = j;
        } else {
            lits[nlit] = i;
            if (last && last->kind == 'c' && last->from + last->count == nlit)
                last->count++;
            else
                segs[nseg++] = (seg_t){'c', nlit, 1};
            nlit++;
            prev = -2;
        }
    }
    *nlit_out = nlit;
    return nseg;
}

/* The carrier: the new header and the literal members (at least one:
 * an epoch record has members; an unreferenced one when none is new),
 * encoded as an epoch record into *cbuf. */
static int encode_carrier(const ec_epoch_t *ep, const int *lits, int nlit, void **cbuf,
                          size_t *clen, ec_error_t *err)
{
    int nc = nlit ? nlit : 1;
    ec_epoch_t *car = ec_epoch_new(nc, ep->nproc);
    int rc = 0;
    if (!car || !copy_header(car, ep))
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
    for (int k = 0; rc == 0 && k < nc; k++)
        if (!copy_member(&car->members[k], &ep->members[nlit ? lits[k] : 0], ep->nproc))
            rc = ec_errorf(err, EC_ENOMEM, "out of memory");
    if (rc == 0)
        rc = ec_epoch_encode(car, cbuf, clen, err);
    ec_epoch_free(car);
    return rc;
}

/* The delta message: the runs, the carrier, a split epoch's chunk
 * digests; the full marker instead when the delta is not worth it. */
static int pack_runs(const ec_epoch_t *base, const ec_epoch_t *ep, const void *raw,
                     size_t raw_len, const seg_t *segs, int nseg, void *cbuf, size_t clen,
                     void **buf, size_t *len, ec_error_t *err)
{
    Ecoord__EpochDelta m = ECOORD__EPOCH_DELTA__INIT;
    m.version = EC_DELTA_VERSION;
    m.number = ep->number;
    m.base_number = base->number;
    m.digest = ec_epoch_digest(raw, raw_len);
    Ecoord__EpochDeltaRun *runs = calloc((size_t)nseg + 1, sizeof(*runs));
    Ecoord__EpochDeltaRun **runp = calloc((size_t)nseg + 1, sizeof(*runp));
    int rc;
    if (!runs || !runp) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto out;
    }
    for (int k = 0; k < nseg; k++) {
        ecoord__epoch_delta_run__init(&runs[k]);
        runs[k].carrier = segs[k].kind == 'c';
        runs[k].from = (uint32_t)segs[k].from;
        runs[k].count = (uint32_t)segs[k].count;
        runp[k] = &runs[k];
    }
    m.n_runs = (size_t)nseg;
    m.runs = runp;
    m.carrier.data = cbuf;
    m.carrier.len = clen;
    if (ep->chunk_members > 0 && ep->nchunks > 0 && ep->chunk_digest) { /* split */
        m.chunk_members = (uint32_t)ep->chunk_members;
        m.n_chunk_digest = (size_t)ep->nchunks;
        m.chunk_digest = ep->chunk_digest;
        m.member0_digest = ec_member_digest(&ep->members[0], ep->nproc);
    }
    size_t dl = ecoord__epoch_delta__get_packed_size(&m);
    /* Even a small epoch goes as a delta (its followers, and the tests of
     * a 3-node job, take the same path as a large one's); only one that
     * would be well above the record is not worth it. */
    if (dl > raw_len + 512 || dl > EC_RECORD_MAX_BYTES)
        rc = full_marker(ep, raw, raw_len, buf, len, err);
    else
        rc = pack_delta(&m, buf, len, err);
out:
    free(runs);
    free(runp);
    return rc;
}

int ec_epoch_delta_encode(const ec_epoch_t *base, const ec_epoch_t *ep, const void *raw,
                          size_t raw_len, void **buf, size_t *len, ec_error_t *err)
{
    *buf = NULL;
    *len = 0;
    if (!base || base->nproc != ep->nproc || base->nmembers < 1)
        return full_marker(ep, raw, raw_len, buf, len, err);
    int M = ep->nmembers;
    size_t cap;
    int *tab = base_index(base, &cap);
    seg_t *segs = calloc((size_t)M + 1, sizeof(seg_t));
    int *lits = calloc((size_t)M + 1, sizeof(int));
    void *cbuf = NULL;
    size_t clen = 0;
    int rc, nlit;
    if (!tab || !segs || !lits) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto out;
    }
    int nseg = segment_members(base, ep, tab, cap, segs, lits, &nlit);
    if ((rc = encode_carrier(ep, lits, nlit, &cbuf, &clen, err)) < 0) {
        if (rc == EC_ETOOLARGE) /* most of a huge epoch changed: read it whole */
            rc = full_marker(ep, raw, raw_len, buf, len, err);
        goto out;
    }
    rc = pack_runs(base, ep, raw, raw_len, segs, nseg, cbuf, clen, buf, len, err);
out:
    free(tab);
    free(segs);
    free(lits);
    free(cbuf);
    return rc;
}

typedef struct parsed {
    uint64_t num, base_no, digest, m0;
    int nseg, chunk_members, nchunks;
    seg_t *segs;
    uint64_t *cd;
    long M;
    ec_epoch_t *car;
} parsed_t;

static void parsed_free(parsed_t *d)
{
    free(d->segs);
    free(d->cd);
    ec_epoch_free(d->car);
}

/* Parse a delta; 1 parsed (against base: its number, nproc and segment
 * ranges checked), 0 read the epoch key (a full marker, another base),
 * negative: not a delta. */
static int parse(const ec_epoch_t *base, const void *delta, size_t len, uint64_t *number,
                 parsed_t *d, ec_error_t *err)
{
    memset(d, 0, sizeof(*d));
    Ecoord__EpochDelta *m = delta || !len
                                ? ecoord__epoch_delta__unpack(NULL, len,
                                                              delta ? delta : (const void *)"")
                                : NULL;
    if (!m || m->version != EC_DELTA_VERSION || m->n_runs > EC_MEMBERS_MAX ||
        (m->chunk_members && (m->n_chunk_digest < 1 || m->n_chunk_digest > EC_MEMBERS_MAX))) {
        if (m)
            ecoord__epoch_delta__free_unpacked(m, NULL);
        return ec_errorf(err, EC_ECORRUPT, "epoch delta: %zu bytes that are not an epoch delta "
                         "(version %d; another tool wrote them?)", len, EC_DELTA_VERSION);
    }
    int rc = 0;
    d->num = m->number;
    d->base_no = m->base_number;
    d->digest = m->digest;
    d->nseg = (int)m->n_runs;
    d->chunk_members = (int)m->chunk_members;
    d->nchunks = m->chunk_members ? (int)m->n_chunk_digest : 0;
    d->m0 = m->member0_digest;
    if (number)
        *number = d->num;
    if (!d->base_no || !base || base->number != d->base_no)
        goto out; /* read the epoch key */
    if (!(d->segs = calloc((size_t)d->nseg + 1, sizeof(seg_t)))) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto out;
    }
    for (int k = 0; k < d->nseg; k++) {
        const Ecoord__EpochDeltaRun *r = m->runs[k];
        if (r->count < 1 || r->from > EC_MEMBERS_MAX || r->count > EC_MEMBERS_MAX) {
            rc = ec_errorf(err, EC_ECORRUPT, "epoch delta %" PRIu64 ": bad run %d", d->num, k);
            goto out;
        }
        d->segs[k] = (seg_t){r->carrier ? 'c' : 'b', (int)r->from, (int)r->count};
        d->M += r->count;
    }
    if (d->M < 1 || d->M > EC_MEMBERS_MAX) {
        rc = ec_errorf(err, EC_ECORRUPT, "epoch delta %" PRIu64 ": %ld members", d->num, d->M);
        goto out;
    }
    if (d->nchunks) {
        if ((long)(d->nchunks - 1) * d->chunk_members >= d->M ||
            (long)d->nchunks * d->chunk_members < d->M) {
            rc = ec_errorf(err, EC_ECORRUPT, "epoch delta %" PRIu64 ": %d chunks of %d for %ld "
                           "members", d->num, d->nchunks, d->chunk_members, d->M);
            goto out;
        }
        if (!(d->cd = malloc((size_t)d->nchunks * sizeof(uint64_t)))) {
            rc = ec_errorf(err, EC_ENOMEM, "out of memory");
            goto out;
        }
        memcpy(d->cd, m->chunk_digest, (size_t)d->nchunks * sizeof(uint64_t));
    }
    if ((rc = ec_epoch_decode(m->carrier.data, m->carrier.len, NULL, &d->car, err)) < 0)
        goto out;
    if (d->car->nproc != base->nproc || d->car->number != d->num)
        goto out; /* rc 0: read the epoch key */
    for (int k = 0; k < d->nseg; k++) {
        int lim = d->segs[k].kind == 'b' ? base->nmembers : d->car->nmembers;
        if (d->segs[k].from > lim - d->segs[k].count) {
            rc = ec_errorf(err, EC_ECORRUPT, "epoch delta %" PRIu64 ": run %d out of range",
                           d->num, k);
            goto out;
        }
    }
    rc = 1;
out:
    ecoord__epoch_delta__free_unpacked(m, NULL);
    return rc;
}

int ec_epoch_delta_peek(const void *delta, size_t len, uint64_t *number, uint64_t *base)
{
    Ecoord__EpochDelta *m = ecoord__epoch_delta__unpack(NULL, len, delta);
    if (!m || m->version != EC_DELTA_VERSION) {
        if (m)
            ecoord__epoch_delta__free_unpacked(m, NULL);
        return EC_ECORRUPT;
    }
    *number = m->number;
    *base = m->base_number;
    ecoord__epoch_delta__free_unpacked(m, NULL);
    return 0;
}

/* The new epoch's members from base and the carrier (base members a view
 * does not hold stay absent). */
static int rebuild(const ec_epoch_t *base, const parsed_t *d, ec_epoch_t **out, ec_error_t *err)
{
    ec_epoch_t *ep = ec_epoch_new((int)d->M, d->car->nproc);
    if (!ep || !copy_header(ep, d->car)) {
        ec_epoch_free(ep);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    int i = 0;
    for (int s = 0; s < d->nseg; s++)
        for (int k = 0; k < d->segs[s].count; k++, i++) {
            const ec_member_t *src = d->segs[s].kind == 'b' ? &base->members[d->segs[s].from + k]
                                                           : &d->car->members[d->segs[s].from + k];
            if (!src->node_id) {
                free(ep->members[i].ports);
                ep->members[i].ports = NULL;
                ep->present--;
                continue;
            }
            if (!copy_member(&ep->members[i], src, ep->nproc)) {
                ec_epoch_free(ep);
                return ec_errorf(err, EC_ENOMEM, "out of memory");
            }
        }
    *out = ep;
    return 0;
}

int ec_epoch_delta_apply(const ec_epoch_t *base, const void *delta, size_t len, uint64_t *number,
                         void **out, size_t *out_len, ec_error_t *err)
{
    *out = NULL;
    *out_len = 0;
    parsed_t d;
    ec_epoch_t *ep = NULL;
    int rc = base && base->present != base->nmembers ? 0 /* a view: ec_epoch_delta_apply_view */
                                                     : parse(base, delta, len, number, &d, err);
    if (base && base->present != base->nmembers)
        memset(&d, 0, sizeof(d));
    if (rc == 1) {
        rc = 0;
        if (rebuild(base, &d, &ep, err) < 0) {
            rc = err ? err->code : EC_ENOMEM;
            goto out;
        }
        void *buf = NULL;
        size_t blen = 0;
        if (ec_epoch_encode_whole(ep, &buf, &blen, NULL) < 0)
            goto out; /* not a valid epoch: the epoch key says what it is */
        if (ec_epoch_digest(buf, blen) != d.digest) {
            free(buf);
            goto out;
        }
        *out = buf;
        *out_len = blen;
        rc = 1;
    }
out:
    parsed_free(&d);
    ec_epoch_free(ep);
    return rc;
}

int ec_epoch_delta_apply_view(const ec_epoch_t *base, const void *delta, size_t len,
                              const char *self, uint64_t *number, ec_epoch_t **out,
                              ec_error_t *err)
{
    *out = NULL;
    parsed_t d;
    ec_epoch_t *ep = NULL;
    int rc = parse(base, delta, len, number, &d, err);
    if (rc != 1)
        goto out;
    rc = 0;
    if (!d.cd)
        goto out; /* not split: a view cannot be checked against the whole digest */
    if ((rc = rebuild(base, &d, &ep, err)) < 0)
        goto out;
    ep->chunk_members = d.chunk_members;
    ep->nchunks = d.nchunks;
    if (!(ep->chunk_digest = malloc((size_t)d.nchunks * sizeof(uint64_t)))) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto out;
    }
    memcpy(ep->chunk_digest, d.cd, (size_t)d.nchunks * sizeof(uint64_t));
    /* member 0 (the master), and every chunk held whole, as the leader
     * wrote them; our own chunk must be one of them */
    if (!ep->members[0].node_id || ec_member_digest(&ep->members[0], ep->nproc) != d.m0)
        goto out;
    int me = self ? ec_epoch_find_member(ep, self) : -1;
    if (me >= 0 && !ec_epoch_view_has_chunk(ep, me / ep->chunk_members))
        goto out;
    for (int k = 0; k < ep->nchunks; k++) {
        if (!ec_epoch_view_has_chunk(ep, k))
            continue;
        void *cb = NULL;
        size_t cl = 0;
        if (ec_epoch_chunk_encode(ep, k, &cb, &cl, NULL) < 0)
            goto out;
        bool same = ec_epoch_digest(cb, cl) == d.cd[k];
        free(cb);
        if (!same)
            goto out;
    }
    ec_error_t verr = {0};
    void *vb = NULL;
    size_t vl = 0;
    if (ec_epoch_encode_view(ep, &vb, &vl, &verr) < 0)
        goto out; /* not a valid epoch: read it */
    free(vb);
    *out = ep;
    ep = NULL;
    rc = 1;
out:
    parsed_free(&d);
    ec_epoch_free(ep);
    return rc;
}
