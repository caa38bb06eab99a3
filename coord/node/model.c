/* The job model's pure core (model.h): one key's change in, the model's
 * new state and the effects the caller acts on out.  No etcd calls, no
 * clock reads: the times come with each event, the reads an epoch's check
 * needs are the caller's (node_model.c: ec__node_verify_epoch), their
 * outcome handed back through ec_model_verify_done and ec_model_gap_done. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "model.h"

size_t ec_model_node_find(const ec_model_t *m, const char *id, bool *found)
{
    size_t lo = 0, hi = m->nnodes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(m->nodes[mid].id, id);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

void ec_model_note_seen(ec_model_t *m, uint64_t number)
{
    if (number > m->epoch_seen_max && number < UINT64_MAX / 2)
        m->epoch_seen_max = number;
}

static void mnode_clear(ec_model_node_t *x)
{
    free(x->id);
    ec_node_rec_free(x->rec);
}

static void mnode_remove(ec_model_t *m, size_t i)
{
    mnode_clear(&m->nodes[i]);
    memmove(&m->nodes[i], &m->nodes[i + 1], (m->nnodes - i - 1) * sizeof(ec_model_node_t));
    m->nnodes--;
}

ec_plan_node_t ec_model_plan_view(const char *id, const ec_node_rec_t *rec, int64_t create_rev)
{
    return (ec_plan_node_t){.node_id = id,
                            .nproc = (uint32_t)rec->nproc,
                            .incarnation = rec->incarnation,
                            .create_revision = create_rev,
                            .state = (ec_node_state_t)rec->state,
                            .booting = rec->boot.phase == EC_BOOT_BOOTING,
                            .place = rec->place};
}

/* Whether a node's new record (rec, NULL when it does not decode, under
 * kv's lease and revisions) changes nothing the leader's planning reads
 * compared with what the model holds (x): the planner's view of it
 * (ec_plan_node_equiv), the run and the lease it is filtered by
 * (node_publish.c).  What else the leader reads of a record is read fresh
 * when used: the hang policy's progress summary and the probe port, host
 * and mod revision on every pass of the loop, the members' host and ports
 * when an epoch is built, epoch_seen (epoch_seen_max, here) when it is
 * numbered. */
static bool plan_same(const ec_model_node_t *x, const char *id, const ec_node_rec_t *rec,
                      const ec_kv_t *kv)
{
    if (!x->rec || !rec)
        return !x->rec && !rec; /* corrupt before and after: never planned */
    if (x->lease != kv->lease || x->create_rev != kv->create_revision || x->rec->run != rec->run)
        return false;
    ec_plan_node_t a = ec_model_plan_view(x->id, x->rec, x->create_rev);
    ec_plan_node_t b = ec_model_plan_view(id, rec, kv->create_revision);
    return ec_plan_node_equiv(&a, &b);
}

