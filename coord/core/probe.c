#define _GNU_SOURCE
#include "probe.h"
#include "clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char hexd[] = "0123456789abcdef";

/* Whether a socket error says the target's host turned the probe away: a
 * refusal (nobody listens), or a reset or a closed pipe (something accepted
 * and closed without answering: no agent of ours; a frozen agent never
 * does that). */
static int turned_away(int e)
{
    return e == ECONNREFUSED || e == ECONNRESET || e == EPIPE;
}

static int unhex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

void ec_probe_request_format(const uint8_t *nonce, char *out)
{
    memcpy(out, "ecoord? ", 8);
    for (size_t i = 0; i < EC_PROBE_NONCE_LEN; i++) {
        out[8 + 2 * i] = hexd[nonce[i] >> 4];
        out[8 + 2 * i + 1] = hexd[nonce[i] & 15];
    }
    out[EC_PROBE_REQUEST_LEN - 1] = '\n';
    out[EC_PROBE_REQUEST_LEN] = '\0';
}

int ec_probe_request_parse(const char *buf, size_t len, uint8_t *nonce)
{
    for (size_t i = 0; i < len && i < EC_PROBE_REQUEST_LEN; i++) {
        char c = buf[i];
        bool good = i < 8 ? c == "ecoord? "[i]
                    : i < EC_PROBE_REQUEST_LEN - 1 ? unhex(c) >= 0 : c == '\n';
        if (!good)
            return -1;
    }
    if (len < EC_PROBE_REQUEST_LEN)
        return 0;
    if (len > EC_PROBE_REQUEST_LEN)
        return -1; /* one request per connection */
    for (size_t i = 0; i < EC_PROBE_NONCE_LEN; i++)
        nonce[i] = (uint8_t)(unhex(buf[8 + 2 * i]) << 4 | unhex(buf[8 + 2 * i + 1]));
    return 1;
}

int ec_probe_random(uint8_t *out, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        got += (size_t)r;
    }
    if (got == n)
        return 0;
    /* a kernel without getrandom (before 3.17) */
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    got = 0;
    while (got < n) {
        ssize_t r = read(fd, out + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got < n) {
        errno = EIO;
        return -1;
    }
    return 0;
}
int ec_probe_sockaddr(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *sl)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
    char ps[8];
    snprintf(ps, sizeof(ps), "%u", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0 || !res)
        return -1;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sl = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

struct ec_probe_batch {
    ec_probe_target_t *t;
    size_t n;
    int64_t t0;
    struct pollfd *pf;
    char (*buf)[EC_PROBE_ANSWER_MAX + 1];
    size_t *got;
    uint8_t (*nonce)[EC_PROBE_NONCE_LEN];
    bool *sent; /* the request went out: now waiting for the answer */
};

static void batch_free(ec_probe_batch_t *b)
{
    free(b->pf);
    free(b->buf);
    free(b->got);
    free(b->nonce);
    free(b->sent);
    free(b);
}

ec_probe_batch_t *ec_probe_begin(ec_probe_target_t *t, size_t n)
{
    ec_probe_batch_t *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->t = t;
    b->n = n;
    b->pf = calloc(n ? n : 1, sizeof(*b->pf));
    b->buf = calloc(n ? n : 1, sizeof(*b->buf));
    b->got = calloc(n ? n : 1, sizeof(size_t));
    b->nonce = calloc(n ? n : 1, sizeof(*b->nonce));
    b->sent = calloc(n ? n : 1, sizeof(bool));
    /* a fresh nonce per target: an answer recorded earlier, or meant for
     * another prober, proves nothing now */
    if (!b->pf || !b->buf || !b->got || !b->nonce || !b->sent ||
        ec_probe_random(&b->nonce[0][0], (n ? n : 1) * EC_PROBE_NONCE_LEN) < 0) {
        batch_free(b);
        return NULL;
    }
    b->t0 = ec_mono_us();
    for (size_t i = 0; i < n; i++) {
        t[i].ok = t[i].connected = t[i].refused = 0;
        t[i].rtt_us = t[i].connect_us = -1;
        b->pf[i].fd = -1;
        struct sockaddr_storage ss;
        socklen_t sl;
        if (t[i].port == 0 || ec_probe_sockaddr(t[i].host, t[i].port, &ss, &sl) < 0)
            continue;
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
            t[i].refused = turned_away(errno);
            close(fd);
            continue;
        }
        b->pf[i].fd = fd;
        b->pf[i].events = POLLOUT; /* connected: send the request */
    }
    return b;
}

/* Whether line[0..len) answers target t to nonce. */
static int answer_ok(const ec_probe_target_t *t, const uint8_t *nonce, const char *line, size_t len)
{
    if (t->verify)
        return t->expect_id && t->verify->check(t->verify, nonce, t->expect_id, t->expect_lease,
                                                line, len);
    if (strncmp(line, "ecoord ", 7))
        return 0;
    if (!t->expect_id)
        return 1;
    size_t il = strlen(t->expect_id);
    return len > 7 + il && !strncmp(line + 7, t->expect_id, il) &&
           (line[7 + il] == ' ' || line[7 + il] == '\n');
}

