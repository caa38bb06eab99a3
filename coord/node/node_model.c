/* The job model of one node coordinator.  The leader's holds every key of
 * the job, fed by one watch of the job's root opened before the listing it
 * starts from.  A follower's holds only what a follower needs: the leader
 * key, the epoch, the job status and its own record, each watched alone,
 * and the current epoch's suspicion reports (a follower deposes a silent
 * leader on a majority of them); node-record churn never reaches it, so a
 * change costs etcd O(N) bytes, not O(N^2) (tests/bench/bench_scale). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "epoch_delta.h"
#include "epoch_fetch.h"
#include "clock.h"
#include "keys.h"
#include "log.h"
#include "node_impl.h"
#include "node_policy.h"

/* Apply one key's change to the model (model.c: the pure core) and act on
 * what it asks for. */
static void model_apply(ec_node_t *n, bool put, const ec_kv_t *kv, const ec_kv_t *prev)
{
    ec_model_ctx_t ctx = ec__node_model_ctx(n);
    ec_model_event_t ev = {.put = put, .kv = kv, .prev = prev, .mono_ms = ec_mono_ms(),
                           .wall_ms = ec_wall_ms()};
    ec_model_effects_t fx = {0};
    ec_model_apply(&n->m, &ctx, &ev, &fx);
    ec__node_model_effects(n, &fx);
    if (put && fx.self_failed) {
        bool found = false;
        size_t i = ec__node_mnode_find(n, n->node_id, &found);
        if (found && n->m.nodes[i].rec)
            ec__reg_note_failed(n, n->m.nodes[i].rec->reason);
    }
}

/* Whether the history key of epoch number exists (*in); false if it cannot
 * be read. */
static bool in_history(ec_node_t *n, uint64_t number, bool *in, ec_error_t *err)
{
    char key[EC_KEY_MAX];
    ec_kv_t kv;
    *in = false;
    if (number == 0 || ec_key_epoch_history(&n->keys, number, key, sizeof(key)) < 0)
        return true;
    if (ec_etcd_get(n->c, key, &kv, in, NULL, err) < 0)
        return false;
    if (*in)
        ec_kv_free(&kv);
    return true;
}

/* The pending epoch (at rev) skips the numbers above last: refused, unless
 * the history shows them (ec_epoch_gap_check); believed, it goes on to the
 * leadership check.  false when the history cannot be read. */
static bool verify_gap(ec_node_t *n, int64_t rev, uint64_t last, ec_error_t *err)
{
    ec_epoch_t *ep = NULL;
    bool ok = n->m.verify_pending && n->m.verify_rev == rev &&
              ec_epoch_decode_view(n->m.verify_raw, n->m.verify_len, n->k_epoch, &ep, NULL) == 0;
    if (!ok)
        return true; /* none pending at rev, or none that decodes */
    bool self = false, prev = false, own = false;
    if (!in_history(n, ep->number, &self, err) ||
        (!self && !in_history(n, ep->number - 1, &prev, err)) ||
        (!self && !prev && !in_history(n, last, &own, err))) {
        ec_epoch_free(ep);
        return false;
    }
    char why[768];
    int rc = ec_epoch_gap_check(ep, last, self, prev, own, why, sizeof(why));
    if (rc < 0)
        ec_log(EC_LOG_ERROR, "%s", why);
    ec_model_effects_t fx = {0};
    ec_model_gap_done(&n->m, rev, rc < 0, &fx);
    ec__node_model_effects(n, &fx);
    ec_epoch_free(ep);
    return true;
}

