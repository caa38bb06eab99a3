/* Rules checked: the node coordinator's pure decisions (coord/node/node_policy.c).
 * Registration never holds a lease of its own while it waits, takes a record
 * back at once from an agent that no longer answers its probe (a restarted
 * container), and refuses a node id only once a live agent kept it a whole
 * TTL; election adopts a leader key that names us on our lease, resigns one
 * on an old lease of ours, never steps down on a key the model has not seen
 * yet; a follower needs a strict majority of the other members to evict the
 * leader. */
#include <stdio.h>

#include "ec_check.h"
#include "node_policy.h"

START_TEST(registration_decisions)
{
    ec_reg_view_t v = {0};
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_CREATE);
    /* our own record, on a lease etcd still has (re-registration) */
    v = (ec_reg_view_t){.present = true, .lease = 7, .my_old_lease = 7};
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_TAKE_OWN);
    /* junk: cleared once, then waited out */
    v = (ec_reg_view_t){.present = true, .lease = 0};
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_CLEAR_JUNK);
    v.junk_cleared = true;
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_WAIT);
    /* another agent's record: probe it first */
    v = (ec_reg_view_t){.present = true, .lease = 9, .my_old_lease = 0, .has_probe_port = true};
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_PROBE);
    v.probe = EC_REG_PROBE_SILENT; /* a restarted container: the old agent is gone */
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_TAKE_DEAD);
    v.probe = EC_REG_PROBE_ANSWERED; /* a live duplicate: one TTL, then refused */
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_WAIT);
    v.deadline_passed = true;
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_DUPLICATE);
    /* no probe port (an older agent): wait for expiry, then refuse */
    v = (ec_reg_view_t){.present = true, .lease = 9};
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_WAIT);
    v.deadline_passed = true;
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_DUPLICATE);
    /* an old lease of ours that is not this record's lease is not ours */
    v = (ec_reg_view_t){.present = true, .lease = 9, .my_old_lease = 8, .has_probe_port = true};
    ck_assert_int_eq(ec_reg_decide(&v), EC_REG_PROBE);
}
END_TEST

/* A node that registered after the current epoch was written (a deposed
 * leader re-registering, a restarted or standby node) leaves the vacant
 * leadership for a while to a member that was registered before it: that
 * member holds the job's reports and holds (of evicted nodes), the
 * newcomer does not. */
START_TEST(newcomer_defers_campaign_to_senior_member)
{
    ec_elect_view_t v = {.my_lease = 5, .junior = true, .senior_alive = true,
                         .absent_ms = 0, .defer_ms = 2000};
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_DEFER);
    v.absent_ms = 1999;
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_DEFER);
    /* the senior did not take it in time: anyone campaigns */
    v.absent_ms = 2000;
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_CAMPAIGN);
    /* no senior member alive (all re-registered after an outage): at once */
    v = (ec_elect_view_t){.my_lease = 5, .junior = true, .defer_ms = 2000};
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_CAMPAIGN);
    /* a senior member itself campaigns at once */
    v = (ec_elect_view_t){.my_lease = 5, .senior_alive = true, .defer_ms = 2000};
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_CAMPAIGN);
    /* a present key is never deferred on: the usual decisions */
    v = (ec_elect_view_t){.my_lease = 5, .junior = true, .senior_alive = true, .defer_ms = 2000,
                          .key_present = true, .key_names_me = true, .key_lease = 5,
                          .key_create_rev = 9};
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_ADOPT);
}
END_TEST

START_TEST(election_decisions)
{
    ec_elect_view_t v = {.my_lease = 5};
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_CAMPAIGN);
    /* someone else leads */
    v = (ec_elect_view_t){.my_lease = 5, .key_present = true, .key_create_rev = 10, .key_lease = 6};
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_NONE);
    /* the key names us on our lease but we do not know it: adopt */
    v.key_names_me = true;
    v.key_lease = 5;
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_ADOPT);
    /* ... on an old lease of ours: resign */
    v.key_lease = 4;
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_RESIGN);
    /* a foreign (unleased) key is cleared whoever we are */
    v.key_lease = 0;
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_CLEAR_FOREIGN);
    v.am_leader = true;
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_CLEAR_FOREIGN);
    /* we lead and the key agrees */
    v = (ec_elect_view_t){.am_leader = true, .my_leader_rev = 10, .my_lease = 5,
                          .key_present = true, .key_names_me = true, .key_create_rev = 10,
                          .key_lease = 5};
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_NONE);
    /* another leadership, or ours recreated: step down */
    v.key_create_rev = 12;
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_STEP_DOWN);
    v.key_create_rev = 10;
    v.key_names_me = false;
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_STEP_DOWN);
    /* the key absent: only a deletion newer than our campaign counts */
    v = (ec_elect_view_t){.am_leader = true, .my_leader_rev = 10, .my_lease = 5,
                          .key_deleted_rev = 8};
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_NONE);
    v.key_deleted_rev = 11;
    ck_assert_int_eq(ec_elect_decide(&v), EC_ELECT_STEP_DOWN);
}
END_TEST

