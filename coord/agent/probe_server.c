/* The agent's side of the liveness probe (probe.h): a thread answering every
 * connection on the probe port with "ecoord <node_id>\n".  Its accept queue
 * is the system's largest (SOMAXCONN, capped by net.core.somaxconn): a
 * reported leader is probed by every follower at once, and a connection
 * left in a full queue goes unanswered (tests/bench/bench_ring: with a
 * queue of 64, a burst of 1,023 probes lost up to half). */
#define _GNU_SOURCE
#include "probe_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "probe.h"

struct ec_probe_server {
    int fd;
    int stop_pipe[2];
    pthread_t thread;
    char line[300];
};

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
        /* every connection waiting (a burst: each follower confirming a
         * report of the leader at once), then poll again */
        int c;
        while ((c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
            ssize_t w = send(c, s->line, strlen(s->line), MSG_NOSIGNAL);
            (void)w;
            close(c);
        }
    }
    return NULL;
}

ec_probe_server_t *ec_probe_serve(const char *host, uint16_t port, const char *node_id,
                                  ec_error_t *err)
{
    if (port == 0)
        return NULL;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (ec_probe_sockaddr(host, port, &ss, &sl) < 0) {
        ec_errorf(err, EC_EINVAL, "probe: cannot resolve %s", host);
        return NULL;
    }
    ec_probe_server_t *s = calloc(1, sizeof(*s));
    if (!s) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(s->line, sizeof(s->line), "ecoord %s\n", node_id);
    s->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&ss, sl) < 0 || listen(s->fd, SOMAXCONN) < 0 ||
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
