/* The ports check's I/O (see ports.h): the listener thread that answers
 * hellos on this node's reserved ports, and the probes of every node's. */
#define _GNU_SOURCE
#include "ports.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "gather.h"
#include "keys.h"

#define HELLO "ECCHK1"
#define HELLO_MS 2000  /* a peer's hello, on the listening side */
#define MAX_CONNS 512  /* probes in flight at once */
#define POLL_MS 200    /* how often the probes look at the abort flag */

/* ------------------------------------------------------------------------ */
/* the listener: answers every connection to a reserved port once the caller
 * sent its own hello line                                                   */

struct ec_check_listener {
    const int *fds;
    int nfds;
    char node_id[EC_NODE_ID_MAX + 1];
    char nonce[EC_CHECK_NONCE_LEN + 1];
    int pipe[2]; /* wakes the thread to stop */
    pthread_t thread;
};

#define MAX_ACCEPTED 256

typedef struct lconn {
    int fd;
    int answered;
    int64_t deadline;
    size_t len;
    char buf[256];
} lconn_t;

static void lconn_answer(const ec_check_listener_t *x, lconn_t *lc)
{
    char reply[EC_NODE_ID_MAX + 96];
    int n = snprintf(reply, sizeof(reply), HELLO " %s %s %" PRId64 "\n", x->node_id, x->nonce,
                     ec_wall_us());
    ssize_t w = send(lc->fd, reply, (size_t)n, MSG_NOSIGNAL);
    (void)w; /* a prober that left early does not care */
}

