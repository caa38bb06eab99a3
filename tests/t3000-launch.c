/* `ecoord launch` with a real etcd, several agents in separate processes on
 * loopback and a small test program: the environment every process sees
 * matches the epoch (Paddle's and torchrun's variables); a killed training
 * process is restarted in a new epoch and, past --max_restart, its node
 * leaves while the job goes on; a killed agent takes its processes with it
 * and the others re-form after its lease; a SIGTERMed agent leaves at once;
 * a fourth agent joins; the job completes with exit 0 everywhere; logs carry
 * epoch markers; bad input stops before anything starts, and every set-up
 * failure under a low open-file limit says what failed.  Proxy variables
 * set on the agent neither divert its etcd traffic nor reach its processes;
 * a busy start port is moved with one line that says so. */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ec_select.h"
#include "harness.h"
#include "knobs.h"
#include "records.h"

EC_TEST_ETCD_FIXTURE("t3000", 32)

static void setup(void)
{
    etcd_up();
    /* The agents see no GPU unless a test gives them some, on any machine:
     * no CUDA_VISIBLE_DEVICES, and an empty directory for /dev/nvidiaN. */
    char nodev[300];
    snprintf(nodev, sizeof(nodev), "%s/nodev", tmp);
    mkdir(nodev, 0755);
    setenv("ECOORD_DEV_DIR", nodev, 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
}

static const char *ecoord(void)
{
    return ec_test_bin("ECOORD", "./ecoord");
}

static const char *prog(void)
{
    return ec_test_bin("EC_TEST_PROG", "tests/ec-test-prog");
}

typedef struct {
    pid_t pid;
    char log[320], logdir[320], id[32];
} agent_t;

/* Start an agent; extra flags in `flags` (space separated, may be ""); envs
 * (may be "") goes before the agent's command, e.g. "env -u X Y=1". */
static agent_t start_agent_env(const char *envs, const char *job, const char *id, const char *np,
                               const char *nproc, const char *flags, const char *run_ms)
{
    agent_t a;
    snprintf(a.id, sizeof(a.id), "%s", id);
    snprintf(a.logdir, sizeof(a.logdir), "%s/%s-%s", tmp, job, id);
    snprintf(a.log, sizeof(a.log), "%s/%s-%s.console", tmp, job, id);
    char dump[300];
    snprintf(dump, sizeof(dump), "%s/dump-%s", tmp, job);
    mkdir(dump, 0755);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "exec %s %s launch --elastic_server=%s --job_id=%s --np=%s %s%s "
             "--node_id=%s --log_dir=%s --grace_period=2 %s -- %s %s %s",
             envs, ecoord(), ec_embed_endpoint(etcd), job, np, nproc ? "--nproc_per_node=" : "",
             nproc ? nproc : "", id, a.logdir, flags, prog(), dump, run_ms);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    a.pid = ec_test_spawn(argv, a.log);
    pids[npids++] = a.pid;
    return a;
}

static agent_t start_agent(const char *job, const char *id, const char *np, const char *flags,
                           const char *run_ms)
{
    return start_agent_env("", job, id, np, "2", flags, run_ms);
}

static void wait_file(const char *path, const char *needle, long ms)
{
    ck_assert_msg(ec_test_wait_file(path, needle, ms), "%s never showed '%s'", path, needle);
}

/* Value of NAME in an env dump, or "" (static buffer). */
static const char *dump_get(const char *path, const char *name)
{
    static char val[4096];
    val[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return val;
    char line[4096];
    size_t nl = strlen(name);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, name, nl) && line[nl] == '=') {
            line[strcspn(line, "\n")] = '\0';
            snprintf(val, sizeof(val), "%s", line + nl + 1);
            break;
        }
    fclose(f);
    return val;
}

static char *dump_path(const char *job, const char *node, int lr, unsigned long long epoch)
{
    static char p[512];
    snprintf(p, sizeof(p), "%s/dump-%s/env.%s.%d.%llu", tmp, job, node, lr, epoch);
    return p;
}

/* An epoch >= number of world size world (the test fails without one). */
static ec_epoch_t *wait_epoch(const char *root, uint64_t number, int world, long ms)
{
    return ec_test_need_epoch(c, root, number, world, ms);
}

static void wait_dump(const char *job, const char *node, int lr, unsigned long long epoch)
{
    ck_assert_msg(ec_test_wait(ec_test_exists, dump_path(job, node, lr, epoch), 10000),
                  "process %s/%d never started in epoch %llu", node, lr, epoch);
}

START_TEST(environment_matches_epoch)
{
    const char *ids[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) /* TORCHELASTIC_MAX_RESTARTS is --max_restart's */
        start_agent("jenv", ids[i], "3", "--max_restart=3", "0");
    ec_epoch_t *ep = wait_epoch("/jenv/", 1, 6, 15000);
    char *eps = NULL;
    ck_assert_int_eq(ec_epoch_endpoints(ep, ",", &eps, NULL), 0);
    const char *maddr;
    int mport;
    ec_epoch_master(ep, &maddr, &mport);
    char mp[16];
    snprintf(mp, sizeof(mp), "%d", mport);
    for (int m = 0; m < ep->nmembers; m++) {
        for (int lr = 0; lr < 2; lr++) {
            const char *node = ep->members[m].node_id;
            wait_dump("jenv", node, lr, ep->number);
            const char *p = dump_path("jenv", node, lr, ep->number);
            char rank[16], lrs[16], mid[16], cur[64];
            snprintf(rank, sizeof(rank), "%d", m * 2 + lr);
            snprintf(lrs, sizeof(lrs), "%d", lr);
            snprintf(mid, sizeof(mid), "%d", m);
            ec_epoch_endpoint(ep, m, lr, cur, sizeof(cur));
            struct { const char *k, *v; } want[] = {
                {"PADDLE_TRAINER_ID", rank}, {"PADDLE_TRAINERS_NUM", "6"},
                {"PADDLE_TRAINER_ENDPOINTS", eps}, {"PADDLE_CURRENT_ENDPOINT", cur},
                {"PADDLE_RANK_IN_NODE", lrs}, {"PADDLE_GLOBAL_SIZE", "6"}, {"PADDLE_LOCAL_SIZE", "2"},
                {"PADDLE_GLOBAL_RANK", rank}, {"PADDLE_LOCAL_RANK", lrs}, {"PADDLE_NNODES", "3"},
                {"PADDLE_JOB_ID", "jenv"}, {"POD_NAME", node}, {"PADDLE_DISTRI_BACKEND", "gloo"},
                {"RANK", rank}, {"LOCAL_RANK", lrs}, {"WORLD_SIZE", "6"}, {"LOCAL_WORLD_SIZE", "2"},
                {"GROUP_RANK", mid}, {"GROUP_WORLD_SIZE", "3"}, {"ROLE_RANK", rank},
                {"ROLE_WORLD_SIZE", "6"}, {"ROLE_NAME", "default"}, {"MASTER_ADDR", maddr},
                {"MASTER_PORT", mp}, {"TORCHELASTIC_RESTART_COUNT", "0"},
                {"TORCHELASTIC_MAX_RESTARTS", "3"}, {"TORCHELASTIC_RUN_ID", "jenv"},
                {"ECOORD_JOB_ID", "jenv"}, {"ECOORD_EPOCH", "1"}, {"ECOORD_NODE_ID", node},
                {"ECOORD_REBUILD", "restart"}, {"TORCHELASTIC_USE_AGENT_STORE", "False"},
                /* two processes per node: 1, unless the user chose */
                {"OMP_NUM_THREADS", getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "1"},
            };
            for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                ck_assert_msg(!strcmp(dump_get(p, want[i].k), want[i].v), "%s of %s/%d: '%s', want '%s'",
                              want[i].k, node, lr, dump_get(p, want[i].k), want[i].v);
            char r0[64];
            ec_epoch_rank0_endpoint(ep, r0, sizeof(r0));
            ck_assert_str_eq(dump_get(p, "PADDLE_MASTER"), r0);
            ck_assert_str_ne(dump_get(p, "ECOORD_ELASTIC_SERVER"), "");
            /* its own error file, an absolute path beside its workerlog */
            char ef[400];
            snprintf(ef, sizeof(ef), "%s/jenv-%s/error.%d.json", tmp, node, lr);
            ck_assert_str_eq(dump_get(p, "TORCHELASTIC_ERROR_FILE"), ef);
        }
    }
    /* logs: a marker per epoch, endpoints.log rewritten per epoch */
    char path[400];
    snprintf(path, sizeof(path), "%s/jenv-a/workerlog.1", tmp);
    ck_assert(ec_test_file_contains(path, "ecoord epoch 1:"));
    ck_assert(ec_test_file_contains(path, "world 6, local rank 1"));
    snprintf(path, sizeof(path), "%s/jenv-a/endpoints.log", tmp);
    ck_assert(ec_test_file_contains(path, "PADDLE_TRAINER_ENDPOINTS:"));
    char first[64];
    ec_epoch_endpoint(ep, 0, 0, first, sizeof(first));
    ck_assert(ec_test_file_contains(path, first));
    /* local rank 0's output is on the console, in LAUNCH INFO form around it */
    snprintf(path, sizeof(path), "%s/jenv-a.console", tmp);
    /* the program wrote its dump before printing, and the console is copied
     * by the agent's writer thread: wait for it */
    wait_file(path, "test-prog rank=", 5000);
    ck_assert(ec_test_file_contains(path, "LAUNCH INFO"));
    ck_assert(ec_test_file_contains(path, "+epoch 1 world=6"));
    /* only local rank 0's, as Paddle's launcher shows its first container's
     * log; local rank 1's is in its workerlog */
    char line0[64], line1[64], log1[400];
    snprintf(line0, sizeof(line0), "test-prog rank=%s ", dump_get(dump_path("jenv", "a", 0, 1), "RANK"));
    snprintf(line1, sizeof(line1), "test-prog rank=%s ", dump_get(dump_path("jenv", "a", 1, 1), "RANK"));
    snprintf(log1, sizeof(log1), "%s/jenv-a/workerlog.1", tmp);
    ck_assert_msg(ec_test_file_contains(path, line0), "local rank 0's '%s' not on the console", line0);
    wait_file(log1, line1, 5000);
    ck_assert_msg(!ec_test_file_contains(path, line1), "local rank 1's '%s' on the console", line1);
    free(eps);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(killed_process_restarts_then_node_leaves)
{
    const char *ids[] = {"a", "b", "c"};
    agent_t ag[3];
    /* b says "restart this pod" when it gives up (--node_failure_exit, as
     * deploy/k8s's Indexed Job does); the others keep the default, 1 */
    for (int i = 0; i < 3; i++)
        ag[i] = start_agent("jkill", ids[i], "1:3",
                            i == 1 ? "--max_restart=1 --elastic_timeout=60 --node_failure_exit=101"
                                   : "--max_restart=1 --elastic_timeout=60",
                            "0");
    ec_epoch_t *ep = wait_epoch("/jkill/", 1, 6, 15000);
    ec_epoch_free(ep);
    wait_dump("jkill", "b", 1, 1);
    pid_t victim = (pid_t)atoi(dump_get(dump_path("jkill", "b", 1, 1), "PID"));
    ck_assert_int_gt(victim, 0);
    kill(victim, SIGKILL);
    /* restart: same members, new epoch, b's processes started again */
    ep = wait_epoch("/jkill/", 2, 6, 10000);
    ck_assert_int_eq(ep->reason, EC_REASON_RESTART);
    ec_epoch_free(ep);
    wait_dump("jkill", "b", 1, 2);
    ck_assert_str_eq(dump_get(dump_path("jkill", "b", 1, 2), "TORCHELASTIC_RESTART_COUNT"), "1");
    /* The report is several console lines, written by the agent's console
     * thread after it queued them: wait for its last line, not its first. */
    wait_file(ag[1].log, "ABORT!!! Out of all 6 trainers", 5000);
    ck_assert(ec_test_file_contains(ag[1].log, "Container failed !!!"));
    ck_assert(ec_test_file_contains(ag[1].log, "signal 9"));
    /* a failure record went to etcd */
    ec_kv_list_t l;
    ck_assert_int_eq(ec_etcd_get_prefix(c, "/jkill/failures/", 0, &l, NULL), 0);
    ck_assert_int_ge(l.n, 1);
    ec_kv_list_free(&l);
    /* past --max_restart=1: b leaves with its --node_failure_exit, the job
     * goes on */
    victim = (pid_t)atoi(dump_get(dump_path("jkill", "b", 1, 2), "PID"));
    kill(victim, SIGKILL);
    ck_assert_int_eq(ec_test_reap(ag[1].pid, 15000), 101);
    ep = wait_epoch("/jkill/", 3, 4, 10000);
    ck_assert_int_lt(ec_epoch_find_member(ep, "b"), 0);
    ec_epoch_free(ep);
}
END_TEST

static bool pid_gone(void *arg)
{
    return kill(*(pid_t *)arg, 0) != 0;
}

START_TEST(killed_agent_takes_processes_and_lease_expires)
{
    const char *ids[] = {"a", "b", "c"};
    agent_t ag[3];
    for (int i = 0; i < 3; i++)
        ag[i] = start_agent("jag", ids[i], "1:3", "--lease_ttl=2 --elastic_timeout=60", "0");
    ec_epoch_free(wait_epoch("/jag/", 1, 6, 15000));
    wait_dump("jag", "c", 0, 1);
    pid_t child = (pid_t)atoi(dump_get(dump_path("jag", "c", 0, 1), "PID"));
    kill(ag[2].pid, SIGKILL);
    ck_assert_msg(ec_test_wait(pid_gone, &child, 5000), "a training process outlived its agent");
    ec_epoch_t *ep = wait_epoch("/jag/", 2, 4, 10000);
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ck_assert_int_lt(ec_epoch_find_member(ep, "c"), 0);
    ec_epoch_free(ep);
}
END_TEST

static bool still_epoch_2(void *arg)
{
    ec_epoch_t *ep = ec_test_epoch(c, (const char *)arg);
    bool ok = ep && ep->number == 2;
    ec_epoch_free(ep);
    return ok;
}

static bool still_epoch_1(void *arg)
{
    ec_epoch_t *ep = ec_test_epoch(c, (const char *)arg);
    bool ok = ep && ep->number == 1;
    ec_epoch_free(ep);
    return ok;
}

/* Agents watch each other (--peer_probe_interval): a node whose agent and
 * processes vanish while its peers' processes run on, never failing, is
 * evicted in about a second, not after its 10 s lease. */
START_TEST(vanished_node_evicted_in_a_second_while_peers_run_on)
{
    const char *ids[] = {"a", "b", "c"};
    agent_t ag[3];
    for (int i = 0; i < 3; i++)
        ag[i] = start_agent("jring", ids[i], "1:3", "--lease_ttl=10 --elastic_timeout=60", "0");
    ec_epoch_free(wait_epoch("/jring/", 1, 6, 15000));
    wait_dump("jring", "c", 0, 1);
    wait_dump("jring", "c", 1, 1);
    pid_t ch0 = (pid_t)atoi(dump_get(dump_path("jring", "c", 0, 1), "PID"));
    pid_t ch1 = (pid_t)atoi(dump_get(dump_path("jring", "c", 1, 1), "PID"));
    /* the whole node at once, as a host that dies */
    kill(ag[2].pid, SIGKILL);
    kill(ch0, SIGKILL);
    kill(ch1, SIGKILL);
    int64_t t0 = ec_test_now_ms();
    ec_epoch_t *ep = wait_epoch("/jring/", 2, 4, 9000);
    int64_t took = ec_test_now_ms() - t0;
    printf("# node lost to new epoch: %lld ms (lease TTL 10 s, peers' processes never fail)\n",
           (long long)took);
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ck_assert_int_lt(ec_epoch_find_member(ep, "c"), 0);
    ck_assert_int_lt(took, ec_test_ms(3000));
    ec_epoch_free(ep);
}
END_TEST

/* A dead *leader* in a job of five: only its two ring predecessors watch
 * it, and deposing it needs a strict majority of the other four members.
 * The other followers, seeing a report that names the leader, probe it
 * once themselves and add their own reports, so the majority forms within
 * about a second, not at the leader's 10 s lease. */
START_TEST(dead_leader_of_five_replaced_in_a_second)
{
    const char *ids[] = {"a", "b", "c", "d", "e"};
    agent_t ag[5];
    for (int i = 0; i < 5; i++)
        ag[i] = start_agent_env("", "jldr", ids[i], "1:5", "1", "--lease_ttl=10 --elastic_timeout=60",
                                "0");
    ec_epoch_t *ep = wait_epoch("/jldr/", 1, 5, 20000);
    int L = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(ep->leader_id, ids[i]))
            L = i;
    ck_assert_int_ge(L, 0);
    ec_epoch_free(ep);
    wait_dump("jldr", ids[L], 0, 1);
    pid_t ch = (pid_t)atoi(dump_get(dump_path("jldr", ids[L], 0, 1), "PID"));
    kill(ag[L].pid, SIGKILL); /* the leader's whole node at once */
    kill(ch, SIGKILL);
    int64_t t0 = ec_test_now_ms();
    ep = wait_epoch("/jldr/", 2, 4, 9000);
    int64_t took = ec_test_now_ms() - t0;
    printf("# dead leader of 5 to a new leader's epoch without it: %lld ms (lease TTL 10 s)\n",
           (long long)took);
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ck_assert_int_lt(ec_epoch_find_member(ep, ids[L]), 0);
    ck_assert_str_ne(ep->leader_id, ids[L]);
    ck_assert_int_lt(took, ec_test_ms(3000));
    ec_epoch_free(ep);
}
END_TEST

