/* bench_worker_follow: what following the job's epochs costs etcd, per
 * training process (issue 16: at 16,384 nodes x 8 processes, every process
 * of the job follows every epoch through libecworker).
 *
 *   bench_worker_follow [K [E [leader|tool]]]   (default 64 20 leader; needs etcd)
 *
 * K worker handles (ECW_BACKEND_NONE, in this process, each with its own
 * etcd client as a training process has) of ceil(K/8) nodes with up to 8
 * processes each follow E epochs, each the restart of one node, published
 * one at a time as the agent's leader publishes them: the epoch, its delta
 * (epochd) and, in the same transaction, the leader key put again unchanged
 * ("leader"); or without that put, as another tool would write them
 * ("tool": each process then reads the leader key at the epoch's revision
 * after a grace).  Prints the Range requests etcd served while the handles
 * followed the E epochs (grpc_server_started_total, from its /metrics), per
 * epoch and per process per epoch, the Watch streams the handles opened,
 * and how long after each publish the last
 * handle saw it (p50, max).  Run it against the library before and after a
 * change to compare. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ec_http.h"
#include "ecw.h"
#include "embed.h"
#include "epoch_delta.h"
#include "etcd.h"
#include "keys.h"
#include "records.h"

#define JOB "jfollow"

static ec_etcd_t *c;
static ec_embed_t *etcd;
static ec_keys_t keys;

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void pause_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    nanosleep(&ts, NULL); /* polling interval */
}

/* Requests of gRPC method `method` etcd has started so far (a Watch: one
 * stream); -1 when /metrics is unreadable. */
static long etcd_started(const char *method)
{
    size_t cap = 4u << 20;
    char *resp = malloc(cap);
    if (!resp || ec_http_request(ec_embed_port(etcd), "GET", "/metrics", resp, cap) != 200) {
        free(resp);
        return -1;
    }
    static const char name[] = "grpc_server_started_total{";
    long n = -1;
    for (const char *l = ec_http_body(resp); l && *l;
         l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char want[64];
        snprintf(want, sizeof(want), "grpc_method=\"%s\"", method);
        const char *end = strchr(l, '}'), *meth = strstr(l, want);
        const char *nl = strchr(l, '\n');
        if (strncmp(l, name, sizeof(name) - 1) || !end || !meth || meth > end || (nl && end > nl))
            continue;
        n = (n < 0 ? 0 : n) + strtol(end + 1, NULL, 10);
    }
    free(resp);
    return n;
}

static int64_t leader_rev;
static ec_epoch_t *prev;

