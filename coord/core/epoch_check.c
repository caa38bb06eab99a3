/* Which epochs a reader applies (see epoch_check.h). */
#define _GNU_SOURCE
#include "epoch_check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ec_leader_log_reset(ec_leader_log_t *l, int64_t from_rev)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->e[i].id);
    l->n = 0;
    l->from_rev = from_rev;
}

void ec_leader_log_put(ec_leader_log_t *l, int64_t create_rev, const char *id, size_t len)
{
    char *v = strndup(id ? id : "", id ? len : 0);
    if (!v)
        return;
    for (size_t i = 0; i < l->n; i++)
        if (l->e[i].create_rev == create_rev) {
            free(l->e[i].id);
            l->e[i].id = v;
            return;
        }
    /* A key created anew implies the one before was deleted, even if that
     * deletion was not seen. */
    for (size_t i = 0; i < l->n; i++)
        if (!l->e[i].deleted_rev && l->e[i].create_rev < create_rev)
            l->e[i].deleted_rev = create_rev;
    if (l->n == EC_LEADER_LOG_MAX) {
        /* Drop the oldest: from now on the log cannot tell what held the
         * key before that leadership ended. */
        ec_leadership_t *o = &l->e[0];
        int64_t end = o->deleted_rev ? o->deleted_rev : create_rev;
        if (end > l->from_rev)
            l->from_rev = end;
        free(o->id);
        memmove(&l->e[0], &l->e[1], (l->n - 1) * sizeof(l->e[0]));
        l->n--;
    }
    l->e[l->n++] = (ec_leadership_t){.create_rev = create_rev, .deleted_rev = 0, .id = v};
}

void ec_leader_log_delete(ec_leader_log_t *l, int64_t rev)
{
    for (size_t i = 0; i < l->n; i++)
        if (!l->e[i].deleted_rev)
            l->e[i].deleted_rev = rev;
}

int ec_leader_log_at(const ec_leader_log_t *l, int64_t rev, const ec_leadership_t **out)
{
    *out = NULL;
    /* A key that exists with create revision C existed at every revision
     * from C until its deletion: a deletion and a new put would have given
     * it another create revision. */
    for (size_t i = 0; i < l->n; i++)
        if (l->e[i].create_rev <= rev && (!l->e[i].deleted_rev || rev < l->e[i].deleted_rev)) {
            *out = &l->e[i];
            return 1;
        }
    return rev >= l->from_rev ? 0 : -1;
}

const char *ec_refusal_name(ec_refusal_t r)
{
    switch (r) {
    case EC_ACCEPTED: return "accepted";
#define EC_REFUSAL_CASE(code, value, name)                                                     \
    case EC_REFUSED_##code: return name;
        EC_REFUSAL_MAP(EC_REFUSAL_CASE)
#undef EC_REFUSAL_CASE
    }
    return "unknown";
}

/* Refuse ep with r, why saying so: "ignoring epoch N: written by X under
 * leader revision R, but <fmt>; the leader will restore the last valid
 * epoch" (every refusal ends with what happens next). */
