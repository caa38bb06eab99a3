/* The job model of one node coordinator.  The leader's holds every key of
 * the job, fed by one watch of the job's root opened before the listing it
 * starts from.  A follower's holds only what a follower needs: the leader
 * key, the epoch, the job status and its own record, each watched alone,
 * and the current epoch's suspicion reports (a follower deposes a silent
 * leader on a majority of them); node-record churn never reaches it, so a
 * change costs etcd O(N) bytes, not O(N^2) (tests/bench/bench_scale). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "epoch_delta.h"
#include "epoch_fetch.h"
#include "clock.h"
#include "keys.h"
#include "log.h"
#include "node_impl.h"
#include "node_policy.h"

size_t ec__node_mnode_find(ec_node_t *n, const char *id, bool *found)
{
    size_t lo = 0, hi = n->nnodes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(n->nodes[mid].id, id);
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

static void note_seen(ec_node_t *n, uint64_t number)
{
    if (number > n->epoch_seen_max && number < UINT64_MAX / 2)
        n->epoch_seen_max = number;
}

static void mnode_clear(mnode_t *m)
{
    free(m->id);
    ec_node_rec_free(m->rec);
}

/* Whether a node's new record (rec, NULL when it does not decode, under
 * kv's lease and revisions) changes nothing the leader's planning reads
 * compared with what the model holds (m): the planner's view of it
 * (ec_plan_node_equiv), the run and the lease it is filtered by
 * (node_publish.c).  What else the leader reads of a record is read fresh
 * when used: the hang policy's progress summary and the probe port, host
 * and mod revision on every pass of the loop, the members' host and ports
 * when an epoch is built, epoch_seen (epoch_seen_max, here) when it is
 * numbered. */
static bool plan_same(const mnode_t *m, const char *id, const ec_node_rec_t *rec,
                      const ec_kv_t *kv)
{
    if (!m->rec || !rec)
        return !m->rec && !rec; /* corrupt before and after: never planned */
    if (m->lease != kv->lease || m->create_rev != kv->create_revision || m->rec->run != rec->run)
        return false;
    ec_plan_node_t a = ec__node_plan_view(m->id, m->rec, m->create_rev);
    ec_plan_node_t b = ec__node_plan_view(id, rec, kv->create_revision);
    return ec_plan_node_equiv(&a, &b);
}

/* Put node id's record into the model; returns whether the planner's input
 * may have changed (false: only what it does not read, plan_same). */
static bool model_put_node(ec_node_t *n, const char *id, const ec_kv_t *kv)
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
    size_t i = ec__node_mnode_find(n, id, &found);
    bool same = found && plan_same(&n->nodes[i], id, rec, kv);
    if (!found) {
        if (n->nnodes == n->cap) {
            size_t nc = n->cap ? n->cap * 2 : 16;
            mnode_t *nn = realloc(n->nodes, nc * sizeof(*nn));
            if (!nn) {
                ec_node_rec_free(rec);
                return true;
            }
            n->nodes = nn;
            n->cap = nc;
        }
        memmove(&n->nodes[i + 1], &n->nodes[i], (n->nnodes - i) * sizeof(mnode_t));
        n->nnodes++;
        n->nodes[i].id = strdup(id);
        n->nodes[i].rec = NULL;
    }
    ec_node_rec_free(n->nodes[i].rec);
    n->nodes[i].rec = rec;
    n->nodes[i].create_rev = kv->create_revision;
    n->nodes[i].mod_rev = kv->mod_revision;
    /* Our own record overwritten with junk, or with any value without a
     * lease (ours is always leased, and a record without one would outlive
     * us): the loop writes it again (tests/t7000-faults, garbage). */
    if (!strcmp(id, n->node_id) && (!rec || kv->lease == 0) && !n->leaving)
        n->self_bad = true;
    n->nodes[i].lease = kv->lease;
    /* What members saw is what the next epoch numbers above (after etcd
     * lost its data, its epoch key no longer says). */
    if (rec && kv->lease)
        note_seen(n, rec->epoch_seen);
    return !same;
}

static void model_del_node(ec_node_t *n, const char *id, const ec_kv_t *prev)
{
    bool found;
    size_t i = ec__node_mnode_find(n, id, &found);
    if (!found)
        return;
    bool graceful = false;
    if (prev) {
        ec_node_rec_t *rec = NULL;
        if (ec_node_rec_decode(prev->value, prev->value_len, NULL, &rec, NULL) == 0)
            graceful = rec->state == EC_NODE_LEAVING || rec->state == EC_NODE_DONE;
        ec_node_rec_free(rec);
    } else if (n->nodes[i].rec) {
        graceful = n->nodes[i].rec->state == EC_NODE_LEAVING || n->nodes[i].rec->state == EC_NODE_DONE;
    }
    if (graceful) {
        char **nl = realloc(n->left, (n->nleft + 1) * sizeof(char *));
        if (nl) {
            n->left = nl;
            n->left[n->nleft++] = strdup(id);
        }
    }
    ec_log(EC_LOG_INFO, "-node %s %s", id, graceful ? "left" : "lease expired");
    mnode_clear(&n->nodes[i]);
    memmove(&n->nodes[i], &n->nodes[i + 1], (n->nnodes - i - 1) * sizeof(mnode_t));
    n->nnodes--;
}

/* Make ep (decoded from raw) the model's epoch; takes ep. */
static void install_epoch(ec_node_t *n, ec_epoch_t *ep, const void *raw_in, size_t len)
{
    uint8_t *raw = malloc(len ? len : 1);
    if (!raw) {
        ec_epoch_free(ep);
        return;
    }
    memcpy(raw, raw_in, len);
    free(n->epoch_raw);
    n->epoch_raw = raw;
    n->epoch_raw_len = len;
    ec_epoch_free(n->epoch);
    n->epoch = ep;
    n->epoch_gen++;
    n->epoch_bad = false;
}

/* Apply ep if it is this job's and was written under the leadership that
 * held the key at mod_rev (leader; NULL: none did); takes ep. */
static void judge_epoch(ec_node_t *n, ec_epoch_t *ep, const ec_kv_t *kv, int64_t mod_rev,
                        const ec_leadership_t *leader)
{
    char why[768];
    if (ec_epoch_check(ep, n->job_id, mod_rev, leader, why, sizeof(why)) < 0) {
        ec_log(EC_LOG_ERROR, "%s", why);
        ec_epoch_free(ep);
        n->epoch_bad = true;
        return;
    }
    install_epoch(n, ep, kv->value, kv->value_len);
}

