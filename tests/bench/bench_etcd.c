/* Benchmark of the etcd client on loopback: p50/p99 of put, get, txn, the
 * lease keepalive round trip and put→watch-event delivery, each over N
 * operations (default 2000), against an embedded etcd (or ECOORD_BENCH_ETCD).
 *
 * Our overhead is measured against a baseline that calls the same RPCs
 * through bare gRPC core with the request bytes packed once in advance and
 * the reply left undecoded: the difference is what the client adds
 * (protobuf packing/unpacking, copying results, per-call queue). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "embed.h"
#include "clock.h"
#include "etcd_impl.h"

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, int64_t *v, int n, double *p50_out)
{
    qsort(v, (size_t)n, sizeof(int64_t), cmp64);
    double p50 = v[n / 2] / 1000.0, p99 = v[(n * 99) / 100] / 1000.0;
    printf("%-28s n=%-5d p50=%7.3f ms  p99=%7.3f ms\n", name, n, p50, p99);
    if (p50_out)
        *p50_out = p50;
}

/* Baseline: one unary call through bare gRPC core, bytes prepacked. */
static void raw_call(grpc_channel *ch, const char *method, grpc_slice payload)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(5000, GPR_TIMESPAN));
    grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                               grpc_slice_from_static_string(method), NULL, dl, NULL);
    grpc_slice s = grpc_slice_ref(payload);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1), *recv = NULL;
    grpc_slice_unref(s);
    grpc_metadata_array md, tr;
    grpc_metadata_array_init(&md);
    grpc_metadata_array_init(&tr);
    grpc_status_code st;
    grpc_slice det;
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = bb;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &tr;
    ops[5].data.recv_status_on_client.status = &st;
    ops[5].data.recv_status_on_client.status_details = &det;
    grpc_call_start_batch(call, ops, 6, (void *)1, NULL);
    grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_slice_unref(det);
    if (recv)
        grpc_byte_buffer_destroy(recv);
    grpc_byte_buffer_destroy(bb);
    grpc_metadata_array_destroy(&md);
    grpc_metadata_array_destroy(&tr);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
}

static grpc_slice packed(const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    grpc_slice s = grpc_slice_malloc(len);
    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    return s;
}

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int64_t seen;
} wsync_t;

