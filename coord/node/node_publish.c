/* The leader's half: feed the planner from the model and publish what it
 * decides as fenced epoch transactions. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keys.h"
#include "clock.h"
#include "log.h"
#include "node_impl.h"
#include "epoch_delta.h"
#include "strbuf.h"
#include "planner.h"

typedef struct pub {
    void *buf;
    size_t len;
    void *dbuf; /* the same epoch as a delta from the current one (epochd) */
    size_t dlen;
    ec_epoch_parts_t parts; /* a split epoch's chunks and index (buf is its head) */
    uint64_t parts_of;      /* the epoch number parts belong to (number is 0 for a repair) */
    uint64_t number;
    int64_t expect_mod;
    bool above_seen; /* numbered above the epoch the planner saw (build_epoch) */
    bool first;
    uint64_t run;
    /* refused nodes to mark: key, value, lease, expected mod revision */
    size_t nref;
    struct {
        char key[EC_KEY_MAX];
        void *buf;
        size_t len;
        int64_t lease, mod;
    } *ref;
} pub_t;

/* A split epoch's chunks and index are deleted this many epochs later. */
#define EC_EPOCH_PARTS_KEEP 4

/* Records above this size have their history copy (epochs/<n>) written
 * apart from the epoch's transaction. */
#define EC_HISTORY_INLINE_MAX (256 * 1024)

static void pub_free(pub_t *p)
{
    free(p->buf);
    free(p->dbuf);
    for (size_t i = 0; i < p->nref; i++)
        free(p->ref[i].buf);
    free(p->ref);
    ec_epoch_parts_free(&p->parts);
    memset(p, 0, sizeof(*p));
}

/* ep as the value of `epoch` (p->buf) and, above --epoch_chunk_members
 * members, its chunks and index (p->parts, written before it). */
static int split_epoch(ec_node_t *n, const ec_epoch_t *ep, pub_t *p, ec_error_t *err)
{
    int chunk = n->o.epoch_chunk_members > 0 ? n->o.epoch_chunk_members : EC_EPOCH_CHUNK_DEFAULT;
    int rc = ec_epoch_split(ep, chunk, &p->parts, err);
    if (rc < 0)
        return rc;
    p->buf = p->parts.head;
    p->len = p->parts.head_len;
    p->parts.head = NULL;
    return 0;
}

/* A split epoch's chunks and index, in transactions fenced by our
 * leadership, each under etcd's request and operation limits (1.5 MiB,
 * 128 operations by default), before its head is published: a reader that
 * sees the head finds every part.  Parts of an epoch number a deposed
 * leader also wrote are overwritten; the head's digests tell a reader
 * which parts are its. */
static int write_parts(ec_node_t *n, const pub_t *p, ec_error_t *err)
{
    enum { OPS_MAX = 64 };
    const size_t bytes_max = 1024 * 1024;
    int total = p->parts.nchunks + p->parts.nbuckets;
    char (*keys)[EC_KEY_MAX] = malloc(OPS_MAX * sizeof(*keys));
    ec_op_t ops[OPS_MAX];
    if (!keys)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; i < total && rc == 0;) {
        size_t nops = 0, bytes = 0;
        while (i < total && nops < OPS_MAX) {
            bool chunk = i < p->parts.nchunks;
            int j = chunk ? i : i - p->parts.nchunks;
            size_t len = chunk ? p->parts.chunk_len[j] : p->parts.bucket_len[j];
            if (nops && bytes + len > bytes_max)
                break;
            if (chunk)
                ec_key_epoch_chunk(&n->keys, p->parts_of, j, keys[nops], EC_KEY_MAX);
            else
                ec_key_epoch_index(&n->keys, p->parts_of, j, keys[nops], EC_KEY_MAX);
            ops[nops] = (ec_op_t){.type = EC_OP_PUT, .key = keys[nops],
                                  .value = chunk ? p->parts.chunk[j] : p->parts.bucket[j],
                                  .value_len = len};
            nops++;
            bytes += len;
            i++;
        }
        ec_cmp_t f = ec__node_fence_leader(n);
        ec_txn_result_t r;
        if ((rc = ec_etcd_txn(n->c, &f, 1, ops, nops, NULL, 0, &r, err)) == 0) {
            if (!r.succeeded)
                rc = ec_errorf(err, EC_EFENCED, "the leader key changed");
            ec_txn_result_free(&r);
        }
    }
    free(keys);
    return rc;
}

