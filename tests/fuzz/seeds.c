/* Writes a tiny starting corpus for each fuzz target, generated from our own
 * encoders so it always matches the current record format:
 *
 *   seeds DIR    ->  DIR/records/, DIR/flags/, DIR/endpoints/, DIR/planner/
 *
 * Built by tests/fuzz/build.sh with the targets; not a fuzz target itself. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "records.h"

static const char *dir;

static void put(const char *target, const char *name, const void *a, size_t alen,
                const void *b, size_t blen)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, target);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%s/%s", dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "seeds: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    fwrite(a, 1, alen, f);
    if (blen)
        fwrite(b, 1, blen, f);
    fclose(f);
}

static void record(const char *name, unsigned char kind, int rc, void *buf, size_t len)
{
    if (rc < 0) {
        fprintf(stderr, "seeds: cannot encode %s\n", name);
        exit(1);
    }
    put("records", name, &kind, 1, buf, len);
    free(buf);
}

static void records(void)
{
    void *buf;
    size_t len;
    ec_node_rec_t *r = ec_node_rec_new(2, 2);
    r->node_id = strdup("n1");
    r->host = strdup("10.0.0.1");
    r->ports[0] = 6070;
    r->ports[1] = 6071;
    r->master_port = 6072;
    r->device_ids[0] = strdup("0");
    r->device_ids[1] = strdup("1");
    r->incarnation = 3;
    r->agent_version = strdup("0.1.0");
    r->state = EC_NODE_READY;
    r->registered_at_ms = 1700000000000;
    record("node", 0, ec_node_rec_encode(r, &buf, &len, NULL), buf, len);
    ec_node_rec_free(r);

    ec_epoch_t *ep = ec_epoch_new(3, 2);
    const char *hosts[] = {"10.0.0.1", "10.0.0.2", "fe80::1%eth0"};
    for (int m = 0; m < 3; m++) {
        char id[16];
        snprintf(id, sizeof(id), "n%d", m + 1);
        ep->members[m].node_id = strdup(id);
        ep->members[m].host = strdup(hosts[m]);
        ep->members[m].ports[0] = 6070;
        ep->members[m].ports[1] = 6071;
        ep->members[m].master_port = 6072;
        ep->members[m].incarnation = 1;
    }
    ep->number = 7;
    ep->reason = EC_REASON_LOST;
    ep->reason_detail = strdup("n4 missing");
    ep->leader_id = strdup("n1");
    ep->leader_rev = 42;
    ep->published_at_ms = 1700000000000;
    record("epoch", 1, ec_epoch_encode(ep, &buf, &len, NULL), buf, len);
    /* a split epoch (chunks of 2): its head, to the whole-record decoder
     * (refused) and to the view decoder; a view holding chunk 0 */
    ec_epoch_parts_t parts;
    if (ec_epoch_split(ep, 2, &parts, NULL) < 0 || parts.nchunks != 2) {
        fprintf(stderr, "seeds: cannot split an epoch\n");
        exit(1);
    }
    put("records", "epoch-head", "\001", 1, parts.head, parts.head_len);
    put("records", "view-head", "\005", 1, parts.head, parts.head_len);
    ec_epoch_t *v = NULL;
    if (ec_epoch_decode_view(parts.head, parts.head_len, NULL, &v, NULL) < 0 ||
        ec_epoch_view_add_chunk(v, 0, parts.chunk[0], parts.chunk_len[0], NULL) < 0) {
        fprintf(stderr, "seeds: cannot make a view\n");
        exit(1);
    }
    record("view", 5, ec_epoch_encode_view(v, &buf, &len, NULL), buf, len);
    ec_epoch_free(v);
    ec_epoch_parts_free(&parts);
    /* found by the fuzzer: bytes claiming a member count decoded as a
     * split head and were refused with EC_EINVAL, not EC_ECORRUPT */
    static const unsigned char split_junk[] = {0x01, 0x08, 0x07, 0x10, 0xff, 0x01,
                                               0xa0, 0x01, 0xa0, 0x95, 0x95, 0x31};
    put("records", "regress-split-junk", split_junk, sizeof(split_junk), NULL, 0);
    ec_epoch_free(ep);

    ec_job_status_t st = {.state = EC_JOB_FAILED, .reason = "every member failed", .epoch = 7,
                          .updated_at_ms = 1700000000000, .updated_by = "n1"};
    record("status", 2, ec_job_status_encode(&st, &buf, &len, NULL), buf, len);

    char *lines[] = {"Traceback (most recent call last):", "RuntimeError: NCCL error"};
    ec_failure_t fl = {.node_id = "n2", .kind = EC_FAILURE_EXITED, .local_rank = 1,
                       .global_rank = 3, .exit_code = 1, .epoch = 7, .time_ms = 1700000000000,
                       .log_path = "log/workerlog.1", .nlines = 2, .last_lines = lines};
    record("failure", 3, ec_failure_encode(&fl, &buf, &len, NULL), buf, len);

    ec_worker_timing_t t = {.epoch = 7, .rank = 3, .node_id = "n2", .local_rank = 1,
                            .epoch_seen_at_us = 1700000000000000,
                            .comm_ready_at_us = 1700000000100000};
    record("timing", 4, ec_worker_timing_encode(&t, &buf, &len, NULL), buf, len);
}

