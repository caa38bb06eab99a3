/* The planner's rules (coord/core/planner.h), one test per rule and boundary:
 *
 * - invalid config and an epoch whose members all failed FAIL the job;
 * - start: publish at once with np_max eligible nodes (first np_max by
 *   registration order, the rest standbys); with np_min <= n < np_max only
 *   once the eligible set has been stable for elastic_timeout; below np_min
 *   wait, saying how many are missing;
 * - a node whose nproc differs from the job's is refused, with a message;
 * - a lost member is replaced by a standby at once, in its M_id, no other M_id
 *   moving; without one, the survivors are published after replace_wait (at
 *   once if 0) unless below np_min or fixed-size, where the planner waits;
 * - leave vs lost; restart on an incarnation change; joins below np_max after
 *   elastic_timeout or at once on reaching np_max; precedence and combined
 *   events in one publish; steady state;
 * - booting nodes (processes started, not all ready) are never published:
 *   the first epoch and ready joiners wait for them up to
 *   join_ready_timeout, a booting member steps out and returns when ready,
 *   a boot is no change of the elastic window;
 * - and, over thousands of random inputs with a fixed seed: published ranks
 *   are exactly 0..W*N-1, no node twice, np_min <= W <= np_max, survivors keep
 *   their relative order, the result does not depend on the node array's
 *   order, every WAIT_UNTIL publishes once its time has passed, and a node
 *   swapped for an equivalent one (ec_plan_node_equiv: joining <-> ready)
 *   changes no decision (the leader skips the plan on such writes).
 *
 * Each decision is checked by its name (ec_plan_why_t, planner.h's
 * EC_PLAN_WHY_MAP), not by its wording; a few tests pin the sentences the
 * console shows, and say so.
 */
#include "planner.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"

/* ------------------------------------------------------------------ */
/* fixture: a small cluster built by name                              */

#define FX_MAX 64

typedef struct {
    ec_plan_input_t in;
    ec_plan_node_t nodes[FX_MAX];
    ec_plan_member_t mem[FX_MAX];
    const char *left[FX_MAX];
    int64_t rev;
    ec_plan_decision_t *d;
} fx_t;

static fx_t F;

static void fx_setup(void)
{
    memset(&F, 0, sizeof(F));
    F.in = (ec_plan_input_t)EC_PLAN_INPUT_INIT;
    F.in.nodes = F.nodes;
    F.in.left_ids = F.left;
    F.in.config = (ec_plan_config_t){.np_min = 2, .np_max = 4, .nproc = 2,
                                     .elastic_timeout_ms = 1000, .replace_wait_ms = 0};
}

static void fx_teardown(void)
{
    ec_plan_decision_free(F.d);
    F.d = NULL;
}

static void fx_cfg(int min, int max, int nproc, int64_t elastic, int64_t replace)
{
    F.in.config = (ec_plan_config_t){.np_min = min, .np_max = max, .nproc = nproc,
                                     .elastic_timeout_ms = elastic, .replace_wait_ms = replace};
}

/* Register a node: ready, the job's nproc, incarnation 1, next revision. */
static ec_plan_node_t *fx_add(const char *id)
{
    ck_assert_uint_lt(F.in.n_nodes, FX_MAX);
    ec_plan_node_t *n = &F.nodes[F.in.n_nodes++];
    F.rev += 10;
    *n = (ec_plan_node_t){.node_id = id, .nproc = (uint32_t)F.in.config.nproc,
                          .incarnation = 1, .create_revision = F.rev, .state = EC_NODE_READY};
    return n;
}

/* Register several: fx_adds("n1", "n2", NULL). */
static void fx_adds(const char *id, ...)
{
    va_list ap;
    va_start(ap, id);
    for (; id; id = va_arg(ap, const char *))
        fx_add(id);
    va_end(ap);
}

static ec_plan_node_t *fx_find(const char *id)
{
    for (size_t i = 0; i < F.in.n_nodes; i++)
        if (strcmp(F.nodes[i].node_id, id) == 0)
            return &F.nodes[i];
    ck_abort_msg("no node %s", id);
    return NULL;
}

/* The node's record vanished (lease expired or deleted). */
static void fx_drop(const char *id)
{
    ec_plan_node_t *n = fx_find(id);
    size_t i = (size_t)(n - F.nodes);
    memmove(&F.nodes[i], &F.nodes[i + 1], (F.in.n_nodes - i - 1) * sizeof(F.nodes[0]));
    F.in.n_nodes--;
}

/* Current epoch: fx_epoch(3, "n1", "n2", NULL); incarnations copied from
 * the registered nodes (1 for an unregistered id). */
static void fx_epoch(uint64_t number, ...)
{
    va_list ap;
    const char *id;
    F.in.epoch.number = number;
    F.in.epoch.members = F.mem;
    F.in.epoch.n_members = 0;
    va_start(ap, number);
    while ((id = va_arg(ap, const char *))) {
        uint64_t inc = 1;
        for (size_t i = 0; i < F.in.n_nodes; i++)
            if (strcmp(F.nodes[i].node_id, id) == 0)
                inc = F.nodes[i].incarnation;
        F.mem[F.in.epoch.n_members++] = (ec_plan_member_t){.node_id = id, .incarnation = inc};
    }
    va_end(ap);
}

static void fx_left(const char *id)
{
    F.left[F.in.n_left++] = id;
}

/* The action each reason goes with (planner.h's table). */
static ec_plan_action_t action_of(ec_plan_why_t w)
{
    switch (w) {
#define WHY_ACTION(code, name, action)                                                           \
    case EC_PLAN_WHY_##code: return EC_PLAN_##action;
        EC_PLAN_WHY_MAP(WHY_ACTION)
#undef WHY_ACTION
    }
    return 0;
}

/* The epoch reason a publish's rule gives it. */
static int publish_reason_fits(ec_plan_why_t w, ec_epoch_reason_t r)
{
    switch (w) {
    case EC_PLAN_WHY_START: return r == EC_REASON_START;
    case EC_PLAN_WHY_REPLACED: return r == EC_REASON_SPARE_PROMOTED;
    case EC_PLAN_WHY_SHRINK: return r == EC_REASON_LOST || r == EC_REASON_LEAVE;
    case EC_PLAN_WHY_RESTART: return r == EC_REASON_RESTART;
    case EC_PLAN_WHY_JOIN: return r == EC_REASON_JOIN;
    default: return 0;
    }
}

/* Every decision: its rule is named and goes with the action taken (a wait
 * for booting nodes without an end is a plain WAIT), a publish's with its
 * epoch reason. */
static void check_why_code(const ec_plan_decision_t *d)
{
    ec_plan_why_t w = d->why_code;
    bool boot = w == EC_PLAN_WHY_START_BOOTING || w == EC_PLAN_WHY_JOIN_BOOTING;
    ck_assert_msg(action_of(w) == d->action || (boot && d->action == EC_PLAN_WAIT),
                  "rule %s with action %s: %s", ec_plan_why_name(w),
                  ec_plan_action_name(d->action), d->log);
    if (d->action == EC_PLAN_PUBLISH)
        ck_assert_msg(publish_reason_fits(w, d->reason), "rule %s with reason %s: %s",
                      ec_plan_why_name(w), ec_epoch_reason_name(d->reason), d->log);
}

#define ck_assert_why(d, code)                                                                   \
    ck_assert_msg((d)->why_code == (code), "expected %s, got %s: %s", ec_plan_why_name(code),    \
                  ec_plan_why_name((d)->why_code), (d)->why)

static ec_plan_decision_t *fx_plan(void)
{
    ec_error_t err = {0};
    ec_plan_decision_free(F.d);
    F.d = NULL;
    int rc = ec_plan(&F.in, &F.d, &err);
    ck_assert_msg(rc == 0, "ec_plan failed: %d %s", rc, err.msg);
    ck_assert_ptr_nonnull(F.d);
    ck_assert_ptr_nonnull(F.d->why);
    ck_assert_ptr_nonnull(F.d->log);
    check_why_code(F.d);
    return F.d;
}

/* "n1,n6,n3" for the published members. */
static const char *fx_members(void)
{
    static char buf[4096];
    buf[0] = '\0';
    for (size_t m = 0; m < F.d->n_members; m++) {
        if (m)
            strcat(buf, ",");
        strcat(buf, F.nodes[F.d->members[m]].node_id);
    }
    return buf;
}

static void expect_publish(ec_epoch_reason_t reason, const char *members)
{
    ck_assert_msg(F.d->action == EC_PLAN_PUBLISH, "expected publish, got %s: %s",
                  ec_plan_action_name(F.d->action), F.d->why);
    ck_assert_str_eq(ec_epoch_reason_name(F.d->reason), ec_epoch_reason_name(reason));
    ck_assert_str_eq(fx_members(), members);
    ck_assert_uint_eq(F.d->epoch, F.in.epoch.number + 1);
    ck_assert_int_eq(F.d->world_size, (int64_t)F.d->n_members * F.in.config.nproc);
    ck_assert_int_eq(F.d->wait_ms, 0);
}

static void expect_wait_until(ec_plan_why_t why, int64_t ms)
{
    ck_assert_msg(F.d->action == EC_PLAN_WAIT_UNTIL, "expected wait-until, got %s: %s",
                  ec_plan_action_name(F.d->action), F.d->why);
    ck_assert_why(F.d, why);
    ck_assert_int_eq(F.d->wait_ms, ms);
    ck_assert_uint_eq(F.d->n_members, 0);
    ck_assert_int_eq(F.d->reason, EC_REASON_UNKNOWN);
}

static void expect_wait(ec_plan_why_t why)
{
    ck_assert_msg(F.d->action == EC_PLAN_WAIT, "expected wait, got %s: %s",
                  ec_plan_action_name(F.d->action), F.d->why);
    ck_assert_why(F.d, why);
    ck_assert_int_eq(F.d->wait_ms, 0);
    ck_assert_uint_eq(F.d->n_members, 0);
}

static void expect_fail(ec_plan_why_t why)
{
    ck_assert_msg(F.d->action == EC_PLAN_FAIL, "expected fail, got %s: %s",
                  ec_plan_action_name(F.d->action), F.d->why);
    ck_assert_why(F.d, why);
    ck_assert_uint_eq(F.d->n_members, 0);
    ck_assert_msg(strncmp(F.d->log, "+fail: ", 7) == 0, "log: %s", F.d->log);
}

#define ck_assert_has(hay, needle) \
    ck_assert_msg(strstr((hay), (needle)), "'%s' not in '%s'", (needle), (hay))

/* ------------------------------------------------------------------ */
/* ranks and names                                                     */

START_TEST(rank_is_mid_times_n_plus_nid)
{
    ck_assert_int_eq(ec_rank(0, 8, 0), 0);
    ck_assert_int_eq(ec_rank(0, 8, 7), 7);
    ck_assert_int_eq(ec_rank(1, 8, 0), 8);
    ck_assert_int_eq(ec_rank(2, 8, 3), 19);
    ck_assert_int_eq(ec_rank(4095, 8, 7), 32767);
    ck_assert_int_eq(ec_rank(5, 1, 0), 5);
    ck_assert_int_eq(ec_rank(0, 8, 8), EC_EINVAL);
    ck_assert_int_eq(ec_rank(0, 8, -1), EC_EINVAL);
    ck_assert_int_eq(ec_rank(-1, 8, 0), EC_EINVAL);
    ck_assert_int_eq(ec_rank(0, 0, 0), EC_EINVAL);
    ck_assert_int_eq(ec_rank(INT64_MAX / 2, 8, 0), EC_EINVAL);
}
END_TEST

