/* The in-memory store's keepalives and watches, each on a thread of its
 * own as the gRPC client's are (lease.c, watch.c), so that code above sees
 * the same threads: callbacks never run on the thread that wrote, and never
 * while the store's lock is held.
 *
 * A keepalive refreshes every TTL/3 (while its gate is open) and declares
 * the lease lost, once, when the store no longer has it or when no refresh
 * succeeded for a whole TTL (the store down).
 *
 * A watch reads the store's history: from its next revision it takes the
 * lowest revision with events for its keys, copies them under the lock,
 * and delivers them without it (`more` on all but the last of a
 * revision).  It waits for the next write on the store's condition
 * variable, with a timeout.  Down, it reports EC_WATCH_BROKEN once; up
 * again, EC_WATCH_CREATED again, and it resumes where it was, as the gRPC
 * client does after a reconnect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "keepalive.h"
#include "log.h"
#include "mem.h"

/* ---- keepalive (keepalive.h: its state, and what both drivers share) -------- */

/* One refresh: 1 done, 0 the lease is gone, < 0 the store is down. */
static int ka_refresh(ec_keepalive_t *ka)
{
    pthread_mutex_lock(&ka->mem->lock);
    int rc = ec__mem_lease_refresh_locked(ka->mem, ka->id);
    pthread_mutex_unlock(&ka->mem->lock);
    return rc;
}

void *ec__mem_ka_main(void *arg)
{
    ec_keepalive_t *ka = arg;
    int64_t last_ok = ec_mono_ms(), next_send = last_ok;
    for (;;) {
        int64_t now = ec_mono_ms();
        if (now - last_ok >= ka->ttl_ms) {
            char why[160];
            snprintf(why, sizeof(why),
                     "no refresh succeeded for %lld ms (TTL); etcd at mem unreachable?",
                     (long long)(now - last_ok));
            ec__ka_lost(ka, why);
            break;
        }
        if (now >= next_send) {
            /* gate closed or store down: ask again soon; the TTL runs on */
            int rc = ec__ka_gate_open(ka) ? ka_refresh(ka) : EC_EUNAVAILABLE;
            if (rc == 0) {
                ec__ka_lost(ka, "etcd answered TTL=0: the lease expired or was revoked");
                break;
            }
            next_send = now + (rc > 0 ? ka->ttl_ms / 3 : 100);
            if (rc > 0) {
                last_ok = now;
                ec__ka_confirmed(ka, now);
            }
        }
        int64_t until = next_send < last_ok + ka->ttl_ms ? next_send : last_ok + ka->ttl_ms;
        if (ec__ka_wait(ka, until - ec_mono_ms()))
            break;
    }
    return NULL;
}

/* ---- watches --------------------------------------------------------------- */

typedef struct {
    char *key;
    size_t len;
} wkey_t;

struct ec__mem_watch {
    ec_etcd_mem_t *m;
    wkey_t k[EC_WATCH_KEYS_MAX];
    size_t nk;
    bool prefix;
    unsigned flags;
    ec_watch_cb cb;
    void *arg;
    pthread_t thread;
    /* under the store's lock: */
    int64_t next;    /* the next revision to deliver; 0 until created "from now" */
    int64_t scanned; /* every revision below it was looked at */
    bool stop;
};

/* One revision's events, copied out of the store. */
typedef struct {
    ec_kv_t kv, prev;
    bool has_prev, del;
} bev_t;

typedef struct {
    bev_t *ev;
    size_t n, cap;
    int64_t rev;
} batch_t;

static bool w_matches(const ec__mem_watch_t *w, const ec__mem_rec_t *r)
{
    for (size_t i = 0; i < w->nk; i++) {
        const wkey_t *k = &w->k[i];
        if (w->prefix ? r->key_len >= k->len && memcmp(r->key, k->key, k->len) == 0
                      : r->key_len == k->len && memcmp(r->key, k->key, k->len) == 0)
            return true;
    }
    return false;
}

/* The first index of the log at or above revision rev. */
static size_t log_lower(const ec_etcd_mem_t *m, int64_t rev)
{
    size_t lo = 0, hi = m->nlog;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->log[mid]->mod_rev < rev)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void batch_free(batch_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        ec_kv_free(&b->ev[i].kv);
        if (b->ev[i].has_prev)
            ec_kv_free(&b->ev[i].prev);
    }
    b->n = 0;
}

static int batch_add(batch_t *b, const ec__mem_rec_t *r, bool want_prev)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        bev_t *ev = realloc(b->ev, cap * sizeof(*ev));
        if (!ev)
            return EC_ENOMEM;
        b->ev = ev;
        b->cap = cap;
    }
    bev_t *e = &b->ev[b->n];
    e->has_prev = want_prev && r->prev;
    e->del = r->tomb;
    if (ec__mem_kv_copy(&e->kv, r) < 0)
        return EC_ENOMEM;
    if (e->has_prev && ec__mem_kv_copy(&e->prev, r->prev) < 0) {
        ec_kv_free(&e->kv);
        return EC_ENOMEM;
    }
    b->n++;
    b->rev = r->mod_rev;
    return 0;
}

/* Copy the events of the lowest revision at or above scanned that has any
 * for w (lock held).  0: none yet (scanned moves past the store's head), 1:
 * b filled, < 0: out of memory (b empty, nothing moved). */
static int take_batch(ec__mem_watch_t *w, batch_t *b)
{
    const ec_etcd_mem_t *m = w->m;
    bool want_prev = !(w->flags & EC_WATCH_NO_PREV_KV);
    b->n = 0;
    b->rev = 0;
    for (size_t i = log_lower(m, w->scanned); i < m->nlog; i++) {
        const ec__mem_rec_t *r = m->log[i];
        if (b->n && r->mod_rev != b->rev)
            break; /* one revision per delivery */
        if (w_matches(w, r) && batch_add(b, r, want_prev) < 0) {
            batch_free(b);
            return EC_ENOMEM;
        }
    }
    if (b->n == 0) {
        w->scanned = m->rev + 1;
        return 0;
    }
    return 1;
}

