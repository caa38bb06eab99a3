/* The node coordinator's loop and public calls (see node_impl.h for how the
 * coordinator is split into files). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <time.h>

#include "keys.h"
#include "clock.h"
#include "log.h"
#include "epoch_check.h"
#include "node_impl.h"
#include "suspects.h"

void ec__node_emit(ec_node_t *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ec__node_emit(ec_node_t *n, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    ec_log(EC_LOG_INFO, "%s", buf);
    if (n->o.on_event)
        n->o.on_event(buf, n->o.arg);
}

void ec__node_phase(ec_node_t *n, ec_phase_event_t e, const char *why)
{
    int cur = atomic_load(&n->loop.phase), next;
    do {
        next = (int)ec_node_phase_next((ec_node_phase_t)cur, e);
        if (next == cur)
            return;
    } while (!atomic_compare_exchange_weak(&n->loop.phase, &cur, next));
    ec__node_emit(n, "+phase %s -> %s: %s (%s)", ec_node_phase_name((ec_node_phase_t)cur),
                  ec_node_phase_name((ec_node_phase_t)next), why, ec_phase_event_name(e));
}

ec_node_phase_t ec_node_phase(ec_node_t *n)
{
    return (ec_node_phase_t)atomic_load(&n->loop.phase);
}

/* ---- the loop ------------------------------------------------------------ */

/* Whether st, the job's status at revision rev, may be acted on: a status
 * that ends the run must have been written under the leadership holding the
 * leader key then (ec_status_check): the model's current leadership, or the
 * one a read of the leader key at rev finds.  A refused one is logged; the
 * leader puts the run's running status back.  Coordinator thread. */
static bool status_from_leader(ec_node_t *n, const ec_job_status_t *st, int64_t rev)
{
    if (!ec_job_state_ended(st->state))
        return true;
    bool current = st->leader_rev && n->m.leader_create_rev == st->leader_rev && n->m.leader_id &&
                   st->leader_id && !strcmp(n->m.leader_id, st->leader_id);
    if (current)
        return true;
    ec_kv_t lk;
    bool found = false;
    ec_error_t err = {0};
    int rc = ec_etcd_get_at(n->c, n->k_leader, rev, &lk, &found, NULL, &err);
    if (rc == EC_ECOMPACTED)
        return true; /* nothing left to check it against (as for epochs) */
    if (rc < 0) {
        /* looked at again on the next pass */
        ec_log(EC_LOG_WARN, "cannot check the job status written at revision %" PRId64
                            " against the leader key then: %s; will retry", rev, err.msg);
        if (n->loop.delivered_status_rev == rev)
            n->loop.delivered_status_rev = 0;
        ec__node_wake_by(n, ec_mono_ms() + EC_NODE_RETRY_MS);
        return false;
    }
    char *id = found ? strndup((char *)lk.value, lk.value_len) : NULL;
    ec_leadership_t l = {.create_rev = found ? lk.create_revision : 0, .id = id};
    char why[768];
    bool ok = ec_status_check(st, rev, found ? &l : NULL, why, sizeof(why)) == 0;
    free(id);
    if (found)
        ec_kv_free(&lk);
    if (ok)
        return true;
    ec_log(EC_LOG_ERROR, "%s", why);
    bool lead = ec__elect_leads(n);
    uint64_t epoch = n->m.epoch ? n->m.epoch->number : 0;
    uint64_t run = n->run;
    if (lead && ec__node_write_status(n, EC_JOB_RUNNING, NULL, epoch, run, true) == 0)
        ec__node_emit(n, "+status-restored run %" PRIu64 ": running (epoch %" PRIu64 ")", run,
                      epoch);
    return false;
}

/* Hand on what the model holds that was not handed on yet: its epoch (to
 * on_epoch) and the job's status (to on_job).  The callbacks borrow the
 * model's epoch: they run on this thread, which alone changes it. */
