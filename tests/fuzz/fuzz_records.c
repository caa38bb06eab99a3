/* libFuzzer target: decoding our protobuf records (coord/core/records.h) from
 * arbitrary bytes, as an agent does with whatever it finds under the job's
 * keys.  The first input byte picks the record type, the rest is the value.
 *
 * Properties: decoding never crashes, leaks or reads out of bounds (ASan,
 * UBSan); it fails only with EC_ECORRUPT and a message naming the record;
 * a record that decodes re-encodes (it was validated by the same rules),
 * that encoding decodes again and encodes to the same bytes; for an epoch,
 * the rank and endpoint helpers agree with ec_rank() over every rank, and
 * the epoch-history checker accepts it on its own. */
#include <string.h>

#include "fuzz.h"
#include "history.h"
#include "planner.h"
#include "records.h"

typedef int (*decode_fn)(const void *, size_t, const char *, void **, ec_error_t *);
typedef int (*encode_fn)(const void *, void **, size_t *, ec_error_t *);
typedef void (*free_fn)(void *);

/* Adapters with one signature for every record type (calling through a cast
 * function pointer would be undefined behaviour). */
#define ADAPT(name, type)                                                                \
    static int name##_dec(const void *b, size_t l, const char *k, void **o, ec_error_t *e) \
    {                                                                                    \
        type *r = NULL;                                                                  \
        int rc = ec_##name##_decode(b, l, k, &r, e);                                     \
        *o = r;                                                                          \
        return rc;                                                                       \
    }                                                                                    \
    static int name##_enc(const void *r, void **b, size_t *l, ec_error_t *e)            \
    {                                                                                    \
        return ec_##name##_encode((const type *)r, b, l, e);                             \
    }                                                                                    \
    static void name##_fr(void *r)                                                       \
    {                                                                                    \
        ec_##name##_free((type *)r);                                                     \
    }
ADAPT(node_rec, ec_node_rec_t)
ADAPT(epoch, ec_epoch_t)
ADAPT(job_status, ec_job_status_t)
ADAPT(failure, ec_failure_t)
ADAPT(worker_timing, ec_worker_timing_t)
/* the view decoder (a whole record, a split epoch's head, a view) */
static int epoch_view_dec(const void *b, size_t l, const char *k, void **o, ec_error_t *e)
{
    ec_epoch_t *r = NULL;
    int rc = ec_epoch_decode_view(b, l, k, &r, e);
    *o = r;
    return rc;
}
static int epoch_view_enc(const void *r, void **b, size_t *l, ec_error_t *e)
{
    return ec_epoch_encode_view((const ec_epoch_t *)r, b, l, e);
}

static const struct {
    const char *what;
    decode_fn dec;
    encode_fn enc;
    free_fn fr;
} kinds[] = {
    {"node record", node_rec_dec, node_rec_enc, node_rec_fr},
    {"epoch record", epoch_dec, epoch_enc, epoch_fr},
    {"job status", job_status_dec, job_status_enc, job_status_fr},
    {"failure record", failure_dec, failure_enc, failure_fr},
    {"worker timing", worker_timing_dec, worker_timing_enc, worker_timing_fr},
    {"epoch record", epoch_view_dec, epoch_view_enc, epoch_fr},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static void epoch_helpers(const ec_epoch_t *ep)
{
    char buf[EC_ENDPOINT_MAX];
    char *all = NULL;
    ec_error_t err = {0};
    FUZZ_CHECK(ec_epoch_endpoints(ep, ",", &all, &err) == 0, "%s", err.msg);
    /* Walking members then local ranks is rank order: the k-th endpoint in
     * the list is rank k's, and ec_rank() agrees. */
    const char *p = all;
    int64_t k = 0;
    for (int m = 0; m < ep->nmembers; m++)
        for (int n = 0; n < ep->nproc; n++, k++) {
            FUZZ_CHECK(ec_rank(m, ep->nproc, n) == k, "rank of M_id %d N_id %d", m, n);
            int len = ec_epoch_endpoint(ep, m, n, buf, sizeof(buf));
            FUZZ_CHECK(len > 0, "endpoint of rank %lld", (long long)k);
            FUZZ_CHECK(strncmp(p, buf, (size_t)len) == 0 && (p[len] == ',' || p[len] == '\0'),
                       "rank %lld is %s in the list", (long long)k, buf);
            p += len + (p[len] == ',');
        }
    FUZZ_CHECK(*p == '\0' && k == ep->world_size, "list longer than world %d", ep->world_size);
    free(all);
    FUZZ_CHECK(ec_epoch_rank0_endpoint(ep, buf, sizeof(buf)) > 0, "no rank 0 endpoint");
    const char *addr;
    int port;
    FUZZ_CHECK(ec_epoch_master(ep, &addr, &port) == 0 && port > 0, "no master");
    for (int m = 0; m < ep->nmembers; m++)
        FUZZ_CHECK(ec_epoch_find_member(ep, ep->members[m].node_id) == m, "member %d", m);
    /* One valid epoch, written under the leadership it names, is a valid
     * history. */
    ec_leader_obs_t obs = {ep->leader_id, ep->leader_rev};
    ec_history_opts_t ho = EC_HISTORY_OPTS_INIT;
    ec_history_stats_t st;
    FUZZ_CHECK(ec_history_check(&ep, 1, &obs, 1, &ho, &st, &err) == 0, "history: %s", err.msg);
    FUZZ_CHECK(st.epochs == 1 && st.ranks == ep->world_size, "history stats");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t kind = data[0] % NKINDS;
    const uint8_t *buf = data + 1;
    size_t len = size - 1;
    ec_error_t err = {0};
    void *rec = NULL;
    int rc = kinds[kind].dec(buf, len, "/fuzz/key", &rec, &err);
    if (rc < 0) {
        FUZZ_CHECK(rc == EC_ECORRUPT && rec == NULL, "%s: rc %d", kinds[kind].what, rc);
        FUZZ_CHECK(err.code == rc && strstr(err.msg, kinds[kind].what) && strstr(err.msg, "/fuzz/key"),
                   "message does not name the record and key: %s", err.msg);
        return 0;
    }
    FUZZ_CHECK(rec != NULL, "%s decoded to NULL", kinds[kind].what);
    if (kind == 1)
        epoch_helpers(rec);
    void *e1 = NULL, *e2 = NULL, *rec2 = NULL;
    size_t l1 = 0, l2 = 0;
    rc = kinds[kind].enc(rec, &e1, &l1, &err);
    FUZZ_CHECK(rc == 0, "a decoded %s does not re-encode: %s", kinds[kind].what, err.msg);
    rc = kinds[kind].dec(e1, l1, NULL, &rec2, &err);
    FUZZ_CHECK(rc == 0, "a re-encoded %s does not decode: %s", kinds[kind].what, err.msg);
    rc = kinds[kind].enc(rec2, &e2, &l2, &err);
    FUZZ_CHECK(rc == 0 && l1 == l2 && memcmp(e1, e2, l1) == 0, "%s encoding is not stable",
               kinds[kind].what);
    free(e1);
    free(e2);
    kinds[kind].fr(rec2);
    kinds[kind].fr(rec);
    return 0;
}
