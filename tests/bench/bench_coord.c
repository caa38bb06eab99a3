/* Coordination-core benchmark: how long a membership change takes to become
 * an epoch that every node has seen, with real node coordinators (one
 * ec_etcd_t client each, so they behave like separate agents) against an
 * embedded etcd on loopback, all in this one process.  Budget (issue): <= 20
 * ms p50 for 8 nodes when no waiting window applies.  Also the epoch record's
 * size and encode/decode time at 8192 ranks (budget: under 1 MiB).
 *
 * A benchmark, not a test: it prints figures and exits 0 (1 only when it
 * cannot run at all: no etcd, no client).  A repetition whose wait passes
 * its deadline is counted and reported, never hung on.
 *
 *   bench_coord [repetitions] [nodes] [nproc]      (default 30 8 8)
 *   ECOORD_BENCH_ETCD=host:port  use that etcd instead of an embedded one
 *
 * Scenarios (np=1:N, elastic_timeout one hour, so only the rules that need no
 * waiting window can publish; replace_wait 0):
 *   max      N-1 nodes registered and waiting; the N-th registers.  t0 is
 *            taken just before ec_node_start() is called for it, so t0
 *            includes its lease grant; the registration txn is inside the
 *            call.  New epoch: the first, with all N.
 *   leave    a formed job of N; one non-leader calls ec_node_leave() (its
 *            record is rewritten with state leaving, then its lease is
 *            revoked).  t0 is taken just before ec_node_leave() is called.
 *            New epoch: the N-1 others.
 *   standby  N members and one standby; one non-leader member leaves as
 *            above.  New epoch: the standby in the leaver's place.
 * "done" is the moment the last node of the new epoch had its on_epoch
 * called with it (CLOCK_MONOTONIC, in this process).  A watcher of our own on
 * a separate client timestamps when the first change the trigger makes to its
 * node key (the registration; for a leave, the put of state leaving, which
 * is what the leader acts on, before the revoke) is visible in etcd ("change
 * in etcd": the commit plus one watch hop, so a slight overestimate); "done
 * from etcd" subtracts that, which is the figure the budget speaks of.
 *
 * Where the time goes comes from the epoch record's own fields, which the
 * leader fills from CLOCK_REALTIME in whole milliseconds (so each milestone
 * is +-0.5 ms): observed_at (the leader's watch applied the last change),
 * decided_at (after the planner ran; includes waking the leader's loop),
 * published_at (the record built, just before its txn is sent: it does NOT
 * include the txn), planner_us (the planner alone).  "txn" is the epoch
 * write's round trip as the leader logs it ("+published epoch N (rule R, txn T ms)").
 *
 * "last node to see it" names the role of the slowest node.  In max it is
 * sometimes the registrant itself, up to ~100 ms late: ec_node_start() lists
 * the job and then opens its watch from the listing's revision + 1; when the
 * epoch its own registration triggered is committed in between, etcd serves
 * that watch as an "unsynced" watcher, caught up by a loop that runs every
 * 100 ms (syncWatchersLoop in etcd's watchable_store.go).
 *
 * Each repetition uses a fresh job id, so etcd is started once; the nodes of
 * a repetition are stopped and their leases revoked and keys deleted before
 * the next one.  Before the trigger, the job is let settle for SETTLE_MS
 * after the last observable condition (epoch seen everywhere, the leader's
 * "+wait: steady" event): not for correctness, only so the measured change
 * is the one thing in flight. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "embed.h"
#include "etcd.h"
#include "keys.h"
#include "log.h"
#include "node.h"
#include "records.h"

#define PREFIX "/ecbench"
#define MAXN 64             /* nodes per job (the standby scenario adds one) */
#define WAIT_MS 10000       /* deadline of every wait */
#define SETTLE_MS 50
#define NSTAGES 9

enum { SC_MAX, SC_LEAVE, SC_STANDBY, NSC };
static const char *const sc_name[NSC] = {"max", "leave", "standby"};

struct bench;