static void deliver(ec_node_t *n)
{
    ec__node_drain(n); /* an epoch may wait in the queue */
    const ec_epoch_t *ep = n->m.epoch;
    if (ep && ep->number > n->loop.delivered_epoch) {
        n->loop.delivered_epoch = ep->number;
        if (ep->run < n->run) {
            ec_log(EC_LOG_DEBUG, "epoch %" PRIu64 " is of run %" PRIu64 ", before ours (%" PRIu64
                                 "): not ours to follow", ep->number, ep->run, n->run);
        } else {
            ec_log(EC_LOG_DEBUG, "+epoch %" PRIu64 " world=%d reason=%s seen", ep->number,
                   ep->world_size, ec_epoch_reason_name(ep->reason));
            if (n->o.on_epoch)
                n->o.on_epoch(ep, n->o.arg);
        }
    }
    if (n->m.status_raw && n->m.status_mod_rev != n->loop.delivered_status_rev) {
        int64_t srev = n->loop.delivered_status_rev = n->m.status_mod_rev;
        ec_job_status_t *st = NULL;
        ec_error_t err = {0};
        if (ec_job_status_decode(n->m.status_raw, n->m.status_raw_len, n->k_status, &st,
                                 &err) == 0) {
            /* the end of an earlier run is not the end of ours; one that
             * does not come from the leadership of its time ends nothing */
            if (n->o.on_job && st->run >= n->run && status_from_leader(n, st, srev))
                n->o.on_job(st, n->o.arg);
        } else {
            ec_log(EC_LOG_ERROR, "ignoring job status: %s", err.msg);
        }
        ec_job_status_free(st);
    }
}

/* ---- the loop's state, for the other concerns --------------------------- */

void ec__node_wake_by(ec_node_t *n, int64_t at)
{
    if (n->loop.wake_at < 0 || n->loop.wake_at > at)
        n->loop.wake_at = at;
}

void ec__node_mark_dirty(ec_node_t *n)
{
    n->loop.dirty = true;
}

void ec__node_model_effects(ec_node_t *n, const ec_model_effects_t *fx)
{
    n->loop.dirty |= fx->dirty;
    n->loop.touched |= fx->touched;
    n->loop.self_bad |= fx->self_bad;
    ec__node_model_changed(n);
}

void ec__node_model_changed(ec_node_t *n)
{
    atomic_store(&n->loop.epoch_now, n->m.epoch ? n->m.epoch->number : 0);
    atomic_store(&n->loop.epoch_seen, n->m.epoch_seen_max);
    if (n->loop.shown_src == n->m.epoch && n->loop.shown_gen == n->m.epoch_gen)
        return;
    /* replaced: its value copied for the other threads (once per epoch) */
    uint8_t *raw = NULL;
    size_t len = 0;
    if (n->m.epoch && n->m.epoch_raw && (raw = malloc(n->m.epoch_raw_len ? n->m.epoch_raw_len : 1))) {
        memcpy(raw, n->m.epoch_raw, n->m.epoch_raw_len);
        len = n->m.epoch_raw_len;
    }
    if (n->m.epoch && !raw)
        return; /* out of memory: tried again on the next change */
    pthread_mutex_lock(&n->loop.shown_lock);
    uint8_t *old = n->loop.shown_raw;
    n->loop.shown_raw = raw;
    n->loop.shown_len = len;
    pthread_mutex_unlock(&n->loop.shown_lock);
    free(old);
    n->loop.shown_src = n->m.epoch;
    n->loop.shown_gen = n->m.epoch_gen;
}

ec_epoch_t *ec__node_epoch_copy(ec_node_t *n, bool *oom)
{
    *oom = false;
    pthread_mutex_lock(&n->loop.shown_lock);
    uint8_t *raw = n->loop.shown_raw ? malloc(n->loop.shown_len ? n->loop.shown_len : 1) : NULL;
    size_t len = n->loop.shown_len;
    bool had = n->loop.shown_raw != NULL;
    if (raw)
        memcpy(raw, n->loop.shown_raw, len);
    pthread_mutex_unlock(&n->loop.shown_lock);
    ec_epoch_t *ep = NULL;
    ec_error_t err = {0};
    if (raw && ec_epoch_decode_view(raw, len, n->k_epoch, &ep, &err) < 0)
        *oom = err.code == EC_ENOMEM; /* else it decoded when the model took it */
    *oom = *oom || (had && !raw);
    free(raw);
    return ep;
}

uint64_t ec__node_epoch_seen(ec_node_t *n)
{
    return atomic_load(&n->loop.epoch_seen);
}

ec_model_ctx_t ec__node_model_ctx(const ec_node_t *n)
{
    return (ec_model_ctx_t){.keys = &n->keys, .node_id = n->node_id, .job_id = n->job_id,
                            .leaving = atomic_load(&((ec_node_t *)n)->loop.leaving)};
}

