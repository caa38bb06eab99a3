/* Rule checked: every etcd key of a job is built in coord/core/keys.c, sits under
 * "<prefix>/<job_id>/" (so job1 never sees job10's keys), and epoch numbers
 * are padded so that key order is numeric order, with each epoch's worker
 * keys between its history copy and the next epoch's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "keys.h"

static ec_keys_t mk(const char *prefix, const char *job)
{
    ec_keys_t k;
    ec_error_t err = {0};
    int rc = ec_keys_init(&k, prefix, job, &err);
    ck_assert_msg(rc == 0, "ec_keys_init(%s, %s): %s", prefix, job, err.msg);
    return k;
}

START_TEST(root_and_prefix_handling)
{
    struct {
        const char *prefix, *root, *jobs;
    } cases[] = {
        {NULL, "/job1/", "/"},          {"", "/job1/", "/"},
        {"/", "/job1/", "/"},           {"/ecoord", "/ecoord/job1/", "/ecoord/"},
        {"/ecoord/", "/ecoord/job1/", "/ecoord/"}, {"/ecoord///", "/ecoord/job1/", "/ecoord/"},
        {"/a/b", "/a/b/job1/", "/a/b/"}, {"ecoord", "ecoord/job1/", "ecoord/"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ec_keys_t k = mk(cases[i].prefix, "job1");
        ck_assert_str_eq(ec_keys_root(&k), cases[i].root);
        ck_assert_uint_eq(k.root_len, strlen(cases[i].root));
        char jobs[EC_KEY_MAX];
        ck_assert_int_eq(ec_keys_jobs_prefix(&k, jobs, sizeof(jobs)), 0);
        ck_assert_str_eq(jobs, cases[i].jobs); /* every job of the prefix under it */
    }
}
END_TEST

