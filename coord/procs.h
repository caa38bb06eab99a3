/* The local training processes of one node: start with an environment and
 * logs, stop by process group with a grace period, reap, tail their logs.
 * Used from one thread (the agent's main loop). */
#ifndef EC_PROCS_H
#define EC_PROCS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

typedef struct ec_procs ec_procs_t;

/* nproc local ranks running argv (NULL-terminated, borrowed); logs under
 * log_dir/workerlog.<local_rank> (appended).  Local rank 0's output is also
 * copied to console_fd when >= 0. */
ec_procs_t *ec_procs_new(int nproc, const char *log_dir, char *const *argv, int console_fd,
                         ec_error_t *err);
void ec_procs_destroy(ec_procs_t *p); /* stops anything running first */

/* Start local rank r with envp; marker (may be NULL) is written to its log
 * first.  The child dies with the agent (PR_SET_PDEATHSIG) and leads its own
 * process group. */
int ec_procs_start(ec_procs_t *p, int r, char *const *envp, const char *marker, ec_error_t *err);
/* SIGTERM every running group, SIGKILL what is left after grace_ms, reap. */
void ec_procs_stop_all(ec_procs_t *p, int64_t grace_ms);
/* SIGKILL every running group now and reap. */
void ec_procs_kill_all(ec_procs_t *p);
/* Reap one exited rank without blocking: 1 with *r and *status (wait(2)
 * status) filled, 0 if none exited. */
int ec_procs_reap(ec_procs_t *p, int *r, int *status);
int ec_procs_running(const ec_procs_t *p);
pid_t ec_procs_pid(const ec_procs_t *p, int r); /* 0 if not running */
/* The fd to poll for local rank 0's output (-1 when none), and the pump
 * that copies what is available to its log and the console. */
int ec_procs_out_fd(const ec_procs_t *p);
void ec_procs_pump(ec_procs_t *p);
/* The last n lines of rank r's log, malloc'd array of malloc'd strings. */
int ec_procs_tail(const ec_procs_t *p, int r, int n, char ***lines);
const char *ec_procs_log_path(const ec_procs_t *p, int r);

#endif