bool ec__node_verify_epoch(ec_node_t *n)
{
    if (!n->m.verify_pending)
        return true;
    /* A follower's epoch newer than its leader log: the leader's own epoch
     * transaction touches the leader key, whose event resolves it at once;
     * only an epoch nobody touched the leader key with (another tool's)
     * waits out the grace and costs a read. */
    int64_t left = n->m.verify_since_ms + EC_VERIFY_GRACE_MS - ec_mono_ms();
    if (!n->m.wide && !n->m.verify_gap && n->m.verify_rev > n->m.leader_through && left > 0) {
        ec__node_wake_by(n, ec_mono_ms() + left);
        return true;
    }
    int64_t rev = n->m.verify_rev;
    uint64_t gap = n->m.verify_gap;
    ec_error_t err = {0};
    if (gap) {
        if (!verify_gap(n, rev, gap, &err)) {
            ec_log(EC_LOG_WARN, "cannot read the job's history to check an epoch that skips "
                                "numbers: %s; will retry", err.msg);
            return false;
        }
        if (!n->m.verify_pending || n->m.verify_rev != rev) /* refused */
            return true; /* no leader read for it */
    }
    ec_kv_t lk;
    bool found = false;
    int rc = ec_etcd_get_at(n->c, n->k_leader, rev, &lk, &found, NULL, &err);
    if (rc < 0 && rc != EC_ECOMPACTED) {
        ec_log(EC_LOG_WARN, "cannot check the epoch written at revision %" PRId64
                            " against the leader key then: %s; will retry", rev, err.msg);
        return false;
    }
    char *id = rc == 0 && found ? strndup((char *)lk.value, lk.value_len) : NULL;
    ec_leadership_t l = {.create_rev = rc == 0 && found ? lk.create_revision : 0, .id = id};
    ec_model_ctx_t ctx = ec__node_model_ctx(n);
    ec_model_effects_t fx = {0};
    ec_model_verify_done(&n->m, &ctx, rev, rc == 0 && found ? &l : NULL, rc == EC_ECOMPACTED, &fx);
    ec__node_model_effects(n, &fx);
    free(id);
    if (rc == 0)
        ec_kv_free(&lk);
    return true;
}

/* Whether key is one of the current epoch's suspicion reports. */
static bool is_suspect_key(ec_node_t *n, const ec_kv_t *kv)
{
    uint64_t num = 0;
    return ec_key_parse_epoch(&n->keys, kv->key, kv->key_len, &num) == EC_KEY_EPOCH_WORKER &&
           strstr(kv->key, "/suspect/") != NULL;
}

/* What the model keeps of an epoch kv (the epoch key's, at any
 * revision): of a split epoch's head, the leader (wide) reads the whole
 * epoch (its chunks, epoch_fetch.h), a follower a view (its own chunk and
 * the next: ec_epoch_fetch_view), into *whole; a whole record needs
 * nothing (returns 0, *whole NULL).  Returns -1 when the epoch cannot be
 * read: its parts are gone or replaced (a newer epoch follows: skipped) or
 * etcd failed (*relist set).  Any thread (the root watch's reads the
 * leader's). */
static int whole_epoch(ec_node_t *n, bool wide, const ec_kv_t *kv, void **whole, size_t *wlen,
                       bool *relist)
{
    *whole = NULL;
    *wlen = 0;
    ec_epoch_split_t info;
    if (ec_epoch_head_info(kv->value, kv->value_len, NULL, &info, NULL) != 1)
        return 0; /* whole, or not an epoch: the model says what it is */
    ec_epoch_split_free(&info);
    ec_epoch_t *ep = NULL;
    ec_error_t err = {0};
    int rc;
    if (wide) {
        rc = ec_epoch_fetch(n->c, &n->keys, kv->value, kv->value_len, n->k_epoch, &ep, whole,
                            wlen, &err);
    } else if ((rc = ec_epoch_fetch_view(n->c, &n->keys, kv->value, kv->value_len, n->k_epoch,
                                         n->node_id, EC_RING_WATCHERS, &ep, &err)) == 0) {
        rc = ec_epoch_encode_view(ep, whole, wlen, &err);
        if (rc == 0)
            ec_log(EC_LOG_INFO, "epoch %" PRIu64 ": read %d of its %d members (split in chunks "
                   "of %d; %zu bytes kept)", ep->number, ep->present, ep->nmembers,
                   ep->chunk_members, *wlen);
    }
    ec_epoch_free(ep);
    if (rc == 0)
        return 0;
    if (rc == EC_EUNAVAILABLE || rc == EC_ETIMEDOUT) {
        ec_log(EC_LOG_WARN, "cannot read epoch %" PRIu64 "'s chunks: %s; listing again",
               info.number, err.msg);
        *relist = true;
    } else {
        ec_log(EC_LOG_WARN, "ignoring epoch %" PRIu64 " at revision %" PRId64 ": %s",
               info.number, kv->mod_revision, err.msg);
    }
    return -1;
}

/* A follower's epoch arrives as a delta from the epoch it holds
 * (epoch_delta.h): rebuilt here, or read from the epoch key at the delta's
 * revision when it cannot be (no base, another base, a digest that does not
 * match), then applied as the epoch key's value at that revision would be.
 * ev: the queued delta (ec__node_drain). */