typedef struct slot {
    struct bench *b;
    int idx;
    char id[64];
    uint16_t ports[EC_NPROC_MAX];
    ec_etcd_t *c;     /* this node's own client, reused across repetitions */
    ec_node_t *node;  /* main thread only */
    /* under b->lock: the newest epoch this node's on_epoch was given */
    uint64_t seen_num;
    int seen_nmem;
    bool seen_mem[MAXN + 1];
    int64_t seen_mono_us;
} slot_t;

typedef struct bench {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int n, nproc;
    slot_t slots[MAXN + 1];
    /* under lock, reset each repetition */
    int leader;              /* slot that logged "+leader", -1 none */
    bool steady, standby_noticed;
    int64_t txn_ms;          /* last "+published epoch ... txn T ms", -1 none */
    ec_epoch_t last;         /* timing fields of the newest epoch seen */
    char reason[32];
    char watch_key[EC_KEY_MAX];
    int64_t put_mono_us, del_mono_us;
    int warnings;
} bench_t;

/* One repetition's figures, ms from t0 unless said. */
enum { ST_CALL, ST_ETCD, ST_OBS, ST_DEC, ST_BUILT, ST_FIRST, ST_DONE, ST_DONE_ETCD, ST_DEL };
static const char *const st_name[NSTAGES] = {
    "API call returned", "change in etcd", "leader observed", "leader decided",
    "epoch built", "first node saw epoch", "all nodes saw epoch", "DONE FROM ETCD (budget)",
    "lease revoke in etcd"};

typedef struct {
    double st[NSTAGES];
    double planner_ms, txn_ms;
    char reason[32];
    char slowest[16]; /* role of the last node to see the epoch */
} sample_t;

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A pause that is not a wait for a condition (see SETTLE_MS). */
static void pause_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- callbacks (coordinator, watch and caller threads) -------------------- */

static void on_log(ec_log_level_t level, const char *msg, void *arg)
{
    bench_t *b = arg;
    pthread_mutex_lock(&b->lock);
    int w = b->warnings++;
    pthread_mutex_unlock(&b->lock);
    if (w < 20)
        fprintf(stderr, "bench_coord: [%s] %s\n", ec_log_level_name(level), msg);
}

static int slot_of(bench_t *b, const char *id)
{
    for (int i = 0; i <= b->n; i++)
        if (!strcmp(b->slots[i].id, id))
            return i;
    return -1;
}

