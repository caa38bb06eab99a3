/* Rules checked: the leader's hang and straggler decision
 * (coord/core/hang_policy.c) and the agent's publish rate (coord/agent/progress.c).
 * A node whose ranks stopped while the others wait on it (inside a
 * collective, or still progressing) is the suspect, and a stopped
 * (SIGSTOP) one before any other; every silent node inside a collective,
 * or every node equally silent, is "stalled" with no one to blame; a
 * declared pause (checkpoint) excuses the whole job; nothing happens before
 * the timeout, and the leader is told when to look again; auto is on only
 * for nodes that report progress; a straggler needs a factor, three nodes
 * and a step time above factor x the median.  The agent writes its summary
 * on a silence, pause or stop change (at most once a second) and on a step
 * time change of more than a fifth (at most every 5 s), never per step. */
#include <stdio.h>
#include <string.h>

#include "ec_check.h"
#include "hang_policy.h"
#include "progress.h"

static ec_node_progress_t running(uint64_t step)
{
    return (ec_node_progress_t){.seq = 1, .reporting = 1, .step = step, .silent_rank = -1,
                                .slowest_rank = -1, .step_p50_us = 100000};
}

static ec_node_progress_t silent(uint64_t step, int64_t ms, int waiting, int stopped)
{
    ec_node_progress_t p = running(step);
    p.silent_ms = ms;
    p.silent_rank = 0;
    p.waiting = waiting;
    p.stopped = stopped;
    return p;
}

/* The action each rule goes with (hang_policy.h's table). */
static ec_hang_action_t action_of(ec_hang_rule_t r)
{
    switch (r) {
#define RULE_ACTION(code, name, action)                                                          \
    case EC_HANG_BY_##code: return EC_HANG_##action;
        EC_HANG_RULE_MAP(RULE_ACTION)
#undef RULE_ACTION
    }
    return 0;
}

/* Decides, and checks that the rule named goes with the action taken. */
static ec_hang_decision_t *decide(int64_t timeout, double factor, const ec_hang_member_t *m,
                                  size_t n)
{
    ec_hang_config_t cfg = {.hang_timeout_ms = timeout, .straggler_factor = factor};
    ec_hang_decision_t *d = NULL;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_hang_decide(&cfg, m, n, &d, &err), 0);
    ck_assert_ptr_nonnull(d);
    ck_assert_msg(action_of(d->rule) == d->action, "rule %s with action %s",
                  ec_hang_rule_name(d->rule), ec_hang_action_name(d->action));
    return d;
}

START_TEST(the_node_that_stopped_while_the_others_wait_is_the_suspect)
{
    ec_hang_member_t m[3] = {
        {"a", silent(41, 3100, 1, 0)}, /* waits inside the allreduce */
        {"b", silent(41, 3200, 0, 0)}, /* silent outside any collective: the sleeper */
        {"c", silent(41, 3050, 1, 0)},
    };
    ec_hang_decision_t *d = decide(3000, 0, m, 3);
    ck_assert_int_eq(d->action, EC_HANG_SUSPECT);
    ck_assert(!d->straggler);
    ck_assert_uint_eq(d->nsuspects, 1);
    ck_assert_uint_eq(d->suspects[0], 1);
    ck_assert_str_eq(ec_hang_rule_name(d->rule), "silent-alone");
    /* The evidence is the message here: the failure record and the log line
     * must name the suspect, its step and what the others did. */
    ck_assert_ptr_nonnull(strstr(d->why, "b: local rank 0 silent 3.2 s at step 41"));
    ck_assert_ptr_nonnull(strstr(d->why, "not inside a collective"));
    ck_assert_ptr_nonnull(strstr(d->why, "a waited 3.1 s inside a collective"));
    ec_hang_decision_free(d);
}
END_TEST

START_TEST(a_stopped_process_is_the_suspect_before_anyone_else)
{
    /* without collectives everyone may look silent outside one; the
     * stopped process is the one to blame */
    ec_hang_member_t m[3] = {
        {"a", silent(7, 5000, 0, 0)},
        {"b", silent(7, 5000, 0, 1)},
        {"c", silent(7, 5000, 0, 0)},
    };
    ec_hang_decision_t *d = decide(3000, 0, m, 3);
    ck_assert_int_eq(d->action, EC_HANG_SUSPECT);
    ck_assert_uint_eq(d->nsuspects, 1);
    ck_assert_uint_eq(d->suspects[0], 1);
    ck_assert_int_eq(d->rule, EC_HANG_BY_STOPPED);
    ec_hang_decision_free(d);
}
END_TEST

