/* Records: the machinery every record codec shares (records_impl.h lists
 * the codecs and the files they live in): the enums' names, the validation
 * messages, packing and unpacking, hosts and ports.
 */
#include "records_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Our enums are the wire values; the build breaks if they ever diverge. */
#define EC__SAME(prefix, pbprefix, n, v, t)                                            \
    _Static_assert((int)prefix##n == (int)pbprefix##n, "enum " #n " differs from proto");
#define EC__NODE_SAME(n, v, t) EC__SAME(EC_NODE_, ECOORD__NODE_STATE__NODE_STATE_, n, v, t)
#define EC__REASON_SAME(n, v, t) \
    EC__SAME(EC_REASON_, ECOORD__EPOCH_REASON__EPOCH_REASON_, n, v, t)
#define EC__JOB_SAME(n, v, t) EC__SAME(EC_JOB_, ECOORD__JOB_STATE__JOB_STATE_, n, v, t)
#define EC__FAIL_SAME(n, v, t) \
    EC__SAME(EC_FAILURE_, ECOORD__FAILURE_KIND__FAILURE_KIND_, n, v, t)
EC_NODE_STATE_MAP(EC__NODE_SAME)
EC_EPOCH_REASON_MAP(EC__REASON_SAME)
EC_JOB_STATE_MAP(EC__JOB_SAME)
EC_FAILURE_KIND_MAP(EC__FAIL_SAME)
#define EC__BOOT_SAME(n, v, t) EC__SAME(EC_BOOT_, ECOORD__BOOT_PHASE__BOOT_PHASE_, n, v, t)
EC_BOOT_PHASE_MAP(EC__BOOT_SAME)

/* ---- enum names ---------------------------------------------------------- */

#define EC__NAME_CASE(n, v, t) \
    case (v):                  \
        return t;

const char *ec_node_state_name(ec_node_state_t s)
{
    switch ((int)s) { EC_NODE_STATE_MAP(EC__NAME_CASE) }
    return "unknown";
}

const char *ec_epoch_reason_name(ec_epoch_reason_t r)
{
    switch ((int)r) { EC_EPOCH_REASON_MAP(EC__NAME_CASE) }
    return "unknown";
}

const char *ec_job_state_name(ec_job_state_t s)
{
    switch ((int)s) { EC_JOB_STATE_MAP(EC__NAME_CASE) }
    return "unknown";
}

bool ec_job_state_ended(ec_job_state_t s)
{
    return s == EC_JOB_COMPLETED || s == EC_JOB_FAILED || s == EC_JOB_INTERRUPTED;
}

const char *ec_failure_kind_name(ec_failure_kind_t k)
{
    switch ((int)k) { EC_FAILURE_KIND_MAP(EC__NAME_CASE) }
    return "unknown";
}

const char *ec_boot_phase_name(int phase)
{
    switch (phase) { EC_BOOT_PHASE_MAP(EC__NAME_CASE) }
    return "unknown";
}

/* ---- validation messages ------------------------------------------------- */

int ec_record_vcorrupt(ec_error_t *err, const char *what, const char *key, const char *fmt,
                       va_list ap)
{
    char detail[EC_ERRMSG_MAX];
    vsnprintf(detail, sizeof(detail), fmt, ap);
    return ec_errorf(err, EC_ECORRUPT,
                     "%s%s%.160s: %s; the key may have been written by another tool or "
                     "an incompatible ecoord version",
                     what, key ? " at " : "", key ? key : "", detail);
}

int ec__rec_vbad(const vctx_t *v, const char *fmt, va_list ap)
{
    if (v->code == EC_ECORRUPT)
        return ec_record_vcorrupt(v->err, v->what, v->key, fmt, ap);
    char detail[EC_ERRMSG_MAX];
    vsnprintf(detail, sizeof(detail), fmt, ap);
    return ec_errorf(v->err, v->code, "%s not encoded: %s (a bug in the writer)", v->what,
                     detail);
}

/* ---- hosts and ports ----------------------------------------------------- */

int ec_host_valid(const char *host)
{
    if (!host)
        return 0;
    size_t n = 0;
    for (; host[n]; n++) {
        int c = (unsigned char)host[n];
        if (n >= EC_HOST_MAX ||
            !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':' || c == '%'))
            return 0;
    }
    return n > 0;
}

int ec__rec_ports_from_pb(const vctx_t *v, const char *whose, const uint32_t *src, size_t n,
                          uint16_t **out)
{
    for (size_t i = 0; i < n; i++)
        if (src[i] < 1 || src[i] > 65535)
            return bad(v, "%s port %zu is %u, outside 1..65535", whose, i, src[i]);
    *out = malloc((n ? n : 1) * sizeof(**out));
    if (!*out)
        return enomem(v);
    for (size_t i = 0; i < n; i++)
        (*out)[i] = (uint16_t)src[i];
    return 0;
}

int ec__rec_ports_distinct(const vctx_t *v, const char *whose, const uint16_t *ports, int n,
                           uint16_t master)
{
    /* n <= EC_NPROC_MAX: a bitmap of 65536 bits is cheap and sort-free */
    uint8_t seen[65536 / 8];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i <= n; i++) {
        uint16_t p = i < n ? ports[i] : master;
        if (p == 0)
            return i < n ? bad(v, "%s port %d is 0, outside 1..65535", whose, i)
                         : bad(v, "%s master port is 0, outside 1..65535", whose);
        if (seen[p / 8] & (1u << (p % 8)))
            return bad(v, "%s uses port %u twice (local ranks and master port must differ)",
                       whose, p);
        seen[p / 8] |= (uint8_t)(1u << (p % 8));
    }
    return 0;
}

/* ---- the wire ------------------------------------------------------------ */

int ec__rec_pack(const ProtobufCMessage *m, const vctx_t *v, bool capped, void **buf,
                 size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (capped && n > EC_RECORD_MAX_BYTES)
        return ec_errorf(v->err, EC_ETOOLARGE,
                         "%s would be %zu bytes, above the %d-byte limit for one etcd value; "
                         "shorten node ids/hosts or use fewer nodes",
                         v->what, n, EC_RECORD_MAX_BYTES);
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return ec_errorf(v->err, EC_ENOMEM, "%s: out of memory encoding %zu bytes", v->what, n);
    protobuf_c_message_pack(m, b);
    *buf = b;
    *len = n;
    return 0;
}

void *ec__rec_unpack(const ProtobufCMessageDescriptor *d, const void *buf, size_t len,
                     const vctx_t *v, int *rc)
{
    if (!buf && len) {
        *rc = ec_errorf(v->err, EC_EINVAL, "%s: no buffer given for %zu bytes", v->what, len);
        return NULL;
    }
    static const uint8_t empty[1];
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, buf ? buf : empty);
    if (!m)
        *rc = bad(v, "%zu bytes do not decode as protobuf %s", len, d->name);
    return m;
}

uint64_t ec__rec_fnv(const void *buf, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}
