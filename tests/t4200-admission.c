/* Nothing waits for a boot: under `ecoord launch --rebuild=inprocess` a
 * node's processes start before the node is admitted, say when they are
 * ready (ecw_init), and the leader admits the node only then.  With agents
 * on loopback running the linreg example (--timestamps: every step line
 * carries its wall-clock time):
 *
 *  - a joiner slow to become ready (its program sleeps before ecw_init)
 *    never stops the members: no epoch includes it while it boots, they
 *    step on at their pace, and the epoch that admits it is decided after
 *    it was ready;
 *  - a joiner that dies before it is ready is never admitted: its failure is
 *    recorded, its agent gives up at --max_restart, the job stays in its
 *    epoch with the same processes;
 *  - a worker killed in place costs its node, not the job: one epoch without
 *    the node (the others go on at once), one with it again once its new
 *    process is ready, and no other process restarts, the node's other one
 *    included;
 *  - --join_ready_timeout: a process that never says it is ready is reported
 *    (console, a not-ready failure record) and stopped, and its node is
 *    never admitted;
 *  - the first epoch: every node's processes boot before it is decided, and
 *    none of its processes is started after it. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ec_select.h"
#include "harness.h"
#include "keys.h"
#include "records.h"

EC_TEST_ETCD_FIXTURE("t4200", 16)

typedef struct {
    pid_t pid;
    int nproc;
    char id[16], logdir[320], console[320];
} agent_t;

/* One agent of job running `prog` (a shell command; "" = linreg), nproc
 * processes; flags go to `ecoord launch`. */
static agent_t start_agent(const char *job, const char *id, const char *np, int nproc,
                           const char *flags, const char *prog)
{
    agent_t a = {.nproc = nproc};
    snprintf(a.id, sizeof(a.id), "%s", id);
    snprintf(a.logdir, sizeof(a.logdir), "%s/%s-%s", tmp, job, id);
    snprintf(a.console, sizeof(a.console), "%s/%s-%s.console", tmp, job, id);
    char linreg[600], cmd[3072];
    snprintf(linreg, sizeof(linreg), "%s --steps 100000000 --delay-ms 20 --timestamps",
             ec_test_bin("ECW_LINREG", "worker/examples/linreg"));
    snprintf(cmd, sizeof(cmd),
             "exec %s launch --elastic_server=%s --job_id=%s --np=%s --nproc_per_node=%d "
             "--node_id=%s --log_dir=%s --grace_period=2 --elastic_timeout=1 --lease_ttl=10 "
             "--rebuild=inprocess %s %s -- %s",
             ec_test_bin("ECOORD", "./ecoord"), ec_embed_endpoint(etcd), job, np, nproc, id,
             a.logdir, getenv("EC_T4200_FLAGS") ? getenv("EC_T4200_FLAGS") : "", flags,
             prog && *prog ? prog : linreg);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    a.pid = ec_test_spawn(argv, a.console);
    ck_assert_int_lt(npids, (int)(sizeof(pids) / sizeof(pids[0])));
    pids[npids++] = a.pid;
    return a;
}

/* linreg behind a shell that first sleeps ms (a slow start-up: imports, a
 * CUDA context) or, with exit_code >= 0, exits with it instead. */
static void slow_linreg(char *buf, size_t len, long sleep_ms, int exit_code)
{
    if (exit_code >= 0)
        snprintf(buf, len, "/bin/sh -c 'exit %d'", exit_code);
    else
        snprintf(buf, len, "/bin/sh -c 'sleep %.3f; exec %s --steps 100000000 --delay-ms 20 "
                 "--timestamps'", (double)sleep_ms / 1000.0,
                 ec_test_bin("ECW_LINREG", "worker/examples/linreg"));
}

/* ---- the example's output ------------------------------------------------------------- */

typedef struct {
    long long step, t;
    unsigned long long epoch;
    int world, pid;
} line_t;

