/* Split epochs: an epoch of more than chunk_members members stored in
 * parts, its head (member 0 and the parts' digests), its member chunks and
 * its index buckets (records.h, "split epochs"; the whole-record codec the
 * head and the assembled epoch go through: epoch_record.c; views of a split
 * epoch: epoch_view.c).
 */
#include "records_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t ec_epoch_index_bucket(const char *node_id, int nbuckets)
{
    return nbuckets > 0 ? (size_t)(ec__rec_fnv(node_id, strlen(node_id)) % (uint64_t)nbuckets) : 0;
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
        ec__member_to_pb(&ep->members[from + i], np, &ports[i * np], &mem[i]);
        memp[i] = &mem[i];
    }
    Ecoord__EpochChunk c = ECOORD__EPOCH_CHUNK__INIT;
    c.number = ep->number;
    c.chunk = (uint32_t)k;
    c.n_members = n;
    c.members = memp;
    return ec__rec_pack(&c.base, v, true, buf, len);
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
    int rc = ec__epoch_validate(ep, &v);
    if (rc < 0)
        return rc;
    if (ep->present != ep->nmembers)
        return ec_errorf(err, EC_EINVAL, "ec_epoch_split: epoch %llu is a view",
                         (unsigned long long)ep->number);
    if (ep->nmembers <= chunk_members)
        return ec__epoch_pack(ep, NULL, false, true, &out->head, &out->head_len, &v);
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
        cd[k] = ec__rec_fnv(out->chunk[k], out->chunk_len[k]);
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
        if ((rc = ec__rec_pack(&x.base, &v, true, &out->bucket[b], &out->bucket_len[b])) < 0)
            goto out;
        bd[b] = ec__rec_fnv(out->bucket[b], out->bucket_len[b]);
    }
    v.what = "epoch record";
    head_extra_t hx = {(uint32_t)C, (uint32_t)K, K, cd, bd};
    rc = ec__epoch_pack(ep, &hx, false, true, &out->head, &out->head_len, &v);
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

int ec__epoch_split_check(const Ecoord__Epoch *m, bool view, const vctx_t *v)
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
    Ecoord__Epoch *m = ec__rec_unpack(&ecoord__epoch__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    info->number = m->number;
    if (m->members_total == 0) {
        protobuf_c_message_free_unpacked(&m->base, NULL);
        return 0;
    }
    if ((rc = ec__epoch_split_check(m, false, &v)) == 0) {
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

int ec__epoch_chunk_unpack(const void *buf, size_t len, uint64_t digest, uint64_t number, int k,
                           size_t chunk_members, size_t n, const vctx_t *v, const vctx_t *cv,
                           Ecoord__EpochChunk **out)
{
    unsigned long long num = (unsigned long long)number;
    *out = NULL;
    if (!buf || ec__rec_fnv(buf, len) != digest)
        return bad(v, "epoch %llu: chunk %d %s its head's digest (a newer epoch's, or written "
                   "by another tool)", num, k, buf ? "does not match" : "is missing;");
    int rc = 0;
    Ecoord__EpochChunk *c = ec__rec_unpack(&ecoord__epoch_chunk__descriptor, buf, len, cv, &rc);
    if (!c)
        return rc;
    size_t from = (size_t)k * chunk_members;
    size_t want = n - from < chunk_members ? n - from : chunk_members;
    if (c->number != number || c->chunk != (uint32_t)k || c->n_members != want) {
        rc = bad(v, "epoch %llu: chunk %d is epoch %llu's chunk %u with %zu members, expected "
                 "%zu", num, k, (unsigned long long)c->number, c->chunk, c->n_members, want);
        protobuf_c_message_free_unpacked(&c->base, NULL);
        return rc;
    }
    *out = c;
    return 0;
}

int ec_epoch_assemble(const void *head, size_t head_len, const void *const *chunk,
                      const size_t *chunk_len, int nchunks, const char *key, ec_epoch_t **out,
                      ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "epoch record", key};
    *out = NULL;
    int rc = 0;
    Ecoord__Epoch *m = ec__rec_unpack(&ecoord__epoch__descriptor, head, head_len, &v, &rc);
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
        rc = ec__epoch_from_pb(m, false, &v, out); /* a whole record: nothing to assemble */
        goto out;
    }
    if ((rc = ec__epoch_split_check(m, false, &v)) < 0)
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
    vctx_t cv = {err, EC_ECORRUPT, "epoch chunk", key};
    for (int k = 0; k < nchunks; k++) {
        if ((rc = ec__epoch_chunk_unpack(chunk[k], chunk_len[k], m->chunk_digest[k], m->number,
                                         k, C, N, &v, &cv, &cs[k])) < 0)
            goto out;
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
    rc = ec__epoch_from_pb(m, false, &v, out);
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
    if (ec__rec_fnv(buf, len) != digest)
        return bad(&v, "epoch %llu: index bucket %d does not match its head's digest (a newer "
                   "epoch's, or written by another tool)", (unsigned long long)number, bucket);
    int rc = 0;
    Ecoord__EpochIndex *x = ec__rec_unpack(&ecoord__epoch_index__descriptor, buf, len, &v, &rc);
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
