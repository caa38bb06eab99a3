/* The worker library rebuilds communicators in place: with
 * `ecoord launch --rebuild=inprocess` agents on loopback running the linreg
 * example over Gloo, after each kind of membership change (a training
 * process killed, a node stopped with SIGTERM, a node added, a node killed,
 * a node gone silent) the survivors' next allreduce counts the new world
 * size, every rank holds the same parameters, the loss after the change is
 * not above the loss before it, the training step never goes back (state
 * comes from the peers, also for a joiner and a restarted process), and no
 * process restarted but the one killed.  A collective blocked on a silent
 * peer is released by the epoch change, long before its own timeout.  Every
 * member records its per-epoch timings in etcd.  The library's own entry
 * point refuses bad options and gives up at its deadline when no epoch comes.
 * ecw_sync_state is all or nothing: an epoch change mid-broadcast leaves each
 * rank its old (step, bytes) or the source's, never a mix.  For programs with
 * their own collectives (backend none): epochs are followed and ranks
 * claimed without a communicator; ecw_wait_epoch wakes on a new epoch, times
 * out, and returns ECW_EUNCONFIRMED when the fence trips; a per-epoch value
 * put by one member is got by another, a get gives up at its deadline or at
 * once on a newer epoch.
 * The GPU libraries are loaded at run time: where they cannot be, Gloo
 * runs and backend nccl says which library is missing; an NCCL already in
 * the process is the one taken; every member runs rank 0's backend.
 * ecw_iallreduce/ecw_wait: the wait keeps its deadline, an epoch releases
 * the request, finalize ends one in flight.
 * NCCL needs a GPU; none is visible here, so that case skips with the reason. */
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ecw.h"
#include "epoch_delta.h"
#include "ec_http.h"
#include "ec_select.h"
#include "harness.h"
#include "keys.h"
#include "records.h"

EC_TEST_ETCD_FIXTURE("t4000", 16)

static const char *ecoord(void)
{
    return ec_test_bin("ECOORD", "./ecoord");
}

static const char *linreg(void)
{
    return ec_test_bin("ECW_LINREG", "worker/examples/linreg");
}

typedef struct {
    pid_t pid;
    char id[16], logdir[320], console[320];
} agent_t;

static agent_t start_agent(const char *job, const char *id, const char *np, const char *args)
{
    agent_t a;
    snprintf(a.id, sizeof(a.id), "%s", id);
    snprintf(a.logdir, sizeof(a.logdir), "%s/%s-%s", tmp, job, id);
    snprintf(a.console, sizeof(a.console), "%s/%s-%s.console", tmp, job, id);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "exec %s launch --elastic_server=%s --job_id=%s --np=%s --nproc_per_node=2 "
             "--node_id=%s --log_dir=%s --grace_period=2 --lease_ttl=2 --elastic_timeout=1 "
             "--rebuild=inprocess -- %s %s",
             ecoord(), ec_embed_endpoint(etcd), job, np, id, a.logdir, linreg(), args);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    a.pid = ec_test_spawn(argv, a.console);
    pids[npids++] = a.pid;
    return a;
}

/* ---- the example's output ---------------------------------------------------- */

typedef struct {
    long long step;
    unsigned long long epoch;
    int rank, world, sum, pid;
    double loss;
    char cs[24];
} line_t;

typedef struct {
    line_t *v;
    int n;
} lines_t;

/* Every complete "linreg step=" line of a process's log. */
static lines_t read_lines(const agent_t *a, int lr)
{
    lines_t out = {0};
    char path[400];
    snprintf(path, sizeof(path), "%s/workerlog.%d", a->logdir, lr);
    FILE *f = fopen(path, "r");
    if (!f)
        return out;
    int cap = 0;
    char buf[512];
    while (fgets(buf, sizeof(buf), f)) {
        if (strncmp(buf, "linreg step=", 12) != 0 || !strchr(buf, '\n'))
            continue;
        line_t l;
        if (sscanf(buf, "linreg step=%lld epoch=%llu rank=%d world=%d sum=%d loss=%lg cs=%23s "
                   "pid=%d", &l.step, &l.epoch, &l.rank, &l.world, &l.sum, &l.loss, l.cs,
                   &l.pid) != 8)
            continue;
        if (out.n == cap) {
            cap = cap ? cap * 2 : 256;
            out.v = realloc(out.v, sizeof(line_t) * (size_t)cap);
            ck_assert_ptr_nonnull(out.v);
        }
        out.v[out.n++] = l;
    }
    fclose(f);
    return out;
}

/* First line of epoch >= e, or NULL. */
static const line_t *first_in(const lines_t *ls, unsigned long long e)
{
    for (int i = 0; i < ls->n; i++)
        if (ls->v[i].epoch >= e)
            return &ls->v[i];
    return NULL;
}

typedef struct {
    const agent_t *a;
    int lr;
    unsigned long long epoch;
} progress_t;

static bool has_line_in(void *arg)
{
    progress_t *p = arg;
    lines_t ls = read_lines(p->a, p->lr);
    bool ok = first_in(&ls, p->epoch) != NULL;
    free(ls.v);
    return ok;
}

static bool log_has(const agent_t *a, int lr, const char *needle)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/workerlog.%d", a->logdir, lr);
    return ec_test_file_contains(path, needle);
}

/* ---- epochs and timings -------------------------------------------------------- */

/* An epoch >= number of world size world (the test fails without one). */
static ec_epoch_t *wait_epoch(const char *root, uint64_t number, int world, long ms)
{
    return ec_test_need_epoch(c, root, number, world, ms);
}

typedef struct {
    const char *job;
    uint64_t epoch;
    int world;
} timing_want_t;

/* Every rank of the epoch wrote a timing record with its stages in order. */
static bool timings_complete(void *arg)
{
    timing_want_t *t = arg;
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, t->job, NULL), 0);
    for (int r = 0; r < t->world; r++) {
        char key[EC_KEY_MAX];
        ec_key_epoch_timing(&k, t->epoch, r, key, sizeof(key));
        ec_kv_t kv;
        bool found = false;
        if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0 || !found)
            return false;
        ec_worker_timing_t *tm = NULL;
        int rc = ec_worker_timing_decode(kv.value, kv.value_len, key, &tm, NULL);
        ec_kv_free(&kv);
        ck_assert_int_eq(rc, 0);
        bool ok = tm->epoch == t->epoch && tm->rank == r && tm->epoch_seen_at_us > 0 &&
                  tm->comm_ready_at_us >= tm->epoch_seen_at_us &&
                  tm->first_collective_at_us >= tm->comm_ready_at_us;
        ec_worker_timing_free(tm);
        if (!ok)
            return false;
    }
    return true;
}

/* ---- one membership change ---------------------------------------------------------- */

#define MAXP 8
typedef struct {
    const agent_t *a;
    int lr;
    pid_t pid; /* as first seen; a restarted process gets its new one */
} proc_t;

static proc_t procs[MAXP];
static int nprocs;

static void add_procs(const agent_t *a, unsigned long long epoch)
{
    for (int lr = 0; lr < 2; lr++) {
        progress_t p = {a, lr, epoch};
        ck_assert_msg(ec_test_wait(has_line_in, &p, 20000), "%s/%d never trained in epoch %llu",
                      a->id, lr, epoch);
        lines_t ls = read_lines(a, lr);
        procs[nprocs++] = (proc_t){a, lr, first_in(&ls, epoch)->pid};
        free(ls.v);
    }
}

static void drop_procs(const agent_t *a)
{
    int n = 0;
    for (int i = 0; i < nprocs; i++)
        if (procs[i].a != a)
            procs[n++] = procs[i];
    nprocs = n;
}

/* The rule, checked for epoch e of world w against what came before it:
 * every member trains in e; its first step there counts w ranks; all first
 * steps agree on step and parameters; the step went on from where the
 * survivors were and the loss did not go up; each process is the one seen
 * before (restarted: the one killed, which took its state from a peer). */
static void check_change(const char *job, uint64_t e, int w, const agent_t *restarted_a,
                         int restarted_lr)
{
    long long step_before = -1, step_after = -1;
    double loss_before = 0, loss_after = 0;
    char cs_after[24] = "";
    for (int i = 0; i < nprocs; i++) {
        progress_t p = {procs[i].a, procs[i].lr, e};
        ck_assert_msg(ec_test_wait(has_line_in, &p, 20000), "%s/%d did not train in epoch %" PRIu64,
                      procs[i].a->id, procs[i].lr, e);
        ck_assert_msg(!log_has(procs[i].a, procs[i].lr, "linreg FAIL"), "%s/%d: ranks held "
                      "different parameters (see %s/workerlog.%d)", procs[i].a->id, procs[i].lr,
                      procs[i].a->logdir, procs[i].lr);
        lines_t ls = read_lines(procs[i].a, procs[i].lr);
        const line_t *f = first_in(&ls, e);
        ck_assert_msg(f->epoch == e, "%s/%d went from epoch %" PRIu64 " to %llu: unexpected "
                      "membership changes (processes failing?)", procs[i].a->id, procs[i].lr, e,
                      f->epoch);
        ck_assert_msg(f->sum == w && f->world == w, "%s/%d: first allreduce of epoch %" PRIu64
                      " counted %d ranks (world %d), want %d", procs[i].a->id, procs[i].lr, e,
                      f->sum, f->world, w);
        if (step_after < 0) {
            step_after = f->step;
            loss_after = f->loss;
            snprintf(cs_after, sizeof(cs_after), "%s", f->cs);
        }
        ck_assert_msg(f->step == step_after && !strcmp(f->cs, cs_after),
                      "%s/%d starts epoch %" PRIu64 " at step %lld with parameters %s; another "
                      "rank at step %lld with %s", procs[i].a->id, procs[i].lr, e, f->step, f->cs,
                      step_after, cs_after);
        bool is_restarted = procs[i].a == restarted_a && procs[i].lr == restarted_lr;
        if (is_restarted) {
            ck_assert_msg(f->pid != procs[i].pid, "the killed process was not replaced");
            procs[i].pid = f->pid;
        } else {
            ck_assert_msg(f->pid == procs[i].pid, "%s/%d restarted (pid %d, was %d): it should "
                          "have rebuilt in place", procs[i].a->id, procs[i].lr, f->pid,
                          procs[i].pid);
        }
        /* the survivors' last step before e */
        for (int j = 0; j < ls.n; j++)
            if (ls.v[j].epoch < e && ls.v[j].pid == procs[i].pid && !is_restarted &&
                ls.v[j].step > step_before) {
                step_before = ls.v[j].step;
                loss_before = ls.v[j].loss;
            }
        free(ls.v);
    }
    ck_assert_msg(step_before >= 0, "no survivor trained before epoch %" PRIu64, e);
    ck_assert_msg(step_after > step_before, "epoch %" PRIu64 " resumed at step %lld; survivors "
                  "had reached step %lld: state was lost", e, step_after, step_before);
    ck_assert_msg(loss_after <= loss_before * (1 + 1e-9), "loss went up across epoch %" PRIu64
                  ": %.17g after, %.17g before", e, loss_after, loss_before);
    timing_want_t t = {job, e, w};
    ck_assert_msg(ec_test_wait(timings_complete, &t, 10000), "timings of epoch %" PRIu64
                  " incomplete", e);
    printf("# epoch %" PRIu64 " world %d: step %lld -> %lld, loss %.6g -> %.6g, %d processes "
           "checked\n", e, w, step_before, step_after, loss_before, loss_after, nprocs);
}

typedef struct {
    const proc_t *p;
    uint64_t epoch;
    long long steps;
} trained_t;

static bool trained(void *arg)
{
    trained_t *t = arg;
    lines_t ls = read_lines(t->p->a, t->p->lr);
    const line_t *f = first_in(&ls, t->epoch);
    bool ok = f && ls.n > 0 && ls.v[ls.n - 1].step >= f->step + t->steps;
    free(ls.v);
    return ok;
}

/* Let every member train a few steps in epoch e, so that each change
 * starts from a state the next one must carry over. */
static void train_a_while(uint64_t e)
{
    for (int i = 0; i < nprocs; i++) {
        trained_t t = {&procs[i], e, 15};
        ck_assert_msg(ec_test_wait(trained, &t, 15000), "%s/%d stalled in epoch %" PRIu64,
                      procs[i].a->id, procs[i].lr, e);
    }
}

static pid_t pid_of(const agent_t *a, int lr)
{
    for (int i = 0; i < nprocs; i++)
        if (procs[i].a == a && procs[i].lr == lr)
            return procs[i].pid;
    return -1;
}

START_TEST(membership_changes_rebuild_in_place)
{
    /* A collective's own timeout far beyond the bound checked below, so only
     * the epoch change can release a collective blocked on a silent peer. */
    setenv("ECOORD_WORKER_TIMEOUT_MS", "60000", 1);
    const char *job = "jw";
    const char *args = "--steps 100000000 --delay-ms 20 --verbose";
    agent_t a = start_agent(job, "a", "1:4", args);
    agent_t b = start_agent(job, "b", "1:4", args);
    agent_t cc = start_agent(job, "c", "1:4", args);
    ec_epoch_t *ep = wait_epoch("/jw/", 1, 6, 20000);
    uint64_t e = ep->number;
    ec_epoch_free(ep);
    nprocs = 0;
    add_procs(&a, e);
    add_procs(&b, e);
    add_procs(&cc, e);

    train_a_while(e);

    /* 1. a training process killed: the agent starts it again at once and
     *    its node steps out (one epoch without it: the others go on), then
     *    comes back once the new process is ready; it takes the state of its
     *    peers, and nothing else restarts (b's other process included) */
    kill(pid_of(&b, 1), SIGKILL);
    ep = wait_epoch("/jw/", e + 1, 4, 15000);
    ck_assert_int_eq(ep->reason, EC_REASON_LEAVE);
    ck_assert_int_lt(ec_epoch_find_member(ep, "b"), 0);
    ec_epoch_free(ep);
    ep = wait_epoch("/jw/", e + 2, 6, 15000);
    e = ep->number;
    ck_assert_int_eq(ep->reason, EC_REASON_JOIN);
    ec_epoch_free(ep);
    check_change(job, e, 6, &b, 1);
    ck_assert(log_has(&b, 1, "this rank had -1"));

    train_a_while(e);

    /* 2. a node stopped with SIGTERM: it leaves at once */
    kill(cc.pid, SIGTERM);
    ck_assert_int_eq(ec_test_reap(cc.pid, 10000), 128 + SIGTERM);
    ep = wait_epoch("/jw/", e + 1, 4, 10000);
    e = ep->number;
    ck_assert_int_eq(ep->reason, EC_REASON_LEAVE);
    ec_epoch_free(ep);
    drop_procs(&cc);
    check_change(job, e, 4, NULL, -1);

    train_a_while(e);

    /* 3. a node added: its processes join and take the live state */
    agent_t d = start_agent(job, "d", "1:4", args);
    ep = wait_epoch("/jw/", e + 1, 6, 15000);
    e = ep->number;
    ck_assert_int_eq(ep->reason, EC_REASON_JOIN);
    ec_epoch_free(ep);
    add_procs(&d, e);
    check_change(job, e, 6, NULL, -1);
    ck_assert(log_has(&d, 0, "this rank had -1") && log_has(&d, 1, "this rank had -1"));

    train_a_while(e);

    /* 4. a node killed: its processes die with it, its lease expires */
    kill(d.pid, SIGKILL);
    ck_assert_int_eq(ec_test_reap(d.pid, 5000), 128 + SIGKILL);
    ep = wait_epoch("/jw/", e + 1, 4, 15000);
    e = ep->number;
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ec_epoch_free(ep);
    drop_procs(&d);
    check_change(job, e, 4, NULL, -1);

    train_a_while(e);

    /* 5. a node gone silent (agent and processes stopped): the survivors'
     *    collectives block on it until its lease expires and the new epoch
     *    aborts them, far sooner than their 60 s timeout */
    pid_t b0 = pid_of(&b, 0), b1 = pid_of(&b, 1);
    int64_t t0 = ec_test_now_ms();
    kill(b.pid, SIGSTOP);
    kill(b0, SIGSTOP);
    kill(b1, SIGSTOP);
    ep = wait_epoch("/jw/", e + 1, 2, 15000);
    uint64_t silent_from = e;
    e = ep->number;
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ec_epoch_free(ep);
    drop_procs(&b);
    check_change(job, e, 2, NULL, -1);
    int64_t released = ec_test_now_ms() - t0;
    /* Each survivor's collective ended with the epoch change: aborted by its
     * own watcher, or failed because the other survivor's abort closed its
     * connections first (the abort cascades). */
    int aborted = 0;
    for (int lr = 0; lr < 2; lr++) {
        char needle[96];
        snprintf(needle, sizeof(needle), "in epoch %" PRIu64 " ended by epoch %" PRIu64 " (",
                 silent_from, e);
        ck_assert_msg(log_has(&a, lr, needle), "a/%d: no collective of epoch %" PRIu64
                      " was ended by the epoch change", lr, silent_from);
        snprintf(needle, sizeof(needle), "in epoch %" PRIu64 " ended by epoch %" PRIu64
                 " (EC_EABORTED)", silent_from, e);
        aborted += log_has(&a, lr, needle);
    }
    ck_assert_msg(aborted >= 1, "no survivor's collective was aborted by its watcher");
    ck_assert_msg(released < ec_test_ms(15000), "survivors resumed %" PRId64 " ms after the "
                  "node went silent", released);
    printf("# silent node: survivors trained again %" PRId64 " ms after it stopped (lease 2 s)\n",
           released);
    for (int i = 0; i < 2; i++)
        ck_assert(!log_has(&a, i, "FAIL"));
    unsetenv("ECOORD_WORKER_TIMEOUT_MS");
}
END_TEST

