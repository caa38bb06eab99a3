/* Per-epoch worker keys: epochs/<n>/comm/<name>, attached to the node's
 * lease (keys.h builds every path).  The backends rendezvous through them
 * (Gloo's addresses, NCCL's unique id) and each process claims its rank in
 * the epoch it builds, so that a process replacing a dead one of the same
 * rank can tell that the epoch was its predecessor's.
 *
 * The node's lease is the agent's, and the agent replaces it when it loses
 * it (an etcd outage longer than the TTL): the lease in ECOORD_LEASE is only
 * where the library starts.  It follows the lease the node's own record
 * (nodes/<node_id>) is attached to, before each rebuild and whenever etcd
 * answers that a lease is gone, so a process outlives its agent's lease. */
#include "ecw_impl.h"
#include "clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int comm_key(ecw_t *w, uint64_t epoch, const char *name, char *buf, size_t len,
                    ec_error_t *err)
{
    int n = ec_key_epoch_comm(&w->keys, epoch, name, buf, len);
    if (n < 0)
        return ec_errorf(err, n, "cannot build the key of '%s' in epoch %" PRIu64
                         " (a bug in the worker library)", name, epoch);
    return 0;
}

int64_t ecw__lease(ecw_t *w)
{
    return atomic_load(&w->lease);
}

int ecw__lease_follow(ecw_t *w, int64_t dead, ec_error_t *err)
{
    if (!w->o.lease)
        return 0; /* no lease given: keys are not leased, nothing to follow */
    char key[EC_KEY_MAX];
    if (ec_key_node(&w->keys, w->o.node_id, key, sizeof(key)) < 0)
        return ec_errorf(err, EC_EINVAL, "cannot build the key of node '%s'", w->o.node_id);
    ec_kv_t kv;
    bool found = false;
    int rc = ec_etcd_get(w->etcd, key, &kv, &found, NULL, err);
    if (rc < 0) {
        ec_error_prefix(err, "reading the lease of node %s", w->o.node_id);
        return rc;
    }
    int64_t now = found ? kv.lease : 0;
    if (found)
        ec_kv_free(&kv);
    int64_t old = atomic_load(&w->lease);
    if (now > 0 && now != dead && now != old) {
        atomic_store(&w->lease, now);
        ecw__log(w, ECW_LOG_INFO, "+lease %" PRIx64 " (was %" PRIx64 "): the agent of node %s "
                 "registered again", (uint64_t)now, (uint64_t)old, w->o.node_id);
    }
    if (dead && atomic_load(&w->lease) == dead)
        return ec_errorf(err, EC_EUNAVAILABLE, "the lease %" PRIx64 " of node %s is gone and "
                         "its agent has not registered again yet (is `ecoord launch` still "
                         "running on this node?)", (uint64_t)dead, w->o.node_id);
    return 0;
}

int ecw__put(ecw_t *w, const char *key, const void *val, size_t len, ec_error_t *err)
{
    int64_t lease = ecw__lease(w);
    int rc = ec_etcd_put(w->etcd, key, val, len, lease, NULL, err);
    if (rc == EC_ENOTFOUND && lease) {
        /* "requested lease not found": the agent lost it; take its new one */
        if ((rc = ecw__lease_follow(w, lease, err)) == 0)
            rc = ec_etcd_put(w->etcd, key, val, len, ecw__lease(w), NULL, err);
    }
    return rc;
}

