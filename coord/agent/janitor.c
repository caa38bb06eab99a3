/* The janitor process: kills what the ranks started once the agent is gone.
 *
 * How a group is told apart from a later one with the same number: the
 * agent opens a pidfd for each rank right after fork, while the rank is its
 * unreaped child (so the pidfd is certainly that process), and passes it
 * over the socket (SCM_RIGHTS).  A pidfd refers to the kernel's struct pid,
 * not to the number, and a process group is the set of processes attached
 * to the leader's struct pid as their group.  pidfd_send_signal(...,
 * PIDFD_SIGNAL_PROCESS_GROUP) (Linux 6.9) therefore signals exactly the
 * rank's group, even after the rank itself died and was reaped by init, and
 * never a group that reused the number later (that one has another struct
 * pid: the call fails with ESRCH).  No /proc heuristics needed.
 *
 * Older kernels (EINVAL for the flag, ENOSYS without pidfds): the group is
 * killed by number, kill(-pgid), only while its leader still exists (a live
 * or zombie leader pins the number: it cannot be reused while any process
 * uses it as pid or group id), checked with a signal 0 through the leader's
 * pidfd, or without pidfds by the leader's start time in /proc/<pid>/stat.
 * The window between that check and the kill is a few microseconds and
 * would need the pid counter to wrap exactly then.  What is left of a group
 * whose leader init already reaped is not killed there (documented).
 *
 * The child side runs in a copy of a multithreaded process, so it uses only
 * async-signal-safe calls and static memory. */
#define _GNU_SOURCE
#include "janitor.h"
#include "procstat.h"
#include "clock.h"
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#ifndef PIDFD_SIGNAL_PROCESS_GROUP
#define PIDFD_SIGNAL_PROCESS_GROUP (1U << 2)
#endif

enum { J_GROUP = 1, J_GROUP_GONE, J_ORPHAN, J_QUIT, J_DEADLINE };

typedef struct {
    uint32_t op;
    int32_t pid;
    uint64_t start; /* clock ticks since boot, /proc/<pid>/stat field 22 */
} jmsg_t;

struct ec_janitor {
    pid_t pid;
    int sock; /* the agent's end */
    bool warned;
    int64_t deadline; /* the last one sent (ec_janitor_deadline) */
};

/* ---- both sides ---- */

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static char *put_num(char *p, unsigned long long v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10));
    while (n)
        *p++ = tmp[--n];
    *p = '\0';
    return p;
}

static char *put_str(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    *p = '\0';
    return p;
}

static unsigned long long start_of(pid_t pid)
{
    unsigned long long start;
    return ec_proc_stat(pid, NULL, NULL, &start) ? start : 0;
}

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