START_TEST(names_of_reasons_and_actions)
{
    /* one reason enum: the planner's reasons are the epoch record's */
    ck_assert_str_eq(ec_epoch_reason_name(EC_REASON_START), "start");
    ck_assert_str_eq(ec_epoch_reason_name(EC_REASON_SPARE_PROMOTED), "spare-promoted");
    ck_assert_str_eq(ec_plan_action_name(EC_PLAN_COMPLETE), "complete");
    ck_assert_str_eq(ec_plan_action_name(EC_PLAN_PUBLISH), "publish");
    ck_assert_str_eq(ec_plan_action_name(EC_PLAN_WAIT_UNTIL), "wait-until");
    ck_assert_str_eq(ec_plan_action_name(EC_PLAN_WAIT), "wait");
    ck_assert_str_eq(ec_plan_action_name(EC_PLAN_FAIL), "fail");
    ck_assert_str_eq(ec_plan_action_name((ec_plan_action_t)99), "unknown");
    ck_assert_str_eq(ec_plan_why_name(EC_PLAN_WHY_STEADY), "steady");
    ck_assert_str_eq(ec_plan_why_name(EC_PLAN_WHY_NEED_NODES), "need-nodes");
    ck_assert_str_eq(ec_plan_why_name(EC_PLAN_WHY_FAILED_NO_TOLERANCE), "failed-no-tolerance");
    ck_assert_str_eq(ec_plan_why_name((ec_plan_why_t)99), "unknown");
}
END_TEST

/* ------------------------------------------------------------------ */
/* FAIL                                                                */

START_TEST(invalid_config_fails)
{
    fx_adds("n1", "n2", NULL);
    ec_plan_config_t cases[] = {
        {0, 4, 2, 0, 0, 0, false},  {-1, 4, 2, 0, 0, 0, false}, {3, 2, 2, 0, 0, 0, false},
        {1, 2, 0, 0, 0, 0, false},  {1, 2, -3, 0, 0, 0, false}, {1, 2, 2, -1, 0, 0, false},
        {1, 2, 2, 0, -1, 0, false}, {1, 70000, 70000, 0, 0, 0, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        F.in.config = cases[i];
        fx_plan();
        expect_fail(EC_PLAN_WHY_INVALID_CONFIG);
        ck_assert_uint_eq(F.d->n_refused, 0);
    }
    /* The message is the fix the user reads: the value and what --np takes. */
    F.in.config = cases[2];
    fx_plan();
    ck_assert_str_eq(F.d->why, "invalid configuration: np_min=3 > np_max=2; --np takes "
                               "MIN[:MAX] with 1 <= MIN <= MAX");
    /* The boundaries themselves are valid. */
    fx_cfg(1, 1, 2, 0, 0);
    fx_plan();
    expect_publish(EC_REASON_START, "n1");
}
END_TEST

START_TEST(all_members_failed_fails)
{
    fx_cfg(3, 4, 2, 0, 0);
    fx_adds("n1", "n2", "n3", "n4", NULL);
    fx_epoch(3, "n1", "n2", "n3", NULL);
    fx_find("n1")->state = EC_NODE_FAILED;
    fx_find("n2")->state = EC_NODE_FAILED;
    fx_plan();
    /* Two of three failed: survivors below np_min wait, not fail. */
    expect_wait(EC_PLAN_WHY_NEED_REPLACEMENTS);
    fx_find("n3")->state = EC_NODE_FAILED;
    fx_plan();
    expect_fail(EC_PLAN_WHY_ALL_FAILED);
    /* The console's last word on the job: whom, and where to look. */
    ck_assert_str_eq(F.d->log,
                     "+fail: every member of epoch 3 failed: n1, n2, n3; see their logs and "
                     "failure records");
    /* Even with a standby (n4) available: the job's processes all failed. */
    ck_assert_uint_eq(F.d->n_departed, 3);
}
END_TEST

/* Fault tolerance off (--elastic_level=-1): one member's failure fails the
 * job at once, whatever standbys or survivors there are; a member that only
 * vanished or left is still replaced as usual. */
START_TEST(one_failed_member_fails_the_job_without_fault_tolerance)
{
    fx_cfg(2, 2, 2, 0, 0);
    F.in.config.fail_fast = true;
    fx_adds("n1", "n2", "n3", NULL);
    fx_epoch(2, "n1", "n2", NULL);
    fx_find("n2")->state = EC_NODE_FAILED;
    fx_plan();
    expect_fail(EC_PLAN_WHY_FAILED_NO_TOLERANCE);
    /* The message is the fix the user reads: how to keep the job going. */
    ck_assert_str_eq(F.d->why, "n2 of epoch 2 failed and the job runs without fault tolerance "
                               "(--elastic_level=-1): every node stops; see the failure records, "
                               "or restart failed processes with --max_restart or "
                               "--elastic_level=1");
    /* a lost member is no failure: the standby takes its place */
    fx_find("n2")->state = EC_NODE_READY;
    fx_drop("n2");
    fx_plan();
    expect_publish(EC_REASON_SPARE_PROMOTED, "n1,n3");
    /* with fault tolerance on, the same failure is replaced */
    fx_adds("n2", NULL);
    fx_find("n2")->state = EC_NODE_FAILED;
    F.in.config.fail_fast = false;
    fx_plan();
    expect_publish(EC_REASON_SPARE_PROMOTED, "n1,n3");
}
END_TEST

START_TEST(failed_plus_vanished_is_not_all_failed)
{
    fx_cfg(1, 3, 2, 0, 0);
    fx_adds("n1", "n2", NULL);
    fx_epoch(3, "n1", "n2", "n3", NULL); /* n3 vanished, not failed */
    fx_find("n1")->state = EC_NODE_FAILED;
    fx_find("n2")->state = EC_NODE_FAILED;
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_REPLACEMENTS);
}
END_TEST

START_TEST(epoch_larger_than_np_max_fails)
{
    fx_cfg(1, 2, 2, 0, 0);
    fx_adds("n1", "n2", "n3", NULL);
    fx_epoch(5, "n1", "n2", "n3", NULL);
    fx_plan();
    expect_fail(EC_PLAN_WHY_OVER_NP_MAX);
}
END_TEST

START_TEST(malformed_input_is_einval)
{
    ec_error_t err = {0};
    ec_plan_decision_t *d = (ec_plan_decision_t *)&err; /* must be reset to NULL */

    ck_assert_int_eq(ec_plan(&F.in, NULL, &err), EC_EINVAL);
    ck_assert_int_eq(ec_plan(NULL, &d, &err), EC_EINVAL);
    ck_assert_ptr_null(d);

    fx_adds("n1", "n2", NULL);
    F.in.n_nodes = 3; /* a NULL id */
    F.nodes[2].node_id = NULL;
    ck_assert_int_eq(ec_plan(&F.in, &d, &err), EC_EINVAL);
    ck_assert_has(err.msg, "node 2 has no id");
    F.in.n_nodes = 2;

    F.nodes[1].node_id = "n1";
    ck_assert_int_eq(ec_plan(&F.in, &d, &err), EC_EINVAL);
    ck_assert_has(err.msg, "node n1 is registered twice");
    ck_assert_ptr_null(d);
    F.nodes[1].node_id = "n2";

    fx_epoch(2, "n1", "n2", "n1", NULL);
    ck_assert_int_eq(ec_plan(&F.in, &d, &err), EC_EINVAL);
    ck_assert_has(err.msg, "epoch 2 lists node n1 twice (M_id 0 and 2)");

    fx_epoch(0, "n1", NULL);
    ck_assert_int_eq(ec_plan(&F.in, &d, &err), EC_EINVAL);
    fx_epoch(4, NULL);
    ck_assert_int_eq(ec_plan(&F.in, &d, &err), EC_EINVAL);
    ck_assert_has(err.msg, "epoch 4 has no members");

    fx_epoch(0, NULL);
    F.in.nodes = NULL;
    ck_assert_int_eq(ec_plan(&F.in, &d, &err), EC_EINVAL);
    F.in.nodes = F.nodes;
    F.in.n_left = 1;
    F.left[0] = NULL;
    ck_assert_int_eq(ec_plan(&F.in, &d, &err), EC_EINVAL);
    F.in.n_left = 0;

    /* err may be NULL; the same input is then fine. */
    ck_assert_int_eq(ec_plan(&F.in, NULL, NULL), EC_EINVAL);
    ck_assert_int_eq(ec_plan(&F.in, &d, NULL), 0);
    ec_plan_decision_free(d);
}
END_TEST

START_TEST(free_accepts_null_and_keeps_errno)
{
    errno = 42;
    ec_plan_decision_free(NULL);
    ck_assert_int_eq(errno, 42);
    fx_adds("n1", "n2", NULL);
    ec_plan_decision_t *d = NULL;
    ck_assert_int_eq(ec_plan(&F.in, &d, NULL), 0);
    errno = 43;
    ec_plan_decision_free(d);
    ck_assert_int_eq(errno, 43);
}
END_TEST

/* ------------------------------------------------------------------ */
/* start                                                               */

START_TEST(empty_cluster_waits)
{
    fx_cfg(3, 5, 2, 1000, 0);
    F.in.since_eligible_change_ms = 1000000;
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_NODES);
    /* The console shows what the job waits for, in these words. */
    ck_assert_str_eq(F.d->log, "+wait: waiting for 3 more nodes: have 0, need np_min=3");
    ck_assert_uint_eq(F.d->n_refused, 0);
    ck_assert_uint_eq(F.d->n_departed, 0);
}
END_TEST

START_TEST(start_below_min_waits_indefinitely)
{
    fx_cfg(3, 5, 2, 1000, 0);
    fx_add("n1");
    F.in.since_eligible_change_ms = 1000000; /* stable for ages: still too few */
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_NODES);
    fx_add("n2");
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_NODES);
    /* Ineligible nodes do not count. */
    fx_add("n3")->state = EC_NODE_LEAVING;
    fx_add("n4")->state = EC_NODE_FAILED;
    fx_add("n5")->state = EC_NODE_DONE;
    fx_add("n6")->state = EC_NODE_UNKNOWN;
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_NODES);
    /* joining counts as eligible. */
    fx_add("n7")->state = EC_NODE_JOINING;
    fx_plan();
    expect_publish(EC_REASON_START, "n1,n2,n7");
}
END_TEST

START_TEST(start_at_max_publishes_at_once_in_registration_order)
{
    fx_cfg(2, 3, 4, 30000, 0);
    fx_adds("c", "a", "b", NULL);
    /* Registration order is the create revision, not the array order. */
    fx_find("c")->create_revision = 30;
    fx_find("a")->create_revision = 10;
    fx_find("b")->create_revision = 20;
    F.in.since_eligible_change_ms = 0; /* the last one just arrived */
    fx_plan();
    expect_publish(EC_REASON_START, "a,b,c");
    ck_assert_uint_eq(F.d->epoch, 1);
    ck_assert_int_eq(F.d->world_size, 12);
    /* The epoch's log line and detail, as the console shows them. */
    ck_assert_str_eq(F.d->log, "+epoch 1 world=12 nodes=3 reason=start: 3 nodes: a, b, c");
}
END_TEST

/* torchrun's static rendezvous: each node says its place (--node_rank + 1)
 * and the first epoch's M_ids follow it, whatever order the nodes
 * registered in; nodes without a place come after, in registration order. */
