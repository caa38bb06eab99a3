/* Rules checked: an epoch delta (coord/core/epoch_delta.c) rebuilds exactly the
 * record it was made from, byte for byte (digest checked), for the changes
 * a job goes through: a loss that compacts the M_ids after it, a standby
 * taking a lost member's M_id, a join, a restart (same members, new
 * incarnation), a new header only; it is much smaller than the record for
 * a large epoch; and without the right base, or with a digest that does not
 * match, it says "read the epoch key" instead of guessing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "epoch_delta.h"

static ec_epoch_t *mk(uint64_t number, int M, int N, int first_id)
{
    ec_epoch_t *ep = ec_epoch_new(M, N);
    ep->number = number;
    ep->job_id = strdup("job");
    ep->leader_id = strdup("n0");
    ep->leader_rev = 7;
    ep->reason = EC_REASON_START;
    ep->run = 1;
    for (int i = 0; i < M; i++) {
        char b[64];
        snprintf(b, sizeof b, "trainjob-worker-%d", first_id + i);
        ep->members[i].node_id = strdup(b);
        snprintf(b, sizeof b, "10.0.%d.%d", (first_id + i) / 256, (first_id + i) % 256);
        ep->members[i].host = strdup(b);
        for (int j = 0; j < N; j++)
            ep->members[i].ports[j] = (uint16_t)(29500 + j);
        ep->members[i].master_port = 29400;
        ep->members[i].incarnation = 1;
        ep->members[i].probe_port = 29399;
    }
    return ep;
}

/* Encode ep, make its delta from base, apply it to base: the same bytes. */
static size_t roundtrip(const ec_epoch_t *base, const ec_epoch_t *ep, size_t *full)
{
    void *raw, *d, *out;
    size_t rl, dl, ol;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_epoch_encode_whole(ep, &raw, &rl, &err), 0);
    ck_assert_int_eq(ec_epoch_delta_encode(base, ep, raw, rl, &d, &dl, &err), 0);
    uint64_t num = 0;
    int rc = ec_epoch_delta_apply(base, d, dl, &num, &out, &ol, &err);
    ck_assert_msg(rc == 1, "delta not applied (rc %d: %s)", rc, err.msg);
    ck_assert_uint_eq(num, ep->number);
    ck_assert_uint_eq(ol, rl);
    ck_assert(!memcmp(out, raw, rl));
    free(raw);
    free(d);
    free(out);
    *full = rl;
    return dl;
}

START_TEST(loss_compacting_mids_is_two_runs)
{
    ec_epoch_t *a = mk(1, 1000, 8, 0);
    void *raw;
    size_t rl;
    ck_assert_int_eq(ec_epoch_encode(a, &raw, &rl, NULL), 0);
    ec_epoch_t *d;
    ck_assert_int_eq(ec_epoch_decode(raw, rl, NULL, &d, NULL), 0); /* what a follower holds */
    free(raw);
    /* member 500 lost: 501.. move down one M_id */
    ec_epoch_t *b = mk(2, 999, 8, 0);
    for (int i = 500; i < 999; i++) {
        free(b->members[i].node_id);
        free(b->members[i].host);
        ec_member_t *src = &a->members[i + 1];
        b->members[i].node_id = strdup(src->node_id);
        b->members[i].host = strdup(src->host);
    }
    b->reason = EC_REASON_LOST;
    b->reason_detail = strdup("trainjob-worker-500 missing");
    size_t full, dl = roundtrip(d, b, &full);
    fprintf(stderr, "# 1000 x 8, one lost: delta %zu bytes, record %zu\n", dl, full);
    ck_assert_uint_lt(dl * 20, full);
    ec_epoch_free(a);
    ec_epoch_free(b);
    ec_epoch_free(d);
}
END_TEST

