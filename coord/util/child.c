/* The first steps of a forked child (child.h). */
#define _GNU_SOURCE
#include "child.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

void ec_child_fork_begin(sigset_t *saved)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, saved);
}

void ec_child_fork_end(const sigset_t *saved)
{
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

int ec_child_reset(int pdeathsig, pid_t parent)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++) {
        if (s == SIGKILL || s == SIGSTOP || sigaction(s, &dfl, NULL) == 0)
            continue;
        /* libc refuses its own (glibc: 32 and 33), which may still come
         * ignored from whoever started us: the kernel takes a zeroed struct
         * (SIG_DFL, no flags, empty mask) in any layout. */
        uint64_t ksa[4] = {0};
        syscall(SYS_rt_sigaction, s, ksa, NULL, sizeof(uint64_t));
    }
    if (pdeathsig)
        prctl(PR_SET_PDEATHSIG, pdeathsig);
    if (parent > 0 && getppid() != parent) {
        errno = ESRCH;
        return -1;
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    return 0;
}