START_TEST(placed_nodes_take_their_node_rank_in_the_first_epoch)
{
    fx_cfg(3, 3, 2, 30000, 0);
    fx_adds("c", "a", "b", NULL); /* registered c, a, b */
    fx_find("c")->place = 3;
    fx_find("a")->place = 2;
    fx_find("b")->place = 1;
    fx_plan();
    expect_publish(EC_REASON_START, "b,a,c");
    /* a node without a place after the placed ones */
    fx_setup();
    fx_cfg(3, 3, 2, 30000, 0);
    fx_adds("x", "y", "z", NULL);
    fx_find("z")->place = 1;
    fx_plan();
    expect_publish(EC_REASON_START, "z,x,y");
    /* a place is part of what the planner reads: a changed one is no equivalent record */
    ec_plan_node_t p1 = *fx_find("z"), p2 = p1;
    p2.place = 2;
    ck_assert(!ec_plan_node_equiv(&p1, &p2));
}
END_TEST

START_TEST(start_beyond_max_keeps_standbys)
{
    fx_cfg(1, 2, 1, 30000, 0);
    fx_adds("n1", "n2", "n3", "n4", NULL);
    fx_find("n4")->create_revision = 1; /* registered first */
    fx_find("n3")->create_revision = 15;
    fx_find("n2")->create_revision = 15; /* tie: broken by id */
    fx_plan();
    expect_publish(EC_REASON_START, "n4,n1");
    fx_cfg(1, 3, 1, 30000, 0);
    fx_plan();
    expect_publish(EC_REASON_START, "n4,n1,n2");
}
END_TEST

START_TEST(start_between_min_and_max_waits_elastic_timeout)
{
    fx_cfg(2, 4, 2, 1000, 0);
    fx_adds("n1", "n2", NULL); /* exactly np_min */
    F.in.since_eligible_change_ms = -1; /* unknown: counted as just changed */
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_START_WAIT, 1000);
    F.in.since_eligible_change_ms = 0;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_START_WAIT, 1000);
    F.in.since_eligible_change_ms = 999;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_START_WAIT, 1);
    F.in.since_eligible_change_ms = 1000; /* the exact boundary publishes */
    fx_plan();
    expect_publish(EC_REASON_START, "n1,n2");
    F.in.since_eligible_change_ms = 5000;
    fx_plan();
    expect_publish(EC_REASON_START, "n1,n2");
    /* One below max still waits; reaching max does not. */
    fx_add("n3");
    F.in.since_eligible_change_ms = 10;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_START_WAIT, 990);
    fx_add("n4");
    fx_plan();
    expect_publish(EC_REASON_START, "n1,n2,n3,n4");
}
END_TEST

START_TEST(start_with_zero_elastic_timeout_is_immediate)
{
    fx_cfg(2, 4, 2, 0, 0);
    fx_adds("n1", "n2", NULL);
    fx_plan();
    expect_publish(EC_REASON_START, "n1,n2");
    fx_drop("n2");
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_NODES);
}
END_TEST

/* ------------------------------------------------------------------ */
/* refusal of mismatched N                                            */

START_TEST(mismatched_nproc_is_refused)
{
    fx_cfg(2, 4, 2, 0, 0);
    fx_add("n1");
    fx_add("n4")->nproc = 4;
    fx_add("n5")->nproc = 4;
    fx_find("n5")->state = EC_NODE_LEAVING; /* on its way out: not worth a message */
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_NODES);
    /* The wait names the refused node, and its record says how to fix it. */
    ck_assert_str_eq(F.d->why, "waiting for 1 more node: have 1, need np_min=2; 1 node refused "
                               "(nproc mismatch): n4");
    ck_assert_uint_eq(F.d->n_refused, 1);
    ck_assert_uint_eq(F.d->refused[0].node, 1);
    ck_assert_str_eq(F.d->refused[0].why,
                     "node n4 has nproc=4 but the job runs nproc=2; restart it with "
                     "--nproc_per_node=2");
    ck_assert(!ec_plan_node_eligible(&F.in.config, fx_find("n4")));
    /* Refusals are reported with a publish too, and the node is left out. */
    fx_add("n2");
    fx_add("n3")->state = EC_NODE_JOINING;
    fx_find("n3")->nproc = 1;
    fx_plan();
    expect_publish(EC_REASON_START, "n1,n2");
    ck_assert_uint_eq(F.d->n_refused, 2);
    ck_assert_str_eq(F.nodes[F.d->refused[0].node].node_id, "n4");
    ck_assert_str_eq(F.nodes[F.d->refused[1].node].node_id, "n3");
}
END_TEST

START_TEST(member_reregistered_with_other_nproc_departs)
{
    fx_cfg(2, 4, 2, 0, 0);
    fx_adds("n1", "n2", "n3", NULL);
    fx_epoch(1, "n1", "n2", "n3", NULL);
    fx_find("n2")->nproc = 8;
    fx_find("n2")->incarnation = 2;
    fx_plan();
    expect_publish(EC_REASON_LOST, "n1,n3");
    ck_assert_why(F.d, EC_PLAN_WHY_SHRINK);
    ck_assert_uint_eq(F.d->n_refused, 1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* steady state                                                        */

START_TEST(steady_state_waits)
{
    fx_cfg(2, 3, 2, 1000, 1000);
    fx_adds("n1", "n2", "n3", NULL);
    fx_epoch(4, "n3", "n1", "n2", NULL);
    F.in.since_eligible_change_ms = 1000000;
    fx_plan();
    expect_wait(EC_PLAN_WHY_STEADY);
    /* The console stays quiet on exactly this text (coord/node/node_publish.c). */
    ck_assert_str_eq(F.d->why, "steady");
    ck_assert_uint_eq(F.d->n_departed, 0);
    /* Standbys at np_max: still steady, however long they wait. */
    fx_adds("n4", "n5", NULL);
    fx_plan();
    expect_wait(EC_PLAN_WHY_STEADY);
    /* Below np_max with nothing joining: steady too. */
    fx_cfg(1, 8, 2, 1000, 1000);
    fx_drop("n4");
    fx_drop("n5");
    fx_plan();
    expect_wait(EC_PLAN_WHY_STEADY);
}
END_TEST

/* ------------------------------------------------------------------ */
/* loss with standbys                                                  */

START_TEST(standby_takes_lost_members_mid_at_once)
{
    fx_cfg(2, 4, 2, 30000, 60000);
    fx_adds("n1", "n2", "n3", "n4", "n5", "n6", NULL);
    fx_epoch(7, "n4", "n3", "n2", "n1", NULL);
    fx_find("n6")->create_revision = 1; /* n6 registered before n5 */
    fx_drop("n3");
    F.in.since_member_missing_ms = -1; /* first sight: no replace_wait for a standby */
    F.in.since_eligible_change_ms = 0;
    fx_plan();
    expect_publish(EC_REASON_SPARE_PROMOTED, "n4,n6,n2,n1");
    ck_assert_uint_eq(F.d->n_departed, 1);
    /* The epoch's detail, as the console shows it: who took whose place. */
    ck_assert_str_eq(F.d->log,
                     "+epoch 8 world=8 nodes=4 reason=spare-promoted: n6 replaces n3 (missing) "
                     "at M_id 1; 1 standby");
}
END_TEST

START_TEST(several_lost_with_enough_standbys)
{
    fx_cfg(4, 4, 1, 0, 60000); /* fixed size */
    fx_adds("n1", "n2", "n3", "n4", "s1", "s2", "s3", NULL);
    fx_epoch(2, "n1", "n2", "n3", "n4", NULL);
    fx_drop("n1");
    fx_drop("n3");
    fx_find("n4")->state = EC_NODE_LEAVING;
    fx_plan();
    /* Slots refilled in M_id order with standbys in registration order. */
    expect_publish(EC_REASON_SPARE_PROMOTED, "s1,n2,s2,s3");
    ck_assert_uint_eq(F.d->n_departed, 3);
}
END_TEST

START_TEST(several_lost_with_fewer_standbys)
{
    fx_cfg(2, 5, 2, 0, 1000);
    fx_adds("n1", "n2", "n3", "n4", "n5", "n6", NULL);
    fx_epoch(3, "n1", "n2", "n3", "n4", "n5", NULL);
    fx_drop("n2");
    fx_drop("n4");
    /* One standby for two holes: wait for a second replacement first. */
    F.in.since_member_missing_ms = -1;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_REPLACE_WAIT, 1000);
    ck_assert_uint_eq(F.d->n_departed, 2);
    F.in.since_member_missing_ms = 400;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_REPLACE_WAIT, 600);
    F.in.since_member_missing_ms = 1000;
    fx_plan();
    /* n6 takes n2's M_id, n4's slot closes, n5 moves up one. */
    expect_publish(EC_REASON_LOST, "n1,n6,n3,n5");
    ck_assert_why(F.d, EC_PLAN_WHY_SHRINK);
    /* A second replacement arriving in time fills both. */
    fx_add("n7");
    F.in.since_member_missing_ms = 500;
    fx_plan();
    expect_publish(EC_REASON_SPARE_PROMOTED, "n1,n6,n3,n7,n5");
    /* With replace_wait 0 the partial fill is published at once. */
    fx_drop("n7");
    fx_cfg(2, 5, 2, 0, 0);
    F.in.since_member_missing_ms = -1;
    fx_plan();
    expect_publish(EC_REASON_LOST, "n1,n6,n3,n5");
}
END_TEST

/* ------------------------------------------------------------------ */
/* loss without standbys                                               */

START_TEST(lost_without_standby_replace_wait_zero_publishes_survivors)
{
    fx_cfg(2, 4, 2, 1000, 0);
    fx_adds("n1", "n2", "n3", "n4", NULL);
    fx_epoch(5, "n4", "n2", "n3", "n1", NULL);
    fx_drop("n3");
    fx_plan();
    expect_publish(EC_REASON_LOST, "n4,n2,n1");
    ck_assert_why(F.d, EC_PLAN_WHY_SHRINK);
    /* Down to exactly np_min. */
    fx_epoch(6, "n4", "n2", "n1", NULL);
    fx_drop("n4");
    fx_plan();
    expect_publish(EC_REASON_LOST, "n2,n1");
}
END_TEST

START_TEST(lost_without_standby_waits_replace_wait)
{
    fx_cfg(2, 4, 2, 1000, 3000);
    fx_adds("n1", "n2", "n3", NULL);
    fx_epoch(5, "n1", "n2", "n3", NULL);
    fx_drop("n2");
    F.in.since_member_missing_ms = -1;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_REPLACE_WAIT, 3000);
    F.in.since_member_missing_ms = 2999;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_REPLACE_WAIT, 1);
    F.in.since_member_missing_ms = 3000;
    fx_plan();
    expect_publish(EC_REASON_LOST, "n1,n3");
    /* A replacement inside the window is taken at once, in n2's M_id. */
    F.in.since_member_missing_ms = 1500;
    fx_add("n9");
    F.in.since_eligible_change_ms = 0;
    fx_plan();
    expect_publish(EC_REASON_SPARE_PROMOTED, "n1,n9,n3");
    /* The node itself coming back with a new incarnation is a restart. */
    fx_drop("n9");
    fx_add("n2")->incarnation = 2;
    fx_plan();
    expect_publish(EC_REASON_RESTART, "n1,n2,n3");
    ck_assert_uint_eq(F.d->n_departed, 0);
}
END_TEST

