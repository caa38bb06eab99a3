/* (leader) Hangs and stragglers: the members' progress summaries (each
 * agent's, in its node record: coord/agent/progress.h) fed to the pure decision
 * (coord/core/hang_policy.h), and the decision carried out.
 *
 * A summary says how long a rank had been silent when it was written; the
 * leader notes when it first saw each one (its seq) and brings the silence
 * forward to now from there, so no agent has to write while it stays
 * silent, and wall clocks of different hosts are never compared.  A
 * suspect is acted on once per summary: its failure record (kind hung, the
 * evidence as its message) goes under failures/, and the verdict under
 * hang/<node_id> (on our lease).  The suspect's agent, which polls that key
 * while its own summary says a rank is silent, stops its processes and bumps
 * its incarnation: the planner re-forms the same members (reason restart),
 * every node restarts (restart mode) or rebuilds in place with the
 * suspect's fresh processes.  A suspect whose agent does not react within
 * EC_HANG_REACT_MS (its summary unchanged) is evicted: record deleted fenced
 * by our leadership, lease revoked, the job re-forms without it.  A
 * straggler is evicted at once (restarting its processes would not make its
 * node faster). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hang_policy.h"
#include "clock.h"
#include "keys.h"
#include "log.h"
#include "node_impl.h"
#include "planner.h"

struct ec_hang_seen {
    char *id;
    uint64_t seq;        /* the summary last seen */
    int64_t seen_ms;     /* monotonic: when it was first seen */
    uint64_t acted_seq;  /* the summary acted on (0: none) */
    int64_t acted_ms;    /* monotonic: when (a hang verdict; 0: none pending) */
    int64_t straggled_ms; /* monotonic: last eviction as a straggler (0: none) */
};

/* The policy runs at most this often: a stream of progress writes, a
 * pass of the loop each, costs it one run per interval (a run looks at
 * every member: milliseconds at 16,384), and it decides about silences of
 * seconds.  A run put off is made when the interval is over (n->hang.at, the loop's timer). */
#define EC_HANG_EVERY_MS 100
/* After the job was stalled together, how long its nodes have to say they
 * resumed before one still silent is blamed: an agent publishes a change of
 * its summary at most once a second. */
#define EC_HANG_SETTLE_MS 2500
/* How long a hung suspect's agent has to react before it is evicted. */
#define EC_HANG_REACT_MS 10000
/* A straggler is evicted at most this often (it comes back as slow). */
#define EC_STRAGGLER_HOLDOFF_MS (10 * 60 * 1000)

void ec__node_hang_clear(ec_node_t *n)
{
    for (size_t i = 0; i < n->hang.nseen; i++)
        free(n->hang.seen[i].id);
    free(n->hang.seen);
    n->hang.seen = NULL;
    n->hang.nseen = n->hang.nsorted = n->hang.cap = 0;
    free(n->hang.last);
    n->hang.last = NULL;
    free(n->hang.told_id);
    n->hang.told_id = NULL;
}

/* The index of id's entry, added if new; -1 when out of memory.  An index,
 * not a pointer: adding an entry may move the array.  The entries are kept
 * sorted by id (binary search: a linear one made every pass of a 16,384
 * member job's leader cost 134 M string compares); new ones are appended
 * and sorted in by seen_sort once the pass no longer holds indices.  Each
 * id is looked up at most once per pass (members are distinct), so a new
 * one is never searched for among those appended. */
static long seen_of(ec_node_t *n, const char *id)
{
    size_t lo = 0, hi = n->hang.nsorted;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(n->hang.seen[mid].id, id);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (n->hang.nseen == n->hang.cap) {
        size_t nc = n->hang.cap ? 2 * n->hang.cap : 64;
        struct ec_hang_seen *s = realloc(n->hang.seen, nc * sizeof(*s));
        if (!s)
            return -1;
        n->hang.seen = s;
        n->hang.cap = nc;
    }
    struct ec_hang_seen *s = &n->hang.seen[n->hang.nseen];
    *s = (struct ec_hang_seen){.id = strdup(id)};
    if (!s->id)
        return -1;
    return (long)n->hang.nseen++;
}

static int seen_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ec_hang_seen *)a)->id, ((const struct ec_hang_seen *)b)->id);
}

static void seen_sort(ec_node_t *n)
{
    if (n->hang.nsorted == n->hang.nseen)
        return;
    qsort(n->hang.seen, n->hang.nseen, sizeof(*n->hang.seen), seen_cmp);
    n->hang.nsorted = n->hang.nseen;
}

typedef struct snap {
    char *id;
    ec_node_progress_t p;    /* silent_ms brought forward to now */
    ec_node_progress_t fresh; /* as published, when new (seq 0: not new) */
    int64_t lease, mod;
    int m_id;
    long seen; /* index into n->hang.seen */
} snap_t;

