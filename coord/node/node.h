/* The node coordinator: one per agent (architecture layer 5).
 *
 * It registers this node at nodes/<node_id> with a lease and keeps the
 * lease alive; campaigns for the leader key; follows what it needs of the
 * job (a follower: the leader key, the epoch's deltas, the status and its
 * own record; the leader: every key of the job); and, while it holds the
 * leader key, runs the planner on each change and publishes the epochs it
 * decides with a transaction fenced by the leader key's create revision and
 * the epoch's mod revision.  Every node, leader or not, hands each new valid
 * epoch to its on_epoch callback.
 *
 * Thread-safety: on_epoch, on_job and on_progress run on the coordinator's
 * thread, one at a time.  on_event may run on any of the coordinator's
 * threads (its loop, the ring's thread) or on the thread calling
 * ec_node_start, possibly at the same time as another callback: it must be
 * thread-safe.  The ec_node_* calls may be made from any thread, but not
 * from inside a callback except ec_node_is_leader and ec_node_lease.  None
 * of them waits for the coordinator's loop (its listings, plans and etcd
 * calls): those that read or write etcd wait for etcd alone, the others
 * answer at once.
 */
#ifndef EC_NODE_H
#define EC_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "etcd.h"
#include "node_policy.h"
#include "records.h"

typedef struct ec_node ec_node_t;

typedef void (*ec_node_epoch_cb)(const ec_epoch_t *ep, void *arg);
typedef void (*ec_node_job_cb)(const ec_job_status_t *st, void *arg);
/* Lease lost and re-registered (new lease id), or leadership won/lost. */
typedef void (*ec_node_event_cb)(const char *event, void *arg);

typedef struct ec_node_opts {
    size_t size;                 /* sizeof(ec_node_opts_t) */
    ec_etcd_t *etcd;             /* borrowed; outlives the node */
    const char *etcd_prefix;     /* may be NULL */
    const char *job_id;
    /* this node */
    const char *node_id;
    const char *host;
    int nproc;
    const uint16_t *ports;       /* nproc ports */
    uint16_t master_port;
    uint16_t probe_port;         /* answer liveness probes here (0: none) */
    int probe_timeout_ms;        /* leader's probe of a suspect; default 250 */
    const char *const *device_ids; /* ndevices (0 or nproc) */
    int ndevices;
    const char *agent_version;
    /* the job (only the leader's values are used for decisions) */
    int np_min, np_max;
    int64_t elastic_timeout_ms;
    int64_t replace_wait_ms;
    int lease_ttl_s;             /* default 10 */
    int history_keep;            /* epochs/<n> copies kept; default 64 */
    /* callbacks, all optional */
    ec_node_epoch_cb on_epoch;
    ec_node_job_cb on_job;
    ec_node_event_cb on_event;
    void *arg;
    /* Probe this node's EC_RING_WATCHERS successors in the epoch's M_id
     * order every this many ms and report one the failure detector finds
     * silent (coord/core/detector.h) as a suspect (0: off, the default of
     * this struct; `ecoord launch --peer_probe_interval`, 0.25 s).  Needs
     * probe_port.  Appended last: older callers' size leaves it 0. */
    int watch_peers_ms;
    /* Hangs and stragglers (coord/core/hang_policy.h; only the leader's values
     * are used): --hang_timeout in ms (> 0: every program; 0: off; < 0:
     * auto, on for programs that report progress), --straggler_factor (0:
     * off).  on_progress (optional) gets, on the leader, each member's
     * newly published progress summary (metrics); on the coordinator's
     * thread.  Appended last: older callers' size leaves them 0 (off). */
    int64_t hang_timeout_ms;
    double straggler_factor;
    void (*on_progress)(const char *node_id, const ec_node_progress_t *p, void *arg);
    /* --epoch_chunk_members (only the leader's is used): an epoch of more
     * members is published split (records.h); 0: 256.  Appended last. */
    int epoch_chunk_members;
    /* Boots (in place: processes start before their node is admitted).
     * boot_gated: this node registers booting (boot_why says why, e.g.
     * "joining"), and is admitted only once ec_node_set_boot says ready.
     * join_ready_timeout_ms (only the leader's is used): how long a booting
     * node holds up the first epoch and the admission of ready joiners
     * (planner.h); <= 0: no limit.  Appended last. */
    bool boot_gated;
    const char *boot_why;
    int64_t join_ready_timeout_ms;
    /* Fault tolerance off (--elastic_level=-1; only the leader's is used):
     * a member whose record says failed fails the job (planner rule 2b). */
    bool fail_fast;
    /* torchrun's static rendezvous: --node_rank + 1, this node's M_id + 1 in
     * the first epoch (planner.h, ec_plan_node_t.place); 0: none. */
    uint32_t place;
    /* --peer_pause_tolerance: how long a watched peer may be silent before
     * the ring reports it (coord/core/detector.h); <= 0: 700 ms.  Appended
     * last. */
    int peer_pause_tolerance_ms;
} ec_node_opts_t;

