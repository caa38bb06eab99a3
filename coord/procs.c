/* Local training processes. */
#define _GNU_SOURCE
#include "procs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct rank {
    pid_t pid;
    char log[600];
} rank_t;

struct ec_procs {
    int nproc;
    char *const *argv;
    int console_fd;
    int out_fd;  /* read end of rank 0's pipe */
    int log0_fd; /* rank 0's log, for the pump */
    rank_t *r;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

ec_procs_t *ec_procs_new(int nproc, const char *log_dir, char *const *argv, int console_fd,
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
    p->console_fd = console_fd;
    p->out_fd = -1;
    p->log0_fd = -1;
    for (int i = 0; i < nproc; i++)
        snprintf(p->r[i].log, sizeof(p->r[i].log), "%s/workerlog.%d", log_dir, i);
    return p;
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
    int pipefd[2] = {-1, -1};
    if (r == 0 && p->console_fd >= 0) {
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
            close(fd);
            return ec_errorf(err, EC_ESYS, "pipe: %s", strerror(errno));
        }
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return ec_errorf(err, EC_ESYS, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan keeps training under a stale rank */
        if (getppid() != parent)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        int out = pipefd[1] >= 0 ? pipefd[1] : fd;
        dup2(out, 1);
        dup2(out, 2);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        execvpe(p->argv[0], p->argv, envp);
        dprintf(2, "ecoord: cannot run '%s': %s (check the training program path)\n", p->argv[0],
                strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    p->r[r].pid = pid;
    if (pipefd[1] >= 0) {
        close(pipefd[1]);
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
    if (p->out_fd < 0)
        return;
    char buf[8192];
    for (;;) {
        ssize_t n = read(p->out_fd, buf, sizeof(buf));
        if (n > 0) {
            ssize_t w = write(p->log0_fd, buf, (size_t)n);
            w = write(p->console_fd, buf, (size_t)n);
            (void)w;
            continue;
        }
        if (n == 0) { /* writer gone: rank 0 exited */
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

int ec_procs_reap(ec_procs_t *p, int *r, int *status)
{
    for (int i = 0; i < p->nproc; i++) {
        if (p->r[i].pid <= 0)
            continue;
        int st;
        if (waitpid(p->r[i].pid, &st, WNOHANG) == p->r[i].pid) {
            p->r[i].pid = 0;
            if (i == 0)
                ec_procs_pump(p);
            *r = i;
            *status = st;
            return 1;
        }
    }
    return 0;
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

static void signal_all(ec_procs_t *p, int sig)
{
    for (int i = 0; i < p->nproc; i++)
        if (p->r[i].pid > 0)
            kill(-p->r[i].pid, sig); /* the whole group: the program's own children too */
}

void ec_procs_stop_all(ec_procs_t *p, int64_t grace_ms)
{
    if (!ec_procs_running(p))
        return;
    signal_all(p, SIGTERM);
    int64_t deadline = mono_ms() + grace_ms;
    while (ec_procs_running(p) && mono_ms() < deadline) {
        int r, st;
        if (!ec_procs_reap(p, &r, &st)) {
            ec_procs_pump(p);
            struct timespec ts = {0, 2 * 1000 * 1000}; /* reaping poll interval */
            nanosleep(&ts, NULL);
        }
    }
    ec_procs_kill_all(p);
}

void ec_procs_kill_all(ec_procs_t *p)
{
    signal_all(p, SIGKILL);
    for (int i = 0; i < p->nproc; i++)
        if (p->r[i].pid > 0) {
            waitpid(p->r[i].pid, NULL, 0);
            p->r[i].pid = 0;
        }
    ec_procs_pump(p);
}

void ec_procs_destroy(ec_procs_t *p)
{
    if (!p)
        return;
    ec_procs_kill_all(p);
    if (p->out_fd >= 0)
        close(p->out_fd);
    if (p->log0_fd >= 0)
        close(p->log0_fd);
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
