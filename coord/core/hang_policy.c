/* Hangs and stragglers: the leader's pure decision (see hang_policy.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hang_policy.h"

int64_t ec_hang_timeout_for(const ec_hang_config_t *cfg, const ec_node_progress_t *p)
{
    if (cfg->hang_timeout_ms > 0)
        return cfg->hang_timeout_ms;
    if (cfg->hang_timeout_ms < 0 && p->reporting)
        return EC_HANG_AUTO_MS;
    return 0;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int64_t ec_hang_median_us(const int64_t *p50, size_t n)
{
    int64_t *v = malloc((n ? n : 1) * sizeof(*v));
    if (!v)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (p50[i] > 0)
            v[k++] = p50[i];
    int64_t med = 0;
    if (k) {
        qsort(v, k, sizeof(*v), cmp64);
        med = v[(k - 1) / 2];
    }
    free(v);
    return med;
}

const char *ec_hang_action_name(ec_hang_action_t a)
{
    switch (a) {
    case EC_HANG_NONE: return "none";
    case EC_HANG_WAIT_UNTIL: return "wait-until";
    case EC_HANG_SUSPECT: return "suspect";
    case EC_HANG_STALLED: return "stalled";
    }
    return "unknown";
}

const char *ec_hang_rule_name(ec_hang_rule_t r)
{
    switch (r) {
#define EC_HANG_RULE_CASE(code, name, action)                                                   \
    case EC_HANG_BY_##code: return name;
        EC_HANG_RULE_MAP(EC_HANG_RULE_CASE)
#undef EC_HANG_RULE_CASE
    }
    return "unknown";
}

void ec_hang_decision_free(ec_hang_decision_t *d)
{
    if (!d)
        return;
    free(d->suspects);
    free(d->why);
    free(d);
}

/* Append to a growing line (best effort: an allocation failure truncates). */
typedef struct {
    char *s;
    size_t len, cap;
} sbuf_t;

__attribute__((format(printf, 2, 3))) static void add(sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(tmp))
        n = sizeof(tmp) - 1;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 256) + (size_t)n;
        char *s = realloc(b->s, cap);
        if (!s)
            return;
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, tmp, (size_t)n + 1);
    b->len += (size_t)n;
}

/* "local rank 0 silent 3.1 s at step 41, stopped (SIGSTOP)" */
static void describe(sbuf_t *b, const ec_hang_member_t *m)
{
    const ec_node_progress_t *p = &m->p;
    add(b, "%s: ", m->node_id);
    if (p->silent_rank >= 0)
        add(b, "local rank %d ", p->silent_rank);
    add(b, "silent %.1f s", (double)p->silent_ms / 1000.0);
    if (p->reporting)
        add(b, " at step %llu", (unsigned long long)p->step);
    else
        add(b, " (its log did not grow)");
    if (p->stopped)
        add(b, ", its process stopped (SIGSTOP or a debugger)");
    else if (p->waiting)
        add(b, ", inside a collective (waiting on a peer)");
    else if (p->reporting)
        add(b, ", not inside a collective");
}

/* One decision being made: its input, who is stalled, who may be blamed,
 * and the evidence line. */
typedef struct {
    const ec_hang_config_t *cfg;
    const ec_hang_member_t *m;
    size_t n;
    size_t *stalled, ns; /* at their timeout */
    size_t *cand, nc;    /* of those, stopped or silent outside a collective */
    int64_t wait;        /* until the next member reaches its timeout; -1: none */
    ec_hang_decision_t *d;
    sbuf_t b;
} hang_t;

static void decided(hang_t *h, ec_hang_action_t action, ec_hang_rule_t rule)
{
    h->d->action = action;
    h->d->rule = rule;
}

static bool silent_outside(const ec_node_progress_t *p)
{
    return p->seq && p->silent_ms > 0 && !p->waiting;
}

/* The members idx[0..k) described, "; " between them. */
static void describe_all(hang_t *h, const size_t *idx, size_t k)
{
    for (size_t j = 0; j < k; j++) {
        add(&h->b, j ? "; " : "");
        describe(&h->b, &h->m[idx[j]]);
    }
}

/* Rule 1: a declared pause excuses everyone. */
static bool anyone_paused(const hang_t *h)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->m[i].p.seq && h->m[i].p.paused)
            return true;
    return false;
}

/* Rule 2: who is stalled; when the next one would be. */
static void find_stalled(hang_t *h)
{
    for (size_t i = 0; i < h->n; i++) {
        const ec_node_progress_t *p = &h->m[i].p;
        int64_t to = ec_hang_timeout_for(h->cfg, p);
        if (!p->seq || to <= 0 || p->silent_ms <= 0)
            continue;
        if (p->silent_ms >= to)
            h->stalled[h->ns++] = i;
        else if (h->wait < 0 || to - p->silent_ms < h->wait)
            h->wait = to - p->silent_ms;
    }
}

/* Rule 3: the candidates, stopped or silent outside a collective; returns
 * how many stalled members are stopped. */