/* Epoch n of M nodes x P processes, node `restarted` with incarnation n. */
static int publish(uint64_t n, int M, int P, int restarted, bool leader_event)
{
    ec_epoch_t *ep = ec_epoch_new(M, P);
    if (!ep)
        return -1;
    ep->number = n;
    for (int m = 0; m < M; m++) {
        char id[16];
        snprintf(id, sizeof(id), "n%d", m + 1);
        ep->members[m].node_id = strdup(id);
        ep->members[m].host = strdup("127.0.0.1");
        for (int i = 0; i < P; i++)
            ep->members[m].ports[i] = (uint16_t)(20000 + 16 * m + i);
        ep->members[m].master_port = (uint16_t)(20000 + 16 * m + 15);
        ep->members[m].incarnation = m == restarted ? n : 1;
    }
    ep->reason = n == 1 ? EC_REASON_START : EC_REASON_RESTART;
    ep->run = 1;
    ep->leader_id = strdup("n1");
    ep->leader_rev = leader_rev;
    ep->job_id = strdup(JOB);
    char key[EC_KEY_MAX], dkey[EC_KEY_MAX], lkey[EC_KEY_MAX];
    ec_key_epoch(&keys, key, sizeof(key));
    ec_key_epoch_delta(&keys, dkey, sizeof(dkey));
    ec_key_leader(&keys, lkey, sizeof(lkey));
    void *buf = NULL, *dbuf = NULL;
    size_t len = 0, dlen = 0;
    ec_error_t err = {0};
    int rc = ec_epoch_encode(ep, &buf, &len, &err);
    if (rc == 0)
        rc = ec_epoch_delta_encode(prev, ep, buf, len, &dbuf, &dlen, &err);
    ec_op_t ops[3] = {{.type = EC_OP_PUT, .key = key, .value = buf, .value_len = len},
                      {.type = EC_OP_PUT, .key = dkey, .value = dbuf, .value_len = dlen},
                      {.type = EC_OP_PUT, .key = lkey, .value = "n1", .value_len = 2}};
    if (rc == 0)
        rc = ec_etcd_txn(c, NULL, 0, ops, leader_event ? 3 : 2, NULL, 0, NULL, &err);
    if (rc < 0)
        fprintf(stderr, "bench_worker_follow: publishing epoch %" PRIu64 ": %s\n", n, err.msg);
    free(buf);
    free(dbuf);
    ec_epoch_free(prev);
    prev = ep;
    return rc;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int K = argc > 1 ? atoi(argv[1]) : 64, E = argc > 2 ? atoi(argv[2]) : 20;
    bool leader_event = argc > 3 ? strcmp(argv[3], "tool") != 0 : true;
    if (K < 1 || K > 1024 || E < 1 || E > 10000) {
        fprintf(stderr, "usage: bench_worker_follow [K (1..1024) [E (1..10000) "
                        "[leader|tool]]]\n");
        return 2;
    }
    int P = K < 8 ? K : 8, M = (K + P - 1) / P;
    ec_error_t err = {0};
    ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
    eo.search_path = getenv("PATH");
    if (!(etcd = ec_embed_start(&eo, &err))) {
        fprintf(stderr, "bench_worker_follow: cannot start etcd: %s\n", err.msg);
        return 1;
    }
    ec_etcd_opts_t co = EC_ETCD_OPTS_INIT;
    co.endpoints = ec_embed_endpoint(etcd);
    if (!(c = ec_etcd_create(&co, &err)) || ec_keys_init(&keys, NULL, JOB, &err) < 0) {
        fprintf(stderr, "bench_worker_follow: %s\n", err.msg);
        ec_embed_stop(etcd);
        return 1;
    }
    char lkey[EC_KEY_MAX];
    ec_key_leader(&keys, lkey, sizeof(lkey));
    int64_t rev = 0;
    if (ec_etcd_put(c, lkey, "n1", 2, 0, &rev, &err) < 0) {
        fprintf(stderr, "bench_worker_follow: %s\n", err.msg);
        return 1;
    }
    leader_rev = rev; /* created by this put */
    if (publish(1, M, P, -1, true) < 0)
        return 1;
    long s0 = etcd_started("Watch");
    ecw_t **w = calloc((size_t)K, sizeof(*w));
    for (int i = 0; i < K; i++) {
        char id[16];
        snprintf(id, sizeof(id), "n%d", i / P + 1);
        ecw_options_t o = ECW_OPTIONS_INIT;
        o.from_env = 0;
        o.etcd_endpoints = ec_embed_endpoint(etcd);
        o.job_id = JOB;
        o.node_id = id;
        o.local_rank = i % P;
        o.backend = ECW_BACKEND_NONE;
        o.log_level = ECW_LOG_WARN;
        ecw_error_t ue = {0};
        if (ecw_init(&o, &w[i], &ue) != 0) {
            fprintf(stderr, "bench_worker_follow: handle %d: %s\n", i, ue.msg);
            return 1;
        }
    }
    long s1 = etcd_started("Watch");
    long r0 = etcd_started("Range");
    int64_t *lat = calloc((size_t)E, sizeof(int64_t));
    int followed = 0;
    for (int e = 0; e < E; e++) {
        uint64_t n = (uint64_t)e + 2;
        int64_t t0 = mono_us();
        if (publish(n, M, P, e % M, leader_event) < 0)
            break;
        int64_t deadline = t0 + 30 * 1000000;
        int seen = 0;
        while (mono_us() < deadline) {
            seen = 0;
            for (int i = 0; i < K; i++)
                seen += ecw_latest_epoch(w[i]) >= n;
            if (seen == K)
                break;
            pause_us(200);
        }
        lat[e] = mono_us() - t0;
        if (seen < K) {
            fprintf(stderr, "bench_worker_follow: epoch %" PRIu64 " seen by %d of %d handles "
                            "within 30 s\n", n, seen, K);
            break;
        }
        followed++;
    }
    long r1 = etcd_started("Range");
    qsort(lat, (size_t)followed, sizeof(int64_t), cmp64);
    printf("bench_worker_follow: %d processes (%d nodes x %d), %d of %d epochs followed, "
           "published %s\n", K, M, P, followed, E,
           leader_event ? "as the leader does (leader key put in the epoch's transaction)"
                        : "as another tool would (no leader-key put)");
    if (r0 < 0 || r1 < 0)
        printf("  etcd's /metrics unreadable: no request counts\n");
    else
        printf("  etcd Range requests: %ld in all, %.2f per epoch, %.3f per process per epoch\n",
               r1 - r0, followed ? (double)(r1 - r0) / followed : 0.0,
               followed ? (double)(r1 - r0) / followed / K : 0.0);
    if (s0 >= 0 && s1 >= 0)
        printf("  etcd Watch streams opened by the %d handles: %ld (%.2f per process)\n", K,
               s1 - s0, (double)(s1 - s0) / K);
    if (followed)
        printf("  publish -> last handle saw it: p50 %.1f ms, max %.1f ms\n",
               lat[followed / 2] / 1000.0, lat[followed - 1] / 1000.0);
    for (int i = 0; i < K; i++)
        ecw_finalize(w[i]);
    free(w);
    free(lat);
    ec_epoch_free(prev);
    ec_etcd_destroy(c);
    ec_embed_stop(etcd);
    return followed == E ? 0 : 1;
}
