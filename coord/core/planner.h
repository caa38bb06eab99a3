/* The planner: the one place where membership is decided.
 *
 * A pure function from (configuration, registered nodes, current epoch,
 * elapsed times) to a decision: publish a member list, wait a given time,
 * wait until the inputs change, or fail the job.  No I/O, no clock reads, no
 * globals: the caller measures time and passes it in, so every rule can be
 * tested without sleeping.
 *
 * Vocabulary (Paddle's): N = nproc = processes per node; M_id = a member's
 * index in the epoch; N_id = local rank; rank = M_id * N + N_id (ec_rank()).
 *
 * The rules, in the order they are applied (ec_plan() below has the details):
 *   1. invalid configuration                       -> FAIL
 *   2. every member of the current epoch failed     -> FAIL
 *   2b. fault tolerance off (config.fail_fast) and a member failed -> FAIL
 *   3. the current epoch has more than np_max members -> FAIL (agents disagree
 *      on --np)
 *   4. no epoch yet: start with the first np_max eligible nodes in
 *      registration order (placed nodes first, by place) at once; with np_min <= n < np_max once the
 *      eligible set has been stable for elastic_timeout_ms; below np_min wait
 *   5. every member's record says done                -> COMPLETE; a
 *      member that is done while others still run stays a member
 *   6. members departed (lost, left, failed, done): eligible non-members
 *      (standbys, or joiners below np_max) take the departed members' M_ids at
 *      once, in M_id order, in registration order; no other M_id moves.  If
 *      every departed slot is filled: publish now (spare-promoted).  Else
 *      shrink, unless that would go below np_min or the job is fixed-size
 *      (then WAIT for replacements), after replace_wait_ms (0: at once).
 *   7. a member's incarnation changed                 -> publish the same
 *      members at once (restart)
 *   8. eligible non-members while below np_max       -> publish at once if
 *      np_max is reached, else once the eligible set has been stable for
 *      elastic_timeout_ms (join)
 *   9. otherwise                                      -> WAIT ("steady")
 * Booting nodes (their processes start before they count: in place, the
 * agent starts them at once and the node is admitted when every one is
 * ready) are never published.  A member that is booting departs as in rule 6
 * (a "leave": its agent replaces a process; it comes back once ready).  A
 * booting non-member counts toward the elastic window (its fingerprint) and,
 * for up to join_ready_timeout_ms, holds up the first epoch (rule 4) and
 * the admission of ready joiners (rule 8), so that nodes that registered
 * together are admitted in one epoch; it never holds up a departure, a
 * restart or a publish at np_max.
 * No publish ever has fewer than np_min or more than np_max members (an epoch
 * left below a since-raised np_min is republished only once enough nodes are
 * eligible; until then a restart or join WAITs).
 * Any publish takes every eligible node up to np_max: departed slots are
 * refilled first, then the remaining eligible non-members are appended in
 * registration order.  So one publish can carry a promotion, a restart and
 * joins together; its reason is the highest of lost/leave/spare-promoted >
 * restart > join that applies.  Survivors keep their relative order always.
 */
#ifndef EC_PLANNER_H
#define EC_PLANNER_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "rank.h"
#include "records.h"

/* A node's state is the record's (coord/core/records.h, = ecoord.proto NodeState). */

typedef enum {
    EC_PLAN_PUBLISH = 1,    /* write a new epoch with members[] */
    EC_PLAN_WAIT_UNTIL = 2, /* re-plan after wait_ms (or sooner, on any change) */
    EC_PLAN_WAIT = 3,       /* nothing to do until the inputs change */
    EC_PLAN_FAIL = 4,       /* the job cannot go on: mark it failed with why */
    EC_PLAN_COMPLETE = 5,   /* every member is done: mark the job completed */
} ec_plan_action_t;

/* Which branch of the rules above decided, by a stable name: the tests
 * assert on it, and a log line can carry it, so neither depends on why's
 * prose.  X(code, name, action it goes with) and the rule it belongs to.
 * The two waits for booting nodes are a WAIT_UNTIL when the wait has an
 * end (join_ready_timeout_ms > 0 and, for the first epoch, np_min reached),
 * else a WAIT. */
