/* Local training processes. */
#define _GNU_SOURCE
#include "procs.h"
#include "clock.h"
#include "child.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "janitor.h"
#include "log.h"

typedef struct rank {
    pid_t pid;
    char log[600];
} rank_t;

/* A child of ours as /proc shows it: pid and start time (in clock ticks
 * since boot) tell a process apart from a later one with the same pid. */
typedef struct kid {
    pid_t pid;
    unsigned long long start;
    char state;
} kid_t;

struct ec_procs {
    int nproc;
    char *const *argv;
    ec_outq_t *console;
    int out_fd;  /* read end of rank 0's pipe */
    int log0_fd; /* rank 0's log, for the pump */
    rank_t *r;
    kid_t *others; /* children we had before any rank: not ours to stop */
    int nothers;
    pid_t termed[256]; /* orphans already sent SIGTERM in this stop */
    int ntermed;
    ec_janitor_t *jan; /* kills what the ranks started if we die (NULL: none) */
    pid_t left[64];    /* groups of reaped ranks that still had members */
    int nleft;
    kid_t told[64];    /* orphans the janitor was told about (a ring) */
    int ntold, told_next;
    int64_t next_tell; /* when ec_procs_reap looks for new orphans again */
    const volatile sig_atomic_t *abort; /* non-zero: no more grace */
};

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* State and start time of one process, from /proc/<pid>/stat (fields 3,
 * 4 and 22; the command name before them may hold spaces and ')'). */
static bool read_stat(pid_t pid, char *state, int *ppid, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0)
        return false;
    buf[len] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && sscanf(rp + 1, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                                "%*d %*d %*d %llu", state, ppid, start) == 3;
}

static bool add_kid(kid_t **out, int *n, int *cap, pid_t pid)
{
    char state;
    int ppid;
    unsigned long long start;
    if (!read_stat(pid, &state, &ppid, &start) || ppid != getpid())
        return true; /* gone, or reaped and reused already: not ours */
    for (int i = 0; i < *n; i++)
        if ((*out)[i].pid == pid)
            return true;
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 16;
        kid_t *k = realloc(*out, (size_t)c * sizeof(kid_t));
        if (!k)
            return false;
        *out = k;
        *cap = c;
    }
    (*out)[(*n)++] = (kid_t){pid, start, state};
    return true;
}

/* The children of this process (of every thread): from
 * /proc/self/task/<tid>/children, or where the kernel lacks those
 * (CONFIG_PROC_CHILDREN) by scanning every /proc/<pid>/stat for our pid as
 * parent.  Returns the count. */
static int list_kids(kid_t **out)
{
    *out = NULL;
    int n = 0, cap = 0;
    bool have_children_files = false;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[96];
        snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        have_children_files = true;
        int pid;
        while (fscanf(f, "%d", &pid) == 1)
            if (!add_kid(out, &n, &cap, (pid_t)pid))
                break;
        fclose(f);
    }
    if (d)
        closedir(d);
    if (have_children_files)
        return n;
    if (!(d = opendir("/proc")))
        return 0;
    while ((e = readdir(d)))
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && !add_kid(out, &n, &cap, (pid_t)atoi(e->d_name)))
            break;
    closedir(d);
    return n;
}

static int rank_of(const ec_procs_t *p, pid_t pid)
{
    for (int i = 0; i < p->nproc; i++)
        if (p->r[i].pid == pid)
            return i;
    return -1;
}

static bool is_other(const ec_procs_t *p, pid_t pid, unsigned long long start, bool check_start)
{
    for (int i = 0; i < p->nothers; i++)
        if (p->others[i].pid == pid && (!check_start || p->others[i].start == start))
            return true;
    return false;
}

/* A reaped rank's group: gone for the janitor once it has no member left;
 * until then (what a rank that exited left running) it stays known, and is
 * checked again by prune_left.  This is bookkeeping (the janitor closes the
 * group's pidfd): a group kept by mistake — kill(-pgid, 0) seeing a later
 * group that reused the number — costs nothing, the janitor signals by
 * pidfd and cannot reach that one (coord/agent/janitor.c). */
