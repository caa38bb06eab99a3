/* Watch a key or prefix, with resume.
 *
 * The thread keeps next_rev = last delivered revision + 1 and, when the
 * stream breaks (etcd restarted, network error), reopens it with backoff
 * from next_rev: etcd replays from there, so nothing is lost, and events
 * below the resume point are dropped, so nothing is repeated.  A start
 * revision that was compacted ends the watch with EC_WATCH_COMPACTED: the
 * caller must re-list.
 *
 * Several keys (ec_watch_start_keys) share one stream and one thread: one
 * create request per key, sent one after the other; etcd answers creates
 * in order, so the k-th "created" response gives key k its watch id, and
 * every later response is routed by that id.  Each key keeps its own
 * next revision. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "clock.h"
#include "etcd_impl.h"
#include "log.h"

/* One key (or range) of a watch. */
typedef struct wkey {
    char *key;
    size_t key_len;
    uint8_t *end;
    size_t end_len;
    int64_t next_rev; /* 0 until known: "from now"; under the watch's lock */
    int64_t floor;    /* this connection's start: events below it were delivered */
    int64_t watch_id; /* etcd's id on this connection; -1 until created */
} wkey_t;

struct ec_watch {
    ec__mem_watch_t *mem; /* a memory client's watch (mem_stream.c): nothing below is used */
    ec_etcd_t *c;
    wkey_t k[EC_WATCH_KEYS_MAX];
    size_t nk;
    ec_watch_cb cb;
    void *arg;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    unsigned flags;
    ec__stream_t *stream;
};

static bool w_stopping(ec_watch_t *w)
{
    pthread_mutex_lock(&w->lock);
    bool s = w->stop;
    pthread_mutex_unlock(&w->lock);
    return s;
}

static bool w_wait(ec_watch_t *w, int64_t ms)
{
    struct timespec ts = ec_deadline_ts(ms);
    pthread_mutex_lock(&w->lock);
    while (!w->stop && pthread_cond_timedwait(&w->cond, &w->lock, &ts) == 0)
        ;
    bool s = w->stop;
    pthread_mutex_unlock(&w->lock);
    return s;
}

static void set_next(ec_watch_t *w, wkey_t *k, int64_t rev)
{
    pthread_mutex_lock(&w->lock);
    k->next_rev = rev;
    pthread_mutex_unlock(&w->lock);
}

static int64_t get_next(ec_watch_t *w, const wkey_t *k)
{
    pthread_mutex_lock(&w->lock);
    int64_t r = k->next_rev;
    pthread_mutex_unlock(&w->lock);
    return r;
}

int64_t ec_watch_next_revision(ec_watch_t *w)
{
    if (w->mem)
        return ec__mem_watch_next_revision(w->mem);
    /* the lowest of the keys': every event below it was delivered */
    pthread_mutex_lock(&w->lock);
    int64_t r = w->k[0].next_rev;
    for (size_t i = 1; i < w->nk; i++)
        if (w->k[i].next_rev < r)
            r = w->k[i].next_rev;
    pthread_mutex_unlock(&w->lock);
    return r;
}

/* Handle one response for key k; returns 1 when the watch must end, -1 to
 * reconnect. */
static int on_response(ec_watch_t *w, wkey_t *k, Etcdserverpb__WatchResponse *r)
{
    int64_t floor = k->floor;
    if (r->created) {
        int64_t hdr = r->header ? r->header->revision : 0;
        if (get_next(w, k) == 0)
            set_next(w, k, hdr + 1);
        ec_watch_event_t ev = {.type = EC_WATCH_CREATED, .revision = hdr};
        if (!r->canceled)
            w->cb(&ev, w->arg);
    }
    if (r->canceled) {
        if (r->compact_revision > 0) {
            char msg[160];
            snprintf(msg, sizeof(msg),
                     "revision %lld of %.40s was compacted (oldest kept: %lld): list again, then "
                     "watch", (long long)get_next(w, k), k->key, (long long)r->compact_revision);
            ec_watch_event_t ev = {.type = EC_WATCH_COMPACTED,
                                   .compact_revision = r->compact_revision,
                                   .message = msg};
            w->cb(&ev, w->arg);
            return 1;
        }
        ec_log(EC_LOG_WARN, "etcd canceled the watch on %s: %s", k->key,
               r->cancel_reason ? r->cancel_reason : "no reason");
        return -1;
    }
    int64_t last = 0;
    size_t end = 0; /* one past the last event delivered: it has more = false */
    for (size_t i = r->n_events; i > 0 && !end; i--)
        if (r->events[i - 1]->kv && r->events[i - 1]->kv->mod_revision >= floor)
            end = i;
    for (size_t i = 0; i < end; i++) {
        Mvccpb__Event *e = r->events[i];
        if (!e->kv)
            continue;
        int64_t rev = e->kv->mod_revision;
        if (rev < floor)
            continue; /* already delivered before the reconnect */
        ec_kv_t kv, prev;
        bool has_prev = e->prev_kv != NULL;
        if (ec__kv_from_pb(&kv, e->kv) < 0)
            return -1;
        if (has_prev && ec__kv_from_pb(&prev, e->prev_kv) < 0) {
            ec_kv_free(&kv);
            return -1;
        }
        ec_watch_event_t ev = {
            .type = e->type == MVCCPB__EVENT__EVENT_TYPE__DELETE ? EC_WATCH_DELETE : EC_WATCH_PUT,
            .revision = rev,
            .kv = &kv,
            .prev_kv = has_prev ? &prev : NULL,
            .more = i + 1 < end,
        };
        w->cb(&ev, w->arg);
        ec_kv_free(&kv);
        if (has_prev)
            ec_kv_free(&prev);
        last = rev;
    }
    if (last)
        set_next(w, k, last + 1);
    return 0;
}

