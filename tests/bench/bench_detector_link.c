/* The ring's failure detector (coord/core/detector.c) with real probes over
 * an emulated link that delays and loses every packet, the TCP handshake
 * and TCP's resends included (tests/lib/linkem.h: two network namespaces
 * joined by a relay between two TAP devices).  The agent's prober runs in
 * namespace A (this process's main thread), the agent's probe server, with
 * the proof, in namespace B (a child process, so that it can be paused with
 * SIGSTOP).  One watcher, the leader's confirmation and the readmission
 * probe are played as node_ring.c and node_evict.c do
 * (tests/lib/detector_play.h).  The same conditions as bench_detector_relay,
 * whose relay above TCP cannot delay a handshake, plus pauses and a starved
 * prober.  Needs root; says SKIP and exits 77 without it.
 *
 *   tests/bench/bench_detector_link [seconds per condition, default 20]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "detector.h"
#include "detector_play.h"
#include "linkem.h"
#include "probe.h"
#include "probe_proof.h"
#include "probe_server.h"

#define ID "node-link"
#define LEASE 0x52
#define PORT 7411
#define TOLERANCE 700 /* --peer_pause_tolerance's default */

static ec_linkem_t *link_;
static ec_probe_key_t key;
static uint8_t secret[EC_PROBE_SECRET_LEN];
static int64_t server_life_ms;
static pid_t server;

static double load1(void)
{
    double l[1] = {-1};
    getloadavg(l, 1);
    return l[0];
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static int64_t between(int64_t lo, int64_t hi) /* main thread and the pauser, never at once */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (int64_t)((rng >> 11) % (uint64_t)(hi - lo + 1));
}

/* ---- the agent's side (namespace B) -------------------------------------- */

static int serve(void *arg)
{
    int ready = *(int *)arg;
    ec_error_t err = {0};
    ec_probe_server_t *s = ec_probe_serve(ec_linkem_addr(link_, EC_LINKEM_B), PORT, ID, secret,
                                          LEASE, &err);
    char c = s ? 'y' : 'n';
    if (write(ready, &c, 1) != 1 || !s) {
        fprintf(stderr, "bench_detector_link: probe server: %s\n", err.msg);
        return 1;
    }
    for (int64_t end = ec_mono_ms() + server_life_ms; ec_mono_ms() < end;)
        ec_play_nap_ms(1000); /* killed long before, normally */
    ec_probe_server_stop(s);
    return 0;
}

static ec_play_t player(bool legacy, int64_t tolerance_ms)
{
    static char host[16];
    snprintf(host, sizeof(host), "%s", ec_linkem_addr(link_, EC_LINKEM_B));
    return (ec_play_t){.target = {.host = host, .port = PORT, .expect_id = ID, .verify = &key.v,
                                  .expect_lease = LEASE},
                       .legacy = legacy, .interval_ms = 250, .tolerance_ms = tolerance_ms};
}

/* Start the probe server in B and wait (5 s at most) until it answers a
 * probe over a clean link: 0, or -1. */
static int server_start(void)
{
    int p[2];
    if (pipe(p) < 0)
        return -1;
    ec_error_t err = {0};
    server = ec_linkem_spawn(link_, EC_LINKEM_B, serve, &p[1], &err);
    close(p[1]);
    char c = 'n';
    struct pollfd pf = {p[0], POLLIN, 0};
    if (server > 0 && poll(&pf, 1, 5000) == 1 && read(p[0], &c, 1) != 1)
        c = 'n';
    close(p[0]);
    if (server < 0 || c != 'y') {
        fprintf(stderr, "bench_detector_link: no probe server in %s: %s\n",
                ec_linkem_netns(link_, EC_LINKEM_B), err.msg[0] ? err.msg : "it did not start");
        return -1;
    }
    ec_play_t pl = player(false, TOLERANCE);
    for (int64_t end = ec_mono_ms() + 5000; ec_mono_ms() < end;)
        if (ec_play_confirm(&pl, -1, 0))
            return 0;
    fprintf(stderr, "bench_detector_link: the probe server in %s does not answer over the link\n",
            ec_linkem_netns(link_, EC_LINKEM_B));
    return -1;
}

/* ---- pauses (SIGSTOP of the agent) ---------------------------------------- */

#define PAUSES_MAX 64

static struct {
    int64_t until_ms;
    int n;
    int64_t stop_at[PAUSES_MAX], cont_at[PAUSES_MAX];
} pz;

/* Until pz.until_ms: a pause of 1-3 s, 5-8 s after the last one ended. */
static void *pauser(void *arg)
{
    (void)arg;
    while (pz.n < PAUSES_MAX) {
        int64_t start = ec_mono_ms() + between(5000, 8000), len = between(1000, 3000);
        if (start + len > pz.until_ms - 1000)
            break;
        ec_play_nap_ms(start - ec_mono_ms());
        pz.stop_at[pz.n] = ec_mono_ms();
        kill(server, SIGSTOP);
        ec_play_nap_ms(len);
        kill(server, SIGCONT);
        pz.cont_at[pz.n] = ec_mono_ms();
        pz.n++;
    }
    return NULL;
}

