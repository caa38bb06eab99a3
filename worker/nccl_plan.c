/* Shrink or init: the NCCL backend's choice per epoch (nccl_plan.h).
 *
 * "Only removals" is about processes, not node counts: rank = M_id * N +
 * N_id is renumbered by every epoch, so the previous epoch's ranks are
 * mapped to the new one's through (node id, local rank).  A process of the
 * old communicator survives when its node is a member of the new epoch and
 * its local rank is below the new N.  A shrink is possible when
 *   - every rank of the new epoch is such a survivor (nobody joins: no new
 *     node, N not larger), and
 *   - NCCL's numbering after the shrink is the epoch's: ncclCommShrink keeps
 *     the survivors in the order of their old ranks and closes the gaps
 *     (nccl.h: "ranks will be re-ordered to fill the gap of removed ones";
 *     getParentRanks in src/init.cc), so the survivor with the k-th lowest
 *     old rank must be the epoch's rank k.  A node removed from the middle
 *     passes; members reordered by the coordinator, or N shrinking on
 *     several nodes (old ranks 0,1 | 2,3 -> N=1: 0 | 2 -> new 0 | 1, fine;
 *     but a reorder of nodes is not) are checked rank by rank.
 * and at least one rank is excluded (ncclCommShrink refuses an empty list).
 *
 * Every member computes the same plan from the same two epochs; what can
 * differ between them is local (the NCCL version, whether its previous
 * communicator is alive or failed).  A member that inits while others
 * shrink leaves both waiting until the shrink's deadline, after which every
 * member inits (the fallback): bounded, not a hang. */
#include "nccl_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ecw__rebuild_mode_parse(const char *s)
{
    if (!s)
        return -1;
    if (!strcmp(s, "auto"))
        return ECW__REBUILD_AUTO;
    if (!strcmp(s, "shrink"))
        return ECW__REBUILD_SHRINK;
    if (!strcmp(s, "init"))
        return ECW__REBUILD_INIT;
    return -1;
}

const char *ecw__rebuild_mode_name(ecw__rebuild_mode_t m)
{
    switch (m) {
    case ECW__REBUILD_AUTO: return "auto";
    case ECW__REBUILD_SHRINK: return "shrink";
    case ECW__REBUILD_INIT: return "init";
    }
    return "?";
}

int ecw__nccl_nroots(int world, int nmembers, int roots, int scalable_min, bool have_scalable)
{
    if (!have_scalable || world < 2 || scalable_min < 1 || world < scalable_min)
        return 1;
    int n = roots > 0 ? roots : (world + ECW__NCCL_RANKS_PER_ROOT - 1) / ECW__NCCL_RANKS_PER_ROOT;
    if (n > nmembers)
        n = nmembers;
    if (n > world)
        n = world;
    return n < 1 ? 1 : n;
}

/* NCCL's split of world ranks over nroots roots (src/bootstrap.cc,
 * firstRankFromRoot / rootIdFromRank with no offset): contiguous groups of
 * world / nroots, the first world % nroots groups one rank larger. */
int ecw__nccl_root_rank(int root, int world, int nroots)
{
    if (nroots < 1 || root < 0 || root >= nroots || world < nroots)
        return -1;
    int per = world / nroots, extra = world % nroots;
    return root * per + (root < extra ? root : extra);
}

int ecw__nccl_root_of(int rank, int world, int nroots)
{
    if (nroots < 1 || rank < 0 || rank >= world || world < nroots)
        return -1;
    int per = world / nroots, extra = world % nroots;
    int big = extra * (per + 1); /* ranks in the larger groups */
    return rank < big ? rank / (per + 1) : (rank - big) / per + extra;
}

static int find_node(const ecw__nccl_epoch_t *e, const char *id)
{
    for (int i = 0; i < e->nmembers; i++)
        if (e->node_ids[i] && !strcmp(e->node_ids[i], id))
            return i;
    return -1;
}

static bool epoch_ok(const ecw__nccl_epoch_t *e)
{
    return e && e->nmembers >= 1 && e->nproc >= 1 && e->node_ids &&
           e->nmembers <= (1 << 30) / e->nproc;
}

