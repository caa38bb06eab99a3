/* The ring's failure detector (coord/core/detector.c) with real probes: the
 * agent's prober (ec_probe_many) probing the agent's probe server
 * (coord/node/probe_server.c) through a loopback relay that delays and
 * "loses" (this kernel has no netem).  The relay sits above TCP, so a lost
 * packet becomes the delay TCP would add resending it (tests/lib/
 * detector_sim.h's model: a handshake packet after 1 s then 2 s, a data
 * packet after 200 ms plus the round trip); a lost handshake still shows
 * the prober a completed handshake at once, which makes the relay harsher
 * on the detector than a real link (no backoff; bench_detector_link runs
 * the same over an emulated link that delays and loses every packet).  One
 * watcher, the leader's confirmation and the readmission probe are played
 * as node_ring.c and node_evict.c do (tests/lib/detector_play.h), for the
 * detector and for the rule it replaced (one probe of 250 ms, two misses,
 * one confirmation of 250 ms).
 *
 *   tests/bench/bench_detector_relay [seconds per condition, default 30]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "detector.h"
#include "detector_play.h"
#include "probe.h"
#include "probe_proof.h"
#include "probe_server.h"

#define ID "node-relay"
#define LEASE 0x51

/* ---- the relay ---------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double loss;
static int64_t delay_ms, paused_until_ms;
static bool frozen;
static uint64_t rng = 88172645463325252ULL;
static uint16_t server_port;

static double uniform(void)
{
    pthread_mutex_lock(&mu);
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    double u = (double)(rng >> 11) / 9007199254740992.0;
    pthread_mutex_unlock(&mu);
    return u;
}

static int64_t resends(double p, int64_t rto)
{
    int64_t extra = 0;
    for (int i = 0; i < 6 && uniform() < p; i++, rto *= 2)
        extra += rto;
    return extra;
}

static void sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000}; /* the simulated link's delay */
    nanosleep(&ts, NULL);
}

static int dial(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Read up to a newline, at most 5 s. */
static ssize_t read_line(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    while (got < cap - 1) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 5000) <= 0)
            break;
        ssize_t r = recv(fd, buf + got, cap - 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (memchr(buf, '\n', got))
            break;
    }
    return (ssize_t)got;
}

static void *conn(void *arg)
{
    int c = (int)(intptr_t)arg;
    pthread_mutex_lock(&mu);
    double l = loss;
    int64_t d = delay_ms;
    pthread_mutex_unlock(&mu);
    double both = 1.0 - (1.0 - l) * (1.0 - l);
    int64_t rto = 200 + 2 * d;
    char req[128], ans[512];
    ssize_t n = read_line(c, req, sizeof(req));
    /* the handshake (a round trip, resent on loss), then the request */
    sleep_ms(2 * d + resends(both, 1000) + d + resends(l, rto));
    int s = n > 0 ? dial(server_port) : -1;
    ssize_t m = -1;
    if (s >= 0 && send(s, req, (size_t)n, MSG_NOSIGNAL) == n)
        m = read_line(s, ans, sizeof(ans));
    if (s >= 0)
        close(s);
    for (;;) { /* the agent answers when it resumes; a frozen one never does */
        pthread_mutex_lock(&mu);
        int64_t wait = frozen ? 100 : paused_until_ms - ec_mono_ms();
        pthread_mutex_unlock(&mu);
        if (wait <= 0)
            break;
        struct pollfd pf = {c, POLLIN, 0}; /* the prober gave up: done */
        if (poll(&pf, 1, (int)(wait < 100 ? wait : 100)) > 0)
            goto out;
    }
    sleep_ms(d + resends(l, rto));
    if (m > 0)
        send(c, ans, (size_t)m, MSG_NOSIGNAL);
out:
    close(c);
    return NULL;
}

static int relay_fd = -1;

static void *relay(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept4(relay_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EBADF || errno == EINVAL)
                return NULL; /* closed: the node is gone */
            continue;
        }
        pthread_t t;
        if (pthread_create(&t, NULL, conn, (void *)(intptr_t)c) == 0)
            pthread_detach(t);
        else
            close(c);
    }
}

