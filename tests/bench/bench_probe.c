/* bench_probe: what the proof in a probe's answer
 * (coord/core/probe_proof.h) costs, on loopback, in one process.
 *
 *   bench_probe [--rounds N]
 *
 * Prints, in microseconds per probe: making an answer (the HMAC, what a
 * probe server does per request) and checking one (what a prober does per
 * answer), pure CPU; then a whole probe round trip on loopback to the
 * agent's real probe server (coord/node/probe_server.c) through the
 * agent's real prober (ec_probe_many), one target at a time, with the
 * proof checked (the agents' probes) and without (the worker library's,
 * which checks the id only; the server proves its answer either way). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "probe.h"
#include "probe_proof.h"
#include "probe_server.h"

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &sl) < 0)
        return 0;
    close(fd);
    return ntohs(a.sin_port);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* median and p99 of n round trips, in µs */
static void round_trips(const char *what, uint16_t port, const ec_probe_verifier_t *v, int n)
{
    int64_t *us = calloc((size_t)n, sizeof(*us));
    int ok = 0;
    for (int i = 0; i < n; i++) {
        ec_probe_target_t t = {.host = "127.0.0.1", .port = port, .expect_id = "node-00042",
                               .verify = v};
        int64_t t0 = ec_mono_us();
        ok += ec_probe_many(&t, 1, 1000);
        us[i] = ec_mono_us() - t0;
    }
    qsort(us, (size_t)n, sizeof(*us), cmp_i64);
    printf("round trip on loopback, %-28s p50 %6.1f us  p99 %6.1f us  (%d/%d answered)\n", what,
           (double)us[n / 2], (double)us[n * 99 / 100], ok, n);
    free(us);
}

int main(int argc, char **argv)
{
    int rounds = 20000;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[++i]);
    if (rounds < 100)
        rounds = 100;
    uint8_t secret[EC_PROBE_SECRET_LEN], nonce[EC_PROBE_NONCE_LEN];
    ec_probe_random(secret, sizeof(secret));
    ec_probe_random(nonce, sizeof(nonce));
    char line[EC_PROBE_ANSWER_MAX + 1];
    int len = 0;
    int64_t t0 = ec_mono_us();
    for (int i = 0; i < rounds; i++) {
        nonce[0] = (uint8_t)i;
        len = ec_probe_answer_make(secret, nonce, "node-00042", 0x7a3f12, line, sizeof(line));
    }
    double make_us = (double)(ec_mono_us() - t0) / rounds;
    int good = 0;
    t0 = ec_mono_us();
    for (int i = 0; i < rounds; i++)
        good += ec_probe_answer_check(secret, nonce, "node-00042", 0x7a3f12, line, (size_t)len);
    double check_us = (double)(ec_mono_us() - t0) / rounds;
    printf("answer with proof (HMAC-SHA256), make:  %.2f us   (%d-byte line)\n", make_us, len);
    printf("answer with proof, check:               %.2f us   (%d/%d passed)\n", check_us, good,
           rounds);

    uint16_t port = free_port();
    ec_error_t err = {0};
    ec_probe_server_t *s = ec_probe_serve("127.0.0.1", port, "node-00042", secret, 0x7a3f12, &err);
    if (!s) {
        fprintf(stderr, "bench_probe: %s\n", err.msg);
        return 1;
    }
    ec_probe_key_t key;
    ec_probe_key_init(&key, secret);
    int n = rounds / 10;
    round_trips("id only (worker library):", port, NULL, n);
    round_trips("proof checked (agents):", port, &key.v, n);
    round_trips("id only (again):", port, NULL, n);
    round_trips("proof checked (again):", port, &key.v, n);
    ec_probe_server_stop(s);
    return 0;
}
