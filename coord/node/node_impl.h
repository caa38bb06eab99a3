/* The node coordinator's shared state and the functions its files share
 * (internal to coord/node*.c; the public API is node.h).
 *
 * The coordinator is split by concern, in reading order:
 *   model.c          the job model's pure core (model.h): an etcd event in,
 *                    the model's state and what the loop must do out, no
 *                    I/O and no clock reads (coord/node/test/test_model.c);
 *                    its state is `m` below, read by every file as
 *                    n->m.<field>;
 *   node_model.c     what feeds it: the leader's one watch of the whole job,
 *                    a follower's single-key watches of what it needs, the
 *                    listings, and the etcd reads an epoch's check needs;
 *   node_register.c  registration of this node under its lease;
 *   node_election.c  campaign, adopt or resign, step down, the fence;
 *   node_publish.c   (leader) the planner's decisions published as fenced epochs;
 *   node_ring.c      agents watching their successors, reporting silent ones;
 *   node_evict.c     eviction of silent members faster than a lease TTL;
 *   node.c           the loop that ties them together, and the public calls.
 * The decisions each of them takes that do not need etcd are pure functions
 * in node_policy.c, unit-tested in coord/node/test/test_node_policy.c, and the
 * model's changes are model.c's.
 *
 * State: each file owns its part of struct ec_node below (n->loop, n->reg,
 * n->feed, n->el, n->pub, n->ev, n->hang, n->ring), and names no other
 * file's part: what one concern needs of another goes through the owner's
 * ec__<concern>_* calls at the end of this header (tests/t0050-layering.sh
 * checks it).  All of them read the context (options, ids, keys, the etcd
 * client), set before the loop starts and read-only after.
 *
 * The job's model `m` is the coordinator thread's alone, and so is most of
 * every concern's state: no lock guards them.  Other threads reach the
 * coordinator only through what it publishes and through its mailbox:
 *   - the watch threads queue their events (n->feed's queue, under
 *     feed.qlock) and the loop applies them (ec__node_drain), so a listing,
 *     a plan or an etcd call of the loop never holds up a watch thread, and
 *     no watch event lands between a listing and the model built from it;
 *     what a watch thread reports without an event (the watches broke, an
 *     event was lost, a watch was created) are atomic flags and counts;
 *   - the model's epoch is published as it changes: its number and the
 *     highest seen as atomics, the epoch itself as a copy of its value under
 *     loop.shown_lock (ec__node_epoch_copy: the ring, the agent's probe of
 *     its peers);
 *   - the public calls and the keepalive set flags (stop and leaving are
 *     atomic; registration's are under reg.lock) and wake the loop.
 *
 * Locks, and who owns what (each part below says which):
 *   loop.lock      the loop's bell: held only to sleep on loop.cond and to
 *                  ring it (ec__node_wake_sleeper takes it only while the
 *                  loop sleeps, which reads every flag again after it says
 *                  so); nothing is read or written under it;
 *   loop.shown_lock the published epoch (a leaf);
 *   reg.lock       registration (n->reg): the agent's calls about its own
 *                  node and the keepalive's lost lease (a leaf);
 *   ev.rep_lock    this agent's own suspicion reports (any thread), held
 *                  through their etcd write;
 *   feed.qlock     the queue of watch events (a leaf);
 *   ring.lock      the ring thread's sleep (ring.cond);
 *   none           everything else: the coordinator thread alone.
 * Order: loop.lock, then reg.lock (the loop reads registration's flags as it
 * says it sleeps); ev.rep_lock, then reg.lock; every other lock is taken
 * alone.
 * ThreadSanitizer checks the order (tests/tsan.sh: lock-order inversions
 * are reports).
 *
 * Threads: the coordinator thread runs the loop and makes every etcd call
 * that feeds the model (listings, a follower's epoch rebuilt from its
 * delta, the reads an epoch's check needs); the watch threads queue (the
 * leader's root watch reads a split epoch's chunks before it queues the
 * head); the keepalive thread reports a lost lease; the ring's thread
 * (node_ring.c) probes peers and reads their records; the public calls run
 * on the agent's threads.  Before the loop starts, ec_node_start's thread
 * is the coordinator (it lists the job first). */