static void record_hung(ec_node_t *n, const snap_t *s, uint64_t epoch, const char *why,
                        bool straggler)
{
    ec_failure_t f = {
        .node_id = s->id,
        .kind = EC_FAILURE_HUNG,
        .local_rank = s->p.silent_rank >= 0 ? s->p.silent_rank
                                           : (s->p.slowest_rank >= 0 ? s->p.slowest_rank : 0),
        .epoch = epoch,
        .time_ms = ec_wall_ms(),
        .run = n->run,
    };
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s: %s", straggler ? "straggler" : "hung", why);
    f.message = msg;
    int64_t rank = ec_rank(s->m_id, n->o.nproc, f.local_rank);
    f.global_rank = rank >= 0 ? (int)rank : 0;
    void *buf = NULL;
    size_t len = 0;
    ec_error_t err = {0};
    char key[EC_KEY_MAX];
    if (ec_failure_encode(&f, &buf, &len, &err) < 0 ||
        ec_key_failure(&n->keys, (uint64_t)f.time_ms, s->id, f.local_rank, key, sizeof(key)) < 0 ||
        ec_etcd_put(n->c, key, buf, len, 0, NULL, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot write the failure record of %s: %s", s->id, err.msg);
    free(buf);
}

/* The verdict for the suspect's agent (a HangVerdict record). */
static void tell_hung(ec_node_t *n, const snap_t *s, uint64_t epoch, const char *why)
{
    char key[EC_KEY_MAX];
    char w[EC_HANG_WHY_MAX + 1];
    snprintf(w, sizeof(w), "%s", why ? why : "");
    ec_hang_verdict_t h = {.epoch = epoch,
                           .local_rank = s->p.silent_rank >= 0 ? s->p.silent_rank : 0,
                           .why = w};
    void *val = NULL;
    size_t len = 0;
    ec_error_t err = {0};
    if (ec_key_hang(&n->keys, s->id, key, sizeof(key)) < 0 ||
        ec_hang_verdict_encode(&h, &val, &len, &err) < 0 ||
        ec_etcd_put(n->c, key, val, len, ec_node_lease(n), NULL, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot tell %s its ranks hung: %s (it is evicted in %d ms unless "
                            "it restarts them)", s->id, err.msg, EC_HANG_REACT_MS);
    free(val);
}

int ec_node_take_hang(ec_node_t *n, uint64_t epoch, int *local_rank, char *why, size_t len,
                      ec_error_t *err)
{
    char key[EC_KEY_MAX];
    if (ec_key_hang(&n->keys, n->node_id, key, sizeof(key)) < 0)
        return ec_errorf(err, EC_EINVAL, "bad node id");
    ec_kv_t kv;
    bool found = false;
    int rc = ec_etcd_get(n->c, key, &kv, &found, NULL, err);
    if (rc < 0 || !found)
        return rc < 0 ? rc : 0;
    ec_hang_verdict_t *h = NULL;
    ec_error_t derr = {0};
    int drc = ec_hang_verdict_decode(kv.value, kv.value_len, key, &h, &derr);
    ec_kv_free(&kv);
    if (drc < 0) {
        ec_log(EC_LOG_ERROR, "ignoring %s: %s (deleted: the leader writes it again while the "
                             "ranks stay silent)", key, derr.msg);
        ec_etcd_delete(n->c, key, false, NULL, NULL);
        return 0;
    }
    if (h->epoch != epoch) {
        ec_hang_verdict_free(h);
        return 0; /* an older epoch's: the restart it asked for happened */
    }
    ec_etcd_delete(n->c, key, false, NULL, NULL);
    if (local_rank)
        *local_rank = h->local_rank;
    if (why && len)
        snprintf(why, len, "%s", h->why ? h->why : "");
    ec_hang_verdict_free(h);
    return 1;
}

/* Look again at `at` at the latest (the hang policy's own timer). */
static void hang_at(ec_node_t *n, int64_t at)
{
    if (n->hang.at < 0 || at < n->hang.at)
        n->hang.at = at;
}

/* Whether the policy runs now (at most every EC_HANG_EVERY_MS an epoch;
 * else its timer is set for then); *epoch: the current one.  A new epoch
 * restarts or rebuilds every rank: silence published before it says
 * nothing about the ranks after it.  Coordinator thread. */
static bool hang_due(ec_node_t *n, int64_t now, uint64_t *epoch)
{
    if (!n->m.epoch || !n->m.epoch->nmembers)
        return false;
    *epoch = n->m.epoch->number;
    if (*epoch == n->hang.epoch && n->hang.ran_ms > 0 && now - n->hang.ran_ms < EC_HANG_EVERY_MS) {
        hang_at(n, n->hang.ran_ms + EC_HANG_EVERY_MS);
        return false;
    }
    n->hang.ran_ms = now;
    n->hang.at = -1;
    if (*epoch != n->hang.epoch) {
        n->hang.epoch = *epoch;
        n->hang.epoch_ms = now;
    }
    return true;
}

/* Each member's progress as of now into s[] and hm[] (at most the epoch's
 * members), a summary newer than last seen in s[].fresh; how many.  A
 * summary's silence grows by the time since it was seen, bounded by the
 * epoch's age.  Coordinator thread. */
static size_t snapshot(ec_node_t *n, int64_t now, snap_t *s, ec_hang_member_t *hm)
{
    size_t k = 0, nm = (size_t)n->m.epoch->nmembers;
    for (size_t i = 0; i < nm; i++) {
        const char *id = n->m.epoch->members[i].node_id;
        if (!id)
            continue; /* not held by a follower's view */
        bool found = false;
        size_t j = ec__node_mnode_find(n, id, &found);
        if (!found || !n->m.nodes[j].rec)
            continue;
        long si = seen_of(n, id);
        if (si < 0 || !(s[k].id = strdup(id)))
            continue;
        struct ec_hang_seen *seen = &n->hang.seen[si];
        const ec_node_progress_t *p = &n->m.nodes[j].rec->progress;
        if (p->seq != seen->seq) {
            seen->seq = p->seq;
            seen->seen_ms = now;
            s[k].fresh = *p;
        }
        s[k].p = *p;
        if (p->seq && p->silent_ms > 0) {
            int64_t q = p->silent_ms + (now - seen->seen_ms);
            if (q > now - n->hang.epoch_ms)
                q = now - n->hang.epoch_ms;
            s[k].p.silent_ms = q > 0 ? q : 1;
        }
        s[k].lease = n->m.nodes[j].lease;
        s[k].mod = n->m.nodes[j].mod_rev;
        s[k].m_id = (int)i;
        s[k].seen = si;
        hm[k] = (ec_hang_member_t){.node_id = s[k].id, .p = s[k].p};
        k++;
    }
    return k;
}

/* Whether to wait before acting on d: the job resumes from a stall every
 * node was in, and the others' summaries saying so may be a second behind
 * (look again then). */
static bool settling(ec_node_t *n, const ec_hang_decision_t *d, int64_t now)
{
    bool after_stall = d->action == EC_HANG_SUSPECT && !d->straggler && n->hang.last;
    if (!after_stall)
        n->hang.settle_ms = 0;
    else if (!n->hang.settle_ms)
        n->hang.settle_ms = now;
    if (!after_stall || now - n->hang.settle_ms >= EC_HANG_SETTLE_MS)
        return false;
    hang_at(n, n->hang.settle_ms + EC_HANG_SETTLE_MS);
    return true;
}

/* A stall of the whole job, said once; and its end. */
static void say_stall(ec_node_t *n, const ec_hang_decision_t *d, uint64_t epoch)
{
    if (d->action == EC_HANG_STALLED) {
        if (!n->hang.last) {
            ec__node_emit(n, "+hang-stalled epoch %" PRIu64 ": %s", epoch, d->why);
            n->hang.last = strdup("stalled");
        }
    } else if (d->action != EC_HANG_SUSPECT && n->hang.last) {
        free(n->hang.last);
        n->hang.last = NULL;
        ec__node_emit(n, "+hang-cleared epoch %" PRIu64 ": the job progresses again", epoch);
    }
}

/* Act on suspect x of decision d: name it and have its agent restart its
 * processes (a straggler: evict it), evict it when its agent did not, or
 * say the silence moved to another node and do nothing. */
static void act_on_suspect(ec_node_t *n, const ec_hang_config_t *cfg, const ec_hang_decision_t *d,
                           const snap_t *x, uint64_t epoch, int64_t now)
{
    struct ec_hang_seen *xs = &n->hang.seen[x->seen];
    if (d->straggler && xs->straggled_ms && now - xs->straggled_ms < EC_STRAGGLER_HOLDOFF_MS)
        return;
    if (xs->acted_seq == xs->seq && !d->straggler) {
        /* told, and its summary has not changed since */
        if (!xs->acted_ms || now - xs->acted_ms < EC_HANG_REACT_MS)
            return;
        xs->acted_ms = 0;
        ec_error_t e = {0};
        int rc = ec__node_evict(n, x->id, x->lease, x->mod, EC_DEPART_HUNG, &e);
        ec__node_emit(n, "-node %s evicted: hung, and its agent did not restart its "
                         "processes within %d ms%s%s", x->id, EC_HANG_REACT_MS,
                      rc < 0 ? "; not evicted: " : "", rc < 0 ? e.msg : "");
        return;
    }
    int64_t to = ec_hang_timeout_for(cfg, &x->p);
    if (!d->straggler && n->hang.told_id && strcmp(n->hang.told_id, x->id) &&
        now - n->hang.told_ms < 2 * to + EC_HANG_REACT_MS) {
        /* The node restarted for a hang a moment ago went on, and now
         * another stops where it did: a phase every node runs (an
         * evaluation, a checkpoint not declared), not a hang of either.
         * Said once; acted on no more until the job progresses again. */
        if (!n->hang.last || strcmp(n->hang.last, "moved")) {
            ec__node_emit(n, "+hang-stalled epoch %" PRIu64 ": the silence moved from %s "
                          "(its processes restarted %.1f s ago) to %s: not one node's "
                          "hang, nothing is restarted (declare such a phase with "
                          "ecw_progress_pause/resume or ecoord.progress.paused()): %s",
                          epoch, n->hang.told_id, (double)(now - n->hang.told_ms) / 1000.0,
                          x->id, d->why);
            free(n->hang.last);
            n->hang.last = strdup("moved");
        }
        return;
    }
    xs->acted_seq = xs->seq;
    if (!d->straggler) {
        free(n->hang.told_id);
        n->hang.told_id = strdup(x->id);
        n->hang.told_ms = now;
    }
    record_hung(n, x, epoch, d->why, d->straggler); /* the evidence, then the event */
    ec__node_emit(n, "%s %s epoch %" PRIu64 ": %s", d->straggler ? "+straggler" : "+hang-suspect",
                  x->id, epoch, d->why);
    if (d->straggler) {
        xs->straggled_ms = now;
        ec_error_t e = {0};
        int rc = ec__node_evict(n, x->id, x->lease, x->mod, EC_DEPART_HUNG, &e);
        ec__node_emit(n, "-node %s evicted: straggler%s%s", x->id,
                      rc < 0 ? "; not evicted: " : "", rc < 0 ? e.msg : "");
        return;
    }
    xs->acted_ms = now;
    tell_hung(n, x, epoch, d->why);
}

void ec__node_check_hangs(ec_node_t *n)
{
    ec_hang_config_t cfg = {.hang_timeout_ms = n->o.hang_timeout_ms,
                            .straggler_factor = n->o.straggler_factor};
    bool hangs = cfg.hang_timeout_ms != 0, straggle = cfg.straggler_factor > 1.0;
    if (!hangs && !straggle && !n->o.on_progress)
        return;
    int64_t now = ec_mono_ms();
    uint64_t epoch = 0;
    if (!hang_due(n, now, &epoch)) {
        return;
    }
    size_t nm = (size_t)n->m.epoch->nmembers, k = 0;
    snap_t *s = calloc(nm, sizeof(*s));
    ec_hang_member_t *hm = calloc(nm, sizeof(*hm));
    if (s && hm)
        k = snapshot(n, now, s, hm);
    if (!s || !hm)
        goto out;
    for (size_t i = 0; i < k && n->o.on_progress; i++)
        if (s[i].fresh.seq)
            n->o.on_progress(s[i].id, &s[i].fresh, n->o.arg);
    if (!hangs && !straggle)
        goto out;
    ec_hang_decision_t *d = NULL;
    ec_error_t err = {0};
    if (ec_hang_decide(&cfg, hm, k, &d, &err) < 0) {
        ec_log(EC_LOG_WARN, "hang detection: %s", err.msg);
        goto out;
    }
    if (d->action == EC_HANG_WAIT_UNTIL)
        hang_at(n, now + d->wait_ms); /* the planner has nothing to do then */
    if (!settling(n, d, now)) {
        say_stall(n, d, epoch);
        for (size_t i = 0; d->action == EC_HANG_SUSPECT && i < d->nsuspects; i++)
            act_on_suspect(n, &cfg, d, &s[d->suspects[i]], epoch, now);
    }
    ec_hang_decision_free(d);
out:
    seen_sort(n); /* no index into it is held any more */
    for (size_t i = 0; s && i < k; i++)
        free(s[i].id);
    free(s);
    free(hm);
}

/* ---- the hang policy's timer, for the loop ------------------------------ */

void ec__hang_init(ec_node_t *n)
{
    n->hang.at = -1;
}

int64_t ec__hang_at(const ec_node_t *n)
{
    return n->hang.at;
}

void ec__hang_take_due(ec_node_t *n, int64_t now)
{
    if (n->hang.at >= 0 && now >= n->hang.at)
        n->hang.at = -1; /* the pass runs the policy, which sets it again */
}
