/* The job model of one node coordinator, as a pure state machine: etcd's
 * watch and listing events go in (ec_model_apply), the model's state and
 * what the caller must do about them (ec_model_effects_t) come out.  No
 * etcd calls and no clock reads here (the times come with each event):
 * coord/test/test_model.c drives it with generated event streams.  The
 * watches, the listings and the etcd reads that feed it are node_model.c's.
 *
 * Not thread-safe: the node coordinator calls it from its own thread alone
 * (node_impl.h). */
#ifndef EC_NODE_MODEL_H
#define EC_NODE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "epoch_check.h"
#include "etcd.h"
#include "keys.h"
#include "planner.h"
#include "records.h"

/* One node record (nodes/<id>). */
typedef struct ec_model_node {
    char *id;
    ec_node_rec_t *rec; /* NULL when the stored value is corrupt */
    int64_t create_rev, mod_rev, lease;
    /* (leader) monotonic ms it was first seen booting without being ready
     * since (0: not booting): how long it has held up admissions
     * (node_publish.c's; the model only zeroes it) */
    int64_t boot_seen_ms;
} ec_model_node_t;

/* One suspicion report for an epoch (epochs/<n>/suspect/<src>). */
typedef struct ec_model_suspect {
    uint64_t epoch;
    char *src;      /* the key below suspect/: <node> or <node>/<source> */
    char *reporter; /* the node: every source of it counts for it */
    char *ids;
    int64_t mod_rev; /* of the report's last write: a newer report is a
                      * newer sighting (the suspect is probed again) */
    int64_t seen_ms; /* monotonic: when that write reached the model */
} ec_model_suspect_t;

typedef struct ec_model {
    /* Whether the model holds the whole job (the leader's: every node
     * record, suspicion reports and failures, from one watch of the root)
     * or only what a follower needs (leader, epoch, status, its own record
     * and the current epoch's suspicion reports, each watched alone), so
     * that a change reaches the leader and the nodes it concerns, not every
     * node: O(N) bytes per change instead of O(N^2).  Set by
     * ec_model_reset. */
    bool wide;
    ec_model_node_t *nodes; /* sorted by id */
    size_t nnodes, cap;
    uint8_t *epoch_raw;
    size_t epoch_raw_len;
    ec_epoch_t *epoch;       /* newest valid epoch */
    uint64_t epoch_gen;      /* bumped whenever `epoch` is replaced */
    int64_t epoch_mod_rev;   /* of whatever is stored at `epoch` now */
    bool epoch_bad;          /* `epoch` holds garbage or was deleted */
    char *leader_id;
    int64_t leader_create_rev;
    int64_t leader_lease, leader_mod_rev; /* lease 0: not written by an agent */
    int64_t leader_deleted_rev; /* revision of the leader key's last deletion seen */
    /* Which epochs are applied (epoch_check.h): the leaderships seen, the
     * highest number seen in any epoch or node record (valid or not: never
     * reused), and an epoch of the listing whose leadership the log cannot
     * tell, which the loop checks with a read at its revision. */
    ec_leader_log_t llog;
    uint64_t epoch_seen_max;
    uint8_t *verify_raw;
    size_t verify_len;
    int64_t verify_rev;
    bool verify_pending;
    /* the pending epoch skips numbers above this one, the model's own
     * (0: it skips none): the loop reads the history before believing it */
    uint64_t verify_gap;
    int64_t verify_since_ms; /* when the pending epoch was first seen */
    /* Narrow model: every leader-key change up to this revision is in
     * `llog` (the leader key has a watch of its own, so an epoch event can
     * come before the leader event of the same revision; the leader's
     * epoch transaction touches the leader key for that reason).  Wide
     * model: INT64_MAX (one watch, one order). */
    int64_t leader_through;
    uint8_t *status_raw;
    size_t status_raw_len;
    int64_t status_mod_rev;
    ec_job_state_t status_state; /* decoded from status_raw; 0: none or corrupt */
    uint64_t status_run;
    char **fails;           /* failures/ keys, sorted (oldest first) */
    size_t nfails, fails_cap;
    char **left;            /* nodes that left gracefully (their last record said so) */
    size_t nleft;
    int64_t changed_at_ms;  /* wall ms of the last change the planner reads */
    /* the leader whose key a follower last saw deleted, and at which
     * revision: a follower that then wins reads its record just before, to
     * tell a graceful leave (its `left`) from a loss */
    char *gone_leader;
    int64_t gone_leader_rev;
    /* suspicion reports for the current epoch */
    ec_model_suspect_t *sus;
    size_t nsus;
} ec_model_t;

