/* The node coordinator's decisions that need no etcd: pure functions of what
 * the coordinator knows (no I/O, no clock reads), unit-tested in
 * coord/node/test/test_node_policy.c.  The files around them (node_register.c,
 * node_election.c, node_evict.c) do the etcd I/O each decision asks for. */
#ifndef EC_NODE_POLICY_H
#define EC_NODE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- registration --------------------------------------------------------- */

typedef enum {
    EC_REG_CREATE = 1,   /* the key is absent: grant a lease and create it */
    EC_REG_TAKE_OWN,     /* our own record under a lease etcd still has: take it over */
    EC_REG_CLEAR_JUNK,   /* a value without a lease (no agent writes one): delete it, once */
    EC_REG_PROBE,        /* an agent's record: ask that agent whether it is alive */
    EC_REG_TAKE_DEAD,    /* its agent did not answer: delete the record, revoke its lease */
    EC_REG_WAIT,         /* wait for the record to expire (no lease of ours meanwhile) */
    EC_REG_DUPLICATE,    /* a live agent keeps it: refuse this node id */
} ec_reg_action_t;

typedef enum {
    EC_REG_PROBE_NONE = 0, /* not probed yet */
    EC_REG_PROBE_ANSWERED, /* an agent with this node id answered */
    EC_REG_PROBE_SILENT,   /* nothing answered within the probe deadline */
} ec_reg_probe_t;

/* What registration knows about nodes/<node_id>. */
typedef struct ec_reg_view {
    bool present;          /* the key exists */
    int64_t lease;         /* its lease (0: none) */
    int64_t my_old_lease;  /* the lease of our previous registration (0: none) */
    bool junk_cleared;     /* we already deleted one unleased value */
    bool has_probe_port;   /* the record decodes and names a probe port */
    ec_reg_probe_t probe;  /* outcome of probing that port, for this record */
    bool deadline_passed;  /* waited a whole TTL of the record's lease */
} ec_reg_view_t;

/* What to do next about our node key.  A restarted agent (same node id, the
 * old process dead: a Kubernetes container restart) gets its record back at
 * once because the old agent no longer answers its probe; an agent that
 * answers is a live duplicate and is waited out for one TTL before this
 * node id is refused. */
ec_reg_action_t ec_reg_decide(const ec_reg_view_t *v);

/* ---- election ------------------------------------------------------------- */

typedef enum {
    EC_ELECT_NONE = 0,
    EC_ELECT_CAMPAIGN,       /* no leader key: try to create it */
    EC_ELECT_ADOPT,          /* the key names us on our lease: we lead (a lost campaign reply) */
    EC_ELECT_RESIGN,         /* the key names us on an old lease of ours: delete it (fenced) */
    EC_ELECT_STEP_DOWN,      /* we believed we led, the key says otherwise */
    EC_ELECT_CLEAR_FOREIGN,  /* the key has no lease (no agent wrote it): delete it (fenced) */
    EC_ELECT_DEFER,          /* no leader key, but a senior member should take it: wait */
} ec_elect_action_t;

/* How long a node registered after the current epoch leaves a vacant
 * leadership to a member registered before it (see ec_elect_decide). */
#define EC_CAMPAIGN_DEFER_MS 2000

typedef struct ec_elect_view {
    bool am_leader;           /* what the coordinator believes */
    int64_t my_leader_rev;    /* our fencing token while am_leader */
    int64_t my_lease;         /* our current lease */
    bool key_present;         /* the leader key exists */
    bool key_names_me;        /* its value is our node id */
    int64_t key_create_rev;
    int64_t key_lease;        /* 0: written without a lease */
    int64_t key_deleted_rev;  /* revision of the key's last deletion seen (0: none) */
    /* Seniority: junior, this node registered after the current epoch was
     * written or is not one of its members; senior_alive, another member
     * of it still has the record it had when the epoch was written. */
    bool junior, senior_alive;
    int64_t absent_ms;        /* how long the key has been seen absent */
    int64_t defer_ms;         /* how long a junior leaves it to a senior */
} ec_elect_view_t;

/* One decision about the leader key, from the model.  A vacant leadership
 * is campaigned for at once, except by a junior node while a senior member
 * is alive, which waits defer_ms first: the senior holds the reports and
 * the holds of evicted nodes (a leader deposed by its peers re-registers
 * and must not win the leadership back over them), and a junior still
 * leads when no senior takes it.  Called again after the
 * action is taken, until it answers NONE (a step-down is followed by a
 * campaign only once the key is gone). */
ec_elect_action_t ec_elect_decide(const ec_elect_view_t *v);

/* ---- eviction ------------------------------------------------------------- */

/* Whether the members that reported the leader silent are enough for a
 * follower to evict it: a strict majority of the epoch's members other than
 * the leader.  One partitioned follower can then never depose a leader that
 * the rest of the job still reaches. */
bool ec_evict_leader_quorum(size_t n_members, size_t n_reporters);

/* Whether the leader has evidence enough to evict a member it suspects:
 * `n_reporters` distinct members of the epoch (other than the suspect)
 * reported it, `leader_reported` whether the leader's own node is one of
 * them.  Evidence from more than one side: some reporter other than the
 * leader's own node, or a strict majority of the members other than the
 * suspect (ec_evict_leader_quorum; in a two-member job the leader alone).
 * A leader cut off from its peers (its own workers' collectives fail) then
 * cannot evict the peers that the rest of the job still reaches. */
