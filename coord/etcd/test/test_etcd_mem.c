/* Rules checked: the in-memory store (etcd.h, ec_etcd_create_mem) keeps
 * etcd's semantics as the gRPC client reports them.  The revision grows by
 * one per write, whatever it touched, and not for a write that changed
 * nothing; each key carries its create and mod revision, version and lease;
 * history reads work down to the compaction point and fail with
 * EC_ECOMPACTED below it.  A transaction's comparisons choose its branch,
 * its ops run atomically at one revision, and it is refused whole (a
 * duplicate key, an unknown lease).  A revoked or expired lease takes its
 * keys in one revision, seen by watches as DELETE events; a keepalive keeps
 * a lease, and reports it lost once when it is gone.  Watches start with
 * EC_WATCH_CREATED, replay from an old revision in order, end with
 * EC_WATCH_COMPACTED below the compaction point, run their callbacks off
 * the writer's thread, and never after ec_watch_stop.  A store that is down
 * fails calls with EC_EUNAVAILABLE and breaks watches, which resume. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "etcd.h"
#include "harness.h"

static ec_etcd_mem_t *store;
static ec_etcd_t *c;

static void setup(void)
{
    ec_error_t err = {0};
    store = ec_etcd_mem_new(&err);
    ck_assert_msg(store, "%s", err.msg);
    c = ec_etcd_create_mem(store, &err);
    ck_assert_msg(c, "%s", err.msg);
}

static void teardown(void)
{
    ec_etcd_destroy(c);
    ec_etcd_mem_free(store);
}

static int64_t put(const char *key, const char *value, int64_t lease)
{
    int64_t rev = 0;
    ec_error_t err = {0};
    ck_assert_msg(ec_etcd_put(c, key, value, strlen(value), lease, &rev, &err) == 0, "%s",
                  err.msg);
    return rev;
}

static int64_t revision(void)
{
    int64_t rev = 0;
    char ver[16];
    ck_assert_int_eq(ec_etcd_status(c, &rev, ver, sizeof(ver), NULL), 0);
    ck_assert_str_eq(ver, "mem");
    return rev;
}

static bool get(const char *key, ec_kv_t *kv)
{
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, kv, &found, NULL, NULL), 0);
    return found;
}

static bool absent(void *key)
{
    ec_kv_t kv;
    bool found = get(key, &kv);
    ec_kv_free(&kv);
    return !found;
}

/* ---- a watch's events, recorded ------------------------------------------ */

typedef struct {
    ec_watch_event_type_t type;
    int64_t revision, compact_revision;
    char key[64], value[64], prev[64];
    bool has_prev, more;
} rec_t;

typedef struct {
    pthread_mutex_t lock;
    rec_t ev[256];
    int n;
    bool on_writer; /* a callback ran on the test's thread */
    pthread_t writer;
} recorder_t;

static void recorder_init(recorder_t *r)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->lock, NULL);
    r->writer = pthread_self();
}

static void on_event(const ec_watch_event_t *ev, void *arg)
{
    recorder_t *r = arg;
    pthread_mutex_lock(&r->lock);
    if (pthread_equal(pthread_self(), r->writer))
        r->on_writer = true;
    if (r->n < 256) {
        rec_t *e = &r->ev[r->n++];
        memset(e, 0, sizeof(*e));
        e->type = ev->type;
        e->revision = ev->revision;
        e->compact_revision = ev->compact_revision;
        e->more = ev->more;
        if (ev->kv) {
            snprintf(e->key, sizeof(e->key), "%s", ev->kv->key);
            snprintf(e->value, sizeof(e->value), "%s", (const char *)ev->kv->value);
        }
        if ((e->has_prev = ev->prev_kv != NULL))
            snprintf(e->prev, sizeof(e->prev), "%s", (const char *)ev->prev_kv->value);
    }
    pthread_mutex_unlock(&r->lock);
}

/* Events so far (the watch's thread may be adding more). */
static int events(recorder_t *r)
{
    pthread_mutex_lock(&r->lock);
    int n = r->n;
    pthread_mutex_unlock(&r->lock);
    return n;
}

typedef struct {
    recorder_t *r;
    int n;
} count_t;