/* In place (--rebuild=inprocess), a peer's loss that makes the survivors'
 * processes fail does not count against their nodes: with --max_restart=0
 * they stay, their processes start again in the epoch without the lost node
 * (restart count 0), and no further epoch follows.  With boots not gated
 * (--join_ready_timeout=0): the program here does not use the worker
 * library, so it never says it is ready (t4200-admission covers the gated
 * path, where a failed process makes its node step out until it is ready
 * again). */
START_TEST(inprocess_peer_loss_costs_no_restart)
{
    const char *ids[] = {"a", "b", "c"};
    agent_t ag[3];
    char gone[400], env[500], mark[420];
    snprintf(gone, sizeof(gone), "%s/ip-peer-gone", tmp);
    snprintf(env, sizeof(env), "env EC_TEST_PROG_PEER_GONE=%s", gone);
    for (int i = 0; i < 3; i++)
        ag[i] = start_agent_env(env, "jipf", ids[i], "1:3", "2",
                                "--rebuild=inprocess --lease_ttl=10 --elastic_timeout=60 "
                                "--max_restart=0 --join_ready_timeout=0", "0");
    ec_epoch_free(wait_epoch("/jipf/", 1, 6, 15000));
    for (int i = 0; i < 3; i++)
        for (int lr = 0; lr < 2; lr++)
            wait_dump("jipf", ids[i], lr, 1);
    pid_t ch0 = (pid_t)atoi(dump_get(dump_path("jipf", "c", 0, 1), "PID"));
    pid_t ch1 = (pid_t)atoi(dump_get(dump_path("jipf", "c", 1, 1), "PID"));
    kill(ag[2].pid, SIGKILL);
    kill(ch0, SIGKILL);
    kill(ch1, SIGKILL);
    snprintf(mark, sizeof(mark), "%s.1", gone); /* the survivors' processes fail now */
    FILE *f = fopen(mark, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ec_epoch_t *ep = wait_epoch("/jipf/", 2, 4, 9000);
    ck_assert_int_eq(ep->number, 2);
    ck_assert_int_lt(ec_epoch_find_member(ep, "c"), 0);
    ec_epoch_free(ep);
    for (int i = 0; i < 2; i++)
        for (int lr = 0; lr < 2; lr++) {
            wait_dump("jipf", ids[i], lr, 2); /* started again, in the new epoch */
            ck_assert_msg(!strcmp(dump_get(dump_path("jipf", ids[i], lr, 2),
                                           "TORCHELASTIC_RESTART_COUNT"), "0"),
                          "%s's restart count went up for a peer's loss", ids[i]);
        }
    ck_assert_msg(ec_test_holds(still_epoch_2, "/jipf/", 3000),
                  "another epoch followed the loss (a survivor left or restarted)");
    for (int i = 0; i < 2; i++)
        ck_assert_msg(!ec_test_file_contains(ag[i].log, "exhausted"),
                      "%s counted a peer's loss against --max_restart=0", ids[i]);
}
END_TEST

/* An agent paused (SIGSTOP: a GC pause, swapping, a debugger) for 1.5 s,
 * less than --peer_pause_tolerance, is neither reported nor evicted (issue
 * 27: the rule before the failure detector, two missed probes of 250 ms,
 * evicted an agent paused for 2 s). */
START_TEST(agent_paused_within_the_pause_tolerance_not_evicted)
{
    const char *ids[] = {"pa", "pb", "pc"};
    agent_t ag[3];
    for (int i = 0; i < 3; i++)
        ag[i] = start_agent("jpau", ids[i], "1:3",
                            "--lease_ttl=10 --elastic_timeout=60 --peer_pause_tolerance=3", "0");
    ec_epoch_free(wait_epoch("/jpau/", 1, 6, 15000));
    kill(ag[1].pid, SIGSTOP);
    struct timespec ts = {1, 500 * 1000 * 1000}; /* the stimulus, not a wait for a condition */
    nanosleep(&ts, NULL);
    kill(ag[1].pid, SIGCONT);
    ck_assert_msg(ec_test_holds(still_epoch_1, "/jpau/", 3000),
                  "an agent paused for 1.5 s was evicted (--peer_pause_tolerance=3)");
    for (int i = 0; i < 3; i++)
        ck_assert_msg(!ec_test_file_contains(ag[i].log, "+peer pb silent"),
                      "%s reported pb, paused for 1.5 s only", ids[i]);
}
END_TEST

/* An agent frozen for good with the default knobs (its kernel accepts the
 * probes' connections, nobody answers) is evicted in about a second: the
 * tolerance (0.7 s), a retried round of probes and the leader's own. */
START_TEST(agent_frozen_for_good_evicted_in_about_a_second)
{
    const char *ids[] = {"fa", "fb", "fc"};
    agent_t ag[3];
    for (int i = 0; i < 3; i++)
        ag[i] = start_agent("jfzg", ids[i], "1:3", "--lease_ttl=10 --elastic_timeout=60", "0");
    ec_epoch_free(wait_epoch("/jfzg/", 1, 6, 15000));
    /* its watchers have heard it answer (a peer never heard counts as
     * silent from when its watching began) */
    ck_assert(ec_test_holds(still_epoch_1, "/jfzg/", 1000));
    kill(ag[1].pid, SIGSTOP);
    int64_t t0 = ec_test_now_ms();
    ec_epoch_t *ep = wait_epoch("/jfzg/", 2, 4, 9000);
    int64_t took = ec_test_now_ms() - t0;
    printf("# agent frozen for good to an epoch without it: %lld ms (lease TTL 10 s)\n",
           (long long)took);
    ck_assert_int_lt(ec_epoch_find_member(ep, "fb"), 0);
    ck_assert_int_lt(took, ec_test_ms(3000));
    ec_epoch_free(ep);
    kill(ag[1].pid, SIGCONT);
}
END_TEST

/* A frozen agent (SIGSTOP) that wakes before its watchers' suspicion window
 * ends is not reported, and nothing is evicted. */
START_TEST(agent_frozen_shorter_than_suspicion_window_not_evicted)
{
    const char *ids[] = {"a", "b", "c"};
    agent_t ag[3];
    for (int i = 0; i < 3; i++)
        ag[i] = start_agent("jfrz", ids[i], "1:3", "--lease_ttl=10 --elastic_timeout=60", "0");
    ec_epoch_free(wait_epoch("/jfrz/", 1, 6, 15000));
    kill(ag[1].pid, SIGSTOP);
    struct timespec ts = {0, 200 * 1000 * 1000}; /* the stimulus, not a wait for a condition */
    nanosleep(&ts, NULL);
    kill(ag[1].pid, SIGCONT);
    ck_assert_msg(ec_test_holds(still_epoch_1, "/jfrz/", 3000),
                  "an agent frozen for 200 ms was evicted");
    for (int i = 0; i < 3; i++)
        ck_assert_msg(!ec_test_file_contains(ag[i].log, "+peer b silent"),
                      "%s reported b, frozen for 200 ms only", ids[i]);
}
END_TEST

/* Restart mode, one node of three lost while the survivors' processes fail
 * because of it: the failures are folded into the membership change, one
 * new epoch (lost) and no restart epochs, and the survivors' --max_restart
 * budgets are untouched. */
START_TEST(node_loss_makes_one_epoch_and_costs_no_restart)
{
    const char *ids[] = {"a", "b", "c"};
    agent_t ag[3];
    char gone[400], env[500], mark[420];
    snprintf(gone, sizeof(gone), "%s/peer-gone", tmp);
    snprintf(env, sizeof(env), "env EC_TEST_PROG_PEER_GONE=%s", gone);
    for (int i = 0; i < 3; i++)
        ag[i] = start_agent_env(env, "jone", ids[i], "1:3", "2",
                                "--lease_ttl=10 --elastic_timeout=60 --max_restart=1", "0");
    ec_epoch_free(wait_epoch("/jone/", 1, 6, 15000));
    for (int i = 0; i < 3; i++)
        for (int lr = 0; lr < 2; lr++)
            wait_dump("jone", ids[i], lr, 1);
    pid_t ch0 = (pid_t)atoi(dump_get(dump_path("jone", "c", 0, 1), "PID"));
    pid_t ch1 = (pid_t)atoi(dump_get(dump_path("jone", "c", 1, 1), "PID"));
    kill(ag[2].pid, SIGKILL);
    kill(ch0, SIGKILL);
    kill(ch1, SIGKILL);
    snprintf(mark, sizeof(mark), "%s.1", gone); /* the survivors' processes fail now */
    FILE *f = fopen(mark, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ec_epoch_t *ep = wait_epoch("/jone/", 2, 4, 9000);
    ck_assert_int_eq(ep->number, 2);
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ck_assert_int_lt(ec_epoch_find_member(ep, "c"), 0);
    ec_epoch_free(ep);
    /* no restart epoch follows */
    ck_assert_msg(ec_test_holds(still_epoch_2, "/jone/", 3000), "a restart epoch followed the loss");
    for (int i = 0; i < 2; i++)
        for (int lr = 0; lr < 2; lr++) {
            wait_dump("jone", ids[i], lr, 2);
            ck_assert_msg(!strcmp(dump_get(dump_path("jone", ids[i], lr, 2),
                                           "TORCHELASTIC_RESTART_COUNT"), "0"),
                          "%s's restart count went up for a peer's loss", ids[i]);
        }
}
END_TEST

START_TEST(failure_report_shows_only_the_failed_start_s_output)
{
    /* workerlog.N is appended across runs and restarts: the failure block's
     * tail of a process that printed nothing must not show an earlier,
     * successful job's lines as if they were its last words. */
    char dir[400], cmd[2048], log[2][400];
    snprintf(dir, sizeof(dir), "%s/same-log", tmp);
    const char *progs[2] = {"echo EARLIER-JOB-OUTPUT", "exit 4"};
    int want[2] = {0, 4};
    for (int i = 0; i < 2; i++) {
        snprintf(log[i], sizeof(log[i]), "%s/jtail%d.console", tmp, i);
        snprintf(cmd, sizeof(cmd), "exec %s launch --elastic_server=%s --job_id=jtail%d "
                 "--log_dir=%s -- /bin/sh -c '%s'", ecoord(), ec_embed_endpoint(etcd), i, dir,
                 progs[i]);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        pid_t pid = ec_test_spawn(argv, log[i]);
        ck_assert_int_eq(ec_test_reap(pid, 20000), want[i]);
    }
    ck_assert(ec_test_file_contains(log[1], "Container failed !!!"));
    ck_assert_msg(!ec_test_file_contains(log[1], "EARLIER-JOB-OUTPUT"),
                  "the failure block shows the earlier job's output: see %s", log[1]);
    char wl[500];
    snprintf(wl, sizeof(wl), "%s/workerlog.0", dir);
    ck_assert(ec_test_file_contains(wl, "EARLIER-JOB-OUTPUT")); /* the log keeps it */
}
END_TEST

START_TEST(node_refused_for_its_nproc_says_so_and_leaves)
{
    /* A node started with another --nproc_per_node than the job's, before
     * any epoch: the leader refuses it (its record: failed, with the fix);
     * its own agent learns that from its record and leaves with the fix,
     * instead of waiting silently for ever. */
    agent_t a = start_agent_env("", "jnp0", "a", "2", "2", "", "0");
    wait_file(a.log, "Waiting peer start", 15000);
    agent_t b = start_agent_env("", "jnp0", "b", "2", "1", "", "0");
    ck_assert_int_eq(ec_test_reap(b.pid, 15000), 1);
    npids--;
    ck_assert_msg(ec_test_file_contains(b.log, "this node runs --nproc_per_node=1 and the leader "
                                        "refused it"), "see %s", b.log);
    ck_assert_msg(ec_test_file_contains(b.log, "restart it with --nproc_per_node=2"), "see %s",
                  b.log);
}
END_TEST

START_TEST(second_agent_with_the_same_log_dir_is_refused)
{
    /* Two agents on one host writing one --log_dir overwrite each other's
     * workerlog.N, progress.N and error files (their progress figures
     * mixed); the second is refused before it joins, saying what to do. */
    char shared[400], cmd[2048], log[2][400];
    snprintf(shared, sizeof(shared), "%s/shared-log", tmp);
    pid_t pid[2];
    for (int i = 0; i < 2; i++) {
        snprintf(log[i], sizeof(log[i]), "%s/jlog-%c.console", tmp, 'a' + i);
        snprintf(cmd, sizeof(cmd), "exec %s launch --elastic_server=%s --job_id=jlog --np=2 "
                 "--nproc_per_node=1 --node_id=%c --log_dir=%s -- %s %s/dump-jlog 0", ecoord(),
                 ec_embed_endpoint(etcd), 'a' + i, shared, prog(), tmp);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        pid[i] = ec_test_spawn(argv, log[i]);
        pids[npids++] = pid[i];
        if (i == 0)
            wait_file(log[0], "Waiting peer start", 15000);
    }
    ck_assert_int_eq(ec_test_reap(pid[1], 10000), 1);
    npids--;
    ck_assert_msg(ec_test_file_contains(log[1], "in use by another agent"), "see %s", log[1]);
    ck_assert_msg(ec_test_file_contains(log[1], "--log_dir"), "see %s", log[1]);
    ck_assert_msg(kill(pid[0], 0) == 0, "the first agent is gone");
    /* a plain file is no log directory either */
    char file[400];
    snprintf(file, sizeof(file), "%s/a-file", tmp);
    ec_test_write_file(file, "", 0644);
    snprintf(cmd, sizeof(cmd), "%s launch --job_id=jfile --log_dir=%s -- %s %s/dump-jlog 0 "
             "2>&1", ecoord(), file, prog(), tmp);
    char out[8192];
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    ck_assert_int_ne(ec_test_run(argv, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "not a directory"), "%s", out);
}
END_TEST

START_TEST(sighup_agent_leaves_as_sigterm_does)
{
    /* A terminal closed or an SSH session dropped (SIGHUP): the agent stops
     * its processes and leaves the job, as torchrun does, instead of dying
     * with its lease left to expire. */
    agent_t a = start_agent("jhup", "a", "1:2", "--lease_ttl=60 --elastic_timeout=1", "0");
    agent_t b = start_agent("jhup", "b", "1:2", "--lease_ttl=60 --elastic_timeout=1", "0");
    ec_epoch_free(wait_epoch("/jhup/", 1, 4, 15000));
    kill(b.pid, SIGHUP);
    ck_assert_int_eq(ec_test_reap(b.pid, 10000), 128 + SIGHUP);
    ec_epoch_t *ep = wait_epoch("/jhup/", 2, 2, 10000);
    ck_assert_int_eq(ep->reason, EC_REASON_LEAVE);
    ec_epoch_free(ep);
    ck_assert_msg(ec_test_file_contains(b.log, "stopping on Hangup"), "see %s", b.log);
    (void)a;
}
END_TEST

START_TEST(sigterm_agent_leaves_at_once_and_joiner_added)
{
    const char *ids[] = {"a", "b", "c"};
    agent_t ag[3];
    /* TTL 60 s: only the graceful leave explains a quick re-form. */
    for (int i = 0; i < 3; i++)
        ag[i] = start_agent("jterm", ids[i], "2:4", "--lease_ttl=60 --elastic_timeout=1", "0");
    ec_epoch_free(wait_epoch("/jterm/", 1, 6, 15000));
    kill(ag[2].pid, SIGTERM);
    ck_assert_int_eq(ec_test_reap(ag[2].pid, 10000), 128 + SIGTERM);
    ec_epoch_t *ep = wait_epoch("/jterm/", 2, 4, 10000);
    ck_assert_int_eq(ep->reason, EC_REASON_LEAVE);
    ec_epoch_free(ep);
    /* a new agent joins the running job */
    start_agent("jterm", "d", "2:4", "--lease_ttl=60 --elastic_timeout=1", "0");
    ep = wait_epoch("/jterm/", 3, 6, 15000);
    ck_assert_int_eq(ep->reason, EC_REASON_JOIN);
    ck_assert_int_eq(ec_epoch_find_member(ep, "d"), 2); /* appended */
    ec_epoch_free(ep);
    wait_dump("jterm", "d", 1, 3);
    ck_assert_str_eq(dump_get(dump_path("jterm", "d", 1, 3), "RANK"), "5");
}
END_TEST

/* The environment of every process of epoch number in job, against ep. */
static void env_matches(const char *job, const ec_epoch_t *ep)
{
    char *eps = NULL;
    ck_assert_int_eq(ec_epoch_endpoints(ep, ",", &eps, NULL), 0);
    char world[16], nn[16];
    snprintf(world, sizeof(world), "%d", ep->world_size);
    snprintf(nn, sizeof(nn), "%d", ep->nmembers);
    for (int m = 0; m < ep->nmembers; m++)
        for (int lr = 0; lr < ep->nproc; lr++) {
            const char *node = ep->members[m].node_id;
            wait_dump(job, node, lr, ep->number);
            const char *p = dump_path(job, node, lr, ep->number);
            char rank[16], cur[64];
            snprintf(rank, sizeof(rank), "%d", m * ep->nproc + lr);
            ec_epoch_endpoint(ep, m, lr, cur, sizeof(cur));
            struct { const char *k, *v; } want[] = {
                {"RANK", rank}, {"WORLD_SIZE", world}, {"PADDLE_TRAINER_ID", rank},
                {"PADDLE_TRAINERS_NUM", world}, {"PADDLE_NNODES", nn},
                {"PADDLE_TRAINER_ENDPOINTS", eps}, {"PADDLE_CURRENT_ENDPOINT", cur},
            };
            for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                ck_assert_msg(!strcmp(dump_get(p, want[i].k), want[i].v),
                              "epoch %llu, %s of %s/%d: '%s', want '%s'",
                              (unsigned long long)ep->number, want[i].k, node, lr,
                              dump_get(p, want[i].k), want[i].v);
        }
    free(eps);
}

static bool joiner_read_a_view(void *log)
{
    return ec_test_file_contains(log, "epoch 2: read 1 of its 4 members (split in chunks of 1") ||
           ec_test_file_contains(log, "epoch 3: read");
}

/* The epoch key holds a split epoch's head, with its chunks beside it. */
static void epoch_is_split(const char *job, int want_chunks)
{
    char key[300];
    snprintf(key, sizeof(key), "/%s/epoch", job);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert(found);
    ec_epoch_split_t info;
    ck_assert_int_eq(ec_epoch_head_info(kv.value, kv.value_len, key, &info, NULL), 1);
    ck_assert_int_eq(info.nchunks, want_chunks);
    ck_assert_int_eq(info.chunk_members, 1);
    ec_epoch_t *ep = NULL;
    ck_assert_int_eq(ec_epoch_decode(kv.value, kv.value_len, key, &ep, NULL), EC_ECORRUPT);
    char prefix[300];
    snprintf(prefix, sizeof(prefix), "/%s/epochs/%020llu/members/", job,
             (unsigned long long)info.number);
    ec_kv_list_t l;
    ck_assert_int_eq(ec_etcd_get_prefix(c, prefix, 0, &l, NULL), 0);
    ck_assert_uint_eq(l.n, (size_t)want_chunks);
    ec_kv_list_free(&l);
    ec_epoch_split_free(&info);
    ec_kv_free(&kv);
}

/* A job whose epochs are split (--epoch_chunk_members=1 through the
 * environment, so 5 nodes take the path of thousands): every follower
 * reads a view of the first epoch (member 0, its own chunk and the next:
 * at most 3 of 5 members), a loss reaches the followers as a delta applied
 * to their views, and a joiner reads a view; every process's environment
 * matches the epoch each time (the list of every endpoint is small here:
 * the agent reads the rest for it). */
START_TEST(split_epochs_form_reform_and_admit_a_joiner)
{
    const char *ids[] = {"a", "b", "c", "d", "e"};
    agent_t ag[5];
    const char *env = "env ECOORD_EPOCH_CHUNK_MEMBERS=1";
    for (int i = 0; i < 5; i++)
        ag[i] = start_agent_env(env, "jsplit", ids[i], "4:6", "1", "--elastic_timeout=1", "0");
    ec_epoch_t *ep = wait_epoch("/jsplit/", 1, 5, 20000);
    epoch_is_split("jsplit", 5);
    env_matches("jsplit", ep);
    int views = 0;
    for (int i = 0; i < 5; i++)
        views += ec_test_file_contains(ag[i].log, "of its 5 members (split in chunks of 1");
    ck_assert_msg(views >= 4, "%d of 5 agents said they read a view of epoch 1", views);
    /* member 0, its own chunk and the next two (its ring successors):
     * 3 or 4 of 5 members, never all five */
    int partial = 0;
    for (int i = 0; i < 5; i++)
        partial += ec_test_file_contains(ag[i].log, "read 3 of its 5 members") ||
                   ec_test_file_contains(ag[i].log, "read 4 of its 5 members");
    ck_assert_msg(partial >= 2, "only %d followers read a partial view", partial);
    /* a node lost: the survivors re-form (followers apply a delta to their views) */
    /* a follower early in M_id order (the others' M_ids move down): M_id 1,
     * else 2 when the leader holds 1 */
    int victim = -1;
    for (int want = 1; want <= 2 && victim < 0; want++)
        for (int i = 0; i < 5 && victim < 0; i++)
            if (strcmp(ep->leader_id, ids[i]) && ec_epoch_find_member(ep, ids[i]) == want)
                victim = i;
    ck_assert_msg(victim >= 0, "no follower at M_id 1 or 2 (leader %s)", ep->leader_id);
    ec_epoch_free(ep);
    kill(ag[victim].pid, SIGKILL);
    ec_test_reap(ag[victim].pid, 5000);
    ep = wait_epoch("/jsplit/", 2, 4, 20000);
    epoch_is_split("jsplit", 4);
    env_matches("jsplit", ep);
    ec_epoch_free(ep);
    int deltas = 0;
    for (int i = 0; i < 5; i++)
        if (i != victim)
            deltas += ec_test_file_contains(ag[i].log, "epoch 2: rebuilt from its delta");
    ck_assert_msg(deltas >= 2, "only %d followers applied epoch 2's delta to their view", deltas);
    /* a joiner holds no epoch: it reads a view */
    agent_t j = start_agent_env(env, "jsplit", "f", "4:6", "1", "--elastic_timeout=1", "0");
    ep = wait_epoch("/jsplit/", 3, 5, 20000);
    ck_assert_int_eq(ep->reason, EC_REASON_JOIN);
    epoch_is_split("jsplit", 5);
    env_matches("jsplit", ep);
    ec_epoch_free(ep);
    /* it read a view of epoch 2 (it was no member: the head alone), then
     * took epoch 3 as a delta; or, on a slow machine where epoch 3 came
     * before its listing, a view of epoch 3 */
    ck_assert_msg(ec_test_wait(joiner_read_a_view, j.log, 5000), "the joiner read no view (log %s)",
                  j.log);
    if (ec_test_file_contains(j.log, "epoch 2: read 1 of its 4 members"))
        wait_file(j.log, "epoch 3: rebuilt from its delta", 5000);
    /* no agent found a chunk or index bucket that was not its head's */
    for (int i = 0; i < 5; i++)
        ck_assert_msg(!ec_test_file_contains(ag[i].log, "its head's digest") &&
                          !ec_test_file_contains(ag[i].log, "a newer epoch replaced it"),
                      "log %s", ag[i].log);
    /* every rank's endpoint, on demand: ecoord status assembles the chunks */
    char srv[300];
    snprintf(srv, sizeof(srv), "--elastic_server=%s", ec_embed_endpoint(etcd));
    char *argv[] = {(char *)ecoord(), "status", srv, "--job_id=jsplit", "--json", NULL};
    static char out[1 << 16];
    ck_assert_int_eq(ec_test_run(argv, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "\"number\":3,\"world_size\":5"), "%s", out);
    ck_assert_msg(!strstr(out, "\"epoch_error\":\""), "%s", out);
    for (int m = 0; m < 5; m++) {
        char want[32];
        snprintf(want, sizeof(want), "\"m_id\":%d,", m);
        ck_assert_msg(strstr(out, want), "no member %d in: %s", m, out);
    }
    /* two more changes (a graceful leave, a join): epoch 5; the parts of
     * epochs 4 or more before it are deleted, its own are there */
    ep = ec_test_epoch(c, "/jsplit/");
    int v = -1;
    for (int i = 0; i < 5 && v < 0; i++)
        if (i != victim && strcmp(ep->leader_id, ids[i]) && ec_epoch_find_member(ep, ids[i]) >= 0)
            v = i;
    ec_epoch_free(ep);
    ck_assert_int_ge(v, 0);
    kill(ag[v].pid, SIGTERM);
    ck_assert_int_eq(ec_test_reap(ag[v].pid, 10000), 128 + SIGTERM);
    ec_epoch_free(wait_epoch("/jsplit/", 4, 4, 20000));
    start_agent_env(env, "jsplit", "g", "4:6", "1", "--elastic_timeout=1", "0");
    ec_epoch_free(wait_epoch("/jsplit/", 5, 5, 20000));
    ec_kv_list_t l;
    const char *gone[] = {"/jsplit/epochs/00000000000000000001/members/",
                          "/jsplit/epochs/00000000000000000001/index/"};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(ec_etcd_get_prefix(c, gone[i], 0, &l, NULL), 0);
        ck_assert_msg(l.n == 0, "%zu keys left under %s", l.n, gone[i]);
        ec_kv_list_free(&l);
    }
    ck_assert_int_eq(ec_etcd_get_prefix(c, "/jsplit/epochs/00000000000000000005/members/", 0, &l,
                                        NULL), 0);
    ck_assert_uint_eq(l.n, 5);
    ec_kv_list_free(&l);
    ck_assert_int_eq(ec_test_run(argv, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "\"number\":5,\"world_size\":5"), "%s", out);
}
END_TEST

START_TEST(job_completes_everywhere)
{
    const char *ids[] = {"a", "b", "c"};
    agent_t ag[3];
    for (int i = 0; i < 3; i++)
        ag[i] = start_agent("jdone", ids[i], "3", "", "1500");
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(ec_test_reap(ag[i].pid, 20000), 0);
        ck_assert(ec_test_file_contains(ag[i].log, "job jdone completed"));
    }
    ec_kv_t kv;
    bool found;
    ck_assert_int_eq(ec_etcd_get(c, "/jdone/status", &kv, &found, NULL, NULL), 0);
    ck_assert(found);
    ec_job_status_t *st = NULL;
    ck_assert_int_eq(ec_job_status_decode(kv.value, kv.value_len, NULL, &st, NULL), 0);
    ck_assert_int_eq(st->state, EC_JOB_COMPLETED);
    ec_job_status_free(st);
    ec_kv_free(&kv);
}
END_TEST