START_TEST(job_completes_in_place)
{
    agent_t ag[2];
    ag[0] = start_agent("jdone", "a", "2", "--steps 40");
    ag[1] = start_agent("jdone", "b", "2", "--steps 40");
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(ec_test_reap(ag[i].pid, 30000), 0);
        for (int lr = 0; lr < 2; lr++) {
            ck_assert(log_has(&ag[i], lr, "linreg done steps=40"));
            lines_t ls = read_lines(&ag[i], lr);
            ck_assert_int_eq(ls.n, 40);
            for (int s = 1; s < ls.n; s++)
                ck_assert(ls.v[s].loss < ls.v[s - 1].loss);
            ck_assert_int_eq(ls.v[39].sum, 4);
            free(ls.v);
        }
    }
    /* (its timing records went with the nodes' leases when they left) */
}
END_TEST

/* ---- the library in this process, against epochs the test publishes ---------------- */

/* Write epoch n of nodes ids[0..nmembers) (M_id order) with nproc local
 * ranks each on loopback into job's epoch key, the record naming job
 * rec_job and writer `writer`. */
static void write_epoch_of(const char *job, uint64_t n, const char *const *ids, int nmembers,
                           int nproc, ec_epoch_reason_t why, const char *rec_job,
                           const char *writer)
{
    ec_epoch_t *ep = ec_epoch_new(nmembers, nproc);
    ck_assert_ptr_nonnull(ep);
    ep->number = n;
    for (int m = 0; m < nmembers; m++) {
        ep->members[m].node_id = strdup(ids[m]);
        ep->members[m].host = strdup("127.0.0.1");
        for (int i = 0; i < nproc; i++)
            ep->members[m].ports[i] = (uint16_t)(41000 + 100 * m + i);
        ep->members[m].master_port = (uint16_t)(41999 - m);
        ep->members[m].incarnation = n;
    }
    ep->reason = why;
    /* Written as a leader would (readers check it, coord/core/epoch_check.h):
     * naming the job, under the leader key "n1" current at its revision. */
    char key[EC_KEY_MAX];
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, job, NULL), 0);
    ec_key_leader(&k, key, sizeof(key));
    ck_assert_int_eq(ec_etcd_put(c, key, "n1", 2, 0, NULL, NULL), 0); /* keeps its create rev */
    ec_kv_t lk;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &lk, &found, NULL, NULL), 0);
    ck_assert(found);
    ep->leader_id = strdup(writer);
    ep->leader_rev = lk.create_revision;
    ep->job_id = strdup(rec_job);
    ec_kv_free(&lk);
    void *buf = NULL;
    size_t len = 0;
    ec_error_t err = {0};
    ck_assert_msg(ec_epoch_encode(ep, &buf, &len, &err) == 0, "%s", err.msg);
    ec_key_epoch(&k, key, sizeof(key));
    /* and, in the same transaction, epochd as a leader writes it (here the
     * marker that says "read the epoch key"): what workers watch */
    char dkey[EC_KEY_MAX];
    ec_key_epoch_delta(&k, dkey, sizeof(dkey));
    void *dbuf = NULL;
    size_t dlen = 0;
    ck_assert_int_eq(ec_epoch_delta_encode(NULL, ep, buf, len, &dbuf, &dlen, NULL), 0);
    /* The leader's transaction puts the leader key again unchanged: its
     * event at the epoch's revision tells the workers who wrote it (an
     * epoch of another writer, as another tool writes it, goes without:
     * the workers read the leader key at its revision after a grace). */
    char lkey[EC_KEY_MAX];
    ec_key_leader(&k, lkey, sizeof(lkey));
    bool leader = !strcmp(rec_job, job) && !strcmp(writer, "n1");
    ec_op_t ops[3] = {{.type = EC_OP_PUT, .key = key, .value = buf, .value_len = len},
                      {.type = EC_OP_PUT, .key = dkey, .value = dbuf, .value_len = dlen},
                      {.type = EC_OP_PUT, .key = lkey, .value = "n1", .value_len = 2}};
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, ops, leader ? 3 : 2, NULL, 0, NULL, NULL), 0);
    free(buf);
    free(dbuf);
    ec_epoch_free(ep);
}

/* Epoch n of one node "n1" with nproc local ranks. */
static void write_epoch(const char *job, uint64_t n, int nproc, ec_epoch_reason_t why,
                        const char *rec_job, const char *writer)
{
    const char *const ids[] = {"n1"};
    write_epoch_of(job, n, ids, 1, nproc, why, rec_job, writer);
}

/* Publish epoch n as the job's leader "n1" would. */
static void publish_epoch(const char *job, uint64_t n, int nproc, ec_epoch_reason_t why)
{
    write_epoch(job, n, nproc, why, job, "n1");
}

static ecw_options_t lib_opts(const char *job, int lr)
{
    ecw_options_t o = ECW_OPTIONS_INIT;
    o.from_env = 0;
    o.etcd_endpoints = ec_embed_endpoint(etcd);
    o.job_id = job;
    o.node_id = "n1";
    o.local_rank = lr;
    o.backend = ECW_BACKEND_GLOO;
    o.host = "127.0.0.1";
    o.timeout_ms = 60000;
    o.rebuild_timeout_ms = 15000;
    return o;
}

typedef struct {
    ecw_t *w;
    const char *job; /* NULL: "jlib" */
    int lr, rc, rc2;
    double v;
    int64_t done_ms;
    ecw_error_t err;
    _Atomic int finished;
} member_t;

static void *init_thread(void *arg)
{
    member_t *m = arg;
    ecw_options_t o = lib_opts(m->job ? m->job : "jlib", m->lr);
    m->rc = ecw_init(&o, &m->w, &m->err);
    return NULL;
}

static void *rebuild_thread(void *arg)
{
    member_t *m = arg;
    m->rc = ecw_rebuild(m->w, &m->err);
    return NULL;
}

static void *allreduce_thread(void *arg)
{
    member_t *m = arg;
    m->v = 1.0;
    m->rc = ecw_allreduce(m->w, &m->v, 1, ECW_F64, ECW_SUM, &m->err);
    m->done_ms = ec_test_now_ms();
    atomic_store(&m->finished, 1);
    return NULL;
}

/* Run fn on both members at once (a collective needs both). */
static void both(member_t *m, void *(*fn)(void *))
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, fn, &m[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_msg(m[0].rc == 0 && m[1].rc == 0, "local rank 0: %s; local rank 1: %s",
                  m[0].rc ? m[0].err.msg : "ok", m[1].rc ? m[1].err.msg : "ok");
}

typedef struct {
    member_t *m;
    uint64_t epoch;
} both_see_t;

static bool both_see(void *arg)
{
    both_see_t *b = arg;
    return ecw_latest_epoch(b->m[0].w) >= b->epoch && ecw_latest_epoch(b->m[1].w) >= b->epoch;
}

/* Both members' watchers have seen epoch e.  ecw_rebuild with nothing new
 * returns at once with the old communicator, so a rebuild that must move
 * both to e waits for this first (under load a watcher can lag the other's). */
static void wait_both_see(member_t *m, uint64_t e)
{
    both_see_t b = {m, e};
    ck_assert_msg(ec_test_wait(both_see, &b, 10000), "epoch %" PRIu64 " not seen by both "
                  "members within 10 s (they see %" PRIu64 " and %" PRIu64 ")", e,
                  ecw_latest_epoch(m[0].w), ecw_latest_epoch(m[1].w));
}

static bool pending(void *arg)
{
    return ecw_epoch_pending(arg) == 1;
}

static bool still_blocked(void *arg)
{
    return !atomic_load(&((member_t *)arg)->finished);
}

typedef struct {
    member_t *m;
    int64_t step;
    char state[8];
    int src;
} syncer_t;

static void *sync_thread(void *arg)
{
    syncer_t *s = arg;
    s->m->rc = ecw_sync_state(s->m->w, s->state, sizeof(s->state), &s->step, &s->src, &s->m->err);
    return NULL;
}

START_TEST(silent_peer_released_by_epoch_change)
{
    publish_epoch("jlib", 1, 2, EC_REASON_START);
    member_t m[2] = {{.lr = 0}, {.lr = 1}};
    both(m, init_thread);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(ecw_epoch(m[i].w), 1);
        ck_assert_int_eq(ecw_rank(m[i].w), i);
        ck_assert_int_eq(ecw_world_size(m[i].w), 2);
        ck_assert_int_eq(ecw_epoch_pending(m[i].w), 0);
    }
    both(m, allreduce_thread);
    ck_assert(m[0].v == 2.0 && m[1].v == 2.0);
    timing_want_t t = {"jlib", 1, 2};
    ck_assert_msg(ec_test_wait(timings_complete, &t, 5000), "no timings for epoch 1");

    /* rank 0 enters an allreduce that rank 1 never joins: it blocks (its own
     * timeout is 60 s) until the next epoch is published */
    m[0].finished = 0;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, allreduce_thread, &m[0]), 0);
    ck_assert_msg(ec_test_holds(still_blocked, &m[0], 300), "the allreduce did not block");
    int64_t t0 = ec_test_now_ms();
    publish_epoch("jlib", 2, 2, EC_REASON_RESTART);
    pthread_join(th, NULL);
    ck_assert_int_eq(m[0].rc, ECW_EEPOCHCHANGED);
    ck_assert_msg(m[0].done_ms - t0 < ec_test_ms(2000), "released %" PRId64 " ms after the "
                  "epoch was published", m[0].done_ms - t0);
    printf("# blocked allreduce released %" PRId64 " ms after the epoch was published\n",
           m[0].done_ms - t0);
    ck_assert_msg(strstr(m[0].err.msg, "ecw_rebuild"), "%s", m[0].err.msg);
    /* rank 1 was idle: its own watcher tells it, without any call */
    ck_assert_msg(ec_test_wait(pending, m[1].w, 5000), "rank 1 never saw epoch 2");
    ck_assert_int_eq(ecw_latest_epoch(m[1].w), 2);

    /* both rebuild; rank 0 holds state at step 5, rank 1 none */
    both(m, rebuild_thread);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(ecw_epoch(m[i].w), 2);
    syncer_t s[2] = {{&m[0], 5, "state5", -9}, {&m[1], -1, "", -9}};
    pthread_t ts[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&ts[i], NULL, sync_thread, &s[i]);
    for (int i = 0; i < 2; i++) {
        pthread_join(ts[i], NULL);
        ck_assert_msg(m[i].rc == 0, "%s", m[i].err.msg);
        ck_assert_int_eq(s[i].step, 5);
        ck_assert_int_eq(s[i].src, 0);
        ck_assert_str_eq(s[i].state, "state5");
    }
    both(m, allreduce_thread);
    ck_assert(m[0].v == 2.0 && m[1].v == 2.0);
    for (int i = 0; i < 2; i++)
        ecw_finalize(m[i].w);
}
END_TEST

static bool latest_is_2(void *arg)
{
    return ecw_latest_epoch(arg) == 2;
}

/* The worker library applies the coordinator's rule (coord/core/epoch_check.h):
 * a higher-numbered epoch copied from another job, or written by a node
 * that does not hold the leader key, is ignored (its communicator is not
 * aborted); the next real epoch is followed. */