static void *listener_main(void *arg)
{
    ec_check_listener_t *x = arg;
    lconn_t *conns = calloc(MAX_ACCEPTED, sizeof(*conns));
    struct pollfd *pf = calloc((size_t)(1 + x->nfds + MAX_ACCEPTED), sizeof(*pf));
    int nc = 0;
    while (conns && pf) {
        int np = 0;
        pf[np++] = (struct pollfd){x->pipe[0], POLLIN, 0};
        for (int i = 0; i < x->nfds; i++)
            pf[np++] = (struct pollfd){x->fds[i], POLLIN, 0};
        for (int i = 0; i < nc; i++)
            pf[np++] = (struct pollfd){conns[i].fd, POLLIN, 0};
        if (poll(pf, (nfds_t)np, 100) < 0 && errno != EINTR)
            break;
        if (pf[0].revents)
            break;
        for (int i = 0; i < x->nfds; i++) {
            if (!(pf[1 + i].revents & POLLIN))
                continue;
            int fd;
            while ((fd = accept4(x->fds[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                if (nc == MAX_ACCEPTED) {
                    close(fd);
                    continue;
                }
                conns[nc++] = (lconn_t){.fd = fd, .deadline = ec_mono_ms() + HELLO_MS};
            }
        }
        int64_t now = ec_mono_ms();
        for (int i = 0; i < nc; i++) {
            lconn_t *lc = &conns[i];
            bool done = now > lc->deadline;
            short rev = 0;
            for (int k = 1 + x->nfds; k < np; k++)
                if (pf[k].fd == lc->fd)
                    rev = pf[k].revents;
            if (!done && rev) {
                ssize_t r = recv(lc->fd, lc->buf + lc->len, sizeof(lc->buf) - 1 - lc->len, 0);
                if (r > 0 && lc->answered) {
                    lc->len = 0; /* after the answer: only waiting for the close */
                } else if (r > 0) {
                    lc->len += (size_t)r;
                    lc->buf[lc->len] = '\0';
                    if (strchr(lc->buf, '\n') && !strncmp(lc->buf, HELLO " ", sizeof(HELLO))) {
                        /* Answer, then let the prober close first: the
                         * TIME_WAIT stays on its side, and training can bind
                         * this port right after the check. */
                        lconn_answer(x, lc);
                        lc->answered = 1;
                        lc->len = 0;
                    } else if (strchr(lc->buf, '\n') || lc->len == sizeof(lc->buf) - 1) {
                        done = true;
                    }
                } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                    done = true;
                }
            }
            if (done) {
                close(lc->fd);
                conns[i--] = conns[--nc];
            }
        }
    }
    for (int i = 0; conns && i < nc; i++)
        close(conns[i].fd);
    free(conns);
    free(pf);
    return NULL;
}

int ec_check_listener_start(const int *fds, int nfds, const char *node_id, const char *nonce,
                            ec_check_listener_t **out, ec_error_t *err)
{
    *out = NULL;
    ec_check_listener_t *l = calloc(1, sizeof(*l));
    if (!l)
        return ec_errorf(err, EC_ENOMEM, "out of memory starting the port listener");
    l->fds = fds;
    l->nfds = nfds;
    snprintf(l->node_id, sizeof(l->node_id), "%s", node_id);
    snprintf(l->nonce, sizeof(l->nonce), "%s", nonce);
    if (pipe2(l->pipe, O_CLOEXEC) < 0) {
        int rc = ec_errorf(err, EC_ESYS, "pipe: %s", strerror(errno));
        free(l);
        return rc;
    }
    int e = pthread_create(&l->thread, NULL, listener_main, l);
    if (e) {
        close(l->pipe[0]);
        close(l->pipe[1]);
        free(l);
        return ec_errorf(err, EC_ESYS, "cannot start the listener thread: %s", strerror(e));
    }
    *out = l;
    return 0;
}

void ec_check_listener_stop(ec_check_listener_t *l)
{
    if (!l)
        return;
    int saved = errno;
    ssize_t w = write(l->pipe[1], "x", 1);
    (void)w;
    pthread_join(l->thread, NULL);
    close(l->pipe[0]);
    close(l->pipe[1]);
    free(l);
    errno = saved;
}

/* ------------------------------------------------------------------------ */
/* probes: a real TCP connection to every published port of every node, all
 * in flight together under one deadline                                     */

typedef struct pconn {
    int fd;
    int state; /* 0 connecting, 1 waiting for the hello, 2 done */
    int64_t t0_us, t0_wall_us;
    size_t len;
    char buf[256];
    ec_check_probe_t res;
} pconn_t;

static void probe_finish(pconn_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void probe_finish(pconn_t *p, const char *fmt, ...)
{
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->res.why, sizeof(p->res.why), fmt, ap);
        va_end(ap);
    }
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    p->state = 2;
}

static void probe_reply(pconn_t *p, const ec_check_target_t *t)
{
    int64_t t1 = ec_mono_us();
    char id[EC_NODE_ID_MAX + 1], nonce[64];
    long long wall;
    p->buf[strcspn(p->buf, "\n")] = '\0';
    if (sscanf(p->buf, HELLO " %253s %63s %lld", id, nonce, &wall) != 3) {
        probe_finish(p, "another program answered on this port (not ecoord check)");
        return;
    }
    if (strcmp(nonce, t->nonce)) {
        probe_finish(p, "answered by %s, not by %s (two nodes publish the same address?)",
                     strcmp(id, t->node_id) ? id : "another process with the same node id",
                     t->node_id);
        return;
    }
    p->res.ok = 1;
    p->res.rtt_us = t1 - p->t0_us;
    p->res.offset_us = (int64_t)wall - (p->t0_wall_us + p->res.rtt_us / 2);
    probe_finish(p, NULL);
}

static void probe_batch(const char *hello, int hl, pconn_t *pc, const int *ti,
                        const ec_check_target_t *t, int n, const volatile sig_atomic_t *abort)
{
    if (n <= 0)
        return;
    for (int i = 0; i < n; i++) {
        pconn_t *p = &pc[i];
        struct sockaddr_storage ss;
        socklen_t sl = 0;
        char why[160];
        p->fd = -1;
        if (ec_check_resolve(t[ti[i]].host, p->res.port, SOCK_STREAM, &ss, &sl, why, sizeof(why)) <
            0) {
            probe_finish(p, "%s", why);
            continue;
        }
        p->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (p->fd < 0) {
            probe_finish(p, "socket: %s", strerror(errno));
            continue;
        }
        if (connect(p->fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS)
            probe_finish(p, "%s", strerror(errno));
    }
    int64_t deadline = ec_mono_ms() + EC_CHECK_PROBE_MS;
    struct pollfd *pf = calloc((size_t)n, sizeof(*pf));
    int *idx = calloc((size_t)n, sizeof(int));
    while (pf && idx && !*abort) {
        int np = 0;
        for (int i = 0; i < n; i++)
            if (pc[i].state < 2) {
                pf[np] = (struct pollfd){pc[i].fd, pc[i].state == 0 ? POLLOUT : POLLIN, 0};
                idx[np++] = i;
            }
        int64_t left = deadline - ec_mono_ms();
        if (!np || left <= 0)
            break;
        if (poll(pf, (nfds_t)np, (int)(left < POLL_MS ? left : POLL_MS)) < 0 && errno != EINTR)
            break;
        for (int k = 0; k < np; k++) {
            pconn_t *p = &pc[idx[k]];
            if (!pf[k].revents)
                continue;
            if (p->state == 0) {
                int e = 0;
                socklen_t el = sizeof(e);
                getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &el);
                if (e) {
                    probe_finish(p, "%s", strerror(e));
                    continue;
                }
                p->t0_us = ec_mono_us();
                p->t0_wall_us = ec_wall_us();
                if (send(p->fd, hello, (size_t)hl, MSG_NOSIGNAL) != hl) {
                    probe_finish(p, "connected, then the connection broke: %s", strerror(errno));
                    continue;
                }
                p->state = 1;
            } else {
                ssize_t r = recv(p->fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len, 0);
                if (r > 0) {
                    p->len += (size_t)r;
                    p->buf[p->len] = '\0';
                    if (strchr(p->buf, '\n') || p->len == sizeof(p->buf) - 1)
                        probe_reply(p, &t[ti[idx[k]]]);
                } else if (r == 0) {
                    probe_finish(p, "connected, but closed without answering (another program "
                                    "holds this port?)");
                } else if (errno != EAGAIN && errno != EINTR) {
                    probe_finish(p, "connected, then %s", strerror(errno));
                }
            }
        }
    }
    for (int i = 0; i < n; i++) {
        if (pc[i].state == 0)
            probe_finish(&pc[i], "no answer within %d ms (a firewall dropping packets, or no "
                                 "route to it)", EC_CHECK_PROBE_MS);
        else if (pc[i].state == 1)
            probe_finish(&pc[i], "connected, but no hello within %d ms (another program holds "
                                 "this port?)", EC_CHECK_PROBE_MS);
    }
    free(pf);
    free(idx);
}

void ec_check_probe_all(const char *job_id, ec_check_facts_t *self, const ec_check_target_t *t,
                        int nt, const volatile sig_atomic_t *abort)
{
    char hello[EC_JOB_ID_MAX + EC_NODE_ID_MAX + 64];
    int hl = snprintf(hello, sizeof(hello), HELLO " %s %s %s\n", job_id, self->node_id,
                      self->nonce);
    int total = 0;
    for (int i = 0; i < nt; i++)
        total += t[i].nports;
    pconn_t *pc = calloc((size_t)(total ? total : 1), sizeof(*pc));
    int *ti = calloc((size_t)(total ? total : 1), sizeof(int));
    if (!pc || !ti) {
        free(pc);
        free(ti);
        return;
    }
    int k = 0;
    for (int i = 0; i < nt; i++)
        for (int p = 0; p < t[i].nports; p++, k++) {
            ec_check_probe_t *r = &pc[k].res;
            snprintf(r->peer, sizeof(r->peer), "%s", t[i].node_id);
            snprintf(r->nonce, sizeof(r->nonce), "%s", t[i].nonce);
            snprintf(r->addr, sizeof(r->addr), "%s", t[i].host);
            r->port = t[i].ports[p];
            ti[k] = i;
        }
    for (int off = 0; off < total && !*abort; off += MAX_CONNS) {
        int n = total - off < MAX_CONNS ? total - off : MAX_CONNS;
        probe_batch(hello, hl, pc + off, ti + off, t, n, abort);
    }
    for (int i = 0; i < total; i++)
        ec_check_facts_add_probe(self, &pc[i].res);
    free(pc);
    free(ti);
}