#define EC_NODE_OPTS_INIT {.size = sizeof(ec_node_opts_t)}

/* Register and start.  Fails (EC_EEXIST) when a live agent holds the same
 * node id: the previous record of a restarted agent is waited out first
 * (bounded by its lease's TTL), so only a record that keeps being refreshed
 * is a duplicate. */
ec_node_t *ec_node_start(const ec_node_opts_t *opts, ec_error_t *err);
/* Rewrite our own record's state (and reason, may be NULL).  If the write
 * fails the error is returned and the coordinator keeps writing it until it
 * succeeds (so does ec_node_bump_incarnation). */
int ec_node_set_state(ec_node_t *n, ec_node_state_t st, const char *reason, ec_error_t *err);
/* Whether the leader refused this node: its record, as this node's watch
 * on it brought it, said failed while this agent never set that (a node
 * whose --nproc_per_node is not the job's); the leader's reason in why.
 * No etcd call: from any thread. */
bool ec_node_refusal(ec_node_t *n, char *why, size_t len);
/* Count one stop of this node's processes for its fence (its lease
 * unconfirmed, or its janitor's watchdog) in its record, where `ecoord
 * status` shows it: not a failure of the program.  Never blocks: the
 * coordinator loop writes the record (retrying while etcd is away). */
void ec_node_count_fence_stop(ec_node_t *n);
/* Our agent's summary of its ranks' progress (coord/agent/progress.h): written
 * into our record now (the caller rate-limits; ec_progress_publish_due),
 * numbered with the next seq.  A failed write is retried by the loop. */
int ec_node_set_progress(ec_node_t *n, const ec_node_progress_t *p, ec_error_t *err);
/* The leader's verdict that this node's ranks hung in `epoch`
 * (hang/<node_id>, written by the leader's hang detection): 1 when there
 * is one for that epoch (local_rank and why filled; the key is deleted), 0
 * when none, or a negative code.  One etcd read: the agent asks only while
 * its own summary says a rank is silent. */
int ec_node_take_hang(ec_node_t *n, uint64_t epoch, int *local_rank, char *why, size_t len,
                      ec_error_t *err);
/* Our processes restarted: bump the incarnation so the leader re-forms the
 * job with the same members (reason restart). */
int ec_node_bump_incarnation(ec_node_t *n, ec_error_t *err);
/* This node's boot (records.h ec_node_boot_t): booting, the leader never
 * admits it (a member steps out of the job: one epoch without it); ready,
 * it is admissible again.  bump: also a new incarnation (its processes
 * were replaced), in the same write.  Written at once; a failed write is
 * retried by the loop, as for ec_node_set_state. */
