/* The agent's view of its ranks' progress: see progress.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"
#include "procstat.h"
#include "clock.h"
#include "progress_file.h"
#include "log.h"

typedef struct rank {
    char path[4200];
    char *log_path;
    uint64_t out_bytes; /* its output through the agent (no log_path) */
    off_t log_size;
    int64_t start_ms, last_ms; /* monotonic: started, last progress seen */
    bool running, reporting, paused, in_coll, stopped;
    int64_t overdue_told; /* the pause (its start, ns) said to be past max_pause */
    uint64_t step;
    int64_t win_t[EC_PROGRESS_WINDOW];
    uint64_t win_s[EC_PROGRESS_WINDOW];
    int nwin;
} rank_t;

struct ec_progress {
    int nproc;
    int64_t silence_ms;
    int64_t max_pause_ms; /* 0: a pause excuses silence for ever */
    int64_t now_ms;
    rank_t *r;
};

void ec_progress_set_max_pause(ec_progress_t *p, int64_t ms)
{
    if (p)
        p->max_pause_ms = ms > 0 ? ms : 0;
}

ec_progress_t *ec_progress_create(int nproc, const char *log_dir, int64_t silence_ms,
                                  ec_error_t *err)
{
    ec_progress_t *p = calloc(1, sizeof(*p));
    if (!p || !(p->r = calloc((size_t)nproc, sizeof(rank_t)))) {
        free(p);
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    p->nproc = nproc;
    p->silence_ms = silence_ms > 0 ? silence_ms : 10000;
    for (int i = 0; i < nproc; i++)
        snprintf(p->r[i].path, sizeof(p->r[i].path), "%s/progress.%d", log_dir, i);
    return p;
}

void ec_progress_destroy(ec_progress_t *p)
{
    if (!p)
        return;
    int saved = errno;
    for (int i = 0; i < p->nproc; i++)
        free(p->r[i].log_path);
    free(p->r);
    free(p);
    errno = saved;
}

const char *ec_progress_path(const ec_progress_t *p, int r)
{
    return p && r >= 0 && r < p->nproc ? p->r[r].path : NULL;
}

static off_t size_of(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 ? st.st_size : -1;
}

void ec_progress_output(ec_progress_t *p, int r, uint64_t bytes)
{
    if (p && r >= 0 && r < p->nproc)
        p->r[r].out_bytes = bytes;
}

int ec_progress_reset(ec_progress_t *p, int r, const char *log_path, ec_error_t *err)
{
    if (!p || r < 0 || r >= p->nproc)
        return ec_errorf(err, EC_EINVAL, "ec_progress_reset: bad rank %d", r);
    rank_t *k = &p->r[r];
    free(k->log_path);
    k->log_path = log_path ? strdup(log_path) : NULL;
    k->log_size = log_path ? size_of(log_path) : (off_t)k->out_bytes;
    k->start_ms = k->last_ms = ec_mono_ms();
    k->running = k->reporting = k->paused = k->in_coll = k->stopped = false;
    k->step = 0;
    k->nwin = 0;
    /* A fresh file, never truncated in place: the previous process may
     * still have the old one mapped (a truncated mapping is SIGBUS). */
    char tmp[4300];
    snprintf(tmp, sizeof(tmp), "%s.new", k->path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return ec_errorf(err, EC_ESYS, "cannot create the progress file %s: %s (local rank %d "
                         "runs without progress reports)", tmp, strerror(errno), r);
    char zero[EC_PROGRESS_FILE_SIZE] = {0};
    bool ok = write(fd, zero, sizeof(zero)) == (ssize_t)sizeof(zero);
    close(fd);
    if (!ok || rename(tmp, k->path) < 0) {
        int e = errno;
        unlink(tmp);
        return ec_errorf(err, EC_ESYS, "cannot write the progress file %s: %s (local rank %d "
                         "runs without progress reports)", k->path, strerror(e), r);
    }
    return 0;
}

/* Whether the process is stopped (SIGSTOP, a debugger): state T or t. */
static bool proc_stopped(pid_t pid)
{
    char state;
    return ec_proc_stat(pid, &state, NULL, NULL) && (state == 'T' || state == 't');
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static void sample_one(ec_progress_t *p, rank_t *k, pid_t pid, int64_t now)
{
    bool was = k->running;
    k->running = pid > 0;
    if (!k->running)
        return;
    /* Sampled again after a time it was not (not a member, fenced): its
     * silence counts from now, not from its last step before. */
    if (!was)
        k->start_ms = k->last_ms = now;
    ec_progress_slot_t s;
    int fd = open(k->path, O_RDONLY | O_CLOEXEC);
    bool got = false;
    if (fd >= 0) {
        got = pread(fd, &s, sizeof(s), 0) == (ssize_t)sizeof(s);
        close(fd);
    }
    if (got && s.magic == EC_PROGRESS_MAGIC) {
        k->reporting = true;
        k->paused = s.paused_ns != 0;
        k->in_coll = s.coll_enter_ns != 0;
        int64_t last = max64(max64(s.step_ns, s.coll_done_ns), s.resumed_ns) / 1000000;
        k->last_ms = max64(k->start_ms, last);
        int64_t paused_at = s.paused_ns / 1000000;
        if (k->paused && p->max_pause_ms > 0 && now - paused_at >= p->max_pause_ms) {
            /* a pause past its bound is silence from its start */
            k->paused = false;
            k->last_ms = max64(k->start_ms, paused_at);
            if (k->overdue_told != s.paused_ns) {
                k->overdue_told = s.paused_ns;
                ec_log(EC_LOG_WARN, "+pause-overdue local rank %d: paused %.1f s ago, past "
                       "--max_pause=%.0f s: its silence counts from the pause's start",
                       (int)(k - p->r), (double)(now - paused_at) / 1000.0,
                       (double)p->max_pause_ms / 1000.0);
            }
        } else if (k->paused) {
            k->last_ms = now; /* a declared pause is not silence */
        }
        if (s.step != k->step) {
            k->step = s.step;
            if (k->nwin == EC_PROGRESS_WINDOW) {
                memmove(k->win_t, k->win_t + 1, sizeof(k->win_t[0]) * (EC_PROGRESS_WINDOW - 1));
                memmove(k->win_s, k->win_s + 1, sizeof(k->win_s[0]) * (EC_PROGRESS_WINDOW - 1));
                k->nwin--;
            }
            k->win_t[k->nwin] = s.step_ns;
            k->win_s[k->nwin] = s.step;
            k->nwin++;
        }
    } else {
        /* a program that reports nothing: its log (or output) growing is
         * its progress */
        off_t sz = k->log_path ? size_of(k->log_path) : (off_t)k->out_bytes;
        if (sz != k->log_size) {
            k->log_size = sz;
            k->last_ms = now;
        }
    }
    k->stopped = !k->paused && now - k->last_ms >= p->silence_ms && proc_stopped(pid);
}

void ec_progress_sample(ec_progress_t *p, const pid_t *pid, int64_t now_ms)
{
    if (!p)
        return;
    p->now_ms = now_ms;
    for (int i = 0; i < p->nproc; i++)
        sample_one(p, &p->r[i], pid[i], now_ms);
}

int64_t ec_progress_ready_ns(const ec_progress_t *p, int r)
{
    if (!p || r < 0 || r >= p->nproc)
        return 0;
    int64_t v = 0;
    int fd = open(p->r[r].path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (pread(fd, &v, sizeof(v), offsetof(ec_progress_slot_t, ready_ns)) != (ssize_t)sizeof(v))
            v = 0;
        close(fd);
    }
    return v;
}

int64_t ec_progress_step_us(const int64_t *t_ns, const uint64_t *step, int n)
{
    if (n < 2 || step[n - 1] <= step[0] || t_ns[n - 1] <= t_ns[0])
        return 0;
    return (t_ns[n - 1] - t_ns[0]) / 1000 / (int64_t)(step[n - 1] - step[0]);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

void ec_progress_summary(const ec_progress_t *p, ec_node_progress_t *o)
{
    *o = (ec_node_progress_t){.silent_rank = -1, .slowest_rank = -1};
    if (!p)
        return;
    int nrun = 0, nrep = 0, nsilent = 0, nwaiting = 0, nst = 0;
    int64_t st[EC_NPROC_MAX];
    bool first = true;
    for (int i = 0; i < p->nproc; i++) {
        const rank_t *k = &p->r[i];
        if (!k->running)
            continue;
        nrun++;
        nrep += k->reporting;
        if (first || k->step < o->step)
            o->step = k->step;
        first = false;
        o->paused |= k->paused;
        int64_t quiet = p->now_ms - k->last_ms;
        if (!k->paused && quiet > o->silent_ms) {
            o->silent_ms = quiet;
            o->silent_rank = i;
        }
        if (!k->paused && quiet >= p->silence_ms) {
            nsilent++;
            nwaiting += k->in_coll;
            o->stopped |= k->stopped;
        }
        int64_t us = ec_progress_step_us(k->win_t, k->win_s, k->nwin);
        if (us > 0) {
            st[nst++] = us;
            if (us > o->slowest_us) {
                o->slowest_us = us;
                o->slowest_rank = i;
            }
        }
    }
    o->reporting = nrun > 0 && nrep == nrun;
    o->waiting = nsilent > 0 && nwaiting == nsilent;
    if (nsilent == 0) {
        /* below the threshold is not news: keep the record quiet */
        o->silent_ms = 0;
        o->silent_rank = -1;
    }
    if (nst) {
        qsort(st, (size_t)nst, sizeof(st[0]), cmp64);
        o->step_p50_us = st[(nst - 1) / 2];
    }
}

static bool moved(int64_t a, int64_t b)
{
    /* by more than a fifth, either way */
    if (a == b)
        return false;
    if (!a || !b)
        return true;
    int64_t d = a > b ? a - b : b - a;
    return d * 5 > (a < b ? a : b);
}

bool ec_progress_publish_due(const ec_node_progress_t *last, int64_t last_ms,
                             const ec_node_progress_t *cur, int64_t silence_ms, int64_t now_ms,
                             int64_t *next_ms)
{
    if (next_ms)
        *next_ms = -1;
    (void)silence_ms;
    bool flip = !last->seq || (last->silent_ms > 0) != (cur->silent_ms > 0) ||
                last->silent_rank != cur->silent_rank || last->waiting != cur->waiting ||
                last->stopped != cur->stopped || last->paused != cur->paused ||
                last->reporting != cur->reporting;
    bool times = moved(last->step_p50_us, cur->step_p50_us) ||
                 moved(last->slowest_us, cur->slowest_us) ||
                 (cur->slowest_us && last->slowest_rank != cur->slowest_rank);
    int64_t since = now_ms - last_ms;
    if (!last->seq && !cur->reporting && !cur->silent_ms && !cur->paused)
        return false; /* nothing to say yet: no record write at all */
    if (flip) {
        if (!last->seq || since >= EC_PROGRESS_FLIP_MS)
            return true;
        if (next_ms)
            *next_ms = last_ms + EC_PROGRESS_FLIP_MS;
        return false;
    }
    if (times) {
        if (since >= EC_PROGRESS_PUBLISH_MS)
            return true;
        if (next_ms)
            *next_ms = last_ms + EC_PROGRESS_PUBLISH_MS;
    }
    return false;
}
