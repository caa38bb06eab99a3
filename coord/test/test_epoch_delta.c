/* Rules checked: an epoch delta (coord/epoch_delta.c) rebuilds exactly the
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
    /* the same delta claiming another record (digest) */
    char *bad = malloc(dl);
    memcpy(bad, d, dl);
    const char *head = "ecoord-epoch-delta 1 2 1 "; /* version, number, base, then digest */
    ck_assert(!strncmp(bad, head, strlen(head)));
    char *dig = bad + strlen(head);
    *dig = *dig == '0' ? '1' : '0';
    ck_assert_int_eq(ec_epoch_delta_apply(a, bad, dl, &num, &out, &ol, NULL), 0);
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

static Suite *suite(void)
{
    Suite *s = suite_create("epoch_delta");
    TCase *t = tcase_create("delta");
    tcase_add_test(t, loss_compacting_mids_is_two_runs);
    tcase_add_test(t, standby_join_restart_and_header_only);
    tcase_add_test(t, without_the_base_read_the_epoch_key);
    tcase_add_test(t, epoch_above_one_value_goes_as_a_delta);
    suite_add_tcase(s, t);
    return s;
}

EC_CHECK_MAIN(suite)
