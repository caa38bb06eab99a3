/* What every process ecoord forks does first, and what its parent does
 * around the fork.  The rule (docs/user-guide.md, "Process trees and the janitor"): every fork resets
 * signal dispositions before exec, because an ignored signal survives exec
 * and a handler of ours means nothing in the child.
 *
 *   sigset_t saved;
 *   ec_child_fork_begin(&saved);          // no handler of ours runs in the child
 *   pid_t pid = fork();
 *   if (pid == 0) {
 *       if (ec_child_reset(SIGKILL, parent) < 0) _exit(127);
 *       ... dup2, exec ...
 *   }
 *   ec_child_fork_end(&saved);
 */
#ifndef EC_CHILD_H
#define EC_CHILD_H

#include <signal.h>
#include <sys/types.h>

/* Parent, before fork(): block every signal (the calling thread's mask);
 * saved gets the mask to restore. */
void ec_child_fork_begin(sigset_t *saved);
/* Parent, after fork() (and in the child when it does not exec): restore. */
void ec_child_fork_end(const sigset_t *saved);

/* Child, first thing: every signal's disposition back to default (those
 * libc reserves too), die with the parent on pdeathsig (0: do not), and an
 * empty signal mask.  parent is the pid the parent had before fork(): a
 * parent already gone makes it return -1 (errno ESRCH), mask still full, so
 * that the child exits instead of running orphaned.  Async-signal-safe. */
int ec_child_reset(int pdeathsig, pid_t parent);

#endif