static void group_reaped(ec_procs_t *p, pid_t pgid)
{
    if (kill(-pgid, 0) < 0 && errno == ESRCH) {
        ec_janitor_group_gone(p->jan, pgid);
        return;
    }
    for (int i = 0; i < p->nleft; i++)
        if (p->left[i] == pgid)
            return;
    if (p->nleft < (int)(sizeof(p->left) / sizeof(p->left[0])))
        p->left[p->nleft++] = pgid; /* else the janitor keeps it: harmless, it checks */
}

static void prune_left(ec_procs_t *p)
{
    for (int i = 0; i < p->nleft;)
        if (kill(-p->left[i], 0) < 0 && errno == ESRCH) {
            ec_janitor_group_gone(p->jan, p->left[i]);
            p->left[i] = p->left[--p->nleft];
        } else {
            i++;
        }
}

/* Orphans we adopted (a rank or a helper died under them) are announced to
 * the janitor, with what setsid() away from the ranks' groups: unreaped
 * children, so the pidfds it gets are certainly theirs. */
static void tell_orphans(ec_procs_t *p)
{
    if (!p->jan)
        return;
    kid_t *k;
    int n = list_kids(&k);
    for (int i = 0; i < n; i++) {
        if (rank_of(p, k[i].pid) >= 0 || is_other(p, k[i].pid, k[i].start, true) || k[i].state == 'Z')
            continue;
        bool known = false;
        int cap = (int)(sizeof(p->told) / sizeof(p->told[0]));
        for (int t = 0; t < p->ntold && !known; t++)
            known = p->told[t].pid == k[i].pid && p->told[t].start == k[i].start;
        if (known)
            continue;
        p->told[p->told_next] = k[i];
        p->told_next = (p->told_next + 1) % cap;
        if (p->ntold < cap)
            p->ntold++;
        ec_janitor_orphan(p->jan, k[i].pid);
    }
    free(k);
}

ec_procs_t *ec_procs_new(int nproc, const char *log_dir, char *const *argv, ec_outq_t *console,
                         ec_error_t *err)
{
    if (mkdir(log_dir, 0755) < 0 && errno != EEXIST) {
        ec_errorf(err, EC_EIO, "cannot create --log_dir '%s': %s", log_dir, strerror(errno));
        return NULL;
    }
    ec_procs_t *p = calloc(1, sizeof(*p));
    if (!p || !(p->r = calloc((size_t)nproc, sizeof(rank_t)))) {
        free(p);
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    p->nproc = nproc;
    p->argv = argv;
    p->console = console;
    p->out_fd = -1;
    p->log0_fd = -1;
    for (int i = 0; i < nproc; i++)
        snprintf(p->r[i].log, sizeof(p->r[i].log), "%s/workerlog.%d", log_dir, i);
    /* Orphaned descendants of the ranks (a daemon, a setsid() helper, what
     * a dead rank leaves behind) become our children, to be stopped with
     * the ranks and reaped, instead of running on under init. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        ec_log(EC_LOG_WARN, "cannot become a child subreaper (%s): processes started by the "
                            "training processes may outlive them", strerror(errno));
    /* Before any rank, and before the children are listed: the janitor is
     * one of the children that are not ours to stop. */
    ec_error_t jerr = {0};
    if (!(p->jan = ec_janitor_start(&jerr)))
        ec_log(EC_LOG_WARN, "%s: processes started by the training processes will outlive the "
                            "agent if it is killed", jerr.msg);
    p->nothers = list_kids(&p->others);
    return p;
}

/* The child, between fork and exec: only async-signal-safe calls. */
static void child(ec_procs_t *p, pid_t parent, int out, int errw, char *const *envp)
{
    /* The agent's handlers mean nothing here; a signal that arrives before
     * exec must act as it will on the program.  Its own process group; no
     * orphan keeps training under a stale rank. */
    setpgid(0, 0);
    int e = 0;
    if (ec_child_reset(SIGKILL, parent) < 0) {
        e = ESRCH;
    } else {
        dup2(out, 1);
        dup2(out, 2);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        if (nul > 2)
            close(nul);
        execvpe(p->argv[0], p->argv, envp);
        e = errno;
    }
    ssize_t w = write(errw, &e, sizeof(e));
    (void)w;
    _exit(127);
}

/* Reap pid, waiting at most ms. */
static bool reap_within(pid_t pid, int *status, long ms)
{
    int64_t deadline = ec_mono_ms() + ms;
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR))
            return w == pid;
        if (ec_mono_ms() >= deadline)
            return false;
        pause_ms(1);
    }
}

