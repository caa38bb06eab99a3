/* `ecoord check`'s report: the facts of the run's nodes compared (rules.h),
 * with the node ids the training job knows so a node that never arrived is
 * named, and printed. */
#include "command_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "epoch_fetch.h"
#include "records.h"
#include "rules.h"

/* The node ids the training job knows: its current epoch's members and its
 * registered nodes (read only; the check never writes the job's keys).  So a
 * node that never arrives can be named.  Best effort: errors give none. */
static void read_known(ck_t *x, char ***out, int *n)
{
    char key[EC_KEY_MAX];
    *out = NULL;
    *n = 0;
    char **v = NULL;
    int nv = 0;
    ec_kv_t kv;
    bool found = false;
    if (ec_key_epoch(&x->keys, key, sizeof(key)) > 0 &&
        ec_etcd_get(x->c, key, &kv, &found, NULL, NULL) == 0 && found) {
        ec_epoch_t *ep = NULL;
        if (ec_epoch_fetch(x->c, &x->keys, kv.value, kv.value_len, key, &ep, NULL, NULL,
                           NULL) == 0) {
            v = calloc((size_t)ep->nmembers + 1, sizeof(char *));
            for (int i = 0; v && i < ep->nmembers; i++)
                if ((v[nv] = strdup(ep->members[i].node_id)))
                    nv++;
        }
        ec_epoch_free(ep);
        ec_kv_free(&kv);
    }
    ec_kv_list_t l;
    if (ec_key_nodes_prefix(&x->keys, key, sizeof(key)) > 0 &&
        ec_etcd_get_prefix(x->c, key, 0, &l, NULL) == 0) {
        char **w = realloc(v, ((size_t)nv + l.n + 1) * sizeof(char *));
        if (w) {
            v = w;
            for (size_t i = 0; i < l.n; i++) {
                char id[EC_NODE_ID_MAX + 1];
                if (ec_key_parse_node(&x->keys, l.kvs[i].key, l.kvs[i].key_len, id,
                                      sizeof(id)) > 0 && (v[nv] = strdup(id)))
                    nv++;
            }
        }
        ec_kv_list_free(&l);
    }
    *out = v;
    *n = nv;
}

/* Compare the facts of the snapshot's nodes (this node alone when snap is
 * NULL) into rep.  Runs under the lock: the facts are the watch's. */
int ec__check_compute_report(ck_t *x, const snap_t *snap, const char *leader, const char *nonce,
                             const char *etcd_error, ec_check_report_t *rep, ec_error_t *err)
{
    const ec_config_t *cfg = x->cfg;
    ec_check_input_t in = {
        .job_id = cfg->job_id,
        .np_min = cfg->np.min,
        .np_max = cfg->np.max,
        .waited_ms = x->arrival_ms,
        .final_phase = snap ? EC_CHECK_PHASE_DONE : EC_CHECK_PHASE_LOCAL,
        .leader = leader,
        .leader_nonce = nonce,
        .embedded = x->embed != NULL,
        .etcd_error = etcd_error,
        .limits = EC_CHECK_LIMITS_INIT,
    };
    char **known = NULL;
    int nknown = 0;
    if (snap && snap->n < cfg->np.max && x->c)
        read_known(x, &known, &nknown);
    in.known = (const char *const *)known;
    in.nknown = nknown;
    ec_check_facts_t *facts = calloc(snap ? (size_t)snap->n + 1 : 1, sizeof(*facts));
    if (!facts) {
        for (int i = 0; i < nknown; i++)
            free(known[i]);
        free(known);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    int n = 0;
    ec_check_unreadable_t *bad = NULL;
    if (!snap) {
        facts[n++] = x->self;
    } else {
        pthread_mutex_lock(&x->lock);
        for (int i = 0; i < snap->n; i++) {
            peer_t *p = ec__check_peer_get(x, snap->keys[i], false);
            if (!p || !p->valid)
                continue;
            facts[n] = p->f; /* shallow: the lock keeps it alive */
            facts[n++].gone = !p->present;
        }
        /* facts that never decoded (another ecoord version): named, not
         * silently missing */
        bad = calloc((size_t)x->npeers + 1, sizeof(*bad));
        for (int i = 0; bad && i < x->npeers; i++) {
            const peer_t *p = &x->peers[i];
            if (!p->present || p->valid)
                continue;
            const char *slash = strrchr(p->key, '/');
            bad[in.nunreadable].name = slash ? slash + 1 : p->key;
            bad[in.nunreadable++].why = p->err;
        }
        in.unreadable = bad;
    }
    in.facts = facts;
    in.nfacts = n;
    int rc = ec_check_compare(&in, rep, err);
    if (snap)
        pthread_mutex_unlock(&x->lock);
    free(bad);
    free(facts);
    for (int i = 0; i < nknown; i++)
        free(known[i]);
    free(known);
    return rc;
}

int ec__check_print_report(ck_t *x, const ec_check_report_t *rep)
{
    if (x->cfg->json)
        ec_check_report_print_json(rep, x->out);
    else
        ec_check_report_print(rep, x->out);
    fflush(x->out);
    int c[4];
    ec_check_report_counts(rep, c);
    return c[EC_CHECK_FAIL] ? 1 : 0;
}
