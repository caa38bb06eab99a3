/* Bounded console output queue: a ring buffer filled by any thread, emptied
 * by one writer thread that is the only one ever blocked by a slow reader.
 *
 * Dropping has hysteresis: once something did not fit, everything is dropped
 * until the queue has drained completely; then the "dropped" line goes into
 * the queue at the very point where output went missing, and queuing
 * resumes after it.  The fd is never made non-blocking: stdout is often
 * shared with the shell and other processes, which O_NONBLOCK would break. */
#define _GNU_SOURCE
#include "outq.h"
#include "clock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { CHUNK = 64 * 1024 };

struct ec_outq {
    int fd;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t more;    /* data queued, or stop */
    pthread_cond_t drained; /* nothing queued, nothing being written */
    char *ring;
    size_t cap, head, len;
    bool busy;     /* the writer holds a chunk in flight */
    bool dropping; /* dropping until the queue drains */
    bool cut;      /* the drop began inside a line */
    bool last_nl;  /* the last byte queued ended a line */
    bool broken;   /* the fd failed for good (EPIPE, EBADF...) */
    bool stop;
    uint64_t drop_lines, drop_bytes, dropped_total;
    char *note;
};

static void ring_put(ec_outq_t *q, const char *p, size_t n)
{
    size_t tail = (q->head + q->len) % q->cap;
    size_t first = q->cap - tail < n ? q->cap - tail : n;
    memcpy(q->ring + tail, p, first);
    memcpy(q->ring, p + first, n - first);
    q->len += n;
    q->last_nl = p[n - 1] == '\n';
}

static uint64_t count_lines(const char *p, size_t n)
{
    uint64_t k = 0;
    for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))); p++)
        k++;
    return k;
}

/* Write all of buf, waiting (blocked, cancellable) for the reader as long as
 * it takes.  false when the fd is broken. */
static bool write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* someone else made the fd non-blocking: wait for room */
            struct pollfd pf = {fd, POLLOUT, 0};
            poll(&pf, 1, 1000);
        } else {
            return false;
        }
    }
    return true;
}

static void *writer(void *arg)
{
    ec_outq_t *q = arg;
    char *chunk = malloc(CHUNK);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_cleanup_push(free, chunk);
    pthread_mutex_lock(&q->lock);
    while (chunk) {
        while (!q->len && !q->stop)
            pthread_cond_wait(&q->more, &q->lock);
        if (q->stop)
            break;
        size_t n = q->len;
        if (n > q->cap - q->head)
            n = q->cap - q->head;
        if (n > CHUNK)
            n = CHUNK;
        memcpy(chunk, q->ring + q->head, n);
        q->busy = true;
        pthread_mutex_unlock(&q->lock);
        /* the only place this thread blocks on the reader, and the only
         * place ec_outq_destroy may cancel it (no lock held) */
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
        bool ok = write_all(q->fd, chunk, n);
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
        pthread_mutex_lock(&q->lock);
        q->busy = false;
        q->head = (q->head + n) % q->cap;
        q->len -= n;
        if (!ok) {
            q->broken = true;
            q->len = 0;
        }
        if (!q->len && q->dropping && !q->broken) {
            char line[512];
            int k = snprintf(line, sizeof(line),
                             "%s[ecoord] %llu lines of output dropped here (%llu bytes): the "
                             "console was not read for a while%s%s\n",
                             q->cut ? "\n" : "", (unsigned long long)q->drop_lines,
                             (unsigned long long)q->drop_bytes, q->note ? "; " : "",
                             q->note ? q->note : "");
            if (k > 0 && (size_t)k >= sizeof(line))
                k = (int)sizeof(line) - 1;
            q->head = 0;
            if (k > 0)
                ring_put(q, line, (size_t)k);
            q->dropping = false;
            q->drop_lines = q->drop_bytes = 0;
        }
        if (!q->len)
            pthread_cond_broadcast(&q->drained);
    }
    q->busy = false;
    pthread_cond_broadcast(&q->drained);
    pthread_mutex_unlock(&q->lock);
    pthread_cleanup_pop(1);
    return NULL;
}

ec_outq_t *ec_outq_create(int fd, size_t capacity, const char *note)
{
    ec_outq_t *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->fd = fd;
    q->cap = capacity < 4096 ? 4096 : capacity;
    q->last_nl = true;
    q->ring = malloc(q->cap);
    q->note = note ? strdup(note) : NULL;
    if (!q->ring || (note && !q->note)) {
        free(q->ring);
        free(q->note);
        free(q);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->more, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->drained, &ca);
    pthread_condattr_destroy(&ca);
    /* the writer takes no signals: they belong to the host's main loop */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&q->thread, NULL, writer, q);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&q->more);
        pthread_cond_destroy(&q->drained);
        pthread_mutex_destroy(&q->lock);
        free(q->ring);
        free(q->note);
        free(q);
        errno = rc;
        return NULL;
    }
    return q;
}

void ec_outq_write(ec_outq_t *q, const void *buf, size_t len)
{
    if (!len)
        return;
    pthread_mutex_lock(&q->lock);
    if (q->broken || q->stop) {
        /* nobody will ever read it: nothing to count */
    } else if (!q->dropping && q->cap - q->len >= len) {
        ring_put(q, buf, len);
        pthread_cond_signal(&q->more);
    } else {
        if (!q->dropping) {
            q->dropping = true;
            q->cut = !q->last_nl;
        }
        uint64_t n = count_lines(buf, len);
        q->drop_lines += n;
        q->dropped_total += n;
        q->drop_bytes += len;
    }
    pthread_mutex_unlock(&q->lock);
}

void ec_outq_write_line(ec_outq_t *q, const void *buf, size_t len)
{
    if (!len)
        return;
    pthread_mutex_lock(&q->lock);
    bool glue = !q->last_nl && !q->dropping && !q->broken && !q->stop;
    if (glue && q->cap - q->len >= len + 1) {
        /* a line of the host's after output that did not end its own
         * ("checkpoint done" then "LAUNCH INFO ..."): on a line of its own */
        ring_put(q, "\n", 1);
    }
    pthread_mutex_unlock(&q->lock);
    ec_outq_write(q, buf, len);
}

bool ec_outq_flush(ec_outq_t *q, int64_t timeout_ms)
{
    if (!q)
        return true;
    struct timespec dl = ec_deadline_ts(timeout_ms);
    pthread_mutex_lock(&q->lock);
    int rc = 0;
    while ((q->len || q->busy) && !q->broken && !q->stop && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&q->drained, &q->lock, &dl);
    bool done = !q->len && !q->busy;
    pthread_mutex_unlock(&q->lock);
    return done;
}

uint64_t ec_outq_dropped(ec_outq_t *q)
{
    pthread_mutex_lock(&q->lock);
    uint64_t n = q->dropped_total;
    pthread_mutex_unlock(&q->lock);
    return n;
}

void ec_outq_destroy(ec_outq_t *q)
{
    if (!q)
        return;
    int saved = errno;
    pthread_mutex_lock(&q->lock);
    q->stop = true;
    pthread_cond_signal(&q->more);
    pthread_mutex_unlock(&q->lock);
    /* Acted on only inside the writer's write(): a reader that never comes
     * back must not keep the host from exiting. */
    pthread_cancel(q->thread);
    pthread_join(q->thread, NULL);
    pthread_cond_destroy(&q->more);
    pthread_cond_destroy(&q->drained);
    pthread_mutex_destroy(&q->lock);
    free(q->ring);
    free(q->note);
    free(q);
    errno = saved;
}