static size_t find_candidates(hang_t *h)
{
    size_t nstop = 0;
    for (size_t k = 0; k < h->ns; k++) {
        const ec_node_progress_t *p = &h->m[h->stalled[k]].p;
        if (p->stopped || !p->waiting)
            h->cand[h->nc++] = h->stalled[k];
        nstop += p->stopped != 0;
    }
    return nstop;
}

/* Rule 3, no candidate: a member not yet at its timeout, silent outside a
 * collective (or stopped), is likely whom the stalled ones wait for. */
static bool culprit_coming(const hang_t *h)
{
    if (h->wait <= 0)
        return false;
    for (size_t i = 0; i < h->n; i++) {
        const ec_node_progress_t *p = &h->m[i].p;
        int64_t to = ec_hang_timeout_for(h->cfg, p);
        if (p->seq && !p->paused && p->silent_ms > 0 && p->silent_ms < to &&
            (p->stopped || !p->waiting))
            return true;
    }
    return false;
}

static void stalled_in_collectives(hang_t *h)
{
    decided(h, EC_HANG_STALLED, EC_HANG_BY_WEDGED_COLLECTIVE);
    add(&h->b, "%zu of %zu nodes made no progress for their timeout, every silent rank "
               "inside a collective (a wedged collective: no single node to blame): ",
        h->ns, h->n);
    describe_all(h, h->stalled, h->ns);
}

/* The candidate silent longest (the first of equals), and whether by at
 * least EC_HANG_MARGIN_MS more than every other member silent outside a
 * collective. */
static bool clearly_longest(const hang_t *h, size_t *best)
{
    const ec_hang_member_t *m = h->m;
    size_t b = h->cand[0];
    for (size_t k = 1; k < h->nc; k++)
        if (m[h->cand[k]].p.silent_ms > m[b].p.silent_ms)
            b = h->cand[k];
    int64_t second = -1;
    for (size_t i = 0; i < h->n; i++)
        if (i != b && silent_outside(&m[i].p) && m[i].p.silent_ms > second)
            second = m[i].p.silent_ms;
    *best = b;
    return m[b].p.silent_ms - second >= EC_HANG_MARGIN_MS;
}

/* Rule 4, nobody silent clearly longest: STALLED. */
static void stalled_together(hang_t *h, size_t nout)
{
    if (h->nc == h->n) {
        decided(h, EC_HANG_STALLED, EC_HANG_BY_ALL_SILENT);
        add(&h->b, "all %zu nodes made no progress for their timeout, none inside a "
                   "collective, none silent clearly longer than the others: ", h->n);
        describe_all(h, h->cand, h->nc);
        return;
    }
    decided(h, EC_HANG_STALLED, EC_HANG_BY_SHARED_PHASE);
    add(&h->b, "%zu of %zu nodes silent outside a collective together, none silent "
               "clearly longer than the others (a phase every rank runs: wrap it in a "
               "declared pause): ", nout, h->n);
    size_t shown = 0;
    for (size_t i = 0; i < h->n && shown < 8; i++)
        if (silent_outside(&h->m[i].p)) {
            add(&h->b, shown++ ? "; " : "");
            describe(&h->b, &h->m[i]);
        }
}

/* Rule 4: narrow the candidates to the suspects; false (STALLED decided)
 * when there is no one to blame. */
static bool blame(hang_t *h, size_t nstop)
{
    if (nstop) {
        size_t j = 0;
        for (size_t k = 0; k < h->nc; k++)
            if (h->m[h->cand[k]].p.stopped)
                h->cand[j++] = h->cand[k];
        h->nc = j;
        decided(h, EC_HANG_SUSPECT, EC_HANG_BY_STOPPED);
        return true;
    }
    size_t nout = 0; /* members silent outside a collective, at their timeout or not */
    for (size_t i = 0; i < h->n; i++)
        nout += silent_outside(&h->m[i].p);
    /* Someone not at its timeout yet silent outside a collective too (an
     * evaluation pass every rank runs, say), or every node stalled: the
     * first to reach the timeout is no more to blame than the others,
     * unless it has been silent clearly longer than every other. */
    if (nout > h->nc || (h->nc == h->n && h->n > 1)) {
        size_t best;
        if (!clearly_longest(h, &best)) {
            stalled_together(h, nout);
            return false;
        }
        h->cand[0] = best;
        h->nc = 1;
        decided(h, EC_HANG_SUSPECT, EC_HANG_BY_LONGEST_SILENCE);
        return true;
    }
    decided(h, EC_HANG_SUSPECT, EC_HANG_BY_SILENT_ALONE);
    return true;
}

/* The candidates become the suspects (the decision owns them). */
static void take_suspects(hang_t *h)
{
    h->d->suspects = h->cand;
    h->d->nsuspects = h->nc;
    h->cand = NULL;
}