static void deliver(ec__mem_watch_t *w, const batch_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        const bev_t *e = &b->ev[i];
        ec_watch_event_t ev = {
            .type = e->del ? EC_WATCH_DELETE : EC_WATCH_PUT,
            .revision = b->rev,
            .kv = &e->kv,
            .prev_kv = e->has_prev ? &e->prev : NULL,
            .more = i + 1 < b->n,
        };
        w->cb(&ev, w->arg);
    }
}

static void compacted(ec__mem_watch_t *w, int64_t next, int64_t compact_rev)
{
    char msg[160];
    snprintf(msg, sizeof(msg),
             "revision %lld of %.40s was compacted (oldest kept: %lld): list again, then watch",
             (long long)next, w->k[0].key, (long long)compact_rev);
    ec_watch_event_t ev = {.type = EC_WATCH_COMPACTED, .compact_revision = compact_rev,
                           .message = msg};
    w->cb(&ev, w->arg);
}

/* The watch (re)established (lock held on entry and return): one created
 * event per key; false when its start was compacted (the watch ends). */
static bool w_create(ec__mem_watch_t *w)
{
    ec_etcd_mem_t *m = w->m;
    int64_t head = m->rev, compact_rev = m->compact_rev;
    if (w->next == 0)
        w->next = head + 1;
    w->scanned = w->next;
    int64_t next = w->next;
    pthread_mutex_unlock(&m->lock);
    for (size_t i = 0; i < w->nk; i++) {
        ec_watch_event_t ev = {.type = EC_WATCH_CREATED, .revision = head};
        w->cb(&ev, w->arg);
    }
    /* etcd creates the watch, then cancels it as compacted */
    bool ok = next >= compact_rev;
    if (!ok)
        compacted(w, next, compact_rev);
    pthread_mutex_lock(&m->lock);
    return ok;
}

static void *w_main(void *arg)
{
    ec__mem_watch_t *w = arg;
    ec_etcd_mem_t *m = w->m;
    batch_t b = {0};
    bool created = false, broken = false;
    pthread_mutex_lock(&m->lock);
    while (!w->stop) {
        if (m->down) {
            if (!broken) {
                broken = true;
                created = false;
                pthread_mutex_unlock(&m->lock);
                ec_watch_event_t ev = {.type = EC_WATCH_BROKEN,
                                       .message = "the in-memory store is down "
                                                  "(ec_etcd_mem_set_down); resuming when it is up"};
                w->cb(&ev, w->arg);
                pthread_mutex_lock(&m->lock);
                continue;
            }
        } else if (!created) {
            broken = false;
            created = true;
            if (!w_create(w))
                break;
            continue;
        } else if (w->next < m->compact_rev) {
            /* fell behind a compaction: etcd cancels such a watch */
            int64_t next = w->next, compact_rev = m->compact_rev;
            pthread_mutex_unlock(&m->lock);
            compacted(w, next, compact_rev);
            pthread_mutex_lock(&m->lock);
            break;
        } else if (take_batch(w, &b) > 0) {
            int64_t rev = b.rev;
            pthread_mutex_unlock(&m->lock);
            deliver(w, &b);
            batch_free(&b);
            pthread_mutex_lock(&m->lock);
            w->next = w->scanned = rev + 1;
            continue;
        }
        /* nothing to do (or out of memory: try again): until the next
         * change, or a second at most */
        struct timespec ts = ec_deadline_ts(1000);
        pthread_cond_timedwait(&m->cond, &m->lock, &ts);
    }
    pthread_mutex_unlock(&m->lock);
    free(b.ev);
    return NULL;
}

static void w_free(ec__mem_watch_t *w)
{
    for (size_t i = 0; i < w->nk; i++)
        free(w->k[i].key);
    free(w);
}

ec__mem_watch_t *ec__mem_watch_start(ec_etcd_mem_t *m, const char *const *keys, size_t n,
                                     bool prefix, int64_t start_revision, unsigned flags,
                                     ec_watch_cb cb, void *arg, ec_error_t *err)
{
    ec__mem_watch_t *w = calloc(1, sizeof(*w));
    if (!w) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++, w->nk++) {
        if (!(w->k[i].key = strdup(keys[i]))) {
            w_free(w);
            ec_errorf(err, EC_ENOMEM, "out of memory");
            return NULL;
        }
        w->k[i].len = strlen(keys[i]);
    }
    w->m = m;
    w->prefix = prefix;
    w->flags = flags;
    w->cb = cb;
    w->arg = arg;
    w->next = start_revision > 0 ? start_revision : 0;
    if (pthread_create(&w->thread, NULL, w_main, w) != 0) {
        w_free(w);
        ec_errorf(err, EC_ESYS, "cannot start the watch thread");
        return NULL;
    }
    return w;
}

void ec__mem_watch_stop(ec__mem_watch_t *w)
{
    pthread_mutex_lock(&w->m->lock);
    w->stop = true;
    pthread_cond_broadcast(&w->m->cond);
    pthread_mutex_unlock(&w->m->lock);
    pthread_join(w->thread, NULL);
    w_free(w);
}

int64_t ec__mem_watch_next_revision(ec__mem_watch_t *w)
{
    pthread_mutex_lock(&w->m->lock);
    int64_t r = w->next;
    pthread_mutex_unlock(&w->m->lock);
    return r;
}