/* Readmission after the agent answers again: from its resumption (or its
 * eviction, when that came later). */
static void pauses(int64_t delay_ms, int secs)
{
    ec_linkem_set_both(link_, delay_ms, 0);
    memset(&pz, 0, sizeof(pz));
    pz.until_ms = ec_mono_ms() + secs * 1000LL;
    pthread_t t;
    pthread_create(&t, NULL, pauser, NULL);
    ec_play_t pl = player(false, TOLERANCE);
    ec_play_result_t x = ec_play_watch(&pl, secs * 1000LL, -1);
    pthread_join(t, NULL);
    kill(server, SIGCONT);
    int64_t worst = -1, sum = 0;
    int n = 0, lost = 0;
    for (int k = 0; k < x.evictions && k < EC_PLAY_EVICTIONS_MAX; k++) {
        if (x.readmitted_at[k] < 0) {
            lost++;
            continue;
        }
        int64_t from = x.evicted_at[k];
        for (int i = 0; i < pz.n; i++)
            if (pz.stop_at[i] <= x.evicted_at[k] && pz.cont_at[i] > from)
                from = pz.cont_at[i];
        int64_t lag = x.readmitted_at[k] - from;
        sum += lag;
        n++;
        worst = lag > worst ? lag : worst;
    }
    printf("1-3 s pauses, %3lld ms one way: %d pauses, %d reports, %d evictions; readmitted %lld ms "
           "after answering again on average, %lld ms at worst%s (load %.2f)\n",
           (long long)delay_ms, pz.n, x.reports, x.evictions, (long long)(n ? sum / n : -1),
           (long long)worst, lost ? ", some never" : "", load1());
    fflush(stdout);
}

/* ---- a dead agent --------------------------------------------------------- */

typedef enum { KILLED, FROZEN, LINK_GONE } death_t;

static struct {
    int64_t at_ms;
    death_t how;
} dz;

static void *killer(void *arg)
{
    (void)arg;
    ec_play_nap_ms(dz.at_ms - ec_mono_ms());
    if (dz.how == KILLED)
        kill(server, SIGKILL); /* reaped by ec_linkem_kill afterwards */
    else if (dz.how == FROZEN)
        kill(server, SIGSTOP);
    else
        ec_linkem_freeze(link_, true);
    return NULL;
}

static int deaths(death_t how, const char *name, int runs)
{
    ec_linkem_set_both(link_, 0, 0);
    int64_t worst = -1, sum = 0;
    int found = 0, early = 0;
    for (int i = 0; i < runs; i++) {
        dz.how = how;
        dz.at_ms = ec_mono_ms() + 1000 + between(0, 250);
        pthread_t t;
        pthread_create(&t, NULL, killer, NULL);
        ec_play_t pl = player(false, TOLERANCE);
        ec_play_result_t x = ec_play_watch(&pl, 15000, dz.at_ms);
        pthread_join(t, NULL);
        if (x.found_ms >= 0) {
            sum += x.found_ms;
            found++;
            worst = x.found_ms > worst ? x.found_ms : worst;
        } else if (x.evictions) {
            early++;
        }
        ec_linkem_freeze(link_, false);
        if (how == FROZEN) {
            kill(server, SIGCONT);
        } else if (how == KILLED) {
            ec_linkem_kill(link_, server);
            if (server_start() < 0)
                return -1;
        }
        ec_play_nap_ms(500); /* answers held in the frozen agent drain */
    }
    printf("dead: %-28s found after %lld ms on average, %lld ms at worst (%d of %d runs%s) "
           "(load %.2f)\n", name, (long long)(found ? sum / found : -1), (long long)worst, found,
           runs, early ? "; evicted before its death in some" : "", load1());
    fflush(stdout);
    return 0;
}

/* ---- a starved prober ----------------------------------------------------- */

static pid_t spin(int cpu, int64_t until_ms)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof(one), &one);
    volatile uint64_t x = 0;
    while (ec_mono_ms() < until_ms)
        for (int i = 0; i < 1000000; i++)
            x += (uint64_t)i;
    _exit(0);
}

