#define _GNU_SOURCE
#include "probe.h"

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

struct ec_probe_server {
    int fd;
    int stop_pipe[2];
    pthread_t thread;
    char line[300];
};

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void *serve(void *arg)
{
    ec_probe_server_t *s = arg;
    for (;;) {
        struct pollfd pf[2] = {{s->fd, POLLIN, 0}, {s->stop_pipe[0], POLLIN, 0}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        if (!(pf[0].revents & POLLIN))
            continue;
        int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0)
            continue;
        ssize_t w = send(c, s->line, strlen(s->line), MSG_NOSIGNAL);
        (void)w;
        close(c);
    }
    return NULL;
}

static int sockaddr_of(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *sl)
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

ec_probe_server_t *ec_probe_serve(const char *host, uint16_t port, const char *node_id,
                                  ec_error_t *err)
{
    if (port == 0)
        return NULL;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (sockaddr_of(host, port, &ss, &sl) < 0) {
        ec_errorf(err, EC_EINVAL, "probe: cannot resolve %s", host);
        return NULL;
    }
    ec_probe_server_t *s = calloc(1, sizeof(*s));
    if (!s) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(s->line, sizeof(s->line), "ecoord %s\n", node_id);
    s->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&ss, sl) < 0 || listen(s->fd, 64) < 0 ||
        pipe2(s->stop_pipe, O_CLOEXEC) < 0) {
        ec_errorf(err, EC_EIO, "cannot listen for probes on %s:%u: %s (choose other ports with "
                               "--start_port or --port_range)", host, port, strerror(errno));
        if (s->fd >= 0)
            close(s->fd);
        free(s);
        return NULL;
    }
    if (pthread_create(&s->thread, NULL, serve, s) != 0) {
        close(s->fd);
        close(s->stop_pipe[0]);
        close(s->stop_pipe[1]);
        free(s);
        ec_errorf(err, EC_ESYS, "cannot start the probe thread");
        return NULL;
    }
    return s;
}

void ec_probe_server_stop(ec_probe_server_t *s)
{
    if (!s)
        return;
    ssize_t w = write(s->stop_pipe[1], "x", 1);
    (void)w;
    pthread_join(s->thread, NULL);
    close(s->fd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    free(s);
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
    b->t0 = mono_us();
    for (size_t i = 0; i < n; i++) {
        t[i].ok = 0;
        t[i].rtt_us = -1;
        b->pf[i].fd = -1;
        struct sockaddr_storage ss;
        socklen_t sl;
        if (t[i].port == 0 || sockaddr_of(t[i].host, t[i].port, &ss, &sl) < 0)
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
        b->t[i].rtt_us = mono_us() - b->t0;
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
                         errno == ENOTCONN)) {
        return 0; /* nothing yet (or still connecting) */
    }
    close(b->pf[i].fd); /* answered, refused or closed without a line */
    b->pf[i].fd = -1;
    return ok;
}

int ec_probe_collect(ec_probe_batch_t *b, int64_t deadline_us)
{
    if (!b)
        return 0;
    int answered = 0;
    for (;;) {
        int64_t left = (deadline_us - mono_us() + 999) / 1000;
        int open = 0;
        for (size_t i = 0; i < b->n; i++)
            open += b->pf[i].fd >= 0;
        if (open == 0 || left <= 0)
            break;
        if (poll(b->pf, b->n, left > INT_MAX ? INT_MAX : (int)left) < 0 && errno != EINTR)
            break;
        for (size_t i = 0; i < b->n; i++)
            if (b->pf[i].fd >= 0 && b->pf[i].revents)
                answered += probe_read(b, i);
    }
    /* The deadline passed, maybe long ago: this process may have been stopped
     * or starved since it last looked, and the answers may have been waiting
     * in the sockets all along.  A target is silent only if nothing is there
     * now either. */
    for (size_t i = 0; i < b->n; i++)
        if (b->pf[i].fd >= 0)
            answered += probe_read(b, i);
    for (size_t i = 0; i < b->n; i++)
        if (b->pf[i].fd >= 0)
            close(b->pf[i].fd);
    free(b->pf);
    free(b->buf);
    free(b->got);
    free(b);
    return answered;
}

int64_t ec_probe_now_us(void)
{
    return mono_us();
}

int ec_probe_many(ec_probe_target_t *t, size_t n, int timeout_ms)
{
    ec_probe_batch_t *b = ec_probe_begin(t, n);
    if (!b)
        return 0;
    return ec_probe_collect(b, ec_probe_now_us() + (int64_t)timeout_ms * 1000);
}