START_TEST(leader_eviction_needs_a_majority_of_the_others)
{
    ck_assert(!ec_evict_leader_quorum(1, 0));
    ck_assert(ec_evict_leader_quorum(2, 1));  /* the one other member */
    ck_assert(!ec_evict_leader_quorum(3, 1)); /* one of two: a partitioned follower */
    ck_assert(ec_evict_leader_quorum(3, 2));
    ck_assert(!ec_evict_leader_quorum(5, 2));
    ck_assert(ec_evict_leader_quorum(5, 3));
    ck_assert(!ec_evict_leader_quorum(4, 0));
}
END_TEST

START_TEST(leader_evicts_members_only_on_evidence_from_more_than_one_side)
{
    /* the leader's own report alone: not enough with three or more members */
    ck_assert(!ec_evict_member_evidence(3, 1, true));
    ck_assert(!ec_evict_member_evidence(5, 1, true));
    /* another member saw it too, or instead */
    ck_assert(ec_evict_member_evidence(3, 1, false));
    ck_assert(ec_evict_member_evidence(3, 2, true));
    ck_assert(ec_evict_member_evidence(5, 2, true));
    /* two members: the leader is the only one who can tell */
    ck_assert(ec_evict_member_evidence(2, 1, true));
    ck_assert(!ec_evict_member_evidence(3, 0, false));
    ck_assert(!ec_evict_member_evidence(1, 0, false));
}
END_TEST

START_TEST(evicted_node_held_out_until_it_answers_a_probe)
{
    /* never probed yet: probe */
    ck_assert_int_eq(ec_readmit_decide(false, 100, -1, 1000, 120000), EC_READMIT_PROBE);
    /* probed 300 ms ago, silent: hold */
    ck_assert_int_eq(ec_readmit_decide(false, 4200, 300, 1000, 120000), EC_READMIT_HOLD);
    /* a second since: probe again */
    ck_assert_int_eq(ec_readmit_decide(false, 5000, 1000, 1000, 120000), EC_READMIT_PROBE);
    /* answered: admitted */
    ck_assert_int_eq(ec_readmit_decide(true, 5000, 10, 1000, 120000), EC_READMIT_ADMIT);
    /* remembered for a bounded time only */
    ck_assert_int_eq(ec_readmit_decide(false, 120000, 10, 1000, 120000), EC_READMIT_FORGET);
}
END_TEST

