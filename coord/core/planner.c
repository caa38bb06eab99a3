/* The planner: (config, nodes, epoch, elapsed times) -> decision.
 *
 * Pure: no I/O, no clock, no globals.  The rules and their precedence are
 * listed in planner.h; this file follows that order in ec_plan().
 *
 * Node ids are matched with two hash tables (nodes by id, members by id), so
 * a plan is linear apart from one sort of the eligible non-members by
 * registration order.  All scratch space is one allocation: at 4096 nodes the
 * time goes mostly to touching memory, not to deciding.
 */
#define _GNU_SOURCE /* qsort_r */
#include "planner.h"
#include "strbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many names a text lists before "and 12 more". */
#define NAMES_MAX 8

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

const char *ec_plan_action_name(ec_plan_action_t action)
{
    switch (action) {
    case EC_PLAN_PUBLISH:
        return "publish";
    case EC_PLAN_WAIT_UNTIL:
        return "wait-until";
    case EC_PLAN_WAIT:
        return "wait";
    case EC_PLAN_FAIL:
        return "fail";
    case EC_PLAN_COMPLETE:
        return "complete";
    }
    return "unknown";
}

const char *ec_plan_why_name(ec_plan_why_t why)
{
    switch (why) {
#define EC_PLAN_WHY_CASE(code, name, action)                                                    \
    case EC_PLAN_WHY_##code: return name;
        EC_PLAN_WHY_MAP(EC_PLAN_WHY_CASE)
#undef EC_PLAN_WHY_CASE
    }
    return "unknown";
}

/* Joining or ready with the job's N: eligible, or pending while booting. */
static int alive(const ec_plan_config_t *cfg, const ec_plan_node_t *node)
{
    if (!cfg || !node || cfg->nproc < 1)
        return 0;
    return (node->state == EC_NODE_JOINING || node->state == EC_NODE_READY) &&
           node->nproc == (uint32_t)cfg->nproc;
}

int ec_plan_node_eligible(const ec_plan_config_t *cfg, const ec_plan_node_t *node)
{
    return alive(cfg, node) && !node->booting;
}

int ec_plan_node_pending(const ec_plan_config_t *cfg, const ec_plan_node_t *node)
{
    return alive(cfg, node) && node->booting;
}

/* The planner reads a node's state only through these classes: alive
 * (joining or ready: eligible with the right nproc), and leaving, done,
 * failed each apart (departed_word, the done rule, the leave rule); any
 * other value is "not eligible" in every rule, so it is a class of its
 * own too (the value itself is kept apart, to stay safe). */
static int state_class(ec_node_state_t s)
{
    return s == EC_NODE_READY ? EC_NODE_JOINING : (int)s;
}

bool ec_plan_node_equiv(const ec_plan_node_t *a, const ec_plan_node_t *b)
{
    if (!a || !b)
        return a == b;
    if ((a->node_id == NULL) != (b->node_id == NULL) ||
        (a->node_id && strcmp(a->node_id, b->node_id) != 0))
        return false;
    return a->nproc == b->nproc && a->incarnation == b->incarnation &&
           a->create_revision == b->create_revision && a->booting == b->booting &&
           a->place == b->place &&
           state_class(a->state) == state_class(b->state);
}

/* A string hash that reads eight bytes at a time (ids are host names of
 * 20-60 bytes: a byte-at-a-time hash was most of the plan's time), then a
 * splitmix finaliser so that sums of digests mix well. */
static uint64_t id_hash(const char *s)
{
    size_t len = strlen(s);
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ len, w;
    for (; len >= 8; s += 8, len -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, len);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

uint64_t ec_plan_fingerprint(const ec_plan_config_t *cfg, const ec_plan_node_t *nodes,
                             size_t n_nodes)
{
    /* A sum of per-id digests: independent of order, no sort needed. */
    uint64_t sum = 0, count = 0;
    for (size_t i = 0; nodes && i < n_nodes; i++) {
        if (nodes[i].node_id && alive(cfg, &nodes[i])) {
            sum += id_hash(nodes[i].node_id);
            count++;
        }
    }
    return sum ^ (count * 0x9e3779b97f4a7c15ULL);
}

static const char *plural(size_t n)
{
    return n == 1 ? "" : "s";
}

/* ------------------------------------------------------------------ */
/* id tables: open addressing, keys borrowed                           */

/* A slot holds an index into an array of structs whose first member is the
 * id (ec_plan_node_t, ec_plan_member_t): 8 bytes a slot keeps a 4096-node plan's
 * tables small, which matters more than anything else for its speed. */
typedef struct {
    uint32_t idx1; /* index + 1; 0: empty */
    uint32_t hash; /* low bits of id_hash(), compared before the strings */
} slot_t;

typedef struct {
    slot_t *slot;
    size_t mask;
    const char *base; /* entry i's id is *(const char **)(base + i * stride) */
    size_t stride;
} idtab_t;

static size_t idtab_cap(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

static const char *idtab_key(const idtab_t *t, uint32_t idx)
{
    const char *id;
    memcpy(&id, t->base + (size_t)idx * t->stride, sizeof(id));
    return id;
}

/* Insert entry v (whose id hashes to h).  Returns SIZE_MAX on success, else
 * the entry already stored with an equal id. */
static size_t idtab_put(idtab_t *t, uint64_t h, size_t v)
{
    const char *id = idtab_key(t, (uint32_t)v);
    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        slot_t *sl = &t->slot[i];
        if (!sl->idx1) {
            *sl = (slot_t){(uint32_t)v + 1, (uint32_t)h};
            return SIZE_MAX;
        }
        if (sl->hash == (uint32_t)h && strcmp(idtab_key(t, sl->idx1 - 1), id) == 0)
            return sl->idx1 - 1;
    }
}

/* The entry whose id is id (hashing to h), or SIZE_MAX when absent. */
static size_t idtab_get(const idtab_t *t, const char *id, uint64_t h)
{
    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        const slot_t *sl = &t->slot[i];
        if (!sl->idx1)
            return SIZE_MAX;
        if (sl->hash == (uint32_t)h && strcmp(idtab_key(t, sl->idx1 - 1), id) == 0)
            return sl->idx1 - 1;
    }
}

