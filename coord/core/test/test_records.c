/* Rule checked: every record survives encode -> decode unchanged, and any
 * stored value that is not a valid record (truncated, garbage, wrong counts,
 * duplicates, unknown enums, out-of-range numbers) decodes to EC_ECORRUPT
 * with a message naming the key and field, never to a record that looks
 * valid and never to a crash.  Epochs for 8192 ranks stay under 1 MiB.
 *
 * Invalid wire records are crafted with the generated protobuf-c types,
 * because the encoder refuses to write them. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ec_check.h"
#include "ecoord.pb-c.h"
#include "keys.h"
#include "records.h"

/* ---- fixtures ------------------------------------------------------------- */

static ec_node_rec_t *sample_node(void)
{
    ec_node_rec_t *r = ec_node_rec_new(4, 4);
    ck_assert_ptr_nonnull(r);
    r->node_id = strdup("trainer-3");
    r->host = strdup("10.0.0.3");
    for (int i = 0; i < 4; i++) {
        r->ports[i] = (uint16_t)(6170 + i);
        char d[16];
        snprintf(d, sizeof d, "%d", i);
        r->device_ids[i] = strdup(d);
    }
    r->master_port = 29500;
    r->incarnation = 7;
    r->agent_version = strdup("ecoord 0.1.0");
    r->state = EC_NODE_READY;
    r->reason = strdup("");
    r->registered_at_ms = 1700000000123LL;
    return r;
}

/* nmembers x nproc epoch; member i is "n<i>" on host "h<i>" unless hosts
 * are shared (share_host: all on 127.0.0.1 with distinct ports). */
static ec_epoch_t *sample_epoch(int nmembers, int nproc, int share_host)
{
    ec_epoch_t *ep = ec_epoch_new(nmembers, nproc);
    ck_assert_ptr_nonnull(ep);
    ep->number = 12;
    for (int i = 0; i < nmembers; i++) {
        ec_member_t *m = &ep->members[i];
        char b[64];
        snprintf(b, sizeof b, "n%d", i);
        m->node_id = strdup(b);
        snprintf(b, sizeof b, "h%d", i);
        m->host = strdup(share_host ? "127.0.0.1" : b);
        for (int j = 0; j < nproc; j++)
            m->ports[j] = (uint16_t)(share_host ? 10000 + i * (nproc + 1) + j : 6170 + j);
        m->master_port = (uint16_t)(share_host ? 10000 + i * (nproc + 1) + nproc : 29500);
        m->incarnation = (uint64_t)(100 + i);
        m->probe_port = (uint16_t)(7000 + i);
    }
    ep->reason = EC_REASON_JOIN;
    ep->reason_detail = strdup("n2 joined");
    ep->leader_id = strdup("n0");
    ep->leader_rev = 4242;
    ep->observed_at_ms = 1700000000000LL;
    ep->decided_at_ms = 1700000000100LL;
    ep->planner_us = 37;
    ep->published_at_ms = 1700000000101LL;
    return ep;
}

static void assert_node_eq(const ec_node_rec_t *a, const ec_node_rec_t *b)
{
    ck_assert_str_eq(a->node_id, b->node_id);
    ck_assert_str_eq(a->host, b->host);
    ck_assert_int_eq(a->nproc, b->nproc);
    for (int i = 0; i < a->nproc; i++)
        ck_assert_uint_eq(a->ports[i], b->ports[i]);
    ck_assert_uint_eq(a->master_port, b->master_port);
    ck_assert_int_eq(a->ndevices, b->ndevices);
    for (int i = 0; i < a->ndevices; i++)
        ck_assert_str_eq(a->device_ids[i], b->device_ids[i]);
    ck_assert_uint_eq(a->incarnation, b->incarnation);
    ck_assert_str_eq(a->agent_version ? a->agent_version : "",
                     b->agent_version ? b->agent_version : "");
    ck_assert_int_eq(a->state, b->state);
    ck_assert_str_eq(a->reason ? a->reason : "", b->reason ? b->reason : "");
    ck_assert_int_eq(a->registered_at_ms, b->registered_at_ms);
    ck_assert_int_eq(a->boot.phase, b->boot.phase);
    ck_assert_int_eq(a->boot.started_at_ms, b->boot.started_at_ms);
    ck_assert_int_eq(a->boot.ready_at_ms, b->boot.ready_at_ms);
    ck_assert_int_eq(a->boot.nready, b->boot.nready);
    ck_assert_str_eq(a->boot.why, b->boot.why);
}

static void assert_epoch_eq(const ec_epoch_t *a, const ec_epoch_t *b)
{
    ck_assert_uint_eq(a->number, b->number);
    ck_assert_int_eq(a->world_size, b->world_size);
    ck_assert_int_eq(a->nproc, b->nproc);
    ck_assert_int_eq(a->nmembers, b->nmembers);
    for (int i = 0; i < a->nmembers; i++) {
        const ec_member_t *x = &a->members[i], *y = &b->members[i];
        ck_assert_str_eq(x->node_id, y->node_id);
        ck_assert_int_eq(x->m_id, y->m_id);
        ck_assert_str_eq(x->host, y->host);
        for (int j = 0; j < a->nproc; j++)
            ck_assert_uint_eq(x->ports[j], y->ports[j]);
        ck_assert_uint_eq(x->master_port, y->master_port);
        ck_assert_uint_eq(x->incarnation, y->incarnation);
        ck_assert_uint_eq(x->probe_port, y->probe_port);
    }
    ck_assert_int_eq(a->reason, b->reason);
    ck_assert_str_eq(a->reason_detail ? a->reason_detail : "",
                     b->reason_detail ? b->reason_detail : "");
    ck_assert_str_eq(a->leader_id, b->leader_id);
    ck_assert_int_eq(a->leader_rev, b->leader_rev);
    ck_assert_int_eq(a->observed_at_ms, b->observed_at_ms);
    ck_assert_int_eq(a->decided_at_ms, b->decided_at_ms);
    ck_assert_int_eq(a->planner_us, b->planner_us);
    ck_assert_int_eq(a->published_at_ms, b->published_at_ms);
}

static void encode_ok_node(const ec_node_rec_t *r, void **buf, size_t *len)
{
    ec_error_t err = {0};
    int rc = ec_node_rec_encode(r, buf, len, &err);
    ck_assert_msg(rc == 0, "node encode: %s", err.msg);
}

static void encode_ok_epoch(const ec_epoch_t *ep, void **buf, size_t *len)
{
    ec_error_t err = {0};
    int rc = ec_epoch_encode(ep, buf, len, &err);
    ck_assert_msg(rc == 0, "epoch encode: %s", err.msg);
}

/* Decode and require EC_ECORRUPT with `want` in the message (and the key). */
static void expect_corrupt_epoch(const void *buf, size_t len, const char *want)
{
    ec_error_t err = {0};
    ec_epoch_t *ep = (ec_epoch_t *)0x1;
    int rc = ec_epoch_decode(buf, len, "/job1/epoch", &ep, &err);
    ck_assert_msg(rc == EC_ECORRUPT, "decoded (rc %d), expected corrupt: %s", rc, want);
    ck_assert_ptr_null(ep);
    ck_assert_int_eq(err.code, EC_ECORRUPT);
    ck_assert_msg(strstr(err.msg, want), "message '%s' lacks '%s'", err.msg, want);
    ck_assert_msg(strstr(err.msg, "/job1/epoch"), "message '%s' lacks the key", err.msg);
    ck_assert_msg(strstr(err.msg, "another tool"), "message '%s' lacks the hint", err.msg);
}

static void expect_corrupt_node(const void *buf, size_t len, const char *want)
{
    ec_error_t err = {0};
    ec_node_rec_t *r = (ec_node_rec_t *)0x1;
    int rc = ec_node_rec_decode(buf, len, "/job1/nodes/x", &r, &err);
    ck_assert_msg(rc == EC_ECORRUPT, "decoded (rc %d), expected corrupt: %s", rc, want);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(err.msg, want), "message '%s' lacks '%s'", err.msg, want);
    ck_assert_msg(strstr(err.msg, "/job1/nodes/x"), "message '%s' lacks the key", err.msg);
}

/* ---- wire crafting: a valid epoch as generated types, to break one field -- */

typedef struct wire_epoch {
    Ecoord__Epoch e;
    Ecoord__Member m[4];
    Ecoord__Member *mp[4];
    uint32_t ports[4][2];
} wire_epoch_t;

/* 3 members x 2 procs, valid. */
static void wire_epoch_init(wire_epoch_t *w)
{
    static const char *ids[] = {"n0", "n1", "n2", "n3"};
    static const char *hosts[] = {"h0", "h1", "h2", "h3"};
    ecoord__epoch__init(&w->e);
    for (int i = 0; i < 4; i++) {
        ecoord__member__init(&w->m[i]);
        w->m[i].node_id = (char *)ids[i];
        w->m[i].m_id = (uint32_t)i;
        w->m[i].host = (char *)hosts[i];
        w->ports[i][0] = 6170;
        w->ports[i][1] = 6171;
        w->m[i].n_ports = 2;
        w->m[i].ports = w->ports[i];
        w->m[i].master_port = 29500;
        w->mp[i] = &w->m[i];
    }
    w->e.number = 5;
    w->e.world_size = 6;
    w->e.nproc = 2;
    w->e.n_members = 3;
    w->e.members = w->mp;
    w->e.rank0_endpoint = (char *)"h0:6170";
    w->e.master_addr = (char *)"h0";
    w->e.master_port = 29500;
    w->e.reason = ECOORD__EPOCH_REASON__EPOCH_REASON_START;
    w->e.leader_id = (char *)"n0";
    w->e.leader_rev = 9;
}

static uint8_t *wire_pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(*len + 1);
    protobuf_c_message_pack(m, b);
    return b;
}

#define WIRE_EPOCH_CASE(mutation, want)                     \
    do {                                                    \
        wire_epoch_t w;                                     \
        wire_epoch_init(&w);                                \
        mutation;                                           \
        size_t len_;                                        \
        uint8_t *b_ = wire_pack(&w.e.base, &len_);          \
        expect_corrupt_epoch(b_, len_, want);               \
        free(b_);                                           \
    } while (0)

/* ---- round trips ----------------------------------------------------------- */

