/* Watches against a real etcd: puts and deletes arrive in revision order with
 * prev_kv, the last event of each response marked (ev->more false); across kill -9 of etcd and a restart on the same port and data
 * dir the watch resumes so that no event is lost or repeated; a compacted
 * start revision is reported as its own event.  Several keys share one stream,
 * each key's events in order and exactly once across a kill -9. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_http.h"
#include "harness.h"

static ec_embed_t *etcd;
static ec_etcd_t *c;

static void setup(void)
{
    etcd = ec_test_etcd_start(NULL);
    c = ec_test_client(ec_embed_endpoint(etcd));
}

static void teardown(void)
{
    ec_test_down(&etcd, &c);
}

#define MAXEV 4096
typedef struct {
    pthread_mutex_t lock;
    int n, created, compacted, broken;
    int64_t compact_rev;
    ec_watch_event_type_t type[MAXEV];
    int64_t rev[MAXEV];
    char key[MAXEV][32];
    char val[MAXEV][16];
    char prev[MAXEV][16];
    bool more[MAXEV];
} rec_t;

static rec_t *rec_new(void)
{
    rec_t *r = calloc(1, sizeof(*r));
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

static void on_event(const ec_watch_event_t *ev, void *arg)
{
    rec_t *r = arg;
    pthread_mutex_lock(&r->lock);
    switch (ev->type) {
    case EC_WATCH_CREATED:
        r->created++;
        break;
    case EC_WATCH_COMPACTED:
        r->compacted++;
        r->compact_rev = ev->compact_revision;
        break;
    case EC_WATCH_BROKEN:
        r->broken++;
        break;
    default:
        if (r->n < MAXEV) {
            r->type[r->n] = ev->type;
            r->rev[r->n] = ev->revision;
            snprintf(r->key[r->n], 32, "%s", ev->kv->key);
            snprintf(r->val[r->n], 16, "%s", ev->kv->value ? (char *)ev->kv->value : "");
            snprintf(r->prev[r->n], 16, "%s", ev->prev_kv ? (char *)ev->prev_kv->value : "");
            r->more[r->n] = ev->more;
            r->n++;
        }
    }
    pthread_mutex_unlock(&r->lock);
}

typedef struct {
    rec_t *r;
    int n;
} want_t;

static bool have_n(void *arg)
{
    want_t *w = arg;
    pthread_mutex_lock(&w->r->lock);
    bool ok = w->r->n >= w->n;
    pthread_mutex_unlock(&w->r->lock);
    return ok;
}

static bool created(void *arg)
{
    rec_t *r = arg;
    pthread_mutex_lock(&r->lock);
    bool ok = r->created > 0;
    pthread_mutex_unlock(&r->lock);
    return ok;
}

START_TEST(puts_and_deletes_in_order)
{
    ec_error_t err = {0};
    rec_t *r = rec_new();
    ec_watch_t *w = ec_watch_start(c, "/w/", true, 0, on_event, r, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert(ec_test_wait(created, r, 5000));
    ck_assert_int_eq(ec_etcd_put(c, "/w/a", "1", 1, 0, NULL, &err), 0);
    ck_assert_int_eq(ec_etcd_put(c, "/w/a", "2", 1, 0, NULL, &err), 0);
    ck_assert_int_eq(ec_etcd_put(c, "/other", "x", 1, 0, NULL, &err), 0);
    ck_assert_int_eq(ec_etcd_delete(c, "/w/a", false, NULL, &err), 0);
    want_t want = {r, 3};
    ck_assert(ec_test_wait(have_n, &want, 5000));
    ec_watch_stop(w);
    ck_assert_int_eq(r->n, 3); /* /other is outside the prefix */
    ck_assert_int_eq(r->type[0], EC_WATCH_PUT);
    ck_assert_str_eq(r->val[0], "1");
    ck_assert_str_eq(r->prev[0], "");
    ck_assert_int_eq(r->type[1], EC_WATCH_PUT);
    ck_assert_str_eq(r->val[1], "2");
    ck_assert_str_eq(r->prev[1], "1");
    ck_assert_int_eq(r->type[2], EC_WATCH_DELETE);
    ck_assert_str_eq(r->key[2], "/w/a");
    ck_assert_str_eq(r->prev[2], "2");
    ck_assert_int_lt(r->rev[0], r->rev[1]);
    ck_assert_int_lt(r->rev[1], r->rev[2]);
    free(r);
}
END_TEST

/* The events of one response say which is its last (ev->more false): a
 * transaction's puts are one revision, delivered together, so a consumer
 * can apply them as one change (the leader plans once for them). */