static ec_job_status_t *job_status(const char *job)
{
    char key[128];
    snprintf(key, sizeof(key), "/%s/status", job);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert(found);
    ec_job_status_t *st = NULL;
    ck_assert_int_eq(ec_job_status_decode(kv.value, kv.value_len, NULL, &st, NULL), 0);
    ec_kv_free(&kv);
    return st;
}

/* A job id can run again: a launch after the job completed starts a new run
 * (a run generation in the status) that really runs the program, with epoch
 * numbers that keep increasing across runs; the first run's completion is
 * not mistaken for the second's. */
START_TEST(completed_job_id_runs_again)
{
    agent_t a = start_agent("jrerun", "a", "1", "", "300");
    ck_assert_int_eq(ec_test_reap(a.pid, 20000), 0);
    ec_job_status_t *st = job_status("jrerun");
    ck_assert_int_eq(st->state, EC_JOB_COMPLETED);
    ck_assert_uint_eq(st->run, 1);
    uint64_t last = st->epoch;
    ck_assert_uint_ge(last, 1);
    ec_job_status_free(st);

    agent_t b = start_agent("jrerun", "a", "1", "", "300");
    ck_assert_int_eq(ec_test_reap(b.pid, 20000), 0);
    ck_assert_msg(access(dump_path("jrerun", "a", 0, last + 1), F_OK) == 0,
                  "the second run never ran the program in epoch %llu (log %s)",
                  (unsigned long long)last + 1, b.log);
    ck_assert(ec_test_file_contains(b.log, "job jrerun completed"));
    st = job_status("jrerun");
    ck_assert_int_eq(st->state, EC_JOB_COMPLETED);
    ck_assert_uint_eq(st->run, 2);
    ck_assert_uint_gt(st->epoch, last);
    ec_job_status_free(st);
}
END_TEST

