/* Leases: grant, revoke, time-to-live, and the keepalive thread.
 *
 * The keepalive refreshes every TTL/3 over one LeaseKeepAlive stream.  The
 * lease is declared lost, once, when etcd answers TTL=0 (it expired or was
 * revoked) or when no refresh succeeded for a whole TTL (etcd unreachable:
 * from then on etcd may have dropped the lease and the caller must assume
 * it did).
 *
 * It also keeps the time each confirmed refresh was *sent*: etcd restarts
 * the TTL when it receives a refresh, which is after we sent it, so the
 * lease cannot expire before send time + TTL (by etcd's clock).  The agent
 * fences itself on that (ec_keepalive_confirmed_ms). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "clock.h"
#include "etcd_impl.h"
#include "keepalive.h"
#include "log.h"

int ec_etcd_lease_grant(ec_etcd_t *c, int64_t ttl_s, int64_t *id, int64_t *granted,
                        ec_error_t *err)
{
    if (ttl_s < 1)
        return ec_errorf(err, EC_EINVAL, "lease TTL must be at least 1 s (got %lld)",
                         (long long)ttl_s);
    if (c->mem)
        return ec__mem_lease_grant(c->mem, ttl_s, id, granted, err);
    Etcdserverpb__LeaseGrantRequest req = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    req.ttl = ttl_s;
    Etcdserverpb__LeaseGrantResponse *r = NULL;
    int rc = ec__unary(c, "/etcdserverpb.Lease/LeaseGrant", &req.base,
                       &etcdserverpb__lease_grant_response__descriptor, (ProtobufCMessage **)&r, err);
    if (rc < 0)
        return rc;
    if (r->error && *r->error)
        rc = ec_errorf(err, EC_EINTERNAL, "etcd at %s refused a lease: %s", c->endpoints, r->error);
    *id = r->id;
    if (granted)
        *granted = r->ttl;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return rc;
}

int ec_etcd_lease_revoke(ec_etcd_t *c, int64_t id, ec_error_t *err)
{
    if (c->mem)
        return ec__mem_lease_revoke(c->mem, id, err);
    Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    req.id = id;
    Etcdserverpb__LeaseRevokeResponse *r = NULL;
    int rc = ec__unary(c, "/etcdserverpb.Lease/LeaseRevoke", &req.base,
                       &etcdserverpb__lease_revoke_response__descriptor, (ProtobufCMessage **)&r,
                       err);
    if (rc < 0)
        return rc;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return 0;
}

int ec_etcd_lease_ttl(ec_etcd_t *c, int64_t id, int64_t *ttl, int64_t *granted, ec_error_t *err)
{
    if (c->mem)
        return ec__mem_lease_ttl(c->mem, id, ttl, granted, err);
    Etcdserverpb__LeaseTimeToLiveRequest req = ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
    req.id = id;
    Etcdserverpb__LeaseTimeToLiveResponse *r = NULL;
    int rc = ec__unary(c, "/etcdserverpb.Lease/LeaseTimeToLive", &req.base,
                       &etcdserverpb__lease_time_to_live_response__descriptor,
                       (ProtobufCMessage **)&r, err);
    if (rc < 0)
        return rc;
    *ttl = r->ttl; /* -1: no such lease */
    if (granted)
        *granted = r->grantedttl;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return 0;
}

/* ---- keepalive (keepalive.h) -------------------------------------------- */

void ec__ka_lost(ec_keepalive_t *ka, const char *why)
{
    pthread_mutex_lock(&ka->lock);
    ka->alive = false;
    pthread_mutex_unlock(&ka->lock);
    ec_log(EC_LOG_WARN, "-lease %llx lost: %s", (unsigned long long)ka->id, why);
    if (ka->cb)
        ka->cb(ka->id, why, ka->arg);
}

static bool ka_stopping(ec_keepalive_t *ka)
{
    pthread_mutex_lock(&ka->lock);
    bool s = ka->stop;
    pthread_mutex_unlock(&ka->lock);
    return s;
}

