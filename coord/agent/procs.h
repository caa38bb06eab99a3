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

/* Where a local rank's output goes, as the launcher the user came from puts
 * it.  Paddle's (`ecoord launch`): stdout and stderr together into
 * log_dir/workerlog.N, appended across restarts, and local rank 0's also
 * to the console (Paddle's launcher shows its first container's log).
 * torchrun's (`ecoord torchrun`): each stream of each rank to the agent's
 * own stdout or stderr, as is; -r/--redirects sends a stream to a file
 * instead, -t/--tee to a file and to the console with torchrun's
 * "[<role><local_rank>]:" before each line; files only under --log_dir, as
 * <log_dir>/<run_id>_XXXXXX/attempt_<restarts>/<local_rank>/{stdout,stderr}.log
 * (with error.json, the process's TORCHELASTIC_ERROR_FILE), rewritten by
 * each start of the same attempt as torchrun rewrites that directory;
 * --local_ranks_filter keeps the other ranks off the console.  Whatever the
 * style, the agent keeps each rank's last lines (its log file, else an
 * in-memory ring) for failure reports and counts its output (progress of
 * a program that reports none), and nothing it does blocks on the console
 * (coord/agent/outq.h). */
typedef enum { EC_PROCS_PADDLE = 0, EC_PROCS_TORCHRUN = 1 } ec_procs_style_t;

typedef enum {
    EC_CON_NONE = 0,     /* not on the console */
    EC_CON_PLAIN = 1,    /* as the program wrote it */
    EC_CON_PREFIXED = 2, /* each line after "[<role><local_rank>]:" (torchrun's tee) */
} ec_con_t;

typedef struct ec_stream_plan {
    int file;      /* 1: into a file */
    ec_con_t con;  /* onto the agent's stdout (stdout, merged) or stderr (stderr) */
} ec_stream_plan_t;

typedef struct ec_rank_plan {
    int merged;          /* stdout and stderr as one stream (Paddle): out holds both */
    ec_stream_plan_t out, err;
} ec_rank_plan_t;

/* Where local rank r's streams go (above).  redirects, tee: torchrun's
 * forms ("0".."3", or "LR:V,..." where unlisted ranks get 0; NULL or "":
 * "0"); ranks_filter: "0,2" (NULL or "": every rank).  Pure.  Returns 0,
 * or EC_EINVAL with err for a malformed form. */
int ec_procs_plan(ec_procs_style_t style, const char *redirects, const char *tee,
                  const char *ranks_filter, int r, ec_rank_plan_t *out, ec_error_t *err);

typedef struct ec_procs_opts {
    size_t size;            /* sizeof(ec_procs_opts_t): EC_PROCS_OPTS_INIT */
    int nproc;              /* local ranks, >= 1 */
    char *const *argv;      /* the command, NULL-terminated; borrowed */
    ec_outq_t *console;     /* the agent's stdout (borrowed, may be NULL); stderr gets a
                             * queue of its own (torchrun style) */
    ec_procs_style_t style;
    const char *log_dir;    /* Paddle: workerlog.N there (made if missing); torchrun: the
                             * base of the run's directory, "" or NULL for none */
    const char *run_id;     /* torchrun: the run directory's prefix (--rdzv_id) */
    const char *role;       /* torchrun: the prefix's role ("default") */
    const char *redirects, *tee, *ranks_filter; /* torchrun's: ec_procs_plan */
    const char *tmpdir;     /* torchrun: where the agent's private directory goes (error
                             * files, progress files; removed by ec_procs_destroy);
                             * NULL or "": /tmp */
} ec_procs_opts_t;

#define EC_PROCS_OPTS_INIT {.size = sizeof(ec_procs_opts_t)}

/* nproc local ranks running argv, their output where o->style puts it. */
ec_procs_t *ec_procs_create(const ec_procs_opts_t *o, ec_error_t *err);
/* Paddle style, for callers from before ec_procs_create. */
ec_procs_t *ec_procs_new(int nproc, const char *log_dir, char *const *argv, ec_outq_t *console,
                         ec_error_t *err);
void ec_procs_destroy(ec_procs_t *p); /* stops anything running first */

/* Start local rank r with envp, in attempt `attempt` (the agent's restart
 * count: torchrun's attempt_<n> directory); marker (may be NULL) is written
 * to its log first (Paddle) or to its kept lines only (torchrun, whose
 * files hold the program's output alone).  The child starts with default signal dispositions and an empty
 * mask, leads its own process group and dies with the agent
 * (PR_SET_PDEATHSIG: direct children only).  When the program cannot be
 * executed, -1 with the reason in err ("cannot run 'x': No such file or
 * directory ...") and nothing left running. */
int ec_procs_start(ec_procs_t *p, int r, int attempt, char *const *envp, const char *marker,
                   ec_error_t *err);
/* torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: tmpl with $role_name,
 * $rank, $local_rank and $hostname (or ${role_name}, ...) replaced as
 * Python's string.Template.safe_substitute replaces them: $$ is $, any
 * other $ is left as it is.  rank < 0 (a process started before its node's
 * epoch): "?".  Into out (len bytes), cut if longer. */
void ec_procs_prefix_format(const char *tmpl, const char *role, int64_t rank, int local_rank,
                            const char *hostname, char *out, size_t len);
/* The prefix of local rank r's console lines where torchrun's tee puts one;
 * NULL or "": torchrun's own, "[<role><local_rank>]:". */
void ec_procs_set_prefix(ec_procs_t *p, int r, const char *prefix);
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
/* The fd to poll for the ranks' output (an epoll set of every output pipe;
 * -1 when it could not be made), and the pump that copies what is
 * available (at most 1 MiB a call) to the files, the console and the kept
 * lines; it never blocks. */
int ec_procs_out_fd(const ec_procs_t *p);
void ec_procs_pump(ec_procs_t *p);
/* The last n lines of rank r's output (its log file, else the kept lines),
 * malloc'd array of malloc'd strings. */
int ec_procs_tail(const ec_procs_t *p, int r, int n, char ***lines);
/* Where rank r's output is, for messages and failure records: its log file,
 * or a sentence saying it went to the console only.  Never NULL. */
const char *ec_procs_log_path(const ec_procs_t *p, int r);
/* The file that holds all of rank r's output (Paddle's workerlog.N), or
 * NULL (torchrun: streams apart, or none). */
const char *ec_procs_log_file(const ec_procs_t *p, int r);
/* Bytes of output rank r's processes wrote through the agent so far (0 for
 * one that writes straight to its file: Paddle's ranks but 0). */
uint64_t ec_procs_output_bytes(const ec_procs_t *p, int r);
/* Where the agent keeps its per-rank state files (progress files):
 * log_dir made absolute (Paddle), the private directory (torchrun). */
const char *ec_procs_state_dir(const ec_procs_t *p);
/* torchrun style with --log_dir: <log_dir>/<run_id>_XXXXXX, where each
 * attempt's files go; "" otherwise. */
const char *ec_procs_run_dir(const ec_procs_t *p);
/* Rank r's TORCHELASTIC_ERROR_FILE for a start in `attempt`, into buf
 * (its directory made): state_dir/error.<r>.json (Paddle, or torchrun
 * without --log_dir), the attempt's <r>/error.json (torchrun with it).
 * Returns 0 or -1 (errno). */
int ec_procs_error_file(ec_procs_t *p, int r, int attempt, char *buf, size_t len);

#endif
