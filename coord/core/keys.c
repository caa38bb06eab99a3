/* The etcd key layout (see keys.h for the tree).  Nothing else in ecoord
 * formats a key path. */
#include "keys.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define EC__SEQ_DIGITS 20 /* UINT64_MAX is 20 decimal digits */

static int id_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

/* 0 if valid, else the index of the first bad character + 1, or -1 for a bad
 * length / dot name. */
static long id_scan(const char *id, size_t len, size_t max)
{
    if (len == 0 || len > max)
        return -1;
    if ((len == 1 && id[0] == '.') || (len == 2 && id[0] == '.' && id[1] == '.'))
        return -1;
    for (size_t i = 0; i < len; i++)
        if (!id_char((unsigned char)id[i]))
            return (long)i + 1;
    return 0;
}

static int id_check(const char *what, const char *id, size_t max, ec_error_t *err)
{
    if (!id)
        return ec_errorf(err, EC_EINVAL, "%s is missing", what);
    size_t len = strnlen(id, max + 1);
    long r = id_scan(id, len, max);
    if (r < 0)
        return ec_errorf(err, EC_EINVAL,
                         "%s '%.64s%s' must be 1..%zu characters from [A-Za-z0-9._-] "
                         "and not '.' or '..'",
                         what, id, len > 64 ? "..." : "", max);
    if (r > 0) {
        unsigned char c = (unsigned char)id[r - 1];
        char shown[16];
        if (c > 0x20 && c < 0x7f)
            snprintf(shown, sizeof(shown), "'%c'", c);
        else
            snprintf(shown, sizeof(shown), "byte 0x%02x", c);
        return ec_errorf(err, EC_EINVAL,
                         "%s '%.64s%s' has %s at position %ld; use only letters, digits, "
                         "'.', '_' and '-'",
                         what, id, len > 64 ? "..." : "", shown, r - 1);
    }
    return 0;
}

int ec_job_id_check(const char *job_id, ec_error_t *err)
{
    return id_check("job id", job_id, EC_JOB_ID_MAX, err);
}

int ec_node_id_check(const char *node_id, ec_error_t *err)
{
    return id_check("node id", node_id, EC_NODE_ID_MAX, err);
}

int ec_node_id_valid(const char *id, size_t len)
{
    return id && id_scan(id, len, EC_NODE_ID_MAX) == 0;
}

int ec_keys_init(ec_keys_t *k, const char *prefix, const char *job_id, ec_error_t *err)
{
    if (!k)
        return ec_errorf(err, EC_EINVAL, "ec_keys_init: no ec_keys_t given");
    k->root[0] = '\0';
    k->root_len = k->jobs_len = 0;
    int rc = ec_job_id_check(job_id, err);
    if (rc < 0)
        return rc;
    if (!prefix)
        prefix = "";
    size_t plen = strlen(prefix);
    while (plen > 0 && prefix[plen - 1] == '/')
        plen--;
    if (plen > EC_PREFIX_MAX)
        return ec_errorf(err, EC_EINVAL, "etcd prefix '%.64s...' is longer than %d characters",
                         prefix, EC_PREFIX_MAX);
    for (size_t i = 0; i < plen; i++) {
        unsigned char c = (unsigned char)prefix[i];
        if (c <= 0x20 || c >= 0x7f)
            return ec_errorf(err, EC_EINVAL,
                             "etcd prefix '%.*s' has a space or non-printable character at "
                             "position %zu; use printable ASCII such as '/ecoord'",
                             (int)plen, prefix, i);
        if (c == '/' && i + 1 < plen && prefix[i + 1] == '/')
            return ec_errorf(err, EC_EINVAL,
                             "etcd prefix '%.*s' contains '//'; write it as '/a/b'", (int)plen,
                             prefix);
    }
    int n = snprintf(k->root, sizeof(k->root), "%.*s/%s/", (int)plen, prefix, job_id);
    k->root_len = (size_t)n; /* fits: plen <= EC_PREFIX_MAX, job id <= EC_JOB_ID_MAX */
    k->jobs_len = plen + 1;
    return 0;
}

int ec_keys_jobs_prefix(const ec_keys_t *k, char *buf, size_t len)
{
    if (!k || !k->jobs_len || k->jobs_len >= len)
        return EC_EINVAL;
    memcpy(buf, k->root, k->jobs_len);
    buf[k->jobs_len] = '\0';
    return 0;
}

const char *ec_keys_root(const ec_keys_t *k)
{
    return k ? k->root : "";
}

/* root + formatted tail into buf. */
__attribute__((format(printf, 4, 5))) static int build(const ec_keys_t *k, char *buf,
                                                       size_t len, const char *fmt, ...)
{
    if (!k || k->root_len == 0 || !buf)
        return EC_EINVAL;
    if (len <= k->root_len) {
        if (len)
            buf[0] = '\0';
        return EC_ETOOLARGE;
    }
    memcpy(buf, k->root, k->root_len);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + k->root_len, len - k->root_len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - k->root_len) {
        buf[0] = '\0';
        return EC_ETOOLARGE;
    }
    return (int)k->root_len + n;
}