bool ec_evict_member_evidence(size_t n_members, size_t n_reporters, bool leader_reported);

/* How often a suspect that answered a probe may be probed again on a newer
 * report of it (a member found alive once may die later in the same epoch:
 * it is not left to its lease). */
#define EC_REPROBE_MIN_MS 1000

/* Whether a reported suspect is probed now.  `probed`: it was probed
 * already in this member set; `newest_report_rev`, the mod revision of the
 * newest report naming it; `probed_rev`, the newest one when it was last
 * probed; `last_silent`, that probe went unanswered; `since_probe_ms`, how
 * long ago it was.  Never probed: now.  A newer report after an answered
 * probe: once `min_every_ms` passed (a false report repeated costs at most
 * one probe per interval); after a silent probe (its eviction failed, or a
 * follower's own report was needed for the majority): at once. */
bool ec_suspect_probe_due(bool probed, int64_t newest_report_rev, int64_t probed_rev,
                          bool last_silent, int64_t since_probe_ms, int64_t min_every_ms);

/* When a follower probes a reported leader to confirm the report: every
 * follower does, so in a large job they are spread over slots of
 * EC_CONFIRM_SLOT_MS, EC_CONFIRM_PER_SLOT followers each, chosen by a hash
 * of the follower's id (the leader's probe server answers a burst of 4,095
 * in 110-160 ms on loopback, and its accept queue holds 4,096 at most:
 * tests/bench/bench_ring).  Up to 2 * EC_CONFIRM_PER_SLOT members: at once
 * (0 ms); 16,384: in 8 slots, 0-700 ms after the report. */
#define EC_CONFIRM_SLOT_MS 100
#define EC_CONFIRM_PER_SLOT 2048
int64_t ec_confirm_delay_ms(const char *node_id, size_t n_members);

/* ---- readmission of a node evicted as silent ------------------------------- */

typedef enum {
    EC_READMIT_ADMIT = 1, /* it answered a probe since its eviction: eligible again, forget it */
    EC_READMIT_PROBE,     /* held out; probe it now */
    EC_READMIT_HOLD,      /* held out; probed recently, wait */
    EC_READMIT_FORGET,    /* remembered too long: drop the memory, eligible again */
} ec_readmit_action_t;

/* What to do about a node that registered again after it was evicted as
 * silent `since_evicted_ms` ago: it stays out of the planner's eligible
 * nodes until it answers a probe (`answered`), probed every `probe_every_ms`
 * (`since_probe_ms` < 0: never probed yet), for at most `hold_max_ms`. */
ec_readmit_action_t ec_readmit_decide(bool answered, int64_t since_evicted_ms,
                                      int64_t since_probe_ms, int64_t probe_every_ms,
                                      int64_t hold_max_ms);

/* ---- agents watching each other (a ring) ----------------------------------- */

/* How many successors each member watches (when one is reported:
 * coord/core/detector.h).  Two watchers per member, so that a member
 * watched by the leader's node is always also watched by another node too
 * (the leader's own report alone is not evidence enough:
 * ec_evict_member_evidence). */
#define EC_RING_WATCHERS 2

/* Which members node `me` watches: its `k` successors in M_id order (ids
 * are the epoch's members in M_id order, wrapping around; NULL for a
 * member a view does not hold, skipped), never itself.  Writes their
 * indices into `ids` to out[] (room for k) and returns how many (fewer than
 * k when the job has fewer than k + 1 members; 0 when `me` is not one of
 * them).  Each member is then watched by k others whatever the job's size,
 * and each watches k: O(k) probes per node per interval, not O(n). */
size_t ec_ring_watched(const char *const *ids, size_t n, const char *me, size_t k, size_t *out);

/* ---- the coordinator's phase ------------------------------------------------ */

/* The node coordinator's life as one explicit state machine (node.c's loop
 * and the calls that end it drive it; each transition is logged as
 * "+phase <from> -> <to>: <why>", the trace of the machine).  Its inputs are
 * the events below, reported where they happen: a registration that
 * succeeded, the keepalive's lost lease (acted on by the loop), an election
 * won or a step down, ec_node_leave, ec_node_stop. */
typedef enum {
    EC_PHASE_REGISTERING, /* no lease of ours (at start, and after losing it) */
    EC_PHASE_FOLLOWER,    /* registered, not the leader */
    EC_PHASE_LEADER,      /* registered and holding the leader key */
    EC_PHASE_LEAVING,     /* leaving the job: nothing registers or campaigns again */
    EC_PHASE_STOPPED,     /* the loop is ending */
} ec_node_phase_t;

typedef enum {
    EC_PEV_REGISTERED,
    EC_PEV_LEASE_LOST,
    EC_PEV_WON,
    EC_PEV_STEPPED_DOWN,
    EC_PEV_LEAVE,
    EC_PEV_STOP,
} ec_phase_event_t;

const char *ec_node_phase_name(ec_node_phase_t p);
const char *ec_phase_event_name(ec_phase_event_t e);

/* The phase after event e in phase p; p itself when e does not apply there
 * (a step down while leaving, say): the machine ignores it. */
ec_node_phase_t ec_node_phase_next(ec_node_phase_t p, ec_phase_event_t e);

#endif
