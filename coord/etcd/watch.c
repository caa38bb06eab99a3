/* Watch a key or prefix, with resume.
 *
 * The thread keeps next_rev = last delivered revision + 1 and, when the
 * stream breaks (etcd restarted, network error), reopens it with backoff
 * from next_rev: etcd replays from there, so nothing is lost, and events
 * below the resume point are dropped, so nothing is repeated.  A start
 * revision that was compacted ends the watch with EC_WATCH_COMPACTED: the
 * caller must re-list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "clock.h"
#include "etcd_impl.h"
#include "log.h"

struct ec_watch {
    ec_etcd_t *c;
    char *key;
    size_t key_len;
    uint8_t *end;
    size_t end_len;
    ec_watch_cb cb;
    void *arg;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    int64_t next_rev; /* 0 until known: "from now" */
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

static void set_next(ec_watch_t *w, int64_t rev)
{
    pthread_mutex_lock(&w->lock);
    w->next_rev = rev;
    pthread_mutex_unlock(&w->lock);
}

int64_t ec_watch_next_revision(ec_watch_t *w)
{
    pthread_mutex_lock(&w->lock);
    int64_t r = w->next_rev;
    pthread_mutex_unlock(&w->lock);
    return r;
}

/* Handle one response; returns 1 when the watch must end, -1 to reconnect. */
static int on_response(ec_watch_t *w, Etcdserverpb__WatchResponse *r, int64_t floor)
{
    if (r->created) {
        int64_t hdr = r->header ? r->header->revision : 0;
        if (w->next_rev == 0)
            set_next(w, hdr + 1);
        ec_watch_event_t ev = {.type = EC_WATCH_CREATED, .revision = hdr};
        if (!r->canceled)
            w->cb(&ev, w->arg);
    }
    if (r->canceled) {
        if (r->compact_revision > 0) {
            char msg[160];
            snprintf(msg, sizeof(msg),
                     "revision %lld was compacted (oldest kept: %lld): list again, then watch",
                     (long long)w->next_rev, (long long)r->compact_revision);
            ec_watch_event_t ev = {.type = EC_WATCH_COMPACTED,
                                   .compact_revision = r->compact_revision,
                                   .message = msg};
            w->cb(&ev, w->arg);
            return 1;
        }
        ec_log(EC_LOG_WARN, "etcd canceled the watch on %s: %s", w->key,
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
        set_next(w, last + 1);
    return 0;
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
        int64_t floor = w->next_rev;
        pthread_mutex_unlock(&w->lock);

        Etcdserverpb__WatchCreateRequest cr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
        cr.key.data = (uint8_t *)w->key;
        cr.key.len = w->key_len;
        if (w->end) {
            cr.range_end.data = w->end;
            cr.range_end.len = w->end_len;
        }
        cr.start_revision = floor;
        cr.prev_kv = !(w->flags & EC_WATCH_NO_PREV_KV);
        Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
        req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
        req.create_request = &cr;
        int done = 0;
        if (ec__stream_send(&s, &req.base) == 0) {
            for (;;) {
                ec__ev_t ev = ec__stream_next(&s, -1);
                if (ev == EC__EV_CLOSED)
                    break;
                if (ev != EC__EV_RECV)
                    continue;
                Etcdserverpb__WatchResponse *r = (Etcdserverpb__WatchResponse *)ec__unpack(
                    &etcdserverpb__watch_response__descriptor, s.recv);
                grpc_byte_buffer_destroy(s.recv);
                s.recv = NULL;
                if (!r)
                    continue;
                if (r->created && !r->canceled)
                    ec__backoff_reset(&bo);
                if (r->canceled && r->cancel_reason && strstr(r->cancel_reason, "auth"))
                    reauth = true;
                done = on_response(w, r, floor);
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

ec_watch_t *ec_watch_start_ex(ec_etcd_t *c, const char *key, bool prefix, int64_t start_revision,
                              unsigned flags, ec_watch_cb cb, void *arg, ec_error_t *err)
{
    if (!key || !*key || !cb) {
        ec_errorf(err, EC_EINVAL, "ec_watch_start: a key and a callback are required");
        return NULL;
    }
    ec_watch_t *w = calloc(1, sizeof(*w));
    if (!w || !(w->key = strdup(key))) {
        free(w);
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    w->key_len = strlen(key);
    if (prefix) {
        w->end = malloc(w->key_len + 1);
        if (!w->end) {
            free(w->key);
            free(w);
            ec_errorf(err, EC_ENOMEM, "out of memory");
            return NULL;
        }
        memcpy(w->end, key, w->key_len);
        size_t l = w->key_len;
        while (l > 0 && w->end[l - 1] == 0xff)
            l--;
        if (l == 0) {
            w->end[0] = 0;
            w->end_len = 1;
        } else {
            w->end[l - 1]++;
            w->end_len = l;
        }
    }
    w->c = c;
    w->flags = flags;
    w->cb = cb;
    w->arg = arg;
    w->next_rev = start_revision > 0 ? start_revision : 0;
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
        free(w->end);
        free(w->key);
        free(w);
        return NULL;
    }
    return w;
}

void ec_watch_stop(ec_watch_t *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    if (w->stream && w->stream->call)
        grpc_call_cancel(w->stream->call, NULL);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w->end);
    free(w->key);
    free(w);
}
