/* Leases against a real etcd: an unrefreshed 2 s lease takes its keys with
 * it; a keepalive holds a lease for 3x its TTL; revoke removes keys at once
 * and the keepalive then reports the loss exactly once. */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

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

typedef struct {
    const char *key;
} keyarg_t;

static bool key_exists(void *arg)
{
    ec_kv_t kv;
    bool found = false;
    ec_etcd_get(c, ((keyarg_t *)arg)->key, &kv, &found, NULL, NULL);
    ec_kv_free(&kv);
    return found;
}

static bool key_gone(void *arg)
{
    return !key_exists(arg);
}

START_TEST(lease_expiry_removes_keys)
{
    ec_error_t err = {0};
    int64_t id, granted;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 2, &id, &granted, &err), 0);
    ck_assert_int_eq(granted, 2);
    ck_assert_int_eq(ec_etcd_put(c, "/l/exp", "v", 1, id, NULL, &err), 0);
    keyarg_t k = {"/l/exp"};
    ck_assert(key_exists(&k));
    int64_t t0 = ec_test_now_ms();
    ck_assert_msg(ec_test_wait(key_gone, &k, 6000), "key outlived its 2 s lease");
    /* etcd expires leases at TTL, give or take its checkpoint interval. */
    ck_assert_int_ge(ec_test_now_ms() - t0, 1000);
    int64_t ttl;
    ck_assert_int_eq(ec_etcd_lease_ttl(c, id, &ttl, NULL, &err), 0);
    ck_assert_int_eq(ttl, -1);
}
END_TEST

static atomic_int lost_calls;
static void on_lost(int64_t lease, const char *why, void *arg)
{
    (void)lease;
    (void)why;
    (void)arg;
    atomic_fetch_add(&lost_calls, 1);
}

static bool lost_once(void *arg)
{
    (void)arg;
    return atomic_load(&lost_calls) >= 1;
}

START_TEST(keepalive_holds_3ttl_then_revoke)
{
    ec_error_t err = {0};
    int64_t id;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 2, &id, NULL, &err), 0);
    ck_assert_int_eq(ec_etcd_put(c, "/l/held", "v", 1, id, NULL, &err), 0);
    atomic_store(&lost_calls, 0);
    ec_keepalive_t *ka = ec_keepalive_start(c, id, 2, on_lost, NULL, &err);
    ck_assert_ptr_nonnull(ka);
    keyarg_t k = {"/l/held"};
    ck_assert_msg(ec_test_holds(key_exists, &k, 3 * 2000), "key vanished while kept alive");
    ck_assert(ec_keepalive_alive(ka));
    /* refreshed every TTL/3: about 9 times in 3 TTLs */
    ck_assert_uint_ge(ec_keepalive_count(ka), 6);
    ck_assert_int_eq(atomic_load(&lost_calls), 0);
    /* revoke: keys go at once, the next refresh answers TTL=0 → lost, once */
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(ec_etcd_lease_revoke(c, id, &err), 0);
    ck_assert(key_gone(&k));
    ck_assert_msg(ec_test_wait(lost_once, NULL, 3000), "lost callback never came");
    ck_assert_int_le(ec_test_now_ms() - t0, ec_test_ms(2000)); /* the next refresh (TTL/3), with slack for load */
    ck_assert(!ec_keepalive_alive(ka));
    ec_keepalive_stop(ka);
    ck_assert_int_eq(atomic_load(&lost_calls), 1);
}
END_TEST

START_TEST(keepalive_reports_unreachable)
{
    /* etcd gone for longer than the TTL: the keepalive must say the lease is
     * lost (etcd may have expired it meanwhile), once. */
    ec_error_t err = {0};
    int64_t id;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 2, &id, NULL, &err), 0);
    atomic_store(&lost_calls, 0);
    ec_keepalive_t *ka = ec_keepalive_start(c, id, 2, on_lost, NULL, &err);
    ck_assert_ptr_nonnull(ka);
    ec_embed_kill(etcd, SIGKILL);
    ck_assert_msg(ec_test_wait(lost_once, NULL, 5000), "no loss reported with etcd down");
    ec_keepalive_stop(ka);
    ck_assert_int_eq(atomic_load(&lost_calls), 1);
    ck_assert_int_eq(ec_embed_restart(etcd, &err), 0);
}
END_TEST

START_TEST(stop_is_prompt)
{
    ec_error_t err = {0};
    int64_t id;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 30, &id, NULL, &err), 0);
    ec_keepalive_t *ka = ec_keepalive_start(c, id, 30, NULL, NULL, &err);
    int64_t t0 = ec_test_now_ms();
    ec_keepalive_stop(ka);
    ck_assert_int_le(ec_test_now_ms() - t0, ec_test_ms(500)); /* not a 10 s refresh interval */
    int64_t ttl;
    ck_assert_int_eq(ec_etcd_lease_ttl(c, id, &ttl, NULL, &err), 0);
    ck_assert_int_gt(ttl, 0); /* stopping refreshes does not revoke */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t1100-etcd-lease");
    TCase *t = tcase_create("lease");
    tcase_add_unchecked_fixture(t, setup, teardown);
    tcase_add_test(t, lease_expiry_removes_keys);
    tcase_add_test(t, keepalive_holds_3ttl_then_revoke);
    tcase_add_test(t, stop_is_prompt);
    tcase_add_test(t, keepalive_reports_unreachable);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
