/* Reading an epoch that may be split (see epoch_fetch.h). */
#define _GNU_SOURCE
#include "epoch_fetch.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int ec_epoch_fetch(ec_etcd_t *c, const ec_keys_t *k, const void *val, size_t len,
                   const char *key, ec_epoch_t **out, void **whole, size_t *whole_len,
                   ec_error_t *err)
{
    *out = NULL;
    if (whole) {
        *whole = NULL;
        *whole_len = 0;
    }
    ec_epoch_split_t info;
    int rc = ec_epoch_head_info(val, len, key, &info, err);
    if (rc < 0)
        return rc;
    ec_kv_list_t l = {0};
    const void **cv = NULL;
    size_t *cl = NULL;
    if (rc == 0) {
        rc = ec_epoch_decode(val, len, key, out, err);
    } else {
        char prefix[EC_KEY_MAX];
        if ((rc = ec_key_epoch_chunks_prefix(k, info.number, prefix, sizeof(prefix))) < 0) {
            ec_errorf(err, rc, "epoch %" PRIu64 ": cannot build its chunks' key", info.number);
            goto out;
        }
        if ((rc = ec_etcd_get_prefix(c, prefix, 0, &l, err)) < 0) {
            ec_error_prefix(err, "reading the %d chunks of epoch %" PRIu64, info.nchunks,
                            info.number);
            goto out;
        }
        cv = calloc((size_t)info.nchunks, sizeof(*cv));
        cl = calloc((size_t)info.nchunks, sizeof(*cl));
        if (!cv || !cl) {
            rc = ec_errorf(err, EC_ENOMEM, "out of memory");
            goto out;
        }
        /* keys sort by chunk number (zero-padded); anything else under the
         * prefix is not a chunk of this head and is left out */
        for (size_t i = 0; i < l.n; i++)
            for (int j = 0; j < info.nchunks; j++) {
                char ck[EC_KEY_MAX];
                ec_key_epoch_chunk(k, info.number, j, ck, sizeof(ck));
                if (!cv[j] && !strcmp(ck, l.kvs[i].key)) {
                    cv[j] = l.kvs[i].value;
                    cl[j] = l.kvs[i].value_len;
                    break;
                }
            }
        rc = ec_epoch_assemble(val, len, cv, cl, info.nchunks, key, out, err);
    }
    if (rc == 0 && whole && (rc = ec_epoch_encode_whole(*out, whole, whole_len, err)) < 0) {
        ec_epoch_free(*out);
        *out = NULL;
    }
out:
    free(cv);
    free(cl);
    ec_kv_list_free(&l);
    ec_epoch_split_free(&info);
    return rc;
}

static const ec_kv_t *find_kv(const ec_kv_list_t *l, const char *key)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(l->kvs[mid].key, key);
        if (!c)
            return &l->kvs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int ec_epoch_from_listing(const ec_keys_t *k, const ec_kv_list_t *l, const void *val, size_t len,
                          const char *key, ec_epoch_t **out, ec_error_t *err)
{
    *out = NULL;
    ec_epoch_split_t info;
    int rc = ec_epoch_head_info(val, len, key, &info, err);
    if (rc <= 0)
        return rc < 0 ? rc : ec_epoch_decode(val, len, key, out, err);
    const void **cv = calloc((size_t)info.nchunks, sizeof(*cv));
    size_t *cl = calloc((size_t)info.nchunks, sizeof(*cl));
    if (!cv || !cl) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
    } else {
        for (int j = 0; j < info.nchunks; j++) {
            char ck[EC_KEY_MAX];
            ec_key_epoch_chunk(k, info.number, j, ck, sizeof(ck));
            const ec_kv_t *c = find_kv(l, ck);
            if (c) {
                cv[j] = c->value;
                cl[j] = c->value_len;
            }
        }
        rc = ec_epoch_assemble(val, len, cv, cl, info.nchunks, key, out, err);
    }
    free(cv);
    free(cl);
    ec_epoch_split_free(&info);
    return rc;
}