bool ec__node_stopped(const ec_node_t *n)
{
    return atomic_load(&((ec_node_t *)n)->loop.stop);
}

bool ec__node_stopping(const ec_node_t *n)
{
    return ec__node_stopped(n) || atomic_load(&((ec_node_t *)n)->loop.leaving);
}

void ec__node_beat(ec_node_t *n)
{
    atomic_store(&n->loop.beat_ms, ec_mono_ms());
}

void ec__node_wake_sleeper(ec_node_t *n)
{
    if (atomic_load(&n->loop.waiting)) {
        pthread_mutex_lock(&n->loop.lock);
        pthread_cond_signal(&n->loop.cond);
        pthread_mutex_unlock(&n->loop.lock);
    }
}

/* Sleep on the bell until `until` (monotonic ms) unless ready(arg) holds
 * once the loop says it sleeps (a waker sets what ready reads, then reads
 * `waiting`: one of the two sees the other). */
static void sleep_until(ec_node_t *n, int64_t until, bool (*ready)(void *), void *arg)
{
    int64_t left = until - ec_mono_ms();
    if (left <= 0)
        return;
    struct timespec ts = ec_deadline_ts(left);
    pthread_mutex_lock(&n->loop.lock);
    atomic_store(&n->loop.waiting, true);
    if (!ready(arg) && !ec__node_stopped(n))
        pthread_cond_timedwait(&n->loop.cond, &n->loop.lock, &ts);
    atomic_store(&n->loop.waiting, false);
    pthread_mutex_unlock(&n->loop.lock);
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

bool ec__node_pause(ec_node_t *n, int64_t ms)
{
    int64_t until = ec_mono_ms() + ms;
    while (!ec__node_stopped(n) && ec_mono_ms() < until) {
        ec__node_beat(n);
        sleep_until(n, until, never, NULL);
    }
    return ec__node_stopped(n);
}

bool ec__node_wait_until(ec_node_t *n, bool (*done)(void *), void *arg, int64_t deadline)
{
    while (!done(arg) && !ec__node_stopped(n) && ec_mono_ms() < deadline)
        sleep_until(n, deadline, done, arg);
    return done(arg);
}

bool ec__node_loop_alive(void *arg)
{
    ec_node_t *n = arg;
    /* The loop beats at least once a second when idle; its etcd calls have
     * deadlines shorter than this unless etcd itself is failing, when the
     * lease cannot be refreshed anyway. */
    int64_t limit = (int64_t)n->o.lease_ttl_s * 1000 * 2 / 3;
    if (limit < 1000)
        limit = 1000;
    return ec_mono_ms() - atomic_load(&n->loop.beat_ms) < limit;
}

/* What a pass of the loop is for, read as it wakes. */
typedef struct {
    bool stop;   /* the node stops */
    bool relist; /* the model must be listed again */
    bool lost;   /* our lease was lost (not while leaving) */
    bool quiet;  /* only record writes the planner does not read: no plan */
} pass_t;

/* What registration asks of the loop (its flags, under its own lock): our
 * lease was lost, or our record must be written again (not before
 * retry_at). */
static bool reg_wants_pass(ec_node_t *n, int64_t retry_at, int64_t now)
{
    return (ec__reg_lease_lost(n) && !atomic_load(&n->loop.leaving)) ||
           (ec__reg_pending(n) && (retry_at < 0 || retry_at <= now));
}

/* What wakes a sleeping loop: the watches queued or flagged something, or
 * registration asks for a pass. */
typedef struct {
    ec_node_t *n;
    int64_t retry_at, now;
} wake_t;

static bool wakes(void *arg)
{
    wake_t *w = arg;
    return ec__feed_pending(w->n) || reg_wants_pass(w->n, w->retry_at, w->now);
}

/* Sleep until a pass is due: something changed, our record must be written
 * again, or a timer came due (wake_at, the hang policy's, or retry_at, the
 * retry of a failed pass). */
static pass_t await_pass(ec_node_t *n, int64_t retry_at)
{
    pass_t p = {0};
    for (;;) {
        /* everything the watches queued, at once: one pass and one plan
         * for a burst, however long the last plan took */
        ec__node_drain(n);
        int64_t now = ec_mono_ms();
        if (ec__node_stopped(n) || n->loop.dirty || ec__feed_relist(n) ||
            ec__elect_leads(n) != n->m.wide || reg_wants_pass(n, retry_at, now))
            break;
        int64_t until = now + EC_NODE_IDLE_MS;
        if (n->loop.wake_at >= 0 && n->loop.wake_at < until)
            until = n->loop.wake_at;
        if (retry_at >= 0 && retry_at < until)
            until = retry_at;
        if (until <= now)
            break;
        /* a record write the planner does not read, or the hang
         * policy's own timer: a pass without a plan */
        int64_t hang_at = ec__hang_at(n);
        if (n->loop.touched || (hang_at >= 0 && hang_at <= now)) {
            p.quiet = true;
            break;
        }
        if (hang_at >= 0 && hang_at < until)
            until = hang_at;
        /* asleep from here: an event queued, or a flag set, after the
         * checks in sleep_until wakes us (ec__node_wake_sleeper reads
         * `waiting` after queueing or setting) */
        wake_t w = {n, retry_at, now};
        sleep_until(n, until, wakes, &w);
        ec__node_beat(n);
    }
    p.stop = ec__node_stopped(n);
    p.relist = ec__feed_relist(n);
    p.lost = ec__reg_lease_lost(n) && !atomic_load(&n->loop.leaving);
    n->loop.dirty = n->loop.touched = false;
    int64_t woke = ec_mono_ms();
    if (n->loop.wake_at >= 0 && woke >= n->loop.wake_at) {
        n->loop.wake_at = -1;
        p.quiet = false; /* a timer came due meanwhile: it is the planner's too */
    }
    ec__hang_take_due(n, woke);
    return p;
}

/* Every phase's but registering's: the model current (listed again when
 * asked, or when etcd lost its data; the whole job's while this node leads,
 * a follower's otherwise: node_model.c), its epoch verified, and what it
 * says handed on.  False: retry the pass. */
static bool pass_model(ec_node_t *n, const pass_t *p, ec_error_t *err)
{
    bool relist = p->relist;
    if (ec__node_check_history(n, p->lost)) {
        relist = true;
        ec__node_step_down(n, "etcd lost its data");
    }
    if ((relist || ec__elect_leads(n) != n->m.wide) &&
        ec__node_sync_model(n, ec__elect_leads(n), err) < 0) {
        ec_log(EC_LOG_WARN, "re-listing the job failed: %s; retrying", err->msg);
        return false;
    }
    if (!ec__node_verify_epoch(n))
        return false;
    deliver(n);
    return true;
}

/* A member's pass (follower or leader): our record written again when it
 * must be, the election, and the suspicion reports.  A record write that
 * fails sets *retry_at and the pass goes on.  False: retry the pass. */
static bool pass_member(ec_node_t *n, int64_t *retry_at, ec_error_t *err)
{
    bool self_bad = n->loop.self_bad, self_pending = ec__reg_take_pending(n);
    n->loop.self_bad = false;
    if (self_bad)
        ec_log(EC_LOG_ERROR, "our record %s was overwritten with a value no agent writes "
                             "(another tool?); writing it again", n->k_node);
    if ((self_bad || self_pending) && ec__node_put_self(n, err) < 0) {
        /* an incarnation bump or a state change that did not reach etcd
         * would leave the job waiting for it: keep trying */
        ec_log(EC_LOG_WARN, "cannot write our record: %s; retrying", err->msg);
        ec__reg_mark_pending(n);
        *retry_at = ec_mono_ms() + EC_NODE_RETRY_MS;
    }
    ec__node_elect(n);
    if (ec__elect_leads(n) && !n->m.wide) {
        /* Just won: list and watch the whole job before planning. */
        if (ec__node_sync_model(n, true, err) < 0) {
            ec_log(EC_LOG_WARN, "listing the job as its new leader failed: %s; retrying",
                   err->msg);
            return false;
        }
        ec__node_note_gone_leader(n);
    }
    if (ec__node_follow_suspects(n, err) < 0)
        ec_log(EC_LOG_WARN, "cannot follow the suspicion reports: %s; retrying", err->msg);
    ec__node_handle_suspicions(n);
    return true;
}

/* The leader's pass, on its model of the whole job: plan (unless the pass
 * is quiet) and check the members' progress (every pass). */
static void pass_leader(ec_node_t *n, const pass_t *p)
{
    if (!n->m.wide)
        return;
    if (!p->quiet)
        ec__node_plan_and_act(n);
    ec__node_check_hangs(n);
}

/* The coordinator loop: one pass per wake-up, chosen by the phase
 * (node_policy.h; its changes are logged as "+phase a -> b: why"):
 *   registering  register again under a fresh lease, then as a follower;
 *   follower     the model, our record, the election, the suspicions;
 *   leader       the same, then plan and check hangs;
 *   leaving      the model only: epochs are still handed on;
 *   stopped      the loop ends. */
static void *loop(void *arg)
{
    ec_node_t *n = arg;
    ec_error_t err = {0};
    int64_t retry_at = -1;
    for (;;) {
        ec__node_beat(n);
        pass_t p = await_pass(n, retry_at);
        if (p.stop)
            break;
        if (retry_at >= 0 && ec_mono_ms() < retry_at && !p.relist)
            continue;
        retry_at = -1;
        if (p.lost) {
            ec__node_phase(n, EC_PEV_LEASE_LOST, "our lease was lost; registering again");
            ec__node_step_down(n, "our lease was lost");
        }
        bool ok = true;
        switch (ec_node_phase(n)) {
        case EC_PHASE_REGISTERING:
            if (ec__reg_renew(n, &err) < 0) {
                ec_log(EC_LOG_WARN, "re-registering failed: %s; retrying", err.msg);
                ok = false;
                break;
            }
            /* registered (+phase registering -> follower): a member's pass */
            __attribute__((fallthrough));
        case EC_PHASE_FOLLOWER:
        case EC_PHASE_LEADER:
            ok = pass_model(n, &p, &err) && pass_member(n, &retry_at, &err);
            if (ok && ec_node_phase(n) == EC_PHASE_LEADER)
                pass_leader(n, &p);
            break;
        case EC_PHASE_LEAVING:
            ok = pass_model(n, &p, &err);
            break;
        case EC_PHASE_STOPPED:
            return NULL;
        }
        if (!ok)
            retry_at = ec_mono_ms() + EC_NODE_RETRY_MS;
    }
    return NULL;
}

/* Probe targets from the loop without holding epochs back: a probe of a
 * frozen agent runs to its deadline (250 ms), and an epoch that comes
 * meanwhile is handed to on_epoch at once (every 10 ms at most), so a
 * renumbered rank is stopped as soon as its node learns of the epoch. */
void ec__node_probe(ec_node_t *n, ec_probe_target_t *t, size_t nt, int timeout_ms)
{
    ec_probe_batch_t *b = ec_probe_begin(t, nt);
    if (!b)
        return;
    int64_t deadline = ec_mono_us() + (int64_t)timeout_ms * 1000;
    for (;;) {
        int64_t slice = ec_mono_us() + 10000;
        if (ec_probe_wait(b, slice < deadline ? slice : deadline) == 0 || ec_mono_us() >= deadline)
            break;
        deliver(n);
    }
    ec_probe_collect(b, deadline);
}

/* ---- public -------------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Whether an agent of run `run` is alive in the job: a node record of that
 * run (or one that does not decode: not ours to judge) on a lease, or the
 * leader key.  < 0: etcd could not be read. */
static int run_alive(ec_node_t *n, uint64_t run, ec_error_t *err)
{
    char prefix[EC_KEY_MAX];
    ec_key_nodes_prefix(&n->keys, prefix, sizeof(prefix));
    ec_kv_list_t l = {0};
    int rc = ec_etcd_get_prefix(n->c, prefix, 0, &l, err);
    if (rc < 0)
        return rc;
    int alive = 0;
    for (size_t i = 0; i < l.n && !alive; i++) {
        ec_node_rec_t *r = NULL;
        if (!l.kvs[i].lease)
            continue; /* no agent writes a record without a lease */
        alive = ec_node_rec_decode(l.kvs[i].value, l.kvs[i].value_len, NULL, &r, NULL) < 0 ||
                r->run == run;
        ec_node_rec_free(r);
    }
    ec_kv_list_free(&l);
    if (!alive) {
        ec_kv_t kv;
        bool found = false;
        if ((rc = ec_etcd_get(n->c, n->k_leader, &kv, &found, NULL, err)) < 0)
            return rc;
        alive = found;
        if (found)
            ec_kv_free(&kv);
    }
    return alive;
}

/* How long no agent of a running run must be seen before a new launch
 * takes it for over: agents that lost their leases (etcd away past their
 * TTL) register again within a second of reaching etcd. */
#define EC_RUN_GONE_MS 2000

/* A run that says running but has no agent left (every one stopped, killed
 * or lost) is over: mark it interrupted, with when and why, in a
 * transaction that holds only if nobody changed the status and nobody
 * leads meanwhile.  1: marked (or someone else did: *st re-read by the
 * caller), 0: an agent of it is alive (join it), < 0: etcd. */
static int end_interrupted(ec_node_t *n, const ec_job_status_t *st, int64_t status_mod,
                           ec_error_t *err)
{
    int64_t deadline = ec_mono_ms() + EC_RUN_GONE_MS;
    for (;;) {
        int alive = run_alive(n, st->run, err);
        if (alive != 0)
            return alive < 0 ? alive : 0;
        if (ec_mono_ms() >= deadline)
            break;
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL); /* a bounded wait for agents re-registering, not a sync */
    }
    char why[512];
    snprintf(why, sizeof(why), "no agent of run %llu was left (no node record of it and no "
             "leader for %d ms; last epoch %llu): its agents were stopped or lost; node %s found "
             "it so when it was launched again", (unsigned long long)st->run, EC_RUN_GONE_MS,
             (unsigned long long)st->epoch, n->node_id);
    ec_job_status_t over = {.state = EC_JOB_INTERRUPTED, .reason = why, .epoch = st->epoch,
                            .updated_at_ms = ec_wall_ms(), .updated_by = n->node_id,
                            .run = st->run};
    void *buf = NULL;
    size_t len = 0;
    int rc = ec_job_status_encode(&over, &buf, &len, err);
    if (rc < 0)
        return rc;
    ec_cmp_t cm[2] = {{.key = n->k_status, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                       .number = status_mod},
                      {.key = n->k_leader, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL}};
    ec_op_t put = {.type = EC_OP_PUT, .key = n->k_status, .value = buf, .value_len = len};
    ec_txn_result_t r;
    rc = ec_etcd_txn(n->c, cm, 2, &put, 1, NULL, 0, &r, err);
    free(buf);
    if (rc < 0)
        return rc;
    if (r.succeeded)
        ec__node_emit(n, "+run-interrupted %llu: %s", (unsigned long long)st->run, why);
    ec_txn_result_free(&r);
    return 1;
}