static void resolve_pending(ec_node_t *n);

static void model_put_epoch(ec_node_t *n, const ec_kv_t *kv)
{
    n->epoch_mod_rev = kv->mod_revision;
    if (n->verify_pending) {
        /* Whatever waited for a check is superseded (a forged epoch that
         * the leader has already overwritten, say): judged if the leader
         * log can tell by now, else dropped unapplied. */
        resolve_pending(n);
        if (n->verify_pending) {
            uint64_t num = 0;
            ec_epoch_t *old = NULL;
            if (ec_epoch_decode_view(n->verify_raw, n->verify_len, n->k_epoch, &old, NULL) == 0)
                num = old->number;
            ec_epoch_free(old);
            /* ordinary: an epoch of the listing the leader's next write
             * replaced (a run launched again, say) */
            ec_log(EC_LOG_DEBUG, "ignoring epoch %" PRIu64 ": overwritten at revision %" PRId64
                   " before the leadership it was written under (revision %" PRId64 ") could "
                   "be checked; the newer value is judged instead", num, kv->mod_revision,
                   n->verify_rev);
        }
    }
    n->verify_pending = false;
    ec_error_t err = {0};
    ec_epoch_t *ep = NULL;
    if (ec_epoch_decode_view(kv->value, kv->value_len, kv->key, &ep, &err) < 0) {
        ec_log(EC_LOG_ERROR, "ignoring epoch record: %s", err.msg);
        n->epoch_bad = true;
        return;
    }
    note_seen(n, ep->number); /* never reused, even refused (build_epoch) */
    /* a number far above ours is believed only once the history shows
     * the numbers it skips (ec__node_verify_epoch) */
    uint64_t gap = n->epoch && ep->number > n->epoch->number + 1 ? n->epoch->number : 0;
    if (n->epoch && ep->number < n->epoch->number) {
        ec_log(EC_LOG_ERROR, "ignoring epoch %" PRIu64 " at %s: older than epoch %" PRIu64
                             " already seen (epoch numbers only increase; forged?)",
               ep->number, kv->key, n->epoch->number);
        ec_epoch_free(ep);
        n->epoch_bad = true;
        return;
    }
    const ec_leadership_t *ls = NULL;
    int known = kv->mod_revision <= n->leader_through
                    ? ec_leader_log_at(&n->llog, kv->mod_revision, &ls) : -1;
    if (known >= 0 && !gap) {
        judge_epoch(n, ep, kv, kv->mod_revision, ls);
        return;
    }
    if (!gap && !n->model_wide && n->leader_create_rev > 0 && n->leader_id && ep->leader_id &&
        ep->leader_rev == n->leader_create_rev && !strcmp(ep->leader_id, n->leader_id)) {
        /* A follower's epoch that came before the leader key's event of its
         * revision, written under the leadership this model holds now: an
         * agent's epoch transaction compares exactly that create revision,
         * so the leadership held the key when it was written; the read at
         * the epoch's revision would tell no more (a tool copying the
         * current leadership passes both: docs/not-done.md).
         * Applied now instead of after the other stream's event (or, when
         * that event does not come, after EC_VERIFY_GRACE_MS and a read). */
        ec_leadership_t cur = {.create_rev = n->leader_create_rev, .id = n->leader_id};
        judge_epoch(n, ep, kv, kv->mod_revision, &cur);
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
    free(n->verify_raw);
    n->verify_raw = raw;
    n->verify_len = kv->value_len;
    n->verify_rev = kv->mod_revision;
    n->verify_pending = true;
    n->verify_gap = gap;
    n->verify_since_ms = ec_mono_ms();
}

/* A follower's model saw the leader key up to leader_through: judge the
 * epoch waiting for it, if that covers its revision now (lock held). */
static void resolve_pending(ec_node_t *n)
{
    if (!n->verify_pending || n->verify_gap || n->verify_rev > n->leader_through)
        return; /* a gap needs the history: the loop reads it */
    const ec_leadership_t *ls = NULL;
    if (ec_leader_log_at(&n->llog, n->verify_rev, &ls) < 0)
        return; /* before the log: the loop reads it */
    n->verify_pending = false;
    ec_epoch_t *ep = NULL;
    ec_kv_t kv = {.key = n->k_epoch, .key_len = strlen(n->k_epoch), .value = n->verify_raw,
                  .value_len = n->verify_len, .mod_revision = n->verify_rev};
    if (ec_epoch_decode_view(n->verify_raw, n->verify_len, n->k_epoch, &ep, NULL) == 0)
        judge_epoch(n, ep, &kv, n->verify_rev, ls);
    n->dirty = true;
}

/* Whether the history key of epoch number exists (*in); false if it cannot
 * be read. */
static bool in_history(ec_node_t *n, uint64_t number, bool *in, ec_error_t *err)
{
    char key[EC_KEY_MAX];
    ec_kv_t kv;
    *in = false;
    if (number == 0 || ec_key_epoch_history(&n->keys, number, key, sizeof(key)) < 0)
        return true;
    if (ec_etcd_get(n->c, key, &kv, in, NULL, err) < 0)
        return false;
    if (*in)
        ec_kv_free(&kv);
    return true;
}

/* The pending epoch (at rev) skips the numbers above last: refused, unless
 * the history shows them (ec_epoch_gap_check); believed, it goes on to the
 * leadership check.  false when the history cannot be read. */
static bool verify_gap(ec_node_t *n, int64_t rev, uint64_t last, ec_error_t *err)
{
    pthread_mutex_lock(&n->lock);
    ec_epoch_t *ep = NULL;
    bool ok = n->verify_pending && n->verify_rev == rev &&
              ec_epoch_decode_view(n->verify_raw, n->verify_len, n->k_epoch, &ep, NULL) == 0;
    pthread_mutex_unlock(&n->lock);
    if (!ok)
        return true; /* superseded meanwhile */
    bool self = false, prev = false, own = false;
    if (!in_history(n, ep->number, &self, err) ||
        (!self && !in_history(n, ep->number - 1, &prev, err)) ||
        (!self && !prev && !in_history(n, last, &own, err))) {
        ec_epoch_free(ep);
        return false;
    }
    char why[768];
    int rc = ec_epoch_gap_check(ep, last, self, prev, own, why, sizeof(why));
    pthread_mutex_lock(&n->lock);
    if (n->verify_pending && n->verify_rev == rev) {
        if (rc < 0) {
            ec_log(EC_LOG_ERROR, "%s", why);
            n->verify_pending = false;
            n->epoch_bad = true;
            n->dirty = true;
            pthread_cond_signal(&n->cond);
        }
        n->verify_gap = 0;
    }
    pthread_mutex_unlock(&n->lock);
    ec_epoch_free(ep);
    return true;
}

bool ec__node_verify_epoch(ec_node_t *n)
{
    pthread_mutex_lock(&n->lock);
    if (!n->verify_pending) {
        pthread_mutex_unlock(&n->lock);
        return true;
    }
    /* A follower's epoch newer than its leader log: the leader's own epoch
     * transaction touches the leader key, whose event resolves it at once;
     * only an epoch nobody touched the leader key with (another tool's)
     * waits out the grace and costs a read. */
    int64_t left = n->verify_since_ms + EC_VERIFY_GRACE_MS - ec_mono_ms();
    if (!n->model_wide && !n->verify_gap && n->verify_rev > n->leader_through && left > 0) {
        ec__node_wake_by(n, ec_mono_ms() + left);
        pthread_mutex_unlock(&n->lock);
        return true;
    }
    int64_t rev = n->verify_rev;
    uint64_t gap = n->verify_gap;
    pthread_mutex_unlock(&n->lock);
    ec_error_t err = {0};
    if (gap) {
        if (!verify_gap(n, rev, gap, &err)) {
            ec_log(EC_LOG_WARN, "cannot read the job's history to check an epoch that skips "
                                "numbers: %s; will retry", err.msg);
            return false;
        }
        pthread_mutex_lock(&n->lock);
        bool judged = !n->verify_pending || n->verify_rev != rev; /* refused (or superseded) */
        pthread_mutex_unlock(&n->lock);
        if (judged)
            return true; /* no leader read for it */
    }
    ec_kv_t lk;
    bool found = false;
    int rc = ec_etcd_get_at(n->c, n->k_leader, rev, &lk, &found, NULL, &err);
    if (rc < 0 && rc != EC_ECOMPACTED) {
        ec_log(EC_LOG_WARN, "cannot check the epoch written at revision %" PRId64
                            " against the leader key then: %s; will retry", rev, err.msg);
        return false;
    }
    pthread_mutex_lock(&n->lock);
    if (n->verify_pending && n->verify_rev == rev) {
        n->verify_pending = false;
        ec_epoch_t *ep = NULL;
        ec_kv_t kv = {.key = n->k_epoch, .key_len = strlen(n->k_epoch), .value = n->verify_raw,
                      .value_len = n->verify_len, .mod_revision = rev};
        if (ec_epoch_decode_view(n->verify_raw, n->verify_len, n->k_epoch, &ep, NULL) == 0) {
            if (rc == EC_ECOMPACTED) {
                /* Older than etcd's history: nothing left to check it
                 * against.  Accepted: a forged epoch does not live that
                 * long while a leader exists (it restores the last valid
                 * one at once), and refusing would re-form a running job
                 * only because its epoch is old. */
                ec_log(EC_LOG_WARN, "epoch %" PRIu64 " was written at revision %" PRId64 ", which "
                       "etcd compacted: its writer cannot be checked; accepting it",
                       ep->number, rev);
                install_epoch(n, ep, kv.value, kv.value_len);
            } else {
                char *id = found ? strndup((char *)lk.value, lk.value_len) : NULL;
                ec_leadership_t l = {.create_rev = found ? lk.create_revision : 0, .id = id};
                judge_epoch(n, ep, &kv, rev, found ? &l : NULL);
                free(id);
            }
        }
        n->dirty = true;
        pthread_cond_signal(&n->cond);
    }
    pthread_mutex_unlock(&n->lock);
    if (rc == 0)
        ec_kv_free(&lk);
    return true;
}

void ec__node_model_clear(ec_node_t *n)
{
    for (size_t i = 0; i < n->nnodes; i++)
        mnode_clear(&n->nodes[i]);
    n->nnodes = 0;
    free(n->leader_id);
    n->leader_id = NULL;
    n->leader_create_rev = 0;
    n->leader_lease = n->leader_mod_rev = 0;
    n->epoch_mod_rev = 0;
    n->epoch_bad = false;
    n->verify_pending = false;
    for (size_t i = 0; i < n->nsus; i++) {
        free(n->sus[i].reporter);
        free(n->sus[i].src);
        free(n->sus[i].ids);
    }
    n->nsus = 0;
    for (size_t i = 0; i < n->nfails; i++)
        free(n->fails[i]);
    n->nfails = 0;
}

/* Failure records, in key order (their sequence is the failure time, zero
 * padded): the leader keeps the newest ones and prunes the rest. */
static void model_failure(ec_node_t *n, bool put, const char *key, size_t len)
{
    size_t lo = 0, hi = n->nfails;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strncmp(n->fails[mid], key, len);
        if (c == 0 && n->fails[mid][len] != '\0')
            c = 1;
        if (c == 0) {
            if (!put) {
                free(n->fails[mid]);
                memmove(&n->fails[mid], &n->fails[mid + 1], (n->nfails - mid - 1) * sizeof(char *));
                n->nfails--;
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
    if (n->nfails == n->fails_cap) {
        size_t nc = n->fails_cap ? n->fails_cap * 2 : 16;
        char **nf = realloc(n->fails, nc * sizeof(char *));
        if (!nf)
            return;
        n->fails = nf;
        n->fails_cap = nc;
    }
    char *k = strndup(key, len);
    if (!k)
        return;
    memmove(&n->fails[lo + 1], &n->fails[lo], (n->nfails - lo) * sizeof(char *));
    n->fails[lo] = k;
    n->nfails++;
}

/* Apply one key's change; lock held. */
static void model_apply(ec_node_t *n, bool put, const ec_kv_t *kv, const ec_kv_t *prev)
{
    const char *root = ec_keys_root(&n->keys);
    size_t rl = strlen(root);
    if (kv->key_len < rl || strncmp(kv->key, root, rl) != 0)
        return;
    const char *suffix = kv->key + rl;
    char id[EC_NODE_ID_MAX + 1];
    if (strncmp(suffix, "nodes/", 6) == 0) {
        if (ec_key_parse_node(&n->keys, kv->key, kv->key_len, id, sizeof(id)) < 0) {
            ec_log(EC_LOG_WARN, "ignoring key %s: not a valid node key", kv->key);
            return;
        }
        if (put && !model_put_node(n, id, kv)) {
            n->touched = true; /* the loop runs, the planner does not */
            return;
        }
        if (!put)
            model_del_node(n, id, prev);
    } else if (!strcmp(suffix, "leader")) {
        if (put)
            ec_leader_log_put(&n->llog, kv->create_revision, (const char *)kv->value,
                              kv->value_len);
        else
            ec_leader_log_delete(&n->llog, kv->mod_revision);
        if (!put && n->leader_id && strcmp(n->leader_id, n->node_id)) {
            free(n->gone_leader);
            n->gone_leader = strdup(n->leader_id);
            n->gone_leader_rev = kv->mod_revision;
        }
        free(n->leader_id);
        n->leader_id = put ? strndup((char *)kv->value, kv->value_len) : NULL;
        n->leader_create_rev = put ? kv->create_revision : 0;
        n->leader_lease = put ? kv->lease : 0;
        n->leader_mod_rev = put ? kv->mod_revision : 0;
        if (!put)
            n->leader_deleted_rev = kv->mod_revision;
        if (kv->mod_revision > n->leader_through) {
            n->leader_through = kv->mod_revision;
            resolve_pending(n);
        }
    } else if (!strcmp(suffix, "epoch")) {
        if (put) {
            model_put_epoch(n, kv);
        } else {
            ec_log(EC_LOG_ERROR, "the epoch key %s was deleted by someone; the leader will "
                                 "restore it", kv->key);
            n->epoch_mod_rev = 0;
            n->epoch_bad = true;
        }
    } else if (!strcmp(suffix, "status")) {
        free(n->status_raw);
        n->status_raw = NULL;
        n->status_raw_len = 0;
        n->status_mod_rev = put ? kv->mod_revision : 0;
        if (put && (n->status_raw = malloc(kv->value_len + 1))) {
            memcpy(n->status_raw, kv->value, kv->value_len);
            n->status_raw_len = kv->value_len;
        }
        /* What the planning needs of it: whether a run ended, and which. */
        n->status_state = 0;
        n->status_run = 0;
        ec_job_status_t *st = NULL;
        if (put && ec_job_status_decode(kv->value, kv->value_len, kv->key, &st, NULL) == 0) {
            n->status_state = st->state;
            n->status_run = st->run;
        }
        ec_job_status_free(st);
    } else if (!strncmp(suffix, "epochs/", 7) && strstr(suffix, "/suspect/")) {
        uint64_t num = 0;
        if (ec_key_parse_epoch(&n->keys, kv->key, kv->key_len, &num) != EC_KEY_EPOCH_WORKER)
            return;
        /* <reporter> (its agent) or <reporter>/<source> (one of its
         * processes): one entry per key, every one counting for the node */
        const char *src = strstr(suffix, "/suspect/") + 9;
        size_t replen = strcspn(src, "/");
        for (size_t i = 0; i < n->nsus; i++)
            if (n->sus[i].epoch == num && !strcmp(n->sus[i].src, src)) {
                free(n->sus[i].ids);
                n->sus[i].ids = put ? strndup((char *)kv->value, kv->value_len) : strdup("");
                n->sus[i].mod_rev = put ? kv->mod_revision : n->sus[i].mod_rev;
                n->sus[i].seen_ms = ec_mono_ms();
                n->dirty = true;
                return;
            }
        if (!put)
            return;
        struct suspect *ns = realloc(n->sus, (n->nsus + 1) * sizeof(*ns));
        if (!ns)
            return;
        n->sus = ns;
        n->sus[n->nsus].epoch = num;
        n->sus[n->nsus].src = strdup(src);
        n->sus[n->nsus].reporter = strndup(src, replen);
        n->sus[n->nsus].ids = strndup((char *)kv->value, kv->value_len);
        n->sus[n->nsus].mod_rev = kv->mod_revision;
        n->sus[n->nsus].seen_ms = ec_mono_ms();
        n->nsus++;
        n->dirty = true;
        return;
    } else if (!strncmp(suffix, "failures/", 9)) {
        model_failure(n, put, kv->key, kv->key_len);
        return; /* not part of the decision model: only counted, for pruning */
    } else {
        return; /* other epochs/ keys: not part of the decision model */
    }
    n->changed_at_ms = ec_wall_ms();
    n->dirty = true;
}

/* Whether key is one of the current epoch's suspicion reports. */
static bool is_suspect_key(ec_node_t *n, const ec_kv_t *kv)
{
    uint64_t num = 0;
    return ec_key_parse_epoch(&n->keys, kv->key, kv->key_len, &num) == EC_KEY_EPOCH_WORKER &&
           strstr(kv->key, "/suspect/") != NULL;
}

/* What the model keeps of an epoch kv (the epoch key's, at any
 * revision): of a split epoch's head, the leader (wide) reads the whole
 * epoch (its chunks, epoch_fetch.h), a follower a view (its own chunk and
 * the next: ec_epoch_fetch_view), into *whole; a whole record needs
 * nothing (returns 0, *whole NULL).  Returns -1 when the epoch cannot be
 * read: its parts are gone or replaced (a newer epoch follows: skipped) or
 * etcd failed (*relist set).  No lock held (or the listing's). */
static int whole_epoch(ec_node_t *n, bool wide, const ec_kv_t *kv, void **whole, size_t *wlen,
                       bool *relist)
{
    *whole = NULL;
    *wlen = 0;
    ec_epoch_split_t info;
    if (ec_epoch_head_info(kv->value, kv->value_len, NULL, &info, NULL) != 1)
        return 0; /* whole, or not an epoch: the model says what it is */
    ec_epoch_split_free(&info);
    ec_epoch_t *ep = NULL;
    ec_error_t err = {0};
    int rc;
    if (wide) {
        rc = ec_epoch_fetch(n->c, &n->keys, kv->value, kv->value_len, n->k_epoch, &ep, whole,
                            wlen, &err);
    } else if ((rc = ec_epoch_fetch_view(n->c, &n->keys, kv->value, kv->value_len, n->k_epoch,
                                         n->node_id, EC_RING_WATCHERS, &ep, &err)) == 0) {
        rc = ec_epoch_encode_view(ep, whole, wlen, &err);
        if (rc == 0)
            ec_log(EC_LOG_INFO, "epoch %" PRIu64 ": read %d of its %d members (split in chunks "
                   "of %d; %zu bytes kept)", ep->number, ep->present, ep->nmembers,
                   ep->chunk_members, *wlen);
    }
    ec_epoch_free(ep);
    if (rc == 0)
        return 0;
    if (rc == EC_EUNAVAILABLE || rc == EC_ETIMEDOUT) {
        ec_log(EC_LOG_WARN, "cannot read epoch %" PRIu64 "'s chunks: %s; listing again",
               info.number, err.msg);
        *relist = true;
    } else {
        ec_log(EC_LOG_WARN, "ignoring epoch %" PRIu64 " at revision %" PRId64 ": %s",
               info.number, kv->mod_revision, err.msg);
    }
    return -1;
}

/* A follower's epoch arrives as a delta from the epoch it holds
 * (epoch_delta.h): rebuilt here, or read from the epoch key at the delta's
 * revision when it cannot be (no base, another base, a digest that does not
 * match), then applied as the epoch key's value at that revision would be.
 * Runs on the watch thread; the read is made without the lock. */
static void on_epoch_delta(ec_node_t *n, const ec_watch_event_t *ev)
{
    pthread_mutex_lock(&n->lock);
    bool skip = n->model_wide || ev->revision <= n->list_rev;
    ec_epoch_t *base = skip || !n->epoch ? NULL : ec_epoch_dup(n->epoch);
    pthread_mutex_unlock(&n->lock);
    if (skip)
        return;
    void *full = NULL;
    size_t flen = 0;
    uint64_t num = 0;
    ec_error_t err = {0};
    int rc;
    if (base && base->present != base->nmembers) {
        /* a view of a split epoch: rebuild our window, checked per chunk */
        ec_epoch_t *nv = NULL;
        rc = ec_epoch_delta_apply_view(base, ev->kv->value, ev->kv->value_len, n->node_id, &num,
                                       &nv, &err);
        if (rc == 1 && ec_epoch_encode_view(nv, &full, &flen, &err) < 0)
            rc = 0;
        ec_epoch_free(nv);
    } else {
        rc = ec_epoch_delta_apply(base, ev->kv->value, ev->kv->value_len, &num, &full, &flen,
                                  &err);
    }
    ec_epoch_free(base);
    if (rc == 1)
        ec_log(EC_LOG_INFO, "epoch %" PRIu64 ": rebuilt from its delta (%zu bytes instead of %zu)",
               num, ev->kv->value_len, flen);
    bool relist = false;
    if (rc < 0) {
        ec_log(EC_LOG_ERROR, "ignoring %s at revision %" PRId64 ": %s", ev->kv->key, ev->revision,
               err.msg);
        return;
    }
    if (rc == 0) {
        ec_kv_t kv;
        bool found = false;
        int g = ec_etcd_get_at(n->c, n->k_epoch, ev->revision, &kv, &found, NULL, &err);
        if (g < 0) {
            ec_log(EC_LOG_WARN, "cannot read epoch %" PRIu64 " at revision %" PRId64 ": %s; "
                   "listing again", num, ev->revision, err.msg);
            relist = true;
        } else if (!found || kv.mod_revision != ev->revision) {
            ec_log(EC_LOG_ERROR, "ignoring %s at revision %" PRId64 ": the epoch key was not "
                   "written with it (another tool?)", ev->kv->key, ev->revision);
        } else if (whole_epoch(n, false, &kv, &full, &flen, &relist) == 0 && !full &&
                   (full = malloc(kv.value_len ? kv.value_len : 1))) {
            memcpy(full, kv.value, kv.value_len);
            flen = kv.value_len;
        }
        if (g == 0 && found)
            ec_kv_free(&kv);
    }
    pthread_mutex_lock(&n->lock);
    if (relist)
        n->relist = true;
    if (full && ev->revision > n->list_rev) {
        ec_kv_t kv = {.key = n->k_epoch, .key_len = strlen(n->k_epoch), .value = full,
                      .value_len = flen, .mod_revision = ev->revision,
                      .create_revision = ev->kv->create_revision, .version = ev->kv->version};
        model_apply(n, true, &kv, NULL);
        n->watch_events++;
    }
    if (ev->revision > n->max_rev)
        n->max_rev = ev->revision;
    pthread_cond_signal(&n->cond);
    pthread_mutex_unlock(&n->lock);
    free(full);
}

static void on_watch(const ec_watch_event_t *ev, void *arg)
{
    ec_node_t *n = arg;
    if (ev->type == EC_WATCH_PUT && ev->kv->key_len == strlen(n->k_epochd) &&
        !memcmp(ev->kv->key, n->k_epochd, ev->kv->key_len)) {
        on_epoch_delta(n, ev);
        return;
    }
    /* (The leader's watch of the root queues its puts and deletes:
     * on_watch_root.) */
    pthread_mutex_lock(&n->lock);
    switch (ev->type) {
    case EC_WATCH_PUT:
    case EC_WATCH_DELETE: {
        /* A follower's suspicion reports have a listing of their own. */
        int64_t listed = !n->model_wide && is_suspect_key(n, ev->kv) ? n->sus_list_rev
                                                                     : n->list_rev;
        if (ev->revision > listed) {
            model_apply(n, ev->type == EC_WATCH_PUT, ev->kv, ev->prev_kv);
            n->watch_events++;
        }
        if (ev->revision > n->max_rev && ev->revision != INT64_MAX)
            n->max_rev = ev->revision;
        break;
    }
    case EC_WATCH_COMPACTED:
        n->relist = true;
        break;
    case EC_WATCH_BROKEN:
        ec_log(EC_LOG_WARN, "etcd watch broke (%s); resuming", ev->message ? ev->message : "");
        n->check_history = true; /* etcd may have come back without its data */
        break;
    case EC_WATCH_CREATED:
        n->watches_created++;
        /* re-created on an etcd whose revision is below one seen: it lost
         * its data (the loop checks, then lists again) */
        if (ev->revision > 0 && ev->revision < n->max_rev)
            n->check_history = true;
        break;
    }
    pthread_cond_signal(&n->cond);
    pthread_mutex_unlock(&n->lock);
}

/* The leader's watch of the job's root: events are queued, not applied
 * (ec__node_drain applies them on the coordinator thread, all that queued
 * up meanwhile at once, before it plans), so this thread never waits for
 * `lock` while a plan holds it; it takes `lock` only to wake a loop that
 * sleeps.  The rest (created, compacted, broken) as on_watch. */
static void queue_publish(ec_node_t *n)
{
    if (!n->st_head)
        return;
    pthread_mutex_lock(&n->qlock);
    if (n->q_tail)
        n->q_tail->next = n->st_head;
    else
        n->q_head = n->st_head;
    n->q_tail = n->st_tail;
    atomic_fetch_add(&n->q_len, n->st_len);
    pthread_mutex_unlock(&n->qlock);
    n->st_head = n->st_tail = NULL;
    n->st_len = 0;
    if (atomic_load(&n->loop_waiting)) {
        pthread_mutex_lock(&n->lock);
        pthread_cond_signal(&n->cond);
        pthread_mutex_unlock(&n->lock);
    }
}

static void on_watch_root(const ec_watch_event_t *ev, void *arg)
{
    ec_node_t *n = arg;
    if (ev->type != EC_WATCH_PUT && ev->type != EC_WATCH_DELETE) {
        queue_publish(n); /* what came before, first */
        on_watch(ev, arg);
        return;
    }
    /* The events of one response (one transaction's, or a batch etcd sends
     * a watch that fell behind) are staged here and queued together, so
     * that the loop never plans on half of them. */
    if (ev->kv->key_len == strlen(n->k_epochd) && !memcmp(ev->kv->key, n->k_epochd, ev->kv->key_len)) {
        /* The epoch's delta is for followers: the leader's model has the
         * epoch itself on this stream. */
        if (!ev->more)
            queue_publish(n);
        return;
    }
    /* A split epoch's head is read whole here, before it is queued (the
     * leader's model holds every member): without the lock. */
    void *whole = NULL;
    size_t wlen = 0;
    ec_kv_t wkv = *ev->kv;
    if (ev->type == EC_WATCH_PUT && ev->kv->key_len == strlen(n->k_epoch) &&
        !memcmp(ev->kv->key, n->k_epoch, ev->kv->key_len)) {
        bool relist = false;
        if (whole_epoch(n, true, ev->kv, &whole, &wlen, &relist) < 0) {
            /* not applied: the listing reads the epoch again */
            pthread_mutex_lock(&n->lock);
            n->relist = true;
            pthread_cond_signal(&n->cond);
            pthread_mutex_unlock(&n->lock);
            if (!ev->more)
                queue_publish(n);
            return;
        }
        if (whole) {
            wkv.value = whole;
            wkv.value_len = wlen;
        }
    }
    size_t kl = wkv.key_len, vl = wkv.value_len;
    ec__qev_t *q = malloc(sizeof(*q) + kl + 1 + vl + 1);
    if (!q) {
        free(whole);
        /* an event lost: list the job again */
        ec_log(EC_LOG_ERROR, "out of memory queueing a watch event; listing the job again");
        pthread_mutex_lock(&n->lock);
        n->relist = true;
        pthread_cond_signal(&n->cond);
        pthread_mutex_unlock(&n->lock);
        return;
    }
    q->next = NULL;
    q->put = ev->type == EC_WATCH_PUT;
    q->revision = ev->revision;
    q->kv = wkv;
    q->kv.key = (char *)(q + 1);
    memcpy(q->kv.key, wkv.key, kl);
    q->kv.key[kl] = '\0';
    q->kv.value = (uint8_t *)q->kv.key + kl + 1;
    if (vl)
        memcpy(q->kv.value, wkv.value, vl);
    q->kv.value[vl] = '\0';
    free(whole);
    if (n->st_tail)
        n->st_tail->next = q;
    else
        n->st_head = q;
    n->st_tail = q;
    n->st_len++;
    if (!ev->more)
        queue_publish(n);
}

static ec__qev_t *queue_take(ec_node_t *n)
{
    pthread_mutex_lock(&n->qlock);
    ec__qev_t *q = n->q_head;
    n->q_head = n->q_tail = NULL;
    atomic_store(&n->q_len, 0);
    pthread_mutex_unlock(&n->qlock);
    return q;
}

void ec__node_drain(ec_node_t *n)
{
    if (atomic_load(&n->q_len) == 0)
        return;
    for (ec__qev_t *q = queue_take(n), *next; q; q = next) {
        next = q->next;
        if (q->revision > n->list_rev) {
            model_apply(n, q->put, &q->kv, NULL);
            n->watch_events++;
        }
        if (q->revision > n->max_rev && q->revision != INT64_MAX)
            n->max_rev = q->revision;
        free(q);
    }
}

static void free_list(ec__qev_t *q)
{
    for (ec__qev_t *next; q; q = next) {
        next = q->next;
        free(q);
    }
}

void ec__node_queue_clear(ec_node_t *n)
{
    free_list(queue_take(n));
    /* the root watch's thread is joined: its staging is ours */
    free_list(n->st_head);
    n->st_head = n->st_tail = NULL;
    n->st_len = 0;
}

/* Wait (lock held) until `want` watches were created since the count was
 * `base`; returns whether they were. */
static bool wait_created(ec_node_t *n, int base, int want)
{
    int64_t deadline = ec_mono_ms() + 10000;
    while (n->watches_created - base < want && !n->stop && ec_mono_ms() < deadline) {
        struct timespec ts = ec_deadline_ts(50);
        pthread_cond_timedwait(&n->cond, &n->lock, &ts);
    }
    return n->watches_created - base >= want;
}

static void stop_watches(ec_node_t *n)
{
    for (size_t i = 0; i < n->nwatch; i++)
        ec_watch_stop(n->watch[i]);
    n->nwatch = 0;
    ec_watch_stop(n->sus_watch);
    n->sus_watch = NULL;
}

/* Watch, then list.  The watches are opened "from now" first and the
 * listing read after they exist, so nothing falls between them; the events
 * the listing already holds are dropped by revision.  (A watch opened at
 * listing revision + 1 after a write that came in meanwhile is served by
 * etcd's catch-up loop, every 100 ms: a joiner saw its first epoch late.)
 * The leader watches and lists the whole job; a follower watches its few
 * keys, each alone, and reads them in one transaction (one revision). */
int ec__node_sync_model(ec_node_t *n, bool wide, ec_error_t *err)
{
    stop_watches(n);
    ec__node_queue_clear(n); /* the listing below has all of it */
    pthread_mutex_lock(&n->lock);
    n->list_rev = INT64_MAX; /* nothing applies until the listing is in */
    n->sus_list_rev = INT64_MAX;
    n->sus_watched = 0;
    int base = n->watches_created;
    pthread_mutex_unlock(&n->lock);
    /* No prev_kv: the model already holds every record's last value (a
     * leaving node's record said so before it vanished), and asking etcd
     * for old values on every event for every node's watch is what made
     * its cost grow fastest with the node count (tests/bench/bench_scale). */
    /* A follower watches the epoch's delta (epochd, small) and lists the
     * epoch itself (whole: it has no base yet). */
    const char *keys[4] = {ec_keys_root(&n->keys)}, *watched[4] = {ec_keys_root(&n->keys)};
    size_t nk = 1;
    if (!wide) {
        keys[0] = watched[0] = n->k_leader;
        keys[1] = n->k_epoch;
        watched[1] = n->k_epochd;
        keys[2] = watched[2] = n->k_status;
        keys[3] = watched[3] = n->k_node;
        nk = 4;
    }
    /* The leader: one watch of the root, its events queued (on_watch_root).
     * A follower: its four keys on one Watch stream (one per node in etcd,
     * not four; each key's events in order, one EC_WATCH_CREATED per key). */
    n->watch[0] = wide ? ec_watch_start_ex(n->c, watched[0], true, 0, EC_WATCH_NO_PREV_KV,
                                           on_watch_root, n, err)
                       : ec_watch_start_keys(n->c, watched, nk, 0, EC_WATCH_NO_PREV_KV, on_watch,
                                             n, err);
    if (!n->watch[0]) {
        stop_watches(n);
        return err->code;
    }
    n->nwatch = 1;
    pthread_mutex_lock(&n->lock);
    bool created = wait_created(n, base, (int)nk);
    pthread_mutex_unlock(&n->lock);
    if (!created)
        return ec_errorf(err, EC_ETIMEDOUT, "etcd at %s did not open a watch on %s within 10 s",
                         ec_etcd_endpoints(n->c), wide ? ec_keys_root(&n->keys) : n->k_epoch);
    /* The listing is read while holding the lock, so no watch event is
     * applied between it and the model it builds. */
    ec_kv_list_t l = {0};
    ec_txn_result_t r = {0};
    pthread_mutex_lock(&n->lock);
    int rc;
    if (wide) {
        rc = ec_etcd_get_prefix(n->c, ec_keys_root(&n->keys), 0, &l, err);
    } else {
        ec_op_t get[4];
        for (size_t i = 0; i < nk; i++)
            get[i] = (ec_op_t){.type = EC_OP_GET, .key = keys[i]};
        rc = ec_etcd_txn(n->c, NULL, 0, get, nk, NULL, 0, &r, err);
        if (rc == 0) {
            size_t cnt = 0;
            for (size_t i = 0; i < r.n; i++)
                cnt += r.results[i].kvs.n;
            l.kvs = calloc(cnt ? cnt : 1, sizeof(ec_kv_t));
            l.revision = r.revision;
            /* borrowed from r: freed with it */
            for (size_t i = 0; l.kvs && i < r.n; i++)
                for (size_t j = 0; j < r.results[i].kvs.n; j++)
                    l.kvs[l.n++] = r.results[i].kvs.kvs[j];
            if (!l.kvs)
                rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        }
    }
    if (rc == 0) {
        ec__node_model_clear(n);
        n->model_wide = wide;
        /* One watch delivers every change in order: the leader log is
         * complete.  Separate watches: complete up to the listing. */
        n->leader_through = wide ? INT64_MAX : l.revision;
        /* The leader key first: the epoch sorts before it, and its check
         * needs the leadership. */
        ec_leader_log_reset(&n->llog, l.revision);
        for (size_t i = 0; i < l.n; i++)
            if (!strcmp(l.kvs[i].key, n->k_leader))
                ec_leader_log_put(&n->llog, l.kvs[i].create_revision, (const char *)l.kvs[i].value,
                                  l.kvs[i].value_len);
        bool again = false;
        for (size_t i = 0; i < l.n; i++) {
            /* a split epoch is read whole (its chunks: one more range
             * read, under the lock like the listing) */
            void *whole = NULL;
            size_t wlen = 0;
            ec_kv_t kv = l.kvs[i];
            if (!strcmp(kv.key, n->k_epoch) &&
                whole_epoch(n, wide, &kv, &whole, &wlen, &again) < 0)
                continue; /* not applied: the next epoch, or the next listing, brings one */
            if (whole) {
                kv.value = whole;
                kv.value_len = wlen;
            }
            model_apply(n, true, &kv, NULL);
            free(whole);
        }
        n->list_rev = l.revision;
        if (l.revision > n->max_rev)
            n->max_rev = l.revision;
        n->relist = again;
        n->dirty = true;
    }
    pthread_mutex_unlock(&n->lock);
    if (wide) {
        if (rc == 0)
            ec_kv_list_free(&l);
    } else {
        free(l.kvs);
        if (rc == 0)
            ec_txn_result_free(&r);
    }
    return rc;
}

int ec__node_follow_suspects(ec_node_t *n, ec_error_t *err)
{
    pthread_mutex_lock(&n->lock);
    uint64_t cur = n->epoch ? n->epoch->number : 0;
    bool skip = n->model_wide || !cur || cur == n->sus_watched;
    int base = n->watches_created;
    if (!skip)
        n->sus_list_rev = INT64_MAX; /* the new watch's events wait for its listing */
    pthread_mutex_unlock(&n->lock);
    if (skip)
        return 0;
    ec_watch_stop(n->sus_watch);
    n->sus_watch = NULL;
    char prefix[EC_KEY_MAX];
    int kl = ec_key_epoch_worker_prefix(&n->keys, cur, prefix, sizeof(prefix));
    if (kl < 0 || (size_t)kl + sizeof("suspect/") > sizeof(prefix))
        return ec_errorf(err, EC_EINVAL, "cannot build the suspicion prefix of epoch %" PRIu64, cur);
    strcat(prefix, "suspect/");
    n->sus_watch = ec_watch_start_ex(n->c, prefix, true, 0, EC_WATCH_NO_PREV_KV, on_watch, n, err);
    if (!n->sus_watch)
        return err->code;
    pthread_mutex_lock(&n->lock);
    bool created = wait_created(n, base, 1);
    pthread_mutex_unlock(&n->lock);
    if (!created)
        return ec_errorf(err, EC_ETIMEDOUT, "etcd at %s did not open a watch on %s within 10 s",
                         ec_etcd_endpoints(n->c), prefix);
    ec_kv_list_t l;
    pthread_mutex_lock(&n->lock);
    int rc = ec_etcd_get_prefix(n->c, prefix, 0, &l, err);
    if (rc == 0) {
        for (size_t i = 0; i < l.n; i++)
            model_apply(n, true, &l.kvs[i], NULL);
        n->sus_list_rev = l.revision;
        n->sus_watched = cur;
        n->dirty = true;
        ec_kv_list_free(&l);
    }
    pthread_mutex_unlock(&n->lock);
    return rc;
}

void ec__node_note_gone_leader(ec_node_t *n)
{
    pthread_mutex_lock(&n->lock);
    char *id = n->gone_leader;
    int64_t rev = n->gone_leader_rev;
    n->gone_leader = NULL;
    bool found = false;
    if (id)
        ec__node_mnode_find(n, id, &found);
    for (size_t i = 0; id && i < n->nleft && !found; i++)
        found = !strcmp(n->left[i], id);
    pthread_mutex_unlock(&n->lock);
    if (!id || found || rev < 2) {
        free(id);
        return; /* registered still (or again), or counted already */
    }
    char key[EC_KEY_MAX];
    ec_kv_t kv;
    bool there = false;
    ec_node_rec_t *rec = NULL;
    if (ec_key_node(&n->keys, id, key, sizeof(key)) >= 0 &&
        ec_etcd_get_at(n->c, key, rev - 1, &kv, &there, NULL, NULL) == 0 && there) {
        if (ec_node_rec_decode(kv.value, kv.value_len, NULL, &rec, NULL) == 0 &&
            (rec->state == EC_NODE_LEAVING || rec->state == EC_NODE_DONE)) {
            pthread_mutex_lock(&n->lock);
            char **nl = realloc(n->left, (n->nleft + 1) * sizeof(char *));
            if (nl) {
                n->left = nl;
                n->left[n->nleft++] = strdup(id);
                n->dirty = true;
            }
            pthread_mutex_unlock(&n->lock);
            ec_log(EC_LOG_INFO, "-node %s left (the previous leader: its record said so at "
                   "revision %" PRId64 ")", id, rev - 1);
        }
        ec_node_rec_free(rec);
        ec_kv_free(&kv);
    }
    free(id);
}

int ec__node_read_records(ec_node_t *n, ec_kv_list_t *l, ec_error_t *err)
{
    char prefix[EC_KEY_MAX];
    ec_key_nodes_prefix(&n->keys, prefix, sizeof(prefix));
    return ec_etcd_get_prefix(n->c, prefix, 0, l, err);
}

bool ec__node_fetch_record(ec_node_t *n, const char *id)
{
    char key[EC_KEY_MAX];
    if (ec_key_node(&n->keys, id, key, sizeof(key)) < 0)
        return false;
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(n->c, key, &kv, &found, NULL, NULL) < 0)
        return false;
    pthread_mutex_lock(&n->lock);
    bool ok = false;
    if (found) {
        (void)model_put_node(n, id, &kv); /* read by the caller's pass: no wakeup */
        bool f;
        size_t i = ec__node_mnode_find(n, id, &f);
        ok = f && n->nodes[i].rec;
    } else {
        bool f;
        size_t i = ec__node_mnode_find(n, id, &f);
        if (f && strcmp(id, n->node_id)) {
            mnode_clear(&n->nodes[i]);
            memmove(&n->nodes[i], &n->nodes[i + 1], (n->nnodes - i - 1) * sizeof(mnode_t));
            n->nnodes--;
        }
    }
    pthread_mutex_unlock(&n->lock);
    if (found)
        ec_kv_free(&kv);
    return ok;
}

bool ec__node_check_history(ec_node_t *n)
{
    pthread_mutex_lock(&n->lock);
    n->check_history = false;
    int64_t seen = n->max_rev;
    pthread_mutex_unlock(&n->lock);
    ec_kv_t kv;
    bool found = false;
    int64_t rev = 0;
    ec_error_t err = {0};
    if (ec_etcd_get(n->c, n->k_leader, &kv, &found, &rev, &err) < 0) {
        pthread_mutex_lock(&n->lock);
        n->check_history = true; /* again on the next pass */
        pthread_mutex_unlock(&n->lock);
        return false;
    }
    if (found)
        ec_kv_free(&kv);
    if (rev >= seen)
        return false;
    /* etcd's revision went backwards: it restarted without its data (or
     * another cluster answers at its address).  Everything the model holds
     * is gone from etcd, the leader key it remembers too: list afresh, and
     * form the job as a first epoch numbered above every epoch seen. */
    ec__node_emit(n, "+etcd-reset: etcd's revision went back from %" PRId64 " to %" PRId64
                  " (its data was lost); rebuilding the job from what its agents register",
                  seen, rev);
    pthread_mutex_lock(&n->lock);
    if (n->epoch)
        note_seen(n, n->epoch->number);
    ec_epoch_free(n->epoch);
    n->epoch = NULL;
    n->epoch_gen++;
    free(n->epoch_raw);
    n->epoch_raw = NULL;
    n->epoch_raw_len = 0;
    n->max_rev = rev;
    n->relist = true;
    n->self_pending = true; /* our record again, with the epoch we saw */
    pthread_mutex_unlock(&n->lock);
    return true;
}