static bool parse_line(const char *buf, line_t *l)
{
    int rank, sum, lr;
    double loss;
    char cs[24], node[64];
    if (strncmp(buf, "linreg step=", 12) != 0 || !strchr(buf, '\n'))
        return false;
    const char *t = strstr(buf, " t=");
    l->t = t ? atoll(t + 3) : 0;
    return sscanf(buf, "linreg step=%lld epoch=%llu rank=%d world=%d sum=%d loss=%lg cs=%23s "
                  "pid=%d node=%63s lr=%d", &l->step, &l->epoch, &rank, &l->world, &sum, &loss,
                  cs, &l->pid, node, &lr) == 10;
}

/* The first (or newest) step line of local rank lr of a in epoch >= e; pid
 * 0: none yet. */
static line_t line_in(const agent_t *a, int lr, unsigned long long e, bool first)
{
    line_t out = {0};
    char path[400], buf[512];
    snprintf(path, sizeof(path), "%s/workerlog.%d", a->logdir, lr);
    FILE *f = fopen(path, "r");
    if (!f)
        return out;
    while (fgets(buf, sizeof(buf), f)) {
        line_t l;
        if (!parse_line(buf, &l) || l.epoch < e)
            continue;
        out = l;
        if (first)
            break;
    }
    fclose(f);
    return out;
}

typedef struct {
    const agent_t *a;
    int lr;
    unsigned long long epoch;
    long long steps;
} progress_t;

static bool trained(void *arg)
{
    progress_t *p = arg;
    line_t f = line_in(p->a, p->lr, p->epoch, true), l = line_in(p->a, p->lr, p->epoch, false);
    return f.pid && l.step >= f.step + p->steps;
}

/* Wait until local rank lr of a trained steps in epoch >= e; its first line there. */
static line_t train(const agent_t *a, int lr, unsigned long long e, long long steps, long ms)
{
    progress_t p = {a, lr, e, steps};
    ck_assert_msg(ec_test_wait(trained, &p, ms), "%s/%d never trained %lld steps in epoch %llu "
                  "(see %s/workerlog.%d and %s)", a->id, lr, steps, e, a->logdir, lr, a->console);
    return line_in(a, lr, e, true);
}

/* The longest time local rank lr of a went without a step between wall
 * clock from and to (ms): the stall a change cost it. */
static long long longest_gap(const agent_t *a, int lr, long long from, long long to)
{
    char path[400], buf[512];
    snprintf(path, sizeof(path), "%s/workerlog.%d", a->logdir, lr);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long long prev = from, gap = 0;
    while (fgets(buf, sizeof(buf), f)) {
        line_t l;
        if (!parse_line(buf, &l) || l.t < from)
            continue;
        if (l.t - prev > gap)
            gap = l.t - prev;
        prev = l.t;
        if (l.t >= to)
            break;
    }
    fclose(f);
    if (prev < to && to - prev > gap)
        gap = to - prev;
    return gap;
}

/* ---- etcd ---------------------------------------------------------------------------- */

/* An epoch >= number of world size world (the test fails without one). */
static ec_epoch_t *wait_epoch(const char *root, uint64_t number, int world, long ms)
{
    return ec_test_need_epoch(c, root, number, world, ms);
}

static uint64_t epoch_now(const char *root)
{
    ec_epoch_t *ep = ec_test_epoch(c, root);
    uint64_t n = ep ? ep->number : 0;
    ec_epoch_free(ep);
    return n;
}

/* Node id's record (NULL: absent). */
static ec_node_rec_t *record_of(const char *root, const char *id)
{
    char key[600];
    snprintf(key, sizeof(key), "%snodes/%s", root, id);
    ec_kv_t kv;
    bool found = false;
    ec_node_rec_t *r = NULL;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) == 0 && found)
        ec_node_rec_decode(kv.value, kv.value_len, key, &r, NULL);
    if (found)
        ec_kv_free(&kv);
    return r;
}

typedef struct {
    const char *root, *id;
    ec_boot_phase_t phase;
} boot_want_t;

static bool boot_is(void *arg)
{
    boot_want_t *b = arg;
    ec_node_rec_t *r = record_of(b->root, b->id);
    bool ok = r && r->boot.phase == b->phase;
    ec_node_rec_free(r);
    return ok;
}