START_TEST(one_transactions_events_marked_as_one_batch)
{
    ec_error_t err = {0};
    rec_t *r = rec_new();
    ec_watch_t *w = ec_watch_start(c, "/b/", true, 0, on_event, r, &err);
    ck_assert_ptr_nonnull(w);
    ck_assert(ec_test_wait(created, r, 5000));
    ec_op_t ops[3] = {{.type = EC_OP_PUT, .key = "/b/x", .value = "1", .value_len = 1},
                      {.type = EC_OP_PUT, .key = "/other", .value = "1", .value_len = 1},
                      {.type = EC_OP_PUT, .key = "/b/y", .value = "1", .value_len = 1}};
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, ops, 3, NULL, 0, NULL, &err), 0);
    ck_assert_int_eq(ec_etcd_put(c, "/b/z", "2", 1, 0, NULL, &err), 0);
    want_t want = {r, 3};
    ck_assert(ec_test_wait(have_n, &want, 5000));
    ec_watch_stop(w);
    ck_assert_int_eq(r->n, 3);
    ck_assert_str_eq(r->key[0], "/b/x");
    ck_assert(r->more[0]);                  /* /b/y follows in the same response */
    ck_assert_str_eq(r->key[1], "/b/y");
    ck_assert(!r->more[1]);                 /* the transaction's last */
    ck_assert_int_eq(r->rev[0], r->rev[1]); /* one revision */
    ck_assert_str_eq(r->key[2], "/b/z");
    ck_assert(!r->more[2]);
    free(r);
}
END_TEST

static bool broken(void *arg)
{
    rec_t *r = arg;
    pthread_mutex_lock(&r->lock);
    bool ok = r->broken > 0;
    pthread_mutex_unlock(&r->lock);
    return ok;
}

START_TEST(resume_across_etcd_kill9)
{
    ec_error_t err = {0};
    rec_t *r = rec_new();
    ec_watch_t *w = ec_watch_start(c, "/r/", true, 0, on_event, r, &err);
    ck_assert(ec_test_wait(created, r, 5000));
    char key[32], val[16];
    int i = 0;
    for (; i < 50; i++) {
        snprintf(key, sizeof(key), "/r/k%03d", i);
        snprintf(val, sizeof(val), "%d", i);
        ck_assert_int_eq(ec_etcd_put(c, key, val, strlen(val), 0, NULL, &err), 0);
    }
    want_t want = {r, 50};
    ck_assert(ec_test_wait(have_n, &want, 5000));
    ec_embed_kill(etcd, SIGKILL);
    ck_assert_msg(ec_test_wait(broken, r, 5000), "the watch did not notice etcd dying");
    ck_assert_int_eq(ec_embed_restart(etcd, &err), 0);
    /* Written before the watch is back: it must replay these from rev+1. */
    for (; i < 100; i++) {
        snprintf(key, sizeof(key), "/r/k%03d", i);
        snprintf(val, sizeof(val), "%d", i);
        int rc;
        int64_t dl = ec_test_now_ms() + ec_test_ms(10000);
        while ((rc = ec_etcd_put(c, key, val, strlen(val), 0, NULL, &err)) == EC_EUNAVAILABLE &&
               ec_test_now_ms() < dl)
            ; /* the channel reconnects within its backoff */
        ck_assert_msg(rc == 0, "put after restart: %s", err.msg);
    }
    want.n = 100;
    ck_assert_msg(ec_test_wait(have_n, &want, 10000), "only %d of 100 events", r->n);
    /* Let any duplicate arrive before judging: one more marker event. */
    ck_assert_int_eq(ec_etcd_put(c, "/r/zz", "end", 3, 0, NULL, &err), 0);
    want.n = 101;
    ck_assert(ec_test_wait(have_n, &want, 5000));
    ec_watch_stop(w);
    ck_assert_int_eq(r->n, 101);
    for (int j = 0; j < 100; j++) {
        snprintf(val, sizeof(val), "%d", j);
        ck_assert_str_eq(r->val[j], val);
        if (j)
            ck_assert_int_lt(r->rev[j - 1], r->rev[j]);
    }
    ck_assert_int_ge(r->created, 2); /* the stream was re-created */
    free(r);
}
END_TEST

static bool compacted(void *arg)
{
    rec_t *r = arg;
    pthread_mutex_lock(&r->lock);
    bool ok = r->compacted > 0;
    pthread_mutex_unlock(&r->lock);
    return ok;
}

START_TEST(compacted_start_reported)
{
    ec_error_t err = {0};
    int64_t first, last = 0;
    ck_assert_int_eq(ec_etcd_put(c, "/cw/k", "0", 1, 0, &first, &err), 0);
    for (int i = 1; i < 10; i++)
        ck_assert_int_eq(ec_etcd_put(c, "/cw/k", "x", 1, 0, &last, &err), 0);
    ck_assert_int_eq(ec_etcd_compact(c, last, true, &err), 0);
    rec_t *r = rec_new();
    ec_watch_t *w = ec_watch_start(c, "/cw/", true, first, on_event, r, &err);
    ck_assert(ec_test_wait(compacted, r, 5000));
    ck_assert_int_eq(r->compact_rev, last);
    ck_assert_int_eq(r->n, 0);
    ec_watch_stop(w);
    /* From the compact revision on, the watch works again. */
    r->compacted = 0;
    w = ec_watch_start(c, "/cw/", true, last, on_event, r, &err);
    want_t want = {r, 1};
    ck_assert(ec_test_wait(have_n, &want, 5000));
    ec_watch_stop(w);
    ck_assert_int_eq(r->rev[0], last);
    ck_assert_int_eq(r->compacted, 0);
    free(r);
}
END_TEST