/* The run this node takes part in: the current one, or the next when the
 * job's status says the last run ended (a job id launched again), or when
 * it says running but no agent of it is left (interrupted: every agent was
 * stopped; the status would otherwise say running forever and pin the old
 * run's --np and epoch). */
static int find_run(ec_node_t *n, ec_error_t *err)
{
    n->run = 1;
    for (int attempt = 0; attempt < 3; attempt++) {
        ec_kv_t kv;
        bool found = false;
        int rc = ec_etcd_get(n->c, n->k_status, &kv, &found, NULL, err);
        if (rc < 0 || !found)
            return rc;
        ec_job_status_t *st = NULL;
        ec_error_t derr = {0};
        if (ec_job_status_decode(kv.value, kv.value_len, kv.key, &st, &derr) < 0) {
            ec_log(EC_LOG_ERROR, "ignoring the job status: %s", derr.msg);
            ec_kv_free(&kv);
            return 0;
        }
        int64_t mod = kv.mod_revision;
        ec_kv_free(&kv);
        if (st->state == EC_JOB_RUNNING) {
            rc = end_interrupted(n, st, mod, err);
            uint64_t run = st->run;
            ec_job_status_free(st);
            if (rc < 0)
                return rc;
            if (rc == 0) {
                /* An agent is alive: join its run, unless the status moved
                 * meanwhile (another launch found the run over first). */
                int64_t now_mod = 0;
                if ((rc = ec_etcd_get(n->c, n->k_status, &kv, &found, NULL, err)) < 0)
                    return rc;
                if (found) {
                    now_mod = kv.mod_revision;
                    ec_kv_free(&kv);
                }
                if (now_mod == mod) {
                    n->run = run;
                    return 0;
                }
            }
            continue; /* read what it says now */
        }
        bool ended = ec_job_state_ended(st->state);
        n->run = ended ? st->run + 1 : st->run;
        if (ended)
            ec__node_emit(n, "+run %llu: job %s %s in run %llu; this launch starts a new run",
                          (unsigned long long)n->run, n->job_id,
                          st->state == EC_JOB_COMPLETED ? "completed"
                          : st->state == EC_JOB_FAILED ? "failed" : "was interrupted",
                          (unsigned long long)st->run);
        ec_job_status_free(st);
        return 0;
    }
    return ec_errorf(err, EC_EUNAVAILABLE, "job %s's status kept changing while this node "
                     "looked for its run; try again", n->job_id);
}