/* ------------------------------------------------------------------ */
/* the plan                                                            */

typedef enum { MEM_ALIVE, MEM_RESTARTED, MEM_DEPARTED } mem_status_t;

/* Registration order: a node's place first (nodes with one before those
 * without, by place), then create revision, then id for equal revisions. */
static int regorder_cmp(const void *a, const void *b, void *arg)
{
    const ec_plan_node_t *nodes = arg;
    const ec_plan_node_t *x = &nodes[*(const size_t *)a], *y = &nodes[*(const size_t *)b];
    if (x->place != y->place)
        return !y->place || (x->place && x->place < y->place) ? -1 : 1;
    if (x->create_revision != y->create_revision)
        return x->create_revision < y->create_revision ? -1 : 1;
    return strcmp(x->node_id, y->node_id);
}

typedef struct {
    const ec_plan_input_t *in;
    const ec_plan_config_t *cfg;
    const ec_plan_member_t *mem;
    size_t n_mem;
    void *scratch;          /* one block holding the arrays below and the tables */
    size_t *mem_node;       /* per member: node index, or SIZE_MAX if absent */
    size_t *cand;           /* eligible non-members, registration order */
    size_t *pend;           /* booting non-members still waited for, registration order */
    size_t *late;           /* booting non-members past join_ready_timeout_ms */
    unsigned char *elig;    /* per node */
    unsigned char *mstat;   /* per member: a mem_status_t */
    unsigned char *graceful;/* per member, meaningful when departed */
    size_t n_cand, n_pend, n_late;
    int64_t pend_longest;   /* the longest boot among pend[] (ms) */
    int64_t pend_left;      /* time until the first of pend[] is no longer waited for (ms) */
    size_t n_departed, n_restarted, n_failed, n_done;
    idtab_t by_node, by_member; /* in scratch */
} plan_t;

static const char *member_name(const plan_t *p, size_t m)
{
    return p->mem[m].node_id;
}

static const char *departed_word(const plan_t *p, size_t m)
{
    if (p->mem_node[m] != SIZE_MAX) {
        switch (p->in->nodes[p->mem_node[m]].state) {
        case EC_NODE_LEAVING:
            return "leaving";
        case EC_NODE_DONE:
            return "done";
        case EC_NODE_FAILED:
            return "failed";
        default:
            return p->in->nodes[p->mem_node[m]].booting &&
                           (int)p->in->nodes[p->mem_node[m]].nproc == p->cfg->nproc
                       ? "restarting its processes"
                       : "not eligible";
        }
    }
    return p->graceful[m] ? "left" : "missing";
}

/* "n1, n2, n3 and 5 more" for nodes[idx[i]]. */
static void sb_node_names(ec_strbuf_t *sb, const ec_plan_node_t *nodes, const size_t *idx, size_t n)
{
    for (size_t i = 0; i < n && i < NAMES_MAX; i++)
        ec_strbuf_printf(sb, "%s%s", i ? ", " : "", nodes[idx[i]].node_id);
    if (n > NAMES_MAX)
        ec_strbuf_printf(sb, " and %zu more", n - NAMES_MAX);
}

/* Names of members m with mstat[m] == st (and, for departed, their word). */
static void sb_members_with(ec_strbuf_t *sb, const plan_t *p, mem_status_t st, int with_word)
{
    size_t shown = 0, total = 0;
    for (size_t m = 0; m < p->n_mem; m++) {
        if (p->mstat[m] != st)
            continue;
        if (shown < NAMES_MAX) {
            ec_strbuf_printf(sb, "%s%s", shown ? ", " : "", member_name(p, m));
            if (with_word)
                ec_strbuf_printf(sb, " (%s)", departed_word(p, m));
            shown++;
        }
        total++;
    }
    if (total > shown)
        ec_strbuf_printf(sb, " and %zu more", total - shown);
}

/* "; 1 node refused (nproc mismatch): n4" */
static void sb_refused_note(ec_strbuf_t *sb, const ec_plan_decision_t *d, const ec_plan_node_t *nodes)
{
    if (!d->n_refused)
        return;
    ec_strbuf_printf(sb, "; %zu node%s refused (nproc mismatch): ", d->n_refused, plural(d->n_refused));
    for (size_t i = 0; i < d->n_refused && i < NAMES_MAX; i++)
        ec_strbuf_printf(sb, "%s%s", i ? ", " : "", nodes[d->refused[i].node].node_id);
    if (d->n_refused > NAMES_MAX)
        ec_strbuf_printf(sb, " and %zu more", d->n_refused - NAMES_MAX);
}

static int64_t elapsed(int64_t ms)
{
    return ms < 0 ? 0 : ms;
}