static void on_epoch(const ec_epoch_t *ep, void *arg)
{
    slot_t *s = arg;
    bench_t *b = s->b;
    int64_t m = mono_us();
    pthread_mutex_lock(&b->lock);
    s->seen_num = ep->number;
    s->seen_nmem = ep->nmembers;
    memset(s->seen_mem, 0, sizeof(s->seen_mem));
    for (int i = 0; i < ep->nmembers; i++) {
        int k = slot_of(b, ep->members[i].node_id);
        if (k >= 0)
            s->seen_mem[k] = true;
    }
    s->seen_mono_us = m;
    if (ep->number > b->last.number) {
        b->last.number = ep->number;
        b->last.observed_at_ms = ep->observed_at_ms;
        b->last.decided_at_ms = ep->decided_at_ms;
        b->last.published_at_ms = ep->published_at_ms;
        b->last.planner_us = ep->planner_us;
        snprintf(b->reason, sizeof(b->reason), "%s", ec_epoch_reason_name(ep->reason));
    }
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

static void on_event(const char *ev, void *arg)
{
    slot_t *s = arg;
    bench_t *b = s->b;
    pthread_mutex_lock(&b->lock);
    const char *t;
    if (!strncmp(ev, "+leader ", 8))
        b->leader = s->idx;
    else if (!strncmp(ev, "+wait: steady: 1 standby", 24))
        b->standby_noticed = true;
    else if (!strncmp(ev, "+wait: steady", 13))
        b->steady = true;
    if (!strncmp(ev, "+published epoch", 16) && (t = strstr(ev, "txn ")))
        b->txn_ms = strtoll(t + 4, NULL, 10);
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

/* Our own watcher: when does the trigger's change to its node key show up? */
static void on_watch(const ec_watch_event_t *ev, void *arg)
{
    bench_t *b = arg;
    if (ev->type != EC_WATCH_PUT && ev->type != EC_WATCH_DELETE)
        return;
    int64_t m = mono_us();
    pthread_mutex_lock(&b->lock);
    if (b->watch_key[0] && !strcmp(ev->kv->key, b->watch_key)) {
        if (ev->type == EC_WATCH_PUT && !b->put_mono_us)
            b->put_mono_us = m;
        else if (ev->type == EC_WATCH_DELETE && !b->del_mono_us)
            b->del_mono_us = m;
    }
    pthread_mutex_unlock(&b->lock);
}

/* ---- waiting ---------------------------------------------------------------- */

typedef bool (*pred_fn)(bench_t *b, const void *arg);

/* Wait until pred holds (lock held while it is evaluated) or ms pass. */
static bool wait_for(bench_t *b, pred_fn pred, const void *arg, int ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&b->lock);
    bool ok;
    while (!(ok = pred(b, arg)))
        if (pthread_cond_timedwait(&b->cond, &b->lock, &dl) != 0 && !(ok = pred(b, arg)))
            break;
    pthread_mutex_unlock(&b->lock);
    return ok;
}

/* Every slot in want[] has been given an epoch whose members are exactly want[]. */
static bool all_saw(bench_t *b, const void *arg)
{
    const bool *want = arg;
    int nwant = 0;
    for (int i = 0; i <= b->n; i++)
        nwant += want[i];
    for (int i = 0; i <= b->n; i++) {
        if (!want[i])
            continue;
        const slot_t *s = &b->slots[i];
        if (s->seen_nmem != nwant)
            return false;
        for (int j = 0; j <= b->n; j++)
            if (s->seen_mem[j] != want[j])
                return false;
    }
    return true;
}

static bool is_steady(bench_t *b, const void *arg)
{
    (void)arg;
    return b->steady && b->leader >= 0;
}

static bool standby_noticed(bench_t *b, const void *arg)
{
    (void)arg;
    return b->standby_noticed;
}

/* ---- one repetition ------------------------------------------------------- */

static int slot_start(bench_t *b, int i, const char *job, ec_error_t *err)
{
    slot_t *s = &b->slots[i];
    ec_node_opts_t o = EC_NODE_OPTS_INIT;
    o.etcd = s->c;
    o.etcd_prefix = PREFIX;
    o.job_id = job;
    o.node_id = s->id;
    o.host = "127.0.0.1";
    o.nproc = b->nproc;
    o.ports = s->ports;
    o.master_port = (uint16_t)(s->ports[0] - 1);
    o.agent_version = "bench";
    o.np_min = 1;
    o.np_max = b->n;
    o.elastic_timeout_ms = 3600 * 1000;
    o.replace_wait_ms = 0;
    o.lease_ttl_s = 10;
    o.on_epoch = on_epoch;
    o.on_event = on_event;
    o.arg = s;
    s->node = ec_node_start(&o, err);
    return s->node ? 0 : err->code;
}

/* Stop every node, then revoke their leases (none is left running to react)
 * and delete what the job left (epochs and status are not leased). */
static void job_cleanup(bench_t *b, ec_etcd_t *c, const char *job)
{
    int64_t leases[MAXN + 1] = {0};
    pthread_mutex_lock(&b->lock);
    b->watch_key[0] = '\0';
    pthread_mutex_unlock(&b->lock);
    for (int i = 0; i <= b->n; i++) {
        if (!b->slots[i].node)
            continue;
        leases[i] = ec_node_lease(b->slots[i].node);
        ec_node_stop(b->slots[i].node);
        b->slots[i].node = NULL;
    }
    for (int i = 0; i <= b->n; i++)
        if (leases[i])
            ec_etcd_lease_revoke(c, leases[i], NULL); /* a leaver's is gone already */
    ec_keys_t k;
    if (ec_keys_init(&k, PREFIX, job, NULL) == 0)
        ec_etcd_delete(c, ec_keys_root(&k), true, NULL, NULL);
}

/* Run scenario sc once.  Returns 1 with *out filled, 0 on a timed-out wait
 * (why in *what), -1 when a node could not start (err). */
static int run_rep(bench_t *b, ec_etcd_t *c, int sc, int rep, sample_t *out, const char **what,
                   ec_error_t *err)
{
    int n = b->n, rc = -1;
    char job[EC_JOB_ID_MAX];
    snprintf(job, sizeof(job), "bench-%s-%d-%d", sc_name[sc], (int)getpid(), rep);
    pthread_mutex_lock(&b->lock);
    b->leader = -1;
    b->steady = b->standby_noticed = false;
    b->txn_ms = -1;
    memset(&b->last, 0, sizeof(b->last));
    b->reason[0] = '\0';
    b->watch_key[0] = '\0';
    b->put_mono_us = b->del_mono_us = 0;
    for (int i = 0; i <= n; i++) {
        b->slots[i].seen_num = 0;
        b->slots[i].seen_nmem = 0;
        memset(b->slots[i].seen_mem, 0, sizeof(b->slots[i].seen_mem));
    }
    pthread_mutex_unlock(&b->lock);

    bool want[MAXN + 1] = {0};
    for (int i = 0; i < n; i++)
        want[i] = true;
    int trigger = n - 1; /* slot that registers (max) or leaves */
    if (sc == SC_MAX) {
        for (int i = 0; i < n - 1; i++)
            if (slot_start(b, i, job, err) < 0)
                goto out;
        /* Nothing observable says the leader has planned the last of these
         * (it waits silently for elastic_timeout); settle longer. */
        pause_ms(2 * SETTLE_MS);
    } else {
        for (int i = 0; i < n; i++)
            if (slot_start(b, i, job, err) < 0)
                goto out;
        rc = 0;
        *what = "first epoch";
        if (!wait_for(b, all_saw, want, WAIT_MS))
            goto out;
        *what = "leader's +wait: steady";
        if (!wait_for(b, is_steady, NULL, WAIT_MS))
            goto out;
        if (sc == SC_STANDBY) {
            rc = -1;
            if (slot_start(b, n, job, err) < 0)
                goto out;
            rc = 0;
            *what = "leader's +wait: steady: 1 standby";
            if (!wait_for(b, standby_noticed, NULL, WAIT_MS))
                goto out;
        }
        pause_ms(SETTLE_MS);
        pthread_mutex_lock(&b->lock);
        trigger = b->leader == n - 1 ? n - 2 : n - 1;
        pthread_mutex_unlock(&b->lock);
        want[trigger] = false;
        if (sc == SC_STANDBY)
            want[n] = true;
    }

    ec_keys_t k;
    ec_keys_init(&k, PREFIX, job, NULL);
    pthread_mutex_lock(&b->lock);
    ec_key_node(&k, b->slots[trigger].id, b->watch_key, sizeof(b->watch_key));
    pthread_mutex_unlock(&b->lock);
    int64_t t0 = mono_us(), t0w = wall_us();
    if (sc == SC_MAX) {
        rc = -1;
        if (slot_start(b, trigger, job, err) < 0)
            goto out;
    } else if (ec_node_leave(b->slots[trigger].node, err) < 0) {
        rc = -1;
        goto out;
    }
    int64_t t_ret = mono_us();
    rc = 0;
    *what = "new epoch seen by every node";
    if (!wait_for(b, all_saw, want, WAIT_MS))
        goto out;

    pthread_mutex_lock(&b->lock);
    int64_t first = INT64_MAX, last = 0;
    int slowest = -1;
    for (int i = 0; i <= n; i++) {
        if (!want[i])
            continue;
        if (b->slots[i].seen_mono_us < first)
            first = b->slots[i].seen_mono_us;
        if (b->slots[i].seen_mono_us > last) {
            last = b->slots[i].seen_mono_us;
            slowest = i;
        }
    }
    /* The record's fields are whole ms (truncated): take each at the middle
     * of its millisecond so the milestones are unbiased, +-0.5 ms. */
    double t0w_ms = t0w / 1000.0 - 0.5;
    memset(out, 0, sizeof(*out));
    out->st[ST_CALL] = (t_ret - t0) / 1000.0;
    out->st[ST_ETCD] = b->put_mono_us ? (b->put_mono_us - t0) / 1000.0 : -1;
    out->st[ST_OBS] = b->last.observed_at_ms - t0w_ms;
    out->st[ST_DEC] = b->last.decided_at_ms - t0w_ms;
    out->st[ST_BUILT] = b->last.published_at_ms - t0w_ms;
    out->st[ST_FIRST] = (first - t0) / 1000.0;
    out->st[ST_DONE] = (last - t0) / 1000.0;
    out->st[ST_DONE_ETCD] = b->put_mono_us ? (last - b->put_mono_us) / 1000.0 : -1;
    out->st[ST_DEL] = b->del_mono_us ? (b->del_mono_us - t0) / 1000.0 : -1;
    out->planner_ms = b->last.planner_us / 1000.0;
    out->txn_ms = (double)b->txn_ms;
    snprintf(out->reason, sizeof(out->reason), "%s", b->reason);
    snprintf(out->slowest, sizeof(out->slowest), "%s",
             slowest == b->leader ? "leader"
             : slowest == trigger ? "registrant"
             : slowest == n       ? "promoted"
                                  : "other");
    pthread_mutex_unlock(&b->lock);
    rc = 1;
out:
    job_cleanup(b, c, job);
    return rc;
}

/* ---- reporting ------------------------------------------------------------ */

static void pct(double *v, int n, double *p50, double *p90, double *max)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    *p50 = v[n / 2];
    *p90 = v[(n * 9) / 10];
    *max = v[n - 1];
}

