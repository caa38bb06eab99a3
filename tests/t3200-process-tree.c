/* The agent owns its process trees and never lets output stall it:
 *
 * - every descendant of a rank (its own process group, and processes that
 *   setsid() away from it) is gone after the rank fails and its node
 *   restarts, and after the agent is SIGTERMed;
 * - what a rank started in its process group, and a helper that setsid()
 *   away and was adopted by the agent, are gone even when the agent itself
 *   is SIGKILLed (its janitor process stops them);
 * - the rank of an agent frozen by SIGSTOP (it cannot fence itself) is
 *   killed by the janitor before etcd could expire the agent's lease, and
 *   rejoins after SIGCONT; a healthy agent's janitor never fires;
 * - a failing rank with a very long command line is reported (command
 *   truncated with an ellipsis) and restarted, the agent does not crash;
 * - a program that cannot be executed is an error the agent itself logs,
 *   with the reason, not a mysterious exit code 127;
 * - the program starts with default signal dispositions and an empty mask,
 *   whatever the agent inherited (nohup) or set up for itself;
 * - a console (stdout) nobody reads does not freeze the agent: with the
 *   leader's stdout a full pipe, a dead peer is still replaced by a new
 *   epoch within seconds, the console later says how many lines it dropped,
 *   and the worker log still has everything. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ec_select.h"
#include "harness.h"
#include "records.h"

EC_TEST_ETCD_FIXTURE("t3200", 16)
static pid_t strays[16]; /* processes the agents were meant to stop */
static bool agent_ignores_hup; /* start agents as `nohup` would */
static int nstrays;

static void teardown(void)
{
    agent_ignores_hup = false;
    for (int i = 0; i < nstrays; i++) /* only left when a test failed */
        if (strays[i] > 0)
            kill(strays[i], SIGKILL);
    nstrays = 0;
    etcd_down();
}

static const char *ecoord(void)
{
    return ec_test_bin("ECOORD", "./ecoord");
}

static const char *prog(void)
{
    return ec_test_bin("EC_TEST_PROG", "tests/ec-test-prog");
}

/* `ecoord launch FLAGS... -- PROG...` with stdout to out_fd (a file or a
 * pipe) and stderr to errpath. */
static pid_t spawn_agent(char *const *argv, int out_fd, const char *errpath)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        if (agent_ignores_hup)
            signal(SIGHUP, SIG_IGN);
        int e = open(errpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(out_fd, 1);
        if (e >= 0)
            dup2(e, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    pids[npids++] = pid;
    return pid;
}

static int open_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    return fd;
}

static pid_t read_pid(const char *path)
{
    ck_assert_msg(ec_test_wait(ec_test_exists, (void *)path, 15000), "%s never appeared", path);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int v = 0; /* a bare pid, or ec-test-prog's PID=<pid> line */
    ck_assert_int_eq(fscanf(f, "PID=%d", &v) == 1 || fscanf(f, "%d", &v) == 1, 1);
    fclose(f);
    ck_assert_int_gt(v, 1);
    strays[nstrays++] = v;
    return (pid_t)v;
}

static bool pid_gone(void *arg)
{
    return kill(*(pid_t *)arg, 0) < 0 && errno == ESRCH;
}

/* Gone, or a zombie nobody reaps (an init that does not reap). */
static bool pid_dead(void *arg)
{
    if (pid_gone(arg))
        return true;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)*(pid_t *)arg);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] == 'Z';
}

static void assert_gone(pid_t pid, const char *what)
{
    ck_assert_msg(ec_test_wait(pid_gone, &pid, 5000), "%s (pid %d) is still there", what, (int)pid);
    for (int i = 0; i < nstrays; i++)
        if (strays[i] == pid)
            strays[i] = 0;
}

/* The agent's janitor process: its child named ecoord-janitor. */
static bool find_janitor(void *arg)
{
    pid_t *io = arg, agent = io[0];
    char path[96], comm[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)agent, (int)agent);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    int pid;
    while (fscanf(f, "%d", &pid) == 1) {
        snprintf(path, sizeof(path), "/proc/%d/comm", pid);
        FILE *cf = fopen(path, "r");
        if (cf && fgets(comm, sizeof(comm), cf) && !strncmp(comm, "ecoord-janitor", 14))
            io[1] = (pid_t)pid;
        if (cf)
            fclose(cf);
    }
    fclose(f);
    return io[1] > 0;
}

static pid_t janitor_of(pid_t agent)
{
    pid_t io[2] = {agent, 0};
    ck_assert_msg(ec_test_wait(find_janitor, io, 10000), "agent %d has no janitor process", (int)agent);
    strays[nstrays++] = io[1];
    return io[1];
}

/* Whether one line of the file contains both a and b. */
static bool line_has(const char *path, const char *a, const char *b)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, a) && strstr(line, b);
    fclose(f);
    return found;
}

