/* The per-epoch key/value of ecw.h: epochs/<n>/kv/<name> on the node's
 * lease, for programs whose collectives are their own (the address of the
 * store member rank 0 hosts, say).  A namespace apart from the library's own
 * comm/ keys, so that a program's name never meets a claim or a Gloo
 * address.
 *
 * ecw_epoch_get reads the key, and while it is absent watches it from just
 * after that read; the watch, a newer epoch, the fence and finalize all wake
 * it through the epoch's condition variable.  It reads again once a second
 * as well (a watch that broke), or, when no watch could be started, after
 * 2, 4, ... 50 ms. */
#include "ecw_impl.h"
#include "clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The key of name in the handle's current epoch, or an error. */
static int kv_key(ecw_t *w, const char *what, const char *name, uint64_t *epoch, char *key,
                  size_t len, ec_error_t *err)
{
    int rc = ec_kv_name_check(name, err);
    if (rc < 0)
        return ec_error_prefix(err, "%s", what);
    *epoch = atomic_load(&w->built_num);
    if (!*epoch)
        return ec_errorf(err, EC_EINVAL, "%s '%s': the handle has no epoch yet (ecw_init or "
                         "ecw_rebuild has not succeeded): rebuild first", what, name);
    if (ec_key_epoch_kv(&w->keys, *epoch, name, key, len) < 0)
        return ec_errorf(err, EC_EINTERNAL, "%s: cannot build the key of '%s' in epoch %" PRIu64
                         " (a bug in the worker library)", what, name, *epoch);
    return 0;
}

static int put(ecw_t *w, const char *name, const void *value, size_t len, ec_error_t *err)
{
    if (len && !value)
        return ec_errorf(err, EC_EINVAL, "ecw_epoch_put '%s': NULL value of %zu bytes",
                         name ? name : "(null)", len);
    if (len > ECW_EPOCH_VALUE_MAX)
        return ec_errorf(err, EC_ETOOLARGE, "ecw_epoch_put '%s': %zu bytes, more than the %d "
                         "a per-epoch value may hold: publish where to find it instead",
                         name ? name : "(null)", len, ECW_EPOCH_VALUE_MAX);
    char key[EC_KEY_MAX];
    uint64_t epoch = 0;
    int rc = kv_key(w, "ecw_epoch_put", name, &epoch, key, sizeof(key), err);
    if (rc < 0)
        return rc;
    rc = ecw__put(w, key, len ? value : "", len, err);
    if (rc < 0)
        return ec_error_prefix(err, "ecw_epoch_put '%s' in epoch %" PRIu64, name, epoch);
    ecw__log(w, ECW_LOG_DEBUG, "epoch %" PRIu64 ": put %s (%zu bytes)", epoch, name, len);
    return 0;
}

int ecw_epoch_put(ecw_t *w, const char *name, const void *value, size_t len, ecw_error_t *uerr)
{
    ec_error_t err = {0};
    if (!w)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EINVAL, "ecw_epoch_put: NULL handle"));
    if (!ecw__api_enter(w))
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EABORTED, "ecw_epoch_put: the handle "
                                              "is being finalized"));
    int rc = put(w, name, value, len, &err);
    ecw__api_leave(w);
    return ecw__out(uerr, &err, rc);
}

/* A get's watch on its key: any event but the stream's (re)creation means
 * "read it again"; it wakes the getter through the epoch's cv. */
typedef struct kv_wait {
    ecw_t *w;
    _Atomic int changed;
} kv_wait_t;

static void on_key(const ec_watch_event_t *ev, void *arg)
{
    kv_wait_t *kw = arg;
    if (ev->type == EC_WATCH_CREATED)
        return;
    pthread_mutex_lock(&kw->w->mu);
    atomic_store(&kw->changed, 1);
    pthread_cond_broadcast(&kw->w->cv);
    pthread_mutex_unlock(&kw->w->mu);
}

/* Sleep on the epoch's cv until `until` (monotonic ms) unless the key
 * changed, a newer epoch than epoch, the fence or finalize already ends the
 * wait. */
static void pause_on_cv(ecw_t *w, kv_wait_t *kw, uint64_t epoch, int64_t until)
{
    int64_t due = ecw__fence_due_ms(w);
    pthread_mutex_lock(&w->mu);
    if (!atomic_load(&kw->changed) && atomic_load(&w->latest_num) <= epoch &&
        !atomic_load(&w->finalizing) && !w->stopping && !ecw__fence_up(w))
        ecw__cond_wait_until(&w->cv, &w->mu, due < until ? due : until);
    pthread_mutex_unlock(&w->mu);
}

/* One look at the key: 1 and the value copied (or ECW_ETOOLARGE), 0 when
 * absent (or etcd briefly away: rc_out says which), < 0 on error. */
