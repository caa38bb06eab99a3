/* The fault-injecting etcd proxy (tests/lib/etcd_proxy.h), with the
 * project's own etcd client against a real etcd.  The rules checked:
 *
 *  - in PASS, puts and gets through the proxy work and are counted;
 *  - with replies dropped, a put and a txn return an error to the client
 *    although etcd applied them (read back directly): the ambiguous commit;
 *    the one-shot variant cuts exactly one request, the next call passes, and
 *    a retried create-if-absent txn then finds its own earlier write;
 *  - paused, a call fails by its deadline; resumed, calls succeed again;
 *  - cut (refusing new connections), calls fail; restored, the client
 *    reconnects by itself; a cut of one connection only is survived too;
 *  - a delay adds latency (measured and printed; only the lower bound the
 *    delay guarantees is asserted). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_select.h"
#include "etcd_proxy.h"
#include "harness.h"

static ec_embed_t *etcd;
static ec_etcd_t *direct; /* straight to etcd: what etcd really holds */
static ec_etcd_t *via;    /* through the proxy */
static ec_proxy_t *px;

static void setup(void)
{
    etcd = ec_test_etcd_start(NULL);
    direct = ec_test_client(ec_embed_endpoint(etcd));
    px = ec_proxy_start(ec_embed_endpoint(etcd));
    ck_assert_msg(px != NULL, "cannot start the proxy to %s", ec_embed_endpoint(etcd));
    via = ec_test_client(ec_proxy_endpoint(px));
    ec_etcd_set_call_timeout(via, (int)ec_test_ms(2000));
}

static void teardown(void)
{
    ec_etcd_destroy(via);
    via = NULL;
    ec_proxy_stop(px);
    px = NULL;
    ec_etcd_destroy(direct);
    direct = NULL;
    ec_embed_stop(etcd);
    etcd = NULL;
}

/* The value of key as etcd holds it (read directly), or NULL. */
static char *etcd_value(const char *key)
{
    ec_kv_t kv;
    bool found = false;
    ec_error_t err = {0};
    ck_assert_msg(ec_etcd_get(direct, key, &kv, &found, NULL, &err) == 0, "direct get: %s", err.msg);
    if (!found)
        return NULL;
    char *s = strndup((char *)kv.value, kv.value_len);
    ec_kv_free(&kv);
    return s;
}

typedef struct {
    const char *key, *value;
} put_t;

/* One put through the proxy succeeds (for polling until the client is back). */
static bool put_via(void *arg)
{
    put_t *p = arg;
    return ec_etcd_put(via, p->key, p->value, strlen(p->value), 0, NULL, NULL) == 0;
}

START_TEST(pass_forwards_and_counts)
{
    ec_error_t err = {0};
    ck_assert_msg(ec_etcd_put(via, "/px/a", "1", 1, 0, NULL, &err) == 0, "put: %s", err.msg);
    ec_kv_t kv;
    bool found = false;
    ck_assert_msg(ec_etcd_get(via, "/px/a", &kv, &found, NULL, &err) == 0, "get: %s", err.msg);
    ck_assert(found);
    ck_assert_str_eq((char *)kv.value, "1");
    ec_kv_free(&kv);
    ec_proxy_stats_t st;
    ec_proxy_stats(px, &st);
    printf("# pass: %llu connection(s), %llu requests, %llu answers, %llu B up, %llu B down\n",
           (unsigned long long)st.accepted, (unsigned long long)st.requests,
           (unsigned long long)st.answers, (unsigned long long)st.bytes_up,
           (unsigned long long)st.bytes_down);
    ck_assert_uint_ge(st.accepted, 1);
    ck_assert_uint_ge(st.requests, 3); /* the dial's Status, the put, the get */
    ck_assert_uint_ge(st.answers, 3);
    ck_assert_uint_gt(st.bytes_up, 0);
    ck_assert_uint_gt(st.bytes_down, 0);
    ck_assert_uint_eq(st.dropped_down, 0);
    ck_assert(ec_proxy_wait_requests(px, st.requests, 0)); /* already there */
}
END_TEST

