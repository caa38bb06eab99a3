/* Registration: this node's record at nodes/<node_id>, on its lease. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>

#include "keys.h"
#include "clock.h"
#include "log.h"
#include "detector.h"
#include "node_impl.h"

static int encode_self(ec_node_t *n, void **buf, size_t *len, ec_error_t *err)
{
    ec_node_rec_t *r = ec_node_rec_new(n->o.nproc, n->o.ndevices);
    if (!r)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    r->node_id = strdup(n->node_id);
    r->host = strdup(n->host);
    for (int i = 0; i < n->o.nproc; i++)
        r->ports[i] = n->ports[i];
    r->master_port = n->o.master_port;
    r->probe_port = n->o.probe_port;
    r->place = n->o.place;
    for (int i = 0; i < n->o.ndevices; i++)
        r->device_ids[i] = strdup(n->devices[i]);
    r->run = n->run;
    pthread_mutex_lock(&n->reg.lock);
    r->incarnation = n->reg.incarnation;
    r->state = n->reg.state;
    r->reason = n->reg.reason ? strdup(n->reg.reason) : NULL;
    r->registered_at_ms = n->reg.registered_at_ms;
    r->epoch_seen = ec__node_epoch_seen(n);
    r->progress = n->reg.progress;
    r->boot = n->reg.boot;
    r->fence_stops = n->reg.fence_stops;
    pthread_mutex_unlock(&n->reg.lock);
    r->agent_version = n->agent_version ? strdup(n->agent_version) : NULL;
    int rc = ec_node_rec_encode(r, buf, len, err);
    ec_node_rec_free(r);
    return rc;
}

static void on_lease_lost(int64_t lease, const char *why, void *arg)
{
    ec_node_t *n = arg;
    pthread_mutex_lock(&n->reg.lock);
    bool ours = lease == n->reg.lease;
    if (ours)
        n->reg.lease_lost = true;
    pthread_mutex_unlock(&n->reg.lock);
    if (ours)
        ec__node_wake_sleeper(n);
    (void)why;
}

/* What we know of the record at our node key, read with one get. */
typedef struct existing {
    bool present;
    int64_t lease, mod;
    char host[EC_HOST_MAX + 1];
    uint16_t probe_port;
    uint64_t incarnation;
} existing_t;

static int read_existing(ec_node_t *n, existing_t *e, ec_error_t *err)
{
    memset(e, 0, sizeof(*e));
    snprintf(e->host, sizeof(e->host), "?");
    ec_kv_t kv;
    bool found = false;
    int rc = ec_etcd_get(n->c, n->k_node, &kv, &found, NULL, err);
    if (rc < 0 || !found)
        return rc;
    e->present = true;
    e->lease = kv.lease;
    e->mod = kv.mod_revision;
    ec_node_rec_t *rec = NULL;
    if (ec_node_rec_decode(kv.value, kv.value_len, NULL, &rec, NULL) == 0) {
        snprintf(e->host, sizeof(e->host), "%s", rec->host);
        e->probe_port = rec->probe_port;
        e->incarnation = rec->incarnation;
    }
    ec_node_rec_free(rec);
    ec_kv_free(&kv);
    return 0;
}

/* Delete the record we looked at (only if unchanged since) and, when it was
 * leased, revoke that lease so everything the old agent held goes with it
 * (its leader key too).  True if it was ours to delete. */
static bool take_away(ec_node_t *n, const existing_t *e, ec_error_t *err)
{
    ec_cmp_t same = {.key = n->k_node, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                     .number = e->mod};
    ec_op_t del = {.type = EC_OP_DELETE, .key = n->k_node};
    ec_txn_result_t r;
    if (ec_etcd_txn(n->c, &same, 1, &del, 1, NULL, 0, &r, err) < 0)
        return false;
    bool ok = r.succeeded;
    ec_txn_result_free(&r);
    if (ok && e->lease)
        ec_etcd_lease_revoke(n->c, e->lease, NULL);
    return ok;
}

/* Wait up to ms or until stopped; false if stopped.  The loop's heartbeat is
 * kept while registration waits. */
static bool reg_pause(ec_node_t *n, int64_t ms)
{
    return !ec__node_pause(n, ms);
}

/* Create our record under a fresh lease, if the key is still absent (or, for
 * take_own, whatever is there).  1: done (*lease set), 0: someone else
 * created it meanwhile, < 0: error. */
