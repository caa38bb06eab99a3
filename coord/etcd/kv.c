/* KV: get, prefix listing with pagination, put, delete, txn, compact. */
#include <stdlib.h>
#include <string.h>

#include "etcd_impl.h"

/* range_end for "every key starting with prefix": the prefix with its last
 * byte incremented (trailing 0xff bytes dropped); "\0" means all keys. */
static size_t prefix_end(const char *key, size_t len, uint8_t *out)
{
    memcpy(out, key, len);
    while (len > 0) {
        if (out[len - 1] < 0xff) {
            out[len - 1]++;
            return len;
        }
        len--;
    }
    out[0] = 0;
    return 1;
}

static int list_from_pb(ec_kv_list_t *out, Mvccpb__KeyValue **kvs, size_t n)
{
    if (n == 0)
        return 0;
    ec_kv_t *nk = realloc(out->kvs, (out->n + n) * sizeof(ec_kv_t));
    if (!nk)
        return EC_ENOMEM;
    out->kvs = nk;
    for (size_t i = 0; i < n; i++) {
        int rc = ec__kv_from_pb(&out->kvs[out->n], kvs[i]);
        if (rc < 0)
            return rc;
        out->n++;
    }
    return 0;
}

int ec_etcd_get(ec_etcd_t *c, const char *key, ec_kv_t *out, bool *found, int64_t *revision,
                ec_error_t *err)
{
    return ec_etcd_get_at(c, key, 0, out, found, revision, err);
}

