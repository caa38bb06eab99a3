/* Leadership: campaign for the leader key, step down, and the fence every
 * leader write carries (the leader key's create revision). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keys.h"
#include "clock.h"
#include "log.h"
#include "node_impl.h"

void ec__node_set_leader(ec_node_t *n, bool leader)
{
    n->el.am_leader = leader;
    atomic_store_explicit(&n->el.leader_pub, leader, memory_order_release);
    ec__node_phase(n, leader ? EC_PEV_WON : EC_PEV_STEPPED_DOWN,
                   leader ? "this node holds the leader key" : "this node no longer leads");
}

void ec__node_campaign(ec_node_t *n)
{
    int64_t lease = ec_node_lease(n);
    ec_cmp_t absent = {.key = n->k_leader, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
    ec_op_t put = {.type = EC_OP_PUT, .key = n->k_leader, .value = n->node_id,
                   .value_len = strlen(n->node_id), .lease = lease};
    ec_txn_result_t r;
    ec_error_t err = {0};
    if (ec_etcd_txn(n->c, &absent, 1, &put, 1, NULL, 0, &r, &err) < 0) {
        ec_log(EC_LOG_WARN, "ec__node_campaign for leader failed: %s", err.msg);
        return;
    }
    if (r.succeeded) {
        ec__node_set_leader(n, true);
        n->el.my_leader_rev = r.revision;
        ec__pub_on_lead(n);
        ec__node_emit(n, "+leader %s rev=%lld", n->node_id, (long long)r.revision);
    }
    ec_txn_result_free(&r);
}

void ec__node_step_down(ec_node_t *n, const char *why)
{
    if (!n->el.am_leader)
        return;
    ec__node_set_leader(n, false);
    n->el.my_leader_rev = 0;
    ec__node_emit(n, "-leader %s: %s", n->node_id, why);
}

/* The fence: leadership still ours (leader key created at our revision). */
ec_cmp_t ec__node_fence_leader(ec_node_t *n)
{
    ec_cmp_t c = {.key = n->k_leader, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL,
                  .number = n->el.my_leader_rev};
    return c;
}

int ec__node_write_status(ec_node_t *n, ec_job_state_t state, const char *reason, uint64_t epoch,
                          uint64_t run, bool fenced)
{
    ec_job_status_t st = {.state = state, .reason = (char *)reason, .epoch = epoch,
                          .updated_at_ms = ec_wall_ms(), .updated_by = n->node_id,
                          .run = run, .leader_id = fenced ? n->node_id : NULL,
                          .leader_rev = fenced ? n->el.my_leader_rev : 0};
    void *buf;
    size_t len;
    ec_error_t err = {0};
    if (ec_job_status_encode(&st, &buf, &len, &err) < 0) {
        ec_log(EC_LOG_ERROR, "cannot encode job status: %s", err.msg);
        return err.code;
    }
    ec_cmp_t f = ec__node_fence_leader(n);
    /* a run that ends takes its probe secret with it (nobody registers
     * into an ended run: a new launch starts the next one) */
    char sk[EC_KEY_MAX];
    ec_op_t ops[2] = {{.type = EC_OP_PUT, .key = n->k_status, .value = buf, .value_len = len}};
    size_t nops = 1;
    if (ec_job_state_ended(state) && ec_key_probe_secret(&n->keys, run, sk, sizeof(sk)) > 0)
        ops[nops++] = (ec_op_t){.type = EC_OP_DELETE, .key = sk};
    ec_txn_result_t r;
    int rc = ec_etcd_txn(n->c, &f, fenced ? 1 : 0, ops, nops, NULL, 0, &r, &err);
    free(buf);
    if (rc < 0) {
        ec_log(EC_LOG_WARN, "cannot write job status: %s", err.msg);
        return rc;
    }
    if (!r.succeeded) {
        ec__node_step_down(n, "the leader key changed (status write fenced)");
        rc = EC_EFENCED;
    }
    ec_txn_result_free(&r);
    return rc;
}