/* Build the epoch record for decision d; coordinator thread. */
static int build_epoch(ec_node_t *n, const ec_plan_decision_t *d, ec_model_node_t **plan_nodes,
                       int64_t planner_us, uint64_t run, bool new_run, pub_t *p, ec_error_t *err)
{
    ec_epoch_t *ep = ec_epoch_new((int)d->n_members, n->o.nproc);
    if (!ep)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    /* Above every number seen, valid or not: a rejected epoch's number is
     * never reused, and after etcd lost its data the job numbers on above
     * what its members saw. */
    ep->number = d->epoch > n->m.epoch_seen_max ? d->epoch : n->m.epoch_seen_max + 1;
    ep->job_id = strdup(n->job_id);
    ep->np_min = n->o.np_min;
    ep->np_max = n->o.np_max;
    ep->reason = (ec_epoch_reason_t)d->reason;
    /* An epoch that re-forms the job after a process failed says which
     * (every node logs the reason): the newest failure record, once. */
    bool cause = n->pub.cause_text && d->reason != EC_REASON_START && d->reason != EC_REASON_JOIN &&
                 (!n->pub.cause_told || strcmp(n->pub.cause_told, n->pub.cause_key));
    ep->reason_detail = cause ? ec_asprintf("%s; cause: %s", d->why ? d->why : "", n->pub.cause_text)
                              : d->why ? strdup(d->why) : NULL;
    if (cause) {
        free(n->pub.cause_told);
        n->pub.cause_told = strdup(n->pub.cause_key);
    }
    ep->leader_id = strdup(n->node_id);
    ep->leader_rev = ec__elect_rev(n);
    ep->observed_at_ms = n->m.changed_at_ms;
    ep->decided_at_ms = ec_wall_ms();
    ep->planner_us = planner_us;
    for (size_t i = 0; i < d->n_members; i++) {
        const ec_node_rec_t *r = plan_nodes[d->members[i]]->rec;
        ec_member_t *m = &ep->members[i];
        m->node_id = strdup(r->node_id);
        m->host = strdup(r->host);
        for (int j = 0; j < n->o.nproc; j++)
            m->ports[j] = r->ports[j];
        m->master_port = r->master_port;
        m->incarnation = r->incarnation;
        m->probe_port = r->probe_port;
    }
    ep->published_at_ms = ec_wall_ms();
    ep->run = run;
    void *whole = NULL;
    size_t wlen = 0;
    int rc = split_epoch(n, ep, p, err);
    if (rc == 0 && p->parts.nchunks > 0) {
        /* a split epoch's delta carries its chunks' digests: a follower
         * holding a view checks the chunks it rebuilds against them */
        ec_epoch_split_t info;
        if (ec_epoch_head_info(p->buf, p->len, NULL, &info, NULL) == 1) {
            ep->chunk_members = info.chunk_members;
            ep->nchunks = info.nchunks;
            ep->chunk_digest = info.chunk_digest;
            info.chunk_digest = NULL;
        }
        ec_epoch_split_free(&info);
    }
    /* Followers' coordinators read the delta from the epoch they hold; its
     * digest covers the whole epoch, split or not. */
    if (rc == 0 && (rc = ec_epoch_encode_whole(ep, &whole, &wlen, err)) == 0 &&
        ec_epoch_delta_encode(n->m.epoch, ep, whole, wlen, &p->dbuf, &p->dlen, err) < 0)
        rc = err->code;
    free(whole);
    p->number = p->parts_of = ep->number;
    ec_epoch_free(ep);
    p->expect_mod = n->m.epoch_mod_rev;
    p->first = n->m.epoch == NULL || new_run; /* a run starts: status running */
    p->run = run;
    return rc;
}

