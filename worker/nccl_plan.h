/* How the NCCL backend builds an epoch's communicator (nccl_plan.c): a pure
 * function of the previous and the new epoch's membership, the NCCL found at
 * run time, the previous communicator's state and the knobs.  No CUDA, no
 * NCCL, no I/O: it builds and is tested without either (worker/test/
 * test_nccl_plan.c).
 *
 * Two ways:
 *   SHRINK  ncclCommShrink (NCCL 2.27+) of the previous communicator, when
 *           the new epoch only removes ranks from it and the ranks NCCL gives
 *           the survivors are the ranks the epoch gives them;
 *   INIT    a new communicator: ncclCommInitRankConfig (one root), or
 *           ncclCommInitRankScalable (NCCL 2.23+) with several roots for
 *           a world of at least the threshold.
 * A shrink that fails, or does not end by its deadline, is followed by an
 * INIT of the same epoch (ecw__nccl_plan_fallback). */
#ifndef ECW_NCCL_PLAN_H
#define ECW_NCCL_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* ECOORD_WORKER_NCCL_REBUILD */
typedef enum {
    ECW__REBUILD_AUTO = 0, /* shrink a healthy communicator, else init */
    ECW__REBUILD_SHRINK,   /* also shrink one that failed (NCCL_SHRINK_ABORT) */
    ECW__REBUILD_INIT,     /* always a full init (the behaviour before shrink) */
} ecw__rebuild_mode_t;

/* "auto", "shrink", "init"; -1 for anything else. */
int ecw__rebuild_mode_parse(const char *s);
const char *ecw__rebuild_mode_name(ecw__rebuild_mode_t m);

#define ECW__NCCL_SHRINK_MIN 22700   /* ncclCommShrink: NCCL 2.27.0 */
#define ECW__NCCL_SCALABLE_MIN 22300 /* ncclCommInitRankScalable: NCCL 2.23.0 */

/* One epoch as the plan sees it: members in M_id order, rank = M_id * nproc
 * + local rank (coord/core/rank.h, ec_rank). */
typedef struct ecw__nccl_epoch {
    uint64_t number;
    int nmembers, nproc;
    const char *const *node_ids; /* nmembers node ids */
} ecw__nccl_epoch_t;

typedef struct ecw__nccl_plan_in {
    ecw__rebuild_mode_t mode;
    int nccl_version;        /* ncclGetVersion: 22809 for 2.28.9 */
    bool have_shrink;        /* ncclCommShrink resolved */
    bool have_scalable;      /* ncclCommInitRankScalable resolved */
    /* The previous communicator of this process; prev NULL: none. */
    const ecw__nccl_epoch_t *prev;
    int prev_rank;           /* this process's rank in it */
    bool prev_alive;         /* not aborted or freed */
    bool prev_errored;       /* NCCL reported an error on it and kept it */
    bool prev_interrupted;   /* an epoch cut one of its collectives off */
    bool prev_shrunk;        /* it was itself made by a shrink */
    /* The epoch being built, and this process's rank in it. */
    const ecw__nccl_epoch_t *next;
    int rank;
    int roots;               /* ECOORD_WORKER_NCCL_ROOTS: 0 = auto */
    int scalable_min;        /* ECOORD_WORKER_NCCL_SCALABLE_MIN: world from which to use roots */
} ecw__nccl_plan_in_t;

typedef enum { ECW__PLAN_INIT = 0, ECW__PLAN_SHRINK } ecw__plan_kind_t;

#define ECW__PLAN_WHY_MAX 256

typedef struct ecw__nccl_plan {
    ecw__plan_kind_t kind;
    /* SHRINK: old ranks to exclude, ascending (what ncclCommShrink takes);
     * abort: NCCL_SHRINK_ABORT (the previous communicator failed or was
     * cut off mid-collective). */
    int *excluded;
    int nexcluded;
    bool abort;
    /* Number of unique ids of the init (for SHRINK: of the init that
     * follows a failed shrink), 1 = ncclCommInitRankConfig. */
    int nroots;
    char why[ECW__PLAN_WHY_MAX]; /* one line: why this way (for the log) */
} ecw__nccl_plan_t;

/* Decide.  0 and *out (free with ecw__nccl_plan_free); EC_ENOMEM; EC_EINVAL
 * on inputs that cannot describe an epoch (a count below 1, this process's
 * rank outside the world).  Never fails because a shrink is impossible:
 * that is an INIT with the reason in out->why. */
int ecw__nccl_plan(const ecw__nccl_plan_in_t *in, ecw__nccl_plan_t *out, ec_error_t *err);

/* After a SHRINK failed (why: what happened): the INIT to do instead, the
 * roots as for an epoch without a previous communicator. */
void ecw__nccl_plan_fallback(const ecw__nccl_plan_in_t *in, ecw__nccl_plan_t *plan,
                             const char *why);

void ecw__nccl_plan_free(ecw__nccl_plan_t *p);

/* Every member builds rank 0's way.  Rank 0 publishes its plan as one line,
 * "<shrink|init> <roots> <previous epoch> <why>" (previous epoch: the one
 * whose communicator it shrinks, 0 for none); the others follow it.
 * format: the line for rank 0's plan (in: rank 0's input).  follow: this
 * rank's plan made to agree with rank 0's line: rank 0 inits, so does this
 * rank, with rank 0's roots; rank 0 shrinks the communicator of the same
 * previous epoch and so would this rank: a shrink; otherwise this rank
 * inits and *holds_up is set (rank 0's shrink waits for it until its
 * deadline, then every rank inits).  EC_EPROTO for a line that is not a
 * plan, EC_EINVAL when rank 0's roots need ncclCommInitRankScalable and
 * this process's NCCL has none. */
void ecw__nccl_plan_format(const ecw__nccl_plan_in_t *in, const ecw__nccl_plan_t *plan,
                           char *buf, size_t len);
int ecw__nccl_plan_follow(const ecw__nccl_plan_in_t *in, ecw__nccl_plan_t *plan,
                          const char *line, bool *holds_up, ec_error_t *err);

/* Number of roots for an INIT of world ranks on nmembers nodes: 1 below
 * scalable_min or without ncclCommInitRankScalable; else roots (0: one per
 * ECW__NCCL_RANKS_PER_ROOT ranks), never more than the nodes (each root on
 * a node of its own) nor the ranks. */
#define ECW__NCCL_RANKS_PER_ROOT 128
int ecw__nccl_nroots(int world, int nmembers, int roots, int scalable_min, bool have_scalable);

/* The rank that creates and publishes unique id `root` of nroots: the first
 * rank NCCL's bootstrap assigns to that root (ranks are split into nroots
 * contiguous groups, the first world % nroots one larger), so the id's
 * listener runs on a process of its own group. */
int ecw__nccl_root_rank(int root, int world, int nroots);

/* Which root's id rank (in world, nroots) belongs to: -1 if none. */
int ecw__nccl_root_of(int rank, int world, int nroots);

#endif
