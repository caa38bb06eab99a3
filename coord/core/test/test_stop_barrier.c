/* Rule checked: in restart mode a rank's processes start only once the
 * previous holder of that rank has confirmed its stop or can no longer have
 * processes (coord/core/stop_barrier.h), and every wait is bounded by the
 * lease TTL.  Also: the two records round-trip, and garbage written by
 * someone else is refused with the key and the fix named. */
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "stop_barrier.h"

#define TTL 10000

static ec_rank_holder_t holder(const char *id, uint64_t epoch, int64_t lease, bool stopped)
{
    ec_rank_holder_t h = {.epoch = epoch, .lease = lease, .stopped = stopped};
    strcpy(h.node_id, id);
    return h;
}

static ec_barrier_in_t in_for(const ec_rank_holder_t *h, int64_t now)
{
    return (ec_barrier_in_t){.self = "b", .epoch = 5, .holder = h, .now_ms = now,
                             .since_ms = 1000, .ttl_ms = TTL};
}

START_TEST(no_holder_own_or_confirmed_clears_at_once)
{
    ec_barrier_in_t in = in_for(NULL, 1000);
    ck_assert_int_eq(ec_barrier_decide(&in).verdict, EC_BARRIER_CLEAR);
    ec_rank_holder_t own = holder("b", 4, 7, false);
    in = in_for(&own, 1000);
    in.record_lease = 7;
    ck_assert_int_eq(ec_barrier_decide(&in).verdict, EC_BARRIER_CLEAR);
    ec_rank_holder_t done = holder("c", 4, 9, true);
    in = in_for(&done, 1000);
    in.record_lease = 9; /* alive, and it said so */
    ec_barrier_out_t o = ec_barrier_decide(&in);
    ck_assert_int_eq(o.verdict, EC_BARRIER_CLEAR);
    ck_assert(!o.timed_out);
}
END_TEST

START_TEST(a_registered_holder_is_waited_for_up_to_the_ttl)
{
    ec_rank_holder_t h = holder("c", 4, 9, false);
    ec_barrier_in_t in = in_for(&h, 1500);
    in.record_lease = 9;
    ec_barrier_out_t o = ec_barrier_decide(&in);
    ck_assert_int_eq(o.verdict, EC_BARRIER_WAIT);
    ck_assert_int_eq(o.until_ms, 1000 + TTL);
    in.now_ms = 1000 + TTL;
    o = ec_barrier_decide(&in);
    ck_assert_int_eq(o.verdict, EC_BARRIER_CLEAR);
    ck_assert(o.timed_out);
}
END_TEST

START_TEST(an_agent_evicted_as_gone_clears_at_once)
{
    ec_rank_holder_t h = holder("c", 4, 9, false);
    ec_departure_t g = {.lease = 9, .cause = EC_DEPART_REFUSED, .wait_ms = 8000};
    ec_barrier_in_t in = in_for(&h, 1000);
    in.gone = &g;
    ec_barrier_out_t o = ec_barrier_decide(&in);
    ck_assert_int_eq(o.verdict, EC_BARRIER_CLEAR);
    ck_assert(!o.timed_out);
}
END_TEST

START_TEST(a_silent_or_hung_holder_is_waited_for_its_lease_time_left)
{
    ec_depart_cause_t causes[] = {EC_DEPART_SILENT, EC_DEPART_HUNG};
    for (size_t i = 0; i < 2; i++) {
        ec_rank_holder_t h = holder("c", 4, 9, false);
        ec_departure_t g = {.lease = 9, .cause = causes[i], .wait_ms = 3000};
        ec_barrier_in_t in = in_for(&h, 2500);
        in.gone = &g;
        in.gone_seen_ms = 2000;
        ec_barrier_out_t o = ec_barrier_decide(&in);
        ck_assert_int_eq(o.verdict, EC_BARRIER_WAIT);
        ck_assert_int_eq(o.until_ms, 5000);
        in.now_ms = 5000;
        o = ec_barrier_decide(&in);
        ck_assert_int_eq(o.verdict, EC_BARRIER_CLEAR);
        ck_assert(o.timed_out);
        /* its confirmation ends the wait early */
        h.stopped = true;
        in.now_ms = 2600;
        ck_assert_int_eq(ec_barrier_decide(&in).verdict, EC_BARRIER_CLEAR);
    }
    /* a wait the record claims longer than the TTL is cut to the TTL */
    ec_rank_holder_t h = holder("c", 4, 9, false);
    ec_departure_t g = {.lease = 9, .cause = EC_DEPART_SILENT, .wait_ms = 1000000};
    ec_barrier_in_t in = in_for(&h, 2500);
    in.gone = &g;
    in.gone_seen_ms = 2000;
    ck_assert_int_eq(ec_barrier_decide(&in).until_ms, 2000 + TTL);
}
END_TEST