START_TEST(forged_epochs_are_not_followed)
{
    publish_epoch("jforge", 1, 1, EC_REASON_START);
    ecw_options_t o = lib_opts("jforge", 0);
    ecw_t *w = NULL;
    ecw_error_t err = {0};
    ck_assert_msg(ecw_init(&o, &w, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(ecw_epoch(w), 1);
    write_epoch("jforge", 5, 1, EC_REASON_RESTART, "jother", "n1"); /* another job's */
    write_epoch("jforge", 6, 1, EC_REASON_RESTART, "jforge", "n2"); /* not the leader's */
    publish_epoch("jforge", 2, 1, EC_REASON_RESTART);
    /* Had 5 or 6 been taken, 2 would be older and ignored. */
    ck_assert_msg(ec_test_wait(latest_is_2, w, 5000), "latest epoch is %llu, not 2",
                  (unsigned long long)ecw_latest_epoch(w));
    ecw_finalize(w);
}
END_TEST

static bool latest_is_3(void *arg)
{
    return ecw_latest_epoch(arg) == 3;
}

/* etcd restarted with an empty data dir: the library's watch comes back on a
 * store whose revision is below the one it was waiting for; it reads the
 * epoch again instead of waiting for revisions the new store has not
 * reached, and follows the epoch the re-formed job publishes there. */
START_TEST(epoch_followed_after_etcd_lost_its_data)
{
    publish_epoch("jwipe", 1, 1, EC_REASON_START);
    ecw_options_t o = lib_opts("jwipe", 0);
    ecw_t *w = NULL;
    ecw_error_t err = {0};
    ck_assert_msg(ecw_init(&o, &w, &err) == 0, "%s", err.msg);
    /* revisions the new store will not reach soon */
    publish_epoch("jwipe", 2, 1, EC_REASON_RESTART);
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(ec_etcd_put(c, "/unrelated", "x", 1, 0, NULL, NULL), 0);
    ec_embed_kill(etcd, SIGKILL);
    char data[600], moved[600];
    snprintf(data, sizeof(data), "%s/data", ec_embed_dir(etcd));
    snprintf(moved, sizeof(moved), "%s/data.lost", ec_embed_dir(etcd));
    ck_assert_int_eq(rename(data, moved), 0);
    ec_error_t e = {0};
    ck_assert_msg(ec_embed_restart(etcd, &e) == 0, "etcd restart: %s", e.msg);
    publish_epoch("jwipe", 3, 1, EC_REASON_RESTART);
    ck_assert_msg(ec_test_wait(latest_is_3, w, 15000), "latest epoch is %llu, not 3",
                  (unsigned long long)ecw_latest_epoch(w));
    ecw_finalize(w);
}
END_TEST

START_TEST(init_refuses_bad_options_and_keeps_deadlines)
{
    ecw_t *w = (ecw_t *)1;
    ecw_error_t err;
    ecw_options_t o = ECW_OPTIONS_INIT;
    o.from_env = 0;
    ck_assert_int_eq(ecw_init(&o, &w, &err), ECW_EINVAL);
    ck_assert_ptr_null(w);
    ck_assert_msg(strstr(err.msg, "ECOORD_ELASTIC_SERVER"), "%s", err.msg);

    o = lib_opts("jnone", 0);
    o.node_id = "bad/id";
    ck_assert_int_eq(ecw_init(&o, &w, &err), ECW_EINVAL);
    ck_assert_msg(strstr(err.msg, "node"), "%s", err.msg);

    /* the NCCL rebuild knob is checked at init, whatever the backend */
    o = lib_opts("jnone", 0);
    o.nccl_rebuild = "grow";
    ck_assert_int_eq(ecw_init(&o, &w, &err), ECW_EINVAL);
    ck_assert_msg(strstr(err.msg, "nccl_rebuild must be auto, shrink or init"), "%s", err.msg);
    o = lib_opts("jnone", 0);
    o.nccl_roots = -2;
    ck_assert_int_eq(ecw_init(&o, &w, &err), ECW_EINVAL);
    ck_assert_msg(strstr(err.msg, "nccl_roots"), "%s", err.msg);

    o = lib_opts("jnone", 0);
    o.rebuild_timeout_ms = 300;
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(ecw_init(&o, &w, &err), ECW_ETIMEDOUT);
    ck_assert_int_lt(ec_test_now_ms() - t0, ec_test_ms(5000));
    ck_assert_msg(strstr(err.msg, "no epoch"), "%s", err.msg);

    ck_assert_str_eq(ecw_strerror(ECW_EEPOCHCHANGED), "epoch changed");
    ck_assert_str_eq(ecw_err_name(ECW_EABORTED), "ECW_EABORTED");
    ck_assert_uint_eq(ecw_dtype_size(ECW_BF16), 2);
}
END_TEST

/* ---- ecw_sync_state is all or nothing -------------------------------------------- */

/* Bytes this process has written to descriptors: Gloo's TCP transport
 * sends with writev (counted here; its recv is not), so the state broadcast
 * from the rank in this process shows here as it leaves; on loopback it
 * arrives a socket buffer later. */
static long long wchar(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    long long v = -1;
    char line[128];
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "wchar: %lld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

typedef struct {
    long long from, want;
    const _Atomic int *done;
} arriving_t;

static bool received_or_done(void *arg)
{
    arriving_t *a = arg;
    return wchar() - a->from >= a->want || atomic_load(a->done) == 2;
}

typedef struct {
    ecw_t *w;
    unsigned char *state;
    size_t len;
    int64_t step;
    int src, rc;
    ecw_error_t err;
    _Atomic int *done;
} big_sync_t;

static void *big_sync_thread(void *arg)
{
    big_sync_t *s = arg;
    s->rc = ecw_sync_state(s->w, s->state, s->len, &s->step, &s->src, &s->err);
    atomic_fetch_add(s->done, 1);
    return NULL;
}

/* Every byte of buf is b. */
static bool all_bytes(const unsigned char *buf, size_t len, unsigned char b)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != b)
            return false;
    return true;
}

/* A new epoch published while the state is being broadcast must leave
 * every rank with either the (step, bytes) it had or the source's complete
 * pair: never bytes partly overwritten under the old step (two ranks would
 * later report the same step with different bytes), never the new step over
 * partial bytes.  Rank 0 holds step 5 (bytes 0xAA), rank 1 step 3 (0xBB);
 * the epoch is published once an eighth of the state has been sent. */
START_TEST(sync_state_interrupted_leaves_old_or_new_state_never_torn)
{
    const size_t len = 256u << 20;
    publish_epoch("jtorn", 1, 2, EC_REASON_START);
    member_t m[2] = {{.lr = 0, .job = "jtorn"}, {.lr = 1, .job = "jtorn"}};
    both(m, init_thread);
    pthread_t t[2];
    unsigned char *st[2];
    for (int i = 0; i < 2; i++)
        ck_assert_ptr_nonnull(st[i] = malloc(len));
    uint64_t e = 1;
    int interrupted = 0;
    for (int attempt = 0; attempt < 3 && !interrupted; attempt++) {
        memset(st[0], 0xAA, len);
        memset(st[1], 0xBB, len);
        _Atomic int done = 0;
        big_sync_t s[2] = {{m[0].w, st[0], len, 5, -9, 0, {0}, &done},
                           {m[1].w, st[1], len, 3, -9, 0, {0}, &done}};
        arriving_t a = {wchar(), (long long)(len / 8), &done};
        ck_assert_int_ge(a.from, 0);
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(pthread_create(&t[i], NULL, big_sync_thread, &s[i]), 0);
        ck_assert_msg(ec_test_wait(received_or_done, &a, 30000), "the state broadcast never "
                      "started");
        publish_epoch("jtorn", ++e, 2, EC_REASON_RESTART);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        /* the source keeps its own */
        ck_assert_int_eq(s[0].step, 5);
        ck_assert(all_bytes(st[0], len, 0xAA));
        bool old = all_bytes(st[1], len, 0xBB), whole = all_bytes(st[1], len, 0xAA);
        size_t n_new = 0;
        for (size_t i = 0; i < len; i++)
            n_new += st[1][i] == 0xAA;
        ck_assert_msg((s[1].step == 3 && old) || (s[1].step == 5 && whole),
                      "rank 1 holds step %" PRId64 " with %s bytes (%zu of %zu are rank 0's; "
                      "sync returned %s: %s)", s[1].step,
                      old ? "its old" : whole ? "rank 0's" : "torn", n_new, len,
                      ecw_err_name(s[1].rc), s[1].err.msg);
        if (s[1].rc != 0) {
            interrupted++;
            ck_assert_int_eq(s[1].rc, ECW_EEPOCHCHANGED);
        }
        printf("# attempt %d: rank 1 sync %s, holds %s state\n", attempt + 1,
               ecw_err_name(s[1].rc), old ? "its old" : "the source's");
        wait_both_see(m, e);
        both(m, rebuild_thread);
    }
    ck_assert_msg(interrupted, "the broadcast of %zu bytes always finished before the epoch "
                  "change reached it: nothing was tested", len);
    for (int i = 0; i < 2; i++) {
        free(st[i]);
        ecw_finalize(m[i].w);
    }
}
END_TEST

/* ---- programs with their own collectives (ECW_BACKEND_NONE) ---------------------- */

static ecw_t *none_init(const char *job, int lr)
{
    ecw_options_t o = lib_opts(job, lr);
    o.backend = ECW_BACKEND_NONE;
    ecw_t *w = NULL;
    ecw_error_t err = {0};
    ck_assert_msg(ecw_init(&o, &w, &err) == 0, "local rank %d: %s", lr, err.msg);
    return w;
}

/* Whether epochs/<n>/comm/claim.<rank> of job exists. */
static bool claimed(const char *job, uint64_t n, int rank)
{
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, job, NULL), 0);
    char name[32], key[EC_KEY_MAX];
    snprintf(name, sizeof(name), "claim.%d", rank);
    ck_assert_int_gt(ec_key_epoch_comm(&k, n, name, key, sizeof(key)), 0);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    if (found)
        ec_kv_free(&kv);
    return found;
}

/* Backend none: init and rebuild take the newest epoch that includes the
 * node, its rank (member index * nproc + local rank) and claim it, and
 * build nothing; the collectives and ecw_sync_state refuse; a new epoch
 * makes ecw_epoch_pending 1.  ECOORD_WORKER_BACKEND=none selects it. */
/* Publish epoch n of members ids as a leader publishes a split epoch
 * (coord/node/node_publish.c): chunks of C members and the index first,
 * then the head at `epoch`, its delta from prev at epochd and the leader
 * key.  Returns the epoch (the base of the next delta). */
static ec_epoch_t *publish_split(const char *job, uint64_t n, const char *const *ids, int nm,
                                 int C, const ec_epoch_t *prev)
{
    ec_epoch_t *ep = ec_epoch_new(nm, 1);
    ep->number = n;
    for (int m = 0; m < nm; m++) {
        ep->members[m].node_id = strdup(ids[m]);
        ep->members[m].host = strdup("127.0.0.1");
        /* ports of the node, not of its M_id: a member that moves is unchanged */
        int h = 0;
        for (const char *ch = ids[m]; *ch; ch++)
            h = h * 31 + *ch;
        ep->members[m].ports[0] = (uint16_t)(42000 + h % 1000);
        ep->members[m].master_port = (uint16_t)(43000 + h % 1000);
        ep->members[m].incarnation = 1;
    }
    ep->reason = prev ? EC_REASON_LOST : EC_REASON_START;
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, job, NULL), 0);
    char lkey[EC_KEY_MAX], ekey[EC_KEY_MAX], dkey[EC_KEY_MAX];
    ec_key_leader(&k, lkey, sizeof(lkey));
    ec_key_epoch(&k, ekey, sizeof(ekey));
    ec_key_epoch_delta(&k, dkey, sizeof(dkey));
    ck_assert_int_eq(ec_etcd_put(c, lkey, "n1", 2, 0, NULL, NULL), 0);
    ec_kv_t lk;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, lkey, &lk, &found, NULL, NULL), 0);
    ep->leader_id = strdup("n1");
    ep->leader_rev = lk.create_revision;
    ep->job_id = strdup(job);
    ec_kv_free(&lk);
    ec_epoch_parts_t p;
    ec_error_t err = {0};
    ck_assert_msg(ec_epoch_split(ep, C, &p, &err) == 0, "%s", err.msg);
    ck_assert_int_gt(p.nchunks, 1);
    char (*keys)[EC_KEY_MAX] = calloc((size_t)(p.nchunks + p.nbuckets), EC_KEY_MAX);
    ec_op_t *ops = calloc((size_t)(p.nchunks + p.nbuckets), sizeof(*ops));
    int no = 0;
    for (int i = 0; i < p.nchunks; i++, no++) {
        ec_key_epoch_chunk(&k, n, i, keys[no], EC_KEY_MAX);
        ops[no] = (ec_op_t){.type = EC_OP_PUT, .key = keys[no], .value = p.chunk[i],
                            .value_len = p.chunk_len[i]};
    }
    for (int i = 0; i < p.nbuckets; i++, no++) {
        ec_key_epoch_index(&k, n, i, keys[no], EC_KEY_MAX);
        ops[no] = (ec_op_t){.type = EC_OP_PUT, .key = keys[no], .value = p.bucket[i],
                            .value_len = p.bucket_len[i]};
    }
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, ops, (size_t)no, NULL, 0, NULL, NULL), 0);
    free(keys);
    free(ops);
    ec_epoch_split_t info;
    ck_assert_int_eq(ec_epoch_head_info(p.head, p.head_len, NULL, &info, NULL), 1);
    ep->chunk_members = info.chunk_members;
    ep->nchunks = info.nchunks;
    ep->chunk_digest = info.chunk_digest;
    info.chunk_digest = NULL;
    ec_epoch_split_free(&info);
    void *whole, *d;
    size_t wl, dl;
    ck_assert_int_eq(ec_epoch_encode_whole(ep, &whole, &wl, NULL), 0);
    ck_assert_int_eq(ec_epoch_delta_encode(prev, ep, whole, wl, &d, &dl, NULL), 0);
    ec_op_t put[3] = {{.type = EC_OP_PUT, .key = ekey, .value = p.head, .value_len = p.head_len},
                      {.type = EC_OP_PUT, .key = dkey, .value = d, .value_len = dl},
                      {.type = EC_OP_PUT, .key = lkey, .value = "n1", .value_len = 2}};
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, put, 3, NULL, 0, NULL, NULL), 0);
    free(whole);
    free(d);
    ec_epoch_parts_free(&p);
    return ep;
}

typedef struct {
    ecw_t *w;
    uint64_t epoch;
} latest_t;

static bool latest_is(void *arg)
{
    latest_t *l = arg;
    return ecw_latest_epoch(l->w) >= l->epoch;
}

/* A training process in a job whose epochs are split (more members than
 * --epoch_chunk_members) reads a view, not the whole epoch: the head, its
 * index bucket and its chunks; a loss before it arrives as a delta to the
 * view, a loss of member 0 too (or a read of its chunks when the view
 * cannot check the new member 0); its rank follows every epoch. */
static pthread_mutex_t view_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char view_log[8192];

static void view_log_cb(ecw_log_level_t level, const char *msg, void *arg)
{
    (void)level;
    (void)arg;
    pthread_mutex_lock(&view_log_lock);
    size_t n = strlen(view_log);
    snprintf(view_log + n, sizeof(view_log) - n, "%s\n", msg);
    pthread_mutex_unlock(&view_log_lock);
}

static bool view_logged(void *arg)
{
    pthread_mutex_lock(&view_log_lock);
    bool y = strstr(view_log, (const char *)arg) != NULL;
    pthread_mutex_unlock(&view_log_lock);
    return y;
}