/* A leader key without a lease was not written by an agent (a ec__node_campaign
 * always attaches the campaigner's lease) and would never expire: nobody
 * could lead again.  Delete it, fenced on its mod revision so a leadership
 * won meanwhile is not touched; everyone then campaigns (tests/t7000-faults,
 * garbage). */
void ec__node_clear_foreign_leader(ec_node_t *n, int64_t mod_rev)
{
    ec__node_step_down(n, "the leader key was overwritten by another tool");
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

/* Delete the leader key if it still has create revision rev (an old
 * registration's leadership of ours): the others need not wait for that
 * lease to expire. */
static void resign(ec_node_t *n, int64_t rev)
{
    ec_cmp_t same = {.key = n->k_leader, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL,
                     .number = rev};
    ec_op_t del = {.type = EC_OP_DELETE, .key = n->k_leader};
    ec_error_t err = {0};
    if (ec_etcd_txn(n->c, &same, 1, &del, 1, NULL, 0, NULL, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot delete our old leader key: %s", err.msg);
    else
        ec__node_emit(n, "-leader %s resigned: the leader key named us on an old lease", n->node_id);
}

/* Seniority for ec_elect_decide (coordinator thread): whether this node registered
 * after the current epoch was written (or is not one of its members), and
 * whether another member still has the record it had then. */
static void seniority(ec_node_t *n, bool *junior, bool *senior_alive)
{
    *junior = true;
    *senior_alive = false;
    const ec_epoch_t *ep = n->m.epoch;
    int64_t at = n->m.epoch_mod_rev;
    if (!ep || at <= 0)
        return;
    if (!n->m.wide) {
        /* A follower's model holds its own record only: the others' were
         * read once for this absence of the leader key (senior_check). */
        bool found;
        size_t k = ec__node_mnode_find(n, n->node_id, &found);
        *junior = ec_epoch_find_member(ep, n->node_id) < 0 || !found || !n->m.nodes[k].rec ||
                  n->m.nodes[k].create_rev >= at;
        *senior_alive = n->el.senior_read_for == n->m.leader_deleted_rev && n->el.senior_read;
        return;
    }
    for (int i = 0; i < ep->nmembers; i++) {
        bool found;
        size_t k = ec__node_mnode_find(n, ep->members[i].node_id, &found);
        bool old = found && n->m.nodes[k].rec && n->m.nodes[k].create_rev < at;
        if (!strcmp(ep->members[i].node_id, n->node_id))
            *junior = !old;
        else if (old)
            *senior_alive = true;
    }
}

/* A follower that is junior, with the leader key absent, reads nodes/ once
 * per absence to learn whether a senior member is alive (it then defers
 * its campaign, EC_CAMPAIGN_DEFER_MS).  Coordinator thread. */
static void senior_check(ec_node_t *n)
{
    bool junior = false, senior_alive;
    bool may = !n->m.wide && !n->el.am_leader && n->m.leader_create_rev == 0;
    if (may)
        seniority(n, &junior, &senior_alive);
    bool need = may && junior && n->m.epoch && n->el.senior_read_for != n->m.leader_deleted_rev;
    int64_t for_rev = n->m.leader_deleted_rev, at = n->m.epoch_mod_rev;
    ec_epoch_t *ep = need ? ec_epoch_dup(n->m.epoch) : NULL;
    if (!ep)
        return;
    ec_kv_list_t l;
    ec_error_t err = {0};
    if (ec__node_read_records(n, &l, &err) < 0) {
        ec_log(EC_LOG_WARN, "cannot read the node records for the election: %s", err.msg);
        ec_epoch_free(ep);
        return; /* campaigns without deferring: a leader matters more */
    }
    bool alive = false;
    char prefix[EC_KEY_MAX];
    size_t pl = (size_t)ec_key_nodes_prefix(&n->keys, prefix, sizeof(prefix));
    for (size_t i = 0; i < l.n && !alive; i++) {
        const char *id = l.kvs[i].key + pl;
        alive = l.kvs[i].key_len > pl && l.kvs[i].lease && l.kvs[i].create_revision < at &&
                strcmp(id, n->node_id) && ec_epoch_find_member(ep, id) >= 0;
    }
    ec_kv_list_free(&l);
    ec_epoch_free(ep);
    n->el.senior_read_for = for_rev;
    n->el.senior_read = alive;
}

void ec__node_elect(ec_node_t *n)
{
    senior_check(n);
    /* At most a step-down and a campaign per pass; the next change of the
     * leader key wakes the loop again. */
    for (int pass = 0; pass < 2; pass++) {
        int64_t now = ec_mono_ms();
        if (n->m.leader_create_rev != 0)
            n->el.leader_absent_since = -1;
        else if (n->el.leader_absent_since < 0)
            n->el.leader_absent_since = now;
        /* Seniority matters only to a follower whose leader key is gone
         * (ec_elect_decide): the leader would look through every member's
         * record on every pass for nothing. */
        bool junior = true, senior_alive = false;
        if (!n->el.am_leader && n->m.leader_create_rev == 0)
            seniority(n, &junior, &senior_alive);
        ec_elect_view_t v = {
            .am_leader = n->el.am_leader,
            .my_leader_rev = n->el.my_leader_rev,
            .my_lease = ec_node_lease(n),
            .key_present = n->m.leader_create_rev != 0,
            .key_names_me = n->m.leader_id && !strcmp(n->m.leader_id, n->node_id),
            .key_create_rev = n->m.leader_create_rev,
            .key_lease = n->m.leader_lease,
            .key_deleted_rev = n->m.leader_deleted_rev,
            .junior = junior,
            .senior_alive = senior_alive,
            .absent_ms = n->el.leader_absent_since < 0 ? 0 : now - n->el.leader_absent_since,
            .defer_ms = EC_CAMPAIGN_DEFER_MS,
        };
        int64_t mod = n->m.leader_mod_rev;
        switch (ec_elect_decide(&v)) {
        case EC_ELECT_NONE:
            return;
        case EC_ELECT_CAMPAIGN:
            ec__node_campaign(n);
            return;
        case EC_ELECT_DEFER: {
            /* decide again when the senior's head start is over */
            ec__node_wake_by(n, now + (v.defer_ms - v.absent_ms));
            return;
        }
        case EC_ELECT_ADOPT:
            /* Our campaign was applied but its reply was lost (or a read
             * after a rejected publish failed): the key is ours, on our live
             * lease; leave it and the job would stay leaderless. */
            ec__node_set_leader(n, true);
            n->el.my_leader_rev = v.key_create_rev;
            ec__pub_on_lead(n);
            ec__node_emit(n, "+leader %s rev=%lld adopted: the leader key names us on our lease",
                          n->node_id, (long long)v.key_create_rev);
            return;
        case EC_ELECT_RESIGN:
            resign(n, v.key_create_rev);
            return;
        case EC_ELECT_STEP_DOWN:
            ec__node_step_down(n, v.key_present ? "another node holds the leader key"
                                                : "the leader key is gone");
            continue;
        case EC_ELECT_CLEAR_FOREIGN:
            ec__node_clear_foreign_leader(n, mod);
            return;
        }
    }
}

/* ---- election's state, for the loop and the other concerns -------------- */

void ec__elect_init(ec_node_t *n)
{
    n->el.senior_read_for = -1;
}

bool ec__elect_leads(const ec_node_t *n)
{
    return n->el.am_leader;
}

int64_t ec__elect_rev(const ec_node_t *n)
{
    return n->el.my_leader_rev;
}

bool ec_node_is_leader(ec_node_t *n)
{
    /* any thread: am_leader is the coordinator thread's own */
    return atomic_load_explicit(&n->el.leader_pub, memory_order_acquire);
}
