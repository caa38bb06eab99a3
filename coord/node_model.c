/* The job model of one node coordinator: every key of the job, fed by one
 * watch opened before the listing it starts from. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keys.h"
#include "log.h"
#include "node_impl.h"

size_t ec__node_mnode_find(ec_node_t *n, const char *id, bool *found)
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
    size_t i = ec__node_mnode_find(n, id, &found);
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
    size_t i = ec__node_mnode_find(n, id, &found);
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

void ec__node_model_clear(ec_node_t *n)
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
    for (size_t i = 0; i < n->nfails; i++)
        free(n->fails[i]);
    n->nfails = 0;
}

/* Failure records, in key order (their sequence is the failure time, zero
 * padded): the leader keeps the newest ones and prunes the rest. */
static void model_failure(ec_node_t *n, bool put, const char *key, size_t len)
{
    size_t lo = 0, hi = n->nfails;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strncmp(n->fails[mid], key, len);
        if (c == 0 && n->fails[mid][len] != '\0')
            c = 1;
        if (c == 0) {
            if (!put) {
                free(n->fails[mid]);
                memmove(&n->fails[mid], &n->fails[mid + 1], (n->nfails - mid - 1) * sizeof(char *));
                n->nfails--;
            }
            return;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!put)
        return;
    if (n->nfails == n->fails_cap) {
        size_t nc = n->fails_cap ? n->fails_cap * 2 : 16;
        char **nf = realloc(n->fails, nc * sizeof(char *));
        if (!nf)
            return;
        n->fails = nf;
        n->fails_cap = nc;
    }
    char *k = strndup(key, len);
    if (!k)
        return;
    memmove(&n->fails[lo + 1], &n->fails[lo], (n->nfails - lo) * sizeof(char *));
    n->fails[lo] = k;
    n->nfails++;
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
        if (!put)
            n->leader_deleted_rev = kv->mod_revision;
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
        /* What the planning needs of it: whether a run ended, and which. */
        n->status_state = 0;
        n->status_run = 0;
        ec_job_status_t *st = NULL;
        if (put && ec_job_status_decode(kv->value, kv->value_len, kv->key, &st, NULL) == 0) {
            n->status_state = st->state;
            n->status_run = st->run;
        }
        ec_job_status_free(st);
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
    } else if (!strncmp(suffix, "failures/", 9)) {
        model_failure(n, put, kv->key, kv->key_len);
        return; /* not part of the decision model: only counted, for pruning */
    } else {
        return; /* other epochs/ keys: not part of the decision model */
    }
    n->changed_at_ms = ec__node_wall_ms();
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
int ec__node_sync_model(ec_node_t *n, ec_error_t *err)
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
    int64_t deadline = ec__node_mono_ms() + 10000;
    pthread_mutex_lock(&n->lock);
    while (!n->watch_created && !n->stop && ec__node_mono_ms() < deadline) {
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
        ec__node_model_clear(n);
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