static void apply_delta(ec_node_t *n, const ec__qev_t *ev)
{
    if (n->m.wide || ev->revision <= n->feed.list_rev)
        return;
    const ec_epoch_t *base = n->m.epoch;
    void *full = NULL;
    size_t flen = 0;
    uint64_t num = 0;
    ec_error_t err = {0};
    int rc;
    if (base && base->present != base->nmembers) {
        /* a view of a split epoch: rebuild our window, checked per chunk */
        ec_epoch_t *nv = NULL;
        rc = ec_epoch_delta_apply_view(base, ev->kv.value, ev->kv.value_len, n->node_id, &num,
                                       &nv, &err);
        if (rc == 1 && ec_epoch_encode_view(nv, &full, &flen, &err) < 0)
            rc = 0;
        ec_epoch_free(nv);
    } else {
        rc = ec_epoch_delta_apply(base, ev->kv.value, ev->kv.value_len, &num, &full, &flen,
                                  &err);
    }
    if (rc == 1)
        ec_log(EC_LOG_INFO, "epoch %" PRIu64 ": rebuilt from its delta (%zu bytes instead of %zu)",
               num, ev->kv.value_len, flen);
    bool relist = false;
    if (rc < 0) {
        ec_log(EC_LOG_ERROR, "ignoring %s at revision %" PRId64 ": %s", ev->kv.key, ev->revision,
               err.msg);
        return;
    }
    if (rc == 0) {
        ec_kv_t kv;
        bool found = false;
        int g = ec_etcd_get_at(n->c, n->k_epoch, ev->revision, &kv, &found, NULL, &err);
        if (g < 0) {
            ec_log(EC_LOG_WARN, "cannot read epoch %" PRIu64 " at revision %" PRId64 ": %s; "
                   "listing again", num, ev->revision, err.msg);
            relist = true;
        } else if (!found || kv.mod_revision != ev->revision) {
            ec_log(EC_LOG_ERROR, "ignoring %s at revision %" PRId64 ": the epoch key was not "
                   "written with it (another tool?)", ev->kv.key, ev->revision);
        } else if (whole_epoch(n, false, &kv, &full, &flen, &relist) == 0 && !full &&
                   (full = malloc(kv.value_len ? kv.value_len : 1))) {
            memcpy(full, kv.value, kv.value_len);
            flen = kv.value_len;
        }
        if (g == 0 && found)
            ec_kv_free(&kv);
    }
    if (relist)
        n->feed.relist = true;
    if (full) {
        ec_kv_t kv = {.key = n->k_epoch, .key_len = strlen(n->k_epoch), .value = full,
                      .value_len = flen, .mod_revision = ev->revision,
                      .create_revision = ev->kv.create_revision, .version = ev->kv.version};
        model_apply(n, true, &kv, NULL);
        atomic_fetch_add(&n->feed.watch_events, 1);
    }
    free(full);
}

/* A copy of a watch event for the queue (one allocation: the key and value
 * after the struct); value: what to queue instead of the event's (a split
 * epoch's whole value), NULL: the event's.  NULL when out of memory. */
static ec__qev_t *qev_new(const ec_watch_event_t *ev, ec__qev_kind_t kind, const void *value,
                          size_t value_len)
{
    ec_kv_t kv = *ev->kv;
    if (value) {
        kv.value = (uint8_t *)value;
        kv.value_len = value_len;
    }
    size_t kl = kv.key_len, vl = kv.value_len;
    ec__qev_t *q = malloc(sizeof(*q) + kl + 1 + vl + 1);
    if (!q)
        return NULL;
    q->next = NULL;
    q->kind = kind;
    q->revision = ev->revision;
    q->kv = kv;
    q->kv.key = (char *)(q + 1);
    memcpy(q->kv.key, kv.key, kl);
    q->kv.key[kl] = '\0';
    q->kv.value = (uint8_t *)q->kv.key + kl + 1;
    if (vl)
        memcpy(q->kv.value, kv.value, vl);
    q->kv.value[vl] = '\0';
    return q;
}