/* Send target i its request once its connection is up; closes it when
 * refused.  Returns 1 when the request went out. */
static int probe_send(ec_probe_batch_t *b, size_t i)
{
    char req[EC_PROBE_REQUEST_LEN + 1];
    ec_probe_request_format(b->nonce[i], req);
    ssize_t w = send(b->pf[i].fd, req, EC_PROBE_REQUEST_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w == (ssize_t)EC_PROBE_REQUEST_LEN) {
        b->sent[i] = true;
        b->pf[i].events = POLLIN;
        b->t[i].connected = 1;
        b->t[i].connect_us = ec_mono_us() - b->t0;
        return 1;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ENOTCONN))
        return 0; /* still connecting */
    b->t[i].refused = w < 0 && turned_away(errno);
    close(b->pf[i].fd); /* refused, reset, or a short send of 41 bytes: no answer to wait for */
    b->pf[i].fd = -1;
    return 0;
}

/* Read what target i's socket holds without blocking; closes it once it has
 * an answer, was refused or closed.  Returns 1 when it answered correctly. */
static int probe_read(ec_probe_batch_t *b, size_t i)
{
    if (!b->sent[i] && !probe_send(b, i))
        return 0;
    ssize_t r = recv(b->pf[i].fd, b->buf[i] + b->got[i], sizeof(b->buf[i]) - 1 - b->got[i],
                     MSG_DONTWAIT);
    int ok = 0;
    if (r > 0) {
        b->got[i] += (size_t)r;
        b->buf[i][b->got[i]] = '\0';
        if (!strchr(b->buf[i], '\n') && b->got[i] < sizeof(b->buf[i]) - 1)
            return 0; /* a partial line: more to come */
        ok = answer_ok(&b->t[i], b->nonce[i], b->buf[i], b->got[i]);
        b->t[i].ok = ok;
        b->t[i].refused = !ok; /* an answer, but not from an agent of ours */
        b->t[i].rtt_us = ec_mono_us() - b->t0;
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
                         errno == ENOTCONN)) {
        return 0; /* nothing yet (or still connecting) */
    } else {
        b->t[i].refused = r == 0 || turned_away(errno); /* closed without a line */
    }
    close(b->pf[i].fd); /* answered, refused or closed without a line */
    b->pf[i].fd = -1;
    return ok;
}

int ec_probe_wait(ec_probe_batch_t *b, int64_t until_us)
{
    if (!b)
        return 0;
    for (;;) {
        int64_t left = (until_us - ec_mono_us() + 999) / 1000;
        int open = 0;
        for (size_t i = 0; i < b->n; i++)
            open += b->pf[i].fd >= 0;
        if (open == 0 || left <= 0)
            return open;
        if (poll(b->pf, b->n, left > INT_MAX ? INT_MAX : (int)left) < 0 && errno != EINTR)
            return open;
        for (size_t i = 0; i < b->n; i++)
            if (b->pf[i].fd >= 0 && b->pf[i].revents)
                probe_read(b, i);
    }
}

int ec_probe_collect(ec_probe_batch_t *b, int64_t deadline_us)
{
    if (!b)
        return 0;
    ec_probe_wait(b, deadline_us);
    /* The deadline passed, maybe long ago: this process may have been stopped
     * or starved since it last looked, and the answers may have been waiting
     * in the sockets all along.  A target is silent only if nothing is there
     * now either. */
    for (size_t i = 0; i < b->n; i++)
        if (b->pf[i].fd >= 0)
            probe_read(b, i);
    int answered = 0;
    for (size_t i = 0; i < b->n; i++) {
        answered += b->t[i].ok != 0;
        if (b->pf[i].fd >= 0)
            close(b->pf[i].fd);
    }
    batch_free(b);
    return answered;
}

int ec_probe_many(ec_probe_target_t *t, size_t n, int timeout_ms)
{
    ec_probe_batch_t *b = ec_probe_begin(t, n);
    if (!b)
        return 0;
    return ec_probe_collect(b, ec_mono_us() + (int64_t)timeout_ms * 1000);
}

ec_probe_outcome_t ec_probe_set_outcome(const ec_probe_target_t *t, size_t n, int64_t *rtt_us)
{
    int answered = 0, connected = 0, refused = 0;
    int64_t best = -1, hs = -1;
    for (size_t i = 0; i < n; i++) {
        answered += t[i].ok != 0;
        connected += t[i].connected != 0;
        refused += t[i].refused != 0;
        if (t[i].ok && (best < 0 || t[i].rtt_us < best))
            best = t[i].rtt_us;
        if (t[i].connected && (hs < 0 || t[i].connect_us < hs))
            hs = t[i].connect_us;
    }
    ec_probe_outcome_t r = ec_detect_outcome(answered, connected, refused, (int)n);
    *rtt_us = r == EC_PROBE_ANSWERED ? best : hs;
    return r;
}