static void decide(ec_plan_decision_t *d, ec_plan_why_t by, ec_plan_action_t action,
                   int64_t wait_ms);

/* "waiting for n2, n3 to be ready (booting for up to 300 ms; up to 4700 ms
 * more)": the booting nodes still waited for. */
static void sb_pending(ec_strbuf_t *sb, const plan_t *p)
{
    ec_strbuf_printf(sb, "waiting for ");
    sb_node_names(sb, p->in->nodes, p->pend, p->n_pend);
    ec_strbuf_printf(sb, " to be ready (booting for %s%" PRId64 " ms", p->n_pend > 1 ? "up to " : "",
                     p->pend_longest);
    if (p->cfg->join_ready_timeout_ms > 0)
        ec_strbuf_printf(sb, "; up to %" PRId64 " ms more", p->pend_left);
    ec_strbuf_printf(sb, ")");
}

/* "; n2 not ready after 5000 ms": booting nodes no longer waited for. */
static void sb_late(ec_strbuf_t *sb, const plan_t *p)
{
    if (!p->n_late)
        return;
    ec_strbuf_sep(sb, "; ");
    sb_node_names(sb, p->in->nodes, p->late, p->n_late);
    ec_strbuf_printf(sb, " not ready after %" PRId64 " ms", p->cfg->join_ready_timeout_ms);
}

/* Wait for the booting nodes in pend[]: until the first is no longer waited
 * for when that publishes (can_publish), else until something changes. */
static void wait_pending(plan_t *p, ec_plan_decision_t *d, ec_plan_why_t by, bool can_publish)
{
    if (can_publish && p->cfg->join_ready_timeout_ms > 0)
        decide(d, by, EC_PLAN_WAIT_UNTIL, p->pend_left > 0 ? p->pend_left : 1);
    else
        decide(d, by, EC_PLAN_WAIT, 0);
}

/* The action, by which rule (EC_PLAN_WHY_MAP), and for WAIT_UNTIL how long. */
static void decide(ec_plan_decision_t *d, ec_plan_why_t by, ec_plan_action_t action,
                   int64_t wait_ms)
{
    d->action = action;
    d->why_code = by;
    d->wait_ms = action == EC_PLAN_WAIT_UNTIL ? wait_ms : 0;
}

/* Build members[] for a publish: current members in M_id order with departed
 * slots refilled from the candidates, then the remaining candidates up to
 * np_max; compose why.  reason applies when no member departed. */
static int publish(plan_t *p, ec_plan_decision_t *d, ec_strbuf_t *why, ec_plan_why_t by,
                   ec_epoch_reason_t reason)
{
    const ec_plan_node_t *nodes = p->in->nodes;
    size_t max = (size_t)p->cfg->np_max;
    size_t cap = p->n_mem + p->n_cand;
    d->members = malloc((cap ? cap : 1) * sizeof(*d->members));
    if (!d->members)
        return EC_ENOMEM;

    size_t n = 0, next = 0, promoted = 0, dropped = 0, any_lost = 0;
    for (size_t m = 0; m < p->n_mem; m++) {
        if (p->mstat[m] != MEM_DEPARTED) {
            d->members[n++] = p->mem_node[m];
            continue;
        }
        if (!p->graceful[m])
            any_lost = 1;
        if (next < p->n_cand) {
            if (promoted < NAMES_MAX)
                ec_strbuf_printf(why, "%s%s replaces %s (%s) at M_id %zu", promoted ? ", " : "",
                          nodes[p->cand[next]].node_id, member_name(p, m), departed_word(p, m), n);
            promoted++;
            d->members[n++] = p->cand[next++];
        } else {
            dropped++;
        }
    }
    if (promoted > NAMES_MAX)
        ec_strbuf_printf(why, " and %zu more promoted", promoted - NAMES_MAX);
    if (dropped) {
        /* Name the departed members whose slots closed: the last ones, since
         * slots are refilled in M_id order. */
        size_t skip = promoted, shown = 0;
        ec_strbuf_sep(why, "; ");
        for (size_t m = 0; m < p->n_mem; m++) {
            if (p->mstat[m] != MEM_DEPARTED)
                continue;
            if (skip) {
                skip--;
                continue;
            }
            if (shown < NAMES_MAX) {
                ec_strbuf_printf(why, "%s%s %s", shown ? ", " : "", member_name(p, m),
                          departed_word(p, m));
                shown++;
            }
        }
        if (dropped > shown)
            ec_strbuf_printf(why, " and %zu more", dropped - shown);
    }
    if (p->n_restarted) {
        ec_strbuf_sep(why, "; ");
        sb_members_with(why, p, MEM_RESTARTED, 0);
        ec_strbuf_printf(why, " restarted");
    }
    size_t first_join = n;
    while (next < p->n_cand && n < max)
        d->members[n++] = p->cand[next++];
    if (n > first_join) {
        ec_strbuf_sep(why, "; ");
        sb_node_names(why, nodes, d->members + first_join, n - first_join);
        ec_strbuf_printf(why, " joined");
    }
    if (next < p->n_cand) {
        ec_strbuf_sep(why, "; ");
        ec_strbuf_printf(why, "%zu standby%s", p->n_cand - next, p->n_cand - next == 1 ? "" : "s");
    }
    if (n > first_join)
        sb_late(why, p); /* joiners admitted without them */

    if (p->n_departed)
        reason = dropped ? (any_lost ? EC_REASON_LOST : EC_REASON_LEAVE)
                         : EC_REASON_SPARE_PROMOTED;
    decide(d, by, EC_PLAN_PUBLISH, 0);
    d->reason = reason;
    d->n_members = n;
    d->world_size = (int64_t)n * p->cfg->nproc;
    d->epoch = p->in->epoch.number + 1;
    return 0;
}