static bool has_events(void *arg)
{
    count_t *w = arg;
    return events(w->r) >= w->n;
}

static void wait_events(recorder_t *r, int n)
{
    count_t w = {r, n};
    ck_assert_msg(ec_test_wait(has_events, &w, 5000), "%d watch events within 5 s, got %d", n,
                  events(r));
}

static ec_watch_t *watch(const char *key, bool prefix, int64_t from, unsigned flags,
                         recorder_t *r)
{
    ec_error_t err = {0};
    ec_watch_t *w = ec_watch_start_ex(c, key, prefix, from, flags, on_event, r, &err);
    ck_assert_msg(w, "%s", err.msg);
    wait_events(r, 1);
    ck_assert_int_eq(r->ev[0].type, EC_WATCH_CREATED);
    return w;
}

/* ---- key-values ------------------------------------------------------------ */

START_TEST(revision_grows_once_per_write)
{
    ck_assert_int_eq(revision(), 1); /* an empty etcd's */
    ck_assert_int_eq(put("/a", "v1", 0), 2);
    ck_assert_int_eq(put("/a", "v2", 0), 3);
    ec_kv_t kv;
    ck_assert(get("/a", &kv));
    ck_assert_str_eq((char *)kv.value, "v2");
    ck_assert_int_eq(kv.value_len, 2);
    ck_assert_int_eq(kv.create_revision, 2);
    ck_assert_int_eq(kv.mod_revision, 3);
    ck_assert_int_eq(kv.version, 2);
    ck_assert_int_eq(kv.lease, 0);
    ec_kv_free(&kv);
    int64_t deleted = -1;
    ck_assert_int_eq(ec_etcd_delete(c, "/a", false, &deleted, NULL), 0);
    ck_assert_int_eq(deleted, 1);
    ck_assert_int_eq(revision(), 4);
    /* deleting nothing writes nothing */
    ck_assert_int_eq(ec_etcd_delete(c, "/a", false, &deleted, NULL), 0);
    ck_assert_int_eq(deleted, 0);
    ck_assert_int_eq(revision(), 4);
    /* a key created again starts over */
    ck_assert_int_eq(put("/a", "v3", 0), 5);
    ck_assert(get("/a", &kv));
    ck_assert_int_eq(kv.create_revision, 5);
    ck_assert_int_eq(kv.version, 1);
    ec_kv_free(&kv);
    /* history */
    bool found = false;
    int64_t rev = 0;
    ck_assert_int_eq(ec_etcd_get_at(c, "/a", 2, &kv, &found, &rev, NULL), 0);
    ck_assert(found);
    ck_assert_str_eq((char *)kv.value, "v1");
    ck_assert_int_eq(rev, 5); /* the store's revision, as etcd's header */
    ec_kv_free(&kv);
    ck_assert_int_eq(ec_etcd_get_at(c, "/a", 4, &kv, &found, NULL, NULL), 0);
    ck_assert(!found);
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_get_at(c, "/a", 6, &kv, &found, NULL, &err), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "future revision"));
    ck_assert_int_eq(ec_etcd_get(c, "", &kv, &found, NULL, NULL), EC_EINVAL);
}
END_TEST

START_TEST(prefix_listing_and_delete)
{
    put("/j/b", "2", 0);
    put("/j/a", "1", 0);
    put("/j/c/d", "3", 0);
    put("/k", "4", 0);
    put("/j", "5", 0); /* the prefix without its slash: not under "/j/" */
    ec_kv_list_t l;
    ck_assert_int_eq(ec_etcd_get_prefix(c, "/j/", 1, &l, NULL), 0);
    ck_assert_int_eq(l.n, 3);
    ck_assert_str_eq(l.kvs[0].key, "/j/a");
    ck_assert_str_eq(l.kvs[1].key, "/j/b");
    ck_assert_str_eq(l.kvs[2].key, "/j/c/d");
    ck_assert_int_eq(l.revision, 6);
    ec_kv_list_free(&l);
    int64_t deleted = 0;
    ck_assert_int_eq(ec_etcd_delete(c, "/j/", true, &deleted, NULL), 0);
    ck_assert_int_eq(deleted, 3);
    ck_assert_int_eq(revision(), 7); /* one revision for the three */
    ck_assert_int_eq(ec_etcd_get_prefix(c, "/", 0, &l, NULL), 0);
    ck_assert_int_eq(l.n, 2);
    ck_assert_str_eq(l.kvs[0].key, "/j");
    ck_assert_str_eq(l.kvs[1].key, "/k");
    ec_kv_list_free(&l);
}
END_TEST