START_TEST(stop_while_idle_is_prompt)
{
    ec_error_t err = {0};
    rec_t *r = rec_new();
    ec_watch_t *w = ec_watch_start(c, "/idle", false, 0, on_event, r, &err);
    ck_assert(ec_test_wait(created, r, 5000));
    int64_t t0 = ec_test_now_ms();
    ec_watch_stop(w);
    ck_assert_int_le(ec_test_now_ms() - t0, ec_test_ms(500));
    free(r);
}
END_TEST


/* Watch streams etcd has opened so far (its /metrics on the client port). */
static long watch_streams(void)
{
    return ec_test_etcd_watch_streams(etcd);
}

static bool created_n(void *arg)
{
    want_t *w = arg;
    pthread_mutex_lock(&w->r->lock);
    bool ok = w->r->created >= w->n;
    pthread_mutex_unlock(&w->r->lock);
    return ok;
}

/* Put /m/a and /m/b alternately (and /m/c, not watched) with values from..to-1. */
static void put_ab(int from, int to)
{
    ec_error_t err = {0};
    for (int i = from; i < to; i++) {
        char val[16];
        snprintf(val, sizeof(val), "%d", i);
        const char *key = i % 3 == 0 ? "/m/a" : i % 3 == 1 ? "/m/b" : "/m/c";
        int rc;
        int64_t dl = ec_test_now_ms() + ec_test_ms(10000);
        while ((rc = ec_etcd_put(c, key, val, strlen(val), 0, NULL, &err)) == EC_EUNAVAILABLE &&
               ec_test_now_ms() < dl)
            ; /* the channel reconnects within its backoff */
        ck_assert_msg(rc == 0, "put %s: %s", key, err.msg);
    }
}

/* ec_watch_start_keys: two keys on one stream (one create each, one thread),
 * each key's events in revision order and exactly once, across kill -9 of
 * etcd; a key not named is not delivered. */
START_TEST(two_keys_share_one_stream_across_etcd_kill9)
{
    ec_error_t err = {0};
    rec_t *r = rec_new();
    const char *keys[2] = {"/m/a", "/m/b"};
    long s0 = watch_streams();
    ec_watch_t *w = ec_watch_start_keys(c, keys, 2, 0, EC_WATCH_NO_PREV_KV, on_event, r, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    want_t cw = {r, 2};
    ck_assert_msg(ec_test_wait(created_n, &cw, 5000), "%d of 2 keys created", r->created);
    ck_assert_int_eq(watch_streams() - s0, 1);
    put_ab(0, 60);
    want_t want = {r, 40};
    ck_assert(ec_test_wait(have_n, &want, 5000));
    ec_embed_kill(etcd, SIGKILL);
    ck_assert_msg(ec_test_wait(broken, r, 5000), "the watch did not notice etcd dying");
    ck_assert_int_eq(ec_embed_restart(etcd, &err), 0);
    put_ab(60, 120); /* before the watch is back: replayed from each key's next revision */
    want.n = 80;
    ck_assert_msg(ec_test_wait(have_n, &want, 10000), "only %d of 80 events", r->n);
    put_ab(120, 122); /* one more of each: a duplicate would come before them */
    want.n = 82;
    ck_assert(ec_test_wait(have_n, &want, 5000));
    ck_assert_int_ge(ec_watch_next_revision(w), 2);
    ec_watch_stop(w);
    ck_assert_int_eq(r->n, 82);
    int next[2] = {0, 1};
    int64_t last[2] = {0, 0};
    for (int j = 0; j < r->n; j++) {
        int k = !strcmp(r->key[j], "/m/a") ? 0 : !strcmp(r->key[j], "/m/b") ? 1 : -1;
        ck_assert_msg(k >= 0, "event of %s, not watched", r->key[j]);
        char val[16];
        snprintf(val, sizeof(val), "%d", next[k]);
        ck_assert_msg(!strcmp(r->val[j], val), "%s: %s where %s was next", r->key[j], r->val[j],
                      val);
        ck_assert_int_lt(last[k], r->rev[j]);
        last[k] = r->rev[j];
        next[k] += 3;
    }
    ck_assert_int_ge(r->created, 4); /* both keys, created again on the new stream */
    free(r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t1200-etcd-watch");
    TCase *t = tcase_create("watch");
    tcase_add_unchecked_fixture(t, setup, teardown);
    tcase_add_test(t, puts_and_deletes_in_order);
    tcase_add_test(t, one_transactions_events_marked_as_one_batch);
    tcase_add_test(t, compacted_start_reported);
    tcase_add_test(t, stop_while_idle_is_prompt);
    tcase_add_test(t, resume_across_etcd_kill9);
    tcase_add_test(t, two_keys_share_one_stream_across_etcd_kill9);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