START_TEST(split_epochs_are_followed_through_a_view)
{
    const char *ids[] = {"a0", "a1", "a2", "a3", "a4", "a5", "n1", "a7", "a8", "a9"};
    ec_epoch_t *e1 = publish_split("jview", 1, ids, 10, 2, NULL);
    ecw_options_t o = lib_opts("jview", 0);
    o.backend = ECW_BACKEND_NONE;
    o.log_cb = view_log_cb;
    o.log_level = ECW_LOG_INFO;
    ecw_t *w = NULL;
    ecw_error_t ierr = {0};
    ck_assert_msg(ecw_init(&o, &w, &ierr) == 0, "%s", ierr.msg);
    /* member 0, its own chunk (n1, a7) and those on either side (a4, a5;
     * a8, a9) */
    ck_assert_msg(view_logged("epoch 1: read 7 of its 10 members (split in chunks of 2)"), "%s",
                  view_log);
    ck_assert_int_eq(ecw_epoch(w), 1);
    ck_assert_int_eq(ecw_rank(w), 6);
    ck_assert_int_eq(ecw_world_size(w), 10);
    ck_assert_int_eq(ecw_nnodes(w), 10);
    ck_assert(claimed("jview", 1, 6));
    /* a loss before it: M_id 5 now */
    const char *ids2[] = {"a0", "a1", "a3", "a4", "a5", "n1", "a7", "a8", "a9"};
    ec_epoch_t *e2 = publish_split("jview", 2, ids2, 9, 2, e1);
    latest_t l = {w, 2};
    ck_assert_msg(ec_test_wait(latest_is, &l, 5000), "epoch 2 not seen");
    ck_assert_msg(ec_test_wait(view_logged, "epoch 2: view of", 5000), "%s", view_log);
    ecw_error_t err = {0};
    ck_assert_msg(ecw_rebuild(w, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(ecw_epoch(w), 2);
    ck_assert_int_eq(ecw_rank(w), 5);
    ck_assert_int_eq(ecw_world_size(w), 9);
    ck_assert(claimed("jview", 2, 5));
    /* member 0 lost: the master moves (the delta carries the new one) */
    const char *ids3[] = {"a1", "a3", "a4", "a5", "n1", "a7", "a8", "a9"};
    ec_epoch_t *e3 = publish_split("jview", 3, ids3, 8, 2, e2);
    l.epoch = 3;
    ck_assert_msg(ec_test_wait(latest_is, &l, 5000), "epoch 3 not seen");
    ck_assert_msg(ec_test_wait(view_logged, "epoch 3: view of", 5000), "%s", view_log);
    ck_assert_msg(ecw_rebuild(w, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(ecw_rank(w), 4);
    ck_assert_int_eq(ecw_world_size(w), 8);
    ck_assert(claimed("jview", 3, 4));
    ecw_finalize(w);
    ec_epoch_free(e1);
    ec_epoch_free(e2);
    ec_epoch_free(e3);
}
END_TEST

START_TEST(none_backend_follows_epochs_and_claims_ranks)
{
    publish_epoch("jnone2", 1, 2, EC_REASON_START);
    ecw_t *w[2];
    w[0] = none_init("jnone2", 0);
    /* the environment's spelling, for the second */
    setenv("ECOORD_WORKER_BACKEND", "none", 1);
    ecw_options_t o = lib_opts("jnone2", 1);
    o.backend = ECW_BACKEND_AUTO; /* unset: taken from the environment */
    o.from_env = 1;
    ecw_error_t err = {0};
    int rc = ecw_init(&o, &w[1], &err);
    unsetenv("ECOORD_WORKER_BACKEND");
    ck_assert_msg(rc == 0, "%s", err.msg);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(ecw_backend(w[i]), ECW_BACKEND_NONE);
        ck_assert_int_eq(ecw_epoch(w[i]), 1);
        ck_assert_int_eq(ecw_rank(w[i]), i);
        ck_assert_int_eq(ecw_world_size(w[i]), 2);
        ck_assert_int_eq(ecw_member_index(w[i]), 0);
        ck_assert_int_eq(ecw_nproc(w[i]), 2);
        ck_assert_int_eq(ecw_epoch_pending(w[i]), 0);
        ck_assert_int_eq(ecw_confirmed(w[i]), 1); /* no fence configured */
        ck_assert_msg(claimed("jnone2", 1, i), "rank %d did not claim its rank in epoch 1", i);
    }
    ck_assert_str_eq(ecw_backend_name(ECW_BACKEND_NONE), "none");
    double v = 1;
    ck_assert_int_eq(ecw_allreduce(w[0], &v, 1, ECW_F64, ECW_SUM, &err), ECW_EINVAL);
    ck_assert_msg(strstr(err.msg, "builds no communicator"), "%s", err.msg);
    ck_assert_int_eq(ecw_barrier(w[1], &err), ECW_EINVAL);
    int64_t step = 1;
    char st[4] = "abc";
    ck_assert_int_eq(ecw_sync_state(w[0], st, sizeof(st), &step, NULL, &err), ECW_EINVAL);
    ck_assert_msg(strstr(err.msg, "builds no communicator"), "%s", err.msg);

    publish_epoch("jnone2", 2, 2, EC_REASON_RESTART);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(ec_test_wait(pending, w[i], 5000), "rank %d never saw epoch 2", i);
        ck_assert_msg(ecw_rebuild(w[i], &err) == 0, "%s", err.msg); /* no peer needed */
        ck_assert_int_eq(ecw_epoch(w[i]), 2);
        ck_assert_int_eq(ecw_epoch_pending(w[i]), 0);
        ck_assert(claimed("jnone2", 2, i));
    }
    for (int i = 0; i < 2; i++)
        ecw_finalize(w[i]);
}
END_TEST

typedef struct {
    ecw_t *w;
    uint64_t after, latest;
    int timeout_ms, rc;
    int64_t done_ms;
    ecw_error_t err;
    _Atomic int finished;
} waiter_t;

static void *wait_thread(void *arg)
{
    waiter_t *x = arg;
    x->rc = ecw_wait_epoch(x->w, x->after, x->timeout_ms, &x->latest, &x->err);
    x->done_ms = ec_test_now_ms();
    atomic_store(&x->finished, 1);
    return NULL;
}

static bool waiting(void *arg)
{
    return !atomic_load(&((waiter_t *)arg)->finished);
}

/* A program whose own collective failed (torch's, say) tells the library:
 * the handle's epoch is no longer usable (pending), and the members whose
 * agents do not answer a probe are reported under the epoch's suspect key
 * of this process (epochs/<n>/suspect/<node>/rank<local rank>),
 * so that the leader evicts them at once instead of at their lease's
 * expiry.  Epoch 1 has n1 (this process) and n2, whose agent never
 * registered (no record: nothing answers). */
START_TEST(report_failure_marks_the_epoch_and_reports_silent_members)
{
    const char *job = "jrepfail";
    const char *ids[] = {"n1", "n2"};
    write_epoch_of(job, 1, ids, 2, 1, EC_REASON_START, job, "n1");
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, job, NULL), 0);
    char key[EC_KEY_MAX];
    bool found = false;

    ecw_options_t o = lib_opts(job, 0);
    o.backend = ECW_BACKEND_NONE;
    ecw_t *w = NULL;
    ecw_error_t err = {0};
    ck_assert_msg(ecw_init(&o, &w, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(ecw_world_size(w), 2);
    ck_assert_int_eq(ecw_epoch_pending(w), 0);
    ck_assert_int_eq(ecw_report_failure(NULL, &err), ECW_EINVAL);
    ck_assert_msg(ecw_report_failure(w, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(ecw_epoch_pending(w), 1);
    /* under this process's own key (local rank 0), not the agent's */
    ck_assert_int_gt(ec_key_epoch_suspect_src(&k, 1, "n1", "rank0", key, sizeof(key)), 0);
    ec_kv_t kv;
    found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert_msg(found, "no suspect report under %s", key);
    ck_assert_msg(kv.value_len == 2 && !memcmp(kv.value, "n2", 2), "reported '%.*s', not n2",
                  (int)kv.value_len, (char *)kv.value);
    ec_kv_free(&kv);
    ecw_finalize(w);
}
END_TEST

/* ecw_wait_epoch, from a thread of its own as a watcher calls it: returns
 * when a newer epoch is published (measured: how soon), times out without
 * one, does not wait with timeout 0, and ends with ECW_EABORTED when the
 * handle is finalized under it. */
START_TEST(wait_epoch_wakes_on_new_epoch_and_times_out)
{
    publish_epoch("jwait", 1, 1, EC_REASON_START);
    ecw_t *w = none_init("jwait", 0);
    ecw_error_t err = {0};
    uint64_t latest = 0;
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(ecw_wait_epoch(w, 1, 200, &latest, &err), ECW_ETIMEDOUT);
    int64_t took = ec_test_now_ms() - t0;
    ck_assert_msg(took >= 190 && took < ec_test_ms(2000), "a 200 ms wait took %" PRId64 " ms",
                  took);
    ck_assert_int_eq(latest, 1);
    ck_assert_msg(strstr(err.msg, "no epoch after 1"), "%s", err.msg);
    ck_assert_int_eq(ecw_wait_epoch(w, 0, 0, &latest, &err), 0);
    ck_assert_int_eq(latest, 1);
    t0 = ec_test_now_ms();
    ck_assert_int_eq(ecw_wait_epoch(w, 1, 0, &latest, &err), ECW_ETIMEDOUT);
    ck_assert_int_lt(ec_test_now_ms() - t0, ec_test_ms(100));

    int64_t worst = 0;
    for (uint64_t n = 2; n <= 6; n++) {
        waiter_t x = {.w = w, .after = n - 1, .timeout_ms = 10000};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, wait_thread, &x), 0);
        ck_assert_msg(ec_test_holds(waiting, &x, 50), "ecw_wait_epoch returned early: %s",
                      x.err.msg);
        publish_epoch("jwait", n, 1, EC_REASON_RESTART);
        int64_t published = ec_test_now_ms();
        pthread_join(th, NULL);
        ck_assert_msg(x.rc == 0, "%s", x.err.msg);
        ck_assert_int_eq(x.latest, n);
        if (x.done_ms - published > worst)
            worst = x.done_ms - published;
    }
    ck_assert_msg(worst < ec_test_ms(1000), "ecw_wait_epoch woke %" PRId64 " ms after the epoch "
                  "was written", worst);
    printf("# ecw_wait_epoch woke at most %" PRId64 " ms after the epoch was written (5 "
           "epochs)\n", worst);
    ck_assert_int_eq(ecw_epoch_pending(w), 1);
    ck_assert_msg(ecw_rebuild(w, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(ecw_epoch(w), 6);

    /* finalize under a waiter: it returns ECW_EABORTED, finalize returns */
    waiter_t x = {.w = w, .after = 6, .timeout_ms = 30000};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_thread, &x), 0);
    ck_assert(ec_test_holds(waiting, &x, 50));
    t0 = ec_test_now_ms();
    ecw_finalize(w);
    pthread_join(th, NULL);
    ck_assert_int_eq(x.rc, ECW_EABORTED);
    ck_assert_int_lt(x.done_ms - t0, ec_test_ms(2000));
}
END_TEST

typedef struct {
    ecw_t *w;
    const char *name;
    int timeout_ms, rc;
    char buf[256];
    size_t len;
    int64_t done_ms;
    ecw_error_t err;
    _Atomic int finished;
} getter_t;

static void *get_thread(void *arg)
{
    getter_t *g = arg;
    g->rc = ecw_epoch_get(g->w, g->name, g->buf, sizeof(g->buf), &g->len, g->timeout_ms,
                          &g->err);
    g->done_ms = ec_test_now_ms();
    atomic_store(&g->finished, 1);
    return NULL;
}

static bool getting(void *arg)
{
    return !atomic_load(&((getter_t *)arg)->finished);
}

/* The per-epoch key/value: what one member puts the other gets (also when
 * it asked before the put); a value too big for the buffer says its size; a
 * missing key times out; bad names and oversized values are refused; each
 * epoch has its own keys. */
START_TEST(epoch_kv_put_by_one_member_got_by_another)
{
    publish_epoch("jkv", 1, 2, EC_REASON_START);
    ecw_t *w[2] = {none_init("jkv", 0), none_init("jkv", 1)};
    ecw_error_t err = {0};
    const char addr[] = "127.0.0.1:29500";
    ck_assert_msg(ecw_epoch_put(w[0], "torch.store", addr, strlen(addr), &err) == 0, "%s",
                  err.msg);
    char buf[64];
    size_t len = 0;
    ck_assert_msg(ecw_epoch_get(w[1], "torch.store", buf, sizeof(buf), &len, 1000, &err) == 0,
                  "%s", err.msg);
    ck_assert_uint_eq(len, strlen(addr));
    ck_assert(!memcmp(buf, addr, len));
    /* under the epoch's own keys */
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, "jkv", NULL), 0);
    char key[EC_KEY_MAX];
    ck_assert_int_gt(ec_key_epoch_kv(&k, 1, "torch.store", key, sizeof(key)), 0);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert(found);
    ec_kv_free(&kv);

    /* too small a buffer: ECW_ETOOLARGE with the size; a size query */
    ck_assert_int_eq(ecw_epoch_get(w[1], "torch.store", buf, 4, &len, 0, &err), ECW_ETOOLARGE);
    ck_assert_uint_eq(len, strlen(addr));
    ck_assert_int_eq(ecw_epoch_get(w[1], "torch.store", NULL, 0, &len, 0, &err), ECW_ETOOLARGE);
    ck_assert_uint_eq(len, strlen(addr));
    /* an empty value is a value */
    ck_assert_int_eq(ecw_epoch_put(w[0], "empty", NULL, 0, &err), 0);
    ck_assert_int_eq(ecw_epoch_get(w[1], "empty", NULL, 0, &len, 0, &err), 0);
    ck_assert_uint_eq(len, 0);

    /* missing: times out at its deadline */
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(ecw_epoch_get(w[1], "missing", buf, sizeof(buf), &len, 300, &err),
                     ECW_ETIMEDOUT);
    int64_t took = ec_test_now_ms() - t0;
    ck_assert_msg(took >= 290 && took < ec_test_ms(3000), "a 300 ms get took %" PRId64 " ms",
                  took);
    ck_assert_msg(strstr(err.msg, "missing") && strstr(err.msg, "late or dead"), "%s", err.msg);

    /* asked before it is put: returns once it is */
    getter_t g = {.w = w[1], .name = "late", .timeout_ms = 10000};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, get_thread, &g), 0);
    ck_assert(ec_test_holds(getting, &g, 100));
    ck_assert_int_eq(ecw_epoch_put(w[0], "late", "v2", 2, &err), 0);
    int64_t put_ms = ec_test_now_ms();
    pthread_join(th, NULL);
    ck_assert_msg(g.rc == 0, "%s", g.err.msg);
    ck_assert(g.len == 2 && !memcmp(g.buf, "v2", 2));
    printf("# ecw_epoch_get returned %" PRId64 " ms after the put\n", g.done_ms - put_ms);

    /* refused */
    char n65[66];
    memset(n65, 'n', 65);
    n65[65] = '\0';
    const char *bad[] = {"", "a/b", "..", ".", "sp ace", n65, NULL};
    for (int i = 0; i < 7; i++) {
        ck_assert_int_eq(ecw_epoch_put(w[0], bad[i], "x", 1, &err), ECW_EINVAL);
        ck_assert_int_eq(ecw_epoch_get(w[0], bad[i], buf, sizeof(buf), &len, 0, &err),
                         ECW_EINVAL);
        ck_assert_msg(strstr(err.msg, "epoch key name"), "%s", err.msg);
    }
    ck_assert_int_eq(ecw_epoch_put(w[0], n65 + 1, "x", 1, &err), 0); /* 64 is fine */
    static char big[ECW_EPOCH_VALUE_MAX + 1];
    ck_assert_int_eq(ecw_epoch_put(w[0], "big", big, sizeof(big), &err), ECW_ETOOLARGE);
    ck_assert_int_eq(ecw_epoch_put(w[0], "big", big, sizeof(big) - 1, &err), 0);
    ck_assert_int_eq(ecw_epoch_get(w[1], "torch.store", buf, sizeof(buf), NULL, 0, &err),
                     ECW_EINVAL);

    /* each epoch its own keys */
    publish_epoch("jkv", 2, 2, EC_REASON_RESTART);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(ec_test_wait(pending, w[i], 5000), "rank %d never saw epoch 2", i);
        ck_assert_msg(ecw_rebuild(w[i], &err) == 0, "%s", err.msg);
    }
    ck_assert_int_eq(ecw_epoch_get(w[1], "torch.store", buf, sizeof(buf), &len, 0, &err),
                     ECW_ETIMEDOUT);
    for (int i = 0; i < 2; i++)
        ecw_finalize(w[i]);
}
END_TEST

