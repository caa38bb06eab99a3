/* Hangs and stragglers: the leader's pure decision (no I/O, no clock).
 *
 * Input: the job's configuration and, per member of the current epoch, its
 * agent's last progress summary (records.h ec_node_progress_t) with
 * silent_ms brought forward to now by the caller.  Output: nothing to do,
 * when to look again, the nodes to act on (suspects) with the evidence, or
 * "stalled, but no single node to blame" (logged, no action).
 *
 * The rules, in order (ec_hang_decide):
 *   1. a member declared a pause (checkpoint) -> NONE: the others wait on it
 *   2. a member is stalled when its silence reached its timeout:
 *      --hang_timeout when > 0; when < 0 (auto) EC_HANG_AUTO_MS for a node
 *      whose ranks report progress and off for one that does not; 0 off.
 *      None stalled -> WAIT_UNTIL the first silent member would be (or NONE)
 *   3. candidates: stalled members that are stopped (SIGSTOP) or not inside
 *      a collective; stalled members all inside collectives -> WAIT_UNTIL a
 *      member silent outside a collective (or stopped) reaches its timeout
 *      if there is one (whom they wait for), else STALLED (each waits on a
 *      peer: a wedged collective, not one node to blame)
 *   4. stopped candidates are the suspects if there are any; else, when
 *      every other member progresses or waits inside a collective, the
 *      candidates; else (others silent outside a collective too, at their
 *      timeout or not yet: a phase every rank runs) the one member silent
 *      longest by at least EC_HANG_MARGIN_MS more than every other; else
 *      STALLED
 *   5. with straggler_factor > 0 and no hang: a member whose step time p50 is
 *      more than factor times the members' median (at least 3 members with a
 *      step time) is a suspect (straggler).
 */
#ifndef EC_HANG_POLICY_H
#define EC_HANG_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "records.h"

/* --hang_timeout's default for programs that report progress. */
#define EC_HANG_AUTO_MS 300000
/* Rule 4: how much longer the one blamed member must have been silent. */
#define EC_HANG_MARGIN_MS 1000

typedef struct ec_hang_config {
    int64_t hang_timeout_ms;  /* > 0 every program; 0 off; < 0 auto */
    double straggler_factor;  /* > 1: on; 0: off */
} ec_hang_config_t;

typedef struct ec_hang_member {
    const char *node_id;
    ec_node_progress_t p; /* seq 0: nothing reported (never stalled) */
} ec_hang_member_t;

typedef enum {
    EC_HANG_NONE = 1,
    EC_HANG_WAIT_UNTIL = 2, /* look again after wait_ms */
    EC_HANG_SUSPECT = 3,    /* act on suspects[] */
    EC_HANG_STALLED = 4,    /* the job is stalled, no single node to blame */
} ec_hang_action_t;

/* Which rule of the list above decided, by a stable name: the tests assert on
 * it, and a log line can carry it, so neither depends on the evidence's
 * prose.  X(code, name, action it goes with). */
#define EC_HANG_RULE_MAP(X)                                                                   \
    X(NOTHING, "nothing", NONE)                     /* 2: nobody silent with a timeout */    \
    X(PAUSED, "paused", NONE)                       /* 1: a declared pause */                \
    X(NEXT_TIMEOUT, "next-timeout", WAIT_UNTIL)     /* 2: someone silent, not yet stalled */ \
    X(AWAITING_CULPRIT, "awaiting-culprit", WAIT_UNTIL) /* 3: the one the waiters wait on */ \
    X(WEDGED_COLLECTIVE, "wedged-collective", STALLED)  /* 3: all inside collectives */      \
    X(SHARED_PHASE, "shared-phase", STALLED)        /* 4: silent together, none longest */   \
    X(ALL_SILENT, "all-silent", STALLED)            /* 4: every node stalled alike */        \
    X(STOPPED, "stopped", SUSPECT)                  /* 4: SIGSTOP or a debugger */           \
    X(SILENT_ALONE, "silent-alone", SUSPECT)        /* 4: the others progress or wait */     \
    X(LONGEST_SILENCE, "longest-silence", SUSPECT)  /* 4: silent clearly longest */          \
    X(STRAGGLER, "straggler", SUSPECT)              /* 5 */

typedef enum {
#define EC_HANG_RULE_ENUM(code, name, action) EC_HANG_BY_##code,
    EC_HANG_RULE_MAP(EC_HANG_RULE_ENUM)
#undef EC_HANG_RULE_ENUM
} ec_hang_rule_t;

typedef struct ec_hang_decision {
    ec_hang_action_t action;
    ec_hang_rule_t rule; /* why this action (EC_HANG_RULE_MAP) */
    int64_t wait_ms;
    size_t *suspects; /* indices into the members */
    size_t nsuspects;
    bool straggler;   /* the suspects straggle; they are not hung */
    char *why;        /* the evidence, one line (SUSPECT, STALLED) */
} ec_hang_decision_t;

/* The timeout that applies to a member (0: none). */
int64_t ec_hang_timeout_for(const ec_hang_config_t *cfg, const ec_node_progress_t *p);

/* Decide.  0 and *out (free with ec_hang_decision_free), or EC_EINVAL
 * (NULL pointers) / EC_ENOMEM with err filled. */
int ec_hang_decide(const ec_hang_config_t *cfg, const ec_hang_member_t *m, size_t n,
                   ec_hang_decision_t **out, ec_error_t *err);
void ec_hang_decision_free(ec_hang_decision_t *d); /* accepts NULL */

/* The median (lower) of the members' known step times p50 (us); 0 if none. */
int64_t ec_hang_median_us(const int64_t *p50_us, size_t n);

/* "+hang-suspect", "+hang-stalled", "+straggler" ... */
const char *ec_hang_action_name(ec_hang_action_t a);
/* "wedged-collective", "stopped" ... (EC_HANG_RULE_MAP); "unknown" otherwise. */
const char *ec_hang_rule_name(ec_hang_rule_t r);

#endif