#define EC_PLAN_WHY_MAP(X)                                                                    \
    X(INVALID_CONFIG, "invalid-config", FAIL)           /* 1 */                               \
    X(ALL_FAILED, "all-failed", FAIL)                   /* 2 */                               \
    X(FAILED_NO_TOLERANCE, "failed-no-tolerance", FAIL) /* 2b */                              \
    X(OVER_NP_MAX, "over-np-max", FAIL)                 /* 3 */                               \
    X(NEED_NODES, "need-nodes", WAIT)                   /* 4: fewer than np_min */            \
    X(START_WAIT, "start-wait", WAIT_UNTIL)             /* 4: the elastic window */           \
    X(START_BOOTING, "start-booting", WAIT_UNTIL)       /* 4: for booting nodes */            \
    X(START, "start", PUBLISH)                          /* 4 */                               \
    X(ALL_DONE, "all-done", COMPLETE)                   /* 5 */                               \
    X(REPLACED, "replaced", PUBLISH)                    /* 6: every departed slot refilled */ \
    X(NEED_REPLACEMENTS, "need-replacements", WAIT)     /* 6: below np_min or fixed size */   \
    X(REPLACE_WAIT, "replace-wait", WAIT_UNTIL)         /* 6: replace_wait_ms */              \
    X(SHRINK, "shrink", PUBLISH)                        /* 6: go on with fewer */             \
    X(BELOW_MIN, "below-min", WAIT)                     /* 6-8: the epoch is below np_min */  \
    X(RESTART, "restart", PUBLISH)                      /* 7 */                               \
    X(JOIN, "join", PUBLISH)                            /* 8 */                               \
    X(JOIN_WAIT, "join-wait", WAIT_UNTIL)               /* 8: the elastic window */           \
    X(JOIN_BOOTING, "join-booting", WAIT_UNTIL)         /* 8: for booting joiners */          \
    X(STEADY, "steady", WAIT)                           /* 9 */

typedef enum {
#define EC_PLAN_WHY_ENUM(code, name, action) EC_PLAN_WHY_##code,
    EC_PLAN_WHY_MAP(EC_PLAN_WHY_ENUM)
#undef EC_PLAN_WHY_ENUM
} ec_plan_why_t;

/* Job configuration (--np=MIN:MAX, --nproc_per_node, --elastic_timeout,
 * replace wait).  No size/version field, unlike public option structs: the
 * planner is internal to coord/ and built with its only caller. */
typedef struct ec_plan_config {
    int np_min;                 /* >= 1 */
    int np_max;                 /* >= np_min; np_min == np_max: fixed size */
    int nproc;                  /* N, >= 1; np_max * nproc must fit int32 */
    int64_t elastic_timeout_ms; /* >= 0 */
    int64_t replace_wait_ms;    /* >= 0 */
    /* How long a booting node (below) holds up the admission of others:
     * the first epoch, and joiners that are ready, wait for the booting
     * nodes registered with them until each is ready or has booted this
     * long; after that they go on without it.  <= 0: no limit (the node's
     * own agent gives up on its boot: --join_ready_timeout). */
    int64_t join_ready_timeout_ms;
    /* Fault tolerance off (--elastic_level=-1): a member whose record says
     * failed fails the job at once (rule 2b) instead of being replaced. */
    bool fail_fast;
} ec_plan_config_t;

/* One registered node (nodes/<node_id>).  Borrowed by the planner. */
typedef struct ec_plan_node {
    const char *node_id;      /* non-NULL, unique among the nodes */
    uint32_t nproc;           /* the node's N */
    uint64_t incarnation;     /* bumped each time the node's agent registers */
    int64_t create_revision;  /* etcd create revision: registration order */
    ec_node_state_t state;
    /* The node's processes are starting and not all ready yet (in place:
     * they boot before they count; the record's boot phase).  A booting
     * node is never published: a member that is booting (its agent
     * replaces a dead process) departs, a non-member is admitted once
     * ready. */
    bool booting;
    /* How long the caller has seen it booting, in ms (the caller's clock;
     * not part of the record, so never a reason to plan again: the
     * WAIT_UNTIL of a wait for it says when); < 0: counted as 0. */
    int64_t booting_ms;
    /* torchrun's static rendezvous: the node's --node_rank + 1 (0: none).
     * Placed nodes come before the others, in place order, wherever
     * registration order decides (the first epoch's M_ids, joiners). */
    uint32_t place;
} ec_plan_node_t;

/* One member of the current epoch; its index in the array is its M_id. */
typedef struct ec_plan_member {
    const char *node_id;  /* non-NULL, unique among the members */
    uint64_t incarnation; /* the node's incarnation when it was admitted */
} ec_plan_member_t;

typedef struct ec_plan_epoch {
    uint64_t number;                 /* 0: no epoch yet (then n_members == 0) */
    const ec_plan_member_t *members; /* M_id order; n_members >= 1 if number > 0 */
    size_t n_members;
} ec_plan_epoch_t;

/* Everything the planner looks at.  All pointers are borrowed for the
 * duration of the call only.  Start from EC_PLAN_INPUT_INIT so the two
 * clocks default to "not running". */
typedef struct ec_plan_input {
    ec_plan_config_t config;
    const ec_plan_node_t *nodes; /* any order; may be NULL if n_nodes == 0 */
    size_t n_nodes;
    ec_plan_epoch_t epoch;
    /* ms since the eligible set last changed (compare ec_plan_fingerprint()
     * between calls); -1: unknown, counted as 0 (just changed). */
    int64_t since_eligible_change_ms;
    /* ms since the caller first saw decision.n_departed > 0 for the current
     * epoch; -1: not running, counted as 0 (just seen). */
    int64_t since_member_missing_ms;
    /* ids of departed nodes whose record said leaving before it vanished
     * (their departure is a "leave", not a "lost"); may be NULL if n_left == 0 */
    const char *const *left_ids;
    size_t n_left;
    /* The run that published `epoch` has ended (the job completed or failed)
     * and this is a new launch of the same job: plan the first epoch of a new
     * run by the first-epoch rules, numbered after epoch.number (epoch numbers
     * keep increasing across runs); the old epoch's members are ignored. */
    bool new_run;
} ec_plan_input_t;

