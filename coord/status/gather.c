/* `ecoord status`: one listing of the job root decoded into a snapshot
 * (status_impl.h).  Pure: every record that does not decode is kept with
 * the decoder's message, to be shown as such; only running out of memory
 * fails.
 */
#define _GNU_SOURCE /* strndup */
#include "status_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "epoch_fetch.h"
#include "planner.h"
#include "strbuf.h"

void ec__status_snap_free(st_snap_t *s)
{
    if (!s)
        return;
    int saved = errno;
    ec_epoch_free(s->epoch);
    free(s->epoch_error);
    ec_job_status_free(s->status);
    free(s->status_error);
    free(s->leader);
    for (size_t i = 0; i < s->nrows; i++) {
        free(s->rows[i].node);
        ec_node_rec_free(s->rows[i].rec);
        free(s->rows[i].error);
    }
    free(s->rows);
    for (size_t i = 0; i < s->nfails; i++) {
        free(s->fails[i].key);
        ec_failure_free(s->fails[i].f);
        free(s->fails[i].error);
    }
    free(s->fails);
    memset(s, 0, sizeof(*s));
    errno = saved;
}

static bool key_is(const ec_kv_t *kv, const char *key)
{
    return kv->key_len == strlen(key) && !memcmp(kv->key, key, kv->key_len);
}

static bool key_under(const ec_kv_t *kv, const char *prefix)
{
    size_t n = strlen(prefix);
    return kv->key_len > n && !memcmp(kv->key, prefix, n);
}

/* Members first in M_id order, then the rest in registration order. */
static int row_cmp(const void *a, const void *b)
{
    const st_row_t *x = a, *y = b;
    if ((x->m_id >= 0) != (y->m_id >= 0))
        return x->m_id >= 0 ? -1 : 1;
    if (x->m_id >= 0)
        return x->m_id < y->m_id ? -1 : x->m_id > y->m_id;
    if (x->create_rev != y->create_rev)
        return x->create_rev < y->create_rev ? -1 : 1;
    return strcmp(x->node, y->node);
}

/* Failure keys are failures/<seq>/... with seq zero-padded: descending key
 * order is newest first. */
static int fail_cmp(const void *a, const void *b)
{
    return -strcmp(((const st_fail_t *)a)->key, ((const st_fail_t *)b)->key);
}

/* ---- the root cause ------------------------------------------------------ */

/* The root cause, as torchrun marks it among failed ranks: the earliest
 * failure (by time, ties by key) of the current run, across all nodes.
 *
 * The current run is the highest run any record names (the job status, the
 * current epoch, the failure records): runs only grow, and a job launched
 * again writes its new run into epochs and failures before its status.  A
 * failure record belongs to it when it names that run; one written before
 * records carried a run (run 0) belongs to it when its epoch is at or
 * after the run's first epoch (epoch numbers continue across runs), or
 * always when no epoch record of the run is left to say where it began. */
typedef struct st_epref {
    uint64_t number, run;
} st_epref_t;

static void find_root_cause(st_snap_t *s, const st_epref_t *eps, size_t neps)
{
    uint64_t run = 0;
    if (s->status && s->status->run > run)
        run = s->status->run;
    if (s->epoch && s->epoch->run > run)
        run = s->epoch->run;
    for (size_t i = 0; i < s->nfails; i++)
        if (s->fails[i].f && s->fails[i].f->run > run)
            run = s->fails[i].f->run;
    uint64_t first = 0;
    if (s->epoch && s->epoch->run == run)
        first = s->epoch->number;
    for (size_t i = 0; i < neps; i++)
        if (eps[i].run == run && (!first || eps[i].number < first))
            first = eps[i].number;
    s->run = run;
    s->run_first_epoch = first;
    s->root = -1;
    for (size_t i = 0; i < s->nfails; i++) {
        const ec_failure_t *f = s->fails[i].f;
        if (!f)
            continue;
        bool ours = f->run ? f->run == run : (!first || f->epoch >= first);
        if (!ours)
            continue;
        if (s->root < 0) {
            s->root = (long)i;
            continue;
        }
        const st_fail_t *r = &s->fails[s->root];
        if (f->time_ms < r->f->time_ms ||
            (f->time_ms == r->f->time_ms && strcmp(s->fails[i].key, r->key) < 0))
            s->root = (long)i;
    }
}

/* ---- the listing, key by key --------------------------------------------- */

/* One listing being decoded: the snapshot, the keys it knows, and (number,
 * run) of every epoch record, for the current run's first epoch (failure
 * records written before they carried a run are placed by their epoch
 * number). */
