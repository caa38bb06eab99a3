/* Rules checked: which epochs a reader applies (coord/core/epoch_check.c).  An
 * epoch is applied only if it names the reader's job and the leader key at
 * its revision existed, was created at its leader_rev and names its
 * leader_id; the log of leaderships a reader saw tells which leadership held
 * the key at a revision, or says it cannot tell (before what it saw). */
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "epoch_check.h"

static ec_epoch_t *epoch(uint64_t number, const char *job, const char *leader, int64_t rev)
{
    ec_epoch_t *ep = ec_epoch_new(1, 1);
    ep->number = number;
    ep->job_id = job ? strdup(job) : NULL;
    ep->leader_id = strdup(leader);
    ep->leader_rev = rev;
    return ep;
}

START_TEST(epoch_must_name_the_job_and_its_leadership)
{
    char why[512];
    ec_leadership_t l = {.create_rev = 5, .id = "n1"};
    ec_epoch_t *ep = epoch(3, "job", "n1", 5);
    ck_assert_int_eq(ec_epoch_check(ep, "job", 9, &l, why, sizeof(why)), EC_ACCEPTED);
    /* another job's */
    ck_assert_int_eq(ec_epoch_check(ep, "job10", 9, &l, why, sizeof(why)), EC_REFUSED_OTHER_JOB);
    /* The log line is the message here: what was refused, whose, and what
     * happens next (docs/how-it-works.md quotes it; t2400 greps its start). */
    ck_assert_str_eq(why, "ignoring epoch 3: written by 'n1' under leader revision 5, but it "
                          "names job 'job', not 'job10' (copied from another job?); the leader "
                          "will restore the last valid epoch");
    /* no leader key then */
    ck_assert_int_eq(ec_epoch_check(ep, "job", 9, NULL, why, sizeof(why)), EC_REFUSED_NO_LEADER);
    /* another leadership then */
    ec_leadership_t other = {.create_rev = 7, .id = "n1"};
    ck_assert_int_eq(ec_epoch_check(ep, "job", 9, &other, why, sizeof(why)),
                     EC_REFUSED_OTHER_LEADERSHIP);
    /* the right revision, another name (a non-leader citing the token) */
    ec_leadership_t named = {.create_rev = 5, .id = "n2"};
    ck_assert_int_eq(ec_epoch_check(ep, "job", 9, &named, why, sizeof(why)),
                     EC_REFUSED_OTHER_LEADER);
    ec_epoch_free(ep);
    /* no job recorded */
    ep = epoch(3, NULL, "n1", 5);
    ck_assert_int_eq(ec_epoch_check(ep, "job", 9, &l, why, sizeof(why)), EC_REFUSED_NO_JOB);
    /* why is optional */
    ck_assert_int_eq(ec_epoch_check(ep, "job", 9, &l, NULL, 0), EC_REFUSED_NO_JOB);
    /* a refusal reads as "< 0" to every caller, and has a name */
    ck_assert_int_lt(EC_REFUSED_NO_JOB, 0);
    ck_assert_str_eq(ec_refusal_name(EC_REFUSED_OTHER_LEADERSHIP), "other-leadership");
    ec_epoch_free(ep);
}
END_TEST

START_TEST(leader_log_tells_the_leadership_at_a_revision)
{
    ec_leader_log_t l = {0};
    const ec_leadership_t *e = NULL;
    ec_leader_log_reset(&l, 100);     /* listed at 100 */
    ec_leader_log_put(&l, 40, "a", 1); /* the key then, created at 40 */
    ck_assert_int_eq(ec_leader_log_at(&l, 39, &e), -1); /* before: cannot tell */
    ck_assert_int_eq(ec_leader_log_at(&l, 40, &e), 1);
    ck_assert_str_eq(e->id, "a");
    ck_assert_int_eq(ec_leader_log_at(&l, 100, &e), 1);
    ec_leader_log_delete(&l, 110);
    ck_assert_int_eq(ec_leader_log_at(&l, 109, &e), 1);
    ck_assert_int_eq(ec_leader_log_at(&l, 110, &e), 0); /* seen: nobody held it */
    ec_leader_log_put(&l, 120, "b", 1);
    ck_assert_int_eq(ec_leader_log_at(&l, 115, &e), 0);
    ck_assert_int_eq(ec_leader_log_at(&l, 130, &e), 1);
    ck_assert_str_eq(e->id, "b");
    /* a key created anew without its deletion seen ends the one before */
    ec_leader_log_put(&l, 140, "c", 1);
    ck_assert_int_eq(ec_leader_log_at(&l, 139, &e), 1);
    ck_assert_str_eq(e->id, "b");
    ck_assert_int_eq(ec_leader_log_at(&l, 140, &e), 1);
    ck_assert_str_eq(e->id, "c");
    /* the log is bounded: what fell off is no longer told */
    for (int i = 0; i < EC_LEADER_LOG_MAX; i++)
        ec_leader_log_put(&l, 200 + 10 * i, "d", 1);
    ck_assert_int_eq(ec_leader_log_at(&l, 45, &e), -1);
    ck_assert_int_eq(ec_leader_log_at(&l, 200 + 10 * (EC_LEADER_LOG_MAX - 1), &e), 1);
    ec_leader_log_reset(&l, 0);
}
END_TEST

