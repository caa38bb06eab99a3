/* Rule checked: ec_history_check() accepts a history that keeps every
 * invariant of history.h and names the first violation of each rule: numbers
 * strictly increasing, ranks exactly 0..W-1 with no node twice, constant N,
 * MIN <= nodes <= MAX, each epoch written by the observed holder of the
 * leader key at its fencing revision and while that holder still held it
 * (its etcd mod revision inside the leadership), fencing revisions never going
 * down. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "history.h"
#include "records.h"

/* Epoch `number` with the given member node ids (all on distinct hosts). */
static ec_epoch_t *mk_epoch(uint64_t number, int nproc, const char *const *ids, int n,
                            const char *leader, int64_t rev)
{
    ec_epoch_t *ep = ec_epoch_new(n, nproc);
    ck_assert_ptr_nonnull(ep);
    ep->number = number;
    for (int i = 0; i < n; i++) {
        ep->members[i].node_id = strdup(ids[i]);
        char h[32];
        snprintf(h, sizeof h, "host-%s", ids[i]);
        ep->members[i].host = strdup(h);
        for (int j = 0; j < nproc; j++)
            ep->members[i].ports[j] = (uint16_t)(6000 + j);
        ep->members[i].master_port = 29500;
    }
    ep->reason = number == 1 ? EC_REASON_START : EC_REASON_JOIN;
    ep->leader_id = strdup(leader);
    ep->leader_rev = rev;
    return ep;
}

/* A good history of 6 epochs over two leaderships:
 *   1: start n0,n1        (leader n0, rev 10)
 *   2: n2 joins           (n0, 10)
 *   3: n1 lost            (n0, 10)
 *   4: n0 lost, new leader n2 elected (rev 31)
 *   5: n3, n4 join        (n2, 31)
 *   6: restart            (n2, 31) */
#define NGOOD 6
static ec_epoch_t *good[NGOOD];
static const ec_leader_obs_t obs[] = {{"n0", 10, 0}, {"n2", 31, 0}, {"n7", 55, 0}};
#define NOBS (sizeof(obs) / sizeof(obs[0]))

static void setup(void)
{
    const char *e1[] = {"n0", "n1"}, *e2[] = {"n0", "n1", "n2"}, *e3[] = {"n0", "n2"},
               *e4[] = {"n2"}, *e5[] = {"n2", "n3", "n4"};
    good[0] = mk_epoch(1, 2, e1, 2, "n0", 10);
    good[1] = mk_epoch(2, 2, e2, 3, "n0", 10);
    good[2] = mk_epoch(3, 2, e3, 2, "n0", 10);
    good[3] = mk_epoch(4, 2, e4, 1, "n2", 31);
    good[4] = mk_epoch(5, 2, e5, 3, "n2", 31);
    good[5] = mk_epoch(6, 2, e5, 3, "n2", 31);
    good[5]->reason = EC_REASON_RESTART;
}

static void teardown(void)
{
    for (int i = 0; i < NGOOD; i++) {
        ec_epoch_free(good[i]);
        good[i] = NULL;
    }
}

static const ec_epoch_t *const *hist(void)
{
    return (const ec_epoch_t *const *)good;
}

static ec_history_opts_t opts_1_3(void)
{
    ec_history_opts_t o = EC_HISTORY_OPTS_INIT;
    o.min_nodes = 1;
    o.max_nodes = 3;
    return o;
}

/* Check must fail with EC_ECORRUPT, by rule `rule` at history[idx], and
 * say so, with `want` among its words for the reader. */
static void expect_violation(const ec_history_opts_t *o, size_t idx, ec_history_rule_t rule,
                             const char *want)
{
    ec_error_t err = {0};
    ec_history_stats_t st;
    int rc = ec_history_check(hist(), NGOOD, obs, NOBS, o, &st, &err);
    ck_assert_msg(rc == EC_ECORRUPT, "violation '%s' not caught (rc %d)", want, rc);
    ck_assert_msg(st.broken == rule, "broke %s, expected %s: %s", ec_history_rule_name(st.broken),
                  ec_history_rule_name(rule), err.msg);
    ck_assert_uint_eq(st.broken_at, idx);
    char at[32], named[64];
    snprintf(at, sizeof at, "history[%zu]", idx);
    ck_assert_msg(strstr(err.msg, at), "'%s' does not name %s", err.msg, at);
    snprintf(named, sizeof named, "(rule %s)", ec_history_rule_name(rule));
    ck_assert_msg(strstr(err.msg, named), "'%s' does not end with %s", err.msg, named);
    ck_assert_msg(strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
    ck_assert_int_eq(st.epochs, (int)idx); /* counted up to the violation */
}

START_TEST(accepts_good_history)
{
    ec_history_opts_t o = opts_1_3();
    o.nproc = 2;
    o.consecutive = 1;
    ec_history_stats_t st;
    ec_error_t err = {0};
    int rc = ec_history_check(hist(), NGOOD, obs, NOBS, &o, &st, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    ck_assert_int_eq(st.epochs, 6);
    ck_assert_int_eq(st.ranks, (2 + 3 + 2 + 1 + 3 + 3) * 2);
    ck_assert_int_eq(st.leaderships, 2);
    fprintf(stderr, "# good history: %d epochs, %ld ranks, %d leaderships checked\n", st.epochs,
            st.ranks, st.leaderships);
    /* defaults: any size >= 1, N from the first epoch, gaps allowed */
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, obs, NOBS, NULL, NULL, NULL), 0);
    /* empty history is trivially fine */
    ck_assert_int_eq(ec_history_check(NULL, 0, NULL, 0, NULL, &st, NULL), 0);
    ck_assert_int_eq(st.epochs, 0);
}
END_TEST

