/* `ecoord check`'s view of <job>/check/ (one listing, then one watch):
 * every node's facts as last seen and the report key, under x->lock, and
 * the waits on it (command_impl.h).  The watch's thread applies events;
 * the run's thread waits on x->cond with a deadline. */
#include "command_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"

static void peer_clear(peer_t *p)
{
    free(p->key);
    ec_check_facts_clear(&p->f);
    memset(p, 0, sizeof(*p));
}

void ec__check_view_clear(ck_t *x)
{
    for (int i = 0; i < x->npeers; i++)
        peer_clear(&x->peers[i]);
    free(x->peers);
    x->peers = NULL;
    x->npeers = 0;
    free(x->report);
    x->report = NULL;
}

peer_t *ec__check_peer_get(ck_t *x, const char *key, bool create)
{
    for (int i = 0; i < x->npeers; i++)
        if (!strcmp(x->peers[i].key, key))
            return &x->peers[i];
    if (!create)
        return NULL;
    peer_t *p = realloc(x->peers, (size_t)(x->npeers + 1) * sizeof(*p));
    if (!p)
        return NULL;
    x->peers = p;
    p = &x->peers[x->npeers];
    memset(p, 0, sizeof(*p));
    if (!(p->key = strdup(key)))
        return NULL;
    x->npeers++;
    return p;
}

static void model_put(ck_t *x, const ec_kv_t *kv)
{
    if (!strcmp(kv->key, x->k_report)) {
        char *v = malloc(kv->value_len + 1);
        if (!v)
            return;
        memcpy(v, kv->value, kv->value_len);
        v[kv->value_len] = '\0';
        free(x->report);
        x->report = v;
        x->report_len = kv->value_len;
        x->report_create_rev = kv->create_revision;
        x->report_mod_rev = kv->mod_revision;
        ec_check_report_t rep;
        x->report_claim =
            ec_check_report_decode(kv->value, kv->value_len, kv->key, &rep, NULL) == 0 &&
            rep.pending;
        ec_check_report_clear(&rep);
        return;
    }
    peer_t *p = ec__check_peer_get(x, kv->key, true);
    if (!p)
        return;
    ec_check_facts_t f;
    ec_error_t err = {0};
    p->present = 1;
    if (ec_check_facts_decode(kv->value, kv->value_len, kv->key, &f, &err) == 0) {
        ec_check_facts_clear(&p->f);
        p->f = f;
        p->valid = 1;
        p->err[0] = '\0';
    } else {
        ec_check_facts_clear(&f);
        p->valid = 0;
        snprintf(p->err, sizeof(p->err), "%s", err.msg);
    }
}

static void model_del(ck_t *x, const char *key)
{
    if (!strcmp(key, x->k_report)) {
        free(x->report);
        x->report = NULL;
        x->report_len = 0;
        x->report_claim = false;
        x->report_create_rev = x->report_mod_rev = 0;
        return;
    }
    peer_t *p = ec__check_peer_get(x, key, false);
    if (p)
        p->present = 0; /* its last facts stay: the report names it */
}

static void on_watch(const ec_watch_event_t *ev, void *arg)
{
    ck_t *x = arg;
    pthread_mutex_lock(&x->lock);
    if (ev->type == EC_WATCH_PUT)
        model_put(x, ev->kv);
    else if (ev->type == EC_WATCH_DELETE)
        model_del(x, ev->kv->key);
    else if (ev->type == EC_WATCH_COMPACTED)
        x->relist = true;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
}

int ec__check_model_sync(ck_t *x, ec_error_t *err)
{
    ec_watch_stop(x->watch);
    x->watch = NULL;
    ec_kv_list_t l;
    int rc = ec_etcd_get_prefix(x->c, x->k_prefix, 0, &l, err);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&x->lock);
    for (int i = 0; i < x->npeers; i++)
        x->peers[i].present = 0;
    free(x->report);
    x->report = NULL;
    for (size_t i = 0; i < l.n; i++)
        model_put(x, &l.kvs[i]);
    x->relist = false;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
    int64_t rev = l.revision;
    ec_kv_list_free(&l);
    x->watch = ec_watch_start(x->c, x->k_prefix, true, rev + 1, on_watch, x, err);
    return x->watch ? 0 : err->code;
}