/* A run whose agents are all gone (stopped with SIGTERM here) is over:
 * `ecoord status` says no agent of it is alive, and the next launch marks
 * it interrupted and starts a new run, with another --np if it likes, in
 * which no process ever starts in the old run's epoch. */
START_TEST(interrupted_run_is_over_and_a_new_launch_starts_a_new_run)
{
    agent_t a = start_agent_env("", "jintr", "a", "1", "1", "", "0");
    wait_dump("jintr", "a", 0, 1);
    char first[64];
    snprintf(first, sizeof(first), "%s", dump_get(dump_path("jintr", "a", 0, 1), "PID"));
    kill(a.pid, SIGTERM);
    ck_assert_int_eq(ec_test_reap(a.pid, 20000), 128 + SIGTERM);
    ec_job_status_t *st = job_status("jintr");
    ck_assert_int_eq(st->state, EC_JOB_RUNNING); /* nobody was left to say otherwise */
    ec_job_status_free(st);
    char cmd[1024], out[16384];
    snprintf(cmd, sizeof(cmd), "%s status --elastic_server=%s --job_id=jintr", ecoord(),
             ec_embed_endpoint(etcd));
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    ck_assert_int_eq(ec_test_run(sh, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "no agent of run 1 is alive"), "%s", out);

    /* Launched again with another --np: a new run, numbered on */
    agent_t b = start_agent_env("", "jintr", "a", "2", "1", "", "0");
    agent_t b2 = start_agent_env("", "jintr", "b", "2", "1", "", "0");
    ec_epoch_t *ep = wait_epoch("/jintr/", 2, 2, 20000);
    ck_assert_uint_eq(ep->run, 2);
    uint64_t e = ep->number;
    ec_epoch_free(ep);
    st = job_status("jintr");
    ck_assert_int_eq(st->state, EC_JOB_RUNNING);
    ck_assert_uint_eq(st->run, 2);
    ec_job_status_free(st);
    wait_dump("jintr", "a", 0, e);
    ck_assert_msg(!strcmp(dump_get(dump_path("jintr", "a", 0, 1), "PID"), first),
                  "a process of the new run started in the old run's epoch 1");
    ck_assert_msg(ec_test_file_contains(b.log, "+run-interrupted 1") ||
                  ec_test_file_contains(b2.log, "+run-interrupted 1"),
                  "nobody said run 1 was interrupted (%s, %s)", b.log, b2.log);
    ck_assert(!ec_test_file_contains(b.log, "runs --np=1:1"));
    ck_assert(!ec_test_file_contains(b2.log, "runs --np=1:1"));
}
END_TEST