/* A get waiting for a key of epoch n returns ECW_EEPOCHCHANGED as soon as
 * epoch n + 1 is published, not at its deadline. */
START_TEST(epoch_get_returns_epoch_changed_when_newer_epoch_arrives)
{
    publish_epoch("jkvc", 1, 1, EC_REASON_START);
    ecw_t *w = none_init("jkvc", 0);
    getter_t g = {.w = w, .name = "torch.store", .timeout_ms = 20000};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, get_thread, &g), 0);
    ck_assert(ec_test_holds(getting, &g, 200));
    publish_epoch("jkvc", 2, 1, EC_REASON_RESTART);
    int64_t published = ec_test_now_ms();
    pthread_join(th, NULL);
    ck_assert_int_eq(g.rc, ECW_EEPOCHCHANGED);
    ck_assert_msg(strstr(g.err.msg, "ecw_rebuild"), "%s", g.err.msg);
    ck_assert_msg(g.done_ms - published < ec_test_ms(1000), "returned %" PRId64 " ms after the "
                  "epoch", g.done_ms - published);
    printf("# ecw_epoch_get: ECW_EEPOCHCHANGED %" PRId64 " ms after the epoch was written\n",
           g.done_ms - published);
    ecw_finalize(w);
}
END_TEST

/* With a lease nobody renews, the fence trips before etcd can expire it:
 * ecw_confirmed turns 0, a waiting ecw_wait_epoch returns
 * ECW_EUNCONFIRMED at once, and ecw_epoch_get refuses. */
START_TEST(wait_epoch_returns_unconfirmed_when_fence_trips)
{
    publish_epoch("jfence", 1, 1, EC_REASON_START);
    int64_t lease = 0, granted = 0;
    /* 5 s: ecw_init (and the checks right after it) have ~4 s before the
     * fence trips, however loaded the machine */
    ck_assert_int_eq(ec_etcd_lease_grant(c, 5, &lease, &granted, NULL), 0);
    int64_t granted_ms = ec_test_now_ms();
    ecw_options_t o = lib_opts("jfence", 0);
    o.backend = ECW_BACKEND_NONE;
    o.lease = lease;
    o.lease_ttl_ms = 5000;
    o.lease_margin_ms = 1000;
    ecw_t *w = NULL;
    ecw_error_t err = {0};
    ck_assert_msg(ecw_init(&o, &w, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(ecw_confirmed(w), 1);
    ck_assert_int_eq(ecw_epoch_put(w, "k", "v", 1, &err), 0);
    /* expires 5 s after the grant (etcd rounds the TTL it reports down): the
     * fence is up 1 s before, i.e. within ~3-4 s of the grant */
    waiter_t x = {.w = w, .after = 1, .timeout_ms = 20000};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_thread, &x), 0);
    pthread_join(th, NULL);
    ck_assert_msg(x.rc == ECW_EUNCONFIRMED, "%s: %s", ecw_err_name(x.rc), x.err.msg);
    ck_assert_msg(x.done_ms - granted_ms < ec_test_ms(5000), "fence seen %" PRId64 " ms after "
                  "the grant", x.done_ms - granted_ms);
    printf("# ecw_wait_epoch: ECW_EUNCONFIRMED %" PRId64 " ms after the 5 s lease was granted "
           "(margin 1 s)\n", x.done_ms - granted_ms);
    ck_assert_int_eq(ecw_confirmed(w), 0);
    char buf[8];
    size_t len = 0;
    ck_assert_int_eq(ecw_epoch_get(w, "k", buf, sizeof(buf), &len, 1000, &err),
                     ECW_EUNCONFIRMED);
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(ecw_wait_epoch(w, 1, 5000, NULL, &err), ECW_EUNCONFIRMED);
    ck_assert_int_lt(ec_test_now_ms() - t0, ec_test_ms(100));
    ck_assert_msg(strstr(err.msg, "membership cannot be confirmed"), "%s", err.msg);
    ecw_finalize(w);
}
END_TEST

/* NCCL: a one-rank communicator per epoch (one GPU admits one rank), rebuilt
 * when the epoch changes.  Skips with the reason where no GPU is visible. */
/* ---- the GPU libraries, loaded at run time (issue 14) ----------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    char text[16384];
} logbuf_t;

static void log_into(ecw_log_level_t lvl, const char *msg, void *arg)
{
    (void)lvl;
    logbuf_t *b = arg;
    pthread_mutex_lock(&b->mu);
    size_t n = strlen(b->text);
    snprintf(b->text + n, sizeof(b->text) - n, "%s\n", msg);
    pthread_mutex_unlock(&b->mu);
}

typedef struct {
    ecw_t *w;
    const char *job, *libdir;
    int lr, rc;
    ecw_backend_t backend;
    const char *rebuild; /* ECOORD_WORKER_NCCL_REBUILD; NULL: auto */
    const char *node;    /* NULL: "n1" */
    int roots, scalable_min;
    int warm;            /* ECOORD_WORKER_NCCL_WARM: 0 unless a case asks (the fake
                            NCCL's log then holds the case's own communicators only) */
    logbuf_t *log;
    double v;
    ecw_error_t err;
} gpu_member_t;

static ecw_options_t gpu_opts(const gpu_member_t *m)
{
    ecw_options_t o = lib_opts(m->job, m->lr);
    o.backend = m->backend;
    o.cuda_libdir = m->libdir;
    o.nccl_rebuild = m->rebuild;
    o.nccl_roots = m->roots;
    o.nccl_scalable_min = m->scalable_min;
    o.nccl_warm = m->warm; /* 0 unless a case asks: the fake NCCL's log holds its own */
    if (m->node)
        o.node_id = m->node;
    if (m->log) {
        o.log_cb = log_into;
        o.log_arg = m->log;
        o.log_level = ECW_LOG_DEBUG;
    }
    return o;
}

/* The fake CUDA and NCCL (tests/stub/cuda_stub.c) into stub (PATH_MAX):
 * false, with test's SKIP line, where this build has none (no NCCL). */
static bool stub_cuda(const char *test, char *stub)
{
    if (realpath("tests/stub/cuda", stub) && !access("tests/stub/cuda/libnccl.so.2", R_OK))
        return true;
    printf("# SKIP %s: no tests/stub/cuda (built without NCCL)\n", test);
    return false;
}

static void *gpu_init_thread(void *arg)
{
    gpu_member_t *m = arg;
    ecw_options_t o = gpu_opts(m);
    m->rc = ecw_init(&o, &m->w, &m->err);
    return NULL;
}

/* An empty directory to load libcudart and libnccl from: they cannot be. */
static const char *no_cuda_dir(void)
{
    static char dir[300];
    snprintf(dir, sizeof(dir), "%s/no-cuda", tmp);
    mkdir(dir, 0700);
    return dir;
}

/* Start worker/test/test_worker_prog as rank lr of job in a clean
 * environment (env -i: no LD_LIBRARY_PATH, nothing but the agent's
 * variables), output into console. */
static pid_t start_worker(const char *job, int lr, const char *backend, const char *libdir,
                          bool preload, const char *console)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "exec env -i PATH=/usr/bin:/bin ECOORD_ELASTIC_SERVER=%s ECOORD_JOB_ID=%s "
             "ECOORD_NODE_ID=n1 LOCAL_RANK=%d ECOORD_WORKER_BACKEND=%s "
             "ECOORD_WORKER_CUDA_LIBDIR=%s ECOORD_WORKER_REBUILD_TIMEOUT_MS=15000 %s%s",
             ec_embed_endpoint(etcd), job, lr, backend, libdir,
             ec_test_bin("ECW_TEST_WORKER", "worker/test/test_worker_prog"),
             preload ? " --preload" : "");
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t p = ec_test_spawn(argv, console);
    pids[npids++] = p;
    return p;
}

/* Reap a worker started above (and forget it); its exit status. */
static int reap_worker(pid_t p)
{
    int st = ec_test_reap(p, ec_test_ms(60000));
    for (int i = 0; i < npids; i++)
        if (pids[i] == p && st >= 0)
            pids[i] = pids[--npids];
    return st;
}

static const char *slurp(const char *path)
{
    static char buf[65536];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/* Where libcudart and libnccl cannot be loaded (processes in a clean
 * environment, ECOORD_WORKER_CUDA_LIBDIR an empty directory; the library
 * links neither): two "auto" ranks run Gloo, agree on it through rank 0's
 * key, allreduce, and neither library was loaded into them; backend nccl
 * fails ecw_init with ECW_ENOTFOUND naming libnccl.so.2 and where it was
 * looked for. */
START_TEST(gloo_runs_where_cuda_libraries_cannot_be_loaded)
{
    const char *empty = no_cuda_dir();
    publish_epoch("jnocuda", 1, 2, EC_REASON_START);
    char con[2][400];
    pid_t p[2];
    for (int i = 0; i < 2; i++) {
        snprintf(con[i], sizeof(con[i]), "%s/nocuda.%d", tmp, i);
        p[i] = start_worker("jnocuda", i, "auto", empty, false, con[i]);
    }
    for (int i = 0; i < 2; i++) {
        int st = reap_worker(p[i]);
        const char *out = slurp(con[i]);
        ck_assert_msg(st == 0, "rank %d exited %d:\n%s", i, st, out);
        ck_assert_msg(strstr(out, "ran backend=gloo allreduce=ECW_OK sum=2\n") &&
                          strstr(out, "loaded nccl=0 cudart=0"),
                      "rank %d:\n%s", i, out);
        ck_assert_msg(strstr(out, "backend auto:") && strstr(out, "using gloo"), "%s", out);
        const char *why = strstr(out, "backend auto:");
        printf("# rank %d: %.*s\n", i, (int)strcspn(why, "\n"), why);
    }
    /* rank 0's choice is in the epoch's keys */
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, "jnocuda", NULL), 0);
    char key[EC_KEY_MAX];
    ck_assert_int_gt(ec_key_epoch_comm(&k, 1, "backend", key, sizeof(key)), 0);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert(found);
    ck_assert_str_eq((const char *)kv.value, "gloo");
    ec_kv_free(&kv);

    /* NCCL asked for: a clear error naming the library and where it looked */
    publish_epoch("jnocuda2", 1, 1, EC_REASON_START);
    char one[400];
    snprintf(one, sizeof(one), "%s/nocuda.nccl", tmp);
    int st = reap_worker(start_worker("jnocuda2", 0, "nccl", empty, false, one));
    const char *out = slurp(one);
    ck_assert_msg(st == 2, "exited %d:\n%s", st, out);
    if (strstr(out, "built without NCCL")) {
        printf("# this library has no NCCL backend\n");
        return;
    }
    ck_assert_msg(strstr(out, "init failed: ECW_ENOTFOUND") && strstr(out, "libnccl.so.2") &&
                      strstr(out, empty) && strstr(out, "ECOORD_WORKER_CUDA_LIBDIR") &&
                      strstr(out, "loaded nccl=0 cudart=0"),
                  "%s", out);
    const char *line = strstr(out, "init failed:");
    printf("# backend nccl: %.*s\n", (int)strcspn(line, "\n"), line);
}
END_TEST

/* An NCCL the process already loaded (as torch does) is the one taken, even
 * with a directory named that holds none, and the log says which file; no
 * GPU here (no driver): "auto" then runs Gloo and backend nccl says there is
 * no usable GPU.  Skips where libnccl or libcudart is not on the loader's
 * path, or without an NCCL backend. */
START_TEST(auto_takes_the_nccl_already_loaded)
{
    const char *empty = no_cuda_dir();
    publish_epoch("jpreload", 1, 1, EC_REASON_START);
    char con[400];
    snprintf(con, sizeof(con), "%s/preload.auto", tmp);
    int st = reap_worker(start_worker("jpreload", 0, "auto", empty, true, con));
    const char *out = slurp(con);
    if (st == 3 || strstr(out, "built without NCCL")) {
        printf("# SKIP auto_takes_the_nccl_already_loaded: %s\n",
               st == 3 ? "no libnccl.so.2 or libcudart on the loader's path" : "no NCCL backend");
        return;
    }
    ck_assert_msg(st == 0, "exited %d:\n%s", st, out);
    ck_assert_msg(strstr(out, "libnccl.so.2, already loaded in this process"), "%s", out);
    const char *line = strstr(out, "+cuda");
    ck_assert_ptr_nonnull(line);
    printf("# %.*s\n", (int)strcspn(line, "\n"), line);
    if (strstr(out, "ran backend=nccl"))
        return; /* a GPU here */
    ck_assert_msg(strstr(out, "ran backend=gloo allreduce=ECW_OK sum=1") &&
                      (strstr(out, "no usable GPU") || strstr(out, "no GPU visible")),
                  "%s", out);
    publish_epoch("jpreload2", 1, 1, EC_REASON_START);
    snprintf(con, sizeof(con), "%s/preload.nccl", tmp);
    st = reap_worker(start_worker("jpreload2", 0, "nccl", empty, true, con));
    out = slurp(con);
    ck_assert_msg(st == 2 && strstr(out, "init failed: ECW_ENOTFOUND backend nccl asked for, "
                                         "but no"),
                  "exited %d:\n%s", st, out);
}
END_TEST

/* Under an NCCL already in the process (here the fake one, as torch's
 * would be) "auto" runs NCCL, and a program's collective on a buffer in
 * the GPU's memory succeeds (a host buffer is refused under NCCL: the test
 * program allocates one through the CUDA runtime the process loaded). */
START_TEST(auto_under_a_loaded_nccl_reduces_device_memory)
{
    char stub[PATH_MAX];
    if (!stub_cuda("auto_under_a_loaded_nccl_reduces_device_memory", stub))
        return;
    publish_epoch("jdevmem", 1, 1, EC_REASON_START);
    char con[400], cmd[2400];
    snprintf(con, sizeof(con), "%s/devmem.auto", tmp);
    snprintf(cmd, sizeof(cmd),
             "exec env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH=%s ECOORD_ELASTIC_SERVER=%s "
             "ECOORD_JOB_ID=jdevmem ECOORD_NODE_ID=n1 LOCAL_RANK=0 ECOORD_WORKER_BACKEND=auto "
             "ECOORD_WORKER_REBUILD_TIMEOUT_MS=15000 %s --preload",
             stub, ec_embed_endpoint(etcd),
             ec_test_bin("ECW_TEST_WORKER", "worker/test/test_worker_prog"));
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t p = ec_test_spawn(argv, con);
    pids[npids++] = p;
    int st = reap_worker(p);
    const char *out = slurp(con);
    ck_assert_msg(st == 0, "exited %d:\n%s", st, out);
    ck_assert_msg(strstr(out, "ran backend=nccl allreduce=ECW_OK sum=1"), "%s", out);
}
END_TEST