START_TEST(skipped_numbers_need_the_history_to_show_them)
{
    char why[512];
    ec_epoch_t *ep = epoch(UINT64_MAX, "job", "n1", 5);
    /* the history has the reader's epoch 7, neither this one nor the one
     * before it: forged */
    ck_assert_int_eq(ec_epoch_gap_check(ep, 7, false, false, true, why, sizeof(why)),
                     EC_REFUSED_UNSHOWN_GAP);
    /* the history holds the epoch itself: a leader numbering above an
     * epoch it refused writes its history copy in the same transaction */
    ep->number = 12;
    ck_assert_int_eq(ec_epoch_gap_check(ep, 7, true, false, true, why, sizeof(why)), EC_ACCEPTED);
    /* the history shows the predecessor: the reader missed them (relisted) */
    ck_assert_int_eq(ec_epoch_gap_check(ep, 7, false, true, true, why, sizeof(why)), EC_ACCEPTED);
    /* nothing to check against: etcd lost or pruned the reader's own epoch */
    ck_assert_int_eq(ec_epoch_gap_check(ep, 7, false, false, false, why, sizeof(why)), EC_ACCEPTED);
    /* the next number, or an old one (judged elsewhere), skips nothing */
    ep->number = 8;
    ck_assert_int_eq(ec_epoch_gap_check(ep, 7, false, false, true, why, sizeof(why)), EC_ACCEPTED);
    ep->number = 7;
    ck_assert_int_eq(ec_epoch_gap_check(ep, 7, false, false, true, why, sizeof(why)), EC_ACCEPTED);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(only_the_leadership_of_the_time_ends_a_run)
{
    char why[512];
    ec_leadership_t l = {.create_rev = 5, .id = "n1"};
    ec_job_status_t st = {.state = EC_JOB_COMPLETED, .run = 2, .updated_by = "n1",
                          .leader_id = "n1", .leader_rev = 5};
    ck_assert_int_eq(ec_status_check(&st, 9, &l, why, sizeof(why)), EC_ACCEPTED);
    /* another tool's: no leadership named */
    st.leader_id = "";
    st.leader_rev = 0;
    st.updated_by = "tool";
    ck_assert_int_eq(ec_status_check(&st, 9, &l, why, sizeof(why)), EC_REFUSED_NO_LEADERSHIP);
    /* the message: what was ignored, whose, and what happens next (t2400
     * and t7000 grep its start) */
    ck_assert_str_eq(why, "ignoring job status completed of run 2 (revision 9): written by "
                          "'tool' under leader revision 0, but it names no leadership (only the "
                          "leader ends a run); the leader will restore the job's status");
    /* a copied leadership that did not hold the key then */
    st.state = EC_JOB_FAILED;
    st.reason = "x";
    st.leader_id = "n1";
    st.leader_rev = 4;
    ck_assert_int_eq(ec_status_check(&st, 9, &l, why, sizeof(why)), EC_REFUSED_OTHER_LEADERSHIP);
    ck_assert_int_eq(ec_status_check(&st, 9, NULL, why, sizeof(why)), EC_REFUSED_NO_LEADER);
    /* interrupted: only when no leader key exists */
    st.state = EC_JOB_INTERRUPTED;
    st.leader_id = "";
    st.leader_rev = 0;
    ck_assert_int_eq(ec_status_check(&st, 9, NULL, why, sizeof(why)), EC_ACCEPTED);
    ck_assert_int_eq(ec_status_check(&st, 9, &l, why, sizeof(why)),
                     EC_REFUSED_INTERRUPTED_UNDER_LEADER);
    /* running ends nothing: whoever wrote it */
    st.state = EC_JOB_RUNNING;
    ck_assert_int_eq(ec_status_check(&st, 9, &l, why, sizeof(why)), EC_ACCEPTED);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("epoch_check", NULL, NULL,
                          EC_CHECK_TESTS(
                              epoch_must_name_the_job_and_its_leadership,
                              leader_log_tells_the_leadership_at_a_revision,
                              skipped_numbers_need_the_history_to_show_them,
                              only_the_leadership_of_the_time_ends_a_run));
}

EC_CHECK_MAIN(suite)