bool ec__ka_wait(ec_keepalive_t *ka, int64_t ms)
{
    struct timespec ts = ec_deadline_ts(ms > 0 ? ms : 0);
    pthread_mutex_lock(&ka->lock);
    while (!ka->stop && pthread_cond_timedwait(&ka->cond, &ka->lock, &ts) == 0)
        ;
    bool s = ka->stop;
    pthread_mutex_unlock(&ka->lock);
    return s;
}

bool ec__ka_gate_open(ec_keepalive_t *ka)
{
    pthread_mutex_lock(&ka->lock);
    ec_keepalive_gate_cb gate = ka->gate;
    void *arg = ka->gate_arg;
    pthread_mutex_unlock(&ka->lock);
    return !gate || gate(arg);
}

void ec__ka_confirmed(ec_keepalive_t *ka, int64_t sent_ms)
{
    pthread_mutex_lock(&ka->lock);
    ka->count++;
    if (sent_ms > ka->confirmed_ms)
        ka->confirmed_ms = sent_ms;
    pthread_mutex_unlock(&ka->lock);
}

/* The gRPC client's driver. */
static void *ka_main(void *arg)
{
    ec_keepalive_t *ka = arg;
    ec__backoff_t bo;
    ec__backoff_init(&bo, 50, 1000, (uint32_t)ka->id);
    int64_t last_ok = ec_mono_ms();
    Etcdserverpb__LeaseKeepAliveRequest req = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    req.id = ka->id;
    /* Send times of the refreshes not answered yet, oldest first: etcd
     * answers a stream's requests in order. */
    enum { NSENT = 16 };
    int64_t sent[NSENT];
    int sent_head = 0, nsent = 0;
    while (!ka_stopping(ka)) {
        ec__stream_t s;
        ec_error_t err = {0};
        sent_head = nsent = 0; /* a new stream: nothing of the old one will be answered */
        if (ec__stream_open(&s, ka->c, "/etcdserverpb.Lease/LeaseKeepAlive", &ka->lock, &err) == 0) {
            pthread_mutex_lock(&ka->lock);
            ka->stream = &s; /* from now on stop() can cancel it */
            if (ka->stop)
                grpc_call_cancel(s.call, NULL);
            pthread_mutex_unlock(&ka->lock);
            int64_t next_send = ec_mono_ms();
            bool lost = false;
            for (;;) {
                int64_t now = ec_mono_ms();
                if (now - last_ok >= ka->ttl_ms) {
                    char why[160];
                    snprintf(why, sizeof(why), "no refresh succeeded for %lld ms (TTL); etcd at %s unreachable?",
                             (long long)(now - last_ok), ka->c->endpoints);
                    lost = true;
                    ec__ka_lost(ka, why);
                    break;
                }
                if (now >= next_send && !s.send_busy) {
                    if (!ec__ka_gate_open(ka) || nsent == NSENT) {
                        next_send = now + 100; /* ask again soon; the TTL runs on */
                    } else {
                        if (ec__stream_send(&s, &req.base) < 0)
                            break;
                        sent[(sent_head + nsent++) % NSENT] = now;
                        next_send = now + ka->ttl_ms / 3;
                    }
                }
                int64_t dl = next_send < last_ok + ka->ttl_ms ? next_send : last_ok + ka->ttl_ms;
                ec__ev_t ev = ec__stream_next(&s, dl);
                if (ev == EC__EV_CLOSED)
                    break;
                if (ev != EC__EV_RECV)
                    continue;
                Etcdserverpb__LeaseKeepAliveResponse *r =
                    (Etcdserverpb__LeaseKeepAliveResponse *)ec__unpack(
                        &etcdserverpb__lease_keep_alive_response__descriptor, s.recv);
                grpc_byte_buffer_destroy(s.recv);
                s.recv = NULL;
                if (!r)
                    continue;
                int64_t ttl = r->ttl;
                protobuf_c_message_free_unpacked(&r->base, NULL);
                if (ttl <= 0) {
                    lost = true;
                    ec__ka_lost(ka, "etcd answered TTL=0: the lease expired or was revoked");
                    break;
                }
                last_ok = ec_mono_ms();
                ec__backoff_reset(&bo);
                int64_t at = -1;
                if (nsent > 0) {
                    at = sent[sent_head];
                    sent_head = (sent_head + 1) % NSENT;
                    nsent--;
                }
                ec__ka_confirmed(ka, at);
            }
            ec__stream_close(&s);
            if (lost)
                break;
        }
        pthread_mutex_lock(&ka->lock);
        ka->stream = NULL;
        pthread_mutex_unlock(&ka->lock);
        int64_t left = last_ok + ka->ttl_ms - ec_mono_ms();
        int64_t d = ec__backoff_next(&bo);
        if (ec__ka_wait(ka, d < left ? d : left))
            break;
        if (ec_mono_ms() - last_ok >= ka->ttl_ms) {
            ec__ka_lost(ka, "no refresh succeeded within the TTL: etcd unreachable");
            break;
        }
    }
    pthread_mutex_lock(&ka->lock);
    ka->stream = NULL;
    pthread_mutex_unlock(&ka->lock);
    return NULL;
}

