/* Hangs and stragglers through `ecoord launch`, real etcd, agents in
 * separate processes and the stepping test program (tests/lib/test_prog.c,
 * EC_TEST_PROG_STEP_MS): a rank that stops making progress while staying
 * alive (SIGSTOP of its process; an endless sleep in the program, with and
 * without progress reports, from C and from Python) is named by the leader
 * once --hang_timeout passed, never before, with the evidence in a failure
 * record, and the job goes on (a restart epoch, the rank stepping again:
 * the agents run with fault tolerance, --max_restart=3, as a job that
 * should survive a hang does);
 * in place, a peer blocked in a Gloo allreduce on a stopped rank is released
 * and trains on in the same process, never blamed itself; a whole job pausing
 * in a declared checkpoint longer than the timeout is no hang, but a pause
 * never resumed is one once --max_pause passed; a node
 * whose steps are slower is named in `ecoord status`, and with
 * --straggler_factor evicted once, the job going on without it and taking
 * it back. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ec_select.h"
#include "harness.h"
#include "keys.h"
#include "progress_file.h"
#include "records.h"

EC_TEST_ETCD_FIXTURE("t3400", 8)
static pid_t stopped_pid;
static const char *python_prog; /* non-NULL: agents run this Python program instead */

static void setup(void)
{
    etcd_up();
    char nodev[300];
    snprintf(nodev, sizeof(nodev), "%s/nodev", tmp);
    mkdir(nodev, 0755);
    setenv("ECOORD_DEV_DIR", nodev, 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    stopped_pid = 0;
    python_prog = NULL;
}

static void teardown(void)
{
    if (stopped_pid > 0)
        kill(stopped_pid, SIGCONT); /* ours to resume if the agent did not kill it */
    etcd_down();
}

typedef struct {
    pid_t pid;
    char log[320], id[32];
} agent_t;

/* An agent of job `job` with one rank running the stepping test program
 * (50 ms steps, step counts to tmp/steps) for run_ms; envs are extra
 * VAR=VALUE words for the program, flags extra agent flags. */
static agent_t start_agent(const char *job, const char *id, const char *np, const char *envs,
                           const char *flags, const char *run_ms)
{
    char py[1200] = "";
    if (python_prog)
        snprintf(py, sizeof(py), "PYTHONPATH=%s/worker/python %s", getenv("EC_SRCDIR") ?
                 getenv("EC_SRCDIR") : ".", "");
    agent_t a;
    snprintf(a.id, sizeof(a.id), "%s", id);
    snprintf(a.log, sizeof(a.log), "%s/%s-%s.console", tmp, job, id);
    char dump[300], steps[300];
    snprintf(dump, sizeof(dump), "%s/dump-%s", tmp, job);
    snprintf(steps, sizeof(steps), "%s/steps", tmp);
    mkdir(dump, 0755);
    mkdir(steps, 0755);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "exec env EC_TEST_PROG_STEP_MS=50 EC_TEST_PROG_STEPS_TO=%s %s %s %s launch "
             "--elastic_server=%s --job_id=%s --np=%s --nproc_per_node=1 --node_id=%s "
             "--log_dir=%s/%s-%s --grace_period=1 --max_restart=3 %s -- %s %s %s",
             steps, py, envs, ec_test_bin("ECOORD", "./ecoord"), ec_embed_endpoint(etcd), job,
             np, id, tmp, job, id, flags,
             python_prog ? python_prog : ec_test_bin("EC_TEST_PROG", "tests/ec-test-prog"),
             python_prog ? "" : dump, python_prog ? "" : run_ms);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    a.pid = ec_test_spawn(argv, a.log);
    pids[npids++] = a.pid;
    return a;
}

static const char *root_of(const char *job)
{
    static char r[128];
    snprintf(r, sizeof(r), "/%s/", job);
    return r;
}

static uint64_t epoch_number(const char *job)
{
    ec_epoch_t *ep = ec_test_epoch(c, root_of(job));
    uint64_t n = ep ? ep->number : 0;
    ec_epoch_free(ep);
    return n;
}