START_TEST(a_silent_node_among_progressing_ones_is_the_suspect)
{
    ec_hang_member_t m[2] = {{"a", running(90)}, {"b", silent(20, 2500, 0, 0)}};
    ec_hang_decision_t *d = decide(2000, 0, m, 2);
    ck_assert_int_eq(d->action, EC_HANG_SUSPECT);
    ck_assert_uint_eq(d->nsuspects, 1);
    ck_assert_uint_eq(d->suspects[0], 1);
    ck_assert_int_eq(d->rule, EC_HANG_BY_SILENT_ALONE);
    ec_hang_decision_free(d);
}
END_TEST

START_TEST(every_silent_node_inside_a_collective_is_stalled_without_a_suspect)
{
    ec_hang_member_t m[2] = {{"a", silent(5, 4000, 1, 0)}, {"b", silent(5, 4000, 1, 0)}};
    ec_hang_decision_t *d = decide(3000, 0, m, 2);
    ck_assert_int_eq(d->action, EC_HANG_STALLED);
    ck_assert_uint_eq(d->nsuspects, 0);
    ck_assert_int_eq(d->rule, EC_HANG_BY_WEDGED_COLLECTIVE);
    ec_hang_decision_free(d);
    /* the waiter reached its timeout a moment before the one it waits for
     * (stopped, 2.99 s): not "stalled", wait for that one */
    m[1].p = silent(5, 2990, 1, 1);
    d = decide(3000, 0, m, 2);
    ck_assert_int_eq(d->action, EC_HANG_WAIT_UNTIL);
    ck_assert_int_eq(d->wait_ms, 10);
    ck_assert_int_eq(d->rule, EC_HANG_BY_AWAITING_CULPRIT);
    ec_hang_decision_free(d);
}
END_TEST

START_TEST(all_equally_silent_is_stalled_one_clearly_longer_is_the_suspect)
{
    ec_hang_member_t m[3] = {
        {"a", silent(5, 4000, 0, 0)},
        {"b", silent(5, 4300, 0, 0)},
        {"c", silent(5, 4100, 0, 0)},
    };
    ec_hang_decision_t *d = decide(3000, 0, m, 3);
    ck_assert_int_eq(d->rule, EC_HANG_BY_ALL_SILENT);
    ec_hang_decision_free(d);
    m[1].p.silent_ms = 4100 + EC_HANG_MARGIN_MS;
    d = decide(3000, 0, m, 3);
    ck_assert_int_eq(d->rule, EC_HANG_BY_LONGEST_SILENCE);
    ck_assert_uint_eq(d->nsuspects, 1);
    ck_assert_uint_eq(d->suspects[0], 1);
    ec_hang_decision_free(d);
}
END_TEST

/* Every rank in an evaluation pass nobody declared: the first node to
 * reach the timeout is no more hung than the one 0.1 s behind it, silent
 * outside a collective too: nobody is blamed (blaming it restarted a, then
 * b, then a again).  One clearly longer silence is still named. */
START_TEST(a_node_first_at_the_timeout_while_another_is_silent_too_is_no_suspect)
{
    ec_hang_member_t m[2] = {
        {"a", silent(20, 5000, 0, 0)},
        {"b", silent(20, 4900, 0, 0)}, /* not at the timeout yet, as silent */
    };
    ec_hang_decision_t *d = decide(5000, 0, m, 2);
    ck_assert_msg(d->rule == EC_HANG_BY_SHARED_PHASE, "%s: %s", ec_hang_rule_name(d->rule),
                  d->why ? d->why : "");
    ec_hang_decision_free(d);
    m[1].p = silent(20, 3500, 0, 0); /* 1.5 s less: a is clearly longer */
    d = decide(5000, 0, m, 2);
    ck_assert_int_eq(d->rule, EC_HANG_BY_LONGEST_SILENCE);
    ck_assert_uint_eq(d->suspects[0], 0);
    ec_hang_decision_free(d);
    m[1].p = silent(20, 4900, 1, 0); /* inside a collective: it waits on a */
    d = decide(5000, 0, m, 2);
    ck_assert_int_eq(d->rule, EC_HANG_BY_SILENT_ALONE);
    ck_assert_uint_eq(d->suspects[0], 0);
    ec_hang_decision_free(d);
    m[1].p = running(20); /* progressing */
    d = decide(5000, 0, m, 2);
    ck_assert_int_eq(d->rule, EC_HANG_BY_SILENT_ALONE);
    ec_hang_decision_free(d);
}
END_TEST

