/* The fence: collectives only while this node's membership is confirmed.
 *
 * A node cut off from etcd (while it still reaches its peers) must stop
 * training before etcd can expire its lease: from then on the others may
 * re-form without it, and two groups would train at once.  The agent's lease
 * is refreshed by the agent, not here; this file asks etcd how long the lease
 * has left (LeaseTimeToLive, its own client with short deadlines), which etcd
 * answers in whole seconds rounded down: with the request's send time t and
 * the answer R, the lease cannot expire before t + R s (by etcd's clock).
 * The newest such bound is lease_until_ms; from lease_until_ms - margin on,
 * the node is fenced: every collective returns ECW_EUNCONFIRMED at once and
 * one in progress is aborted.  Two threads: `poll` asks etcd every TTL/10
 * (100 ms to 1 s); `dog` sleeps until the bound and fences on time even while
 * a poll is stuck on a silent etcd.
 *
 * A lease etcd says is gone (the ring evicted the node and revoked it, or
 * it expired) fences the node at once, whatever the bound said: the others
 * may have re-formed without it already.  The agent's new lease is taken
 * from the node's record as soon as it exists, and lifts the fence once
 * confirmed. */
#include "ecw_impl.h"
#include "clock.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t poll_every_ms(const ecw_t *w)
{
    int64_t ms = w->o.lease_ttl_ms / 10;
    return ms < 100 ? 100 : ms > 1000 ? 1000 : ms;
}

static bool stopping(ecw_t *w)
{
    pthread_mutex_lock(&w->fence_mu);
    bool s = w->fence_stop;
    pthread_mutex_unlock(&w->fence_mu);
    return s;
}

/* Sleep up to ms on fence_cv; true if stopping. */
static bool nap(ecw_t *w, int64_t ms)
{
    if (ms < 1)
        ms = 1;
    struct timespec ts = ec_deadline_ts(ms);
    pthread_mutex_lock(&w->fence_mu);
    if (!w->fence_stop)
        pthread_cond_timedwait(&w->fence_cv, &w->fence_mu, &ts);
    bool s = w->fence_stop;
    pthread_mutex_unlock(&w->fence_mu);
    return s;
}

/* Compare the bound with now and act on a change: fence (and abort a
 * collective in progress) or lift the fence. */
