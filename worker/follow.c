/* Following the job's epochs.
 *
 * The epoch key and the leader key are read once, in one transaction; then
 * the watch of the epoch's deltas (epochd, coord/core/epoch_delta.h: the new
 * epoch rebuilt from the one held, or the epoch key read at the delta's
 * revision when it cannot be) runs on the etcd client's thread, so a change
 * costs each process a few hundred bytes, not the whole record.
 *
 * Which epochs are applied (epoch_check.h): one written under the leader
 * key current at its revision.  The same watch (one stream,
 * ec_watch_start_keys) follows the leader key, whose events keep a log of
 * the leaderships (ec_leader_log_t), complete up to leader_through.
 * The leader's epoch transaction puts the leader key again unchanged
 * (coord/node/node_publish.c), so the event of the same revision tells who
 * held the key when the epoch was written, without a read: an epoch that
 * comes before that event (the two keys' events are not ordered between
 * them) waits for it (w->pend).  Only an epoch that no
 * such event follows within ECW__VERIFY_GRACE_MS (another tool's), or one
 * older than the log, costs a read of the leader key at its revision: at
 * 16,384 nodes x 8 processes, one read per process per change would be
 * 131,072 reads of etcd per change.  Each newer
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

/* Whether ep, stored at mod_rev, may be applied, by a read of the leader
 * key at that revision: for an epoch the leader log cannot judge.
 * 1: yes; 0: no (logged); -1: cannot tell now (err set). */
static int epoch_ok_read(ecw_t *w, int64_t mod_rev, const ec_epoch_t *ep, ec_error_t *err)
{
    char key[EC_KEY_MAX];
    if (ec_key_leader(&w->keys, key, sizeof(key)) < 0) {
        ec_errorf(err, EC_EINVAL, "cannot build the leader key");
        return -1;
    }
    ecw__log(w, ECW_LOG_DEBUG, "epoch %" PRIu64 " at revision %" PRId64 ": no event of the "
             "leader key says who wrote it; reading the leader key at that revision",
             ep->number, mod_rev);
    ec_kv_t lk;
    bool found = false;
    int rc = ec_etcd_get_at(w->etcd, key, mod_rev, &lk, &found, NULL, err);
    if (rc == EC_ECOMPACTED) {
        /* Older than etcd's history: nothing to check it against (the
         * coordinator accepts it too, see coord/node/model.c). */
        ecw__log(w, ECW_LOG_WARN, "epoch %" PRIu64 " was written at revision %" PRId64 ", which "
                 "etcd compacted: its writer cannot be checked; accepting it", ep->number,
                 mod_rev);
        return 1;
    }
    if (rc < 0) {
        ec_error_prefix(err, "checking epoch %" PRIu64 " against the leader key", ep->number);
        return -1;
    }
    char *id = found ? strndup((const char *)lk.value, lk.value_len) : NULL;
    ec_leadership_t l = {.create_rev = found ? lk.create_revision : 0, .id = id};
    char why[768];
    int ok = ec_epoch_check(ep, w->o.job_id, mod_rev, found ? &l : NULL, why,
                            sizeof(why)) == 0;
    free(id);
    if (found)
        ec_kv_free(&lk);
    if (!ok)
        ecw__log(w, ECW_LOG_WARN, "%s", why);
    return ok;
}

/* Whether ep, stored at mod_rev, may be applied, from the leader log
 * alone (mu held): 1 yes, 0 no (why set), -1 the log cannot tell (the
 * leader key's events have not reached mod_rev, or it is older than the
 * log). */
static int epoch_ok_log(ecw_t *w, int64_t mod_rev, const ec_epoch_t *ep, char *why, size_t len)
{
    const ec_leadership_t *ls = NULL;
    if (mod_rev > w->leader_through || ec_leader_log_at(&w->llog, mod_rev, &ls) < 0)
        return -1;
    return ec_epoch_check(ep, w->o.job_id, mod_rev, ls, why, len) == 0;
}

