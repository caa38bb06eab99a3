/* Following the job's epochs.
 *
 * The epoch key is read once; then the watch of its deltas (epochd,
 * coord/core/epoch_delta.h: the new epoch rebuilt from the one held, or the
 * epoch key read at the delta's revision when it cannot be) runs on the
 * etcd client's thread, so a change costs each process a few hundred bytes,
 * not the whole record.  Each newer
 * epoch replaces w->latest, wakes whoever waits for one (ecw_rebuild, a
 * collective whose peer died) and, when the communicator in use or being
 * built belongs to an older epoch, aborts it at once: a collective blocked
 * on a dead or silent peer then returns instead of waiting for its timeout.
 *
 * The service thread does the slow work off the training thread: it writes
 * per-epoch timing records and re-lists the epoch key when etcd compacted
 * the watch's revision away. */
#include "ecw_impl.h"
#include "clock.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "epoch_check.h"
#include "epoch_delta.h"
#include "epoch_fetch.h"
#include "log.h"

/* Caller holds nothing.  Aborts the communicator if it is older than the
 * newest epoch. */
static void abort_if_stale(ecw_t *w)
{
    uint64_t latest = atomic_load(&w->latest_num);
    pthread_mutex_lock(&w->comm_mu);
    uint64_t target = atomic_load(&w->target_num);
    if (w->comm && target && target < latest) {
        w->be->abort(w->comm);
        int64_t now = ec_wall_us();
        pthread_mutex_unlock(&w->comm_mu);
        ecw__log(w, ECW_LOG_INFO, "-comm epoch %" PRIu64 " aborted: epoch %" PRIu64
                 " published", target, latest);
        pthread_mutex_lock(&w->mu);
        if (w->latest && w->latest->number == latest && !w->latest_abort_us)
            w->latest_abort_us = now; /* goes into the next epoch's record */
        pthread_mutex_unlock(&w->mu);
        return;
    }
    pthread_mutex_unlock(&w->comm_mu);
}

/* Take ownership of ep; keep it if it is newer than what we have. */
static void adopt(ecw_t *w, ec_epoch_t *ep)
{
    pthread_mutex_lock(&w->mu);
    if (w->latest && ep->number <= w->latest->number) {
        pthread_mutex_unlock(&w->mu);
        ec_epoch_free(ep);
        return;
    }
    ec_epoch_free(w->latest);
    w->latest = ep;
    w->latest_seen_us = ec_wall_us();
    w->latest_abort_us = 0;
    atomic_store(&w->latest_num, ep->number);
    pthread_cond_broadcast(&w->cv);
    int world = ep->world_size;
    uint64_t n = ep->number;
    pthread_mutex_unlock(&w->mu);
    ecw__log(w, ECW_LOG_INFO, "+epoch %" PRIu64 " world=%d seen", n, world);
    abort_if_stale(w);
}

/* Whether the epoch in kv may be applied: it names our job and was written
 * under the leader key that was current at its revision (epoch_check.h, the
 * rule the node coordinator applies too), read here at that revision.
 * 1: yes; 0: no (logged); -1: cannot tell now (err set). */
static int epoch_ok(ecw_t *w, const ec_kv_t *kv, const ec_epoch_t *ep, ec_error_t *err)
{
    char key[EC_KEY_MAX];
    if (ec_key_leader(&w->keys, key, sizeof(key)) < 0) {
        ec_errorf(err, EC_EINVAL, "cannot build the leader key");
        return -1;
    }
    ec_kv_t lk;
    bool found = false;
    int rc = ec_etcd_get_at(w->etcd, key, kv->mod_revision, &lk, &found, NULL, err);
    if (rc == EC_ECOMPACTED) {
        /* Older than etcd's history: nothing to check it against (the
         * coordinator accepts it too, see node_model.c). */
        ecw__log(w, ECW_LOG_WARN, "epoch %" PRIu64 " was written at revision %" PRId64 ", which "
                 "etcd compacted: its writer cannot be checked; accepting it", ep->number,
                 kv->mod_revision);
        return 1;
    }
    if (rc < 0) {
        ec_error_prefix(err, "checking epoch %" PRIu64 " against the leader key", ep->number);
        return -1;
    }
    ec_leadership_t l = {.create_rev = found ? lk.create_revision : 0,
                         .id = found ? (char *)lk.value : NULL};
    char why[768];
    int ok = ec_epoch_check(ep, w->o.job_id, kv->mod_revision, found ? &l : NULL, why,
                            sizeof(why)) == 0;
    if (found)
        ec_kv_free(&lk);
    if (!ok)
        ecw__log(w, ECW_LOG_WARN, "%s", why);
    return ok;
}

