/* The local training processes of one node and everything they start:
 * start with an environment and logs, stop every descendant with a grace
 * period, reap, tail their logs.  Used from one thread (the agent's main
 * loop).
 *
 * Process tree: the creating process becomes a child subreaper
 * (PR_SET_CHILD_SUBREAPER), so every descendant of a rank whose parent
 * dies, including one that setsid()s away, becomes its child.  Any child it
 * did not already have when ec_procs_new was called, other than the ranks,
 * is therefore taken for such an orphan: it is stopped with the ranks and
 * reaped.  Fork nothing else from the host process after ec_procs_new.
 *
 * If the host process dies without stopping them (SIGKILL, OOM), a janitor
 * process forked by ec_procs_new kills the ranks' process groups and the
 * orphans it was told about (coord/agent/janitor.h). */
#ifndef EC_PROCS_H
#define EC_PROCS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "outq.h"

typedef struct ec_procs ec_procs_t;

/* How long a SIGKILLed process may take to be reaped before it is given up
 * (logged and left behind): one stuck in uninterruptible I/O (state D). */
#define EC_PROCS_KILL_WAIT_MS 5000
/* How often ec_procs_reap looks for newly adopted orphans to tell the
 * janitor about (coord/agent/janitor.h). */
#define EC_PROCS_ORPHAN_SCAN_MS 1000

/* nproc local ranks running argv (NULL-terminated, borrowed); logs under
 * log_dir/workerlog.<local_rank> (appended).  Local rank 0's output is also
 * queued to console (borrowed, may be NULL), which never blocks. */
ec_procs_t *ec_procs_new(int nproc, const char *log_dir, char *const *argv, ec_outq_t *console,
                         ec_error_t *err);
void ec_procs_destroy(ec_procs_t *p); /* stops anything running first */

/* Start local rank r with envp; marker (may be NULL) is written to its log
 * first.  The child starts with default signal dispositions and an empty
 * mask, leads its own process group and dies with the agent
 * (PR_SET_PDEATHSIG: direct children only).  When the program cannot be
 * executed, -1 with the reason in err ("cannot run 'x': No such file or
 * directory ...") and nothing left running. */
int ec_procs_start(ec_procs_t *p, int r, char *const *envp, const char *marker, ec_error_t *err);
/* SIGTERM every rank's process group and every orphaned descendant, SIGKILL
 * what is left after grace_ms, reap.  Exit statuses are discarded.  Cheap
 * when nothing runs. */
void ec_procs_stop_all(ec_procs_t *p, int64_t grace_ms);
/* A flag that, once non-zero, cuts a grace period short: ec_procs_stop_all
 * checks it while it waits and SIGKILLs at once (the agent's second
 * SIGINT).  Borrowed; NULL: none. */
void ec_procs_set_abort(ec_procs_t *p, const volatile sig_atomic_t *abort_flag);
/* SIGKILL every rank's group and every orphaned descendant now and reap,
 * waiting at most EC_PROCS_KILL_WAIT_MS; what could not be reaped is
 * logged. */
void ec_procs_kill_all(ec_procs_t *p);
/* SIGKILL local rank r's process group now (no wait: ec_procs_reap
 * reports it as usual).  Nothing when it is not running. */
void ec_procs_kill_rank(ec_procs_t *p, int r);
/* Reap one exited rank without blocking: 1 with *r and *status (wait(2)
 * status) filled, 0 if none exited.  Reaps exited orphans on the way, and
 * tells the janitor about new ones (after a reap, else at most every
 * EC_PROCS_ORPHAN_SCAN_MS): call it every few hundred ms. */
int ec_procs_reap(ec_procs_t *p, int *r, int *status);
int ec_procs_running(const ec_procs_t *p);
/* The janitor's watchdog deadline (coord/agent/janitor.h: ec_janitor_deadline):
 * every rank's group is SIGKILLed at CLOCK_MONOTONIC kill_at_ms unless a
 * newer one comes; 0 disarms. */
void ec_procs_deadline(ec_procs_t *p, int64_t kill_at_ms);
pid_t ec_procs_pid(const ec_procs_t *p, int r); /* 0 if not running */
/* The fd to poll for local rank 0's output (-1 when none), and the pump
 * that copies what is available to its log and the console. */
int ec_procs_out_fd(const ec_procs_t *p);
void ec_procs_pump(ec_procs_t *p);
/* The last n lines of rank r's log, malloc'd array of malloc'd strings. */
int ec_procs_tail(const ec_procs_t *p, int r, int n, char ***lines);
const char *ec_procs_log_path(const ec_procs_t *p, int r);

#endif