bool ec_model_put_node(ec_model_t *m, const ec_model_ctx_t *ctx, const char *id,
                       const ec_kv_t *kv, ec_model_effects_t *fx)
{
    ec_error_t err = {0};
    ec_node_rec_t *rec = NULL;
    if (ec_node_rec_decode(kv->value, kv->value_len, kv->key, &rec, &err) < 0) {
        ec_log(EC_LOG_ERROR, "ignoring node record %s: %s", kv->key, err.msg);
    } else if (strcmp(rec->node_id, id) != 0) {
        ec_log(EC_LOG_ERROR, "ignoring node record %s: it names node '%s'; the key may have been "
                             "written by another tool", kv->key, rec->node_id);
        ec_node_rec_free(rec);
        rec = NULL;
    }
    bool found;
    size_t i = ec_model_node_find(m, id, &found);
    bool same = found && plan_same(&m->nodes[i], id, rec, kv);
    if (!found) {
        if (m->nnodes == m->cap) {
            size_t nc = m->cap ? m->cap * 2 : 16;
            ec_model_node_t *nn = realloc(m->nodes, nc * sizeof(*nn));
            if (!nn) {
                ec_node_rec_free(rec);
                return true;
            }
            m->nodes = nn;
            m->cap = nc;
        }
        memmove(&m->nodes[i + 1], &m->nodes[i], (m->nnodes - i) * sizeof(ec_model_node_t));
        m->nnodes++;
        m->nodes[i] = (ec_model_node_t){.id = strdup(id)};
    }
    ec_node_rec_free(m->nodes[i].rec);
    m->nodes[i].rec = rec;
    m->nodes[i].create_rev = kv->create_revision;
    m->nodes[i].mod_rev = kv->mod_revision;
    /* Our own record overwritten with junk, or with any value without a
     * lease (ours is always leased, and a record without one would outlive
     * us): the loop writes it again (tests/t7000-faults, garbage). */
    if (!strcmp(id, ctx->node_id) && (!rec || kv->lease == 0) && !ctx->leaving)
        fx->self_bad = true;
    if (!strcmp(id, ctx->node_id) && rec && rec->state == EC_NODE_FAILED)
        fx->self_failed = true;
    m->nodes[i].lease = kv->lease;
    /* What members saw is what the next epoch numbers above (after etcd
     * lost its data, its epoch key no longer says). */
    if (rec && kv->lease)
        ec_model_note_seen(m, rec->epoch_seen);
    return !same;
}

bool ec_model_drop_node(ec_model_t *m, const char *id)
{
    bool found;
    size_t i = ec_model_node_find(m, id, &found);
    if (found)
        mnode_remove(m, i);
    return found;
}

void ec_model_add_left(ec_model_t *m, const char *id)
{
    char **nl = realloc(m->left, (m->nleft + 1) * sizeof(char *));
    if (nl) {
        m->left = nl;
        m->left[m->nleft++] = strdup(id);
    }
}

bool ec_model_has_left(const ec_model_t *m, const char *id)
{
    for (size_t i = 0; i < m->nleft; i++)
        if (m->left[i] && !strcmp(m->left[i], id))
            return true;
    return false;
}

static void model_del_node(ec_model_t *m, const char *id, const ec_kv_t *prev)
{
    bool found;
    size_t i = ec_model_node_find(m, id, &found);
    if (!found)
        return;
    bool graceful = false;
    if (prev) {
        ec_node_rec_t *rec = NULL;
        if (ec_node_rec_decode(prev->value, prev->value_len, NULL, &rec, NULL) == 0)
            graceful = rec->state == EC_NODE_LEAVING || rec->state == EC_NODE_DONE;
        ec_node_rec_free(rec);
    } else if (m->nodes[i].rec) {
        graceful = m->nodes[i].rec->state == EC_NODE_LEAVING ||
                   m->nodes[i].rec->state == EC_NODE_DONE;
    }
    if (graceful)
        ec_model_add_left(m, id);
    ec_log(EC_LOG_INFO, "-node %s %s", id, graceful ? "left" : "lease expired");
    mnode_remove(m, i);
}

/* Make ep (decoded from raw) the model's epoch; takes ep. */
static void install_epoch(ec_model_t *m, ec_epoch_t *ep, const void *raw_in, size_t len,
                          ec_model_effects_t *fx)
{
    uint8_t *raw = malloc(len ? len : 1);
    if (!raw) {
        ec_epoch_free(ep);
        return;
    }
    memcpy(raw, raw_in, len);
    free(m->epoch_raw);
    m->epoch_raw = raw;
    m->epoch_raw_len = len;
    ec_epoch_free(m->epoch);
    m->epoch = ep;
    m->epoch_gen++;
    m->epoch_bad = false;
    fx->epoch_installed = true;
}

static void refuse_epoch(ec_model_t *m, ec_model_effects_t *fx)
{
    m->epoch_bad = true;
    fx->epoch_refused = true;
}

/* Apply ep (decoded from raw) if it is this job's and was written under the
 * leadership that held the key at mod_rev (leader; NULL: none did); takes
 * ep. */