START_TEST(node_round_trip)
{
    ec_node_rec_t *r = sample_node();
    void *buf;
    size_t len;
    encode_ok_node(r, &buf, &len);
    ec_node_rec_t *d = NULL;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_node_rec_decode(buf, len, "k", &d, &err), 0);
    assert_node_eq(r, d);
    ec_node_rec_free(d);
    free(buf);

    /* no devices, IPv6 host, NULL optional strings, refusal reason, max port */
    ec_node_rec_t *r2 = ec_node_rec_new(1, 0);
    r2->node_id = strdup("n");
    r2->host = strdup("fe80::1%eth0");
    r2->ports[0] = 65535;
    r2->master_port = 1;
    r2->state = EC_NODE_FAILED;
    r2->reason = strdup("refused: nproc=1, but the job runs 8 per node");
    encode_ok_node(r2, &buf, &len);
    ck_assert_int_eq(ec_node_rec_decode(buf, len, NULL, &d, &err), 0);
    assert_node_eq(r2, d);
    ck_assert_ptr_nonnull(d->agent_version); /* decode never hands out NULL strings */
    ck_assert_str_eq(d->agent_version, "");
    ec_node_rec_free(d);
    free(buf);
    ec_node_rec_free(r2);
    ec_node_rec_free(r);
}
END_TEST

/* A node's boot (in place: processes started before admission) travels
 * whole; a record without one reads as phase 0 (not gated). */
START_TEST(node_boot_round_trips)
{
    ec_node_rec_t *r = sample_node();
    void *buf;
    size_t len;
    ec_node_rec_t *d = NULL;
    ec_error_t err = {0};
    encode_ok_node(r, &buf, &len);
    ck_assert_int_eq(ec_node_rec_decode(buf, len, "k", &d, &err), 0);
    ck_assert_int_eq(d->boot.phase, EC_BOOT_UNKNOWN);
    ec_node_rec_free(d);
    free(buf);
    r->boot = (ec_node_boot_t){.phase = EC_BOOT_BOOTING, .started_at_ms = 1700000000123,
                               .nready = 1};
    snprintf(r->boot.why, sizeof(r->boot.why), "local rank 1 exited with code 3");
    encode_ok_node(r, &buf, &len);
    ck_assert_int_eq(ec_node_rec_decode(buf, len, "k", &d, &err), 0);
    assert_node_eq(r, d);
    ec_node_rec_free(d);
    free(buf);
    r->boot.phase = EC_BOOT_READY;
    r->boot.ready_at_ms = 1700000001999;
    r->boot.nready = r->nproc;
    encode_ok_node(r, &buf, &len);
    ck_assert_int_eq(ec_node_rec_decode(buf, len, "k", &d, &err), 0);
    assert_node_eq(r, d);
    ck_assert_str_eq(ec_boot_phase_name(d->boot.phase), "ready");
    ec_node_rec_free(d);
    free(buf);
    r->boot.nready = r->nproc + 1; /* a writer's bug: refused before it is written */
    ck_assert_int_eq(ec_node_rec_encode(r, &buf, &len, &err), EC_EINVAL);
    ck_assert_msg(strstr(err.msg, "boot says"), "%s", err.msg);
    ec_node_rec_free(r);
}
END_TEST

START_TEST(epoch_round_trip)
{
    int shapes[][3] = {{1, 1, 0}, {3, 2, 0}, {5, 8, 1}, {64, 8, 0}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        ec_epoch_t *ep = sample_epoch(shapes[s][0], shapes[s][1], shapes[s][2]);
        void *buf;
        size_t len;
        encode_ok_epoch(ep, &buf, &len);
        ec_epoch_t *d = NULL;
        ec_error_t err = {0};
        ck_assert_msg(ec_epoch_decode(buf, len, "k", &d, &err) == 0, "%s", err.msg);
        assert_epoch_eq(ep, d);
        ec_epoch_free(d);
        free(buf);
        ec_epoch_free(ep);
    }
}
END_TEST

/* The leader's --np travels with the epoch (nodes compare their own);
 * epochs written before it, or with nonsense there, read as 0:0. */
