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
#include "clock.h"
#include "detector.h"
#include "log.h"
#include "node_impl.h"
#include "stop_barrier.h"
#include "strbuf.h"

/* An order-independent fingerprint of an epoch's member ids. */
static uint64_t members_fp(const ec_epoch_t *ep)
{
    uint64_t fp = 0;
    for (int i = 0; ep && i < ep->nmembers; i++) {
        uint64_t h = 1469598103934665603ULL;
        for (const char *c = ep->members[i].node_id; c && *c; c++)
            h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        fp += h;
    }
    return fp;
}

/* The probe memory of suspect `id` in the current member set, or NULL
 * (coordinator thread).  Probes of an earlier member set are forgotten. */
static struct probed *probed_of(ec_node_t *n, uint64_t members_epoch, const char *id)
{
    if (n->ev.probed_epoch != members_epoch) {
        for (size_t i = 0; i < n->ev.nprobed; i++)
            free(n->ev.probed[i].id);
        free(n->ev.probed);
        n->ev.probed = NULL;
        n->ev.nprobed = 0;
        n->ev.probed_epoch = members_epoch;
    }
    for (size_t i = 0; i < n->ev.nprobed; i++)
        if (!strcmp(n->ev.probed[i].id, id))
            return &n->ev.probed[i];
    return NULL;
}

/* The entry of report list `list` that names the id id[0..n) ("<id>" or
 * "<id>@<rtt_us>", detector.h), or NULL. */
static const char *entry_of(const char *list, const char *id, size_t n)
{
    for (const char *e = list; e && *e; e = strchr(e, ',') ? strchr(e, ',') + 1 : NULL)
        if (ec_detect_entry_id_len(e) == n && !strncmp(e, id, n))
            return e;
    return NULL;
}

static bool names(const char *list, const char *id)
{
    return entry_of(list, id, strlen(id)) != NULL;
}

/* The round trip to `id` that the reports naming it carry (the ring
 * watchers' estimates; the longest, so that a slow link seen by one counts),
 * 0 when none does.  Coordinator thread. */
static int64_t reported_rtt_of(ec_node_t *n, uint64_t cur, const char *id)
{
    int64_t rtt = 0;
    for (size_t i = 0; i < n->m.nsus; i++) {
        const char *e = n->m.sus[i].epoch >= n->ev.members_epoch && n->m.sus[i].epoch <= cur
                            ? entry_of(n->m.sus[i].ids, id, strlen(id)) : NULL;
        int64_t r = e ? ec_detect_entry_rtt_us(e) : 0;
        rtt = r > rtt ? r : rtt;
    }
    return rtt;
}

/* The mod revision of the newest report naming `id` that counts (a member
 * of the current epoch other than `id`, in the current member set); 0:
 * none.  Coordinator thread. */
static int64_t newest_report_of(ec_node_t *n, uint64_t cur, const char *id)
{
    int64_t rev = 0;
    for (size_t i = 0; i < n->m.nsus; i++)
        if (n->m.sus[i].epoch >= n->ev.members_epoch && n->m.sus[i].epoch <= cur &&
            strcmp(n->m.sus[i].reporter, id) &&
            ec_epoch_find_member(n->m.epoch, n->m.sus[i].reporter) >= 0 &&
            n->m.sus[i].mod_rev > rev && names(n->m.sus[i].ids, id))
            rev = n->m.sus[i].mod_rev;
    return rev;
}

/* (Follower) whether to wait before probing the reported leader `id` to
 * confirm the report: in a large job the followers are spread over slots
 * (ec_confirm_delay_ms) counted from when the newest report naming it
 * reached the model; the loop is woken when our slot comes.  Coordinator thread. */
static bool confirm_wait(ec_node_t *n, uint64_t cur, const char *id, int64_t now)
{
    int64_t delay = ec_confirm_delay_ms(n->node_id, (size_t)n->m.epoch->nmembers);
    if (delay <= 0)
        return false;
    int64_t rev = newest_report_of(n, cur, id), seen = -1;
    for (size_t i = 0; i < n->m.nsus; i++)
        if (n->m.sus[i].mod_rev == rev && n->m.sus[i].epoch <= cur)
            seen = n->m.sus[i].seen_ms;
    if (seen < 0 || now - seen >= delay)
        return false;
    ec__node_wake_by(n, seen + delay);
    return true;
}

/* Whether suspect `id` is to be probed now (ec_suspect_probe_due); when
 * it is not yet but will be once the interval passed, the loop is woken
 * then.  Coordinator thread. */