ec_keepalive_t *ec_keepalive_start(ec_etcd_t *c, int64_t id, int64_t ttl_s, ec_lease_lost_cb cb,
                                   void *arg, ec_error_t *err)
{
    if (ttl_s < 1) {
        ec_errorf(err, EC_EINVAL, "keepalive: TTL must be at least 1 s");
        return NULL;
    }
    ec_keepalive_t *ka = calloc(1, sizeof(*ka));
    if (!ka) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    ka->c = c;
    ka->mem = c->mem;
    ka->id = id;
    ka->ttl_ms = ttl_s * 1000;
    ka->cb = cb;
    ka->arg = arg;
    ka->alive = true;
    /* The grant was sent a moment earlier (which would be the exact bound);
     * the first refresh goes out at once and replaces this. */
    ka->confirmed_ms = ec_mono_ms();
    pthread_mutex_init(&ka->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ka->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&ka->thread, NULL, ka->mem ? ec__mem_ka_main : ka_main, ka) != 0) {
        pthread_mutex_destroy(&ka->lock);
        pthread_cond_destroy(&ka->cond);
        free(ka);
        ec_errorf(err, EC_ESYS, "cannot start the keepalive thread");
        return NULL;
    }
    return ka;
}

void ec_keepalive_set_gate(ec_keepalive_t *ka, ec_keepalive_gate_cb gate, void *arg)
{
    pthread_mutex_lock(&ka->lock);
    ka->gate = gate;
    ka->gate_arg = arg;
    pthread_mutex_unlock(&ka->lock);
}

void ec_keepalive_stop(ec_keepalive_t *ka)
{
    if (!ka)
        return;
    pthread_mutex_lock(&ka->lock);
    ka->stop = true;
    if (ka->stream && ka->stream->call)
        grpc_call_cancel(ka->stream->call, NULL);
    pthread_cond_broadcast(&ka->cond);
    pthread_mutex_unlock(&ka->lock);
    pthread_join(ka->thread, NULL);
    pthread_mutex_destroy(&ka->lock);
    pthread_cond_destroy(&ka->cond);
    free(ka);
}

bool ec_keepalive_alive(ec_keepalive_t *ka)
{
    pthread_mutex_lock(&ka->lock);
    bool a = ka->alive;
    pthread_mutex_unlock(&ka->lock);
    return a;
}

uint64_t ec_keepalive_count(ec_keepalive_t *ka)
{
    pthread_mutex_lock(&ka->lock);
    uint64_t n = ka->count;
    pthread_mutex_unlock(&ka->lock);
    return n;
}

int64_t ec_keepalive_confirmed_ms(ec_keepalive_t *ka)
{
    pthread_mutex_lock(&ka->lock);
    int64_t t = ka->confirmed_ms;
    pthread_mutex_unlock(&ka->lock);
    return t;
}