static void on_ev(const ec_watch_event_t *ev, void *arg)
{
    wsync_t *w = arg;
    if (ev->type != EC_WATCH_PUT)
        return;
    pthread_mutex_lock(&w->lock);
    w->seen = ev->revision;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    if (n < 1000)
        n = 1000;
    ec_error_t err = {0};
    ec_embed_t *e = NULL;
    const char *ep = getenv("ECOORD_BENCH_ETCD");
    if (!ep) {
        ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
        if (!(e = ec_embed_start(&eo, &err))) {
            fprintf(stderr, "bench_etcd: %s\n", err.msg);
            return 1;
        }
        ep = ec_embed_endpoint(e);
    }
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ep;
    ec_etcd_t *c = ec_etcd_create(&o, &err);
    if (!c) {
        fprintf(stderr, "bench_etcd: %s\n", err.msg);
        ec_embed_stop(e);
        return 1;
    }
    int64_t *v = calloc((size_t)n, sizeof(int64_t));
    char val[64];
    memset(val, 'x', sizeof(val));
    printf("etcd client benchmark: %d operations each, etcd at %s (loopback)\n", n, ep);

    /* warm up */
    for (int i = 0; i < 200; i++)
        ec_etcd_put(c, "/bench/k", val, sizeof(val), 0, NULL, &err);

    double put_raw, put_ec, get_raw, get_ec;
    Etcdserverpb__PutRequest pr = ETCDSERVERPB__PUT_REQUEST__INIT;
    pr.key.data = (uint8_t *)"/bench/k";
    pr.key.len = 8;
    pr.value.data = (uint8_t *)val;
    pr.value.len = sizeof(val);
    grpc_slice ps = packed(&pr.base);
    Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rr.key.data = (uint8_t *)"/bench/k";
    rr.key.len = 8;
    grpc_slice rs = packed(&rr.base);

    /* Interleave baseline and client runs in blocks so drift hits both. */
    int64_t *vr = calloc((size_t)n, sizeof(int64_t));
    for (int i = 0; i < n; i++) {
        int64_t t0 = now_us();
        raw_call(c->channel, "/etcdserverpb.KV/Put", ps);
        vr[i] = now_us() - t0;
        t0 = now_us();
        ec_etcd_put(c, "/bench/k", val, sizeof(val), 0, NULL, &err);
        v[i] = now_us() - t0;
    }
    report("put (raw gRPC baseline)", vr, n, &put_raw);
    report("put (ec_etcd_put)", v, n, &put_ec);
    for (int i = 0; i < n; i++) {
        int64_t t0 = now_us();
        raw_call(c->channel, "/etcdserverpb.KV/Range", rs);
        vr[i] = now_us() - t0;
        t0 = now_us();
        ec_kv_t kv;
        bool found;
        ec_etcd_get(c, "/bench/k", &kv, &found, NULL, &err);
        v[i] = now_us() - t0;
        ec_kv_free(&kv);
    }
    report("get (raw gRPC baseline)", vr, n, &get_raw);
    report("get (ec_etcd_get)", v, n, &get_ec);
    grpc_slice_unref(ps);
    grpc_slice_unref(rs);

    int64_t rev;
    ec_etcd_put(c, "/bench/leader", "n1", 2, 0, &rev, &err);
    ec_cmp_t cmp = {.key = "/bench/leader", .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL, .number = rev};
    ec_op_t op = {.type = EC_OP_PUT, .key = "/bench/epoch", .value = val, .value_len = sizeof(val)};
    for (int i = 0; i < n; i++) {
        int64_t t0 = now_us();
        ec_etcd_txn(c, &cmp, 1, &op, 1, NULL, 0, NULL, &err);
        v[i] = now_us() - t0;
    }
    report("txn (fenced put)", v, n, NULL);

    int64_t lease;
    ec_etcd_lease_grant(c, 60, &lease, NULL, &err);
    pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
    ec__stream_t s;
    if (ec__stream_open(&s, c, "/etcdserverpb.Lease/LeaseKeepAlive", &lk, &err) == 0) {
        Etcdserverpb__LeaseKeepAliveRequest kr = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
        kr.id = lease;
        int got = 0;
        for (int i = 0; i < n; i++) {
            int64_t t0 = now_us();
            ec__stream_send(&s, &kr.base);
            ec__ev_t ev;
            while ((ev = ec__stream_next(&s, ec_mono_ms() + 5000)) == EC__EV_SENT)
                ;
            if (ev != EC__EV_RECV)
                break;
            grpc_byte_buffer_destroy(s.recv);
            s.recv = NULL;
            v[got++] = now_us() - t0;
        }
        ec__stream_close(&s);
        if (got >= 1000)
            report("lease keepalive round trip", v, got, NULL);
    }

    wsync_t ws = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    ec_watch_t *w = ec_watch_start(c, "/bench/w", false, 0, on_ev, &ws, &err);
    ec_etcd_put(c, "/bench/w", "0", 1, 0, NULL, &err); /* make sure the watch is live */
    pthread_mutex_lock(&ws.lock);
    while (ws.seen == 0)
        pthread_cond_wait(&ws.cond, &ws.lock);
    pthread_mutex_unlock(&ws.lock);
    for (int i = 0; i < n; i++) {
        int64_t t0 = now_us(), r;
        ec_etcd_put(c, "/bench/w", val, sizeof(val), 0, &r, &err);
        pthread_mutex_lock(&ws.lock);
        while (ws.seen < r)
            pthread_cond_wait(&ws.cond, &ws.lock);
        pthread_mutex_unlock(&ws.lock);
        v[i] = now_us() - t0;
    }
    ec_watch_stop(w);
    report("put -> watch event", v, n, NULL);
    printf("client overhead over raw gRPC core (p50): put %+.1f%%, get %+.1f%%\n",
           100.0 * (put_ec - put_raw) / put_raw, 100.0 * (get_ec - get_raw) / get_raw);
    free(v);
    free(vr);
    ec_etcd_destroy(c);
    ec_embed_stop(e);
    return 0;
}