/* ec_etcd_next_key: the first key at or after `from` under the prefix, as
 * etcd's Range of limit 1 answers; skipping past one part ("/j0") reaches
 * the next ("/k/x"), and nothing past the prefix's end is returned. */
START_TEST(next_key_reads_one_key_under_the_prefix)
{
    put("/j/b", "2", 0);
    put("/j/a", "1", 0);
    put("/k/x", "3", 0);
    put("/l", "4", 0);
    char key[64];
    bool found;
    ck_assert_int_eq(ec_etcd_next_key(c, "/", "/", key, sizeof(key), &found, NULL), 0);
    ck_assert(found);
    ck_assert_str_eq(key, "/j/a");
    ck_assert_int_eq(ec_etcd_next_key(c, "/", "/j0", key, sizeof(key), &found, NULL), 0);
    ck_assert(found);
    ck_assert_str_eq(key, "/k/x");
    ck_assert_int_eq(ec_etcd_next_key(c, "/", "/k0", key, sizeof(key), &found, NULL), 0);
    ck_assert_str_eq(key, "/l");
    ck_assert_int_eq(ec_etcd_next_key(c, "/", "/l\x01", key, sizeof(key), &found, NULL), 0);
    ck_assert(!found);
    ck_assert_int_eq(ec_etcd_next_key(c, "/j/", "/j/b", key, sizeof(key), &found, NULL), 0);
    ck_assert(found);
    ck_assert_str_eq(key, "/j/b");
    ck_assert_int_eq(ec_etcd_next_key(c, "/j/", "/j/c", key, sizeof(key), &found, NULL), 0);
    ck_assert(!found); /* /k/x is past /j/ */
    char small[4];
    ck_assert_int_eq(ec_etcd_next_key(c, "/", "/k", small, sizeof(small), &found, NULL), 0);
    ck_assert_str_eq(small, "/k/"); /* cut to the buffer */
    ck_assert_int_eq(ec_etcd_next_key(c, "/j/", "/a", key, sizeof(key), &found, NULL), EC_EINVAL);
}
END_TEST

START_TEST(compaction)
{
    put("/c", "1", 0);             /* 2 */
    put("/c", "2", 0);             /* 3 */
    put("/d", "x", 0);             /* 4 */
    ec_etcd_delete(c, "/d", false, NULL, NULL); /* 5 */
    put("/c", "3", 0);             /* 6 */
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_compact(c, 5, true, &err), 0);
    ec_kv_t kv;
    bool found;
    ck_assert_int_eq(ec_etcd_get_at(c, "/c", 4, &kv, &found, NULL, &err), EC_ECOMPACTED);
    ck_assert_int_eq(ec_etcd_get_at(c, "/c", 5, &kv, &found, NULL, NULL), 0);
    ck_assert(found);
    ck_assert_str_eq((char *)kv.value, "2"); /* the version live at 5 is kept */
    ec_kv_free(&kv);
    ck_assert_int_eq(ec_etcd_get_at(c, "/d", 5, &kv, &found, NULL, NULL), 0);
    ck_assert(!found);
    ck_assert_int_eq(ec_etcd_compact(c, 5, true, &err), EC_ECOMPACTED);
    ck_assert_int_eq(ec_etcd_compact(c, 9, true, &err), EC_EINVAL);

    /* a watch from below the point: created, then compacted (and over) */
    recorder_t r;
    recorder_init(&r);
    ec_watch_t *w = watch("/c", false, 3, 0, &r);
    wait_events(&r, 2);
    ck_assert_int_eq(r.ev[1].type, EC_WATCH_COMPACTED);
    ck_assert_int_eq(r.ev[1].compact_revision, 5);
    ec_watch_stop(w);
    /* from the point itself: the rest of the history */
    recorder_init(&r);
    w = watch("/c", false, 5, 0, &r);
    wait_events(&r, 2);
    ck_assert_int_eq(r.ev[1].type, EC_WATCH_PUT);
    ck_assert_int_eq(r.ev[1].revision, 6);
    ck_assert_str_eq(r.ev[1].prev, "2");
    ec_watch_stop(w);
}
END_TEST