/* Failure records of node id of the given kind (0: any). */
static int failures_of(const char *root, const char *id, ec_failure_kind_t kind)
{
    char prefix[600];
    snprintf(prefix, sizeof(prefix), "%sfailures/", root);
    ec_kv_list_t l = {0};
    ck_assert_int_eq(ec_etcd_get_prefix(c, prefix, 0, &l, NULL), 0);
    int n = 0;
    for (size_t i = 0; i < l.n; i++) {
        ec_failure_t *f = NULL;
        if (ec_failure_decode(l.kvs[i].value, l.kvs[i].value_len, l.kvs[i].key, &f, NULL) == 0 &&
            !strcmp(f->node_id, id) && (!kind || f->kind == kind))
            n++;
        ec_failure_free(f);
    }
    ec_kv_list_free(&l);
    return n;
}

typedef struct {
    const char *root;
    uint64_t number;
} same_t;

static bool epoch_unchanged(void *arg)
{
    same_t *s = arg;
    return epoch_now(s->root) == s->number;
}

/* ---- 1. a slow joiner ------------------------------------------------------------------- */

START_TEST(slow_joiner_never_stops_the_members)
{
    const char *job = "jslow", *root = "/jslow/";
    agent_t a = start_agent(job, "a", "2:3", 1, "", "");
    agent_t b = start_agent(job, "b", "2:3", 1, "", "");
    ec_epoch_t *ep = wait_epoch(root, 1, 2, 30000);
    uint64_t e = ep->number;
    ec_epoch_free(ep);
    train(&a, 0, e, 10, 20000);
    train(&b, 0, e, 10, 20000);

    long boot = ec_test_ms(4000);
    char prog[1024];
    slow_linreg(prog, sizeof(prog), boot, -1);
    struct timespec ts; /* wall clock: the step lines' and the records' times */
    clock_gettime(CLOCK_REALTIME, &ts);
    long long w_start = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    agent_t j = start_agent(job, "j", "2:3", 1, "", prog);
    boot_want_t bw = {root, "j", EC_BOOT_BOOTING};
    ck_assert_msg(ec_test_wait(boot_is, &bw, 10000), "j never registered booting (see %s)",
                  j.console);
    /* While it boots: no epoch, and the members step on. */
    line_t before = line_in(&a, 0, e, false);
    same_t s = {root, e};
    ck_assert_msg(ec_test_holds(epoch_unchanged, &s, boot / 2),
                  "an epoch was published while the joiner was still booting");
    line_t during = line_in(&a, 0, e, false);
    ck_assert_msg(during.step >= before.step + 20, "a made %lld steps in %ld ms of the "
                  "joiner's boot", during.step - before.step, boot / 2);
    ec_node_rec_t *r = record_of(root, "j");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->boot.phase, EC_BOOT_BOOTING);
    ck_assert_str_eq(r->boot.why, "joining");
    ec_node_rec_free(r);
    /* what a user sees: ecoord status names it booting, with its boot */
    char out[16384], cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s status --elastic_server=%s --job_id=%s",
             ec_test_bin("ECOORD", "./ecoord"), ec_embed_endpoint(etcd), job);
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    ck_assert_int_eq(ec_test_run(sh, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "booting") && strstr(out, "(joining), 0 of 1 ready"), "%s", out);
    snprintf(cmd, sizeof(cmd), "%s status --elastic_server=%s --job_id=%s --json",
             ec_test_bin("ECOORD", "./ecoord"), ec_embed_endpoint(etcd), job);
    ck_assert_int_eq(ec_test_run(sh, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "\"state\":\"booting\"") &&
                  strstr(out, "\"boot\":{\"phase\":\"booting\""), "%s", out);

    /* Ready: admitted by an epoch decided after it. */
    ep = wait_epoch(root, e + 1, 3, 30000);
    ck_assert_int_ge(ec_epoch_find_member(ep, "j"), 0);
    r = record_of(root, "j");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->boot.phase, EC_BOOT_READY);
    ck_assert_int_gt(r->boot.ready_at_ms, 0);
    ck_assert_msg(ep->decided_at_ms >= r->boot.ready_at_ms, "epoch %" PRIu64 " decided at %"
                  PRId64 ", before j was ready at %" PRId64, ep->number, ep->decided_at_ms,
                  r->boot.ready_at_ms);
    ck_assert_msg(r->boot.ready_at_ms - w_start >= boot - 200, "j ready %lld ms after its "
                  "start, its program sleeps %ld ms first", r->boot.ready_at_ms - w_start, boot);
    ec_node_rec_free(r);
    uint64_t ej = ep->number;
    ec_epoch_free(ep);
    line_t fj = train(&j, 0, ej, 10, 30000);
    line_t fa = train(&a, 0, ej, 10, 30000);
    ck_assert_int_eq(fj.world, 3);
    /* The members' longest stall from the joiner's start to its first step:
     * a rebuild, nowhere near its boot. */
    for (int i = 0; i < 2; i++) {
        long long gap = longest_gap(i ? &b : &a, 0, w_start, fj.t);
        printf("# %s's longest gap between steps during a %ld ms boot of the joiner: %lld ms\n",
               i ? "b" : "a", boot, gap);
        ck_assert_msg(gap < boot / 2, "%s stalled %lld ms while the joiner booted for %ld ms",
                      i ? "b" : "a", gap, boot);
    }
    (void)fa;
    ck_assert_msg(ec_test_file_contains(j.console, "+admitted node j"), "see %s", j.console);
}
END_TEST

