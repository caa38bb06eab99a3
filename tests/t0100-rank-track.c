/* The rank tracker (tests/lib/rank_track.h) fails a run in which two live
 * training processes held the same rank in different epochs at the same
 * time for longer than the tolerance, and passes one in which each rank's
 * processes follow one another.  Synthetic records for the rule, then live
 * processes (no etcd: `env ... sleep`) for the /proc poller. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ec_select.h"
#include "harness.h"
#include "rank_track.h"

static ec_rank_rec_t rec(pid_t pid, int rank, unsigned long long epoch, const char *node,
                         int64_t first, int64_t last)
{
    ec_rank_rec_t r = {.pid = pid, .start = 1000 + (unsigned long long)pid, .rank = rank,
                       .epoch = epoch, .first_ms = first, .last_ms = last};
    snprintf(r.node, sizeof(r.node), "%s", node);
    return r;
}

START_TEST(overlapping_processes_of_one_rank_in_two_epochs_fail)
{
    ec_rank_track_t *t = ec_rank_track_create(25);
    ec_rank_rec_t a = rec(101, 0, 1, "n1", 0, 2300), b = rec(202, 0, 2, "n3", 2100, 5000);
    ec_rank_rec_t c = rec(303, 1, 1, "n2", 0, 1000);
    ck_assert_int_eq(ec_rank_track_add(t, &a), 0);
    ck_assert_int_eq(ec_rank_track_add(t, &b), 0);
    ck_assert_int_eq(ec_rank_track_add(t, &c), 0);
    char msg[1024];
    ck_assert_int_eq(ec_rank_track_find(t, msg, sizeof(msg)), 1);
    printf("# %s\n", msg);
    /* n3 (the newer process's node) frozen: no excuse; n1 frozen: excused */
    ck_assert_int_eq(ec_rank_track_excuse(t, "n3", 0, 6000), 0);
    ck_assert_int_eq(ec_rank_track_find(t, NULL, 0), 1);
    ck_assert_int_eq(ec_rank_track_excuse(t, "n1", 2000, 2400), 0);
    ck_assert_int_eq(ec_rank_track_find(t, NULL, 0), 0);
    ck_assert_msg(strstr(msg, "rank 0 held twice") && strstr(msg, "pid 101 (node n1, epoch 1") &&
                  strstr(msg, "pid 202 (node n3, epoch 2") && strstr(msg, "for 200 ms"),
                  "message should name both processes, epochs, rank and overlap: %s", msg);
    ec_rank_track_destroy(t);
}
END_TEST

START_TEST(sequential_processes_pass)
{
    ec_rank_track_t *t = ec_rank_track_create(25);
    /* rank 0 moves n1 -> n3, a handover within the tolerance; rank 1 stays
     * on n2 across epochs; two processes of one epoch (a restart within
     * it) may overlap: the rule is about epochs. */
    ec_rank_rec_t r[] = {
        rec(101, 0, 1, "n1", 0, 2100), rec(202, 0, 2, "n3", 2080, 5000),
        rec(303, 1, 1, "n2", 0, 2000), rec(404, 1, 2, "n2", 2050, 5000),
        rec(505, 1, 2, "n2", 4000, 6000),
    };
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
        ck_assert_int_eq(ec_rank_track_add(t, &r[i]), 0);
    char msg[1024];
    ck_assert_int_eq(ec_rank_track_find(t, msg, sizeof(msg)), 0);
    ck_assert_int_eq(ec_rank_track_check(t), 5);
    /* the same records with no tolerance: the 20 ms handover counts */
    ec_rank_track_set_tolerance(t, 0);
    ck_assert_int_eq(ec_rank_track_find(t, msg, sizeof(msg)), 1);
    ck_assert_ptr_nonnull(strstr(msg, "for 20 ms"));
    ec_rank_track_destroy(t);
}
END_TEST

static pid_t spawn_env(const char *job, const char *rank, const char *epoch, const char *node,
                       const char *script)
{
    char j[128], r[32], e[32], n[64];
    snprintf(j, sizeof(j), "ECOORD_JOB_ID=%s", job);
    snprintf(r, sizeof(r), "RANK=%s", rank);
    snprintf(e, sizeof(e), "ECOORD_EPOCH=%s", epoch);
    snprintf(n, sizeof(n), "ECOORD_NODE_ID=%s", node);
    char *argv[] = {"/usr/bin/env", j, r, e, n, "/bin/sh", "-c", (char *)script, NULL};
    pid_t p = ec_test_spawn(argv, "/dev/null");
    ck_assert_int_gt(p, 0);
    return p;
}

static bool found_twice(void *arg)
{
    return ec_rank_track_find(arg, NULL, 0) > 0;
}

START_TEST(live_processes_tracked_from_proc)
{
    char job[64];
    snprintf(job, sizeof(job), "rt%d", (int)getpid());
    ec_rank_track_t *t = ec_rank_track_start(job, 20);
    ck_assert_ptr_nonnull(t);
    /* a training process that forks a child of its own (same job, rank and
     * epoch: not a second process of the rank) */
    pid_t a = spawn_env(job, "0", "1", "n1", "sleep 30 & exec sleep 30");
    pid_t b = spawn_env(job, "0", "2", "n3", "exec sleep 30");
    ck_assert_msg(ec_test_wait(found_twice, t, 10000), "rank 0 held by two epochs not found");
    /* 2, not 3: the child of a is not a process of the rank */
    ck_assert_int_eq(ec_rank_track_count(t), 2);
    kill(a, SIGKILL);
    kill(b, SIGKILL);
    ec_test_reap(a, 5000);
    ec_test_reap(b, 5000);
    ec_rank_track_stop(t);
    char msg[1024];
    ck_assert_int_eq(ec_rank_track_find(t, msg, sizeof(msg)), 1);
    printf("# live: %s\n", msg);
    char pa[32], pb[32];
    snprintf(pa, sizeof(pa), "pid %d (node n1", (int)a);
    snprintf(pb, sizeof(pb), "pid %d (node n3", (int)b);
    ck_assert_msg(strstr(msg, pa) && strstr(msg, pb), "%s", msg);
    ec_rank_track_destroy(t);
}
END_TEST

static bool gone(void *arg)
{
    return kill(*(pid_t *)arg, 0) != 0;
}

START_TEST(live_processes_in_turn_pass)
{
    char job[64];
    snprintf(job, sizeof(job), "rs%d", (int)getpid());
    ec_rank_track_t *t = ec_rank_track_start(job, 20);
    ck_assert_ptr_nonnull(t);
    pid_t a = spawn_env(job, "0", "1", "n1", "exec sleep 0.3");
    ck_assert_int_ge(ec_test_reap(a, 10000), 0);
    ck_assert(ec_test_wait(gone, &a, 1000));
    pid_t b = spawn_env(job, "0", "2", "n3", "exec sleep 0.3");
    ck_assert_int_ge(ec_test_reap(b, 10000), 0);
    ck_assert_int_eq(ec_rank_track_check(t), 2);
    ec_rank_track_destroy(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t0100-rank-track");
    TCase *tc = tcase_create("rule");
    ec_tcase_add(tc, overlapping_processes_of_one_rank_in_two_epochs_fail);
    ec_tcase_add(tc, sequential_processes_pass);
    suite_add_tcase(s, tc);
    tc = tcase_create("proc");
    tcase_set_timeout(tc, 30);
    ec_tcase_add(tc, live_processes_tracked_from_proc);
    ec_tcase_add(tc, live_processes_in_turn_pass);
    suite_add_tcase(s, tc);
    return s;
}

EC_CHECK_MAIN(suite)