static bool probe_due(ec_node_t *n, uint64_t cur, const char *id, int64_t now)
{
    struct probed *p = probed_of(n, n->ev.members_epoch, id);
    int64_t newest = newest_report_of(n, cur, id);
    bool due = ec_suspect_probe_due(p != NULL, newest, p ? p->rev : 0, p && p->silent,
                                    p ? now - p->at_ms : -1, EC_REPROBE_MIN_MS);
    if (!due && p && newest > p->rev) {
        ec__node_wake_by(n, p->at_ms + EC_REPROBE_MIN_MS);
    }
    return due;
}

/* Remember a probe of `id` for the reports up to `rev` (coordinator thread). */
static void note_probed(ec_node_t *n, const char *id, int64_t rev, bool silent, int64_t now)
{
    struct probed *p = probed_of(n, n->ev.members_epoch, id);
    if (!p) {
        struct probed *np = realloc(n->ev.probed, (n->ev.nprobed + 1) * sizeof(*np));
        if (!np)
            return;
        n->ev.probed = np;
        p = &n->ev.probed[n->ev.nprobed++];
        *p = (struct probed){.id = strdup(id)};
    }
    p->at_ms = now;
    if (rev > p->rev)
        p->rev = rev;
    p->silent = silent;
}

static bool reported_by(ec_node_t *n, uint64_t cur, const char *reporter, const char *id);

/* How many distinct members of the current epoch (other than the accused)
 * reported `id` in it or in an earlier epoch with the same members; lock
 * held. */
static size_t reporters_of(ec_node_t *n, uint64_t cur, const char *id)
{
    size_t count = 0;
    for (size_t i = 0; i < n->m.nsus; i++) {
        if (n->m.sus[i].epoch < n->ev.members_epoch || n->m.sus[i].epoch > cur ||
            !strcmp(n->m.sus[i].reporter, id) ||
            ec_epoch_find_member(n->m.epoch, n->m.sus[i].reporter) < 0)
            continue;
        bool seen = false; /* this reporter counted already */
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcmp(n->m.sus[j].reporter, n->m.sus[i].reporter);
        if (!seen && reported_by(n, cur, n->m.sus[i].reporter, id))
            count++;
    }
    return count;
}

/* Whether `reporter` (any of its sources) reported `id` in the current
 * member set; coordinator thread. */
static bool reported_by(ec_node_t *n, uint64_t cur, const char *reporter, const char *id)
{
    for (size_t i = 0; i < n->m.nsus; i++)
        if (n->m.sus[i].epoch >= n->ev.members_epoch && n->m.sus[i].epoch <= cur &&
            !strcmp(n->m.sus[i].reporter, reporter) && names(n->m.sus[i].ids, id))
            return true;
    return false;
}

/* How long a node evicted as silent is remembered, and how often it is
 * probed again once it registered again. */
#define EC_HOLD_MAX_MS 120000
#define EC_HOLD_PROBE_EVERY_MS 1000

/* Remember a node found silent on reports (coordinator thread). */
static void remember_silent(ec_node_t *n, const char *id, const char *by)
{
    struct held *h = NULL;
    for (size_t i = 0; i < n->ev.nheld; i++)
        if (!strcmp(n->ev.held[i].id, id))
            h = &n->ev.held[i];
    if (!h) {
        struct held *nh = realloc(n->ev.held, (n->ev.nheld + 1) * sizeof(*nh));
        if (!nh)
            return;
        n->ev.held = nh;
        h = &n->ev.held[n->ev.nheld++];
        *h = (struct held){.id = strdup(id)};
    }
    free(h->by);
    h->by = strdup(by);
    h->at_ms = ec_mono_ms();
    h->probed_ms = -1;
    h->failed = 0;
    h->answered = false;
    h->told = false;
}

static void forget_held(ec_node_t *n, size_t i)
{
    free(n->ev.held[i].id);
    free(n->ev.held[i].by);
    n->ev.held[i] = n->ev.held[--n->ev.nheld];
}

bool ec__node_held_out(ec_node_t *n, const char *id)
{
    for (size_t i = 0; i < n->ev.nheld; i++)
        if (!strcmp(n->ev.held[i].id, id))
            return !n->ev.held[i].answered &&
                   ec_mono_ms() - n->ev.held[i].at_ms < EC_HOLD_MAX_MS;
    return false;
}

/* Probe nt reported (or held) nodes to confirm what was reported of them:
 * a set of f attempts each (fresh connections: one lost packet does not
 * make a live node look silent; f at most EC_DETECT_FANOUT), and more sets for those
 * whose link looks slower than the deadline (ec_detect_confirm_again_ms:
 * no handshake within it, or one that took more than half of it).  Fills
 * each t[i].ok, rtt_us, connected, refused; returns the longest deadline
 * used, in ms.  `deliver`: hand epochs on while waiting (ec__node_probe;
 * not during registration).  Coordinator thread. */
