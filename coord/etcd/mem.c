/* The in-memory store: an etcd of our own for unit tests (etcd.h, "an
 * in-memory store").
 *
 * etcd's MVCC in miniature.  Every write appends versions to one history
 * (log), stamped with the revision it made: one per write, however many
 * keys it touched.  cur indexes the live version of each key, sorted by
 * key, for reads and listings.  A transaction checks its comparisons and
 * runs its ops under the store's one lock, so it is atomic, and all its
 * writes share its revision.  Compaction drops the versions no read at or
 * above the compaction point can see.
 *
 * Leases carry a monotonic deadline.  The reaper thread expires them when
 * it passes (their keys go in one revision, as etcd's revoke does), and so
 * does every call before it reads, so nothing ever sees a key of a lease
 * past its deadline.  Watches and keepalives: mem_stream.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "mem.h"

/* etcd's defaults, which the coordinator's chunking and TTLs are sized for:
 * --max-txn-ops, --max-request-bytes, and the smallest TTL it grants. */
#define MAX_TXN_OPS 128
#define MAX_REQUEST_BYTES (1536 * 1024)
#define MIN_TTL_S 2

/* ---- keys and ranges --------------------------------------------------- */

static int key_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* What an op or a watch covers: one key, every key under a prefix, or the
 * keys in [key, end). */
typedef enum { R_KEY, R_PREFIX, R_END } range_kind_t;

typedef struct {
    range_kind_t kind;
    const char *key, *end;
    size_t len, end_len;
} range_t;

static range_t op_range(const ec_op_t *o)
{
    range_t r = {R_KEY, o->key, NULL, strlen(o->key), 0};
    /* an empty range_end is sent as none: one key, as etcd reads it */
    if (o->range_end && *o->range_end) {
        r.kind = R_END;
        r.end = o->range_end;
        r.end_len = strlen(o->range_end);
    } else if (o->prefix) {
        r.kind = R_PREFIX;
    }
    return r;
}

/* Whether key k is in r; *past: k and every key above it are not. */
static bool in_range(const range_t *r, const char *k, size_t kl, bool *past)
{
    int c = key_cmp(k, kl, r->key, r->len);
    bool in = false;
    *past = false;
    switch (r->kind) {
    case R_KEY:
        in = c == 0;
        *past = c > 0;
        break;
    case R_PREFIX:
        in = kl >= r->len && memcmp(k, r->key, r->len) == 0;
        *past = !in && c > 0;
        break;
    case R_END:
        *past = key_cmp(k, kl, r->end, r->end_len) >= 0;
        in = c >= 0 && !*past;
        break;
    }
    return in;
}