static ec_refusal_t why_f(ec_refusal_t r, char *why, size_t len, const ec_epoch_t *ep,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static ec_refusal_t why_f(ec_refusal_t r, char *why, size_t len, const ec_epoch_t *ep,
                          const char *fmt, ...)
{
    if (!why || !len)
        return r;
    int k = snprintf(why, len, "ignoring epoch %" PRIu64 ": written by '%.128s' under leader "
                     "revision %" PRId64 ", but ", ep->number, ep->leader_id ? ep->leader_id : "",
                     ep->leader_rev);
    if (k < 0 || (size_t)k >= len)
        return r;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(why + k, len - (size_t)k, fmt, ap);
    va_end(ap);
    if (m >= 0 && (size_t)k + (size_t)m < len)
        snprintf(why + k + m, len - (size_t)k - (size_t)m,
                 "; the leader will restore the last valid epoch");
    return r;
}

ec_refusal_t ec_epoch_check(const ec_epoch_t *ep, const char *job_id, int64_t mod_rev,
                            const ec_leadership_t *leader, char *why, size_t why_len)
{
    const char *held_by = leader && leader->id ? leader->id : "";
    if (!ep->job_id || !*ep->job_id)
        return why_f(EC_REFUSED_NO_JOB, why, why_len, ep, "it names no job (written by another "
                     "tool, or by an ecoord older than job ids in epochs)");
    if (!job_id || strcmp(ep->job_id, job_id) != 0)
        return why_f(EC_REFUSED_OTHER_JOB, why, why_len, ep, "it names job '%.128s', not "
                     "'%.128s' (copied from another job?)", ep->job_id, job_id ? job_id : "");
    if (!leader)
        return why_f(EC_REFUSED_NO_LEADER, why, why_len, ep, "no leader key existed at its "
                     "revision %" PRId64 " (not written by a leader)", mod_rev);
    if (leader->create_rev != ep->leader_rev)
        return why_f(EC_REFUSED_OTHER_LEADERSHIP, why, why_len, ep, "the leader key at its "
                     "revision %" PRId64 " was created at revision %" PRId64 " by '%.128s' (not "
                     "written by that leader)", mod_rev, leader->create_rev, held_by);
    if (!ep->leader_id || !leader->id || strcmp(ep->leader_id, leader->id) != 0)
        return why_f(EC_REFUSED_OTHER_LEADER, why, why_len, ep, "the leader key at its revision "
                     "%" PRId64 " names '%.128s' (not written by that leader)", mod_rev, held_by);
    return EC_ACCEPTED;
}

ec_refusal_t ec_epoch_gap_check(const ec_epoch_t *ep, uint64_t last, bool self_in_history,
                                bool prev_in_history, bool last_in_history, char *why,
                                size_t why_len)
{
    if (ep->number <= last + 1 || self_in_history || prev_in_history || !last_in_history)
        return EC_ACCEPTED;
    return why_f(EC_REFUSED_UNSHOWN_GAP, why, why_len, ep, "it skips epochs %" PRIu64 "..%" PRIu64
                 ", and the job's history holds neither it nor them (forged? a number that high "
                 "leaves none for the next epoch)", last + 1, ep->number - 1);
}

ec_refusal_t ec_status_check(const ec_job_status_t *st, int64_t mod_rev,
                             const ec_leadership_t *leader, char *why, size_t why_len)
{
    if (!ec_job_state_ended(st->state))
        return EC_ACCEPTED;
    ec_refusal_t r = EC_ACCEPTED;
    const char *problem = NULL;
    if (st->leader_rev == 0 && st->state == EC_JOB_INTERRUPTED) {
        if (leader) {
            r = EC_REFUSED_INTERRUPTED_UNDER_LEADER;
            problem = "a leader key existed at its revision (a run is marked interrupted only "
                      "when no agent of it is left)";
        }
    } else if (st->leader_rev == 0) {
        r = EC_REFUSED_NO_LEADERSHIP;
        problem = "it names no leadership (only the leader ends a run)";
    } else if (!leader) {
        r = EC_REFUSED_NO_LEADER;
        problem = "no leader key existed at its revision";
    } else if (leader->create_rev != st->leader_rev || !st->leader_id || !leader->id ||
               strcmp(st->leader_id, leader->id) != 0) {
        r = EC_REFUSED_OTHER_LEADERSHIP;
        problem = "the leader key at its revision was another leadership's";
    }
    if (r == EC_ACCEPTED)
        return EC_ACCEPTED;
    if (why && why_len)
        snprintf(why, why_len, "ignoring job status %s of run %" PRIu64 " (revision %" PRId64
                 "): written by '%.128s' under leader revision %" PRId64 ", but %s; the leader "
                 "will restore the job's status", ec_job_state_name(st->state), st->run, mod_rev,
                 st->updated_by ? st->updated_by : "", st->leader_rev, problem);
    return r;
}