ec_node_t *ec_node_start(const ec_node_opts_t *o, ec_error_t *err)
{
    if (!o || !o->etcd || !o->job_id || !o->node_id || !o->host || o->nproc < 1 || !o->ports) {
        ec_errorf(err, EC_EINVAL, "ec_node_start: etcd, job_id, node_id, host, nproc and ports "
                                  "are required");
        return NULL;
    }
    if (ec_node_id_check(o->node_id, err) < 0 || !ec_host_valid(o->host)) {
        if (err && !err->code)
            ec_errorf(err, EC_EINVAL, "bad host '%s'", o->host);
        return NULL;
    }
    ec_node_t *n = calloc(1, sizeof(*n));
    if (!n) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    memcpy(&n->o, o, o->size < sizeof(n->o) ? o->size : sizeof(n->o));
    if (n->o.lease_ttl_s < 2)
        n->o.lease_ttl_s = n->o.lease_ttl_s <= 0 ? 10 : 2;
    n->c = o->etcd;
    n->node_id = strdup(o->node_id);
    n->host = strdup(o->host);
    n->job_id = strdup(o->job_id);
    n->agent_version = dup_or_null(o->agent_version);
    n->ports = calloc((size_t)o->nproc, sizeof(uint16_t));
    memcpy(n->ports, o->ports, (size_t)o->nproc * sizeof(uint16_t));
    if (o->ndevices > 0) {
        n->devices = calloc((size_t)o->ndevices, sizeof(char *));
        for (int i = 0; i < o->ndevices; i++)
            n->devices[i] = strdup(o->device_ids[i]);
    }
    n->o.node_id = n->node_id;
    n->loop.wake_at = -1;
    ec__reg_init(n);
    ec__evict_init(n);
    ec__elect_init(n);
    ec__pub_on_lead(n); /* the planner's clocks start now */
    ec__hang_init(n);
    pthread_mutex_init(&n->loop.lock, NULL);
    pthread_mutex_init(&n->loop.shown_lock, NULL);
    ec__feed_init(n);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->loop.cond, &ca);
    ec__ring_init(n, &ca);
    pthread_condattr_destroy(&ca);
    if (ec_keys_init(&n->keys, o->etcd_prefix, o->job_id, err) < 0)
        goto fail;
    ec_key_node(&n->keys, n->node_id, n->k_node, sizeof(n->k_node));
    ec_key_leader(&n->keys, n->k_leader, sizeof(n->k_leader));
    ec_key_epoch(&n->keys, n->k_epoch, sizeof(n->k_epoch));
    ec_key_epoch_delta(&n->keys, n->k_epochd, sizeof(n->k_epochd));
    ec_key_status(&n->keys, n->k_status, sizeof(n->k_status));
    ec_key_epochs_prefix(&n->keys, n->k_epochs, sizeof(n->k_epochs));
    if (find_run(n, err) < 0 || ec__node_fetch_secret(n, err) < 0)
        goto fail;
    if (ec__node_do_register(n, 0, err) < 0)
        goto fail;
    /* After registering: a duplicate node id is reported as such, not as a
     * busy probe port. */
    if (ec__reg_serve_probe(n, err) < 0)
        goto fail;
    if (ec__node_sync_model(n, false, err) < 0)
        goto fail;
    /* set before the thread runs: it shares a word with the flags the loop
     * reads (a write after pthread_create raced with those reads, TSan) */
    n->loop.thread_started = true;
    if (pthread_create(&n->loop.thread, NULL, loop, n) != 0) {
        n->loop.thread_started = false;
        ec_errorf(err, EC_ESYS, "cannot start the coordinator thread");
        goto fail;
    }
    if (ec__node_ring_start(n, err) < 0)
        goto fail;
    return n;