int ecw__comm_put(ecw_t *w, uint64_t epoch, const char *name, const void *val, size_t len,
                  ec_error_t *err)
{
    char key[EC_KEY_MAX];
    int rc = comm_key(w, epoch, name, key, sizeof(key), err);
    if (rc < 0)
        return rc;
    rc = ecw__put(w, key, val, len, err);
    if (rc < 0)
        ec_error_prefix(err, "publishing %s for epoch %" PRIu64, name, epoch);
    return rc;
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int ecw__comm_get(ecw_t *w, uint64_t epoch, const char *name, void **val, size_t *len,
                  int timeout_ms, const _Atomic int *abort_flag, ec_error_t *err)
{
    *val = NULL;
    *len = 0;
    char key[EC_KEY_MAX];
    int rc = comm_key(w, epoch, name, key, sizeof(key), err);
    if (rc < 0)
        return rc;
    int64_t deadline = ec_mono_ms() + timeout_ms;
    int pause = 2; /* ms; the key usually appears within a few */
    for (;;) {
        if (abort_flag && atomic_load(abort_flag))
            return ec_errorf(err, EC_EABORTED, "waiting for %s of epoch %" PRIu64 ": aborted",
                             name, epoch);
        ec_kv_t kv;
        bool found = false;
        rc = ec_etcd_get(w->etcd, key, &kv, &found, NULL, err);
        /* etcd briefly unreachable (a leader election, a restart): keep
         * polling until the deadline rather than fail the whole epoch. */
        if (rc < 0 && rc != EC_EUNAVAILABLE && rc != EC_ETIMEDOUT)
            return ec_error_prefix(err, "reading %s of epoch %" PRIu64, name, epoch);
        if (rc == 0 && found) {
            *val = kv.value; /* NUL-terminated copy: hand it over */
            *len = kv.value_len;
            kv.value = NULL;
            ec_kv_free(&kv);
            return 0;
        }
        /* A peer that is slow to come may be dead: its agent tells. */
        ecw__build_tick(w, epoch);
        int64_t left = deadline - ec_mono_ms();
        if (left <= 0 && rc < 0)
            return ec_error_prefix(err, "reading %s of epoch %" PRIu64, name, epoch);
        if (left <= 0)
            return ec_errorf(err, EC_ETIMEDOUT, "%s of epoch %" PRIu64 " did not appear under "
                             "'%s' within %d ms (the member that writes it has not started "
                             "or died): wait for the next epoch", name, epoch, key, timeout_ms);
        nap_ms((int)(left < pause ? left : pause));
        if (pause < 20)
            pause *= 2;
    }
}

int ecw__claim(ecw_t *w, uint64_t epoch, int rank, bool takeover, ec_error_t *err)
{
    char name[32], key[EC_KEY_MAX];
    snprintf(name, sizeof(name), "claim.%d", rank);
    int rc = comm_key(w, epoch, name, key, sizeof(key), err);
    if (rc < 0)
        return rc;
    /* Create it if absent; either way read what is there. */
    ec_cmp_t cmp = {.key = key, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL, .number = 0};
    ec_op_t put = {.type = EC_OP_PUT, .key = key, .value = w->token,
                   .value_len = strlen(w->token), .lease = ecw__lease(w)};
    ec_op_t get = {.type = EC_OP_GET, .key = key};
    ec_txn_result_t res;
    memset(&res, 0, sizeof(res));
    rc = ec_etcd_txn(w->etcd, &cmp, 1, &put, 1, &get, 1, &res, err);
    if (rc == EC_ENOTFOUND && put.lease) {
        /* the lease is gone (etcd refuses the whole transaction) */
        memset(&res, 0, sizeof(res));
        if ((rc = ecw__lease_follow(w, put.lease, err)) == 0) {
            put.lease = ecw__lease(w);
            rc = ec_etcd_txn(w->etcd, &cmp, 1, &put, 1, &get, 1, &res, err);
        }
    }
    if (rc < 0)
        return ec_error_prefix(err, "claiming rank %d in epoch %" PRIu64, rank, epoch);
    int mine = 1;
    if (!res.succeeded) {
        mine = 0;
        if (res.n == 1 && res.results[0].kvs.n == 1) {
            const ec_kv_t *kv = &res.results[0].kvs.kvs[0];
            mine = kv->value_len == strlen(w->token) &&
                   !memcmp(kv->value, w->token, kv->value_len);
        }
    }
    ec_txn_result_free(&res);
    if (!mine && takeover) {
        /* The agent started this process for exactly this epoch: whoever
         * holds the claim is the process it replaced. */
        rc = ecw__put(w, key, w->token, strlen(w->token), err);
        if (rc < 0)
            return ec_error_prefix(err, "taking over rank %d in epoch %" PRIu64, rank, epoch);
        mine = 1;
    }
    return mine;
}
