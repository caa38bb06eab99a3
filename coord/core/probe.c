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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>



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
    char (*buf)[300];
    size_t *got;
};

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
    if (!b->pf || !b->buf || !b->got) {
        free(b->pf);
        free(b->buf);
        free(b->got);
        free(b);
        return NULL;
    }
    b->t0 = ec_mono_us();
    for (size_t i = 0; i < n; i++) {
        t[i].ok = 0;
        t[i].rtt_us = -1;
        b->pf[i].fd = -1;
        struct sockaddr_storage ss;
        socklen_t sl;
        if (t[i].port == 0 || ec_probe_sockaddr(t[i].host, t[i].port, &ss, &sl) < 0)
            continue;
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
            close(fd);
            continue;
        }
        b->pf[i].fd = fd;
        b->pf[i].events = POLLIN;
    }
    return b;
}

/* Read what target i's socket holds without blocking; closes it once it has
 * an answer, was refused or closed.  Returns 1 when it answered correctly. */
static int probe_read(ec_probe_batch_t *b, size_t i)
{
    ssize_t r = recv(b->pf[i].fd, b->buf[i] + b->got[i], sizeof(b->buf[i]) - 1 - b->got[i],
                     MSG_DONTWAIT);
    int ok = 0;
    if (r > 0) {
        b->got[i] += (size_t)r;
        b->buf[i][b->got[i]] = '\0';
        if (!strchr(b->buf[i], '\n') && b->got[i] < sizeof(b->buf[i]) - 1)
            return 0; /* a partial line: more to come */
        const ec_probe_target_t *t = &b->t[i];
        char want[280];
        snprintf(want, sizeof(want), "ecoord %s\n", t->expect_id ? t->expect_id : "");
        ok = t->expect_id ? !strcmp(b->buf[i], want) : !strncmp(b->buf[i], "ecoord ", 7);
        b->t[i].ok = ok;
        b->t[i].rtt_us = ec_mono_us() - b->t0;
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
                         errno == ENOTCONN)) {
        return 0; /* nothing yet (or still connecting) */
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
    free(b->pf);
    free(b->buf);
    free(b->got);
    free(b);
    return answered;
}

int ec_probe_many(ec_probe_target_t *t, size_t n, int timeout_ms)
{
    ec_probe_batch_t *b = ec_probe_begin(t, n);
    if (!b)
        return 0;
    return ec_probe_collect(b, ec_mono_us() + (int64_t)timeout_ms * 1000);
}