fail:
    ec__reg_abandon(n);
    ec_node_stop(n);
    return NULL;
}

uint64_t ec_node_epoch_floor(ec_node_t *n)
{
    uint64_t e = atomic_load(&n->loop.epoch_now), seen = atomic_load(&n->loop.epoch_seen);
    return (seen > e ? seen : e) + 1;
}

int ec_node_leave(ec_node_t *n, ec_error_t *err)
{
    ec__node_phase(n, EC_PEV_LEAVE, "this node leaves the job");
    atomic_store(&n->loop.leaving, true);
    ec__ring_wake(n); /* a leaving node watches nobody */
    int rc = ec__reg_leave(n, err);
    ec__node_emit(n, "-node %s leaving: lease revoked", n->node_id);
    return rc;
}

int ec_node_record_failure(ec_node_t *n, const ec_failure_t *f, ec_error_t *err)
{
    void *buf;
    size_t len;
    /* Stamped with this agent's run, so status can tell this run's root
     * cause from an earlier run's failures. */
    ec_failure_t stamped = *f;
    if (!stamped.run)
        stamped.run = ec_node_run(n);
    int rc = ec_failure_encode(&stamped, &buf, &len, err);
    if (rc < 0)
        return rc;
    char key[EC_KEY_MAX];
    ec_key_failure(&n->keys, (uint64_t)f->time_ms, n->node_id, f->local_rank, key, sizeof(key));
    rc = ec_etcd_put(n->c, key, buf, len, 0, NULL, err);
    free(buf);
    return rc;
}