static int look(ecw_t *w, const char *name, uint64_t epoch, const char *key, void *buf,
                size_t cap, size_t *len, int64_t *rev, int *rc_out, ec_error_t *err)
{
    ec_kv_t kv;
    bool found = false;
    int rc = ec_etcd_get(w->etcd, key, &kv, &found, rev, err);
    *rc_out = rc;
    if (rc == 0 && found) {
        *len = kv.value_len;
        if (kv.value_len > cap)
            rc = ec_errorf(err, EC_ETOOLARGE, "ecw_epoch_get '%s' in epoch %" PRIu64 ": the "
                           "value is %zu bytes, the buffer %zu: call again with %zu", name,
                           epoch, kv.value_len, cap, kv.value_len);
        else if (kv.value_len)
            memcpy(buf, kv.value, kv.value_len);
        ec_kv_free(&kv);
        return rc < 0 ? rc : 1;
    }
    /* etcd briefly away (an election, a restart): keep trying until the
     * deadline rather than fail at the first refusal. */
    if (rc < 0 && rc != EC_EUNAVAILABLE && rc != EC_ETIMEDOUT)
        return ec_error_prefix(err, "ecw_epoch_get '%s' in epoch %" PRIu64, name, epoch);
    return 0;
}

static int get(ecw_t *w, const char *name, void *buf, size_t cap, size_t *len, int timeout_ms,
               ec_error_t *err)
{
    if (!len)
        return ec_errorf(err, EC_EINVAL, "ecw_epoch_get: NULL len");
    *len = 0;
    if (cap && !buf)
        return ec_errorf(err, EC_EINVAL, "ecw_epoch_get: NULL buffer of %zu bytes", cap);
    char key[EC_KEY_MAX];
    uint64_t epoch = 0;
    int rc = kv_key(w, "ecw_epoch_get", name, &epoch, key, sizeof(key), err);
    if (rc < 0)
        return rc;
    int64_t deadline = ec_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    kv_wait_t kw = {.w = w};
    ec_watch_t *watch = NULL;
    int pause = 2;
    for (;;) {
        if (atomic_load(&w->finalizing)) {
            rc = ec_errorf(err, EC_EABORTED, "ecw_epoch_get '%s': the handle is being "
                           "finalized", name);
            break;
        }
        if ((rc = ecw__fence_check(w, "ecw_epoch_get", err)) < 0)
            break;
        atomic_store(&kw.changed, 0);
        int64_t rev = 0;
        int got = 0;
        rc = look(w, name, epoch, key, buf, cap, len, &rev, &got, err);
        if (rc != 0) {
            rc = rc > 0 ? 0 : rc;
            break;
        }
        uint64_t latest = atomic_load(&w->latest_num);
        if (latest > epoch) {
            rc = ec_errorf(err, EC_EEPOCHCHANGED, "ecw_epoch_get '%s': epoch %" PRIu64 " was "
                           "published while waiting for it in epoch %" PRIu64 ": call "
                           "ecw_rebuild, then get it in the new epoch", name, latest, epoch);
            break;
        }
        int64_t now = ec_mono_ms();
        if (now >= deadline) {
            rc = got < 0 ? ec_error_prefix(err, "ecw_epoch_get '%s' in epoch %" PRIu64, name,
                                           epoch)
                         : ec_errorf(err, EC_ETIMEDOUT, "ecw_epoch_get '%s': not in epoch %"
                                     PRIu64 " within %d ms (under '%s'): the member that "
                                     "writes it is late or dead; wait for the next epoch", name,
                                     epoch, timeout_ms > 0 ? timeout_ms : 0, key);
            break;
        }
        /* Watch the key from just after the read: a put after it wakes us
         * at once.  Without a watch (or should it break), re-read after a
         * pause; with one, still once a second. */
        if (!watch && got == 0)
            watch = ec_watch_start_ex(w->etcd, key, false, rev + 1, EC_WATCH_NO_PREV_KV, on_key,
                                      &kw, NULL);
        int64_t next = now + (watch ? 1000 : pause);
        pause_on_cv(w, &kw, epoch, next < deadline ? next : deadline);
        if (pause < 50)
            pause = pause * 2 > 50 ? 50 : pause * 2;
    }
    ec_watch_stop(watch); /* no callback after this: kw may go */
    return rc;
}

int ecw_epoch_get(ecw_t *w, const char *name, void *buf, size_t cap, size_t *len, int timeout_ms,
                  ecw_error_t *uerr)
{
    ec_error_t err = {0};
    if (!w)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EINVAL, "ecw_epoch_get: NULL handle"));
    if (!ecw__api_enter(w))
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EABORTED, "ecw_epoch_get: the handle "
                                              "is being finalized"));
    int rc = get(w, name, buf, cap, len, timeout_ms, &err);
    ecw__api_leave(w);
    return ecw__out(uerr, &err, rc);
}