START_TEST(every_key_builder)
{
    ec_keys_t k = mk("/ecoord/", "job1");
    char b[EC_KEY_MAX];
#define KEQ(call, want)                                                  \
    do {                                                                 \
        int n_ = (call);                                                 \
        ck_assert_msg(n_ == (int)strlen(want), "%s -> %d", #call, n_);   \
        ck_assert_str_eq(b, want);                                       \
    } while (0)
    KEQ(ec_key_nodes_prefix(&k, b, sizeof b), "/ecoord/job1/nodes/");
    KEQ(ec_key_node(&k, "n3", b, sizeof b), "/ecoord/job1/nodes/n3");
    KEQ(ec_key_leader(&k, b, sizeof b), "/ecoord/job1/leader");
    KEQ(ec_key_epoch(&k, b, sizeof b), "/ecoord/job1/epoch");
    KEQ(ec_key_epochs_prefix(&k, b, sizeof b), "/ecoord/job1/epochs/");
    KEQ(ec_key_epoch_history(&k, 7, b, sizeof b), "/ecoord/job1/epochs/00000000000000000007");
    KEQ(ec_key_epoch_history(&k, UINT64_MAX, b, sizeof b),
        "/ecoord/job1/epochs/18446744073709551615");
    KEQ(ec_key_epoch_worker_prefix(&k, 7, b, sizeof b),
        "/ecoord/job1/epochs/00000000000000000007/");
    KEQ(ec_key_epoch_comm(&k, 7, "nccl-world", b, sizeof b),
        "/ecoord/job1/epochs/00000000000000000007/comm/nccl-world");
    KEQ(ec_key_epoch_kv(&k, 7, "torch.store", b, sizeof b),
        "/ecoord/job1/epochs/00000000000000000007/kv/torch.store");
    KEQ(ec_key_epoch_timing(&k, 7, 12, b, sizeof b),
        "/ecoord/job1/epochs/00000000000000000007/timings/12");
    KEQ(ec_key_epoch_state(&k, 7, 0, b, sizeof b),
        "/ecoord/job1/epochs/00000000000000000007/state/0");
    KEQ(ec_key_status(&k, b, sizeof b), "/ecoord/job1/status");
    KEQ(ec_key_failures_prefix(&k, b, sizeof b), "/ecoord/job1/failures/");
    KEQ(ec_key_failure(&k, 1700000000123ULL, "n3", 2, b, sizeof b),
        "/ecoord/job1/failures/00000001700000000123/n3/2");
    KEQ(ec_key_failure(&k, 5, "n3", -1, b, sizeof b), "/ecoord/job1/failures/00000000000000000005/n3");
    KEQ(ec_key_check(&k, "n3", b, sizeof b), "/ecoord/job1/check/nodes/n3");
    KEQ(ec_key_check(&k, NULL, b, sizeof b), "/ecoord/job1/check/report");
    KEQ(ec_key_check(&k, "", b, sizeof b), "/ecoord/job1/check/");
    ck_assert_int_eq(ec_key_check(&k, "a/b", b, sizeof b), EC_EINVAL);
#undef KEQ
}
END_TEST

START_TEST(invalid_arguments_refused)
{
    ec_keys_t k = mk("", "job1");
    char b[EC_KEY_MAX];
    ck_assert_int_eq(ec_key_node(&k, "", b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_node(&k, "a/b", b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_node(&k, NULL, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_epoch_history(&k, 0, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_epoch_worker_prefix(&k, 0, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_epoch_timing(&k, 1, -1, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_epoch_state(&k, 1, -1, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_epoch_comm(&k, 1, "a b", b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_epoch_comm(&k, 1, "", b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_epoch_kv(&k, 1, "a/b", b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_epoch_kv(&k, 1, "..", b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_epoch_kv(&k, 0, "x", b, sizeof b), EC_EINVAL);
    char n65[66];
    memset(n65, 'x', 65);
    n65[65] = '\0';
    ck_assert_int_eq(ec_key_epoch_kv(&k, 1, n65, b, sizeof b), EC_EINVAL);
    ck_assert_int_gt(ec_key_epoch_kv(&k, 1, n65 + 1, b, sizeof b), 0);
    ck_assert_int_eq(ec_key_failure(&k, 1, "..", 0, b, sizeof b), EC_EINVAL);
    ec_keys_t uninit;
    memset(&uninit, 0, sizeof uninit);
    ck_assert_int_eq(ec_key_leader(&uninit, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_key_leader(NULL, b, sizeof b), EC_EINVAL);
}
END_TEST

START_TEST(small_buffer_is_too_large_not_truncated)
{
    ec_keys_t k = mk("/ecoord", "job1");
    char b[32];
    memset(b, 'x', sizeof b);
    ck_assert_int_eq(ec_key_epoch_history(&k, 1, b, sizeof b), EC_ETOOLARGE);
    ck_assert_str_eq(b, "");
    memset(b, 'x', sizeof b);
    ck_assert_int_eq(ec_key_leader(&k, b, 5), EC_ETOOLARGE); /* smaller than the root */
    ck_assert_str_eq(b, "");
    /* exactly fits: length + NUL */
    const char *want = "/ecoord/job1/leader";
    ck_assert_int_eq(ec_key_leader(&k, b, strlen(want) + 1), (int)strlen(want));
    ck_assert_int_eq(ec_key_leader(&k, b, strlen(want)), EC_ETOOLARGE);
}
END_TEST

START_TEST(key_max_fits_longest_key)
{
    char prefix[EC_PREFIX_MAX + 1], job[EC_JOB_ID_MAX + 1], node[EC_NODE_ID_MAX + 1],
        comm[EC_COMM_NAME_MAX + 1];
    prefix[0] = '/';
    memset(prefix + 1, 'p', EC_PREFIX_MAX - 1);
    prefix[EC_PREFIX_MAX] = 0;
    memset(job, 'j', EC_JOB_ID_MAX);
    job[EC_JOB_ID_MAX] = 0;
    memset(node, 'n', EC_NODE_ID_MAX);
    node[EC_NODE_ID_MAX] = 0;
    memset(comm, 'c', EC_COMM_NAME_MAX);
    comm[EC_COMM_NAME_MAX] = 0;
    ec_keys_t k = mk(prefix, job);
    char b[EC_KEY_MAX];
    ck_assert_int_gt(ec_key_failure(&k, UINT64_MAX, node, 2147483647, b, sizeof b), 0);
    ck_assert_int_gt(ec_key_node(&k, node, b, sizeof b), 0);
    ck_assert_int_gt(ec_key_epoch_comm(&k, UINT64_MAX, comm, b, sizeof b), 0);
    ck_assert_int_gt(ec_key_epoch_timing(&k, UINT64_MAX, 2147483647, b, sizeof b), 0);
    char pn[EC_NODE_ID_MAX + 1];
    ec_key_node(&k, node, b, sizeof b);
    ck_assert_int_eq(ec_key_parse_node(&k, b, strlen(b), pn, sizeof pn), EC_NODE_ID_MAX);
}
END_TEST

START_TEST(job_ids)
{
    const char *good[] = {"job1", "a", "Job-1.x_Y", "default", "..a", "a.."};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(ec_job_id_check(good[i], NULL) == 0, "%s refused", good[i]);
    char max[EC_JOB_ID_MAX + 2];
    memset(max, 'a', sizeof max);
    max[EC_JOB_ID_MAX] = 0;
    ck_assert_int_eq(ec_job_id_check(max, NULL), 0);
    max[EC_JOB_ID_MAX] = 'a';
    max[EC_JOB_ID_MAX + 1] = 0;
    ck_assert_int_eq(ec_job_id_check(max, NULL), EC_EINVAL);

    const char *badids[] = {"", ".", "..", "job 1", "job/1", "job1/", "/job1", "j\xc3\xb6" "b",
                            "job\n", "job*", "job:1", "a,b"};
    for (size_t i = 0; i < sizeof(badids) / sizeof(badids[0]); i++) {
        ec_error_t err = {0};
        ck_assert_msg(ec_job_id_check(badids[i], &err) == EC_EINVAL, "'%s' accepted", badids[i]);
        ck_assert_int_eq(err.code, EC_EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "job id"));
        ec_keys_t k;
        ck_assert_int_eq(ec_keys_init(&k, "/ecoord", badids[i], NULL), EC_EINVAL);
        ck_assert_str_eq(k.root, ""); /* a refused init leaves nothing usable */
    }
    ck_assert_int_eq(ec_job_id_check(NULL, NULL), EC_EINVAL);
    ec_error_t err = {0};
    ec_job_id_check("job 1", &err);
    ck_assert_msg(strstr(err.msg, "position 3"), "message does not say where: %s", err.msg);
}
END_TEST

START_TEST(node_ids)
{
    char id[EC_NODE_ID_MAX + 2];
    memset(id, 'n', sizeof id);
    id[EC_NODE_ID_MAX] = 0;
    ck_assert_int_eq(ec_node_id_check(id, NULL), 0);
    ck_assert(ec_node_id_valid(id, EC_NODE_ID_MAX));
    id[EC_NODE_ID_MAX] = 'n';
    id[EC_NODE_ID_MAX + 1] = 0;
    ck_assert_int_eq(ec_node_id_check(id, NULL), EC_EINVAL);
    ck_assert(!ec_node_id_valid(id, EC_NODE_ID_MAX + 1));
    ck_assert_int_eq(ec_node_id_check("trainjob-worker-0.default", NULL), 0);
    ck_assert_int_eq(ec_node_id_check("n 3", NULL), EC_EINVAL);
    ck_assert_int_eq(ec_node_id_check("", NULL), EC_EINVAL);
    ck_assert(!ec_node_id_valid("n3", 0));
    ck_assert(!ec_node_id_valid(NULL, 2));
    /* length-delimited: a valid prefix of an invalid string is valid */
    ck_assert(ec_node_id_valid("n3/x", 2));
    ck_assert(!ec_node_id_valid("n3/x", 4));
}
END_TEST

START_TEST(bad_prefixes_refused)
{
    char longp[EC_PREFIX_MAX + 3];
    longp[0] = '/';
    memset(longp + 1, 'p', EC_PREFIX_MAX + 1);
    longp[EC_PREFIX_MAX + 2] = 0;
    const char *bad[] = {"/a b", "/a//b", "/a\x01", "/a\tb", "/\xc3\xa9", longp};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ec_keys_t k;
        ec_error_t err = {0};
        ck_assert_msg(ec_keys_init(&k, bad[i], "job1", &err) == EC_EINVAL, "prefix %zu accepted",
                      i);
        ck_assert_ptr_nonnull(strstr(err.msg, "prefix"));
    }
    /* the longest allowed prefix still works, trailing slashes not counted */
    char okp[EC_PREFIX_MAX + 4];
    okp[0] = '/';
    memset(okp + 1, 'p', EC_PREFIX_MAX - 1);
    strcpy(okp + EC_PREFIX_MAX, "///");
    ec_keys_t k = mk(okp, "job1");
    ck_assert_uint_eq(k.root_len, EC_PREFIX_MAX + strlen("/job1/"));
}
END_TEST

/* Every key a job can have, for the overlap test. */
static int all_keys(const ec_keys_t *k, char keys[][EC_KEY_MAX])
{
    int n = 0;
    ec_key_nodes_prefix(k, keys[n++], EC_KEY_MAX);
    ec_key_node(k, "n1", keys[n++], EC_KEY_MAX);
    ec_key_leader(k, keys[n++], EC_KEY_MAX);
    ec_key_epoch(k, keys[n++], EC_KEY_MAX);
    ec_key_epochs_prefix(k, keys[n++], EC_KEY_MAX);
    ec_key_epoch_history(k, 1, keys[n++], EC_KEY_MAX);
    ec_key_epoch_worker_prefix(k, 1, keys[n++], EC_KEY_MAX);
    ec_key_epoch_comm(k, 1, "c", keys[n++], EC_KEY_MAX);
    ec_key_epoch_timing(k, 1, 0, keys[n++], EC_KEY_MAX);
    ec_key_epoch_state(k, 1, 0, keys[n++], EC_KEY_MAX);
    ec_key_status(k, keys[n++], EC_KEY_MAX);
    ec_key_failures_prefix(k, keys[n++], EC_KEY_MAX);
    ec_key_failure(k, 1, "n1", 0, keys[n++], EC_KEY_MAX);
    return n;
}

START_TEST(job1_never_sees_job10)
{
    const char *prefixes[] = {"", "/ecoord", "/ecoord/"};
    const char *pairs[][2] = {{"job1", "job10"}, {"job1", "job1.0"}, {"job1", "job1-x"},
                              {"a", "ab"}};
    for (size_t p = 0; p < 3; p++)
        for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
            for (int dir = 0; dir < 2; dir++) {
                ec_keys_t a = mk(prefixes[p], pairs[i][dir]);
                ec_keys_t b = mk(prefixes[p], pairs[i][!dir]);
                char ka[16][EC_KEY_MAX], kb[16][EC_KEY_MAX];
                int na = all_keys(&a, ka), nb = all_keys(&b, kb);
                ck_assert_int_eq(na, nb);
                for (int x = 0; x < nb; x++) {
                    /* a's root (the range a watches/deletes) holds none of b's keys */
                    ck_assert_msg(strncmp(kb[x], a.root, a.root_len) != 0, "%s is under %s",
                                  kb[x], a.root);
                    for (int y = 0; y < na; y++)
                        ck_assert_str_ne(ka[y], kb[x]);
                    char id[EC_NODE_ID_MAX + 1];
                    ck_assert_int_eq(ec_key_parse_node(&a, kb[x], strlen(kb[x]), id, sizeof id),
                                     EC_EINVAL);
                    ck_assert_int_eq(ec_key_parse_epoch(&a, kb[x], strlen(kb[x]), NULL),
                                     EC_EINVAL);
                }
                for (int y = 0; y < na; y++)
                    ck_assert_msg(strncmp(ka[y], a.root, a.root_len) == 0, "%s outside %s",
                                  ka[y], a.root);
            }
}
END_TEST

static int cmp_keys(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

START_TEST(padding_sorts_numerically)
{
    ec_keys_t k = mk("/ecoord", "job1");
    uint64_t nums[] = {1, 2, 9, 10, 11, 99, 100, 101, 999, 1000, 123456789, 4294967296ULL,
                       9999999999999999999ULL, 10000000000000000000ULL, UINT64_MAX};
    size_t n = sizeof(nums) / sizeof(nums[0]);
    /* each epoch contributes its history key and two worker keys */
    char **keys = calloc(n * 3, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        for (int j = 0; j < 3; j++)
            keys[i * 3 + j] = malloc(EC_KEY_MAX);
        ec_key_epoch_history(&k, nums[i], keys[i * 3], EC_KEY_MAX);
        ec_key_epoch_timing(&k, nums[i], 0, keys[i * 3 + 1], EC_KEY_MAX);
        ec_key_epoch_comm(&k, nums[i], "world", keys[i * 3 + 2], EC_KEY_MAX);
    }
    char **sorted = malloc(n * 3 * sizeof(char *));
    memcpy(sorted, keys, n * 3 * sizeof(char *));
    /* reverse, then sort: a string sort must restore numeric order */
    for (size_t i = 0; i < n * 3 / 2; i++) {
        char *t = sorted[i];
        sorted[i] = sorted[n * 3 - 1 - i];
        sorted[n * 3 - 1 - i] = t;
    }
    qsort(sorted, n * 3, sizeof(char *), cmp_keys);
    uint64_t last = 0;
    for (size_t i = 0; i < n * 3; i++) {
        uint64_t got;
        int kind = ec_key_parse_epoch(&k, sorted[i], strlen(sorted[i]), &got);
        ck_assert_int_gt(kind, 0);
        if (kind == EC_KEY_EPOCH_HISTORY) {
            /* history key first, then its worker keys, then the next epoch */
            ck_assert_msg(got > last, "%s sorted after epoch %" PRIu64, sorted[i], last);
            last = got;
        } else {
            ck_assert_msg(got == last, "worker key %s not right after its history key",
                          sorted[i]);
        }
    }
    ck_assert_uint_eq(last, UINT64_MAX);
    /* the pruning range [epochs/, epochs/<n>) holds exactly the epochs below n */
    char lo[EC_KEY_MAX], hi[EC_KEY_MAX];
    ec_key_epochs_prefix(&k, lo, sizeof lo);
    ec_key_epoch_history(&k, 100, hi, sizeof hi);
    for (size_t i = 0; i < n * 3; i++) {
        uint64_t got;
        ec_key_parse_epoch(&k, keys[i], strlen(keys[i]), &got);
        int in = strcmp(keys[i], lo) >= 0 && strcmp(keys[i], hi) < 0;
        ck_assert_msg(in == (got < 100), "%s %s the prune range", keys[i],
                      in ? "is in" : "is not in");
    }
    for (size_t i = 0; i < n * 3; i++)
        free(keys[i]);
    free(keys);
    free(sorted);
}
END_TEST

START_TEST(parse_node_key)
{
    ec_keys_t k = mk("/ecoord", "job1");
    char key[EC_KEY_MAX], id[EC_NODE_ID_MAX + 1];
    int n = ec_key_node(&k, "worker-7.x", key, sizeof key);
    ck_assert_int_eq(ec_key_parse_node(&k, key, (size_t)n, id, sizeof id), 10);
    ck_assert_str_eq(id, "worker-7.x");
    /* keylen bounds the key: etcd keys are not NUL-terminated */
    char raw[EC_KEY_MAX + 8];
    memcpy(raw, key, (size_t)n);
    memcpy(raw + n, "ZZZZ", 4);
    ck_assert_int_eq(ec_key_parse_node(&k, raw, (size_t)n, id, sizeof id), 10);
    ck_assert_str_eq(id, "worker-7.x");
    ck_assert_int_eq(ec_key_parse_node(&k, raw, (size_t)n - 2, id, sizeof id), 8);
    ck_assert_str_eq(id, "worker-7");
    /* too small an output buffer */
    ck_assert_int_eq(ec_key_parse_node(&k, key, (size_t)n, id, 10), EC_ETOOLARGE);
    ck_assert_int_eq(ec_key_parse_node(&k, key, (size_t)n, id, 11), 10);

    const char *notnode[] = {"/ecoord/job1/nodes/", "/ecoord/job1/nodes/a/b",
                             "/ecoord/job1/nodes/a b", "/ecoord/job1/leader",
                             "/ecoord/job10/nodes/a", "/ecoord/job1/nodesX/a",
                             "/ecoord/job1/nodes/..", "/ecoord/job1/epochs/00000000000000000001",
                             "ecoord/job1/nodes/a", "/ecoord/job1/epoch", ""};
    for (size_t i = 0; i < sizeof(notnode) / sizeof(notnode[0]); i++)
        ck_assert_msg(ec_key_parse_node(&k, notnode[i], strlen(notnode[i]), id, sizeof id) ==
                          EC_EINVAL,
                      "'%s' parsed as a node key", notnode[i]);
    ck_assert_int_eq(ec_key_parse_node(&k, NULL, 0, id, sizeof id), EC_EINVAL);
}
END_TEST

START_TEST(parse_epoch_key)
{
    ec_keys_t k = mk("", "job1");
    uint64_t n = 0;
    const char *h = "/job1/epochs/00000000000000000042";
    ck_assert_int_eq(ec_key_parse_epoch(&k, h, strlen(h), &n), EC_KEY_EPOCH_HISTORY);
    ck_assert_uint_eq(n, 42);
    const char *w = "/job1/epochs/00000000000000000042/timings/3";
    n = 0;
    ck_assert_int_eq(ec_key_parse_epoch(&k, w, strlen(w), &n), EC_KEY_EPOCH_WORKER);
    ck_assert_uint_eq(n, 42);
    const char *m = "/job1/epochs/18446744073709551615";
    ck_assert_int_eq(ec_key_parse_epoch(&k, m, strlen(m), &n), EC_KEY_EPOCH_HISTORY);
    ck_assert_uint_eq(n, UINT64_MAX);
    const char *bad[] = {"/job1/epochs/0000000000000000042",      /* 19 digits */
                         "/job1/epochs/000000000000000000042",    /* 21 digits */
                         "/job1/epochs/00000000000000000000",     /* epoch 0 */
                         "/job1/epochs/18446744073709551616",     /* > UINT64_MAX */
                         "/job1/epochs/99999999999999999999",
                         "/job1/epochs/0000000000000000004x",
                         "/job1/epochs/00000000000000000042x",
                         "/job1/epochs/", "/job1/epoch", "/job10/epochs/00000000000000000042",
                         "/job1/nodes/00000000000000000042"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(ec_key_parse_epoch(&k, bad[i], strlen(bad[i]), &n) == EC_EINVAL,
                      "'%s' parsed as an epoch key", bad[i]);
    /* round trip through the builder */
    char b[EC_KEY_MAX];
    for (uint64_t e = 1; e < 2000000; e = e * 3 + 1) {
        int len = ec_key_epoch_history(&k, e, b, sizeof b);
        ck_assert_int_eq(ec_key_parse_epoch(&k, b, (size_t)len, &n), EC_KEY_EPOCH_HISTORY);
        ck_assert_uint_eq(n, e);
    }
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("keys", NULL, NULL,
                          EC_CHECK_TESTS(
                              root_and_prefix_handling,
                              every_key_builder,
                              invalid_arguments_refused,
                              small_buffer_is_too_large_not_truncated,
                              key_max_fits_longest_key,
                              job_ids,
                              node_ids,
                              bad_prefixes_refused,
                              job1_never_sees_job10,
                              padding_sorts_numerically,
                              parse_node_key,
                              parse_epoch_key));
}

EC_CHECK_MAIN(suite)