/* ---- transactions ------------------------------------------------------------ */

static ec_cmp_t cmp_num(const char *key, ec_cmp_target_t t, ec_cmp_result_t res, int64_t n)
{
    ec_cmp_t x = {.key = key, .target = t, .result = res, .number = n};
    return x;
}

static ec_cmp_t cmp_val(const char *key, ec_cmp_result_t res, const char *v)
{
    ec_cmp_t x = {.key = key, .target = EC_CMP_VALUE, .result = res, .value = v,
                  .value_len = strlen(v)};
    return x;
}

static bool holds(ec_cmp_t x)
{
    ec_txn_result_t r;
    ck_assert_int_eq(ec_etcd_txn(c, &x, 1, NULL, 0, NULL, 0, &r, NULL), 0);
    bool ok = r.succeeded;
    ec_txn_result_free(&r);
    return ok;
}

START_TEST(txn_comparisons)
{
    put("/t", "m", 0); /* 2 */
    put("/t", "m", 0); /* 3: version 2 */
    ck_assert(holds(cmp_num("/t", EC_CMP_VERSION, EC_CMP_EQUAL, 2)));
    ck_assert(holds(cmp_num("/t", EC_CMP_VERSION, EC_CMP_GREATER, 1)));
    ck_assert(!holds(cmp_num("/t", EC_CMP_VERSION, EC_CMP_LESS, 2)));
    ck_assert(holds(cmp_num("/t", EC_CMP_CREATE, EC_CMP_EQUAL, 2)));
    ck_assert(holds(cmp_num("/t", EC_CMP_MOD, EC_CMP_EQUAL, 3)));
    ck_assert(holds(cmp_num("/t", EC_CMP_MOD, EC_CMP_NOT_EQUAL, 2)));
    ck_assert(holds(cmp_val("/t", EC_CMP_EQUAL, "m")));
    ck_assert(holds(cmp_val("/t", EC_CMP_GREATER, "l")));
    ck_assert(holds(cmp_val("/t", EC_CMP_GREATER, ""))); /* longer is greater */
    ck_assert(holds(cmp_val("/t", EC_CMP_LESS, "ma")));
    ck_assert(holds(cmp_val("/t", EC_CMP_NOT_EQUAL, "n")));
    /* a missing key: version, create and mod 0; a value compare fails */
    ck_assert(holds(cmp_num("/none", EC_CMP_CREATE, EC_CMP_EQUAL, 0)));
    ck_assert(holds(cmp_num("/none", EC_CMP_VERSION, EC_CMP_EQUAL, 0)));
    ck_assert(!holds(cmp_val("/none", EC_CMP_NOT_EQUAL, "x")));
    ck_assert_int_eq(revision(), 3); /* reads wrote nothing */
}
END_TEST

