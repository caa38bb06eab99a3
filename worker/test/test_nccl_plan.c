/* Rules checked (worker/nccl_plan.c, no GPU needed): an epoch that only
 * removes processes of the previous communicator, and keeps the survivors in
 * their old order, is a shrink excluding exactly the removed old ranks, in
 * ascending order; a join, a renumbering, the same membership, an aborted or
 * missing previous communicator, an NCCL without ncclCommShrink and the knob
 * at init are a full init, each saying why; a failed communicator is shrunk
 * with NCCL_SHRINK_ABORT only when the knob says shrink, never when it was
 * itself a shrink; a failed shrink falls back to an init; a large world
 * inits with several roots, each created by the first rank NCCL assigns to
 * it, on nodes of their own; every rank follows rank 0's published plan,
 * shrinking only the communicator of the epoch rank 0 shrinks. */
#include <stdio.h>
#include <string.h>

#include "ec_check.h"
#include "nccl_plan.h"

static const char *const n8[] = {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"};

static ecw__nccl_plan_in_t base(const ecw__nccl_epoch_t *prev, int prev_rank,
                                const ecw__nccl_epoch_t *next, int rank)
{
    ecw__nccl_plan_in_t in = {
        .mode = ECW__REBUILD_AUTO, .nccl_version = 22809, .have_shrink = true,
        .have_scalable = true, .prev = prev, .prev_rank = prev_rank, .prev_alive = true,
        .next = next, .rank = rank, .roots = 0, .scalable_min = 128,
    };
    return in;
}

#define PLAN(in, p)                                                                       \
    do {                                                                                  \
        ec_error_t e_ = {0};                                                              \
        ck_assert_msg(ecw__nccl_plan(&(in), &(p), &e_) == 0, "%s", e_.msg);                \
    } while (0)

START_TEST(a_node_removed_from_the_middle_is_a_shrink)
{
    /* 4 nodes x 2: n2 goes; n3's ranks 6,7 become 4,5, as a shrink numbers them */
    ecw__nccl_epoch_t prev = {7, 4, 2, n8};
    const char *const ids[] = {"n0", "n1", "n3"};
    ecw__nccl_epoch_t next = {8, 3, 2, ids};
    ecw__nccl_plan_in_t in = base(&prev, 7, &next, 5);
    ecw__nccl_plan_t p;
    PLAN(in, p);
    ck_assert_msg(p.kind == ECW__PLAN_SHRINK, "%s", p.why);
    ck_assert_int_eq(p.nexcluded, 2);
    ck_assert_int_eq(p.excluded[0], 4);
    ck_assert_int_eq(p.excluded[1], 5);
    ck_assert(!p.abort);
    ck_assert_msg(strstr(p.why, "removes 2 of epoch 7's 8 ranks"), "%s", p.why);
    ecw__nccl_plan_free(&p);
}
END_TEST

START_TEST(the_last_node_removed_is_a_shrink)
{
    ecw__nccl_epoch_t prev = {3, 4, 2, n8};
    ecw__nccl_epoch_t next = {4, 3, 2, n8};
    ecw__nccl_plan_in_t in = base(&prev, 0, &next, 0);
    ecw__nccl_plan_t p;
    PLAN(in, p);
    ck_assert_msg(p.kind == ECW__PLAN_SHRINK, "%s", p.why);
    ck_assert_int_eq(p.nexcluded, 2);
    ck_assert_int_eq(p.excluded[0], 6);
    ck_assert_int_eq(p.excluded[1], 7);
    ecw__nccl_plan_free(&p);
    /* several nodes at once, first and last */
    const char *const ids[] = {"n1", "n2"};
    ecw__nccl_epoch_t two = {5, 2, 2, ids};
    in = base(&prev, 2, &two, 0);
    PLAN(in, p);
    ck_assert_msg(p.kind == ECW__PLAN_SHRINK, "%s", p.why);
    int want[] = {0, 1, 6, 7};
    ck_assert_int_eq(p.nexcluded, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(p.excluded[i], want[i]);
    ecw__nccl_plan_free(&p);
}
END_TEST

START_TEST(fewer_processes_per_node_in_order_is_a_shrink)
{
    /* N 2 -> 1 on both nodes: old 0,2 survive as 0,1 */
    ecw__nccl_epoch_t prev = {3, 2, 2, n8};
    ecw__nccl_epoch_t next = {4, 2, 1, n8};
    ecw__nccl_plan_in_t in = base(&prev, 2, &next, 1);
    ecw__nccl_plan_t p;
    PLAN(in, p);
    ck_assert_msg(p.kind == ECW__PLAN_SHRINK, "%s", p.why);
    ck_assert_int_eq(p.nexcluded, 2);
    ck_assert_int_eq(p.excluded[0], 1);
    ck_assert_int_eq(p.excluded[1], 3);
    ecw__nccl_plan_free(&p);
    /* an old local rank 1 has no place at N=1: that process cannot shrink */
    in = base(&prev, 1, &next, 0);
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "no place"), "%s", p.why);
    ecw__nccl_plan_free(&p);
}
END_TEST