/* The checker is fed what integration tests read back: encoded and decoded. */
START_TEST(accepts_decoded_history)
{
    ec_epoch_t *dec[NGOOD];
    for (int i = 0; i < NGOOD; i++) {
        void *buf;
        size_t len;
        ec_error_t err = {0};
        ck_assert_msg(ec_epoch_encode(good[i], &buf, &len, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(ec_epoch_decode(buf, len, NULL, &dec[i], &err), 0);
        free(buf);
    }
    ec_history_opts_t o = opts_1_3();
    ck_assert_int_eq(ec_history_check((const ec_epoch_t *const *)dec, NGOOD, obs, NOBS, &o,
                                      NULL, NULL),
                     0);
    for (int i = 0; i < NGOOD; i++)
        ec_epoch_free(dec[i]);
}
END_TEST

START_TEST(numbers_must_increase)
{
    ec_history_opts_t o = opts_1_3();
    good[3]->number = 3; /* repeats epoch 3 */
    expect_violation(&o, 3, EC_HISTORY_NOT_INCREASING, "strictly increase");
    good[3]->number = 2; /* goes back */
    expect_violation(&o, 3, EC_HISTORY_NOT_INCREASING, "epoch 2 follows epoch 3");
    good[3]->number = 0;
    expect_violation(&o, 3, EC_HISTORY_NUMBER_ZERO, "epoch number 0");
}
END_TEST

START_TEST(gaps_only_with_consecutive)
{
    ec_history_opts_t o = opts_1_3();
    good[4]->number = 9;
    good[5]->number = 10;
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, obs, NOBS, &o, NULL, NULL), 0);
    o.consecutive = 1;
    expect_violation(&o, 4, EC_HISTORY_MISSING, "epochs 5..8 are missing");
}
END_TEST

START_TEST(world_size_must_match_members)
{
    ec_history_opts_t o = opts_1_3();
    good[2]->world_size = 5;
    expect_violation(&o, 2, EC_HISTORY_WORLD_SIZE, "ranks are not exactly 0..W-1");
}
END_TEST

START_TEST(m_ids_must_cover_ranks)
{
    ec_history_opts_t o = opts_1_3();
    good[1]->members[2].m_id = 1; /* ranks 2,3 twice, 4,5 never */
    expect_violation(&o, 1, EC_HISTORY_M_ID, "already taken");
    good[1]->members[2].m_id = 3;
    expect_violation(&o, 1, EC_HISTORY_M_ID, "out of range");
    good[1]->members[2].m_id = -1;
    expect_violation(&o, 1, EC_HISTORY_M_ID, "out of range");
    /* a permutation of 0..M-1 is fine: ranks still cover 0..W-1 once */
    good[1]->members[0].m_id = 2;
    good[1]->members[2].m_id = 0;
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, obs, NOBS, &o, NULL, NULL), 0);
}
END_TEST

START_TEST(no_node_twice)
{
    ec_history_opts_t o = opts_1_3();
    free(good[4]->members[2].node_id);
    good[4]->members[2].node_id = strdup("n2");
    expect_violation(&o, 4, EC_HISTORY_TWO_BLOCKS, "node n2 holds two blocks of ranks");
}
END_TEST

START_TEST(nproc_constant)
{
    ec_history_opts_t o = opts_1_3();
    ec_epoch_free(good[2]);
    const char *ids[] = {"n0", "n2"};
    good[2] = mk_epoch(3, 1, ids, 2, "n0", 10);
    expect_violation(&o, 2, EC_HISTORY_NPROC, "nproc 1, but the job runs 2 per node");
    /* an explicit N is checked from the first epoch on */
    o.nproc = 4;
    expect_violation(&o, 0, EC_HISTORY_NPROC, "nproc 2, but the job runs 4 per node");
}
END_TEST