static void init_plan(const ecw__nccl_plan_in_t *in, ecw__nccl_plan_t *out)
{
    int world = in->next->nmembers * in->next->nproc;
    out->kind = ECW__PLAN_INIT;
    free(out->excluded);
    out->excluded = NULL;
    out->nexcluded = 0;
    out->abort = false;
    out->nroots = ecw__nccl_nroots(world, in->next->nmembers, in->roots, in->scalable_min,
                                   in->have_scalable &&
                                       in->nccl_version >= ECW__NCCL_SCALABLE_MIN);
}

#define WHY(...) snprintf(out->why, sizeof(out->why), __VA_ARGS__)

int ecw__nccl_plan(const ecw__nccl_plan_in_t *in, ecw__nccl_plan_t *out, ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (!in || !epoch_ok(in->next))
        return ec_errorf(err, EC_EINVAL, "nccl plan: the new epoch has no members or "
                         "processes");
    const ecw__nccl_epoch_t *nx = in->next, *pv = in->prev;
    int world = nx->nmembers * nx->nproc;
    if (in->rank < 0 || in->rank >= world)
        return ec_errorf(err, EC_EINVAL, "nccl plan: rank %d is outside epoch %llu's %d ranks",
                         in->rank, (unsigned long long)nx->number, world);
    init_plan(in, out);
    const char *roots_note = out->nroots > 1 ? " with several roots" : "";
    if (in->mode == ECW__REBUILD_INIT) {
        WHY("ECOORD_WORKER_NCCL_REBUILD=init%s", roots_note);
        return 0;
    }
    if (!pv) {
        WHY("no previous communicator in this process");
        return 0;
    }
    if (!epoch_ok(pv))
        return ec_errorf(err, EC_EINVAL, "nccl plan: the previous epoch has no members or "
                         "processes");
    int pworld = pv->nmembers * pv->nproc;
    if (!in->have_shrink || in->nccl_version < ECW__NCCL_SHRINK_MIN) {
        WHY("NCCL %d.%d.%d has no ncclCommShrink (2.27 or newer)", in->nccl_version / 10000,
            in->nccl_version / 100 % 100, in->nccl_version % 100);
        return 0;
    }
    if (!in->prev_alive) {
        WHY("the communicator of epoch %llu was aborted", (unsigned long long)pv->number);
        return 0;
    }
    /* NCCL issue 2397: collectives failing after a shrink. */
    if (in->prev_errored && in->prev_shrunk) {
        WHY("the communicator of epoch %llu, itself a shrink, failed: a full init",
            (unsigned long long)pv->number);
        return 0;
    }
    bool unhealthy = in->prev_errored || in->prev_interrupted;
    if (unhealthy && in->mode == ECW__REBUILD_AUTO) {
        WHY("the communicator of epoch %llu %s, and auto shrinks only a healthy one "
            "(NCCL issue 2397; ECOORD_WORKER_NCCL_REBUILD=shrink tries NCCL_SHRINK_ABORT)",
            (unsigned long long)pv->number, in->prev_errored ? "failed"
            : "had a collective cut off");
        return 0;
    }
    if (in->prev_rank < 0 || in->prev_rank >= pworld) {
        WHY("this process had no rank in epoch %llu", (unsigned long long)pv->number);
        return 0;
    }
    int *excl = malloc(sizeof(int) * (size_t)pworld);
    if (!excl)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    int nex = 0, kept = 0;
    for (int old = 0; old < pworld; old++) {
        int m = old / pv->nproc, local = old % pv->nproc;
        int m2 = pv->node_ids[m] ? find_node(nx, pv->node_ids[m]) : -1;
        if (m2 < 0 || local >= nx->nproc) {
            excl[nex++] = old;
            if (old == in->prev_rank) {
                free(excl);
                WHY("this process (old rank %d) has no place in epoch %llu", old,
                    (unsigned long long)nx->number);
                return 0;
            }
            continue;
        }
        int want = m2 * nx->nproc + local;
        if (want != kept) {
            /* kept: the rank NCCL gives it, by the survivors' old order */
            free(excl);
            WHY("epoch %llu renumbers: old rank %d (node %s, local %d) becomes rank %d, a "
                "shrink would make it %d", (unsigned long long)nx->number, old, pv->node_ids[m],
                local, want, kept);
            return 0;
        }
        if (old == in->prev_rank && want != in->rank) {
            free(excl);
            WHY("this process had rank %d of epoch %llu, which maps to %d, but holds rank %d "
                "of epoch %llu", old, (unsigned long long)pv->number, want, in->rank,
                (unsigned long long)nx->number);
            return 0;
        }
        kept++;
    }
    if (kept < world) {
        free(excl);
        WHY("epoch %llu adds ranks (%d of its %d were not in epoch %llu)",
            (unsigned long long)nx->number, world - kept, world, (unsigned long long)pv->number);
        return 0;
    }
    if (nex == 0) {
        free(excl);
        WHY("epoch %llu has the same %d ranks as epoch %llu: nothing to exclude",
            (unsigned long long)nx->number, world, (unsigned long long)pv->number);
        return 0;
    }
    out->kind = ECW__PLAN_SHRINK;
    out->excluded = excl;
    out->nexcluded = nex;
    out->abort = unhealthy;
    /* out->nroots stays: the roots of the init should the shrink fail */
    WHY("epoch %llu only removes %d of epoch %llu's %d ranks%s", (unsigned long long)nx->number,
        nex, (unsigned long long)pv->number, pworld,
        !out->abort ? "" : in->prev_errored ? ", from a failed communicator (NCCL_SHRINK_ABORT)"
        : ", from a communicator cut off mid-collective (NCCL_SHRINK_ABORT)");
    return 0;
}