#ifndef EC_NODE_IMPL_H
#define EC_NODE_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "epoch_check.h"
#include "clock.h"
#include "etcd.h"
#include "keys.h"
#include "model.h"
#include "stop_barrier.h"
#include "node.h"
#include "node_policy.h"
#include "planner.h"
#include "probe.h"
#include "probe_proof.h"
#include "probe_server.h"
#include "records.h"

/* A watch event, queued by its watch thread for the coordinator thread
 * (node_model.c: one allocation holds the key and value after the struct):
 * a put, a deletion, or (a follower's) the epoch's delta. */
typedef enum { EC__QEV_PUT, EC__QEV_DELETE, EC__QEV_DELTA } ec__qev_kind_t;
typedef struct ec__qev {
    struct ec__qev *next;
    ec__qev_kind_t kind;
    int64_t revision;
    ec_kv_t kv;
} ec__qev_t;

/* The node's state, by concern.  Each concern's part is written and read
 * only by the file that owns it (tests/t0050-layering.sh, rule 8); the
 * others reach it through that file's calls (the ec__<concern>_* functions
 * below).  What every concern reads is the context: set before the loop
 * starts and read-only after (o .. run), and the job's model `m`, on the
 * coordinator thread.  Each part says which thread or lock guards it. */

/* node.c: the loop (coordinator thread unless marked) */
struct ec__loop {
    pthread_t thread;
    bool thread_started; /* ec_node_start/ec_node_stop only */
    /* the loop's bell (see the top of this file) */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* any thread: the node stops (ec_node_stop), or leaves (ec_node_leave) */
    atomic_bool stop, leaving;
    /* a pass must plan (dirty), or only run the non-planning checks
     * (touched: a record write the planner does not read, ec_plan_node_equiv) */
    bool dirty, touched;
    bool self_bad;   /* our record was overwritten with what no agent writes */
    int64_t wake_at; /* monotonic ms: a pass by then (ec__node_wake_by); -1 none */
    /* the loop's heartbeat (monotonic ms): the keepalive refreshes the lease
     * only while the loop beats, so a wedged coordinator loses its lease */
    _Atomic int64_t beat_ms;
    /* the loop is (about to be) asleep on `cond`, so a waker must ring:
     * checked against the wakers' flags in both orders (seq_cst), so no
     * wakeup is lost and a waker takes `lock` only to wake a sleeping loop */
    _Atomic bool waiting;
    /* The loop's phase (node_policy.h: ec_node_phase_next), changed only by
     * ec__node_phase from any thread (a compare-and-swap: no lock). */
    _Atomic int phase;
    /* The model's epoch number (0: none) and the highest number it has
     * seen, as it last changed (ec__node_model_changed): what the public
     * calls and our record read. */
    _Atomic uint64_t epoch_now, epoch_seen;
    /* The model's epoch as other threads read it (ec__node_epoch_copy): a
     * copy of its value, made when the model replaces it (epoch_gen), under
     * shown_lock.  shown_src/shown_gen: coordinator thread. */
    pthread_mutex_t shown_lock;
    uint8_t *shown_raw;
    size_t shown_len;
    const void *shown_src;
    uint64_t shown_gen;
    /* what was handed to on_epoch / on_job */
    uint64_t delivered_epoch;
    int64_t delivered_status_rev;
};

/* node_register.c: registration, our record and our lease, under the
 * registration's own `lock` (a leaf: nothing else is taken while it is
 * held).  The agent's calls about its own node (the fence's clock above
 * all) and the keepalive's report of a lost lease take only it: those
 * never wait for the loop.  probe_key: written once before registering,
 * read-only after. */