START_TEST(each_member_watches_its_successors_in_a_ring)
{
    /* members in M_id order: the ring follows it, wrapping around */
    const char *ids[] = {"n3", "n1", "n4", "n2"};
    size_t out[2];
    ck_assert_uint_eq(ec_ring_watched(ids, 4, "n1", 2, out), 2);
    ck_assert_str_eq(ids[out[0]], "n4");
    ck_assert_str_eq(ids[out[1]], "n2");
    ck_assert_uint_eq(ec_ring_watched(ids, 4, "n2", 2, out), 2); /* wraps around */
    ck_assert_str_eq(ids[out[0]], "n3");
    ck_assert_str_eq(ids[out[1]], "n1");
    ck_assert_uint_eq(ec_ring_watched(ids, 4, "n3", 1, out), 1);
    ck_assert_str_eq(ids[out[0]], "n1");
    /* every member watched by exactly k others, nobody by itself */
    int watchers[4] = {0};
    for (size_t m = 0; m < 4; m++) {
        size_t got = ec_ring_watched(ids, 4, ids[m], 2, out);
        ck_assert_uint_eq(got, 2);
        for (size_t j = 0; j < got; j++) {
            ck_assert_uint_ne(out[j], m);
            watchers[out[j]]++;
        }
    }
    for (int m = 0; m < 4; m++)
        ck_assert_int_eq(watchers[m], 2);
    /* fewer members than watchers: each watches the others, once */
    ck_assert_uint_eq(ec_ring_watched(ids, 2, "n1", 2, out), 1);
    ck_assert_str_eq(ids[out[0]], "n3");
    ck_assert_uint_eq(ec_ring_watched(ids, 1, "n3", 2, out), 0);
    /* not a member: watches nobody */
    ck_assert_uint_eq(ec_ring_watched(ids, 4, "n9", 2, out), 0);
    /* a view (members not held are NULL): the next ones it holds */
    const char *view[] = {"n0", NULL, "n2", "n3", NULL, NULL};
    ck_assert_uint_eq(ec_ring_watched(view, 6, "n3", 2, out), 2);
    ck_assert_str_eq(view[out[0]], "n0");
    ck_assert_str_eq(view[out[1]], "n2");
    /* a loss compacts the M_ids after it: only its watchers change */
    const char *before[] = {"a", "b", "c", "d", "e"}, *after[] = {"a", "b", "d", "e"};
    ck_assert_uint_eq(ec_ring_watched(before, 5, "d", 2, out), 2);
    ck_assert_str_eq(before[out[0]], "e");
    ck_assert_str_eq(before[out[1]], "a");
    ck_assert_uint_eq(ec_ring_watched(after, 4, "d", 2, out), 2);
    ck_assert_str_eq(after[out[0]], "e");
    ck_assert_str_eq(after[out[1]], "a");
    /* large job: still k peers */
    enum { N = 16384 };
    static char buf[N][8];
    static const char *big[N];
    for (int i = 0; i < N; i++) {
        snprintf(buf[i], sizeof(buf[i]), "n%05d", (i * 7919) % N);
        big[i] = buf[i];
    }
    ck_assert_uint_eq(ec_ring_watched(big, N, big[N - 1], 2, out), 2);
    ck_assert_str_eq(big[out[0]], big[0]);
    ck_assert_str_eq(big[out[1]], big[1]);
}
END_TEST

START_TEST(a_suspect_is_probed_again_on_a_newer_report_at_most_once_a_second)
{
    /* never probed: at once */
    ck_assert(ec_suspect_probe_due(false, 5, 0, false, -1, 1000));
    /* probed for the newest report already: not again, whatever the time */
    ck_assert(!ec_suspect_probe_due(true, 5, 5, false, 60000, 1000));
    ck_assert(!ec_suspect_probe_due(true, 5, 5, true, 60000, 1000));
    /* answered, then a newer report: after the interval only */
    ck_assert(!ec_suspect_probe_due(true, 9, 5, false, 400, 1000));
    ck_assert(ec_suspect_probe_due(true, 9, 5, false, 1000, 1000));
    /* silent last time (a follower adding its report, an eviction that
     * failed): a newer report is acted on at once */
    ck_assert(ec_suspect_probe_due(true, 9, 5, true, 10, 1000));
}
END_TEST

START_TEST(followers_confirming_a_report_of_the_leader_are_spread_in_large_jobs)
{
    /* small and mid-sized jobs: every follower at once */
    ck_assert_int_eq(ec_confirm_delay_ms("n1", 3), 0);
    ck_assert_int_eq(ec_confirm_delay_ms("n1", 2 * EC_CONFIRM_PER_SLOT + 1), 0);
    /* 16,384 members: 8 slots, spread evenly enough, never past the last */
    int per[8] = {0};
    char id[32];
    for (int i = 0; i < 16384; i++) {
        snprintf(id, sizeof(id), "node-%05d", i);
        int64_t d = ec_confirm_delay_ms(id, 16384);
        ck_assert_int_ge(d, 0);
        ck_assert_int_le(d, 7 * EC_CONFIRM_SLOT_MS);
        ck_assert_int_eq(d % EC_CONFIRM_SLOT_MS, 0);
        per[d / EC_CONFIRM_SLOT_MS]++;
    }
    for (int k = 0; k < 8; k++) /* no slot far over its 2,048 */
        ck_assert_msg(per[k] > 1500 && per[k] < 2600, "slot %d has %d followers", k, per[k]);
    /* the same follower, the same slot */
    ck_assert_int_eq(ec_confirm_delay_ms("node-00042", 16384), ec_confirm_delay_ms("node-00042", 16384));
}
END_TEST

/* The coordinator's life as a state machine: every phase's reaction to
 * every event, and what it ignores. */