START_TEST(drop_replies_makes_an_ambiguous_commit)
{
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_put(via, "/px/warm", "w", 1, 0, NULL, &err), 0);
    ec_proxy_stats_t before, after;
    ec_proxy_stats(px, &before);
    ec_proxy_set(px, EC_PROXY_DROP_REPLIES, 0);
    int rc = ec_etcd_put(via, "/px/amb", "applied", 7, 0, NULL, &err);
    ck_assert_msg(rc < 0, "the put through a proxy dropping replies succeeded");
    printf("# drop replies: put -> %s (%s)\n", ec_err_name(rc), err.msg);
    /* ...and yet etcd applied it. */
    char *v = etcd_value("/px/amb");
    ck_assert_msg(v != NULL, "etcd did not apply the put: no ambiguous commit");
    ck_assert_str_eq(v, "applied");
    free(v);
    ec_proxy_stats(px, &after);
    ck_assert_uint_gt(after.requests, before.requests);
    ck_assert_uint_gt(after.dropped_down, 0);
    ck_assert_uint_gt(after.cuts, before.cuts);

    /* A txn, too: create-if-absent applied, reported failed. */
    ec_cmp_t cmp = {.key = "/px/txn", .target = EC_CMP_VERSION, .result = EC_CMP_EQUAL, .number = 0};
    ec_op_t put = {.type = EC_OP_PUT, .key = "/px/txn", .value = "mine", .value_len = 4};
    ec_txn_result_t r;
    /* The put's cut left the client reconnecting: a call may fail before it
     * leaves the client.  Try until one reaches etcd (the proxy counts it). */
    int64_t t0 = ec_test_now_ms();
    ec_proxy_stats_t st = after;
    do {
        ec_proxy_stats(px, &before);
        rc = ec_etcd_txn(via, &cmp, 1, &put, 1, NULL, 0, &r, &err);
        ck_assert_msg(rc < 0, "the txn through a proxy dropping replies succeeded");
        ec_proxy_stats(px, &st);
    } while (st.requests == before.requests && ec_test_now_ms() - t0 < ec_test_ms(10000));
    ck_assert_msg(st.requests > before.requests, "no txn reached the proxy: %s", err.msg);
    v = etcd_value("/px/txn");
    ck_assert_msg(v != NULL, "etcd did not apply the txn");
    ck_assert_str_eq(v, "mine");
    free(v);
    ec_proxy_set(px, EC_PROXY_PASS, 0);
    put_t p = {"/px/after", "ok"};
    ck_assert_msg(ec_test_wait(put_via, &p, 10000), "no put went through after PASS");
}
END_TEST

START_TEST(drop_next_cuts_one_request_only)
{
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_put(via, "/px/warm", "w", 1, 0, NULL, &err), 0);
    ec_proxy_stats_t before, after;
    ec_proxy_stats(px, &before);
    ec_proxy_set(px, EC_PROXY_DROP_NEXT, 0);
    ec_cmp_t cmp = {.key = "/px/once", .target = EC_CMP_VERSION, .result = EC_CMP_EQUAL, .number = 0};
    ec_op_t put = {.type = EC_OP_PUT, .key = "/px/once", .value = "first", .value_len = 5};
    ec_txn_result_t r;
    int rc = ec_etcd_txn(via, &cmp, 1, &put, 1, NULL, 0, &r, &err);
    ck_assert_msg(rc < 0, "the one-shot did not cut the txn");
    printf("# drop next: txn -> %s (%s)\n", ec_err_name(rc), err.msg);
    char *v = etcd_value("/px/once");
    ck_assert_msg(v != NULL, "etcd did not apply the cut txn");
    free(v);
    ec_proxy_stats(px, &after);
    ck_assert_uint_eq(after.cuts, before.cuts + 1);
    /* The one-shot is spent: the retry passes, and the caller learns from
     * the else branch that its first attempt did commit. */
    int64_t t0 = ec_test_now_ms();
    rc = -1;
    while (rc < 0 && ec_test_now_ms() - t0 < ec_test_ms(10000))
        rc = ec_etcd_txn(via, &cmp, 1, &put, 1, NULL, 0, &r, &err);
    ck_assert_msg(rc == 0, "the retry after the one-shot failed: %s", err.msg);
    ck_assert_msg(!r.succeeded, "the retried create-if-absent ran its then-branch again");
    ec_txn_result_free(&r);
    ec_proxy_stats(px, &after);
    ck_assert_uint_eq(after.cuts, before.cuts + 1);
}
END_TEST

START_TEST(pause_times_out_then_resumes)
{
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_put(via, "/px/warm", "w", 1, 0, NULL, &err), 0);
    ec_etcd_set_call_timeout(via, 1000);
    ec_proxy_set(px, EC_PROXY_PAUSE, 0);
    int64_t t0 = ec_test_now_ms();
    int rc = ec_etcd_put(via, "/px/paused", "x", 1, 0, NULL, &err);
    int64_t took = ec_test_now_ms() - t0;
    printf("# pause: put -> %s after %lld ms (deadline 1000 ms)\n", ec_err_name(rc), (long long)took);
    ck_assert_msg(rc < 0, "a put went through a paused proxy");
    ck_assert_int_ge(took, 900);
    ck_assert_int_lt(took, 1000 + ec_test_ms(4000));
    /* Nothing reached etcd: the bytes were held, not forwarded. */
    char *v = etcd_value("/px/paused");
    ck_assert_ptr_null(v);
    ec_proxy_set(px, EC_PROXY_PASS, 0);
    ec_etcd_set_call_timeout(via, (int)ec_test_ms(2000));
    put_t p = {"/px/resumed", "y"};
    ck_assert_msg(ec_test_wait(put_via, &p, 10000), "no put went through after resuming");
    v = etcd_value("/px/resumed");
    ck_assert_ptr_nonnull(v);
    free(v);
}
END_TEST