void ecw__nccl_plan_fallback(const ecw__nccl_plan_in_t *in, ecw__nccl_plan_t *out,
                             const char *why)
{
    init_plan(in, out);
    WHY("the shrink failed (%s): a full init", why ? why : "?");
}

void ecw__nccl_plan_free(ecw__nccl_plan_t *p)
{
    if (!p)
        return;
    free(p->excluded);
    p->excluded = NULL;
    p->nexcluded = 0;
}

void ecw__nccl_plan_format(const ecw__nccl_plan_in_t *in, const ecw__nccl_plan_t *plan,
                           char *buf, size_t len)
{
    snprintf(buf, len, "%s %d %llu %s", plan->kind == ECW__PLAN_SHRINK ? "shrink" : "init",
             plan->nroots, in->prev ? (unsigned long long)in->prev->number : 0ULL, plan->why);
}

static void become_init(ecw__nccl_plan_t *out)
{
    free(out->excluded);
    out->excluded = NULL;
    out->nexcluded = 0;
    out->abort = false;
    out->kind = ECW__PLAN_INIT;
}

int ecw__nccl_plan_follow(const ecw__nccl_plan_in_t *in, ecw__nccl_plan_t *out,
                          const char *line, bool *holds_up, ec_error_t *err)
{
    *holds_up = false;
    char kind[8] = "";
    int roots = 0, off = 0;
    unsigned long long from = 0;
    if (!line || sscanf(line, "%7s %d %llu %n", kind, &roots, &from, &off) < 3 || roots < 1 ||
        (strcmp(kind, "shrink") && strcmp(kind, "init")))
        return ec_errorf(err, EC_EPROTO, "rank 0 published '%.80s' as its NCCL plan, not "
                         "'<shrink|init> <roots> <epoch> <why>' (another ecoord version on rank "
                         "0?)", line ? line : "");
    int world = in->next->nmembers * in->next->nproc;
    if (roots > world)
        return ec_errorf(err, EC_EPROTO, "rank 0 inits NCCL with %d roots, more than the %d "
                         "ranks of epoch %llu", roots, world,
                         (unsigned long long)in->next->number);
    if (roots > 1 && !(in->have_scalable && in->nccl_version >= ECW__NCCL_SCALABLE_MIN))
        return ec_errorf(err, EC_EINVAL, "rank 0 inits NCCL with %d roots "
                         "(ncclCommInitRankScalable, NCCL 2.23 or newer), and this process's "
                         "NCCL %d has none: run one NCCL version on every node", roots,
                         in->nccl_version);
    out->nroots = roots;
    unsigned long long mine = in->prev ? (unsigned long long)in->prev->number : 0ULL;
    if (strcmp(kind, "shrink")) {
        if (out->kind == ECW__PLAN_SHRINK) {
            become_init(out);
            WHY("rank 0 inits: %.200s", line + off);
        }
        return 0;
    }
    if (out->kind == ECW__PLAN_SHRINK && mine == from)
        return 0;
    if (out->kind == ECW__PLAN_SHRINK) {
        become_init(out);
        WHY("rank 0 shrinks epoch %llu's communicator, this process holds epoch %llu's", from,
            mine);
    }
    *holds_up = true;
    return 0;
}