int ec_key_nodes_prefix(const ec_keys_t *k, char *buf, size_t len)
{
    return build(k, buf, len, "nodes/");
}

int ec_key_node(const ec_keys_t *k, const char *node_id, char *buf, size_t len)
{
    if (ec_node_id_check(node_id, NULL) < 0)
        return EC_EINVAL;
    return build(k, buf, len, "nodes/%s", node_id);
}

int ec_key_leader(const ec_keys_t *k, char *buf, size_t len)
{
    return build(k, buf, len, "leader");
}

int ec_key_epoch(const ec_keys_t *k, char *buf, size_t len)
{
    return build(k, buf, len, "epoch");
}

int ec_key_epoch_delta(const ec_keys_t *k, char *buf, size_t len)
{
    return build(k, buf, len, "epochd");
}

int ec_key_epochs_prefix(const ec_keys_t *k, char *buf, size_t len)
{
    return build(k, buf, len, "epochs/");
}

int ec_key_epoch_history(const ec_keys_t *k, uint64_t n, char *buf, size_t len)
{
    if (n == 0)
        return EC_EINVAL;
    return build(k, buf, len, "epochs/%020" PRIu64, n);
}

int ec_key_probe_secret(const ec_keys_t *k, uint64_t run, char *buf, size_t len)
{
    if (run == 0)
        return EC_EINVAL;
    return build(k, buf, len, "runs/%020" PRIu64 "/probe_secret", run);
}

int ec_key_run(const ec_keys_t *k, uint64_t run, char *buf, size_t len)
{
    if (run == 0)
        return EC_EINVAL;
    return build(k, buf, len, "runs/%020" PRIu64, run);
}

int ec_key_runs_prefix(const ec_keys_t *k, char *buf, size_t len)
{
    return build(k, buf, len, "runs/");
}

int ec_key_epoch_worker_prefix(const ec_keys_t *k, uint64_t n, char *buf, size_t len)
{
    if (n == 0)
        return EC_EINVAL;
    return build(k, buf, len, "epochs/%020" PRIu64 "/", n);
}

int ec_key_epoch_comm(const ec_keys_t *k, uint64_t n, const char *name, char *buf, size_t len)
{
    if (n == 0 || id_check("communicator name", name, EC_COMM_NAME_MAX, NULL) < 0)
        return EC_EINVAL;
    return build(k, buf, len, "epochs/%020" PRIu64 "/comm/%s", n, name);
}

int ec_kv_name_check(const char *name, ec_error_t *err)
{
    return id_check("epoch key name", name, EC_KV_NAME_MAX, err);
}

int ec_key_epoch_kv(const ec_keys_t *k, uint64_t n, const char *name, char *buf, size_t len)
{
    if (n == 0 || ec_kv_name_check(name, NULL) < 0)
        return EC_EINVAL;
    return build(k, buf, len, "epochs/%020" PRIu64 "/kv/%s", n, name);
}

int ec_key_epoch_timing(const ec_keys_t *k, uint64_t n, int rank, char *buf, size_t len)
{
    if (n == 0 || rank < 0)
        return EC_EINVAL;
    return build(k, buf, len, "epochs/%020" PRIu64 "/timings/%d", n, rank);
}

int ec_key_epoch_state(const ec_keys_t *k, uint64_t n, int rank, char *buf, size_t len)
{
    if (n == 0 || rank < 0)
        return EC_EINVAL;
    return build(k, buf, len, "epochs/%020" PRIu64 "/state/%d", n, rank);
}

int ec_key_epoch_chunk(const ec_keys_t *k, uint64_t n, int chunk, char *buf, size_t len)
{
    if (n == 0 || chunk < 0)
        return EC_EINVAL;
    /* zero-padded: a prefix range lists chunks in order */
    return build(k, buf, len, "epochs/%020" PRIu64 "/members/%08d", n, chunk);
}

int ec_key_epoch_chunks_prefix(const ec_keys_t *k, uint64_t n, char *buf, size_t len)
{
    if (n == 0)
        return EC_EINVAL;
    return build(k, buf, len, "epochs/%020" PRIu64 "/members/", n);
}

int ec_key_epoch_index(const ec_keys_t *k, uint64_t n, int bucket, char *buf, size_t len)
{
    if (n == 0 || bucket < 0)
        return EC_EINVAL;
    return build(k, buf, len, "epochs/%020" PRIu64 "/index/%08d", n, bucket);
}

