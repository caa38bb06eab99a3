/* Rank tracker: which epoch each training process was in, and when.
 *
 * The epoch-history checker (harness.h, ec_test_obs_*) sees etcd only: a
 * split brain in which a cut node keeps training under its old epoch while
 * the rest form a new one leaves a clean etcd history.  The tracker looks at
 * the processes instead.  A thread polls /proc every interval_ms for
 * processes whose environment has ECOORD_JOB_ID=<job>, RANK and
 * ECOORD_EPOCH (what `ecoord launch` gives its training processes), and
 * records for each (pid, start time from /proc/<pid>/stat) its rank, epoch,
 * node and the first and last poll that saw it alive (a zombie is not alive:
 * it no longer acts).  A descendant of a training process carrying the same
 * job, rank and epoch (a `sleep` it forked, say) is not a training process
 * of its own and is skipped.
 *
 * The rule checked (ec_rank_track_check): no two processes with the same
 * RANK and different ECOORD_EPOCH are alive at the same time for longer
 * than the tolerance.  "Alive" stands for "acting": it is conservative, and
 * holds because ecoord's agent stops its processes (SIGTERM, up to
 * --grace_period, then SIGKILL) before it starts those of the next epoch,
 * and a cut agent fences its processes before its lease can expire.  A
 * process that is still exiting after its stop therefore counts as acting;
 * a training program that takes long to exit on SIGTERM while its rank moved
 * to another node shows up as an overlap of up to the grace period (the
 * tests use ec-test-prog, which exits within a few ms).  The tolerance
 * (default: two poll intervals) absorbs the sampling: an overlap is seen
 * only as the span between polls that saw both processes alive.
 *
 * Not thread-safe beyond its own poller: one test thread drives it. */
#ifndef EC_TEST_RANK_TRACK_H
#define EC_TEST_RANK_TRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ec_rank_track ec_rank_track_t;

/* One training process as seen: times are ec_test_now_ms() values. */
typedef struct {
    pid_t pid;
    unsigned long long start; /* /proc/<pid>/stat field 22, clock ticks since boot */
    int rank;
    unsigned long long epoch;
    char node[64];             /* ECOORD_NODE_ID, or "" */
    int64_t first_ms, last_ms; /* first and last poll that saw it alive */
} ec_rank_rec_t;

/* Start polling /proc for job's training processes every interval_ms
 * (clamped to 5..200; 0: 25) in a thread of its own.  Returns NULL with
 * errno set if the thread cannot start. */
ec_rank_track_t *ec_rank_track_start(const char *job, long interval_ms);
/* A tracker with no poller, fed with ec_rank_track_add (synthetic records
 * for tests of the checker itself); tolerance_ms as for set_tolerance. */
ec_rank_track_t *ec_rank_track_create(long tolerance_ms);
/* Add a record (copied).  Returns 0, or -1 (ENOMEM). */
int ec_rank_track_add(ec_rank_track_t *t, const ec_rank_rec_t *r);
/* The largest overlap not counted as a violation, in ms. */
void ec_rank_track_set_tolerance(ec_rank_track_t *t, long tolerance_ms);
/* Stop the poller (one last poll first) and join it; records stay.  Safe
 * to call twice, and on a tracker with no poller. */
void ec_rank_track_stop(ec_rank_track_t *t);
/* How many processes were recorded so far (takes the poller's lock). */
int ec_rank_track_count(ec_rank_track_t *t);

/* Excuse overlaps that lie within [from_ms, to_ms] (ec_test_now_ms times)
 * and whose older-epoch process ran on node: a test that froze node's agent
 * (SIGSTOP) then knows that agent could not stop that process (the agent is
 * the fence), and that the overlap is a known limit, not the bug it looks
 * for.  ec_rank_track_check prints each excused pair.  Returns 0 or -1. */
int ec_rank_track_excuse(ec_rank_track_t *t, const char *node, int64_t from_ms, int64_t to_ms);

/* The rule, without failing the test: 0 if no rank was held twice, else
 * the number of violating pairs, with the worst one described in msg.
 * Excused pairs are not counted. */
int ec_rank_track_find(ec_rank_track_t *t, char *msg, size_t msglen);
/* Stop the poller, apply the rule, and fail the test (ck_abort_msg) naming
 * both processes, their epochs, the rank and the overlap; else print
 * "# ranks: N processes, M epochs, no rank held twice ...".  Returns N. */
int ec_rank_track_check(ec_rank_track_t *t);
/* Stop and free; NULL is fine. */
void ec_rank_track_destroy(ec_rank_track_t *t);

#endif