static void probe_wait(ec_node_t *n, ec_probe_target_t *t, size_t nt, int64_t ms, bool deliver)
{
    if (deliver)
        ec__node_probe(n, t, nt, (int)ms);
    else
        ec_probe_many(t, nt, (int)ms);
}

/* Account target t's set of f attempts a[0..f) under deadline dl, its
 * `sets`-th: fills t's outs; returns the next set's deadline, or 0. */
static int64_t account_set(ec_probe_target_t *t, const ec_probe_target_t *a, int f, int64_t dl,
                           int sets, int64_t known_rtt_us)
{
    int64_t rtt;
    ec_probe_outcome_t r = ec_probe_set_outcome(a, (size_t)f, &rtt);
    t->ok = r == EC_PROBE_ANSWERED;
    t->rtt_us = t->ok ? rtt : -1;
    t->connected = r == EC_PROBE_CONNECTED;
    t->refused = r == EC_PROBE_REFUSED;
    return t->ok ? 0 : ec_detect_confirm_again_ms(r, rtt, dl, sets, known_rtt_us);
}

int64_t ec__node_confirm_probe(ec_node_t *n, ec_probe_target_t *t, size_t nt, int f, bool deliver,
                               int64_t first_ms, const int64_t *known_rtt_us)
{
    int F = f < 1 ? 1 : f > EC_DETECT_FANOUT ? EC_DETECT_FANOUT : f;
    ec_probe_target_t *a = calloc(nt ? nt * (size_t)EC_DETECT_FANOUT_MAX : 1, sizeof(*a));
    int64_t *d = calloc(nt ? nt : 1, sizeof(*d)), longest = 0;
    int *c = calloc(nt ? nt : 1, sizeof(*c));
    if (!a || !d || !c) {
        free(a);
        free(d);
        free(c);
        probe_wait(n, t, nt, EC_DETECT_FLOOR_MS, deliver);
        return EC_DETECT_FLOOR_MS;
    }
    for (size_t i = 0; i < nt; i++)
        d[i] = first_ms > 0 ? first_ms : ec_detect_confirm_deadline_ms(0, n->o.probe_timeout_ms);
    for (int sets = 1;; sets++) {
        size_t na = 0;
        int64_t dl = 0;
        for (size_t i = 0; i < nt; i++) {
            /* more attempts where no handshake will be final (detector.h) */
            c[i] = d[i] ? ec_detect_confirm_set_attempts(F, sets, known_rtt_us ? known_rtt_us[i] : 0,
                                                         d[i])
                        : 0;
            for (int k = 0; k < c[i]; k++) {
                a[na++] = t[i];
                dl = d[i] > dl ? d[i] : dl;
            }
        }
        if (!na)
            break;
        probe_wait(n, a, na, dl, deliver);
        longest = dl > longest ? dl : longest;
        na = 0;
        for (size_t i = 0; i < nt; i++)
            if (c[i]) {
                d[i] = account_set(&t[i], a + na, c[i], dl, sets,
                                   known_rtt_us ? known_rtt_us[i] : 0);
                na += (size_t)c[i];
            }
    }
    free(a);
    free(d);
    free(c);
    return longest;
}

/* (Leader) probe the remembered silent nodes that registered again: one
 * that answers is eligible again, one that does not stays out (re-probed
 * every second), for at most EC_HOLD_MAX_MS. */