/* The first-epoch rules: no members, every eligible node is a candidate;
 * booting ones are waited for (sb_pending), within join_ready_timeout_ms. */
static int plan_start(plan_t *p, ec_plan_decision_t *d, ec_strbuf_t *why)
{
    const ec_plan_config_t *c = p->cfg;
    size_t n = p->n_cand, np = p->n_pend, min = (size_t)c->np_min, max = (size_t)c->np_max;

    if (n < max) {
        if (n + np < min) {
            ec_strbuf_printf(why, "waiting for %zu more node%s: have %zu", min - n - np,
                             plural(min - n - np), n);
            if (np)
                ec_strbuf_printf(why, " (and %zu booting)", np);
            ec_strbuf_printf(why, ", need np_min=%d", c->np_min);
            sb_late(why, p);
            decide(d, EC_PLAN_WHY_NEED_NODES, EC_PLAN_WAIT, 0);
            return 0;
        }
        int64_t since = elapsed(p->in->since_eligible_change_ms);
        if (n + np < max && since < c->elastic_timeout_ms) {
            ec_strbuf_printf(why,
                      "have %zu of np_max=%d nodes (np_min=%d): starting with %zu in %" PRId64
                      " ms unless more join",
                      n + np, c->np_max, c->np_min, n + np, c->elastic_timeout_ms - since);
            int64_t wait = c->elastic_timeout_ms - since;
            if (np) {
                ec_strbuf_printf(why, " (%zu booting: once ready)", np);
                /* a boot that runs out first changes the count: plan then */
                if (c->join_ready_timeout_ms > 0 && p->pend_left < wait)
                    wait = p->pend_left > 0 ? p->pend_left : 1;
            }
            sb_late(why, p);
            decide(d, EC_PLAN_WHY_START_WAIT, EC_PLAN_WAIT_UNTIL, wait);
            return 0;
        }
        if (np) {
            sb_pending(why, p);
            ec_strbuf_printf(why, ": starting with %zu nodes once every one is", n + np);
            wait_pending(p, d, EC_PLAN_WHY_START_BOOTING, n >= min);
            return 0;
        }
    }
    size_t w = n < max ? n : max;
    d->members = malloc(w * sizeof(*d->members));
    if (!d->members)
        return EC_ENOMEM;
    memcpy(d->members, p->cand, w * sizeof(*d->members));
    ec_strbuf_printf(why, "%zu node%s: ", w, plural(w));
    sb_node_names(why, p->in->nodes, d->members, w);
    if (n > w)
        ec_strbuf_printf(why, "; %zu standby%s", n - w, n - w == 1 ? "" : "s");
    sb_late(why, p);
    decide(d, EC_PLAN_WHY_START, EC_PLAN_PUBLISH, 0);
    d->reason = EC_REASON_START;
    d->n_members = w;
    d->world_size = (int64_t)w * c->nproc;
    d->epoch = p->in->epoch.number + 1;
    return 0;
}

/* Never publish fewer than np_min nodes.  Reached only when the current
 * epoch is itself below np_min (np_min was raised, e.g. a new leader runs with
 * another --np) and a restart or join would publish it as is: wait instead. */
static int wait_below_min(plan_t *p, ec_plan_decision_t *d, ec_strbuf_t *why)
{
    size_t have = p->n_mem - p->n_departed + p->n_cand, min = (size_t)p->cfg->np_min;
    ec_strbuf_printf(why, "waiting for %zu more node%s: have %zu, need np_min=%d (epoch %" PRIu64
              " has %zu member%s)", min - have, plural(min - have), have, p->cfg->np_min,
              p->in->epoch.number, p->n_mem, plural(p->n_mem));
    decide(d, EC_PLAN_WHY_BELOW_MIN, EC_PLAN_WAIT, 0);
    return 0;
}

/* The size any publish would have: every eligible node up to np_max. */
static size_t publish_size(const plan_t *p)
{
    size_t all = p->n_mem - p->n_departed + p->n_cand, max = (size_t)p->cfg->np_max;
    return all < max ? all : max;
}