START_TEST(a_join_is_an_init)
{
    ecw__nccl_epoch_t prev = {3, 2, 2, n8};
    ecw__nccl_epoch_t next = {4, 3, 2, n8}; /* n2 joins */
    ecw__nccl_plan_in_t in = base(&prev, 0, &next, 0);
    ecw__nccl_plan_t p;
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_int_eq(p.nroots, 1);
    ck_assert_msg(strstr(p.why, "adds ranks (2 of its 6"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    /* one node leaves and another joins: same world, still a join */
    const char *const ids[] = {"n0", "n5"};
    ecw__nccl_epoch_t swap = {5, 2, 2, ids};
    in = base(&prev, 0, &swap, 0);
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "adds ranks"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    /* more processes per node: a join too */
    ecw__nccl_epoch_t wider = {6, 2, 4, n8};
    in = base(&prev, 0, &wider, 0);
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ecw__nccl_plan_free(&p);
}
END_TEST

START_TEST(a_renumbering_is_an_init)
{
    /* n1 goes and the coordinator puts n2 before n0: n0's old 0 would be
     * NCCL's 0 after a shrink, the epoch says 1 */
    ecw__nccl_epoch_t prev = {3, 3, 1, n8};
    const char *const ids[] = {"n2", "n0"};
    ecw__nccl_epoch_t next = {4, 2, 1, ids};
    ecw__nccl_plan_in_t in = base(&prev, 0, &next, 1);
    ecw__nccl_plan_t p;
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "renumbers: old rank 0 (node n0, local 0) becomes rank 1, a "
                             "shrink would make it 0"), "%s", p.why);
    ecw__nccl_plan_free(&p);
}
END_TEST

START_TEST(same_membership_or_no_live_communicator_is_an_init)
{
    ecw__nccl_epoch_t prev = {3, 2, 2, n8};
    ecw__nccl_epoch_t next = {4, 2, 2, n8};
    ecw__nccl_plan_in_t in = base(&prev, 1, &next, 1);
    ecw__nccl_plan_t p;
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "nothing to exclude"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    ecw__nccl_epoch_t less = {4, 1, 2, n8};
    in = base(&prev, 1, &less, 1);
    in.prev_alive = false;
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "aborted"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    in = base(NULL, -1, &less, 1);
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "no previous"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    /* this process's own old rank must map to its new one */
    in = base(&prev, 1, &less, 0);
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "maps to 1, but holds rank 0"), "%s", p.why);
    ecw__nccl_plan_free(&p);
}
END_TEST

START_TEST(nccl_without_shrink_or_the_knob_at_init_is_an_init)
{
    ecw__nccl_epoch_t prev = {3, 2, 2, n8};
    ecw__nccl_epoch_t next = {4, 1, 2, n8};
    ecw__nccl_plan_in_t in = base(&prev, 0, &next, 0);
    in.nccl_version = 22605;
    in.have_shrink = false;
    ecw__nccl_plan_t p;
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "NCCL 2.26.5 has no ncclCommShrink"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    /* the symbol alone is not enough below 2.27 (and the version alone not either) */
    in.have_shrink = true;
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ecw__nccl_plan_free(&p);
    in.nccl_version = 22809;
    in.mode = ECW__REBUILD_INIT;
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "ECOORD_WORKER_NCCL_REBUILD=init"), "%s", p.why);
    ecw__nccl_plan_free(&p);
}
END_TEST