static void judge_epoch(ec_model_t *m, const ec_model_ctx_t *ctx, ec_epoch_t *ep, const void *raw,
                        size_t len, int64_t mod_rev, const ec_leadership_t *leader,
                        ec_model_effects_t *fx)
{
    char why[768];
    if (ec_epoch_check(ep, ctx->job_id, mod_rev, leader, why, sizeof(why)) < 0) {
        ec_log(EC_LOG_ERROR, "%s", why);
        ec_epoch_free(ep);
        refuse_epoch(m, fx);
        return;
    }
    install_epoch(m, ep, raw, len, fx);
}

/* A follower's model saw the leader key up to leader_through: judge the
 * epoch waiting for it, if that covers its revision now. */
static void resolve_pending(ec_model_t *m, const ec_model_ctx_t *ctx, ec_model_effects_t *fx)
{
    if (!m->verify_pending || m->verify_gap || m->verify_rev > m->leader_through)
        return; /* a gap needs the history: the loop reads it */
    const ec_leadership_t *ls = NULL;
    if (ec_leader_log_at(&m->llog, m->verify_rev, &ls) < 0)
        return; /* before the log: the loop reads it */
    m->verify_pending = false;
    ec_epoch_t *ep = NULL;
    if (ec_epoch_decode_view(m->verify_raw, m->verify_len, NULL, &ep, NULL) == 0)
        judge_epoch(m, ctx, ep, m->verify_raw, m->verify_len, m->verify_rev, ls, fx);
    fx->dirty = true;
}

static void model_put_epoch(ec_model_t *m, const ec_model_ctx_t *ctx, const ec_model_event_t *ev,
                            ec_model_effects_t *fx)
{
    const ec_kv_t *kv = ev->kv;
    m->epoch_mod_rev = kv->mod_revision;
    if (m->verify_pending) {
        /* Whatever waited for a check is superseded (a forged epoch that
         * the leader has already overwritten, say): judged if the leader
         * log can tell by now, else dropped unapplied. */
        resolve_pending(m, ctx, fx);
        if (m->verify_pending) {
            uint64_t num = 0;
            ec_epoch_t *old = NULL;
            if (ec_epoch_decode_view(m->verify_raw, m->verify_len, NULL, &old, NULL) == 0)
                num = old->number;
            ec_epoch_free(old);
            /* ordinary: an epoch of the listing the leader's next write
             * replaced (a run launched again, say) */
            ec_log(EC_LOG_DEBUG, "ignoring epoch %" PRIu64 ": overwritten at revision %" PRId64
                   " before the leadership it was written under (revision %" PRId64 ") could "
                   "be checked; the newer value is judged instead", num, kv->mod_revision,
                   m->verify_rev);
        }
    }
    m->verify_pending = false;
    ec_error_t err = {0};
    ec_epoch_t *ep = NULL;
    if (ec_epoch_decode_view(kv->value, kv->value_len, kv->key, &ep, &err) < 0) {
        ec_log(EC_LOG_ERROR, "ignoring epoch record: %s", err.msg);
        refuse_epoch(m, fx);
        return;
    }
    ec_model_note_seen(m, ep->number); /* never reused, even refused (build_epoch) */
    /* a number far above ours is believed only once the history shows
     * the numbers it skips (ec__node_verify_epoch) */
    uint64_t gap = m->epoch && ep->number > m->epoch->number + 1 ? m->epoch->number : 0;
    if (m->epoch && ep->number < m->epoch->number) {
        ec_log(EC_LOG_ERROR, "ignoring epoch %" PRIu64 " at %s: older than epoch %" PRIu64
                             " already seen (epoch numbers only increase; forged?)",
               ep->number, kv->key, m->epoch->number);
        ec_epoch_free(ep);
        refuse_epoch(m, fx);
        return;
    }
    const ec_leadership_t *ls = NULL;
    int known = kv->mod_revision <= m->leader_through
                    ? ec_leader_log_at(&m->llog, kv->mod_revision, &ls) : -1;
    if (known >= 0 && !gap) {
        judge_epoch(m, ctx, ep, kv->value, kv->value_len, kv->mod_revision, ls, fx);
        return;
    }
    if (!gap && !m->wide && m->leader_create_rev > 0 && m->leader_id && ep->leader_id &&
        ep->leader_rev == m->leader_create_rev && !strcmp(ep->leader_id, m->leader_id)) {
        /* A follower's epoch that came before the leader key's event of its
         * revision, written under the leadership this model holds now: an
         * agent's epoch transaction compares exactly that create revision,
         * so the leadership held the key when it was written; the read at
         * the epoch's revision would tell no more (a tool copying the
         * current leadership passes both: docs/not-done.md).
         * Applied now instead of after the other stream's event (or, when
         * that event does not come, after EC_VERIFY_GRACE_MS and a read). */
        ec_leadership_t cur = {.create_rev = m->leader_create_rev, .id = m->leader_id};
        judge_epoch(m, ctx, ep, kv->value, kv->value_len, kv->mod_revision, &cur, fx);
        return;
    }
    /* Written before the listing under a leadership that is gone, or (a
     * follower's model) newer than the leader-key changes seen so far: the
     * leader key's event of the same revision resolves it
     * (resolve_pending), else the loop reads the leader key at its revision
     * (ec__node_verify_epoch). */
    ec_epoch_free(ep);
    uint8_t *raw = malloc(kv->value_len ? kv->value_len : 1);
    if (!raw)
        return;
    memcpy(raw, kv->value, kv->value_len);
    free(m->verify_raw);
    m->verify_raw = raw;
    m->verify_len = kv->value_len;
    m->verify_rev = kv->mod_revision;
    m->verify_pending = true;
    m->verify_gap = gap;
    m->verify_since_ms = ev->mono_ms;
    fx->epoch_pending = true;
}