START_TEST(lost_below_min_waits_naming_missing)
{
    fx_cfg(3, 4, 2, 1000, 500);
    fx_adds("n1", "n2", "n3", NULL);
    fx_epoch(2, "n1", "n2", "n3", NULL);
    fx_drop("n2");
    F.in.since_member_missing_ms = 1000000; /* replace_wait long over: still below min */
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_REPLACEMENTS);
    /* The console names whom the job lost and what it needs, in these words. */
    ck_assert_str_eq(F.d->why, "waiting for 1 more node: n2 (missing) departed, 0 replacements "
                               "registered, 2 members remain, need np_min=3");
    ck_assert_uint_eq(F.d->n_departed, 1);
    fx_cfg(3, 4, 2, 1000, 0);
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_REPLACEMENTS);
    /* Every member gone: wait for three. */
    fx_drop("n1");
    fx_drop("n3");
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_REPLACEMENTS);
    ck_assert_uint_eq(F.d->n_departed, 3);
}
END_TEST

START_TEST(fixed_size_always_waits_for_a_replacement)
{
    fx_cfg(3, 3, 2, 0, 0);
    fx_adds("n1", "n2", "n3", NULL);
    fx_epoch(4, "n1", "n2", "n3", NULL);
    fx_drop("n2");
    F.in.since_member_missing_ms = 1000000;
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_REPLACEMENTS);
    /* Takes one as soon as it registers, no elastic_timeout. */
    fx_add("r1");
    F.in.since_eligible_change_ms = 0;
    fx_plan();
    expect_publish(EC_REASON_SPARE_PROMOTED, "n1,r1,n3");
    /* Two holes, one replacement: wait, saying so. */
    fx_drop("n3");
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_REPLACEMENTS);
    ck_assert_uint_eq(F.d->n_departed, 2);
}
END_TEST

/* ------------------------------------------------------------------ */
/* leave vs lost                                                       */

START_TEST(graceful_leave_vs_lost)
{
    fx_cfg(1, 4, 2, 0, 0);
    fx_adds("n1", "n2", "n3", "n4", NULL);
    fx_epoch(2, "n1", "n2", "n3", "n4", NULL);

    fx_drop("n3");
    fx_left("n3"); /* its record said leaving before it vanished */
    fx_plan();
    expect_publish(EC_REASON_LEAVE, "n1,n2,n4");

    fx_drop("n2"); /* n2 just vanished */
    fx_plan();
    expect_publish(EC_REASON_LOST, "n1,n4");

    fx_left("n2");
    fx_plan();
    expect_publish(EC_REASON_LEAVE, "n1,n4");

    /* Records still present: leaving is graceful, failed is not, and a
     * member that is done (finished before the others) stays a member. */
    F.in.n_left = 0;
    fx_add("n2");
    fx_add("n3");
    fx_find("n2")->state = EC_NODE_LEAVING;
    fx_find("n3")->state = EC_NODE_DONE;
    fx_plan();
    expect_publish(EC_REASON_LEAVE, "n1,n3,n4");
    fx_find("n3")->state = EC_NODE_FAILED;
    fx_plan();
    expect_publish(EC_REASON_LOST, "n1,n4");
    /* A left id that is not a member, or whose record is still there, changes nothing. */
    fx_left("zz");
    fx_left("n3");
    fx_plan();
    expect_publish(EC_REASON_LOST, "n1,n4");
}
END_TEST

START_TEST(all_members_done_is_complete)
{
    fx_cfg(1, 2, 2, 0, 0);
    fx_adds("n1", "n2", "s1", NULL);
    fx_epoch(6, "n1", "n2", NULL);
    fx_find("n1")->state = EC_NODE_DONE;
    fx_find("n2")->state = EC_NODE_DONE;
    fx_plan();
    /* an action of its own, not a wait the caller recognises by its text */
    ck_assert_msg(F.d->action == EC_PLAN_COMPLETE, "expected complete, got %s: %s",
                  ec_plan_action_name(F.d->action), F.d->why);
    ck_assert_why(F.d, EC_PLAN_WHY_ALL_DONE);
    ck_assert_uint_eq(F.d->n_members, 0);
    ck_assert_int_eq(F.d->reason, EC_REASON_UNKNOWN);
}
END_TEST

/* ------------------------------------------------------------------ */
/* restart                                                             */

START_TEST(incarnation_change_restarts_same_members)
{
    fx_cfg(2, 3, 2, 30000, 30000);
    fx_adds("n1", "n2", "n3", "s1", NULL);
    fx_epoch(9, "n3", "n1", "n2", NULL);
    fx_find("n1")->incarnation = 5;
    F.in.since_eligible_change_ms = 0;
    fx_plan();
    expect_publish(EC_REASON_RESTART, "n3,n1,n2");
    /* The restarted node state joining (re-registering) is still eligible. */
    fx_find("n1")->state = EC_NODE_JOINING;
    fx_plan();
    expect_publish(EC_REASON_RESTART, "n3,n1,n2");
}
END_TEST

START_TEST(restart_beats_join_and_takes_joiners)
{
    fx_cfg(2, 4, 2, 30000, 30000);
    fx_adds("n1", "n2", "j1", NULL);
    fx_epoch(3, "n1", "n2", NULL);
    fx_find("n2")->incarnation = 2;
    F.in.since_eligible_change_ms = 0; /* join window just opened */
    fx_plan();
    expect_publish(EC_REASON_RESTART, "n1,n2,j1");
}
END_TEST

/* ------------------------------------------------------------------ */
/* join                                                                */

START_TEST(joiners_below_max_wait_elastic_timeout)
{
    fx_cfg(2, 5, 2, 1000, 0);
    fx_adds("n1", "n2", "j1", NULL);
    fx_epoch(2, "n2", "n1", NULL);
    F.in.since_eligible_change_ms = -1;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_JOIN_WAIT, 1000);
    F.in.since_eligible_change_ms = 999;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_JOIN_WAIT, 1);
    F.in.since_eligible_change_ms = 1000;
    fx_plan();
    expect_publish(EC_REASON_JOIN, "n2,n1,j1");
    /* Joiners are appended in registration order. */
    fx_add("j3");
    fx_add("j2")->create_revision = F.nodes[2].create_revision + 1;
    fx_plan();
    expect_publish(EC_REASON_JOIN, "n2,n1,j1,j2,j3");
}
END_TEST

START_TEST(joiners_reaching_max_publish_at_once)
{
    fx_cfg(2, 4, 2, 30000, 0);
    fx_adds("n1", "n2", "j1", NULL);
    fx_epoch(2, "n1", "n2", NULL);
    F.in.since_eligible_change_ms = 0;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_JOIN_WAIT, 30000);
    fx_add("j2");
    fx_plan();
    expect_publish(EC_REASON_JOIN, "n1,n2,j1,j2");
    /* More than needed: the first by registration join, the rest are standbys. */
    fx_add("j3")->create_revision = 0;
    fx_plan();
    expect_publish(EC_REASON_JOIN, "n1,n2,j3,j1");
}
END_TEST

/* ------------------------------------------------------------------ */
/* combined events                                                     */

START_TEST(join_and_loss_together_joiners_replace)
{
    fx_cfg(2, 4, 2, 30000, 30000);
    fx_adds("n1", "n2", "n3", "j1", "j2", "j3", NULL);
    fx_epoch(4, "n1", "n2", "n3", NULL);
    fx_drop("n2");
    F.in.since_eligible_change_ms = 0;
    F.in.since_member_missing_ms = 0;
    fx_plan();
    /* j1 fills n2's slot; j2 is appended up to np_max; j3 waits as standby. */
    expect_publish(EC_REASON_SPARE_PROMOTED, "n1,j1,n3,j2");
}
END_TEST

START_TEST(loss_promotion_and_restart_in_one_epoch)
{
    fx_cfg(3, 3, 8, 30000, 30000);
    fx_adds("n1", "n2", "n3", "s1", NULL);
    fx_epoch(4, "n1", "n2", "n3", NULL);
    fx_drop("n1");
    fx_find("n3")->incarnation = 7;
    fx_plan();
    expect_publish(EC_REASON_SPARE_PROMOTED, "s1,n2,n3");
    ck_assert_int_eq(F.d->world_size, 24);
}
END_TEST

START_TEST(loss_window_holds_restart_and_join)
{
    fx_cfg(1, 4, 2, 0, 5000);
    fx_adds("n1", "n2", "n3", NULL);
    fx_epoch(4, "n1", "n2", "n3", NULL);
    fx_drop("n1");
    fx_find("n3")->incarnation = 7;
    F.in.since_member_missing_ms = 1000;
    fx_plan();
    /* No replacement yet: the loss wait governs; the restart rides along later. */
    expect_wait_until(EC_PLAN_WHY_REPLACE_WAIT, 4000);
    F.in.since_member_missing_ms = 5000;
    fx_plan();
    expect_publish(EC_REASON_LOST, "n2,n3");
}
END_TEST

START_TEST(epoch_below_raised_min_is_never_republished_below_min)
{
    /* np_min was raised to 4 after epoch 3 (2 members) was written. */
    fx_cfg(4, 6, 2, 0, 0);
    fx_adds("n1", "n2", "j1", NULL);
    fx_epoch(3, "n1", "n2", NULL);
    fx_plan();
    expect_wait(EC_PLAN_WHY_BELOW_MIN);
    fx_find("n1")->incarnation = 2; /* a restart too: still not below np_min */
    fx_plan();
    expect_wait(EC_PLAN_WHY_BELOW_MIN);
    fx_add("j2");
    fx_plan();
    expect_publish(EC_REASON_RESTART, "n1,n2,j1,j2");
    /* Left alone, a below-min epoch keeps running. */
    fx_drop("j1");
    fx_drop("j2");
    fx_find("n1")->incarnation = 1;
    fx_plan();
    expect_wait(EC_PLAN_WHY_STEADY);
}
END_TEST

/* ------------------------------------------------------------------ */
/* helpers for the caller                                              */

START_TEST(fingerprint_tracks_the_eligible_set_only)
{
    fx_cfg(1, 4, 2, 0, 0);
    fx_adds("n1", "n2", "n3", NULL);
    uint64_t a = ec_plan_fingerprint(&F.in.config, F.nodes, F.in.n_nodes);
    /* Order of the array does not matter. */
    ec_plan_node_t t = F.nodes[0];
    F.nodes[0] = F.nodes[2];
    F.nodes[2] = t;
    ck_assert_uint_eq(ec_plan_fingerprint(&F.in.config, F.nodes, F.in.n_nodes), a);
    /* joining -> ready and a new incarnation are not set changes. */
    fx_find("n1")->state = EC_NODE_JOINING;
    fx_find("n2")->incarnation = 9;
    ck_assert_uint_eq(ec_plan_fingerprint(&F.in.config, F.nodes, F.in.n_nodes), a);
    /* An ineligible node does not count. */
    fx_add("x")->nproc = 3;
    fx_add("y")->state = EC_NODE_FAILED;
    ck_assert_uint_eq(ec_plan_fingerprint(&F.in.config, F.nodes, F.in.n_nodes), a);
    /* Joins and departures do. */
    fx_add("n4");
    uint64_t b = ec_plan_fingerprint(&F.in.config, F.nodes, F.in.n_nodes);
    ck_assert_uint_ne(b, a);
    fx_find("n1")->state = EC_NODE_LEAVING;
    ck_assert_uint_ne(ec_plan_fingerprint(&F.in.config, F.nodes, F.in.n_nodes), b);
    ck_assert_uint_ne(ec_plan_fingerprint(&F.in.config, F.nodes, 0),
                      ec_plan_fingerprint(&F.in.config, F.nodes, 1));
}
END_TEST