START_TEST(a_departure_of_another_lease_is_not_this_holders)
{
    /* gone/c is from an earlier eviction of c: its lease differs, so the
     * holder's lease ended another way (expired after its fence, or left) */
    ec_rank_holder_t h = holder("c", 4, 9, false);
    ec_departure_t g = {.lease = 3, .cause = EC_DEPART_SILENT, .wait_ms = 8000};
    ec_barrier_in_t in = in_for(&h, 1000);
    in.gone = &g;
    ck_assert_int_eq(ec_barrier_decide(&in).verdict, EC_BARRIER_CLEAR);
    /* a record under a new lease (c restarted) does not hold the old claim */
    in.gone = NULL;
    in.record_lease = 12;
    ck_assert_int_eq(ec_barrier_decide(&in).verdict, EC_BARRIER_CLEAR);
}
END_TEST

START_TEST(a_newer_epochs_holder_means_this_epoch_is_superseded)
{
    ec_rank_holder_t h = holder("c", 6, 9, false);
    ec_barrier_in_t in = in_for(&h, 1000);
    ck_assert_int_eq(ec_barrier_decide(&in).verdict, EC_BARRIER_WAIT);
}
END_TEST

START_TEST(records_round_trip_and_garbage_is_refused_with_the_fix)
{
    ec_rank_holder_t h = holder("node-7", 42, 0x1234, true), h2;
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_rank_holder_encode(&h, &buf, &len, &err), 0);
    ck_assert_int_eq(ec_rank_holder_decode(buf, len, "/j/holders/3", &h2, &err), 0);
    free(buf);
    ck_assert_str_eq(h2.node_id, "node-7");
    ck_assert_int_eq(h2.epoch, 42);
    ck_assert_int_eq(h2.lease, 0x1234);
    ck_assert(h2.stopped);
    ec_departure_t d = {.lease = 5, .cause = EC_DEPART_HUNG, .wait_ms = 2500}, d2;
    ck_assert_int_eq(ec_departure_encode(&d, &buf, &len, &err), 0);
    ck_assert_int_eq(ec_departure_decode(buf, len, "/j/gone/x", &d2, &err), 0);
    free(buf);
    ck_assert_int_eq(d2.lease, 5);
    ck_assert_int_eq(d2.cause, EC_DEPART_HUNG);
    ck_assert_int_eq(d2.wait_ms, 2500);

    ck_assert_int_eq(ec_rank_holder_decode("\xff\xff\xff", 3, "/j/holders/3", &h2, &err),
                     EC_ECORRUPT);
    ck_assert_msg(strstr(err.msg, "/j/holders/3") && strstr(err.msg, "etcdctl del"), "%s",
                  err.msg);
    ck_assert_int_eq(ec_rank_holder_decode("", 0, "/j/holders/3", &h2, &err), EC_ECORRUPT);
    ck_assert_int_eq(ec_departure_decode("\x10\x09", 2, "/j/gone/x", &d2, &err), EC_ECORRUPT);
    ck_assert_msg(strstr(err.msg, "unknown cause"), "%s", err.msg);
    ec_rank_holder_t bad = holder("no/slash", 1, 1, false);
    ck_assert_int_lt(ec_rank_holder_encode(&bad, &buf, &len, &err), 0);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("stop_barrier", NULL, NULL,
                          EC_CHECK_TESTS(
                              no_holder_own_or_confirmed_clears_at_once,
                              a_registered_holder_is_waited_for_up_to_the_ttl,
                              an_agent_evicted_as_gone_clears_at_once,
                              a_silent_or_hung_holder_is_waited_for_its_lease_time_left,
                              a_departure_of_another_lease_is_not_this_holders,
                              a_newer_epochs_holder_means_this_epoch_is_superseded,
                              records_round_trip_and_garbage_is_refused_with_the_fix));
}

EC_CHECK_MAIN(suite)