START_TEST(standby_join_restart_and_header_only)
{
    ec_epoch_t *a = mk(4, 300, 2, 0);
    size_t full;
    /* standby (id 5000) takes M_id 17 */
    ec_epoch_t *b = mk(5, 300, 2, 0);
    free(b->members[17].node_id);
    b->members[17].node_id = strdup("standby-5000");
    ck_assert_uint_lt(roundtrip(a, b, &full) * 5, full);
    /* a join at the end */
    ec_epoch_t *c = mk(6, 301, 2, 0);
    ck_assert_uint_lt(roundtrip(a, c, &full) * 5, full);
    /* a restart: same members, one incarnation up */
    ec_epoch_t *r = mk(7, 300, 2, 0);
    r->members[3].incarnation = 2;
    r->members[5].probe_port = 29398; /* its agent moved its probe port alone */
    r->reason = EC_REASON_RESTART;
    ck_assert_uint_lt(roundtrip(a, r, &full) * 5, full);
    /* the header only (a new leader re-signing the same members) */
    ec_epoch_t *h = mk(8, 300, 2, 0);
    free(h->leader_id);
    h->leader_id = strdup("n9");
    h->leader_rev = 99;
    ck_assert_uint_lt(roundtrip(a, h, &full) * 5, full);
    ec_epoch_free(a);
    ec_epoch_free(b);
    ec_epoch_free(c);
    ec_epoch_free(r);
    ec_epoch_free(h);
}
END_TEST

START_TEST(without_the_base_read_the_epoch_key)
{
    ec_epoch_t *a = mk(1, 200, 2, 0), *b = mk(2, 199, 2, 0), *other = mk(7, 200, 2, 0);
    void *raw, *d, *out = (void *)0x1;
    size_t rl, dl, ol;
    uint64_t num = 0;
    ck_assert_int_eq(ec_epoch_encode(b, &raw, &rl, NULL), 0);
    ck_assert_int_eq(ec_epoch_delta_encode(a, b, raw, rl, &d, &dl, NULL), 0);
    ck_assert_int_eq(ec_epoch_delta_apply(NULL, d, dl, &num, &out, &ol, NULL), 0);
    ck_assert_uint_eq(num, 2);
    ck_assert_ptr_null(out);
    ck_assert_int_eq(ec_epoch_delta_apply(other, d, dl, &num, &out, &ol, NULL), 0);
    /* the same delta claiming another record (its digest is of other bytes) */
    void *bad;
    size_t bl;
    ck_assert_int_eq(ec_epoch_delta_encode(a, b, "other", 5, &bad, &bl, NULL), 0);
    uint64_t pn = 0, pb = 0;
    ck_assert_int_eq(ec_epoch_delta_peek(bad, bl, &pn, &pb), 0);
    ck_assert(pn == 2 && pb == 1);
    ck_assert_int_eq(ec_epoch_delta_apply(a, bad, bl, &num, &out, &ol, NULL), 0);
    ck_assert_ptr_null(out);
    /* not a delta at all */
    ec_error_t err = {0};
    ck_assert_int_eq(ec_epoch_delta_apply(a, "junk", 4, &num, &out, &ol, &err), EC_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "epoch delta"));
    /* no base: a full marker, which always says "read the epoch key" */
    void *m;
    size_t ml;
    ck_assert_int_eq(ec_epoch_delta_encode(NULL, b, raw, rl, &m, &ml, NULL), 0);
    ck_assert_int_eq(ec_epoch_delta_apply(a, m, ml, &num, &out, &ol, NULL), 0);
    ck_assert_uint_lt(ml, 100);
    ck_assert_int_eq(ec_epoch_delta_peek(m, ml, &pn, &pb), 0);
    ck_assert(pn == 2 && pb == 0);
    ck_assert_int_eq(ec_epoch_delta_peek("junk", 4, &pn, &pb), EC_ECORRUPT);
    free(bad);
    free(m);
    free(raw);
    free(d);
    ec_epoch_free(a);
    ec_epoch_free(b);
    ec_epoch_free(other);
}
END_TEST

/* An epoch larger than one etcd value (published split) still goes to
 * followers as a small delta; one where nearly everything changed is a
 * full marker, not an error. */