START_TEST(txn_branches_and_results)
{
    /* create if absent, as the election does */
    ec_cmp_t absent_cmp = cmp_num("/l", EC_CMP_CREATE, EC_CMP_EQUAL, 0);
    ec_op_t then_ops[] = {
        {.type = EC_OP_PUT, .key = "/l", .value = "me", .value_len = 2},
        {.type = EC_OP_PUT, .key = "/m", .value = "x", .value_len = 1},
        {.type = EC_OP_GET, .key = "/l"},
    };
    ec_op_t else_ops[] = {{.type = EC_OP_GET, .key = "/l"}};
    ec_txn_result_t r;
    ck_assert_int_eq(ec_etcd_txn(c, &absent_cmp, 1, then_ops, 3, else_ops, 1, &r, NULL), 0);
    ck_assert(r.succeeded);
    ck_assert_int_eq(r.revision, 2); /* two keys, one revision */
    ck_assert_int_eq(r.n, 3);
    ck_assert_int_eq(r.results[0].type, EC_OP_PUT);
    ck_assert_int_eq(r.results[0].revision, 2);
    ck_assert_int_eq(r.results[2].type, EC_OP_GET);
    ck_assert_int_eq(r.results[2].kvs.n, 1); /* a read after a write of the txn sees it */
    ck_assert_int_eq(r.results[2].kvs.revision, 2);
    ck_assert_int_eq(r.results[2].kvs.kvs[0].mod_revision, 2);
    ec_txn_result_free(&r);
    ec_kv_t kv;
    ck_assert(get("/m", &kv));
    ck_assert_int_eq(kv.mod_revision, 2);
    ec_kv_free(&kv);

    /* again: the else branch, read-only, at the same revision */
    ck_assert_int_eq(ec_etcd_txn(c, &absent_cmp, 1, then_ops, 3, else_ops, 1, &r, NULL), 0);
    ck_assert(!r.succeeded);
    ck_assert_int_eq(r.revision, 2);
    ck_assert_int_eq(r.n, 1);
    ck_assert_str_eq((char *)r.results[0].kvs.kvs[0].value, "me");
    ck_assert_int_eq(r.results[0].kvs.kvs[0].create_revision, 2);
    ec_txn_result_free(&r);

    /* a range delete: [/a, /m) takes /l, not /m */
    put("/a", "1", 0); /* 3 */
    ec_op_t del = {.type = EC_OP_DELETE, .key = "/a", .range_end = "/m"};
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, &del, 1, NULL, 0, &r, NULL), 0);
    ck_assert_int_eq(r.results[0].type, EC_OP_DELETE);
    ck_assert_int_eq(r.results[0].deleted, 2);
    ck_assert_int_eq(r.revision, 4);
    ec_txn_result_free(&r);
    ck_assert(get("/m", &kv));
    ec_kv_free(&kv);
    /* and a prefix get in a txn */
    ec_op_t list = {.type = EC_OP_GET, .key = "/", .prefix = true};
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, &list, 1, NULL, 0, &r, NULL), 0);
    ck_assert_int_eq(r.results[0].kvs.n, 1);
    ck_assert_int_eq(r.results[0].kvs.revision, 4);
    ec_txn_result_free(&r);
}
END_TEST

START_TEST(txn_refused_whole)
{
    ec_error_t err = {0};
    ec_op_t dup[] = {
        {.type = EC_OP_PUT, .key = "/x", .value = "1", .value_len = 1},
        {.type = EC_OP_PUT, .key = "/x", .value = "2", .value_len = 1},
    };
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, dup, 2, NULL, 0, NULL, &err), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "duplicate key"));
    ec_op_t put_in_del[] = {
        {.type = EC_OP_DELETE, .key = "/x/", .prefix = true},
        {.type = EC_OP_PUT, .key = "/x/1", .value = "1", .value_len = 1},
    };
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, put_in_del, 2, NULL, 0, NULL, &err), EC_EINVAL);
    /* an unknown lease: nothing of the branch is written */
    ec_op_t leased[] = {
        {.type = EC_OP_PUT, .key = "/y", .value = "1", .value_len = 1},
        {.type = EC_OP_PUT, .key = "/z", .value = "1", .value_len = 1, .lease = 12345},
    };
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, leased, 2, NULL, 0, NULL, &err), EC_ENOTFOUND);
    ck_assert_int_eq(ec_etcd_put(c, "/z", "1", 1, 12345, NULL, &err), EC_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(err.msg, "lease"));
    ck_assert(absent("/y"));
    ck_assert_int_eq(revision(), 1);
}
END_TEST

/* ---- leases ------------------------------------------------------------------- */