typedef bool (*pred_fn)(ck_t *x, void *arg);

/* Wait until pred holds (checked under the lock), the deadline passes or a
 * signal arrives.  Returns whether pred held. */
static bool wait_for(ck_t *x, pred_fn pred, void *arg, int64_t deadline)
{
    pthread_mutex_lock(&x->lock);
    for (;;) {
        if (pred(x, arg)) {
            pthread_mutex_unlock(&x->lock);
            return true;
        }
        int64_t now = ec_mono_ms();
        if (*x->abort || now >= deadline) {
            pthread_mutex_unlock(&x->lock);
            return false;
        }
        if (x->relist) {
            pthread_mutex_unlock(&x->lock);
            ec_error_t err = {0};
            if (ec__check_model_sync(x, &err) < 0)
                ec_log(EC_LOG_WARN, "cannot follow %s again: %s", x->k_prefix, err.msg);
            pthread_mutex_lock(&x->lock);
            continue;
        }
        int64_t until = deadline < now + POLL_MS ? deadline : now + POLL_MS;
        struct timespec ts = ec_deadline_ts(until - now);
        pthread_cond_timedwait(&x->cond, &x->lock, &ts);
    }
}

static bool pred_arrived(ck_t *x, void *arg)
{
    int want = *(int *)arg, n = 0;
    for (int i = 0; i < x->npeers; i++)
        n += x->peers[i].present && x->peers[i].valid;
    return n >= want;
}

bool ec__check_wait_arrived(ck_t *x, int want, int64_t deadline)
{
    return wait_for(x, pred_arrived, &want, deadline);
}

void ec__check_snap_free(snap_t *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->keys[i]);
    free(s->keys);
    s->n = 0;
    s->keys = NULL;
}

static bool pred_phase(ck_t *x, void *arg)
{
    const struct {
        snap_t *s;
        int phase;
    } *a = arg;
    for (int i = 0; i < a->s->n; i++) {
        peer_t *p = ec__check_peer_get(x, a->s->keys[i], false);
        if (p && p->present && p->valid && p->f.phase < a->phase)
            return false; /* (facts that stopped decoding will not get further) */
    }
    return true;
}

bool ec__check_wait_phase(ck_t *x, snap_t *s, int phase, int64_t deadline)
{
    struct {
        snap_t *s;
        int phase;
    } a = {s, phase};
    return wait_for(x, pred_phase, &a, deadline);
}

static bool pred_report(ck_t *x, void *arg)
{
    (void)arg;
    /* the report itself, or a value that is no claim (decoding it says why) */
    return x->report && x->report_create_rev > x->pub_rev && !x->report_claim;
}

bool ec__check_wait_report(ck_t *x, int64_t deadline)
{
    return wait_for(x, pred_report, NULL, deadline);
}

static bool pred_alone(ck_t *x, void *arg)
{
    (void)arg;
    for (int i = 0; i < x->npeers; i++)
        if (x->peers[i].present && strcmp(x->peers[i].key, x->k_self))
            return false;
    return true;
}

bool ec__check_wait_alone(ck_t *x, int64_t deadline)
{
    return wait_for(x, pred_alone, NULL, deadline);
}

/* Whether a node with this nonce has facts in etcd now. */
bool ec__check_nonce_present(ck_t *x, const char *nonce)
{
    for (int i = 0; i < x->npeers; i++)
        if (x->peers[i].present && x->peers[i].valid && !strcmp(x->peers[i].f.nonce, nonce))
            return true;
    return false;
}
