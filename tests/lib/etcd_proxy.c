/* ec_proxy: a fault-injecting loopback TCP proxy (contract in etcd_proxy.h).
 *
 * One thread runs a poll loop over the listener, a wake-up pipe and both
 * sockets of every connection.  Bytes read are queued as chunks with a due
 * time (now + delay) and written when due; a queue holds at most QUEUE_CAP
 * bytes before its source is no longer read, so memory stays bounded.  The
 * lock is held everywhere but in poll(), so the controls take effect
 * between two iterations; the pipe wakes the loop at once. */
#define _GNU_SOURCE
#include "etcd_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_CAP (1u << 20)  /* bytes queued per direction before reading stops */
#define READ_MAX 65536
#define MAX_CONNS 256         /* more are refused */
#define DROP_TIMEOUT_MS 5000  /* DROP_*: close this long after the request at most */
#define CONNECT_TIMEOUT_MS 2000
#define H2_PREFACE_LEN 24     /* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" */
#define H2_HEADERS 0x1

typedef struct chunk {
    struct chunk *next;
    size_t len, off;
    int64_t due;
    unsigned char data[];
} chunk_t;

/* One direction: its queue and an HTTP/2 frame-header scanner. */
typedef struct {
    chunk_t *head, *tail;
    size_t queued;
    size_t preface;  /* preface bytes still to skip (client->server only) */
    unsigned char hdr[9];
    size_t hdr_have;
    size_t body_left;
} dir_t;

typedef struct conn {
    struct conn *next;
    uint64_t id;
    int cfd, sfd;
    ec_proxy_mode_t mode;
    long delay_ms;
    long drop_timeout_ms;
    bool dropping;         /* discarding server->client */
    bool armed;            /* DROP_NEXT: waiting for the client's next request */
    bool oneshot_all;      /* armed by ec_proxy_set: firing disarms everyone */
    uint32_t target;       /* stream whose answer closes the connection; 0 = any */
    int64_t drop_since;    /* first request forwarded while dropping; 0 = none yet */
    bool dead;
    bool cut;              /* closed as a fault (counted in cuts) */
    dir_t up, down;
} conn_t;