START_TEST(lease_revoke_deletes_its_keys_at_once)
{
    int64_t id = 0, granted = 0, ttl = 0;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 1, &id, &granted, NULL), 0);
    ck_assert_int_eq(granted, 2); /* etcd's minimum */
    ck_assert_int_eq(ec_etcd_lease_grant(c, 0, &id, NULL, NULL), EC_EINVAL);
    ck_assert_int_eq(ec_etcd_lease_grant(c, 60, &id, &granted, NULL), 0);
    ck_assert_int_eq(ec_etcd_lease_ttl(c, id, &ttl, &granted, NULL), 0);
    ck_assert_int_eq(granted, 60);
    ck_assert(ttl > 55 && ttl <= 60);
    put("/n/1", "a", id); /* 2 */
    put("/n/2", "b", id); /* 3 */
    put("/n/3", "c", 0);  /* 4 */
    ec_kv_t kv;
    ck_assert(get("/n/1", &kv));
    ck_assert_int_eq(kv.lease, id);
    ec_kv_free(&kv);
    recorder_t r;
    recorder_init(&r);
    ec_watch_t *w = watch("/n/", true, 0, 0, &r);
    ck_assert_int_eq(ec_etcd_lease_revoke(c, id, NULL), 0);
    ck_assert_int_eq(revision(), 5);
    ck_assert(absent("/n/1") && absent("/n/2") && !absent("/n/3"));
    wait_events(&r, 3);
    for (int i = 1; i <= 2; i++) {
        ck_assert_int_eq(r.ev[i].type, EC_WATCH_DELETE);
        ck_assert_int_eq(r.ev[i].revision, 5);
        ck_assert(r.ev[i].has_prev);
    }
    ck_assert(r.ev[1].more && !r.ev[2].more); /* one revision's events */
    ck_assert_str_eq(r.ev[1].prev, "a");
    ck_assert_str_eq(r.ev[2].prev, "b");
    ec_watch_stop(w);
    ck_assert(!r.on_writer);
    ck_assert_int_eq(ec_etcd_lease_revoke(c, id, NULL), EC_ENOTFOUND);
    ck_assert_int_eq(ec_etcd_lease_ttl(c, id, &ttl, NULL, NULL), 0);
    ck_assert_int_eq(ttl, -1);
    ck_assert_int_eq(ec_etcd_mem_expire_lease(store, id, NULL), EC_ENOTFOUND);
}
END_TEST

START_TEST(unkept_lease_expires_by_itself)
{
    int64_t id = 0;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 2, &id, NULL, NULL), 0);
    put("/e", "v", id);
    recorder_t r;
    recorder_init(&r);
    ec_watch_t *w = watch("/e", false, 0, 0, &r);
    int64_t t0 = ec_test_now_ms();
    ck_assert_msg(ec_test_wait(absent, "/e", 4000), "the key outlived its lease's TTL");
    ck_assert_int_ge(ec_test_now_ms() - t0, 1500); /* not before its TTL */
    wait_events(&r, 2); /* the reaper's deletion, with no call made */
    ck_assert_int_eq(r.ev[1].type, EC_WATCH_DELETE);
    ec_watch_stop(w);
    int64_t ttl = 0;
    ck_assert_int_eq(ec_etcd_lease_ttl(c, id, &ttl, NULL, NULL), 0);
    ck_assert_int_eq(ttl, -1);
}
END_TEST

typedef struct {
    pthread_mutex_t lock;
    int lost;
    char why[128];
} lost_t;

static void on_lost(int64_t lease, const char *why, void *arg)
{
    (void)lease;
    lost_t *l = arg;
    pthread_mutex_lock(&l->lock);
    l->lost++;
    snprintf(l->why, sizeof(l->why), "%s", why);
    pthread_mutex_unlock(&l->lock);
}

static bool was_lost(void *arg)
{
    lost_t *l = arg;
    pthread_mutex_lock(&l->lock);
    bool y = l->lost > 0;
    pthread_mutex_unlock(&l->lock);
    return y;
}

static bool refreshed_4(void *ka)
{
    return ec_keepalive_count(ka) >= 4;
}

START_TEST(keepalive_keeps_a_lease_until_it_expires)
{
    int64_t id = 0;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 2, &id, NULL, NULL), 0);
    put("/ka", "v", id);
    lost_t l = {.lock = PTHREAD_MUTEX_INITIALIZER};
    int64_t t0 = ec_test_now_ms();
    ec_keepalive_t *ka = ec_keepalive_start(c, id, 2, on_lost, &l, NULL);
    ck_assert_ptr_nonnull(ka);
    /* refreshes every TTL/3: the fourth comes after a whole TTL */
    ck_assert(ec_test_wait(refreshed_4, ka, 5000));
    ck_assert_int_ge(ec_test_now_ms() - t0, 1900);
    ck_assert(!absent("/ka"));
    ck_assert(ec_keepalive_alive(ka));
    ck_assert_int_ge(ec_keepalive_confirmed_ms(ka), t0);
    ck_assert_int_eq(ec_etcd_mem_expire_lease(store, id, NULL), 0);
    ck_assert(absent("/ka"));
    ck_assert_msg(ec_test_wait(was_lost, &l, 3000), "lost_cb did not fire");
    ck_assert(!ec_keepalive_alive(ka));
    ck_assert_ptr_nonnull(strstr(l.why, "TTL=0"));
    ec_keepalive_stop(ka);
    ck_assert_int_eq(l.lost, 1);
}
END_TEST