START_TEST(a_declared_pause_is_no_hang)
{
    /* rank 0's node checkpoints; the others wait in a barrier for long */
    ec_hang_member_t m[2] = {{"a", running(10)}, {"b", silent(10, 60000, 1, 0)}};
    m[0].p.paused = 1;
    ec_hang_decision_t *d = decide(3000, 0, m, 2);
    ck_assert_int_eq(d->rule, EC_HANG_BY_PAUSED);
    ec_hang_decision_free(d);
    /* and without the pause, the same silence is a hang */
    m[0].p.paused = 0;
    m[0].p.silent_ms = 60000;
    m[0].p.silent_rank = 0;
    d = decide(3000, 0, m, 2);
    ck_assert_int_eq(d->action, EC_HANG_SUSPECT);
    ck_assert_uint_eq(d->suspects[0], 0);
    ec_hang_decision_free(d);
}
END_TEST

START_TEST(before_the_timeout_the_leader_is_told_when_to_look_again)
{
    ec_hang_member_t m[2] = {{"a", running(3)}, {"b", silent(3, 1200, 0, 0)}};
    ec_hang_decision_t *d = decide(3000, 0, m, 2);
    ck_assert_int_eq(d->action, EC_HANG_WAIT_UNTIL);
    ck_assert_int_eq(d->wait_ms, 1800);
    ck_assert_int_eq(d->rule, EC_HANG_BY_NEXT_TIMEOUT);
    ec_hang_decision_free(d);
    m[1].p = running(3);
    d = decide(3000, 0, m, 2);
    ck_assert_int_eq(d->action, EC_HANG_NONE);
    ec_hang_decision_free(d);
}
END_TEST

START_TEST(auto_timeout_applies_only_to_nodes_that_report_progress)
{
    ec_node_progress_t rep = running(1), quiet = running(1);
    quiet.reporting = 0;
    ec_hang_config_t cfg = {.hang_timeout_ms = -1};
    ck_assert_int_eq(ec_hang_timeout_for(&cfg, &rep), EC_HANG_AUTO_MS);
    ck_assert_int_eq(ec_hang_timeout_for(&cfg, &quiet), 0);
    cfg.hang_timeout_ms = 0;
    ck_assert_int_eq(ec_hang_timeout_for(&cfg, &rep), 0);
    cfg.hang_timeout_ms = 5000;
    ck_assert_int_eq(ec_hang_timeout_for(&cfg, &quiet), 5000);
    /* an unmodified program silent for an hour under auto: nothing */
    quiet.silent_ms = 3600000;
    quiet.silent_rank = 0;
    ec_hang_member_t m[2] = {{"a", quiet}, {"b", quiet}};
    ec_hang_decision_t *d = decide(-1, 0, m, 2);
    ck_assert_int_eq(d->action, EC_HANG_NONE);
    ec_hang_decision_free(d);
    /* a node that never published anything is never stalled */
    ec_hang_member_t none[1] = {{"a", {.silent_rank = -1}}};
    d = decide(1000, 0, none, 1);
    ck_assert_int_eq(d->action, EC_HANG_NONE);
    ec_hang_decision_free(d);
}
END_TEST

