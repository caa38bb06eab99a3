/* Benchmark of `ecoord launch --rebuild=restart` recovery on loopback.
 *
 *   bench_launch [REPS=5] [NODES=3]     (env ECOORD, EC_TEST_PROG: binaries)
 *
 * Scenarios, each on a fresh job of NODES agents x 2 processes running the
 * trivial test program (it writes an env dump when it starts):
 *   sigterm:  SIGTERM one agent → every survivor's processes running in the
 *             new epoch (their dumps for epoch 2 exist)
 *   kill9:    kill -9 one training process → every process of every node
 *             running in the restart epoch
 * Prints p50 and max in ms.  Time is measured from just before kill(2) to
 * the moment the last dump file is seen (polled every 1 ms). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "embed.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static const char *env_or(const char *n, const char *d)
{
    const char *v = getenv(n);
    return v && *v ? v : d;
}

static pid_t spawn(const char *cmd, const char *log)
{
    fflush(stdout); /* or the child's freopen writes our buffer again */
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        FILE *f = freopen(log, "a", stdout);
        (void)f;
        dup2(1, 2);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static char dir[256];

static bool dumps(const char *job, int nodes, int skip, int epoch)
{
    for (int n = 0; n < nodes; n++) {
        if (n == skip)
            continue;
        for (int r = 0; r < 2; r++) {
            char p[512];
            snprintf(p, sizeof(p), "%s/dump-%s/env.n%d.%d.%d", dir, job, n, r, epoch);
            if (access(p, F_OK) != 0)
                return false;
        }
    }
    return true;
}

static bool wait_dumps(const char *job, int nodes, int skip, int epoch, int ms)
{
    int64_t deadline = now_ms() + ms;
    while (now_ms() < deadline) {
        if (dumps(job, nodes, skip, epoch))
            return true;
        pause_ms(1);
    }
    return false;
}

static pid_t pid_of(const char *job, int n, int r, int epoch)
{
    char p[512], line[256];
    snprintf(p, sizeof(p), "%s/dump-%s/env.n%d.%d.%d", dir, job, n, r, epoch);
    FILE *f = fopen(p, "r");
    pid_t pid = 0;
    if (f && fgets(line, sizeof(line), f) && !strncmp(line, "PID=", 4))
        pid = atoi(line + 4);
    if (f)
        fclose(f);
    return pid;
}

static int cmp(const void *a, const void *b)
{
    return (int)(*(const int64_t *)a - *(const int64_t *)b);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5, nodes = argc > 2 ? atoi(argv[2]) : 3;
    const char *ecoord = env_or("ECOORD", "./ecoord"), *prog = env_or("EC_TEST_PROG", "tests/ec-test-prog");
    ec_error_t err = {0};
    ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
    ec_embed_t *e = ec_embed_start(&eo, &err);
    if (!e) {
        fprintf(stderr, "bench_launch: %s\n", err.msg);
        return 1;
    }
    snprintf(dir, sizeof(dir), "/tmp/ec-bench-launch-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    printf("ecoord launch recovery (--rebuild=restart), %d nodes x 2 processes, %d repetitions\n",
           nodes, reps);
    const char *scen[2] = {"sigterm-agent", "kill9-process"};
    for (int s = 0; s < 2; s++) {
        int64_t t[64];
        int ok = 0;
        for (int rep = 0; rep < reps && rep < 64; rep++) {
            char job[32];
            snprintf(job, sizeof(job), "b%d-%d", s, rep);
            char dd[400];
            snprintf(dd, sizeof(dd), "%s/dump-%s", dir, job);
            mkdir(dd, 0755);
            pid_t ag[16];
            for (int n = 0; n < nodes && n < 16; n++) {
                char cmd[2048], log[512];
                snprintf(log, sizeof(log), "%s/%s-n%d.log", dir, job, n);
                snprintf(cmd, sizeof(cmd),
                         "exec %s launch --elastic_server=%s --job_id=%s --np=1:%d "
                         "--nproc_per_node=2 --node_id=n%d --log_dir=%s/log-%s-n%d "
                         "--elastic_timeout=30 --lease_ttl=30 --grace_period=2 -- %s %s 0",
                         ecoord, ec_embed_endpoint(e), job, nodes, n, dir, job, n, prog, dd);
                ag[n] = spawn(cmd, log);
            }
            if (!wait_dumps(job, nodes, -1, 1, 20000)) {
                printf("  %s rep %d: job did not start\n", scen[s], rep);
            } else {
                int64_t t0 = now_ms();
                bool got;
                if (s == 0) {
                    kill(ag[nodes - 1], SIGTERM);
                    got = wait_dumps(job, nodes, nodes - 1, 2, 20000);
                } else {
                    kill(pid_of(job, 1, 1, 1), SIGKILL);
                    got = wait_dumps(job, nodes, -1, 2, 20000);
                }
                if (got)
                    t[ok++] = now_ms() - t0;
                else
                    printf("  %s rep %d: no recovery within 20 s\n", scen[s], rep);
            }
            for (int n = 0; n < nodes; n++) {
                kill(ag[n], SIGKILL);
                waitpid(ag[n], NULL, 0);
            }
        }
        if (ok) {
            qsort(t, (size_t)ok, sizeof(int64_t), cmp);
            printf("%-16s n=%-3d p50=%6lld ms  max=%6lld ms\n", scen[s], ok, (long long)t[ok / 2],
                   (long long)t[ok - 1]);
        }
    }
    ec_embed_stop(e);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return 0;
}