struct ec_proxy {
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;   /* counters changed */
    int lfd, wake[2];
    struct sockaddr_storage target;
    socklen_t target_len;
    char endpoint[64];
    bool stop;
    /* defaults for connections accepted from now on */
    ec_proxy_mode_t mode;
    long arg, delay_ms;
    bool refuse;
    conn_t *conns;
    uint64_t next_id;
    ec_proxy_stats_t st;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wake(ec_proxy_t *p)
{
    char b = 1;
    ssize_t r = write(p->wake[1], &b, 1); /* a full pipe already wakes the loop */
    (void)r;
}

/* ---- modes ------------------------------------------------------------- */

static void conn_kill(ec_proxy_t *p, conn_t *c)
{
    if (!c->dead && !c->cut) {
        c->cut = true;
        p->st.cuts++;
    }
    c->dead = true;
}

static void apply(ec_proxy_t *p, conn_t *c, ec_proxy_mode_t mode, long arg, bool all)
{
    switch (mode) {
    case EC_PROXY_PASS:
        c->delay_ms = 0;
        c->dropping = c->armed = false;
        break;
    case EC_PROXY_DELAY:
        c->delay_ms = arg > 0 ? arg : 0;
        c->dropping = c->armed = false;
        break;
    case EC_PROXY_PAUSE:
        break;
    case EC_PROXY_DROP_REPLIES:
        c->dropping = true;
        c->armed = false;
        c->target = 0;
        c->drop_since = 0;
        c->drop_timeout_ms = arg > 0 ? arg : DROP_TIMEOUT_MS;
        break;
    case EC_PROXY_DROP_NEXT:
        c->dropping = false;
        c->armed = true;
        c->oneshot_all = all;
        c->drop_since = 0;
        c->drop_timeout_ms = arg > 0 ? arg : DROP_TIMEOUT_MS;
        break;
    case EC_PROXY_CUT:
        conn_kill(p, c);
        break;
    }
    c->mode = mode;
}

/* A HEADERS frame on stream `stream` went by in one direction. */
static void on_headers(ec_proxy_t *p, conn_t *c, bool up, uint32_t stream)
{
    if (stream == 0)
        return;
    if (up) {
        p->st.requests++;
        if (c->armed) {
            /* The one-shot fires on this request: it is forwarded, its
             * answer will be discarded with the connection. */
            c->armed = false;
            c->dropping = true;
            c->target = stream;
            c->drop_since = now_ms();
            if (c->oneshot_all) {
                p->mode = EC_PROXY_PASS;
                for (conn_t *o = p->conns; o; o = o->next)
                    if (o != c && o->armed)
                        apply(p, o, EC_PROXY_PASS, 0, false);
            }
        } else if (c->dropping && !c->drop_since) {
            c->drop_since = now_ms();
        }
    } else {
        p->st.answers++;
        if (c->dropping && c->drop_since && (!c->target || c->target == stream))
            conn_kill(p, c); /* answered: the client must never see it */
    }
}

/* Scan the bytes for HTTP/2 frame headers (length 24, type 8, flags 8,
 * reserved bit + stream id 31). */
static void scan(ec_proxy_t *p, conn_t *c, bool up, const unsigned char *b, size_t n)
{
    dir_t *d = up ? &c->up : &c->down;
    size_t i = 0;
    while (i < n) {
        if (d->preface || d->body_left) {
            size_t *left = d->preface ? &d->preface : &d->body_left;
            size_t k = *left < n - i ? *left : n - i;
            *left -= k;
            i += k;
            continue;
        }
        d->hdr[d->hdr_have++] = b[i++];
        if (d->hdr_have < 9)
            continue;
        d->hdr_have = 0;
        d->body_left = (size_t)d->hdr[0] << 16 | (size_t)d->hdr[1] << 8 | d->hdr[2];
        uint32_t stream = ((uint32_t)d->hdr[5] & 0x7f) << 24 | (uint32_t)d->hdr[6] << 16 |
                          (uint32_t)d->hdr[7] << 8 | d->hdr[8];
        if (d->hdr[3] == H2_HEADERS)
            on_headers(p, c, up, stream);
    }
}

/* ---- queues -------------------------------------------------------------- */

static void enqueue(dir_t *d, const unsigned char *b, size_t n, int64_t due)
{
    chunk_t *ch = malloc(sizeof(*ch) + n);
    if (!ch)
        return; /* out of memory in a test: the bytes are lost, the peer will notice */
    ch->next = NULL;
    ch->len = n;
    ch->off = 0;
    ch->due = due;
    memcpy(ch->data, b, n);
    if (d->tail)
        d->tail->next = ch;
    else
        d->head = ch;
    d->tail = ch;
    d->queued += n;
}

static void dir_free(dir_t *d)
{
    while (d->head) {
        chunk_t *n = d->head->next;
        free(d->head);
        d->head = n;
    }
    d->tail = NULL;
    d->queued = 0;
}

/* Write what is due; false when the socket failed. */
static bool flush(int fd, dir_t *d, int64_t now, uint64_t *counter)
{
    while (d->head && d->head->due <= now) {
        chunk_t *ch = d->head;
        ssize_t w = send(fd, ch->data + ch->off, ch->len - ch->off, MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        ch->off += (size_t)w;
        d->queued -= (size_t)w;
        *counter += (uint64_t)w;
        if (ch->off < ch->len)
            return true;
        d->head = ch->next;
        if (!d->head)
            d->tail = NULL;
        free(ch);
    }
    return true;
}

/* Read from fd into the other side's queue (up: client -> server). */
static void pump_in(ec_proxy_t *p, conn_t *c, bool up, int64_t now)
{
    unsigned char buf[READ_MAX];
    ssize_t r = recv(up ? c->cfd : c->sfd, buf, sizeof(buf), 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        c->dead = true;
        return;
    }
    if (r < 0)
        return;
    /* Replies are dropped from the first request forwarded on: what the
     * server sends before (its SETTINGS, on a new connection) passes, or
     * the client would never get a request out. */
    bool dropping_before = c->dropping && c->drop_since;
    scan(p, c, up, buf, (size_t)r);
    if (!up && ((c->dropping && c->drop_since) || dropping_before)) {
        p->st.dropped_down += (uint64_t)r;
        return;
    }
    enqueue(up ? &c->up : &c->down, buf, (size_t)r, now + c->delay_ms);
}

/* ---- connections --------------------------------------------------------- */

static int connect_target(ec_proxy_t *p)
{
    int fd = socket(p->target.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&p->target, p->target_len) < 0) {
        if (errno != EINPROGRESS)
            goto error;
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t l = sizeof(err);
        if (poll(&pf, 1, CONNECT_TIMEOUT_MS) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err)
            goto error;
    }
    return fd;
error:
    close(fd);
    return -1;
}

static void accept_all(ec_proxy_t *p)
{
    for (;;) {
        int cfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0)
            return;
        size_t n = 0;
        for (conn_t *c = p->conns; c; c = c->next)
            n++;
        int sfd = -1;
        if (p->refuse || n >= MAX_CONNS || (sfd = connect_target(p)) < 0) {
            close(cfd);
            p->st.refused++;
            continue;
        }
        conn_t *c = calloc(1, sizeof(*c));
        if (!c) {
            close(cfd);
            close(sfd);
            p->st.refused++;
            continue;
        }
        int one = 1;
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->id = ++p->next_id;
        c->cfd = cfd;
        c->sfd = sfd;
        c->up.preface = H2_PREFACE_LEN;
        c->delay_ms = p->delay_ms;
        apply(p, c, p->mode, p->arg, true);
        /* append: ec_proxy_conns lists oldest first */
        conn_t **tail = &p->conns;
        while (*tail)
            tail = &(*tail)->next;
        *tail = c;
        p->st.accepted++;
        p->st.open++;
    }
}