int ec_etcd_get_at(ec_etcd_t *c, const char *key, int64_t at, ec_kv_t *out, bool *found,
                   int64_t *revision, ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    *found = false;
    if (!key || !*key)
        return ec_errorf(err, EC_EINVAL, "ec_etcd_get: empty key");
    if (c->mem)
        return ec__mem_get_at(c->mem, key, at, out, found, revision, err);
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    req.key.data = (uint8_t *)key;
    req.key.len = strlen(key);
    req.revision = at > 0 ? at : 0;
    Etcdserverpb__RangeResponse *r = NULL;
    int rc = ec__unary(c, "/etcdserverpb.KV/Range", &req.base,
                       &etcdserverpb__range_response__descriptor, (ProtobufCMessage **)&r, err);
    if (rc < 0)
        return rc;
    if (revision)
        *revision = r->header ? r->header->revision : 0;
    if (r->n_kvs > 0) {
        rc = ec__kv_from_pb(out, r->kvs[0]);
        *found = rc == 0;
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return rc < 0 ? ec_errorf(err, rc, "out of memory") : 0;
}

int ec_etcd_get_prefix(ec_etcd_t *c, const char *prefix, size_t page, ec_kv_list_t *out,
                       ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (!prefix || !*prefix)
        return ec_errorf(err, EC_EINVAL, "ec_etcd_get_prefix: empty prefix");
    if (c->mem)
        return ec__mem_get_prefix(c->mem, prefix, out, err);
    size_t plen = strlen(prefix);
    uint8_t *end = malloc(plen + 1);
    char *from = malloc(plen + 1);
    if (!end || !from) {
        free(end);
        free(from);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    size_t endlen = prefix_end(prefix, plen, end);
    memcpy(from, prefix, plen + 1);
    size_t fromlen = plen;
    int rc = 0;
    for (;;) {
        Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
        req.key.data = (uint8_t *)from;
        req.key.len = fromlen;
        req.range_end.data = end;
        req.range_end.len = endlen;
        req.limit = page ? (int64_t)page : 1000;
        req.revision = out->revision; /* 0 on the first page, then pinned */
        Etcdserverpb__RangeResponse *r = NULL;
        rc = ec__unary(c, "/etcdserverpb.KV/Range", &req.base,
                       &etcdserverpb__range_response__descriptor, (ProtobufCMessage **)&r, err);
        if (rc < 0)
            break;
        if (out->revision == 0)
            out->revision = r->header ? r->header->revision : 0;
        rc = list_from_pb(out, r->kvs, r->n_kvs);
        bool more = r->more && r->n_kvs > 0;
        if (rc == 0 && more) {
            /* Next page starts just after the last key: last key + "\0". */
            Mvccpb__KeyValue *last = r->kvs[r->n_kvs - 1];
            char *nf = realloc(from, last->key.len + 2);
            if (!nf) {
                rc = EC_ENOMEM;
            } else {
                from = nf;
                memcpy(from, last->key.data, last->key.len);
                from[last->key.len] = '\0';
                fromlen = last->key.len + 1;
            }
        }
        protobuf_c_message_free_unpacked(&r->base, NULL);
        if (rc < 0) {
            ec_errorf(err, rc, "out of memory listing %s", prefix);
            break;
        }
        if (!more)
            break;
    }
    free(end);
    free(from);
    if (rc < 0)
        ec_kv_list_free(out);
    return rc;
}

int ec_etcd_next_key(ec_etcd_t *c, const char *prefix, const char *from, char *key, size_t len,
                     bool *found, ec_error_t *err)
{
    *found = false;
    if (!prefix || !*prefix || !from || strncmp(from, prefix, strlen(prefix)) != 0 || !key ||
        len == 0)
        return ec_errorf(err, EC_EINVAL, "ec_etcd_next_key: from must start with the prefix");
    if (c->mem)
        return ec__mem_next_key(c->mem, prefix, from, key, len, found, err);
    size_t plen = strlen(prefix);
    uint8_t *end = malloc(plen + 1);
    if (!end)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    req.key.data = (uint8_t *)from;
    req.key.len = strlen(from);
    req.range_end.len = prefix_end(prefix, plen, end);
    req.range_end.data = end;
    req.limit = 1;
    req.keys_only = 1;
    Etcdserverpb__RangeResponse *r = NULL;
    int rc = ec__unary(c, "/etcdserverpb.KV/Range", &req.base,
                       &etcdserverpb__range_response__descriptor, (ProtobufCMessage **)&r, err);
    free(end);
    if (rc < 0)
        return rc;
    if (r->n_kvs > 0) {
        size_t n = r->kvs[0]->key.len < len - 1 ? r->kvs[0]->key.len : len - 1;
        memcpy(key, r->kvs[0]->key.data, n);
        key[n] = '\0';
        *found = true;
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return 0;
}

int ec_etcd_put(ec_etcd_t *c, const char *key, const void *value, size_t len, int64_t lease,
                int64_t *revision, ec_error_t *err)
{
    if (!key || !*key)
        return ec_errorf(err, EC_EINVAL, "ec_etcd_put: empty key");
    if (c->mem)
        return ec__mem_put(c->mem, key, value, len, lease, revision, err);
    Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
    req.key.data = (uint8_t *)key;
    req.key.len = strlen(key);
    req.value.data = (uint8_t *)value;
    req.value.len = len;
    req.lease = lease;
    Etcdserverpb__PutResponse *r = NULL;
    int rc = ec__unary(c, "/etcdserverpb.KV/Put", &req.base, &etcdserverpb__put_response__descriptor,
                       (ProtobufCMessage **)&r, err);
    if (rc < 0) {
        if (rc == EC_ENOTFOUND)
            ec_error_prefix(err, "put %s with lease %llx (the lease expired or was revoked)", key,
                            (unsigned long long)lease);
        return rc;
    }
    if (revision)
        *revision = r->header ? r->header->revision : 0;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return 0;
}

int ec_etcd_delete(ec_etcd_t *c, const char *key, bool prefix, int64_t *deleted, ec_error_t *err)
{
    if (!key || !*key)
        return ec_errorf(err, EC_EINVAL, "ec_etcd_delete: empty key");
    if (c->mem)
        return ec__mem_delete(c->mem, key, prefix, deleted, err);
    size_t klen = strlen(key);
    uint8_t *end = prefix ? malloc(klen + 1) : NULL;
    Etcdserverpb__DeleteRangeRequest req = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    req.key.data = (uint8_t *)key;
    req.key.len = klen;
    if (prefix) {
        if (!end)
            return ec_errorf(err, EC_ENOMEM, "out of memory");
        req.range_end.len = prefix_end(key, klen, end);
        req.range_end.data = end;
    }
    Etcdserverpb__DeleteRangeResponse *r = NULL;
    int rc = ec__unary(c, "/etcdserverpb.KV/DeleteRange", &req.base,
                       &etcdserverpb__delete_range_response__descriptor, (ProtobufCMessage **)&r,
                       err);
    free(end);
    if (rc < 0)
        return rc;
    if (deleted)
        *deleted = r->deleted;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return 0;
}

int ec_etcd_compact(ec_etcd_t *c, int64_t revision, bool physical, ec_error_t *err)
{
    if (c->mem)
        return ec__mem_compact(c->mem, revision, err);
    Etcdserverpb__CompactionRequest req = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    req.revision = revision;
    req.physical = physical;
    Etcdserverpb__CompactionResponse *r = NULL;
    int rc = ec__unary(c, "/etcdserverpb.KV/Compact", &req.base,
                       &etcdserverpb__compaction_response__descriptor, (ProtobufCMessage **)&r, err);
    if (rc < 0)
        return rc;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return 0;
}

/* ---- transactions ---------------------------------------------------- */

/* Request ops live in one arena so the whole request is freed at once. */
typedef struct {
    Etcdserverpb__RequestOp op;
    union {
        Etcdserverpb__RangeRequest range;
        Etcdserverpb__PutRequest put;
        Etcdserverpb__DeleteRangeRequest del;
    } u;
    uint8_t *end;
} txn_op_t;

static int build_op(txn_op_t *t, const ec_op_t *o)
{
    Etcdserverpb__RequestOp init = ETCDSERVERPB__REQUEST_OP__INIT;
    t->op = init;
    t->end = NULL;
    size_t klen = strlen(o->key);
    size_t endlen = 0;
    if (o->range_end && o->type != EC_OP_PUT) {
        endlen = strlen(o->range_end);
        t->end = malloc(endlen + 1);
        if (!t->end)
            return EC_ENOMEM;
        memcpy(t->end, o->range_end, endlen + 1);
    } else if (o->prefix && o->type != EC_OP_PUT) {
        t->end = malloc(klen + 1);
        if (!t->end)
            return EC_ENOMEM;
        endlen = prefix_end(o->key, klen, t->end);
    }
    switch (o->type) {
    case EC_OP_GET: {
        Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
        t->u.range = r;
        t->u.range.key.data = (uint8_t *)o->key;
        t->u.range.key.len = klen;
        if (t->end) {
            t->u.range.range_end.len = endlen;
            t->u.range.range_end.data = t->end;
        }
        t->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
        t->op.request_range = &t->u.range;
        break;
    }
    case EC_OP_PUT: {
        Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
        t->u.put = p;
        t->u.put.key.data = (uint8_t *)o->key;
        t->u.put.key.len = klen;
        t->u.put.value.data = (uint8_t *)o->value;
        t->u.put.value.len = o->value_len;
        t->u.put.lease = o->lease;
        t->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        t->op.request_put = &t->u.put;
        break;
    }
    case EC_OP_DELETE: {
        Etcdserverpb__DeleteRangeRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
        t->u.del = d;
        t->u.del.key.data = (uint8_t *)o->key;
        t->u.del.key.len = klen;
        if (t->end) {
            t->u.del.range_end.len = endlen;
            t->u.del.range_end.data = t->end;
        }
        t->op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
        t->op.request_delete_range = &t->u.del;
        break;
    }
    }
    return 0;
}

void ec_txn_result_free(ec_txn_result_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        ec_kv_list_free(&r->results[i].kvs);
    free(r->results);
    memset(r, 0, sizeof(*r));
}

int ec_etcd_txn(ec_etcd_t *c, const ec_cmp_t *cmps, size_t ncmp, const ec_op_t *then_ops,
                size_t nthen, const ec_op_t *else_ops, size_t nelse, ec_txn_result_t *out,
                ec_error_t *err)
{
    if (c->mem)
        return ec__mem_txn(c->mem, cmps, ncmp, then_ops, nthen, else_ops, nelse, out, err);
    if (out)
        memset(out, 0, sizeof(*out));
    int rc = 0;
    Etcdserverpb__Compare *cmp = calloc(ncmp ? ncmp : 1, sizeof(*cmp));
    Etcdserverpb__Compare **cmpp = calloc(ncmp ? ncmp : 1, sizeof(*cmpp));
    size_t nops = nthen + nelse;
    txn_op_t *ops = calloc(nops ? nops : 1, sizeof(*ops));
    Etcdserverpb__RequestOp **opp = calloc(nops ? nops : 1, sizeof(*opp));
    Etcdserverpb__TxnResponse *r = NULL;
    if (!cmp || !cmpp || !ops || !opp) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ncmp; i++) {
        Etcdserverpb__Compare init = ETCDSERVERPB__COMPARE__INIT;
        cmp[i] = init;
        cmp[i].key.data = (uint8_t *)cmps[i].key;
        cmp[i].key.len = strlen(cmps[i].key);
        cmp[i].result = (Etcdserverpb__Compare__CompareResult)cmps[i].result;
        switch (cmps[i].target) {
        case EC_CMP_VERSION:
            cmp[i].target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
            cmp[i].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
            cmp[i].version = cmps[i].number;
            break;
        case EC_CMP_CREATE:
            cmp[i].target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
            cmp[i].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
            cmp[i].create_revision = cmps[i].number;
            break;
        case EC_CMP_MOD:
            cmp[i].target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
            cmp[i].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
            cmp[i].mod_revision = cmps[i].number;
            break;
        case EC_CMP_VALUE:
            cmp[i].target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE;
            cmp[i].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
            cmp[i].value.data = (uint8_t *)cmps[i].value;
            cmp[i].value.len = cmps[i].value_len;
            break;
        }
        cmpp[i] = &cmp[i];
    }
    for (size_t i = 0; i < nops; i++) {
        const ec_op_t *o = i < nthen ? &then_ops[i] : &else_ops[i - nthen];
        if (!o->key || !*o->key) {
            rc = ec_errorf(err, EC_EINVAL, "ec_etcd_txn: op %zu has an empty key", i);
            goto done;
        }
        if ((rc = build_op(&ops[i], o)) < 0) {
            ec_errorf(err, rc, "out of memory");
            goto done;
        }
        opp[i] = &ops[i].op;
    }
    Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
    req.n_compare = ncmp;
    req.compare = cmpp;
    req.n_success = nthen;
    req.success = opp;
    req.n_failure = nelse;
    req.failure = opp + nthen;
    rc = ec__unary(c, "/etcdserverpb.KV/Txn", &req.base, &etcdserverpb__txn_response__descriptor,
                   (ProtobufCMessage **)&r, err);
    if (rc < 0 || !out)
        goto done;
    out->succeeded = r->succeeded;
    out->revision = r->header ? r->header->revision : 0;
    out->results = calloc(r->n_responses ? r->n_responses : 1, sizeof(ec_op_result_t));
    if (!out->results) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < r->n_responses; i++) {
        Etcdserverpb__ResponseOp *ro = r->responses[i];
        ec_op_result_t *res = &out->results[out->n++];
        switch (ro->response_case) {
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE:
            res->type = EC_OP_GET;
            res->kvs.revision = ro->response_range->header ? ro->response_range->header->revision : 0;
            if (list_from_pb(&res->kvs, ro->response_range->kvs, ro->response_range->n_kvs) < 0)
                rc = ec_errorf(err, EC_ENOMEM, "out of memory");
            break;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT:
            res->type = EC_OP_PUT;
            res->revision = ro->response_put->header ? ro->response_put->header->revision : 0;
            break;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE:
            res->type = EC_OP_DELETE;
            res->deleted = ro->response_delete_range->deleted;
            break;
        default:
            break;
        }
    }
    if (rc < 0)
        ec_txn_result_free(out);
done:
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    for (size_t i = 0; ops && i < nops; i++)
        free(ops[i].end);
    free(ops);
    free(opp);
    free(cmp);
    free(cmpp);
    return rc;
}