typedef struct gather {
    st_snap_t *s;
    const ec_keys_t *k;
    const ec_kv_list_t *l;
    char k_nodes[EC_KEY_MAX], k_leader[EC_KEY_MAX], k_epoch[EC_KEY_MAX],
        k_status[EC_KEY_MAX], k_fail[EC_KEY_MAX];
    size_t rcap, fcap;
    st_epref_t *eps;
    size_t neps, epcap;
} gather_t;

/* Room in *arr (n elements of size bytes in use, *cap allocated) for one
 * more.  false: out of memory (*arr unchanged). */
static bool grow(void *arr, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 16;
    void *p = realloc(*(void **)arr, nc * size);
    if (!p)
        return false;
    *(void **)arr = p;
    *cap = nc;
    return true;
}

static st_row_t *add_row(gather_t *g)
{
    st_snap_t *s = g->s;
    if (!grow(&s->rows, s->nrows, &g->rcap, sizeof(*s->rows)))
        return NULL;
    st_row_t *r = &s->rows[s->nrows++];
    memset(r, 0, sizeof(*r));
    r->m_id = -1;
    return r;
}

static st_fail_t *add_fail(gather_t *g)
{
    st_snap_t *s = g->s;
    if (!grow(&s->fails, s->nfails, &g->fcap, sizeof(*s->fails)))
        return NULL;
    st_fail_t *f = &s->fails[s->nfails++];
    memset(f, 0, sizeof(*f));
    return f;
}

/* Keep the message of a record that did not decode (fallback when the
 * decoder gave none) in *dst.  false: out of memory. */
static bool keep_error(const ec_error_t *e, const char *fallback, char **dst)
{
    if (e->code == EC_ENOMEM)
        return false;
    return (*dst = strdup(e->msg[0] ? e->msg : fallback)) != NULL;
}

/* nodes/<id> (parsed: id holds it) or a key under nodes/ that is not one:
 * a row, with its record or why there is none.  false: out of memory. */
static bool gather_node(gather_t *g, const ec_kv_t *kv, bool parsed, const char *id)
{
    ec_error_t e;
    ec_error_clear(&e);
    st_row_t *r = add_row(g);
    if (!r)
        return false;
    r->create_rev = kv->create_revision;
    r->foreign = kv->lease == 0;
    r->node = parsed ? strdup(id) : strdup(kv->key + strlen(g->k_nodes));
    if (!r->node)
        return false;
    if (!parsed) {
        r->error = ec_asprintf("key %s is not nodes/<node id> (another tool may have "
                               "written it)", kv->key);
    } else if (ec_node_rec_decode(kv->value, kv->value_len, kv->key, &r->rec, &e) < 0) {
        if (!keep_error(&e, "record does not decode", &r->error))
            return false;
    } else if (strcmp(r->rec->node_id, id)) {
        r->error = ec_asprintf("key %s holds the record of node '%s'", kv->key,
                               r->rec->node_id);
        ec_node_rec_free(r->rec);
        r->rec = NULL;
    }
    return r->rec || r->error;
}

/* failures/<seq>/...: a failure, or why it did not decode.  false: out of
 * memory. */
static bool gather_failure(gather_t *g, const ec_kv_t *kv)
{
    ec_error_t e;
    ec_error_clear(&e);
    st_fail_t *f = add_fail(g);
    if (!f || !(f->key = strdup(kv->key)))
        return false;
    if (ec_failure_decode(kv->value, kv->value_len, kv->key, &f->f, &e) < 0)
        return keep_error(&e, "failure record does not decode", &f->error);
    return true;
}

/* epochs/<n>: only its number and run are used (a split epoch's head says
 * them; its chunks are kept for the last few epochs only).  History is not
 * shown: a corrupt copy is skipped.  false: out of memory. */
static bool gather_history(gather_t *g, const ec_kv_t *kv)
{
    ec_error_t e;
    ec_error_clear(&e);
    ec_epoch_t *h = NULL;
    if (ec_epoch_decode_view(kv->value, kv->value_len, kv->key, &h, &e) < 0)
        return e.code != EC_ENOMEM;
    if (!grow(&g->eps, g->neps, &g->epcap, sizeof(*g->eps))) {
        ec_epoch_free(h);
        return false;
    }
    g->eps[g->neps].number = h->number;
    g->eps[g->neps++].run = h->run;
    ec_epoch_free(h);
    return true;
}