static bool closed_gate(void *arg)
{
    (void)arg;
    return false;
}

START_TEST(keepalive_gate_closed_lets_the_lease_go)
{
    int64_t id = 0;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 2, &id, NULL, NULL), 0);
    lost_t l = {.lock = PTHREAD_MUTEX_INITIALIZER};
    ec_keepalive_t *ka = ec_keepalive_start(c, id, 2, on_lost, &l, NULL);
    ck_assert_ptr_nonnull(ka);
    ec_keepalive_set_gate(ka, closed_gate, NULL);
    ck_assert_msg(ec_test_wait(was_lost, &l, 5000), "lost_cb did not fire");
    ec_keepalive_stop(ka);
    ck_assert_int_eq(l.lost, 1);
}
END_TEST

/* ---- watches ------------------------------------------------------------------- */

START_TEST(watch_replays_from_an_old_revision)
{
    put("/w", "1", 0);   /* 2 */
    put("/x", "-", 0);   /* 3: another key */
    put("/w", "2", 0);   /* 4 */
    ec_etcd_delete(c, "/w", false, NULL, NULL); /* 5 */
    recorder_t r;
    recorder_init(&r);
    ec_watch_t *w = watch("/w", false, 2, 0, &r);
    ck_assert_int_eq(r.ev[0].revision, 5); /* created: the store's revision */
    wait_events(&r, 4);
    ck_assert_int_eq(r.ev[1].type, EC_WATCH_PUT);
    ck_assert_int_eq(r.ev[1].revision, 2);
    ck_assert(!r.ev[1].has_prev);
    ck_assert_int_eq(r.ev[2].revision, 4);
    ck_assert_str_eq(r.ev[2].prev, "1");
    ck_assert_int_eq(r.ev[3].type, EC_WATCH_DELETE);
    ck_assert_int_eq(r.ev[3].revision, 5);
    ck_assert_str_eq(r.ev[3].key, "/w");
    ck_assert_str_eq(r.ev[3].prev, "2");
    ck_assert_int_eq(ec_watch_next_revision(w), 6);
    /* then live */
    put("/w", "3", 0);
    wait_events(&r, 5);
    ck_assert_int_eq(r.ev[4].revision, 6);
    ec_watch_stop(w);
    ck_assert_int_eq(r.n, 5); /* nothing twice, nothing of /x */
}
END_TEST

START_TEST(watch_keys_and_no_prev_kv)
{
    recorder_t r;
    recorder_init(&r);
    const char *keys[] = {"/k1", "/k2"};
    ec_watch_t *w = ec_watch_start_keys(c, keys, 2, 0, EC_WATCH_NO_PREV_KV, on_event, &r, NULL);
    ck_assert_ptr_nonnull(w);
    wait_events(&r, 2);
    ck_assert_int_eq(r.ev[0].type, EC_WATCH_CREATED); /* one per key */
    ck_assert_int_eq(r.ev[1].type, EC_WATCH_CREATED);
    put("/k1", "a", 0);
    put("/k3", "a", 0);
    put("/k2", "b", 0);
    put("/k1", "c", 0);
    wait_events(&r, 5);
    ck_assert_str_eq(r.ev[2].key, "/k1");
    ck_assert_str_eq(r.ev[3].key, "/k2");
    ck_assert_str_eq(r.ev[4].key, "/k1");
    ck_assert(!r.ev[4].has_prev);
    ec_watch_stop(w);
    ck_assert_int_eq(r.n, 5);
}
END_TEST

static void *writer_main(void *arg)
{
    ec_etcd_t *wc = arg;
    for (int i = 0; i < 200; i++)
        ec_etcd_put(wc, "/busy", "v", 1, 0, NULL, NULL);
    return NULL;
}