static void probe_held(ec_node_t *n)
{
    enum { MAXH = 32 };
    ec_probe_target_t t[MAXH];
    char *ids[MAXH], *hosts[MAXH];
    size_t nt = 0;
    int failed = 0; /* the most readmission probes any of them failed */
    int64_t now = ec_mono_ms();
    for (size_t i = 0; i < n->ev.nheld;) {
        struct held *h = &n->ev.held[i];
        ec_readmit_action_t a =
            ec_readmit_decide(h->answered, now - h->at_ms, h->probed_ms < 0 ? -1 : now - h->probed_ms,
                              EC_HOLD_PROBE_EVERY_MS, EC_HOLD_MAX_MS);
        if (a == EC_READMIT_ADMIT || a == EC_READMIT_FORGET) {
            if (a == EC_READMIT_FORGET && ec__elect_leads(n))
                ec__node_emit(n, "+hold %s dropped: evicted as silent %.1f s ago, no longer held out",
                              h->id, (double)(now - h->at_ms) / 1000.0);
            forget_held(n, i);
            ec__node_mark_dirty(n);
            continue;
        }
        bool found;
        size_t k = ec__node_mnode_find(n, h->id, &found);
        if (a == EC_READMIT_PROBE && ec__elect_leads(n) && nt < MAXH && found && n->m.nodes[k].rec &&
            n->m.nodes[k].rec->probe_port) {
            ids[nt] = strdup(h->id);
            failed = h->failed > failed ? h->failed : failed;
            hosts[nt] = strdup(n->m.nodes[k].rec->host);
            t[nt] = (ec_probe_target_t){.host = hosts[nt], .port = n->m.nodes[k].rec->probe_port,
                                        .expect_id = ids[nt], .verify = ec__reg_verify(n),
                                        .expect_lease = n->m.nodes[k].lease};
            nt++;
        }
        /* the loop sleeps until something changes: wake it to probe again */
        if (ec__elect_leads(n) && found) {
            ec__node_wake_by(n, now + EC_HOLD_PROBE_EVERY_MS);
        }
        i++;
    }
    if (!nt)
        return;
    /* after a failed one, a readmission probe waits as long as the
     * tolerance: an agent answering within it is alive by the ring's rule */
    int64_t tol = n->o.peer_pause_tolerance_ms > 0 ? n->o.peer_pause_tolerance_ms : 700;
    ec__node_confirm_probe(n, t, nt, EC_DETECT_FANOUT, true,
                           ec_detect_readmit_deadline_ms(failed, tol, n->o.probe_timeout_ms), NULL);
    now = ec_mono_ms();
    for (size_t j = 0; j < nt; j++) {
        for (size_t i = 0; i < n->ev.nheld; i++) {
            struct held *h = &n->ev.held[i];
            if (strcmp(h->id, ids[j]))
                continue;
            h->probed_ms = now;
            h->failed += !t[j].ok;
            if (t[j].ok) {
                h->answered = true;
                ec__node_mark_dirty(n);
                ec__node_emit(n, "+readmit %s: evicted as silent %.1f s ago, now answers a probe "
                                 "(%.1f ms)", h->id, (double)(now - h->at_ms) / 1000.0,
                              (double)t[j].rtt_us / 1000.0);
            } else if (!h->told) {
                h->told = true;
                ec__node_emit(n, "+hold %s: evicted as silent %.1f s ago (reported by %s) and still "
                                 "not answering a probe", h->id, (double)(now - h->at_ms) / 1000.0,
                              h->by ? h->by : "?");
            }
        }
        free(ids[j]);
        free(hosts[j]);
    }
}

/* gone/<id> for the stop barrier of whoever takes id's ranks: how long its
 * processes may live on at most (its lease's time left, read now), on a
 * lease of its own that outlasts that wait (once it is gone the rule reads
 * "no eviction": start, which is then true), so nothing accumulates.  A
 * grant that fails leaves it unleased rather than unsaid.  Nothing for an
 * agent that refused probes: it is gone with its processes, and "no
 * eviction" says start at once just the same, without this write's two
 * round trips on the path of a kill -9's recovery.  *buf (malloc'd) is the
 * value; returns 0 with *buf NULL when nothing is to be written. */
static int departure(ec_node_t *n, int64_t lease, ec_depart_cause_t cause, void **buf,
                     size_t *len, int64_t *glease, ec_error_t *err)
{
    *buf = NULL;
    *glease = 0;
    if (cause == EC_DEPART_REFUSED)
        return 0;
    ec_departure_t d = {.lease = lease, .cause = cause,
                        .wait_ms = (int64_t)n->o.lease_ttl_s * 1000};
    ec_error_t e = {0};
    int64_t ttl = 0;
    if (lease && ec_etcd_lease_ttl(n->c, lease, &ttl, NULL, &e) == 0)
        d.wait_ms = ttl < 0 ? 0 : (ttl + 1) * 1000; /* whole seconds, rounded down */
    int rc = ec_departure_encode(&d, buf, len, err);
    if (rc < 0)
        return rc;
    if (ec_etcd_lease_grant(n->c, (d.wait_ms + 999) / 1000 + n->o.lease_ttl_s, glease, NULL,
                            &e) < 0)
        *glease = 0;
    return 0;
}

/* Remove a silent node: delete its record with a transaction fenced on what
 * entitles us to (the leader: our leadership; a follower evicting the leader:
 * the accused leadership still being the current one), then revoke its
 * lease so everything it held goes.  A leader deposed meanwhile, or a leader
 * that was already replaced, is never acted on.  The same transaction
 * writes gone/<id> (departure, above; coord/core/stop_barrier.h). */