/* Where a member's agent answers, when its epoch does not say: its record
 * in a listing of nodes/. */
typedef struct {
    ec_node_t *n;
    const ec_kv_list_t *recs;
} port_ctx_t;

static uint16_t member_port(const char *id, void *arg)
{
    port_ctx_t *x = arg;
    return ec_probe_port_in(&x->n->keys, x->recs, id);
}

int ec_node_probe_members(ec_node_t *n, int timeout_ms, char ***dead, ec_error_t *err)
{
    *dead = NULL;
    bool oom = false;
    ec_epoch_t *ep = ec__node_epoch_copy(n, &oom);
    if (!ep)
        return oom ? ec_errorf(err, EC_ENOMEM, "out of memory") : 0;
    /* The members' probe ports are in the epoch; one written by an older
     * leader does not say them: then they are in the members' records,
     * read once per failure (a follower's model holds no other node's
     * record, and the leader's is the coordinator thread's). */
    ec_kv_list_t recs = {0};
    bool known = ec_probe_ports_known(ep, n->node_id, EC_RING_WATCHERS);
    if (!known && ec__node_read_records(n, &recs, err) < 0) {
        ec_epoch_free(ep);
        return err->code;
    }
    port_ctx_t x = {n, &recs};
    int nd = ec_probe_members(ep, n->node_id, EC_RING_WATCHERS, known ? NULL : member_port, &x,
                              ec__reg_verify(n), timeout_ms, dead);
    if (nd < 0)
        ec_errorf(err, nd, "out of memory probing the members' agents");
    ec_epoch_free(ep);
    if (!known)
        ec_kv_list_free(&recs);
    return nd;
}

