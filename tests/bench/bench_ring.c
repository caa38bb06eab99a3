/* bench_ring: the agents' liveness traffic (coord/node/node_ring.c) at
 * scale, on loopback, in one process.
 *
 *   bench_ring [--nodes N] [--seconds S] [--interval_ms I] [--threads T] [--base_port P]
 *
 * N simulated nodes (default 1,024), each with the agent's real probe server
 * (coord/node/probe_server.c: a thread answering each request with
 * "ecoord <id> <lease> <proof>\n" on its own port) and the agent's real prober (coord/core/probe.c, ec_probe_many)
 * probing its EC_RING_WATCHERS successors (ec_ring_watched, the same pure
 * choice the agent makes) every I ms (default 250, --peer_probe_interval's
 * default).  The probers of all nodes run on T threads (default 8): each
 * round, a thread probes the successors of each of its nodes, then waits
 * for the next round.  What it prints: probes per second (and how many went
 * unanswered), the process's CPU per node (user + system, probers and
 * answering threads together, from getrusage), the probe's bytes (the
 * answer line, measured) and the loopback interface's bytes and packets
 * during the run (/proc/net/dev "lo": the whole machine's loopback traffic,
 * so an upper bound on a shared machine).  etcd sees none of this: the ring
 * reads its successors' records once per epoch and writes only when a peer
 * is silent.
 *
 * The simulation is pessimistic for CPU per node: every node's probes and
 * answers share one machine's kernel and loopback; a real agent does its
 * own two probes and answers two. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "clock.h"
#include "node_policy.h"
#include "probe.h"
#include "probe_proof.h"
#include "probe_server.h"

/* one run's secret, as every agent of a run holds it */
static uint8_t secret[EC_PROBE_SECRET_LEN] = {42};
static ec_probe_key_t key;

typedef struct {
    char id[32];
    uint16_t port;
    size_t succ[EC_RING_WATCHERS];
    size_t nsucc;
} sim_node_t;

static sim_node_t *nodes;
static size_t n_nodes = 1024;
static int interval_ms = 250, seconds = 10, n_threads = 8;
static int64_t t_end_ms;

typedef struct {
    size_t lo, hi;
    uint64_t probes, silent, rounds, late;
    int64_t rtt_us_sum;
} worker_t;

static void *prober(void *arg)
{
    worker_t *w = arg;
    int64_t next = ec_mono_ms();
    while (next < t_end_ms) {
        for (size_t i = w->lo; i < w->hi; i++) {
            ec_probe_target_t t[EC_RING_WATCHERS];
            for (size_t j = 0; j < nodes[i].nsucc; j++) {
                sim_node_t *s = &nodes[nodes[i].succ[j]];
                t[j] = (ec_probe_target_t){.host = "127.0.0.1", .port = s->port,
                                           .expect_id = s->id, .verify = &key.v};
            }
            int ok = ec_probe_many(t, nodes[i].nsucc, 250);
            w->probes += nodes[i].nsucc;
            w->silent += nodes[i].nsucc - (size_t)ok;
            for (size_t j = 0; j < nodes[i].nsucc; j++)
                w->rtt_us_sum += t[j].ok ? t[j].rtt_us : 0;
        }
        w->rounds++;
        next += interval_ms;
        int64_t now = ec_mono_ms();
        if (now > next) {
            w->late++; /* the round overran the interval */
            next = now;
            continue;
        }
        struct timespec ts = {(next - now) / 1000, ((next - now) % 1000) * 1000000L};
        nanosleep(&ts, NULL); /* the benchmark's pacing, not a synchronisation */
    }
    return NULL;
}