static int create_record(ec_node_t *n, bool take_own, int64_t *lease_out, ec_error_t *err)
{
    int64_t lease;
    int rc = ec_etcd_lease_grant(n->c, n->o.lease_ttl_s, &lease, NULL, err);
    if (rc < 0)
        return rc;
    void *buf = NULL;
    size_t len = 0;
    pthread_mutex_lock(&n->reg.lock);
    n->reg.registered_at_ms = ec_wall_ms();
    pthread_mutex_unlock(&n->reg.lock);
    if ((rc = encode_self(n, &buf, &len, err)) < 0)
        goto fail;
    ec_cmp_t absent = {.key = n->k_node, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
    ec_op_t put = {.type = EC_OP_PUT, .key = n->k_node, .value = buf, .value_len = len,
                   .lease = lease};
    ec_txn_result_t r;
    if ((rc = ec_etcd_txn(n->c, &absent, take_own ? 0 : 1, &put, 1, NULL, 0, &r, err)) < 0)
        goto fail;
    bool ok = r.succeeded;
    ec_txn_result_free(&r);
    free(buf);
    if (!ok) {
        ec_etcd_lease_revoke(n->c, lease, NULL);
        return 0;
    }
    *lease_out = lease;
    return 1;
fail:
    free(buf);
    ec_etcd_lease_revoke(n->c, lease, NULL);
    return rc;
}

int ec__node_fetch_secret(ec_node_t *n, ec_error_t *err)
{
    char key[EC_KEY_MAX], runs[EC_KEY_MAX], mine[EC_KEY_MAX];
    if (ec_key_probe_secret(&n->keys, n->run, key, sizeof(key)) < 0 ||
        ec_key_runs_prefix(&n->keys, runs, sizeof(runs)) < 0 ||
        ec_key_run(&n->keys, n->run, mine, sizeof(mine)) < 0)
        return ec_errorf(err, EC_EINVAL, "cannot build the key of run %llu's probe secret",
                         (unsigned long long)n->run);
    uint8_t fresh[EC_PROBE_SECRET_LEN];
    if (ec_probe_random(fresh, sizeof(fresh)) < 0)
        return ec_errorf(err, EC_ESYS, "cannot draw random bytes for the probe secret: %s",
                         strerror(errno));
    /* Whichever agent of the run comes first writes it (no lease: it lasts
     * the run, through agent restarts), deleting the earlier runs' keys;
     * the others read it, in the same transaction. */
    ec_cmp_t absent = {.key = key, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
    ec_op_t put[2] = {{.type = EC_OP_PUT, .key = key, .value = fresh, .value_len = sizeof(fresh)},
                      {.type = EC_OP_DELETE, .key = runs, .range_end = mine}};
    ec_op_t get = {.type = EC_OP_GET, .key = key};
    ec_txn_result_t r;
    int rc = ec_etcd_txn(n->c, &absent, 1, put, 2, &get, 1, &r, err);
    if (rc < 0) {
        explicit_bzero(fresh, sizeof(fresh));
        return rc;
    }
    const uint8_t *secret = fresh;
    if (!r.succeeded) {
        const ec_kv_list_t *l = r.n == 1 ? &r.results[0].kvs : NULL;
        if (!l || l->n != 1 || l->kvs[0].value_len != EC_PROBE_SECRET_LEN) {
            ec_txn_result_free(&r);
            explicit_bzero(fresh, sizeof(fresh));
            return ec_errorf(err, EC_ECORRUPT, "%s does not hold a %d-byte probe secret (written "
                             "by another tool?); delete it and start the job's agents again",
                             key, EC_PROBE_SECRET_LEN);
        }
        secret = l->kvs[0].value;
    }
    ec_probe_key_init(&n->reg.probe_key, secret);
    explicit_bzero(fresh, sizeof(fresh));
    ec_txn_result_free(&r);
    return 0;
}

/* Register at nodes/<node_id>.  No lease of ours exists while we wait for an
 * old record to go (a lease granted first and not kept alive expired during
 * that wait: "requested lease not found" when a restarted agent's TTL was
 * shorter than its old record's remainder). */
int ec__node_do_register(ec_node_t *n, int64_t old_lease, ec_error_t *err)
{
    ec_reg_view_t v = {.my_old_lease = old_lease};
    int64_t deadline = -1, lease = 0, probed_mod = 0;
    int rc;
    for (;;) {
        existing_t e;
        if ((rc = read_existing(n, &e, err)) < 0)
            return rc;
        v.present = e.present;
        v.lease = e.lease;
        v.has_probe_port = e.probe_port != 0;
        if (e.mod != probed_mod)
            v.probe = EC_REG_PROBE_NONE; /* a new record: probe it afresh */
        v.deadline_passed = deadline >= 0 && ec_mono_ms() > deadline;
        switch (ec_reg_decide(&v)) {
        case EC_REG_CREATE:
        case EC_REG_TAKE_OWN: {
            bool own = v.present;
            if ((rc = create_record(n, own, &lease, err)) < 0)
                return rc;
            if (rc == 0)
                continue; /* another agent created it between our get and txn */
            if (own)
                ec_etcd_lease_revoke(n->c, old_lease, NULL);
            goto registered;
        }
        case EC_REG_CLEAR_JUNK:
            ec_log(EC_LOG_ERROR, "node key %s holds a value without a lease, which no agent "
                                 "writes (another tool?); deleting it", n->k_node);
            take_away(n, &e, NULL);
            v.junk_cleared = true;
            continue;
        case EC_REG_PROBE: {
            /* an answer must prove membership of this run under the
             * record's lease: a stranger on the old agent's port, or an
             * agent of an earlier run, is no live duplicate */
            ec_probe_target_t t = {.host = e.host, .port = e.probe_port, .expect_id = n->node_id,
                                   .verify = &n->reg.probe_key.v, .expect_lease = e.lease};
            /* several attempts, widened on a slow link: a live duplicate
             * behind a lossy link is not taken for dead */
            ec__node_confirm_probe(n, &t, 1, EC_DETECT_FANOUT, false, 0, NULL);
            v.probe = t.ok ? EC_REG_PROBE_ANSWERED : EC_REG_PROBE_SILENT;
            probed_mod = e.mod;
            if (t.ok)
                ec_log(EC_LOG_INFO, "node id %s is registered by an agent on host %s that "
                                    "answers its probe", n->node_id, e.host);
            continue;
        }
        case EC_REG_TAKE_DEAD:
            /* A new agent for the same node: its processes, ports and
             * perhaps host are new, so the job must re-form around it (the
             * planner sees a new incarnation: reason restart). */
            pthread_mutex_lock(&n->reg.lock);
            if (n->reg.incarnation <= e.incarnation)
                n->reg.incarnation = e.incarnation + 1;
            pthread_mutex_unlock(&n->reg.lock);
            if (take_away(n, &e, NULL))
                ec__node_emit(n, "+node %s took over its record: the agent that held it (host "
                                 "%s) no longer answers at %s:%u", n->node_id, e.host, e.host,
                              e.probe_port);
            v.probe = EC_REG_PROBE_NONE;
            continue;
        case EC_REG_WAIT:
            if (deadline < 0) {
                int64_t ttl = -1;
                if (e.lease)
                    ec_etcd_lease_ttl(n->c, e.lease, &ttl, NULL, NULL);
                deadline = ec_mono_ms() + (ttl > 0 ? ttl : 1) * 1000 + 1500;
                ec_log(EC_LOG_INFO, "node id %s is still registered (host %s); waiting up to "
                                    "%lld s for that record to expire", n->node_id, e.host,
                       (long long)(ttl > 0 ? ttl + 1 : 2));
            }
            if (!reg_pause(n, 100))
                return ec_errorf(err, EC_ECANCELED, "stopped while registering");
            continue;
        case EC_REG_DUPLICATE:
            return ec_errorf(err, EC_EEXIST,
                             "node id '%s' is already registered by a live agent on host %s (its "
                             "lease keeps being refreshed and it answers probes); give every "
                             "node a unique --node_id (default: $POD_NAME, else the host name)",
                             n->node_id, e.host);
        }
    }
registered:;
    ec_probe_server_set_lease(n->reg.probe, lease); /* answers name the new lease */
    ec_keepalive_t *ka = ec_keepalive_start(n->c, lease, n->o.lease_ttl_s, on_lease_lost, n, err);
    if (!ka) {
        ec_etcd_lease_revoke(n->c, lease, NULL);
        return err ? err->code : EC_ESYS;
    }
    ec_keepalive_set_gate(ka, ec__node_loop_alive, n);
    pthread_mutex_lock(&n->reg.lock);
    n->reg.lease = lease;
    n->reg.ka = ka;
    n->reg.lease_lost = false;
    pthread_mutex_unlock(&n->reg.lock);
    ec__node_emit(n, "+node %s registered host=%s nproc=%d lease=%llx run=%llu", n->node_id,
                  n->host, n->o.nproc, (unsigned long long)lease, (unsigned long long)n->run);
    ec__node_phase(n, EC_PEV_REGISTERED, "registered under its lease");
    return 0;
}

int ec__node_put_self(ec_node_t *n, ec_error_t *err)
{
    void *buf;
    size_t len;
    int rc = encode_self(n, &buf, &len, err);
    if (rc < 0)
        return rc;
    rc = ec_etcd_put(n->c, n->k_node, buf, len, ec_node_lease(n), NULL, err);
    free(buf);
    return rc;
}

/* ---- registration's state, for the loop and the other concerns ---------- */

void ec__reg_init(ec_node_t *n)
{
    pthread_mutex_init(&n->reg.lock, NULL);
    n->reg.state = EC_NODE_JOINING;
    if (n->o.boot_gated) { /* fields past an older caller's size are zero */
        n->reg.boot.phase = EC_BOOT_BOOTING;
        n->reg.boot.started_at_ms = ec_wall_ms();
        snprintf(n->reg.boot.why, sizeof(n->reg.boot.why), "%s",
                 n->o.boot_why ? n->o.boot_why : "joining");
    }
    n->o.boot_why = NULL; /* borrowed: copied into boot.why */
    n->reg.incarnation = 1;
}

int ec__reg_serve_probe(ec_node_t *n, ec_error_t *err)
{
    if (!n->o.probe_port)
        return 0;
    n->reg.probe = ec_probe_serve(n->host, n->o.probe_port, n->node_id, n->reg.probe_key.secret,
                                  ec_node_lease(n), err);
    return n->reg.probe ? 0 : err->code;
}

void ec__reg_abandon(ec_node_t *n)
{
    int64_t lease = ec_node_lease(n);
    if (lease)
        ec_etcd_lease_revoke(n->c, lease, NULL);
}

void ec__reg_fini(ec_node_t *n)
{
    ec_keepalive_stop(n->reg.ka);
    ec_probe_server_stop(n->reg.probe);
    free(n->reg.reason);
    free(n->reg.refused);
    pthread_mutex_destroy(&n->reg.lock);
}

const ec_probe_verifier_t *ec__reg_verify(const ec_node_t *n)
{
    return &n->reg.probe_key.v;
}

void ec__reg_mark_pending(ec_node_t *n)
{
    pthread_mutex_lock(&n->reg.lock);
    n->reg.pending = true;
    pthread_mutex_unlock(&n->reg.lock);
}

bool ec__reg_pending(ec_node_t *n)
{
    pthread_mutex_lock(&n->reg.lock);
    bool p = n->reg.pending;
    pthread_mutex_unlock(&n->reg.lock);
    return p;
}

bool ec__reg_take_pending(ec_node_t *n)
{
    pthread_mutex_lock(&n->reg.lock);
    bool p = n->reg.pending;
    n->reg.pending = false;
    pthread_mutex_unlock(&n->reg.lock);
    return p;
}

bool ec__reg_lease_lost(ec_node_t *n)
{
    pthread_mutex_lock(&n->reg.lock);
    bool l = n->reg.lease_lost;
    pthread_mutex_unlock(&n->reg.lock);
    return l;
}


int ec__reg_renew(ec_node_t *n, ec_error_t *err)
{
    pthread_mutex_lock(&n->reg.lock);
    ec_keepalive_t *ka = n->reg.ka;
    int64_t old = n->reg.lease;
    n->reg.ka = NULL;
    pthread_mutex_unlock(&n->reg.lock);
    ec_keepalive_stop(ka);
    ec__node_emit(n, "-lease %llx lost; registering again", (unsigned long long)old);
    return ec__node_do_register(n, old, err);
}

int ec__reg_leave(ec_node_t *n, ec_error_t *err)
{
    pthread_mutex_lock(&n->reg.lock);
    n->reg.state = EC_NODE_LEAVING;
    ec_keepalive_t *ka = n->reg.ka;
    n->reg.ka = NULL;
    int64_t lease = n->reg.lease;
    pthread_mutex_unlock(&n->reg.lock);
    int rc = ec__node_put_self(n, err);
    ec_keepalive_stop(ka);
    int rc2 = ec_etcd_lease_revoke(n->c, lease, err);
    return rc < 0 ? rc : rc2;
}

/* ---- registration's public calls (node.h) ------------------------------- */

/* Write our record; when that fails, the loop writes it again until it
 * succeeds (the error is still returned, for the log). */
static int put_self_or_retry(ec_node_t *n, ec_error_t *err)
{
    int rc = ec__node_put_self(n, err);
    if (rc < 0) {
        ec__reg_mark_pending(n);
        ec__node_wake_sleeper(n);
    }
    return rc;
}

int ec_node_set_state(ec_node_t *n, ec_node_state_t st, const char *reason, ec_error_t *err)
{
    pthread_mutex_lock(&n->reg.lock);
    /* Unchanged: no write.  Every write reaches every node's watch, and the
     * agent sets READY after each epoch. */
    bool same = n->reg.state == st && ((!reason && !n->reg.reason) ||
                                   (reason && n->reg.reason && !strcmp(reason, n->reg.reason)));
    if (!same) {
        n->reg.state = st;
        free(n->reg.reason);
        n->reg.reason = reason ? strdup(reason) : NULL;
    }
    pthread_mutex_unlock(&n->reg.lock);
    return same ? 0 : put_self_or_retry(n, err);
}

void ec__reg_note_failed(ec_node_t *n, const char *reason)
{
    pthread_mutex_lock(&n->reg.lock);
    if (n->reg.state != EC_NODE_FAILED && !n->reg.refused) /* not ours: the leader's */
        n->reg.refused = strdup(reason && *reason ? reason : "no reason given");
    pthread_mutex_unlock(&n->reg.lock);
}

bool ec_node_refusal(ec_node_t *n, char *why, size_t len)
{
    pthread_mutex_lock(&n->reg.lock);
    bool refused = n->reg.refused != NULL;
    if (refused && why && len)
        snprintf(why, len, "%s", n->reg.refused);
    pthread_mutex_unlock(&n->reg.lock);
    return refused;
}

void ec_node_count_fence_stop(ec_node_t *n)
{
    /* Written by the coordinator loop, never here: the fence trips when
     * etcd is away, and a write here would hold the caller (the agent's
     * loop, about to stop its processes) for the request's deadline. */
    pthread_mutex_lock(&n->reg.lock);
    n->reg.fence_stops++;
    n->reg.pending = true;
    pthread_mutex_unlock(&n->reg.lock);
    ec__node_wake_sleeper(n);
}

int ec_node_set_progress(ec_node_t *n, const ec_node_progress_t *p, ec_error_t *err)
{
    pthread_mutex_lock(&n->reg.lock);
    uint64_t seq = n->reg.progress.seq + 1;
    n->reg.progress = *p;
    n->reg.progress.seq = seq;
    pthread_mutex_unlock(&n->reg.lock);
    return put_self_or_retry(n, err);
}

int ec_node_set_boot(ec_node_t *n, const ec_node_boot_t *boot, bool bump, ec_error_t *err)
{
    pthread_mutex_lock(&n->reg.lock);
    n->reg.boot = *boot;
    n->reg.boot.why[sizeof(n->reg.boot.why) - 1] = '\0';
    if (bump)
        n->reg.incarnation++;
    pthread_mutex_unlock(&n->reg.lock);
    return put_self_or_retry(n, err);
}

ec_node_boot_t ec_node_boot(ec_node_t *n)
{
    pthread_mutex_lock(&n->reg.lock);
    ec_node_boot_t b = n->reg.boot;
    pthread_mutex_unlock(&n->reg.lock);
    return b;
}

int ec_node_bump_incarnation(ec_node_t *n, ec_error_t *err)
{
    pthread_mutex_lock(&n->reg.lock);
    n->reg.incarnation++;
    pthread_mutex_unlock(&n->reg.lock);
    return put_self_or_retry(n, err);
}

int64_t ec_node_lease(ec_node_t *n)
{
    pthread_mutex_lock(&n->reg.lock);
    int64_t l = n->reg.lease;
    pthread_mutex_unlock(&n->reg.lock);
    return l;
}

int64_t ec_node_lease_confirmed_ms(ec_node_t *n)
{
    pthread_mutex_lock(&n->reg.lock);
    int64_t t = n->reg.ka ? ec_keepalive_confirmed_ms(n->reg.ka) : 0;
    pthread_mutex_unlock(&n->reg.lock);
    return t;
}

uint64_t ec_node_incarnation(ec_node_t *n)
{
    pthread_mutex_lock(&n->reg.lock);
    uint64_t i = n->reg.incarnation;
    pthread_mutex_unlock(&n->reg.lock);
    return i;
}