/* Hand the events head..tail (len of them) to the loop, in order. */
static void queue_put(ec_node_t *n, ec__qev_t *head, ec__qev_t *tail, size_t len)
{
    pthread_mutex_lock(&n->feed.qlock);
    if (n->feed.q_tail)
        n->feed.q_tail->next = head;
    else
        n->feed.q_head = head;
    n->feed.q_tail = tail;
    atomic_fetch_add(&n->feed.q_len, len);
    pthread_mutex_unlock(&n->feed.qlock);
    ec__node_wake_sleeper(n);
}

/* What a watch reports besides puts and deletions, on its own thread: the
 * loop reads the flags (ec__feed_pending wakes it). */
static void on_watch_state(ec_node_t *n, const ec_watch_event_t *ev)
{
    switch (ev->type) {
    case EC_WATCH_COMPACTED:
        atomic_store(&n->feed.lost, true);
        break;
    case EC_WATCH_BROKEN:
        ec_log(EC_LOG_WARN, "etcd watch broke (%s); resuming", ev->message ? ev->message : "");
        atomic_store(&n->feed.broken, true); /* etcd may have come back without its data */
        break;
    case EC_WATCH_CREATED:
        /* re-created on an etcd whose revision is below one seen: it lost
         * its data (the loop checks, then lists again) */
        if (ev->revision > 0 && ev->revision < atomic_load(&n->feed.max_rev))
            atomic_store(&n->feed.broken, true);
        atomic_fetch_add(&n->feed.watches_created, 1);
        break;
    default:
        return;
    }
    ec__node_wake_sleeper(n);
}

/* A follower's watches (its keys, and the current epoch's suspicion
 * reports): every event queued as it comes. */
static void on_watch(const ec_watch_event_t *ev, void *arg)
{
    ec_node_t *n = arg;
    if (ev->type != EC_WATCH_PUT && ev->type != EC_WATCH_DELETE) {
        on_watch_state(n, ev);
        return;
    }
    bool delta = ev->type == EC_WATCH_PUT && ev->kv->key_len == strlen(n->k_epochd) &&
                 !memcmp(ev->kv->key, n->k_epochd, ev->kv->key_len);
    ec__qev_t *q = qev_new(ev, delta ? EC__QEV_DELTA
                           : ev->type == EC_WATCH_PUT ? EC__QEV_PUT : EC__QEV_DELETE, NULL, 0);
    if (!q) {
        ec_log(EC_LOG_ERROR, "out of memory queueing a watch event; listing the job again");
        ec__feed_lost(n);
        return;
    }
    queue_put(n, q, q, 1);
}

/* The leader's watch of the job's root: the events of one response are
 * queued together (so the loop never plans on half a transaction). */
static void queue_publish(ec_node_t *n)
{
    if (!n->feed.st_head)
        return;
    queue_put(n, n->feed.st_head, n->feed.st_tail, n->feed.st_len);
    n->feed.st_head = n->feed.st_tail = NULL;
    n->feed.st_len = 0;
}

static void on_watch_root(const ec_watch_event_t *ev, void *arg)
{
    ec_node_t *n = arg;
    if (ev->type != EC_WATCH_PUT && ev->type != EC_WATCH_DELETE) {
        queue_publish(n); /* what came before, first */
        on_watch_state(n, ev);
        return;
    }
    /* The events of one response (one transaction's, or a batch etcd sends
     * a watch that fell behind) are staged here and queued together, so
     * that the loop never plans on half of them. */
    if (ev->kv->key_len == strlen(n->k_epochd) && !memcmp(ev->kv->key, n->k_epochd, ev->kv->key_len)) {
        /* The epoch's delta is for followers: the leader's model has the
         * epoch itself on this stream. */
        if (!ev->more)
            queue_publish(n);
        return;
    }
    /* A split epoch's head is read whole here, before it is queued (the
     * leader's model holds every member). */
    void *whole = NULL;
    size_t wlen = 0;
    if (ev->type == EC_WATCH_PUT && ev->kv->key_len == strlen(n->k_epoch) &&
        !memcmp(ev->kv->key, n->k_epoch, ev->kv->key_len)) {
        bool relist = false;
        if (whole_epoch(n, true, ev->kv, &whole, &wlen, &relist) < 0) {
            /* not applied: the listing reads the epoch again */
            ec__feed_lost(n);
            if (!ev->more)
                queue_publish(n);
            return;
        }
    }
    ec__qev_t *q = qev_new(ev, ev->type == EC_WATCH_PUT ? EC__QEV_PUT : EC__QEV_DELETE, whole, wlen);
    free(whole);
    if (!q) {
        /* an event lost: list the job again */
        ec_log(EC_LOG_ERROR, "out of memory queueing a watch event; listing the job again");
        ec__feed_lost(n);
        return;
    }
    if (n->feed.st_tail)
        n->feed.st_tail->next = q;
    else
        n->feed.st_head = q;
    n->feed.st_tail = q;
    n->feed.st_len++;
    if (!ev->more)
        queue_publish(n);
}