/* The first index of cur whose key is not below key. */
static size_t cur_lower(const ec_etcd_mem_t *m, const char *key, size_t len)
{
    size_t lo = 0, hi = m->ncur;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_cmp(m->cur[mid]->key, m->cur[mid]->key_len, key, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static ec__mem_rec_t *cur_find(const ec_etcd_mem_t *m, const char *key, size_t len)
{
    size_t i = cur_lower(m, key, len);
    if (i < m->ncur && key_cmp(m->cur[i]->key, m->cur[i]->key_len, key, len) == 0)
        return m->cur[i];
    return NULL;
}

/* ---- the history -------------------------------------------------------- */

static void rec_free(ec__mem_rec_t *r)
{
    if (!r)
        return;
    free(r->key);
    free(r->value);
    free(r);
}

/* Room for n more entries in log and cur, so that a transaction, once
 * begun, cannot fail half-way for want of it. */
static int reserve(ec_etcd_mem_t *m, size_t n)
{
    if (m->nlog + n > m->caplog) {
        size_t cap = (m->nlog + n) * 2;
        ec__mem_rec_t **l = realloc(m->log, cap * sizeof(*l));
        if (!l)
            return EC_ENOMEM;
        m->log = l;
        m->caplog = cap;
    }
    if (m->ncur + n > m->capcur) {
        size_t cap = (m->ncur + n) * 2;
        ec__mem_rec_t **c = realloc(m->cur, cap * sizeof(*c));
        if (!c)
            return EC_ENOMEM;
        m->cur = c;
        m->capcur = cap;
    }
    return 0;
}

static ec__mem_rec_t *rec_new(const char *key, size_t klen, const void *value, size_t vlen)
{
    ec__mem_rec_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->key = malloc(klen + 1);
    r->value = malloc(vlen + 1);
    if (!r->key || !r->value) {
        rec_free(r);
        return NULL;
    }
    memcpy(r->key, key, klen);
    r->key[klen] = '\0';
    r->key_len = klen;
    if (vlen)
        memcpy(r->value, value, vlen);
    r->value[vlen] = '\0';
    r->value_len = vlen;
    return r;
}

/* Put at revision rev (lock held, room reserved). */
static int put_locked(ec_etcd_mem_t *m, const char *key, const void *value, size_t vlen,
                      int64_t lease, int64_t rev)
{
    size_t klen = strlen(key);
    ec__mem_rec_t *r = rec_new(key, klen, value, vlen);
    if (!r)
        return EC_ENOMEM;
    size_t i = cur_lower(m, key, klen);
    ec__mem_rec_t *old =
        i < m->ncur && key_cmp(m->cur[i]->key, m->cur[i]->key_len, key, klen) == 0 ? m->cur[i]
                                                                                  : NULL;
    r->mod_rev = rev;
    r->create_rev = old ? old->create_rev : rev;
    r->version = old ? old->version + 1 : 1;
    r->lease = lease;
    r->prev = old;
    m->log[m->nlog++] = r;
    if (old) {
        m->cur[i] = r;
    } else {
        memmove(&m->cur[i + 1], &m->cur[i], (m->ncur - i) * sizeof(*m->cur));
        m->cur[i] = r;
        m->ncur++;
    }
    return 0;
}

/* Delete cur[i] at revision rev: a tomb in the history (lock held, room
 * reserved). */
static int del_locked(ec_etcd_mem_t *m, size_t i, int64_t rev)
{
    ec__mem_rec_t *old = m->cur[i];
    ec__mem_rec_t *t = rec_new(old->key, old->key_len, "", 0);
    if (!t)
        return EC_ENOMEM;
    t->tomb = true;
    t->mod_rev = rev;
    t->prev = old;
    m->log[m->nlog++] = t;
    memmove(&m->cur[i], &m->cur[i + 1], (m->ncur - i - 1) * sizeof(*m->cur));
    m->ncur--;
    return 0;
}

/* Delete every live key in r at revision rev; returns how many, or a
 * negative code. */
static int64_t del_range_locked(ec_etcd_mem_t *m, const range_t *r, int64_t rev)
{
    int64_t n = 0;
    size_t i = cur_lower(m, r->key, r->len);
    while (i < m->ncur) {
        bool past;
        if (!in_range(r, m->cur[i]->key, m->cur[i]->key_len, &past)) {
            if (past)
                break;
            i++;
            continue;
        }
        int rc = del_locked(m, i, rev); /* cur[i] is now the next key */
        if (rc < 0)
            return rc;
        n++;
    }
    return n;
}

/* The version of key live at revision at, or NULL (lock held). */
static const ec__mem_rec_t *version_at(const ec_etcd_mem_t *m, const char *key, int64_t at)
{
    size_t klen = strlen(key);
    for (size_t i = m->nlog; i > 0; i--) {
        const ec__mem_rec_t *r = m->log[i - 1];
        if (r->mod_rev <= at && key_cmp(r->key, r->key_len, key, klen) == 0)
            return r->tomb ? NULL : r;
    }
    return NULL;
}

int ec__mem_kv_copy(ec_kv_t *out, const ec__mem_rec_t *r)
{
    memset(out, 0, sizeof(*out));
    out->key = malloc(r->key_len + 1);
    out->value = malloc(r->value_len + 1);
    if (!out->key || !out->value) {
        ec_kv_free(out);
        return EC_ENOMEM;
    }
    memcpy(out->key, r->key, r->key_len + 1);
    out->key_len = r->key_len;
    memcpy(out->value, r->value, r->value_len + 1);
    out->value_len = r->value_len;
    out->create_revision = r->create_rev;
    out->mod_revision = r->mod_rev;
    out->version = r->version;
    out->lease = r->lease;
    return 0;
}

static int list_add(ec_kv_list_t *l, const ec__mem_rec_t *r)
{
    ec_kv_t *nk = realloc(l->kvs, (l->n + 1) * sizeof(*nk));
    if (!nk)
        return EC_ENOMEM;
    l->kvs = nk;
    int rc = ec__mem_kv_copy(&l->kvs[l->n], r);
    if (rc == 0)
        l->n++;
    return rc;
}

/* Every live key in r, sorted (lock held). */
static int list_range_locked(const ec_etcd_mem_t *m, const range_t *r, ec_kv_list_t *out)
{
    for (size_t i = cur_lower(m, r->key, r->len); i < m->ncur; i++) {
        bool past;
        if (!in_range(r, m->cur[i]->key, m->cur[i]->key_len, &past)) {
            if (past)
                break;
            continue;
        }
        int rc = list_add(out, m->cur[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- leases -------------------------------------------------------------- */

static ec__mem_lease_t *lease_find(ec_etcd_mem_t *m, int64_t id)
{
    for (size_t i = 0; i < m->nleases; i++)
        if (m->leases[i].id == id)
            return &m->leases[i];
    return NULL;
}

/* Revoke leases[li]: its keys go in one revision (none: no revision). */
static void revoke_locked(ec_etcd_mem_t *m, size_t li)
{
    int64_t id = m->leases[li].id, rev = m->rev + 1;
    bool changed = false;
    /* in key order, as etcd deletes them */
    if (reserve(m, m->ncur) == 0) {
        for (size_t i = 0; i < m->ncur;) {
            if (m->cur[i]->lease == id && del_locked(m, i, rev) == 0)
                changed = true; /* cur[i] is now the next key */
            else
                i++;
        }
    }
    /* out of memory: the keys stay, as they would on an etcd that failed
     * to apply the revoke; the lease goes all the same */
    m->leases[li] = m->leases[--m->nleases];
    if (changed)
        m->rev = rev;
    pthread_cond_broadcast(&m->cond);
}

/* Expire every lease past its deadline (lock held).  Not while down or
 * frozen: a stopped etcd expires nothing. */
static void reap_locked(ec_etcd_mem_t *m)
{
    if (m->down || m->frozen)
        return;
    int64_t now = ec_mono_ms();
    for (size_t i = m->nleases; i > 0; i--)
        if (m->leases[i - 1].expires_ms <= now)
            revoke_locked(m, i - 1);
}

static void *reaper_main(void *arg)
{
    ec_etcd_mem_t *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        reap_locked(m);
        /* until the next deadline; a grant or a change wakes us earlier */
        int64_t wait = 1000, now = ec_mono_ms();
        for (size_t i = 0; !m->down && !m->frozen && i < m->nleases; i++)
            if (m->leases[i].expires_ms - now < wait)
                wait = m->leases[i].expires_ms - now;
        struct timespec ts = ec_deadline_ts(wait > 0 ? wait : 0);
        pthread_cond_timedwait(&m->cond, &m->lock, &ts);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int ec__mem_down_error(const char *method, ec_error_t *err)
{
    return ec_errorf(err, EC_EUNAVAILABLE,
                     "etcd at mem is unavailable (%s: the in-memory store is down: the test "
                     "called ec_etcd_mem_set_down): bring it back with "
                     "ec_etcd_mem_set_down(store, false)",
                     method);
}

/* Lock the store for a call: waits while it is frozen (at most the gRPC
 * client's default call deadline), fails while it is down, else expires
 * what is due first. */
static int enter(ec_etcd_mem_t *m, const char *method, ec_error_t *err)
{
    pthread_mutex_lock(&m->lock);
    struct timespec dl = ec_deadline_ts(EC_ETCD_MEM_FROZEN_CALL_MS);
    m->nfrozen_calls++;
    while (m->frozen && !m->stop)
        if (pthread_cond_timedwait(&m->cond, &m->lock, &dl) == ETIMEDOUT && m->frozen) {
            m->nfrozen_calls--;
            pthread_mutex_unlock(&m->lock);
            return ec_errorf(err, EC_ETIMEDOUT,
                             "etcd at mem did not answer %s within %d ms (the in-memory store is "
                             "frozen: the test called ec_etcd_mem_set_frozen)",
                             method, EC_ETCD_MEM_FROZEN_CALL_MS);
        }
    m->nfrozen_calls--;
    if (m->down) {
        pthread_mutex_unlock(&m->lock);
        return ec__mem_down_error(method, err);
    }
    reap_locked(m);
    return 0;
}

int ec__mem_lease_grant(ec_etcd_mem_t *m, int64_t ttl_s, int64_t *id, int64_t *granted,
                        ec_error_t *err)
{
    int rc = enter(m, "LeaseGrant", err);
    if (rc < 0)
        return rc;
    if (m->nleases == m->capleases) {
        size_t cap = m->capleases ? m->capleases * 2 : 16;
        ec__mem_lease_t *l = realloc(m->leases, cap * sizeof(*l));
        if (!l) {
            pthread_mutex_unlock(&m->lock);
            return ec_errorf(err, EC_ENOMEM, "out of memory");
        }
        m->leases = l;
        m->capleases = cap;
    }
    ec__mem_lease_t *l = &m->leases[m->nleases++];
    l->id = m->next_lease++;
    l->ttl_s = ttl_s < MIN_TTL_S ? MIN_TTL_S : ttl_s;
    l->expires_ms = ec_mono_ms() + l->ttl_s * 1000;
    *id = l->id;
    if (granted)
        *granted = l->ttl_s;
    pthread_cond_broadcast(&m->cond); /* the reaper's next deadline */
    pthread_mutex_unlock(&m->lock);
    return 0;
}

static int no_lease(ec_error_t *err, const char *method)
{
    return ec_errorf(err, EC_ENOTFOUND, "etcd at mem: %s: etcdserver: requested lease not found",
                     method);
}

int ec__mem_lease_revoke(ec_etcd_mem_t *m, int64_t id, ec_error_t *err)
{
    int rc = enter(m, "LeaseRevoke", err);
    if (rc < 0)
        return rc;
    ec__mem_lease_t *l = lease_find(m, id);
    if (l)
        revoke_locked(m, (size_t)(l - m->leases));
    pthread_mutex_unlock(&m->lock);
    return l ? 0 : no_lease(err, "LeaseRevoke");
}

int ec__mem_lease_ttl(ec_etcd_mem_t *m, int64_t id, int64_t *ttl, int64_t *granted,
                      ec_error_t *err)
{
    int rc = enter(m, "LeaseTimeToLive", err);
    if (rc < 0)
        return rc;
    ec__mem_lease_t *l = lease_find(m, id);
    /* etcd answers an unknown lease with TTL -1, not an error */
    *ttl = l ? (l->expires_ms - ec_mono_ms()) / 1000 : -1;
    if (granted)
        *granted = l ? l->ttl_s : 0;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

int ec__mem_lease_refresh_locked(ec_etcd_mem_t *m, int64_t id)
{
    if (m->down || m->frozen)
        return EC_EUNAVAILABLE;
    reap_locked(m);
    ec__mem_lease_t *l = lease_find(m, id);
    if (!l)
        return 0;
    l->expires_ms = ec_mono_ms() + l->ttl_s * 1000;
    pthread_cond_broadcast(&m->cond);
    return 1;
}

/* ---- transactions ------------------------------------------------------ */

static bool cmp_holds(const ec_etcd_mem_t *m, const ec_cmp_t *c)
{
    const ec__mem_rec_t *r = cur_find(m, c->key, strlen(c->key));
    int d;
    if (c->target == EC_CMP_VALUE) {
        if (!r)
            return false; /* etcd: a value compare on a missing key always fails */
        size_t n = r->value_len < c->value_len ? r->value_len : c->value_len;
        d = n ? memcmp(r->value, c->value, n) : 0;
        if (d == 0)
            d = (r->value_len > c->value_len) - (r->value_len < c->value_len);
    } else {
        /* a missing key has version, create and mod revision 0 */
        int64_t v = !r ? 0
                    : c->target == EC_CMP_VERSION ? r->version
                    : c->target == EC_CMP_CREATE  ? r->create_rev
                                                  : r->mod_rev;
        d = (v > c->number) - (v < c->number);
    }
    switch (c->result) {
    case EC_CMP_EQUAL:
        return d == 0;
    case EC_CMP_GREATER:
        return d > 0;
    case EC_CMP_LESS:
        return d < 0;
    case EC_CMP_NOT_EQUAL:
        return d != 0;
    }
    return false;
}

/* What etcd refuses before it runs a transaction's branch: empty keys, too
 * many ops, too many bytes, one key put twice or put and deleted. */
static int check_ops(const ec_op_t *ops, size_t n, size_t first, size_t *bytes, ec_error_t *err)
{
    if (n > MAX_TXN_OPS)
        return ec_errorf(err, EC_EINVAL,
                         "etcd at mem refused Txn: etcdserver: too many operations in txn "
                         "request (%zu; etcd takes at most %d)",
                         n, MAX_TXN_OPS);
    for (size_t i = 0; i < n; i++) {
        if (!ops[i].key || !*ops[i].key)
            return ec_errorf(err, EC_EINVAL, "ec_etcd_txn: op %zu has an empty key", first + i);
        *bytes += strlen(ops[i].key) + (ops[i].type == EC_OP_PUT ? ops[i].value_len : 0);
    }
    for (size_t i = 0; i < n; i++) {
        if (ops[i].type != EC_OP_PUT)
            continue;
        size_t kl = strlen(ops[i].key);
        for (size_t j = 0; j < n; j++) {
            bool past, dup = false;
            if (j < i && ops[j].type == EC_OP_PUT)
                dup = strcmp(ops[j].key, ops[i].key) == 0;
            else if (ops[j].type == EC_OP_DELETE) {
                range_t r = op_range(&ops[j]);
                dup = in_range(&r, ops[i].key, kl, &past);
            }
            if (dup)
                return ec_errorf(err, EC_EINVAL,
                                 "etcd at mem refused Txn: etcdserver: duplicate key given in "
                                 "txn request (%s)",
                                 ops[i].key);
        }
    }
    return 0;
}

static int check_txn(const ec_cmp_t *cmps, size_t ncmp, const ec_op_t *then_ops, size_t nthen,
                     const ec_op_t *else_ops, size_t nelse, ec_error_t *err)
{
    if (ncmp > MAX_TXN_OPS)
        return ec_errorf(err, EC_EINVAL,
                         "etcd at mem refused Txn: etcdserver: too many operations in txn "
                         "request (%zu comparisons; etcd takes at most %d)",
                         ncmp, MAX_TXN_OPS);
    size_t bytes = 0;
    for (size_t i = 0; i < ncmp; i++) {
        if (!cmps[i].key || !*cmps[i].key)
            return ec_errorf(err, EC_EINVAL, "ec_etcd_txn: comparison %zu has an empty key", i);
        bytes += strlen(cmps[i].key) + cmps[i].value_len;
    }
    int rc = check_ops(then_ops, nthen, 0, &bytes, err);
    if (rc == 0)
        rc = check_ops(else_ops, nelse, nthen, &bytes, err);
    if (rc == 0 && bytes > MAX_REQUEST_BYTES)
        rc = ec_errorf(err, EC_ETOOLARGE,
                       "etcd at mem refused Txn: etcdserver: request is too large (%zu bytes; "
                       "etcd takes at most 1.5 MiB per request)",
                       bytes);
    return rc;
}

/* Run one op of the branch at revision base + 1; *changed: something was
 * written so far (lock held, room reserved). */
static int run_op(ec_etcd_mem_t *m, const ec_op_t *o, int64_t base, bool *changed,
                  ec_op_result_t *res)
{
    range_t r = op_range(o);
    int64_t rev = base + 1;
    if (res)
        res->type = o->type;
    switch (o->type) {
    case EC_OP_GET:
        if (!res)
            return 0;
        /* a read after a write of the same transaction sees it, at its revision */
        res->kvs.revision = *changed ? rev : base;
        return list_range_locked(m, &r, &res->kvs);
    case EC_OP_PUT: {
        int rc = put_locked(m, o->key, o->value, o->value_len, o->lease, rev);
        if (rc < 0)
            return rc;
        *changed = true;
        if (res)
            res->revision = rev;
        return 0;
    }
    case EC_OP_DELETE: {
        int64_t n = del_range_locked(m, &r, rev);
        if (n < 0)
            return (int)n;
        *changed |= n > 0;
        if (res)
            res->deleted = n;
        return 0;
    }
    }
    return 0;
}

/* The branch's leases must exist, all of them, before any op runs. */
static int check_leases(ec_etcd_mem_t *m, const ec_op_t *ops, size_t n, ec_error_t *err)
{
    for (size_t i = 0; i < n; i++)
        if (ops[i].type == EC_OP_PUT && ops[i].lease && !lease_find(m, ops[i].lease))
            return no_lease(err, "Txn");
    return 0;
}

static int64_t writes_in(const ec_op_t *ops, size_t n)
{
    int64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w += ops[i].type != EC_OP_GET;
    return w;
}

int ec__mem_txn(ec_etcd_mem_t *m, const ec_cmp_t *cmps, size_t ncmp, const ec_op_t *then_ops,
                size_t nthen, const ec_op_t *else_ops, size_t nelse, ec_txn_result_t *out,
                ec_error_t *err)
{
    if (out)
        memset(out, 0, sizeof(*out));
    int rc = check_txn(cmps, ncmp, then_ops, nthen, else_ops, nelse, err);
    if (rc < 0 || (rc = enter(m, "Txn", err)) < 0)
        return rc;
    bool ok = true;
    for (size_t i = 0; i < ncmp && ok; i++)
        ok = cmp_holds(m, &cmps[i]);
    const ec_op_t *ops = ok ? then_ops : else_ops;
    size_t n = ok ? nthen : nelse;
    ec_op_result_t *res = NULL;
    if ((rc = check_leases(m, ops, n, err)) < 0)
        goto done;
    /* a delete takes at most every live key: room for all, at once */
    if (reserve(m, (size_t)writes_in(ops, n) + m->ncur) < 0 ||
        (out && !(res = calloc(n ? n : 1, sizeof(*res))))) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto done;
    }
    int64_t base = m->rev;
    bool changed = false;
    /* only the allocation of a version can fail from here: the test
     * process is out of memory, and the store may be half written */
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = run_op(m, &ops[i], base, &changed, res ? &res[i] : NULL);
    if (changed) {
        m->rev = base + 1;
        pthread_cond_broadcast(&m->cond);
    }
    if (rc < 0) {
        ec_errorf(err, rc, "out of memory");
        goto done;
    }
    if (out) {
        out->succeeded = ok;
        out->revision = m->rev;
        out->results = res;
        out->n = n;
        res = NULL;
    }
done:
    pthread_mutex_unlock(&m->lock);
    if (res) {
        for (size_t i = 0; i < n; i++)
            ec_kv_list_free(&res[i].kvs);
        free(res);
    }
    return rc;
}

/* ---- key-values ---------------------------------------------------------- */

int ec__mem_get_at(ec_etcd_mem_t *m, const char *key, int64_t at, ec_kv_t *out, bool *found,
                   int64_t *revision, ec_error_t *err)
{
    int rc = enter(m, "Range", err);
    if (rc < 0)
        return rc;
    if (at > m->rev) {
        rc = ec_errorf(err, EC_EINVAL,
                       "etcd at mem: Range: etcdserver: mvcc: required revision is a future "
                       "revision (%lld; the store is at %lld)",
                       (long long)at, (long long)m->rev);
    } else if (at > 0 && at < m->compact_rev) {
        rc = ec_errorf(err, EC_ECOMPACTED,
                       "etcd at mem: Range: etcdserver: mvcc: required revision has been "
                       "compacted (%lld; oldest kept: %lld) (read a newer revision)",
                       (long long)at, (long long)m->compact_rev);
    } else {
        const ec__mem_rec_t *r =
            at > 0 ? version_at(m, key, at) : cur_find(m, key, strlen(key));
        if (r) {
            rc = ec__mem_kv_copy(out, r);
            *found = rc == 0;
        }
        if (revision)
            *revision = m->rev;
        if (rc < 0)
            ec_errorf(err, rc, "out of memory");
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int ec__mem_get_prefix(ec_etcd_mem_t *m, const char *prefix, ec_kv_list_t *out, ec_error_t *err)
{
    int rc = enter(m, "Range", err);
    if (rc < 0)
        return rc;
    range_t r = {R_PREFIX, prefix, NULL, strlen(prefix), 0};
    rc = list_range_locked(m, &r, out);
    out->revision = m->rev;
    pthread_mutex_unlock(&m->lock);
    if (rc < 0) {
        ec_kv_list_free(out);
        return ec_errorf(err, rc, "out of memory listing %s", prefix);
    }
    return 0;
}

int ec__mem_next_key(ec_etcd_mem_t *m, const char *prefix, const char *from, char *key,
                     size_t len, bool *found, ec_error_t *err)
{
    int rc = enter(m, "Range", err);
    if (rc < 0)
        return rc;
    size_t plen = strlen(prefix), i = cur_lower(m, from, strlen(from));
    if (i < m->ncur && m->cur[i]->key_len >= plen && !memcmp(m->cur[i]->key, prefix, plen)) {
        size_t n = m->cur[i]->key_len < len - 1 ? m->cur[i]->key_len : len - 1;
        memcpy(key, m->cur[i]->key, n);
        key[n] = '\0';
        *found = true;
    }
    pthread_mutex_unlock(&m->lock);
    return 0;
}

int ec__mem_put(ec_etcd_mem_t *m, const char *key, const void *value, size_t len, int64_t lease,
                int64_t *revision, ec_error_t *err)
{
    ec_op_t op = {.type = EC_OP_PUT, .key = key, .value = value, .value_len = len, .lease = lease};
    ec_txn_result_t r;
    int rc = ec__mem_txn(m, NULL, 0, &op, 1, NULL, 0, &r, err);
    if (rc == EC_ENOTFOUND)
        ec_error_prefix(err, "put %s with lease %llx (the lease expired or was revoked)", key,
                        (unsigned long long)lease);
    if (rc < 0)
        return rc;
    if (revision)
        *revision = r.revision;
    ec_txn_result_free(&r);
    return 0;
}

int ec__mem_delete(ec_etcd_mem_t *m, const char *key, bool prefix, int64_t *deleted,
                   ec_error_t *err)
{
    ec_op_t op = {.type = EC_OP_DELETE, .key = key, .prefix = prefix};
    ec_txn_result_t r;
    int rc = ec__mem_txn(m, NULL, 0, &op, 1, NULL, 0, &r, err);
    if (rc < 0)
        return rc;
    if (deleted)
        *deleted = r.results[0].deleted;
    ec_txn_result_free(&r);
    return 0;
}

/* Drop every version below rev that no read at rev or above can see: one
 * replaced below rev, and a deletion below rev (lock held). */
static void drop_below(ec_etcd_mem_t *m, int64_t rev)
{
    for (size_t i = 0; i < m->nlog; i++) {
        ec__mem_rec_t *r = m->log[i];
        if (r->mod_rev >= rev)
            break;
        if (r->prev)
            r->prev->dropped = true;
        if (r->tomb)
            r->dropped = true;
    }
    /* a version kept below rev: no event of it is replayed, so what it
     * replaced (dropped) is never asked for.  Before any is freed. */
    for (size_t i = 0; i < m->nlog; i++)
        if (!m->log[i]->dropped && m->log[i]->prev && m->log[i]->prev->dropped)
            m->log[i]->prev = NULL;
    size_t k = 0;
    for (size_t i = 0; i < m->nlog; i++) {
        if (m->log[i]->dropped)
            rec_free(m->log[i]);
        else
            m->log[k++] = m->log[i];
    }
    m->nlog = k;
}

int ec__mem_compact(ec_etcd_mem_t *m, int64_t revision, ec_error_t *err)
{
    int rc = enter(m, "Compact", err);
    if (rc < 0)
        return rc;
    if (revision <= m->compact_rev)
        rc = ec_errorf(err, EC_ECOMPACTED,
                       "etcd at mem: Compact: etcdserver: mvcc: required revision has been "
                       "compacted (%lld; compacted at %lld) (read a newer revision)",
                       (long long)revision, (long long)m->compact_rev);
    else if (revision > m->rev)
        rc = ec_errorf(err, EC_EINVAL,
                       "etcd at mem: Compact: etcdserver: mvcc: required revision is a future "
                       "revision (%lld; the store is at %lld)",
                       (long long)revision, (long long)m->rev);
    else {
        drop_below(m, revision);
        m->compact_rev = revision;
        pthread_cond_broadcast(&m->cond); /* watches behind it end */
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int ec__mem_status(ec_etcd_mem_t *m, int64_t *revision, char *version, size_t vlen,
                   ec_error_t *err)
{
    int rc = enter(m, "Status", err);
    if (rc < 0)
        return rc;
    if (revision)
        *revision = m->rev;
    pthread_mutex_unlock(&m->lock);
    if (version && vlen)
        snprintf(version, vlen, "mem");
    return 0;
}

/* ---- the store ------------------------------------------------------------ */

ec_etcd_mem_t *ec_etcd_mem_new(ec_error_t *err)
{
    ec_etcd_mem_t *m = calloc(1, sizeof(*m));
    if (!m) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    m->rev = 1;
    /* lease ids look like etcd's (large, positive), and say where they are from */
    m->next_lease = 0x6d656d0000000001LL; /* "mem" */
    pthread_mutex_init(&m->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&m->reaper, NULL, reaper_main, m) != 0) {
        pthread_mutex_destroy(&m->lock);
        pthread_cond_destroy(&m->cond);
        free(m);
        ec_errorf(err, EC_ESYS, "cannot start the in-memory store's lease reaper thread");
        return NULL;
    }
    return m;
}

void ec_etcd_mem_free(ec_etcd_mem_t *m)
{
    if (!m)
        return;
    int saved = errno;
    pthread_mutex_lock(&m->lock);
    m->stop = true;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->reaper, NULL);
    for (size_t i = 0; i < m->nlog; i++)
        rec_free(m->log[i]);
    free(m->log);
    free(m->cur);
    free(m->leases);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    free(m);
    errno = saved;
}

int ec_etcd_mem_expire_lease(ec_etcd_mem_t *m, int64_t id, ec_error_t *err)
{
    pthread_mutex_lock(&m->lock);
    ec__mem_lease_t *l = lease_find(m, id);
    if (l)
        revoke_locked(m, (size_t)(l - m->leases));
    pthread_mutex_unlock(&m->lock);
    if (!l)
        return ec_errorf(err, EC_ENOTFOUND, "ec_etcd_mem_expire_lease: no lease %llx in the store",
                         (unsigned long long)id);
    return 0;
}

void ec_etcd_mem_set_frozen(ec_etcd_mem_t *m, bool frozen)
{
    pthread_mutex_lock(&m->lock);
    m->frozen = frozen;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

int ec_etcd_mem_frozen_calls(ec_etcd_mem_t *m)
{
    pthread_mutex_lock(&m->lock);
    int k = m->nfrozen_calls;
    pthread_mutex_unlock(&m->lock);
    return k;
}

void ec_etcd_mem_set_down(ec_etcd_mem_t *m, bool down)
{
    pthread_mutex_lock(&m->lock);
    if (m->down && !down) {
        /* etcd restarted: every lease gets its whole TTL again */
        int64_t now = ec_mono_ms();
        for (size_t i = 0; i < m->nleases; i++)
            m->leases[i].expires_ms = now + m->leases[i].ttl_s * 1000;
    }
    m->down = down;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
}