START_TEST(phase_machine_transitions)
{
    struct {
        ec_node_phase_t from;
        ec_phase_event_t ev;
        ec_node_phase_t to;
    } t[] = {
        {EC_PHASE_REGISTERING, EC_PEV_REGISTERED, EC_PHASE_FOLLOWER},
        {EC_PHASE_REGISTERING, EC_PEV_WON, EC_PHASE_REGISTERING},
        {EC_PHASE_REGISTERING, EC_PEV_STEPPED_DOWN, EC_PHASE_REGISTERING},
        {EC_PHASE_REGISTERING, EC_PEV_LEASE_LOST, EC_PHASE_REGISTERING},
        {EC_PHASE_FOLLOWER, EC_PEV_WON, EC_PHASE_LEADER},
        {EC_PHASE_FOLLOWER, EC_PEV_LEASE_LOST, EC_PHASE_REGISTERING},
        {EC_PHASE_FOLLOWER, EC_PEV_STEPPED_DOWN, EC_PHASE_FOLLOWER},
        {EC_PHASE_FOLLOWER, EC_PEV_REGISTERED, EC_PHASE_FOLLOWER},
        {EC_PHASE_LEADER, EC_PEV_STEPPED_DOWN, EC_PHASE_FOLLOWER},
        {EC_PHASE_LEADER, EC_PEV_LEASE_LOST, EC_PHASE_REGISTERING},
        {EC_PHASE_LEADER, EC_PEV_WON, EC_PHASE_LEADER},
        {EC_PHASE_LEADER, EC_PEV_LEAVE, EC_PHASE_LEAVING},
        {EC_PHASE_FOLLOWER, EC_PEV_LEAVE, EC_PHASE_LEAVING},
        {EC_PHASE_REGISTERING, EC_PEV_LEAVE, EC_PHASE_LEAVING},
        /* a leaving node neither registers nor leads again */
        {EC_PHASE_LEAVING, EC_PEV_REGISTERED, EC_PHASE_LEAVING},
        {EC_PHASE_LEAVING, EC_PEV_WON, EC_PHASE_LEAVING},
        {EC_PHASE_LEAVING, EC_PEV_STEPPED_DOWN, EC_PHASE_LEAVING},
        {EC_PHASE_LEAVING, EC_PEV_STOP, EC_PHASE_STOPPED},
        /* every phase stops; stopped is the end */
        {EC_PHASE_REGISTERING, EC_PEV_STOP, EC_PHASE_STOPPED},
        {EC_PHASE_FOLLOWER, EC_PEV_STOP, EC_PHASE_STOPPED},
        {EC_PHASE_LEADER, EC_PEV_STOP, EC_PHASE_STOPPED},
        {EC_PHASE_STOPPED, EC_PEV_REGISTERED, EC_PHASE_STOPPED},
        {EC_PHASE_STOPPED, EC_PEV_WON, EC_PHASE_STOPPED},
        {EC_PHASE_STOPPED, EC_PEV_LEAVE, EC_PHASE_STOPPED},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        ck_assert_msg(ec_node_phase_next(t[i].from, t[i].ev) == t[i].to,
                      "%s + %s: want %s, got %s", ec_node_phase_name(t[i].from),
                      ec_phase_event_name(t[i].ev), ec_node_phase_name(t[i].to),
                      ec_node_phase_name(ec_node_phase_next(t[i].from, t[i].ev)));
    ck_assert_str_eq(ec_node_phase_name(EC_PHASE_REGISTERING), "registering");
    ck_assert_str_eq(ec_phase_event_name(EC_PEV_LEASE_LOST), "lease-lost");
}
END_TEST

Suite *suite(void)
{
    Suite *s = suite_create("node_policy");
    TCase *tc = tcase_create("node_policy");
    tcase_add_test(tc, phase_machine_transitions);
    tcase_add_test(tc, registration_decisions);
    tcase_add_test(tc, election_decisions);
    tcase_add_test(tc, newcomer_defers_campaign_to_senior_member);
    tcase_add_test(tc, leader_eviction_needs_a_majority_of_the_others);
    tcase_add_test(tc, leader_evicts_members_only_on_evidence_from_more_than_one_side);
    tcase_add_test(tc, evicted_node_held_out_until_it_answers_a_probe);
    tcase_add_test(tc, each_member_watches_its_successors_in_a_ring);
    tcase_add_test(tc, a_suspect_is_probed_again_on_a_newer_report_at_most_once_a_second);
    tcase_add_test(tc, followers_confirming_a_report_of_the_leader_are_spread_in_large_jobs);
    suite_add_tcase(s, tc);
    return s;
}

EC_CHECK_MAIN(suite)