struct ec__reg {
    pthread_mutex_t lock;
    int64_t lease;
    ec_keepalive_t *ka;
    bool lease_lost; /* the keepalive reported it: the loop registers again */
    bool pending;    /* our record must be written again (a put failed) */
    uint64_t incarnation;
    ec_node_state_t state;
    char *reason;
    char *refused; /* the leader's reason, when it marked our record failed (ec_node_refusal) */
    int64_t registered_at_ms;
    ec_node_boot_t boot;         /* phase 0: not gated */
    uint32_t fence_stops;        /* our record's: times the fence stopped our processes */
    ec_node_progress_t progress; /* our progress summary, written with our record */
    ec_probe_server_t *probe;
    /* the run's probe secret: proves this agent's answers and checks its
     * peers' (probe_proof.h) */
    ec_probe_key_t probe_key;
};

/* node_model.c: what feeds the model (coordinator thread unless marked) */
struct ec__feed {
    bool relist; /* the watches broke or etcd lost its data: list again */
    /* etcd's history going backwards (it lost its data): the highest
     * revision seen (atomic: a watch thread compares a re-created watch's
     * revision with it), and whether to compare it with etcd's now */
    _Atomic int64_t max_rev;
    bool check_history;
    int64_t list_rev;    /* watch events at or below it are in the listing */
    /* Narrow model: the epoch whose suspicion reports are watched, and the
     * revision of their listing */
    uint64_t sus_watched;
    int64_t sus_list_rev;
    ec_watch_t *sus_watch;
    ec_watch_t *watch[5];
    size_t nwatch;
    /* Any thread (atomics): what the watch threads report besides events
     * (an event lost or a compacted watch: list again; a watch broke or was
     * re-created below max_rev: check the history), the CREATED events seen
     * since the watches opened, the events applied to the model, and
     * whether a listing is in (ec_node_watches_created). */
    atomic_bool lost, broken;
    _Atomic int watches_created;
    _Atomic uint64_t watch_events;
    atomic_bool listed;
    /* The watch threads' queue (under qlock, a leaf), applied by the loop
     * (ec__node_drain) before it plans or hands an epoch on: a burst of
     * writes that arrives while one plan runs costs one more plan, not one
     * each (a READY wave of 16,384 records planned per write took the
     * leader 7 s of CPU). */
    pthread_mutex_t qlock;
    ec__qev_t *q_head, *q_tail;
    _Atomic size_t q_len;
    /* the root watch's thread's own: the events of the response it is
     * delivering, queued together at its last (ev->more false) */
    ec__qev_t *st_head, *st_tail;
    size_t st_len;
};

/* node_election.c: campaign and fence (coordinator thread unless marked) */
struct ec__elect {
    bool am_leader; /* changed only through ec__node_set_leader */
    /* am_leader as other threads read it (ec_node_is_leader): no lock */
    atomic_bool leader_pub;
    int64_t my_leader_rev;
    /* Narrow model: whether a member with an older record than ours is
     * alive, read from nodes/ once per absence of the leader key */
    int64_t senior_read_for; /* leader_deleted_rev it was read for; -1 none */
    bool senior_read;
    int64_t leader_absent_since; /* monotonic ms the leader key was first seen absent; -1 */
};

/* node_publish.c: (leader) the planner's inputs over time and what it last
 * said (coordinator thread) */
struct ec__pub {
    _Atomic uint64_t plans; /* times the planner ran (ec_node_plans: any thread) */
    uint64_t fingerprint;
    int64_t fp_since, missing_since;
    bool wrote_final;
    char *last_wait;
    /* the newest failure record, read once, as a line ("node b local rank 1
     * (rank 3) exited with code 3: ..."), and the key of the one an epoch's
     * reason last named: an epoch that re-forms the job after a failure
     * says which */
    char *cause_key, *cause_text, *cause_told;
};

/* node_evict.c: suspicion, eviction and readmission (the coordinator
 * thread), and this agent's own reports (my_rep*: any thread, under
 * rep_lock alone) */