static int evict(ec_node_t *n, const char *id, int64_t lease, int64_t rec_mod, bool accused_leader,
                 int64_t leader_rev, ec_depart_cause_t cause, ec_error_t *err)
{
    char key[EC_KEY_MAX], kgone[EC_KEY_MAX];
    ec_key_node(&n->keys, id, key, sizeof(key));
    ec_key_gone(&n->keys, id, kgone, sizeof(kgone));
    void *gbuf = NULL;
    size_t glen = 0;
    int64_t glease = 0;
    int rc = departure(n, lease, cause, &gbuf, &glen, &glease, err);
    if (rc < 0)
        return rc;
    ec_cmp_t cm[2];
    size_t ncm = 0;
    if (accused_leader)
        cm[ncm++] = (ec_cmp_t){.key = n->k_leader, .target = EC_CMP_CREATE,
                               .result = EC_CMP_EQUAL, .number = leader_rev};
    else
        cm[ncm++] = ec__node_fence_leader(n);
    cm[ncm++] = (ec_cmp_t){.key = key, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                           .number = rec_mod};
    ec_op_t ops[3];
    size_t nops = 0;
    ops[nops++] = (ec_op_t){.type = EC_OP_DELETE, .key = key};
    if (gbuf)
        ops[nops++] = (ec_op_t){.type = EC_OP_PUT, .key = kgone, .value = gbuf,
                                .value_len = glen, .lease = glease};
    if (accused_leader)
        ops[nops++] = (ec_op_t){.type = EC_OP_DELETE, .key = n->k_leader};
    ec_txn_result_t r;
    rc = ec_etcd_txn(n->c, cm, ncm, ops, nops, NULL, 0, &r, err);
    free(gbuf);
    if (rc < 0)
        return rc;
    bool ok = r.succeeded;
    if (ok && !accused_leader) {
        n->ev.evicted_rev = r.revision;
        n->ev.evicted_at_ms = ec_mono_ms();
    }
    ec_txn_result_free(&r);
    if (!ok)
        return ec_errorf(err, EC_EFENCED, "the leadership or the node's record changed since "
                                          "the suspicion; not evicting");
    return lease ? ec_etcd_lease_revoke(n->c, lease, err) : 0;
}

/* The leader's eviction of a member (hangs and stragglers: node_hang.c). */
int ec__node_evict(ec_node_t *n, const char *id, int64_t lease, int64_t rec_mod,
                   ec_depart_cause_t cause, ec_error_t *err)
{
    return evict(n, id, lease, rec_mod, false, 0, cause, err);
}

/* A follower's model holds no other node's record: once a member reported
 * the leader, and a probe of it is due (to add our own report, or to
 * depose it once a majority reported it), read the leader's (its host,
 * probe port, lease and mod revision for the fenced eviction).  No lock
 * held. */
static void fetch_accused_leader(ec_node_t *n)
{
    uint64_t cur = n->m.epoch ? n->m.epoch->number : 0;
    char *id = NULL;
    if (!n->m.wide && !ec__elect_leads(n) && cur && n->m.leader_id &&
        strcmp(n->m.leader_id, n->node_id) &&
        ec_epoch_find_member(n->m.epoch, n->m.leader_id) >= 0 &&
        newest_report_of(n, cur, n->m.leader_id) > 0 &&
        probe_due(n, cur, n->m.leader_id, ec_mono_ms()) &&
        (ec_evict_leader_quorum((size_t)n->m.epoch->nmembers,
                                reporters_of(n, cur, n->m.leader_id)) ||
         !confirm_wait(n, cur, n->m.leader_id, ec_mono_ms())))
        id = strdup(n->m.leader_id);
    if (id)
        ec__node_fetch_record(n, id);
    free(id);
}

/* Members of the current epoch that some member reported, not probed yet
 * for the newest report naming them (ec_suspect_probe_due): probe their
 * agents, evict the silent ones.  The leader does this for every member on
 * one report (with evidence from more than one side); any other node only
 * for the leader itself: it probes the leader once per report and adds its
 * own report when the leader is silent, and deposes it once a strict
 * majority of the other members reported it (so that one follower cut off
 * from the leader cannot depose a leader the rest still reach), so that a
 * dead leader is replaced as fast as a dead member (its record and key
 * deleted, the next campaign brings a new fencing token, and a leader that
 * was only slow can no longer publish). */
/* A reported node to probe (ec__node_handle_suspicions), with what acting
 * on the probe needs. */
typedef struct suspect {
    char *id, *host, *by;      /* by: the reporter named */
    int64_t lease, mod, rev;   /* its record's lease and mod revision; the newest report's */
    int64_t known;             /* the round trip its watchers reported (0: none) */
    bool confirm;              /* a follower's probe of the leader: adds our report */
    bool with_ours;            /* ... which then makes the majority: evict */
} suspect_t;

/* Reports of epochs before the current member set are of no use any more;
 * those of the restart epochs since (same members) still are: a failure is
 * reported in the epoch it happened in while the leader already publishes
 * the restart.  Coordinator thread. */