static void report_row(const char *name, const sample_t *s, int n, size_t off, int stage)
{
    double *v = calloc((size_t)n, sizeof(double));
    int k = 0;
    for (int i = 0; i < n; i++) {
        double x = stage >= 0 ? s[i].st[stage] : *(const double *)((const char *)&s[i] + off);
        if (x >= 0)
            v[k++] = x;
    }
    if (k) {
        double p50, p90, max;
        pct(v, k, &p50, &p90, &max);
        printf("  %-28s %8.2f %8.2f %8.2f\n", name, p50, p90, max);
    }
    free(v);
}

/* Count the distinct values of the string field at off. */
static void tally(const char *title, const sample_t *s, int n, size_t off)
{
    char seen[8][32];
    int cnt[8] = {0}, ns = 0;
    for (int i = 0; i < n; i++) {
        const char *v = (const char *)&s[i] + off;
        int j;
        for (j = 0; j < ns && strcmp(seen[j], v); j++)
            ;
        if (j == ns && ns < 8)
            snprintf(seen[ns++], sizeof(seen[0]), "%s", v);
        if (j < ns)
            cnt[j]++;
    }
    printf("  %s", title);
    for (int j = 0; j < ns; j++)
        printf(" %s x%d", seen[j], cnt[j]);
    printf("\n");
}