struct ec__evict {
    /* the first epoch seen with the current epoch's member set (restart
     * epochs keep it): reports of it and later ones still count */
    uint64_t members_epoch, members_fp;
    /* members_fp() of the epoch of generation members_fp_gen: computed once
     * per epoch, not on every pass (16,384 ids hashed a pass) */
    uint64_t members_fp_now, members_fp_gen;
    /* suspects probed in the current member set (members_epoch): when, the
     * newest report naming them then, and whether they answered; probed
     * again on a newer report (ec_suspect_probe_due) */
    struct probed {
        char *id;
        int64_t at_ms, rev;
        bool silent;
    } *probed;
    size_t nprobed;
    uint64_t probed_epoch;
    /* (leader) the revision of our last eviction and when (monotonic ms):
     * the planner waits until the model has seen it (the watch delivers the
     * deletion a moment after the transaction returns), so that an epoch
     * planned meanwhile for another reason (a restart) never lists the node
     * just evicted; at most EC_EVICT_SEEN_WAIT_MS (ec__evict_unseen) */
    int64_t evicted_rev, evicted_at_ms;
    /* what this node's agent reported in my_rep_epoch (a comma list): every
     * report of it writes the union (the ring, a dead local process, a
     * follower's confirmation of a silent leader); rep_lock is held through
     * the write, and nothing but registration's lock is taken under it */
    pthread_mutex_t rep_lock;
    uint64_t my_rep_epoch;
    char *my_rep;
    /* Nodes evicted as silent (or found silent on a quorum's reports), held
     * out of the planner's eligible nodes after they register again until
     * they answer a probe */
    struct held {
        char *id, *by;
        int64_t at_ms, probed_ms; /* monotonic; probed_ms -1: not yet */
        int failed;               /* readmission probes unanswered */
        bool answered, told;
    } *held;
    size_t nheld;
};

/* node_hang.c: (leader) hang and straggler detection's memory (coordinator
 * thread) */
struct ec__hang {
    struct ec_hang_seen *seen; /* the first nsorted sorted by id */
    size_t nseen, nsorted, cap;
    char *last; /* the last stalled/suspect line logged */
    /* the last node told its ranks hung, and when (monotonic ms): a hang
     * that moves to another node right after is no node's own */
    char *told_id;
    int64_t told_ms;
    /* monotonic ms a suspect first showed after the job was stalled
     * together (0: none): as it resumes, nodes' summaries arrive up to a
     * second apart (their publish rate), so the first to resume makes the
     * others look hung for a moment */
    int64_t settle_ms;
    uint64_t epoch;   /* the epoch epoch_ms is about */
    int64_t ran_ms;   /* monotonic: the policy's last run (0: none) */
    int64_t at;       /* monotonic: when it is to run again; -1: on the next
                       * pass (a timer of the loop's that, unlike wake_at,
                       * does not make it plan) */
    int64_t epoch_ms; /* monotonic: when the leader first saw it (silence is
                       * never counted from before it) */
};

/* node_ring.c: the thread watching peer agents, asleep on cond (under
 * lock, which guards nothing else) between rounds */
