/* Rank tracker: see rank_track.h for the rule and what "alive" stands for. */
#define _GNU_SOURCE
#include "rank_track.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* A (pid, start) seen to be a descendant of a training process with the
 * same job, rank and epoch: remembered so that it stays skipped once its
 * parent is gone and it is reparented. */
typedef struct {
    pid_t pid;
    unsigned long long start;
} key_t_;

typedef struct {
    char node[64];
    int64_t from, to;
} excuse_t;

struct ec_rank_track {
    char job[128];
    long interval_ms, tolerance_ms;
    pthread_mutex_t lock;
    pthread_t thread;
    bool running, stop;
    int64_t t0, last_poll, max_gap;
    long polls;
    ec_rank_rec_t *rec;
    int n, cap;
    key_t_ *skip;
    int nskip, capskip;
    excuse_t *ex;
    int nex;
};

/* State (a character) and start time of pid from /proc/<pid>/stat;
 * false if it is gone.  Also its parent if ppid is not NULL. */
static bool read_stat(pid_t pid, char *state, unsigned long long *start, pid_t *ppid)
{
    char p[64], buf[1024];
    snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    /* comm may hold spaces and parentheses: fields resume after the last ')' */
    char *s = strrchr(buf, ')');
    if (!s || s[1] != ' ')
        return false;
    s += 2;
    *state = s[0];
    /* s is field 3 (state); start time is field 22 */
    int field = 3;
    char *save = NULL;
    for (char *tok = strtok_r(s, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++) {
        if (field == 4 && ppid)
            *ppid = (pid_t)atoi(tok);
        if (field == 22) {
            *start = strtoull(tok, NULL, 10);
            return true;
        }
    }
    return false;
}

typedef struct {
    bool job, rank, epoch;
    int r;
    unsigned long long e;
    char node[64];
} penv_t;

/* Read pid's environment for job; false if unreadable (gone, a zombie, not
 * ours). */
static bool read_env(pid_t pid, const char *job, penv_t *pe)
{
    char p[64];
    static __thread char buf[64 * 1024];
    memset(pe, 0, sizeof(*pe));
    snprintf(p, sizeof(p), "/proc/%d/environ", (int)pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    size_t jl = strlen(job);
    for (char *e = buf; e < buf + n; e += strlen(e) + 1) {
        if (!strncmp(e, "ECOORD_JOB_ID=", 14) && !strncmp(e + 14, job, jl) && e[14 + jl] == '\0')
            pe->job = true;
        else if (!strncmp(e, "RANK=", 5) && isdigit((unsigned char)e[5])) {
            pe->rank = true;
            pe->r = atoi(e + 5);
        } else if (!strncmp(e, "ECOORD_EPOCH=", 13) && isdigit((unsigned char)e[13])) {
            pe->epoch = true;
            pe->e = strtoull(e + 13, NULL, 10);
        } else if (!strncmp(e, "ECOORD_NODE_ID=", 15))
            snprintf(pe->node, sizeof(pe->node), "%s", e + 15);
    }
    return true;
}

static ec_rank_rec_t *find_rec(ec_rank_track_t *t, pid_t pid, unsigned long long start)
{
    for (int i = t->n - 1; i >= 0; i--)
        if (t->rec[i].pid == pid && t->rec[i].start == start)
            return &t->rec[i];
    return NULL;
}

static bool skipped(ec_rank_track_t *t, pid_t pid, unsigned long long start)
{
    for (int i = 0; i < t->nskip; i++)
        if (t->skip[i].pid == pid && t->skip[i].start == start)
            return true;
    return false;
}

static int add_locked(ec_rank_track_t *t, const ec_rank_rec_t *r)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        ec_rank_rec_t *nr = realloc(t->rec, (size_t)cap * sizeof(*nr));
        if (!nr)
            return -1;
        t->rec = nr;
        t->cap = cap;
    }
    t->rec[t->n++] = *r;
    return 0;
}

static void add_skip(ec_rank_track_t *t, pid_t pid, unsigned long long start)
{
    if (t->nskip == t->capskip) {
        int cap = t->capskip ? 2 * t->capskip : 64;
        key_t_ *ns = realloc(t->skip, (size_t)cap * sizeof(*ns));
        if (!ns)
            return; /* skipped again next time, at the cost of a read */
        t->skip = ns;
        t->capskip = cap;
    }
    t->skip[t->nskip++] = (key_t_){pid, start};
}