START_TEST(a_failed_communicator_is_shrunk_with_abort_only_when_asked)
{
    ecw__nccl_epoch_t prev = {3, 4, 1, n8};
    ecw__nccl_epoch_t next = {4, 3, 1, n8};
    ecw__nccl_plan_in_t in = base(&prev, 0, &next, 0);
    in.prev_errored = true;
    ecw__nccl_plan_t p;
    PLAN(in, p); /* auto */
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "2397"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    in.mode = ECW__REBUILD_SHRINK;
    PLAN(in, p);
    ck_assert_msg(p.kind == ECW__PLAN_SHRINK, "%s", p.why);
    ck_assert(p.abort);
    ck_assert_int_eq(p.nexcluded, 1);
    ck_assert_int_eq(p.excluded[0], 3);
    ck_assert_msg(strstr(p.why, "NCCL_SHRINK_ABORT"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    /* a healthy one, in shrink mode: no abort */
    in.prev_errored = false;
    PLAN(in, p);
    ck_assert_msg(p.kind == ECW__PLAN_SHRINK && !p.abort, "%s", p.why);
    ecw__nccl_plan_free(&p);
    /* a shrunk communicator that failed: never shrunk again */
    in.prev_errored = true;
    in.prev_shrunk = true;
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "itself a shrink"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    /* one whose collective an epoch cut off (a silent peer): like a failed
     * one, with the abort, but a shrunk one too (nothing says it broke) */
    in.prev_errored = false;
    in.prev_interrupted = true;
    PLAN(in, p);
    ck_assert_msg(p.kind == ECW__PLAN_SHRINK && p.abort, "%s", p.why);
    ck_assert_msg(strstr(p.why, "cut off mid-collective (NCCL_SHRINK_ABORT)"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    in.mode = ECW__REBUILD_AUTO;
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_msg(strstr(p.why, "had a collective cut off, and auto shrinks only a healthy one"),
                  "%s", p.why);
    ecw__nccl_plan_free(&p);
}
END_TEST

START_TEST(a_failed_shrink_falls_back_to_an_init)
{
    const char *ids[200];
    char names[200][8];
    for (int i = 0; i < 200; i++) {
        snprintf(names[i], sizeof(names[i]), "n%d", i);
        ids[i] = names[i];
    }
    ecw__nccl_epoch_t prev = {3, 40, 8, ids};
    ecw__nccl_epoch_t next = {4, 39, 8, ids}; /* 312 ranks */
    ecw__nccl_plan_in_t in = base(&prev, 0, &next, 0);
    ecw__nccl_plan_t p;
    PLAN(in, p);
    ck_assert_msg(p.kind == ECW__PLAN_SHRINK, "%s", p.why);
    ecw__nccl_plan_fallback(&in, &p, "ncclCommShrink did not finish within 30000 ms");
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_ptr_null(p.excluded);
    ck_assert_int_eq(p.nexcluded, 0);
    ck_assert_int_eq(p.nroots, 3); /* 312 ranks, one root per 128 */
    ck_assert_msg(strstr(p.why, "shrink failed (ncclCommShrink did not finish"), "%s", p.why);
    ecw__nccl_plan_free(&p);
}
END_TEST

START_TEST(large_worlds_init_with_several_roots_on_nodes_of_their_own)
{
    /* below the threshold, or without the symbol: one root */
    ck_assert_int_eq(ecw__nccl_nroots(64, 8, 0, 128, true), 1);
    ck_assert_int_eq(ecw__nccl_nroots(1024, 128, 0, 128, false), 1);
    ck_assert_int_eq(ecw__nccl_nroots(1024, 128, 0, 128, true), 8);
    ck_assert_int_eq(ecw__nccl_nroots(1024, 128, 16, 128, true), 16);
    /* never more roots than nodes */
    ck_assert_int_eq(ecw__nccl_nroots(256, 2, 0, 128, true), 2);
    ck_assert_int_eq(ecw__nccl_nroots(256, 32, 64, 128, true), 32);
    ck_assert_int_eq(ecw__nccl_nroots(4, 4, 8, 2, true), 4);
    /* NCCL's split: 10 ranks over 3 roots = 4,3,3 */
    ck_assert_int_eq(ecw__nccl_root_rank(0, 10, 3), 0);
    ck_assert_int_eq(ecw__nccl_root_rank(1, 10, 3), 4);
    ck_assert_int_eq(ecw__nccl_root_rank(2, 10, 3), 7);
    ck_assert_int_eq(ecw__nccl_root_rank(3, 10, 3), -1);
    for (int r = 0; r < 10; r++)
        ck_assert_int_eq(ecw__nccl_root_of(r, 10, 3), r < 4 ? 0 : r < 7 ? 1 : 2);
    /* each root's creator is the first rank of its group, and with at most
     * one root per node, they are on distinct nodes */
    for (int nodes = 1; nodes <= 40; nodes++)
        for (int nproc = 1; nproc <= 8; nproc++) {
            int world = nodes * nproc;
            for (int k = 1; k <= nodes; k++) {
                int last_node = -1;
                for (int root = 0; root < k; root++) {
                    int r = ecw__nccl_root_rank(root, world, k);
                    ck_assert_int_eq(ecw__nccl_root_of(r, world, k), root);
                    ck_assert(r == 0 || ecw__nccl_root_of(r - 1, world, k) == root - 1);
                    ck_assert_int_gt(r / nproc, last_node);
                    last_node = r / nproc;
                }
            }
        }
    /* the plan of a large world without a previous communicator */
    const char *ids[160];
    char names[160][8];
    for (int i = 0; i < 160; i++) {
        snprintf(names[i], sizeof(names[i]), "n%d", i);
        ids[i] = names[i];
    }
    ecw__nccl_epoch_t next = {9, 160, 8, ids};
    ecw__nccl_plan_in_t in = base(NULL, -1, &next, 17);
    ecw__nccl_plan_t p;
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_int_eq(p.nroots, 10);
    ecw__nccl_plan_free(&p);
    in.nccl_version = 22204; /* before ncclCommInitRankScalable */
    PLAN(in, p);
    ck_assert_int_eq(p.nroots, 1);
    ecw__nccl_plan_free(&p);
}
END_TEST

START_TEST(bad_inputs_and_the_knob_spellings)
{
    ecw__nccl_epoch_t next = {4, 2, 2, n8};
    ecw__nccl_plan_in_t in = base(NULL, -1, &next, 4);
    ecw__nccl_plan_t p;
    ec_error_t e = {0};
    ck_assert_int_eq(ecw__nccl_plan(&in, &p, &e), EC_EINVAL);
    ck_assert_msg(strstr(e.msg, "rank 4 is outside epoch 4's 4 ranks"), "%s", e.msg);
    ecw__nccl_epoch_t empty = {4, 0, 2, n8};
    in = base(NULL, -1, &empty, 0);
    ck_assert_int_eq(ecw__nccl_plan(&in, &p, &e), EC_EINVAL);
    ck_assert_int_eq(ecw__rebuild_mode_parse("auto"), ECW__REBUILD_AUTO);
    ck_assert_int_eq(ecw__rebuild_mode_parse("shrink"), ECW__REBUILD_SHRINK);
    ck_assert_int_eq(ecw__rebuild_mode_parse("init"), ECW__REBUILD_INIT);
    ck_assert_int_eq(ecw__rebuild_mode_parse("Shrink"), -1);
    ck_assert_int_eq(ecw__rebuild_mode_parse(NULL), -1);
    ck_assert_str_eq(ecw__rebuild_mode_name(ECW__REBUILD_SHRINK), "shrink");
}
END_TEST

START_TEST(every_rank_follows_rank_0s_plan)
{
    ecw__nccl_epoch_t prev = {7, 4, 1, n8};
    ecw__nccl_epoch_t next = {8, 3, 1, n8};
    ecw__nccl_plan_in_t in0 = base(&prev, 0, &next, 0);
    ecw__nccl_plan_t p0, p;
    PLAN(in0, p0);
    char line[400];
    ecw__nccl_plan_format(&in0, &p0, line, sizeof(line));
    ck_assert_msg(!strncmp(line, "shrink 1 7 epoch 8 only removes", 31), "%s", line);
    ec_error_t e = {0};
    bool holds = true;
    /* a rank that would shrink the same communicator shrinks */
    ecw__nccl_plan_in_t in = base(&prev, 2, &next, 2);
    PLAN(in, p);
    ck_assert_int_eq(ecw__nccl_plan_follow(&in, &p, line, &holds, &e), 0);
    ck_assert_msg(p.kind == ECW__PLAN_SHRINK && !holds, "%s", p.why);
    ck_assert_int_eq(p.excluded[0], 3);
    ecw__nccl_plan_free(&p);
    /* one whose communicator is of another epoch inits, and holds rank 0 up */
    ecw__nccl_epoch_t older = {6, 4, 1, n8};
    in = base(&older, 2, &next, 2);
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_SHRINK);
    ck_assert_int_eq(ecw__nccl_plan_follow(&in, &p, line, &holds, &e), 0);
    ck_assert_int_eq(p.kind, ECW__PLAN_INIT);
    ck_assert_ptr_null(p.excluded);
    ck_assert(holds);
    ck_assert_msg(strstr(p.why, "rank 0 shrinks epoch 7's communicator, this process holds "
                             "epoch 6's"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    /* one without a communicator: init, holding rank 0 up */
    in = base(NULL, -1, &next, 1);
    PLAN(in, p);
    ck_assert_int_eq(ecw__nccl_plan_follow(&in, &p, line, &holds, &e), 0);
    ck_assert(p.kind == ECW__PLAN_INIT && holds);
    ecw__nccl_plan_free(&p);
    ecw__nccl_plan_free(&p0);
    /* rank 0 inits (its communicator failed, auto): everyone inits, with its roots */
    in = base(&prev, 1, &next, 1);
    PLAN(in, p);
    ck_assert_int_eq(p.kind, ECW__PLAN_SHRINK);
    ck_assert_int_eq(ecw__nccl_plan_follow(&in, &p, "init 3 7 the communicator of epoch 7 "
                                           "failed", &holds, &e), 0);
    ck_assert(p.kind == ECW__PLAN_INIT && !holds);
    ck_assert_int_eq(p.nroots, 3);
    ck_assert_msg(strstr(p.why, "rank 0 inits: the communicator of epoch 7 failed"), "%s", p.why);
    ecw__nccl_plan_free(&p);
    /* rank 0's roots need ncclCommInitRankScalable */
    in.have_scalable = false;
    PLAN(in, p);
    ck_assert_int_eq(ecw__nccl_plan_follow(&in, &p, "init 3 0 big", &holds, &e), EC_EINVAL);
    ck_assert_msg(strstr(e.msg, "run one NCCL version on every node"), "%s", e.msg);
    ck_assert_int_eq(ecw__nccl_plan_follow(&in, &p, "init 1 0 small", &holds, &e), 0);
    ck_assert_int_eq(p.nroots, 1);
    /* not a plan */
    ck_assert_int_eq(ecw__nccl_plan_follow(&in, &p, "grow 1 0 x", &holds, &e), EC_EPROTO);
    ck_assert_int_eq(ecw__nccl_plan_follow(&in, &p, "init", &holds, &e), EC_EPROTO);
    ck_assert_int_eq(ecw__nccl_plan_follow(&in, &p, "init 0 0 x", &holds, &e), EC_EPROTO);
    in.have_scalable = true;
    ck_assert_int_eq(ecw__nccl_plan_follow(&in, &p, "init 4 0 x", &holds, &e), EC_EPROTO);
    ck_assert_msg(strstr(e.msg, "4 roots, more than the 3 ranks of epoch 8"), "%s", e.msg);
    ecw__nccl_plan_free(&p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("test_nccl_plan");
    TCase *t = tcase_create("plan");
    tcase_add_test(t, a_node_removed_from_the_middle_is_a_shrink);
    tcase_add_test(t, the_last_node_removed_is_a_shrink);
    tcase_add_test(t, fewer_processes_per_node_in_order_is_a_shrink);
    tcase_add_test(t, a_join_is_an_init);
    tcase_add_test(t, a_renumbering_is_an_init);
    tcase_add_test(t, same_membership_or_no_live_communicator_is_an_init);
    tcase_add_test(t, nccl_without_shrink_or_the_knob_at_init_is_an_init);
    tcase_add_test(t, a_failed_communicator_is_shrunk_with_abort_only_when_asked);
    tcase_add_test(t, a_failed_shrink_falls_back_to_an_init);
    tcase_add_test(t, large_worlds_init_with_several_roots_on_nodes_of_their_own);
    tcase_add_test(t, bad_inputs_and_the_knob_spellings);
    tcase_add_test(t, every_rank_follows_rank_0s_plan);
    suite_add_tcase(s, t);
    return s;
}

EC_CHECK_MAIN(suite)