static int pidfd_signal(int fd, int sig, unsigned int flags)
{
#ifdef SYS_pidfd_send_signal
    return (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, flags);
#else
    (void)fd, (void)sig, (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

/* ---- the janitor (child side) ---- */

typedef struct {
    pid_t pid;
    unsigned long long start;
    int fd; /* pidfd, -1 without */
} jent_t;

#define J_GROUPS 1024
#define J_ORPHANS 256
static jent_t groups[J_GROUPS];
static int ngroups;
static jent_t orphans[J_ORPHANS]; /* a ring: the oldest is forgotten */
static int norphans, orphan_next;

static void forget(jent_t *e)
{
    if (e->fd >= 0)
        close(e->fd);
    e->fd = -1;
    e->pid = 0;
}

static void on_msg(const jmsg_t *m, int fd)
{
    if (m->op == J_GROUP && ngroups < J_GROUPS) {
        groups[ngroups++] = (jent_t){m->pid, m->start, fd};
        return;
    }
    if (m->op == J_GROUP_GONE) {
        for (int i = 0; i < ngroups; i++)
            if (groups[i].pid == m->pid) {
                forget(&groups[i]);
                groups[i] = groups[--ngroups];
                break;
            }
    } else if (m->op == J_ORPHAN) {
        jent_t *e = &orphans[orphan_next];
        if (orphan_next == norphans)
            norphans++;
        else
            forget(e);
        *e = (jent_t){m->pid, m->start, fd};
        orphan_next = (orphan_next + 1) % J_ORPHANS;
        return;
    }
    if (fd >= 0)
        close(fd);
}

/* The leader still exists (alive or zombie), so its number cannot have
 * been reused: see the file comment. */
static bool leader_exists(const jent_t *e)
{
    if (e->fd >= 0)
        return pidfd_signal(e->fd, 0, 0) == 0;
    return e->start && start_of(e->pid) == e->start;
}

/* SIGKILL the group led (or once led) by e: 1 if it had members. */
static int kill_group(jent_t *e)
{
    if (e->pid <= 0)
        return 0;
    if (e->fd >= 0) {
        if (pidfd_signal(e->fd, SIGKILL, PIDFD_SIGNAL_PROCESS_GROUP) == 0)
            return 1;
        if (errno != EINVAL && errno != ENOSYS)
            return 0; /* ESRCH: no member left */
    }
    return leader_exists(e) && kill(-e->pid, SIGKILL) == 0;
}

/* SIGKILL an orphan, and the group it leads if it made one (a setsid()
 * helper): 1 if it was still there. */
static int kill_orphan(jent_t *e)
{
    if (e->pid <= 0 || e->fd < 0)
        return 0;
    int r = kill_group(e);
    return pidfd_signal(e->fd, SIGKILL, 0) == 0 || r;
}

/* Whether a process of group pgrp is still alive (not a zombie).  Only
 * asked after a signal through the group's pidfd reached someone, i.e.
 * while the number is pinned: any process with that group is in ours. */
static bool has_live_member(pid_t pgrp)
{
    struct {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[];
    } *d;
    static char buf[16384] __attribute__((aligned(8)));
    int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return true; /* cannot tell: keep trying until the deadline */
    bool live = false;
    long n;
    while (!live && (n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
        for (long off = 0; off < n && !live; off += d->reclen) {
            d = (void *)(buf + off);
            if (d->name[0] < '1' || d->name[0] > '9')
                continue;
            pid_t pid = 0;
            for (const char *c = d->name; *c >= '0' && *c <= '9'; c++)
                pid = pid * 10 + (*c - '0');
            char state;
            pid_t g;
            unsigned long long start;
            live = ec_proc_stat(pid, &state, &g, &start) && g == pgrp && state != 'Z' && state != 'X';
        }
    }
    close(dfd);
    return live;
}

static void report(pid_t agent, int ngroups_killed, int norphans_killed)
{
    char line[256], *p = line;
    p = put_str(p, "ecoord janitor: the agent (pid ");
    p = put_num(p, (unsigned long long)agent);
    p = put_str(p, ") ended without stopping what its training processes started: SIGKILLed ");
    p = put_num(p, (unsigned long long)ngroups_killed);
    p = put_str(p, " process group(s) and ");
    p = put_num(p, (unsigned long long)norphans_killed);
    p = put_str(p, " orphaned process(es)\n");
    alarm(2); /* stderr may be a full pipe: never hang on it */
    ssize_t w = write(2, line, (size_t)(p - line));
    (void)w;
    alarm(0);
}

static void cleanup(pid_t agent)
{
    int64_t deadline = ec_mono_ms() + EC_JANITOR_KILL_MS;
    for (int round = 0;; round++) {
        int ng = 0, no = 0, live = 0;
        for (int i = 0; i < ngroups; i++)
            if (kill_group(&groups[i])) {
                ng++;
                live += has_live_member(groups[i].pid);
            } else {
                forget(&groups[i]); /* no member left: never again by number */
            }
        for (int i = 0; i < norphans; i++) {
            if (!kill_orphan(&orphans[i])) {
                forget(&orphans[i]);
                continue;
            }
            no++;
            char state;
            pid_t g;
            unsigned long long start;
            live += ec_proc_stat(orphans[i].pid, &state, &g, &start) && start == orphans[i].start &&
                    state != 'Z' && state != 'X';
        }
        if (round == 0 && ng + no > 0)
            report(agent, ng, no);
        /* SIGKILL to a group reaches every member, even one forking at
         * the time; what remains are zombies init has yet to reap (some
         * container inits are slow to), and processes that take long to
         * die (state D): repeat while one is alive, within the deadline. */
        if (!live || ec_mono_ms() >= deadline)
            break;
        pause_ms(5);
    }
}

/* The watchdog: the agent's deadline passed with no newer one, so the agent
 * is frozen or wedged (a live agent stops its processes itself, and says
 * so, before the deadline).  SIGKILL every rank's group and every orphan
 * once; the entries stay (the agent, thawed, reaps and reports them gone). */
static void watchdog_fire(pid_t agent, int64_t late_ms)
{
    int ng = 0, no = 0;
    for (int i = 0; i < ngroups; i++)
        ng += kill_group(&groups[i]);
    for (int i = 0; i < norphans; i++)
        no += kill_orphan(&orphans[i]);
    if (ng + no == 0)
        return;
    char line[320], *p = line;
    p = put_str(p, "ecoord janitor: the agent (pid ");
    p = put_num(p, (unsigned long long)agent);
    p = put_str(p, ") has not renewed its fence deadline (frozen or stuck?) and etcd may soon expire "
                   "its lease: SIGKILLed ");
    p = put_num(p, (unsigned long long)ng);
    p = put_str(p, " process group(s) and ");
    p = put_num(p, (unsigned long long)no);
    p = put_str(p, " orphaned process(es), ");
    p = put_num(p, (unsigned long long)(late_ms > 0 ? late_ms : 0));
    p = put_str(p, " ms after the deadline\n");
    alarm(2);
    ssize_t w = write(2, line, (size_t)(p - line));
    (void)w;
    alarm(0);
}

static void janitor_main(int sock, pid_t agent)
{
    /* Signals as the default, nothing blocked: the agent's handlers mean
     * nothing here.  It must outlive the agent: no parent-death signal. */
    ec_child_reset(0, 0);
    /* A group of its own: Ctrl-C on the terminal, or a kill of the agent's
     * group, is for the agent; the janitor is needed when that kills it. */
    setpgid(0, 0);
    prctl(PR_SET_NAME, "ecoord-janitor");
    if (chdir("/") < 0) { /* not to hold the job's directory (an unmount) */
    }
    /* Hold nothing of the agent's (sockets, reserved ports, pipes others
     * wait on for end-of-file) but its stderr, for one report line. */
    if (sock != 3) {
        dup2(sock, 3);
        close(sock);
    }
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        dup2(nul, 0);
        dup2(nul, 1);
    }
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 4, ~0U, 0) < 0)
#endif
    {
        struct rlimit rl;
        int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (int)rl.rlim_cur : 65536;
        for (int fd = 4; fd < max; fd++)
            close(fd);
    }
    int64_t deadline = 0; /* monotonic ms to kill at; 0: disarmed */
    for (;;) {
        int64_t now = ec_mono_ms();
        if (deadline > 0 && now >= deadline) {
            watchdog_fire(agent, now - deadline);
            deadline = 0; /* until the agent sends a new one */
        }
        /* Bounded: the deadline, else once a second for nothing. */
        int timeout = deadline > 0 ? (int)(deadline - now) : 1000;
        if (timeout > 1000)
            timeout = 1000;
        struct pollfd pf = {3, POLLIN, 0};
        int pr = poll(&pf, 1, timeout);
        if (pr == 0 || (pr < 0 && errno == EINTR))
            continue;
        jmsg_t m;
        struct iovec iov = {&m, sizeof(m)};
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } cm;
        struct msghdr mh;
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof(cm.buf);
        ssize_t n = recvmsg(3, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) /* end-of-file: the agent is gone */
            break;
        int fd = -1;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            memcpy(&fd, CMSG_DATA(c), sizeof(fd));
        if (n != (ssize_t)sizeof(m)) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        if (m.op == J_QUIT)
            _exit(0); /* a normal exit: the agent stopped everything itself */
        if (m.op == J_DEADLINE) {
            if (fd >= 0)
                close(fd);
            deadline = (int64_t)m.start;
            continue;
        }
        on_msg(&m, fd);
    }
    cleanup(agent);
    _exit(0);
}

