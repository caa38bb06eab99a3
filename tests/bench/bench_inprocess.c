/* bench_inprocess: how long an in-place rebuild takes, end to end.
 *
 *   bench_inprocess [REPS]      (default 5; needs etcd, ./ecoord and
 *                                worker/examples/linreg, or $ECOORD and
 *                                $ECW_LINREG)
 *
 * Three agents on loopback (`ecoord launch --rebuild=inprocess`, 2 processes
 * each, Gloo, --lease_ttl=2) run the linreg example.  Each repetition:
 *   leave:   SIGTERM one agent -> every survivor has completed a collective
 *            in the new epoch; then the node joins again (join: epoch
 *            published -> every rank, the two new ones included, has
 *            completed one);
 *   restart: kill -9 one training process -> every rank, the restarted one
 *            included, has completed a collective in the restart epoch.
 * "Completed a collective" is each rank's first_collective_at_us in its
 * timing record (epochs/<n>/timings/<rank>, written by the worker library),
 * so the figures include the coordinator (detection, planning, publishing),
 * the watch, the abort, the rendezvous, the state recovery and the first
 * allreduce.  Prints every sample and the p50 and max of each. */
#define _GNU_SOURCE
#include <inttypes.h>
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
#include "etcd.h"
#include "keys.h"
#include "records.h"

static ec_etcd_t *c;
static ec_keys_t keys;
static char tmp[64] = "/tmp/ec-bench-inproc-XXXXXX";
static const char *endpoint;

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* polling interval */
}

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

static pid_t start_agent(const char *id)
{
    char cmd[2048], log[256];
    snprintf(log, sizeof(log), "%s/%s.console", tmp, id);
    snprintf(cmd, sizeof(cmd),
             "exec %s launch --elastic_server=%s --job_id=jb --np=2:3 --nproc_per_node=2 "
             "--node_id=%s --log_dir=%s/%s --grace_period=2 --lease_ttl=2 --elastic_timeout=1 "
             "--max_restart=1000 --rebuild=inprocess -- %s --steps 1000000000 --delay-ms 10 >>%s 2>&1",
             env_or("ECOORD", "./ecoord"), endpoint, id, tmp, id,
             env_or("ECW_LINREG", "worker/examples/linreg"), log);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* The current epoch, or NULL. */
static ec_epoch_t *epoch_now(void)
{
    char key[EC_KEY_MAX];
    ec_key_epoch(&keys, key, sizeof(key));
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0 || !found)
        return NULL;
    ec_epoch_t *ep = NULL;
    ec_epoch_decode(kv.value, kv.value_len, key, &ep, NULL);
    ec_kv_free(&kv);
    return ep;
}

/* Wait (30 s at most) for an epoch > after of the given world; its number
 * and publish time, or 0. */
static uint64_t wait_epoch(uint64_t after, int world, int64_t *published_us)
{
    for (int i = 0; i < 3000; i++) {
        ec_epoch_t *ep = epoch_now();
        if (ep && ep->number > after && ep->world_size == world) {
            uint64_t n = ep->number;
            *published_us = ep->published_at_ms * 1000;
            ec_epoch_free(ep);
            return n;
        }
        ec_epoch_free(ep);
        pause_ms(10);
    }
    return 0;
}

/* Wait (30 s at most) until every rank of epoch n recorded its first
 * collective; the latest such time, or 0. */
static int64_t wait_first_collectives(uint64_t n, int world)
{
    for (int i = 0; i < 3000; i++) {
        int64_t last = 0;
        int have = 0;
        for (int r = 0; r < world; r++) {
            char key[EC_KEY_MAX];
            ec_key_epoch_timing(&keys, n, r, key, sizeof(key));
            ec_kv_t kv;
            bool found = false;
            if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0 || !found)
                break;
            ec_worker_timing_t *t = NULL;
            if (ec_worker_timing_decode(kv.value, kv.value_len, key, &t, NULL) == 0 &&
                t->first_collective_at_us > 0) {
                have++;
                if (t->first_collective_at_us > last)
                    last = t->first_collective_at_us;
            }
            ec_worker_timing_free(t);
            ec_kv_free(&kv);
        }
        if (have == world)
            return last;
        pause_ms(10);
    }
    return 0;
}