START_TEST(long_name_lists_are_cut)
{
    static char ids[20][8];
    fx_cfg(20, 20, 1, 0, 0);
    for (int i = 0; i < 20; i++) {
        snprintf(ids[i], sizeof(ids[i]), "n%02d", i);
        fx_add(ids[i]);
    }
    fx_plan();
    expect_publish(EC_REASON_START, "n00,n01,n02,n03,n04,n05,n06,n07,n08,n09,n10,n11,n12,"
                                         "n13,n14,n15,n16,n17,n18,n19");
    /* The text is the behaviour here: a console line stays short. */
    ck_assert_str_eq(F.d->why, "20 nodes: n00, n01, n02, n03, n04, n05, n06, n07 and 12 more");
    fx_cfg(2, 20, 1, 0, 0);
    F.in.epoch = (ec_plan_epoch_t){1, NULL, 0};
    F.in.epoch.members = F.mem;
    for (int i = 0; i < 20; i++)
        F.mem[F.in.epoch.n_members++] = (ec_plan_member_t){ids[i], 1};
    for (int i = 0; i < 10; i++)
        fx_drop(ids[i]);
    fx_plan();
    expect_publish(EC_REASON_LOST, "n10,n11,n12,n13,n14,n15,n16,n17,n18,n19");
    ck_assert_str_eq(F.d->why, "n00 missing, n01 missing, n02 missing, n03 missing, n04 missing, "
                               "n05 missing, n06 missing, n07 missing and 2 more");
}
END_TEST

/* ------------------------------------------------------------------ */
/* random inputs: properties                                           */

typedef struct {
    uint64_t s;
} rng_t;

static uint64_t rnd(rng_t *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ULL;
}

static size_t rndn(rng_t *r, size_t n)
{
    return n ? (size_t)(rnd(r) % n) : 0;
}

#define R_MAX 600

typedef struct {
    ec_plan_input_t in;
    ec_plan_node_t nodes[R_MAX];
    ec_plan_member_t mem[R_MAX];
    const char *left[R_MAX];
    char ids[2 * R_MAX][12];
} rcase_t;

static int reg_before(const ec_plan_node_t *a, const ec_plan_node_t *b)
{
    if (a->create_revision != b->create_revision)
        return a->create_revision < b->create_revision;
    return strcmp(a->node_id, b->node_id) < 0;
}

static size_t node_by_id(const ec_plan_input_t *in, const char *id)
{
    for (size_t i = 0; i < in->n_nodes; i++)
        if (strcmp(in->nodes[i].node_id, id) == 0)
            return i;
    return SIZE_MAX;
}

static ec_plan_decision_t *plan_ok(const ec_plan_input_t *in)
{
    ec_plan_decision_t *d = NULL;
    ec_error_t err = {0};
    int rc = ec_plan(in, &d, &err);
    ck_assert_msg(rc == 0, "ec_plan: %d %s", rc, err.msg);
    check_why_code(d);
    return d;
}

/* Booting non-members the planner still waits for (late: false), or no
 * longer waits for, their join_ready_timeout_ms passed (late: true). */
static size_t booting_joiners(const ec_plan_input_t *in, bool late)
{
    const ec_plan_config_t *c = &in->config;
    size_t count = 0;
    for (size_t i = 0; i < in->n_nodes; i++) {
        const ec_plan_node_t *n = &in->nodes[i];
        bool member = false;
        for (size_t m = 0; m < in->epoch.n_members && !member; m++)
            member = strcmp(in->epoch.members[m].node_id, n->node_id) == 0;
        if (member || !ec_plan_node_pending(c, n))
            continue;
        bool past = c->join_ready_timeout_ms > 0 &&
                    (n->booting_ms < 0 ? 0 : n->booting_ms) >= c->join_ready_timeout_ms;
        count += past == late;
    }
    return count;
}

/* Check every invariant a decision must satisfy, computing what is expected
 * independently of the planner (quadratic, small inputs). */
static void check_invariants(const ec_plan_input_t *in, const ec_plan_decision_t *d)
{
    const ec_plan_config_t *c = &in->config;
    size_t nn = in->n_nodes, nm = in->epoch.n_members;
    ck_assert_ptr_nonnull(d->why);
    ck_assert_ptr_nonnull(d->log);
    ck_assert_uint_gt(strlen(d->why), 0);

    int bad_cfg = c->np_min < 1 || c->np_min > c->np_max || c->nproc < 1 ||
                  c->elastic_timeout_ms < 0 || c->replace_wait_ms < 0;
    if (bad_cfg) {
        ck_assert_int_eq(d->action, EC_PLAN_FAIL);
        return;
    }
    /* Refusals: exactly the joining/ready nodes with the wrong N, in order. */
    size_t nref = 0;
    for (size_t i = 0; i < nn; i++) {
        const ec_plan_node_t *n = &in->nodes[i];
        if ((n->state == EC_NODE_JOINING || n->state == EC_NODE_READY) &&
            n->nproc != (uint32_t)c->nproc) {
            ck_assert_uint_lt(nref, d->n_refused);
            ck_assert_uint_eq(d->refused[nref].node, i);
            ck_assert_has(d->refused[nref].why, n->node_id);
            nref++;
        }
    }
    ck_assert_uint_eq(nref, d->n_refused);

    /* Members: departed, failed, done, restarted, graceful. */
    size_t departed = 0, failed = 0, done = 0, restarted = 0, graceful = 0;
    size_t n_elig = 0, n_elig_members = 0;
    for (size_t i = 0; i < nn; i++)
        n_elig += ec_plan_node_eligible(c, &in->nodes[i]);
    for (size_t m = 0; m < nm; m++) {
        size_t i = node_by_id(in, in->epoch.members[m].node_id);
        if (i != SIZE_MAX && ec_plan_node_eligible(c, &in->nodes[i])) {
            n_elig_members++;
            restarted += in->nodes[i].incarnation != in->epoch.members[m].incarnation;
            continue;
        }
        if (i != SIZE_MAX && in->nodes[i].state == EC_NODE_DONE &&
            (int)in->nodes[i].nproc == c->nproc) {
            done++; /* finished members stay members */
            continue;
        }
        departed++;
        if (i != SIZE_MAX) {
            failed += in->nodes[i].state == EC_NODE_FAILED;
            graceful += in->nodes[i].state == EC_NODE_LEAVING ||
                        ec_plan_node_pending(c, &in->nodes[i]);
        } else {
            for (size_t j = 0; j < in->n_left; j++)
                if (strcmp(in->left_ids[j], in->epoch.members[m].node_id) == 0) {
                    graceful++;
                    break;
                }
        }
    }
    size_t n_cand = n_elig - n_elig_members;
    ck_assert_uint_eq(d->n_departed, departed);
    size_t n_waited = booting_joiners(in, false);

    if (nm && (failed == nm || nm > (size_t)c->np_max)) {
        ck_assert_int_eq(d->action, EC_PLAN_FAIL);
        return;
    }
    ck_assert_int_ne(d->action, EC_PLAN_FAIL);
    if (nm && done == nm) {
        ck_assert_int_eq(d->action, EC_PLAN_COMPLETE);
        return;
    }

    switch (d->action) {
    case EC_PLAN_PUBLISH: {
        size_t w = d->n_members;
        ck_assert_uint_ge(w, (size_t)c->np_min);
        ck_assert_uint_le(w, (size_t)c->np_max);
        /* Every eligible node up to np_max, every eligible member, and every
         * member that is done (it stays a member). */
        ck_assert_uint_eq(w, n_elig + done < (size_t)c->np_max ? n_elig + done : (size_t)c->np_max);
        ck_assert_uint_eq(d->epoch, in->epoch.number + 1);
        ck_assert_int_eq(d->world_size, (int64_t)w * c->nproc);
        ck_assert_msg(strncmp(d->log, "+epoch ", 7) == 0, "log %s", d->log);
        /* No node twice, only eligible nodes. */
        unsigned char *seen = calloc(nn + 1, 1);
        for (size_t m = 0; m < w; m++) {
            ck_assert_uint_lt(d->members[m], nn);
            ck_assert(!seen[d->members[m]]);
            seen[d->members[m]] = 1;
            const ec_plan_node_t *nd = &in->nodes[d->members[m]];
            ck_assert(ec_plan_node_eligible(c, nd) ||
                      (nd->state == EC_NODE_DONE && (int)nd->nproc == c->nproc));
        }
        free(seen);
        /* Ranks are exactly 0..W*N-1. */
        size_t world = w * (size_t)c->nproc;
        unsigned char *hit = calloc(world + 1, 1);
        for (size_t m = 0; m < w; m++)
            for (int k = 0; k < c->nproc; k++) {
                int64_t r = ec_rank((int64_t)m, c->nproc, k);
                ck_assert_int_ge(r, 0);
                ck_assert_int_lt(r, (int64_t)world);
                ck_assert(!hit[r]);
                hit[r] = 1;
            }
        free(hit);
        /* Survivors keep their relative order; newcomers come in registration
         * order and are the earliest registered. */
        size_t last_mid = 0, have_last = 0, survivors = 0;
        const ec_plan_node_t *last_new = NULL;
        for (size_t m = 0; m < w; m++) {
            const ec_plan_node_t *n = &in->nodes[d->members[m]];
            size_t mid = SIZE_MAX;
            for (size_t k = 0; k < nm; k++)
                if (strcmp(in->epoch.members[k].node_id, n->node_id) == 0)
                    mid = k;
            if (mid != SIZE_MAX) {
                ck_assert_msg(!have_last || mid > last_mid, "survivor %s moved before %zu",
                              n->node_id, last_mid);
                last_mid = mid;
                have_last = 1;
                survivors++;
                if (d->reason == EC_REASON_SPARE_PROMOTED || departed == 0)
                    ck_assert_uint_eq(mid, m); /* no M_id moves */
            } else {
                if (last_new)
                    ck_assert(reg_before(last_new, n));
                last_new = n;
            }
        }
        ck_assert_uint_eq(survivors, n_elig_members + done);
        if (last_new)
            for (size_t i = 0; i < nn; i++) {
                const ec_plan_node_t *n = &in->nodes[i];
                if (!ec_plan_node_eligible(c, n))
                    continue;
                int published = 0;
                for (size_t m = 0; m < w; m++)
                    published |= d->members[m] == i;
                if (!published)
                    ck_assert(reg_before(last_new, n)); /* standbys registered later */
            }
        /* Reasons. */
        if (nm == 0) {
            ck_assert_int_eq(d->reason, EC_REASON_START);
        } else if (departed) {
            if (n_cand >= departed)
                ck_assert_int_eq(d->reason, EC_REASON_SPARE_PROMOTED);
            else if (graceful == departed)
                ck_assert_int_eq(d->reason, EC_REASON_LEAVE);
            else
                ck_assert_int_eq(d->reason, EC_REASON_LOST);
            if (n_cand < departed && c->np_min == c->np_max)
                ck_abort_msg("fixed-size job shrank");
        } else if (restarted) {
            ck_assert_int_eq(d->reason, EC_REASON_RESTART);
        } else {
            ck_assert_int_eq(d->reason, EC_REASON_JOIN);
        }
        break;
    }
    case EC_PLAN_WAIT_UNTIL: {
        int64_t most = c->elastic_timeout_ms > c->replace_wait_ms ? c->elastic_timeout_ms
                                                                    : c->replace_wait_ms;
        if (n_waited && c->join_ready_timeout_ms > most)
            most = c->join_ready_timeout_ms;
        ck_assert_int_gt(d->wait_ms, 0);
        ck_assert_int_le(d->wait_ms, most);
        ck_assert_uint_eq(d->n_members, 0);
        break;
    }
    case EC_PLAN_WAIT:
        ck_assert_uint_eq(d->n_members, 0);
        if (nm == 0)
            ck_assert_msg(n_elig < (size_t)c->np_min || n_waited, "why: %s", d->why);
        else if (!departed)
            ck_assert_msg(d->why_code == EC_PLAN_WHY_STEADY || n_elig < (size_t)c->np_min ||
                          n_waited, "why: %s", d->why);
        else
            ck_assert(n_elig < (size_t)c->np_min || c->np_min == c->np_max);
        break;
    default:
        ck_abort_msg("unexpected action %d", d->action);
    }
}