/* Ask the service thread to read the epoch again and re-watch. */
static void restart_watch(ecw_t *w)
{
    pthread_mutex_lock(&w->mu);
    w->watch_restart = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* The epoch an epochd event describes (coord/core/epoch_delta.h), as the
 * epoch key's value at the event's revision: rebuilt from the epoch we hold,
 * else read from the epoch key.  malloc'd into *out; false: nothing to
 * apply (logged, or a re-read asked for). */
static bool epoch_from_delta(ecw_t *w, const ec_watch_event_t *ev, void **out, size_t *out_len)
{
    pthread_mutex_lock(&w->mu);
    ec_epoch_t *base = w->latest ? ec_epoch_dup(w->latest) : NULL;
    pthread_mutex_unlock(&w->mu);
    uint64_t num = 0;
    ec_error_t err = {0};
    int rc = ec_epoch_delta_apply(base, ev->kv->value, ev->kv->value_len, &num, out, out_len, &err);
    ec_epoch_free(base);
    if (rc < 0) {
        ecw__log(w, ECW_LOG_WARN, "ignoring an epoch delta: %s", err.msg);
        return false;
    }
    if (rc == 1)
        return true;
    if (num && num <= atomic_load(&w->latest_num))
        return false; /* no newer than ours: no read */
    char key[EC_KEY_MAX];
    ec_kv_t kv;
    bool found = false;
    if (ec_key_epoch(&w->keys, key, sizeof(key)) < 0 ||
        ec_etcd_get_at(w->etcd, key, ev->revision, &kv, &found, NULL, &err) < 0) {
        ecw__log(w, ECW_LOG_WARN, "cannot read epoch %" PRIu64 ": %s; reading the epoch again",
                 num, err.msg);
        restart_watch(w);
        return false;
    }
    bool ok = found && kv.mod_revision == ev->revision;
    if (!ok)
        ecw__log(w, ECW_LOG_WARN, "ignoring an epoch delta at revision %" PRId64 ": the epoch key "
                 "was not written with it (another tool?)", ev->revision);
    else if ((*out = malloc(kv.value_len ? kv.value_len : 1))) {
        memcpy(*out, kv.value, kv.value_len);
        *out_len = kv.value_len;
    }
    if (found)
        ec_kv_free(&kv);
    return ok && *out;
}

static void on_watch(const ec_watch_event_t *ev, void *arg)
{
    ecw_t *w = arg;
    if ((ev->type == EC_WATCH_PUT || ev->type == EC_WATCH_DELETE) &&
        ev->revision > atomic_load(&w->seen_rev))
        atomic_store(&w->seen_rev, ev->revision);
    if (ev->type == EC_WATCH_PUT) {
        /* The watch is on epochd, the epoch's delta from the one before
         * (a few hundred bytes for a loss, not the record): every process of
         * every node follows it. */
        void *raw = NULL;
        size_t len = 0;
        if (!epoch_from_delta(w, ev, &raw, &len))
            return;
        char ekey[EC_KEY_MAX];
        ec_key_epoch(&w->keys, ekey, sizeof(ekey));
        ec_kv_t ekv = {.key = ekey, .key_len = strlen(ekey), .value = raw, .value_len = len,
                       .mod_revision = ev->revision};
        ec_epoch_t *ep = NULL;
        ec_error_t err = {0};
        /* a split epoch's head (no base to apply the delta to): read whole */
        int drc = ec_epoch_fetch(w->etcd, &w->keys, raw, len, ekey, &ep, NULL, NULL, &err);
        free(raw);
        ekv.value = NULL;
        if (drc < 0) {
            ecw__log(w, ECW_LOG_WARN, "ignoring an epoch record: %s", err.msg);
            return;
        }
        /* Cheap first: an epoch no newer than ours is dropped without a read. */
        uint64_t have = atomic_load(&w->latest_num);
        int ok = ep->number > have ? epoch_ok(w, &ekv, ep, &err) : 0;
        if (ok < 0) {
            /* Cannot tell now: the service thread lists again and checks. */
            ecw__log(w, ECW_LOG_WARN, "%s; reading the epoch again", err.msg);
            pthread_mutex_lock(&w->mu);
            w->watch_restart = true;
            pthread_cond_broadcast(&w->cv);
            pthread_mutex_unlock(&w->mu);
        }
        if (ok <= 0) {
            ec_epoch_free(ep);
            return;
        }
        adopt(w, ep);
    } else if (ev->type == EC_WATCH_CREATED) {
        /* etcd came back with a revision below one already seen: it lost
         * its data (restarted empty), and this watch waits for revisions
         * the new store may not reach for a long time.  List again. */
        if (ev->revision > 0 && ev->revision < atomic_load(&w->seen_rev)) {
            ecw__log(w, ECW_LOG_WARN, "etcd's revision went back from %" PRId64 " to %" PRId64
                     " (its data was lost); reading the epoch again",
                     atomic_load(&w->seen_rev), ev->revision);
            atomic_store(&w->seen_rev, ev->revision);
            pthread_mutex_lock(&w->mu);
            w->watch_restart = true;
            pthread_cond_broadcast(&w->cv);
            pthread_mutex_unlock(&w->mu);
        } else if (ev->revision > atomic_load(&w->seen_rev)) {
            atomic_store(&w->seen_rev, ev->revision);
        }
    } else if (ev->type == EC_WATCH_COMPACTED) {
        pthread_mutex_lock(&w->mu);
        w->watch_restart = true;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

/* Read the epoch key and (re)start the watch right after the read. */
static int relist(ecw_t *w, ec_error_t *err)
{
    char key[EC_KEY_MAX];
    if (ec_key_epoch(&w->keys, key, sizeof(key)) < 0)
        return ec_errorf(err, EC_EINVAL, "cannot build the epoch key");
    ec_kv_t kv;
    bool found = false;
    int64_t rev = 0;
    int rc = ec_etcd_get(w->etcd, key, &kv, &found, &rev, err);
    if (rc < 0)
        return ec_error_prefix(err, "reading the job's epoch '%s'", key);
    atomic_store(&w->seen_rev, rev);
    if (found) {
        ec_epoch_t *ep = NULL;
        rc = ec_epoch_fetch(w->etcd, &w->keys, kv.value, kv.value_len, key, &ep, NULL, NULL, err);
        int ok = rc < 0 ? -1 : epoch_ok(w, &kv, ep, err);
        ec_kv_free(&kv);
        if (ok < 0) {
            ec_epoch_free(ep);
            return rc < 0 ? rc : EC_EUNAVAILABLE;
        }
        if (ok)
            adopt(w, ep);
        else
            ec_epoch_free(ep);
    }
    /* then follow its deltas (epochd) from the revision read */
    char dkey[EC_KEY_MAX];
    if (ec_key_epoch_delta(&w->keys, dkey, sizeof(dkey)) < 0)
        return ec_errorf(err, EC_EINVAL, "cannot build the epoch delta key");
    w->watch = ec_watch_start(w->etcd, dkey, false, rev + 1, on_watch, w, err);
    if (!w->watch)
        return ec_error_prefix(err, "watching the job's epoch '%s'", dkey);
    return 0;
}

static void write_timing(ecw_t *w, const ecw__timing_t *t)
{
    ec_worker_timing_t rec = {
        .epoch = t->epoch,
        .rank = t->rank,
        .node_id = w->o.node_id,
        .local_rank = w->o.local_rank,
        .epoch_seen_at_us = t->seen_us,
        .comm_aborted_at_us = t->aborted_us,
        .comm_ready_at_us = t->ready_us,
        .state_synced_at_us = t->synced_us,
        .first_collective_at_us = t->first_us,
        .comm_method = (char *)t->method,
        .shrink_us = t->shrink_us,
        .init_us = t->init_us,
    };
    ec_error_t err = {0};
    void *buf = NULL;
    size_t len = 0;
    char key[EC_KEY_MAX];
    if (ec_key_epoch_timing(&w->keys, t->epoch, t->rank, key, sizeof(key)) < 0 ||
        ec_worker_timing_encode(&rec, &buf, &len, &err) < 0 ||
        ecw__put(w, key, buf, len, &err) < 0)
        ecw__log(w, ECW_LOG_WARN, "cannot record the timings of epoch %" PRIu64 ": %s",
                 t->epoch, err.msg[0] ? err.msg : "bad key");
    free(buf);
}

static void *service(void *arg)
{
    ecw_t *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stopping && !w->timing.dirty && !w->watch_restart) {
            struct timespec ts = ec_deadline_ts(1000);
            pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        }
        if (w->timing.dirty) {
            ecw__timing_t t = w->timing;
            w->timing.dirty = false;
            pthread_mutex_unlock(&w->mu);
            write_timing(w, &t);
            pthread_mutex_lock(&w->mu);
        }
        if (w->stopping)
            break;
        if (w->watch_restart) {
            w->watch_restart = false;
            pthread_mutex_unlock(&w->mu);
            ec_watch_stop(w->watch);
            w->watch = NULL;
            ec_error_t err = {0};
            /* Until it succeeds, epochs are missed: retry each second. */
            while (relist(w, &err) < 0) {
                ecw__log(w, ECW_LOG_WARN, "re-listing the epoch after a compaction: %s",
                         err.msg);
                pthread_mutex_lock(&w->mu);
                struct timespec ts = ec_deadline_ts(1000);
                if (!w->stopping)
                    pthread_cond_timedwait(&w->cv, &w->mu, &ts);
                bool stop = w->stopping;
                pthread_mutex_unlock(&w->mu);
                if (stop)
                    break;
            }
            pthread_mutex_lock(&w->mu);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int ecw__follow_start(ecw_t *w, ec_error_t *err)
{
    int rc = relist(w, err);
    if (rc < 0)
        return rc;
    if (pthread_create(&w->svc, NULL, service, w) != 0) {
        ec_watch_stop(w->watch);
        w->watch = NULL;
        return ec_errorf(err, EC_ESYS, "cannot start the worker library's service thread: %s",
                         strerror(errno));
    }
    w->svc_started = true;
    return 0;
}

void ecw__follow_stop(ecw_t *w)
{
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->svc_started)
        pthread_join(w->svc, NULL);
    w->svc_started = false;
    ec_watch_stop(w->watch); /* no callback runs after it returns */
    w->watch = NULL;
}

bool ecw__api_enter(ecw_t *w)
{
    pthread_mutex_lock(&w->mu);
    bool ok = !atomic_load(&w->finalizing);
    if (ok)
        w->api_calls++;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

void ecw__api_leave(ecw_t *w)
{
    pthread_mutex_lock(&w->mu);
    if (--w->api_calls == 0)
        pthread_cond_broadcast(&w->cv); /* finalize may wait for it */
    pthread_mutex_unlock(&w->mu);
}

bool ecw__api_drain(ecw_t *w, int timeout_ms)
{
    int64_t deadline = ec_mono_ms() + timeout_ms;
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->cv); /* they see finalizing and leave */
    while (w->api_calls > 0 && ec_mono_ms() < deadline)
        ecw__cond_wait_until(&w->cv, &w->mu, deadline);
    bool done = w->api_calls == 0;
    pthread_mutex_unlock(&w->mu);
    return done;
}

/* The watcher thread's wait: on w->cv, which adopt() (a newer epoch), the
 * fence (a change either way) and finalize broadcast; it also wakes at the
 * moment the fence's bound says it is up, should the fence's threads be
 * late.  No polling. */
int ecw_wait_epoch(ecw_t *w, uint64_t after, int timeout_ms, uint64_t *latest, ecw_error_t *uerr)
{
    ec_error_t err = {0};
    if (latest)
        *latest = w ? atomic_load(&w->latest_num) : 0;
    if (!w)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EINVAL, "ecw_wait_epoch: NULL handle"));
    if (!ecw__api_enter(w))
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EABORTED, "ecw_wait_epoch: the handle "
                                              "is being finalized"));
    int64_t t0 = ec_mono_ms();
    int64_t deadline = t0 + (timeout_ms > 0 ? timeout_ms : 0);
    int rc;
    uint64_t seen;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        seen = atomic_load(&w->latest_num);
        if (atomic_load(&w->finalizing) || w->stopping) {
            rc = EC_EABORTED;
            break;
        }
        if (seen > after) {
            rc = 0;
            break;
        }
        if (ecw__fence_up(w)) {
            rc = ECW_EUNCONFIRMED;
            break;
        }
        if (ec_mono_ms() >= deadline) {
            rc = EC_ETIMEDOUT;
            break;
        }
        int64_t due = ecw__fence_due_ms(w);
        ecw__cond_wait_until(&w->cv, &w->mu, due < deadline ? due : deadline);
    }
    pthread_mutex_unlock(&w->mu);
    if (latest)
        *latest = seen;
    if (rc == EC_EABORTED)
        ec_errorf(&err, rc, "ecw_wait_epoch: the handle is being finalized");
    else if (rc == ECW_EUNCONFIRMED)
        ecw__fence_check(w, "ecw_wait_epoch", &err);
    else if (rc == EC_ETIMEDOUT)
        ec_errorf(&err, rc, "ecw_wait_epoch: no epoch after %" PRIu64 " within %d ms (the "
                  "newest is %" PRIu64 "): the membership has not changed; wait again", after,
                  timeout_ms > 0 ? timeout_ms : 0, seen);
    ecw__api_leave(w); /* w may be freed from here on */
    return ecw__out(uerr, &err, rc);
}