static void report(int sc, const sample_t *s, int n, int timeouts, const char *timeout_what)
{
    printf("\n[%s] %d repetitions measured, %d timed out", sc_name[sc], n, timeouts);
    if (timeouts)
        printf(" (last waiting for: %s)", timeout_what);
    printf("\n");
    if (!n)
        return;
    printf("  %-28s %8s %8s %8s   (ms from t0)\n", "milestone", "p50", "p90", "max");
    static const int order[] = {ST_CALL, ST_ETCD, ST_DEL, ST_OBS, ST_DEC, ST_BUILT, ST_FIRST, ST_DONE};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        if (sc == SC_MAX && order[i] == ST_DEL)
            continue;
        report_row(st_name[order[i]], s, n, 0, order[i]);
    }
    printf("  %-28s %8s %8s %8s   (ms, durations)\n", "", "", "", "");
    report_row(st_name[ST_DONE_ETCD], s, n, 0, ST_DONE_ETCD);
    report_row("planner (planner_us)", s, n, offsetof(sample_t, planner_ms), -1);
    report_row("leader's epoch txn", s, n, offsetof(sample_t, txn_ms), -1);
    tally("epoch reason:", s, n, offsetof(sample_t, reason));
    tally("last node to see it:", s, n, offsetof(sample_t, slowest));
}

