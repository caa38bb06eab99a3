/* Hangs and stragglers: the leader's pure decision (see hang_policy.h). */
#define _GNU_SOURCE
#include <stdarg.h>
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

int ec_hang_decide(const ec_hang_config_t *cfg, const ec_hang_member_t *m, size_t n,
                   ec_hang_decision_t **out, ec_error_t *err)
{
    if (!out || !cfg || (n && !m))
        return ec_errorf(err, EC_EINVAL, "ec_hang_decide: NULL argument");
    *out = NULL;
    ec_hang_decision_t *d = calloc(1, sizeof(*d));
    size_t *stalled = calloc(n ? n : 1, sizeof(size_t));
    size_t *cand = calloc(n ? n : 1, sizeof(size_t));
    int64_t *p50 = calloc(n ? n : 1, sizeof(int64_t));
    if (!d || !stalled || !cand || !p50) {
        free(d);
        free(stalled);
        free(cand);
        free(p50);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    d->action = EC_HANG_NONE;
    sbuf_t b = {0};
    size_t ns = 0, nc = 0, nstop = 0;
    int64_t wait = -1;
    /* 1. a declared pause excuses everyone */
    for (size_t i = 0; i < n; i++)
        if (m[i].p.seq && m[i].p.paused)
            goto done;
    /* 2. who is stalled; when the next one would be */
    for (size_t i = 0; i < n; i++) {
        const ec_node_progress_t *p = &m[i].p;
        int64_t to = ec_hang_timeout_for(cfg, p);
        if (!p->seq || to <= 0 || p->silent_ms <= 0)
            continue;
        if (p->silent_ms >= to) {
            stalled[ns++] = i;
        } else if (wait < 0 || to - p->silent_ms < wait) {
            wait = to - p->silent_ms;
        }
    }
    if (ns) {
        /* 3. candidates: stopped, or silent outside a collective */
        for (size_t k = 0; k < ns; k++) {
            const ec_node_progress_t *p = &m[stalled[k]].p;
            if (p->stopped || !p->waiting)
                cand[nc++] = stalled[k];
            nstop += p->stopped != 0;
        }
        if (nc == 0 && wait > 0) {
            /* a member not yet at its timeout, silent outside a collective
             * (or stopped), is likely whom they wait for: wait for it */
            for (size_t i = 0; i < n && d->action == EC_HANG_NONE; i++) {
                const ec_node_progress_t *p = &m[i].p;
                int64_t to = ec_hang_timeout_for(cfg, p);
                if (p->seq && !p->paused && p->silent_ms > 0 && p->silent_ms < to &&
                    (p->stopped || !p->waiting)) {
                    d->action = EC_HANG_WAIT_UNTIL;
                    d->wait_ms = wait;
                }
            }
            if (d->action == EC_HANG_WAIT_UNTIL)
                goto done;
        }
        if (nc == 0) {
            d->action = EC_HANG_STALLED;
            add(&b, "%zu of %zu nodes made no progress for their timeout, every silent rank "
                    "inside a collective (a wedged collective: no single node to blame): ", ns, n);
            for (size_t k = 0; k < ns; k++) {
                add(&b, k ? "; " : "");
                describe(&b, &m[stalled[k]]);
            }
            goto done;
        }
        /* 4. who is to blame */
        size_t nout = 0; /* members silent outside a collective, at their timeout or not */
        for (size_t i = 0; i < n; i++)
            nout += m[i].p.seq && m[i].p.silent_ms > 0 && !m[i].p.waiting;
        if (nstop) {
            size_t j = 0;
            for (size_t k = 0; k < nc; k++)
                if (m[cand[k]].p.stopped)
                    cand[j++] = cand[k];
            nc = j;
        } else if (nout > nc) {
            /* Someone not at its timeout yet is silent outside a collective
             * too (an evaluation pass every rank runs, say): the first to
             * reach the timeout is no more to blame than it, unless it has
             * been silent clearly longer than every other such member. */
            size_t best = cand[0];
            for (size_t k = 1; k < nc; k++)
                if (m[cand[k]].p.silent_ms > m[best].p.silent_ms)
                    best = cand[k];
            int64_t second = -1;
            for (size_t i = 0; i < n; i++)
                if (i != best && m[i].p.seq && m[i].p.silent_ms > 0 && !m[i].p.waiting &&
                    m[i].p.silent_ms > second)
                    second = m[i].p.silent_ms;
            if (m[best].p.silent_ms - second < EC_HANG_MARGIN_MS) {
                d->action = EC_HANG_STALLED;
                add(&b, "%zu of %zu nodes silent outside a collective together, none silent "
                        "clearly longer than the others (a phase every rank runs: wrap it in a "
                        "declared pause): ", nout, n);
                size_t shown = 0;
                for (size_t i = 0; i < n && shown < 8; i++)
                    if (m[i].p.seq && m[i].p.silent_ms > 0 && !m[i].p.waiting) {
                        add(&b, shown++ ? "; " : "");
                        describe(&b, &m[i]);
                    }
                goto done;
            }
            cand[0] = best;
            nc = 1;
        } else if (nc == n && n > 1) {
            size_t best = cand[0];
            int64_t second = -1;
            for (size_t k = 1; k < nc; k++) {
                size_t i = cand[k];
                if (m[i].p.silent_ms > m[best].p.silent_ms) {
                    if (m[best].p.silent_ms > second)
                        second = m[best].p.silent_ms;
                    best = i;
                } else if (m[i].p.silent_ms > second) {
                    second = m[i].p.silent_ms;
                }
            }
            if (m[best].p.silent_ms - second < EC_HANG_MARGIN_MS) {
                d->action = EC_HANG_STALLED;
                add(&b, "all %zu nodes made no progress for their timeout, none inside a "
                        "collective, none silent clearly longer than the others: ", n);
                for (size_t k = 0; k < nc; k++) {
                    add(&b, k ? "; " : "");
                    describe(&b, &m[cand[k]]);
                }
                goto done;
            }
            cand[0] = best;
            nc = 1;
        }
        d->action = EC_HANG_SUSPECT;
        d->suspects = cand;
        d->nsuspects = nc;
        cand = NULL;
        for (size_t k = 0; k < d->nsuspects; k++) {
            add(&b, k ? "; " : "");
            describe(&b, &m[d->suspects[k]]);
        }
        /* what the others were doing: the rest of the evidence */
        size_t shown = 0;
        for (size_t i = 0; i < n && shown < 8; i++) {
            bool sus = false;
            for (size_t k = 0; k < d->nsuspects; k++)
                sus |= d->suspects[k] == i;
            if (sus)
                continue;
            add(&b, shown++ ? ", " : "; meanwhile ");
            const ec_node_progress_t *p = &m[i].p;
            if (p->silent_ms > 0 && p->waiting)
                add(&b, "%s waited %.1f s inside a collective", m[i].node_id,
                    (double)p->silent_ms / 1000.0);
            else if (p->silent_ms > 0)
                add(&b, "%s silent %.1f s", m[i].node_id, (double)p->silent_ms / 1000.0);
            else
                add(&b, "%s progressing", m[i].node_id);
        }
        goto done;
    }
    /* 5. stragglers */
    if (cfg->straggler_factor > 1.0) {
        size_t known = 0;
        for (size_t i = 0; i < n; i++) {
            p50[i] = m[i].p.seq ? m[i].p.step_p50_us : 0;
            known += p50[i] > 0;
        }
        int64_t med = ec_hang_median_us(p50, n);
        if (known >= 3 && med > 0) {
            for (size_t i = 0; i < n; i++)
                if (p50[i] > 0 && (double)p50[i] > cfg->straggler_factor * (double)med)
                    cand[nc++] = i;
            if (nc) {
                d->action = EC_HANG_SUSPECT;
                d->straggler = true;
                d->suspects = cand;
                d->nsuspects = nc;
                cand = NULL;
                for (size_t k = 0; k < d->nsuspects; k++) {
                    const ec_hang_member_t *s = &m[d->suspects[k]];
                    add(&b, "%s%s: step time %.1f ms, %.2fx the median %.1f ms of %zu nodes "
                            "(--straggler_factor=%.3g)",
                        k ? "; " : "", s->node_id, (double)s->p.step_p50_us / 1000.0,
                        (double)s->p.step_p50_us / (double)med, (double)med / 1000.0, known,
                        cfg->straggler_factor);
                    if (s->p.slowest_rank >= 0)
                        add(&b, ", slowest local rank %d at %.1f ms", s->p.slowest_rank,
                            (double)s->p.slowest_us / 1000.0);
                }
                goto done;
            }
        }
    }
    if (wait > 0) {
        d->action = EC_HANG_WAIT_UNTIL;
        d->wait_ms = wait;
    }
done:
    d->why = b.s ? b.s : strdup("");
    free(stalled);
    free(cand);
    free(p50);
    if (!d->why) {
        ec_hang_decision_free(d);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    *out = d;
    return 0;
}