static void update(ecw_t *w)
{
    int64_t now = ec_mono_ms();
    bool gone = atomic_load(&w->lease_gone);
    bool fence = gone || now >= atomic_load(&w->lease_until_ms) - w->o.lease_margin_ms;
    int was = atomic_exchange(&w->fenced, fence ? 1 : 0);
    if (fence && !was && gone) {
        ecw__log(w, ECW_LOG_WARN, "-fenced: lease %" PRIx64 " is gone (etcd says so: this node "
                 "was evicted, or its lease expired); refusing collectives until the agent's "
                 "next lease is confirmed", (uint64_t)atomic_load(&w->lease));
    } else if (fence && !was) {
        int64_t since = now - atomic_load(&w->confirmed_ms);
        ecw__log(w, ECW_LOG_WARN, "-fenced: lease %" PRIx64 " not confirmed for %" PRId64 " ms; "
                 "refusing collectives until etcd answers", (uint64_t)atomic_load(&w->lease),
                 since);
    }
    if (fence && !was) {
        /* fenced is set first: a collective that begins from now on sees it
         * (begin counts itself in in_coll, then checks). */
        if (atomic_load(&w->in_coll) > 0) {
            pthread_mutex_lock(&w->comm_mu);
            if (w->comm)
                w->be->abort(w->comm);
            pthread_mutex_unlock(&w->comm_mu);
            ecw__log(w, ECW_LOG_WARN, "-comm epoch %" PRIu64 " aborted: membership cannot be "
                     "confirmed", atomic_load(&w->target_num));
        }
    } else if (!fence && was) {
        ecw__log(w, ECW_LOG_INFO, "+fence lifted: lease %" PRIx64 " confirmed again",
                 (uint64_t)atomic_load(&w->lease));
    }
    if (fence != (bool)was) {
        pthread_mutex_lock(&w->fence_mu);
        pthread_cond_broadcast(&w->fence_cv);
        pthread_mutex_unlock(&w->fence_mu);
        /* and whoever waits on the epoch's cv (ecw_wait_epoch, ecw_epoch_get) */
        pthread_mutex_lock(&w->mu);
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

/* The lease etcd says is gone: take the one the node's record is on now,
 * if the agent registered again. */
static void follow(ecw_t *w, int64_t dead)
{
    char key[EC_KEY_MAX];
    if (ec_key_node(&w->keys, w->o.node_id, key, sizeof(key)) < 0)
        return;
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(w->fence_etcd, key, &kv, &found, NULL, NULL) < 0 || !found)
        return;
    int64_t now = kv.lease;
    ec_kv_free(&kv);
    if (now > 0 && now != dead &&
        atomic_compare_exchange_strong(&w->lease, &dead, now))
        ecw__log(w, ECW_LOG_INFO, "+lease %" PRIx64 " (was %" PRIx64 "): the agent of node %s "
                 "registered again", (uint64_t)now, (uint64_t)dead, w->o.node_id);
}

/* One question to etcd; true when the lease was confirmed. */
static bool ask(ecw_t *w)
{
    int64_t lease = atomic_load(&w->lease);
    int64_t t0 = ec_mono_ms(), ttl = 0;
    if (ec_etcd_lease_ttl(w->fence_etcd, lease, &ttl, NULL, NULL) < 0)
        return false;
    if (ttl <= 0) {
        atomic_store(&w->lease_gone, 1);
        follow(w, lease);
        return false;
    }
    atomic_store(&w->lease_gone, 0);
    int64_t until = t0 + ttl * 1000;
    int64_t old = atomic_load(&w->lease_until_ms);
    while (until > old && !atomic_compare_exchange_weak(&w->lease_until_ms, &old, until))
        ;
    atomic_store(&w->confirmed_ms, t0);
    return true;
}

static void *poll_main(void *arg)
{
    ecw_t *w = arg;
    while (!stopping(w)) {
        int64_t t0 = ec_mono_ms();
        ask(w);
        update(w);
        int64_t left = t0 + poll_every_ms(w) - ec_mono_ms();
        if (nap(w, left))
            break;
    }
    return NULL;
}

static void *dog_main(void *arg)
{
    ecw_t *w = arg;
    while (!stopping(w)) {
        update(w);
        int64_t at = atomic_load(&w->lease_until_ms) - w->o.lease_margin_ms;
        int64_t left = at - ec_mono_ms();
        /* fenced: the poll thread lifts it; look again now and then */
        if (nap(w, left > 0 && left < 1000 ? left : 1000))
            break;
    }
    return NULL;
}

int ecw__fence_start(ecw_t *w, const ec_etcd_opts_t *eo, ec_error_t *err)
{
    if (!w->o.lease || w->o.lease_ttl_ms <= 0)
        return 0; /* no lease to confirm: not started by ecoord launch, or an old one */
    if (!w->o.lease_margin_ms)
        w->o.lease_margin_ms = w->o.lease_ttl_ms / 5;
    if (w->o.lease_margin_ms >= w->o.lease_ttl_ms)
        return ec_errorf(err, EC_EINVAL, "lease margin %d ms (ECOORD_LEASE_MARGIN_MS) is not "
                         "below the lease TTL %d ms (ECOORD_LEASE_TTL_MS): the fence would "
                         "never let a collective run; use ecoord launch's --lease_margin",
                         w->o.lease_margin_ms, w->o.lease_ttl_ms);
    ec_etcd_opts_t o = *eo;
    o.call_timeout_ms = (int)poll_every_ms(w);
    w->fence_etcd = ec_etcd_create(&o, err);
    if (!w->fence_etcd)
        return ec_error_prefix(err, "the fence's etcd client");
    w->fence_on = true;
    atomic_store(&w->confirmed_ms, ec_mono_ms());
    /* The agent holds the lease as it starts us: confirm it before the
     * first collective, trying for one TTL. */
    int64_t deadline = ec_mono_ms() + w->o.lease_ttl_ms;
    while (!ask(w) && ec_mono_ms() < deadline)
        nap(w, 100);
    update(w);
    if (pthread_create(&w->fence_poll, NULL, poll_main, w) != 0)
        return ec_errorf(err, EC_ESYS, "cannot start the fence's thread");
    w->fence_threads = 1;
    if (pthread_create(&w->fence_dog, NULL, dog_main, w) != 0)
        return ec_errorf(err, EC_ESYS, "cannot start the fence's thread");
    w->fence_threads = 2;
    return 0;
}

void ecw__fence_stop(ecw_t *w)
{
    pthread_mutex_lock(&w->fence_mu);
    w->fence_stop = true;
    pthread_cond_broadcast(&w->fence_cv);
    pthread_mutex_unlock(&w->fence_mu);
    if (w->fence_threads > 0)
        pthread_join(w->fence_poll, NULL);
    if (w->fence_threads > 1)
        pthread_join(w->fence_dog, NULL);
    w->fence_threads = 0;
    ec_etcd_destroy(w->fence_etcd);
    w->fence_etcd = NULL;
    w->fence_on = false;
}

int64_t ecw__fence_due_ms(const ecw_t *w)
{
    if (!w->fence_on)
        return INT64_MAX;
    return atomic_load(&w->lease_until_ms) - w->o.lease_margin_ms;
}

bool ecw__fence_up(const ecw_t *w)
{
    /* Not only the flag: the bound itself, so that a collective is refused on
     * time even if the threads were late. */
    return w->fence_on && (atomic_load(&w->fenced) || atomic_load(&w->lease_gone) ||
                           ec_mono_ms() >= ecw__fence_due_ms(w));
}

int ecw_confirmed(const ecw_t *w)
{
    return w && !ecw__fence_up(w);
}

int ecw__fence_check(ecw_t *w, const char *what, ec_error_t *err)
{
    if (!ecw__fence_up(w))
        return 0;
    int64_t now = ec_mono_ms();
    return ec_errorf(err, ECW_EUNCONFIRMED, "%s: membership cannot be confirmed: etcd has not "
                     "confirmed node %s's lease for %" PRId64 " ms (unreachable?), and the job may "
                     "re-form without it; refused so that two groups never train at once: wait "
                     "and retry (the state is kept)", what, w->o.node_id,
                     now - atomic_load(&w->confirmed_ms));
}

int ecw__fence_wait(ecw_t *w, const char *what, int64_t deadline_ms, ec_error_t *err)
{
    for (;;) {
        int rc = ecw__fence_check(w, what, err);
        if (rc == 0 || ec_mono_ms() >= deadline_ms || atomic_load(&w->finalizing))
            return rc;
        int64_t left = deadline_ms - ec_mono_ms();
        nap(w, left < 100 ? left : 100);
    }
}
