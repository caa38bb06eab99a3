/* Restart mode's stop barrier, the agent's side (barrier.h). */
#include "barrier.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "stop_barrier.h"

/* How often a pending barrier reads the keys again (loopback etcd answers
 * in about a millisecond; a confirmation is seen within this). */
#define BARRIER_POLL_MS 25

struct ec_barrier {
    ec_etcd_t *c;
    ec_keys_t keys;
    char self[EC_NODE_ID_MAX + 1];
    int64_t ttl_ms;
    /* pending */
    bool pending;
    uint64_t epoch;
    int m_id;
    long long first, last;
    int64_t begun_ms;
    /* the holder waited on: since when, and when its departure was seen */
    char waiting_on[EC_NODE_ID_MAX + 1];
    int64_t waiting_lease, since_ms, gone_seen_ms;
    bool told;
    /* our claim on holders/<claim_m>, as written at claim_rev (0: none) */
    int claim_m;
    ec_rank_holder_t claim_h;
    int64_t claim_rev;
};

ec_barrier_t *ec_barrier_new(ec_etcd_t *c, const ec_keys_t *keys, const char *self,
                             int64_t ttl_ms)
{
    ec_barrier_t *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->c = c;
    b->keys = *keys;
    snprintf(b->self, sizeof(b->self), "%s", self);
    b->ttl_ms = ttl_ms;
    b->claim_m = -1;
    return b;
}

void ec_barrier_free(ec_barrier_t *b)
{
    if (!b)
        return;
    free(b);
}

void ec_barrier_begin(ec_barrier_t *b, uint64_t epoch, int m_id, long long first, long long last)
{
    b->pending = true;
    b->epoch = epoch;
    b->m_id = m_id;
    b->first = first;
    b->last = last;
    b->begun_ms = ec_mono_ms();
    b->told = false;
}

bool ec_barrier_pending(const ec_barrier_t *b)
{
    return b && b->pending;
}

void ec_barrier_cancel(ec_barrier_t *b)
{
    if (b)
        b->pending = false;
}

/* Read holders/<m>: 1 with h and its mod revision, 0 when absent, <0 on a
 * read error.  An unreadable value (someone else's garbage) counts as
 * absent, said once per tick at WARN with the key and the fix. */
static int read_holder(ec_barrier_t *b, ec_rank_holder_t *h, int64_t *mod)
{
    char key[EC_KEY_MAX];
    ec_key_holder(&b->keys, b->m_id, key, sizeof(key));
    ec_kv_t kv;
    bool found = false;
    ec_error_t err = {0};
    if (ec_etcd_get(b->c, key, &kv, &found, NULL, &err) < 0) {
        ec_log(EC_LOG_WARN, "stop barrier: cannot read %s: %s (retrying)", key, err.msg);
        return -1;
    }
    *mod = 0;
    if (!found)
        return 0;
    *mod = kv.mod_revision;
    int rc = ec_rank_holder_decode(kv.value, kv.value_len, key, h, &err);
    ec_kv_free(&kv);
    if (rc < 0) {
        ec_log(EC_LOG_WARN, "stop barrier: %s; taken as no holder", err.msg);
        return 0;
    }
    return 1;
}

/* The holder's record lease (0: none) and its departure, in one read. */
static int read_holder_state(ec_barrier_t *b, const char *id, int64_t *rec_lease,
                             ec_departure_t *gone, bool *have_gone)
{
    char knode[EC_KEY_MAX], kgone[EC_KEY_MAX];
    ec_key_node(&b->keys, id, knode, sizeof(knode));
    ec_key_gone(&b->keys, id, kgone, sizeof(kgone));
    ec_op_t ops[2] = {{.type = EC_OP_GET, .key = knode}, {.type = EC_OP_GET, .key = kgone}};
    ec_txn_result_t r;
    ec_error_t err = {0};
    if (ec_etcd_txn(b->c, NULL, 0, ops, 2, NULL, 0, &r, &err) < 0) {
        ec_log(EC_LOG_WARN, "stop barrier: cannot read node %s's record: %s (retrying)", id,
               err.msg);
        return -1;
    }
    *rec_lease = 0;
    *have_gone = false;
    if (r.n == 2 && r.results[0].kvs.n == 1)
        *rec_lease = r.results[0].kvs.kvs[0].lease;
    if (r.n == 2 && r.results[1].kvs.n == 1) {
        const ec_kv_t *kv = &r.results[1].kvs.kvs[0];
        if (ec_departure_decode(kv->value, kv->value_len, kgone, gone, &err) == 0)
            *have_gone = true;
        else
            ec_log(EC_LOG_WARN, "stop barrier: %s; taken as no eviction", err.msg);
    }
    ec_txn_result_free(&r);
    return 0;
}