/* Fill a random but well-formed case. */
static void random_case(rng_t *r, rcase_t *rc, size_t universe)
{
    memset(&rc->in, 0, sizeof(rc->in));
    rc->in = (ec_plan_input_t)EC_PLAN_INPUT_INIT;
    rc->in.nodes = rc->nodes;
    rc->in.left_ids = rc->left;
    ec_plan_config_t *c = &rc->in.config;
    c->np_min = 1 + (int)rndn(r, 6);
    c->np_max = c->np_min + (rndn(r, 3) == 0 ? 0 : (int)rndn(r, 8));
    c->nproc = 1 + (int)rndn(r, 8);
    static const int64_t waits[] = {0, 1, 100, 1000};
    c->elastic_timeout_ms = waits[rndn(r, 4)];
    c->replace_wait_ms = waits[rndn(r, 4)];
    static const int64_t ready_waits[] = {0, 0, 50, 1000, 5000};
    c->join_ready_timeout_ms = ready_waits[rndn(r, 5)];
    if (rndn(r, 100) == 0)
        c->np_min = (int)rndn(r, 3) - 1; /* sometimes invalid */

    for (size_t u = 0; u < universe; u++)
        snprintf(rc->ids[u], sizeof(rc->ids[u]), "r%zu", u);
    /* Register a random subset of the universe. */
    rc->in.n_nodes = 0;
    size_t skip = rndn(r, 2) ? 1 : 3; /* dense or sparse: few spares, many losses */
    for (size_t u = 0; u < universe; u++) {
        if (rndn(r, 4) < skip)
            continue;
        static const ec_node_state_t st[] = {
            EC_NODE_READY,   EC_NODE_READY,   EC_NODE_READY, EC_NODE_READY, EC_NODE_READY,
            EC_NODE_JOINING, EC_NODE_JOINING, EC_NODE_LEAVING, EC_NODE_DONE, EC_NODE_FAILED,
            EC_NODE_FAILED,  EC_NODE_UNKNOWN};
        ec_plan_node_t *n = &rc->nodes[rc->in.n_nodes++];
        *n = (ec_plan_node_t){
            .node_id = rc->ids[u],
            .nproc = rndn(r, 12) == 0 ? (uint32_t)(1 + rndn(r, 8)) : (uint32_t)c->nproc,
            .incarnation = 1 + rndn(r, 2),
            .create_revision = (int64_t)rndn(r, 3 * universe + 1),
            .state = st[rndn(r, sizeof(st) / sizeof(st[0]))],
        };
        if (rndn(r, 6) == 0) { /* its processes boot */
            static const int64_t bt[] = {-1, 0, 49, 50, 999, 1000, 6000};
            n->booting = true;
            n->booting_ms = bt[rndn(r, sizeof(bt) / sizeof(bt[0]))];
        }
    }
    /* Shuffle the node array. */
    for (size_t i = rc->in.n_nodes; i > 1; i--) {
        size_t j = rndn(r, i);
        ec_plan_node_t t = rc->nodes[i - 1];
        rc->nodes[i - 1] = rc->nodes[j];
        rc->nodes[j] = t;
    }
    /* An epoch over a random subset of the universe (some never registered). */
    rc->in.epoch = (ec_plan_epoch_t){0, rc->mem, 0};
    if (rndn(r, 10) >= 3 && universe) {
        size_t want = 1 + rndn(r, (size_t)(c->np_max > 0 ? c->np_max : 1) + (rndn(r, 20) == 0));
        unsigned char *used = calloc(universe, 1);
        size_t left_mode = rndn(r, 3); /* none, some or all members "were leaving" */
        for (size_t k = 0; k < want && k < universe; k++) {
            size_t u;
            do
                u = rndn(r, universe);
            while (used[u]);
            used[u] = 1;
            size_t i = node_by_id(&rc->in, rc->ids[u]);
            uint64_t inc = i != SIZE_MAX ? rc->nodes[i].incarnation : 1;
            if (rndn(r, 8) == 0)
                inc++;
            rc->mem[rc->in.epoch.n_members++] = (ec_plan_member_t){rc->ids[u], inc};
            if (left_mode == 2 || (left_mode == 1 && rndn(r, 2)))
                rc->left[rc->in.n_left++] = rc->ids[u];
        }
        free(used);
        rc->in.epoch.number = 1 + rndn(r, 50);
    }
    static const int64_t since[] = {-1, 0, 1, 99, 100, 500, 999, 1000, 5000};
    rc->in.since_eligible_change_ms = since[rndn(r, 9)];
    rc->in.since_member_missing_ms = since[rndn(r, 9)];
}

/* The same decision for the same cluster, whatever the node array order. */
static void check_permutation(rng_t *r, rcase_t *rc, const ec_plan_decision_t *d)
{
    static ec_plan_node_t perm[R_MAX];
    size_t nn = rc->in.n_nodes;
    memcpy(perm, rc->nodes, nn * sizeof(perm[0]));
    for (size_t i = nn; i > 1; i--) {
        size_t j = rndn(r, i);
        ec_plan_node_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    ec_plan_input_t in2 = rc->in;
    in2.nodes = perm;
    ec_plan_decision_t *d2 = plan_ok(&in2);
    ck_assert_int_eq(d2->action, d->action);
    ck_assert_int_eq(d2->reason, d->reason);
    ck_assert_int_eq(d2->wait_ms, d->wait_ms);
    ck_assert_uint_eq(d2->n_departed, d->n_departed);
    ck_assert_uint_eq(d2->n_refused, d->n_refused);
    ck_assert_uint_eq(d2->n_members, d->n_members);
    for (size_t m = 0; m < d->n_members; m++)
        ck_assert_str_eq(perm[d2->members[m]].node_id, rc->nodes[d->members[m]].node_id);
    if (d->n_refused == 0)
        ck_assert_str_eq(d2->why, d->why);
    ec_plan_decision_free(d2);
}

/* A WAIT_UNTIL is a promise: with nothing else changed, once wait_ms has
 * passed on both clocks the plan publishes. */
static void check_wait_until_promise(const ec_plan_input_t *in, const ec_plan_decision_t *d)
{
    if (d->action != EC_PLAN_WAIT_UNTIL)
        return;
    /* Time passes for the clocks and for every boot alike.  A wait may be
     * followed by a wait for booting nodes (the elastic window closes, then
     * the nodes booting in it are waited for), never by anything else, and
     * a publish comes within a few of them unless such a wait has no
     * limit. */
    static ec_plan_node_t nodes[R_MAX];
    ec_plan_input_t later = *in;
    memcpy(nodes, in->nodes, in->n_nodes * sizeof(nodes[0]));
    later.nodes = nodes;
    int64_t wait = d->wait_ms;
    for (int round = 0; round < 4; round++) {
        later.since_eligible_change_ms =
            (later.since_eligible_change_ms < 0 ? 0 : later.since_eligible_change_ms) + wait;
        later.since_member_missing_ms =
            (later.since_member_missing_ms < 0 ? 0 : later.since_member_missing_ms) + wait;
        for (size_t i = 0; i < later.n_nodes; i++)
            if (nodes[i].booting)
                nodes[i].booting_ms = (nodes[i].booting_ms < 0 ? 0 : nodes[i].booting_ms) + wait;
        ec_plan_decision_t *d2 = plan_ok(&later);
        check_invariants(&later, d2);
        if (round == 0) {
            /* one ms earlier it still waited exactly 1 ms */
            ec_plan_input_t earlier = later;
            static ec_plan_node_t enodes[R_MAX];
            memcpy(enodes, nodes, later.n_nodes * sizeof(enodes[0]));
            earlier.nodes = enodes;
            earlier.since_eligible_change_ms -= 1;
            earlier.since_member_missing_ms -= 1;
            for (size_t i = 0; i < later.n_nodes; i++)
                if (enodes[i].booting)
                    enodes[i].booting_ms -= 1;
            ec_plan_decision_t *d3 = plan_ok(&earlier);
            ck_assert_msg(d3->action == EC_PLAN_WAIT_UNTIL, "1 ms early: %s (first: %s; then %s)", d3->log, d->log, ec_plan_action_name(d2->action));
            ck_assert_int_eq(d3->wait_ms, 1);
            ec_plan_decision_free(d3);
        }
        ec_plan_action_t a = d2->action;
        wait = d2->wait_ms;
        /* a wait for booting nodes, or for the first epoch once a boot ran out */
        ec_plan_why_t w = d2->why_code;
        bool pending = w == EC_PLAN_WHY_START_BOOTING || w == EC_PLAN_WHY_JOIN_BOOTING ||
                       ((w == EC_PLAN_WHY_NEED_NODES || w == EC_PLAN_WHY_START_WAIT) &&
                        booting_joiners(&later, true));
        if (a != EC_PLAN_PUBLISH)
            ck_assert_msg(pending, "after waiting: %s: %s", ec_plan_action_name(a), d2->why);
        ec_plan_decision_free(d2);
        if (a == EC_PLAN_PUBLISH || a == EC_PLAN_WAIT)
            return;
    }
    ck_abort_msg("no publish after four waits");
}

static void check_equivalent(rng_t *r, rcase_t *rc, const ec_plan_decision_t *d)
{
    static ec_plan_node_t alt[R_MAX];
    size_t nn = rc->in.n_nodes, changed = 0;
    memcpy(alt, rc->nodes, nn * sizeof(alt[0]));
    for (size_t i = 0; i < nn; i++) {
        if (rndn(r, 2) == 0)
            continue;
        if (alt[i].state == EC_NODE_JOINING)
            alt[i].state = EC_NODE_READY;
        else if (alt[i].state == EC_NODE_READY)
            alt[i].state = EC_NODE_JOINING;
        else
            continue;
        changed++;
        ck_assert(ec_plan_node_equiv(&rc->nodes[i], &alt[i]));
    }
    if (!changed)
        return;
    ec_plan_input_t in2 = rc->in;
    in2.nodes = alt;
    ec_plan_decision_t *d2 = plan_ok(&in2);
    ck_assert_int_eq(d2->action, d->action);
    ck_assert_int_eq(d2->reason, d->reason);
    ck_assert_int_eq(d2->wait_ms, d->wait_ms);
    ck_assert_uint_eq(d2->epoch, d->epoch);
    ck_assert_uint_eq(d2->n_departed, d->n_departed);
    ck_assert_uint_eq(d2->n_refused, d->n_refused);
    for (size_t i = 0; i < d->n_refused; i++)
        ck_assert_uint_eq(d2->refused[i].node, d->refused[i].node);
    ck_assert_uint_eq(d2->n_members, d->n_members);
    for (size_t m = 0; m < d->n_members; m++)
        ck_assert_uint_eq(d2->members[m], d->members[m]);
    ck_assert_str_eq(d2->why, d->why);
    ck_assert_uint_eq(ec_plan_fingerprint(&in2.config, alt, nn),
                      ec_plan_fingerprint(&rc->in.config, rc->nodes, nn));
    ec_plan_decision_free(d2);
}

START_TEST(node_equiv_tells_apart_what_the_planner_reads)
{
    ec_plan_node_t a = {.node_id = "n1", .nproc = 2, .incarnation = 3, .create_revision = 7,
                        .state = EC_NODE_JOINING};
    ec_plan_node_t b = a;
    ck_assert(ec_plan_node_equiv(&a, &b));
    b.state = EC_NODE_READY; /* a READY after joining: the planner admits both alike */
    ck_assert(ec_plan_node_equiv(&a, &b));
    ck_assert(ec_plan_node_equiv(&b, &a));
    static const ec_node_state_t other[] = {EC_NODE_LEAVING, EC_NODE_DONE, EC_NODE_FAILED,
                                            EC_NODE_UNKNOWN};
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        b = a;
        b.state = other[i];
        ck_assert_msg(!ec_plan_node_equiv(&a, &b), "joining vs %s", ec_node_state_name(other[i]));
        a.state = EC_NODE_READY;
        ck_assert(!ec_plan_node_equiv(&a, &b));
        a.state = EC_NODE_JOINING;
    }
    b = a;
    b.state = EC_NODE_LEAVING;
    ec_plan_node_t c = b;
    c.state = EC_NODE_DONE;
    ck_assert(!ec_plan_node_equiv(&b, &c));
    b = a;
    b.incarnation++;
    ck_assert(!ec_plan_node_equiv(&a, &b));
    b = a;
    b.nproc = 4;
    ck_assert(!ec_plan_node_equiv(&a, &b));
    b = a;
    b.create_revision = 9; /* registered again: another place in the order */
    ck_assert(!ec_plan_node_equiv(&a, &b));
    b = a;
    b.node_id = "n2";
    ck_assert(!ec_plan_node_equiv(&a, &b));
    char same_id[] = "n1"; /* compared by value */
    b = a;
    b.node_id = same_id;
    ck_assert(ec_plan_node_equiv(&a, &b));
    ck_assert(!ec_plan_node_equiv(&a, NULL));
    ck_assert(ec_plan_node_equiv(NULL, NULL));
}
END_TEST