static void drop_stale_reports(ec_node_t *n, uint64_t cur)
{
    if (n->ev.members_fp_gen != n->m.epoch_gen) {
        n->ev.members_fp_now = members_fp(n->m.epoch);
        n->ev.members_fp_gen = n->m.epoch_gen;
    }
    uint64_t fp = n->ev.members_fp_now;
    if (!n->ev.members_epoch || fp != n->ev.members_fp || cur < n->ev.members_epoch) {
        n->ev.members_fp = fp;
        n->ev.members_epoch = cur;
    }
    size_t keep = 0;
    for (size_t i = 0; i < n->m.nsus; i++) {
        if (n->m.sus[i].epoch >= n->ev.members_epoch) {
            n->m.sus[keep++] = n->m.sus[i];
        } else {
            free(n->m.sus[i].reporter);
            free(n->m.sus[i].src);
            free(n->m.sus[i].ids);
        }
    }
    n->m.nsus = keep;
}

/* Whether `id`, reported in epoch cur, is ours to probe now; *quorum and
 * *with_ours: a follower's view of the reports against the leader.  Lock
 * held. */
static bool ours_to_probe(ec_node_t *n, uint64_t cur, const char *id, int64_t now, bool *quorum,
                          bool *with_ours)
{
    bool is_leader = n->m.leader_id && !strcmp(id, n->m.leader_id);
    size_t nmembers = (size_t)n->m.epoch->nmembers;
    *quorum = *with_ours = false;
    /* A follower acts only on the leader: with a strict majority of the
     * other members' reports it deposes it; before that, it probes the
     * leader itself and adds its own report when the leader is silent
     * (only two ring members watch the leader, so the majority forms only
     * thus; a follower cut off alone from the leader still cannot depose
     * it: the others' probes are answered and they add nothing). */
    if (!ec__elect_leads(n)) {
        if (!is_leader)
            return false;
        *quorum = ec_evict_leader_quorum(nmembers, reporters_of(n, cur, id));
        if (!*quorum && reported_by(n, cur, n->node_id, id))
            return false; /* ours is in: waiting for the others' */
        *with_ours = ec_evict_leader_quorum(nmembers, reporters_of(n, cur, id) + 1);
        if (!*quorum && confirm_wait(n, cur, id, now))
            return false; /* not our slot yet (a large job) */
    }
    /* The leader: evidence from more than one side (a leader cut off from
     * its peers sees them all silent). */
    if (ec__elect_leads(n) &&
        !ec_evict_member_evidence(nmembers, reporters_of(n, cur, id),
                                  reported_by(n, cur, n->node_id, id)))
        return false;
    return probe_due(n, cur, id, now);
}

/* The reported nodes to probe now, at most max, into s[] and their probe
 * targets t[]; how many.  Coordinator thread. */
static size_t gather_suspects(ec_node_t *n, uint64_t cur, int64_t now, suspect_t *s,
                              ec_probe_target_t *t, size_t max)
{
    size_t nt = 0;
    for (size_t i = 0; cur && i < n->m.nsus && nt < max; i++) {
        if (n->m.sus[i].epoch < n->ev.members_epoch || n->m.sus[i].epoch > cur ||
            ec_epoch_find_member(n->m.epoch, n->m.sus[i].reporter) < 0)
            continue; /* only members of the current epoch may accuse */
        char *list = strdup(n->m.sus[i].ids), *save = NULL;
        for (char *id = list ? strtok_r(list, ",", &save) : NULL; id && nt < max;
             id = strtok_r(NULL, ",", &save)) {
            id[ec_detect_entry_id_len(id)] = '\0'; /* "<id>@<rtt_us>" */
            bool found;
            size_t k = ec__node_mnode_find(n, id, &found);
            if (!strcmp(id, n->node_id) || ec_epoch_find_member(n->m.epoch, id) < 0 || !found ||
                !n->m.nodes[k].rec || !n->m.nodes[k].rec->probe_port)
                continue;
            bool dup = false; /* named by several reports: one probe */
            for (size_t j = 0; j < nt && !dup; j++)
                dup = !strcmp(s[j].id, id);
            bool quorum, with_ours;
            if (dup || !ours_to_probe(n, cur, id, now, &quorum, &with_ours))
                continue;
            s[nt] = (suspect_t){.id = strdup(id), .host = strdup(n->m.nodes[k].rec->host),
                                .by = strdup(n->m.sus[i].reporter), .lease = n->m.nodes[k].lease,
                                .mod = n->m.nodes[k].mod_rev, .rev = newest_report_of(n, cur, id),
                                .known = reported_rtt_of(n, cur, id),
                                .confirm = !ec__elect_leads(n) && !quorum,
                                .with_ours = with_ours};
            /* only an agent of this run under the record's lease proves
             * the node alive (a stranger on its port does not) */
            t[nt] = (ec_probe_target_t){.host = s[nt].host, .port = n->m.nodes[k].rec->probe_port,
                                        .expect_id = s[nt].id, .verify = ec__reg_verify(n),
                                        .expect_lease = s[nt].lease};
            nt++;
        }
        free(list);
    }
    return nt;
}

