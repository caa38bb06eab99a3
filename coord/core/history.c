/* The epoch-history checker (rules in history.h).  It re-checks the shape of
 * each epoch itself rather than trusting the decoder, so that it also judges
 * epochs built by hand in tests. */
#include "history.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ec_history_rule_name(ec_history_rule_t rule)
{
    switch (rule) {
#define EC_HISTORY_RULE_CASE(code, name) \
    case EC_HISTORY_##code:              \
        return name;
        EC_HISTORY_RULE_MAP(EC_HISTORY_RULE_CASE)
#undef EC_HISTORY_RULE_CASE
    }
    return "unknown";
}

/* The first violation: EC_ECORRUPT, its message ending with the rule's
 * name, and the rule and the epoch's index in stats. */
static int violate(ec_history_stats_t *st, size_t idx, ec_history_rule_t rule, ec_error_t *err,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int violate(ec_history_stats_t *st, size_t idx, ec_history_rule_t rule, ec_error_t *err,
                   const char *fmt, ...)
{
    char msg[EC_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (st) {
        st->broken = rule;
        st->broken_at = idx;
    }
    return ec_errorf(err, EC_ECORRUPT, "%s (rule %s)", msg, ec_history_rule_name(rule));
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Rule 2: M_ids are a permutation of 0..M-1 and each member has N endpoints,
 * so the ranks M_id*N + N_id cover 0..W-1 exactly once; no node id twice. */
static int check_shape(const ec_epoch_t *ep, size_t idx, ec_history_stats_t *st, ec_error_t *err)
{
    unsigned long long num = (unsigned long long)ep->number;
    if (ep->nproc < 1 || ep->nmembers < 1 || !ep->members)
        return violate(st, idx, EC_HISTORY_EMPTY, err,
                       "history[%zu] epoch %llu: %d members x nproc %d is empty", idx, num,
                       ep->nmembers, ep->nproc);
    if ((long long)ep->world_size != (long long)ep->nmembers * ep->nproc)
        return violate(st, idx, EC_HISTORY_WORLD_SIZE, err,
                         "history[%zu] epoch %llu: world size %d != %d members x nproc %d, so "
                         "ranks are not exactly 0..W-1",
                         idx, num, ep->world_size, ep->nmembers, ep->nproc);
    int rc = 0;
    unsigned char *seen = calloc((size_t)ep->nmembers, 1);
    const char **ids = malloc((size_t)ep->nmembers * sizeof(*ids));
    if (!seen || !ids) {
        rc = ec_errorf(err, EC_ENOMEM, "history check: out of memory");
        goto out;
    }
    for (int i = 0; i < ep->nmembers; i++) {
        const ec_member_t *m = &ep->members[i];
        if (m->m_id < 0 || m->m_id >= ep->nmembers || seen[m->m_id]) {
            rc = violate(st, idx, EC_HISTORY_M_ID, err,
                           "history[%zu] epoch %llu: member %d (%s) has M_id %d, %s, so its "
                           "ranks are not exactly 0..%d",
                           idx, num, i, m->node_id ? m->node_id : "(null)", m->m_id,
                           m->m_id < 0 || m->m_id >= ep->nmembers ? "out of range"
                                                                   : "already taken",
                           ep->world_size - 1);
            goto out;
        }
        seen[m->m_id] = 1;
        if (!m->ports || !m->node_id) {
            rc = violate(st, idx, EC_HISTORY_NO_ENDPOINTS, err,
                           "history[%zu] epoch %llu: member %d has no node id or endpoints", idx,
                           num, i);
            goto out;
        }
        ids[i] = m->node_id;
    }
    qsort(ids, (size_t)ep->nmembers, sizeof(*ids), cmp_str_ptr);
    for (int i = 1; i < ep->nmembers; i++)
        if (strcmp(ids[i - 1], ids[i]) == 0) {
            rc = violate(st, idx, EC_HISTORY_TWO_BLOCKS, err,
                           "history[%zu] epoch %llu: node %s holds two blocks of ranks", idx,
                           num, ids[i]);
            goto out;
        }
out:
    free(seen);
    free(ids);
    return rc;
}

int ec_history_check(const ec_epoch_t *const *epochs, size_t n, const ec_leader_obs_t *obs,
                     size_t nobs, const ec_history_opts_t *opts_in, ec_history_stats_t *stats,
                     ec_error_t *err)
{
    ec_history_opts_t opts = EC_HISTORY_OPTS_INIT;
    if (opts_in) {
        /* An older caller's smaller struct leaves the newer fields at defaults. */
        size_t sz = opts_in->size < sizeof(opts) ? opts_in->size : sizeof(opts);
        if (sz < sizeof(opts.size) + sizeof(int) * 2)
            return ec_errorf(err, EC_EINVAL, "history check: opts.size %zu is too small; "
                                             "start from EC_HISTORY_OPTS_INIT",
                             opts_in->size);
        memcpy(&opts, opts_in, sz);
        opts.size = sizeof(opts);
    }
    if (stats)
        memset(stats, 0, sizeof(*stats));
    if (opts.min_nodes < 1 || opts.min_nodes > opts.max_nodes)
        return ec_errorf(err, EC_EINVAL, "history check: nodes range %d:%d is empty",
                         opts.min_nodes, opts.max_nodes);
    if ((n && !epochs) || (nobs && !obs))
        return ec_errorf(err, EC_EINVAL, "history check: no epochs or observations given");

    int nproc = opts.nproc;
    const ec_epoch_t *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const ec_epoch_t *ep = epochs[i];
        if (!ep)
            return ec_errorf(err, EC_EINVAL, "history check: epoch %zu is NULL", i);
        unsigned long long num = (unsigned long long)ep->number;

        /* 1 */
        if (num < 1)
            return violate(stats, i, EC_HISTORY_NUMBER_ZERO, err, "history[%zu]: epoch number 0", i);
        if (prev && ep->number <= prev->number)
            return violate(stats, i, EC_HISTORY_NOT_INCREASING, err,
                             "history[%zu]: epoch %llu follows epoch %llu; numbers must "
                             "strictly increase",
                             i, num, (unsigned long long)prev->number);
        if (prev && opts.consecutive && ep->number != prev->number + 1)
            return violate(stats, i, EC_HISTORY_MISSING, err,
                             "history[%zu]: epoch %llu follows epoch %llu; epochs %llu..%llu "
                             "are missing",
                             i, num, (unsigned long long)prev->number,
                             (unsigned long long)prev->number + 1, num - 1);
        /* 2 */
        int rc = check_shape(ep, i, stats, err);
        if (rc < 0)
            return rc;
        /* 3 */
        if (nproc == 0)
            nproc = ep->nproc;
        if (ep->nproc != nproc)
            return violate(stats, i, EC_HISTORY_NPROC, err,
                             "history[%zu] epoch %llu: nproc %d, but the job runs %d per node",
                             i, num, ep->nproc, nproc);
        /* 4 */
        if (ep->nmembers < opts.min_nodes || ep->nmembers > opts.max_nodes)
            return violate(stats, i, EC_HISTORY_NODES_RANGE, err,
                             "history[%zu] epoch %llu: %d nodes (world %d), outside %d:%d", i,
                             num, ep->nmembers, ep->world_size, opts.min_nodes,
                             opts.max_nodes);
        /* 5 */
        const char *leader = ep->leader_id ? ep->leader_id : "";
        size_t j;
        for (j = 0; j < nobs; j++)
            if (obs[j].create_rev == ep->leader_rev && obs[j].node_id &&
                strcmp(obs[j].node_id, leader) == 0)
                break;
        if (j == nobs) {
            const char *holder = NULL;
            for (j = 0; j < nobs; j++)
                if (obs[j].create_rev == ep->leader_rev)
                    holder = obs[j].node_id;
            if (holder)
                return violate(stats, i, EC_HISTORY_OTHER_HOLDER, err,
                                 "history[%zu] epoch %llu: written by %s under leader revision "
                                 "%lld, but %s held the leader key at that revision",
                                 i, num, leader, (long long)ep->leader_rev, holder);
            return violate(stats, i, EC_HISTORY_UNKNOWN_LEADERSHIP, err,
                             "history[%zu] epoch %llu: written by %s under leader revision "
                             "%lld, which no observed leadership had",
                             i, num, leader, (long long)ep->leader_rev);
        }
        /* 5, when: the leadership lasted over the write */
        int64_t mod = opts.mod_revs ? opts.mod_revs[i] : 0;
        if (mod > 0 && mod < obs[j].create_rev)
            return violate(stats, i, EC_HISTORY_BEFORE_LEADERSHIP, err,
                             "history[%zu] epoch %llu: written at revision %lld, before %s's "
                             "leadership (leader revision %lld) began",
                             i, num, (long long)mod, leader, (long long)obs[j].create_rev);
        if (mod > 0 && obs[j].end_rev > 0 && mod >= obs[j].end_rev)
            return violate(stats, i, EC_HISTORY_AFTER_LEADERSHIP, err,
                             "history[%zu] epoch %llu: written at revision %lld by %s under "
                             "leader revision %lld, but that leadership ended at revision %lld "
                             "(leader key deleted or replaced): a deposed leader wrote it",
                             i, num, (long long)mod, leader, (long long)ep->leader_rev,
                             (long long)obs[j].end_rev);
        /* 6 */
        if (prev && ep->leader_rev < prev->leader_rev)
            return violate(stats, i, EC_HISTORY_LEADER_REV_DOWN, err,
                             "history[%zu] epoch %llu: leader revision %lld (%s) is older than "
                             "epoch %llu's %lld (%s): a deposed leader wrote it",
                             i, num, (long long)ep->leader_rev, leader,
                             (unsigned long long)prev->number, (long long)prev->leader_rev,
                             prev->leader_id ? prev->leader_id : "");
        if (stats) {
            stats->epochs++;
            stats->ranks += ep->world_size;
            if (!prev || ep->leader_rev != prev->leader_rev)
                stats->leaderships++;
        }
        prev = ep;
    }
    return 0;
}