/* Rule 6: members departed. */
static int plan_departed(plan_t *p, ec_plan_decision_t *d, ec_strbuf_t *why)
{
    const ec_plan_config_t *c = p->cfg;
    size_t k = p->n_departed;
    size_t fill = p->n_cand < k ? p->n_cand : k;
    size_t unfilled = k - fill;
    size_t remain = p->n_mem - unfilled; /* size of the epoch we could publish now */
    size_t min = (size_t)c->np_min;

    if (unfilled == 0)
        return publish_size(p) < min ? wait_below_min(p, d, why)
                                     : publish(p, d, why, EC_PLAN_WHY_REPLACED, EC_REASON_UNKNOWN);

    if (remain < min || c->np_min == c->np_max) {
        ec_strbuf_printf(why, "waiting for %zu more node%s: ", min - remain, plural(min - remain));
        sb_members_with(why, p, MEM_DEPARTED, 1);
        size_t left = p->n_mem - k;
        ec_strbuf_printf(why, " departed, %zu replacement%s registered, %zu member%s, need ", fill,
                  plural(fill), left, left == 1 ? " remains" : "s remain");
        if (c->np_min == c->np_max)
            ec_strbuf_printf(why, "np=%d (fixed size)", c->np_min);
        else
            ec_strbuf_printf(why, "np_min=%d", c->np_min);
        decide(d, EC_PLAN_WHY_NEED_REPLACEMENTS, EC_PLAN_WAIT, 0);
        return 0;
    }
    int64_t since = elapsed(p->in->since_member_missing_ms);
    if (since < c->replace_wait_ms) {
        sb_members_with(why, p, MEM_DEPARTED, 1);
        ec_strbuf_printf(why,
                  " departed: waiting %" PRId64 " ms more for %zu replacement%s before"
                  " continuing with %zu nodes",
                  c->replace_wait_ms - since, unfilled, plural(unfilled), remain);
        decide(d, EC_PLAN_WHY_REPLACE_WAIT, EC_PLAN_WAIT_UNTIL, c->replace_wait_ms - since);
        return 0;
    }
    return publish(p, d, why, EC_PLAN_WHY_SHRINK, EC_REASON_UNKNOWN);
}

/* Rules 7-9: nobody departed. */
static int plan_running(plan_t *p, ec_plan_decision_t *d, ec_strbuf_t *why)
{
    const ec_plan_config_t *c = p->cfg;
    size_t max = (size_t)c->np_max;

    if ((p->n_restarted || (p->n_cand && p->n_mem < max)) && publish_size(p) < (size_t)c->np_min)
        return wait_below_min(p, d, why);

    if (p->n_restarted)
        return publish(p, d, why, EC_PLAN_WHY_RESTART, EC_REASON_RESTART);

    if (p->n_cand && p->n_mem < max) {
        int64_t since = elapsed(p->in->since_eligible_change_ms);
        if (p->n_mem + p->n_cand >= max || (since >= c->elastic_timeout_ms && !p->n_pend))
            return publish(p, d, why, EC_PLAN_WHY_JOIN, EC_REASON_JOIN);
        if (since >= c->elastic_timeout_ms) {
            /* joiners that registered with them are admitted together */
            sb_node_names(why, p->in->nodes, p->cand, p->n_cand);
            ec_strbuf_printf(why, " ready; ");
            sb_pending(why, p);
            ec_strbuf_printf(why, " before admitting %zu nodes", p->n_cand + p->n_pend);
            wait_pending(p, d, EC_PLAN_WHY_JOIN_BOOTING, true);
            return 0;
        }
        sb_node_names(why, p->in->nodes, p->cand, p->n_cand);
        ec_strbuf_printf(why,
                  " joined: publishing %zu nodes in %" PRId64 " ms unless more join"
                  " (np_max=%d)",
                  p->n_mem + p->n_cand, c->elastic_timeout_ms - since, c->np_max);
        decide(d, EC_PLAN_WHY_JOIN_WAIT, EC_PLAN_WAIT_UNTIL, c->elastic_timeout_ms - since);
        return 0;
    }
    ec_strbuf_printf(why, "steady");
    if (p->n_cand) {
        ec_strbuf_printf(why, ": %zu standby%s (", p->n_cand, p->n_cand == 1 ? "" : "s");
        sb_node_names(why, p->in->nodes, p->cand, p->n_cand);
        ec_strbuf_printf(why, ")");
    }
    if (p->n_pend + p->n_late) {
        /* pend[] and late[] both in registration order: names of the two */
        size_t nb = p->n_pend + p->n_late;
        ec_strbuf_printf(why, "%s%zu node%s booting (", p->n_cand ? "; " : ": ", nb, plural(nb));
        sb_node_names(why, p->in->nodes, p->pend, p->n_pend);
        if (p->n_late) {
            if (p->n_pend)
                ec_strbuf_printf(why, ", ");
            sb_node_names(why, p->in->nodes, p->late, p->n_late);
        }
        ec_strbuf_printf(why, "): each joins once ready");
    }
    decide(d, EC_PLAN_WHY_STEADY, EC_PLAN_WAIT, 0);
    return 0;
}

static int check_config(const ec_plan_config_t *c, ec_strbuf_t *why)
{
    if (c->np_min < 1)
        ec_strbuf_printf(why,
                  "invalid configuration: np_min=%d; --np takes MIN[:MAX] with"
                  " 1 <= MIN <= MAX",
                  c->np_min);
    else if (c->np_min > c->np_max)
        ec_strbuf_printf(why,
                  "invalid configuration: np_min=%d > np_max=%d; --np takes MIN[:MAX] with"
                  " 1 <= MIN <= MAX",
                  c->np_min, c->np_max);
    else if (c->nproc < 1)
        ec_strbuf_printf(why, "invalid configuration: nproc=%d; --nproc_per_node must be at least 1",
                  c->nproc);
    else if ((int64_t)c->np_max * c->nproc > INT32_MAX)
        ec_strbuf_printf(why,
                  "invalid configuration: np_max=%d x nproc=%d is more than %d ranks;"
                  " lower --np or --nproc_per_node",
                  c->np_max, c->nproc, INT32_MAX);
    else if (c->elastic_timeout_ms < 0)
        ec_strbuf_printf(why, "invalid configuration: elastic_timeout_ms=%" PRId64 " is negative",
                  c->elastic_timeout_ms);
    else if (c->replace_wait_ms < 0)
        ec_strbuf_printf(why, "invalid configuration: replace_wait_ms=%" PRId64 " is negative",
                  c->replace_wait_ms);
    else
        return 0;
    return -1;
}