/* pid of the last "linreg step" line of a process's log. */
static pid_t pid_in_log(const char *node, int lr)
{
    char path[256], line[512];
    snprintf(path, sizeof(path), "%s/%s/workerlog.%d", tmp, node, lr);
    FILE *f = fopen(path, "r");
    pid_t pid = 0;
    while (f && fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, " pid=");
        if (!strncmp(line, "linreg step=", 12) && p)
            pid = atoi(p + 5);
    }
    if (f)
        fclose(f);
    return pid;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n)
{
    printf("%-52s", what);
    for (int i = 0; i < n; i++)
        printf(" %7.0f", v[i]);
    qsort(v, (size_t)n, sizeof(double), cmp);
    printf("   p50 %6.0f ms  max %6.0f ms\n", v[n / 2], v[n - 1]);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1 || reps > 50)
        reps = 5;
    if (!mkdtemp(tmp))
        return 1;
    ec_error_t err = {0};
    ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
    ec_embed_t *etcd = ec_embed_start(&eo, &err);
    if (!etcd) {
        fprintf(stderr, "bench_inprocess: cannot start etcd: %s\n", err.msg);
        return 1;
    }
    endpoint = ec_embed_endpoint(etcd);
    ec_etcd_opts_t co = EC_ETCD_OPTS_INIT;
    co.endpoints = endpoint;
    c = ec_etcd_create(&co, &err);
    if (!c || ec_keys_init(&keys, NULL, "jb", &err) < 0) {
        fprintf(stderr, "bench_inprocess: %s\n", err.msg);
        return 1;
    }
    pid_t agents[3];
    const char *ids[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        agents[i] = start_agent(ids[i]);
    int64_t pub;
    uint64_t e = wait_epoch(0, 6, &pub);
    if (!e || !wait_first_collectives(e, 6)) {
        fprintf(stderr, "bench_inprocess: the job did not start (logs in %s)\n", tmp);
        return 1;
    }
    double leave[50], leave_pub[50], join[50], restart[50], restart_pub[50];
    int ok = 1;
    for (int r = 0; r < reps && ok; r++) {
        /* leave: SIGTERM agent c */
        int64_t t0 = wall_us();
        kill(agents[2], SIGTERM);
        waitpid(agents[2], NULL, 0);
        e = wait_epoch(e, 4, &pub);
        int64_t done = e ? wait_first_collectives(e, 4) : 0;
        if (!done) {
            ok = 0;
            break;
        }
        leave[r] = (double)(done - t0) / 1000.0;
        leave_pub[r] = (double)(pub - t0) / 1000.0;
        /* join: c comes back */
        agents[2] = start_agent("c");
        e = wait_epoch(e, 6, &pub);
        done = e ? wait_first_collectives(e, 6) : 0;
        if (!done) {
            ok = 0;
            break;
        }
        join[r] = (double)(done - pub) / 1000.0;
        /* restart: kill -9 one training process of b */
        pid_t victim = pid_in_log("b", 1);
        if (victim <= 0) {
            ok = 0;
            break;
        }
        pause_ms(300); /* let the new epoch's ranks train a little first */
        t0 = wall_us();
        kill(victim, SIGKILL);
        e = wait_epoch(e, 6, &pub);
        done = e ? wait_first_collectives(e, 6) : 0;
        if (!done) {
            ok = 0;
            break;
        }
        restart[r] = (double)(done - t0) / 1000.0;
        restart_pub[r] = (double)(pub - t0) / 1000.0;
    }
    if (ok) {
        printf("in-place rebuild, 3 nodes x 2 processes, Gloo on loopback, %d repetitions "
               "(ms):\n", reps);
        report("SIGTERM agent -> new epoch published", leave_pub, reps);
        report("SIGTERM agent -> all 4 survivors' first allreduce", leave, reps);
        report("join: epoch published -> all 6 ranks' first allreduce", join, reps);
        report("kill -9 process -> restart epoch published", restart_pub, reps);
        report("kill -9 process -> all 6 ranks' first allreduce", restart, reps);
    } else {
        fprintf(stderr, "bench_inprocess: a repetition did not complete (logs in %s)\n", tmp);
    }
    for (int i = 0; i < 3; i++) {
        kill(agents[i], SIGKILL);
        waitpid(agents[i], NULL, 0);
    }
    ec_etcd_destroy(c);
    ec_embed_stop(etcd);
    return ok ? 0 : 1;
}