START_TEST(a_straggler_is_named_only_with_a_factor_and_three_nodes)
{
    ec_hang_member_t m[4] = {{"a", running(9)}, {"b", running(9)}, {"c", running(9)},
                             {"d", running(9)}};
    m[2].p.step_p50_us = 350000; /* 3.5x the others' 100 ms */
    m[2].p.slowest_rank = 1;
    m[2].p.slowest_us = 360000;
    ec_hang_decision_t *d = decide(3000, 0, m, 4);
    ck_assert_int_eq(d->action, EC_HANG_NONE); /* off by default */
    ec_hang_decision_free(d);
    d = decide(3000, 2.0, m, 4);
    ck_assert_int_eq(d->action, EC_HANG_SUSPECT);
    ck_assert(d->straggler);
    ck_assert_int_eq(d->rule, EC_HANG_BY_STRAGGLER);
    ck_assert_uint_eq(d->nsuspects, 1);
    ck_assert_uint_eq(d->suspects[0], 2);
    /* the message: the user sees by how much, and which rank, to look at */
    ck_assert_ptr_nonnull(strstr(d->why, "3.50x the median 100.0 ms"));
    ck_assert_ptr_nonnull(strstr(d->why, "slowest local rank 1"));
    ec_hang_decision_free(d);
    d = decide(3000, 4.0, m, 4); /* not slow enough for this factor */
    ck_assert_int_eq(d->action, EC_HANG_NONE);
    ec_hang_decision_free(d);
    d = decide(3000, 2.0, m, 2); /* two nodes: no median to speak of */
    ck_assert_int_eq(d->action, EC_HANG_NONE);
    ec_hang_decision_free(d);
    int64_t v[5] = {0, 300, 100, 200, 0};
    ck_assert_int_eq(ec_hang_median_us(v, 5), 200);
}
END_TEST

START_TEST(the_agent_publishes_changes_at_a_bounded_rate_never_per_step)
{
    ec_node_progress_t last = running(10), cur = running(10);
    int64_t next;
    last.seq = 1;
    /* a step more, the same step time: nothing to write */
    cur.step = 11;
    ck_assert(!ec_progress_publish_due(&last, 0, &cur, 1000, 100000, &next));
    ck_assert_int_eq(next, -1);
    /* a rank went silent: at once, unless the last write was under 1 s ago */
    cur = silent(11, 1000, 0, 0);
    ck_assert(ec_progress_publish_due(&last, 0, &cur, 1000, 5000, &next));
    ck_assert(!ec_progress_publish_due(&last, 4500, &cur, 1000, 5000, &next));
    ck_assert_int_eq(next, 4500 + EC_PROGRESS_FLIP_MS);
    /* step time moved by a tenth: no; by half: yes, but at most every 5 s */
    cur = running(50);
    cur.step_p50_us = 110000;
    ck_assert(!ec_progress_publish_due(&last, 0, &cur, 1000, 100000, &next));
    cur.step_p50_us = 150000;
    ck_assert(ec_progress_publish_due(&last, 0, &cur, 1000, 100000, &next));
    ck_assert(!ec_progress_publish_due(&last, 99000, &cur, 1000, 100000, &next));
    ck_assert_int_eq(next, 99000 + EC_PROGRESS_PUBLISH_MS);
    /* a program that reports nothing and is not silent: no write at all */
    ec_node_progress_t none = {.silent_rank = -1, .slowest_rank = -1};
    ck_assert(!ec_progress_publish_due(&none, 0, &none, 1000, 100000, &next));
    /* a step time from a window of samples */
    int64_t t[3] = {1000000000, 1100000000, 1300000000};
    uint64_t s[3] = {10, 11, 13};
    ck_assert_int_eq(ec_progress_step_us(t, s, 3), 100000);
    ck_assert_int_eq(ec_progress_step_us(t, s, 1), 0);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("hang_policy", NULL, NULL,
                          EC_CHECK_TESTS(
                              the_node_that_stopped_while_the_others_wait_is_the_suspect,
                              a_stopped_process_is_the_suspect_before_anyone_else,
                              a_silent_node_among_progressing_ones_is_the_suspect,
                              every_silent_node_inside_a_collective_is_stalled_without_a_suspect,
                              all_equally_silent_is_stalled_one_clearly_longer_is_the_suspect,
                              a_node_first_at_the_timeout_while_another_is_silent_too_is_no_suspect,
                              a_declared_pause_is_no_hang,
                              before_the_timeout_the_leader_is_told_when_to_look_again,
                              auto_timeout_applies_only_to_nodes_that_report_progress,
                              a_straggler_is_named_only_with_a_factor_and_three_nodes,
                              the_agent_publishes_changes_at_a_bounded_rate_never_per_step));
}

EC_CHECK_MAIN(suite)