START_TEST(watch_stop_joins)
{
    recorder_t r;
    recorder_init(&r);
    ec_watch_t *w = watch("/busy", false, 0, 0, &r);
    /* a second client of the same store writes while the watch is stopped */
    ec_etcd_t *c2 = ec_etcd_create_mem(store, NULL);
    ck_assert_ptr_nonnull(c2);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, writer_main, c2), 0);
    wait_events(&r, 10);
    ec_watch_stop(w);
    int n = r.n; /* the watch's thread is joined */
    pthread_join(t, NULL);
    ec_etcd_destroy(c2);
    put("/busy", "after", 0);
    ck_assert_int_eq(r.n, n); /* no callback after stop returned */
    for (int i = 2; i < n; i++)
        ck_assert_int_eq(r.ev[i].revision, r.ev[i - 1].revision + 1);
    ck_assert(!r.on_writer);
}
END_TEST

/* ---- the store down ------------------------------------------------------------ */

static bool lease_lives(void *id)
{
    int64_t ttl = -1;
    return ec_etcd_lease_ttl(c, *(int64_t *)id, &ttl, NULL, NULL) == 0 && ttl > 0;
}

START_TEST(store_down_fails_calls_and_breaks_watches)
{
    int64_t id = 0;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 2, &id, NULL, NULL), 0);
    recorder_t r;
    recorder_init(&r);
    ec_watch_t *w = watch("/d", false, 0, 0, &r);
    lost_t l = {.lock = PTHREAD_MUTEX_INITIALIZER};
    ec_keepalive_t *ka = ec_keepalive_start(c, id, 2, on_lost, &l, NULL);
    ec_etcd_mem_set_down(store, true);
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_put(c, "/d", "x", 1, 0, NULL, &err), EC_EUNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(err.msg, "ec_etcd_mem_set_down"));
    ec_kv_t kv;
    bool found;
    ck_assert_int_eq(ec_etcd_get(c, "/d", &kv, &found, NULL, NULL), EC_EUNAVAILABLE);
    wait_events(&r, 2);
    ck_assert_int_eq(r.ev[1].type, EC_WATCH_BROKEN);
    /* no refresh for a TTL: the keepalive gives the lease up... */
    ck_assert_msg(ec_test_wait(was_lost, &l, 5000), "lost_cb did not fire");
    ck_assert_ptr_nonnull(strstr(l.why, "no refresh"));
    ec_keepalive_stop(ka);
    /* ...but the stopped store expired nothing, and back up gives the lease
     * its whole TTL, as a restarted etcd does */
    ec_etcd_mem_set_down(store, false);
    ck_assert(lease_lives(&id));
    wait_events(&r, 3);
    ck_assert_int_eq(r.ev[2].type, EC_WATCH_CREATED);
    put("/d", "y", 0);
    wait_events(&r, 4);
    ck_assert_int_eq(r.ev[3].type, EC_WATCH_PUT);
    ec_watch_stop(w);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("etcd_mem");
    TCase *tc = tcase_create("etcd_mem");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, ec_test_ms(30));
    tcase_add_test(tc, revision_grows_once_per_write);
    tcase_add_test(tc, prefix_listing_and_delete);
    tcase_add_test(tc, next_key_reads_one_key_under_the_prefix);
    tcase_add_test(tc, compaction);
    tcase_add_test(tc, txn_comparisons);
    tcase_add_test(tc, txn_branches_and_results);
    tcase_add_test(tc, txn_refused_whole);
    tcase_add_test(tc, lease_revoke_deletes_its_keys_at_once);
    tcase_add_test(tc, unkept_lease_expires_by_itself);
    tcase_add_test(tc, keepalive_keeps_a_lease_until_it_expires);
    tcase_add_test(tc, keepalive_gate_closed_lets_the_lease_go);
    tcase_add_test(tc, watch_replays_from_an_old_revision);
    tcase_add_test(tc, watch_keys_and_no_prev_kv);
    tcase_add_test(tc, watch_stop_joins);
    tcase_add_test(tc, store_down_fails_calls_and_breaks_watches);
    suite_add_tcase(s, tc);
    return s;
}

EC_CHECK_MAIN(suite)
