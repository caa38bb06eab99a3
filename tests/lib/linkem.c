/* The link emulator: see linkem.h. */
#define _GNU_SOURCE
#include "linkem.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define MAX_CHILDREN 16
#define FRAME_MAX 65536 /* a TAP without IFF_VNET_HDR hands frames of MTU + 14 at most */
#define READS_PER_WAKE 64

typedef struct frame {
    struct frame *next;
    int64_t due_us;
    int to;
    size_t len;
    unsigned char data[];
} frame_t;

struct ec_linkem {
    char ns[2][32], tap[2][IFNAMSIZ], addr[2][16];
    bool ns_made[2];
    int fd[2];
    pthread_t relay;
    bool relay_started;

    pthread_mutex_t mu; /* guards everything below */
    int64_t delay_ms[2];
    double loss[2];
    bool frozen, stop;
    uint64_t rng;
    ec_linkem_stats_t st;
    pid_t child[MAX_CHILDREN];
    size_t nchild;

    /* the delay line, the relay thread's alone: ordered by due time */
    frame_t *head, *tail;
    size_t queued;
};

static void sleep_us(int64_t us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Wait for child pid at most ms; kill it when it outlives that.  Its exit
 * status, or -1. */
static int reap(pid_t pid, int64_t ms)
{
    int st = 0;
    for (int64_t end = ec_mono_ms() + ms;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (r < 0 && errno != EINTR)
            return -1;
        if (ec_mono_ms() >= end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        sleep_us(2000);
    }
}

/* Run `ip` with argv (NULL-terminated, argv[0] "ip"), at most 5 s: 0, or -1
 * with err holding what it printed. */
static int run_ip(ec_error_t *err, char *const argv[])
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return ec_errorf(err, EC_ESYS, "pipe: %s", strerror(errno)), -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return ec_errorf(err, EC_ESYS, "fork: %s", strerror(errno)), -1;
    }
    if (pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        if (nul >= 0)
            dup2(nul, 1);
        dup2(p[1], 2);
        execvp("ip", argv);
        fprintf(stderr, "cannot run ip (iproute2): %s", strerror(errno));
        _exit(127);
    }
    close(p[1]);
    int rc = reap(pid, 5000);
    char out[256] = "";
    ssize_t n = read(p[0], out, sizeof(out) - 1); /* the child is gone: never blocks long */
    close(p[0]);
    out[n > 0 ? n : 0] = '\0';
    for (char *nl = strchr(out, '\n'); nl; nl = strchr(out, '\n'))
        *nl = ' ';
    if (rc == 0)
        return 0;
    char cmd[256] = "";
    for (size_t i = 0, off = 0; argv[i] && off < sizeof(cmd) - 1; i++)
        off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, "%s%s", i ? " " : "", argv[i]);
    ec_errorf(err, EC_ESYS, "'%s' failed (exit %d): %s", cmd, rc, out);
    return -1;
}