void ec_model_verify_done(ec_model_t *m, const ec_model_ctx_t *ctx, int64_t rev,
                          const ec_leadership_t *leader, bool compacted, ec_model_effects_t *fx)
{
    if (!m->verify_pending || m->verify_rev != rev)
        return;
    m->verify_pending = false;
    ec_epoch_t *ep = NULL;
    if (ec_epoch_decode_view(m->verify_raw, m->verify_len, NULL, &ep, NULL) == 0) {
        if (compacted) {
            /* Older than etcd's history: nothing left to check it
             * against.  Accepted: a forged epoch does not live that
             * long while a leader exists (it restores the last valid
             * one at once), and refusing would re-form a running job
             * only because its epoch is old. */
            ec_log(EC_LOG_WARN, "epoch %" PRIu64 " was written at revision %" PRId64 ", which "
                   "etcd compacted: its writer cannot be checked; accepting it",
                   ep->number, rev);
            install_epoch(m, ep, m->verify_raw, m->verify_len, fx);
        } else {
            judge_epoch(m, ctx, ep, m->verify_raw, m->verify_len, rev, leader, fx);
        }
    }
    fx->dirty = true;
}

void ec_model_gap_done(ec_model_t *m, int64_t rev, bool refused, ec_model_effects_t *fx)
{
    if (!m->verify_pending || m->verify_rev != rev)
        return;
    if (refused) {
        m->verify_pending = false;
        refuse_epoch(m, fx);
        fx->dirty = true;
    }
    m->verify_gap = 0;
}

void ec_model_forget_epoch(ec_model_t *m)
{
    if (m->epoch)
        ec_model_note_seen(m, m->epoch->number);
    ec_epoch_free(m->epoch);
    m->epoch = NULL;
    m->epoch_gen++;
    free(m->epoch_raw);
    m->epoch_raw = NULL;
    m->epoch_raw_len = 0;
}

/* Forget what a listing rebuilds (ec_model_reset). */
static void model_clear(ec_model_t *m)
{
    for (size_t i = 0; i < m->nnodes; i++)
        mnode_clear(&m->nodes[i]);
    m->nnodes = 0;
    free(m->leader_id);
    m->leader_id = NULL;
    m->leader_create_rev = 0;
    m->leader_lease = m->leader_mod_rev = 0;
    m->epoch_mod_rev = 0;
    m->epoch_bad = false;
    m->verify_pending = false;
    for (size_t i = 0; i < m->nsus; i++) {
        free(m->sus[i].reporter);
        free(m->sus[i].src);
        free(m->sus[i].ids);
    }
    m->nsus = 0;
    for (size_t i = 0; i < m->nfails; i++)
        free(m->fails[i]);
    m->nfails = 0;
}