/* Rule 4's evidence: the suspects, then what the others were doing. */
static void suspects_evidence(hang_t *h)
{
    const ec_hang_decision_t *d = h->d;
    describe_all(h, d->suspects, d->nsuspects);
    size_t shown = 0;
    for (size_t i = 0; i < h->n && shown < 8; i++) {
        bool sus = false;
        for (size_t k = 0; k < d->nsuspects; k++)
            sus |= d->suspects[k] == i;
        if (sus)
            continue;
        add(&h->b, shown++ ? ", " : "; meanwhile ");
        const ec_hang_member_t *o = &h->m[i];
        if (o->p.silent_ms > 0 && o->p.waiting)
            add(&h->b, "%s waited %.1f s inside a collective", o->node_id,
                (double)o->p.silent_ms / 1000.0);
        else if (o->p.silent_ms > 0)
            add(&h->b, "%s silent %.1f s", o->node_id, (double)o->p.silent_ms / 1000.0);
        else
            add(&h->b, "%s progressing", o->node_id);
    }
}

/* Rules 2 to 4, with someone stalled. */
static void judge_stalled(hang_t *h)
{
    size_t nstop = find_candidates(h);
    if (h->nc == 0) {
        if (culprit_coming(h)) {
            decided(h, EC_HANG_WAIT_UNTIL, EC_HANG_BY_AWAITING_CULPRIT);
            h->d->wait_ms = h->wait;
        } else {
            stalled_in_collectives(h);
        }
        return;
    }
    if (!blame(h, nstop))
        return;
    take_suspects(h);
    suspects_evidence(h);
}

/* Rule 5: the members whose step time is more than the factor times the
 * median; false if none (or too few step times to tell). */
static bool find_stragglers(hang_t *h, int64_t *p50)
{
    size_t known = 0;
    for (size_t i = 0; i < h->n; i++) {
        p50[i] = h->m[i].p.seq ? h->m[i].p.step_p50_us : 0;
        known += p50[i] > 0;
    }
    int64_t med = ec_hang_median_us(p50, h->n);
    if (known < 3 || med <= 0)
        return false;
    for (size_t i = 0; i < h->n; i++)
        if (p50[i] > 0 && (double)p50[i] > h->cfg->straggler_factor * (double)med)
            h->cand[h->nc++] = i;
    if (!h->nc)
        return false;
    decided(h, EC_HANG_SUSPECT, EC_HANG_BY_STRAGGLER);
    h->d->straggler = true;
    take_suspects(h);
    for (size_t k = 0; k < h->d->nsuspects; k++) {
        const ec_hang_member_t *s = &h->m[h->d->suspects[k]];
        add(&h->b, "%s%s: step time %.1f ms, %.2fx the median %.1f ms of %zu nodes "
                   "(--straggler_factor=%.3g)",
            k ? "; " : "", s->node_id, (double)s->p.step_p50_us / 1000.0,
            (double)s->p.step_p50_us / (double)med, (double)med / 1000.0, known,
            h->cfg->straggler_factor);
        if (s->p.slowest_rank >= 0)
            add(&h->b, ", slowest local rank %d at %.1f ms", s->p.slowest_rank,
                (double)s->p.slowest_us / 1000.0);
    }
    return true;
}

int ec_hang_decide(const ec_hang_config_t *cfg, const ec_hang_member_t *m, size_t n,
                   ec_hang_decision_t **out, ec_error_t *err)
{
    if (!out || !cfg || (n && !m))
        return ec_errorf(err, EC_EINVAL, "ec_hang_decide: NULL argument");
    *out = NULL;
    hang_t h = {.cfg = cfg, .m = m, .n = n, .wait = -1};
    h.d = calloc(1, sizeof(*h.d));
    h.stalled = calloc(n ? n : 1, sizeof(size_t));
    h.cand = calloc(n ? n : 1, sizeof(size_t));
    int64_t *p50 = calloc(n ? n : 1, sizeof(int64_t));
    if (!h.d || !h.stalled || !h.cand || !p50)
        goto nomem;
    decided(&h, EC_HANG_NONE, EC_HANG_BY_NOTHING);
    if (anyone_paused(&h)) {
        decided(&h, EC_HANG_NONE, EC_HANG_BY_PAUSED);
    } else {
        find_stalled(&h);
        if (h.ns)
            judge_stalled(&h);
        else if (!(cfg->straggler_factor > 1.0 && find_stragglers(&h, p50)) && h.wait > 0) {
            decided(&h, EC_HANG_WAIT_UNTIL, EC_HANG_BY_NEXT_TIMEOUT);
            h.d->wait_ms = h.wait;
        }
    }
    h.d->why = h.b.s ? h.b.s : strdup("");
    h.b.s = NULL;
    if (!h.d->why)
        goto nomem;
    free(h.stalled);
    free(h.cand);
    free(p50);
    *out = h.d;
    return 0;
nomem:
    ec_hang_decision_free(h.d);
    free(h.b.s);
    free(h.stalled);
    free(h.cand);
    free(p50);
    return ec_errorf(err, EC_ENOMEM, "out of memory");
}
