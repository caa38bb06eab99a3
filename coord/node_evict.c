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

/* Members of the current epoch that some member reported and that were not
 * probed yet in this epoch: probe their agents, evict the silent ones.  The
 * leader does this for every member; any other node only for the leader
 * itself, so that a dead leader is replaced as fast as a dead member (its
 * lease revoked, the key goes, the next ec__node_campaign brings a new fencing token,
 * and a leader that was only slow can no longer publish). */
void ec__node_handle_suspicions(ec_node_t *n)
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
            size_t k = ec__node_mnode_find(n, id, &found);
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
            ec__node_emit(n, "+suspicion of %s by %s rejected: its agent answered in %.1f ms", ids[i], by[i],
                 (double)t[i].rtt_us / 1000.0);
        } else {
            ec_error_t err = {0};
            int rc = ec_etcd_lease_revoke(n->c, leases[i], &err);
            ec__node_emit(n, "-node %s evicted: suspected by %s, no answer to a probe of %s:%u within %d ms%s%s",
                 ids[i], by[i], t[i].host, t[i].port, to, rc < 0 ? "; revoke failed: " : "",
                 rc < 0 ? err.msg : "");
        }
        free(ids[i]);
        free(hosts[i]);
        free(by[i]);
    }
}