/* ---- the agent's side ---- */

ec_janitor_t *ec_janitor_start(ec_error_t *err)
{
    ec_janitor_t *j = calloc(1, sizeof(*j));
    if (!j) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        ec_errorf(err, EC_ESYS, "cannot start the janitor process: socketpair: %s", strerror(errno));
        free(j);
        return NULL;
    }
    /* No handler of the agent's may run in the child before it resets them. */
    sigset_t saved;
    ec_child_fork_begin(&saved);
    pid_t agent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        janitor_main(sv[1], agent);
    }
    int e = errno;
    ec_child_fork_end(&saved);
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        free(j);
        ec_errorf(err, EC_ESYS, "cannot start the janitor process: fork: %s", strerror(e));
        return NULL;
    }
    j->pid = pid;
    j->sock = sv[0];
    return j;
}

pid_t ec_janitor_pid(const ec_janitor_t *j)
{
    return j ? j->pid : 0;
}

static void jsend(ec_janitor_t *j, uint32_t op, pid_t pid, unsigned long long start, int fd)
{
    if (!j || j->sock < 0)
        return;
    jmsg_t m = {op, (int32_t)pid, start};
    struct iovec iov = {&m, sizeof(m)};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    memset(&cm, 0, sizeof(cm));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (fd >= 0) {
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof(cm.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(fd));
    }
    ssize_t n;
    do /* never blocks the agent: a janitor that stopped reading costs a warning */
        n = sendmsg(j->sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0 && !j->warned && j->pid > 0) {
        j->warned = true;
        ec_log(EC_LOG_WARN, "cannot reach the janitor process (pid %d): %s; processes started by "
                            "the training processes may outlive the agent if it is killed",
               (int)j->pid, strerror(errno));
    }
}