/* One pass over /proc. */
static void poll_once(ec_rank_track_t *t)
{
    DIR *d = opendir("/proc");
    if (!d)
        return;
    pid_t self = getpid();
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(de->d_name);
        if (pid == self)
            continue;
        char st = 0;
        unsigned long long start = 0;
        pid_t ppid = 0;
        if (!read_stat(pid, &st, &start, &ppid) || st == 'Z' || st == 'X')
            continue; /* gone, or no longer acting */
        int64_t now = ec_test_now_ms();
        pthread_mutex_lock(&t->lock);
        ec_rank_rec_t *r = find_rec(t, pid, start);
        if (r)
            r->last_ms = now;
        bool known = r || skipped(t, pid, start);
        pthread_mutex_unlock(&t->lock);
        if (known)
            continue;
        /* Unknown: read its environment each time (it may not have exec'd
         * its training program yet, its environment still the agent's). */
        penv_t pe, pp;
        if (!read_env(pid, t->job, &pe) || !pe.job || !pe.rank || !pe.epoch)
            continue;
        /* The parent's environment can read empty for a moment (it is
         * exec'ing): decide on a later poll rather than take a rank's own
         * child for a second process of the rank. */
        char pst = 0;
        unsigned long long pstart = 0;
        if (!read_env(ppid, t->job, &pp) && read_stat(ppid, &pst, &pstart, NULL) && pst != 'Z' &&
            pst != 'X')
            continue;
        bool child = pp.job && pp.rank && pp.epoch && pp.r == pe.r && pp.e == pe.e;
        ec_rank_rec_t nr = {.pid = pid, .start = start, .rank = pe.r, .epoch = pe.e,
                            .first_ms = now, .last_ms = now};
        snprintf(nr.node, sizeof(nr.node), "%s", pe.node);
        pthread_mutex_lock(&t->lock);
        if (child)
            add_skip(t, pid, start);
        else
            (void)add_locked(t, &nr);
        pthread_mutex_unlock(&t->lock);
    }
    closedir(d);
    int64_t now = ec_test_now_ms();
    pthread_mutex_lock(&t->lock);
    if (t->last_poll && now - t->last_poll > t->max_gap)
        t->max_gap = now - t->last_poll;
    t->last_poll = now;
    t->polls++;
    pthread_mutex_unlock(&t->lock);
}

