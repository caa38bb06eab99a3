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