/* Act on the probe of suspect x (target t, f attempts a set, `to` ms at
 * most): a live one clears the suspicion; a follower's silent leader gets
 * our report; with evidence enough, the node is evicted. */
static void act_on_probe(ec_node_t *n, uint64_t cur, int64_t leader_rev, const suspect_t *x,
                         const ec_probe_target_t *t, int f, int to, int64_t now)
{
    note_probed(n, x->id, x->rev, !t->ok, now);
    if (t->ok) {
        ec__node_emit(n, "+suspicion of %s by %s rejected: its agent answered in %.1f ms", x->id,
                      x->by, (double)t->rtt_us / 1000.0);
    } else if (x->confirm) {
        /* our report counts towards the majority that deposes it */
        ec__node_emit(n, "+leader %s silent: reported by %s, no answer to our %d probes of "
                         "%s:%u within %d ms; adding our report", x->id, x->by,
                      f, t->host, t->port, to);
        ec_error_t err = {0};
        const char *one[1] = {x->id};
        if (ec_node_report_suspects(n, cur, one, 1, &err) < 0)
            ec_log(EC_LOG_WARN, "cannot report the silent leader %s: %s", x->id, err.msg);
    }
    if (t->ok || (x->confirm && !x->with_ours))
        return;
    /* evidence enough (with ours, just probed silent: no second probe) */
    remember_silent(n, x->id, x->by);
    ec_error_t err = {0};
    int rc = evict(n, x->id, x->lease, x->mod, !ec__elect_leads(n), leader_rev,
                   t->refused ? EC_DEPART_REFUSED : EC_DEPART_SILENT, &err);
    char rtt[120] = "";
    int64_t first = ec_detect_confirm_deadline_ms(0, n->o.probe_timeout_ms);
    if (x->known > 0)
        snprintf(rtt, sizeof(rtt), "; round trip %.2f ms measured by its watchers%s",
                 (double)x->known / 1000.0,
                 ec_detect_known_fast(x->known, first)
                     ? "" : ", too slow to take no handshake for its host gone");
    ec__node_emit(n, "-node %s evicted: suspected by %s, %s to %d probes of %s:%u within %d ms%s%s%s",
                  x->id, x->by, t->refused ? "refused" : "no answer",
                  ec_detect_confirm_set_attempts(f, 1, x->known, first), t->host, t->port, to, rtt,
                  rc < 0 ? "; not evicted: " : "", rc < 0 ? err.msg : "");
}

void ec__node_handle_suspicions(ec_node_t *n)
{
    enum { MAXS = 64 };
    ec_probe_target_t t[MAXS];
    suspect_t s[MAXS];
    int64_t known[MAXS];
    probe_held(n);
    drop_stale_reports(n, n->m.epoch ? n->m.epoch->number : 0);
    int64_t leader_rev = n->m.leader_create_rev; /* the leadership the reports were made under */
    fetch_accused_leader(n);
    uint64_t cur = n->m.epoch ? n->m.epoch->number : 0;
    size_t nmembers = n->m.epoch ? (size_t)n->m.epoch->nmembers : 0;
    size_t nt = gather_suspects(n, cur, ec_mono_ms(), s, t, MAXS);
    if (!nt)
        return;
    for (size_t i = 0; i < nt; i++)
        known[i] = s[i].known;
    /* a follower probes only the leader, and all followers do: fewer
     * attempts each in a large job, so that their burst stays within the
     * leader's accept queue */
    int f = ec__elect_leads(n) ? EC_DETECT_FANOUT : ec_detect_confirm_attempts(nmembers);
    int to = (int)ec__node_confirm_probe(n, t, nt, f, true, 0, known);
    int64_t now = ec_mono_ms();
    for (size_t i = 0; i < nt; i++) {
        act_on_probe(n, cur, leader_rev, &s[i], &t[i], f, to, now);
        free(s[i].id);
        free(s[i].host);
        free(s[i].by);
    }
}

/* ---- eviction's state, for the loop and the other concerns -------------- */