static ec__qev_t *queue_take(ec_node_t *n)
{
    pthread_mutex_lock(&n->feed.qlock);
    ec__qev_t *q = n->feed.q_head;
    n->feed.q_head = n->feed.q_tail = NULL;
    atomic_store(&n->feed.q_len, 0);
    pthread_mutex_unlock(&n->feed.qlock);
    return q;
}

void ec__node_drain(ec_node_t *n)
{
    if (atomic_exchange(&n->feed.lost, false))
        n->feed.relist = true;
    if (atomic_exchange(&n->feed.broken, false))
        n->feed.check_history = true;
    if (atomic_load(&n->feed.q_len) == 0)
        return;
    for (ec__qev_t *q = queue_take(n), *next; q; q = next) {
        next = q->next;
        if (q->kind == EC__QEV_DELTA) {
            apply_delta(n, q);
        } else {
            /* A follower's suspicion reports have a listing of their own. */
            int64_t listed = !n->m.wide && is_suspect_key(n, &q->kv) ? n->feed.sus_list_rev
                                                                     : n->feed.list_rev;
            if (q->revision > listed) {
                model_apply(n, q->kind == EC__QEV_PUT, &q->kv, NULL);
                atomic_fetch_add(&n->feed.watch_events, 1);
            }
        }
        if (q->revision > atomic_load(&n->feed.max_rev) && q->revision != INT64_MAX)
            atomic_store(&n->feed.max_rev, q->revision);
        free(q);
    }
}

static void free_list(ec__qev_t *q)
{
    for (ec__qev_t *next; q; q = next) {
        next = q->next;
        free(q);
    }
}

void ec__node_queue_clear(ec_node_t *n)
{
    free_list(queue_take(n));
    /* the root watch's thread is joined: its staging is ours */
    free_list(n->feed.st_head);
    n->feed.st_head = n->feed.st_tail = NULL;
    n->feed.st_len = 0;
}

typedef struct {
    ec_node_t *n;
    int base, want;
} created_t;

static bool all_created(void *arg)
{
    created_t *c = arg;
    return atomic_load(&c->n->feed.watches_created) - c->base >= c->want;
}

/* Wait until `want` watches were created since the count was `base`;
 * returns whether they were. */
static bool wait_created(ec_node_t *n, int base, int want)
{
    created_t c = {n, base, want};
    return ec__node_wait_until(n, all_created, &c, ec_mono_ms() + 10000);
}

static void stop_watches(ec_node_t *n)
{
    for (size_t i = 0; i < n->feed.nwatch; i++)
        ec_watch_stop(n->feed.watch[i]);
    n->feed.nwatch = 0;
    ec_watch_stop(n->feed.sus_watch);
    n->feed.sus_watch = NULL;
}

/* What a model lists and watches: the whole job's root (wide, the
 * leader), or a follower's four keys, its epoch watched as deltas (epochd,
 * small) and listed whole (it has no base yet). */
typedef struct {
    const char *keys[4], *watched[4];
    size_t n;
} feed_keys_t;

static feed_keys_t feed_keys(ec_node_t *n, bool wide)
{
    if (wide)
        return (feed_keys_t){.keys = {ec_keys_root(&n->keys)},
                             .watched = {ec_keys_root(&n->keys)}, .n = 1};
    return (feed_keys_t){.keys = {n->k_leader, n->k_epoch, n->k_status, n->k_node},
                         .watched = {n->k_leader, n->k_epochd, n->k_status, n->k_node}, .n = 4};
}

/* The listing: the root's prefix (wide), else the keys in one transaction
 * (one revision); a follower's list borrows its kvs from *r (freed with
 * it: list_free). */