/* How many lines of path contain needle. */
static int count_in(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* What a user reads, on every node: one line of configuration (each knob
 * and its source only at debug level), each epoch once with why, the
 * failure that caused a re-form named in it, no WARN on an ordinary run, a
 * program's output that does not end its line never glued to the agent's,
 * and a closing block (outcome, root cause, exit code, logs); after the end
 * `ecoord status` says the run completed. */
START_TEST(console_tells_the_story)
{
    char mark[400], cmd[3072], prog_s[1200];
    snprintf(mark, sizeof(mark), "%s/story.failed", tmp);
    /* b's first run prints without a newline and fails; every later run,
     * and a's, ends well */
    snprintf(prog_s, sizeof(prog_s),
             "if [ \"\\$ECOORD_NODE_ID\" = b ] && [ ! -e %s ]; then touch %s; "
             "printf 'checkpoint done'; exit 3; fi; sleep 2", mark, mark);
    agent_t ag[2];
    const char *ids[2] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        snprintf(ag[i].id, sizeof(ag[i].id), "%s", ids[i]);
        snprintf(ag[i].log, sizeof(ag[i].log), "%s/jstory-%s.console", tmp, ids[i]);
        snprintf(cmd, sizeof(cmd),
                 "exec %s launch --elastic_server=%s --job_id=jstory --np=2 --nproc_per_node=1 "
                 "--node_id=%s --log_dir=%s/jstory-%s --max_restart=1 -- /bin/sh -c \"%s\"",
                 ecoord(), ec_embed_endpoint(etcd), ids[i], tmp, ids[i], prog_s);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        ag[i].pid = ec_test_spawn(argv, ag[i].log);
        pids[npids++] = ag[i].pid;
    }
    for (int i = 0; i < 2; i++)
        ck_assert_msg(ec_test_reap(ag[i].pid, ec_test_ms(30000)) == 0, "%s did not end well "
                      "(see %s)", ids[i], ag[i].log);
    for (int i = 0; i < 2; i++) {
        const char *log = ag[i].log;
        ck_assert_msg(ec_test_file_contains(log, "configuration: "), "%s", log);
        ck_assert_msg(!ec_test_file_contains(log, "(source:"), "the knob dump at info (%s)", log);
        ck_assert_msg(!ec_test_file_contains(log, " WARN "), "a WARN on an ordinary run (%s)", log);
        ck_assert_msg(count_in(log, "+epoch 1 world=2") == 1, "epoch 1 said %d times (%s)",
                      count_in(log, "+epoch 1 world=2"), log);
        /* b's rank is 0 or 1: whichever node registered first is M_id 0 */
        ck_assert_msg(ec_test_file_contains(log, "+epoch 2 world=2 reason=restart: b restarted; "
                                            "cause: node b local rank 0 (rank ") &&
                      (ec_test_file_contains(log, "local rank 0 (rank 0) exited with code 3") ||
                       ec_test_file_contains(log, "local rank 0 (rank 1) exited with code 3")),
                      "the restart does not say why (%s)", log);
        char want[200];
        snprintf(want, sizeof(want), "======== ecoord: node %s, job jstory, run 1 ========", ids[i]);
        ck_assert_msg(ec_test_file_contains(log, want), "no closing block (%s)", log);
        ck_assert_msg(ec_test_file_contains(log, "outcome:    the job completed"), "%s", log);
        ck_assert_msg(ec_test_file_contains(log, "exit code:  0 (success)"), "%s", log);
    }
    ck_assert_msg(count_in(ag[1].log, "checkpoint done") >= 1 &&
                  !ec_test_file_contains(ag[1].log, "checkpoint doneLAUNCH"),
                  "the program's unfinished line glued to the agent's (%s)", ag[1].log);
    char out[16384];
    snprintf(cmd, sizeof(cmd), "%s status --elastic_server=%s --job_id=jstory", ecoord(),
             ec_embed_endpoint(etcd));
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    ck_assert_int_eq(ec_test_run(sh, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "state     completed") &&
                  strstr(out, "leader    none (the run completed)"), "%s", out);
}
END_TEST

static void bad(const char *flags, const char *envs, const char *needle)
{
    char cmd[2048], out[8192];
    snprintf(cmd, sizeof(cmd), "%s exec %s launch --job_id=jbad --log_dir=%s/bad %s -- %s %s 0", envs,
             ecoord(), tmp, flags, prog(), tmp);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int64_t t0 = ec_test_now_ms();
    int rc = ec_test_run(argv, out, sizeof(out));
    ck_assert_msg(rc != 0, "accepted: %s", flags);
    ck_assert_msg(strstr(out, needle) != NULL, "'%s': message lacks '%s': %s", flags, needle, out);
    ck_assert_int_lt(ec_test_now_ms() - t0, ec_test_ms(10000));
    char d[400];
    snprintf(d, sizeof(d), "%s/bad/workerlog.0", tmp);
    ck_assert_msg(access(d, F_OK) != 0, "'%s' started a process", flags);
}

START_TEST(bad_input_stops_before_anything_starts)
{
    char ep[64];
    snprintf(ep, sizeof(ep), "--elastic_server=%s", ec_embed_endpoint(etcd));
    char flags[256];
    snprintf(flags, sizeof(flags), "%s --np=4:2", ep);
    bad(flags, "", "--np");
    snprintf(flags, sizeof(flags), "%s --np=abc", ep);
    bad(flags, "", "--np");
    snprintf(flags, sizeof(flags), "%s --np=2 --job_id=a/b", ep);
    bad(flags, "", "job_id");
    snprintf(flags, sizeof(flags), "%s --gpus=0,1 --nproc_per_node=4", ep);
    bad(flags, "", "--gpus");
    snprintf(flags, sizeof(flags), "%s --nproc_per_node=4", ep);
    bad(flags, "CUDA_VISIBLE_DEVICES=0,1", "CUDA_VISIBLE_DEVICES");
    snprintf(flags, sizeof(flags), "%s --nproc=2", ep);
    bad(flags, "", "--nproc_per_node");
    bad("--elastic_server=127.0.0.1:1 --etcd_wait=0", "", "--elastic_server");
}
END_TEST

/* Every set-up failure says what failed: the agent is started with an
 * open-file limit of K for K = 3, 4, ... until a run completes, so each of
 * its set-up steps (etcd connection, route, ports, probe listener, signal
 * pipe, the process's log and pipes) is the one to fail at some K.  Every
 * run that exits non-zero prints an ERROR line; the signal pipe's failure
 * left with exit 1 and no message before.  Below the descriptors they need,
 * the dynamic loader fails (exit 127) and gRPC aborts at start (SIGABRT, an
 * absl "RAW:" line, or a failed check of gRPC's own, which it said only to
 * the debug log before): not ours, but each says why. */
START_TEST(every_set_up_failure_with_few_files_says_what_failed)
{
    char cmd[2048], out[16384];
    int k, nsaid = 0;
    for (k = 3; k <= 256; k++) {
        snprintf(cmd, sizeof(cmd), "ulimit -n %d && exec %s launch --elastic_server=%s "
                 "--etcd_wait=0 --job_id=jfd%d --np=1 --nproc_per_node=1 --log_dir=%s/fd%d "
                 "-- /bin/true",
                 k, ecoord(), ec_embed_endpoint(etcd), k, tmp, k);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        int rc = ec_test_run(argv, out, sizeof(out));
        if (rc == 0)
            break;
        if ((rc == 128 + SIGABRT &&
             (strstr(out, "RAW:") || strstr(out, "gRPC core stops this process"))) ||
            (rc == 127 && strstr(out, "error while loading shared libraries")))
            continue; /* gRPC's own start or check, which say so, or the dynamic loader's */
        size_t len = strlen(out);
        const char *end = len > 600 ? out + len - 600 : out; /* Check's messages are short */
        ck_assert_msg(rc < 128, "ulimit -n %d: killed by signal %d: ...%s", k, rc - 128, end);
        ck_assert_msg(strstr(out, " ERROR "), "ulimit -n %d: exit %d without an ERROR line: ...%s",
                      k, rc, end);
        nsaid++;
    }
    ck_assert_msg(k <= 256, "no run completed with up to 256 open files");
    printf("# %d set-up failures below ulimit -n %d, each said what failed\n", nsaid, k);
}
END_TEST