/* Steps local rank 0 of node reported in epoch (0: none yet). */
static long steps_of(const char *node, uint64_t epoch)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/steps/step.%s.0.%llu", tmp, node, (unsigned long long)epoch);
    FILE *f = fopen(p, "r");
    long n = 0;
    if (f) {
        if (fscanf(f, "%ld", &n) != 1)
            n = 0;
        fclose(f);
    }
    return n;
}

typedef struct {
    const char *node;
    uint64_t epoch;
    long min;
} stepping_t;

static bool is_stepping(void *arg)
{
    stepping_t *s = arg;
    return steps_of(s->node, s->epoch) >= s->min;
}

static void wait_steps(const char *node, uint64_t epoch, long min, long ms)
{
    stepping_t s = {node, epoch, min};
    ck_assert_msg(ec_test_wait(is_stepping, &s, ms), "%s never reached step %ld in epoch %llu "
                  "(at %ld)", node, min, (unsigned long long)epoch, steps_of(node, epoch));
}

typedef struct {
    const char *job;
    uint64_t above;
    int world;
} epoch_want_t;

static bool epoch_above(void *arg)
{
    epoch_want_t *w = arg;
    ec_epoch_t *ep = ec_test_epoch(c, root_of(w->job));
    bool ok = ep && ep->number > w->above && ep->world_size == w->world;
    ec_epoch_free(ep);
    return ok;
}

static uint64_t wait_epoch_above(const char *job, uint64_t above, int world, long ms)
{
    epoch_want_t w = {job, above, world};
    ck_assert_msg(ec_test_wait(epoch_above, &w, ms), "no epoch above %llu of world %d",
                  (unsigned long long)above, world);
    return epoch_number(job);
}

typedef struct {
    agent_t *a;
    int n;
    const char *needle;
} any_t;

static bool any_console(void *arg)
{
    any_t *x = arg;
    for (int i = 0; i < x->n; i++)
        if (ec_test_file_contains(x->a[i].log, x->needle))
            return true;
    return false;
}

static void wait_any(agent_t *a, int n, const char *needle, long ms)
{
    any_t x = {a, n, needle};
    ck_assert_msg(ec_test_wait(any_console, &x, ms), "no console showed '%s'", needle);
}

static bool none_shows(agent_t *a, int n, const char *needle)
{
    any_t x = {a, n, needle};
    return !any_console(&x);
}

/* The failure record of kind hung naming node, its message copied to msg. */
static bool hung_record_now(const char *job, const char *node, char *msg, size_t len)
{
    ec_keys_t k;
    char prefix[EC_KEY_MAX];
    ck_assert_int_eq(ec_keys_init(&k, NULL, job, NULL), 0);
    ec_key_failures_prefix(&k, prefix, sizeof(prefix));
    ec_kv_list_t l = {0};
    ck_assert_int_eq(ec_etcd_get_prefix(c, prefix, 0, &l, NULL), 0);
    bool found = false;
    for (size_t i = 0; i < l.n && !found; i++) {
        ec_failure_t *f = NULL;
        if (ec_failure_decode(l.kvs[i].value, l.kvs[i].value_len, l.kvs[i].key, &f, NULL) == 0 &&
            f->kind == EC_FAILURE_HUNG && !strcmp(f->node_id, node)) {
            snprintf(msg, len, "%s", f->message ? f->message : "");
            found = true;
        }
        ec_failure_free(f);
    }
    ec_kv_list_free(&l);
    return found;
}

typedef struct {
    const char *job, *node;
    char *msg;
    size_t len;
} hung_want_t;

static bool hung_there(void *arg)
{
    hung_want_t *w = arg;
    return hung_record_now(w->job, w->node, w->msg, w->len);
}

/* The same, polled for a few seconds (the leader writes it as it decides). */
static bool hung_record(const char *job, const char *node, char *msg, size_t len)
{
    hung_want_t w = {job, node, msg, len};
    return ec_test_wait(hung_there, &w, 5000);
}