static void plan_refusals(ec_node_t *n, const ec_plan_decision_t *d, ec_model_node_t **plan_nodes,
                          pub_t *p)
{
    if (!d->n_refused)
        return;
    p->ref = calloc(d->n_refused, sizeof(*p->ref));
    if (!p->ref) {
        /* the refused nodes learn why on a later plan */
        ec_log(EC_LOG_ERROR, "out of memory marking %zu refused nodes of job %s: trying again "
                             "in 1 s; free memory on this machine", d->n_refused, n->job_id);
        ec__node_wake_by(n, ec_mono_ms() + EC_NODE_IDLE_MS);
        return;
    }
    for (size_t i = 0; i < d->n_refused; i++) {
        ec_model_node_t *m = plan_nodes[d->refused[i].node];
        if (!m->rec || (m->rec->state == EC_NODE_FAILED && m->rec->reason &&
                        !strcmp(m->rec->reason, d->refused[i].why)))
            continue; /* already says so */
        ec_node_rec_t copy = *m->rec;
        copy.state = EC_NODE_FAILED;
        copy.reason = d->refused[i].why;
        if (ec_node_rec_encode(&copy, &p->ref[p->nref].buf, &p->ref[p->nref].len, NULL) < 0)
            continue;
        ec_key_node(&n->keys, m->id, p->ref[p->nref].key, EC_KEY_MAX);
        p->ref[p->nref].lease = m->lease;
        p->ref[p->nref].mod = m->mod_rev;
        p->nref++;
    }
}

/* Failure records outlive their nodes for the post-mortem, but not forever:
 * the leader keeps the newest EC_FAILURES_KEEP and deletes the older ones
 * with one fenced range delete. */
#define EC_FAILURES_KEEP 64