void ec_node_free_ids(char **ids, int n)
{
    ec_ids_free(ids, n);
}

void ec_node_stop(ec_node_t *n)
{
    if (!n)
        return;
    ec__node_phase(n, EC_PEV_STOP, "the coordinator stops");
    atomic_store(&n->loop.stop, true);
    pthread_mutex_lock(&n->loop.lock);
    pthread_cond_broadcast(&n->loop.cond);
    pthread_mutex_unlock(&n->loop.lock);
    ec__ring_wake(n);
    ec__node_ring_join(n);
    if (n->loop.thread_started)
        pthread_join(n->loop.thread, NULL);
    ec__feed_fini(n);
    ec__reg_fini(n);
    ec_model_free(&n->m);
    ec__evict_fini(n);
    ec__node_hang_clear(n);
    ec__pub_fini(n);
    for (int i = 0; n->devices && i < n->o.ndevices; i++)
        free(n->devices[i]);
    free(n->devices);
    free(n->ports);
    free(n->node_id);
    free(n->host);
    free(n->job_id);
    free(n->agent_version);
    free(n->loop.shown_raw);
    pthread_mutex_destroy(&n->loop.shown_lock);
    pthread_mutex_destroy(&n->loop.lock);
    pthread_cond_destroy(&n->loop.cond);
    ec__ring_fini(n);
    free(n);
}

uint64_t ec_node_run(ec_node_t *n)
{
    /* no lock: set by ec_node_start before any thread, never changed */
    return n->run;
}

uint64_t ec_node_epoch_number(ec_node_t *n)
{
    return atomic_load(&n->loop.epoch_now);
}