static int open_tap(const char *name, ec_error_t *err)
{
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return ec_errorf(err, EC_ESYS, "cannot open /dev/net/tun: %s (the link emulator needs "
                                        "root and the tun module)", strerror(errno)), -1;
    struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        ec_errorf(err, EC_ESYS, "cannot create TAP device %s: %s (the link emulator needs root)",
                  name, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static double uniform(ec_linkem_t *l) /* under l->mu */
{
    l->rng ^= l->rng << 13;
    l->rng ^= l->rng >> 7;
    l->rng ^= l->rng << 17;
    return (double)(l->rng >> 11) / 9007199254740992.0;
}

static void enqueue(ec_linkem_t *l, frame_t *f)
{
    f->next = NULL;
    if (!l->tail || f->due_us >= l->tail->due_us) { /* the usual case: a constant delay */
        if (l->tail)
            l->tail->next = f;
        else
            l->head = f;
        l->tail = f;
    } else { /* the delay was shortened: overtake the frames still waiting */
        frame_t **pp = &l->head;
        while (*pp && (*pp)->due_us <= f->due_us)
            pp = &(*pp)->next;
        f->next = *pp;
        *pp = f;
    }
    l->queued++;
}

/* Read what side `from` has sent (a bounded number of frames) into the
 * delay line, or drop it. */
static void take(ec_linkem_t *l, int from, unsigned char *buf)
{
    for (int k = 0; k < READS_PER_WAKE; k++) {
        ssize_t n = read(l->fd[from], buf, FRAME_MAX);
        if (n <= 0)
            return; /* EAGAIN: drained */
        int64_t now = ec_mono_us();
        pthread_mutex_lock(&l->mu);
        bool drop = l->frozen || l->queued >= EC_LINKEM_QUEUE_MAX ||
                    (l->loss[from] > 0 && uniform(l) < l->loss[from]);
        int64_t due = now + l->delay_ms[from] * 1000;
        if (drop)
            l->st.dropped[from]++;
        pthread_mutex_unlock(&l->mu);
        if (drop)
            continue;
        frame_t *f = malloc(sizeof(*f) + (size_t)n);
        if (!f)
            continue; /* lost, like a frame a full NIC drops */
        f->due_us = due;
        f->to = 1 - from;
        f->len = (size_t)n;
        memcpy(f->data, buf, (size_t)n);
        enqueue(l, f);
    }
}

static void deliver_due(ec_linkem_t *l)
{
    int64_t now = ec_mono_us();
    while (l->head && l->head->due_us <= now) {
        frame_t *f = l->head;
        l->head = f->next;
        if (!l->head)
            l->tail = NULL;
        l->queued--;
        /* a TAP takes a write whole or not at all; one it refuses is lost */
        bool ok = write(l->fd[f->to], f->data, f->len) == (ssize_t)f->len;
        pthread_mutex_lock(&l->mu);
        if (ok)
            l->st.forwarded[1 - f->to]++;
        else
            l->st.dropped[1 - f->to]++;
        pthread_mutex_unlock(&l->mu);
        free(f);
    }
}

static void *relay(void *arg)
{
    ec_linkem_t *l = arg;
    unsigned char *buf = malloc(FRAME_MAX);
    for (;;) {
        pthread_mutex_lock(&l->mu);
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop || !buf)
            break;
        deliver_due(l);
        /* wake for the next due frame, and at least every 50 ms to see stop */
        int64_t wait_us = 50000;
        if (l->head) {
            int64_t left = l->head->due_us - ec_mono_us();
            wait_us = left < 0 ? 0 : left < wait_us ? left : wait_us;
        }
        struct pollfd pf[2] = {{l->fd[0], POLLIN, 0}, {l->fd[1], POLLIN, 0}};
        struct timespec ts = {0, wait_us * 1000};
        if (ppoll(pf, 2, &ts, NULL) < 0 && errno != EINTR)
            sleep_us(1000); /* should not happen; never spin */
        for (int s = 0; s < 2; s++)
            if (pf[s].revents & POLLIN)
                take(l, s, buf);
    }
    free(buf);
    while (l->head) {
        frame_t *f = l->head;
        l->head = f->next;
        free(f);
    }
    l->tail = NULL;
    l->queued = 0;
    return NULL;
}

static int setup_side(ec_linkem_t *l, int s, ec_error_t *err)
{
    char *add[] = {"ip", "netns", "add", l->ns[s], NULL};
    if (run_ip(err, add) < 0)
        return -1;
    l->ns_made[s] = true;
    l->fd[s] = open_tap(l->tap[s], err);
    if (l->fd[s] < 0)
        return -1;
    char cidr[24];
    snprintf(cidr, sizeof(cidr), "%s/24", l->addr[s]);
    char *move[] = {"ip", "link", "set", l->tap[s], "netns", l->ns[s], NULL};
    char *lo[] = {"ip", "-n", l->ns[s], "link", "set", "lo", "up", NULL};
    char *addr[] = {"ip", "-n", l->ns[s], "addr", "add", cidr, "dev", l->tap[s], NULL};
    char *up[] = {"ip", "-n", l->ns[s], "link", "set", l->tap[s], "up", NULL};
    if (run_ip(err, move) < 0 || run_ip(err, lo) < 0 || run_ip(err, addr) < 0 ||
        run_ip(err, up) < 0)
        return -1;
    return 0;
}

ec_linkem_t *ec_linkem_create(ec_error_t *err)
{
    static int seq;
    if (geteuid() != 0) {
        ec_errorf(err, EC_ESYS, "the link emulator needs root (network namespaces, TAP devices)");
        return NULL;
    }
    ec_linkem_t *l = calloc(1, sizeof(*l));
    if (!l) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    l->fd[0] = l->fd[1] = -1;
    int n = __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED);
    l->rng = 88172645463325252ULL ^ ((uint64_t)getpid() << 20) ^ (uint64_t)n;
    for (int s = 0; s < 2; s++) {
        snprintf(l->ns[s], sizeof(l->ns[s]), "eclink-%d-%d-%c", (int)getpid(), n, "ab"[s]);
        snprintf(l->tap[s], sizeof(l->tap[s]), "ecl%d%c%d", (int)getpid() % 10000000, "ab"[s],
                 n % 100);
        snprintf(l->addr[s], sizeof(l->addr[s]), "10.77.0.%d", s + 1);
    }
    if (setup_side(l, 0, err) < 0 || setup_side(l, 1, err) < 0)
        goto error;
    if (pthread_create(&l->relay, NULL, relay, l) != 0) {
        ec_errorf(err, EC_ESYS, "cannot start the relay thread");
        goto error;
    }
    l->relay_started = true;
    return l;
error:
    ec_linkem_destroy(l);
    return NULL;
}