/* Say so when what was read of an epoch is a view of a split one. */
static void log_view(ecw_t *w, const ec_epoch_t *ep)
{
    if (ep && ep->present != ep->nmembers)
        ecw__log(w, ECW_LOG_INFO, "epoch %" PRIu64 ": read %d of its %d members (split in "
                 "chunks of %d)", ep->number, ep->present, ep->nmembers, ep->chunk_members);
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
    /* The delta is from the epoch key's previous value: an epoch waiting
     * for its leader event if there is one, else the one applied (a
     * forged epoch waiting is not the base of the leader's next delta). */
    uint64_t num = 0;
    ec_error_t err = {0};
    int rc = 0;
    /* newest waiting first, then the one applied */
    for (int i = 0; rc == 0; i++) {
        pthread_mutex_lock(&w->mu);
        int k = w->npend - 1 - i;
        bool last = k < 0;
        const ec_epoch_t *b = last ? w->latest : w->pend[k].ep;
        ec_epoch_t *base = b ? ec_epoch_dup(b) : NULL;
        pthread_mutex_unlock(&w->mu);
        if (base && base->present != base->nmembers) {
            /* a view of a split epoch (epoch_fetch.h): rebuilt and checked
             * chunk by chunk, kept as a view */
            ec_epoch_t *nv = NULL;
            rc = ec_epoch_delta_apply_view(base, ev->kv->value, ev->kv->value_len,
                                           w->o.node_id, &num, &nv, &err);
            if (rc == 1 && ec_epoch_encode_view(nv, out, out_len, &err) < 0)
                rc = 0;
            if (rc == 1)
                ecw__log(w, ECW_LOG_INFO, "epoch %" PRIu64 ": view of %d of its %d members "
                         "rebuilt from its delta", num, nv->present, nv->nmembers);
            ec_epoch_free(nv);
        } else if (base || last) {
            rc = ec_epoch_delta_apply(base, ev->kv->value, ev->kv->value_len, &num, out,
                                      out_len, &err);
        }
        ec_epoch_free(base);
        if (last)
            break;
    }
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

/* What the watch's stream events do (both keys): note the highest
 * revision, and re-list when etcd lost its data or compacted the watch's
 * revision away. */
static void on_stream(ecw_t *w, const ec_watch_event_t *ev)
{
    if ((ev->type == EC_WATCH_PUT || ev->type == EC_WATCH_DELETE) &&
        ev->revision > atomic_load(&w->seen_rev))
        atomic_store(&w->seen_rev, ev->revision);
    if (ev->type == EC_WATCH_CREATED) {
        /* etcd came back with a revision below one already seen: it lost
         * its data (restarted empty), and this watch waits for revisions
         * the new store may not reach for a long time.  List again. */
        if (ev->revision > 0 && ev->revision < atomic_load(&w->seen_rev)) {
            ecw__log(w, ECW_LOG_WARN, "etcd's revision went back from %" PRId64 " to %" PRId64
                     " (its data was lost); reading the epoch again",
                     atomic_load(&w->seen_rev), ev->revision);
            atomic_store(&w->seen_rev, ev->revision);
            restart_watch(w);
        } else if (ev->revision > atomic_load(&w->seen_rev)) {
            atomic_store(&w->seen_rev, ev->revision);
        }
    } else if (ev->type == EC_WATCH_COMPACTED) {
        restart_watch(w);
    }
}

/* Apply ep if ok > 0 (logging why not otherwise); takes ep. */
static void settle(ecw_t *w, ec_epoch_t *ep, int ok, const char *why)
{
    if (ok > 0) {
        adopt(w, ep);
        return;
    }
    if (why && *why)
        ecw__log(w, ECW_LOG_WARN, "%s", why);
    ec_epoch_free(ep);
}

/* A leader-key event: log the leadership; the epochs that waited for the
 * event of their revision are judged now. */
static void on_leader(const ec_watch_event_t *ev, void *arg)
{
    ecw_t *w = arg;
    on_stream(w, ev);
    if (ev->type != EC_WATCH_PUT && ev->type != EC_WATCH_DELETE)
        return;
    ecw__pending_t done[ECW__PEND_MAX];
    int ok[ECW__PEND_MAX], ndone = 0;
    char why[ECW__PEND_MAX][768];
    pthread_mutex_lock(&w->mu);
    if (ev->type == EC_WATCH_PUT)
        ec_leader_log_put(&w->llog, ev->kv->create_revision, (const char *)ev->kv->value,
                          ev->kv->value_len);
    else
        ec_leader_log_delete(&w->llog, ev->revision);
    if (ev->revision > w->leader_through)
        w->leader_through = ev->revision;
    /* oldest first: the log covers a prefix of them */
    while (w->npend > 0) {
        why[ndone][0] = '\0';
        int r = epoch_ok_log(w, w->pend[0].rev, w->pend[0].ep, why[ndone], sizeof(why[0]));
        if (r < 0)
            break;
        ok[ndone] = r;
        done[ndone++] = w->pend[0];
        memmove(&w->pend[0], &w->pend[1], (size_t)(--w->npend) * sizeof(w->pend[0]));
    }
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < ndone; i++)
        settle(w, done[i].ep, ok[i], why[i]);
}

/* An epochd event: the epoch its delta describes, judged from the leader
 * log, or left to wait for the leader key's event of its revision. */