static int check_input(const ec_plan_input_t *in, ec_error_t *err)
{
    if (in->n_nodes && !in->nodes)
        return ec_errorf(err, EC_EINVAL, "planner input: %zu nodes but no node array",
                         in->n_nodes);
    if (in->n_left && !in->left_ids)
        return ec_errorf(err, EC_EINVAL, "planner input: %zu left ids but no array", in->n_left);
    for (size_t i = 0; i < in->n_nodes; i++)
        if (!in->nodes[i].node_id)
            return ec_errorf(err, EC_EINVAL, "planner input: node %zu has no id", i);
    const ec_plan_epoch_t *e = &in->epoch;
    if (e->number == 0 && e->n_members)
        return ec_errorf(err, EC_EINVAL, "planner input: epoch 0 (none) with %zu members",
                         e->n_members);
    /* Found by tests/fuzz/fuzz_planner: the next number would wrap to 0 (a
     * forged or corrupted epoch key), and epoch 0 can never be published. */
    if (e->number == UINT64_MAX)
        return ec_errorf(err, EC_EINVAL, "planner input: epoch %" PRIu64 " is the largest "
                         "number, no epoch can follow it; was the epoch key written by "
                         "another tool?", e->number);
    if (e->number > 0 && (!e->n_members || !e->members))
        return ec_errorf(err, EC_EINVAL, "planner input: epoch %" PRIu64 " has no members",
                         e->number);
    for (size_t m = 0; m < e->n_members; m++)
        if (!e->members[m].node_id)
            return ec_errorf(err, EC_EINVAL, "planner input: epoch %" PRIu64
                             " member %zu has no id", e->number, m);
    for (size_t i = 0; i < in->n_left; i++)
        if (!in->left_ids[i])
            return ec_errorf(err, EC_EINVAL, "planner input: left id %zu is NULL", i);
    return 0;
}

/* The scratch block: the two id tables and the per-node and per-member
 * arrays, one zeroed allocation, largest alignment first. */
static int plan_alloc(plan_t *p)
{
    size_t nn = p->in->n_nodes, nm = p->n_mem;
    size_t cap_n = idtab_cap(nn), cap_m = idtab_cap(nm);
    size_t sz = (cap_n + cap_m) * sizeof(slot_t) + (nm + 3 * nn) * sizeof(size_t) + nn + 2 * nm;
    char *b = p->scratch = calloc(1, sz);
    if (!b)
        return EC_ENOMEM;
    p->by_node = (idtab_t){(slot_t *)b, cap_n - 1, (const char *)p->in->nodes, sizeof(*p->in->nodes)};
    b += cap_n * sizeof(slot_t);
    p->by_member = (idtab_t){(slot_t *)b, cap_m - 1, (const char *)p->mem, sizeof(*p->mem)};
    b += cap_m * sizeof(slot_t);
    p->mem_node = (size_t *)b;
    b += nm * sizeof(size_t);
    p->cand = (size_t *)b;
    b += nn * sizeof(size_t);
    p->pend = (size_t *)b;
    b += nn * sizeof(size_t);
    p->late = (size_t *)b;
    b += nn * sizeof(size_t);
    p->elig = (unsigned char *)b;
    p->mstat = p->elig + nn;
    p->graceful = p->mstat + nm;
    return 0;
}

/* The members by id; a member listed twice is malformed input. */
static int index_members(plan_t *p, ec_error_t *err)
{
    for (size_t m = 0; m < p->n_mem; m++) {
        p->mem_node[m] = SIZE_MAX;
        size_t dup = idtab_put(&p->by_member, id_hash(p->mem[m].node_id), m);
        if (dup != SIZE_MAX)
            return ec_errorf(err, EC_EINVAL,
                             "epoch %" PRIu64 " lists node %s twice (M_id %zu and %zu)",
                             p->in->epoch.number, p->mem[m].node_id, dup, m);
    }
    return 0;
}

/* A booting non-member: still waited for (pend[]) or past
 * join_ready_timeout_ms (late[]). */
static void note_booting(plan_t *p, size_t i)
{
    int64_t t = elapsed(p->in->nodes[i].booting_ms), limit = p->cfg->join_ready_timeout_ms;
    if (limit > 0 && t >= limit) {
        p->late[p->n_late++] = i;
        return;
    }
    if (!p->n_pend || t > p->pend_longest)
        p->pend_longest = t;
    if (limit > 0 && (!p->n_pend || limit - t < p->pend_left))
        p->pend_left = limit - t;
    p->pend[p->n_pend++] = i;
}

/* Each node: by id (a node registered twice is malformed input), eligible
 * or not, a member's node, a candidate or a booting non-member; pend[],
 * cand[] and late[] then in registration order.  *n_refused: the alive
 * nodes with another nproc. */