/* Send the create request of key k (from its floor). */
static int send_create(ec_watch_t *w, ec__stream_t *s, const wkey_t *k)
{
    Etcdserverpb__WatchCreateRequest cr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    cr.key.data = (uint8_t *)k->key;
    cr.key.len = k->key_len;
    if (k->end) {
        cr.range_end.data = k->end;
        cr.range_end.len = k->end_len;
    }
    cr.start_revision = k->floor;
    cr.prev_kv = !(w->flags & EC_WATCH_NO_PREV_KV);
    Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
    req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    req.create_request = &cr;
    return ec__stream_send(s, &req.base);
}

static void *w_main(void *arg)
{
    ec_watch_t *w = arg;
    ec__backoff_t bo;
    ec__backoff_init(&bo, 50, 2000, (uint32_t)(uintptr_t)w);
    bool reauth = false;
    while (!w_stopping(w)) {
        ec__stream_t s;
        ec_error_t err = {0};
        if (reauth) {
            uint64_t gen;
            free(ec__token(w->c, &gen));
            ec__reauth(w->c, gen, NULL);
            reauth = false;
        }
        if (ec__stream_open(&s, w->c, "/etcdserverpb.Watch/Watch", &w->lock, &err) < 0) {
            if (w_wait(w, ec__backoff_next(&bo)))
                break;
            continue;
        }
        pthread_mutex_lock(&w->lock);
        w->stream = &s;
        if (w->stop)
            grpc_call_cancel(s.call, NULL);
        for (size_t i = 0; i < w->nk; i++) {
            w->k[i].floor = w->k[i].next_rev;
            w->k[i].watch_id = -1;
        }
        pthread_mutex_unlock(&w->lock);

        /* One create at a time (a stream sends one message at a time); the
         * next goes when the last is sent. */
        size_t nsent = 0, ncreated = 0;
        int done = 0;
        if (send_create(w, &s, &w->k[nsent++]) == 0) {
            for (;;) {
                ec__ev_t ev = ec__stream_next(&s, -1);
                if (ev == EC__EV_CLOSED)
                    break;
                if (ev == EC__EV_SENT && nsent < w->nk) {
                    if (send_create(w, &s, &w->k[nsent++]) < 0) {
                        done = -1;
                        break;
                    }
                    continue;
                }
                if (ev != EC__EV_RECV)
                    continue;
                Etcdserverpb__WatchResponse *r = (Etcdserverpb__WatchResponse *)ec__unpack(
                    &etcdserverpb__watch_response__descriptor, s.recv);
                grpc_byte_buffer_destroy(s.recv);
                s.recv = NULL;
                if (!r)
                    continue;
                /* the key this response is for: the next to be created,
                 * or the one with its watch id */
                wkey_t *k = NULL;
                if (r->created && ncreated < w->nk) {
                    k = &w->k[ncreated++];
                    k->watch_id = r->watch_id;
                } else {
                    for (size_t i = 0; i < ncreated && !k; i++)
                        if (w->k[i].watch_id == r->watch_id)
                            k = &w->k[i];
                }
                if (r->created && !r->canceled && ncreated == w->nk)
                    ec__backoff_reset(&bo);
                if (r->canceled && r->cancel_reason && strstr(r->cancel_reason, "auth"))
                    reauth = true;
                done = k ? on_response(w, k, r) : 0;
                protobuf_c_message_free_unpacked(&r->base, NULL);
                if (done != 0)
                    break;
            }
        }
        if (s.closed && s.status == GRPC_STATUS_UNAUTHENTICATED)
            reauth = true;
        bool stopping = w_stopping(w);
        if (!stopping && done == 0 && s.closed) {
            ec_error_t e = {0};
            ec__stream_status(&s, &e);
            ec_watch_event_t ev = {.type = EC_WATCH_BROKEN, .message = e.msg};
            w->cb(&ev, w->arg);
        }
        ec__stream_close(&s);
        pthread_mutex_lock(&w->lock);
        w->stream = NULL;
        pthread_mutex_unlock(&w->lock);
        if (done == 1 || stopping)
            break;
        if (w_wait(w, ec__backoff_next(&bo)))
            break;
    }
    return NULL;
}