/* Every member runs rank 0's backend: with rank 0's choice "nccl" in the
 * epoch's keys, an "auto" rank that cannot run NCCL, and a rank told gloo,
 * fail ecw_init at once, saying what to set, instead of waiting for a
 * rendezvous that never comes. */
START_TEST(members_refuse_a_backend_other_than_rank_0s)
{
    publish_epoch("jagree", 1, 2, EC_REASON_START);
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, "jagree", NULL), 0);
    char key[EC_KEY_MAX];
    ck_assert_int_gt(ec_key_epoch_comm(&k, 1, "backend", key, sizeof(key)), 0);
    ck_assert_int_eq(ec_etcd_put(c, key, "nccl", 4, 0, NULL, NULL), 0); /* rank 0 */
    gpu_member_t m = {.job = "jagree", .libdir = no_cuda_dir(), .lr = 1,
                      .backend = ECW_BACKEND_AUTO};
    int64_t t0 = ec_test_now_ms();
    if (dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD)) {
        /* an NCCL case ran in this process (CK_FORK=no, a GPU machine):
         * the loaded NCCL is taken (cuda_dl.c), so "auto" can run it */
        printf("# auto half skipped: libnccl.so.2 is already loaded in this process\n");
    } else {
        gpu_init_thread(&m);
        ck_assert_msg(m.rc == ECW_ENOTFOUND || m.rc == ECW_EINVAL, "%s: %s", ecw_err_name(m.rc),
                      m.err.msg);
        ck_assert_msg(strstr(m.err.msg, "rank 0 of epoch 1 runs") &&
                          strstr(m.err.msg, "ECOORD_WORKER_BACKEND"),
                      "%s", m.err.msg);
        printf("# auto, rank 0 runs nccl: %s\n", m.err.msg);
    }
    /* another job: rank 1 of jagree is claimed by the process above now */
    publish_epoch("jagree2", 1, 2, EC_REASON_START);
    ck_assert_int_eq(ec_keys_init(&k, NULL, "jagree2", NULL), 0);
    ck_assert_int_gt(ec_key_epoch_comm(&k, 1, "backend", key, sizeof(key)), 0);
    ck_assert_int_eq(ec_etcd_put(c, key, "nccl", 4, 0, NULL, NULL), 0);
    m.job = "jagree2";
    m.backend = ECW_BACKEND_GLOO;
    gpu_init_thread(&m);
    ck_assert_int_eq(m.rc, ECW_EINVAL);
    ck_assert_msg(strstr(m.err.msg, "rank 0 of epoch 1 runs backend 'nccl', this process gloo"),
                  "%s", m.err.msg);
    printf("# gloo, rank 0 runs nccl: %s\n", m.err.msg);
    ck_assert_int_lt(ec_test_now_ms() - t0, ec_test_ms(5000));
}
END_TEST

/* A member waits for rank 0's first word of the build (the backend it runs)
 * no longer than a connect (timeout_ms), not the whole rebuild: a rank 0
 * that never comes (its node died as the epoch came out) is given up on and
 * reported like a peer that never published its address, whatever rank the
 * waiting process holds. */
typedef struct {
    gpu_member_t m;
    int timeout_ms;
} timed_member_t;

static void *timed_init_thread(void *arg)
{
    timed_member_t *t = arg;
    ecw_options_t o = gpu_opts(&t->m);
    o.timeout_ms = t->timeout_ms;
    o.suspect_after_ms = 120000; /* no early probe: the connect's bound alone */
    o.rebuild_timeout_ms = 120000;
    t->m.rc = ecw_init(&o, &t->m.w, &t->m.err);
    return NULL;
}

static bool build_1_failed(void *arg)
{
    logbuf_t *b = arg;
    pthread_mutex_lock(&b->mu);
    bool yes = strstr(b->text, "building epoch 1 failed") != NULL;
    pthread_mutex_unlock(&b->mu);
    return yes;
}

START_TEST(a_member_waits_for_rank_0_no_longer_than_a_connect)
{
    publish_epoch("jr0gone", 1, 2, EC_REASON_START);
    logbuf_t log = {PTHREAD_MUTEX_INITIALIZER, ""};
    /* rank 1 alone: rank 0's process never starts */
    int tmo = (int)ec_test_ms(2000);
    timed_member_t r1 = {{.job = "jr0gone", .libdir = no_cuda_dir(), .lr = 1,
                          .backend = ECW_BACKEND_GLOO, .log = &log},
                         tmo};
    int64_t t0 = ec_test_now_ms();
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, timed_init_thread, &r1), 0);
    /* the rebuild's own bound is 120 s */
    bool failed = ec_test_wait(build_1_failed, &log, 10000);
    int64_t took = ec_test_now_ms() - t0;
    if (!failed) {
        publish_epoch("jr0gone", 2, 1, EC_REASON_RESTART); /* release it */
        pthread_join(th, NULL);
        ck_abort_msg("rank 1 still waited for rank 0 %" PRId64 " ms later (timeout_ms %d):\n%s",
                     took, tmo, log.text);
    }
    printf("# rank 1 gave up on a rank 0 that never came after %" PRId64 " ms (timeout_ms %d)\n",
           took, tmo);
    ck_assert_msg(strstr(log.text, "rank 0 of epoch 1"), "%s", log.text);
    /* the next epoch, with rank 0 there: both build it */
    publish_epoch("jr0gone", 2, 2, EC_REASON_RESTART);
    timed_member_t r0 = {{.job = "jr0gone", .libdir = no_cuda_dir(), .lr = 0,
                          .backend = ECW_BACKEND_GLOO},
                         tmo};
    timed_init_thread(&r0);
    pthread_join(th, NULL);
    ck_assert_msg(r0.m.rc == 0 && r1.m.rc == 0, "rank 0: %s; rank 1: %s", r0.m.err.msg,
                  r1.m.err.msg);
    ck_assert_int_eq(ecw_epoch(r1.m.w), 2);
    ecw_finalize(r0.m.w);
    ecw_finalize(r1.m.w);
}
END_TEST

/* ecw_iallreduce returns at once and ecw_wait keeps its deadline: with the
 * peer not there yet, a 50 ms wait returns ECW_WAIT_PENDING after 50 ms and
 * the request goes on; every other call on the handle is refused while it is
 * in flight; once the peer joins, both complete with the sum.  A request
 * blocked on a peer that never comes is released by a new epoch
 * (ECW_EEPOCHCHANGED, measured), and ecw_finalize ends one in flight. */