static pid_t rank_pid(const char *job, const char *node, uint64_t epoch)
{
    char p[512], line[256];
    snprintf(p, sizeof(p), "%s/dump-%s/env.%s.0.%llu", tmp, job, node, (unsigned long long)epoch);
    FILE *f = fopen(p, "r");
    ck_assert_msg(f != NULL, "no environment dump %s", p);
    pid_t pid = 0;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "PID=", 4))
            pid = (pid_t)atoi(line + 4);
    fclose(f);
    ck_assert_int_gt(pid, 0);
    return pid;
}

/* When the stopped local rank 0 of job's node last made progress, as its
 * agent reads it (its progress file: the latest of its last step, collective
 * and resume; CLOCK_MONOTONIC ms), or fallback when it never reported.
 * Silence is counted from there, not from the SIGSTOP: the rank may have
 * stepped last a step period before it (longer on a loaded machine). */
/* Local rank 0's progress file of job's node, read whole; false if none. */
static bool read_slot(const char *job, const char *node, ec_progress_slot_t *s)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/%s-%s/progress.0", tmp, job, node);
    FILE *f = fopen(p, "r");
    bool got = f && fread(s, sizeof(*s), 1, f) == 1 && s->magic == EC_PROGRESS_MAGIC;
    if (f)
        fclose(f);
    return got;
}

static int64_t last_progress_ms(const char *job, const char *node, int64_t fallback)
{
    ec_progress_slot_t s;
    if (!read_slot(job, node, &s))
        return fallback;
    int64_t ns = s.step_ns;
    if (s.coll_done_ns > ns)
        ns = s.coll_done_ns;
    if (s.resumed_ns > ns)
        ns = s.resumed_ns;
    return ns > 0 ? ns / 1000000 : fallback;
}

/* The common tail: the leader named `node` no sooner than the timeout
 * after t0, wrote the evidence, and the job went on: a new epoch of the
 * same world in which every node steps again. */
/* The leader named `node` (on some agent's console, within slack_ms after
 * the timeout) no sooner than timeout_ms after its last progress t0, and
 * wrote a failure record of kind hung whose evidence holds ev1 and ev2
 * (NULL: nothing more). */
static void expect_named(agent_t *a, int n, const char *job, const char *node, int64_t t0,
                         long timeout_ms, long slack_ms, const char *ev1, const char *ev2)
{
    char needle[64];
    snprintf(needle, sizeof(needle), "+hang-suspect %s ", node);
    wait_any(a, n, needle, timeout_ms + slack_ms);
    int64_t noticed = ec_test_now_ms() - t0;
    printf("# %s named %lld ms after its last progress as read (--hang_timeout=%ld ms)\n", node,
           (long long)noticed, timeout_ms);
    ck_assert_msg(noticed >= timeout_ms, "named after %lld ms, before --hang_timeout=%ld ms",
                  (long long)noticed, timeout_ms);
    char msg[1100] = "";
    ck_assert_msg(hung_record(job, node, msg, sizeof(msg)), "no failure record of kind hung "
                  "for %s", node);
    for (const char *const *ev = (const char *const[]){ev1, ev2, NULL}; *ev; ev++)
        ck_assert_msg(strstr(msg, *ev), "the failure record's evidence '%s' lacks '%s'", msg, *ev);
}

static void expect_recovered(agent_t *a, int n, const char *job, const char *node,
                             uint64_t epoch, int64_t t0, long timeout_ms, const char *evidence)
{
    expect_named(a, n, job, node, t0, timeout_ms, 10000, evidence, NULL);
    uint64_t next = wait_epoch_above(job, epoch, n, 15000);
    for (int i = 0; i < n; i++)
        wait_steps(a[i].id, next, 5, 15000);
}