START_TEST(node_count_within_bounds)
{
    ec_history_opts_t o = opts_1_3();
    o.min_nodes = 2;
    expect_violation(&o, 3, EC_HISTORY_NODES_RANGE, "1 nodes (world 2), outside 2:3");
    o.min_nodes = 1;
    o.max_nodes = 2;
    expect_violation(&o, 1, EC_HISTORY_NODES_RANGE, "3 nodes (world 6), outside 1:2");
}
END_TEST

START_TEST(writer_must_hold_leader_key)
{
    ec_history_opts_t o = opts_1_3();
    /* n0 claims revision 31, which n2 held */
    good[4]->leader_rev = 31;
    free(good[4]->leader_id);
    good[4]->leader_id = strdup("n0");
    expect_violation(&o, 4, EC_HISTORY_OTHER_HOLDER, "but n2 held the leader key at that revision");
    /* a revision nobody was seen holding */
    good[4]->leader_rev = 32;
    expect_violation(&o, 4, EC_HISTORY_UNKNOWN_LEADERSHIP, "which no observed leadership had");
    /* no observations at all: nothing can match */
    ec_error_t err = {0};
    ec_history_stats_t st;
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, NULL, 0, &o, &st, &err), EC_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "history[0]"));
    ck_assert_int_eq(st.broken, EC_HISTORY_UNKNOWN_LEADERSHIP);
    ck_assert_str_eq(ec_history_rule_name(st.broken), "unknown-leadership");
    ck_assert_str_eq(ec_history_rule_name((ec_history_rule_t)99), "unknown");
}
END_TEST

START_TEST(fencing_revision_never_goes_down)
{
    ec_history_opts_t o = opts_1_3();
    /* epoch 6 written by n0 under its old leadership after n2 took over: both
     * leaderships were observed, so only the ordering betrays the split brain */
    good[5]->leader_rev = 10;
    free(good[5]->leader_id);
    good[5]->leader_id = strdup("n0");
    expect_violation(&o, 5, EC_HISTORY_LEADER_REV_DOWN, "older than epoch 5's 31 (n2): a deposed leader wrote it");
}
END_TEST

START_TEST(bad_arguments)
{
    ec_history_opts_t o = opts_1_3();
    o.min_nodes = 4; /* min > max */
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, obs, NOBS, &o, NULL, NULL), EC_EINVAL);
    o = opts_1_3();
    o.min_nodes = 0;
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, obs, NOBS, &o, NULL, NULL), EC_EINVAL);
    o = opts_1_3();
    ck_assert_int_eq(ec_history_check(NULL, 2, obs, NOBS, &o, NULL, NULL), EC_EINVAL);
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, NULL, 2, &o, NULL, NULL), EC_EINVAL);
    const ec_epoch_t *withnull[2] = {good[0], NULL};
    ck_assert_int_eq(ec_history_check(withnull, 2, obs, NOBS, &o, NULL, NULL), EC_EINVAL);
    o.size = 3;
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, obs, NOBS, &o, NULL, NULL), EC_EINVAL);
}
END_TEST

/* A caller compiled against an older, smaller opts struct (only min/max)
 * gets defaults for the fields it does not know. */
START_TEST(older_opts_struct)
{
    ec_history_opts_t o = opts_1_3();
    o.consecutive = 1;   /* beyond the old size: must be ignored */
    good[4]->number = 9; /* a gap */
    good[5]->number = 10;
    o.size = offsetof(ec_history_opts_t, nproc);
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, obs, NOBS, &o, NULL, NULL), 0);
    o.size = sizeof(o);
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, obs, NOBS, &o, NULL, NULL), EC_ECORRUPT);
}
END_TEST

/* ---- the epoch's write revision inside its leadership ------------------- */

/* Leader A's key created at 5 and deleted at 9 (lease expired while A was
 * frozen), B's created at 10.  A wakes and its epoch write, if the fence
 * failed to stop it, lands at 11: after A was deposed but before B publishes
 * anything, so no ordering rule (6) can see it, only the write revision. */
static const ec_leader_obs_t ab_obs[] = {{"A", 5, 9}, {"B", 10, 0}};

/* Check a two-epoch history: epoch 1 by A at revision 6, epoch 2 by
 * (leader2, rev2) at mod revision mod2. */
static ec_history_stats_t ab_st;

static int check_ab(const char *leader2, int64_t rev2, int64_t mod2, int with_mods,
                    ec_error_t *err)
{
    const char *ids[] = {"A", "B"};
    ec_epoch_t *eps[2] = {mk_epoch(1, 1, ids, 2, "A", 5), mk_epoch(2, 1, ids, 2, leader2, rev2)};
    int64_t mods[2] = {6, mod2};
    ec_history_opts_t o = EC_HISTORY_OPTS_INIT;
    o.consecutive = 1;
    if (with_mods)
        o.mod_revs = mods;
    int rc = ec_history_check((const ec_epoch_t *const *)eps, 2, ab_obs, 2, &o, &ab_st, err);
    ec_epoch_free(eps[0]);
    ec_epoch_free(eps[1]);
    return rc;
}