/* ---- 2. a joiner that dies before it is ready -------------------------------------------- */

START_TEST(joiner_dying_before_ready_is_never_admitted)
{
    const char *job = "jdie", *root = "/jdie/";
    agent_t a = start_agent(job, "a", "2:3", 1, "", "");
    agent_t b = start_agent(job, "b", "2:3", 1, "", "");
    ec_epoch_t *ep = wait_epoch(root, 1, 2, 30000);
    uint64_t e = ep->number;
    ec_epoch_free(ep);
    pid_t pa = train(&a, 0, e, 10, 20000).pid, pb = train(&b, 0, e, 10, 20000).pid;

    char prog[1024];
    slow_linreg(prog, sizeof(prog), 0, 3);
    agent_t j = start_agent(job, "j", "2:3", 1, "--max_restart=1", prog);
    /* It tries twice (--max_restart=1), then leaves the job. */
    int st = ec_test_reap(j.pid, ec_test_ms(20000));
    ck_assert_msg(st == 1, "j's agent did not give up with exit code 1: %d (see %s)", st,
                  j.console);
    npids--; /* reaped */
    ck_assert_int_eq(failures_of(root, "j", EC_FAILURE_EXITED), 2);
    ck_assert_msg(ec_test_file_contains(j.console, "exhausted"), "see %s", j.console);
    /* The job never saw it: same epoch, same processes, still training. */
    ck_assert_uint_eq(epoch_now(root), e);
    line_t la = train(&a, 0, e, 30, 20000), lb = train(&b, 0, e, 30, 20000);
    ck_assert_int_eq(la.pid, pa);
    ck_assert_int_eq(lb.pid, pb);
    ck_assert_uint_eq(epoch_now(root), e);
}
END_TEST

/* ---- 3. a worker killed in place ------------------------------------------------------------ */