static int classify_nodes(plan_t *p, size_t *n_refused, ec_error_t *err)
{
    const ec_plan_node_t *nodes = p->in->nodes;
    *n_refused = 0;
    for (size_t i = 0; i < p->in->n_nodes; i++) {
        const ec_plan_node_t *nd = &nodes[i];
        uint64_t h = id_hash(nd->node_id);
        size_t dup = idtab_put(&p->by_node, h, i);
        if (dup != SIZE_MAX)
            return ec_errorf(err, EC_EINVAL, "node %s is registered twice (entries %zu and %zu)",
                             nd->node_id, dup, i);
        p->elig[i] = (unsigned char)ec_plan_node_eligible(p->cfg, nd);
        bool pending = ec_plan_node_pending(p->cfg, nd);
        *n_refused += !p->elig[i] && !pending &&
                      (nd->state == EC_NODE_JOINING || nd->state == EC_NODE_READY);
        size_t mid = idtab_get(&p->by_member, nd->node_id, h);
        if (mid != SIZE_MAX)
            p->mem_node[mid] = i;
        else if (p->elig[i])
            p->cand[p->n_cand++] = i;
        else if (pending)
            note_booting(p, i);
    }
    qsort_r(p->cand, p->n_cand, sizeof(*p->cand), regorder_cmp, (void *)nodes);
    qsort_r(p->pend, p->n_pend, sizeof(*p->pend), regorder_cmp, (void *)nodes);
    qsort_r(p->late, p->n_late, sizeof(*p->late), regorder_cmp, (void *)nodes);
    return 0;
}

/* d->refused[]: the n_refused alive nodes with another nproc, each with
 * the message for its record. */
static int refuse_mismatched(plan_t *p, ec_plan_decision_t *d, size_t n_refused)
{
    const ec_plan_node_t *nodes = p->in->nodes;
    if (n_refused && !(d->refused = calloc(n_refused, sizeof(*d->refused))))
        return EC_ENOMEM;
    for (size_t i = 0; n_refused && i < p->in->n_nodes; i++) {
        const ec_plan_node_t *nd = &nodes[i];
        if (p->elig[i] || ec_plan_node_pending(p->cfg, nd) ||
            (nd->state != EC_NODE_JOINING && nd->state != EC_NODE_READY))
            continue;
        ec_strbuf_t sb = EC_STRBUF_INIT;
        ec_strbuf_printf(&sb,
                  "node %s has nproc=%" PRIu32 " but the job runs nproc=%d; restart it"
                  " with --nproc_per_node=%d",
                  nd->node_id, nd->nproc, p->cfg->nproc, p->cfg->nproc);
        d->refused[d->n_refused].node = i;
        if (!(d->refused[d->n_refused++].why = ec_strbuf_take(&sb)))
            return EC_ENOMEM;
    }
    return 0;
}

/* Each member: alive, restarted (a new incarnation) or departed, and for a
 * departed one whether it went gracefully. */
static void classify_members(plan_t *p)
{
    const ec_plan_node_t *nodes = p->in->nodes;
    for (size_t m = 0; m < p->n_mem; m++) {
        size_t i = p->mem_node[m];
        if (i == SIZE_MAX) {
            p->mstat[m] = MEM_DEPARTED;
        } else if (p->elig[i]) {
            p->mstat[m] = nodes[i].incarnation == p->mem[m].incarnation ? MEM_ALIVE
                                                                         : MEM_RESTARTED;
        } else if (nodes[i].state == EC_NODE_DONE && (int)nodes[i].nproc == p->cfg->nproc) {
            /* A member whose processes finished stays a member: nodes finish
             * at slightly different times, and re-forming the job around the
             * ones still finishing would restart them.  The job is complete
             * when every member is done (below). */
            p->mstat[m] = MEM_ALIVE;
            p->n_done++;
        } else {
            /* A booting member's agent replaces its processes: it steps
             * out, as a node leaving does, and joins again once ready. */
            p->mstat[m] = MEM_DEPARTED;
            p->graceful[m] = nodes[i].state == EC_NODE_LEAVING || ec_plan_node_pending(p->cfg, &nodes[i]);
            p->n_failed += nodes[i].state == EC_NODE_FAILED;
        }
        p->n_departed += p->mstat[m] == MEM_DEPARTED;
        p->n_restarted += p->mstat[m] == MEM_RESTARTED;
    }
    /* A vanished member left gracefully if the caller saw it leaving. */
    for (size_t j = 0; j < p->in->n_left; j++) {
        const char *id = p->in->left_ids[j];
        size_t m = idtab_get(&p->by_member, id, id_hash(id));
        if (m != SIZE_MAX && p->mem_node[m] == SIZE_MAX)
            p->graceful[m] = 1;
    }
}

/* Classify nodes and members; collect refusals and the candidates. */
static int plan_prepare(plan_t *p, ec_plan_decision_t *d, ec_error_t *err)
{
    size_t nn = p->in->n_nodes, nm = p->n_mem, n_refused;
    if (nn >= UINT32_MAX || nm >= UINT32_MAX)
        return ec_errorf(err, EC_EINVAL, "planner input: %zu nodes, %zu members: too many",
                         nn, nm);
    int rc = plan_alloc(p);
    if (rc == 0)
        rc = index_members(p, err);
    if (rc == 0)
        rc = classify_nodes(p, &n_refused, err);
    if (rc == 0)
        rc = refuse_mismatched(p, d, n_refused);
    if (rc == 0)
        classify_members(p);
    return rc;
}