static const char *dump_path(const char *node, int lr, int epoch)
{
    static char p[512];
    snprintf(p, sizeof(p), "%s/dump/env.%s.%d.%d", tmp, node, lr, epoch);
    return p;
}

START_TEST(descendants_stopped_on_restart_and_agent_exit)
{
    /* Each run starts a grandchild in its process group and one in a
     * session of its own, each writing its pid; the run of epoch 1 fails
     * (exit 3) leaving both behind, the run of epoch 2 waits. */
    const char *script =
        "d=$1; e=$ECOORD_EPOCH\n"
        "sh -c 'echo $$ > $0.tmp; mv $0.tmp $0; exec sleep 300' $d/gc.$e &\n"
        "setsid sh -c 'echo $$ > $0.tmp; mv $0.tmp $0; exec sleep 300' $d/sd.$e &\n"
        "i=0; while { [ ! -e $d/gc.$e ] || [ ! -e $d/sd.$e ]; } && [ $i -lt 1000 ]; do\n"
        "  sleep 0.01; i=$((i+1)); done\n"
        "[ \"$e\" = 1 ] && exit 3\n"
        "wait\n";
    char es[128], ld[320], console[320], err[320];
    snprintf(es, sizeof(es), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(ld, sizeof(ld), "--log_dir=%s/logs", tmp);
    snprintf(console, sizeof(console), "%s/console", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    char *argv[] = {(char *)ecoord(), "launch", es, "--job_id=jtree", "--np=1", "--nproc_per_node=1",
                    "--node_id=a", ld, "--grace_period=2", "--max_restart=3", "--", "/bin/sh", "-c",
                    (char *)script, "sh", tmp, NULL};
    int out = open_log(console);
    pid_t agent = spawn_agent(argv, out, err);
    close(out);
    char p[400];
    snprintf(p, sizeof(p), "%s/gc.1", tmp);
    pid_t gc1 = read_pid(p);
    snprintf(p, sizeof(p), "%s/sd.1", tmp);
    pid_t sd1 = read_pid(p);
    /* the restart epoch: its processes run, epoch 1's are gone */
    snprintf(p, sizeof(p), "%s/gc.2", tmp);
    pid_t gc2 = read_pid(p);
    snprintf(p, sizeof(p), "%s/sd.2", tmp);
    pid_t sd2 = read_pid(p);
    assert_gone(gc1, "a grandchild of the failed epoch-1 run");
    assert_gone(sd1, "a setsid() grandchild of the failed epoch-1 run");
    ck_assert_int_eq(kill(gc2, 0), 0);
    ck_assert_int_eq(kill(sd2, 0), 0);
    pid_t jan = janitor_of(agent);
    /* the agent leaves on SIGTERM: nothing of epoch 2 stays */
    kill(agent, SIGTERM);
    ck_assert_int_eq(ec_test_reap(agent, 15000), 128 + SIGTERM);
    assert_gone(jan, "the agent's janitor, after the agent's normal exit");
    ck_assert_msg(!ec_test_file_contains(err, "ecoord janitor:"),
                  "the janitor killed something after a normal exit");
    assert_gone(gc2, "a grandchild of the epoch-2 run, after the agent's SIGTERM");
    assert_gone(sd2, "a setsid() grandchild of the epoch-2 run, after the agent's SIGTERM");
}
END_TEST

START_TEST(group_stopped_when_agent_is_sigkilled)
{
    /* The rank leaves a `sleep` in its process group and execs the test
     * program.  SIGKILL to the agent kills the program (PDEATHSIG); the
     * sleep, orphaned to init, must go too. */
    char es[128], ld[320], console[320], err[320], dump[320], gc[320];
    snprintf(es, sizeof(es), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(ld, sizeof(ld), "--log_dir=%s/logs", tmp);
    snprintf(console, sizeof(console), "%s/console", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    snprintf(dump, sizeof(dump), "%s/dump", tmp);
    snprintf(gc, sizeof(gc), "%s/gc", tmp);
    mkdir(dump, 0755);
    char *argv[] = {(char *)ecoord(), "launch", es, "--job_id=jkill9", "--np=1", "--nproc_per_node=1",
                    "--node_id=a", ld, "--", "/bin/sh", "-c",
                    "sleep 300 & echo $! > $0.tmp; mv $0.tmp $0; exec \"$@\"", gc, (char *)prog(),
                    dump, "0", NULL};
    int out = open_log(console);
    pid_t agent = spawn_agent(argv, out, err);
    close(out);
    pid_t sleeper = read_pid(gc);
    pid_t rank = read_pid(dump_path("a", 0, 1)); /* the program runs: exec done */
    ck_assert_int_eq(kill(sleeper, 0), 0);
    pid_t jan = janitor_of(agent);
    int64_t t0 = ec_test_now_ms();
    kill(agent, SIGKILL);
    ck_assert_int_eq(ec_test_reap(agent, 5000), 128 + SIGKILL);
    ck_assert_msg(ec_test_wait(pid_dead, &rank, 5000), "the rank (pid %d) outlived its SIGKILLed agent",
                  (int)rank);
    ck_assert_msg(ec_test_wait(pid_dead, &sleeper, 5000),
                  "the rank's `sleep &` (pid %d) outlived the SIGKILLed agent", (int)sleeper);
    printf("# the rank's sleep was gone %lld ms after SIGKILL to the agent\n",
           (long long)(ec_test_now_ms() - t0));
    ck_assert_msg(ec_test_wait(pid_dead, &jan, 5000), "the janitor (pid %d) outlived its kill step",
                  (int)jan);
    ck_assert_msg(ec_test_wait_file(err, "ecoord janitor: the agent", 5000),
                  "the janitor did not say what it killed");
    for (int i = 0; i < nstrays; i++)
        strays[i] = 0;
}
END_TEST

/* A rank of epoch >= 2 (the rejoin) has written its env dump. */
static bool later_epoch_dump(void *arg)
{
    const char *dir = arg;
    for (int e = 2; e < 64; e++) {
        char p[400];
        snprintf(p, sizeof(p), "%s/env.a.0.%d", dir, e);
        if (access(p, F_OK) == 0)
            return true;
    }
    return false;
}

START_TEST(frozen_agent_ranks_killed_before_lease_expiry)
{
    /* An agent frozen by SIGSTOP cannot fence itself: its janitor (not
     * frozen with it) must kill the rank before etcd could expire the
     * agent's lease (TTL 6 s after its last confirmation, i.e. before 6 s
     * after the SIGSTOP), else the job re-forms while it still runs.  After
     * SIGCONT the agent fences, registers again and its rank rejoins.
     * The janitor kills at TTL - margin/2 after the last confirmation: with
     * --lease_margin=50, 4.5 s, leaving 1.5 s for it to wake and the rank to
     * die on a loaded machine (with TTL 3 s and the default 20 %, 0.3 s). */
    char es[128], ld[320], console[320], err[320], dump[320];
    snprintf(es, sizeof(es), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(ld, sizeof(ld), "--log_dir=%s/logs", tmp);
    snprintf(console, sizeof(console), "%s/console", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    snprintf(dump, sizeof(dump), "%s/dump", tmp);
    mkdir(dump, 0755);
    char *argv[] = {(char *)ecoord(), "launch", es, "--job_id=jfrozen", "--np=1", "--nproc_per_node=1",
                    "--node_id=a", ld, "--lease_ttl=6", "--lease_margin=50", "--grace_period=2",
                    "--max_restart=3",
                    "--", (char *)prog(), dump, "0", NULL};
    int out = open_log(console);
    pid_t agent = spawn_agent(argv, out, err);
    close(out);
    pid_t rank = read_pid(dump_path("a", 0, 1));
    ck_assert_int_eq(kill(rank, 0), 0);
    pid_t jan = janitor_of(agent);
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(kill(agent, SIGSTOP), 0);
    bool dead = ec_test_wait(pid_dead, &rank, 10000);
    int64_t dt = ec_test_now_ms() - t0;
    kill(agent, SIGCONT);
    ck_assert_msg(dead, "the rank (pid %d) of the SIGSTOPped agent still runs %lld ms after the "
                        "SIGSTOP (its lease expires 6000 ms after its last confirmation)",
                  (int)rank, (long long)dt);
    printf("# the frozen agent's rank was gone %lld ms after the SIGSTOP (TTL 6000 ms, margin "
           "50 %%)\n",
           (long long)dt);
    ck_assert_msg(dt < 6000, "the rank (pid %d) of the SIGSTOPped agent was gone only %lld ms after "
                             "the SIGSTOP, when its lease (TTL 6000 ms) could have expired",
                  (int)rank, (long long)dt);
    ck_assert_msg(ec_test_wait_file(err, "ecoord janitor: the agent", 5000),
                  "the janitor did not say what it killed");
    ck_assert_int_eq(kill(jan, 0), 0); /* it stays, for the next freeze */
    /* thawed: the agent fences, comes back and its rank rejoins */
    ck_assert_msg(ec_test_wait(later_epoch_dump, dump, 30000),
                  "the thawed agent's rank did not rejoin (no env dump of a later epoch in %s)", dump);
    ck_assert_int_eq(kill(agent, 0), 0);
    for (int i = 0; i < nstrays; i++)
        strays[i] = 0;
    strays[0] = jan;
    nstrays = 1;
}
END_TEST

typedef struct {
    const char *es; /* --elastic_server=... */
    const char *dir;
    char out[8192];
} st_want_t;

/* `ecoord status` of jwatchdog says its processes were stopped for the fence. */
static bool status_names_the_fence_stop(void *arg)
{
    st_want_t *w = arg;
    char cmd[800], path[400];
    snprintf(path, sizeof(path), "%s/status.out", w->dir);
    snprintf(cmd, sizeof(cmd), "%s status %s --job_id=jwatchdog > %s 2>&1", ecoord(), w->es,
             path);
    w->out[0] = '\0';
    if (system(cmd) != 0)
        return false;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(w->out, 1, sizeof(w->out) - 1, f);
    w->out[n] = '\0';
    fclose(f);
    return strstr(w->out, "stopped 1 time for the fence") != NULL;
}

static bool either_has(const char *a, const char *b, const char *needle)
{
    return ec_test_file_contains(a, needle) || ec_test_file_contains(b, needle);
}

START_TEST(a_watchdog_kill_is_not_a_failure_of_the_program)
{
    /* The janitor's watchdog kills the ranks of an agent held up past its
     * fence deadline (here frozen; in life an etcd call through a raft
     * election or a cut): not a failure of the program.  With
     * --max_restart=0, one counted failure would end the job; the thawed
     * agent must instead name the kill for what it is, keep its budget and
     * have its rank rejoin.  (Thawed, the agent finds its fence deadline
     * passed and fences before it reaps the rank, so this takes the fence's
     * path; a rank reaped first is recognised by the watchdog's deadline,
     * launch.c on_child_exit.) */
    char es[128], ld[320], console[320], err[320], dump[320];
    snprintf(es, sizeof(es), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(ld, sizeof(ld), "--log_dir=%s/logs", tmp);
    snprintf(console, sizeof(console), "%s/console", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    snprintf(dump, sizeof(dump), "%s/dump", tmp);
    mkdir(dump, 0755);
    char *argv[] = {(char *)ecoord(), "launch", es, "--job_id=jwatchdog", "--np=1",
                    "--nproc_per_node=1", "--node_id=a", ld, "--lease_ttl=6", "--lease_margin=50",
                    "--grace_period=2", "--max_restart=0", "--", (char *)prog(), dump, "0", NULL};
    int out = open_log(console);
    pid_t agent = spawn_agent(argv, out, err);
    close(out);
    pid_t rank = read_pid(dump_path("a", 0, 1));
    pid_t jan = janitor_of(agent);
    ck_assert_int_eq(kill(agent, SIGSTOP), 0);
    bool dead = ec_test_wait(pid_dead, &rank, 10000);
    kill(agent, SIGCONT);
    ck_assert_msg(dead, "the janitor did not kill the frozen agent's rank (pid %d)", (int)rank);
    ck_assert_msg(ec_test_wait(later_epoch_dump, dump, 30000),
                  "the thawed agent's rank did not rejoin (no env dump of a later epoch in %s; "
                  "console %s, stderr %s)", dump, console, err);
    ck_assert_msg(kill(agent, 0) == 0, "the agent exited after a watchdog kill (stderr %s)", err);
    ck_assert_msg(!either_has(console, err, "restarting this node's processes") &&
                      !either_has(console, err, "--max_restart=0 exhausted") &&
                      !either_has(console, err, "exited with") &&
                      !either_has(console, err, "was killed by signal"),
                  "the watchdog kill was taken for a failure of the program (console %s, stderr "
                  "%s)", console, err);
    ck_assert_msg(either_has(console, err, "not a failure of the program") ||
                      either_has(console, err, "-fenced:"),
                  "the agent did not name the kill for what it was (console %s, stderr %s)",
                  console, err);
    /* and `ecoord status` names it too: a fence stop, no failure */
    st_want_t sw = {.es = es, .dir = tmp};
    ck_assert_msg(ec_test_wait(status_names_the_fence_stop, &sw, 10000),
                  "ecoord status does not name the fence's stop:\n%s", sw.out);
    ck_assert_msg(!strstr(sw.out, "exited") && !strstr(sw.out, "signaled"),
                  "ecoord status shows the watchdog's kill as a failure:\n%s", sw.out);
    for (int i = 0; i < nstrays; i++)
        strays[i] = 0;
    strays[0] = jan;
    nstrays = 1;
}
END_TEST

START_TEST(healthy_agent_janitor_does_not_fire)
{
    /* With a short TTL, a healthy agent renews the janitor's deadline: the
     * rank runs on past several TTLs and the janitor says nothing. */
    char es[128], ld[320], console[320], err[320], dump[320];
    snprintf(es, sizeof(es), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(ld, sizeof(ld), "--log_dir=%s/logs", tmp);
    snprintf(console, sizeof(console), "%s/console", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    snprintf(dump, sizeof(dump), "%s/dump", tmp);
    mkdir(dump, 0755);
    char *argv[] = {(char *)ecoord(), "launch", es, "--job_id=jhealthy", "--np=1",
                    "--nproc_per_node=1", "--node_id=a", ld, "--lease_ttl=2", "--", (char *)prog(),
                    dump, "0", NULL};
    int out = open_log(console);
    pid_t agent = spawn_agent(argv, out, err);
    close(out);
    pid_t rank = read_pid(dump_path("a", 0, 1));
    /* 3 TTLs: the janitor would have fired after one without renewals */
    ck_assert_msg(!ec_test_wait(pid_dead, &rank, 6000), "the healthy agent's rank (pid %d) died",
                  (int)rank);
    ck_assert_msg(!ec_test_file_contains(err, "ecoord janitor:"),
                  "the janitor fired while the agent was healthy");
    kill(agent, SIGTERM);
    ck_assert_int_eq(ec_test_reap(agent, 15000), 128 + SIGTERM);
    assert_gone(rank, "the rank, after the agent's SIGTERM");
}
END_TEST

static int ppid_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    int ppid = -1;
    return rp && sscanf(rp + 1, " %*c %d", &ppid) == 1 ? ppid : -1;
}

static bool adopted(void *arg)
{
    pid_t *io = arg; /* {pid, agent} */
    return ppid_of(io[0]) == io[1];
}

/* The janitor holds at least n pidfds: what it was told about. */
static bool janitor_holds(void *arg)
{
    pid_t *io = arg; /* {janitor, n} */
    int found = 0;
    for (int fd = 0; fd < 64; fd++) {
        char path[64], link[64];
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)io[0], fd);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n > 0) {
            link[n] = '\0';
            found += strstr(link, "pidfd") != NULL;
        }
    }
    return found >= io[1];
}

START_TEST(adopted_setsid_helper_stopped_when_agent_is_sigkilled)
{
    /* The rank starts a helper that setsid()s away, through a shell that
     * exits at once: the agent adopts the helper (subreaper) and tells its
     * janitor, which kills it when the agent is SIGKILLed. */
    char es[128], ld[320], console[320], err[320], dump[320], sd[320], helper[320];
    snprintf(es, sizeof(es), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(ld, sizeof(ld), "--log_dir=%s/logs", tmp);
    snprintf(console, sizeof(console), "%s/console", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    snprintf(dump, sizeof(dump), "%s/dump", tmp);
    snprintf(sd, sizeof(sd), "%s/sd", tmp);
    snprintf(helper, sizeof(helper), "%s/helper.sh", tmp);
    mkdir(dump, 0755);
    FILE *f = fopen(helper, "w");
    ck_assert_ptr_nonnull(f);
    fputs("echo $$ > $1.tmp; mv $1.tmp $1; exec sleep 300\n", f);
    fclose(f);
    char *argv[] = {(char *)ecoord(), "launch", es, "--job_id=jkill9sd", "--np=1",
                    "--nproc_per_node=1", "--node_id=a", ld, "--", "/bin/sh", "-c",
                    "sh -c 'setsid /bin/sh \"$0\" \"$1\" &' \"$0\" \"$1\"; exec \"$2\" \"$3\" 0",
                    helper, sd, (char *)prog(), dump, NULL};
    int out = open_log(console);
    pid_t agent = spawn_agent(argv, out, err);
    close(out);
    pid_t helper_pid = read_pid(sd);
    pid_t rank = read_pid(dump_path("a", 0, 1));
    pid_t jan = janitor_of(agent);
    pid_t ad[2] = {helper_pid, agent};
    ck_assert_msg(ec_test_wait(adopted, ad, 5000), "the agent did not adopt the helper (pid %d)",
                  (int)helper_pid);
    pid_t held[2] = {jan, 2}; /* the rank's group and the helper */
    ck_assert_msg(ec_test_wait(janitor_holds, held, 5000), "the janitor was not told of the helper");
    kill(agent, SIGKILL);
    ck_assert_int_eq(ec_test_reap(agent, 5000), 128 + SIGKILL);
    ck_assert_msg(ec_test_wait(pid_dead, &rank, 5000), "the rank (pid %d) outlived its SIGKILLed agent",
                  (int)rank);
    ck_assert_msg(ec_test_wait(pid_dead, &helper_pid, 5000),
                  "the setsid() helper (pid %d) outlived the SIGKILLed agent", (int)helper_pid);
    ck_assert_msg(ec_test_wait(pid_dead, &jan, 5000), "the janitor (pid %d) outlived its kill step",
                  (int)jan);
    ck_assert_msg(ec_test_wait_file(err, "and 1 orphaned process", 5000),
                  "the janitor did not say it killed the helper");
    for (int i = 0; i < nstrays; i++)
        strays[i] = 0;
}
END_TEST

START_TEST(long_command_line_failure_reported_and_restarted)
{
    char es[128], ld[320], console[320], err[320], dump[320];
    snprintf(es, sizeof(es), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(ld, sizeof(ld), "--log_dir=%s/logs", tmp);
    snprintf(console, sizeof(console), "%s/console", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    snprintf(dump, sizeof(dump), "%s/dump", tmp);
    mkdir(dump, 0755);
    /* ec-test-prog DUMP 1 3 ARG...: runs 1 ms, exits 3; 50 arguments of
     * 100 bytes make a 5 KB command line */
    enum { NARG = 50 };
    static char args[NARG][101];
    char *argv[32 + NARG] = {(char *)ecoord(), "launch", es, "--job_id=jlong", "--np=1",
                             "--nproc_per_node=1", "--node_id=a", ld, "--grace_period=2",
                             "--max_restart=1", "--", (char *)prog(), dump, "1", "3"};
    int n = 15;
    for (int i = 0; i < NARG; i++) {
        memset(args[i], 'a' + i % 26, 100);
        args[i][100] = '\0';
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    int out = open_log(console);
    pid_t agent = spawn_agent(argv, out, err);
    close(out);
    /* fails in epoch 1, restarted in epoch 2, fails again: --max_restart=1
     * exhausted, a fixed-size job exits 101 */
    ck_assert_int_eq(ec_test_reap(agent, 30000), 101);
    ck_assert(ec_test_exists((void *)dump_path("a", 0, 2)));
    ck_assert(ec_test_file_contains(console, "Container failed !!!"));
    ck_assert(ec_test_file_contains(console, "restarting this node's processes (1 of --max_restart=1)"));
    ck_assert(line_has(console, "command: ", prog()));
    ck_assert(line_has(console, "command: ", "..."));
    ck_assert(line_has(console, "command: ", "aaaaaaaaaa"));
}
END_TEST

START_TEST(exec_failure_logged_by_agent)
{
    char es[128], ld[320], console[320], err[320];
    snprintf(es, sizeof(es), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(ld, sizeof(ld), "--log_dir=%s/logs", tmp);
    snprintf(console, sizeof(console), "%s/console", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    /* A program that is there and executable, so it passes the agent's
     * check before joining (a missing one, or one whose #! interpreter is
     * missing, exits 1 there: t3000, test_program), whose interpreter is a
     * script in turn, with a missing one: exec itself fails. */
    char interp[320], line[400];
    snprintf(interp, sizeof(interp), "%s/ec-interp", tmp);
    ec_test_write_file(interp, "#!/nonexistent/interpreter\n", 0755);
    char train[320];
    snprintf(train, sizeof(train), "%s/ec-train", tmp);
    snprintf(line, sizeof(line), "#!%s\n", interp);
    ec_test_write_file(train, line, 0755);
    char *argv[] = {(char *)ecoord(), "launch", es, "--job_id=jexec", "--np=1", "--nproc_per_node=1",
                    "--node_id=a", ld, "--max_restart=0", "--", train, "x", NULL};
    int out = open_log(console);
    pid_t agent = spawn_agent(argv, out, err);
    close(out);
    ck_assert_int_eq(ec_test_reap(agent, 20000), 101);
    char want[400];
    snprintf(want, sizeof(want), "cannot start local rank 0: cannot run '%s': No such file or "
                                 "directory", train);
    ck_assert_msg(line_has(console, "LAUNCH ERROR", want),
                  "the agent did not report the exec failure as its own error");
    ck_assert_msg(!ec_test_file_contains(console, "exit code 127"),
                  "an exec failure was reported as a process exiting 127");
}
END_TEST

START_TEST(rank_starts_with_default_signals)
{
    /* Under nohup (SIGHUP ignored) the agent's own dispositions must not
     * leak into the program: nothing ignored, nothing blocked. */
    agent_ignores_hup = true;
    char es[128], ld[320], console[320], err[320], sigs[320];
    snprintf(es, sizeof(es), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(ld, sizeof(ld), "--log_dir=%s/logs", tmp);
    snprintf(console, sizeof(console), "%s/console", tmp);
    snprintf(err, sizeof(err), "%s/stderr", tmp);
    snprintf(sigs, sizeof(sigs), "%s/sigs", tmp);
    char *argv[] = {(char *)ecoord(), "launch", es, "--job_id=jsig", "--np=1", "--nproc_per_node=1",
                    "--node_id=a", ld, "--", "/bin/sh", "-c",
                    "grep -E '^Sig(Ign|Blk)' /proc/self/status > $0.tmp && mv $0.tmp $0", sigs,
                    NULL};
    int out = open_log(console);
    pid_t agent = spawn_agent(argv, out, err);
    close(out);
    ck_assert_int_eq(ec_test_reap(agent, 20000), 0);
    ck_assert_msg(ec_test_file_contains(sigs, "SigIgn:\t0000000000000000"),
                  "the program inherited ignored signals");
    ck_assert_msg(ec_test_file_contains(sigs, "SigBlk:\t0000000000000000"),
                  "the program inherited blocked signals");
}
END_TEST

/* The agent behind the read end of a pipe nobody reads. */
typedef struct {
    pid_t pid;
    int rd;
    char id[8], err[320];
} piped_t;

static piped_t start_piped(const char *id, const char *script)
{
    piped_t a;
    snprintf(a.id, sizeof(a.id), "%s", id);
    snprintf(a.err, sizeof(a.err), "%s/%s.stderr", tmp, id);
    char es[128], ld[320], nid[32], dump[320];
    snprintf(es, sizeof(es), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(ld, sizeof(ld), "--log_dir=%s/logs-%s", tmp, id);
    snprintf(nid, sizeof(nid), "--node_id=%s", id);
    snprintf(dump, sizeof(dump), "%s/dump", tmp);
    mkdir(dump, 0755);
    char *argv[] = {(char *)ecoord(), "launch", es, "--job_id=jpipe", "--np=1:2",
                    "--nproc_per_node=1", nid, ld, "--grace_period=2", "--lease_ttl=2",
                    "--elastic_timeout=1", "--", "/bin/sh", "-c", (char *)script,
                    (char *)prog(), dump, "0", NULL};
    int pf[2];
    ck_assert_int_eq(pipe2(pf, O_CLOEXEC), 0);
    a.pid = spawn_agent(argv, pf[1], a.err);
    close(pf[1]);
    a.rd = pf[0];
    return a;
}

/* A pipe nobody reads is full when its writer can put no more in it.  The
 * bytes held then can be well below its capacity: the kernel gives each
 * write's pages slots of their own and merges into a half-used page only a
 * write whose remainder fits (58-62 KiB of 64 seen), so "full" here is more
 * than half the capacity held and no byte added for a second. */
typedef struct {
    int fd;
    int last;         /* bytes held at the last look, -1 before */
    int64_t since_ms; /* since when it has held them */
} fill_t;

static bool pipe_full(void *arg)
{
    fill_t *f = arg;
    int avail = 0, cap = fcntl(f->fd, F_GETPIPE_SZ);
    if (ioctl(f->fd, FIONREAD, &avail) != 0 || cap <= 0 || avail < cap / 2)
        return false;
    int64_t now = ec_test_now_ms();
    if (avail != f->last) {
        f->last = avail;
        f->since_ms = now;
        return false;
    }
    return now - f->since_ms >= 1000;
}

/* Read the pipe until needle shows up or the deadline passes. */
static bool pipe_shows(int fd, const char *needle, long ms)
{
    static char buf[1 << 16];
    static char win[1 << 12]; /* tail of what was read, for needles across reads */
    size_t wl = 0;
    int64_t deadline = ec_test_now_ms() + ec_test_ms(ms);
    while (ec_test_now_ms() < deadline) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 50) <= 0)
            continue;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
            return false;
        buf[n] = '\0';
        char *hit = memmem(buf, (size_t)n, needle, strlen(needle));
        if (hit) {
            char *b = hit, *e = strchr(hit, '\n');
            while (b > buf && b[-1] != '\n')
                b--;
            printf("# %.*s\n", (int)(e ? e - b : (long)strlen(b)), b);
            return true;
        }
        size_t keep = (size_t)n < sizeof(win) / 2 ? (size_t)n : sizeof(win) / 2;
        if (wl + keep > sizeof(win)) {
            memmove(win, win + wl - sizeof(win) / 2, sizeof(win) / 2);
            wl = sizeof(win) / 2;
        }
        memcpy(win + wl, buf + n - keep, keep);
        wl += keep;
        if (memmem(win, wl, needle, strlen(needle)))
            return true;
    }
    return false;
}

START_TEST(full_console_pipe_does_not_block_coordination)
{
    /* rank 0 of each node: the test program, plus 100000 lines (2.9 MB) of
     * output, far more than a pipe and the console queue hold */
    const char *script = "\"$0\" \"$@\" &\n"
                         "seq 1 100000 | sed 's/^/rank0 output line /'\n"
                         "wait\n";
    piped_t ag[2] = {start_piped("a", script), start_piped("b", script)};
    ec_epoch_t *ep = ec_test_need_epoch(c, "/jpipe/", 1, 2, 20000);
    int lead = !strcmp(ep->leader_id, "a") ? 0 : 1, other = 1 - lead;
    ck_assert_str_eq(ep->leader_id, ag[lead].id);
    uint64_t first = ep->number;
    ec_epoch_free(ep);
    fill_t lf = {ag[lead].rd, -1, 0};
    ck_assert_msg(ec_test_wait(pipe_full, &lf, 15000), "the leader's stdout never filled");
    /* the other node dies whole: agent and processes */
    pid_t prog_pid = read_pid(dump_path(ag[other].id, 0, (int)first));
    int64_t t_kill = ec_test_now_ms();
    kill(ag[other].pid, SIGKILL);
    ec_test_reap(ag[other].pid, 5000);
    kill(prog_pid, SIGKILL);
    /* TTL 2 s: the leader must re-form without anyone reading its stdout */
    ec_test_epoch_want_t w2 = {.min = first + 1, .world = 1};
    ec_epoch_t *ep2 = ec_test_wait_epoch(c, "/jpipe/", &w2, 10000);
    ck_assert_msg(ep2, "the leader published no new epoch while its stdout was full");
    ec_epoch_free(ep2);
    printf("# new epoch %lld ms after the peer was killed (lease TTL 2 s)\n",
           (long long)(ec_test_now_ms() - t_kill));
    /* reading again: the console says what it dropped */
    ck_assert_msg(pipe_shows(ag[lead].rd, "lines of output dropped", 15000),
                  "the console never said it dropped lines");
    char log[400];
    snprintf(log, sizeof(log), "%s/logs-%s/workerlog.0", tmp, ag[lead].id);
    ck_assert_msg(ec_test_wait_file(log, "rank0 output line 100000", 10000),
                  "the worker log lacks rank 0's output");
    /* a SIGTERMed agent whose stdout nobody reads still exits, taking its
     * processes along */
    ep = ec_test_epoch(c, "/jpipe/");
    pid_t lead_prog = read_pid(dump_path(ag[lead].id, 0, (int)ep->number));
    ec_epoch_free(ep);
    kill(ag[lead].pid, SIGTERM);
    ck_assert_int_eq(ec_test_reap(ag[lead].pid, 15000), 128 + SIGTERM);
    assert_gone(lead_prog, "the leader's training process, after the agent's SIGTERM");
    close(ag[0].rd);
    close(ag[1].rd);
}
END_TEST

/* Under ecoord torchrun every rank's stdout and stderr go to the agent's
 * own stdout and stderr (torchrun's console): with both pipes full and
 * nobody reading, the agent still runs its job to the end and exits, the
 * ranks never blocked on a write (what the console cannot take is dropped,
 * coord/agent/outq.h). */
START_TEST(torchrun_console_of_every_rank_never_blocks_the_agent)
{
    char ep[160];
    snprintf(ep, sizeof(ep), "--rdzv_endpoint=%s", ec_embed_endpoint(etcd));
    const char *script = "seq 1 100000 | sed 's/^/out line /'; seq 1 100000 | sed 's/^/err line /' >&2";
    char *argv[] = {(char *)ecoord(), "torchrun", "--rdzv_backend=etcd", ep, "--rdzv_id=jtpipe",
                    "--nproc_per_node=2", "--node_id=a", "--no_python", "--", "/bin/sh", "-c",
                    (char *)script, NULL};
    int out[2], err[2];
    ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        dup2(out[1], 1);
        dup2(err[1], 2);
        execv(argv[0], argv);
        _exit(127);
    }
    pids[npids++] = pid;
    close(out[1]);
    close(err[1]);
    fill_t of = {out[0], -1, 0}, ef = {err[0], -1, 0};
    ck_assert_msg(ec_test_wait(pipe_full, &of, 15000), "the agent's stdout never filled");
    ck_assert_msg(ec_test_wait(pipe_full, &ef, 15000), "the agent's stderr never filled");
    /* 400000 lines, nobody reading: the job still completes */
    ck_assert_int_eq(ec_test_reap(pid, 30000), 0);
    close(out[0]);
    close(err[0]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t3200-process-tree");
    TCase *t = tcase_create("process-tree");
    tcase_add_checked_fixture(t, etcd_up, teardown);
    ec_tcase_add(t, descendants_stopped_on_restart_and_agent_exit);
    ec_tcase_add(t, group_stopped_when_agent_is_sigkilled);
    ec_tcase_add(t, adopted_setsid_helper_stopped_when_agent_is_sigkilled);
    ec_tcase_add(t, frozen_agent_ranks_killed_before_lease_expiry);
    ec_tcase_add(t, a_watchdog_kill_is_not_a_failure_of_the_program);
    ec_tcase_add(t, healthy_agent_janitor_does_not_fire);
    ec_tcase_add(t, long_command_line_failure_reported_and_restarted);
    ec_tcase_add(t, exec_failure_logged_by_agent);
    ec_tcase_add(t, rank_starts_with_default_signals);
    ec_tcase_add(t, full_console_pipe_does_not_block_coordination);
    ec_tcase_add(t, torchrun_console_of_every_rank_never_blocks_the_agent);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