START_TEST(worker_killed_in_place_costs_one_epoch_out_and_one_back)
{
    const char *job = "jkill", *root = "/jkill/";
    agent_t a = start_agent(job, "a", "1:2", 2, "", "");
    agent_t b = start_agent(job, "b", "1:2", 2, "", "");
    ec_epoch_t *ep = wait_epoch(root, 1, 4, 30000);
    uint64_t e = ep->number;
    ec_epoch_free(ep);
    pid_t pa[2], pb[2];
    for (int lr = 0; lr < 2; lr++) {
        pa[lr] = train(&a, lr, e, 10, 20000).pid;
        pb[lr] = train(&b, lr, e, 10, 20000).pid;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long w_kill = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    kill(pb[1], SIGKILL);

    /* One epoch without b: a goes on alone at once. */
    ep = wait_epoch(root, e + 1, 2, 20000);
    ck_assert_uint_eq(ep->number, e + 1);
    ck_assert_int_lt(ec_epoch_find_member(ep, "b"), 0);
    ck_assert_int_eq(ep->reason, EC_REASON_LEAVE);
    ck_assert_msg(strstr(ep->reason_detail, "b restarting its processes"), "reason: %s",
                  ep->reason_detail);
    ec_epoch_free(ep);
    /* One with it again, once its new process is ready. */
    ep = wait_epoch(root, e + 2, 4, 30000);
    ck_assert_uint_eq(ep->number, e + 2);
    ck_assert_int_ge(ec_epoch_find_member(ep, "b"), 0);
    ec_epoch_free(ep);
    for (int lr = 0; lr < 2; lr++) {
        line_t la = train(&a, lr, e + 2, 10, 30000), lb = train(&b, lr, e + 2, 10, 30000);
        ck_assert_msg(la.pid == pa[lr], "a's local rank %d restarted (pid %d, was %d)", lr,
                      la.pid, pa[lr]);
        if (lr == 0)
            ck_assert_msg(lb.pid == pb[0], "b's surviving local rank 0 restarted (pid %d, "
                          "was %d)", lb.pid, pb[0]);
        else
            ck_assert_int_ne(lb.pid, pb[1]);
        ck_assert_int_eq(la.world, 4);
    }
    /* Nothing else: no third epoch. */
    same_t s = {root, e + 2};
    ck_assert_msg(ec_test_holds(epoch_unchanged, &s, ec_test_ms(2000)), "another epoch followed");
    /* a never waited for b's new process: its stall is a rebuild or two. */
    line_t back = line_in(&b, 1, e + 2, true);
    long long gap = longest_gap(&a, 0, w_kill, back.t);
    printf("# a's longest gap between steps from the kill to the new process's first step: "
           "%lld ms\n", gap);
    ck_assert_msg(ec_test_file_contains(b.console, "+step-out node b"), "see %s", b.console);
    ck_assert_int_eq(failures_of(root, "b", EC_FAILURE_SIGNALED), 1);
}
END_TEST

/* ---- 4. --join_ready_timeout -------------------------------------------------------------- */

START_TEST(process_not_ready_within_join_ready_timeout_is_not_admitted)
{
    const char *job = "jnr", *root = "/jnr/";
    agent_t a = start_agent(job, "a", "2:3", 1, "", "");
    agent_t b = start_agent(job, "b", "2:3", 1, "", "");
    ec_epoch_t *ep = wait_epoch(root, 1, 2, 30000);
    uint64_t e = ep->number;
    ec_epoch_free(ep);
    pid_t pa = train(&a, 0, e, 10, 20000).pid;
    train(&b, 0, e, 10, 20000);
    /* A program that never calls ecw_init: never ready. */
    agent_t j = start_agent(job, "j", "2:3", 1, "--join_ready_timeout=2 --max_restart=0",
                            "/bin/sh -c 'exec sleep 600'");
    int st = ec_test_reap(j.pid, ec_test_ms(20000));
    ck_assert_msg(st == 1, "j's agent exited %d, want 1 (see %s)", st, j.console);
    npids--;
    ck_assert_msg(ec_test_file_contains(j.console, "-not-ready node j: local rank 0 was not "
                                        "ready"), "see %s", j.console);
    ck_assert_msg(ec_test_file_contains(j.console, "--join_ready_timeout"), "see %s", j.console);
    /* told halfway what ready means, before the wait ran out */
    ck_assert_msg(ec_test_file_contains(j.console, "+not-ready-yet node j: local rank 0"),
                  "see %s", j.console);
    ck_assert_int_eq(failures_of(root, "j", EC_FAILURE_NOT_READY), 1);
    ck_assert_int_eq(failures_of(root, "j", EC_FAILURE_SIGNALED), 0); /* not reported twice */
    ck_assert_uint_eq(epoch_now(root), e);
    ck_assert_int_eq(train(&a, 0, e, 20, 20000).pid, pa);
}
END_TEST

START_TEST(process_exiting_before_ready_is_a_failure_that_says_why)
{
    /* A program that exits 0 without ever following the job (no ecw_init,
     * no ecoord.torch init) under --rebuild=inprocess: its node was never
     * admitted, so nothing it did counts; the agent says so and how to run
     * it, rather than waiting for an epoch that never comes. */
    const char *job = "jx", *root = "/jx/";
    agent_t j = start_agent(job, "j", "1", 1, "--max_restart=0", "/bin/sh -c 'exit 0'");
    int st = ec_test_reap(j.pid, ec_test_ms(20000));
    /* 101: a fixed-size job's node that gives up (the scheduler's to replace) */
    ck_assert_msg(st == 101, "j's agent exited %d, want 101 (see %s)", st, j.console);
    npids--;
    ck_assert_msg(ec_test_file_contains(j.console, "exited 0 before it was ready"), "see %s",
                  j.console);
    ck_assert_msg(ec_test_file_contains(j.console, "--rebuild=restart"), "see %s", j.console);
    ck_assert_int_eq(failures_of(root, "j", EC_FAILURE_NOT_READY), 1);
}
END_TEST

START_TEST(process_failing_while_booting_without_fault_tolerance_ends_its_agent)
{
    /* Fault tolerance off (the default) and the process fails while its
     * node boots: the node was never admitted, so the job is not stopped
     * for it and its agent does not wait for that; it says the process had
     * no rank yet and exits with the process's code. */
    const char *job = "jbf";
    agent_t j = start_agent(job, "j", "1", 1, "", "/bin/sh -c 'exit 3'");
    int st = ec_test_reap(j.pid, ec_test_ms(20000));
    ck_assert_msg(st == 3, "j's agent exited %d, want the process's 3 (see %s)", st, j.console);
    npids--;
    ck_assert_msg(ec_test_file_contains(j.console, "booting: no rank yet"), "see %s", j.console);
    ck_assert_msg(ec_test_file_contains(j.console, "before the job's first epoch"), "see %s",
                  j.console);
    ck_assert_msg(!ec_test_file_contains(j.console, "was not marked failed"),
                  "waited for the job to be failed for a node never admitted: see %s", j.console);
}
END_TEST

/* ---- 5. the first epoch ---------------------------------------------------------------------- */

START_TEST(first_epoch_is_decided_once_every_node_booted)
{
    const char *job = "jfirst", *root = "/jfirst/";
    char prog[1024];
    long boot = ec_test_ms(1500);
    slow_linreg(prog, sizeof(prog), boot, -1);
    agent_t a = start_agent(job, "a", "2:2", 1, "", "");
    agent_t b = start_agent(job, "b", "2:2", 1, "", prog);
    ec_epoch_t *ep = wait_epoch(root, 1, 2, 30000);
    for (int i = 0; i < 2; i++) {
        ec_node_rec_t *r = record_of(root, i ? "b" : "a");
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(r->boot.phase, EC_BOOT_READY);
        ck_assert_msg(ep->decided_at_ms >= r->boot.ready_at_ms, "the first epoch was decided "
                      "before %s was ready", r->node_id);
        ec_node_rec_free(r);
    }
    /* Every process was started before it (booted ahead), none after it:
     * the log's only start marker is the one before admission. */
    uint64_t e = ep->number;
    ec_epoch_free(ep);
    train(&a, 0, e, 5, 20000);
    train(&b, 0, e, 5, 20000);
    char path[400];
    snprintf(path, sizeof(path), "%s/workerlog.0", b.logdir);
    ck_assert(ec_test_file_contains(path, "started before admission"));
    ck_assert(!ec_test_file_contains(path, "======== ecoord epoch"));
}
END_TEST

/* EC_TEST_ONLY=name[,name...] runs only those tests (ec_select.h);
 * EC_T4200_FLAGS adds flags to every agent (--join_ready_timeout=0: boots
 * not gated, as before, where every test here fails). */
static Suite *suite(void)
{
    Suite *s = suite_create("t4200-admission");
    TCase *t = tcase_create("admission");
    tcase_add_checked_fixture(t, etcd_up, etcd_down);
    tcase_set_timeout(t, (double)ec_test_ms(120000) / 1000.0);
    ec_tcase_add(t, slow_joiner_never_stops_the_members);
    ec_tcase_add(t, joiner_dying_before_ready_is_never_admitted);
    ec_tcase_add(t, worker_killed_in_place_costs_one_epoch_out_and_one_back);
    ec_tcase_add(t, process_not_ready_within_join_ready_timeout_is_not_admitted);
    ec_tcase_add(t, process_exiting_before_ready_is_a_failure_that_says_why);
    ec_tcase_add(t, process_failing_while_booting_without_fault_tolerance_ends_its_agent);
    ec_tcase_add(t, first_epoch_is_decided_once_every_node_booted);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