START_TEST(epoch_above_one_value_goes_as_a_delta)
{
    int M = 40000;
    ec_epoch_t *a = mk(1, M, 8, 0), *b = mk(2, M - 1, 8, 0);
    void *raw;
    size_t rl;
    ck_assert_int_eq(ec_epoch_encode_whole(a, &raw, &rl, NULL), 0);
    ck_assert_uint_gt(rl, EC_RECORD_MAX_BYTES);
    ec_epoch_t *d;
    ck_assert_int_eq(ec_epoch_decode(raw, rl, NULL, &d, NULL), 0);
    free(raw);
    for (int i = 123; i < M - 1; i++) {
        free(b->members[i].node_id);
        free(b->members[i].host);
        b->members[i].node_id = strdup(a->members[i + 1].node_id);
        b->members[i].host = strdup(a->members[i + 1].host);
    }
    b->reason = EC_REASON_LOST;
    size_t full, dl = roundtrip(d, b, &full);
    ck_assert_uint_lt(dl, 1024);
    fprintf(stderr, "# %d x 8 (%zu bytes whole), one lost: delta %zu bytes\n", M, full, dl);
    /* every member new (another job's hosts): read the epoch instead */
    ec_epoch_t *c = mk(3, M, 8, 70000);
    void *craw, *cd, *out = NULL;
    size_t crl, cdl, ol;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_epoch_encode_whole(c, &craw, &crl, NULL), 0);
    ck_assert_msg(ec_epoch_delta_encode(b, c, craw, crl, &cd, &cdl, &err) == 0, "%s", err.msg);
    ck_assert_uint_lt(cdl, 200);
    ck_assert_int_eq(ec_epoch_delta_apply(b, cd, cdl, NULL, &out, &ol, &err), 0);
    free(craw);
    free(cd);
    ec_epoch_free(a);
    ec_epoch_free(b);
    ec_epoch_free(c);
    ec_epoch_free(d);
}
END_TEST

/* ---- views of split epochs ---- */

/* ep as the leader publishes it: split in chunks of C, its digests set. */
static ec_epoch_parts_t publish(ec_epoch_t *ep, int C)
{
    ec_epoch_parts_t p;
    ec_error_t err = {0};
    ck_assert_msg(ec_epoch_split(ep, C, &p, &err) == 0, "%s", err.msg);
    ec_epoch_split_t info;
    ck_assert_int_eq(ec_epoch_head_info(p.head, p.head_len, NULL, &info, NULL), 1);
    free(ep->chunk_digest);
    ep->chunk_members = info.chunk_members;
    ep->nchunks = info.nchunks;
    ep->chunk_digest = info.chunk_digest;
    info.chunk_digest = NULL;
    ec_epoch_split_free(&info);
    return p;
}

/* What follower `self` reads of a published epoch: the head, its own
 * chunk and the next (as ec_epoch_fetch_view does, without etcd). */