START_TEST(deposed_leader_write_is_reported)
{
    ec_error_t err = {0};
    ck_assert_int_eq(check_ab("A", 5, 11, 1, &err), EC_ECORRUPT);
    ck_assert_msg(strstr(err.msg, "history[1] epoch 2: written at revision 11 by A under leader "
                                  "revision 5, but that leadership ended at revision 9"),
                  "%s", err.msg);
    ck_assert_ptr_nonnull(strstr(err.msg, "a deposed leader wrote it"));
    ck_assert_int_eq(ab_st.broken, EC_HISTORY_AFTER_LEADERSHIP);
    ck_assert_uint_eq(ab_st.broken_at, 1);
    /* the very revision of the delete is already too late */
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(check_ab("A", 5, 9, 1, &err), EC_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "ended at revision 9"));
    ck_assert_int_eq(ab_st.broken, EC_HISTORY_AFTER_LEADERSHIP);
    /* written before the leadership existed */
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(check_ab("B", 10, 8, 1, &err), EC_ECORRUPT);
    ck_assert_msg(strstr(err.msg, "written at revision 8, before B's leadership (leader "
                                  "revision 10) began"), "%s", err.msg);
    ck_assert_int_eq(ab_st.broken, EC_HISTORY_BEFORE_LEADERSHIP);
    ck_assert_ptr_nonnull(strstr(err.msg, "(rule before-leadership)"));
}
END_TEST

START_TEST(writes_inside_a_leadership_pass)
{
    ec_error_t err = {0};
    ck_assert_msg(check_ab("A", 5, 5, 1, &err) == 0, "%s", err.msg);  /* at its creation */
    ck_assert_int_eq(ab_st.broken, EC_HISTORY_OK);
    ck_assert_msg(check_ab("A", 5, 8, 1, &err) == 0, "%s", err.msg);  /* just before the end */
    ck_assert_msg(check_ab("B", 10, 11, 1, &err) == 0, "%s", err.msg); /* the successor */
    ck_assert_msg(check_ab("B", 10, 1000, 1, &err) == 0, "%s", err.msg); /* still held */
    ck_assert_msg(check_ab("A", 5, 0, 1, &err) == 0, "%s", err.msg);  /* revision unknown */
    /* without the write revisions only the leadership itself is matched */
    ck_assert_msg(check_ab("A", 5, 11, 0, &err) == 0, "%s", err.msg);
}
END_TEST

/* The good history above, with write revisions: n0's leadership (10) ended
 * at 30, n2's (31) is still held. */
START_TEST(good_history_with_write_revisions)
{
    static const ec_leader_obs_t o2[] = {{"n0", 10, 30}, {"n2", 31, 0}};
    int64_t mods[NGOOD] = {11, 14, 20, 33, 40, 41};
    ec_history_opts_t o = opts_1_3();
    o.mod_revs = mods;
    ec_error_t err = {0};
    ck_assert_msg(ec_history_check(hist(), NGOOD, o2, 2, &o, NULL, &err) == 0, "%s", err.msg);
    mods[2] = 30; /* n0's third epoch landing as its key went */
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, o2, 2, &o, NULL, &err), EC_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "history[2] epoch 3"));
    ec_history_stats_t st;
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, o2, 2, &o, &st, NULL), EC_ECORRUPT);
    ck_assert_int_eq(st.broken, EC_HISTORY_AFTER_LEADERSHIP);
    ck_assert_uint_eq(st.broken_at, 2);
    /* a caller built before mod_revs existed is not checked on them */
    o.size = offsetof(ec_history_opts_t, mod_revs);
    ck_assert_int_eq(ec_history_check(hist(), NGOOD, o2, 2, &o, NULL, NULL), 0);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("history", setup, teardown,
                          EC_CHECK_TESTS(
                              accepts_good_history,
                              accepts_decoded_history,
                              numbers_must_increase,
                              gaps_only_with_consecutive,
                              world_size_must_match_members,
                              m_ids_must_cover_ranks,
                              no_node_twice,
                              nproc_constant,
                              node_count_within_bounds,
                              writer_must_hold_leader_key,
                              fencing_revision_never_goes_down,
                              bad_arguments,
                              older_opts_struct,
                              deposed_leader_write_is_reported,
                              writes_inside_a_leadership_pass,
                              good_history_with_write_revisions));
}

EC_CHECK_MAIN(suite)