static int read_listing(ec_node_t *n, bool wide, const feed_keys_t *fk, ec_kv_list_t *l,
                        ec_txn_result_t *r, ec_error_t *err)
{
    if (wide)
        return ec_etcd_get_prefix(n->c, fk->keys[0], 0, l, err);
    ec_op_t get[4];
    for (size_t i = 0; i < fk->n; i++)
        get[i] = (ec_op_t){.type = EC_OP_GET, .key = fk->keys[i]};
    int rc = ec_etcd_txn(n->c, NULL, 0, get, fk->n, NULL, 0, r, err);
    if (rc < 0)
        return rc;
    size_t cnt = 0;
    for (size_t i = 0; i < r->n; i++)
        cnt += r->results[i].kvs.n;
    l->kvs = calloc(cnt ? cnt : 1, sizeof(ec_kv_t));
    l->revision = r->revision;
    for (size_t i = 0; l->kvs && i < r->n; i++)
        for (size_t j = 0; j < r->results[i].kvs.n; j++)
            l->kvs[l->n++] = r->results[i].kvs.kvs[j];
    if (!l->kvs) {
        ec_txn_result_free(r);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    return 0;
}

static void list_free(bool wide, ec_kv_list_t *l, ec_txn_result_t *r)
{
    if (wide) {
        ec_kv_list_free(l);
    } else {
        free(l->kvs);
        ec_txn_result_free(r);
    }
}

/* The model rebuilt from a listing at l->revision. */
static void apply_listing(ec_node_t *n, bool wide, const ec_kv_list_t *l)
{
    ec_model_reset(&n->m, wide, l->revision);
    /* The leader key first: the epoch sorts before it, and its check needs
     * the leadership. */
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->kvs[i].key, n->k_leader))
            ec_leader_log_put(&n->m.llog, l->kvs[i].create_revision,
                              (const char *)l->kvs[i].value, l->kvs[i].value_len);
    bool again = false;
    for (size_t i = 0; i < l->n; i++) {
        /* a split epoch is read whole (its chunks: one more range read) */
        void *whole = NULL;
        size_t wlen = 0;
        ec_kv_t kv = l->kvs[i];
        if (!strcmp(kv.key, n->k_epoch) && whole_epoch(n, wide, &kv, &whole, &wlen, &again) < 0)
            continue; /* not applied: the next epoch, or the next listing, brings one */
        if (whole) {
            kv.value = whole;
            kv.value_len = wlen;
        }
        model_apply(n, true, &kv, NULL);
        free(whole);
    }
    n->feed.list_rev = l->revision;
    if (l->revision > atomic_load(&n->feed.max_rev))
        atomic_store(&n->feed.max_rev, l->revision);
    n->feed.relist = again;
    atomic_store(&n->feed.listed, true);
    ec__node_mark_dirty(n);
}

/* Watch, then list.  The watches are opened "from now" first and the
 * listing read after they exist, so nothing falls between them; their
 * events wait in the queue while the listing is read, and the loop applies
 * them after it, those the listing holds dropped by revision.  (A watch
 * opened at listing revision + 1 after a write that came in meanwhile is
 * served by etcd's catch-up loop, every 100 ms: a joiner saw its first
 * epoch late.)  The leader watches and lists the whole job; a follower
 * watches its few keys, each alone, and reads them in one transaction. */
int ec__node_sync_model(ec_node_t *n, bool wide, ec_error_t *err)
{
    stop_watches(n);
    ec__node_queue_clear(n); /* the listing below has all of it */
    n->feed.list_rev = INT64_MAX; /* nothing applies until the listing is in */
    n->feed.sus_list_rev = INT64_MAX;
    n->feed.sus_watched = 0;
    atomic_store(&n->feed.listed, false);
    int base = atomic_load(&n->feed.watches_created);
    feed_keys_t fk = feed_keys(n, wide);
    /* No prev_kv: the model already holds every record's last value (a
     * leaving node's record said so before it vanished), and asking etcd
     * for old values on every event for every node's watch is what made
     * its cost grow fastest with the node count (tests/bench/bench_scale).
     * The leader: one watch of the root, its events queued together per
     * response (on_watch_root).  A follower: its four keys on one Watch
     * stream (one per node in etcd, not four; each key's events in order,
     * one EC_WATCH_CREATED per key). */
    n->feed.watch[0] = wide ? ec_watch_start_ex(n->c, fk.watched[0], true, 0, EC_WATCH_NO_PREV_KV,
                                                on_watch_root, n, err)
                            : ec_watch_start_keys(n->c, fk.watched, fk.n, 0, EC_WATCH_NO_PREV_KV,
                                                  on_watch, n, err);
    if (!n->feed.watch[0]) {
        stop_watches(n);
        return err->code;
    }
    n->feed.nwatch = 1;
    if (!wait_created(n, base, (int)fk.n))
        return ec_errorf(err, EC_ETIMEDOUT, "etcd at %s did not open a watch on %s within 10 s",
                         ec_etcd_endpoints(n->c), wide ? ec_keys_root(&n->keys) : n->k_epoch);
    ec_kv_list_t l = {0};
    ec_txn_result_t r = {0};
    int rc = read_listing(n, wide, &fk, &l, &r, err);
    if (rc == 0) {
        apply_listing(n, wide, &l);
        list_free(wide, &l, &r);
    }
    return rc;
}