static void flags(void)
{
    /* first byte: 0 launch, 1 status, 2 check, 3 torchrun; tokens NUL-separated;
     * "\x01NAME=VALUE" is an environment entry */
    static const char launch[] =
        "\0--np=2:4\0--nproc_per_node\0002\0--job_id=j1\0--elastic_server=127.0.0.1:2379\0"
        "--lease_ttl=10\0--elastic_timeout=0.5\0--\0python\0train.py\0--np=5";
    static const char env[] =
        "\0\x01PADDLE_ELASTIC_NP=2:3\0\x01POD_NAME=pod-1\0\x01PADDLE_ELASTIC_SERVER=h:2379\0"
        "\x01" "CUDA_VISIBLE_DEVICES=0,1\0--gpus=0,1\0--rebuild=inprocess\0prog";
    static const char status[] = "\001--job_id=j1\0--json\0--watch=false\0--etcd_prefix=/a/b";
    static const char check[] = "\002--nnodes\0003\0--start_port=7000\0--port_range=7000-7100";
    put("flags", "launch", launch, sizeof(launch) - 1, NULL, 0);
    put("flags", "env", env, sizeof(env) - 1, NULL, 0);
    put("flags", "status", status, sizeof(status) - 1, NULL, 0);
    put("flags", "check", check, sizeof(check) - 1, NULL, 0);
    static const char torchrun[] =
        "\003--nnodes=1:2\0--nproc_per_node=auto\0--rdzv_backend=etcd\0--rdzv_endpoint=h:2379\0"
        "--rdzv_conf=last_call_timeout=5,join_timeout=60,read_timeout=3\0--max_restarts=1\0-m\0"
        "pkg.train\0--lr=1";
    static const char standalone[] = "\003--standalone\0--nproc-per-node\0002\0--\0train.py";
    put("flags", "torchrun", torchrun, sizeof(torchrun) - 1, NULL, 0);
    put("flags", "standalone", standalone, sizeof(standalone) - 1, NULL, 0);
}

static void endpoints(void)
{
    static const char *s[] = {"127.0.0.1:2379", "http://a:1,https://b:2/,etcd://c",
                              "[::1]:2379, 10.0.0.1", "[fe80::1%eth0]:2379"};
    /* Regression: a bracketed host longer than the parser's buffer was cut
     * short silently (found by this target; libFuzzer rarely grows inputs
     * this long within a short run). */
    char longv6[400] = "[";
    memset(longv6 + 1, 'a', 300);
    strcpy(longv6 + 301, "]:2379");
    put("endpoints", "long-bracketed", longv6, strlen(longv6), NULL, 0);
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        char name[16];
        snprintf(name, sizeof(name), "ep%zu", i);
        put("endpoints", name, s[i], strlen(s[i]), NULL, 0);
    }
}

static void planner(void)
{
    /* shape, np_min, np_max-np_min, nproc, timeouts; 4 nodes (id, state,
     * incarnation, revision); epoch 1 with 3 members; clocks; one left id */
    static const unsigned char running[] = {
        0x00, 1, 2, 1, 1, 1,  4,  0, 2, 0, 1,  1, 2, 0, 2,  2, 2, 0, 3,  3, 1, 0, 4,
        1, 3, 0, 0, 1, 0, 2, 0,  0, 0, 3, 232,  0, 0, 19, 136,  1, 2};
    static const unsigned char first[] = {0x00, 1, 1, 1, 1, 0, 3, 0, 1, 0, 1, 1, 1, 0, 2, 2,
                                          1, 0, 3, 0, 0, 0, 0, 0, 0};
    /* Regression: epoch 2^64-1 made the planner publish epoch 0 (found by
     * this target). */
    static const unsigned char wrap[] = {
        0, 1, 2, 1, 1, 1, 4, 0, 8, 0, 1, 1, 2, 0, 2, 2, 2, 0, 49, 3, 1, 0, 4, 255, 255, 255, 255,
        255, 255, 255, 255, 255, 255, 253, 0, 8, 1, 0, 2};
    put("planner", "wrap", wrap, sizeof(wrap), NULL, 0);
    put("planner", "running", running, sizeof(running), NULL, 0);
    put("planner", "first", first, sizeof(first), NULL, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: seeds DIR\n");
        return 2;
    }
    dir = argv[1];
    mkdir(dir, 0755);
    records();
    flags();
    endpoints();
    planner();
    return 0;
}