/* Bytes and packets received on "lo" (received = sent on loopback). */
static bool lo_counters(uint64_t *bytes, uint64_t *packets)
{
    FILE *f = fopen("/proc/net/dev", "r");
    if (!f)
        return false;
    char line[512];
    bool got = false;
    while (fgets(line, sizeof(line), f)) {
        char *p = line;
        while (*p == ' ')
            p++;
        if (strncmp(p, "lo:", 3))
            continue;
        unsigned long long b, pk;
        if (sscanf(p + 3, "%llu %llu", &b, &pk) == 2) {
            *bytes = b;
            *packets = pk;
            got = true;
        }
    }
    fclose(f);
    return got;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
    int base_port = 41000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--nodes") && v)
            n_nodes = (size_t)atol(argv[++i]);
        else if (!strcmp(a, "--seconds") && v)
            seconds = atoi(argv[++i]);
        else if (!strcmp(a, "--interval_ms") && v)
            interval_ms = atoi(argv[++i]);
        else if (!strcmp(a, "--threads") && v)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--base_port") && v)
            base_port = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--nodes N] [--seconds S] [--interval_ms I] [--threads T] "
                            "[--base_port P]\n", argv[0]);
            return 2;
        }
    }
    if (n_nodes < 3 || seconds < 1 || interval_ms < 1 || n_threads < 1 ||
        base_port + (long)n_nodes * 2 > 65535) {
        fprintf(stderr, "bench_ring: need --nodes >= 3, --seconds >= 1, --interval_ms >= 1, "
                        "--threads >= 1 and ports base_port..base_port+2N below 65536\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    ec_probe_key_init(&key, secret);
    nodes = calloc(n_nodes, sizeof(*nodes));
    ec_probe_server_t **srv = calloc(n_nodes, sizeof(*srv));
    const char **ids = calloc(n_nodes, sizeof(char *));
    if (!nodes || !srv || !ids)
        return 1;
    int port = base_port;
    for (size_t i = 0; i < n_nodes; i++) {
        snprintf(nodes[i].id, sizeof(nodes[i].id), "node%05zu", i);
        ids[i] = nodes[i].id;
        ec_error_t err = {0};
        for (int tries = 0; !srv[i] && tries < 8 && port < 65535; tries++, port++)
            srv[i] = ec_probe_serve("127.0.0.1", (uint16_t)port, nodes[i].id, secret, 1, &err);
        if (!srv[i]) {
            fprintf(stderr, "bench_ring: node %zu: %s\n", i, err.msg);
            return 1;
        }
        nodes[i].port = (uint16_t)(port - 1);
    }
    for (size_t i = 0; i < n_nodes; i++)
        nodes[i].nsucc = ec_ring_watched(ids, n_nodes, ids[i], EC_RING_WATCHERS, nodes[i].succ);
    /* the answer line's size, measured on one probe */
    char line[64];
    snprintf(line, sizeof(line), "ecoord %s\n", nodes[0].id);
    size_t answer_bytes = strlen(line);

    if ((size_t)n_threads > n_nodes)
        n_threads = (int)n_nodes;
    worker_t *w = calloc((size_t)n_threads, sizeof(*w));
    pthread_t *th = calloc((size_t)n_threads, sizeof(*th));
    uint64_t b0 = 0, p0 = 0, b1 = 0, p1 = 0;
    bool have_lo = lo_counters(&b0, &p0);
    double c0 = cpu_s();
    int64_t t0 = ec_mono_ms();
    t_end_ms = t0 + (int64_t)seconds * 1000;
    for (int k = 0; k < n_threads; k++) {
        w[k].lo = n_nodes * (size_t)k / (size_t)n_threads;
        w[k].hi = n_nodes * (size_t)(k + 1) / (size_t)n_threads;
        pthread_create(&th[k], NULL, prober, &w[k]);
    }
    worker_t tot = {0};
    for (int k = 0; k < n_threads; k++) {
        pthread_join(th[k], NULL);
        tot.probes += w[k].probes;
        tot.silent += w[k].silent;
        tot.rounds += w[k].rounds;
        tot.late += w[k].late;
        tot.rtt_us_sum += w[k].rtt_us_sum;
    }
    double el = (double)(ec_mono_ms() - t0) / 1000.0;
    double cpu = cpu_s() - c0;
    have_lo = have_lo && lo_counters(&b1, &p1);

    /* The burst a reported leader gets: every other member probes it once
     * (node_evict.c, a follower confirming a report of the leader), all at
     * once here (one batch: the worst case); how many go unanswered within
     * the probe's 250 ms deadline, three times. */
    size_t nb = n_nodes - 1;
    ec_probe_target_t *bt = calloc(nb, sizeof(*bt));
    int burst_ok[3] = {0};
    int64_t burst_ms[3] = {0};
    for (int rep = 0; bt && rep < 3; rep++) {
        for (size_t i = 0; i < nb; i++)
            bt[i] = (ec_probe_target_t){.host = "127.0.0.1", .port = nodes[0].port,
                                        .expect_id = nodes[0].id, .verify = &key.v};
        int64_t b_t0 = ec_mono_ms();
        burst_ok[rep] = ec_probe_many(bt, nb, 250);
        burst_ms[rep] = ec_mono_ms() - b_t0;
    }
    free(bt);
    for (size_t i = 0; i < n_nodes; i++)
        ec_probe_server_stop(srv[i]);

    double pps = (double)tot.probes / el;
    printf("# ring liveness, %zu simulated nodes on loopback, %d watchers each, every %d ms, "
           "%d prober threads, %.1f s\n", n_nodes, EC_RING_WATCHERS, interval_ms, n_threads, el);
    printf("probes/s %.0f (%.2f per node; expected %.2f)  unanswered %" PRIu64
           "  rounds late %" PRIu64 "/%" PRIu64 "  mean rtt %.0f us\n",
           pps, pps / (double)n_nodes, EC_RING_WATCHERS * 1000.0 / interval_ms, tot.silent,
           tot.late, tot.rounds,
           tot.probes > tot.silent ? (double)tot.rtt_us_sum / (double)(tot.probes - tot.silent) : 0);
    printf("cpu %.3f cores for all %zu nodes (probing and answering): %.1f us per node per "
           "second, %.4f %% of a core per node; %.1f us per probe (both sides)\n",
           cpu / el, n_nodes, cpu / el / (double)n_nodes * 1e6, cpu / el / (double)n_nodes * 100,
           tot.probes ? cpu / (double)tot.probes * 1e6 : 0);
    printf("answer line %zu bytes per probe (payload); ", answer_bytes);
    if (have_lo && tot.probes)
        printf("loopback %.0f bytes and %.1f packets per probe (all of lo, the whole machine), "
               "%.0f bytes/s per node\n",
               (double)(b1 - b0) / (double)tot.probes, (double)(p1 - p0) / (double)tot.probes,
               (double)(b1 - b0) / el / (double)n_nodes);
    else
        printf("loopback counters unavailable\n");
    printf("burst: %zu probes of one node at once (every follower confirming a report of the "
           "leader): answered %d, %d, %d (%lld, %lld, %lld ms)\n", nb, burst_ok[0], burst_ok[1],
           burst_ok[2], (long long)burst_ms[0], (long long)burst_ms[1], (long long)burst_ms[2]);
    free(th);
    free(w);
    free(ids);
    free(srv);
    free(nodes);
    return tot.probes ? 0 : 1;
}