static void on_watch(const ec_watch_event_t *ev, void *arg)
{
    ecw_t *w = arg;
    on_stream(w, ev);
    if (ev->type != EC_WATCH_PUT)
        return;
    /* The watch is on epochd, the epoch's delta from the one before
     * (a few hundred bytes for a loss, not the record): every process of
     * every node follows it. */
    void *raw = NULL;
    size_t len = 0;
    if (!epoch_from_delta(w, ev, &raw, &len))
        return;
    char ekey[EC_KEY_MAX];
    ec_key_epoch(&w->keys, ekey, sizeof(ekey));
    ec_epoch_t *ep = NULL;
    ec_error_t err = {0};
    /* a split epoch's head (no base to apply the delta to): its view is
     * read (the head, this node's index bucket and its own chunk) */
    ec_epoch_split_t info;
    bool head = ec_epoch_head_info(raw, len, NULL, &info, NULL) == 1 && info.nbuckets > 0;
    if (head)
        ec_epoch_split_free(&info);
    int drc = ec_epoch_fetch_view(w->etcd, &w->keys, raw, len, ekey, w->o.node_id, 0, &ep, &err);
    free(raw);
    if (head)
        log_view(w, ep);
    if (drc < 0) {
        ecw__log(w, ECW_LOG_WARN, "ignoring an epoch record: %s", err.msg);
        return;
    }
    /* Cheap first: an epoch no newer than ours is dropped. */
    if (ep->number <= atomic_load(&w->latest_num)) {
        ec_epoch_free(ep);
        return;
    }
    char why[768] = "";
    uint64_t dropped = 0;
    pthread_mutex_lock(&w->mu);
    int ok = epoch_ok_log(w, ev->revision, ep, why, sizeof(why));
    if (ok < 0 && ev->revision > w->leader_through) {
        /* The leader key's event of this revision has not come yet: wait
         * for it, or for the grace and a read (the
         * service thread). */
        if (w->npend == ECW__PEND_MAX) {
            dropped = w->pend[0].ep->number;
            ec_epoch_free(w->pend[0].ep);
            memmove(&w->pend[0], &w->pend[1], (size_t)(--w->npend) * sizeof(w->pend[0]));
        }
        w->pend[w->npend++] = (ecw__pending_t){ep, ev->revision, ec_mono_ms()};
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        if (dropped)
            ecw__log(w, ECW_LOG_WARN, "epoch %" PRIu64 " dropped unchecked: %d newer epochs "
                     "came before the leader key's event of its revision", dropped,
                     ECW__PEND_MAX);
        return;
    }
    pthread_mutex_unlock(&w->mu);
    if (ok < 0) {
        /* Older than the log: read. */
        ok = epoch_ok_read(w, ev->revision, ep, &err);
        if (ok < 0) {
            /* Cannot tell now: the service thread lists again and checks. */
            ecw__log(w, ECW_LOG_WARN, "%s; reading the epoch again", err.msg);
            restart_watch(w);
        }
        why[0] = '\0'; /* logged by the read */
    }
    settle(w, ep, ok, why);
}

/* The service thread: the epoch waiting for its leader event waited out
 * the grace; read the leader key at its revision (mu held, released
 * meanwhile). */
static void verify_pending(ecw_t *w)
{
    ec_epoch_t *ep = ec_epoch_dup(w->pend[0].ep);
    int64_t rev = w->pend[0].rev;
    pthread_mutex_unlock(&w->mu);
    ec_error_t err = {0};
    int ok = ep ? epoch_ok_read(w, rev, ep, &err) : -1;
    pthread_mutex_lock(&w->mu);
    /* resolved meanwhile by the leader event: drop ours */
    bool still = w->npend > 0 && w->pend[0].rev == rev;
    if (still) {
        ec_epoch_free(w->pend[0].ep);
        memmove(&w->pend[0], &w->pend[1], (size_t)(--w->npend) * sizeof(w->pend[0]));
        if (ok < 0)
            w->watch_restart = true;
    }
    pthread_mutex_unlock(&w->mu);
    if (still && ok < 0)
        ecw__log(w, ECW_LOG_WARN, "%s; reading the epoch again", err.msg);
    if (still && ok > 0)
        adopt(w, ep);
    else
        ec_epoch_free(ep);
    pthread_mutex_lock(&w->mu);
}

/* Forget the epochs waiting (mu held). */
static void drop_pending(ecw_t *w)
{
    for (int i = 0; i < w->npend; i++)
        ec_epoch_free(w->pend[i].ep);
    w->npend = 0;
}

/* The watch of the leader key and epochd (one stream): each key's events
 * in order, the two keys' interleaved as etcd sends them. */