int ec_node_set_boot(ec_node_t *n, const ec_node_boot_t *boot, bool bump, ec_error_t *err);
/* This node's boot as last set (a copy). */
ec_node_boot_t ec_node_boot(ec_node_t *n);
/* The lowest epoch number a process started now, before its node is
 * admitted, may join: above every epoch this node has seen, of any run
 * (an epoch it saw was planned without that process). */
uint64_t ec_node_epoch_floor(ec_node_t *n);
/* Leave gracefully: state leaving, then revoke the lease so the others
 * re-form at once.  The node stops taking part. */
int ec_node_leave(ec_node_t *n, ec_error_t *err);
/* Record a failure under failures/ (attached to our lease? no: failures
 * outlive the node, for the post-mortem; the leader prunes them). */
int ec_node_record_failure(ec_node_t *n, const ec_failure_t *f, ec_error_t *err);
/* Report members of `epoch` that this node believes are dead (a collective
 * failed, a peer's connection closed).  The leader probes each suspect's
 * agent directly and evicts one that does not answer within
 * probe_timeout_ms by revoking its lease: the job re-forms without it long
 * before its lease would expire, and a wrongly evicted node re-registers
 * and rejoins.  An id may carry the round trip this node measured to it,
 * "<id>@<rtt_us>" (coord/core/detector.h): the confirming probe then takes
 * no handshake on a link measured fast for its host gone. */
int ec_node_report_suspects(ec_node_t *n, uint64_t epoch, const char *const *ids, size_t nids,
                            ec_error_t *err);
/* Probe the agents of the current epoch's other members (their probe
 * ports read from their records, one read of nodes/); *dead (malloc'd
 * array of malloc'd ids, may be empty) gets those that did not answer
 * within timeout_ms.  Returns the count, or a negative code. */
int ec_node_probe_members(ec_node_t *n, int timeout_ms, char ***dead, ec_error_t *err);
void ec_node_free_ids(char **ids, int n);
/* Stop the threads; the lease is not revoked (it expires on its own): that
 * is what a crash looks like to the others.  Accepts NULL. */
void ec_node_stop(ec_node_t *n);

/* Whether this node holds the job's leader key, as its coordinator last
 * decided; from any thread, without a lock. */
bool ec_node_is_leader(ec_node_t *n);
/* The coordinator's phase (node_policy.h: registering, follower, leader,
 * leaving, stopped); from any thread, without a lock. */
ec_node_phase_t ec_node_phase(ec_node_t *n);
int64_t ec_node_lease(ec_node_t *n);
uint64_t ec_node_incarnation(ec_node_t *n);
/* When (CLOCK_MONOTONIC ms) the newest lease refresh etcd confirmed was sent:
 * etcd cannot expire the lease before this plus the TTL.  0 while this node
 * holds no lease (lost and not registered again, or leaving). */
int64_t ec_node_lease_confirmed_ms(ec_node_t *n);
/* The run of the job this node takes part in (>= 1): a launch after the job
 * completed or failed starts the next run; statuses and epochs of earlier
 * runs are not delivered to it. */
uint64_t ec_node_run(ec_node_t *n);
/* Number of the newest epoch seen (0: none yet). */
uint64_t ec_node_epoch_number(ec_node_t *n);
/* Watch events applied to this node's model so far (tests, metrics): the
 * leader's model follows every key of the job, a follower's only the leader
 * key, the epoch, the status, its own record and the current epoch's
 * suspicion reports. */
uint64_t ec_node_watch_events(ec_node_t *n);
/* Times this node's planner ran (tests, benchmarks): only while it leads,
 * once per batch of changes that reached it together, never for a node
 * record write that changes nothing the planner reads (a progress summary,
 * the epoch a node saw, ready after joining). */
uint64_t ec_node_plans(ec_node_t *n);
/* Watches etcd has confirmed (EC_WATCH_CREATED events) so far, once the
 * model has listed the job after opening them (0 before): a follower's
 * opens 4 keys' watches, then lists in one transaction (tests wait for
 * both before they disturb the node's next request). */
int ec_node_watches_created(ec_node_t *n);

#endif