START_TEST(random_cases_keep_invariants)
{
    static rcase_t rc;
    rng_t r = {0x5eed1234abcdULL};
#define WHY_ONE(code, name, action) +1
    enum { N_WHYS = 0 EC_PLAN_WHY_MAP(WHY_ONE) };
#undef WHY_ONE
    size_t counts[5] = {0}, reasons[7] = {0}, whys[N_WHYS] = {0};
    for (int t = 0; t < 4000; t++) {
        size_t universe = rndn(&r, 20) == 0 ? 100 + rndn(&r, 400) : rndn(&r, 24);
        random_case(&r, &rc, universe);
        ec_plan_decision_t *d = plan_ok(&rc.in);
        check_invariants(&rc.in, d);
        check_permutation(&r, &rc, d);
        check_wait_until_promise(&rc.in, d);
        rng_t r2 = {0x9e3779b97f4a7c15ULL ^ (uint64_t)t}; /* r's stream unchanged */
        check_equivalent(&r2, &rc, d);
        counts[d->action]++;
        reasons[d->reason]++;
        whys[d->why_code]++;
        ec_plan_decision_free(d);
    }
    /* The generator reaches every outcome often enough to mean something. */
    for (int a = EC_PLAN_PUBLISH; a <= EC_PLAN_FAIL; a++)
        ck_assert_msg(counts[a] >= 100, "%s only %zu times", ec_plan_action_name(a), counts[a]);
    for (int a = EC_REASON_START; a <= EC_REASON_SPARE_PROMOTED; a++)
        ck_assert_msg(reasons[a] >= 10, "%s only %zu times", ec_epoch_reason_name(a), reasons[a]);
    /* ... and every rule but fault tolerance off (the generator keeps it on) */
    for (int w = 0; w < N_WHYS; w++)
        ck_assert_msg(w == EC_PLAN_WHY_FAILED_NO_TOLERANCE || whys[w] >= 1, "%s: %zu times",
                      ec_plan_why_name(w), whys[w]);
}
END_TEST

/* The caller's clocks, kept exactly as planner.h tells it to: the
 * fingerprint of the eligible set and when it last changed; since when a
 * member is missing (n_departed). */
typedef struct {
    int64_t now, t_change, t_missing;
    uint64_t fp;
} caller_t;

/* One plan by the caller: its clocks brought to now, the decision checked
 * against the invariants, the missing clock moved by n_departed. */
static ec_plan_decision_t *caller_plan(caller_t *c, rcase_t *rc, const int64_t *boot_since)
{
    for (size_t i = 0; i < rc->in.n_nodes; i++)
        rc->nodes[i].booting_ms = c->now - boot_since[i];
    uint64_t f = ec_plan_fingerprint(&rc->in.config, rc->nodes, rc->in.n_nodes);
    if (f != c->fp) {
        c->fp = f;
        c->t_change = c->now;
    }
    rc->in.since_eligible_change_ms = c->now - c->t_change;
    rc->in.since_member_missing_ms = c->t_missing < 0 ? -1 : c->now - c->t_missing;
    ec_plan_decision_t *d = plan_ok(&rc->in);
    check_invariants(&rc->in, d);
    if (d->n_departed == 0)
        c->t_missing = -1;
    else if (c->t_missing < 0)
        c->t_missing = c->now;
    return d;
}

/* The caller applies a published epoch: its members are ready members. */
static void caller_publish(caller_t *c, rcase_t *rc, const ec_plan_decision_t *d)
{
    rc->in.epoch.number = d->epoch;
    rc->in.epoch.n_members = d->n_members;
    for (size_t m = 0; m < d->n_members; m++) {
        ec_plan_node_t *n = &rc->nodes[d->members[m]];
        n->state = EC_NODE_READY;
        rc->mem[m] = (ec_plan_member_t){n->node_id, n->incarnation};
    }
    rc->in.n_left = 0;
    c->t_missing = -1;
}

/* A caller's loop over a changing cluster: the caller keeps the two clocks
 * exactly as planner.h tells it to (fingerprint for the eligible set,
 * n_departed for the missing clock) and applies each publish.  Every epoch
 * published keeps the invariants, and with the cluster left alone the loop
 * settles within a bounded number of steps. */
START_TEST(simulated_caller_converges)
{
    static rcase_t rc;
    rng_t r = {0xfeedfaceULL};
    static char ids[4000][12];
    static int64_t boot_since[R_MAX]; /* per rc.nodes[i], when booting */
    size_t next_id = 0;
    int publishes = 0;
    for (int run = 0; run < 30; run++) {
        memset(&rc.in, 0, sizeof(rc.in));
        rc.in = (ec_plan_input_t)EC_PLAN_INPUT_INIT;
        rc.in.nodes = rc.nodes;
        rc.in.left_ids = rc.left;
        int min = 1 + (int)rndn(&r, 4);
        rc.in.config = (ec_plan_config_t){min, min + (int)rndn(&r, 5), 1 + (int)rndn(&r, 4),
                                          (int64_t)rndn(&r, 3) * 500, (int64_t)rndn(&r, 3) * 500,
                                          (int64_t)rndn(&r, 3) * 300, false};
        rc.in.epoch.members = rc.mem;
        int64_t rev = 0;
        caller_t c = {.t_missing = -1, .fp = ec_plan_fingerprint(&rc.in.config, rc.nodes, 0)};
        for (int step = 0; step < 120; step++) {
            /* Mutate the cluster now and then. */
            size_t op = rndn(&r, 10);
            if (op < 3 && rc.in.n_nodes < 60 && next_id < 4000) {
                snprintf(ids[next_id], sizeof(ids[0]), "s%zu", next_id);
                boot_since[rc.in.n_nodes] = c.now;
                rc.nodes[rc.in.n_nodes++] = (ec_plan_node_t){
                    ids[next_id++], (uint32_t)rc.in.config.nproc, 1, ++rev, EC_NODE_JOINING,
                    rndn(&r, 3) == 0, 0, 0};
            } else if (op == 3 && rc.in.n_nodes) {
                size_t i = rndn(&r, rc.in.n_nodes);
                if (rndn(&r, 2) && rc.in.n_left < R_MAX)
                    rc.left[rc.in.n_left++] = rc.nodes[i].node_id;
                boot_since[i] = boot_since[rc.in.n_nodes - 1];
                rc.nodes[i] = rc.nodes[--rc.in.n_nodes];
            } else if (op == 6 && rc.in.n_nodes) {
                rc.nodes[rndn(&r, rc.in.n_nodes)].booting = false; /* ready */
            } else if (op == 7 && rc.in.n_nodes && rndn(&r, 3) == 0) {
                size_t i = rndn(&r, rc.in.n_nodes); /* its agent replaces a process */
                rc.nodes[i].booting = true;
                rc.nodes[i].incarnation++;
                boot_since[i] = c.now;
            } else if (op == 4 && rc.in.n_nodes) {
                rc.nodes[rndn(&r, rc.in.n_nodes)].incarnation++;
            } else if (op == 5 && rc.in.n_nodes && rndn(&r, 4) == 0) {
                rc.nodes[rndn(&r, rc.in.n_nodes)].state = EC_NODE_LEAVING;
            }
            ec_plan_decision_t *d = caller_plan(&c, &rc, boot_since);
            if (d->action == EC_PLAN_PUBLISH) {
                publishes++;
                caller_publish(&c, &rc, d);
                /* Right after a publish the same cluster is steady: no loop. */
                ec_plan_decision_free(d);
                rc.in.since_member_missing_ms = -1;
                d = plan_ok(&rc.in);
                ck_assert_msg(d->why_code == EC_PLAN_WHY_STEADY, "not steady after a publish: %s",
                              d->log);
            } else if (d->action == EC_PLAN_WAIT_UNTIL) {
                c.now += rndn(&r, 2) ? d->wait_ms : (int64_t)rndn(&r, (size_t)d->wait_ms);
            }
            c.now += (int64_t)rndn(&r, 50);
            ec_plan_decision_free(d);
        }
        /* Left alone, the caller settles in at most five plans (a publish,
         * perhaps after a WAIT_UNTIL for the window and one for a boot that
         * runs out), then waits. */
        int settled = 0;
        for (int round = 0; round < 6 && !settled; round++) {
            ec_plan_decision_t *d = caller_plan(&c, &rc, boot_since);
            if (d->action == EC_PLAN_PUBLISH)
                caller_publish(&c, &rc, d);
            else if (d->action == EC_PLAN_WAIT_UNTIL)
                c.now += d->wait_ms;
            else
                settled = 1;
            ec_plan_decision_free(d);
        }
        ck_assert_msg(settled, "run %d did not settle", run);
    }
    ck_assert_int_ge(publishes, 60);
}
END_TEST

/* ------------------------------------------------------------------ */
/* admission waits for a boot (booting nodes: processes not ready yet)  */

/* Mark node id booting for ms (its processes started, not all ready). */
static ec_plan_node_t *fx_booting(const char *id, int64_t ms)
{
    ec_plan_node_t *n = fx_find(id);
    n->booting = true;
    n->booting_ms = ms;
    return n;
}

/* A booting node is never published: the first epoch waits for it (the
 * elastic window closes only once every node in it is ready), and starts
 * without it once it has booted for join_ready_timeout. */