START_TEST(cut_refuse_then_restore_reconnects)
{
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_put(via, "/px/warm", "w", 1, 0, NULL, &err), 0);
    ec_proxy_stats_t st;
    ec_proxy_stats(px, &st);
    uint64_t accepted = st.accepted;
    ec_proxy_set(px, EC_PROXY_CUT, 1);
    int rc = ec_etcd_put(via, "/px/cut", "x", 1, 0, NULL, &err);
    ck_assert_msg(rc < 0, "a put went through a cut proxy");
    printf("# cut: put -> %s (%s)\n", ec_err_name(rc), err.msg);
    ec_proxy_stats(px, &st);
    ck_assert_uint_eq(st.open, 0);
    ec_proxy_set(px, EC_PROXY_PASS, 0);
    int64_t t0 = ec_test_now_ms();
    put_t p = {"/px/restored", "y"};
    ck_assert_msg(ec_test_wait(put_via, &p, 15000), "the client never reconnected after the cut");
    ec_proxy_stats(px, &st);
    printf("# cut: reconnected in %lld ms (%llu refused meanwhile)\n",
           (long long)(ec_test_now_ms() - t0), (unsigned long long)st.refused);
    ck_assert_uint_gt(st.accepted, accepted);

    /* One connection cut on its own (no refusal): survived the same way. */
    uint64_t ids[8];
    size_t n = ec_proxy_conns(px, ids, 8);
    ck_assert_uint_ge(n, 1);
    ck_assert_int_eq(ec_proxy_set_conn(px, ids[0], EC_PROXY_CUT, 0), 0);
    ck_assert_int_lt(ec_proxy_set_conn(px, ids[0], EC_PROXY_PASS, 0), 0); /* gone */
    put_t q = {"/px/again", "z"};
    ck_assert_msg(ec_test_wait(put_via, &q, 15000),
                  "the client never reconnected after a one-connection cut");
    ck_assert(ec_proxy_wait_accepted(px, st.accepted + 1, ec_test_ms(5000)));
}
END_TEST

static long median_get_ms(int reps)
{
    long t[16];
    for (int i = 0; i < reps && i < 16; i++) {
        ec_kv_t kv;
        bool found;
        ec_error_t err = {0};
        int64_t t0 = ec_test_now_ms();
        ck_assert_msg(ec_etcd_get(via, "/px/d", &kv, &found, NULL, &err) == 0, "get: %s", err.msg);
        t[i] = (long)(ec_test_now_ms() - t0);
        if (found)
            ec_kv_free(&kv);
    }
    for (int i = 1; i < reps; i++) /* insertion sort: a handful of values */
        for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
            long x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[reps / 2];
}

/* A client whose very first call loses its connection mid-call (an etcd
 * leader change, a load balancer reset) connects anyway: the first contact
 * is retried within the dial deadline. */
START_TEST(first_contact_survives_a_dropped_answer)
{
    ec_proxy_stats_t before, after;
    ec_proxy_stats(px, &before);
    ec_proxy_set(px, EC_PROXY_DROP_NEXT, 0);
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ec_proxy_endpoint(px);
    ec_error_t err = {0};
    ec_etcd_t *cl = ec_etcd_create(&o, &err);
    ec_proxy_stats(px, &after);
    ck_assert_msg(cl != NULL, "first contact failed: %s", err.msg);
    ck_assert_uint_gt(after.cuts, before.cuts); /* the first answer really was lost */
    ec_etcd_destroy(cl);
}
END_TEST

START_TEST(delay_adds_latency)
{
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_put(via, "/px/d", "v", 1, 0, NULL, &err), 0);
    long base = median_get_ms(5);
    ec_proxy_set(px, EC_PROXY_DELAY, 100);
    long slow = median_get_ms(5);
    ec_proxy_set(px, EC_PROXY_PASS, 0);
    long back = median_get_ms(5);
    printf("# delay: median get %ld ms plain, %ld ms with 100 ms per chunk, %ld ms after\n", base,
           slow, back);
    /* A request and its answer each wait 100 ms at least: a floor, not a
     * timing guess. */
    ck_assert_int_ge(slow, 200);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t1400-etcd-proxy");
    TCase *t = tcase_create("proxy");
    tcase_add_checked_fixture(t, setup, teardown);
    ec_tcase_add(t, pass_forwards_and_counts);
    ec_tcase_add(t, drop_replies_makes_an_ambiguous_commit);
    ec_tcase_add(t, drop_next_cuts_one_request_only);
    ec_tcase_add(t, pause_times_out_then_resumes);
    ec_tcase_add(t, cut_refuse_then_restore_reconnects);
    ec_tcase_add(t, first_contact_survives_a_dropped_answer);
    ec_tcase_add(t, delay_adds_latency);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