START_TEST(a_stopped_rank_is_named_after_the_timeout_and_the_job_goes_on)
{
    agent_t a[2] = {start_agent("hs", "a", "2", "", "--hang_timeout=2", "0"),
                    start_agent("hs", "b", "2", "", "--hang_timeout=2", "0")};
    uint64_t e = wait_epoch_above("hs", 0, 2, 15000);
    wait_steps("b", e, 5, 10000);
    stopped_pid = rank_pid("hs", "b", e);
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(kill(stopped_pid, SIGSTOP), 0);
    int64_t last = last_progress_ms("hs", "b", t0);
    printf("# b's last step %lld ms before the SIGSTOP\n", (long long)(t0 - last));
    expect_recovered(a, 2, "hs", "b", e, last, 2000, "stopped");
    /* b's agent did the restart, and the stopped process is gone */
    ck_assert(ec_test_wait_file(a[1].log, "+hung b local rank 0", 5000)); /* console thread */
    ck_assert_msg(kill(stopped_pid, 0) < 0, "the stopped process %d is still there",
                  (int)stopped_pid);
    stopped_pid = 0;
}
END_TEST

START_TEST(a_rank_sleeping_forever_is_named_and_restarted)
{
    char envs[400];
    snprintf(envs, sizeof(envs), "EC_TEST_PROG_HANG=b:0:15:%s/hung-once", tmp);
    agent_t a[2] = {start_agent("hz", "a", "2", envs, "--hang_timeout=2", "0"),
                    start_agent("hz", "b", "2", envs, "--hang_timeout=2", "0")};
    uint64_t e = wait_epoch_above("hz", 0, 2, 15000);
    wait_steps("b", e, 15, 10000);
    int64_t t0 = ec_test_now_ms(); /* b's last step: at most a step ago */
    expect_recovered(a, 2, "hz", "b", e, last_progress_ms("hz", "b", t0 - 100), 2000,
                     "not inside a collective");
}
END_TEST

START_TEST(a_program_that_reports_nothing_is_watched_through_its_log)
{
    char envs[400];
    snprintf(envs, sizeof(envs), "EC_TEST_PROG_REPORT=0 EC_TEST_PROG_HANG=b:0:15:%s/hung-once",
             tmp);
    agent_t a[2] = {start_agent("hl", "a", "2", envs, "--hang_timeout=2", "0"),
                    start_agent("hl", "b", "2", envs, "--hang_timeout=2", "0")};
    uint64_t e = wait_epoch_above("hl", 0, 2, 15000);
    wait_steps("b", e, 15, 10000);
    int64_t t0 = ec_test_now_ms();
    expect_recovered(a, 2, "hl", "b", e, last_progress_ms("hl", "b", t0 - 100), 2000,
                     "its log did not grow");
}
END_TEST

START_TEST(a_python_program_reporting_through_ecoord_progress_is_watched)
{
    /* the package's pure-Python writer of the same progress file */
    static char path[1200];
    snprintf(path, sizeof(path), "%s/tests/progs/progress_steps.py",
             getenv("EC_SRCDIR") ? getenv("EC_SRCDIR") : ".");
    if (access(path, R_OK) != 0 || access("/usr/bin/python3", X_OK) != 0) {
        fprintf(stderr, "# skipped: no %s or no python3\n", path);
        return;
    }
    python_prog = path;
    char envs[400];
    snprintf(envs, sizeof(envs), "EC_TEST_PROG_HANG=b:0:15:%s/hung-once", tmp);
    const char *flags = "--python=/usr/bin/python3 --hang_timeout=2";
    agent_t a[2] = {start_agent("hp", "a", "2", envs, flags, "0"),
                    start_agent("hp", "b", "2", envs, flags, "0")};
    uint64_t e = wait_epoch_above("hp", 0, 2, 15000);
    wait_steps("b", e, 15, 15000);
    int64_t t0 = ec_test_now_ms();
    /* "at step 15": the steps came from the Python writer (a program that
     * reports nothing is described by its log instead) */
    expect_recovered(a, 2, "hp", "b", e, last_progress_ms("hp", "b", t0 - 100), 2000,
                     "at step 15");
}
END_TEST

