/* `ecoord check`: this node's facts into etcd (create only, a duplicate
 * node id under another key) and the election of the report's writer (the
 * first to create check/report). */
#include "command_impl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"

int ec__check_put_self(ck_t *x, ec_error_t *err)
{
    void *buf = NULL;
    size_t len = 0;
    x->self.wall_ms = ec_wall_us() / 1000;
    int rc = ec_check_facts_encode(&x->self, &buf, &len, err);
    if (rc == 0)
        rc = ec_etcd_put(x->c, x->k_self, buf, len, x->lease, NULL, err);
    free(buf);
    return rc;
}

/* The first publish: create only.  Another live process already holding
 * check/nodes/<node_id> means a duplicate node id: publish under
 * <node_id>.dup-<nonce> instead, so the report shows both.  A record left by a
 * crashed check of this same machine (its pid gone) is taken over. */
int ec__check_publish_first(ck_t *x, ec_error_t *err)
{
    void *buf = NULL;
    size_t len = 0;
    x->self.wall_ms = ec_wall_us() / 1000;
    int rc = ec_check_facts_encode(&x->self, &buf, &len, err);
    if (rc < 0)
        return rc;
    bool published = false;
    for (int attempt = 0; attempt < 3 && !published; attempt++) {
        ec_cmp_t absent = {.key = x->k_self, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
        ec_op_t put = {.type = EC_OP_PUT, .key = x->k_self, .value = buf, .value_len = len,
                       .lease = x->lease};
        ec_op_t get = {.type = EC_OP_GET, .key = x->k_self};
        ec_txn_result_t r;
        if ((rc = ec_etcd_txn(x->c, &absent, 1, &put, 1, &get, 1, &r, err)) < 0)
            break;
        if (r.succeeded) {
            x->pub_rev = r.revision;
            published = true;
            ec_txn_result_free(&r);
            break;
        }
        ec_check_facts_t other;
        bool stale = false;
        int64_t mod = 0;
        if (r.n && r.results[0].kvs.n) {
            const ec_kv_t *kv = &r.results[0].kvs.kvs[0];
            mod = kv->mod_revision;
            if (ec_check_facts_decode(kv->value, kv->value_len, kv->key, &other, NULL) == 0)
                stale = !strcmp(other.boot_id, x->self.boot_id) &&
                        !strcmp(other.pidns, x->self.pidns) && other.pid != x->self.pid &&
                        kill(other.pid, 0) < 0 && errno == ESRCH;
            else
                stale = true; /* not ours to keep: unreadable */
            ec_check_facts_clear(&other);
        }
        ec_txn_result_free(&r);
        if (stale) {
            ec_cmp_t same = {.key = x->k_self, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                             .number = mod};
            ec_txn_result_t r2;
            if ((rc = ec_etcd_txn(x->c, &same, 1, &put, 1, NULL, 0, &r2, err)) < 0)
                break;
            published = r2.succeeded;
            x->pub_rev = r2.revision;
            ec_txn_result_free(&r2);
            continue;
        }
        char alt[EC_NODE_ID_MAX + 1];
        snprintf(alt, sizeof(alt), "%.*s.dup-%s", EC_NODE_ID_MAX - 5 - EC_CHECK_NONCE_LEN,
                 x->self.node_id, x->self.nonce);
        ec_log(EC_LOG_WARN, "another process already checks as node %s: publishing under %s so "
                            "the report names both", x->self.node_id, alt);
        if (ec_key_check(&x->keys, alt, x->k_self, sizeof(x->k_self)) < 0) {
            rc = ec_errorf(err, EC_EINVAL, "cannot build a key for node id %s", alt);
            break;
        }
    }
    free(buf);
    if (rc == 0 && !published)
        rc = ec_errorf(err, EC_EEXIST, "cannot publish the facts of node %s: %s is taken",
                       x->self.node_id, x->k_self);
    return rc;
}

/* Leader of this run: the first to create check/report.  A report whose
 * writer is no longer in etcd is a leftover of a crashed run: removed (if it
 * did not change meanwhile) and the creation retried.  *late is set when a
 * live report was created before this node arrived. */
static int elect_with(ck_t *x, const void *pending, size_t pl, bool *late, char *leader,
                      size_t llen, char *lnonce, ec_error_t *err)
{
    *late = false;
    for (int attempt = 0; attempt < 3; attempt++) {
        ec_cmp_t absent = {.key = x->k_report, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
        ec_op_t put = {.type = EC_OP_PUT, .key = x->k_report, .value = pending,
                       .value_len = pl, .lease = x->lease};
        ec_op_t get = {.type = EC_OP_GET, .key = x->k_report};
        ec_txn_result_t r;
        int rc = ec_etcd_txn(x->c, &absent, 1, &put, 1, &get, 1, &r, err);
        if (rc < 0)
            return rc;
        if (r.succeeded) {
            x->leader = true;
            x->report_rev = r.revision;
            snprintf(leader, llen, "%s", x->self.node_id);
            snprintf(lnonce, EC_CHECK_NONCE_LEN + 1, "%s", x->self.nonce);
            ec_txn_result_free(&r);
            return 0;
        }
        char who[EC_NODE_ID_MAX + 1] = "", nonce[EC_CHECK_NONCE_LEN + 1] = "";
        int64_t mod = 0, create = 0;
        if (r.n && r.results[0].kvs.n) {
            const ec_kv_t *kv = &r.results[0].kvs.kvs[0];
            mod = kv->mod_revision;
            create = kv->create_revision;
            ec_check_report_t rep;
            if (ec_check_report_decode(kv->value, kv->value_len, kv->key, &rep, NULL) == 0) {
                snprintf(who, sizeof(who), "%s", rep.leader);
                snprintf(nonce, sizeof(nonce), "%s", rep.leader_nonce);
                ec_check_report_clear(&rep);
            }
        }
        ec_txn_result_free(&r);
        if (!mod)
            continue; /* vanished meanwhile: try again */
        pthread_mutex_lock(&x->lock);
        bool live = nonce[0] && ec__check_nonce_present(x, nonce);
        pthread_mutex_unlock(&x->lock);
        if (live) {
            snprintf(leader, llen, "%s", who);
            snprintf(lnonce, EC_CHECK_NONCE_LEN + 1, "%s", nonce);
            *late = create < x->pub_rev;
            return 0;
        }
        ec_log(EC_LOG_INFO, "removing the report of an earlier check (by %s, no longer running)",
               who[0] ? who : "an unknown node");
        ec_cmp_t same = {.key = x->k_report, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                         .number = mod};
        ec_op_t del = {.type = EC_OP_DELETE, .key = x->k_report};
        if ((rc = ec_etcd_txn(x->c, &same, 1, &del, 1, NULL, 0, NULL, err)) < 0)
            return rc;
    }
    return ec_errorf(err, EC_EINTERNAL, "could not settle who writes the report in %s",
                     x->k_report);
}

int ec__check_elect(ck_t *x, bool *late, char *leader, size_t llen, char *lnonce,
                    ec_error_t *err)
{
    /* the claim: a report with only its writer, pending */
    ec_check_report_t claim = {.version = EC_CHECK_REPORT_VERSION, .pending = 1};
    snprintf(claim.job_id, sizeof(claim.job_id), "%s", x->cfg->job_id);
    snprintf(claim.leader, sizeof(claim.leader), "%s", x->self.node_id);
    snprintf(claim.leader_nonce, sizeof(claim.leader_nonce), "%s", x->self.nonce);
    void *pending = NULL;
    size_t pl = 0;
    int rc = ec_check_report_encode(&claim, &pending, &pl, err);
    if (rc == 0)
        rc = elect_with(x, pending, pl, late, leader, llen, lnonce, err);
    free(pending);
    return rc;
}