int ec_key_epoch_suspect(const ec_keys_t *k, uint64_t n, const char *reporter, char *buf,
                         size_t len)
{
    if (n == 0 || !reporter || !ec_node_id_valid(reporter, strlen(reporter)))
        return EC_EINVAL;
    return build(k, buf, len, "epochs/%020" PRIu64 "/suspect/%s", n, reporter);
}

int ec_key_epoch_suspect_src(const ec_keys_t *k, uint64_t n, const char *reporter,
                             const char *source, char *buf, size_t len)
{
    if (n == 0 || !reporter || !ec_node_id_valid(reporter, strlen(reporter)) || !source ||
        !ec_node_id_valid(source, strlen(source)))
        return EC_EINVAL;
    return build(k, buf, len, "epochs/%020" PRIu64 "/suspect/%s/%s", n, reporter, source);
}

int ec_key_hang(const ec_keys_t *k, const char *node_id, char *buf, size_t len)
{
    if (!node_id || !ec_node_id_valid(node_id, strlen(node_id)))
        return EC_EINVAL;
    return build(k, buf, len, "hang/%s", node_id);
}

int ec_key_holder(const ec_keys_t *k, int m_id, char *buf, size_t len)
{
    if (m_id < 0)
        return EC_EINVAL;
    return build(k, buf, len, "holders/%d", m_id);
}

int ec_key_gone(const ec_keys_t *k, const char *node_id, char *buf, size_t len)
{
    if (!node_id || !ec_node_id_valid(node_id, strlen(node_id)))
        return EC_EINVAL;
    return build(k, buf, len, "gone/%s", node_id);
}

int ec_key_status(const ec_keys_t *k, char *buf, size_t len)
{
    return build(k, buf, len, "status");
}

int ec_key_failures_prefix(const ec_keys_t *k, char *buf, size_t len)
{
    return build(k, buf, len, "failures/");
}

int ec_key_failure(const ec_keys_t *k, uint64_t seq, const char *node_id, int local_rank,
                   char *buf, size_t len)
{
    if (ec_node_id_check(node_id, NULL) < 0)
        return EC_EINVAL;
    if (local_rank < 0)
        return build(k, buf, len, "failures/%020" PRIu64 "/%s", seq, node_id);
    return build(k, buf, len, "failures/%020" PRIu64 "/%s/%d", seq, node_id, local_rank);
}

int ec_key_check(const ec_keys_t *k, const char *node_id, char *buf, size_t len)
{
    if (!node_id)
        return build(k, buf, len, "check/report");
    if (!*node_id)
        return build(k, buf, len, "check/");
    if (ec_node_id_check(node_id, NULL) < 0)
        return EC_EINVAL;
    return build(k, buf, len, "check/nodes/%s", node_id);
}

/* If key starts with root + sub, return the rest (and its length), else NULL. */
static const char *under(const ec_keys_t *k, const char *sub, const char *key, size_t keylen,
                         size_t *restlen)
{
    if (!k || k->root_len == 0 || !key)
        return NULL;
    size_t sl = strlen(sub);
    if (keylen < k->root_len + sl || memcmp(key, k->root, k->root_len) != 0 ||
        memcmp(key + k->root_len, sub, sl) != 0)
        return NULL;
    *restlen = keylen - k->root_len - sl;
    return key + k->root_len + sl;
}

int ec_key_parse_node(const ec_keys_t *k, const char *key, size_t keylen, char *node_id,
                      size_t len)
{
    size_t idlen;
    const char *id = under(k, "nodes/", key, keylen, &idlen);
    if (!id || !ec_node_id_valid(id, idlen)) /* '/' is not an id char: no nesting */
        return EC_EINVAL;
    if (!node_id || len <= idlen) {
        if (node_id && len)
            node_id[0] = '\0';
        return EC_ETOOLARGE;
    }
    memcpy(node_id, id, idlen);
    node_id[idlen] = '\0';
    return (int)idlen;
}

int ec_key_parse_epoch(const ec_keys_t *k, const char *key, size_t keylen, uint64_t *n)
{
    size_t rl;
    const char *rest = under(k, "epochs/", key, keylen, &rl);
    if (!rest || rl < EC__SEQ_DIGITS)
        return EC_EINVAL;
    uint64_t v = 0;
    for (int i = 0; i < EC__SEQ_DIGITS; i++) {
        if (rest[i] < '0' || rest[i] > '9')
            return EC_EINVAL;
        unsigned d = (unsigned)(rest[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return EC_EINVAL; /* 20 digits above UINT64_MAX */
        v = v * 10 + d;
    }
    if (v == 0)
        return EC_EINVAL;
    int kind;
    if (rl == EC__SEQ_DIGITS)
        kind = EC_KEY_EPOCH_HISTORY;
    else if (rest[EC__SEQ_DIGITS] == '/')
        kind = EC_KEY_EPOCH_WORKER;
    else
        return EC_EINVAL;
    if (n)
        *n = v;
    return kind;
}