START_TEST(a_declared_checkpoint_longer_than_the_timeout_is_no_hang)
{
    /* every rank pauses 4 s at step 10 with --hang_timeout=1.5 */
    const char *envs = "EC_TEST_PROG_CHECKPOINT=10:4000";
    agent_t a[2] = {start_agent("hc", "a", "2", envs, "--hang_timeout=1.5", "0"),
                    start_agent("hc", "b", "2", envs, "--hang_timeout=1.5", "0")};
    uint64_t e = wait_epoch_above("hc", 0, 2, 15000);
    wait_steps("a", e, 9, 10000);
    /* the pause was seen as one ... */
    wait_any(a, 2, "paused (checkpoint declared)", 5000);
    /* ... and both ranks step past it in the same epoch, no hang named */
    wait_steps("a", e, 20, 15000);
    wait_steps("b", e, 20, 15000);
    ck_assert_msg(none_shows(a, 2, "+hang"), "a hang was declared during a checkpoint");
    ck_assert_int_eq(epoch_number("hc"), e);
}
END_TEST

/* When node's local rank 0 declared its pause, as its progress file says
 * (CLOCK_MONOTONIC ms), or fallback. */
static int64_t pause_start_ms(const char *job, const char *node, int64_t fallback)
{
    ec_progress_slot_t s;
    return read_slot(job, node, &s) && s.paused_ns > 0 ? s.paused_ns / 1000000 : fallback;
}

/* A declared pause is no hang for --max_pause only: one never resumed (a
 * checkpoint stuck on its storage) counts as silence from its start, so the
 * node is named once --max_pause (and --hang_timeout) passed, its agent
 * says why, and the job goes on. */
START_TEST(a_pause_past_max_pause_is_a_hang)
{
    const char *flags = "--hang_timeout=1.5 --max_pause=3";
    agent_t a[2] = {start_agent("hm", "a", "2", "", flags, "0"),
                    start_agent("hm", "b", "2", "EC_TEST_PROG_CHECKPOINT=10:600000", flags, "0")};
    uint64_t e = wait_epoch_above("hm", 0, 2, 15000);
    wait_any(a, 2, "paused (checkpoint declared)", 15000);
    int64_t t0 = pause_start_ms("hm", "b", ec_test_now_ms());
    expect_recovered(a, 2, "hm", "b", e, t0, 3000, "not inside a collective");
    ck_assert_msg(ec_test_wait_file(a[1].log, "past --max_pause", 5000),
                  "b's agent did not say its rank's pause ran past --max_pause");
}
END_TEST

/* Every rank spends 5 s in a phase nobody declared (an evaluation) with
 * --hang_timeout=2: each node is silent, none clearly longer than the
 * others: nobody is blamed or restarted (the first to reach the timeout
 * was, then the next, ...), the job says it stalled and goes on. */
START_TEST(every_node_silent_together_is_no_hang)
{
    const char *envs = "EC_TEST_PROG_EVAL=10:5000";
    agent_t a[2] = {start_agent("he", "a", "2", envs, "--hang_timeout=2", "0"),
                    start_agent("he", "b", "2", envs, "--hang_timeout=2", "0")};
    uint64_t e = wait_epoch_above("he", 0, 2, 15000);
    wait_steps("a", e, 9, 10000);
    wait_steps("a", e, 20, 30000); /* past the phase, in the same epoch */
    wait_steps("b", e, 20, 30000);
    ck_assert_msg(none_shows(a, 2, "+hang-suspect"), "a node was blamed for a phase every "
                  "node ran");
    ck_assert_int_eq(epoch_number("he"), e);
    ck_assert_msg(!none_shows(a, 2, "+hang-stalled"), "the stall was not said");
}
END_TEST

/* The first log line of node's local rank 0 containing every needle. */
static bool log_line(const char *job, const char *node, const char *n1, const char *n2,
                     char *out, size_t len)
{
    char p[512], line[1024];
    snprintf(p, sizeof(p), "%s/%s-%s/workerlog.0", tmp, job, node);
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        if (strstr(line, n1) && (!n2 || strstr(line, n2))) {
            found = true;
            if (out)
                snprintf(out, len, "%s", line);
        }
    fclose(f);
    return found;
}

typedef struct {
    const char *job, *node, *n1, *n2;
} line_want_t;

static bool has_line(void *arg)
{
    line_want_t *w = arg;
    return log_line(w->job, w->node, w->n1, w->n2, NULL, 0);
}