/* Pods and etcd start together (Kubernetes applies both at once; etcd's
 * pods may still pull their image): an agent whose etcd does not answer yet
 * says so at once and waits for it, up to --etcd_wait (default 60 s),
 * instead of exiting 1, which the Job's podFailurePolicy takes for a
 * configuration error that fails the whole job. */
START_TEST(an_agent_waits_for_an_etcd_that_starts_after_it)
{
    ec_embed_t *late = ec_test_etcd_start(NULL);
    char ep[128], log[320], cmd[2048];
    snprintf(ep, sizeof(ep), "%s", ec_embed_endpoint(late));
    ec_embed_kill(late, SIGKILL); /* its port and data dir stay for the restart */
    snprintf(log, sizeof(log), "%s/late.console", tmp);
    snprintf(cmd, sizeof(cmd), "exec %s launch --elastic_server=%s --job_id=jlate --np=1 "
             "--nproc_per_node=1 --log_dir=%s/late -- %s %s 1", ecoord(), ep, tmp, prog(), tmp);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t pid = ec_test_spawn(argv, log);
    pids[npids++] = pid;
    wait_file(log, "waiting for it up to --etcd_wait=60s", 10000);
    ck_assert_msg(ec_test_file_contains(log, "is unavailable") &&
                  ec_test_file_contains(log, "check --elastic_server"),
                  "the wait does not say what is wrong (%s)", log);
    ec_error_t err = {0};
    ck_assert_msg(ec_embed_restart(late, &err) == 0, "etcd did not start again: %s", err.msg);
    ck_assert_int_eq(ec_test_reap(pid, 30000), 0);
    ck_assert_msg(ec_test_file_contains(log, "job jlate completed"), "see %s", log);
    ck_assert_msg(ec_test_file_contains(log, "answered after"), "the end of the wait is not said "
                  "(%s)", log);
    ec_embed_stop(late);
}
END_TEST

/* ...and gives up with exit 1 once --etcd_wait has passed, naming it. */
START_TEST(an_agent_gives_up_on_etcd_after_etcd_wait)
{
    char cmd[2048], out[16384];
    snprintf(cmd, sizeof(cmd), "exec %s launch --elastic_server=127.0.0.1:1 --etcd_wait=1 "
             "--job_id=jgone --log_dir=%s/gone -- %s %s 0", ecoord(), tmp, prog(), tmp);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(ec_test_run(argv, out, sizeof(out)), 1);
    int64_t took = ec_test_now_ms() - t0;
    ck_assert_msg(took >= 1000 && took < ec_test_ms(10000), "gave up after %lld ms",
                  (long long)took);
    ck_assert_msg(strstr(out, "gave up after --etcd_wait=1s") &&
                      strstr(out, "check --elastic_server"),
                  "the last word does not say why: %s", out);
}
END_TEST

/* --np counts nodes.  Without --elastic_server an agent's etcd is its own,
 * on loopback at a port nobody else knows: asked for 2 nodes, it waited
 * forever for a second one that could not find it ("waiting for 1 more
 * node", nothing else).  It says so at once, with the flags that let
 * another node on this machine join it. */
START_TEST(a_multi_node_job_on_an_embedded_etcd_says_how_others_join)
{
    char log[320], cmd[2048];
    snprintf(log, sizeof(log), "%s/alone.console", tmp);
    snprintf(cmd, sizeof(cmd), "exec %s launch --job_id=jalone --np=2 --nproc_per_node=1 "
             "--log_dir=%s/alone -- %s %s 1", ecoord(), tmp, prog(), tmp);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t pid = ec_test_spawn(argv, log);
    pids[npids++] = pid;
    wait_file(log, "started an embedded etcd at 127.0.0.1:", 15000);
    wait_file(log, "waiting for 1 more node", 15000);
    char ep[64] = "", want[200];
    FILE *f = fopen(log, "r");
    char line[4096];
    while (f && fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, "started an embedded etcd at ");
        if (p)
            sscanf(p + strlen("started an embedded etcd at "), "%63[0-9.:]", ep);
    }
    if (f)
        fclose(f);
    ck_assert_str_ne(ep, "");
    snprintf(want, sizeof(want), "--elastic_server=%s --job_id=jalone", ep);
    ck_assert_msg(ec_test_file_contains(log, want), "no way for the other node to join in %s", log);
    ck_assert_msg(ec_test_file_contains(log, "--np=2 asks for 2 nodes"), "%s", log);
    kill(pid, SIGTERM);
    ck_assert_int_ge(ec_test_reap(pid, 15000), 0);
}
END_TEST

/* Every node runs the same number of processes; one started with another
 * --nproc_per_node is refused by the leader, and its agent exits 1 naming
 * both numbers instead of waiting as a standby forever, while the job goes
 * on without it. */
START_TEST(nproc_mismatch_node_exits_and_job_goes_on)
{
    start_agent("jnp", "a", "1:3", "--elastic_timeout=1", "0");
    start_agent("jnp", "b", "1:3", "--elastic_timeout=1", "0");
    ec_epoch_t *ep = wait_epoch("/jnp/", 1, 4, 15000);
    uint64_t before = ep->number;
    ec_epoch_free(ep);
    agent_t odd = start_agent("jnp", "c", "1:3", "--elastic_timeout=1 --nproc_per_node=1", "0");
    ck_assert_int_eq(ec_test_reap(odd.pid, 15000), 1);
    ck_assert_msg(ec_test_file_contains(odd.log, "--nproc_per_node=1"), "no value in %s", odd.log);
    /* the job's value, as the fix: from the epoch it saw, or from the
     * leader's refusal if that came first */
    ck_assert_msg(ec_test_file_contains(odd.log, "with --nproc_per_node=2"),
                  "the job's value is not named in %s", odd.log);
    /* the job goes on: same members, same world */
    ep = ec_test_epoch(c, "/jnp/");
    ck_assert_ptr_nonnull(ep);
    ck_assert_int_eq(ep->world_size, 4);
    ck_assert_int_lt(ec_epoch_find_member(ep, "c"), 0);
    ck_assert_uint_eq(ep->number, before);
    ec_epoch_free(ep);
}
END_TEST

/* The same for --np: the job's node counts are its leader's; a node started
 * with others exits 1 naming both, and the job goes on without it. */
START_TEST(np_mismatch_node_exits_and_job_goes_on)
{
    start_agent("jnpm", "a", "1:3", "--elastic_timeout=1", "0");
    ec_epoch_free(wait_epoch("/jnpm/", 1, 2, 15000));
    agent_t odd = start_agent("jnpm", "b", "1:2", "--elastic_timeout=1", "0");
    ck_assert_int_eq(ec_test_reap(odd.pid, 15000), 1);
    ck_assert_msg(ec_test_file_contains(odd.log, "--np=1:2"), "no value in %s", odd.log);
    ck_assert_msg(ec_test_file_contains(odd.log, "runs --np=1:3"), "the job's value is not in %s",
                  odd.log);
    /* the job goes on, without b */
    ec_epoch_t *ep = ec_test_epoch(c, "/jnpm/");
    ck_assert_ptr_nonnull(ep);
    ck_assert_int_eq(ec_epoch_find_member(ep, "a"), 0);
    ec_epoch_free(ep);
    ep = wait_epoch("/jnpm/", 1, 2, 15000);
    ck_assert_int_lt(ec_epoch_find_member(ep, "b"), 0);
    ec_epoch_free(ep);
}
END_TEST

/* --join_timeout (torchrun's join_timeout): a job that does not form within
 * it is given up with exit 1 and what it was waiting for, instead of waiting
 * for MIN nodes forever (the default, 0). */
START_TEST(join_timeout_gives_up_a_job_that_does_not_form)
{
    agent_t a = start_agent("jjoin", "a", "2", "--join_timeout=1", "0");
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(ec_test_reap(a.pid, 15000), 1);
    ck_assert_int_ge(ec_test_now_ms() - t0, 900);
    ck_assert_msg(ec_test_file_contains(a.log, "--join_timeout=1"), "no reason in %s", a.log);
    ck_assert_msg(ec_test_file_contains(a.log, "at least 2 nodes"), "no count in %s", a.log);
}
END_TEST

/* Nothing of the job in etcd: the agent stopped before registering. */
static void job_untouched(const char *job)
{
    char pfx[128];
    snprintf(pfx, sizeof(pfx), "/%s/", job);
    ec_kv_list_t l;
    ck_assert_int_eq(ec_etcd_get_prefix(c, pfx, 0, &l, NULL), 0);
    ck_assert_msg(l.n == 0, "job %s left %zu keys in etcd: it registered", job, (size_t)l.n);
    ec_kv_list_free(&l);
}

/* Run `envs ecoord launch ... flags -- program`; expect exit want_rc with
 * needle in the output, quickly, and nothing registered. */
static void refused(const char *job, const char *envs, const char *flags, const char *program,
                    int want_rc, const char *needle)
{
    char cmd[2048], out[8192];
    snprintf(cmd, sizeof(cmd),
             "%s exec %s launch --elastic_server=%s --job_id=%s --log_dir=%s/%s %s -- %s", envs,
             ecoord(), ec_embed_endpoint(etcd), job, tmp, job, flags, program);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int64_t t0 = ec_test_now_ms();
    int rc = ec_test_run(argv, out, sizeof(out));
    ck_assert_msg(rc == want_rc, "'%.300s': exit %d, want %d: %.1500s", cmd, rc, want_rc, out);
    ck_assert_msg(strstr(out, needle) != NULL, "'%.300s': message lacks '%s': %.1500s", cmd, needle, out);
    ck_assert_int_lt(ec_test_now_ms() - t0, ec_test_ms(10000));
    job_untouched(job);
}

/* A program that cannot run is a configuration error of this node: exit 1
 * with what is wrong, before the node registers (not a failing rank that
 * restarts, nor 101 "restart this pod"). */
START_TEST(unrunnable_program_exits_1_before_joining)
{
    char py[400], notx[400];
    snprintf(py, sizeof(py), "%s/missing/train.py", tmp);
    refused("jmiss1", "", "", py, 1, "train.py");
    refused("jmiss2", "", "", "no-such-program-ec15 --x", 1, "no-such-program-ec15");
    snprintf(notx, sizeof(notx), "%s/notx.sh", tmp);
    ec_test_write_file(notx, "#!/bin/sh\nexit 0\n", 0644);
    refused("jmiss3", "", "", notx, 1, "notx.sh");
    snprintf(py, sizeof(py), "%s/ok.py", tmp);
    ec_test_write_file(py, "print('hi')\n", 0644);
    refused("jmiss4", "ECOORD_PYTHON=/nonexistent/python3", "", py, 1, "ECOORD_PYTHON");
    refused("jmiss5", "", "--no_python", py, 1, "ok.py");
}
END_TEST