/* pid is our unreaped child: its pidfd is certainly that process. */
static void announce(ec_janitor_t *j, uint32_t op, pid_t pid)
{
    if (!j || j->sock < 0)
        return;
    int fd = pidfd_open_(pid);
    jsend(j, op, pid, start_of(pid), fd);
    if (fd >= 0)
        close(fd);
}

void ec_janitor_group(ec_janitor_t *j, pid_t pgid)
{
    announce(j, J_GROUP, pgid);
}

void ec_janitor_group_gone(ec_janitor_t *j, pid_t pgid)
{
    jsend(j, J_GROUP_GONE, pgid, 0, -1);
}

void ec_janitor_orphan(ec_janitor_t *j, pid_t pid)
{
    announce(j, J_ORPHAN, pid);
}

void ec_janitor_deadline(ec_janitor_t *j, int64_t kill_at_ms)
{
    if (!j || kill_at_ms == j->deadline)
        return;
    j->deadline = kill_at_ms;
    jsend(j, J_DEADLINE, 0, (unsigned long long)(kill_at_ms > 0 ? kill_at_ms : 0), -1);
}

void ec_janitor_lost(ec_janitor_t *j)
{
    if (!j)
        return;
    ec_log(EC_LOG_WARN, "the janitor process (pid %d) exited: processes started by the training "
                        "processes will outlive the agent if it is killed",
           (int)j->pid);
    j->pid = 0;
    if (j->sock >= 0)
        close(j->sock);
    j->sock = -1;
}

void ec_janitor_stop(ec_janitor_t *j)
{
    if (!j)
        return;
    int saved = errno;
    jsend(j, J_QUIT, 0, 0, -1);
    if (j->sock >= 0)
        close(j->sock); /* end-of-file for it, in case the quit was lost */
    if (j->pid > 0) {
        int64_t deadline = ec_mono_ms() + EC_JANITOR_KILL_MS;
        pid_t w;
        while ((w = waitpid(j->pid, NULL, WNOHANG)) == 0 && ec_mono_ms() < deadline)
            pause_ms(1);
        if (w == 0) {
            kill(j->pid, SIGKILL);
            waitpid(j->pid, NULL, 0); /* SIGKILLed, not in I/O: at once */
        }
    }
    free(j);
    errno = saved;
}
