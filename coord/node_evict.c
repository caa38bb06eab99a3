/* Eviction faster than a lease TTL: probe reported suspects, evict the
 * silent ones. */
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

/* How many distinct members of the current epoch (other than the accused)
 * reported `id` in it; lock held. */
static size_t reporters_of(ec_node_t *n, uint64_t cur, const char *id)
{
    size_t count = 0;
    for (size_t i = 0; i < n->nsus; i++) {
        if (n->sus[i].epoch != cur || !strcmp(n->sus[i].reporter, id) ||
            ec_epoch_find_member(n->epoch, n->sus[i].reporter) < 0)
            continue;
        char *list = strdup(n->sus[i].ids), *save = NULL;
        for (char *t = list ? strtok_r(list, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
            if (!strcmp(t, id)) {
                count++;
                break;
            }
        free(list);
    }
    return count;
}

/* Remove a silent node: delete its record with a transaction fenced on what
 * entitles us to (the leader: our leadership; a follower evicting the leader:
 * the accused leadership still being the current one), then revoke its
 * lease so everything it held goes.  A leader deposed meanwhile, or a leader
 * that was already replaced, is never acted on. */
static int evict(ec_node_t *n, const char *id, int64_t lease, int64_t rec_mod, bool accused_leader,
                 int64_t leader_rev, ec_error_t *err)
{
    char key[EC_KEY_MAX];
    ec_key_node(&n->keys, id, key, sizeof(key));
    ec_cmp_t cm[2];
    size_t ncm = 0;
    if (accused_leader)
        cm[ncm++] = (ec_cmp_t){.key = n->k_leader, .target = EC_CMP_CREATE,
                               .result = EC_CMP_EQUAL, .number = leader_rev};
    else
        cm[ncm++] = ec__node_fence_leader(n);
    cm[ncm++] = (ec_cmp_t){.key = key, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                           .number = rec_mod};
    ec_op_t ops[2];
    size_t nops = 0;
    ops[nops++] = (ec_op_t){.type = EC_OP_DELETE, .key = key};
    if (accused_leader)
        ops[nops++] = (ec_op_t){.type = EC_OP_DELETE, .key = n->k_leader};
    ec_txn_result_t r;
    int rc = ec_etcd_txn(n->c, cm, ncm, ops, nops, NULL, 0, &r, err);
    if (rc < 0)
        return rc;
    bool ok = r.succeeded;
    ec_txn_result_free(&r);
    if (!ok)
        return ec_errorf(err, EC_EFENCED, "the leadership or the node's record changed since "
                                          "the suspicion; not evicting");
    return lease ? ec_etcd_lease_revoke(n->c, lease, err) : 0;
}

/* Members of the current epoch that some member reported and that were not
 * probed yet in this epoch: probe their agents, evict the silent ones.  The
 * leader does this for every member on one report; any other node only for
 * the leader itself, and only once a strict majority of the other members
 * reported it (so that one follower cut off from the leader cannot depose a
 * leader the rest still reach), so that a dead leader is replaced as fast as
 * a dead member (its record and key deleted, the next campaign brings a new
 * fencing token, and a leader that was only slow can no longer publish). */
void ec__node_handle_suspicions(ec_node_t *n)
{
    enum { MAXS = 64 };
    ec_probe_target_t t[MAXS];
    char *ids[MAXS], *hosts[MAXS], *by[MAXS];
    int64_t leases[MAXS], mods[MAXS];
    size_t nt = 0;
    int64_t leader_rev = 0;
    pthread_mutex_lock(&n->lock);
    uint64_t cur = n->epoch ? n->epoch->number : 0;
    leader_rev = n->leader_create_rev;
    /* reports of earlier epochs are of no use any more */
    size_t keep = 0;
    for (size_t i = 0; i < n->nsus; i++) {
        if (n->sus[i].epoch >= cur) {
            n->sus[keep++] = n->sus[i];
        } else {
            free(n->sus[i].reporter);
            free(n->sus[i].ids);
        }
    }
    n->nsus = keep;
    for (size_t i = 0; cur && i < n->nsus && nt < MAXS; i++) {
        if (n->sus[i].epoch != cur || ec_epoch_find_member(n->epoch, n->sus[i].reporter) < 0)
            continue; /* only members of the current epoch may accuse */
        char *list = strdup(n->sus[i].ids), *save = NULL;
        for (char *id = list ? strtok_r(list, ",", &save) : NULL; id && nt < MAXS;
             id = strtok_r(NULL, ",", &save)) {
            bool found;
            size_t k = ec__node_mnode_find(n, id, &found);
            bool is_leader = n->leader_id && !strcmp(id, n->leader_id);
            if (!strcmp(id, n->node_id) || ec_epoch_find_member(n->epoch, id) < 0 || !found ||
                !n->nodes[k].rec || !n->nodes[k].rec->probe_port)
                continue;
            if (!n->am_leader &&
                (!is_leader || !ec_evict_leader_quorum((size_t)n->epoch->nmembers,
                                                       reporters_of(n, cur, id))))
                continue;
            if (was_probed(n, cur, id))
                continue;
            ids[nt] = strdup(id);
            hosts[nt] = strdup(n->nodes[k].rec->host);
            by[nt] = strdup(n->sus[i].reporter);
            leases[nt] = n->nodes[k].lease;
            mods[nt] = n->nodes[k].mod_rev;
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
            ec__node_emit(n, "+suspicion of %s by %s rejected: its agent answered in %.1f ms",
                          ids[i], by[i], (double)t[i].rtt_us / 1000.0);
        } else {
            ec_error_t err = {0};
            int rc = evict(n, ids[i], leases[i], mods[i], !n->am_leader, leader_rev, &err);
            ec__node_emit(n, "-node %s evicted: suspected by %s, no answer to a probe of %s:%u "
                             "within %d ms%s%s",
                          ids[i], by[i], t[i].host, t[i].port, to,
                          rc < 0 ? "; not evicted: " : "", rc < 0 ? err.msg : "");
        }
        free(ids[i]);
        free(hosts[i]);
        free(by[i]);
    }
}