/* A .py program runs under the interpreter as Paddle's launcher and torchrun
 * run it (python -u prog.py ARGS): no execute bit or #! line needed, output
 * unbuffered; its arguments are passed through untouched. */
START_TEST(python_program_runs_with_interpreter)
{
    char py[400], out[400], cmd[2048];
    snprintf(py, sizeof(py), "%s/show.py", tmp);
    snprintf(out, sizeof(out), "%s/show.out", tmp);
    ec_test_write_file(py,
               "import os, sys\n"
               "open(sys.argv[1] + '.' + os.environ['RANK'], 'w').write("
               "'unbuffered=%d argv=%s\\n' % (b'-u' in open('/proc/self/cmdline', 'rb')"
               ".read().split(b'\\0'), ' '.join(sys.argv[1:])))\n",
               0644);
    snprintf(cmd, sizeof(cmd),
             "exec %s launch --elastic_server=%s --job_id=jpy --np=1 --nproc_per_node=2 "
             "--log_dir=%s/jpy -- %s %s --np=5",
             ecoord(), ec_embed_endpoint(etcd), tmp, py, out);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    char res[8192];
    int rc = ec_test_run(argv, res, sizeof(res));
    ck_assert_msg(rc == 0, "exit %d: %.1500s", rc, res);
    for (int r = 0; r < 2; r++) {
        char p[420];
        snprintf(p, sizeof(p), "%s.%d", out, r);
        ck_assert_msg(ec_test_file_contains(p, "unbuffered=1"), "rank %d: not python -u", r);
        ck_assert(ec_test_file_contains(p, "--np=5"));
    }
    ck_assert_msg(strstr(res, "python") != NULL, "the program line does not say python: %.1500s", res);
}
END_TEST


/* Without fault tolerance asked for, a failure does what Paddle's launcher
 * does (--elastic_level=-1, its default): the first failed process stops
 * the job; its node's agent exits with that process's code, the other
 * nodes exit 1; nothing is restarted.  Asked for (--max_restart), the old
 * behaviour: restarts, then 101 "replace this node". */
START_TEST(first_failure_stops_the_job_with_the_process_code)
{
    /* one node, zero setup but the etcd: both ranks exit 3 after 200 ms */
    agent_t a = start_agent("jff1", "a", "1", "", "200 3");
    ck_assert_int_eq(ec_test_reap(a.pid, 20000), 3);
    ck_assert_msg(access(dump_path("jff1", "a", 0, 1), F_OK) == 0, "the program never ran");
    ck_assert_msg(access(dump_path("jff1", "a", 0, 2), F_OK) != 0 &&
                      access(dump_path("jff1", "a", 1, 2), F_OK) != 0,
                  "the program ran again after its first failure");
    ck_assert_msg(!ec_test_file_contains(a.log, "restarting this node's processes"), "%s", a.log);
    ck_assert_msg(ec_test_file_contains(a.log, "fault tolerance is off"), "%s says nothing of "
                  "why it stopped", a.log);
    /* two nodes: b's processes fail, a's would run forever */
    agent_t ag[2];
    ag[0] = start_agent("jff2", "a", "2", "", "0");
    ag[1] = start_agent("jff2", "b", "2", "", "500 7");
    ck_assert_int_eq(ec_test_reap(ag[1].pid, 20000), 7);
    ck_assert_int_eq(ec_test_reap(ag[0].pid, 15000), 1);
    ck_assert_msg(ec_test_file_contains(ag[0].log, "without fault tolerance"),
                  "%s does not say why the job failed", ag[0].log);
    ck_assert_msg(access(dump_path("jff2", "b", 0, 2), F_OK) != 0, "b ran again");
    /* fault tolerance asked for: restarted once, then "replace this node" */
    agent_t r = start_agent("jff3", "a", "1", "--max_restart=1", "200 3");
    ck_assert_int_eq(ec_test_reap(r.pid, 30000), 101);
    ck_assert_msg(access(dump_path("jff3", "a", 0, 2), F_OK) == 0, "no restart epoch");
}
END_TEST

/* torchrun gives every process TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (torch
 * before 2.2: NCCL_ASYNC_ERROR_HANDLING=1, which later ones call
 * deprecated: set only for a torch known to be older, test_env), so a NCCL
 * error or timeout tears the process down instead of hanging it; a user who
 * set either keeps theirs. */
