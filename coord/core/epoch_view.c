/* Views of split epochs: a reader that needs its own member only keeps the
 * head (member 0) and the chunks it read (records.h, "views of split
 * epochs").  A view is encoded and decoded by the whole-record codec
 * (epoch_record.c: ec__epoch_pack, ec__epoch_from_pb with view set); its
 * chunks are checked as epoch_split.c checks them when it assembles.
 */
#include "records_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    int n = snprintf(buf, sizeof(buf), "%u %llu %u", m->master_port,
                     (unsigned long long)m->incarnation, m->probe_port);
    for (int i = 0; i < n; i++)
        h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
    for (int i = 0; m->ports && i < nproc; i++) {
        h = (h ^ (m->ports[i] & 0xff)) * 1099511628211ULL;
        h = (h ^ (m->ports[i] >> 8)) * 1099511628211ULL;
    }
    return h;
}

int ec_epoch_decode_view(const void *buf, size_t len, const char *key, ec_epoch_t **out,
                         ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "epoch record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_decode_view: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__Epoch *m = ec__rec_unpack(&ecoord__epoch__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    rc = ec__epoch_from_pb(m, m->members_total > 0, &v, out);
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
    int rc = ec__epoch_validate(ep, &v);
    if (rc < 0)
        return rc;
    bool view = ep->chunk_members > 0 && ep->nchunks > 0;
    return ec__epoch_pack(ep, NULL, view, !view, buf, len, &v);
}

static void add_chunk(int *chunks, int *n, int k)
{
    for (int i = 0; i < *n; i++)
        if (chunks[i] == k)
            return;
    chunks[(*n)++] = k;
}

int ec_epoch_view_chunks(const ec_epoch_t *ep, int m, int successors, int *chunks)
{
    int cm = ep ? ep->chunk_members : 0;
    if (cm < 1 || m < 0 || m >= ep->nmembers || ep->nmembers <= cm)
        return 0;
    /* Its own chunk and the chunks on either side: at least C - 1 members
     * held on each side of it, so that after losses before it (its M_id
     * moves down, maybe into the chunk before) or after it its own chunk
     * is still in what it holds, and a delta rebuilds it (epoch_delta.h);
     * then the successors' (a short last chunk, or chunks of one member,
     * put them further). */
    int nch = (ep->nmembers + cm - 1) / cm, own = m / cm, n = 0;
    if (successors > EC_EPOCH_VIEW_SUCCESSORS_MAX)
        successors = EC_EPOCH_VIEW_SUCCESSORS_MAX;
    add_chunk(chunks, &n, own);
    if (own > 0)
        add_chunk(chunks, &n, own - 1);
    if (own + 1 < nch)
        add_chunk(chunks, &n, own + 1);
    for (int s = 1; s <= successors; s++)
        add_chunk(chunks, &n, ((m + s) % ep->nmembers) / cm);
    return n;
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
    size_t C = (size_t)ep->chunk_members, from = (size_t)k * C;
    Ecoord__EpochChunk *c = NULL;
    int rc = ec__epoch_chunk_unpack(buf, len, ep->chunk_digest[k], ep->number, k, C,
                                    (size_t)ep->nmembers, &v, &v, &c);
    if (rc < 0)
        return rc;
    size_t want = c->n_members;
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
        if ((rc = ec__member_from_pb(c->members[i], (uint32_t)t->nproc, &v, d)) == 0)
            t->present++;
    }
    if (rc == 0 && (rc = ec__epoch_validate(t, &v)) == 0) {
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