int ec_procs_start(ec_procs_t *p, int r, char *const *envp, const char *marker, ec_error_t *err)
{
    int fd = open(p->r[r].log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return ec_errorf(err, EC_EIO, "cannot open %s: %s", p->r[r].log, strerror(errno));
    if (marker) {
        ssize_t w = write(fd, marker, strlen(marker));
        (void)w;
    }
    int pipefd[2] = {-1, -1}, errp[2] = {-1, -1};
    if ((r == 0 && p->console && pipe2(pipefd, O_CLOEXEC) < 0) || pipe2(errp, O_CLOEXEC) < 0) {
        int e = errno;
        close(fd);
        if (pipefd[0] >= 0) {
            close(pipefd[0]);
            close(pipefd[1]);
        }
        return ec_errorf(err, EC_ESYS, "pipe: %s", strerror(e));
    }
    /* No signal handler of ours may run in the child before it resets them. */
    sigset_t saved;
    ec_child_fork_begin(&saved);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child(p, parent, pipefd[1] >= 0 ? pipefd[1] : fd, errp[1], envp);
    int fork_errno = errno;
    ec_child_fork_end(&saved);
    close(errp[1]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    if (pid < 0) {
        close(fd);
        close(errp[0]);
        if (pipefd[0] >= 0)
            close(pipefd[0]);
        return ec_errorf(err, EC_ESYS, "fork: %s", strerror(fork_errno));
    }
    setpgid(pid, pid);
    /* Announced at once, while the child is unreaped: were the agent killed
     * now, what the program starts would otherwise be missed. */
    ec_janitor_group(p->jan, pid);
    /* EOF: exec succeeded (the pipe is close-on-exec); an errno: it failed.
     * A program on a hung filesystem may take long to exec: past the
     * deadline it counts as started, and a failure shows as its exit. */
    int child_errno = 0;
    struct pollfd pf = {errp[0], POLLIN, 0};
    int64_t deadline = ec_mono_ms() + 10000;
    for (;;) {
        int n = poll(&pf, 1, (int)(deadline - ec_mono_ms() > 0 ? deadline - ec_mono_ms() : 0));
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0) {
            ssize_t got;
            do
                got = read(errp[0], &child_errno, sizeof(child_errno));
            while (got < 0 && errno == EINTR);
            if (got != (ssize_t)sizeof(child_errno))
                child_errno = 0;
        }
        break;
    }
    close(errp[0]);
    if (child_errno) {
        if (!reap_within(pid, NULL, EC_PROCS_KILL_WAIT_MS))
            kill(pid, SIGKILL); /* left to ec_procs_reap as an orphan */
        else
            group_reaped(p, pid);
        close(fd);
        if (pipefd[0] >= 0)
            close(pipefd[0]);
        return ec_errorf(err, EC_ESYS,
                         "cannot run '%s': %s (check the program after '--': that it exists on "
                         "this node, is in PATH or given with its path, and is executable)",
                         p->argv[0], strerror(child_errno));
    }
    p->r[r].pid = pid;
    if (pipefd[0] >= 0) {
        if (p->out_fd >= 0)
            close(p->out_fd);
        if (p->log0_fd >= 0)
            close(p->log0_fd);
        p->out_fd = pipefd[0];
        fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
        p->log0_fd = fd;
    } else {
        close(fd);
    }
    return 0;
}

void ec_procs_pump(ec_procs_t *p)
{
    if (p->out_fd < 0 || !p->console)
        return;
    char buf[8192];
    /* at most 1 MiB a call: a chatty rank must not hold the main loop */
    for (size_t total = 0; total < (1u << 20);) {
        ssize_t n = read(p->out_fd, buf, sizeof(buf));
        if (n > 0) {
            ssize_t w = write(p->log0_fd, buf, (size_t)n); /* the log gets everything */
            (void)w;
            ec_outq_write(p->console, buf, (size_t)n); /* the console what it can take */
            total += (size_t)n;
            continue;
        }
        if (n == 0) { /* writer gone: rank 0 and what it started exited */
            close(p->out_fd);
            close(p->log0_fd);
            p->out_fd = p->log0_fd = -1;
        }
        return;
    }
}

int ec_procs_out_fd(const ec_procs_t *p)
{
    return p->out_fd;
}

static void rank_reaped(ec_procs_t *p, int i)
{
    group_reaped(p, p->r[i].pid);
    p->r[i].pid = 0;
    if (i == 0)
        ec_procs_pump(p);
}

int ec_procs_reap(ec_procs_t *p, int *r, int *status)
{
    /* Look at exited children without reaping (WNOWAIT): a rank's exit is
     * the caller's; an orphan's is reaped here; another's (the embedded
     * etcd's) is left to its owner, and hides the ones behind it, which the
     * per-rank waits below and the next stop still find. */
    bool reaped = false;
    for (int guard = 0; guard < 256; guard++) {
        siginfo_t si;
        si.si_pid = 0;
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
            break;
        if (rank_of(p, si.si_pid) >= 0)
            break;
        if (p->jan && si.si_pid == ec_janitor_pid(p->jan)) {
            waitpid(si.si_pid, NULL, WNOHANG);
            ec_janitor_lost(p->jan);
            continue;
        }
        if (is_other(p, si.si_pid, 0, false))
            break;
        waitpid(si.si_pid, NULL, WNOHANG);
        reaped = true;
    }
    int found = 0;
    for (int i = 0; i < p->nproc && !found; i++) {
        if (p->r[i].pid <= 0)
            continue;
        int st;
        if (waitpid(p->r[i].pid, &st, WNOHANG) == p->r[i].pid) {
            rank_reaped(p, i);
            *r = i;
            *status = st;
            found = 1;
        }
    }
    /* A death under a rank's tree may have made orphans of its children,
     * and emptied groups the janitor still knows; a death deeper down (a
     * helper's parent) tells us nothing: look once a second too. */
    int64_t now = ec_mono_ms();
    if (reaped || found || now >= p->next_tell) {
        tell_orphans(p);
        prune_left(p);
        p->next_tell = now + EC_PROCS_ORPHAN_SCAN_MS;
    }
    return found;
}

int ec_procs_running(const ec_procs_t *p)
{
    int n = 0;
    for (int i = 0; i < p->nproc; i++)
        n += p->r[i].pid > 0;
    return n;
}

pid_t ec_procs_pid(const ec_procs_t *p, int r)
{
    return r >= 0 && r < p->nproc ? p->r[r].pid : 0;
}

/* Each running rank's whole process group.  Only while the rank is not
 * reaped: its pid, and so its group id, cannot be reused until then. */
static void signal_ranks(ec_procs_t *p, int sig)
{
    for (int i = 0; i < p->nproc; i++)
        if (p->r[i].pid > 0)
            kill(-p->r[i].pid, sig);
}

void ec_procs_kill_rank(ec_procs_t *p, int r)
{
    if (p && r >= 0 && r < p->nproc && p->r[r].pid > 0)
        kill(-p->r[r].pid, SIGKILL);
}

static bool termed(ec_procs_t *p, pid_t pid)
{
    for (int i = 0; i < p->ntermed; i++)
        if (p->termed[i] == pid)
            return true;
    if (p->ntermed < (int)(sizeof(p->termed) / sizeof(p->termed[0])))
        p->termed[p->ntermed++] = pid;
    return false;
}

/* Orphaned descendants: every child that is neither a rank nor someone
 * else's.  Reap the exited ones, send sig (0: none; SIGTERM once each) to
 * the others, and return how many are left.  Race-free: a child's pid stays
 * ours until we reap it.  A descendant whose parent is still alive is not a
 * child yet; it becomes one when that parent dies, so callers repeat this
 * until nothing is left, one generation at a time. */
static int sweep(ec_procs_t *p, int sig)
{
    kid_t *k;
    int n = list_kids(&k), left = 0;
    for (int i = 0; i < n; i++) {
        if (rank_of(p, k[i].pid) >= 0 || is_other(p, k[i].pid, k[i].start, true))
            continue;
        if (waitpid(k[i].pid, NULL, WNOHANG) == k[i].pid)
            continue;
        if (sig == SIGKILL || (sig && !termed(p, k[i].pid)))
            kill(k[i].pid, sig);
        left++;
    }
    free(k);
    return left;
}

void ec_procs_stop_all(ec_procs_t *p, int64_t grace_ms)
{
    p->ntermed = 0;
    signal_ranks(p, SIGTERM);
    /* A rank stopped by SIGSTOP or a debugger (found hung, say) acts on
     * SIGTERM only once it runs again, as systemd does it. */
    signal_ranks(p, SIGCONT);
    int left = sweep(p, SIGTERM);
    if (!ec_procs_running(p) && !left) {
        prune_left(p);
        return;
    }
    int64_t deadline = ec_mono_ms() + grace_ms;
    while (ec_mono_ms() < deadline && !(p->abort && *p->abort)) {
        int r, st;
        while (ec_procs_reap(p, &r, &st))
            ;
        ec_procs_pump(p);
        left = sweep(p, SIGTERM);
        if (!ec_procs_running(p) && !left) {
            prune_left(p);
            return;
        }
        pause_ms(5); /* reaping poll interval */
    }
    ec_procs_kill_all(p);
}

void ec_procs_set_abort(ec_procs_t *p, const volatile sig_atomic_t *abort_flag)
{
    if (p)
        p->abort = abort_flag;
}

/* One line per process that outlived SIGKILL: what it is and its state. */
static void report_stuck(ec_procs_t *p)
{
    kid_t *k;
    int n = list_kids(&k);
    for (int i = 0; i < n; i++) {
        if (is_other(p, k[i].pid, k[i].start, true))
            continue;
        int r = rank_of(p, k[i].pid);
        char what[64];
        if (r >= 0)
            snprintf(what, sizeof(what), "local rank %d", r);
        else
            snprintf(what, sizeof(what), "a process started by a rank");
        ec_log(EC_LOG_ERROR, "%s (pid %d, state %c%s) did not exit within %d ms of SIGKILL: left "
                             "behind (reaped if it ever exits); check `cat /proc/%d/stack`",
               what, (int)k[i].pid, k[i].state,
               k[i].state == 'D' ? ": uninterruptible sleep, e.g. stuck I/O or a hung device" : "",
               EC_PROCS_KILL_WAIT_MS, (int)k[i].pid);
    }
    free(k);
}

void ec_procs_kill_all(ec_procs_t *p)
{
    int64_t deadline = ec_mono_ms() + EC_PROCS_KILL_WAIT_MS;
    for (;;) {
        signal_ranks(p, SIGKILL);
        for (int i = 0; i < p->nproc; i++)
            if (p->r[i].pid > 0 && waitpid(p->r[i].pid, NULL, WNOHANG) == p->r[i].pid)
                rank_reaped(p, i);
        int left = sweep(p, SIGKILL);
        if (!ec_procs_running(p) && !left) {
            prune_left(p);
            break;
        }
        if (ec_mono_ms() >= deadline) {
            report_stuck(p);
            for (int i = 0; i < p->nproc; i++)
                p->r[i].pid = 0; /* from now on orphans like any other */
            break;
        }
        pause_ms(2);
    }
    ec_procs_pump(p);
}

void ec_procs_deadline(ec_procs_t *p, int64_t kill_at_ms)
{
    if (p)
        ec_janitor_deadline(p->jan, kill_at_ms);
}

void ec_procs_destroy(ec_procs_t *p)
{
    if (!p)
        return;
    ec_procs_kill_all(p);
    ec_janitor_stop(p->jan); /* everything is stopped: it exits without killing */
    if (p->out_fd >= 0)
        close(p->out_fd);
    if (p->log0_fd >= 0)
        close(p->log0_fd);
    free(p->others);
    free(p->r);
    free(p);
}

const char *ec_procs_log_path(const ec_procs_t *p, int r)
{
    return p->r[r].log;
}

int ec_procs_tail(const ec_procs_t *p, int r, int n, char ***lines)
{
    *lines = calloc((size_t)n + 1, sizeof(char *));
    if (!*lines)
        return EC_ENOMEM;
    FILE *f = fopen(p->r[r].log, "r");
    if (!f)
        return 0;
    char buf[1024];
    int count = 0;
    while (fgets(buf, sizeof(buf), f)) {
        buf[strcspn(buf, "\n")] = '\0';
        if (count == n) {
            free((*lines)[0]);
            memmove(*lines, *lines + 1, (size_t)(n - 1) * sizeof(char *));
            count--;
        }
        (*lines)[count++] = strdup(buf);
    }
    fclose(f);
    return count;
}