START_TEST(nccl_async_error_handling_on_unless_user_set)
{
    const char *clean = "env -u NCCL_ASYNC_ERROR_HANDLING -u TORCH_NCCL_ASYNC_ERROR_HANDLING";
    start_agent_env(clean, "jnccl", "a", "1", "2", "", "0");
    for (int lr = 0; lr < 2; lr++) {
        wait_dump("jnccl", "a", lr, 1); /* each: they start one after the other */
        const char *p = dump_path("jnccl", "a", lr, 1);
        ck_assert_str_eq(dump_get(p, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
        ck_assert_msg(!*dump_get(p, "NCCL_ASYNC_ERROR_HANDLING"),
                      "the deprecated name was set for a program whose torch is not known to "
                      "be older than 2.2 (%s)", p);
    }
    char envs[200];
    snprintf(envs, sizeof(envs), "%s NCCL_ASYNC_ERROR_HANDLING=0", clean);
    start_agent_env(envs, "jnccl2", "a", "1", "2", "", "0");
    wait_dump("jnccl2", "a", 0, 1);
    const char *p = dump_path("jnccl2", "a", 0, 1);
    ck_assert_str_eq(dump_get(p, "NCCL_ASYNC_ERROR_HANDLING"), "0");
    ck_assert_msg(!ec_test_file_contains(p, "TORCH_NCCL_ASYNC_ERROR_HANDLING="),
                  "the user's NCCL_ASYNC_ERROR_HANDLING=0 was overridden for newer torch");
}
END_TEST

/* Ctrl-C once: a graceful leave (SIGTERM to the processes, --grace_period,
 * the lease revoked); Ctrl-C again: the processes are killed at once and
 * the agent exits, whatever is left of the grace period. */
START_TEST(second_sigint_stops_processes_at_once)
{
    char script[400], started[400], cmd[2048], log[400];
    snprintf(script, sizeof(script), "%s/deaf.sh", tmp);
    snprintf(started, sizeof(started), "%s/deaf.started", tmp);
    ec_test_write_file(script, "#!/bin/sh\ntrap '' TERM\necho $$ > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\n"
                       "exec sleep 300\n", 0755);
    snprintf(log, sizeof(log), "%s/jint.console", tmp);
    snprintf(cmd, sizeof(cmd),
             "exec %s launch --elastic_server=%s --job_id=jint --np=1 --nproc_per_node=1 "
             "--node_id=a --log_dir=%s/jint --grace_period=60 -- %s %s",
             ecoord(), ec_embed_endpoint(etcd), tmp, script, started);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t agent = ec_test_spawn(argv, log);
    pids[npids++] = agent;
    ck_assert_msg(ec_test_wait(ec_test_exists, started, 15000), "the program never started (%s)",
                  log);
    pid_t deaf = 0;
    FILE *f = fopen(started, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%d", &deaf), 1);
    fclose(f);
    kill(agent, SIGINT);
    wait_file(log, "stopping on", 10000);
    /* the program ignores SIGTERM: the first SIGINT alone would wait 60 s */
    int64_t t0 = ec_test_now_ms();
    kill(agent, SIGINT);
    ck_assert_int_eq(ec_test_reap(agent, 20000), 128 + SIGINT);
    ck_assert_msg(ec_test_now_ms() - t0 < ec_test_ms(5000),
                  "the agent took %lld ms after the second SIGINT",
                  (long long)(ec_test_now_ms() - t0));
    ck_assert_msg(ec_test_wait(pid_gone, &deaf, 5000), "the program outlived the second SIGINT");
}
END_TEST

/* Byte offset of the last occurrence of needle in path, or -1. */
static long last_offset(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    long at = -1;
    for (char *p = buf; (p = strstr(p, needle)); p++)
        at = p - buf;
    return at;
}

/* --np=2:4 with two nodes: once the second registers, the leader's console
 * says it has 2 of 4 and starts after --elastic_timeout, instead of keeping
 * "waiting for 1 more node" on screen until the epoch; after the epoch no
 * "waiting for" line remains the last word. */
START_TEST(console_says_what_the_job_waits_for)
{
    agent_t a = start_agent("jwait", "a", "2:4", "--elastic_timeout=4", "0");
    wait_file(a.log, "waiting for 1 more node", 15000);
    agent_t b = start_agent("jwait", "b", "2:4", "--elastic_timeout=4", "0");
    wait_file(b.log, "+node b registered", 15000);
    wait_file(a.log, "have 2 of np_max=4 nodes", 15000);
    ec_epoch_free(wait_epoch("/jwait/", 1, 4, 15000));
    wait_file(a.log, "+epoch 1 world=4", 5000);
    long ep = last_offset(a.log, "+epoch 1 world=4");
    ck_assert_int_gt(ep, last_offset(a.log, "have 2 of np_max=4 nodes"));
    ck_assert_int_gt(ep, last_offset(a.log, "waiting for"));
}
END_TEST


/* --gpus as Paddle reads it: GPUs as CUDA_VISIBLE_DEVICES lists them (CUDA
 * ordinals when it is unset).  The processes see exactly the node's chosen
 * GPUs (CUDA_VISIBLE_DEVICES narrowed to them) and index into that list, so
 * FLAGS_selected_gpus and a torch program's cuda:LOCAL_RANK land on them;
 * two agents on one host with different --gpus use different GPUs. */
START_TEST(gpus_narrow_visible_devices_and_index_into_them)
{
    start_agent_env("env CUDA_VISIBLE_DEVICES=4,5,6,7", "jgpu", "a", "2", NULL, "--gpus=6,7",
                    "0");
    start_agent_env("", "jgpu", "b", "2", NULL, "--gpus=4,5", "0");
    ec_epoch_free(wait_epoch("/jgpu/", 1, 4, 15000));
    struct { const char *node, *visible; } want[] = {{"a", "6,7"}, {"b", "4,5"}};
    for (int i = 0; i < 2; i++)
        for (int lr = 0; lr < 2; lr++) {
            wait_dump("jgpu", want[i].node, lr, 1);
            const char *p = dump_path("jgpu", want[i].node, lr, 1);
            char lrs[8];
            snprintf(lrs, sizeof(lrs), "%d", lr);
            ck_assert_str_eq(dump_get(p, "CUDA_VISIBLE_DEVICES"), want[i].visible);
            ck_assert_str_eq(dump_get(p, "FLAGS_selected_gpus"), lrs);
            ck_assert_str_eq(dump_get(p, "LOCAL_RANK"), lrs);
            ck_assert_str_eq(dump_get(p, "PADDLE_LOCAL_DEVICE_IDS"), lrs);
            ck_assert_str_eq(dump_get(p, "PADDLE_WORLD_DEVICE_IDS"), "0,1,0,1");
            ck_assert_str_eq(dump_get(p, "PADDLE_DISTRI_BACKEND"), "nccl");
        }
}
END_TEST

static void touch(const char *dir, const char *name)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    ec_test_write_file(p, "", 0644);
}

/* Without --gpus or --nproc_per_node, like Paddle's launcher: one process
 * per GPU the node shows (CUDA_VISIBLE_DEVICES, else /dev/nvidiaN, here a
 * fake directory through the ECOORD_DEV_DIR test hook), told to use NCCL;
 * Gloo only on a node without GPUs. */
START_TEST(gpus_shown_set_nproc_and_nccl)
{
    start_agent_env("env CUDA_VISIBLE_DEVICES=3,5", "jgvis", "a", "1", NULL, "", "0");
    for (int lr = 0; lr < 2; lr++) {
        wait_dump("jgvis", "a", lr, 1);
        const char *p = dump_path("jgvis", "a", lr, 1);
        ck_assert_str_eq(dump_get(p, "LOCAL_WORLD_SIZE"), "2");
        ck_assert_str_eq(dump_get(p, "CUDA_VISIBLE_DEVICES"), "3,5");
        ck_assert_str_eq(dump_get(p, "FLAGS_selected_gpus"), lr ? "1" : "0");
        ck_assert_str_eq(dump_get(p, "PADDLE_DISTRI_BACKEND"), "nccl");
    }
    char dev[300], envs[400];
    snprintf(dev, sizeof(dev), "%s/fakedev", tmp);
    mkdir(dev, 0755);
    const char *nodes[] = {"nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm", "null"};
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
        touch(dev, nodes[i]);
    snprintf(envs, sizeof(envs), "env ECOORD_DEV_DIR=%s", dev);
    start_agent_env(envs, "jgdev", "a", "1", NULL, "", "0");
    for (int lr = 0; lr < 3; lr++) {
        wait_dump("jgdev", "a", lr, 1);
        const char *p = dump_path("jgdev", "a", lr, 1);
        ck_assert_str_eq(dump_get(p, "LOCAL_WORLD_SIZE"), "3");
        ck_assert_str_eq(dump_get(p, "CUDA_VISIBLE_DEVICES"), "0,1,2");
        ck_assert_str_eq(dump_get(p, "PADDLE_DISTRI_BACKEND"), "nccl");
    }
    /* no GPU at all (setup's empty directory): one process, Gloo */
    start_agent_env("", "jgcpu", "a", "1", NULL, "", "0");
    wait_dump("jgcpu", "a", 0, 1);
    const char *p = dump_path("jgcpu", "a", 0, 1);
    ck_assert_str_eq(dump_get(p, "LOCAL_WORLD_SIZE"), "1");
    ck_assert_str_eq(dump_get(p, "PADDLE_DISTRI_BACKEND"), "gloo");
    ck_assert_str_eq(dump_get(p, "FLAGS_selected_gpus"), "");
}
END_TEST


/* Paddle's current launcher's spelling of an elastic job, word for word:
 * --master=etcd://HOST:PORT --nnodes=2 --nproc_per_node=2 forms a 2-node
 * job (world 4) through the same etcd. */
START_TEST(paddle_master_etcd_forms_a_two_node_job)
{
    const char *ids[] = {"a", "b"};
    char dump[300];
    snprintf(dump, sizeof(dump), "%s/dump-jpm", tmp);
    mkdir(dump, 0755);
    for (int i = 0; i < 2; i++) {
        char cmd[2048], log[400];
        snprintf(log, sizeof(log), "%s/jpm-%s.console", tmp, ids[i]);
        snprintf(cmd, sizeof(cmd),
                 "exec %s launch --master=etcd://%s --job_id=jpm --nnodes=2 --nproc_per_node=2 "
                 "--run_mode=collective --node_id=%s --log_dir=%s/jpm-%s -- %s %s 0",
                 ecoord(), ec_embed_endpoint(etcd), ids[i], tmp, ids[i], prog(), dump);
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        pids[npids++] = ec_test_spawn(argv, log);
    }
    ec_epoch_t *ep = wait_epoch("/jpm/", 1, 4, 15000);
    ck_assert_int_eq(ep->nmembers, 2);
    ec_epoch_free(ep);
    for (int i = 0; i < 2; i++) {
        wait_dump("jpm", ids[i], 1, 1);
        ck_assert_str_eq(dump_get(dump_path("jpm", ids[i], 1, 1), "PADDLE_TRAINERS_NUM"), "4");
    }
}
END_TEST

/* Lines of path containing needle. */
static int count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Clusters often set http_proxy/https_proxy.  gRPC sent the agent's etcd
 * traffic to the proxy, loopback included (exit 1, "etcd ... is
 * unavailable", nothing about a proxy).  The agent connects to etcd
 * directly unless --etcd_proxy says otherwise, its processes get none of
 * the variables (one line says so), and when etcd is unreachable while one
 * is set, the message names it and how to use a proxy for etcd. */
START_TEST(proxy_variables_neither_divert_etcd_nor_reach_the_processes)
{
    const char *envs = "env https_proxy=http://127.0.0.1:9 http_proxy=http://127.0.0.1:9 "
                       "HTTPS_PROXY=http://127.0.0.1:9 grpc_proxy=http://127.0.0.1:9 "
                       "all_proxy=http://127.0.0.1:9 no_proxy= NO_PROXY=";
    agent_t a = start_agent_env(envs, "jproxy", "a", "1", "1", "", "1");
    ck_assert_msg(ec_test_reap(a.pid, 20000) == 0, "the agent failed with proxies set: see %s",
                  a.log);
    const char *p = dump_path("jproxy", "a", 0, 1);
    ck_assert_msg(access(p, F_OK) == 0, "the process never ran: see %s", a.log);
    const char *gone[] = {"https_proxy=", "http_proxy=", "HTTPS_PROXY=", "grpc_proxy=",
                          "all_proxy=", NULL};
    for (int i = 0; gone[i]; i++)
        ck_assert_msg(!ec_test_file_contains(p, gone[i]), "the process got %s", gone[i]);
    ck_assert_int_eq(count_lines(a.log, "https_proxy"), 1); /* one line says so */

    char cmd[2048], out[16384];
    snprintf(cmd, sizeof(cmd),
             "exec %s %s launch --elastic_server=127.0.0.1:1 --etcd_wait=0 --job_id=jproxy2 "
             "--log_dir=%s/p2 "
             "-- %s %s 0", envs, ecoord(), tmp, prog(), tmp);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    ck_assert_int_eq(ec_test_run(argv, out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "grpc_proxy is set, but etcd connections never use a proxy") &&
                      strstr(out, "--etcd_proxy=http://HOST:PORT"),
                  "an unreachable etcd with a proxy set does not name it: %s", out);
}
END_TEST

/* The default ports lie below the kernel's ephemeral range (test_knobs).
 * A start port that is busy is not moved silently: one line names it and
 * the ports taken instead. */
START_TEST(busy_start_port_is_moved_and_said)
{
    int port = atoi(ec_config_knob(EC_K_START_PORT)->def);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    /* if this fails, something else has the port: busy all the same */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        listen(fd, 1);
    agent_t a = start_agent_env("env -u ECOORD_START_PORT -u PADDLE_START_PORT", "jport", "a",
                                "1", "1", "", "1");
    int rc = ec_test_reap(a.pid, 20000);
    close(fd);
    ck_assert_msg(rc == 0, "the agent failed: see %s", a.log);
    char busy[64];
    snprintf(busy, sizeof(busy), "%d", port);
    FILE *f = fopen(a.log, "r");
    ck_assert_ptr_nonnull(f);
    char line[4096], said[4096] = "";
    while (fgets(line, sizeof(line), f))
        if (strstr(line, "instead"))
            snprintf(said, sizeof(said), "%s", line);
    fclose(f);
    /* "port 6070 is in use: this node uses ports 6071-6073 instead"; other
     * ports may be busy too (TIME_WAIT of earlier tests), or held by another
     * agent on this host */
    char *uses = strstr(said, "this node uses");
    if (uses)
        *uses = '\0';
    ck_assert_msg(uses && strstr(said, busy) && (strstr(said, "in use") || strstr(said, "held by")),
                  "no line says port %s is busy and which ports were taken instead: see %s", busy,
                  a.log);
    ck_assert_int_eq(count_lines(a.log, "instead"), 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t3000-launch");
    TCase *t = tcase_create("launch");
    tcase_add_checked_fixture(t, setup, etcd_down);
    ec_tcase_add(t, bad_input_stops_before_anything_starts);
    ec_tcase_add(t, every_set_up_failure_with_few_files_says_what_failed);
    ec_tcase_add(t, an_agent_waits_for_an_etcd_that_starts_after_it);
    ec_tcase_add(t, an_agent_gives_up_on_etcd_after_etcd_wait);
    ec_tcase_add(t, a_multi_node_job_on_an_embedded_etcd_says_how_others_join);
    ec_tcase_add(t, environment_matches_epoch);
    ec_tcase_add(t, unrunnable_program_exits_1_before_joining);
    ec_tcase_add(t, python_program_runs_with_interpreter);
    ec_tcase_add(t, nproc_mismatch_node_exits_and_job_goes_on);
    ec_tcase_add(t, np_mismatch_node_exits_and_job_goes_on);
    ec_tcase_add(t, join_timeout_gives_up_a_job_that_does_not_form);
    ec_tcase_add(t, job_completes_everywhere);
    ec_tcase_add(t, completed_job_id_runs_again);
    ec_tcase_add(t, killed_process_restarts_then_node_leaves);
    ec_tcase_add(t, killed_agent_takes_processes_and_lease_expires);
    ec_tcase_add(t, sigterm_agent_leaves_at_once_and_joiner_added);
    ec_tcase_add(t, sighup_agent_leaves_as_sigterm_does);
    ec_tcase_add(t, second_agent_with_the_same_log_dir_is_refused);
    ec_tcase_add(t, node_refused_for_its_nproc_says_so_and_leaves);
    ec_tcase_add(t, failure_report_shows_only_the_failed_start_s_output);
    ec_tcase_add(t, split_epochs_form_reform_and_admit_a_joiner);
    ec_tcase_add(t, vanished_node_evicted_in_a_second_while_peers_run_on);
    ec_tcase_add(t, dead_leader_of_five_replaced_in_a_second);
    ec_tcase_add(t, agent_frozen_shorter_than_suspicion_window_not_evicted);
    ec_tcase_add(t, agent_paused_within_the_pause_tolerance_not_evicted);
    ec_tcase_add(t, agent_frozen_for_good_evicted_in_about_a_second);
    ec_tcase_add(t, node_loss_makes_one_epoch_and_costs_no_restart);
    ec_tcase_add(t, inprocess_peer_loss_costs_no_restart);
    ec_tcase_add(t, interrupted_run_is_over_and_a_new_launch_starts_a_new_run);
    ec_tcase_add(t, console_tells_the_story);
    ec_tcase_add(t, first_failure_stops_the_job_with_the_process_code);
    ec_tcase_add(t, nccl_async_error_handling_on_unless_user_set);
    ec_tcase_add(t, second_sigint_stops_processes_at_once);
    ec_tcase_add(t, console_says_what_the_job_waits_for);
    ec_tcase_add(t, gpus_narrow_visible_devices_and_index_into_them);
    ec_tcase_add(t, gpus_shown_set_nproc_and_nccl);
    ec_tcase_add(t, paddle_master_etcd_forms_a_two_node_job);
    ec_tcase_add(t, proxy_variables_neither_divert_etcd_nor_reach_the_processes);
    ec_tcase_add(t, busy_start_port_is_moved_and_said);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
