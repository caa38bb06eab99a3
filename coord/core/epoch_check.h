/* Which epochs a reader applies.
 *
 * A higher number is not enough: an epoch copied from another job, or
 * written by a node that did not hold the leader key, would stop processes
 * and abort communicators for nothing.  A reader (the node coordinator's
 * model, the worker library's follower) applies an epoch only if it names
 * this job and was written under the leader key that was current at its
 * mod revision: the key existed then, its create revision is the epoch's
 * leader_rev and its value the epoch's leader_id.  (The leader's epoch
 * write is one transaction fenced on that create revision, so every epoch
 * it writes passes.)  Pure functions, no I/O: the leader key at a revision
 * comes from a log of leaderships the reader saw on its watch, or from a
 * read of the leader key at that revision (ec_etcd_get_at). */
#ifndef EC_EPOCH_CHECK_H
#define EC_EPOCH_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "records.h"

/* One leadership: the leader key from its creation to its deletion. */
typedef struct ec_leadership {
    int64_t create_rev;  /* the key's create revision (the fencing token) */
    int64_t deleted_rev; /* revision of its deletion; 0 while it exists */
    char *id;            /* its value: the leader's node id (owned) */
} ec_leadership_t;

#define EC_LEADER_LOG_MAX 16

/* The last EC_LEADER_LOG_MAX leaderships a reader saw, and from which
 * revision on it saw every change of the leader key. */
typedef struct ec_leader_log {
    ec_leadership_t e[EC_LEADER_LOG_MAX]; /* oldest first */
    size_t n;
    int64_t from_rev; /* every leader-key change after this revision is in e[] */
} ec_leader_log_t;

/* Forget everything; changes after from_rev will be recorded. */
void ec_leader_log_reset(ec_leader_log_t *l, int64_t from_rev);
/* The leader key was put (create_rev, value id of len bytes).  A put of the
 * key that already exists updates its value. */
void ec_leader_log_put(ec_leader_log_t *l, int64_t create_rev, const char *id, size_t len);
/* The leader key was deleted at revision rev. */
void ec_leader_log_delete(ec_leader_log_t *l, int64_t rev);
/* What the log knows of the leader key at revision rev: 1 and *out when a
 * leadership held it, 0 when none did, -1 when the log cannot tell (rev is
 * before from_rev and no logged leadership covers it). */
int ec_leader_log_at(const ec_leader_log_t *l, int64_t rev, const ec_leadership_t **out);

/* Why a reader refuses an epoch or a job status, by a stable name (the
 * tests assert on it; the sentence in why is for the log).  Negative, so
 * that "< 0" and "!= 0" read as "refused".  X(code, value, name). */
#define EC_REFUSAL_MAP(X)                                                                   \
    X(NO_JOB, -1, "no-job")                     /* the epoch names no job */               \
    X(OTHER_JOB, -2, "other-job")               /* it names another job */                 \
    X(NO_LEADER, -3, "no-leader")               /* no leader key at its revision */        \
    X(OTHER_LEADERSHIP, -4, "other-leadership") /* the key then was created elsewhen */    \
    X(OTHER_LEADER, -5, "other-leader")         /* the key then names another node */      \
    X(UNSHOWN_GAP, -6, "unshown-gap")           /* skipped numbers the history lacks */    \
    X(NO_LEADERSHIP, -7, "no-leadership")       /* a run ended under no leadership */      \
    X(INTERRUPTED_UNDER_LEADER, -8, "interrupted-under-leader") /* while a leader was */

typedef enum {
    EC_ACCEPTED = 0,
#define EC_REFUSAL_ENUM(code, value, name) EC_REFUSED_##code = value,
    EC_REFUSAL_MAP(EC_REFUSAL_ENUM)
#undef EC_REFUSAL_ENUM
} ec_refusal_t;

/* "other-job", "no-leader" ... (EC_REFUSAL_MAP); "accepted" for 0. */
const char *ec_refusal_name(ec_refusal_t r);

/* Whether a reader of job job_id may apply ep, stored at mod_rev, when the
 * leader key at mod_rev was leader (NULL: absent; deleted_rev ignored).
 * EC_ACCEPTED (0) if so; if not a refusal (EC_REFUSED_NO_JOB, OTHER_JOB,
 * NO_LEADER, OTHER_LEADERSHIP or OTHER_LEADER), with why (may be NULL) set
 * to a sentence starting "ignoring epoch N: written by X under leader
 * revision R, but ...". */
ec_refusal_t ec_epoch_check(const ec_epoch_t *ep, const char *job_id, int64_t mod_rev,
                            const ec_leadership_t *leader, char *why, size_t why_len);

/* Whether a reader that applied epoch last may apply ep, numbered more than
 * one above it (the reader missed epochs: a relisting; a leader numbering
 * above an epoch it refused; or a forged number), given what the job's
 * history (epochs/<n>) holds: ep's own copy (self_in_history: a leader
 * writes it in the epoch's transaction), its predecessor's
 * (prev_in_history), the reader's own last epoch's (last_in_history).  The
 * skip is believed when the history shows ep or its predecessor, or when it
 * no longer holds the reader's own epoch either (etcd lost its data, or
 * pruned it: nothing to check against).  EC_ACCEPTED (0) if so;
 * EC_REFUSED_UNSHOWN_GAP with why ("ignoring epoch N: ... the job's history
 * holds neither it nor them ...") if not.  Without it a number is
 * unbounded: UINT64_MAX would leave none for the next epoch. */
ec_refusal_t ec_epoch_gap_check(const ec_epoch_t *ep, uint64_t last, bool self_in_history,
                                bool prev_in_history, bool last_in_history, char *why,
                                size_t why_len);

/* Whether a reader may act on a job status that ends a run (completed,
 * failed, interrupted: every agent of the run exits on it), stored at
 * mod_rev, when the leader key at mod_rev was leader (NULL: absent).  Only
 * the leader ends a run, under its leadership (st->leader_id, leader_rev);
 * a launcher marks a run interrupted only when no leader key exists
 * (leader_rev 0).  A running status ends nothing: always 0.  EC_ACCEPTED
 * (0) if so; if not a refusal (EC_REFUSED_INTERRUPTED_UNDER_LEADER,
 * NO_LEADERSHIP, NO_LEADER or OTHER_LEADERSHIP), with why ("ignoring job
 * status STATE of run R: written by X under leader revision V, but ..."). */
ec_refusal_t ec_status_check(const ec_job_status_t *st, int64_t mod_rev,
                             const ec_leadership_t *leader, char *why, size_t why_len);

#endif