static void wait_line(const char *job, const char *node, const char *n1, const char *n2, long ms)
{
    line_want_t w = {job, node, n1, n2};
    ck_assert_msg(ec_test_wait(has_line, &w, ms), "%s's log never showed '%s' with '%s'", node, n1,
                  n2 ? n2 : "");
}

/* Agents a and b of job in place (--hang_timeout=3, fault tolerant as in
 * start_agent), each running the command line prog; env: VAR=VALUE words
 * for both programs, env_b more for b's alone. */
static void start_inplace_pair(agent_t a[2], const char *job, const char *env, const char *env_b,
                               const char *prog)
{
    const char *ids[2] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        snprintf(a[i].id, sizeof(a[i].id), "%s", ids[i]);
        snprintf(a[i].log, sizeof(a[i].log), "%s/%s-%s.console", tmp, job, ids[i]);
        char cmd[3000];
        snprintf(cmd, sizeof(cmd),
                 "exec env %s %s %s launch --elastic_server=%s --job_id=%s --np=2 "
                 "--nproc_per_node=1 --node_id=%s --log_dir=%s/%s-%s --grace_period=1 "
                 "--elastic_timeout=1 --rebuild=inprocess --hang_timeout=3 --max_restart=3 -- %s",
                 env, i == 1 ? env_b : "", ec_test_bin("ECOORD", "./ecoord"),
                 ec_embed_endpoint(etcd), job, ids[i], tmp, job, ids[i], prog);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        a[i].pid = ec_test_spawn(argv, a[i].log);
        pids[npids++] = a[i].pid;
    }
}

/* Wait for node's first log line with both needles; its "pid=N" into pid. */
static void wait_pid_at(const char *job, const char *node, const char *n1, const char *n2,
                        char *pid, size_t len, long ms)
{
    char line[1024];
    wait_line(job, node, n1, n2, ms);
    ck_assert(log_line(job, node, n1, n2, line, sizeof(line)));
    snprintf(pid, len, "%s", strstr(line, "pid=") ? strstr(line, "pid=") : "pid=?");
    pid[strcspn(pid, " \n")] = '\0';
}

START_TEST(a_collective_blocked_on_a_stopped_peer_is_released_in_place)
{
    /* linreg over Gloo in place: b's process stopped mid-training leaves a's
     * inside an allreduce; the leader names b (a waits inside a collective,
     * b's process is stopped), b's agent restarts its process, and a's same
     * process rebuilds in place and trains on with it */
    agent_t a[2];
    char prog[600];
    snprintf(prog, sizeof(prog), "%s --steps=100000 --delay-ms=20",
             ec_test_bin("ECW_LINREG", "worker/examples/linreg"));
    start_inplace_pair(a, "hw", "", "", prog);
    uint64_t e = wait_epoch_above("hw", 0, 2, 20000);
    char want[64], apid[32], bpid[32];
    snprintf(want, sizeof(want), "epoch=%llu rank=", (unsigned long long)e);
    wait_pid_at("hw", "a", "linreg step=20 ", want, apid, sizeof(apid), 20000);
    wait_pid_at("hw", "b", "linreg step=20 ", want, bpid, sizeof(bpid), 20000);
    stopped_pid = (pid_t)atoi(bpid + 4);
    ck_assert_int_gt(stopped_pid, 0);
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(kill(stopped_pid, SIGSTOP), 0);
    /* b stopped; a waiting inside a collective (only such a wait reads "waited") */
    expect_named(a, 2, "hw", "b", last_progress_ms("hw", "b", t0), 3000, 10000, "stopped",
                 "a waited");
    printf("# ... %lld ms after the SIGSTOP\n", (long long)(ec_test_now_ms() - t0));
    uint64_t next = wait_epoch_above("hw", e, 2, 15000);
    snprintf(want, sizeof(want), "epoch=%llu rank=", (unsigned long long)next);
    /* a's same process trains on in the new epoch; b's is a new one */
    char apid_sp[48];
    snprintf(apid_sp, sizeof(apid_sp), "%s node=a", apid);
    wait_line("hw", "a", want, apid_sp, 20000);
    wait_line("hw", "b", want, "node=b", 20000);
    /* a's wait, which ended with the epoch, is not held against it */
    ck_assert_msg(none_shows(a, 2, "+hang-suspect a "), "a was blamed for b's hang");
    ck_assert_msg(kill(stopped_pid, 0) < 0, "b's stopped process %d is still there",
                  (int)stopped_pid);
    stopped_pid = 0;
}
END_TEST

