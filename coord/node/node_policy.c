/* Pure decisions of the node coordinator (see node_policy.h). */
#include "node_policy.h"

#include <string.h>

ec_reg_action_t ec_reg_decide(const ec_reg_view_t *v)
{
    if (!v->present)
        return EC_REG_CREATE;
    if (v->lease == 0)
        /* Agents write their records only under a lease: this value was put
         * by another tool and, never expiring, would block this id forever.
         * Once; a second one is someone insisting, and is waited out. */
        return v->junk_cleared ? EC_REG_WAIT : EC_REG_CLEAR_JUNK;
    if (v->my_old_lease != 0 && v->lease == v->my_old_lease)
        return EC_REG_TAKE_OWN;
    if (v->has_probe_port && v->probe == EC_REG_PROBE_NONE)
        return EC_REG_PROBE;
    if (v->has_probe_port && v->probe == EC_REG_PROBE_SILENT)
        return EC_REG_TAKE_DEAD;
    return v->deadline_passed ? EC_REG_DUPLICATE : EC_REG_WAIT;
}

ec_elect_action_t ec_elect_decide(const ec_elect_view_t *v)
{
    if (v->key_present && v->key_lease == 0)
        return EC_ELECT_CLEAR_FOREIGN;
    if (v->am_leader) {
        /* An absent key counts only once its deletion is newer than our
         * campaign: right after winning, the model may not show the key yet. */
        if (!v->key_present)
            return v->key_deleted_rev > v->my_leader_rev ? EC_ELECT_STEP_DOWN : EC_ELECT_NONE;
        if (!v->key_names_me || v->key_create_rev != v->my_leader_rev)
            return EC_ELECT_STEP_DOWN;
        return EC_ELECT_NONE;
    }
    if (!v->key_present)
        return v->junior && v->senior_alive && v->absent_ms < v->defer_ms ? EC_ELECT_DEFER
                                                                           : EC_ELECT_CAMPAIGN;
    if (v->key_names_me)
        return v->key_lease == v->my_lease ? EC_ELECT_ADOPT : EC_ELECT_RESIGN;
    return EC_ELECT_NONE;
}

bool ec_evict_leader_quorum(size_t n_members, size_t n_reporters)
{
    if (n_members < 2)
        return false;
    return 2 * n_reporters > n_members - 1;
}

bool ec_evict_member_evidence(size_t n_members, size_t n_reporters, bool leader_reported)
{
    if (n_reporters == 0)
        return false;
    if (n_reporters > (leader_reported ? 1u : 0u))
        return true; /* someone other than the leader's own node saw it */
    return ec_evict_leader_quorum(n_members, n_reporters);
}

bool ec_suspect_probe_due(bool probed, int64_t newest_report_rev, int64_t probed_rev,
                          bool last_silent, int64_t since_probe_ms, int64_t min_every_ms)
{
    if (!probed)
        return true;
    if (newest_report_rev <= probed_rev)
        return false; /* nothing new since: one probe per report */
    return last_silent || since_probe_ms >= min_every_ms;
}

int64_t ec_confirm_delay_ms(const char *node_id, size_t n_members)
{
    size_t slots = n_members / EC_CONFIRM_PER_SLOT;
    if (slots <= 1 || !node_id)
        return 0;
    uint64_t h = 1469598103934665603ULL;
    for (const char *c = node_id; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    return (int64_t)(h % slots) * EC_CONFIRM_SLOT_MS;
}

ec_readmit_action_t ec_readmit_decide(bool answered, int64_t since_evicted_ms,
                                      int64_t since_probe_ms, int64_t probe_every_ms,
                                      int64_t hold_max_ms)
{
    if (answered)
        return EC_READMIT_ADMIT;
    if (since_evicted_ms >= hold_max_ms)
        return EC_READMIT_FORGET;
    if (since_probe_ms < 0 || since_probe_ms >= probe_every_ms)
        return EC_READMIT_PROBE;
    return EC_READMIT_HOLD;
}

size_t ec_ring_watched(const char *const *ids, size_t n, const char *me, size_t k, size_t *out)
{
    size_t at = n;
    for (size_t i = 0; i < n && at == n; i++)
        if (ids[i] && !strcmp(ids[i], me))
            at = i;
    if (at == n)
        return 0;
    /* The successors of M_id m: m + 1, m + 2, ... (wrapping), the members
     * a view does not hold (NULL) skipped.  M_ids are compacted in order
     * after a loss and joiners are appended, so a change moves only the
     * watchers next to it, as sorted ids did; and a follower holding its
     * own chunk and the next (a view of a split epoch) has its successors. */
    size_t got = 0;
    for (size_t step = 1; step < n && got < k; step++) {
        size_t j = (at + step) % n;
        if (ids[j])
            out[got++] = j;
    }
    return got;
}

/* ---- the coordinator's phase ------------------------------------------------ */

const char *ec_node_phase_name(ec_node_phase_t p)
{
    switch (p) {
    case EC_PHASE_REGISTERING: return "registering";
    case EC_PHASE_FOLLOWER: return "follower";
    case EC_PHASE_LEADER: return "leader";
    case EC_PHASE_LEAVING: return "leaving";
    case EC_PHASE_STOPPED: return "stopped";
    }
    return "?";
}

const char *ec_phase_event_name(ec_phase_event_t e)
{
    switch (e) {
    case EC_PEV_REGISTERED: return "registered";
    case EC_PEV_LEASE_LOST: return "lease-lost";
    case EC_PEV_WON: return "won";
    case EC_PEV_STEPPED_DOWN: return "stepped-down";
    case EC_PEV_LEAVE: return "leave";
    case EC_PEV_STOP: return "stop";
    }
    return "?";
}

ec_node_phase_t ec_node_phase_next(ec_node_phase_t p, ec_phase_event_t e)
{
    if (p == EC_PHASE_STOPPED)
        return p; /* the end */
    if (e == EC_PEV_STOP)
        return EC_PHASE_STOPPED;
    if (p == EC_PHASE_LEAVING)
        return p; /* only the end follows a leave */
    if (e == EC_PEV_LEAVE)
        return EC_PHASE_LEAVING;
    switch (p) {
    case EC_PHASE_REGISTERING:
        return e == EC_PEV_REGISTERED ? EC_PHASE_FOLLOWER : p;
    case EC_PHASE_FOLLOWER:
        return e == EC_PEV_WON ? EC_PHASE_LEADER
             : e == EC_PEV_LEASE_LOST ? EC_PHASE_REGISTERING : p;
    case EC_PHASE_LEADER:
        return e == EC_PEV_STEPPED_DOWN ? EC_PHASE_FOLLOWER
             : e == EC_PEV_LEASE_LOST ? EC_PHASE_REGISTERING : p;
    default:
        return p;
    }
}