static int follow_suspects(ec_node_t *n, ec_error_t *err)
{
    uint64_t cur = n->m.epoch ? n->m.epoch->number : 0;
    if (n->m.wide || !cur || cur == n->feed.sus_watched)
        return 0;
    int base = atomic_load(&n->feed.watches_created);
    n->feed.sus_list_rev = INT64_MAX; /* the new watch's events wait for its listing */
    ec_watch_stop(n->feed.sus_watch);
    n->feed.sus_watch = NULL;
    char prefix[EC_KEY_MAX];
    int kl = ec_key_epoch_worker_prefix(&n->keys, cur, prefix, sizeof(prefix));
    if (kl < 0 || (size_t)kl + sizeof("suspect/") > sizeof(prefix))
        return ec_errorf(err, EC_EINVAL, "cannot build the suspicion prefix of epoch %" PRIu64, cur);
    strcat(prefix, "suspect/");
    n->feed.sus_watch = ec_watch_start_ex(n->c, prefix, true, 0, EC_WATCH_NO_PREV_KV, on_watch, n, err);
    if (!n->feed.sus_watch)
        return err->code;
    if (!wait_created(n, base, 1))
        return ec_errorf(err, EC_ETIMEDOUT, "etcd at %s did not open a watch on %s within 10 s",
                         ec_etcd_endpoints(n->c), prefix);
    ec_kv_list_t l;
    int rc = ec_etcd_get_prefix(n->c, prefix, 0, &l, err);
    if (rc == 0) {
        for (size_t i = 0; i < l.n; i++)
            model_apply(n, true, &l.kvs[i], NULL);
        n->feed.sus_list_rev = l.revision;
        n->feed.sus_watched = cur;
        ec__node_mark_dirty(n);
        ec_kv_list_free(&l);
    }
    return rc;
}

void ec__node_note_gone_leader(ec_node_t *n)
{
    char *id = n->m.gone_leader;
    int64_t rev = n->m.gone_leader_rev;
    n->m.gone_leader = NULL;
    bool found = false;
    if (id) {
        ec__node_mnode_find(n, id, &found);
        found = found || ec_model_has_left(&n->m, id);
    }
    if (!id || found || rev < 2) {
        free(id);
        return; /* registered still (or again), or counted already */
    }
    char key[EC_KEY_MAX];
    ec_kv_t kv;
    bool there = false;
    ec_node_rec_t *rec = NULL;
    if (ec_key_node(&n->keys, id, key, sizeof(key)) >= 0 &&
        ec_etcd_get_at(n->c, key, rev - 1, &kv, &there, NULL, NULL) == 0 && there) {
        if (ec_node_rec_decode(kv.value, kv.value_len, NULL, &rec, NULL) == 0 &&
            (rec->state == EC_NODE_LEAVING || rec->state == EC_NODE_DONE)) {
            size_t had = n->m.nleft;
            ec_model_add_left(&n->m, id);
            if (n->m.nleft > had)
                ec__node_mark_dirty(n);
            ec_log(EC_LOG_INFO, "-node %s left (the previous leader: its record said so at "
                   "revision %" PRId64 ")", id, rev - 1);
        }
        ec_node_rec_free(rec);
        ec_kv_free(&kv);
    }
    free(id);
}

int ec__node_read_records(ec_node_t *n, ec_kv_list_t *l, ec_error_t *err)
{
    char prefix[EC_KEY_MAX];
    ec_key_nodes_prefix(&n->keys, prefix, sizeof(prefix));
    return ec_etcd_get_prefix(n->c, prefix, 0, l, err);
}