ec_watch_t *ec_watch_start(ec_etcd_t *c, const char *key, bool prefix, int64_t start_revision,
                           ec_watch_cb cb, void *arg, ec_error_t *err)
{
    return ec_watch_start_ex(c, key, prefix, start_revision, 0, cb, arg, err);
}

static void free_keys(ec_watch_t *w)
{
    for (size_t i = 0; i < w->nk; i++) {
        free(w->k[i].end);
        free(w->k[i].key);
    }
}

/* Key i of w: key, and every key under it when prefix. */
static bool set_key(ec_watch_t *w, size_t i, const char *key, bool prefix)
{
    wkey_t *k = &w->k[i];
    if (!(k->key = strdup(key)))
        return false;
    k->key_len = strlen(key);
    if (prefix) {
        k->end = malloc(k->key_len + 1);
        if (!k->end)
            return false;
        memcpy(k->end, key, k->key_len);
        size_t l = k->key_len;
        while (l > 0 && k->end[l - 1] == 0xff)
            l--;
        if (l == 0) {
            k->end[0] = 0;
            k->end_len = 1;
        } else {
            k->end[l - 1]++;
            k->end_len = l;
        }
    }
    return true;
}

static ec_watch_t *start(ec_etcd_t *c, const char *const *keys, size_t n, bool prefix,
                         int64_t start_revision, unsigned flags, ec_watch_cb cb, void *arg,
                         ec_error_t *err)
{
    if (!keys || n < 1 || n > EC_WATCH_KEYS_MAX || !cb) {
        ec_errorf(err, EC_EINVAL, "ec_watch_start: 1 to %d keys and a callback are required",
                  EC_WATCH_KEYS_MAX);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!keys[i] || !*keys[i]) {
            ec_errorf(err, EC_EINVAL, "ec_watch_start: a key and a callback are required");
            return NULL;
        }
    ec_watch_t *w = calloc(1, sizeof(*w));
    if (!w) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    if (c->mem) {
        w->mem = ec__mem_watch_start(c->mem, keys, n, prefix, start_revision, flags, cb, arg, err);
        if (!w->mem) {
            free(w);
            return NULL;
        }
        return w;
    }
    for (size_t i = 0; i < n; i++) {
        w->nk = i + 1;
        if (!set_key(w, i, keys[i], prefix)) {
            free_keys(w);
            free(w);
            ec_errorf(err, EC_ENOMEM, "out of memory");
            return NULL;
        }
        w->k[i].next_rev = start_revision > 0 ? start_revision : 0;
    }
    w->c = c;
    w->flags = flags;
    w->cb = cb;
    w->arg = arg;
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&w->thread, NULL, w_main, w) != 0) {
        ec_errorf(err, EC_ESYS, "cannot start the watch thread");
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cond);
        free_keys(w);
        free(w);
        return NULL;
    }
    return w;
}

ec_watch_t *ec_watch_start_ex(ec_etcd_t *c, const char *key, bool prefix, int64_t start_revision,
                              unsigned flags, ec_watch_cb cb, void *arg, ec_error_t *err)
{
    const char *keys[1] = {key};
    return start(c, keys, 1, prefix, start_revision, flags, cb, arg, err);
}

ec_watch_t *ec_watch_start_keys(ec_etcd_t *c, const char *const *keys, size_t n,
                                int64_t start_revision, unsigned flags, ec_watch_cb cb,
                                void *arg, ec_error_t *err)
{
    return start(c, keys, n, false, start_revision, flags, cb, arg, err);
}

void ec_watch_stop(ec_watch_t *w)
{
    if (!w)
        return;
    if (w->mem) {
        ec__mem_watch_stop(w->mem);
        free(w);
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    if (w->stream && w->stream->call)
        grpc_call_cancel(w->stream->call, NULL);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free_keys(w);
    free(w);
}
