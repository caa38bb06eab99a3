/* The agent's side of the liveness probe (probe.h): a thread answering
 * every connection on the probe port, once it sent its request (a nonce),
 * with "ecoord <node_id> <lease> <proof>\n" (probe_proof.h).  Its accept
 * queue is the system's largest (SOMAXCONN, capped by net.core.somaxconn):
 * a reported leader is probed by every follower at once, and a connection
 * left in a full queue goes unanswered (tests/bench/bench_ring: with a
 * queue of 64, a burst of 1,023 probes lost up to half).  Connections
 * whose request has not come yet wait in a table, up to EC_PROBE_PENDING_MAX
 * of them and EC_PROBE_REQUEST_MS each: a prober sends its request as soon
 * as it is connected, and gives up after its own deadline (250 ms by
 * default) anyway. */
#define _GNU_SOURCE
#include "probe_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "keys.h"
#include "probe.h"
#include "probe_proof.h"

#define EC_PROBE_PENDING_MAX 4096
#define EC_PROBE_REQUEST_MS 2000

typedef struct pending {
    int fd;
    int64_t since_ms;
    size_t got;
    char buf[EC_PROBE_REQUEST_LEN];
} pending_t;

struct ec_probe_server {
    int fd;
    int stop_pipe[2];
    pthread_t thread;
    char node_id[EC_NODE_ID_MAX + 1];
    uint8_t secret[EC_PROBE_SECRET_LEN];
    _Atomic int64_t lease;
    pending_t *p; /* the serving thread's own */
    size_t np, cap;
};

/* Read what connection i sent; answer it once its request is whole.
 * Returns whether it is done with (answered, or closed). */
static bool serve_one(ec_probe_server_t *s, pending_t *c)
{
    ssize_t r = recv(c->fd, c->buf + c->got, sizeof(c->buf) - c->got, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return false;
    if (r <= 0)
        return true; /* closed or reset before its request */
    c->got += (size_t)r;
    uint8_t nonce[EC_PROBE_NONCE_LEN];
    int rc = ec_probe_request_parse(c->buf, c->got, nonce);
    if (rc == 0)
        return false;
    if (rc > 0) {
        char line[EC_PROBE_ANSWER_MAX + 1];
        int n = ec_probe_answer_make(s->secret, nonce, s->node_id, atomic_load(&s->lease), line,
                                     sizeof(line));
        if (n > 0) {
            ssize_t w = send(c->fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w; /* a fresh socket's buffer takes a line */
        }
    }
    return true; /* answered, or not a request: nothing to say */
}

static void drop(ec_probe_server_t *s, size_t i)
{
    close(s->p[i].fd);
    s->p[i] = s->p[--s->np];
}

static void *serve(void *arg)
{
    ec_probe_server_t *s = arg;
    struct pollfd *pf = NULL;
    size_t pfcap = 0;
    for (;;) {
        if (pfcap < s->np + 2) {
            size_t nc = (s->np + 2) * 2;
            struct pollfd *np = realloc(pf, nc * sizeof(*pf));
            if (!np)
                break;
            pf = np;
            pfcap = nc;
        }
        pf[0] = (struct pollfd){s->fd, s->np < EC_PROBE_PENDING_MAX ? POLLIN : 0, 0};
        pf[1] = (struct pollfd){s->stop_pipe[0], POLLIN, 0};
        int64_t now = ec_mono_ms(), wake = -1;
        for (size_t i = 0; i < s->np; i++) {
            pf[2 + i] = (struct pollfd){s->p[i].fd, POLLIN, 0};
            int64_t left = s->p[i].since_ms + EC_PROBE_REQUEST_MS - now;
            if (wake < 0 || left < wake)
                wake = left < 0 ? 0 : left;
        }
        size_t nwatched = s->np;
        if (poll(pf, 2 + nwatched, (int)wake) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        /* the pending connections first (from the back: drop() moves the
         * last one into a freed slot) */
        now = ec_mono_ms();
        for (size_t i = nwatched; i-- > 0;) {
            if ((pf[2 + i].revents && serve_one(s, &s->p[i])) ||
                now - s->p[i].since_ms >= EC_PROBE_REQUEST_MS)
                drop(s, i);
        }
        if (!(pf[0].revents & POLLIN))
            continue;
        /* every connection waiting (a burst: each follower confirming a
         * report of the leader at once), then poll again */
        int c;
        while (s->np < EC_PROBE_PENDING_MAX &&
               (c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
            if (s->np == s->cap) {
                size_t nc = s->cap ? s->cap * 2 : 64;
                pending_t *np = realloc(s->p, nc * sizeof(*np));
                if (!np) {
                    close(c);
                    continue;
                }
                s->p = np;
                s->cap = nc;
            }
            s->p[s->np] = (pending_t){.fd = c, .since_ms = now};
            /* the request is often there already */
            if (serve_one(s, &s->p[s->np]))
                close(c);
            else
                s->np++;
        }
    }
    free(pf);
    return NULL;
}

ec_probe_server_t *ec_probe_serve(const char *host, uint16_t port, const char *node_id,
                                  const uint8_t *secret, int64_t lease, ec_error_t *err)
{
    if (port == 0)
        return NULL;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (ec_probe_sockaddr(host, port, &ss, &sl) < 0) {
        ec_errorf(err, EC_EINVAL, "probe: cannot resolve %s", host);
        return NULL;
    }
    if (strlen(node_id) > EC_NODE_ID_MAX) {
        ec_errorf(err, EC_EINVAL, "probe: node id too long");
        return NULL;
    }
    ec_probe_server_t *s = calloc(1, sizeof(*s));
    if (!s) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(s->node_id, sizeof(s->node_id), "%s", node_id);
    memcpy(s->secret, secret, EC_PROBE_SECRET_LEN);
    atomic_store(&s->lease, lease);
    s->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1, e = s->fd < 0 ? errno : 0; /* the first failure's errno, not a later call's */
    if (!e && setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
        e = errno;
    if (!e && (bind(s->fd, (struct sockaddr *)&ss, sl) < 0 || listen(s->fd, SOMAXCONN) < 0 ||
               pipe2(s->stop_pipe, O_CLOEXEC) < 0))
        e = errno;
    if (e) {
        ec_errorf(err, EC_EIO, "cannot listen for probes on %s:%u: %s (%s)", host, port,
                  strerror(e),
                  e == EMFILE || e == ENFILE
                      ? "raise the limit on open files: ulimit -n, or LimitNOFILE= in a systemd unit"
                      : "choose other ports with --start_port or --port_range");
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

void ec_probe_server_set_lease(ec_probe_server_t *s, int64_t lease)
{
    if (s)
        atomic_store(&s->lease, lease);
}

void ec_probe_server_stop(ec_probe_server_t *s)
{
    if (!s)
        return;
    ssize_t w = write(s->stop_pipe[1], "x", 1);
    (void)w;
    pthread_join(s->thread, NULL);
    for (size_t i = 0; i < s->np; i++)
        close(s->p[i].fd);
    free(s->p);
    close(s->fd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    explicit_bzero(s->secret, sizeof(s->secret));
    free(s);
}