static void *poller(void *arg)
{
    ec_rank_track_t *t = arg;
    for (;;) {
        pthread_mutex_lock(&t->lock);
        bool stop = t->stop;
        pthread_mutex_unlock(&t->lock);
        poll_once(t);
        if (stop)
            break;
        /* The pace of a poller, not a wait for a condition. */
        struct timespec ts = {t->interval_ms / 1000, (t->interval_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static ec_rank_track_t *alloc_track(void)
{
    ec_rank_track_t *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->t0 = ec_test_now_ms();
    return t;
}

ec_rank_track_t *ec_rank_track_create(long tolerance_ms)
{
    ec_rank_track_t *t = alloc_track();
    if (t) {
        t->tolerance_ms = tolerance_ms < 0 ? 0 : tolerance_ms;
        t->t0 = 0; /* synthetic records carry their own times */
    }
    return t;
}

ec_rank_track_t *ec_rank_track_start(const char *job, long interval_ms)
{
    if (!job || !*job || strlen(job) >= sizeof(((ec_rank_track_t *)0)->job)) {
        errno = EINVAL;
        return NULL;
    }
    ec_rank_track_t *t = alloc_track();
    if (!t)
        return NULL;
    snprintf(t->job, sizeof(t->job), "%s", job);
    t->interval_ms = interval_ms <= 0 ? 25 : interval_ms < 5 ? 5 : interval_ms > 200 ? 200 : interval_ms;
    t->tolerance_ms = 2 * t->interval_ms;
    int rc = pthread_create(&t->thread, NULL, poller, t);
    if (rc) {
        ec_rank_track_destroy(t);
        errno = rc;
        return NULL;
    }
    t->running = true;
    return t;
}

int ec_rank_track_add(ec_rank_track_t *t, const ec_rank_rec_t *r)
{
    pthread_mutex_lock(&t->lock);
    int rc = add_locked(t, r);
    pthread_mutex_unlock(&t->lock);
    if (rc)
        errno = ENOMEM;
    return rc;
}

void ec_rank_track_set_tolerance(ec_rank_track_t *t, long tolerance_ms)
{
    pthread_mutex_lock(&t->lock);
    t->tolerance_ms = tolerance_ms < 0 ? 0 : tolerance_ms;
    pthread_mutex_unlock(&t->lock);
}

void ec_rank_track_stop(ec_rank_track_t *t)
{
    if (!t || !t->running)
        return;
    pthread_mutex_lock(&t->lock);
    t->stop = true;
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    t->running = false;
}

int ec_rank_track_count(ec_rank_track_t *t)
{
    pthread_mutex_lock(&t->lock);
    int n = t->n;
    pthread_mutex_unlock(&t->lock);
    return n;
}

int ec_rank_track_excuse(ec_rank_track_t *t, const char *node, int64_t from_ms, int64_t to_ms)
{
    pthread_mutex_lock(&t->lock);
    excuse_t *ne = realloc(t->ex, (size_t)(t->nex + 1) * sizeof(*ne));
    if (ne) {
        t->ex = ne;
        snprintf(ne[t->nex].node, sizeof(ne[t->nex].node), "%s", node);
        ne[t->nex].from = from_ms;
        ne[t->nex].to = to_ms;
        t->nex++;
    }
    pthread_mutex_unlock(&t->lock);
    if (!ne)
        errno = ENOMEM;
    return ne ? 0 : -1;
}

/* Whether the overlap [from, to] of old (the older epoch's process) is
 * excused. */
static bool excused(const ec_rank_track_t *t, const ec_rank_rec_t *old, int64_t from, int64_t to)
{
    for (int i = 0; i < t->nex; i++)
        if (!strcmp(t->ex[i].node, old->node) && from >= t->ex[i].from && to <= t->ex[i].to)
            return true;
    return false;
}

static void describe(const ec_rank_track_t *t, const ec_rank_rec_t *r, char *out, size_t len)
{
    snprintf(out, len, "pid %d (node %s, epoch %llu, alive from %lld to %lld ms)", (int)r->pid,
             r->node[0] ? r->node : "?", r->epoch, (long long)(r->first_ms - t->t0),
             (long long)(r->last_ms - t->t0));
}

static int find(ec_rank_track_t *t, char *msg, size_t msglen, bool print_excused, int *nexc)
{
    pthread_mutex_lock(&t->lock);
    int bad = 0, nexcused = 0;
    int64_t worst = -1;
    const ec_rank_rec_t *wa = NULL, *wb = NULL;
    for (int i = 0; i < t->n; i++)
        for (int j = i + 1; j < t->n; j++) {
            const ec_rank_rec_t *a = &t->rec[i], *b = &t->rec[j];
            if (a->rank != b->rank || a->epoch == b->epoch)
                continue;
            int64_t from = a->first_ms > b->first_ms ? a->first_ms : b->first_ms;
            int64_t to = a->last_ms < b->last_ms ? a->last_ms : b->last_ms;
            int64_t ov = to - from;
            if (ov <= t->tolerance_ms)
                continue;
            if (excused(t, a->epoch < b->epoch ? a : b, from, to)) {
                if (print_excused) {
                    char da[256], db[256];
                    describe(t, a->epoch < b->epoch ? a : b, da, sizeof(da));
                    describe(t, a->epoch < b->epoch ? b : a, db, sizeof(db));
                    printf("# ranks: excused (the older one's agent was frozen): rank %d: %s and "
                           "%s both alive for %lld ms\n", a->rank, da, db, (long long)ov);
                }
                nexcused++;
                continue;
            }
            bad++;
            if (ov > worst) {
                worst = ov;
                /* the older epoch first */
                wa = a->epoch < b->epoch ? a : b;
                wb = a->epoch < b->epoch ? b : a;
            }
        }
    if (bad && msg && msglen) {
        char da[256], db[256];
        describe(t, wa, da, sizeof(da));
        describe(t, wb, db, sizeof(db));
        snprintf(msg, msglen,
                 "rank %d held twice: %s and %s were both alive for %lld ms (tolerance %ld ms)%s",
                 wa->rank, da, db, (long long)worst, t->tolerance_ms,
                 bad > 1 ? " (and more pairs)" : "");
    } else if (msg && msglen) {
        msg[0] = '\0';
    }
    pthread_mutex_unlock(&t->lock);
    if (nexc)
        *nexc = nexcused;
    return bad;
}

int ec_rank_track_find(ec_rank_track_t *t, char *msg, size_t msglen)
{
    return find(t, msg, msglen, false, NULL);
}

int ec_rank_track_check(ec_rank_track_t *t)
{
    ec_rank_track_stop(t);
    char msg[1024];
    int nexc = 0;
    int bad = find(t, msg, sizeof(msg), true, &nexc);
    int n = t->n;
    /* epochs: distinct values */
    int epochs = 0;
    for (int i = 0; i < n; i++) {
        bool dup = false;
        for (int j = 0; j < i && !dup; j++)
            dup = t->rec[j].epoch == t->rec[i].epoch;
        epochs += !dup;
    }
    if (bad)
        ck_abort_msg("split brain: %s; %d pair(s) in all", msg, bad);
    if (t->polls)
        printf("# ranks: %d processes, %d epochs, no rank held twice (%ld polls every %ld ms, "
               "longest gap %lld ms, tolerance %ld ms, %d overlaps excused)\n", n, epochs,
               t->polls, t->interval_ms, (long long)t->max_gap, t->tolerance_ms, nexc);
    else
        printf("# ranks: %d processes, %d epochs, no rank held twice (%d overlaps excused)\n", n,
               epochs, nexc);
    fflush(stdout);
    return n;
}

void ec_rank_track_destroy(ec_rank_track_t *t)
{
    if (!t)
        return;
    int saved = errno;
    ec_rank_track_stop(t);
    pthread_mutex_destroy(&t->lock);
    free(t->rec);
    free(t->skip);
    free(t->ex);
    free(t);
    errno = saved;
}