static uint16_t relay_start(void)
{
    relay_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(relay_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(a);
    if (bind(relay_fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(relay_fd, 4096) < 0 ||
        getsockname(relay_fd, (struct sockaddr *)&a, &sl) < 0)
        return 0;
    pthread_t t;
    pthread_create(&t, NULL, relay, NULL);
    pthread_detach(t);
    return ntohs(a.sin_port);
}

/* ---- the prober ---------------------------------------------------------- */

static ec_probe_key_t key;
static uint16_t relay_port;

static ec_play_t player(bool legacy, int64_t tolerance_ms)
{
    return (ec_play_t){.target = {.host = "127.0.0.1", .port = relay_port, .expect_id = ID,
                                  .verify = &key.v, .expect_lease = LEASE},
                       .legacy = legacy, .interval_ms = 250, .tolerance_ms = tolerance_ms};
}

static ec_play_result_t watch(bool legacy, int64_t ms, int64_t dead_at_ms, int64_t tolerance_ms)
{
    ec_play_t p = player(legacy, tolerance_ms);
    return ec_play_watch(&p, ms, dead_at_ms);
}

static int64_t readmit(bool legacy, int64_t tolerance_ms)
{
    ec_play_t p = player(legacy, tolerance_ms);
    return ec_play_readmit(&p, 20000);
}

static void set_link(double l, int64_t d)
{
    pthread_mutex_lock(&mu);
    loss = l;
    delay_ms = d;
    pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 30;
    uint8_t secret[EC_PROBE_SECRET_LEN];
    ec_probe_random(secret, sizeof(secret));
    ec_probe_key_init(&key, secret);
    relay_port = relay_start();
    int fd = socket(AF_INET, SOCK_STREAM, 0); /* a free port for the server */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &sl);
    close(fd);
    server_port = ntohs(a.sin_port);
    ec_error_t err = {0};
    ec_probe_server_t *s = ec_probe_serve("127.0.0.1", server_port, ID, secret, LEASE, &err);
    if (!relay_port || !s) {
        fprintf(stderr, "bench_detector_relay: cannot listen: %s\n", err.msg);
        return 1;
    }
    printf("# real probes through a loopback relay, %d s per condition, interval 250 ms, "
           "tolerance 700 ms\n", secs);
    const char *rules[] = {"old", "detector"};
    for (int r = 0; r < 2; r++) {
        set_link(0.3, 0);
        ec_play_result_t x = watch(r == 0, secs * 1000LL, -1, 700);
        printf("30%% loss            %-8s reports %.1f/min, evictions %.1f/min, readmission worst %lld ms\n",
               rules[r], x.reports * 60.0 / secs, x.evictions * 60.0 / secs,
               (long long)x.readmit_ms);
    }
    for (int r = 0; r < 2; r++) {
        set_link(0, 200);
        int64_t in = readmit(r == 0, 700);
        ec_play_result_t x = watch(r == 0, secs * 1000LL, -1, 700);
        printf("200 ms one way      %-8s held node readmitted after %lld ms (-1: not in 20 s); "
               "then evictions %.1f/min\n", rules[r], (long long)in, x.evictions * 60.0 / secs);
        if (r == 0)
            continue;
        in = readmit(false, 3000);
        x = watch(false, secs * 1000LL, -1, 3000);
        printf("200 ms one way      %-8s --peer_pause_tolerance=3: held node readmitted after %lld ms; "
               "evictions %.1f/min, reports %.1f/min\n", rules[r], (long long)in,
               x.evictions * 60.0 / secs, x.reports * 60.0 / secs);
    }
    set_link(0, 0);
    for (int r = 0; r < 2; r++) {
        int64_t worst = -1, sum = 0;
        for (int i = 0; i < 5; i++) {
            pthread_mutex_lock(&mu);
            frozen = false;
            pthread_mutex_unlock(&mu);
            sleep_ms(300 + 53 * i);
            pthread_mutex_lock(&mu);
            frozen = true;
            pthread_mutex_unlock(&mu);
            ec_play_result_t x = watch(r == 0, 10000, ec_mono_ms(), 700);
            sum += x.found_ms;
            worst = x.found_ms > worst ? x.found_ms : worst;
        }
        printf("dead: frozen        %-8s found after %lld ms on average, %lld ms at worst (5 runs)\n",
               rules[r], (long long)(sum / 5), (long long)worst);
    }
    pthread_mutex_lock(&mu);
    frozen = false;
    pthread_mutex_unlock(&mu);
    ec_probe_server_stop(s);
    return 0;
}