static void reap(ec_proxy_t *p)
{
    for (conn_t **pc = &p->conns; *pc;) {
        conn_t *c = *pc;
        if (!c->dead) {
            pc = &c->next;
            continue;
        }
        if (!c->cut && c->mode != EC_PROXY_PAUSE) {
            /* One side closed: hand over what is due to the other, best effort. */
            int64_t now = now_ms();
            flush(c->sfd, &c->up, now, &p->st.bytes_up);
            flush(c->cfd, &c->down, now, &p->st.bytes_down);
        }
        close(c->cfd);
        close(c->sfd);
        dir_free(&c->up);
        dir_free(&c->down);
        *pc = c->next;
        free(c);
        p->st.open--;
    }
}

static void *loop(void *arg)
{
    ec_proxy_t *p = arg;
    struct pollfd pf[2 + 2 * MAX_CONNS];
    conn_t *who[2 + 2 * MAX_CONNS];
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        int64_t now = now_ms();
        int n = 0, timeout = 100;
        pf[n] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        who[n++] = NULL;
        pf[n] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
        who[n++] = NULL;
        for (conn_t *c = p->conns; c && n + 2 <= (int)(sizeof(pf) / sizeof(pf[0])); c = c->next) {
            bool run = c->mode != EC_PROXY_PAUSE;
            short ce = 0, se = 0;
            if (run) {
                if (c->up.queued < QUEUE_CAP)
                    ce |= POLLIN;
                if (c->down.queued < QUEUE_CAP)
                    se |= POLLIN;
                if (c->down.head && c->down.head->due <= now)
                    ce |= POLLOUT;
                if (c->up.head && c->up.head->due <= now)
                    se |= POLLOUT;
                int64_t due = INT64_MAX;
                if (c->up.head && c->up.head->due > now)
                    due = c->up.head->due;
                if (c->down.head && c->down.head->due > now && c->down.head->due < due)
                    due = c->down.head->due;
                if (c->dropping && c->drop_since && c->drop_since + c->drop_timeout_ms < due)
                    due = c->drop_since + c->drop_timeout_ms;
                if (due != INT64_MAX && due - now < timeout)
                    timeout = due - now < 1 ? 1 : (int)(due - now);
            }
            pf[n] = (struct pollfd){.fd = c->cfd, .events = ce};
            who[n++] = c;
            pf[n] = (struct pollfd){.fd = c->sfd, .events = se};
            who[n++] = c;
        }
        pthread_mutex_unlock(&p->lock);
        int r = poll(pf, (nfds_t)n, timeout);
        pthread_mutex_lock(&p->lock);
        if (p->stop)
            break;
        if (r < 0 && errno != EINTR)
            break; /* cannot happen with valid fds; the stop path cleans up */
        now = now_ms();
        if (pf[0].revents & POLLIN) {
            char b[64];
            while (read(p->wake[0], b, sizeof(b)) > 0)
                ;
        }
        if (pf[1].revents & POLLIN)
            accept_all(p);
        /* Connections in who[] are still in the list: only this thread frees. */
        for (int i = 2; i < n; i++) {
            conn_t *c = who[i];
            bool up = (i % 2) == 0; /* even: the client socket */
            if (c->dead || c->mode == EC_PROXY_PAUSE) {
                if (pf[i].revents & (POLLHUP | POLLERR))
                    c->dead = true;
                continue;
            }
            if (pf[i].revents & (POLLIN | POLLHUP | POLLERR))
                pump_in(p, c, up, now);
        }
        for (conn_t *c = p->conns; c; c = c->next) {
            if (c->dead || c->mode == EC_PROXY_PAUSE)
                continue;
            if (!flush(c->sfd, &c->up, now, &p->st.bytes_up) ||
                !flush(c->cfd, &c->down, now, &p->st.bytes_down))
                c->dead = true;
            if (c->dropping && c->drop_since && now - c->drop_since >= c->drop_timeout_ms)
                conn_kill(p, c);
        }
        reap(p);
        pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* ---- public ---------------------------------------------------------------- */

static int parse_target(ec_proxy_t *p, const char *target)
{
    if (!strncmp(target, "http://", 7))
        target += 7;
    char host[256];
    snprintf(host, sizeof(host), "%s", target);
    char *colon = strrchr(host, ':');
    if (!colon || !colon[1]) {
        errno = EINVAL;
        return -1;
    }
    *colon = '\0';
    const char *port = colon + 1;
    char *h = host;
    if (h[0] == '[') { /* [::1]:2379 */
        h++;
        h[strcspn(h, "]")] = '\0';
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(h, port, &hints, &ai) != 0 || !ai) {
        errno = EINVAL;
        return -1;
    }
    memcpy(&p->target, ai->ai_addr, ai->ai_addrlen);
    p->target_len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

ec_proxy_t *ec_proxy_start(const char *target)
{
    ec_proxy_t *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->lfd = p->wake[0] = p->wake[1] = -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (!target || parse_target(p, target) < 0)
        goto error;
    if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0)
        goto error;
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (p->lfd < 0)
        goto error;
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    if (bind(p->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(p->lfd, 64) < 0 ||
        getsockname(p->lfd, (struct sockaddr *)&a, &al) < 0)
        goto error;
    snprintf(p->endpoint, sizeof(p->endpoint), "127.0.0.1:%d", ntohs(a.sin_port));
    if ((errno = pthread_create(&p->thread, NULL, loop, p)) != 0)
        goto error;
    p->started = true;
    return p;
error:
    ec_proxy_stop(p);
    return NULL;
}

const char *ec_proxy_endpoint(const ec_proxy_t *p)
{
    return p->endpoint;
}

void ec_proxy_set(ec_proxy_t *p, ec_proxy_mode_t mode, long arg)
{
    pthread_mutex_lock(&p->lock);
    for (conn_t *c = p->conns; c; c = c->next)
        apply(p, c, mode, arg, true);
    p->refuse = mode == EC_PROXY_CUT && arg != 0;
    /* New connections: a cut one is gone, the next one passes (or is refused). */
    p->mode = mode == EC_PROXY_CUT ? EC_PROXY_PASS : mode;
    p->arg = arg;
    if (mode == EC_PROXY_PASS || mode == EC_PROXY_DELAY)
        p->delay_ms = mode == EC_PROXY_DELAY && arg > 0 ? arg : 0;
    pthread_mutex_unlock(&p->lock);
    wake(p);
}

int ec_proxy_set_conn(ec_proxy_t *p, uint64_t id, ec_proxy_mode_t mode, long arg)
{
    int rc = -1;
    pthread_mutex_lock(&p->lock);
    for (conn_t *c = p->conns; c; c = c->next)
        if (c->id == id && !c->dead) {
            apply(p, c, mode, arg, false);
            rc = 0;
        }
    pthread_mutex_unlock(&p->lock);
    wake(p);
    if (rc < 0)
        errno = ENOENT;
    return rc;
}

size_t ec_proxy_conns(ec_proxy_t *p, uint64_t *ids, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&p->lock);
    for (conn_t *c = p->conns; c && n < max; c = c->next)
        if (!c->dead)
            ids[n++] = c->id;
    pthread_mutex_unlock(&p->lock);
    return n;
}

void ec_proxy_stats(ec_proxy_t *p, ec_proxy_stats_t *out)
{
    pthread_mutex_lock(&p->lock);
    *out = p->st;
    pthread_mutex_unlock(&p->lock);
}

static bool wait_counter(ec_proxy_t *p, const uint64_t *counter, uint64_t n, long timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->lock);
    int rc = 0;
    while (*counter < n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&p->cond, &p->lock, &dl);
    bool ok = *counter >= n;
    pthread_mutex_unlock(&p->lock);
    return ok;
}

bool ec_proxy_wait_requests(ec_proxy_t *p, uint64_t n, long timeout_ms)
{
    return wait_counter(p, &p->st.requests, n, timeout_ms);
}

bool ec_proxy_wait_accepted(ec_proxy_t *p, uint64_t n, long timeout_ms)
{
    return wait_counter(p, &p->st.accepted, n, timeout_ms);
}

void ec_proxy_stop(ec_proxy_t *p)
{
    if (!p)
        return;
    int saved = errno;
    if (p->started) {
        pthread_mutex_lock(&p->lock);
        p->stop = true;
        pthread_mutex_unlock(&p->lock);
        wake(p);
        pthread_join(p->thread, NULL);
    }
    for (conn_t *c = p->conns; c; c = c->next)
        c->dead = c->cut = true; /* no flush on the way out */
    reap(p);
    if (p->lfd >= 0)
        close(p->lfd);
    if (p->wake[0] >= 0) {
        close(p->wake[0]);
        close(p->wake[1]);
    }
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
    errno = saved;
}