static ec_epoch_t *view_of(const ec_epoch_parts_t *p, const ec_epoch_t *ep, const char *self)
{
    ec_epoch_t *v = NULL;
    ec_error_t err = {0};
    ck_assert_msg(ec_epoch_decode_view(p->head, p->head_len, NULL, &v, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(v->present, 1);
    int m = ec_epoch_find_member(ep, self), k = m / v->chunk_members;
    for (int c = k - 1; c <= k + 1; c++) /* its own and those on either side */
        if (c >= 0 && c < v->nchunks)
            ck_assert_int_eq(ec_epoch_view_add_chunk(v, c, p->chunk[c], p->chunk_len[c], &err), 0);
    /* the bytes a coordinator keeps decode to the same view */
    void *b;
    size_t l;
    ck_assert_msg(ec_epoch_encode_view(v, &b, &l, &err) == 0, "%s", err.msg);
    ec_epoch_t *back = NULL;
    ck_assert_msg(ec_epoch_decode_view(b, l, NULL, &back, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(back->present, v->present);
    ck_assert_int_eq(ec_epoch_find_member(back, self), m);
    ec_epoch_free(back);
    free(b);
    return v;
}

/* Apply next's delta from prev to follower self's view of prev: 1 with the
 * view (its members equal to next's), or 0. */
static int view_step(ec_epoch_t *prev, ec_epoch_t **view, ec_epoch_t *next, int C,
                     const char *self, ec_epoch_parts_t *np)
{
    *np = publish(next, C);
    void *raw, *d;
    size_t rl, dl;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_epoch_encode_whole(next, &raw, &rl, &err), 0);
    ck_assert_msg(ec_epoch_delta_encode(prev, next, raw, rl, &d, &dl, &err) == 0, "%s", err.msg);
    free(raw);
    ec_epoch_t *nv = NULL;
    uint64_t num = 0;
    int rc = ec_epoch_delta_apply_view(*view, d, dl, self, &num, &nv, &err);
    ck_assert_msg(rc >= 0, "%s", err.msg);
    /* a whole base still takes the same delta (the whole digest) */
    void *out = NULL;
    size_t ol;
    ck_assert_int_eq(ec_epoch_delta_apply(prev, d, dl, NULL, &out, &ol, &err), 1);
    free(out);
    free(d);
    if (rc == 1) {
        ck_assert_uint_eq(num, next->number);
        for (int i = 0; i < next->nmembers; i++)
            if (nv->members[i].node_id)
                ck_assert_str_eq(nv->members[i].node_id, next->members[i].node_id);
        int m = ec_epoch_find_member(next, self);
        ck_assert_int_eq(ec_epoch_find_member(nv, self), m);
        ck_assert(ec_epoch_view_has_chunk(nv, m / C));
        ck_assert_ptr_nonnull(nv->members[0].node_id);
        ec_epoch_free(*view);
        *view = nv;
    }
    return rc;
}

/* Remove member `at` of ep (number+1): the M_ids after it move down. */
static ec_epoch_t *lose(const ec_epoch_t *ep, int at)
{
    ec_epoch_t *n = ec_epoch_new(ep->nmembers - 1, ep->nproc);
    n->number = ep->number + 1;
    n->job_id = strdup("job");
    n->leader_id = strdup("n0");
    n->leader_rev = 7;
    n->reason = EC_REASON_LOST;
    n->run = 1;
    for (int i = 0, j = 0; i < ep->nmembers; i++) {
        if (i == at)
            continue;
        const ec_member_t *a = &ep->members[i];
        ec_member_t *b = &n->members[j++];
        b->node_id = strdup(a->node_id);
        b->host = strdup(a->host);
        memcpy(b->ports, a->ports, (size_t)ep->nproc * sizeof(uint16_t));
        b->master_port = a->master_port;
        b->incarnation = a->incarnation;
        b->probe_port = a->probe_port;
    }
    return n;
}

START_TEST(a_view_follows_losses_joins_and_restarts_through_deltas)
{
    int C = 16, M = 200;
    ec_epoch_t *e = mk(1, M, 8, 0);
    ec_epoch_parts_t p = publish(e, C);
    const char *self = "trainjob-worker-100"; /* M_id 100: chunk 6, holds 6 and 7 */
    ec_epoch_t *v = view_of(&p, e, self);
    ck_assert_int_eq(v->present, 1 + 3 * C);
    ec_epoch_parts_free(&p);
    int applied = 0, read = 0;
    /* losses before it: each moves its window down by one; the next
     * chunk's members cover it for C losses */
    for (int i = 0; i < 40; i++) {
        ec_epoch_t *n = lose(e, 3);
        int rc = view_step(e, &v, n, C, self, &p);
        if (rc == 1) {
            applied++;
        } else {
            /* it reads its view again from the published parts */
            read++;
            ec_epoch_free(v);
            v = view_of(&p, n, self);
        }
        ec_epoch_parts_free(&p);
        ec_epoch_free(e);
        e = n;
    }
    fprintf(stderr, "# 40 losses before a follower (chunks of %d): %d deltas applied to its "
            "view, %d reads of its chunks\n", C, applied, read);
    ck_assert_int_ge(applied, 37);
    ck_assert_int_le(read, 3);
    /* a loss after it, a restart (incarnation) of a member it holds, a join */
    ec_epoch_t *n = lose(e, e->nmembers - 5);
    ck_assert_int_eq(view_step(e, &v, n, C, self, &p), 1);
    ec_epoch_parts_free(&p);
    ec_epoch_free(e);
    e = n;
    n = ec_epoch_dup(e);
    n->number++;
    n->reason = EC_REASON_RESTART;
    int me = ec_epoch_find_member(e, self);
    n->members[me].incarnation++;
    free(n->chunk_digest);
    n->chunk_digest = NULL;
    ck_assert_int_eq(view_step(e, &v, n, C, self, &p), 1);
    ck_assert_uint_eq(v->members[me].incarnation, e->members[me].incarnation + 1);
    ec_epoch_parts_free(&p);
    ec_epoch_free(e);
    e = n;
    ec_epoch_t *j = mk(e->number + 1, e->nmembers + 1, 8, 0);
    for (int i = 0; i < e->nmembers; i++) {
        free(j->members[i].node_id);
        free(j->members[i].host);
        j->members[i].node_id = strdup(e->members[i].node_id);
        j->members[i].host = strdup(e->members[i].host);
        j->members[i].incarnation = e->members[i].incarnation;
    }
    free(j->members[e->nmembers].node_id);
    j->members[e->nmembers].node_id = strdup("joiner");
    free(j->members[e->nmembers].host);
    j->members[e->nmembers].host = strdup("10.9.9.9");
    j->reason = EC_REASON_JOIN;
    ck_assert_int_eq(view_step(e, &v, j, C, self, &p), 1);
    ec_epoch_parts_free(&p);
    /* a view is never taken for a whole record, nor encoded as one */
    void *b;
    size_t l;
    ck_assert_int_eq(ec_epoch_encode(v, &b, &l, NULL), EC_EINVAL);
    ck_assert_int_eq(ec_epoch_encode_whole(v, &b, &l, NULL), EC_EINVAL);
    /* a delta for another base, or a whole (format 1) delta: read instead */
    ec_epoch_t *k2 = lose(j, 0);
    void *raw, *d, *o = NULL;
    size_t rl, dl;
    ck_assert_int_eq(ec_epoch_encode_whole(k2, &raw, &rl, NULL), 0);
    ck_assert_int_eq(ec_epoch_delta_encode(j, k2, raw, rl, &d, &dl, NULL), 0); /* no digests */
    ck_assert_int_eq(ec_epoch_delta_apply_view(v, d, dl, self, NULL, (ec_epoch_t **)&o, NULL), 0);
    free(raw);
    free(d);
    ec_epoch_free(k2);
    ec_epoch_free(v);
    ec_epoch_free(e);
    ec_epoch_free(j);
}
END_TEST

/* A member-0 loss moves the master: the delta carries the new member 0,
 * so views near and far from it apply it; a forged digest of a view's own
 * chunk is refused. */
START_TEST(a_view_checks_member_0_and_its_own_chunk)
{
    int C = 4;
    ec_epoch_t *e = mk(1, 20, 2, 0);
    ec_epoch_parts_t p = publish(e, C);
    ec_epoch_t *far = view_of(&p, e, "trainjob-worker-10"), *near = view_of(&p, e, "trainjob-worker-2");
    ec_epoch_parts_free(&p);
    ec_epoch_t *n = lose(e, 0), *nv = NULL;
    /* the new member 0 rides in the delta's carrier: a view far from it
     * applies the delta too */
    ck_assert_int_eq(view_step(e, &far, n, C, "trainjob-worker-10", &p), 1);
    ck_assert_str_eq(far->members[0].node_id, "trainjob-worker-1");
    ec_epoch_parts_free(&p);
    ck_assert_int_eq(view_step(e, &near, n, C, "trainjob-worker-2", &p), 1);
    ck_assert_str_eq(near->members[0].node_id, "trainjob-worker-1");
    ec_epoch_parts_free(&p);
    /* a forged chunk digest: refused (0: read the epoch instead) */
    ec_epoch_t *n2 = lose(n, 7);
    p = publish(n2, C);
    n2->chunk_digest[0] ^= 1; /* its own chunk */
    void *raw, *d;
    size_t rl, dl;
    ck_assert_int_eq(ec_epoch_encode_whole(n2, &raw, &rl, NULL), 0);
    ck_assert_int_eq(ec_epoch_delta_encode(n, n2, raw, rl, &d, &dl, NULL), 0);
    ck_assert_int_eq(ec_epoch_delta_apply_view(near, d, dl, "trainjob-worker-2", NULL, &nv, NULL), 0);
    ck_assert_ptr_null(nv);
    free(raw);
    free(d);
    ec_epoch_parts_free(&p);
    ec_epoch_free(far);
    ec_epoch_free(near);
    ec_epoch_free(e);
    ec_epoch_free(n);
    ec_epoch_free(n2);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("epoch_delta", NULL, NULL,
                          EC_CHECK_TESTS(
                              loss_compacting_mids_is_two_runs,
                              standby_join_restart_and_header_only,
                              without_the_base_read_the_epoch_key,
                              epoch_above_one_value_goes_as_a_delta,
                              a_view_follows_losses_joins_and_restarts_through_deltas,
                              a_view_checks_member_0_and_its_own_chunk));
}

EC_CHECK_MAIN(suite)