void ec_model_reset(ec_model_t *m, bool wide, int64_t list_rev)
{
    model_clear(m);
    m->wide = wide;
    /* One watch delivers every change in order: the leader log is
     * complete.  Separate watches: complete up to the listing. */
    m->leader_through = wide ? INT64_MAX : list_rev;
    ec_leader_log_reset(&m->llog, list_rev);
}

void ec_model_free(ec_model_t *m)
{
    model_clear(m);
    free(m->nodes);
    free(m->sus);
    free(m->fails);
    ec_epoch_free(m->epoch);
    free(m->epoch_raw);
    free(m->verify_raw);
    ec_leader_log_reset(&m->llog, 0);
    free(m->status_raw);
    for (size_t i = 0; i < m->nleft; i++)
        free(m->left[i]);
    free(m->left);
    free(m->gone_leader);
    *m = (ec_model_t){0};
}

/* Failure records, in key order (their sequence is the failure time, zero
 * padded): the leader keeps the newest ones and prunes the rest. */
static void model_failure(ec_model_t *m, bool put, const char *key, size_t len)
{
    size_t lo = 0, hi = m->nfails;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strncmp(m->fails[mid], key, len);
        if (c == 0 && m->fails[mid][len] != '\0')
            c = 1;
        if (c == 0) {
            if (!put) {
                free(m->fails[mid]);
                memmove(&m->fails[mid], &m->fails[mid + 1], (m->nfails - mid - 1) * sizeof(char *));
                m->nfails--;
            }
            return;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!put)
        return;
    if (m->nfails == m->fails_cap) {
        size_t nc = m->fails_cap ? m->fails_cap * 2 : 16;
        char **nf = realloc(m->fails, nc * sizeof(char *));
        if (!nf)
            return;
        m->fails = nf;
        m->fails_cap = nc;
    }
    char *k = strndup(key, len);
    if (!k)
        return;
    memmove(&m->fails[lo + 1], &m->fails[lo], (m->nfails - lo) * sizeof(char *));
    m->fails[lo] = k;
    m->nfails++;
}

static void model_leader(ec_model_t *m, const ec_model_ctx_t *ctx, bool put, const ec_kv_t *kv,
                         ec_model_effects_t *fx)
{
    if (put)
        ec_leader_log_put(&m->llog, kv->create_revision, (const char *)kv->value, kv->value_len);
    else
        ec_leader_log_delete(&m->llog, kv->mod_revision);
    if (!put && m->leader_id && strcmp(m->leader_id, ctx->node_id)) {
        free(m->gone_leader);
        m->gone_leader = strdup(m->leader_id);
        m->gone_leader_rev = kv->mod_revision;
    }
    free(m->leader_id);
    m->leader_id = put ? strndup((char *)kv->value, kv->value_len) : NULL;
    m->leader_create_rev = put ? kv->create_revision : 0;
    m->leader_lease = put ? kv->lease : 0;
    m->leader_mod_rev = put ? kv->mod_revision : 0;
    if (!put)
        m->leader_deleted_rev = kv->mod_revision;
    if (kv->mod_revision > m->leader_through) {
        m->leader_through = kv->mod_revision;
        resolve_pending(m, ctx, fx);
    }
}

static void model_status(ec_model_t *m, bool put, const ec_kv_t *kv)
{
    free(m->status_raw);
    m->status_raw = NULL;
    m->status_raw_len = 0;
    m->status_mod_rev = put ? kv->mod_revision : 0;
    if (put && (m->status_raw = malloc(kv->value_len + 1))) {
        memcpy(m->status_raw, kv->value, kv->value_len);
        m->status_raw_len = kv->value_len;
    }
    /* What the planning needs of it: whether a run ended, and which. */
    m->status_state = 0;
    m->status_run = 0;
    ec_job_status_t *st = NULL;
    if (put && ec_job_status_decode(kv->value, kv->value_len, kv->key, &st, NULL) == 0) {
        m->status_state = st->state;
        m->status_run = st->run;
    }
    ec_job_status_free(st);
}