/* Write our claim if holders/<m> is still what we read (mod: 0, absent). */
static bool claim(ec_barrier_t *b, int64_t lease, int64_t mod)
{
    ec_rank_holder_t h = {.epoch = b->epoch, .lease = lease};
    snprintf(h.node_id, sizeof(h.node_id), "%s", b->self);
    void *buf = NULL;
    size_t len = 0;
    ec_error_t err = {0};
    if (ec_rank_holder_encode(&h, &buf, &len, &err) < 0) {
        ec_log(EC_LOG_WARN, "stop barrier: %s", err.msg);
        return false;
    }
    char key[EC_KEY_MAX];
    ec_key_holder(&b->keys, b->m_id, key, sizeof(key));
    ec_cmp_t cmp = {.key = key, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL, .number = mod};
    ec_op_t put = {.type = EC_OP_PUT, .key = key, .value = buf, .value_len = len};
    ec_txn_result_t r;
    if (ec_etcd_txn(b->c, &cmp, 1, &put, 1, NULL, 0, &r, &err) < 0) {
        ec_log(EC_LOG_WARN, "stop barrier: cannot write %s: %s (retrying)", key, err.msg);
        free(buf);
        return false;
    }
    bool ok = r.succeeded;
    int64_t rev = r.revision;
    ec_txn_result_free(&r);
    free(buf);
    if (!ok) /* another holder came first: read again */
        return false;
    b->claim_m = b->m_id;
    b->claim_h = h;
    b->claim_rev = rev;
    return true;
}

static void through(ec_barrier_t *b, const ec_barrier_out_t *o, const ec_rank_holder_t *h)
{
    b->pending = false;
    int64_t waited = ec_mono_ms() - b->begun_ms;
    if (!b->told)
        return; /* nothing was waited for: nothing to say */
    ec_log(o->timed_out ? EC_LOG_WARN : EC_LOG_INFO,
           "+barrier epoch %" PRIu64 ": ranks %lld-%lld start after %lld ms: %s%s%s", b->epoch,
           b->first, b->last, (long long)waited, o->why, h ? " (node " : "", h ? h->node_id : "");
    if (h)
        ec_log(EC_LOG_INFO, "+barrier epoch %" PRIu64 ": node %s's epoch %" PRIu64 " processes "
               "no longer hold these ranks", b->epoch, h->node_id, h->epoch);
}

bool ec_barrier_tick(ec_barrier_t *b, int64_t lease, int64_t *next_ms)
{
    int64_t now = ec_mono_ms();
    *next_ms = now + BARRIER_POLL_MS;
    if (!b->pending)
        return false;
    ec_rank_holder_t h;
    int64_t mod = 0;
    int have = read_holder(b, &h, &mod);
    if (have < 0)
        return false;
    ec_barrier_in_t in = {.self = b->self, .epoch = b->epoch, .holder = have ? &h : NULL,
                          .now_ms = now, .since_ms = b->begun_ms, .ttl_ms = b->ttl_ms};
    ec_departure_t gone;
    bool have_gone = false;
    if (have && strcmp(h.node_id, b->self) && !h.stopped && h.epoch < b->epoch) {
        if (read_holder_state(b, h.node_id, &in.record_lease, &gone, &have_gone) < 0)
            return false;
        if (strcmp(b->waiting_on, h.node_id) || b->waiting_lease != h.lease) {
            snprintf(b->waiting_on, sizeof(b->waiting_on), "%s", h.node_id);
            b->waiting_lease = h.lease;
            b->since_ms = now;
            b->gone_seen_ms = 0;
        }
        if (have_gone && gone.lease == h.lease && !b->gone_seen_ms)
            b->gone_seen_ms = now;
        in.since_ms = b->since_ms;
        in.gone = have_gone ? &gone : NULL;
        in.gone_seen_ms = b->gone_seen_ms;
    }
    ec_barrier_out_t o = ec_barrier_decide(&in);
    if (o.verdict == EC_BARRIER_WAIT) {
        if (!b->told) {
            b->told = true;
            ec_log(EC_LOG_INFO, "+barrier epoch %" PRIu64 ": ranks %lld-%lld wait for node %s's "
                   "processes of epoch %" PRIu64 " to stop (%s; at most %lld ms more)",
                   b->epoch, b->first, b->last, h.node_id, h.epoch, o.why,
                   (long long)(o.until_ms - now));
        }
        if (o.until_ms < *next_ms)
            *next_ms = o.until_ms;
        return false;
    }
    if (!claim(b, lease, mod))
        return false;
    through(b, &o, have && strcmp(h.node_id, b->self) ? &h : NULL);
    return true;
}

void ec_barrier_stopped(ec_barrier_t *b)
{
    if (!b || !b->claim_rev)
        return;
    int64_t rev = b->claim_rev;
    b->claim_rev = 0; /* said once, whatever comes of it */
    ec_rank_holder_t h = b->claim_h;
    h.stopped = true;
    void *buf = NULL;
    size_t len = 0;
    ec_error_t err = {0};
    char key[EC_KEY_MAX];
    ec_key_holder(&b->keys, b->claim_m, key, sizeof(key));
    if (ec_rank_holder_encode(&h, &buf, &len, &err) < 0)
        return;
    /* only if the claim is still ours, unchanged since we wrote it */
    ec_cmp_t cmp = {.key = key, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL, .number = rev};
    ec_op_t put = {.type = EC_OP_PUT, .key = key, .value = buf, .value_len = len};
    if (ec_etcd_txn(b->c, &cmp, 1, &put, 1, NULL, 0, NULL, &err) < 0)
        ec_log(EC_LOG_WARN, "stop barrier: cannot confirm this node's stop on %s: %s (the next "
               "holder of these ranks waits for its bound instead)", key, err.msg);
    free(buf);
}