#define EC_PLAN_INPUT_INIT \
    { .since_eligible_change_ms = -1, .since_member_missing_ms = -1 }

/* A node the planner will not admit, and the message for its record. */
typedef struct ec_plan_refusal {
    size_t node; /* index into input nodes[] */
    char *why;   /* "node n4 has nproc=4 but the job runs nproc=2; ..." */
} ec_plan_refusal_t;

typedef struct ec_plan_decision {
    ec_plan_action_t action;
    ec_plan_why_t why_code;   /* which rule decided (EC_PLAN_WHY_MAP); every decision */
    ec_epoch_reason_t reason; /* why an epoch is published (the epoch record's own enum,
                                 records.h); PUBLISH only, EC_REASON_UNKNOWN otherwise */
    uint64_t epoch;           /* PUBLISH: number to write = current + 1 */
    size_t *members;          /* PUBLISH: indices into input nodes[], M_id order */
    size_t n_members;
    int64_t world_size;       /* PUBLISH: n_members * nproc */
    int64_t wait_ms;          /* WAIT_UNTIL: > 0 */
    /* Members of the current epoch that have departed (absent, or state
     * leaving/done/failed, or no longer eligible).  Drives the caller's
     * since_member_missing_ms clock: start it when this becomes > 0, clear it
     * when it is 0. */
    size_t n_departed;
    ec_plan_refusal_t *refused; /* every decision except an invalid-config FAIL */
    size_t n_refused;
    char *why; /* human text: "waiting for 2 more nodes: have 1, need np_min=3",
                  "steady", "n3 missing"; for PUBLISH it is the epoch's detail */
    char *log; /* one event line: "+epoch 7 world=12 nodes=6 reason=lost: n3 missing",
                  "+wait: ...", "+wait-until 1500ms: ...", "+fail: ..." */
} ec_plan_decision_t;

/* Decide what to do.  On success returns 0 and sets *out to a decision the
 * caller frees with ec_plan_decision_free().  Returns EC_EINVAL (and fills
 * err) when the input is malformed: NULL pointers, a NULL or duplicate node
 * id, a duplicate member id, number == 0 with members or number > 0 without,
 * number == UINT64_MAX (no next number), 2^32-1 or more nodes or members;
 * EC_ENOMEM when out of memory.  On error *out is NULL.  A bad configuration
 * is not an error: it is a FAIL decision whose why says what to fix.
 * Runs in O(n log n) in the number of nodes and members. */
int ec_plan(const ec_plan_input_t *in, ec_plan_decision_t **out, ec_error_t *err);

/* Free a decision and everything it owns.  Accepts NULL; preserves errno. */
void ec_plan_decision_free(ec_plan_decision_t *d);

/* Whether the planner would admit this node: state joining or ready,
 * nproc == config nproc, and not booting.  The one definition of
 * "eligible". */
int ec_plan_node_eligible(const ec_plan_config_t *cfg, const ec_plan_node_t *node);
/* Whether it would be eligible but for its boot (state joining or ready,
 * the job's nproc, booting). */
int ec_plan_node_pending(const ec_plan_config_t *cfg, const ec_plan_node_t *node);

/* Whether the planner treats a and b, two versions of one node's entry,
 * alike in every decision, whatever the rest of the input: the same id,
 * nproc, incarnation, registration order and booting flag (booting_ms is
 * the caller's clock, not compared), and states it does not tell apart
 * (joining and ready are both "alive and eligible"; leaving, done, failed
 * and anything else each differ).  A caller may skip re-planning
 * when the only change since its last plan is a node going from a to b
 * (the leader skips the plan for a record write that changes only what
 * the planner does not read: a progress summary, epoch_seen, a READY after
 * JOINING).  NULLs: equal only when both are NULL. */
bool ec_plan_node_equiv(const ec_plan_node_t *a, const ec_plan_node_t *b);

/* A 64-bit digest of the set of eligible and booting node ids (independent
 * of array order): a node that becomes ready is no new node.  The caller
 * restarts its since_eligible_change_ms clock whenever the digest differs
 * from the previous call's. */
uint64_t ec_plan_fingerprint(const ec_plan_config_t *cfg, const ec_plan_node_t *nodes,
                             size_t n_nodes);

/* "publish", "wait-until", "wait", "fail", "complete"; "unknown" otherwise. */
const char *ec_plan_action_name(ec_plan_action_t action);
/* "steady", "need-nodes", "replace-wait" ... (EC_PLAN_WHY_MAP); "unknown" otherwise. */
const char *ec_plan_why_name(ec_plan_why_t why);

#endif