static bool file_gone(void *path)
{
    return access(path, F_OK) != 0;
}

/* Whether python3 (Debian's, where torch is) imports torch.distributed. */
static bool have_torch(void)
{
    char out[64];
    char *argv[] = {"/usr/bin/python3", "-c", "import torch.distributed; print('ok')", NULL};
    return access("/usr/bin/python3", X_OK) == 0 && ec_test_run(argv, out, sizeof(out)) == 0 &&
           strstr(out, "ok");
}

START_TEST(a_torch_rank_hung_outside_its_collectives_is_named_not_its_waiting_peer)
{
    /* ecoord.torch over Gloo in place (worker/examples/torch_ddp.py): b's
     * process, told to, sleeps forever before a step, outside any collective
     * (as in its data loading), while a's waits in DDP's gradient allreduce.  Both
     * went silent at the same step; the leader names b, not a: a is inside a
     * collective (ecoord.torch marks the buckets it hands torch), b is not.
     * b's agent restarts its process, and a's same process rebuilds in place
     * and trains on with it. */
    const char *src = getenv("EC_SRCDIR") ? getenv("EC_SRCDIR") : ".";
    const char *bld = getenv("EC_BUILDDIR") ? getenv("EC_BUILDDIR") : ".";
    char prog[600], lib[600];
    snprintf(prog, sizeof(prog), "%s/worker/examples/torch_ddp.py", src);
    snprintf(lib, sizeof(lib), "%s/.libs/libecworker.so.0", bld);
    if (access(prog, R_OK) != 0 || access(lib, R_OK) != 0 || !have_torch()) {
        fprintf(stderr, "# skipped: no %s, no %s, or no torch under /usr/bin/python3\n", prog,
                lib);
        return;
    }
    agent_t a[2];
    char env[700], env_b[400], cmd[800];
    snprintf(env, sizeof(env), "ECOORD_LIBECWORKER=%s OMP_NUM_THREADS=1 TORCH_DDP_TIMEOUT=120",
             lib);
    char hang[300];
    snprintf(hang, sizeof(hang), "%s/ht-hang-now", tmp);
    snprintf(env_b, sizeof(env_b), "TORCH_DDP_HANG=%s", hang);
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s --steps 100000 --delay-ms 20", prog);
    start_inplace_pair(a, "ht", env, env_b, cmd);
    uint64_t e = wait_epoch_above("ht", 0, 2, 60000);
    char want[64], apid[32];
    snprintf(want, sizeof(want), "epoch=%llu rank=", (unsigned long long)e);
    wait_pid_at("ht", "a", "torch_ddp step=14 ", want, apid, sizeof(apid), 60000);
    wait_line("ht", "b", "torch_ddp step=14 ", want, 60000);
    ec_test_write_file(hang, "", 0644);
    ck_assert_msg(ec_test_wait(file_gone, hang, 10000), "b's process never took %s", hang);
    /* b outside a collective, a waiting inside one */
    int64_t t0 = ec_test_now_ms();
    expect_named(a, 2, "ht", "b", last_progress_ms("ht", "b", t0), 3000, 20000,
                 "not inside a collective", "a waited");
    uint64_t next = wait_epoch_above("ht", e, 2, 30000);
    snprintf(want, sizeof(want), "epoch=%llu rank=", (unsigned long long)next);
    /* a's same process trains on with b's new one */
    wait_line("ht", "a", want, apid, 60000);
    wait_line("ht", "b", want, NULL, 60000);
    ck_assert_msg(none_shows(a, 2, "+hang-suspect a "), "a was blamed for b's hang");
}
END_TEST

static char status_out[65536];