static void starved(int secs, int spinners)
{
    ec_linkem_set_both(link_, 0, 0);
    cpu_set_t was, one;
    sched_getaffinity(0, sizeof(was), &was);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &was))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pid_t kids[8];
    int n = 0;
    int64_t until = ec_mono_ms() + secs * 1000LL + 2000;
    for (; n < spinners && n < 8; n++)
        if ((kids[n] = spin(cpu, until)) < 0)
            break;
    sched_setaffinity(0, sizeof(one), &one); /* this thread only: the relay keeps its CPUs */
    ec_play_t pl = player(false, TOLERANCE);
    ec_play_result_t x = ec_play_watch(&pl, secs * 1000LL, -1);
    sched_setaffinity(0, sizeof(was), &was);
    for (int i = 0; i < n; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    printf("starved prober: %d busy loops on its CPU: reports %.1f/min, evictions %.1f/min "
           "(load %.2f)\n", n, x.reports * 60.0 / secs, x.evictions * 60.0 / secs, load1());
    fflush(stdout);
}

/* ---- the conditions -------------------------------------------------------- */

static void lossy(bool legacy, int secs)
{
    ec_linkem_set_both(link_, 0, 0.3);
    ec_linkem_stats_t a, b;
    ec_linkem_stats(link_, &a);
    ec_play_t pl = player(legacy, TOLERANCE);
    ec_play_result_t x = ec_play_watch(&pl, secs * 1000LL, -1);
    ec_linkem_stats(link_, &b);
    uint64_t fw = b.forwarded[0] + b.forwarded[1] - a.forwarded[0] - a.forwarded[1];
    uint64_t dr = b.dropped[0] + b.dropped[1] - a.dropped[0] - a.dropped[1];
    printf("30%% loss each way     %-8s reports %.1f/min, evictions %.1f/min, readmission worst "
           "%lld ms (%.0f%% of %llu frames lost) (load %.2f)\n", legacy ? "old" : "detector",
           x.reports * 60.0 / secs, x.evictions * 60.0 / secs, (long long)x.readmit_ms,
           fw + dr ? 100.0 * (double)dr / (double)(fw + dr) : 0.0, (unsigned long long)(fw + dr),
           load1());
    fflush(stdout);
}

static void slow(bool legacy, int secs, int64_t tolerance_ms)
{
    ec_linkem_set_both(link_, 200, 0);
    ec_play_t pl = player(legacy, tolerance_ms);
    int64_t worst = -1, sum = 0;
    int never = 0, runs = legacy ? 1 : 3; /* the old rule never readmits it: 20 s each */
    for (int i = 0; i < runs; i++) { /* a held node that answers, behind the slow link */
        int64_t in = ec_play_readmit(&pl, 20000);
        never += in < 0;
        sum += in < 0 ? 0 : in;
        worst = in > worst ? in : worst;
    }
    ec_play_result_t x = ec_play_watch(&pl, secs * 1000LL, -1);
    printf("200 ms one way        %-8s tolerance %lld ms: a held node readmitted after %lld ms on "
           "average, %lld ms at worst (%d of %d not in 20 s); then reports %.1f/min, evictions "
           "%.1f/min (load %.2f)\n", legacy ? "old" : "detector", (long long)tolerance_ms,
           (long long)(runs - never ? sum / (runs - never) : -1), (long long)worst, never, runs,
           x.reports * 60.0 / secs, x.evictions * 60.0 / secs, load1());
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 20;
    if (secs < 5)
        secs = 5;
    setvbuf(stdout, NULL, _IOLBF, 0);
    ec_error_t err = {0};
    link_ = ec_linkem_create(&err);
    if (!link_) {
        printf("# SKIP bench_detector_link: %s\n", err.msg);
        return 77;
    }
    ec_probe_random(secret, sizeof(secret));
    ec_probe_key_init(&key, secret);
    server_life_ms = secs * 12000LL + 300000; /* outlives every condition */
    int rc = 1, saved = -1;
    saved = ec_linkem_enter(link_, EC_LINKEM_A, &err);
    if (saved < 0) {
        fprintf(stderr, "bench_detector_link: %s\n", err.msg);
        goto out;
    }
    if (server_start() < 0) /* in B, reached from A over the link */
        goto out;
    printf("# real probes over an emulated link (namespaces %s -> %s, TAP relay), %d s per "
           "condition, interval 250 ms, tolerance %d ms unless said, load %.2f\n",
           ec_linkem_netns(link_, EC_LINKEM_A), ec_linkem_netns(link_, EC_LINKEM_B), secs,
           TOLERANCE, load1());
    lossy(true, secs);
    lossy(false, secs);
    slow(true, secs, TOLERANCE);
    slow(false, secs, TOLERANCE);
    slow(false, secs, 3000);
    pauses(0, secs);
    pauses(200, secs);
    if (deaths(KILLED, "killed (port refuses)", 5) < 0 ||
        deaths(FROZEN, "frozen (SIGSTOP for good)", 5) < 0 ||
        deaths(LINK_GONE, "host gone (link frozen)", 5) < 0)
        goto out;
    starved(secs, 2);
    rc = 0;
out:
    if (saved >= 0)
        ec_linkem_leave(saved, NULL);
    ec_linkem_destroy(link_);
    return rc;
}