/* ---- epoch record sizes ----------------------------------------------------- */

static void record_sizes(void)
{
    static const int shapes[][2] = {{1024, 8}, {4096, 2}, {8192, 1}, {4096, 8}};
    printf("\nepoch record (ec_epoch_encode), ids \"trainjob-worker-NNNN\", IPv4 hosts; "
           "budget < %d bytes\n", EC_RECORD_MAX_BYTES);
    printf("  %-12s %7s %10s %7s %12s %12s\n", "members x N", "ranks", "bytes", "of 1MiB",
           "encode p50", "decode p50");
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int nm = shapes[s][0], np = shapes[s][1];
        ec_epoch_t *ep = ec_epoch_new(nm, np);
        if (!ep) {
            printf("  %5dx%-6d out of memory\n", nm, np);
            continue;
        }
        ep->number = 42;
        ep->reason = EC_REASON_SPARE_PROMOTED;
        ep->reason_detail = strdup("trainjob-worker-0007 lost; trainjob-worker-8191 promoted");
        ep->leader_id = strdup("trainjob-worker-0000");
        ep->leader_rev = 123456;
        int64_t now = wall_us() / 1000;
        ep->observed_at_ms = now;
        ep->decided_at_ms = now + 1;
        ep->planner_us = 1234;
        ep->published_at_ms = now + 1;
        for (int i = 0; i < nm; i++) {
            ec_member_t *m = &ep->members[i];
            char buf[64];
            snprintf(buf, sizeof(buf), "trainjob-worker-%04d", i);
            m->node_id = strdup(buf);
            snprintf(buf, sizeof(buf), "10.%d.%d.%d", 20 + i / 65536, (i / 256) % 256, i % 256);
            m->host = strdup(buf);
            for (int j = 0; j < np; j++)
                m->ports[j] = (uint16_t)(29500 + j);
            m->master_port = 29400;
            m->incarnation = 1 + (uint64_t)(i % 3);
        }
        ec_error_t err = {0};
        enum { ITER = 21 };
        double enc[ITER], dec[ITER];
        size_t len = 0;
        int rc = 0;
        for (int it = 0; it < ITER && rc == 0; it++) {
            void *buf = NULL;
            int64_t a = mono_us();
            rc = ec_epoch_encode(ep, &buf, &len, &err);
            int64_t b = mono_us();
            ec_epoch_t *back = NULL;
            if (rc == 0)
                rc = ec_epoch_decode(buf, len, "epoch", &back, &err);
            int64_t c = mono_us();
            enc[it] = (b - a) / 1000.0;
            dec[it] = (c - b) / 1000.0;
            ec_epoch_free(back);
            free(buf);
        }
        if (rc < 0) {
            printf("  %5dx%-6d %7d  %s\n", nm, np, nm * np, err.msg);
        } else {
            double p50e, p50d, x, y;
            pct(enc, ITER, &p50e, &x, &y);
            pct(dec, ITER, &p50d, &x, &y);
            printf("  %5dx%-6d %7d %10zu %6.1f%% %9.3f ms %9.3f ms%s\n", nm, np, nm * np, len,
                   100.0 * (double)len / EC_RECORD_MAX_BYTES, p50e, p50d,
                   shapes[s][0] == 4096 && np == 8 ? "  (planner-bench size)" : "");
        }
        ec_epoch_free(ep);
    }
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 30;
    int n = argc > 2 ? atoi(argv[2]) : 8;
    int nproc = argc > 3 ? atoi(argv[3]) : 8;
    if (reps < 1 || n < 2 || n > MAXN || nproc < 1 || nproc > 64) {
        fprintf(stderr, "usage: bench_coord [repetitions>=1] [nodes 2..%d] [nproc 1..64]\n", MAXN);
        return 2;
    }
    static bench_t b;
    b.n = n;
    b.nproc = nproc;
    pthread_mutex_init(&b.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b.cond, &ca);
    pthread_condattr_destroy(&ca);
    ec_log_set_sink(on_log, &b, EC_LOG_WARN);

    int status = 1;
    ec_error_t err = {0};
    ec_embed_t *e = NULL;
    ec_etcd_t *c = NULL;
    ec_watch_t *w = NULL;
    const char *ep = getenv("ECOORD_BENCH_ETCD");
    if (!ep) {
        ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
        if (!(e = ec_embed_start(&eo, &err))) {
            fprintf(stderr, "bench_coord: %s\n", err.msg);
            return 1;
        }
        ep = ec_embed_endpoint(e);
    }
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ep;
    if (!(c = ec_etcd_create(&o, &err)))
        goto error;
    for (int i = 0; i <= n; i++) {
        slot_t *s = &b.slots[i];
        s->b = &b;
        s->idx = i;
        snprintf(s->id, sizeof(s->id), "trainjob-worker-%04d", i);
        for (int j = 0; j < nproc; j++)
            s->ports[j] = (uint16_t)(20001 + i * (nproc + 1) + j);
        if (!(s->c = ec_etcd_create(&o, &err)))
            goto error;
    }
    if (!(w = ec_watch_start(c, PREFIX "/", true, 0, on_watch, &b, &err)))
        goto error;

    printf("coordination-core benchmark: %d nodes x %d ranks, %d repetitions per scenario, "
           "etcd at %s (loopback)\n", n, nproc, reps, ep);
    printf("np=1:%d, elastic_timeout 1 h (only no-wait rules publish), replace_wait 0, "
           "one etcd client per node; record-field milestones are +-0.5 ms\n", n);

    /* Floor: one write's round trip through etcd (raft + WAL fsync). */
    {
        enum { K = 101 };
        double v[K], p50, p90, max;
        for (int i = 0; i < K; i++) {
            int64_t a = mono_us();
            ec_etcd_put(c, PREFIX "/floor", "x", 1, 0, NULL, NULL);
            v[i] = (mono_us() - a) / 1000.0;
        }
        ec_etcd_delete(c, PREFIX "/floor", false, NULL, NULL);
        pct(v, K, &p50, &p90, &max);
        printf("floor: etcd put round trip p50 %.2f ms, p90 %.2f ms, max %.2f ms (%d puts)\n",
               p50, p90, max, K);
    }

    sample_t *samples = calloc((size_t)reps, sizeof(sample_t));
    if (!samples)
        goto error;
    int64_t t_all = mono_us();
    for (int sc = 0; sc < NSC; sc++) {
        int got = 0, timeouts = 0;
        const char *what = "";
        int64_t t_sc = mono_us();
        for (int r = 0; r < reps; r++) {
            const char *w_what = "";
            int rc = run_rep(&b, c, sc, r, &samples[got], &w_what, &err);
            if (rc < 0) {
                fprintf(stderr, "bench_coord: [%s] repetition %d: %s\n", sc_name[sc], r, err.msg);
                err = (ec_error_t){0};
                timeouts++;
                what = "a node to start";
            } else if (rc == 0) {
                timeouts++;
                what = w_what;
            } else {
                got++;
            }
        }
        report(sc, samples, got, timeouts, what);
        printf("  (scenario wall time %.1f s)\n", (mono_us() - t_sc) / 1e6);
    }
    free(samples);
    printf("\nscenarios took %.1f s; see bench_planner for the 4096x8 planner budget\n",
           (mono_us() - t_all) / 1e6);
    record_sizes();
    pthread_mutex_lock(&b.lock);
    if (b.warnings)
        printf("\n%d coordinator warnings/errors were logged (first 20 on stderr)\n", b.warnings);
    pthread_mutex_unlock(&b.lock);
    status = 0;
    goto done;
error:
    fprintf(stderr, "bench_coord: %s\n", err.msg);
done:
    ec_watch_stop(w);
    for (int i = 0; i <= n; i++)
        ec_etcd_destroy(b.slots[i].c);
    ec_etcd_destroy(c);
    ec_embed_stop(e);
    return status;
}