static void prune_failures(ec_node_t *n)
{
    char first_kept[EC_KEY_MAX], prefix[EC_KEY_MAX];
    bool over = n->m.nfails > EC_FAILURES_KEEP;
    if (over)
        snprintf(first_kept, sizeof(first_kept), "%s", n->m.fails[n->m.nfails - EC_FAILURES_KEEP]);
    size_t excess = over ? n->m.nfails - EC_FAILURES_KEEP : 0;
    if (!over)
        return;
    ec_key_failures_prefix(&n->keys, prefix, sizeof(prefix));
    ec_cmp_t f = ec__node_fence_leader(n);
    ec_op_t del = {.type = EC_OP_DELETE, .key = prefix, .range_end = first_kept};
    ec_error_t err = {0};
    if (ec_etcd_txn(n->c, &f, 1, &del, 1, NULL, 0, NULL, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot prune old failure records: %s", err.msg);
    else
        ec_log(EC_LOG_INFO, "pruned %zu failure records (the newest %d are kept)", excess,
               EC_FAILURES_KEEP);
}

/* why with each countdown ("in 4998 ms", "waiting 120 ms more") masked, so
 * that a wait whose only change is the time left is not logged again on
 * every re-plan, while one whose reason changes is.  malloc'd; NULL on no
 * memory. */
static char *wait_key(const char *why)
{
    char *k = strdup(why);
    if (!k)
        return NULL;
    char *w = k;
    for (const char *r = why; *r;) {
        size_t digits = strspn(r, "0123456789");
        if (digits && !strncmp(r + digits, " ms", 3)) {
            *w++ = '#';
            r += digits;
        } else if (digits) {
            memcpy(w, r, digits);
            w += digits;
            r += digits;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return k;
}

/* Keep n->pub.cause_text the newest failure record's line: read when a newer
 * record appears (coordinator thread). */
static void refresh_cause(ec_node_t *n)
{
    char key[EC_KEY_MAX] = "";
    if (n->m.nfails)
        snprintf(key, sizeof(key), "%s", n->m.fails[n->m.nfails - 1]);
    if (!key[0] || (n->pub.cause_key && !strcmp(n->pub.cause_key, key)))
        return;
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(n->c, key, &kv, &found, NULL, NULL) < 0)
        return; /* tried again on the next plan */
    char *text = NULL;
    ec_failure_t *f = NULL;
    if (found && ec_failure_decode(kv.value, kv.value_len, key, &f, NULL) == 0) {
        char what[128];
        ec_failure_what(f, what, sizeof(what));
        if (f->kind == EC_FAILURE_NODE_LOST)
            text = ec_asprintf("node %s lost", f->node_id);
        else
            text = ec_asprintf("node %s local rank %d (rank %d) %s%s%.200s", f->node_id,
                               f->local_rank, f->global_rank, what,
                               f->message && *f->message ? ": " : "",
                               f->message ? f->message : "");
    }
    ec_failure_free(f);
    if (found)
        ec_kv_free(&kv);
    free(n->pub.cause_key);
    free(n->pub.cause_text);
    n->pub.cause_key = strdup(key);
    n->pub.cause_text = text;
}

/* What a plan decided, for the steps after it. */
typedef struct planned {
    ec_plan_action_t action;
    int64_t wait_ms;
    char *why;                /* the planner's, malloc'd */
    ec_plan_why_t why_code;
    bool complete, repair;    /* repair: put the last valid epoch back */
    uint64_t cur_epoch, run;
} planned_t;

/* The run the next epoch belongs to (coordinator thread); *new_run: a job whose
 * status is final (completed or failed) and newer than its epoch's run is
 * being launched again, so its next epoch is the first of run status_run +
 * 1, formed only from agents of that run (agents of the ended run are on
 * their way out). */
static uint64_t run_to_plan(ec_node_t *n, bool *new_run)
{
    bool final = ec_job_state_ended(n->m.status_state);
    uint64_t epoch_run = n->m.epoch ? n->m.epoch->run : 0;
    *new_run = final && n->m.status_run >= epoch_run;
    /* With neither an epoch nor a status (etcd lost its data), the run is
     * the one this agent registered for. */
    return *new_run ? n->m.status_run + 1
                    : (epoch_run ? epoch_run
                                 : (n->m.status_run ? n->m.status_run : (n->run ? n->run : 1)));
}

/* The nodes the plan may take (coordinator thread): registered by an agent for
 * `run` and not held out after an eviction; into pn[] (the model's) and
 * nodes[] (the planner's view); their count. */
static size_t eligible_nodes(ec_node_t *n, uint64_t run, int64_t now, ec_model_node_t **pn,
                             ec_plan_node_t *nodes)
{
    size_t nn = 0;
    for (size_t i = 0; i < n->m.nnodes; i++) {
        /* A record without a lease was not written by an agent (ours are
         * all leased) and would never expire: never a member. */
        if (!n->m.nodes[i].rec || n->m.nodes[i].rec->run != run || n->m.nodes[i].lease == 0)
            continue;
        /* Evicted as silent and not answering a probe since: not while
         * the members that reported it still cannot reach it. */
        if (ec__node_held_out(n, n->m.nodes[i].id))
            continue;
        pn[nn] = &n->m.nodes[i];
        const ec_model_node_t *x = &n->m.nodes[i];
        nodes[nn] = ec_model_plan_view(x->id, x->rec, x->create_rev);
        /* How long it has held up admissions: since we first saw it booting,
         * whatever its incarnation (a boot its agent restarts is one wait) */
        if (nodes[nn].booting) {
            if (!n->m.nodes[i].boot_seen_ms)
                n->m.nodes[i].boot_seen_ms = now;
            nodes[nn].booting_ms = now - n->m.nodes[i].boot_seen_ms;
        } else {
            n->m.nodes[i].boot_seen_ms = 0;
        }
        nn++;
    }
    return nn;
}

/* Someone overwrote or deleted the epoch: put the last valid one back, under
 * our leadership (readers check that the epoch names the leadership current
 * at its revision).  Coordinator thread. */
static void put_back(ec_node_t *n, pub_t *p)
{
    ec_epoch_t *ep = ec_epoch_dup(n->m.epoch);
    if (ep) {
        free(ep->leader_id);
        free(ep->job_id);
        ep->leader_id = strdup(n->node_id);
        ep->job_id = strdup(n->job_id);
        ep->leader_rev = ec__elect_rev(n);
        if (split_epoch(n, ep, p, NULL) < 0)
            p->buf = NULL;
        p->parts_of = ep->number;
        ec_epoch_free(ep);
    }
    p->expect_mod = n->m.epoch_mod_rev;
    p->number = 0;
}

/* Plan the next step on the model (coordinator thread): the decision in *o, the
 * epoch to write (or the valid one to put back) and the refusals in *p.
 * false: nothing planned (out of memory: the loop plans again later). */
static bool plan(ec_node_t *n, pub_t *p, planned_t *o)
{
    ec_error_t err = {0};
    ec_plan_decision_t *d = NULL;
    ec__node_drain(n); /* everything queued by now, in this one plan */
    bool new_run;
    o->run = run_to_plan(n, &new_run);
    int64_t now = ec_mono_ms();
    ec_model_node_t **pn = calloc(n->m.nnodes ? n->m.nnodes : 1, sizeof(*pn));
    ec_plan_node_t *nodes = calloc(n->m.nnodes ? n->m.nnodes : 1, sizeof(*nodes));
    ec_plan_member_t *mem = NULL;
    size_t nn = pn && nodes ? eligible_nodes(n, o->run, now, pn, nodes) : 0;
    ec_plan_input_t in = EC_PLAN_INPUT_INIT;
    in.config.np_min = n->o.np_min;
    in.config.np_max = n->o.np_max;
    in.config.nproc = n->o.nproc;
    in.config.elastic_timeout_ms = n->o.elastic_timeout_ms;
    in.config.replace_wait_ms = n->o.replace_wait_ms;
    in.config.join_ready_timeout_ms = n->o.join_ready_timeout_ms;
    in.config.fail_fast = n->o.fail_fast;
    in.nodes = nodes;
    in.n_nodes = nn;
    if (n->m.epoch) {
        mem = calloc((size_t)n->m.epoch->nmembers, sizeof(*mem));
        for (int i = 0; mem && i < n->m.epoch->nmembers; i++) {
            mem[i].node_id = n->m.epoch->members[i].node_id;
            mem[i].incarnation = n->m.epoch->members[i].incarnation;
        }
        in.epoch.number = n->m.epoch->number;
        in.epoch.members = mem;
        in.epoch.n_members = (size_t)n->m.epoch->nmembers;
        o->cur_epoch = n->m.epoch->number;
    }
    if (!pn || !nodes || (n->m.epoch && n->m.epoch->nmembers > 0 && !mem)) {
        /* A plan without them would see no node, or no member, and could
         * publish an epoch without the job's nodes: plan again later. */
        ec__node_wake_by(n, now + EC_NODE_IDLE_MS);
        free(pn);
        free(nodes);
        free(mem);
        ec_log(EC_LOG_ERROR, "out of memory planning job %s's next epoch (%zu nodes): not "
                             "planning now, trying again in 1 s; free memory on this machine",
               n->job_id, n->m.nnodes);
        return false;
    }
    uint64_t fp = ec_plan_fingerprint(&in.config, nodes, nn);
    if (fp != n->pub.fingerprint) {
        n->pub.fingerprint = fp;
        n->pub.fp_since = now;
    }
    in.since_eligible_change_ms = now - n->pub.fp_since;
    in.since_member_missing_ms = n->pub.missing_since < 0 ? -1 : now - n->pub.missing_since;
    in.left_ids = (const char *const *)n->m.left;
    in.n_left = n->m.nleft;
    in.new_run = new_run && n->m.epoch;
    o->repair = n->m.epoch_bad && n->m.epoch_raw;
    int64_t plan_t0 = ec_mono_us();
    atomic_fetch_add(&n->pub.plans, 1);
    int rc = ec_plan(&in, &d, &err);
    int64_t planner_us = ec_mono_us() - plan_t0;
    if (rc == 0) {
        o->action = d->action;
        o->wait_ms = d->wait_ms;
        o->why = d->why ? strdup(d->why) : NULL;
        o->why_code = d->why_code;
        o->complete = o->action == EC_PLAN_COMPLETE;
        if (d->n_departed > 0 && n->pub.missing_since < 0)
            n->pub.missing_since = now;
        else if (d->n_departed == 0)
            n->pub.missing_since = -1;
        plan_refusals(n, d, pn, p);
        if (o->action == EC_PLAN_PUBLISH) {
            if (build_epoch(n, d, pn, planner_us, o->run, new_run, p, &err) < 0) {
                ec_log(EC_LOG_ERROR, "cannot build epoch %" PRIu64 ": %s", d->epoch, err.msg);
                o->action = EC_PLAN_WAIT;
            }
            p->above_seen = p->number > d->epoch;
        } else if (o->repair) {
            put_back(n, p);
        }
    } else {
        ec_log(EC_LOG_ERROR, "planner refused its input: %s", err.msg);
    }
    ec_plan_decision_free(d);
    free(pn);
    free(nodes);
    free(mem);
    return true;
}

/* Tell refused nodes why, in their own record (their lease). */
static void write_refusals(ec_node_t *n, const pub_t *p)
{
    for (size_t i = 0; i < p->nref; i++) {
        ec_cmp_t same = {.key = p->ref[i].key, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                         .number = p->ref[i].mod};
        ec_op_t put = {.type = EC_OP_PUT, .key = p->ref[i].key, .value = p->ref[i].buf,
                       .value_len = p->ref[i].len, .lease = p->ref[i].lease};
        ec_cmp_t cm[2] = {ec__node_fence_leader(n), same};
        ec_txn_result_t r;
        bool done = false;
        if (ec_etcd_txn(n->c, cm, 2, &put, 1, NULL, 0, &r, NULL) == 0) {
            done = r.succeeded;
            ec_txn_result_free(&r);
        }
        if (!done) {
            /* The record moved meanwhile (say, a progress write, which is
             * not planned for): refuse it again on a later plan. */
            ec__node_wake_by(n, ec_mono_ms() + EC_NODE_RETRY_MS);
        }
    }
}

/* An epoch's transaction (write_epoch): its conditions, its operations and
 * the keys and buffers they point into. */
typedef struct epoch_txn {
    ec_cmp_t cm[2];
    ec_op_t ops[10];
    size_t nops;
    char hist[EC_KEY_MAX], keep_from[EC_KEY_MAX], parts_from[2][EC_KEY_MAX],
        parts_end[2][EC_KEY_MAX];
    void *stbuf;     /* the first status of a run, encoded */
    bool hist_apart; /* the history copy goes in a transaction of its own */
} epoch_txn_t;

/* Build p's transaction, fenced by our leadership and the epoch's
 * revision: the epoch, the leader key again, its delta, its history copy,
 * what it supersedes pruned, a run's first status.  Free t->stbuf after. */
static void epoch_txn(ec_node_t *n, const pub_t *p, epoch_txn_t *t)
{
    memset(t, 0, sizeof(*t));
    t->cm[0] = ec__node_fence_leader(n);
    t->cm[1] = (ec_cmp_t){.key = n->k_epoch, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                          .number = p->expect_mod};
    ec_op_t *ops = t->ops;
    size_t nops = 0;
    ops[nops++] = (ec_op_t){.type = EC_OP_PUT, .key = n->k_epoch, .value = p->buf, .value_len = p->len};
    /* The leader key, put again unchanged (same value, same lease; its
     * create revision, the fencing token, stays): followers watch it
     * and the epoch separately, and its event at the epoch's revision
     * tells them, without a read, which leadership held the key when
     * the epoch was written (model.c, resolve_pending). */
    ops[nops++] = (ec_op_t){.type = EC_OP_PUT, .key = n->k_leader, .value = n->node_id,
                            .value_len = strlen(n->node_id), .lease = ec_node_lease(n)};
    if (p->number > 0 && p->dbuf)
        ops[nops++] = (ec_op_t){.type = EC_OP_PUT, .key = n->k_epochd, .value = p->dbuf,
                                .value_len = p->dlen};
    size_t stlen = 0;
    /* The history copy rides in the epoch's transaction while the
     * record is small; a large one is written in a transaction of its
     * own right after (same fence), so that no request carries the
     * record twice and a record up to EC_RECORD_MAX_BYTES fits etcd's
     * request limit.  (A leader deposed between the two leaves that
     * epoch without its history copy: history is for post-mortems, not
     * for readers of the epoch.) */
    t->hist_apart = p->number > 0 && p->len > EC_HISTORY_INLINE_MAX;
    if (p->number > 0)
        ec_key_epoch_history(&n->keys, p->number, t->hist, sizeof(t->hist));
    if (p->number > 0) {
        if (!t->hist_apart)
            ops[nops++] = (ec_op_t){.type = EC_OP_PUT, .key = t->hist, .value = p->buf,
                                    .value_len = p->len};
        int keep = n->o.history_keep > 0 ? n->o.history_keep : 64;
        if (p->number > (uint64_t)keep) {
            ec_key_epoch_history(&n->keys, p->number - (uint64_t)keep, t->keep_from,
                                 sizeof(t->keep_from));
            ops[nops++] = (ec_op_t){.type = EC_OP_DELETE, .key = n->k_epochs, .range_end = t->keep_from};
        }
        /* A split epoch's parts are kept for the last EC_EPOCH_PARTS_KEEP
         * epochs only (a reader of an older head follows a newer epoch
         * anyway); history keeps the heads, which say all that history
         * is read for (number, run, reason). */
        if (p->number > EC_EPOCH_PARTS_KEEP) {
            uint64_t old = p->number - EC_EPOCH_PARTS_KEEP;
            static const char *const part[2] = {"index/", "members/"};
            for (int k = 0; k < 2; k++) {
                int kl = ec_key_epoch_worker_prefix(&n->keys, old, t->parts_from[k], EC_KEY_MAX);
                if (kl < 0 || (size_t)kl + strlen(part[k]) >= EC_KEY_MAX)
                    continue;
                strcat(t->parts_from[k], part[k]);
                snprintf(t->parts_end[k], EC_KEY_MAX, "%s", t->parts_from[k]);
                t->parts_end[k][strlen(t->parts_end[k]) - 1]++; /* "members/" -> "members0" */
                ops[nops++] = (ec_op_t){.type = EC_OP_DELETE, .key = t->parts_from[k],
                                        .range_end = t->parts_end[k]};
            }
        }
        if (p->first) {
            ec_job_status_t st = {.state = EC_JOB_RUNNING, .epoch = p->number,
                                  .updated_at_ms = ec_wall_ms(), .updated_by = n->node_id,
                                  .run = p->run, .leader_id = n->node_id,
                                  .leader_rev = ec__elect_rev(n)};
            if (ec_job_status_encode(&st, &t->stbuf, &stlen, NULL) == 0)
                ops[nops++] = (ec_op_t){.type = EC_OP_PUT, .key = n->k_status, .value = t->stbuf,
                                        .value_len = stlen};
        }
    }
    t->nops = nops;
}

/* Write the epoch planned (or the valid one put back over a bad value),
 * its delta, history copy and first status, in one transaction fenced by
 * our leadership and the epoch's revision; prune what it supersedes. */
static void write_epoch(ec_node_t *n, pub_t *p, ec_plan_why_t why_code)
{
    ec_error_t err = {0};
    epoch_txn_t t;
    epoch_txn(n, p, &t);
    ec_txn_result_t r;
    int64_t t_send = ec_wall_ms();
    int rc = ec_etcd_txn(n->c, t.cm, 2, t.ops, t.nops, NULL, 0, &r, &err);
    free(t.stbuf);
    if (rc < 0) {
        ec_log(EC_LOG_WARN, "publishing epoch %" PRIu64 " failed: %s; will retry", p->number, err.msg);
        ec__node_wake_by(n, ec_mono_ms() + EC_NODE_PUBLISH_RETRY_MS);
    } else {
        if (r.succeeded && t.hist_apart) {
            ec_cmp_t f = ec__node_fence_leader(n);
            ec_op_t put = {.type = EC_OP_PUT, .key = t.hist, .value = p->buf, .value_len = p->len};
            ec_error_t herr = {0};
            if (ec_etcd_txn(n->c, &f, 1, &put, 1, NULL, 0, NULL, &herr) < 0)
                ec_log(EC_LOG_WARN, "cannot write the history copy of epoch %" PRIu64 ": %s",
                       p->number, herr.msg);
        }
        if (r.succeeded) {
            if (p->number > 0) {
                /* the details come with the epoch itself, on every node */
                ec__node_emit(n, "+published epoch %" PRIu64 " (rule %s, txn %lld ms)%s",
                              p->number, ec_plan_why_name(why_code),
                              (long long)(ec_wall_ms() - t_send),
                              p->above_seen ? " above every epoch seen" : "");
                if (p->first)
                    n->pub.wrote_final = false; /* a new run: its end is written again */
                for (size_t i = 0; i < n->m.nleft; i++)
                    free(n->m.left[i]);
                n->m.nleft = 0;
                n->pub.missing_since = -1;
            } else {
                ec__node_emit(n, "+epoch-repaired: restored the last valid epoch over a bad value");
            }
        } else {
            /* Either the leader key or the epoch moved under us. */
            ec_kv_t kv;
            bool found = false;
            ec_etcd_get(n->c, n->k_leader, &kv, &found, NULL, NULL);
            if (!found || kv.create_revision != ec__elect_rev(n))
                ec__node_step_down(n, "the leader key changed (epoch write fenced)");
            else
                ec_log(EC_LOG_INFO, "epoch changed under us; re-planning");
            ec_kv_free(&kv);
        }
        ec_txn_result_free(&r);
    }
}

/* Say what the job waits for (or that it completed or failed) and act on it:
 * a timed wait wakes the loop, an end is written to the status once. */
static void say_wait(ec_node_t *n, const planned_t *o)
{
    /* Say what the job waits for whenever that changes, timed waits too
     * (enough nodes, starting after --elastic_timeout): otherwise the
     * last untimed wait ("waiting for 1 more node") stays the console's
     * last word until the epoch. */
    char *key = o->why ? wait_key(o->why) : NULL;
    /* Nothing to tell: a plain steady state (right after every epoch),
     * or anything once the run is over (its nodes leaving). */
    bool quiet = (o->why && !strcmp(o->why, "steady")) ||
                 (n->pub.wrote_final && o->action != EC_PLAN_FAIL && !o->complete) ||
                 (ec_job_state_ended(n->m.status_state) && n->m.status_run >= o->run);
    if (key && quiet) {
        free(n->pub.last_wait);
        n->pub.last_wait = key;
        key = NULL;
    }
    if (key && (!n->pub.last_wait || strcmp(n->pub.last_wait, key))) {
        ec__node_emit(n, "%s %s (rule %s)",
                      o->action == EC_PLAN_FAIL ? "+fail:" : o->complete ? "+complete:" : "+wait:", o->why,
                      ec_plan_why_name(o->why_code));
        free(n->pub.last_wait);
        n->pub.last_wait = key;
        key = NULL;
    }
    free(key);
    if (o->action == EC_PLAN_WAIT_UNTIL) {
        ec__node_wake_by(n, ec_mono_ms() + (o->wait_ms > 0 ? o->wait_ms : 1));
    } else if ((o->complete || o->action == EC_PLAN_FAIL) && !n->pub.wrote_final) {
        if (ec__node_write_status(n, o->complete ? EC_JOB_COMPLETED : EC_JOB_FAILED,
                                  o->complete ? NULL : o->why, o->cur_epoch, o->run, true) == 0)
            n->pub.wrote_final = true;
    }
}

void ec__node_plan_and_act(ec_node_t *n)
{
    /* Plan only on a model that has seen our last eviction (its deletion
     * event comes a moment after the transaction): planned before it, a
     * restart epoch would still list the node just evicted. */
    ec__node_drain(n);
    bool behind = ec__evict_unseen(n);
    if (behind)
        return; /* the deletion's event wakes the loop */
    prune_failures(n);
    refresh_cause(n);
    pub_t p = {0};
    planned_t o = {.action = EC_PLAN_WAIT, .why_code = EC_PLAN_WHY_STEADY};
    if (!plan(n, &p, &o))
        return;
    write_refusals(n, &p);
    ec_error_t err = {0};
    bool writes = o.action == EC_PLAN_PUBLISH || (o.repair && p.buf);
    if (writes && p.parts.nchunks > 0 && write_parts(n, &p, &err) < 0) {
        ec_log(EC_LOG_WARN, "writing the %d chunks and %d index buckets of epoch %" PRIu64
               " failed: %s; will retry", p.parts.nchunks, p.parts.nbuckets, p.parts_of, err.msg);
        ec__node_wake_by(n, ec_mono_ms() + EC_NODE_PUBLISH_RETRY_MS);
    } else if (writes) {
        write_epoch(n, &p, o.why_code);
    } else {
        say_wait(n, &o);
    }
    free(o.why);
    pub_free(&p);
}

/* ---- publishing's state, for the loop and the other concerns ------------ */

void ec__pub_on_lead(ec_node_t *n)
{
    n->pub.fp_since = ec_mono_ms();
    n->pub.fingerprint = 0;
    n->pub.missing_since = -1;
    n->pub.wrote_final = false;
}

void ec__pub_fini(ec_node_t *n)
{
    free(n->pub.last_wait);
    free(n->pub.cause_key);
    free(n->pub.cause_text);
    free(n->pub.cause_told);
}

uint64_t ec_node_plans(ec_node_t *n)
{
    return atomic_load(&n->pub.plans);
}
