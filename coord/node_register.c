/* Registration: this node's record at nodes/<node_id>, on its lease. */
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

int ec__node_do_register(ec_node_t *n, int64_t old_lease, ec_error_t *err)
{
    int64_t lease;
    int rc = ec_etcd_lease_grant(n->c, n->o.lease_ttl_s, &lease, NULL, err);
    if (rc < 0)
        return rc;
    void *buf = NULL;
    size_t len = 0;
    pthread_mutex_lock(&n->lock);
    n->registered_at_ms = ec__node_wall_ms();
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
            deadline = ec__node_mono_ms() + (ttl > 0 ? ttl : 1) * 1000 + 1500;
            ec_log(EC_LOG_INFO, "node id %s is still registered (host %s); waiting up to %lld s "
                                "for that record to expire", n->node_id, their_host,
                   (long long)(ttl > 0 ? ttl + 1 : 2));
        }
        if (ec__node_mono_ms() > deadline) {
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
    ec__node_emit(n, "+node %s registered host=%s nproc=%d lease=%llx", n->node_id, n->host, n->o.nproc,
         (unsigned long long)lease);
    return 0;
fail:
    free(buf);
    ec_etcd_lease_revoke(n->c, lease, NULL);
    return rc;
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