/* One key's value (EC_ECORRUPT "missing" when absent). */
static int get_one(ec_etcd_t *c, const char *key, ec_kv_t *kv, const char *what, uint64_t number,
                   ec_error_t *err)
{
    bool found = false;
    int rc = ec_etcd_get(c, key, kv, &found, NULL, err);
    if (rc < 0)
        return ec_error_prefix(err, "reading %s of epoch %" PRIu64, what, number);
    if (!found)
        return ec_errorf(err, EC_ECORRUPT, "epoch %" PRIu64 ": %s (%s) is missing (a newer "
                         "epoch replaced it?)", number, what, key);
    return 0;
}

int ec_epoch_fetch_view(ec_etcd_t *c, const ec_keys_t *k, const void *val, size_t len,
                        const char *key, const char *self, int successors, ec_epoch_t **out,
                        ec_error_t *err)
{
    *out = NULL;
    ec_epoch_t *ep = NULL;
    int rc = ec_epoch_decode_view(val, len, key, &ep, err);
    if (rc < 0 || ep->present == ep->nmembers || !self || ep->nbuckets < 1) {
        *out = ep;
        return rc;
    }
    char ik[EC_KEY_MAX];
    int b = (int)ec_epoch_index_bucket(self, ep->nbuckets), m = -1;
    ec_kv_t kv;
    ec_key_epoch_index(k, ep->number, b, ik, sizeof(ik));
    if ((rc = get_one(c, ik, &kv, "the index bucket", ep->number, err)) < 0)
        goto out;
    rc = ec_epoch_index_find(kv.value, kv.value_len, ep->index_digest[b], ep->number, b, self,
                             &m, err);
    ec_kv_free(&kv);
    if (rc <= 0)
        goto out; /* not a member (rc 0): the head is all it needs */
    int want[EC_EPOCH_VIEW_CHUNKS_MAX];
    int nw = ec_epoch_view_chunks(ep, m, successors, want);
    for (int j = 0; j < nw; j++) {
        int ck = want[j];
        char key2[EC_KEY_MAX];
        ec_key_epoch_chunk(k, ep->number, ck, key2, sizeof(key2));
        if ((rc = get_one(c, key2, &kv, "a chunk", ep->number, err)) < 0)
            goto out;
        rc = ec_epoch_view_add_chunk(ep, ck, kv.value, kv.value_len, err);
        ec_kv_free(&kv);
        if (rc < 0)
            goto out;
    }
out:
    if (rc < 0) {
        ec_epoch_free(ep);
        return rc;
    }
    *out = ep;
    return 0;
}

int ec_epoch_complete(ec_etcd_t *c, const ec_keys_t *k, ec_epoch_t *ep, ec_error_t *err)
{
    if (ep->present == ep->nmembers)
        return 0;
    char prefix[EC_KEY_MAX];
    ec_kv_list_t l = {0};
    int rc = ec_key_epoch_chunks_prefix(k, ep->number, prefix, sizeof(prefix));
    if (rc < 0)
        return ec_errorf(err, rc, "epoch %" PRIu64 ": cannot build its chunks' key", ep->number);
    if ((rc = ec_etcd_get_prefix(c, prefix, 0, &l, err)) < 0)
        return ec_error_prefix(err, "reading the chunks of epoch %" PRIu64, ep->number);
    ec_epoch_t *t = ec_epoch_dup(ep);
    if (!t) {
        ec_kv_list_free(&l);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    for (int j = 0; j < t->nchunks && rc == 0; j++) {
        if (ec_epoch_view_has_chunk(t, j))
            continue;
        char ck[EC_KEY_MAX];
        ec_key_epoch_chunk(k, t->number, j, ck, sizeof(ck));
        const ec_kv_t *kv = find_kv(&l, ck);
        rc = ec_epoch_view_add_chunk(t, j, kv ? kv->value : NULL, kv ? kv->value_len : 0, err);
    }
    ec_kv_list_free(&l);
    if (rc == 0 && t->present != t->nmembers)
        rc = ec_errorf(err, EC_ECORRUPT, "epoch %" PRIu64 ": %d of %d members after reading "
                       "every chunk", t->number, t->present, t->nmembers);
    if (rc == 0) { /* swap the whole member table in */
        ec_member_t *mm = ep->members;
        ep->members = t->members;
        ep->present = t->present;
        t->members = mm;
    }
    ec_epoch_free(t);
    return rc;
}