bool ecw__wait_newer(ecw_t *w, uint64_t after, int64_t deadline_ms)
{
    pthread_mutex_lock(&w->mu);
    for (;;) {
        if (atomic_load(&w->latest_num) > after) {
            pthread_mutex_unlock(&w->mu);
            return true;
        }
        int64_t left = deadline_ms - ec_mono_ms();
        if (left <= 0 || w->stopping || atomic_load(&w->finalizing))
            break;
        if (left > 1000)
            left = 1000;
        struct timespec ts = ec_deadline_ts(left);
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
    return false;
}

void ecw__timing_mark(ecw_t *w, uint64_t epoch, int stage)
{
    int64_t now = ec_wall_us();
    pthread_mutex_lock(&w->mu);
    if (w->timing.epoch == epoch) {
        int64_t *f = stage == ECW__T_READY    ? &w->timing.ready_us
                     : stage == ECW__T_SYNCED ? &w->timing.synced_us
                                              : &w->timing.first_us;
        if (!*f) {
            *f = now;
            w->timing.dirty = true;
            pthread_cond_broadcast(&w->cv);
        }
    }
    pthread_mutex_unlock(&w->mu);
}

void ecw__timing_build(ecw_t *w, uint64_t epoch, const char *method, int64_t shrink_us,
                       int64_t init_us)
{
    pthread_mutex_lock(&w->mu);
    if (w->timing.epoch == epoch) {
        snprintf(w->timing.method, sizeof(w->timing.method), "%s", method ? method : "");
        w->timing.shrink_us = shrink_us;
        w->timing.init_us = init_us;
        /* written with the ready mark that follows */
    }
    pthread_mutex_unlock(&w->mu);
}