/* One key of the listing into the snapshot.  false: out of memory. */
static bool gather_kv(gather_t *g, const ec_kv_t *kv)
{
    st_snap_t *s = g->s;
    char id[EC_NODE_ID_MAX + 1];
    ec_error_t e;
    ec_error_clear(&e);
    bool parsed = ec_key_parse_node(g->k, kv->key, kv->key_len, id, sizeof(id)) >= 0;
    if (parsed || key_under(kv, g->k_nodes))
        return gather_node(g, kv, parsed, id);
    if (key_is(kv, g->k_leader)) {
        free(s->leader);
        return (s->leader = strndup((const char *)kv->value, kv->value_len)) != NULL;
    }
    if (key_is(kv, g->k_epoch)) {
        if (ec_epoch_from_listing(g->k, g->l, kv->value, kv->value_len, kv->key, &s->epoch,
                                  &e) < 0)
            return keep_error(&e, "epoch does not decode", &s->epoch_error);
        return true;
    }
    if (key_is(kv, g->k_status)) {
        if (ec_job_status_decode(kv->value, kv->value_len, kv->key, &s->status, &e) < 0)
            return keep_error(&e, "status does not decode", &s->status_error);
        return true;
    }
    if (key_under(kv, g->k_fail))
        return gather_failure(g, kv);
    if (ec_key_parse_epoch(g->k, kv->key, kv->key_len, NULL) == EC_KEY_EPOCH_HISTORY)
        return gather_history(g, kv);
    return true; /* epochs/...: worker keys are not shown */
}

/* ---- after the listing ---------------------------------------------------- */

/* Attach the epoch's members to their rows; a member without a record is
 * "gone" (its lease expired or it left since the epoch).  false: out of
 * memory. */
static bool attach_members(gather_t *g)
{
    st_snap_t *s = g->s;
    for (int m = 0; s->epoch && m < s->epoch->nmembers; m++) {
        const char *mid = s->epoch->members[m].node_id;
        st_row_t *r = NULL;
        for (size_t i = 0; i < s->nrows && !r; i++)
            if (!strcmp(s->rows[i].node, mid))
                r = &s->rows[i];
        if (!r) {
            if (!(r = add_row(g)) || !(r->node = strdup(mid)))
                return false;
            r->create_rev = INT64_MAX;
        }
        r->m_id = m;
    }
    return true;
}

/* Standby: registered, eligible (the planner's own definition), not a
 * member.  Without an epoch every eligible node is waiting for the first
 * one, which is not standing by. */
static void mark_standbys(st_snap_t *s)
{
    for (size_t i = 0; i < s->nrows; i++) {
        st_row_t *r = &s->rows[i];
        if (!r->rec || r->m_id >= 0 || !s->epoch || r->foreign)
            continue;
        ec_plan_config_t pc = {.np_min = 1, .np_max = 1, .nproc = s->epoch->nproc};
        ec_plan_node_t pn = {.node_id = r->rec->node_id, .nproc = (uint32_t)r->rec->nproc,
                             .incarnation = r->rec->incarnation,
                             .create_revision = r->create_rev, .state = r->rec->state};
        r->standby = ec_plan_node_eligible(&pc, &pn) != 0;
    }
}

int ec__status_gather(st_snap_t *s, const ec_keys_t *k, const ec_kv_list_t *l, ec_error_t *err)
{
    gather_t g = {.s = s, .k = k, .l = l};
    ec_key_nodes_prefix(k, g.k_nodes, sizeof(g.k_nodes));
    ec_key_leader(k, g.k_leader, sizeof(g.k_leader));
    ec_key_epoch(k, g.k_epoch, sizeof(g.k_epoch));
    ec_key_status(k, g.k_status, sizeof(g.k_status));
    ec_key_failures_prefix(k, g.k_fail, sizeof(g.k_fail));
    memset(s, 0, sizeof(*s));
    s->revision = l->revision;
    s->nkeys = l->n;
    s->root = -1;
    for (size_t i = 0; i < l->n; i++)
        if (!gather_kv(&g, &l->kvs[i]))
            goto nomem;
    if (!attach_members(&g))
        goto nomem;
    mark_standbys(s);
    if (s->nrows)
        qsort(s->rows, s->nrows, sizeof(*s->rows), row_cmp);
    if (s->nfails)
        qsort(s->fails, s->nfails, sizeof(*s->fails), fail_cmp);
    find_root_cause(s, g.eps, g.neps);
    free(g.eps);
    return 0;
nomem:
    free(g.eps);
    ec__status_snap_free(s);
    return ec_errorf(err, EC_ENOMEM, "out of memory decoding the job's keys");
}