int ec_plan(const ec_plan_input_t *in, ec_plan_decision_t **out, ec_error_t *err)
{
    if (!out)
        return ec_errorf(err, EC_EINVAL, "planner: no place for the decision (out is NULL)");
    *out = NULL;
    if (!in)
        return ec_errorf(err, EC_EINVAL, "planner: no input");
    int rc = check_input(in, err);
    if (rc < 0)
        return rc;

    plan_t p = {.in = in, .cfg = &in->config, .mem = in->epoch.members,
                .n_mem = in->new_run ? 0 : in->epoch.n_members};
    ec_strbuf_t why = EC_STRBUF_INIT, log = EC_STRBUF_INIT;
    ec_plan_decision_t *d = calloc(1, sizeof(*d));
    if (!d) {
        rc = EC_ENOMEM;
        goto error;
    }

    /* 1. configuration */
    if (check_config(p.cfg, &why) < 0) {
        decide(d, EC_PLAN_WHY_INVALID_CONFIG, EC_PLAN_FAIL, 0);
        goto done;
    }
    rc = plan_prepare(&p, d, err);
    if (rc < 0)
        goto error;
    d->n_departed = p.n_departed;

    if (p.n_mem == 0) {
        /* 4. first epoch */
        rc = plan_start(&p, d, &why);
    } else if (p.n_failed == p.n_mem) {
        /* 2. every member failed: nothing left to rebuild from */
        ec_strbuf_printf(&why, "every member of epoch %" PRIu64 " failed: ", in->epoch.number);
        sb_members_with(&why, &p, MEM_DEPARTED, 0);
        ec_strbuf_printf(&why, "; see their logs and failure records");
        decide(d, EC_PLAN_WHY_ALL_FAILED, EC_PLAN_FAIL, 0);
    } else if (p.cfg->fail_fast && p.n_failed > 0) {
        /* 2b. fault tolerance off: one member's failure ends the job */
        size_t shown = 0;
        for (size_t m = 0; m < p.n_mem; m++) {
            size_t i = p.mem_node[m];
            if (i == SIZE_MAX || in->nodes[i].state != EC_NODE_FAILED || shown >= NAMES_MAX)
                continue;
            ec_strbuf_printf(&why, "%s%s", shown++ ? ", " : "", member_name(&p, m));
        }
        ec_strbuf_printf(&why, " of epoch %" PRIu64 " failed and the job runs without fault "
                               "tolerance (--elastic_level=-1): every node stops; see the "
                               "failure records, or restart failed processes with "
                               "--max_restart or --elastic_level=1",
                         in->epoch.number);
        decide(d, EC_PLAN_WHY_FAILED_NO_TOLERANCE, EC_PLAN_FAIL, 0);
    } else if (p.n_mem > (size_t)p.cfg->np_max) {
        /* 3. another agent wrote this epoch with a larger --np */
        ec_strbuf_printf(&why,
                  "epoch %" PRIu64 " has %zu members but np_max=%d: every agent of a job"
                  " must run with the same --np",
                  in->epoch.number, p.n_mem, p.cfg->np_max);
        decide(d, EC_PLAN_WHY_OVER_NP_MAX, EC_PLAN_FAIL, 0);
    } else if (p.n_done == p.n_mem) {
        /* 5. training finished: do not promote standbys into a finished job */
        ec_strbuf_printf(&why, "all %zu members of epoch %" PRIu64 " are done", p.n_mem,
                  in->epoch.number);
        decide(d, EC_PLAN_WHY_ALL_DONE, EC_PLAN_COMPLETE, 0);
    } else if (p.n_departed) {
        rc = plan_departed(&p, d, &why);
    } else {
        rc = plan_running(&p, d, &why);
    }
    if (rc < 0)
        goto error;
    if (d->action != EC_PLAN_PUBLISH && d->action != EC_PLAN_FAIL)
        sb_refused_note(&why, d, in->nodes);

done:
    d->why = ec_strbuf_take(&why);
    if (!d->why) {
        rc = EC_ENOMEM;
        goto error;
    }
    switch (d->action) {
    case EC_PLAN_PUBLISH:
        ec_strbuf_printf(&log, "+epoch %" PRIu64 " world=%" PRId64 " nodes=%zu reason=%s: %s", d->epoch,
                  d->world_size, d->n_members, ec_epoch_reason_name(d->reason), d->why);
        break;
    case EC_PLAN_WAIT_UNTIL:
        ec_strbuf_printf(&log, "+wait-until %" PRId64 "ms: %s", d->wait_ms, d->why);
        break;
    case EC_PLAN_WAIT:
        ec_strbuf_printf(&log, "+wait: %s", d->why);
        break;
    case EC_PLAN_FAIL:
        ec_strbuf_printf(&log, "+fail: %s", d->why);
        break;
    case EC_PLAN_COMPLETE:
        ec_strbuf_printf(&log, "+complete: %s", d->why);
        break;
    }
    d->log = ec_strbuf_take(&log);
    if (!d->log) {
        rc = EC_ENOMEM;
        goto error;
    }
    free(p.scratch);
    *out = d;
    return 0;

error:
    if (rc == EC_ENOMEM)
        ec_errorf(err, EC_ENOMEM, "planner: out of memory planning %zu nodes", in->n_nodes);
    ec_strbuf_free(&why);
    ec_strbuf_free(&log);
    free(p.scratch);
    ec_plan_decision_free(d);
    return rc;
}

void ec_plan_decision_free(ec_plan_decision_t *d)
{
    if (!d)
        return;
    int saved = errno;
    for (size_t i = 0; i < d->n_refused; i++)
        free(d->refused[i].why);
    free(d->refused);
    free(d->members);
    free(d->why);
    free(d->log);
    free(d);
    errno = saved;
}