bool ec__evict_unseen(ec_node_t *n)
{
    int64_t rev = n->ev.evicted_rev;
    if (rev <= 0 || ec__feed_seen(n, rev) || ec_mono_ms() - n->ev.evicted_at_ms >= EC_EVICT_SEEN_WAIT_MS)
        return false;
    ec__node_wake_by(n, n->ev.evicted_at_ms + EC_EVICT_SEEN_WAIT_MS);
    return true;
}

void ec__evict_init(ec_node_t *n)
{
    pthread_mutex_init(&n->ev.rep_lock, NULL);
}

void ec__evict_fini(ec_node_t *n)
{
    for (size_t i = 0; i < n->ev.nprobed; i++)
        free(n->ev.probed[i].id);
    free(n->ev.probed);
    free(n->ev.my_rep);
    for (size_t i = 0; i < n->ev.nheld; i++) {
        free(n->ev.held[i].id);
        free(n->ev.held[i].by);
    }
    free(n->ev.held);
    pthread_mutex_destroy(&n->ev.rep_lock);
}

/* ---- eviction's public calls (node.h) ----------------------------------- */

/* Whether report entry a takes the place of entry b of the same id in a
 * report: unless b alone carries a round trip. */
static bool supersedes(const char *a, const char *b)
{
    return ec_detect_entry_rtt_us(a) > 0 || ec_detect_entry_rtt_us(b) == 0;
}

int ec_node_report_suspects(ec_node_t *n, uint64_t epoch, const char *const *ids, size_t nids,
                            ec_error_t *err)
{
    char key[EC_KEY_MAX];
    if (ec_key_epoch_suspect(&n->keys, epoch, n->node_id, key, sizeof(key)) < 0)
        return ec_errorf(err, EC_EINVAL, "cannot report suspects of epoch %llu",
                         (unsigned long long)epoch);
    /* One key per agent and epoch: its value is the union of everything
     * this agent reported in the epoch (the ring, a dead local process, a
     * follower confirming a silent leader), so a later report never takes
     * back an earlier one; written again even when unchanged, as a newer
     * sighting (the leader probes again on it).  Under the reports' own
     * lock, held through the write, so that two reporters' unions reach
     * etcd in the order they were made. */
    int64_t lease = ec_node_lease(n);
    pthread_mutex_lock(&n->ev.rep_lock);
    if (n->ev.my_rep_epoch != epoch) {
        free(n->ev.my_rep);
        n->ev.my_rep = NULL;
        n->ev.my_rep_epoch = epoch;
    }
    /* ids[i] may carry the reporter's round trip ("<id>@<rtt_us>",
     * detector.h): each id once, the newer entry unless only the older one
     * carries a round trip (supersedes) */
    ec_strbuf_t v = EC_STRBUF_INIT, shown = EC_STRBUF_INIT;
    for (const char *e = n->ev.my_rep; e && *e; e = strchr(e, ',') ? strchr(e, ',') + 1 : NULL) {
        size_t k = ec_detect_entry_id_len(e);
        bool replaced = false;
        for (size_t i = 0; i < nids && !replaced; i++)
            replaced = ec_detect_entry_id_len(ids[i]) == k && !strncmp(ids[i], e, k) &&
                       supersedes(ids[i], e);
        if (!replaced) {
            ec_strbuf_sep(&v, ",");
            ec_strbuf_putn(&v, e, strcspn(e, ","));
            ec_strbuf_sep(&shown, ",");
            ec_strbuf_putn(&shown, e, k);
        }
    }
    for (size_t i = 0; i < nids; i++) {
        size_t k = ec_detect_entry_id_len(ids[i]);
        bool dup = false;
        for (size_t j = 0; j < i && !dup; j++)
            dup = ec_detect_entry_id_len(ids[j]) == k && !strncmp(ids[j], ids[i], k);
        const char *old = entry_of(n->ev.my_rep, ids[i], k);
        if (dup || (old && !supersedes(ids[i], old)))
            continue; /* the older entry, kept above */
        ec_strbuf_sep(&v, ",");
        ec_strbuf_puts(&v, ids[i]);
        ec_strbuf_sep(&shown, ",");
        ec_strbuf_putn(&shown, ids[i], k);
    }
    char *val = ec_strbuf_take(&v), *who = ec_strbuf_take(&shown);
    if (!val || !who) {
        pthread_mutex_unlock(&n->ev.rep_lock);
        free(val);
        free(who);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    free(n->ev.my_rep);
    n->ev.my_rep = strdup(val);
    int rc = ec_etcd_put(n->c, key, val, strlen(val), lease, NULL, err);
    pthread_mutex_unlock(&n->ev.rep_lock);
    if (rc == 0)
        ec__node_emit(n, "+suspect %s in epoch %llu (reported by %s)", who, (unsigned long long)epoch,
             n->node_id);
    free(who);
    free(val);
    return rc;
}
