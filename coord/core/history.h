/* The epoch-history checker: the invariants every run of a job must keep,
 * checked over the epochs it published.  Integration and fault tests read
 * epochs/<n> (in key order), decode them and call ec_history_check() with the
 * leaderships they saw on the leader key.
 *
 * Checked, in order, for each epoch; the first violation is reported:
 *   1. epoch numbers strictly increase (and, with opts.consecutive, by 1);
 *   2. the epoch is well formed: members in M_id order 0..M-1, each with N
 *      endpoints, so its ranks are exactly 0..W-1 with W = M*N, and no node
 *      holds two ranks blocks (appears twice);
 *   3. N is the same in every epoch (and equals opts.nproc when set);
 *   4. opts.min_nodes <= M <= opts.max_nodes;
 *   5. (leader_id, leader_rev) matches one observed leadership: the epoch
 *      was written by the node that held the leader key with that create
 *      revision; and, when the epochs' mod revisions are given
 *      (opts.mod_revs), it was written while that leadership lasted:
 *      create_rev <= mod revision < end_rev, the revision at which the
 *      leader key was deleted (lease expired or revoked, key deleted) or
 *      created again by someone else.  A deposed leader whose fenced write
 *      was wrongly let through fails here even before its successor
 *      publishes anything;
 *   6. leader revisions never go down: a later epoch cannot have been
 *      written under an older leadership (etcd create revisions only grow,
 *      so a lower one means a deposed leader wrote after its successor).
 */
#ifndef EC_HISTORY_H
#define EC_HISTORY_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "records.h"

/* One observed leadership: node_id held the leader key from create_rev
 * (the key's create revision: the fencing token) until end_rev, the revision
 * of the event that ended it (the key's DELETE: lease expiry, revoke or
 * delete; or the next leadership's create if no delete was seen); 0 while it
 * was still held when the observation ended.  Strings are borrowed.  An
 * initializer {id, rev} leaves end_rev 0 (open), as before it existed. */
typedef struct ec_leader_obs {
    const char *node_id;
    int64_t create_rev;
    int64_t end_rev;
} ec_leader_obs_t;

typedef struct ec_history_opts {
    size_t size;       /* sizeof(ec_history_opts_t): lets the struct grow */
    int min_nodes;     /* MIN of --nnodes=MIN:MAX */
    int max_nodes;     /* MAX */
    int nproc;         /* expected N; 0 = whatever the first epoch says */
    int consecutive;   /* nonzero: numbers must go up by exactly 1 (an
                          unpruned history); zero: gaps allowed */
    const int64_t *mod_revs; /* mod_revs[i]: etcd mod revision at which epochs[i]
                                was written (of epochs/<n>); NULL, or an entry
                                <= 0: not known, rule 5's time window unchecked.
                                Borrowed; n entries. */
} ec_history_opts_t;

#define EC_HISTORY_OPTS_INIT {sizeof(ec_history_opts_t), 1, INT_MAX, 0, 0, NULL}

/* Which rule a history broke (the numbers are the rules above); each code's
 * name ends the message, "(rule not-increasing)", and is in stats. */
#define EC_HISTORY_RULE_MAP(X)                                                           \
    X(OK, "ok")                                 /* every rule holds */                   \
    X(NUMBER_ZERO, "number-zero")               /* 1 */                                  \
    X(NOT_INCREASING, "not-increasing")         /* 1 */                                  \
    X(MISSING, "missing")                       /* 1, opts.consecutive */                \
    X(EMPTY, "empty")                           /* 2: no members or N < 1 */             \
    X(WORLD_SIZE, "world-size")                 /* 2: W != M * N */                      \
    X(M_ID, "m-id")                             /* 2: M_id out of range or taken */      \
    X(NO_ENDPOINTS, "no-endpoints")             /* 2 */                                  \
    X(TWO_BLOCKS, "two-blocks")                 /* 2: a node id twice */                 \
    X(NPROC, "nproc")                           /* 3 */                                  \
    X(NODES_RANGE, "nodes-range")               /* 4 */                                  \
    X(OTHER_HOLDER, "other-holder")             /* 5: someone else held that revision */ \
    X(UNKNOWN_LEADERSHIP, "unknown-leadership") /* 5: nobody was seen holding it */      \
    X(BEFORE_LEADERSHIP, "before-leadership")   /* 5: written before it began */         \
    X(AFTER_LEADERSHIP, "after-leadership")     /* 5: written after it ended */          \
    X(LEADER_REV_DOWN, "leader-rev-down")       /* 6 */

typedef enum {
#define EC_HISTORY_RULE_ENUM(code, name) EC_HISTORY_##code,
    EC_HISTORY_RULE_MAP(EC_HISTORY_RULE_ENUM)
#undef EC_HISTORY_RULE_ENUM
} ec_history_rule_t;

/* "not-increasing"; "unknown" for a value outside the map. */
const char *ec_history_rule_name(ec_history_rule_t rule);

/* What was checked, for the test to print and assert on. */
typedef struct ec_history_stats {
    int epochs;        /* epochs checked */
    long ranks;        /* sum of world sizes */
    int leaderships;   /* distinct leader revisions seen in the epochs */
    ec_history_rule_t broken; /* EC_HISTORY_OK, or the rule the first violation broke */
    size_t broken_at;  /* and the index of its epoch (0 when OK) */
} ec_history_stats_t;

/* Check epochs[0..n) (key order) against obs[0..nobs).  opts may be NULL
 * (defaults), stats may be NULL.  Returns 0 when every rule holds, EC_ECORRUPT
 * with a message naming the first violating epoch and rule (and the rule's
 * code in stats->broken), or EC_EINVAL for
 * bad arguments (NULL epoch pointer, min > max).  stats counts the epochs
 * checked before a violation. */
int ec_history_check(const ec_epoch_t *const *epochs, size_t n, const ec_leader_obs_t *obs,
                     size_t nobs, const ec_history_opts_t *opts, ec_history_stats_t *stats,
                     ec_error_t *err);

#endif