START_TEST(iallreduce_waits_with_a_deadline_and_is_released_by_an_epoch)
{
    publish_epoch("jasync", 1, 2, EC_REASON_START);
    member_t m[2] = {{.lr = 0, .job = "jasync"}, {.lr = 1, .job = "jasync"}};
    both(m, init_thread);
    double v0 = 1, v1 = 1;
    ecw_request_t *r0 = NULL, *r1 = NULL;
    ecw_error_t err = {0};
    ck_assert_msg(ecw_iallreduce(m[0].w, &v0, 1, ECW_F64, ECW_SUM, &r0, &err) == 0, "%s",
                  err.msg);
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(ecw_wait(r0, 50, &err), ECW_WAIT_PENDING);
    int64_t took = ec_test_now_ms() - t0;
    ck_assert_msg(took >= 45 && took < ec_test_ms(2000), "waited %" PRId64 " ms", took);
    ck_assert_int_eq(ecw_barrier(m[0].w, &err), ECW_EINVAL);
    ck_assert_msg(strstr(err.msg, "ecw_wait"), "%s", err.msg);
    ck_assert_int_eq(ecw_iallreduce(m[0].w, &v0, 1, ECW_F64, ECW_SUM, &r1, &err), ECW_EINVAL);
    ck_assert_ptr_null(r1);
    ck_assert_int_eq(ecw_rebuild(m[0].w, &err), ECW_EINVAL);
    ck_assert_msg(ecw_iallreduce(m[1].w, &v1, 1, ECW_F64, ECW_SUM, &r1, &err) == 0, "%s",
                  err.msg);
    ck_assert_msg(ecw_wait(r0, 30000, &err) == 0, "%s", err.msg);
    ck_assert_msg(ecw_wait(r1, 30000, &err) == 0, "%s", err.msg);
    ck_assert(v0 == 2.0 && v1 == 2.0);
    ck_assert_int_eq(ecw_wait(NULL, 0, &err), ECW_EINVAL);

    /* rank 1 never joins: the epoch releases rank 0's request */
    v0 = 1;
    ck_assert_msg(ecw_iallreduce(m[0].w, &v0, 1, ECW_F64, ECW_SUM, &r0, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(ecw_wait(r0, 100, &err), ECW_WAIT_PENDING);
    int64_t tp = ec_test_now_ms();
    publish_epoch("jasync", 2, 2, EC_REASON_RESTART);
    int rc = ecw_wait(r0, 30000, &err);
    int64_t released = ec_test_now_ms() - tp;
    ck_assert_msg(rc == ECW_EEPOCHCHANGED, "%s: %s", ecw_err_name(rc), err.msg);
    ck_assert_msg(released < ec_test_ms(5000), "released after %" PRId64 " ms", released);
    printf("# ecw_iallreduce released %" PRId64 " ms after the epoch was published\n",
           released);

    /* a request in flight at finalize: both move to epoch 2 first (rank 1
     * finished its request before epoch 2, so only its watcher tells it) */
    wait_both_see(m, 2);
    both(m, rebuild_thread);
    ck_assert_msg(ecw_iallreduce(m[1].w, &v1, 1, ECW_F64, ECW_SUM, &r1, &err) == 0, "%s",
                  err.msg);
    t0 = ec_test_now_ms();
    ecw_finalize(m[1].w);
    ck_assert_int_lt(ec_test_now_ms() - t0, ec_test_ms(5000));
    ecw_finalize(m[0].w);
}
END_TEST

START_TEST(nccl_rebuilds_per_epoch)
{
    publish_epoch("jnccl", 1, 1, EC_REASON_START);
    ecw_options_t o = lib_opts("jnccl", 0);
    o.backend = ECW_BACKEND_NCCL;
    ecw_t *w = NULL;
    ecw_error_t err;
    int rc = ecw_init(&o, &w, &err);
    if (rc == ECW_ENOTFOUND || rc == ECW_EINVAL) {
        ck_assert_msg(strstr(err.msg, "GPU") || strstr(err.msg, "NCCL"), "%s", err.msg);
        printf("# SKIP nccl_rebuilds_per_epoch: %s\n", err.msg);
        return;
    }
    ck_assert_msg(rc == 0, "%s", err.msg);
    ck_assert_int_eq(ecw_backend(w), ECW_BACKEND_NCCL);
    ck_assert_int_eq(ecw_barrier(w, &err), 0);
    publish_epoch("jnccl", 2, 1, EC_REASON_RESTART);
    while (!ecw_epoch_pending(w))
        ck_assert_int_eq(ecw_barrier(w, &err) == 0 || err.code == ECW_EEPOCHCHANGED, 1);
    ck_assert_msg(ecw_rebuild(w, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(ecw_epoch(w), 2);
    int64_t step = 3;
    ck_assert_msg(ecw_sync_state(w, NULL, 0, &step, NULL, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(ecw_barrier(w, &err), 0);
    ecw_finalize(w);
}
END_TEST

/* ---- NCCL's rebuild per epoch, through a fake CUDA and NCCL ------------------------------ */

typedef struct {
    const char *job;
    uint64_t epoch;
    int rank;
    char method[64];
    int64_t shrink_us, init_us;
} method_want_t;

/* The epoch's timing record of rank says how its communicator was built. */
static bool timing_has_method(void *arg)
{
    method_want_t *t = arg;
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, t->job, NULL), 0);
    char key[EC_KEY_MAX];
    ec_key_epoch_timing(&k, t->epoch, t->rank, key, sizeof(key));
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0 || !found)
        return false;
    ec_worker_timing_t *tm = NULL;
    int rc = ec_worker_timing_decode(kv.value, kv.value_len, key, &tm, NULL);
    ec_kv_free(&kv);
    ck_assert_int_eq(rc, 0);
    bool ok = tm->comm_method && !strcmp(tm->comm_method, t->method) && tm->comm_ready_at_us > 0;
    if (ok) {
        t->shrink_us = tm->shrink_us;
        t->init_us = tm->init_us;
    }
    ec_worker_timing_free(tm);
    return ok;
}

static void *barrier_thread(void *arg)
{
    gpu_member_t *m = arg;
    m->rc = ecw_barrier(m->w, &m->err);
    return NULL;
}

typedef struct {
    const char *log;
    int n;
} busy_want_t;

/* n collectives wait on a busy stream of the fake CUDA. */
static bool streams_busy(void *arg)
{
    busy_want_t *b = arg;
    int n = 0;
    for (const char *p = slurp(b->log); (p = strstr(p, "stream busy")); p++)
        n++;
    return n >= b->n;
}

/* Rebuild m into epoch (its communicator idle or already cut off). */
static void rebuild_to(gpu_member_t *m, uint64_t epoch)
{
    ecw_error_t err;
    ck_assert(ec_test_wait(pending, m->w, 5000));
    ck_assert_msg(ecw_rebuild(m->w, &err) == 0, "rank of local %d: %s", m->lr, err.msg);
    ck_assert_int_eq(ecw_epoch(m->w), epoch);
    ck_assert_msg(ecw_barrier(m->w, &err) == 0, "%s", err.msg);
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

typedef struct {
    const char *log;
    const char *needle;
    int n;
} count_want_t;

static bool log_has_n(void *arg)
{
    count_want_t *cw = arg;
    return count_of(slurp(cw->log), cw->needle) >= cw->n;
}

/* One rank of job against the fake NCCL, every ncclCommAbort held at a
 * gate, and a collective in flight (the stream busy until an abort begins)
 * cut off by epoch 2: the member (logging into log), its stub log and its
 * gate.  false, with
 * test's SKIP line, where this build has no fake NCCL. */
typedef struct {
    gpu_member_t m;
    const char *job;
    char stub[PATH_MAX], slog[400], gate[400];
} gated_t;

static bool gated_cut(gated_t *g, const char *test, const char *job, logbuf_t *log)
{
    memset(g, 0, sizeof(*g));
    if (!stub_cuda(test, g->stub))
        return false;
    g->job = job;
    snprintf(g->slog, sizeof(g->slog), "%s/cuda_stub_%s.log", tmp, job);
    snprintf(g->gate, sizeof(g->gate), "%s/abort_gate_%s", tmp, job);
    unlink(g->gate);
    setenv("CUDA_STUB_LOG", g->slog, 1);
    setenv("CUDA_STUB_ABORT_GATE", g->gate, 1);
    unsetenv("CUDA_STUB_SHRINK");
    publish_epoch(job, 1, 1, EC_REASON_START);
    g->m = (gpu_member_t){.job = job, .libdir = g->stub, .lr = 0, .backend = ECW_BACKEND_NCCL,
                          .rebuild = "init", .log = log};
    gpu_init_thread(&g->m);
    ck_assert_msg(g->m.rc == 0, "%s", g->m.err.msg);
    setenv("CUDA_STUB_STREAM", "busy", 1);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, barrier_thread, &g->m), 0);
    busy_want_t bw = {g->slog, 1};
    ck_assert(ec_test_wait(streams_busy, &bw, 5000));
    publish_epoch(job, 2, 1, EC_REASON_RESTART);
    pthread_join(t, NULL);
    ck_assert_msg(g->m.rc == ECW_EEPOCHCHANGED || g->m.rc == ECW_EABORTED, "%d %s", g->m.rc,
                  g->m.err.msg);
    unsetenv("CUDA_STUB_STREAM");
    return true;
}

/* Let the held aborts end. */
static void open_gate(const gated_t *g)
{
    int fd = open(g->gate, O_CREAT | O_WRONLY, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

/* The old communicator's teardown is off the critical path (issue 25: an
 * NCCL abort took ~990 ms of a ~1 s rebuild): with every ncclCommAbort of
 * the fake NCCL held until a gate file exists, a collective an epoch cut
 * off returns, and ecw_rebuild builds and uses the next communicator, while
 * the old one's abort has not returned; a second change does the same with
 * two aborts pending; opening the gate lets them end, and ecw_finalize waits
 * for them.  Against tests/stub/cuda_stub.c (the library's flow, not NCCL's
 * timing: tests/gpu/ measures that). */
START_TEST(nccl_teardown_runs_beside_the_next_build)
{
    static logbuf_t log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    gated_t g;
    if (!gated_cut(&g, "nccl_teardown_runs_beside_the_next_build", "jretire", &log))
        return;
    gpu_member_t m = g.m;
    const char *slog = g.slog;
    /* returned, although no abort has ended */
    ck_assert_msg(count_of(slurp(slog), "abort rank=") == 0, "an abort returned before the "
                  "gate opened:\n%s", slurp(slog));
    /* the next communicator is built and runs while the old one's abort waits */
    rebuild_to(&m, 2);
    count_want_t aborting = {slog, "aborting rank=0 nranks=1", 1};
    ck_assert_msg(ec_test_wait(log_has_n, &aborting, 5000), "the old communicator was not "
                  "aborted beside the build:\n%s", slurp(slog));
    ck_assert_int_eq(count_of(slurp(slog), "abort rank="), 0);
    ck_assert_int_eq(count_of(slurp(slog), "init rank=0 nranks=1"), 2);
    /* a second change: two aborts pending, the third communicator runs */
    publish_epoch(g.job, 3, 1, EC_REASON_RESTART);
    rebuild_to(&m, 3);
    aborting.n = 2;
    ck_assert_msg(ec_test_wait(log_has_n, &aborting, 5000), "%s", slurp(slog));
    ck_assert_int_eq(count_of(slurp(slog), "abort rank="), 0);
    /* the gate opens: both end; finalize waits for them, then aborts the last */
    open_gate(&g);
    ecw_finalize(m.w);
    ck_assert_msg(count_of(slurp(slog), "abort rank=0 nranks=1") == 3, "%s", slurp(slog));
    ck_assert_msg(strstr(log.text, "retired: destroyed off the training thread"), "%s",
                  log.text);
    unsetenv("CUDA_STUB_ABORT_GATE");
}
END_TEST

/* NCCL's one-time set-up is paid while the process boots, before it says it
 * is ready: each rank builds a one-rank communicator in ecw_init and drops it
 * off the training thread, and only then the epoch's (on an H200 the first
 * init of a process took ~0.4 s, a later one ~11 ms: a joiner's peers waited
 * for its first).  Two local ranks against the fake NCCL: both warm-ups
 * (one rank each) come before the epoch's two-rank inits, and both are
 * aborted. */
START_TEST(nccl_is_set_up_while_the_process_boots)
{
    char stub[PATH_MAX], slog[400];
    if (!stub_cuda("nccl_is_set_up_while_the_process_boots", stub))
        return;
    snprintf(slog, sizeof(slog), "%s/cuda_stub_warm.log", tmp);
    setenv("CUDA_STUB_LOG", slog, 1);
    unsetenv("CUDA_STUB_SHRINK");
    unsetenv("CUDA_STUB_STREAM");
    unsetenv("CUDA_STUB_ABORT_GATE");
    const char *job = "jwarm";
    publish_epoch(job, 1, 2, EC_REASON_START);
    static logbuf_t logs[2] = {{.mu = PTHREAD_MUTEX_INITIALIZER},
                               {.mu = PTHREAD_MUTEX_INITIALIZER}};
    gpu_member_t m[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        m[i] = (gpu_member_t){.job = job, .libdir = stub, .lr = i, .backend = ECW_BACKEND_NCCL,
                              .rebuild = "init", .log = &logs[i], .warm = 1};
        ck_assert_int_eq(pthread_create(&t[i], NULL, gpu_init_thread, &m[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(m[i].rc == 0, "local rank %d: %s", i, m[i].err.msg);
        ck_assert_msg(strstr(logs[i].text, "+nccl warmed up in "), "%s", logs[i].text);
    }
    count_want_t aborted = {slog, "abort rank=0 nranks=1\n", 2};
    ck_assert_msg(ec_test_wait(log_has_n, &aborted, 5000), "%s", slurp(slog));
    const char *out = slurp(slog);
    const char *epoch_init = strstr(out, "nranks=2 roots=1");
    ck_assert_msg(epoch_init, "%s", out);
    char *before = strndup(out, (size_t)(epoch_init - out));
    ck_assert_msg(count_of(before, "init rank=0 nranks=1 roots=1") == 2, "%s", out);
    free(before);
    for (int i = 0; i < 2; i++)
        ecw_finalize(m[i].w);
}
END_TEST

/* A collective an epoch cut off returns only once nothing of it runs on the
 * GPU any more: its communicator's abort has begun (NCCL's abort first
 * raises the flag its kernels poll, so they end within milliseconds) and the
 * library's stream is idle, so the caller may write the buffer again at once;
 * the rest of the abort (~0.6 s on an H200) goes on off the training thread.
 * On a GPU, a kernel left running there wrote into the buffer after the
 * caller had refilled it (linreg: "params differ" after a leave).  Against
 * the fake NCCL, whose busy kernels end when an abort begins and whose
 * aborts wait for a gate. */
START_TEST(a_cut_collective_returns_once_its_kernel_stopped)
{
    static logbuf_t log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    gated_t g;
    if (!gated_cut(&g, "a_cut_collective_returns_once_its_kernel_stopped", "jcut", &log))
        return;
    gpu_member_t m = g.m;
    const char *slog = g.slog;
    const char *out = slurp(slog);
    const char *began = strstr(out, "aborting rank=0 nranks=1");
    ck_assert_msg(began && strstr(began, "stream drained"), "the cut collective returned while "
                  "its kernel could still run:\n%s", out);
    ck_assert_msg(count_of(out, "abort rank=") == 0, "the cut collective waited for the whole "
                  "abort:\n%s", out);
    open_gate(&g);
    rebuild_to(&m, 2);
    ecw_finalize(m.w);
    ck_assert_msg(count_of(slurp(slog), "abort rank=0 nranks=1") == 2, "%s", slurp(slog));
    unsetenv("CUDA_STUB_ABORT_GATE");
}
END_TEST

/* An epoch that only removes ranks shrinks the previous communicator
 * (ncclCommShrink, excluding exactly the removed old ranks, sorted, no
 * shared resources): a healthy one with NCCL_SHRINK_DEFAULT, one whose
 * collective the epoch cut off with NCCL_SHRINK_ABORT (knob at shrink); a
 * shrink whose new communicator fails falls back to a full init of the same
 * epoch; the same members again are a full init; each says so in the log
 * and in the epoch's timing record.  Runs the NCCL backend against
 * tests/stub/cuda_stub.c, a fake CUDA and NCCL: the library's flow, not
 * NCCL's behaviour (docs/worker-api.md, "Rebuild cost at scale": what a GPU run must
 * confirm).  One node, N = 4, 3, 2, 1, 1. */
START_TEST(nccl_shrinks_an_epoch_that_only_removes_ranks)
{
    char stub[PATH_MAX], slog[400];
    if (!stub_cuda("nccl_shrinks_an_epoch_that_only_removes_ranks", stub))
        return;
    snprintf(slog, sizeof(slog), "%s/cuda_stub.log", tmp);
    setenv("CUDA_STUB_LOG", slog, 1);
    unsetenv("CUDA_STUB_SHRINK");
    const char *job = "jshrink";
    publish_epoch(job, 1, 4, EC_REASON_START);
    static logbuf_t logs[4] = {{.mu = PTHREAD_MUTEX_INITIALIZER},
                               {.mu = PTHREAD_MUTEX_INITIALIZER},
                               {.mu = PTHREAD_MUTEX_INITIALIZER},
                               {.mu = PTHREAD_MUTEX_INITIALIZER}};
    gpu_member_t m[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        m[i] = (gpu_member_t){.job = job, .libdir = stub, .lr = i, .backend = ECW_BACKEND_NCCL,
                              .rebuild = "shrink", .log = &logs[i]};
        ck_assert_int_eq(pthread_create(&t[i], NULL, gpu_init_thread, &m[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(m[i].rc == 0, "local rank %d: %s", i, m[i].err.msg);
        ck_assert_int_eq(ecw_backend(m[i].w), ECW_BACKEND_NCCL);
    }
    ck_assert_msg(strstr(logs[0].text, "+nccl epoch 1: init (1 root) of 4 ranks"), "%s",
                  logs[0].text);
    method_want_t mw = {.job = job, .epoch = 1, .rank = 0, .method = "init 1 root"};
    ck_assert(ec_test_wait(timing_has_method, &mw, 5000));

    /* N 4 -> 3, idle: local rank 3 (old rank 3) goes, the others shrink */
    publish_epoch(job, 2, 3, EC_REASON_LEAVE);
    for (int i = 0; i < 3; i++)
        rebuild_to(&m[i], 2);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(strstr(logs[i].text, "+nccl epoch 2: shrink from 4 to 3 ranks in "),
                      "%s", logs[i].text);
    const char *out = slurp(slog);
    for (int i = 0; i < 3; i++) {
        char want[120];
        snprintf(want, sizeof(want), "shrink rank=%d nranks=4 excl=3 flags=0 share=0 -> rank %d "
                 "of 3\n", i, i);
        ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
    }
    mw = (method_want_t){.job = job, .epoch = 2, .rank = 2, .method = "shrink"};
    ck_assert(ec_test_wait(timing_has_method, &mw, 5000));
    ck_assert(mw.shrink_us > 0 && mw.init_us == 0);
    ecw_finalize(m[3].w); /* excluded: takes no part */

    /* N 3 -> 2, a collective cut off by the epoch: kept and shrunk with abort */
    setenv("CUDA_STUB_STREAM", "busy", 1);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, barrier_thread, &m[i]), 0);
    busy_want_t bw = {slog, 2};
    ck_assert(ec_test_wait(streams_busy, &bw, 5000));
    publish_epoch(job, 3, 2, EC_REASON_LEAVE);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(m[i].rc == ECW_EEPOCHCHANGED || m[i].rc == ECW_EABORTED, "%d %s",
                      m[i].rc, m[i].err.msg);
    }
    unsetenv("CUDA_STUB_STREAM");
    for (int i = 0; i < 2; i++)
        rebuild_to(&m[i], 3);
    out = slurp(slog);
    ck_assert_msg(strstr(out, "shrink rank=0 nranks=3 excl=2 flags=1 share=0 -> rank 0 of 2\n") &&
                      strstr(out, "shrink rank=1 nranks=3 excl=2 flags=1 share=0 -> rank 1 of 2\n"),
                  "%s\n%s", out, logs[0].text);
    ck_assert_msg(strstr(logs[0].text, "+nccl epoch 3: shrink from 3 to 2 ranks in ") &&
                      strstr(logs[0].text, "cut off mid-collective (NCCL_SHRINK_ABORT)"), "%s",
                  logs[0].text);
    ecw_finalize(m[2].w);

    /* N 2 -> 1, and the shrunk communicator fails: a full init instead */
    setenv("CUDA_STUB_SHRINK", "fail", 1);
    publish_epoch(job, 4, 1, EC_REASON_LEAVE);
    rebuild_to(&m[0], 4);
    unsetenv("CUDA_STUB_SHRINK");
    ck_assert_msg(strstr(logs[0].text, "nccl epoch 4: shrink from 2 to 1 ranks failed after") &&
                      strstr(logs[0].text, "+nccl epoch 4: init (1 root) of 1 ranks"),
                  "%s", logs[0].text);
    out = slurp(slog);
    /* the failed child goes first; the parent beside the init, off the
     * training thread (retire.c): its abort may come after the rebuild */
    count_want_t parent = {slog, "abort rank=0 nranks=2\n", 1};
    ck_assert_msg(ec_test_wait(log_has_n, &parent, 5000), "%s", slurp(slog));
    out = slurp(slog);
    const char *failed = strstr(out, "shrink rank=0 nranks=2 excl=1 flags=0 share=0 -> rank 0 of 1 "
                                     "(fails)\nabort rank=0 nranks=1\n");
    ck_assert_msg(failed && strstr(failed, "abort rank=0 nranks=2\n") &&
                      strstr(failed, "init rank=0 nranks=1 roots=1\n"), "%s", out);
    mw = (method_want_t){.job = job, .epoch = 4, .rank = 0, .method = "shrink failed, init 1 root"};
    ck_assert(ec_test_wait(timing_has_method, &mw, 5000));
    ck_assert(mw.shrink_us > 0 && mw.init_us > 0);

    /* the same members again (a restart epoch): nothing to exclude, a full init */
    publish_epoch(job, 5, 1, EC_REASON_RESTART);
    rebuild_to(&m[0], 5);
    ck_assert_msg(strstr(logs[0].text, "+nccl epoch 5: init (1 root) of 1 ranks in ") &&
                      strstr(logs[0].text, "nothing to exclude"), "%s", logs[0].text);
    ecw_finalize(m[1].w);
    ecw_finalize(m[0].w);
}
END_TEST

/* Three nodes, one process each, a scalable init with three roots (each id
 * created and published by its own root rank), then the middle node leaves:
 * n3's old rank 2 becomes rank 1, as the shrink numbers it.  Against the
 * fake CUDA and NCCL, like the test above. */
START_TEST(nccl_inits_with_several_roots_and_shrinks_a_middle_node)
{
    char stub[PATH_MAX], slog[400];
    if (!stub_cuda("nccl_inits_with_several_roots_and_shrinks_a_middle_node", stub))
        return;
    snprintf(slog, sizeof(slog), "%s/cuda_stub_roots.log", tmp);
    setenv("CUDA_STUB_LOG", slog, 1);
    unsetenv("CUDA_STUB_SHRINK");
    unsetenv("CUDA_STUB_STREAM");
    const char *job = "jroots";
    const char *const ids[] = {"n1", "n2", "n3"};
    write_epoch_of(job, 1, ids, 3, 1, EC_REASON_START, job, "n1");
    static logbuf_t logs[3] = {{.mu = PTHREAD_MUTEX_INITIALIZER},
                               {.mu = PTHREAD_MUTEX_INITIALIZER},
                               {.mu = PTHREAD_MUTEX_INITIALIZER}};
    gpu_member_t m[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        m[i] = (gpu_member_t){.job = job, .libdir = stub, .lr = 0, .node = ids[i],
                              .backend = ECW_BACKEND_NCCL, .roots = 3, .scalable_min = 2,
                              .log = &logs[i]};
        ck_assert_int_eq(pthread_create(&t[i], NULL, gpu_init_thread, &m[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(m[i].rc == 0, "node %s: %s", ids[i], m[i].err.msg);
        ck_assert_int_eq(ecw_rank(m[i].w), i);
        ck_assert_msg(strstr(logs[i].text, "+nccl epoch 1: init (3 roots) of 3 ranks"), "%s",
                      logs[i].text);
    }
    const char *out = slurp(slog);
    for (int i = 0; i < 3; i++) {
        char want[80];
        snprintf(want, sizeof(want), "init rank=%d nranks=3 roots=3\n", i);
        ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
    }
    /* each root's id under the epoch's keys: nccl.id, nccl.id.1, nccl.id.2 */
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, job, NULL), 0);
    for (int i = 0; i < 3; i++) {
        char name[32], key[EC_KEY_MAX];
        if (i)
            snprintf(name, sizeof(name), "nccl.id.%d", i);
        else
            snprintf(name, sizeof(name), "nccl.id");
        ck_assert_int_gt(ec_key_epoch_comm(&k, 1, name, key, sizeof(key)), 0);
        ec_kv_t kv;
        bool found = false;
        ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
        ck_assert_msg(found, "no %s", key);
        ec_kv_free(&kv);
    }
    method_want_t mw = {.job = job, .epoch = 1, .rank = 2, .method = "init 3 roots"};
    ck_assert(ec_test_wait(timing_has_method, &mw, 5000));

    /* n2, the middle node, leaves */
    const char *const rest[] = {"n1", "n3"};
    write_epoch_of(job, 2, rest, 2, 1, EC_REASON_LEAVE, job, "n1");
    rebuild_to(&m[0], 2);
    rebuild_to(&m[2], 2);
    ck_assert_int_eq(ecw_rank(m[2].w), 1);
    out = slurp(slog);
    ck_assert_msg(strstr(out, "shrink rank=0 nranks=3 excl=1 flags=0 share=0 -> rank 0 of 2\n") &&
                      strstr(out, "shrink rank=2 nranks=3 excl=1 flags=0 share=0 -> rank 1 of 2\n"),
                  "%s", out);
    for (int i = 0; i < 3; i++)
        ecw_finalize(m[i].w);
}
END_TEST

/* ---- following epochs without reading the leader key ------------------------------- */

/* Range requests etcd has started so far (its /metrics, on the client
 * port): every read of a key, the leader key's at a revision included. */
static long etcd_ranges(void)
{
    size_t cap = 4u << 20;
    char *resp = malloc(cap);
    ck_assert_ptr_nonnull(resp);
    ck_assert_int_eq(ec_http_request(ec_embed_port(etcd), "GET", "/metrics", resp, cap), 200);
    static const char name[] = "grpc_server_started_total{";
    long n = -1;
    for (const char *l = ec_http_body(resp); l && *l;
         l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *end = strchr(l, '}'), *meth = strstr(l, "grpc_method=\"Range\"");
        const char *nl = strchr(l, '\n');
        if (strncmp(l, name, sizeof(name) - 1) || !end || !meth || meth > end || (nl && end > nl))
            continue;
        n = (n < 0 ? 0 : n) + strtol(end + 1, NULL, 10);
    }
    free(resp);
    ck_assert_msg(n >= 0, "etcd's /metrics has no grpc_server_started_total of Range");
    return n;
}

/* Watch streams etcd has opened so far (its /metrics). */
static long etcd_watch_streams(void)
{
    return ec_test_etcd_watch_streams(etcd);
}

typedef struct {
    long base, want;
} stream_floor_t;

static bool streams_reach(void *arg)
{
    stream_floor_t *f = arg;
    return etcd_watch_streams() - f->base >= f->want;
}

/* A leader of job `job` as the agent is one (coord/node/node_publish.c):
 * the leader key "n1", and the last valid epoch it published, which its
 * next delta is taken from. */
typedef struct {
    const char *job;
    int64_t leader_rev; /* the leader key's create revision; 0: not created yet */
    ec_epoch_t *prev;
} leader_t;

/* Write epoch n of node "n1" with nproc local ranks, naming rec_job and
 * writer, with its delta from L->prev in epochd (the marker "read the
 * epoch key" when there is none).  leader_event: in the leader's
 * transaction, the leader key put again unchanged, as the agent's epoch
 * transaction does; without it, as another tool would write it.  An epoch
 * of the job's leader becomes L->prev. */
static void leader_write(leader_t *L, uint64_t n, int nproc, const char *rec_job,
                         const char *writer, bool leader_event)
{
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, L->job, NULL), 0);
    char lkey[EC_KEY_MAX], key[EC_KEY_MAX], dkey[EC_KEY_MAX];
    ec_key_leader(&k, lkey, sizeof(lkey));
    ec_key_epoch(&k, key, sizeof(key));
    ec_key_epoch_delta(&k, dkey, sizeof(dkey));
    if (!L->leader_rev) {
        ck_assert_int_eq(ec_etcd_put(c, lkey, "n1", 2, 0, NULL, NULL), 0);
        ec_kv_t lk;
        bool found = false;
        ck_assert_int_eq(ec_etcd_get(c, lkey, &lk, &found, NULL, NULL), 0);
        ck_assert(found);
        L->leader_rev = lk.create_revision;
        ec_kv_free(&lk);
    }
    ec_epoch_t *ep = ec_epoch_new(1, nproc);
    ck_assert_ptr_nonnull(ep);
    ep->number = n;
    ep->members[0].node_id = strdup("n1");
    ep->members[0].host = strdup("127.0.0.1");
    for (int i = 0; i < nproc; i++)
        ep->members[0].ports[i] = (uint16_t)(42000 + i);
    ep->members[0].master_port = 42999;
    ep->members[0].incarnation = n;
    ep->reason = EC_REASON_RESTART;
    ep->run = 1; /* as decoded: the digest of a delta is of the record a reader rebuilds */
    ep->leader_id = strdup(writer);
    ep->leader_rev = L->leader_rev;
    ep->job_id = strdup(rec_job);
    void *buf = NULL, *dbuf = NULL;
    size_t len = 0, dlen = 0;
    ec_error_t err = {0};
    ck_assert_msg(ec_epoch_encode(ep, &buf, &len, &err) == 0, "%s", err.msg);
    ck_assert_msg(ec_epoch_delta_encode(L->prev, ep, buf, len, &dbuf, &dlen, &err) == 0, "%s",
                  err.msg);
    ec_op_t ops[3] = {{.type = EC_OP_PUT, .key = key, .value = buf, .value_len = len},
                      {.type = EC_OP_PUT, .key = dkey, .value = dbuf, .value_len = dlen},
                      {.type = EC_OP_PUT, .key = lkey, .value = "n1", .value_len = 2}};
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, ops, leader_event ? 3 : 2, NULL, 0, NULL, NULL), 0);
    free(buf);
    free(dbuf);
    if (!strcmp(rec_job, L->job) && !strcmp(writer, "n1")) {
        ec_epoch_free(L->prev);
        L->prev = ep;
    } else {
        ec_epoch_free(ep);
    }
}

typedef struct {
    ecw_t **w;
    int n;
    uint64_t epoch;
} all_see_t;

static bool all_see(void *arg)
{
    all_see_t *a = arg;
    for (int i = 0; i < a->n; i++)
        if (ecw_latest_epoch(a->w[i]) != a->epoch)
            return false;
    return true;
}

/* At 16,384 nodes x 8 processes, one read per process per change is
 * 131,072 reads of etcd per change.  The leader's epoch transaction puts
 * the leader key again unchanged; a process that watches it learns from
 * that event which leadership wrote the epoch, and reads nothing: E epochs
 * followed by K processes cost etcd no read at all (and each process holds
 * one watch stream, for epochd and the leader key together).  An epoch forged among
 * them (not the leader's, though the transaction touched the leader key) is
 * still judged, from the same events, and not followed. */
START_TEST(leader_epochs_are_followed_without_reads)
{
    enum { K = 4, E = 20, FORGED_AT = 10 };
    leader_t L = {.job = "jnoread"};
    leader_write(&L, 1, K, L.job, "n1", true);
    ecw_t *w[K];
    long s0 = etcd_watch_streams();
    for (int i = 0; i < K; i++)
        w[i] = none_init(L.job, i);
    /* one watch stream per process for epochd and the leader key (one per
     * key would be 2K; a stream re-opened after a break counts again); etcd
     * counts a stream when it has served it, which may come a moment after
     * ecw_init returned on a loaded machine */
    stream_floor_t sf = {s0, K};
    ck_assert_msg(ec_test_wait(streams_reach, &sf, 5000), "%d processes opened %ld watch streams "
                  "within 5 s", K, etcd_watch_streams() - s0);
    long streams = etcd_watch_streams() - s0;
    ck_assert_msg(streams >= K && streams < 2 * K, "%d processes opened %ld watch streams",
                  K, streams);
    long r0 = etcd_ranges();
    for (uint64_t n = 2; n <= E + 1; n++) {
        if (n == FORGED_AT)
            leader_write(&L, 900, K, L.job, "n2", true); /* not the leader's */
        leader_write(&L, n, K, L.job, "n1", true);
    }
    /* Had 900 been taken, E + 1 would be older and ignored. */
    all_see_t a = {w, K, E + 1};
    ck_assert_msg(ec_test_wait(all_see, &a, 10000), "not every process follows epoch %d "
                  "(the first is at %" PRIu64 ")", E + 1, ecw_latest_epoch(w[0]));
    long reads = etcd_ranges() - r0;
    printf("# %d processes followed %d epochs with %ld reads of etcd\n", K, E, reads);
    ck_assert_msg(reads == 0, "%d processes following %d epochs of the leader read etcd %ld "
                  "times (the leader key's event should tell them who wrote each)", K, E, reads);
    for (int i = 0; i < K; i++)
        ecw_finalize(w[i]);
    ec_epoch_free(L.prev);
}
END_TEST

static bool reads_since(void *arg)
{
    return etcd_ranges() > *(long *)arg;
}

/* An epoch not accompanied by an event of the leader key (written by
 * another tool) is judged by a read of the leader key at its revision,
 * after a short grace: one naming the leadership of its revision is
 * followed, a forged one is not. */
START_TEST(epoch_without_a_leader_event_is_checked_by_a_read)
{
    leader_t L = {.job = "jtool"};
    leader_write(&L, 1, 1, L.job, "n1", true);
    ecw_t *w = none_init(L.job, 0);
    long r0 = etcd_ranges();
    leader_write(&L, 2, 1, L.job, "n1", false); /* another tool, copying the leadership */
    ck_assert_msg(ec_test_wait(latest_is_2, w, 10000), "latest epoch is %" PRIu64 ", not 2",
                  ecw_latest_epoch(w));
    ck_assert_msg(etcd_ranges() > r0, "epoch 2 was followed without a read of the leader key");
    long r1 = etcd_ranges();
    leader_write(&L, 9, 1, L.job, "n2", false); /* forged, and no leader event */
    ck_assert_msg(ec_test_wait(reads_since, &r1, 10000), "the forged epoch was never checked");
    ck_assert_msg(ec_test_holds(latest_is_2, w, 300), "the forged epoch 9 was followed");
    leader_write(&L, 3, 1, L.job, "n1", true);
    ck_assert_msg(ec_test_wait(latest_is_3, w, 10000), "latest epoch is %" PRIu64 ", not 3",
                  ecw_latest_epoch(w));
    ecw_finalize(w);
    ec_epoch_free(L.prev);
}
END_TEST

/* Built twice: t4000-worker runs every case but those against the fake CUDA
 * and NCCL; t4010-worker-nccl-stub (EC_T4000_NCCL_STUB) runs only those, in
 * a process into which no other case loaded an NCCL (one already loaded
 * wins over ECOORD_WORKER_CUDA_LIBDIR, cuda_dl.c). */
#ifdef EC_T4000_NCCL_STUB
static const bool stub_build = true;
#else
static const bool stub_build = false;
#endif
#define add_case(tc, fn, stub)        \
    do {                              \
        if ((stub) == stub_build)     \
            ec_tcase_add((tc), fn);   \
        else                          \
            (void)(fn);               \
    } while (0)

static Suite *suite(void)
{
    Suite *s = suite_create("t4000-worker");
    TCase *t = tcase_create("worker");
    tcase_add_checked_fixture(t, etcd_up, etcd_down);
    add_case(t, init_refuses_bad_options_and_keeps_deadlines, false);
    add_case(t, silent_peer_released_by_epoch_change, false);
    add_case(t, forged_epochs_are_not_followed, false);
    add_case(t, epoch_followed_after_etcd_lost_its_data, false);
    add_case(t, nccl_rebuilds_per_epoch, false);
    add_case(t, nccl_shrinks_an_epoch_that_only_removes_ranks, true);
    add_case(t, nccl_inits_with_several_roots_and_shrinks_a_middle_node, true);
    add_case(t, gloo_runs_where_cuda_libraries_cannot_be_loaded, false);
    add_case(t, auto_takes_the_nccl_already_loaded, false);
    add_case(t, auto_under_a_loaded_nccl_reduces_device_memory, true);
    add_case(t, nccl_teardown_runs_beside_the_next_build, true);
    add_case(t, a_cut_collective_returns_once_its_kernel_stopped, true);
    add_case(t, nccl_is_set_up_while_the_process_boots, true);
    add_case(t, members_refuse_a_backend_other_than_rank_0s, false);
    add_case(t, a_member_waits_for_rank_0_no_longer_than_a_connect, false);
    add_case(t, iallreduce_waits_with_a_deadline_and_is_released_by_an_epoch, false);
    add_case(t, sync_state_interrupted_leaves_old_or_new_state_never_torn, false);
    add_case(t, none_backend_follows_epochs_and_claims_ranks, false);
    add_case(t, report_failure_marks_the_epoch_and_reports_silent_members, false);
    add_case(t, wait_epoch_wakes_on_new_epoch_and_times_out, false);
    add_case(t, epoch_kv_put_by_one_member_got_by_another, false);
    add_case(t, epoch_get_returns_epoch_changed_when_newer_epoch_arrives, false);
    add_case(t, wait_epoch_returns_unconfirmed_when_fence_trips, false);
    add_case(t, job_completes_in_place, false);
    add_case(t, membership_changes_rebuild_in_place, false);
    add_case(t, leader_epochs_are_followed_without_reads, false);
    add_case(t, epoch_without_a_leader_event_is_checked_by_a_read, false);
    add_case(t, split_epochs_are_followed_through_a_view, false);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