bool ec__node_fetch_record(ec_node_t *n, const char *id)
{
    char key[EC_KEY_MAX];
    if (ec_key_node(&n->keys, id, key, sizeof(key)) < 0)
        return false;
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(n->c, key, &kv, &found, NULL, NULL) < 0)
        return false;
    bool ok = false;
    if (found) {
        /* read by the caller's pass: no wakeup (but our own record, if
         * overwritten, is written again) */
        ec_model_ctx_t ctx = ec__node_model_ctx(n);
        ec_model_effects_t fx = {0};
        (void)ec_model_put_node(&n->m, &ctx, id, &kv, &fx);
        fx.dirty = fx.touched = false; /* read by the caller's pass */
        ec__node_model_effects(n, &fx);
        bool f;
        size_t i = ec__node_mnode_find(n, id, &f);
        ok = f && n->m.nodes[i].rec;
    } else if (strcmp(id, n->node_id)) {
        ec_model_drop_node(&n->m, id);
    }
    if (found)
        ec_kv_free(&kv);
    return ok;
}

bool ec__node_check_history(ec_node_t *n, bool force)
{
    if (atomic_exchange(&n->feed.broken, false))
        n->feed.check_history = true;
    bool due = force || n->feed.check_history;
    n->feed.check_history = false;
    if (!due)
        return false;
    int64_t seen = atomic_load(&n->feed.max_rev);
    ec_kv_t kv;
    bool found = false;
    int64_t rev = 0;
    ec_error_t err = {0};
    if (ec_etcd_get(n->c, n->k_leader, &kv, &found, &rev, &err) < 0) {
        n->feed.check_history = true; /* again on the next pass */
        return false;
    }
    if (found)
        ec_kv_free(&kv);
    if (rev >= seen)
        return false;
    /* etcd's revision went backwards: it restarted without its data (or
     * another cluster answers at its address).  Everything the model holds
     * is gone from etcd, the leader key it remembers too: list afresh, and
     * form the job as a first epoch numbered above every epoch seen. */
    ec__node_emit(n, "+etcd-reset: etcd's revision went back from %" PRId64 " to %" PRId64
                  " (its data was lost); rebuilding the job from what its agents register",
                  seen, rev);
    ec_model_forget_epoch(&n->m);
    atomic_store(&n->feed.max_rev, rev);
    n->feed.relist = true;
    ec__node_model_changed(n);
    ec__reg_mark_pending(n); /* our record again, with the epoch we saw */
    return true;
}

int ec__node_follow_suspects(ec_node_t *n, ec_error_t *err)
{
    int rc = follow_suspects(n, err);
    if (rc < 0) { /* again, from a fresh watch, on a pass soon */
        n->feed.sus_watched = 0;
        ec__node_wake_by(n, ec_mono_ms() + EC_NODE_RETRY_MS);
    }
    return rc;
}

/* ---- the feed's state, for the loop and the other concerns -------------- */

void ec__feed_init(ec_node_t *n)
{
    pthread_mutex_init(&n->feed.qlock, NULL);
}

void ec__feed_fini(ec_node_t *n)
{
    for (size_t i = 0; i < n->feed.nwatch; i++)
        ec_watch_stop(n->feed.watch[i]);
    ec_watch_stop(n->feed.sus_watch);
    ec__node_queue_clear(n);
    pthread_mutex_destroy(&n->feed.qlock);
}

void ec__feed_lost(ec_node_t *n)
{
    atomic_store(&n->feed.lost, true);
    ec__node_wake_sleeper(n);
}

bool ec__feed_seen(const ec_node_t *n, int64_t rev)
{
    return atomic_load(&((ec_node_t *)n)->feed.max_rev) >= rev || n->feed.list_rev >= rev;
}

bool ec__feed_relist(const ec_node_t *n)
{
    return n->feed.relist;
}

bool ec__feed_pending(ec_node_t *n)
{
    return atomic_load(&n->feed.q_len) != 0 || atomic_load(&n->feed.lost) ||
           atomic_load(&n->feed.broken);
}

/* ---- the feed's public calls (node.h) ----------------------------------- */

uint64_t ec_node_watch_events(ec_node_t *n)
{
    return atomic_load(&n->feed.watch_events);
}

int ec_node_watches_created(ec_node_t *n)
{
    /* a listing in: the watches it starts from are open too */
    return atomic_load(&n->feed.listed) ? atomic_load(&n->feed.watches_created) : 0;
}