/* A suspicion report of epoch num from src (<reporter> or
 * <reporter>/<source>: one entry per key, every one counting for the
 * node). */
static void model_suspect(ec_model_t *m, const ec_model_event_t *ev, uint64_t num, const char *src,
                          ec_model_effects_t *fx)
{
    const ec_kv_t *kv = ev->kv;
    size_t replen = strcspn(src, "/");
    for (size_t i = 0; i < m->nsus; i++)
        if (m->sus[i].epoch == num && !strcmp(m->sus[i].src, src)) {
            free(m->sus[i].ids);
            m->sus[i].ids = ev->put ? strndup((char *)kv->value, kv->value_len) : strdup("");
            m->sus[i].mod_rev = ev->put ? kv->mod_revision : m->sus[i].mod_rev;
            m->sus[i].seen_ms = ev->mono_ms;
            fx->dirty = true;
            return;
        }
    if (!ev->put)
        return;
    ec_model_suspect_t *ns = realloc(m->sus, (m->nsus + 1) * sizeof(*ns));
    if (!ns)
        return;
    m->sus = ns;
    m->sus[m->nsus] = (ec_model_suspect_t){.epoch = num,
                                           .src = strdup(src),
                                           .reporter = strndup(src, replen),
                                           .ids = strndup((char *)kv->value, kv->value_len),
                                           .mod_rev = kv->mod_revision,
                                           .seen_ms = ev->mono_ms};
    m->nsus++;
    fx->dirty = true;
}

void ec_model_apply(ec_model_t *m, const ec_model_ctx_t *ctx, const ec_model_event_t *ev,
                    ec_model_effects_t *fx)
{
    const ec_kv_t *kv = ev->kv;
    bool put = ev->put;
    const char *root = ec_keys_root(ctx->keys);
    size_t rl = strlen(root);
    if (kv->key_len < rl || strncmp(kv->key, root, rl) != 0)
        return;
    const char *suffix = kv->key + rl;
    char id[EC_NODE_ID_MAX + 1];
    if (strncmp(suffix, "nodes/", 6) == 0) {
        if (ec_key_parse_node(ctx->keys, kv->key, kv->key_len, id, sizeof(id)) < 0) {
            ec_log(EC_LOG_WARN, "ignoring key %s: not a valid node key", kv->key);
            return;
        }
        if (put && !ec_model_put_node(m, ctx, id, kv, fx)) {
            fx->touched = true; /* the loop runs, the planner does not */
            return;
        }
        if (!put)
            model_del_node(m, id, ev->prev);
    } else if (!strcmp(suffix, "leader")) {
        model_leader(m, ctx, put, kv, fx);
    } else if (!strcmp(suffix, "epoch")) {
        if (put) {
            model_put_epoch(m, ctx, ev, fx);
        } else {
            ec_log(EC_LOG_ERROR, "the epoch key %s was deleted by someone; the leader will "
                                 "restore it", kv->key);
            m->epoch_mod_rev = 0;
            refuse_epoch(m, fx);
        }
    } else if (!strcmp(suffix, "status")) {
        model_status(m, put, kv);
    } else if (!strncmp(suffix, "epochs/", 7) && strstr(suffix, "/suspect/")) {
        uint64_t num = 0;
        if (ec_key_parse_epoch(ctx->keys, kv->key, kv->key_len, &num) != EC_KEY_EPOCH_WORKER)
            return;
        model_suspect(m, ev, num, strstr(suffix, "/suspect/") + 9, fx);
        return;
    } else if (!strncmp(suffix, "failures/", 9)) {
        model_failure(m, put, kv->key, kv->key_len);
        return; /* not part of the decision model: only counted, for pruning */
    } else {
        return; /* other epochs/ keys: not part of the decision model */
    }
    m->changed_at_ms = ev->wall_ms;
    fx->dirty = true;
}