START_TEST(start_waits_for_booting_nodes_to_be_ready)
{
    fx_cfg(2, 4, 2, 1000, 0);
    F.in.config.join_ready_timeout_ms = 5000;
    fx_adds("n1", "n2", "n3", NULL);
    fx_booting("n2", 300);
    F.in.since_eligible_change_ms = 1000; /* the window itself has passed */
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_START_BOOTING, 4700);
    /* The console says whom the job waits for, for how long, in these words. */
    ck_assert_str_eq(F.d->why, "waiting for n2 to be ready (booting for 300 ms; up to 4700 ms "
                               "more): starting with 3 nodes once every one is");
    /* ready: the window does not start again (a boot is no new node) */
    fx_find("n2")->booting = false;
    fx_plan();
    expect_publish(EC_REASON_START, "n1,n2,n3");
    /* never ready: the job starts without it once its time is up */
    fx_booting("n2", 5000);
    fx_plan();
    expect_publish(EC_REASON_START, "n1,n3");
}
END_TEST

START_TEST(start_counts_booting_nodes_toward_the_window_but_not_the_epoch)
{
    fx_cfg(2, 2, 1, 1000, 0);
    fx_adds("n1", "n2", "n3", NULL);
    fx_booting("n1", 10);
    /* two ready nodes reach np_max: published at once, without the booting one */
    F.in.since_eligible_change_ms = 0;
    fx_plan();
    expect_publish(EC_REASON_START, "n2,n3");
    /* with only one ready, below np_min: wait for the booting one, untimed
     * (no join_ready_timeout) */
    fx_find("n3")->state = EC_NODE_LEAVING;
    fx_plan();
    expect_wait(EC_PLAN_WHY_START_BOOTING);
    /* booting counts toward np_min only while it may still become ready */
    F.in.config.join_ready_timeout_ms = 10;
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_NODES);
}
END_TEST

/* A joiner that is booting never stops the members: no epoch until it is
 * ready, then at once if the window has passed; a ready joiner waits for a
 * booting one within the join_ready_timeout, not beyond. */
START_TEST(joiner_is_admitted_only_once_ready)
{
    fx_cfg(1, 5, 2, 1000, 0);
    F.in.config.join_ready_timeout_ms = 3000;
    fx_adds("n1", "n2", "j1", "j2", NULL);
    fx_epoch(4, "n1", "n2", NULL);
    fx_booting("j1", 100);
    fx_booting("j2", 100);
    F.in.since_eligible_change_ms = 5000;
    fx_plan();
    expect_wait(EC_PLAN_WHY_STEADY);
    ck_assert_uint_eq(F.d->n_departed, 0);
    fx_find("j1")->booting = false;
    fx_plan();
    expect_wait_until(EC_PLAN_WHY_JOIN_BOOTING, 2900);
    fx_find("j2")->booting_ms = 3000;
    fx_plan();
    expect_publish(EC_REASON_JOIN, "n1,n2,j1");
    fx_find("j2")->booting = false;
    fx_find("j2")->booting_ms = 0;
    fx_plan();
    expect_publish(EC_REASON_JOIN, "n1,n2,j1,j2");
    /* reaching np_max with ready joiners does not wait for booting ones */
    fx_cfg(1, 3, 2, 1000, 0);
    F.in.config.join_ready_timeout_ms = 3000;
    fx_booting("j2", 1);
    fx_plan();
    expect_publish(EC_REASON_JOIN, "n1,n2,j1");
}
END_TEST

/* A member whose processes restart (its agent marks it booting with a new
 * incarnation) leaves the epoch at once, as a node does, and comes back when
 * ready: the others never wait for its boot. */
START_TEST(booting_member_steps_out_and_returns_when_ready)
{
    fx_cfg(1, 3, 2, 1000, 0);
    fx_adds("n1", "n2", "n3", NULL);
    fx_epoch(6, "n1", "n2", "n3", NULL);
    F.in.since_eligible_change_ms = 60000;
    fx_booting("n2", 0)->incarnation = 2;
    fx_plan();
    expect_publish(EC_REASON_LEAVE, "n1,n3");
    ck_assert_uint_eq(F.d->n_departed, 1);
    fx_epoch(7, "n1", "n3", NULL);
    fx_plan();
    expect_wait(EC_PLAN_WHY_STEADY);
    fx_find("n2")->booting = false;
    fx_plan(); /* the window passed long ago: back at once */
    expect_publish(EC_REASON_JOIN, "n1,n3,n2");
    /* a fixed-size job cannot go on without it: it waits, then restarts */
    fx_cfg(3, 3, 2, 1000, 0);
    fx_epoch(8, "n1", "n2", "n3", NULL);
    fx_booting("n2", 0)->incarnation = 3;
    fx_plan();
    expect_wait(EC_PLAN_WHY_NEED_REPLACEMENTS);
    ck_assert_uint_eq(F.d->n_departed, 1);
    fx_find("n2")->booting = false;
    fx_plan();
    expect_publish(EC_REASON_RESTART, "n1,n2,n3");
}
END_TEST

START_TEST(booting_standby_does_not_replace_a_lost_member)
{
    fx_cfg(2, 3, 1, 1000, 0);
    fx_adds("n1", "n2", "n3", "s1", NULL);
    fx_epoch(3, "n1", "n2", "n3", NULL);
    fx_booting("s1", 50);
    fx_drop("n2");
    fx_plan();
    expect_publish(EC_REASON_LOST, "n1,n3");
    fx_find("s1")->booting = false;
    fx_plan();
    expect_publish(EC_REASON_SPARE_PROMOTED, "n1,s1,n3");
}
END_TEST

START_TEST(readiness_is_no_change_of_the_window_but_is_one_of_the_plan)
{
    fx_cfg(1, 4, 2, 0, 0);
    fx_adds("n1", "n2", NULL);
    uint64_t a = ec_plan_fingerprint(&F.in.config, F.nodes, F.in.n_nodes);
    fx_booting("n2", 10);
    ck_assert_uint_eq(ec_plan_fingerprint(&F.in.config, F.nodes, F.in.n_nodes), a);
    ec_plan_node_t x = *fx_find("n2"), y = x;
    y.booting = false;
    ck_assert(!ec_plan_node_equiv(&x, &y));
    y = x;
    y.booting_ms = 999; /* the leader's clock, not the record: no plan for it */
    ck_assert(ec_plan_node_equiv(&x, &y));
    ck_assert(!ec_plan_node_eligible(&F.in.config, &x));
    ck_assert(ec_plan_node_pending(&F.in.config, &x));
    ck_assert(!ec_plan_node_pending(&F.in.config, fx_find("n1")));
}
END_TEST

/* A big cluster decides correctly (timing is the benchmark's business). */
START_TEST(large_cluster_promotes_in_place)
{
    static ec_plan_node_t nodes[4096];
    static ec_plan_member_t mem[4000];
    static char ids[4096][16];
    for (size_t i = 0; i < 4096; i++) {
        snprintf(ids[i], sizeof(ids[i]), "host-%04zu", 4095 - i);
        nodes[i] = (ec_plan_node_t){ids[i], 8, 1, (int64_t)i + 1, EC_NODE_READY, false, 0, 0};
    }
    for (size_t m = 0; m < 4000; m++)
        mem[m] = (ec_plan_member_t){ids[m], 1};
    ec_plan_input_t in = EC_PLAN_INPUT_INIT;
    in.config = (ec_plan_config_t){1000, 4000, 8, 30000, 30000, 0, false};
    in.nodes = nodes;
    in.n_nodes = 4096;
    in.epoch = (ec_plan_epoch_t){12, mem, 4000};
    nodes[1234].state = EC_NODE_FAILED;
    ec_plan_decision_t *d = plan_ok(&in);
    ck_assert_int_eq(d->action, EC_PLAN_PUBLISH);
    ck_assert_int_eq(d->reason, EC_REASON_SPARE_PROMOTED);
    ck_assert_uint_eq(d->n_members, 4000);
    for (size_t m = 0; m < 4000; m++)
        ck_assert_uint_eq(d->members[m], m == 1234 ? 4000 : m);
    check_invariants(&in, d);
    ec_plan_decision_free(d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("planner");
    TCase *tc = tcase_create("rules");
    tcase_add_checked_fixture(tc, fx_setup, fx_teardown);
    tcase_set_timeout(tc, (double)ec_test_ms(60000) / 1000.0);
    tcase_add_test(tc, rank_is_mid_times_n_plus_nid);
    tcase_add_test(tc, names_of_reasons_and_actions);
    tcase_add_test(tc, invalid_config_fails);
    tcase_add_test(tc, all_members_failed_fails);
    tcase_add_test(tc, one_failed_member_fails_the_job_without_fault_tolerance);
    tcase_add_test(tc, failed_plus_vanished_is_not_all_failed);
    tcase_add_test(tc, epoch_larger_than_np_max_fails);
    tcase_add_test(tc, malformed_input_is_einval);
    tcase_add_test(tc, free_accepts_null_and_keeps_errno);
    tcase_add_test(tc, empty_cluster_waits);
    tcase_add_test(tc, start_below_min_waits_indefinitely);
    tcase_add_test(tc, start_at_max_publishes_at_once_in_registration_order);
    tcase_add_test(tc, placed_nodes_take_their_node_rank_in_the_first_epoch);
    tcase_add_test(tc, start_beyond_max_keeps_standbys);
    tcase_add_test(tc, start_between_min_and_max_waits_elastic_timeout);
    tcase_add_test(tc, start_with_zero_elastic_timeout_is_immediate);
    tcase_add_test(tc, mismatched_nproc_is_refused);
    tcase_add_test(tc, member_reregistered_with_other_nproc_departs);
    tcase_add_test(tc, steady_state_waits);
    tcase_add_test(tc, standby_takes_lost_members_mid_at_once);
    tcase_add_test(tc, several_lost_with_enough_standbys);
    tcase_add_test(tc, several_lost_with_fewer_standbys);
    tcase_add_test(tc, lost_without_standby_replace_wait_zero_publishes_survivors);
    tcase_add_test(tc, lost_without_standby_waits_replace_wait);
    tcase_add_test(tc, lost_below_min_waits_naming_missing);
    tcase_add_test(tc, fixed_size_always_waits_for_a_replacement);
    tcase_add_test(tc, graceful_leave_vs_lost);
    tcase_add_test(tc, all_members_done_is_complete);
    tcase_add_test(tc, incarnation_change_restarts_same_members);
    tcase_add_test(tc, restart_beats_join_and_takes_joiners);
    tcase_add_test(tc, joiners_below_max_wait_elastic_timeout);
    tcase_add_test(tc, joiners_reaching_max_publish_at_once);
    tcase_add_test(tc, join_and_loss_together_joiners_replace);
    tcase_add_test(tc, loss_promotion_and_restart_in_one_epoch);
    tcase_add_test(tc, loss_window_holds_restart_and_join);
    tcase_add_test(tc, epoch_below_raised_min_is_never_republished_below_min);
    tcase_add_test(tc, fingerprint_tracks_the_eligible_set_only);
    tcase_add_test(tc, node_equiv_tells_apart_what_the_planner_reads);
    tcase_add_test(tc, long_name_lists_are_cut);
    tcase_add_test(tc, large_cluster_promotes_in_place);
    tcase_add_test(tc, start_waits_for_booting_nodes_to_be_ready);
    tcase_add_test(tc, start_counts_booting_nodes_toward_the_window_but_not_the_epoch);
    tcase_add_test(tc, joiner_is_admitted_only_once_ready);
    tcase_add_test(tc, booting_member_steps_out_and_returns_when_ready);
    tcase_add_test(tc, booting_standby_does_not_replace_a_lost_member);
    tcase_add_test(tc, readiness_is_no_change_of_the_window_but_is_one_of_the_plan);
    tcase_add_test(tc, random_cases_keep_invariants);
    tcase_add_test(tc, simulated_caller_converges);
    suite_add_tcase(s, tc);
    return s;
}

EC_CHECK_MAIN(suite)