/* What the model needs to know about the node it is the model of. */
typedef struct ec_model_ctx {
    const ec_keys_t *keys; /* the job's keys (its root, the key parsers) */
    const char *node_id;   /* this node's id */
    const char *job_id;    /* the job an epoch must name */
    bool leaving;          /* this node is leaving: its record is not written again */
} ec_model_ctx_t;

/* One key's change, as a watch or a listing delivers it. */
typedef struct ec_model_event {
    bool put;              /* false: a deletion (kv holds the key and mod revision) */
    const ec_kv_t *kv;     /* key and value NUL-terminated (etcd.h) */
    const ec_kv_t *prev;   /* a deletion's previous value; NULL: not known */
    int64_t mono_ms;       /* now, monotonic (ec_mono_ms) */
    int64_t wall_ms;       /* now, wall clock (ec_wall_ms) */
} ec_model_event_t;

/* What the caller must do after an event; the apply functions only set
 * fields (to true), so one struct can gather several events. */
typedef struct ec_model_effects {
    bool dirty;           /* the planner's input may have changed: run a pass that plans */
    bool touched;         /* a record changed in nothing the planner reads: run a pass
                           * (hangs, suspicions), do not plan for it */
    bool self_bad;        /* our own record was overwritten with what no agent writes:
                           * write it again */
    bool self_failed;     /* our own record says failed (the leader refusing us, or
                           * this agent's own write coming back) */
    bool epoch_installed; /* `epoch` was replaced (epoch_gen bumped) */
    bool epoch_refused;   /* an epoch value was refused (epoch_bad set) */
    bool epoch_pending;   /* an epoch waits for a read of the leader key or of the
                           * history (verify_pending): ec__node_verify_epoch */
} ec_model_effects_t;

/* Apply one key's change to the model; keys outside the job's root or
 * not part of the model are ignored.  Logs what it refuses and the node
 * events (-node <id> left | lease expired).  Never fails: a change it has
 * no memory for is dropped (the next listing brings it back). */
void ec_model_apply(ec_model_t *m, const ec_model_ctx_t *ctx, const ec_model_event_t *ev,
                    ec_model_effects_t *fx);

/* Start a model of the given shape (wide: the whole job) from a listing at
 * revision list_rev, whose events follow: forgets the node records, the
 * leader key, a pending epoch, the suspicion reports and failures, and
 * empties the leader log, which records every change after list_rev (a
 * narrow model's: up to list_rev until its leader key's own events come).
 * The epoch itself, the status and `left` stay until events replace them. */
void ec_model_reset(ec_model_t *m, bool wide, int64_t list_rev);
/* Free everything the model holds; *m is zeroed (reusable). */
void ec_model_free(ec_model_t *m);

/* Index of node id in m->nodes (sorted), with *found; else where it would
 * be inserted. */
size_t ec_model_node_find(const ec_model_t *m, const char *id, bool *found);
/* Put node id's record (kv: what etcd holds at nodes/<id>), as an event
 * would.  Returns whether the planner's input may have changed. */
bool ec_model_put_node(ec_model_t *m, const ec_model_ctx_t *ctx, const char *id,
                       const ec_kv_t *kv, ec_model_effects_t *fx);
/* Drop node id's record without counting it as left or expired (a read
 * found it gone); returns whether it was there. */
bool ec_model_drop_node(ec_model_t *m, const char *id);
/* Count node id as having left gracefully. */
void ec_model_add_left(ec_model_t *m, const char *id);
/* Whether node id is counted as having left. */
bool ec_model_has_left(const ec_model_t *m, const char *id);

/* An epoch number seen somewhere: never reused. */
void ec_model_note_seen(ec_model_t *m, uint64_t number);
/* Drop the epoch (etcd lost its data): its number stays seen. */
void ec_model_forget_epoch(ec_model_t *m);
/* The pending epoch (verify_rev == rev) was checked against the leader key
 * read at its revision: `leader` held it then (NULL: none did), or, when
 * `compacted`, etcd's history no longer says and it is accepted.  Nothing
 * when no such epoch is pending (superseded meanwhile). */
void ec_model_verify_done(ec_model_t *m, const ec_model_ctx_t *ctx, int64_t rev,
                          const ec_leadership_t *leader, bool compacted, ec_model_effects_t *fx);
/* The pending epoch (verify_rev == rev) skips numbers: the history showed
 * them (refused false: it goes on to the leadership check) or not (it is
 * refused).  Nothing when no such epoch is pending. */
void ec_model_gap_done(ec_model_t *m, int64_t rev, bool refused, ec_model_effects_t *fx);

/* What the planner reads of node `id`'s record (create_rev: the record's
 * create revision); the one place that maps a record to a planner node. */
ec_plan_node_t ec_model_plan_view(const char *id, const ec_node_rec_t *rec, int64_t create_rev);

#endif