const char *ec_linkem_addr(const ec_linkem_t *l, int side)
{
    return l->addr[side ? 1 : 0];
}

const char *ec_linkem_netns(const ec_linkem_t *l, int side)
{
    return l->ns[side ? 1 : 0];
}

void ec_linkem_set(ec_linkem_t *l, int from, int64_t delay_ms, double loss)
{
    pthread_mutex_lock(&l->mu);
    l->delay_ms[from ? 1 : 0] = delay_ms < 0 ? 0 : delay_ms;
    l->loss[from ? 1 : 0] = loss < 0 ? 0 : loss > 1 ? 1 : loss;
    pthread_mutex_unlock(&l->mu);
}

void ec_linkem_set_both(ec_linkem_t *l, int64_t delay_ms, double loss)
{
    ec_linkem_set(l, EC_LINKEM_A, delay_ms, loss);
    ec_linkem_set(l, EC_LINKEM_B, delay_ms, loss);
}

void ec_linkem_freeze(ec_linkem_t *l, bool frozen)
{
    pthread_mutex_lock(&l->mu);
    l->frozen = frozen;
    pthread_mutex_unlock(&l->mu);
}

void ec_linkem_stats(ec_linkem_t *l, ec_linkem_stats_t *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->st;
    pthread_mutex_unlock(&l->mu);
}

static int enter_ns(const char *name, ec_error_t *err)
{
    char path[64];
    snprintf(path, sizeof(path), "/var/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ec_errorf(err, EC_ESYS, "cannot open %s: %s", path, strerror(errno)), -1;
    int rc = setns(fd, CLONE_NEWNET);
    int e = errno;
    close(fd);
    if (rc < 0)
        return ec_errorf(err, EC_ESYS, "setns into %s: %s", name, strerror(e)), -1;
    return 0;
}

int ec_linkem_enter(ec_linkem_t *l, int side, ec_error_t *err)
{
    int saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (saved < 0)
        return ec_errorf(err, EC_ESYS, "cannot open /proc/thread-self/ns/net: %s",
                         strerror(errno)), -1;
    if (enter_ns(l->ns[side ? 1 : 0], err) < 0) {
        close(saved);
        return -1;
    }
    return saved;
}

int ec_linkem_leave(int saved, ec_error_t *err)
{
    int rc = setns(saved, CLONE_NEWNET);
    int e = errno;
    close(saved);
    if (rc < 0)
        return ec_errorf(err, EC_ESYS, "setns back: %s", strerror(e)), -1;
    return 0;
}

pid_t ec_linkem_spawn(ec_linkem_t *l, int side, int (*fn)(void *), void *arg, ec_error_t *err)
{
    pthread_mutex_lock(&l->mu);
    bool room = l->nchild < MAX_CHILDREN;
    pthread_mutex_unlock(&l->mu);
    if (!room)
        return ec_errorf(err, EC_ESYS, "more than %d children in one link", MAX_CHILDREN), -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return ec_errorf(err, EC_ESYS, "fork: %s", strerror(errno)), -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1); /* the parent died before the line above */
        close(l->fd[0]);
        close(l->fd[1]);
        if (enter_ns(l->ns[side ? 1 : 0], NULL) < 0)
            _exit(1);
        _exit(fn(arg));
    }
    pthread_mutex_lock(&l->mu);
    l->child[l->nchild++] = pid;
    pthread_mutex_unlock(&l->mu);
    return pid;
}

void ec_linkem_kill(ec_linkem_t *l, pid_t pid)
{
    pthread_mutex_lock(&l->mu);
    bool mine = false;
    for (size_t i = 0; i < l->nchild && !mine; i++)
        if (l->child[i] == pid) {
            mine = true;
            l->child[i] = l->child[--l->nchild];
        }
    pthread_mutex_unlock(&l->mu);
    if (!mine)
        return; /* not ours: never signal it */
    kill(pid, SIGKILL);
    reap(pid, 2000);
}

void ec_linkem_destroy(ec_linkem_t *l)
{
    if (!l)
        return;
    int e = errno;
    for (size_t i = 0; i < l->nchild; i++) {
        kill(l->child[i], SIGKILL);
        reap(l->child[i], 2000);
    }
    if (l->relay_started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->relay, NULL);
    }
    for (int s = 0; s < 2; s++) {
        if (l->fd[s] >= 0)
            close(l->fd[s]); /* a TAP that is not persistent goes with its last fd */
        if (l->ns_made[s]) {
            char *del[] = {"ip", "netns", "del", l->ns[s], NULL};
            run_ip(NULL, del);
        }
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
    errno = e;
}