static void on_event(const ec_watch_event_t *ev, void *arg)
{
    ecw_t *w = arg;
    if (ev->type != EC_WATCH_PUT && ev->type != EC_WATCH_DELETE) {
        on_stream(w, ev);
        return;
    }
    char lkey[EC_KEY_MAX];
    if (ec_key_leader(&w->keys, lkey, sizeof(lkey)) >= 0 && ev->kv->key_len == strlen(lkey) &&
        !memcmp(ev->kv->key, lkey, ev->kv->key_len))
        on_leader(ev, w);
    else
        on_watch(ev, w);
}

static void stop_watch(ecw_t *w);

/* Read the epoch key and the leader key (one transaction: one revision)
 * and (re)start the watches right after the read. */
static int relist(ecw_t *w, ec_error_t *err)
{
    char key[EC_KEY_MAX], lkey[EC_KEY_MAX], dkey[EC_KEY_MAX];
    if (ec_key_epoch(&w->keys, key, sizeof(key)) < 0 ||
        ec_key_leader(&w->keys, lkey, sizeof(lkey)) < 0 ||
        ec_key_epoch_delta(&w->keys, dkey, sizeof(dkey)) < 0)
        return ec_errorf(err, EC_EINVAL, "cannot build the job's keys");
    stop_watch(w); /* a failed relist's, when retried */
    ec_op_t get[2] = {{.type = EC_OP_GET, .key = key}, {.type = EC_OP_GET, .key = lkey}};
    ec_txn_result_t r = {0};
    int rc = ec_etcd_txn(w->etcd, NULL, 0, get, 2, NULL, 0, &r, err);
    if (rc < 0)
        return ec_error_prefix(err, "reading the job's epoch '%s'", key);
    int64_t rev = r.revision;
    const ec_kv_t *kv = r.n > 0 && r.results[0].kvs.n ? &r.results[0].kvs.kvs[0] : NULL;
    const ec_kv_t *lk = r.n > 1 && r.results[1].kvs.n ? &r.results[1].kvs.kvs[0] : NULL;
    atomic_store(&w->seen_rev, rev);
    pthread_mutex_lock(&w->mu);
    ec_leader_log_reset(&w->llog, rev);
    if (lk)
        ec_leader_log_put(&w->llog, lk->create_revision, (const char *)lk->value, lk->value_len);
    w->leader_through = rev;
    drop_pending(w);
    pthread_mutex_unlock(&w->mu);
    if (kv) {
        ec_epoch_t *ep = NULL;
        char why[768] = "";
        rc = ec_epoch_fetch_view(w->etcd, &w->keys, kv->value, kv->value_len, key, w->o.node_id,
                                 0, &ep, err);
        log_view(w, ep);
        int ok = -1;
        if (rc == 0) {
            pthread_mutex_lock(&w->mu);
            ok = epoch_ok_log(w, kv->mod_revision, ep, why, sizeof(why));
            pthread_mutex_unlock(&w->mu);
            /* written under a leadership gone by now: read */
            if (ok < 0)
                ok = epoch_ok_read(w, kv->mod_revision, ep, err);
        }
        if (ok < 0) {
            ec_epoch_free(ep);
            ec_txn_result_free(&r);
            return rc < 0 ? rc : EC_EUNAVAILABLE;
        }
        settle(w, ep, ok, why);
    }
    ec_txn_result_free(&r);
    /* then follow the leader key and the epoch's deltas (epochd) from the
     * revision read: one watch stream for both; no previous values (etcd
     * would read one per event and watcher) */
    const char *wkeys[2] = {lkey, dkey};
    w->watch = ec_watch_start_keys(w->etcd, wkeys, 2, rev + 1, EC_WATCH_NO_PREV_KV, on_event, w,
                                   err);
    if (!w->watch)
        return ec_error_prefix(err, "watching the job's epoch '%s' and leader key '%s'", dkey,
                               lkey);
    return 0;
}

/* Stop the watch: no callback runs after it returns. */
static void stop_watch(ecw_t *w)
{
    ec_watch_stop(w->watch);
    w->watch = NULL;
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
        for (;;) {
            if (w->stopping || w->timing.dirty || w->watch_restart)
                break;
            int64_t wait = 1000;
            if (w->npend) {
                int64_t left = w->pend[0].since_ms + ECW__VERIFY_GRACE_MS - ec_mono_ms();
                if (left <= 0)
                    break;
                if (left < wait)
                    wait = left;
            }
            struct timespec ts = ec_deadline_ts(wait);
            pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        }
        if (!w->stopping && w->npend &&
            ec_mono_ms() >= w->pend[0].since_ms + ECW__VERIFY_GRACE_MS)
            verify_pending(w);
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
            stop_watch(w);
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
        stop_watch(w);
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
    stop_watch(w); /* no callback runs after it returns */
    pthread_mutex_lock(&w->mu);
    drop_pending(w);
    ec_leader_log_reset(&w->llog, 0);
    pthread_mutex_unlock(&w->mu);
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