START_TEST(epoch_np_round_trips)
{
    ec_epoch_t *ep = sample_epoch(2, 2, 0);
    ep->np_min = 2;
    ep->np_max = 4;
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_epoch_encode(ep, &buf, &len, &err), 0);
    ec_epoch_t *d = NULL;
    ck_assert_int_eq(ec_epoch_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_int_eq(d->np_min, 2);
    ck_assert_int_eq(d->np_max, 4);
    ec_epoch_t *cp = ec_epoch_dup(d);
    ck_assert_int_eq(cp->np_max, 4);
    ec_epoch_free(cp);
    ec_epoch_free(d);
    free(buf);
    ep->np_min = 5; /* > max: not something a leader writes */
    ck_assert_int_eq(ec_epoch_encode(ep, &buf, &len, &err), 0);
    ck_assert_int_eq(ec_epoch_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_int_eq(d->np_min, 0);
    ck_assert_int_eq(d->np_max, 0);
    ec_epoch_free(d);
    free(buf);
    ep->np_min = ep->np_max = 0;
    ck_assert_int_eq(ec_epoch_encode(ep, &buf, &len, &err), 0);
    ck_assert_int_eq(ec_epoch_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_int_eq(d->np_max, 0);
    ec_epoch_free(d);
    free(buf);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(epoch_dup_is_deep_and_equal)
{
    ec_epoch_t *ep = sample_epoch(5, 8, 1);
    ec_epoch_t *cp = ec_epoch_dup(ep);
    ck_assert_ptr_nonnull(cp);
    assert_epoch_eq(ep, cp);
    ck_assert_ptr_ne(cp->members, ep->members);
    ck_assert_ptr_ne(cp->members[0].node_id, ep->members[0].node_id);
    ck_assert_ptr_ne(cp->members[0].ports, ep->members[0].ports);
    ec_epoch_free(ep); /* the copy stands alone */
    void *buf;
    size_t len;
    encode_ok_epoch(cp, &buf, &len);
    free(buf);
    ec_epoch_free(cp);
    ck_assert_ptr_null(ec_epoch_dup(NULL));
}
END_TEST

START_TEST(status_round_trip)
{
    ec_job_status_t st = {EC_JOB_FAILED, (char *)"rank 3 exited with 1", 9, 1700000000000LL,
                          (char *)"n0", 1, (char *)"n0", 42};
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_job_status_encode(&st, &buf, &len, &err), 0);
    ec_job_status_t *d;
    ck_assert_int_eq(ec_job_status_decode(buf, len, "/j/status", &d, &err), 0);
    ck_assert_int_eq(d->state, EC_JOB_FAILED);
    ck_assert_str_eq(d->reason, st.reason);
    ck_assert_uint_eq(d->epoch, 9);
    ck_assert_int_eq(d->updated_at_ms, st.updated_at_ms);
    ck_assert_str_eq(d->updated_by, "n0");
    ck_assert_str_eq(d->leader_id, "n0"); /* the leadership it was written under */
    ck_assert_int_eq(d->leader_rev, 42);
    ec_job_status_free(d);
    free(buf);

    ec_job_status_t run = {EC_JOB_RUNNING, NULL, 0, 0, NULL, 1, NULL, 0};
    ck_assert_int_eq(ec_job_status_encode(&run, &buf, &len, &err), 0);
    ck_assert_int_eq(ec_job_status_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_int_eq(d->state, EC_JOB_RUNNING);
    ck_assert_str_eq(d->reason, "");
    ck_assert_str_eq(d->leader_id, "");
    ck_assert_int_eq(d->leader_rev, 0);
    ec_job_status_free(d);
    free(buf);
}
END_TEST

/* The exception a process reported (its error file) and its run travel with the
 * failure; a record written without them (an older agent) decodes with "" and 0. */
START_TEST(failure_message_round_trips)
{
    ec_failure_t f = {(char *)"n3", EC_FAILURE_EXITED, 1, 9, 1, 0, 4, 1700000000000LL,
                      (char *)"log/workerlog.1", 0, NULL, NULL, NULL, 0};
    f.message = (char *)"ValueError: loss is nan at step 7";
    f.raised_at = (char *)"File \"train.py\", line 9, in step";
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_failure_encode(&f, &buf, &len, &err), 0);
    ec_failure_t *d;
    ck_assert_int_eq(ec_failure_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_str_eq(d->message, f.message);
    ck_assert_str_eq(d->raised_at, f.raised_at);
    ck_assert_uint_eq(d->run, 0); /* not recorded */
    ec_failure_free(d);
    free(buf);
    f.run = 3;
    ck_assert_int_eq(ec_failure_encode(&f, &buf, &len, &err), 0);
    ck_assert_int_eq(ec_failure_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_uint_eq(d->run, 3);
    ec_failure_free(d);
    free(buf);
    f.message = f.raised_at = NULL;
    ck_assert_int_eq(ec_failure_encode(&f, &buf, &len, &err), 0);
    ck_assert_int_eq(ec_failure_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_str_eq(d->message, "");
    ck_assert_str_eq(d->raised_at, "");
    ec_failure_free(d);
    free(buf);
}
END_TEST

START_TEST(failure_round_trip)
{
    char *lines[] = {(char *)"Traceback (most recent call last):",
                     (char *)"RuntimeError: NCCL error 2", (char *)""};
    ec_failure_t f = {(char *)"n3", EC_FAILURE_EXITED, 1, 9, 1, 0, 4, 1700000000000LL,
                      (char *)"log/workerlog.1", 3, lines, NULL, NULL, 0};
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_failure_encode(&f, &buf, &len, &err), 0);
    ec_failure_t *d;
    ck_assert_int_eq(ec_failure_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_str_eq(d->node_id, "n3");
    ck_assert_int_eq(d->kind, EC_FAILURE_EXITED);
    ck_assert_int_eq(d->local_rank, 1);
    ck_assert_int_eq(d->global_rank, 9);
    ck_assert_int_eq(d->exit_code, 1);
    ck_assert_uint_eq(d->epoch, 4);
    ck_assert_int_eq(d->time_ms, f.time_ms);
    ck_assert_str_eq(d->log_path, "log/workerlog.1");
    ck_assert_int_eq(d->nlines, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_str_eq(d->last_lines[i], lines[i]);
    ec_failure_free(d);
    free(buf);

    /* rank 0 killed by SIGKILL: rank 0 must survive proto3's zero default */
    ec_failure_t k = {(char *)"n0", EC_FAILURE_SIGNALED, 0, 0, 0, 9, 1, 5, NULL, 0, NULL, NULL, NULL, 0};
    ck_assert_int_eq(ec_failure_encode(&k, &buf, &len, &err), 0);
    ck_assert_int_eq(ec_failure_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_int_eq(d->kind, EC_FAILURE_SIGNALED);
    ck_assert_int_eq(d->signal, 9);
    ck_assert_int_eq(d->local_rank, 0);
    ck_assert_int_eq(d->global_rank, 0);
    ck_assert_int_eq(d->nlines, 0);
    ec_failure_free(d);
    free(buf);

    /* a lost node has no ranks: decode says -1 whatever the writer put */
    ec_failure_t lost = {(char *)"n5", EC_FAILURE_NODE_LOST, -1, 7, 3, 0, 2, 5, NULL, 0, NULL, NULL, NULL, 0};
    ck_assert_int_eq(ec_failure_encode(&lost, &buf, &len, &err), 0);
    /* on the wire, fields that do not apply are left unset, not 0xffffffff */
    Ecoord__Failure *w = ecoord__failure__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(w);
    ck_assert_uint_eq(w->local_rank, 0);
    ck_assert_uint_eq(w->global_rank, 0);
    ck_assert_int_eq(w->exit_code, 0);
    ecoord__failure__free_unpacked(w, NULL);
    ck_assert_int_eq(ec_failure_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_int_eq(d->kind, EC_FAILURE_NODE_LOST);
    ck_assert_int_eq(d->local_rank, -1);
    ck_assert_int_eq(d->global_rank, -1);
    ec_failure_free(d);
    free(buf);
}
END_TEST

/* hang/<node_id>: the leader's verdict, a protobuf record like every other
 * (it was a hand-written "<epoch> <rank> <why>" line): round trip, and what
 * another writer could put there refused with the key named. */
START_TEST(hang_verdict_round_trip_and_refusals)
{
    ec_hang_verdict_t h = {.epoch = 7, .local_rank = 3, .why = (char *)"rank 3 silent 12.0 s"};
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_hang_verdict_encode(&h, &buf, &len, &err), 0);
    ec_hang_verdict_t *d = NULL;
    ck_assert_int_eq(ec_hang_verdict_decode(buf, len, "/j/hang/n1", &d, &err), 0);
    ck_assert_uint_eq(d->epoch, 7);
    ck_assert_int_eq(d->local_rank, 3);
    ck_assert_str_eq(d->why, "rank 3 silent 12.0 s");
    ec_hang_verdict_free(d);
    free(buf);
    /* the old text form, garbage, and out-of-range fields are refused */
    ck_assert_int_eq(ec_hang_verdict_decode("7 3 rank 3 silent", 17, "/j/hang/n1", &d, &err),
                     EC_ECORRUPT);
    ck_assert_msg(strstr(err.msg, "/j/hang/n1"), "%s", err.msg);
    h.epoch = 0;
    ck_assert_int_eq(ec_hang_verdict_encode(&h, &buf, &len, &err), EC_EINVAL);
    h.epoch = 7;
    h.local_rank = EC_NPROC_MAX;
    ck_assert_int_eq(ec_hang_verdict_encode(&h, &buf, &len, &err), EC_EINVAL);
    ec_hang_verdict_free(NULL);
}
END_TEST

START_TEST(worker_timing_round_trip)
{
    ec_worker_timing_t t = {3, 17, (char *)"n2", 1, 1700000000000001LL, 1700000000000002LL,
                            1700000000000003LL, 0, 1700000000000005LL, NULL, 0, 0};
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_worker_timing_encode(&t, &buf, &len, &err), 0);
    ec_worker_timing_t *d;
    ck_assert_int_eq(ec_worker_timing_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_uint_eq(d->epoch, 3);
    ck_assert_int_eq(d->rank, 17);
    ck_assert_str_eq(d->node_id, "n2");
    ck_assert_int_eq(d->local_rank, 1);
    ck_assert_int_eq(d->epoch_seen_at_us, t.epoch_seen_at_us);
    ck_assert_int_eq(d->comm_aborted_at_us, t.comm_aborted_at_us);
    ck_assert_int_eq(d->comm_ready_at_us, t.comm_ready_at_us);
    ck_assert_int_eq(d->state_synced_at_us, 0);
    ck_assert_int_eq(d->first_collective_at_us, t.first_collective_at_us);
    ck_assert_ptr_null(d->comm_method); /* not said: an older worker, or not NCCL */
    ck_assert_int_eq(d->shrink_us, 0);
    ec_worker_timing_free(d);
    free(buf);
    /* how the NCCL communicator was built, and each phase's time */
    t.comm_method = (char *)"shrink failed, init 4 roots";
    t.shrink_us = 30000123;
    t.init_us = 2500000;
    ck_assert_int_eq(ec_worker_timing_encode(&t, &buf, &len, &err), 0);
    ck_assert_int_eq(ec_worker_timing_decode(buf, len, NULL, &d, &err), 0);
    ck_assert_str_eq(d->comm_method, "shrink failed, init 4 roots");
    ck_assert_int_eq(d->shrink_us, 30000123);
    ck_assert_int_eq(d->init_us, 2500000);
    ec_worker_timing_free(d);
    free(buf);
    t.init_us = -1;
    ck_assert_int_eq(ec_worker_timing_encode(&t, &buf, &len, &err), EC_EINVAL);
    ck_assert_msg(strstr(err.msg, "negative"), "%s", err.msg);
}
END_TEST

START_TEST(free_accepts_null)
{
    ec_node_rec_free(NULL);
    ec_epoch_free(NULL);
    ec_job_status_free(NULL);
    ec_failure_free(NULL);
    ec_worker_timing_free(NULL);
    /* and keep errno */
    errno = 1234;
    ec_epoch_free(sample_epoch(2, 2, 0));
    ck_assert_int_eq(errno, 1234);
}
END_TEST

START_TEST(enum_names)
{
    ck_assert_str_eq(ec_node_state_name(EC_NODE_JOINING), "joining");
    ck_assert_str_eq(ec_node_state_name(EC_NODE_FAILED), "failed");
    ck_assert_str_eq(ec_node_state_name((ec_node_state_t)77), "unknown");
    ck_assert_str_eq(ec_epoch_reason_name(EC_REASON_SPARE_PROMOTED), "spare-promoted");
    ck_assert_str_eq(ec_epoch_reason_name(EC_REASON_LOST), "lost");
    ck_assert_str_eq(ec_job_state_name(EC_JOB_COMPLETED), "completed");
    ck_assert_str_eq(ec_failure_kind_name(EC_FAILURE_NODE_LOST), "node-lost");
    ck_assert_str_eq(ec_failure_kind_name((ec_failure_kind_t)-1), "unknown");
}
END_TEST

/* ---- encode-side validation ------------------------------------------------- */

/* Break one rule of a valid node record; returns the text the error must
 * contain, or NULL past the last case. */
static const char *break_node(ec_node_rec_t *r, int i)
{
    switch (i) {
    case 0: free(r->node_id); r->node_id = strdup(""); return "node id";
    case 1: free(r->node_id); r->node_id = NULL; return "node id";
    case 2: free(r->node_id); r->node_id = strdup("a/b"); return "node id";
    case 3: free(r->host); r->host = strdup(""); return "host";
    case 4: free(r->host); r->host = strdup("h,x"); return "host";
    case 5: free(r->host); r->host = strdup("h x"); return "host";
    case 6: r->nproc = 0; return "nproc is 0";
    case 7: r->nproc = EC_NPROC_MAX + 1; return "nproc is 1025";
    case 8: r->ports[2] = 0; return "port 2 is 0";
    case 9: r->ports[3] = r->ports[1]; return "twice";
    case 10: r->master_port = r->ports[0]; return "twice";
    case 11: r->master_port = 0; return "master port is 0";
    case 12: r->ndevices = 2; return "2 device ids, expected 0 or nproc=4";
    case 13: free(r->device_ids[1]); r->device_ids[1] = strdup("0,1"); return "device id 1";
    case 14: free(r->device_ids[1]); r->device_ids[1] = strdup(""); return "device id 1";
    case 15: r->state = EC_NODE_UNKNOWN; return "state 0";
    case 16: r->state = (ec_node_state_t)6; return "state 6";
    }
    return NULL;
}

START_TEST(node_encode_refuses_invalid)
{
    const char *want;
    for (int i = 0;; i++) {
        ec_node_rec_t *r = sample_node();
        int nproc = r->nproc, ndev = r->ndevices;
        if (!(want = break_node(r, i))) {
            ec_node_rec_free(r);
            break;
        }
        void *buf = (void *)0x1;
        size_t len = 99;
        ec_error_t err = {0};
        int rc = ec_node_rec_encode(r, &buf, &len, &err);
        ck_assert_msg(rc == EC_EINVAL, "case %d (%s) encoded", i, want);
        ck_assert_ptr_null(buf);
        ck_assert_msg(strstr(err.msg, want), "case %d: '%s' lacks '%s'", i, err.msg, want);
        ck_assert_ptr_nonnull(strstr(err.msg, "writer"));
        r->nproc = nproc; /* restore sizes so free sees the real arrays */
        r->ndevices = ndev;
        ec_node_rec_free(r);
    }
    ck_assert_int_eq(ec_node_rec_encode(NULL, &(void *){0}, &(size_t){0}, NULL), EC_EINVAL);
    ck_assert_ptr_null(ec_node_rec_new(0, 0));
    ck_assert_ptr_null(ec_node_rec_new(EC_NPROC_MAX + 1, 0));
}
END_TEST

static const char *break_epoch(ec_epoch_t *ep, int i)
{
    switch (i) {
    case 0: ep->number = 0; return "number is 0";
    case 1: ep->world_size = 5; return "world size 5";
    case 2: ep->members[1].m_id = 2; return "member at index 1 has M_id 2";
    case 3:
        free(ep->members[2].node_id);
        ep->members[2].node_id = strdup("n0");
        return "node n0 appears twice (members 0 and 2)";
    case 4:
        free(ep->members[1].host);
        ep->members[1].host = strdup("h0");
        return "endpoint h0:6170 is used twice (members 0 and 1)";
    case 5: ep->members[1].ports[1] = ep->members[1].ports[0]; return "twice";
    case 6: ep->members[1].master_port = 0; return "master port is 0";
    case 7: ep->reason = EC_REASON_UNKNOWN; return "reason 0";
    case 8: ep->reason = (ec_epoch_reason_t)7; return "reason 7";
    case 9: free(ep->leader_id); ep->leader_id = NULL; return "leader id";
    case 10: ep->leader_rev = 0; return "leader revision 0";
    case 11: free(ep->members[0].host); ep->members[0].host = strdup(""); return "host";
    case 12: ep->nproc = 0; return "nproc is 0";
    }
    return NULL;
}

START_TEST(epoch_encode_refuses_invalid)
{
    const char *want;
    for (int i = 0;; i++) {
        ec_epoch_t *ep = sample_epoch(3, 2, 0);
        if (!(want = break_epoch(ep, i))) {
            ec_epoch_free(ep);
            break;
        }
        void *buf;
        size_t len;
        ec_error_t err = {0};
        int rc = ec_epoch_encode(ep, &buf, &len, &err);
        ck_assert_msg(rc == EC_EINVAL, "case %d (%s) encoded", i, want);
        ck_assert_msg(strstr(err.msg, want), "case %d: '%s' lacks '%s'", i, err.msg, want);
        ck_assert_ptr_nonnull(strstr(err.msg, "writer"));
        ec_epoch_free(ep);
    }
    ck_assert_ptr_null(ec_epoch_new(0, 1));
    ck_assert_ptr_null(ec_epoch_new(1, 0));
    ck_assert_ptr_null(ec_epoch_new(EC_MEMBERS_MAX + 1, 1));
}
END_TEST

START_TEST(other_records_refuse_invalid)
{
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ec_job_status_t st = {EC_JOB_FAILED, (char *)"", 1, 1, NULL, 1, NULL, 0};
    ck_assert_int_eq(ec_job_status_encode(&st, &buf, &len, &err), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "no reason"));
    st.state = EC_JOB_INTERRUPTED; /* says why too */
    ck_assert_int_eq(ec_job_status_encode(&st, &buf, &len, &err), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "interrupted but no reason"));
    ck_assert(ec_job_state_ended(EC_JOB_INTERRUPTED) && ec_job_state_ended(EC_JOB_FAILED) &&
              ec_job_state_ended(EC_JOB_COMPLETED) && !ec_job_state_ended(EC_JOB_RUNNING));
    st.state = EC_JOB_UNKNOWN;
    ck_assert_int_eq(ec_job_status_encode(&st, &buf, &len, &err), EC_EINVAL);
    st = (ec_job_status_t){EC_JOB_RUNNING, NULL, 1, -1, NULL, 1, NULL, 0};
    ck_assert_int_eq(ec_job_status_encode(&st, &buf, &len, &err), EC_EINVAL);
    st = (ec_job_status_t){EC_JOB_RUNNING, NULL, 1, 1, (char *)"a b", 1, NULL, 0};
    ck_assert_int_eq(ec_job_status_encode(&st, &buf, &len, &err), EC_EINVAL);

    ec_failure_t f = {(char *)"n1", EC_FAILURE_EXITED, 0, 0, 256, 0, 1, 1, NULL, 0, NULL, NULL, NULL, 0};
    ck_assert_int_eq(ec_failure_encode(&f, &buf, &len, &err), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "exit code 256"));
    f.exit_code = 1;
    f.local_rank = -1;
    ck_assert_int_eq(ec_failure_encode(&f, &buf, &len, &err), EC_EINVAL);
    f.local_rank = 0;
    f.kind = EC_FAILURE_SIGNALED;
    ck_assert_int_eq(ec_failure_encode(&f, &buf, &len, &err), EC_EINVAL); /* signal 0 */
    f.kind = EC_FAILURE_UNKNOWN;
    ck_assert_int_eq(ec_failure_encode(&f, &buf, &len, &err), EC_EINVAL);
    f.kind = EC_FAILURE_EXITED;
    f.nlines = 2;
    ck_assert_int_eq(ec_failure_encode(&f, &buf, &len, &err), EC_EINVAL); /* lines NULL */
    f.nlines = 0;
    f.node_id = NULL;
    ck_assert_int_eq(ec_failure_encode(&f, &buf, &len, &err), EC_EINVAL);

    ec_worker_timing_t t = {0, 1, (char *)"n1", 0, 1, 1, 1, 1, 1, NULL, 0, 0};
    ck_assert_int_eq(ec_worker_timing_encode(&t, &buf, &len, &err), EC_EINVAL);
    t.epoch = 1;
    t.rank = -1;
    ck_assert_int_eq(ec_worker_timing_encode(&t, &buf, &len, &err), EC_EINVAL);
    t.rank = 1;
    t.comm_ready_at_us = -5;
    ck_assert_int_eq(ec_worker_timing_encode(&t, &buf, &len, &err), EC_EINVAL);
    t.comm_ready_at_us = 5;
    t.local_rank = EC_NPROC_MAX;
    ck_assert_int_eq(ec_worker_timing_encode(&t, &buf, &len, &err), EC_EINVAL);
    t.local_rank = 0;
    ck_assert_int_eq(ec_worker_timing_encode(&t, &buf, &len, &err), 0);
    free(buf);
}
END_TEST

/* ---- decode-side validation: crafted wire records ----------------------------- */

START_TEST(epoch_decode_refuses_crafted)
{
    /* the unmodified wire epoch is valid: the cases below fail for their reason */
    {
        wire_epoch_t w;
        wire_epoch_init(&w);
        size_t len;
        uint8_t *b = wire_pack(&w.e.base, &len);
        ec_epoch_t *ep;
        ec_error_t err = {0};
        ck_assert_msg(ec_epoch_decode(b, len, NULL, &ep, &err) == 0, "%s", err.msg);
        ec_epoch_free(ep);
        free(b);
    }
    WIRE_EPOCH_CASE(w.e.number = 0, "number is 0");
    WIRE_EPOCH_CASE(w.m[1].n_ports = 1, "member 1 (n1) has 1 endpoints, expected nproc=2");
    WIRE_EPOCH_CASE(w.m[2].n_ports = 0, "member 2 (n2) has 0 endpoints, expected nproc=2");
    WIRE_EPOCH_CASE(w.e.world_size = 8, "world size 8 != 3 members x nproc 2");
    WIRE_EPOCH_CASE((w.e.n_members = 4, w.e.world_size = 6), "world size 6 != 4 members");
    WIRE_EPOCH_CASE((w.e.n_members = 0, w.e.world_size = 0), "0 members");
    WIRE_EPOCH_CASE(w.m[1].m_id = 2, "member at index 1 has M_id 2");
    WIRE_EPOCH_CASE((w.mp[1] = &w.m[2], w.mp[2] = &w.m[1]), "member at index 1 has M_id 2");
    WIRE_EPOCH_CASE((w.m[2].node_id = (char *)"n0", w.m[2].host = (char *)"h2"),
                    "node n0 appears twice (members 0 and 2)");
    WIRE_EPOCH_CASE(w.m[2].host = (char *)"h1", "endpoint h1:6170 is used twice (members 1 and 2)");
    WIRE_EPOCH_CASE(w.ports[1][1] = 6170, "member 1 (n1) uses port 6170 twice");
    WIRE_EPOCH_CASE(w.m[1].node_id = (char *)"", "member 1: node id");
    WIRE_EPOCH_CASE(w.m[1].node_id = (char *)"n 1", "member 1: node id");
    WIRE_EPOCH_CASE(w.m[1].host = (char *)"", "member 1 (n1): host");
    WIRE_EPOCH_CASE(w.e.reason = ECOORD__EPOCH_REASON__EPOCH_REASON_UNKNOWN, "reason 0");
    WIRE_EPOCH_CASE(w.e.reason = (Ecoord__EpochReason)99, "reason 99");
    WIRE_EPOCH_CASE(w.e.reason = (Ecoord__EpochReason)-1, "reason -1");
    WIRE_EPOCH_CASE(w.e.leader_id = (char *)"", "leader id");
    WIRE_EPOCH_CASE(w.e.leader_rev = 0, "leader revision 0");
    WIRE_EPOCH_CASE(w.e.leader_rev = -3, "leader revision -3");
    WIRE_EPOCH_CASE(w.e.rank0_endpoint = (char *)"h1:6170", "rank 0 endpoint 'h1:6170'");
    WIRE_EPOCH_CASE(w.e.rank0_endpoint = (char *)"", "rank 0 endpoint ''");
    WIRE_EPOCH_CASE(w.e.master_addr = (char *)"h1", "master h1:29500");
    WIRE_EPOCH_CASE(w.e.master_port = 29501, "master h0:29501");
    /* huge values */
    WIRE_EPOCH_CASE((w.e.nproc = 0xffffffffu, w.e.world_size = 0xfffffffdu),
                    "nproc is 4294967295");
    WIRE_EPOCH_CASE(w.e.nproc = EC_NPROC_MAX + 1, "nproc is 1025");
    WIRE_EPOCH_CASE(w.e.world_size = 0xffffffffu, "world size 4294967295");
    WIRE_EPOCH_CASE(w.m[2].m_id = 0xffffffffu, "member at index 2 has M_id 4294967295");
    WIRE_EPOCH_CASE(w.ports[1][0] = 65536, "port 0 is 65536");
    WIRE_EPOCH_CASE(w.ports[1][0] = 0xffffffffu, "port 0 is 4294967295");
    WIRE_EPOCH_CASE(w.ports[1][0] = 0, "port 0 is 0");
    WIRE_EPOCH_CASE(w.m[0].master_port = 70000, "master port 70000");
    WIRE_EPOCH_CASE(w.m[1].probe_port = 70000, "probe port 70000");
}
END_TEST

START_TEST(node_decode_refuses_crafted)
{
    uint32_t ports[3] = {6170, 6171, 6172};
    char *devs[3] = {(char *)"0", (char *)"1", (char *)"2"};
#define NODE_CASE(mutation, want)                                   \
    do {                                                            \
        Ecoord__NodeRecord m = ECOORD__NODE_RECORD__INIT;           \
        m.node_id = (char *)"n1";                                   \
        m.host = (char *)"10.0.0.1";                                \
        m.nproc = 2;                                                \
        m.n_ports = 2;                                              \
        m.ports = ports;                                            \
        m.master_port = 29500;                                      \
        m.state = ECOORD__NODE_STATE__NODE_STATE_JOINING;           \
        mutation;                                                   \
        size_t len_;                                                \
        uint8_t *b_ = wire_pack(&m.base, &len_);                    \
        expect_corrupt_node(b_, len_, want);                        \
        free(b_);                                                   \
    } while (0)
    {
        Ecoord__NodeRecord m = ECOORD__NODE_RECORD__INIT;
        m.node_id = (char *)"n1";
        m.host = (char *)"10.0.0.1";
        m.nproc = 2;
        m.n_ports = 2;
        m.ports = ports;
        m.master_port = 29500;
        m.state = ECOORD__NODE_STATE__NODE_STATE_JOINING;
        size_t len;
        uint8_t *b = wire_pack(&m.base, &len);
        ec_node_rec_t *r;
        ck_assert_int_eq(ec_node_rec_decode(b, len, NULL, &r, NULL), 0);
        ec_node_rec_free(r);
        free(b);
    }
    NODE_CASE(m.n_ports = 1, "has 1 endpoints, expected nproc=2");
    NODE_CASE(m.n_ports = 3, "has 3 endpoints, expected nproc=2");
    NODE_CASE((m.nproc = 0, m.n_ports = 0), "nproc is 0");
    NODE_CASE(m.nproc = 0xffffffffu, "nproc is 4294967295");
    NODE_CASE(m.node_id = (char *)"", "node id");
    NODE_CASE(m.node_id = (char *)"../etc", "node id");
    NODE_CASE(m.host = (char *)"", "host");
    NODE_CASE(m.host = (char *)"a\nb", "host");
    NODE_CASE(ports[1] = 70000, "port 1 is 70000");
    ports[1] = 6171;
    NODE_CASE(ports[1] = 6170, "port 6170 twice");
    ports[1] = 6171;
    NODE_CASE(m.master_port = 6171, "port 6171 twice");
    NODE_CASE(m.master_port = 0, "master port is 0");
    NODE_CASE(m.master_port = 65536, "master port 65536");
    NODE_CASE(m.state = ECOORD__NODE_STATE__NODE_STATE_UNKNOWN, "state 0");
    NODE_CASE(m.state = (Ecoord__NodeState)6, "state 6");
    NODE_CASE((m.n_device_ids = 3, m.device_ids = devs), "3 device ids, expected 0 or nproc=2");
    NODE_CASE((m.n_device_ids = 2, m.device_ids = devs, devs[1] = (char *)"a b"), "device id 1");
    devs[1] = (char *)"1";
    {
        Ecoord__NodeBoot bt = ECOORD__NODE_BOOT__INIT;
        NODE_CASE(m.boot = &bt, "boot phase 0");
        bt.phase = (Ecoord__BootPhase)3;
        NODE_CASE(m.boot = &bt, "boot phase 3");
        bt.phase = ECOORD__BOOT_PHASE__BOOT_PHASE_BOOTING;
        bt.nready = 3;
        NODE_CASE(m.boot = &bt, "boot says 3 ready of nproc=2");
        bt.nready = 1;
        bt.started_at_ms = -5;
        NODE_CASE(m.boot = &bt, "outside the record's bounds");
    }
#undef NODE_CASE
}
END_TEST

START_TEST(other_decode_refuses_crafted)
{
    size_t len;
    uint8_t *b;
    ec_error_t err = {0};
    {
        Ecoord__JobStatus m = ECOORD__JOB_STATUS__INIT;
        m.state = (Ecoord__JobState)5; /* one past interrupted */
        b = wire_pack(&m.base, &len);
        ec_job_status_t *st = (ec_job_status_t *)0x1;
        ck_assert_int_eq(ec_job_status_decode(b, len, "/j/status", &st, &err), EC_ECORRUPT);
        ck_assert_ptr_null(st);
        ck_assert_ptr_nonnull(strstr(err.msg, "/j/status"));
        ck_assert_ptr_nonnull(strstr(err.msg, "state 5"));
        free(b);
        m.state = ECOORD__JOB_STATE__JOB_STATE_FAILED; /* without a reason */
        b = wire_pack(&m.base, &len);
        ck_assert_int_eq(ec_job_status_decode(b, len, NULL, &st, &err), EC_ECORRUPT);
        ck_assert_ptr_nonnull(strstr(err.msg, "no reason"));
        free(b);
        /* an empty value is a record with every field unset: state unknown */
        ck_assert_int_eq(ec_job_status_decode("", 0, NULL, &st, &err), EC_ECORRUPT);
    }
    {
        Ecoord__Failure m = ECOORD__FAILURE__INIT;
        m.node_id = (char *)"n1";
        m.kind = ECOORD__FAILURE_KIND__FAILURE_KIND_EXITED;
        m.local_rank = 0x80000000u;
        b = wire_pack(&m.base, &len);
        ec_failure_t *f;
        ck_assert_int_eq(ec_failure_decode(b, len, NULL, &f, &err), EC_ECORRUPT);
        free(b);
        m.local_rank = 0;
        m.global_rank = 0xffffffffu;
        b = wire_pack(&m.base, &len);
        ck_assert_int_eq(ec_failure_decode(b, len, NULL, &f, &err), EC_ECORRUPT);
        free(b);
        m.global_rank = 0;
        m.local_rank = EC_NPROC_MAX;
        b = wire_pack(&m.base, &len);
        ck_assert_int_eq(ec_failure_decode(b, len, NULL, &f, &err), EC_ECORRUPT);
        free(b);
        m.local_rank = 0;
        m.exit_code = -1;
        b = wire_pack(&m.base, &len);
        ck_assert_int_eq(ec_failure_decode(b, len, NULL, &f, &err), EC_ECORRUPT);
        ck_assert_ptr_nonnull(strstr(err.msg, "exit code -1"));
        free(b);
        m.exit_code = 0;
        m.kind = (Ecoord__FailureKind)9;
        b = wire_pack(&m.base, &len);
        ck_assert_int_eq(ec_failure_decode(b, len, NULL, &f, &err), EC_ECORRUPT);
        ck_assert_ptr_nonnull(strstr(err.msg, "kind 9"));
        free(b);
        m.kind = ECOORD__FAILURE_KIND__FAILURE_KIND_SIGNALED;
        m.signal = 200;
        b = wire_pack(&m.base, &len);
        ck_assert_int_eq(ec_failure_decode(b, len, NULL, &f, &err), EC_ECORRUPT);
        free(b);
    }
    {
        Ecoord__WorkerTiming m = ECOORD__WORKER_TIMING__INIT;
        m.epoch = 1;
        m.node_id = (char *)"n1";
        m.rank = 0x80000000u;
        b = wire_pack(&m.base, &len);
        ec_worker_timing_t *t;
        ck_assert_int_eq(ec_worker_timing_decode(b, len, NULL, &t, &err), EC_ECORRUPT);
        free(b);
        m.rank = 0;
        m.epoch = 0;
        b = wire_pack(&m.base, &len);
        ck_assert_int_eq(ec_worker_timing_decode(b, len, NULL, &t, &err), EC_ECORRUPT);
        free(b);
        m.epoch = 1;
        m.first_collective_at_us = -1;
        b = wire_pack(&m.base, &len);
        ck_assert_int_eq(ec_worker_timing_decode(b, len, NULL, &t, &err), EC_ECORRUPT);
        free(b);
        m.first_collective_at_us = 1;
        b = wire_pack(&m.base, &len);
        ck_assert_int_eq(ec_worker_timing_decode(b, len, NULL, &t, &err), 0);
        ec_worker_timing_free(t);
        free(b);
    }
}
END_TEST

START_TEST(epoch_message_names_key_and_field)
{
    /* the exact shape of the message a user sees for a bad member */
    wire_epoch_t w;
    wire_epoch_init(&w);
    w.m[2].n_ports = 1;
    size_t len;
    uint8_t *b = wire_pack(&w.e.base, &len);
    ec_error_t err = {0};
    ec_epoch_t *ep;
    ck_assert_int_eq(ec_epoch_decode(b, len, "/ecoord/job1/epoch", &ep, &err), EC_ECORRUPT);
    ck_assert_str_eq(err.msg, "epoch record at /ecoord/job1/epoch: member 2 (n2) has 1 "
                              "endpoints, expected nproc=2; the key may have been written by "
                              "another tool or an incompatible ecoord version");
    free(b);
}
END_TEST

/* ---- truncation and garbage ------------------------------------------------- */

/* Every strict prefix of a record whose last field is mandatory must be
 * refused: cutting a record short never yields a valid-looking one. */
START_TEST(truncated_records_refused)
{
    ec_epoch_t *ep = sample_epoch(5, 4, 0);
    /* leave the optional trailing fields unset so leader_rev is last */
    free(ep->reason_detail);
    ep->reason_detail = NULL;
    ep->observed_at_ms = ep->decided_at_ms = ep->planner_us = ep->published_at_ms = 0;
    void *buf;
    size_t len;
    encode_ok_epoch(ep, &buf, &len);
    for (size_t n = 0; n < len; n++) {
        ec_epoch_t *d = NULL;
        ec_error_t err = {0};
        ck_assert_msg(ec_epoch_decode(buf, n, NULL, &d, &err) == EC_ECORRUPT,
                      "epoch cut to %zu of %zu bytes decoded", n, len);
        ck_assert_ptr_null(d);
    }
    ec_epoch_t *d = NULL;
    ck_assert_int_eq(ec_epoch_decode(buf, len, NULL, &d, NULL), 0);
    ec_epoch_free(d);
    free(buf);
    ec_epoch_free(ep);

    ec_node_rec_t *r = sample_node();
    free(r->reason);
    r->reason = NULL;
    r->registered_at_ms = 0; /* state is the last field */
    encode_ok_node(r, &buf, &len);
    for (size_t n = 0; n < len; n++) {
        ec_node_rec_t *x = NULL;
        ck_assert_msg(ec_node_rec_decode(buf, n, NULL, &x, NULL) == EC_ECORRUPT,
                      "node cut to %zu of %zu bytes decoded", n, len);
    }
    free(buf);
    ec_node_rec_free(r);
}
END_TEST

typedef int (*decode_fn)(const void *, size_t, void **, ec_error_t *);
typedef int (*reencode_fn)(const void *, void **, size_t *, ec_error_t *);

/* Adapters so one fuzz loop covers every record type. */
#define ADAPT(T, name)                                                                  \
    static int dec_##name(const void *b, size_t l, void **o, ec_error_t *e)              \
    {                                                                                   \
        return ec_##name##_decode(b, l, "fuzz", (T **)o, e);                            \
    }                                                                                   \
    static int enc_##name(const void *r, void **b, size_t *l, ec_error_t *e)             \
    {                                                                                   \
        return ec_##name##_encode((const T *)r, b, l, e);                               \
    }                                                                                   \
    static void free_##name(void *r)                                                    \
    {                                                                                   \
        ec_##name##_free((T *)r);                                                       \
    }
ADAPT(ec_node_rec_t, node_rec)
ADAPT(ec_epoch_t, epoch)
ADAPT(ec_job_status_t, job_status)
ADAPT(ec_failure_t, failure)
ADAPT(ec_worker_timing_t, worker_timing)

static const struct codec {
    const char *name;
    decode_fn dec;
    reencode_fn enc;
    void (*fre)(void *);
} codecs[] = {
    {"node", dec_node_rec, enc_node_rec, free_node_rec},
    {"epoch", dec_epoch, enc_epoch, free_epoch},
    {"status", dec_job_status, enc_job_status, free_job_status},
    {"failure", dec_failure, enc_failure, free_failure},
    {"timing", dec_worker_timing, enc_worker_timing, free_worker_timing},
};
#define NCODECS (sizeof(codecs) / sizeof(codecs[0]))

/* Decode must give EC_ECORRUPT, or a record that re-encodes (i.e. passes
 * the same validation the writer applies). */
static int fuzz_one(const struct codec *c, const uint8_t *b, size_t len)
{
    void *rec = (void *)0x1;
    ec_error_t err = {0};
    int rc = c->dec(b, len, &rec, &err);
    if (rc == EC_ECORRUPT) {
        ck_assert_ptr_null(rec);
        ck_assert_msg(err.msg[0] != 0, "%s: corrupt without a message", c->name);
        return 0;
    }
    ck_assert_msg(rc == 0, "%s: decode returned %d (%s)", c->name, rc, err.msg);
    void *out;
    size_t olen;
    int erc = c->enc(rec, &out, &olen, &err);
    ck_assert_msg(erc == 0, "%s: decoded record does not re-encode: %s", c->name, err.msg);
    free(out);
    c->fre(rec);
    return 1;
}

static uint64_t rng_state;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

START_TEST(random_garbage_never_crashes)
{
    uint8_t b[512];
    int valid[NCODECS] = {0};
    for (uint64_t seed = 1; seed <= 20000; seed++) {
        rng_state = seed;
        size_t len = rnd() % sizeof b;
        for (size_t i = 0; i < len; i++)
            b[i] = (uint8_t)rnd();
        for (size_t c = 0; c < NCODECS; c++)
            valid[c] += fuzz_one(&codecs[c], b, len);
    }
    for (size_t c = 0; c < NCODECS; c++)
        fprintf(stderr, "# garbage: %s accepted %d of 20000 random inputs\n", codecs[c].name,
                valid[c]);
    /* a node record or epoch needs many consistent fields: noise never makes one */
    ck_assert_int_eq(valid[0], 0);
    ck_assert_int_eq(valid[1], 0);
}
END_TEST

/* Flip bytes of valid records: the decoder sees almost-valid input. */
START_TEST(mutated_records_never_crash)
{
    ec_epoch_t *ep = sample_epoch(4, 2, 0);
    ec_node_rec_t *nr = sample_node();
    void *bufs[2];
    size_t lens[2];
    encode_ok_epoch(ep, &bufs[0], &lens[0]);
    encode_ok_node(nr, &bufs[1], &lens[1]);
    const struct codec *cs[2] = {&codecs[1], &codecs[0]};
    int corrupt[2] = {0};
    for (int k = 0; k < 2; k++) {
        uint8_t *m = malloc(lens[k]);
        for (uint64_t seed = 1; seed <= 20000; seed++) {
            rng_state = seed * 7919;
            memcpy(m, bufs[k], lens[k]);
            int flips = 1 + (int)(rnd() % 4);
            for (int f = 0; f < flips; f++)
                m[rnd() % lens[k]] = (uint8_t)rnd();
            size_t len = (rnd() % 8 == 0) ? rnd() % lens[k] : lens[k];
            corrupt[k] += !fuzz_one(cs[k], m, len);
        }
        free(m);
        free(bufs[k]);
    }
    fprintf(stderr, "# mutations: epoch refused %d, node refused %d of 20000\n", corrupt[0],
            corrupt[1]);
    ck_assert_int_gt(corrupt[0], 1000); /* the decoder does refuse, not just survive */
    ck_assert_int_gt(corrupt[1], 1000);
    ec_epoch_free(ep);
    ec_node_rec_free(nr);
}
END_TEST

START_TEST(records_do_not_decode_as_each_other)
{
    ec_epoch_t *ep = sample_epoch(3, 2, 0);
    ec_node_rec_t *nr = sample_node();
    ec_job_status_t st = {EC_JOB_RUNNING, NULL, 3, 1700000000000LL, (char *)"n0", 1, NULL, 0};
    char *lines[] = {(char *)"boom"};
    ec_failure_t fl = {(char *)"n3", EC_FAILURE_EXITED, 1, 9, 1, 0, 4, 1700000000000LL,
                       (char *)"log/workerlog.1", 1, lines, NULL, NULL, 0};
    ec_worker_timing_t tm = {3, 17, (char *)"n2", 1, 1, 2, 3, 4, 5, NULL, 0, 0};
    const void *recs[NCODECS] = {nr, ep, &st, &fl, &tm};
    for (size_t i = 0; i < NCODECS; i++) {
        void *b;
        size_t l;
        ck_assert_int_eq(codecs[i].enc(recs[i], &b, &l, NULL), 0);
        for (size_t j = 0; j < NCODECS; j++) {
            void *rec = NULL;
            int rc = codecs[j].dec(b, l, &rec, NULL);
            if (i == j) {
                ck_assert_int_eq(rc, 0);
                codecs[j].fre(rec);
            } else {
                ck_assert_msg(rc == EC_ECORRUPT, "%s record decoded as %s", codecs[i].name,
                              codecs[j].name);
            }
        }
        free(b);
    }
    ec_epoch_free(ep);
    ec_node_rec_free(nr);
}
END_TEST

START_TEST(decode_argument_errors)
{
    ec_epoch_t *ep;
    ck_assert_int_eq(ec_epoch_decode(NULL, 5, NULL, &ep, NULL), EC_EINVAL);
    ck_assert_int_eq(ec_epoch_decode("x", 1, NULL, NULL, NULL), EC_EINVAL);
    ck_assert_int_eq(ec_epoch_decode(NULL, 0, NULL, &ep, NULL), EC_ECORRUPT); /* empty value */
    void *b;
    size_t l;
    ck_assert_int_eq(ec_epoch_encode(NULL, &b, &l, NULL), EC_EINVAL);
    ck_assert_ptr_null(b);
}
END_TEST

/* ---- rank and endpoint tables ------------------------------------------------- */

START_TEST(endpoint_table_in_rank_order)
{
    ec_epoch_t *ep = sample_epoch(3, 2, 0);
    ep->members[0].ports[0] = 7000;
    ep->members[0].ports[1] = 7001;
    ep->members[1].ports[0] = 8001; /* local rank order is the ports' order, not sorted */
    ep->members[1].ports[1] = 8000;
    char *s = NULL;
    ck_assert_int_eq(ec_epoch_endpoints(ep, ",", &s, NULL), 0);
    ck_assert_str_eq(s, "h0:7000,h0:7001,h1:8001,h1:8000,h2:6170,h2:6171");
    free(s);
    ck_assert_int_eq(ec_epoch_endpoints(ep, "\n", &s, NULL), 0);
    ck_assert_str_eq(s, "h0:7000\nh0:7001\nh1:8001\nh1:8000\nh2:6170\nh2:6171");
    free(s);
    ck_assert_int_eq(ec_epoch_endpoints(ep, NULL, &s, NULL), 0); /* default "," */
    ck_assert_str_eq(s, "h0:7000,h0:7001,h1:8001,h1:8000,h2:6170,h2:6171");
    free(s);

    char b[EC_ENDPOINT_MAX];
    ck_assert_int_eq(ec_epoch_rank0_endpoint(ep, b, sizeof b), 7);
    ck_assert_str_eq(b, "h0:7000");
    ck_assert_int_eq(ec_epoch_endpoint(ep, 1, 0, b, sizeof b), 7);
    ck_assert_str_eq(b, "h1:8001");
    ck_assert_int_eq(ec_epoch_endpoint(ep, 3, 0, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_epoch_endpoint(ep, 0, 2, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_epoch_endpoint(ep, -1, 0, b, sizeof b), EC_EINVAL);
    const char *addr;
    int port;
    ck_assert_int_eq(ec_epoch_master(ep, &addr, &port), 0);
    ck_assert_str_eq(addr, "h0");
    ck_assert_int_eq(port, 29500);
    ck_assert_int_eq(ec_epoch_find_member(ep, "n2"), 2);
    ck_assert_int_eq(ec_epoch_find_member(ep, "n9"), EC_ENOTFOUND);
    ec_epoch_free(ep);
}
END_TEST

/* The table agrees with Paddle's rule rank = M_id * N + N_id for many shapes,
 * after a round trip through etcd's bytes. */
START_TEST(endpoint_table_matches_rank_formula)
{
    int shapes[][2] = {{1, 1}, {1, 8}, {7, 1}, {4, 3}, {16, 8}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int M = shapes[s][0], N = shapes[s][1];
        ec_epoch_t *src = sample_epoch(M, N, 1);
        void *buf;
        size_t len;
        encode_ok_epoch(src, &buf, &len);
        ec_epoch_t *ep;
        ck_assert_int_eq(ec_epoch_decode(buf, len, NULL, &ep, NULL), 0);
        char *table;
        ck_assert_int_eq(ec_epoch_endpoints(ep, ",", &table, NULL), 0);
        char *save = NULL, *tok = strtok_r(table, ",", &save);
        for (int rank = 0; rank < M * N; rank++, tok = strtok_r(NULL, ",", &save)) {
            ck_assert_ptr_nonnull(tok);
            int m = rank / N, n = rank % N; /* independent of the library */
            char want[64];
            snprintf(want, sizeof want, "127.0.0.1:%d", 10000 + m * (N + 1) + n);
            ck_assert_str_eq(tok, want);
        }
        ck_assert_ptr_null(tok);
        free(table);
        free(buf);
        ec_epoch_free(ep);
        ec_epoch_free(src);
    }
}
END_TEST

START_TEST(ipv6_endpoints_bracketed)
{
    char b[EC_ENDPOINT_MAX];
    ck_assert_int_eq(ec_endpoint_format("fd00::1", 80, b, sizeof b), 12);
    ck_assert_str_eq(b, "[fd00::1]:80");
    ck_assert_int_eq(ec_endpoint_format("10.1.2.3", 65535, b, sizeof b), 14);
    ck_assert_str_eq(b, "10.1.2.3:65535");
    ck_assert_int_eq(ec_endpoint_format("h", 0, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_endpoint_format("h", 65536, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_endpoint_format("", 1, b, sizeof b), EC_EINVAL);
    ck_assert_int_eq(ec_endpoint_format("h", 1234, b, 6), EC_ETOOLARGE);
    ck_assert_int_eq(ec_endpoint_format("h", 1234, b, 7), 6);
    /* the longest host fits EC_ENDPOINT_MAX, bracketed */
    char host[EC_HOST_MAX + 1];
    memset(host, 'a', EC_HOST_MAX);
    host[EC_HOST_MAX] = 0;
    host[3] = ':';
    ck_assert_int_eq(ec_endpoint_format(host, 65535, b, sizeof b), EC_HOST_MAX + 8);
    host[3] = 'a';
    ck_assert_int_eq(ec_host_valid(host), 1);
    char over[EC_HOST_MAX + 2];
    memset(over, 'a', EC_HOST_MAX + 1);
    over[EC_HOST_MAX + 1] = 0;
    ck_assert_int_eq(ec_host_valid(over), 0);

    /* an IPv6 member: the stored rank 0 endpoint is the bracketed form */
    ec_epoch_t *ep = sample_epoch(2, 1, 0);
    free(ep->members[0].host);
    ep->members[0].host = strdup("fd00::7");
    void *buf;
    size_t len;
    encode_ok_epoch(ep, &buf, &len);
    ec_epoch_t *d;
    ck_assert_int_eq(ec_epoch_decode(buf, len, NULL, &d, NULL), 0);
    ck_assert_int_eq(ec_epoch_rank0_endpoint(d, b, sizeof b), 14);
    ck_assert_str_eq(b, "[fd00::7]:6170");
    const char *addr;
    ck_assert_int_eq(ec_epoch_master(d, &addr, NULL), 0);
    ck_assert_str_eq(addr, "fd00::7"); /* MASTER_ADDR takes the bare address */
    ec_epoch_free(d);
    free(buf);
    ec_epoch_free(ep);
}
END_TEST

/* ---- sizes ------------------------------------------------------------------- */

/* An epoch shaped like a real cluster: k8s-style node ids and IPv4 hosts
 * (typical), or 63-character pod names and 63-character host names (the
 * longest DNS label). */
static ec_epoch_t *big_epoch(int M, int N, int longnames)
{
    ec_epoch_t *ep = ec_epoch_new(M, N);
    ck_assert_ptr_nonnull(ep);
    ep->number = 123456;
    for (int i = 0; i < M; i++) {
        ec_member_t *m = &ep->members[i];
        char b[128];
        if (longnames) {
            snprintf(b, sizeof b, "%-57.57s-%05d", "trainjob-with-a-very-long-name-worker", i);
            for (char *p = b; *p; p++)
                if (*p == ' ')
                    *p = 'x';
            m->node_id = strdup(b);
            snprintf(b, sizeof b, "%-57.57s-%05d", "host-in-a-rack-with-a-very-long-host-name", i);
            for (char *p = b; *p; p++)
                if (*p == ' ')
                    *p = 'y';
            m->host = strdup(b);
        } else {
            snprintf(b, sizeof b, "trainjob-worker-%d", i);
            m->node_id = strdup(b);
            snprintf(b, sizeof b, "10.%d.%d.%d", (i >> 16) & 255, (i >> 8) & 255, i & 255);
            m->host = strdup(b);
        }
        for (int j = 0; j < N; j++)
            m->ports[j] = (uint16_t)(36000 + j);
        m->master_port = 29500;
        m->incarnation = (uint64_t)i * 3 + 1;
    }
    ep->reason = EC_REASON_SPARE_PROMOTED;
    ep->reason_detail = strdup("trainjob-worker-17 lease expired; trainjob-worker-4000 promoted");
    ep->leader_id = strdup(ep->members[0].node_id);
    ep->leader_rev = 987654321;
    ep->observed_at_ms = 1700000000000LL;
    ep->decided_at_ms = 1700000000100LL;
    ep->planner_us = 2345;
    ep->published_at_ms = 1700000000101LL;
    return ep;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

START_TEST(epoch_for_8192_ranks_under_1mib)
{
    /* {M, N, 63-char names}.  8192 nodes x 1 with 63-char names and hosts
     * would be ~1.2 MB: that shape is refused with EC_ETOOLARGE (see
     * oversized_epoch_refused), so only its typical form is required here. */
    int shapes[][3] = {{1024, 8, 0}, {1024, 8, 1}, {4096, 2, 0}, {4096, 2, 1}, {8192, 1, 0}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            int M = shapes[s][0], N = shapes[s][1], longnames = shapes[s][2];
            ec_epoch_t *ep = big_epoch(M, N, longnames);
            void *buf;
            size_t len;
            double t0 = now_s();
            encode_ok_epoch(ep, &buf, &len);
            double t1 = now_s();
            ec_epoch_t *d;
            ec_error_t err = {0};
            ck_assert_msg(ec_epoch_decode(buf, len, NULL, &d, &err) == 0, "%s", err.msg);
            double t2 = now_s();
            fprintf(stderr,
                    "# epoch %4d nodes x %d = %d ranks, %s names: %7zu bytes (%.1f%% of 1 MiB, "
                    "%.1f bytes/rank); encode %.2f ms, decode %.2f ms\n",
                    M, N, M * N, longnames ? "63-char" : "typical", len,
                    100.0 * (double)len / (1024 * 1024), (double)len / (M * N),
                    (t1 - t0) * 1e3, (t2 - t1) * 1e3);
            ck_assert_uint_lt(len, 1024 * 1024);
            assert_epoch_eq(ep, d);
            ec_epoch_free(d);
            free(buf);
            ec_epoch_free(ep);
        }
}
END_TEST

/* Issue 16: one epoch of 16,384 nodes x 8 ranks (131,072 ranks, typical
 * names) fits one etcd request; and the member-count ceiling of one epoch
 * (nproc 8), printed for the README. */
START_TEST(epoch_for_16384_nodes_x8_fits)
{
    ec_epoch_t *ep = big_epoch(16384, 8, 0);
    void *buf;
    size_t len;
    encode_ok_epoch(ep, &buf, &len);
    ck_assert_uint_le(len, EC_RECORD_MAX_BYTES);
    fprintf(stderr, "# epoch 16384 nodes x 8: %zu bytes (%.1f per node), limit %d\n", len,
            (double)len / 16384, EC_RECORD_MAX_BYTES);
    free(buf);
    ec_epoch_free(ep);
    for (int longnames = 0; longnames < 2; longnames++) {
        int lo = 1024, hi = 65536; /* lo fits, hi does not */
        while (hi - lo > 64) {
            int mid = (lo + hi) / 2;
            ec_epoch_t *e = big_epoch(mid, 8, longnames);
            void *b = NULL;
            size_t l;
            if (ec_epoch_encode(e, &b, &l, NULL) == 0)
                lo = mid;
            else
                hi = mid;
            free(b);
            ec_epoch_free(e);
        }
        fprintf(stderr, "# ceiling of one epoch, nproc 8, %s names: about %d nodes\n",
                longnames ? "63-char" : "typical", lo);
    }
}
END_TEST

/* ---- split epochs ------------------------------------------------------------ */

static void whole_bytes(const ec_epoch_t *ep, void **b, size_t *l)
{
    ec_error_t err = {0};
    ck_assert_msg(ec_epoch_encode_whole(ep, b, l, &err) == 0, "%s", err.msg);
}

static void assemble_ok(const ec_epoch_parts_t *p, const ec_epoch_t *want)
{
    ec_epoch_t *got = NULL;
    ec_error_t err = {0};
    int rc = ec_epoch_assemble(p->head, p->head_len, (const void *const *)p->chunk, p->chunk_len,
                               p->nchunks, "/j/epoch", &got, &err);
    ck_assert_msg(rc == 0, "assemble: %s", err.msg);
    void *a, *b;
    size_t al, bl;
    /* what a reader of the whole record gets (decoding fills defaults) */
    whole_bytes(want, &a, &al);
    ec_epoch_t *dec = NULL;
    ck_assert_int_eq(ec_epoch_decode(a, al, NULL, &dec, NULL), 0);
    free(a);
    whole_bytes(dec, &a, &al);
    ec_epoch_free(dec);
    whole_bytes(got, &b, &bl);
    ck_assert(al == bl && !memcmp(a, b, al));
    free(a);
    free(b);
    ec_epoch_free(got);
}

static void assemble_refused(const ec_epoch_parts_t *p, const void *const *chunk,
                             const size_t *len, const char *want)
{
    ec_epoch_t *got = NULL;
    ec_error_t err = {0};
    int rc = ec_epoch_assemble(p->head, p->head_len, chunk, len, p->nchunks, "/j/epoch", &got,
                               &err);
    ck_assert_int_eq(rc, EC_ECORRUPT);
    ck_assert_ptr_null(got);
    ck_assert_msg(strstr(err.msg, want), "'%s' not in: %s", want, err.msg);
}

START_TEST(split_epoch_round_trips_and_indexes_every_member)
{
    int cases[][2] = {{1, 1}, {7, 7}, {300, 256}, {5, 2}, {8, 3}, {9, 1}, {300, 16}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int N = cases[c][0], C = cases[c][1];
        ec_epoch_t *ep = big_epoch(N, 3, 0);
        ec_epoch_parts_t p;
        ec_error_t err = {0};
        ck_assert_msg(ec_epoch_split(ep, C, &p, &err) == 0, "%s", err.msg);
        ec_epoch_split_t info;
        int hi = ec_epoch_head_info(p.head, p.head_len, NULL, &info, &err);
        if (N <= C) {
            /* small: one whole record, exactly what ec_epoch_encode writes */
            ck_assert_int_eq(p.nchunks, 0);
            ck_assert_int_eq(hi, 0);
            void *b;
            size_t l;
            encode_ok_epoch(ep, &b, &l);
            ck_assert(l == p.head_len && !memcmp(b, p.head, l));
            free(b);
        } else {
            ck_assert_int_eq(hi, 1);
            ck_assert_int_eq(p.nchunks, (N + C - 1) / C);
            ck_assert_int_eq(info.nchunks, p.nchunks);
            ck_assert_int_eq(info.nmembers, N);
            ck_assert_int_eq(info.chunk_members, C);
            ck_assert_uint_eq(info.number, ep->number);
            /* the head alone is refused by the whole-record decoder, saying why */
            ec_epoch_t *h = NULL;
            ck_assert_int_eq(ec_epoch_decode(p.head, p.head_len, "/j/epoch", &h, &err), EC_ECORRUPT);
            ck_assert_msg(strstr(err.msg, "split") && strstr(err.msg, "ec_epoch_fetch"), "%s",
                          err.msg);
            /* every member in its bucket, with its M_id; a stranger in none */
            for (int i = 0; i < N; i++) {
                const char *id = ep->members[i].node_id;
                int b = (int)ec_epoch_index_bucket(id, info.nbuckets), m = -2;
                ck_assert_int_eq(ec_epoch_index_find(p.bucket[b], p.bucket_len[b],
                                                     info.index_digest[b], ep->number, b, id,
                                                     &m, &err), 1);
                ck_assert_int_eq(m, i);
            }
            int b = (int)ec_epoch_index_bucket("stranger", info.nbuckets), m = 0;
            ck_assert_int_eq(ec_epoch_index_find(p.bucket[b], p.bucket_len[b],
                                                 info.index_digest[b], ep->number, b, "stranger",
                                                 &m, &err), 0);
            ck_assert_int_eq(m, -1);
            /* another bucket's bytes are refused (digest) */
            if (info.nbuckets > 1)
                ck_assert_int_eq(ec_epoch_index_find(p.bucket[(b + 1) % info.nbuckets],
                                                     p.bucket_len[(b + 1) % info.nbuckets],
                                                     info.index_digest[b], ep->number, b,
                                                     "x", &m, &err), EC_ECORRUPT);
        }
        assemble_ok(&p, ep);
        ec_epoch_split_free(&info);
        ec_epoch_parts_free(&p);
        ec_epoch_free(ep);
    }
}
END_TEST

START_TEST(split_epoch_refuses_parts_that_are_not_its_own)
{
    ec_epoch_t *ep = big_epoch(10, 2, 0);
    ec_epoch_parts_t p, q;
    ck_assert_int_eq(ec_epoch_split(ep, 4, &p, NULL), 0);
    ck_assert_int_eq(p.nchunks, 3);
    const void *cv[3];
    size_t cl[3];
    /* swapped */
    cv[0] = p.chunk[1], cl[0] = p.chunk_len[1];
    cv[1] = p.chunk[0], cl[1] = p.chunk_len[0];
    cv[2] = p.chunk[2], cl[2] = p.chunk_len[2];
    assemble_refused(&p, cv, cl, "chunk 0 does not match");
    /* missing */
    cv[0] = p.chunk[0], cl[0] = p.chunk_len[0];
    cv[1] = NULL, cl[1] = 0;
    assemble_refused(&p, cv, cl, "chunk 1 is missing");
    /* one byte changed */
    uint8_t *flip = malloc(p.chunk_len[2]);
    memcpy(flip, p.chunk[2], p.chunk_len[2]);
    flip[p.chunk_len[2] / 2] ^= 0x10;
    cv[1] = p.chunk[1], cl[1] = p.chunk_len[1];
    cv[2] = flip;
    assemble_refused(&p, cv, cl, "chunk 2 does not match");
    free(flip);
    /* the next epoch's chunks (a newer head replaced them) */
    ep->number++;
    ck_assert_int_eq(ec_epoch_split(ep, 4, &q, NULL), 0);
    assemble_refused(&p, (const void *const *)q.chunk, q.chunk_len, "does not match");
    /* too few chunks given */
    ec_epoch_t *got = NULL;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_epoch_assemble(p.head, p.head_len, (const void *const *)p.chunk,
                                       p.chunk_len, 2, NULL, &got, &err), EC_ECORRUPT);
    ck_assert_msg(strstr(err.msg, "2 chunks given"), "%s", err.msg);
    /* bad sizes */
    ec_epoch_parts_t r;
    ck_assert_int_eq(ec_epoch_split(ep, 0, &r, NULL), EC_EINVAL);
    ec_epoch_parts_free(&p);
    ec_epoch_parts_free(&q);
    ec_epoch_free(ep);
}
END_TEST

/* The ceiling of one epoch is gone: 65,536 members (EC_MEMBERS_MAX) x
 * nproc 8 with 63-character names and hosts is ~8 MB whole, and every part
 * of it fits one etcd value; what one node reads is printed. */
START_TEST(split_epoch_has_no_ceiling_below_the_member_limit)
{
    for (int longnames = 0; longnames < 2; longnames++) {
        int sizes[] = {16384, EC_MEMBERS_MAX};
        for (int z = 0; z < 2; z++) {
            ec_epoch_t *ep = big_epoch(sizes[z], 8, longnames);
            void *w;
            size_t wl;
            whole_bytes(ep, &w, &wl);
            ec_epoch_parts_t p;
            ec_error_t err = {0};
            ck_assert_msg(ec_epoch_split(ep, EC_EPOCH_CHUNK_DEFAULT, &p, &err) == 0, "%s",
                          err.msg);
            size_t cmax = 0, bmax = 0;
            for (int k = 0; k < p.nchunks; k++)
                cmax = p.chunk_len[k] > cmax ? p.chunk_len[k] : cmax;
            for (int b = 0; b < p.nbuckets; b++)
                bmax = p.bucket_len[b] > bmax ? p.bucket_len[b] : bmax;
            ck_assert_uint_le(p.head_len, EC_RECORD_MAX_BYTES);
            ck_assert_uint_le(cmax, EC_RECORD_MAX_BYTES);
            ck_assert_uint_le(bmax, EC_RECORD_MAX_BYTES);
            if (z == 1 && longnames)
                ck_assert_uint_gt(wl, EC_RECORD_MAX_BYTES); /* would not fit whole */
            fprintf(stderr, "# %d nodes x 8, %s names: whole %zu bytes; split in %d chunks "
                    "(largest %zu) + %d index buckets (largest %zu), head %zu; one node reads "
                    "head + its bucket + its chunk <= %zu bytes\n", sizes[z],
                    longnames ? "63-char" : "typical", wl, p.nchunks, cmax, p.nbuckets, bmax,
                    p.head_len, p.head_len + cmax + bmax);
            assemble_ok(&p, ep);
            free(w);
            ec_epoch_parts_free(&p);
            ec_epoch_free(ep);
        }
    }
}
END_TEST

START_TEST(oversized_epoch_refused)
{
    /* 4096 members with 253-character ids and hosts: ~2 MiB, above the limit */
    ec_epoch_t *ep = ec_epoch_new(4096, 2);
    for (int i = 0; i < 4096; i++) {
        char b[EC_NODE_ID_MAX + 1];
        memset(b, 'n', EC_NODE_ID_MAX);
        snprintf(b + EC_NODE_ID_MAX - 5, 6, "%05u", (unsigned)i % 100000u);
        ep->members[i].node_id = strdup(b);
        b[0] = 'h';
        ep->members[i].host = strdup(b);
        ep->members[i].ports[0] = 1;
        ep->members[i].ports[1] = 2;
        ep->members[i].master_port = 3;
    }
    ep->number = 1;
    ep->reason = EC_REASON_START;
    ep->leader_id = strdup("n");
    ep->leader_rev = 1;
    void *buf = (void *)0x1;
    size_t len;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_epoch_encode(ep, &buf, &len, &err), EC_ETOOLARGE);
    ck_assert_ptr_null(buf);
    ck_assert_ptr_nonnull(strstr(err.msg, "limit"));
    fprintf(stderr, "# oversized: %s\n", err.msg);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(node_record_size)
{
    ec_node_rec_t *r = ec_node_rec_new(8, 8);
    r->node_id = strdup("trainjob-worker-1023");
    r->host = strdup("10.0.3.255");
    for (int i = 0; i < 8; i++) {
        r->ports[i] = (uint16_t)(36000 + i);
        char d[64];
        snprintf(d, sizeof d, "GPU-8f6c3a2e-1b2d-4c5e-9f00-%012d", i);
        r->device_ids[i] = strdup(d);
    }
    r->master_port = 29500;
    r->state = EC_NODE_READY;
    r->agent_version = strdup("ecoord 0.1.0");
    r->registered_at_ms = 1700000000000LL;
    void *buf;
    size_t len;
    encode_ok_node(r, &buf, &len);
    fprintf(stderr, "# node record, 8 procs with GPU UUIDs: %zu bytes\n", len);
    ck_assert_uint_lt(len, 1024);
    free(buf);
    ec_node_rec_free(r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("records");
    TCase *rt = tcase_create("round_trip");
    tcase_add_test(rt, node_round_trip);
    tcase_add_test(rt, node_boot_round_trips);
    tcase_add_test(rt, epoch_round_trip);
    tcase_add_test(rt, epoch_dup_is_deep_and_equal);
    tcase_add_test(rt, status_round_trip);
    tcase_add_test(rt, failure_round_trip);
    tcase_add_test(rt, failure_message_round_trips);
    tcase_add_test(rt, epoch_np_round_trips);
    tcase_add_test(rt, worker_timing_round_trip);
    tcase_add_test(rt, hang_verdict_round_trip_and_refusals);
    tcase_add_test(rt, free_accepts_null);
    tcase_add_test(rt, enum_names);
    suite_add_tcase(s, rt);

    TCase *val = tcase_create("validation");
    tcase_add_test(val, node_encode_refuses_invalid);
    tcase_add_test(val, epoch_encode_refuses_invalid);
    tcase_add_test(val, other_records_refuse_invalid);
    tcase_add_test(val, epoch_decode_refuses_crafted);
    tcase_add_test(val, node_decode_refuses_crafted);
    tcase_add_test(val, other_decode_refuses_crafted);
    tcase_add_test(val, epoch_message_names_key_and_field);
    tcase_add_test(val, truncated_records_refused);
    tcase_add_test(val, random_garbage_never_crashes);
    tcase_add_test(val, mutated_records_never_crash);
    tcase_add_test(val, records_do_not_decode_as_each_other);
    tcase_add_test(val, decode_argument_errors);
    tcase_set_timeout(val, (double)ec_test_ms(60000) / 1000.0);
    suite_add_tcase(s, val);

    TCase *tab = tcase_create("tables");
    tcase_add_test(tab, endpoint_table_in_rank_order);
    tcase_add_test(tab, endpoint_table_matches_rank_formula);
    tcase_add_test(tab, ipv6_endpoints_bracketed);
    suite_add_tcase(s, tab);

    TCase *sz = tcase_create("sizes");
    tcase_add_test(sz, epoch_for_8192_ranks_under_1mib);
    tcase_add_test(sz, epoch_for_16384_nodes_x8_fits);
    tcase_add_test(sz, oversized_epoch_refused);
    tcase_add_test(sz, split_epoch_round_trips_and_indexes_every_member);
    tcase_add_test(sz, split_epoch_refuses_parts_that_are_not_its_own);
    tcase_add_test(sz, split_epoch_has_no_ceiling_below_the_member_limit);
    tcase_add_test(sz, node_record_size);
    tcase_set_timeout(sz, (double)ec_test_ms(60000) / 1000.0);
    suite_add_tcase(s, sz);
    return s;
}

EC_CHECK_MAIN(suite)