static bool status_names_slowest(void *arg)
{
    char srv[300];
    snprintf(srv, sizeof(srv), "--elastic_server=%s", ec_embed_endpoint(etcd));
    char *argv[] = {(char *)ec_test_bin("ECOORD", "./ecoord"), "status", srv, "--job_id=hq",
                    NULL};
    ec_test_run(argv, status_out, sizeof(status_out));
    return strstr(status_out, (const char *)arg) != NULL;
}

START_TEST(a_slow_node_is_named_in_status)
{
    const char *envs = "EC_TEST_PROG_SLOW=c:150"; /* c's steps take 200 ms, the others' 50 */
    agent_t a[3] = {start_agent("hq", "a", "3", envs, "", "0"),
                    start_agent("hq", "b", "3", envs, "", "0"),
                    start_agent("hq", "c", "3", envs, "", "0")};
    (void)a;
    uint64_t e = wait_epoch_above("hq", 0, 3, 15000);
    wait_steps("c", e, 3, 10000);
    ck_assert_msg(ec_test_wait(status_names_slowest, "slowest node: c,", 20000),
                  "status never named c the slowest node:\n%s", status_out);
    /* and by how much: about 4x the median (50 ms steps plus sleeping overhead) */
    const char *x = strstr(status_out, "slowest node: c, ");
    double ratio = atof(x + strlen("slowest node: c, "));
    ck_assert_msg(ratio > 2.0, "c only %.2fx the median:\n%s", ratio, status_out);
}
END_TEST

START_TEST(a_straggler_is_evicted_with_straggler_factor_and_rejoins)
{
    /* c's steps take 4x the others'; --straggler_factor=2: c is named with
     * its step time against the median, evicted (the job goes on with 2),
     * and rejoins (3 again), once: not evicted again within the hold-off */
    const char *envs = "EC_TEST_PROG_SLOW=c:150";
    const char *flags = "--straggler_factor=2";
    agent_t a[3] = {start_agent("hg", "a", "2:3", envs, flags, "0"),
                    start_agent("hg", "b", "2:3", envs, flags, "0"),
                    start_agent("hg", "c", "2:3", envs, flags, "0")};
    uint64_t e = wait_epoch_above("hg", 0, 3, 15000);
    wait_any(a, 3, "+straggler c ", 20000);
    wait_any(a, 3, "-node c evicted: straggler", 5000);
    char msg[1100] = "";
    ck_assert(hung_record("hg", "c", msg, sizeof(msg)));
    ck_assert_msg(strstr(msg, "straggler: c: step time") && strstr(msg, "x the median"),
                  "the record's message '%s' does not give the step time against the median",
                  msg);
    uint64_t without = wait_epoch_above("hg", e, 2, 15000);
    uint64_t back = wait_epoch_above("hg", without, 3, 15000);
    wait_steps("c", back, 3, 15000);
    ck_assert_msg(none_shows(a, 3, "+straggler a ") && none_shows(a, 3, "+straggler b "),
                  "a node at the median was named a straggler");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t3400-hang");
    TCase *t = tcase_create("hang");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    ec_tcase_add(t, a_stopped_rank_is_named_after_the_timeout_and_the_job_goes_on);
    ec_tcase_add(t, a_rank_sleeping_forever_is_named_and_restarted);
    ec_tcase_add(t, a_program_that_reports_nothing_is_watched_through_its_log);
    ec_tcase_add(t, a_python_program_reporting_through_ecoord_progress_is_watched);
    ec_tcase_add(t, a_collective_blocked_on_a_stopped_peer_is_released_in_place);
    ec_tcase_add(t, a_torch_rank_hung_outside_its_collectives_is_named_not_its_waiting_peer);
    ec_tcase_add(t, a_declared_checkpoint_longer_than_the_timeout_is_no_hang);
    ec_tcase_add(t, a_pause_past_max_pause_is_a_hang);
    ec_tcase_add(t, every_node_silent_together_is_no_hang);
    ec_tcase_add(t, a_slow_node_is_named_in_status);
    ec_tcase_add(t, a_straggler_is_evicted_with_straggler_factor_and_rejoins);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