struct ec__ring {
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

struct ec_node {
    /* context: set before the loop starts, read-only after */
    ec_node_opts_t o;
    char *node_id, *host, *job_id, *agent_version;
    uint16_t *ports;
    char **devices;
    ec_keys_t keys;
    char k_node[EC_KEY_MAX], k_leader[EC_KEY_MAX], k_epoch[EC_KEY_MAX], k_status[EC_KEY_MAX],
        k_epochs[EC_KEY_MAX], k_epochd[EC_KEY_MAX];
    ec_etcd_t *c;
    uint64_t run; /* the run of the job this node takes part in */
    ec_model_t m; /* the job's model (model.h): the coordinator thread's */
    /* each concern's own */
    struct ec__loop loop;
    struct ec__reg reg;
    struct ec__feed feed;
    struct ec__elect el;
    struct ec__pub pub;
    struct ec__evict ev;
    struct ec__hang hang;
    struct ec__ring ring;
};

/* the event log (node.c; clocks: util/clock.h) */
void ec__node_emit(ec_node_t *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Feed event e to the phase machine; a change is logged as "+phase <from>
 * -> <to>: <why>".  Any thread. */
void ec__node_phase(ec_node_t *n, ec_phase_event_t e, const char *why);

/* Whether the loop beat recently enough for its lease to be refreshed
 * (the keepalive's gate; arg is the node). */
bool ec__node_loop_alive(void *arg);

/* node_model.c */
/* Where node id's record is in the model (ec_model_node_find). */
static inline size_t ec__node_mnode_find(ec_node_t *n, const char *id, bool *found)
{
    return ec_model_node_find(&n->m, id, found);
}
/* Apply every queued watch event to the model, in order, and what the
 * watch threads flagged (coordinator thread). */
void ec__node_drain(ec_node_t *n);
/* Drop the queue (the root watch stopped). */
void ec__node_queue_clear(ec_node_t *n);
/* Open the watches and list what they cover: the whole job when `wide`
 * (the leader), else a follower's keys.  Coordinator thread. */
int ec__node_sync_model(ec_node_t *n, bool wide, ec_error_t *err);
/* Narrow model: follow the suspicion reports of the current epoch (watch
 * and list epochs/<cur>/suspect/ when the epoch changed).  Coordinator
 * thread.  Returns 0 or an error code (retried). */
int ec__node_follow_suspects(ec_node_t *n, ec_error_t *err);
/* Read every node record (a follower's model has none but its own): a list
 * the caller frees with ec_kv_list_free.  Any thread. */
int ec__node_read_records(ec_node_t *n, ec_kv_list_t *l, ec_error_t *err);
/* Read node `id`'s record into the model; returns whether it exists and
 * decodes. */
bool ec__node_fetch_record(ec_node_t *n, const char *id);
/* A new leader (wide model just listed): if the previous leader's record is
 * gone and said it was leaving just before, count it as left (a follower's
 * model never saw it leave). */
void ec__node_note_gone_leader(ec_node_t *n);
/* Check an epoch whose leadership the model cannot tell (one of the
 * listing, or, in a follower's model, one that came before the leader
 * key's event of its revision and was not followed by it within
 * EC_VERIFY_GRACE_MS), by reading the leader key at the epoch's revision
 * (coordinator thread).  Returns false while it is still
 * unverified (retry later). */
#define EC_VERIFY_GRACE_MS 200
bool ec__node_verify_epoch(ec_node_t *n);
/* ec_probe_many from the coordinator's loop, handing epochs that come
 * meanwhile to on_epoch (node.c).  t[i].ok and rtt_us as ec_probe_many. */
void ec__node_probe(ec_node_t *n, ec_probe_target_t *t, size_t nt, int timeout_ms);
/* Confirm probes (node_evict.c): f attempts at once per target, and more
 * sets while a target's link looks slower than the deadline
 * (coord/core/detector.h; known_rtt_us[i]: the round trip its reporters
 * measured to target i, 0 none; NULL: none known); fills t[i].ok, rtt_us,
 * connected, refused and returns the longest deadline used, in ms.
 * `deliver`: hand epochs on while waiting (ec__node_probe); first_ms: the
 * first set's deadline (0: the floor).  Coordinator thread. */
int64_t ec__node_confirm_probe(ec_node_t *n, ec_probe_target_t *t, size_t nt, int f, bool deliver,
                               int64_t first_ms, const int64_t *known_rtt_us);
/* Read the run's probe secret (runs/<run>/probe_secret), writing a fresh
 * one when this is the run's first agent, into our registration's probe_key (node_register.c).
 * 0 or an EC_* code. */
int ec__node_fetch_secret(ec_node_t *n, ec_error_t *err);
/* Compare etcd's revision now with the highest seen, when a watch asked
 * for it or `force` (coordinator thread); when it went
 * backwards, drop the model's epoch and ask for a fresh listing.  Returns
 * whether it did. */
bool ec__node_check_history(ec_node_t *n, bool force);

/* node_register.c */
int ec__node_do_register(ec_node_t *n, int64_t old_lease, ec_error_t *err);
int ec__node_put_self(ec_node_t *n, ec_error_t *err);

/* node_election.c */
/* Set am_leader and publish it for ec_node_is_leader (coordinator thread). */
void ec__node_set_leader(ec_node_t *n, bool leader);
void ec__node_campaign(ec_node_t *n);
void ec__node_step_down(ec_node_t *n, const char *why);
ec_cmp_t ec__node_fence_leader(ec_node_t *n);
int ec__node_write_status(ec_node_t *n, ec_job_state_t state, const char *reason, uint64_t epoch,
                          uint64_t run, bool fenced);
void ec__node_clear_foreign_leader(ec_node_t *n, int64_t mod_rev);
/* Act on the leader key as the model shows it: campaign, adopt, resign,
 * step down or clear a foreign key (ec_elect_decide). */
void ec__node_elect(ec_node_t *n);

/* node_publish.c (leader only) */
void ec__node_plan_and_act(ec_node_t *n);

/* node_evict.c */
void ec__node_handle_suspicions(ec_node_t *n);
/* Whether node `id` is held out of the planner's eligible nodes: evicted as
 * silent and not answering a probe since. */
bool ec__node_held_out(ec_node_t *n, const char *id);

#define EC_EVICT_SEEN_WAIT_MS 2000

/* node_evict.c: delete member `id`'s record (fenced by our leadership and
 * by the record's mod revision) and revoke its lease: the planner re-forms
 * the job without it; its agent registers again and rejoins. */
int ec__node_evict(ec_node_t *n, const char *id, int64_t lease, int64_t rec_mod,
                   ec_depart_cause_t cause, ec_error_t *err);

/* node_hang.c (leader only): hangs and stragglers from the members'
 * progress summaries (coord/core/hang_policy.h), acted on by eviction. */
void ec__node_check_hangs(ec_node_t *n);
void ec__node_hang_clear(ec_node_t *n);

/* node_ring.c: start the thread that probes this node's successors every
 * o.watch_peers_ms (0, or no probe port: none); join it after `stop` is
 * set and ring_cond broadcast. */
int ec__node_ring_start(ec_node_t *n, ec_error_t *err);
void ec__node_ring_join(ec_node_t *n);

/* The coordinator loop's own timers, in one place (ms): after an etcd read
 * or write that failed, the next try; and the longest the loop sleeps with
 * nothing due (it beats for the keepalive's gate at least this often).
 * The detector's, eviction's and hang policy's timers are their modules'
 * (detector.h, node_evict.c, hang_policy.h); each reaches the loop through
 * ec__node_wake_by. */
#define EC_NODE_RETRY_MS 500
#define EC_NODE_IDLE_MS 1000
/* a publish (or its chunks) that failed: the leader plans again this soon */
#define EC_NODE_PUBLISH_RETRY_MS 200


/* ---- each concern's calls for the others ---------------------------------
 * A concern's part of struct ec_node is named only in its own file; what the
 * others need of it goes through these (tests/t0050-layering.sh, rule 8). */

/* node.c, the loop (coordinator thread unless marked) */
/* Have the loop run a pass by `at` (monotonic ms) at the latest: the one
 * way to set wake_at. */
void ec__node_wake_by(ec_node_t *n, int64_t at);
/* The planner's input changed: the next pass plans. */
void ec__node_mark_dirty(ec_node_t *n);
/* Act on what the model asked for. */
void ec__node_model_effects(ec_node_t *n, const ec_model_effects_t *fx);
/* The model changed: its epoch number, the highest seen and the epoch
 * itself are published for the other threads (ec__node_model_effects does
 * it; a change made without effects calls it). */
void ec__node_model_changed(ec_node_t *n);
/* Any thread: the highest epoch number the model has seen. */
uint64_t ec__node_epoch_seen(ec_node_t *n);
/* Any thread: the model's epoch as last published (a view: its members,
 * or a follower's window of a split epoch's), NULL when it has none or
 * out of memory (*oom set); the caller frees it with ec_epoch_free. */
ec_epoch_t *ec__node_epoch_copy(ec_node_t *n, bool *oom);
/* What the model needs to know of this node. */
ec_model_ctx_t ec__node_model_ctx(const ec_node_t *n);
/* Any thread: the node stops (ec_node_stop); or stops or leaves the job. */
bool ec__node_stopped(const ec_node_t *n);
bool ec__node_stopping(const ec_node_t *n);
/* Any thread: the loop's heartbeat, kept while registration waits; and
 * wake the loop if it sleeps (a watch queued events or set a flag, or
 * registration set one: a lost lease, a record to write again).  Takes the
 * loop's bell only when the loop sleeps. */
void ec__node_beat(ec_node_t *n);
void ec__node_wake_sleeper(ec_node_t *n);
/* Coordinator thread (or ec_node_start's before it): sleep until `ms`
 * passed or the node stops (returns whether it stops); and until done(arg)
 * or the deadline (monotonic ms) or the node stops (returns done(arg)),
 * woken by ec__node_wake_sleeper. */
bool ec__node_pause(ec_node_t *n, int64_t ms);
bool ec__node_wait_until(ec_node_t *n, bool (*done)(void *), void *arg, int64_t deadline);

/* node_register.c: any thread (each call takes registration's own lock, a
 * leaf) unless marked */
void ec__reg_init(ec_node_t *n);                     /* before any thread */
void ec__reg_fini(ec_node_t *n);                     /* after every thread */
int ec__reg_serve_probe(ec_node_t *n, ec_error_t *err); /* ec_node_start */
void ec__reg_abandon(ec_node_t *n); /* ec_node_start failed: revoke our lease */
/* The run's probe verifier (read-only once registered). */
const ec_probe_verifier_t *ec__reg_verify(const ec_node_t *n);
/* Our record must be written again (the loop retries until it is). */
void ec__reg_mark_pending(ec_node_t *n);
/* Our record as a watch or listing brought it says failed, for `reason`:
 * the leader's refusal, unless this agent said so itself (coordinator) */
void ec__reg_note_failed(ec_node_t *n, const char *reason);
bool ec__reg_pending(ec_node_t *n);
bool ec__reg_take_pending(ec_node_t *n);
bool ec__reg_lease_lost(ec_node_t *n);
/* Coordinator thread: our lease was lost; register under a new one. */
int ec__reg_renew(ec_node_t *n, ec_error_t *err);
/* Any thread: write our record as leaving and revoke our lease. */
int ec__reg_leave(ec_node_t *n, ec_error_t *err);

/* node_model.c (coordinator thread unless marked) */
void ec__feed_init(ec_node_t *n); /* before any thread */
void ec__feed_fini(ec_node_t *n); /* after the loop stopped: stops the watches */
/* Whether the model has seen revision rev (a watch event or a listing). */
bool ec__feed_seen(const ec_node_t *n, int64_t rev);
/* The watches broke or etcd lost its data: the loop lists again. */
bool ec__feed_relist(const ec_node_t *n);
/* Any thread: a watch event was lost (out of memory) or could not be
 * read; the loop lists the job again. */
void ec__feed_lost(ec_node_t *n);
/* Any thread: whether the watches queued events or flagged something for
 * the loop. */
bool ec__feed_pending(ec_node_t *n);

/* node_election.c (coordinator thread) */
void ec__elect_init(ec_node_t *n);
bool ec__elect_leads(const ec_node_t *n);
int64_t ec__elect_rev(const ec_node_t *n); /* our leader key's create revision; 0 */

/* node_publish.c */
/* (coordinator thread) We lead from now: the planner's clocks start again. */
void ec__pub_on_lead(ec_node_t *n);
void ec__pub_fini(ec_node_t *n);

/* node_evict.c (coordinator thread) */
/* Whether our last eviction's deletion is still to reach the model (the
 * planner waits for it, at most EC_EVICT_SEEN_WAIT_MS: the loop is woken
 * then). */
bool ec__evict_unseen(ec_node_t *n);
void ec__evict_init(ec_node_t *n); /* before any thread */
void ec__evict_fini(ec_node_t *n);

/* node_hang.c (coordinator thread) */
void ec__hang_init(ec_node_t *n);
/* When the hang policy is to run again (monotonic ms; -1: on the next pass). */
int64_t ec__hang_at(const ec_node_t *n);
/* A pass at `now` runs it: its timer is cleared if due. */
void ec__hang_take_due(ec_node_t *n, int64_t now);

/* node_ring.c */
void ec__ring_init(ec_node_t *n, const pthread_condattr_t *ca);
void ec__ring_wake(ec_node_t *n); /* any thread: stop or leaving changed */
void ec__ring_fini(ec_node_t *n);

#endif
