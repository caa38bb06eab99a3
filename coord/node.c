/* The node coordinator: registration, lease, election, the job model fed by
 * one watch, and (as leader) planner decisions published as fenced epochs.
 *
 * Threads: the coordinator thread runs the loop below; the watch thread
 * applies events to the model under `lock` and wakes the loop; the
 * keepalive thread reports a lost lease the same way.  etcd calls are made
 * from the coordinator thread (and from the ec_node_* calls) without holding
 * `lock`; the planner runs under it (it is pure and fast). */

#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keys.h"
#include "node.h"
#include "log.h"
#include "planner.h"
#include "probe.h"

typedef struct mnode {
    char *id;
    ec_node_rec_t *rec; /* NULL when the stored value is corrupt */
    int64_t create_rev, mod_rev, lease;
} mnode_t;

struct ec_node {
    ec_node_opts_t o;
    char *node_id, *host, *job_id, *agent_version;
    uint16_t *ports;
    char **devices;
    ec_keys_t keys;
    char k_node[EC_KEY_MAX], k_leader[EC_KEY_MAX], k_epoch[EC_KEY_MAX], k_status[EC_KEY_MAX],
        k_epochs[EC_KEY_MAX];
    ec_etcd_t *c;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* flags, under lock */
    bool stop, dirty, lease_lost, relist, leaving;
    bool self_bad; /* our record was overwritten with what no agent writes */
    /* our registration, under lock */
    int64_t lease;
    ec_keepalive_t *ka;
    uint64_t incarnation;
    ec_node_state_t state;
    char *reason;
    int64_t registered_at_ms;
    /* the model, under lock */
    mnode_t *nodes; /* sorted by id */
    size_t nnodes, cap;
    uint8_t *epoch_raw;
    size_t epoch_raw_len;
    ec_epoch_t *epoch;       /* newest valid epoch */
    int64_t epoch_mod_rev;   /* of whatever is stored at `epoch` now */
    bool epoch_bad;          /* `epoch` holds garbage or was deleted */
    char *leader_id;
    int64_t leader_create_rev;
    int64_t leader_lease, leader_mod_rev; /* lease 0: not written by an agent */
    uint8_t *status_raw;
    size_t status_raw_len;
    int64_t status_mod_rev;
    char **left;
    size_t nleft;
    int64_t changed_at_ms;
    int64_t list_rev;       /* watch events at or below it are in the listing */
    bool watch_created;
    /* suspicion reports for the current epoch (under lock) */
    struct suspect {
        uint64_t epoch;
        char *reporter, *ids;
    } *sus;
    size_t nsus;
    char **probed;          /* suspects already probed in probed_epoch */
    size_t nprobed;
    uint64_t probed_epoch;
    ec_probe_server_t *probe;
    /* coordinator thread only */
    bool am_leader;
    int64_t my_leader_rev;
    uint64_t delivered_epoch;
    int64_t delivered_status_rev;
    uint64_t fingerprint;
    int64_t fp_since, missing_since, wake_at;
    char *last_wait;
    bool wrote_final;
    ec_watch_t *watch;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void emit(ec_node_t *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(ec_node_t *n, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    ec_log(EC_LOG_INFO, "%s", buf);
    if (n->o.on_event)
        n->o.on_event(buf, n->o.arg);
}

/* ---- the model ---------------------------------------------------------- */

static size_t mnode_find(ec_node_t *n, const char *id, bool *found)
{
    size_t lo = 0, hi = n->nnodes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(n->nodes[mid].id, id);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static void mnode_clear(mnode_t *m)
{
    free(m->id);
    ec_node_rec_free(m->rec);
}

static void model_put_node(ec_node_t *n, const char *id, const ec_kv_t *kv)
{
    ec_error_t err = {0};
    ec_node_rec_t *rec = NULL;
    if (ec_node_rec_decode(kv->value, kv->value_len, kv->key, &rec, &err) < 0) {
        ec_log(EC_LOG_ERROR, "ignoring node record %s: %s", kv->key, err.msg);
    } else if (strcmp(rec->node_id, id) != 0) {
        ec_log(EC_LOG_ERROR, "ignoring node record %s: it names node '%s'; the key may have been "
                             "written by another tool", kv->key, rec->node_id);
        ec_node_rec_free(rec);
        rec = NULL;
    }
    bool found;
    size_t i = mnode_find(n, id, &found);
    if (!found) {
        if (n->nnodes == n->cap) {
            size_t nc = n->cap ? n->cap * 2 : 16;
            mnode_t *nn = realloc(n->nodes, nc * sizeof(*nn));
            if (!nn) {
                ec_node_rec_free(rec);
                return;
            }
            n->nodes = nn;
            n->cap = nc;
        }
        memmove(&n->nodes[i + 1], &n->nodes[i], (n->nnodes - i) * sizeof(mnode_t));
        n->nnodes++;
        n->nodes[i].id = strdup(id);
        n->nodes[i].rec = NULL;
    }
    ec_node_rec_free(n->nodes[i].rec);
    n->nodes[i].rec = rec;
    n->nodes[i].create_rev = kv->create_revision;
    n->nodes[i].mod_rev = kv->mod_revision;
    /* Our own record overwritten with junk, or with any value without a
     * lease (ours is always leased, and a record without one would outlive
     * us): the loop writes it again (tests/t7000-faults, garbage). */
    if (!strcmp(id, n->node_id) && (!rec || kv->lease == 0) && !n->leaving)
        n->self_bad = true;
    n->nodes[i].lease = kv->lease;
}

static void model_del_node(ec_node_t *n, const char *id, const ec_kv_t *prev)
{
    bool found;
    size_t i = mnode_find(n, id, &found);
    if (!found)
        return;
    bool graceful = false;
    if (prev) {
        ec_node_rec_t *rec = NULL;
        if (ec_node_rec_decode(prev->value, prev->value_len, NULL, &rec, NULL) == 0)
            graceful = rec->state == EC_NODE_LEAVING || rec->state == EC_NODE_DONE;
        ec_node_rec_free(rec);
    } else if (n->nodes[i].rec) {
        graceful = n->nodes[i].rec->state == EC_NODE_LEAVING || n->nodes[i].rec->state == EC_NODE_DONE;
    }
    if (graceful) {
        char **nl = realloc(n->left, (n->nleft + 1) * sizeof(char *));
        if (nl) {
            n->left = nl;
            n->left[n->nleft++] = strdup(id);
        }
    }
    ec_log(EC_LOG_INFO, "-node %s %s", id, graceful ? "left" : "lease expired");
    mnode_clear(&n->nodes[i]);
    memmove(&n->nodes[i], &n->nodes[i + 1], (n->nnodes - i - 1) * sizeof(mnode_t));
    n->nnodes--;
}

static void model_put_epoch(ec_node_t *n, const ec_kv_t *kv)
{
    n->epoch_mod_rev = kv->mod_revision;
    ec_error_t err = {0};
    ec_epoch_t *ep = NULL;
    if (ec_epoch_decode(kv->value, kv->value_len, kv->key, &ep, &err) < 0) {
        ec_log(EC_LOG_ERROR, "ignoring epoch record: %s", err.msg);
        n->epoch_bad = true;
        return;
    }
    if (n->epoch && ep->number < n->epoch->number) {
        ec_log(EC_LOG_ERROR, "ignoring epoch %" PRIu64 " at %s: older than epoch %" PRIu64
                             " already seen (epoch numbers only increase; forged?)",
               ep->number, kv->key, n->epoch->number);
        ec_epoch_free(ep);
        n->epoch_bad = true;
        return;
    }
    uint8_t *raw = malloc(kv->value_len ? kv->value_len : 1);
    if (!raw) {
        ec_epoch_free(ep);
        return;
    }
    memcpy(raw, kv->value, kv->value_len);
    free(n->epoch_raw);
    n->epoch_raw = raw;
    n->epoch_raw_len = kv->value_len;
    ec_epoch_free(n->epoch);
    n->epoch = ep;
    n->epoch_bad = false;
}

static void model_clear(ec_node_t *n)
{
    for (size_t i = 0; i < n->nnodes; i++)
        mnode_clear(&n->nodes[i]);
    n->nnodes = 0;
    free(n->leader_id);
    n->leader_id = NULL;
    n->leader_create_rev = 0;
    n->leader_lease = n->leader_mod_rev = 0;
    n->epoch_mod_rev = 0;
    n->epoch_bad = false;
    for (size_t i = 0; i < n->nsus; i++) {
        free(n->sus[i].reporter);
        free(n->sus[i].ids);
    }
    n->nsus = 0;
}

/* Apply one key's change; lock held. */
static void model_apply(ec_node_t *n, bool put, const ec_kv_t *kv, const ec_kv_t *prev)
{
    const char *root = ec_keys_root(&n->keys);
    size_t rl = strlen(root);
    if (kv->key_len < rl || strncmp(kv->key, root, rl) != 0)
        return;
    const char *suffix = kv->key + rl;
    char id[EC_NODE_ID_MAX + 1];
    if (strncmp(suffix, "nodes/", 6) == 0) {
        if (ec_key_parse_node(&n->keys, kv->key, kv->key_len, id, sizeof(id)) < 0) {
            ec_log(EC_LOG_WARN, "ignoring key %s: not a valid node key", kv->key);
            return;
        }
        if (put)
            model_put_node(n, id, kv);
        else
            model_del_node(n, id, prev);
    } else if (!strcmp(suffix, "leader")) {
        free(n->leader_id);
        n->leader_id = put ? strndup((char *)kv->value, kv->value_len) : NULL;
        n->leader_create_rev = put ? kv->create_revision : 0;
        n->leader_lease = put ? kv->lease : 0;
        n->leader_mod_rev = put ? kv->mod_revision : 0;
    } else if (!strcmp(suffix, "epoch")) {
        if (put) {
            model_put_epoch(n, kv);
        } else {
            ec_log(EC_LOG_ERROR, "the epoch key %s was deleted by someone; the leader will "
                                 "restore it", kv->key);
            n->epoch_mod_rev = 0;
            n->epoch_bad = true;
        }
    } else if (!strcmp(suffix, "status")) {
        free(n->status_raw);
        n->status_raw = NULL;
        n->status_raw_len = 0;
        n->status_mod_rev = put ? kv->mod_revision : 0;
        if (put && (n->status_raw = malloc(kv->value_len + 1))) {
            memcpy(n->status_raw, kv->value, kv->value_len);
            n->status_raw_len = kv->value_len;
        }
    } else if (!strncmp(suffix, "epochs/", 7) && strstr(suffix, "/suspect/")) {
        uint64_t num = 0;
        if (ec_key_parse_epoch(&n->keys, kv->key, kv->key_len, &num) != EC_KEY_EPOCH_WORKER)
            return;
        const char *rep = strstr(suffix, "/suspect/") + 9;
        for (size_t i = 0; i < n->nsus; i++)
            if (n->sus[i].epoch == num && !strcmp(n->sus[i].reporter, rep)) {
                free(n->sus[i].ids);
                n->sus[i].ids = put ? strndup((char *)kv->value, kv->value_len) : strdup("");
                n->dirty = true;
                return;
            }
        if (!put)
            return;
        struct suspect *ns = realloc(n->sus, (n->nsus + 1) * sizeof(*ns));
        if (!ns)
            return;
        n->sus = ns;
        n->sus[n->nsus].epoch = num;
        n->sus[n->nsus].reporter = strdup(rep);
        n->sus[n->nsus].ids = strndup((char *)kv->value, kv->value_len);
        n->nsus++;
        n->dirty = true;
        return;
    } else {
        return; /* other epochs/ keys, failures/: not part of the decision model */
    }
    n->changed_at_ms = wall_ms();
    n->dirty = true;
}

static void on_watch(const ec_watch_event_t *ev, void *arg)
{
    ec_node_t *n = arg;
    pthread_mutex_lock(&n->lock);
    switch (ev->type) {
    case EC_WATCH_PUT:
    case EC_WATCH_DELETE:
        if (ev->revision > n->list_rev)
            model_apply(n, ev->type == EC_WATCH_PUT, ev->kv, ev->prev_kv);
        break;
    case EC_WATCH_COMPACTED:
        n->relist = true;
        break;
    case EC_WATCH_BROKEN:
        ec_log(EC_LOG_WARN, "etcd watch broke (%s); resuming", ev->message ? ev->message : "");
        break;
    case EC_WATCH_CREATED:
        n->watch_created = true;
        break;
    }
    pthread_cond_signal(&n->cond);
    pthread_mutex_unlock(&n->lock);
}

/* Watch the whole job, then list it.  The watch is opened "from now" first
 * and the listing read after it exists, so nothing falls between them; the
 * events the listing already holds are dropped by revision.  (A watch opened
 * at listing revision + 1 after a write that came in meanwhile is served by
 * etcd's catch-up loop, every 100 ms: a joiner saw its first epoch late.) */
static int sync_model(ec_node_t *n, ec_error_t *err)
{
    ec_watch_stop(n->watch);
    n->watch = NULL;
    pthread_mutex_lock(&n->lock);
    n->list_rev = INT64_MAX; /* nothing applies until the listing is in */
    n->watch_created = false;
    pthread_mutex_unlock(&n->lock);
    /* No prev_kv: the model already holds every record's last value (a
     * leaving node's record said so before it vanished), and asking etcd
     * for old values on every event for every node's watch is what made
     * its cost grow fastest with the node count (tests/bench/bench_scale). */
    n->watch = ec_watch_start_ex(n->c, ec_keys_root(&n->keys), true, 0, EC_WATCH_NO_PREV_KV,
                                 on_watch, n, err);
    if (!n->watch)
        return err->code;
    int64_t deadline = mono_ms() + 10000;
    pthread_mutex_lock(&n->lock);
    while (!n->watch_created && !n->stop && mono_ms() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&n->cond, &n->lock, &ts);
    }
    bool created = n->watch_created;
    pthread_mutex_unlock(&n->lock);
    if (!created)
        return ec_errorf(err, EC_ETIMEDOUT, "etcd at %s did not open a watch on %s within 10 s",
                         ec_etcd_endpoints(n->c), ec_keys_root(&n->keys));
    /* The listing is read while holding the lock, so no watch event is
     * applied between it and the model it builds. */
    ec_kv_list_t l;
    pthread_mutex_lock(&n->lock);
    int rc = ec_etcd_get_prefix(n->c, ec_keys_root(&n->keys), 0, &l, err);
    if (rc == 0) {
        model_clear(n);
        for (size_t i = 0; i < l.n; i++)
            model_apply(n, true, &l.kvs[i], NULL);
        n->list_rev = l.revision;
        n->relist = false;
        n->dirty = true;
        ec_kv_list_free(&l);
    }
    pthread_mutex_unlock(&n->lock);
    return rc;
}

/* ---- registration --------------------------------------------------------- */

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
    for (int i = 0; i < n->o.ndevices; i++)
        r->device_ids[i] = strdup(n->devices[i]);
    pthread_mutex_lock(&n->lock);
    r->incarnation = n->incarnation;
    r->state = n->state;
    r->reason = n->reason ? strdup(n->reason) : NULL;
    r->registered_at_ms = n->registered_at_ms;
    pthread_mutex_unlock(&n->lock);
    r->agent_version = n->agent_version ? strdup(n->agent_version) : NULL;
    int rc = ec_node_rec_encode(r, buf, len, err);
    ec_node_rec_free(r);
    return rc;
}

static void on_lease_lost(int64_t lease, const char *why, void *arg)
{
    ec_node_t *n = arg;
    pthread_mutex_lock(&n->lock);
    if (lease == n->lease) {
        n->lease_lost = true;
        pthread_cond_signal(&n->cond);
    }
    pthread_mutex_unlock(&n->lock);
    (void)why;
}

static int do_register(ec_node_t *n, int64_t old_lease, ec_error_t *err)
{
    int64_t lease;
    int rc = ec_etcd_lease_grant(n->c, n->o.lease_ttl_s, &lease, NULL, err);
    if (rc < 0)
        return rc;
    void *buf = NULL;
    size_t len = 0;
    pthread_mutex_lock(&n->lock);
    n->registered_at_ms = wall_ms();
    pthread_mutex_unlock(&n->lock);
    if ((rc = encode_self(n, &buf, &len, err)) < 0)
        goto fail;
    ec_cmp_t absent = {.key = n->k_node, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
    ec_op_t put = {.type = EC_OP_PUT, .key = n->k_node, .value = buf, .value_len = len, .lease = lease};
    ec_op_t get = {.type = EC_OP_GET, .key = n->k_node};
    /* A restarted agent's previous record lives until its lease expires:
     * wait that out (bounded by its TTL), and only then call it a duplicate. */
    int64_t deadline = -1;
    bool cleared_junk = false;
    for (;;) {
        ec_txn_result_t r;
        if ((rc = ec_etcd_txn(n->c, &absent, 1, &put, 1, &get, 1, &r, err)) < 0)
            goto fail;
        if (r.succeeded) {
            ec_txn_result_free(&r);
            break;
        }
        int64_t their_lease = r.n && r.results[0].kvs.n ? r.results[0].kvs.kvs[0].lease : 0;
        int64_t their_mod = r.n && r.results[0].kvs.n ? r.results[0].kvs.kvs[0].mod_revision : 0;
        char their_host[EC_HOST_MAX + 1] = "?";
        if (r.n && r.results[0].kvs.n) {
            ec_node_rec_t *rec = NULL;
            if (ec_node_rec_decode(r.results[0].kvs.kvs[0].value, r.results[0].kvs.kvs[0].value_len,
                                   NULL, &rec, NULL) == 0)
                snprintf(their_host, sizeof(their_host), "%s", rec->host);
            ec_node_rec_free(rec);
        }
        ec_txn_result_free(&r);
        if (their_mod != 0 && their_lease == 0 && !cleared_junk) {
            /* Agents write their records only under a lease: this value was
             * put by another tool and, never expiring, would block this node
             * id forever (tests/t7000-faults, garbage).  Delete it, once. */
            ec_log(EC_LOG_ERROR, "node key %s holds a value without a lease, which no agent "
                                 "writes (another tool?); deleting it", n->k_node);
            ec_cmp_t same = {.key = n->k_node, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                             .number = their_mod};
            ec_op_t del = {.type = EC_OP_DELETE, .key = n->k_node};
            if ((rc = ec_etcd_txn(n->c, &same, 1, &del, 1, NULL, 0, NULL, err)) < 0)
                goto fail;
            cleared_junk = true;
            continue;
        }
        if (their_lease != 0 && their_lease == old_lease) {
            /* Our own record under a lease etcd still has: take it over. */
            ec_op_t p2 = put;
            if ((rc = ec_etcd_txn(n->c, NULL, 0, &p2, 1, NULL, 0, NULL, err)) < 0)
                goto fail;
            ec_etcd_lease_revoke(n->c, old_lease, NULL);
            break;
        }
        if (deadline < 0) {
            int64_t ttl = -1;
            if (their_lease)
                ec_etcd_lease_ttl(n->c, their_lease, &ttl, NULL, NULL);
            deadline = mono_ms() + (ttl > 0 ? ttl : 1) * 1000 + 1500;
            ec_log(EC_LOG_INFO, "node id %s is still registered (host %s); waiting up to %lld s "
                                "for that record to expire", n->node_id, their_host,
                   (long long)(ttl > 0 ? ttl + 1 : 2));
        }
        if (mono_ms() > deadline) {
            rc = ec_errorf(err, EC_EEXIST,
                           "node id '%s' is already registered by a live agent on host %s (its "
                           "lease keeps being refreshed); give every node a unique --node_id "
                           "(default: $POD_NAME, else the host name)",
                           n->node_id, their_host);
            goto fail;
        }
        pthread_mutex_lock(&n->lock);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        bool stopping = n->stop;
        if (!stopping)
            pthread_cond_timedwait(&n->cond, &n->lock, &ts);
        stopping = n->stop;
        pthread_mutex_unlock(&n->lock);
        if (stopping) {
            rc = ec_errorf(err, EC_ECANCELED, "stopped while registering");
            goto fail;
        }
    }
    free(buf);
    ec_keepalive_t *ka = ec_keepalive_start(n->c, lease, n->o.lease_ttl_s, on_lease_lost, n, err);
    if (!ka) {
        ec_etcd_lease_revoke(n->c, lease, NULL);
        return err->code;
    }
    pthread_mutex_lock(&n->lock);
    n->lease = lease;
    n->ka = ka;
    n->lease_lost = false;
    pthread_mutex_unlock(&n->lock);
    emit(n, "+node %s registered host=%s nproc=%d lease=%llx", n->node_id, n->host, n->o.nproc,
         (unsigned long long)lease);
    return 0;
fail:
    free(buf);
    ec_etcd_lease_revoke(n->c, lease, NULL);
    return rc;
}

static int put_self(ec_node_t *n, ec_error_t *err)
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

/* ---- leadership ---------------------------------------------------------- */

static void campaign(ec_node_t *n)
{
    int64_t lease = ec_node_lease(n);
    ec_cmp_t absent = {.key = n->k_leader, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
    ec_op_t put = {.type = EC_OP_PUT, .key = n->k_leader, .value = n->node_id,
                   .value_len = strlen(n->node_id), .lease = lease};
    ec_txn_result_t r;
    ec_error_t err = {0};
    if (ec_etcd_txn(n->c, &absent, 1, &put, 1, NULL, 0, &r, &err) < 0) {
        ec_log(EC_LOG_WARN, "campaign for leader failed: %s", err.msg);
        return;
    }
    if (r.succeeded) {
        n->am_leader = true;
        n->my_leader_rev = r.revision;
        n->fp_since = mono_ms();
        n->fingerprint = 0;
        n->missing_since = -1;
        n->wrote_final = false;
        emit(n, "+leader %s rev=%lld", n->node_id, (long long)r.revision);
    }
    ec_txn_result_free(&r);
}

static void step_down(ec_node_t *n, const char *why)
{
    if (!n->am_leader)
        return;
    n->am_leader = false;
    n->my_leader_rev = 0;
    emit(n, "-leader %s: %s", n->node_id, why);
}

/* The fence: leadership still ours (leader key created at our revision). */
static ec_cmp_t fence_leader(ec_node_t *n)
{
    ec_cmp_t c = {.key = n->k_leader, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL,
                  .number = n->my_leader_rev};
    return c;
}

static int write_status(ec_node_t *n, ec_job_state_t state, const char *reason, uint64_t epoch,
                        bool fenced)
{
    ec_job_status_t st = {.state = state, .reason = (char *)reason, .epoch = epoch,
                          .updated_at_ms = wall_ms(), .updated_by = n->node_id};
    void *buf;
    size_t len;
    ec_error_t err = {0};
    if (ec_job_status_encode(&st, &buf, &len, &err) < 0) {
        ec_log(EC_LOG_ERROR, "cannot encode job status: %s", err.msg);
        return err.code;
    }
    ec_cmp_t f = fence_leader(n);
    ec_op_t put = {.type = EC_OP_PUT, .key = n->k_status, .value = buf, .value_len = len};
    ec_txn_result_t r;
    int rc = ec_etcd_txn(n->c, &f, fenced ? 1 : 0, &put, 1, NULL, 0, &r, &err);
    free(buf);
    if (rc < 0) {
        ec_log(EC_LOG_WARN, "cannot write job status: %s", err.msg);
        return rc;
    }
    if (!r.succeeded) {
        step_down(n, "the leader key changed (status write fenced)");
        rc = EC_EFENCED;
    }
    ec_txn_result_free(&r);
    return rc;
}

/* A leader key without a lease was not written by an agent (a campaign
 * always attaches the campaigner's lease) and would never expire: nobody
 * could lead again.  Delete it, fenced on its mod revision so a leadership
 * won meanwhile is not touched; everyone then campaigns (tests/t7000-faults,
 * garbage). */
static void clear_foreign_leader(ec_node_t *n, int64_t mod_rev)
{
    step_down(n, "the leader key was overwritten by another tool");
    ec_log(EC_LOG_ERROR, "the leader key %s holds a value without a lease, which no agent "
                         "writes (another tool?); deleting it so that an agent can lead",
           n->k_leader);
    ec_cmp_t same = {.key = n->k_leader, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                     .number = mod_rev};
    ec_op_t del = {.type = EC_OP_DELETE, .key = n->k_leader};
    ec_error_t err = {0};
    if (ec_etcd_txn(n->c, &same, 1, &del, 1, NULL, 0, NULL, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot delete the foreign leader key: %s", err.msg);
}

/* ---- planning (leader only) ----------------------------------------------- */

typedef struct pub {
    void *buf;
    size_t len;
    uint64_t number;
    int64_t expect_mod;
    char *log;
    bool first;
    /* refused nodes to mark: key, value, lease, expected mod revision */
    size_t nref;
    struct {
        char key[EC_KEY_MAX];
        void *buf;
        size_t len;
        int64_t lease, mod;
    } *ref;
} pub_t;

static void pub_free(pub_t *p)
{
    free(p->buf);
    free(p->log);
    for (size_t i = 0; i < p->nref; i++)
        free(p->ref[i].buf);
    free(p->ref);
    memset(p, 0, sizeof(*p));
}

/* Build the epoch record for decision d; lock held. */
static int build_epoch(ec_node_t *n, const ec_plan_decision_t *d, mnode_t **plan_nodes,
                       int64_t planner_us, pub_t *p, ec_error_t *err)
{
    ec_epoch_t *ep = ec_epoch_new((int)d->n_members, n->o.nproc);
    if (!ep)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    ep->number = d->epoch;
    ep->reason = (ec_epoch_reason_t)d->reason;
    ep->reason_detail = d->why ? strdup(d->why) : NULL;
    ep->leader_id = strdup(n->node_id);
    ep->leader_rev = n->my_leader_rev;
    ep->observed_at_ms = n->changed_at_ms;
    ep->decided_at_ms = wall_ms();
    ep->planner_us = planner_us;
    for (size_t i = 0; i < d->n_members; i++) {
        const ec_node_rec_t *r = plan_nodes[d->members[i]]->rec;
        ec_member_t *m = &ep->members[i];
        m->node_id = strdup(r->node_id);
        m->host = strdup(r->host);
        for (int j = 0; j < n->o.nproc; j++)
            m->ports[j] = r->ports[j];
        m->master_port = r->master_port;
        m->incarnation = r->incarnation;
    }
    ep->published_at_ms = wall_ms();
    int rc = ec_epoch_encode(ep, &p->buf, &p->len, err);
    ec_epoch_free(ep);
    p->number = d->epoch;
    p->expect_mod = n->epoch_mod_rev;
    p->first = n->epoch == NULL;
    return rc;
}

static void plan_refusals(ec_node_t *n, const ec_plan_decision_t *d, mnode_t **plan_nodes, pub_t *p)
{
    if (!d->n_refused)
        return;
    p->ref = calloc(d->n_refused, sizeof(*p->ref));
    if (!p->ref)
        return;
    for (size_t i = 0; i < d->n_refused; i++) {
        mnode_t *m = plan_nodes[d->refused[i].node];
        if (!m->rec || (m->rec->state == EC_NODE_FAILED && m->rec->reason &&
                        !strcmp(m->rec->reason, d->refused[i].why)))
            continue; /* already says so */
        ec_node_rec_t copy = *m->rec;
        copy.state = EC_NODE_FAILED;
        copy.reason = d->refused[i].why;
        if (ec_node_rec_encode(&copy, &p->ref[p->nref].buf, &p->ref[p->nref].len, NULL) < 0)
            continue;
        ec_key_node(&n->keys, m->id, p->ref[p->nref].key, EC_KEY_MAX);
        p->ref[p->nref].lease = m->lease;
        p->ref[p->nref].mod = m->mod_rev;
        p->nref++;
    }
}

static void plan_and_act(ec_node_t *n)
{
    pub_t p = {0};
    ec_error_t err = {0};
    ec_plan_decision_t *d = NULL;
    ec_plan_action_t action = EC_PLAN_WAIT;
    int64_t wait_ms = 0;
    char *why = NULL;
    bool complete = false, repair = false;
    uint64_t cur_epoch = 0;

    pthread_mutex_lock(&n->lock);
    mnode_t **pn = calloc(n->nnodes ? n->nnodes : 1, sizeof(*pn));
    ec_plan_node_t *nodes = calloc(n->nnodes ? n->nnodes : 1, sizeof(*nodes));
    ec_plan_member_t *mem = NULL;
    size_t nn = 0;
    for (size_t i = 0; pn && nodes && i < n->nnodes; i++) {
        if (!n->nodes[i].rec)
            continue;
        pn[nn] = &n->nodes[i];
        nodes[nn].node_id = n->nodes[i].id;
        nodes[nn].nproc = (uint32_t)n->nodes[i].rec->nproc;
        nodes[nn].incarnation = n->nodes[i].rec->incarnation;
        nodes[nn].create_revision = n->nodes[i].create_rev;
        nodes[nn].state = (ec_node_state_t)n->nodes[i].rec->state;
        nn++;
    }
    ec_plan_input_t in = EC_PLAN_INPUT_INIT;
    in.config.np_min = n->o.np_min;
    in.config.np_max = n->o.np_max;
    in.config.nproc = n->o.nproc;
    in.config.elastic_timeout_ms = n->o.elastic_timeout_ms;
    in.config.replace_wait_ms = n->o.replace_wait_ms;
    in.nodes = nodes;
    in.n_nodes = nn;
    if (n->epoch) {
        mem = calloc((size_t)n->epoch->nmembers, sizeof(*mem));
        for (int i = 0; mem && i < n->epoch->nmembers; i++) {
            mem[i].node_id = n->epoch->members[i].node_id;
            mem[i].incarnation = n->epoch->members[i].incarnation;
        }
        in.epoch.number = n->epoch->number;
        in.epoch.members = mem;
        in.epoch.n_members = (size_t)n->epoch->nmembers;
        cur_epoch = n->epoch->number;
    }
    int64_t now = mono_ms();
    uint64_t fp = ec_plan_fingerprint(&in.config, nodes, nn);
    if (fp != n->fingerprint) {
        n->fingerprint = fp;
        n->fp_since = now;
    }
    in.since_eligible_change_ms = now - n->fp_since;
    in.since_member_missing_ms = n->missing_since < 0 ? -1 : now - n->missing_since;
    in.left_ids = (const char *const *)n->left;
    in.n_left = n->nleft;
    repair = n->epoch_bad && n->epoch_raw;
    int64_t t0 = mono_ms();
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int rc = ec_plan(&in, &d, &err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    (void)t0;
    int64_t planner_us = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
    if (rc == 0) {
        action = d->action;
        wait_ms = d->wait_ms;
        why = d->why ? strdup(d->why) : NULL;
        complete = action == EC_PLAN_WAIT && why && !strncmp(why, "complete", 8);
        if (d->n_departed > 0 && n->missing_since < 0)
            n->missing_since = now;
        else if (d->n_departed == 0)
            n->missing_since = -1;
        plan_refusals(n, d, pn, &p);
        if (action == EC_PLAN_PUBLISH) {
            if (build_epoch(n, d, pn, planner_us, &p, &err) < 0) {
                ec_log(EC_LOG_ERROR, "cannot build epoch %" PRIu64 ": %s", d->epoch, err.msg);
                action = EC_PLAN_WAIT;
            }
            p.log = d->log ? strdup(d->log) : NULL;
        } else if (repair) {
            /* Someone overwrote or deleted the epoch: put the last valid one back. */
            p.buf = malloc(n->epoch_raw_len);
            if (p.buf) {
                memcpy(p.buf, n->epoch_raw, n->epoch_raw_len);
                p.len = n->epoch_raw_len;
                p.expect_mod = n->epoch_mod_rev;
                p.number = 0;
            }
        }
    } else {
        ec_log(EC_LOG_ERROR, "planner refused its input: %s", err.msg);
    }
    pthread_mutex_unlock(&n->lock);
    ec_plan_decision_free(d);
    free(pn);
    free(nodes);
    free(mem);

    /* Refusals: tell refused nodes why, in their own record (their lease). */
    for (size_t i = 0; i < p.nref; i++) {
        ec_cmp_t same = {.key = p.ref[i].key, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                         .number = p.ref[i].mod};
        ec_op_t put = {.type = EC_OP_PUT, .key = p.ref[i].key, .value = p.ref[i].buf,
                       .value_len = p.ref[i].len, .lease = p.ref[i].lease};
        ec_cmp_t cm[2] = {fence_leader(n), same};
        ec_etcd_txn(n->c, cm, 2, &put, 1, NULL, 0, NULL, NULL);
    }

    if (action == EC_PLAN_PUBLISH || (repair && p.buf)) {
        char hist[EC_KEY_MAX], keep_from[EC_KEY_MAX];
        ec_cmp_t cm[2] = {fence_leader(n),
                          {.key = n->k_epoch, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                           .number = p.expect_mod}};
        ec_op_t ops[4];
        size_t nops = 0;
        ops[nops++] = (ec_op_t){.type = EC_OP_PUT, .key = n->k_epoch, .value = p.buf, .value_len = p.len};
        void *stbuf = NULL;
        size_t stlen = 0;
        if (p.number > 0) {
            ec_key_epoch_history(&n->keys, p.number, hist, sizeof(hist));
            ops[nops++] = (ec_op_t){.type = EC_OP_PUT, .key = hist, .value = p.buf, .value_len = p.len};
            int keep = n->o.history_keep > 0 ? n->o.history_keep : 64;
            if (p.number > (uint64_t)keep) {
                ec_key_epoch_history(&n->keys, p.number - (uint64_t)keep, keep_from, sizeof(keep_from));
                ops[nops++] = (ec_op_t){.type = EC_OP_DELETE, .key = n->k_epochs, .range_end = keep_from};
            }
            if (p.first) {
                ec_job_status_t st = {.state = EC_JOB_RUNNING, .epoch = p.number,
                                      .updated_at_ms = wall_ms(), .updated_by = n->node_id};
                if (ec_job_status_encode(&st, &stbuf, &stlen, NULL) == 0)
                    ops[nops++] = (ec_op_t){.type = EC_OP_PUT, .key = n->k_status, .value = stbuf,
                                            .value_len = stlen};
            }
        }
        ec_txn_result_t r;
        int64_t t_send = wall_ms();
        rc = ec_etcd_txn(n->c, cm, 2, ops, nops, NULL, 0, &r, &err);
        free(stbuf);
        if (rc < 0) {
            ec_log(EC_LOG_WARN, "publishing epoch %" PRIu64 " failed: %s; will retry", p.number, err.msg);
            n->wake_at = mono_ms() + 200;
        } else {
            if (r.succeeded) {
                if (p.number > 0) {
                    emit(n, "%s (txn %lld ms)", p.log ? p.log : "+epoch",
                         (long long)(wall_ms() - t_send));
                    pthread_mutex_lock(&n->lock);
                    for (size_t i = 0; i < n->nleft; i++)
                        free(n->left[i]);
                    n->nleft = 0;
                    n->missing_since = -1;
                    pthread_mutex_unlock(&n->lock);
                } else {
                    emit(n, "+epoch-repaired: restored the last valid epoch over a bad value");
                }
            } else {
                /* Either the leader key or the epoch moved under us. */
                ec_kv_t kv;
                bool found = false;
                ec_etcd_get(n->c, n->k_leader, &kv, &found, NULL, NULL);
                if (!found || kv.create_revision != n->my_leader_rev)
                    step_down(n, "the leader key changed (epoch write fenced)");
                else
                    ec_log(EC_LOG_INFO, "epoch changed under us; re-planning");
                ec_kv_free(&kv);
            }
            ec_txn_result_free(&r);
        }
    } else if (action == EC_PLAN_WAIT_UNTIL) {
        n->wake_at = mono_ms() + (wait_ms > 0 ? wait_ms : 1);
    } else if (action == EC_PLAN_WAIT || action == EC_PLAN_FAIL) {
        if (why && (!n->last_wait || strcmp(n->last_wait, why))) {
            emit(n, "%s %s", action == EC_PLAN_FAIL ? "+fail:" : "+wait:", why);
            free(n->last_wait);
            n->last_wait = strdup(why);
        }
        if ((complete || action == EC_PLAN_FAIL) && !n->wrote_final) {
            if (write_status(n, complete ? EC_JOB_COMPLETED : EC_JOB_FAILED,
                             complete ? NULL : why, cur_epoch, true) == 0)
                n->wrote_final = true;
        }
    }
    free(why);
    pub_free(&p);
}

/* ---- eviction faster than a lease TTL (leader only) ----------------------- */

static bool was_probed(ec_node_t *n, uint64_t epoch, const char *id)
{
    if (n->probed_epoch != epoch) {
        ec_node_free_ids(n->probed, (int)n->nprobed);
        n->probed = NULL;
        n->nprobed = 0;
        n->probed_epoch = epoch;
    }
    for (size_t i = 0; i < n->nprobed; i++)
        if (!strcmp(n->probed[i], id))
            return true;
    char **np = realloc(n->probed, (n->nprobed + 1) * sizeof(char *));
    if (np) {
        n->probed = np;
        n->probed[n->nprobed++] = strdup(id);
    }
    return false;
}

/* Members of the current epoch that some member reported and that were not
 * probed yet in this epoch: probe their agents, evict the silent ones.  The
 * leader does this for every member; any other node only for the leader
 * itself, so that a dead leader is replaced as fast as a dead member (its
 * lease revoked, the key goes, the next campaign brings a new fencing token,
 * and a leader that was only slow can no longer publish). */
static void handle_suspicions(ec_node_t *n)
{
    enum { MAXS = 64 };
    ec_probe_target_t t[MAXS];
    char *ids[MAXS], *hosts[MAXS], *by[MAXS];
    int64_t leases[MAXS];
    size_t nt = 0;
    pthread_mutex_lock(&n->lock);
    uint64_t cur = n->epoch ? n->epoch->number : 0;
    for (size_t i = 0; cur && i < n->nsus && nt < MAXS; i++) {
        if (n->sus[i].epoch != cur || ec_epoch_find_member(n->epoch, n->sus[i].reporter) < 0)
            continue; /* only members of the current epoch may accuse */
        char *list = strdup(n->sus[i].ids), *save = NULL;
        for (char *id = strtok_r(list, ",", &save); id && nt < MAXS; id = strtok_r(NULL, ",", &save)) {
            bool found;
            size_t k = mnode_find(n, id, &found);
            if (!strcmp(id, n->node_id) || ec_epoch_find_member(n->epoch, id) < 0 || !found ||
                !n->nodes[k].rec || !n->nodes[k].rec->probe_port ||
                (!n->am_leader && (!n->leader_id || strcmp(id, n->leader_id))) ||
                was_probed(n, cur, id))
                continue;
            ids[nt] = strdup(id);
            hosts[nt] = strdup(n->nodes[k].rec->host);
            by[nt] = strdup(n->sus[i].reporter);
            leases[nt] = n->nodes[k].lease;
            t[nt] = (ec_probe_target_t){.host = hosts[nt], .port = n->nodes[k].rec->probe_port,
                                        .expect_id = ids[nt]};
            nt++;
        }
        free(list);
    }
    pthread_mutex_unlock(&n->lock);
    if (!nt)
        return;
    int to = n->o.probe_timeout_ms > 0 ? n->o.probe_timeout_ms : 250;
    ec_probe_many(t, nt, to);
    for (size_t i = 0; i < nt; i++) {
        if (t[i].ok) {
            emit(n, "+suspicion of %s by %s rejected: its agent answered in %.1f ms", ids[i], by[i],
                 (double)t[i].rtt_us / 1000.0);
        } else {
            ec_error_t err = {0};
            int rc = ec_etcd_lease_revoke(n->c, leases[i], &err);
            emit(n, "-node %s evicted: suspected by %s, no answer to a probe of %s:%u within %d ms%s%s",
                 ids[i], by[i], t[i].host, t[i].port, to, rc < 0 ? "; revoke failed: " : "",
                 rc < 0 ? err.msg : "");
        }
        free(ids[i]);
        free(hosts[i]);
        free(by[i]);
    }
}

/* ---- the loop ------------------------------------------------------------ */

static void deliver(ec_node_t *n)
{
    pthread_mutex_lock(&n->lock);
    uint8_t *raw = NULL, *sraw = NULL;
    size_t len = 0, slen = 0;
    if (n->epoch && n->epoch->number > n->delivered_epoch && n->epoch_raw) {
        raw = malloc(n->epoch_raw_len);
        if (raw) {
            memcpy(raw, n->epoch_raw, n->epoch_raw_len);
            len = n->epoch_raw_len;
            n->delivered_epoch = n->epoch->number;
        }
    }
    if (n->status_raw && n->status_mod_rev != n->delivered_status_rev) {
        sraw = malloc(n->status_raw_len + 1);
        if (sraw) {
            memcpy(sraw, n->status_raw, n->status_raw_len);
            slen = n->status_raw_len;
            n->delivered_status_rev = n->status_mod_rev;
        }
    }
    pthread_mutex_unlock(&n->lock);
    if (raw) {
        ec_epoch_t *ep = NULL;
        if (ec_epoch_decode(raw, len, n->k_epoch, &ep, NULL) == 0) {
            ec_log(EC_LOG_DEBUG, "+epoch %" PRIu64 " world=%d reason=%s seen", ep->number,
                   ep->world_size, ec_epoch_reason_name(ep->reason));
            if (n->o.on_epoch)
                n->o.on_epoch(ep, n->o.arg);
        }
        ec_epoch_free(ep);
        free(raw);
    }
    if (sraw) {
        ec_job_status_t *st = NULL;
        ec_error_t err = {0};
        if (ec_job_status_decode(sraw, slen, n->k_status, &st, &err) == 0) {
            if (n->o.on_job)
                n->o.on_job(st, n->o.arg);
        } else {
            ec_log(EC_LOG_ERROR, "ignoring job status: %s", err.msg);
        }
        ec_job_status_free(st);
        free(sraw);
    }
}

static void *loop(void *arg)
{
    ec_node_t *n = arg;
    ec_error_t err = {0};
    int64_t retry_at = -1;
    for (;;) {
        pthread_mutex_lock(&n->lock);
        for (;;) {
            if (n->stop || n->dirty || n->relist || (n->lease_lost && !n->leaving))
                break;
            int64_t now = mono_ms();
            int64_t until = now + 1000;
            if (n->wake_at >= 0 && n->wake_at < until)
                until = n->wake_at;
            if (retry_at >= 0 && retry_at < until)
                until = retry_at;
            if (until <= now)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t d = until - now;
            ts.tv_sec += d / 1000;
            ts.tv_nsec += (d % 1000) * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&n->cond, &n->lock, &ts);
        }
        bool stop = n->stop, relist = n->relist, lost = n->lease_lost && !n->leaving;
        bool leaving = n->leaving;
        n->dirty = false;
        if (n->wake_at >= 0 && mono_ms() >= n->wake_at)
            n->wake_at = -1;
        pthread_mutex_unlock(&n->lock);
        if (stop)
            break;
        if (retry_at >= 0 && mono_ms() < retry_at && !relist)
            continue;
        retry_at = -1;
        if (lost) {
            step_down(n, "our lease was lost");
            pthread_mutex_lock(&n->lock);
            ec_keepalive_t *ka = n->ka;
            int64_t old = n->lease;
            n->ka = NULL;
            pthread_mutex_unlock(&n->lock);
            ec_keepalive_stop(ka);
            emit(n, "-lease %llx lost; registering again", (unsigned long long)old);
            if (do_register(n, old, &err) < 0) {
                ec_log(EC_LOG_WARN, "re-registering failed: %s; retrying", err.msg);
                retry_at = mono_ms() + 500;
                continue;
            }
        }
        if (relist && sync_model(n, &err) < 0) {
            ec_log(EC_LOG_WARN, "re-listing the job failed: %s; retrying", err.msg);
            retry_at = mono_ms() + 500;
            continue;
        }
        deliver(n);
        if (leaving)
            continue;
        pthread_mutex_lock(&n->lock);
        int64_t lcr = n->leader_create_rev;
        bool leader_is_me = n->leader_id && !strcmp(n->leader_id, n->node_id);
        bool self_bad = n->self_bad, foreign_leader = lcr != 0 && n->leader_lease == 0;
        int64_t leader_mod = n->leader_mod_rev;
        n->self_bad = false;
        pthread_mutex_unlock(&n->lock);
        if (self_bad) {
            ec_log(EC_LOG_ERROR, "our record %s was overwritten with a value no agent writes "
                                 "(another tool?); writing it again", n->k_node);
            if (put_self(n, &err) < 0)
                ec_log(EC_LOG_WARN, "cannot repair our record: %s", err.msg);
        }
        if (foreign_leader)
            clear_foreign_leader(n, leader_mod);
        if (n->am_leader && lcr != 0 && (lcr != n->my_leader_rev || !leader_is_me))
            step_down(n, "another node holds the leader key");
        if (!n->am_leader && lcr == 0)
            campaign(n);
        handle_suspicions(n);
        if (n->am_leader)
            plan_and_act(n);
    }
    return NULL;
}

/* ---- public -------------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

ec_node_t *ec_node_start(const ec_node_opts_t *o, ec_error_t *err)
{
    if (!o || !o->etcd || !o->job_id || !o->node_id || !o->host || o->nproc < 1 || !o->ports) {
        ec_errorf(err, EC_EINVAL, "ec_node_start: etcd, job_id, node_id, host, nproc and ports "
                                  "are required");
        return NULL;
    }
    if (ec_node_id_check(o->node_id, err) < 0 || !ec_host_valid(o->host)) {
        if (err && !err->code)
            ec_errorf(err, EC_EINVAL, "bad host '%s'", o->host);
        return NULL;
    }
    ec_node_t *n = calloc(1, sizeof(*n));
    if (!n) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    memcpy(&n->o, o, o->size < sizeof(n->o) ? o->size : sizeof(n->o));
    if (n->o.lease_ttl_s < 2)
        n->o.lease_ttl_s = n->o.lease_ttl_s <= 0 ? 10 : 2;
    n->c = o->etcd;
    n->node_id = strdup(o->node_id);
    n->host = strdup(o->host);
    n->job_id = strdup(o->job_id);
    n->agent_version = dup_or_null(o->agent_version);
    n->ports = calloc((size_t)o->nproc, sizeof(uint16_t));
    memcpy(n->ports, o->ports, (size_t)o->nproc * sizeof(uint16_t));
    if (o->ndevices > 0) {
        n->devices = calloc((size_t)o->ndevices, sizeof(char *));
        for (int i = 0; i < o->ndevices; i++)
            n->devices[i] = strdup(o->device_ids[i]);
    }
    n->o.node_id = n->node_id;
    n->state = EC_NODE_JOINING;
    n->incarnation = 1;
    n->fp_since = mono_ms();
    n->missing_since = -1;
    n->wake_at = -1;
    pthread_mutex_init(&n->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (ec_keys_init(&n->keys, o->etcd_prefix, o->job_id, err) < 0)
        goto fail;
    ec_key_node(&n->keys, n->node_id, n->k_node, sizeof(n->k_node));
    ec_key_leader(&n->keys, n->k_leader, sizeof(n->k_leader));
    ec_key_epoch(&n->keys, n->k_epoch, sizeof(n->k_epoch));
    ec_key_status(&n->keys, n->k_status, sizeof(n->k_status));
    ec_key_epochs_prefix(&n->keys, n->k_epochs, sizeof(n->k_epochs));
    if (do_register(n, 0, err) < 0)
        goto fail;
    /* After registering: a duplicate node id is reported as such, not as a
     * busy probe port. */
    if (o->probe_port) {
        if (!(n->probe = ec_probe_serve(n->host, o->probe_port, n->node_id, err)))
            goto fail;
    }
    if (sync_model(n, err) < 0)
        goto fail;
    if (pthread_create(&n->thread, NULL, loop, n) != 0) {
        ec_errorf(err, EC_ESYS, "cannot start the coordinator thread");
        goto fail;
    }
    n->thread_started = true;
    return n;
fail:
    if (n->lease)
        ec_etcd_lease_revoke(n->c, n->lease, NULL);
    ec_node_stop(n);
    return NULL;
}

int ec_node_set_state(ec_node_t *n, ec_node_state_t st, const char *reason, ec_error_t *err)
{
    pthread_mutex_lock(&n->lock);
    /* Unchanged: no write.  Every write reaches every node's watch, and the
     * agent sets READY after each epoch. */
    bool same = n->state == st && ((!reason && !n->reason) ||
                                   (reason && n->reason && !strcmp(reason, n->reason)));
    if (!same) {
        n->state = st;
        free(n->reason);
        n->reason = dup_or_null(reason);
    }
    pthread_mutex_unlock(&n->lock);
    return same ? 0 : put_self(n, err);
}

int ec_node_bump_incarnation(ec_node_t *n, ec_error_t *err)
{
    pthread_mutex_lock(&n->lock);
    n->incarnation++;
    pthread_mutex_unlock(&n->lock);
    return put_self(n, err);
}

int ec_node_leave(ec_node_t *n, ec_error_t *err)
{
    pthread_mutex_lock(&n->lock);
    n->leaving = true;
    n->state = EC_NODE_LEAVING;
    ec_keepalive_t *ka = n->ka;
    n->ka = NULL;
    int64_t lease = n->lease;
    pthread_mutex_unlock(&n->lock);
    int rc = put_self(n, err);
    ec_keepalive_stop(ka);
    int rc2 = ec_etcd_lease_revoke(n->c, lease, err);
    emit(n, "-node %s leaving: lease revoked", n->node_id);
    return rc < 0 ? rc : rc2;
}

int ec_node_record_failure(ec_node_t *n, const ec_failure_t *f, ec_error_t *err)
{
    void *buf;
    size_t len;
    int rc = ec_failure_encode(f, &buf, &len, err);
    if (rc < 0)
        return rc;
    char key[EC_KEY_MAX];
    ec_key_failure(&n->keys, (uint64_t)f->time_ms, n->node_id, f->local_rank, key, sizeof(key));
    rc = ec_etcd_put(n->c, key, buf, len, 0, NULL, err);
    free(buf);
    return rc;
}

int ec_node_fail_job(ec_node_t *n, const char *reason, ec_error_t *err)
{
    ec_job_status_t st = {.state = EC_JOB_FAILED, .reason = (char *)reason,
                          .epoch = ec_node_epoch_number(n), .updated_at_ms = wall_ms(),
                          .updated_by = n->node_id};
    void *buf;
    size_t len;
    int rc = ec_job_status_encode(&st, &buf, &len, err);
    if (rc < 0)
        return rc;
    rc = ec_etcd_put(n->c, n->k_status, buf, len, 0, NULL, err);
    free(buf);
    return rc;
}

int ec_node_report_suspects(ec_node_t *n, uint64_t epoch, const char *const *ids, size_t nids,
                            ec_error_t *err)
{
    char key[EC_KEY_MAX];
    if (ec_key_epoch_suspect(&n->keys, epoch, n->node_id, key, sizeof(key)) < 0)
        return ec_errorf(err, EC_EINVAL, "cannot report suspects of epoch %llu",
                         (unsigned long long)epoch);
    size_t len = 1;
    for (size_t i = 0; i < nids; i++)
        len += strlen(ids[i]) + 1;
    char *val = calloc(1, len);
    if (!val)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    for (size_t i = 0; i < nids; i++) {
        if (i)
            strcat(val, ",");
        strcat(val, ids[i]);
    }
    int rc = ec_etcd_put(n->c, key, val, strlen(val), ec_node_lease(n), NULL, err);
    if (rc == 0)
        emit(n, "+suspect %s in epoch %llu (reported by %s)", val, (unsigned long long)epoch,
             n->node_id);
    free(val);
    return rc;
}

int ec_node_probe_members(ec_node_t *n, int timeout_ms, char ***dead, ec_error_t *err)
{
    *dead = NULL;
    pthread_mutex_lock(&n->lock);
    int nm = n->epoch ? n->epoch->nmembers : 0;
    ec_probe_target_t *t = calloc((size_t)(nm ? nm : 1), sizeof(*t));
    char **ids = calloc((size_t)(nm ? nm : 1), sizeof(char *));
    char **hosts = calloc((size_t)(nm ? nm : 1), sizeof(char *));
    int nt = 0;
    for (int m = 0; t && ids && hosts && m < nm; m++) {
        const char *id = n->epoch->members[m].node_id;
        bool found;
        size_t k = mnode_find(n, id, &found);
        if (!strcmp(id, n->node_id))
            continue;
        ids[nt] = strdup(id);
        hosts[nt] = strdup(n->epoch->members[m].host);
        /* a member whose record is gone is dead already (port 0 never answers) */
        t[nt] = (ec_probe_target_t){.host = hosts[nt], .expect_id = ids[nt],
                                    .port = found && n->nodes[k].rec ? n->nodes[k].rec->probe_port : 0};
        nt++;
    }
    pthread_mutex_unlock(&n->lock);
    if (!t || !ids || !hosts) {
        free(t);
        free(ids);
        free(hosts);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    ec_probe_many(t, (size_t)nt, timeout_ms);
    int nd = 0;
    for (int i = 0; i < nt; i++) {
        if (!t[i].ok)
            ids[nd++] = ids[i];
        else
            free(ids[i]);
        free(hosts[i]);
    }
    free(t);
    free(hosts);
    *dead = ids;
    return nd;
}

void ec_node_free_ids(char **ids, int n)
{
    for (int i = 0; ids && i < n; i++)
        free(ids[i]);
    free(ids);
}

void ec_node_stop(ec_node_t *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->lock);
    n->stop = true;
    pthread_cond_broadcast(&n->cond);
    pthread_mutex_unlock(&n->lock);
    if (n->thread_started)
        pthread_join(n->thread, NULL);
    ec_watch_stop(n->watch);
    ec_keepalive_stop(n->ka);
    ec_probe_server_stop(n->probe);
    model_clear(n);
    free(n->sus);
    ec_node_free_ids(n->probed, (int)n->nprobed);
    free(n->nodes);
    ec_epoch_free(n->epoch);
    free(n->epoch_raw);
    free(n->status_raw);
    for (size_t i = 0; i < n->nleft; i++)
        free(n->left[i]);
    free(n->left);
    for (int i = 0; n->devices && i < n->o.ndevices; i++)
        free(n->devices[i]);
    free(n->devices);
    free(n->ports);
    free(n->node_id);
    free(n->host);
    free(n->job_id);
    free(n->agent_version);
    free(n->reason);
    free(n->last_wait);
    pthread_mutex_destroy(&n->lock);
    pthread_cond_destroy(&n->cond);
    free(n);
}

bool ec_node_is_leader(ec_node_t *n)
{
    return n->am_leader;
}

int64_t ec_node_lease(ec_node_t *n)
{
    pthread_mutex_lock(&n->lock);
    int64_t l = n->lease;
    pthread_mutex_unlock(&n->lock);
    return l;
}

uint64_t ec_node_incarnation(ec_node_t *n)
{
    pthread_mutex_lock(&n->lock);
    uint64_t i = n->incarnation;
    pthread_mutex_unlock(&n->lock);
    return i;
}

uint64_t ec_node_epoch_number(ec_node_t *n)
{
    pthread_mutex_lock(&n->lock);
    uint64_t e = n->epoch ? n->epoch->number : 0;
    pthread_mutex_unlock(&n->lock);
    return e;
}
