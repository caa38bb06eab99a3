/* `ecoord launch`: the per-node agent.
 *
 * The main thread owns the training processes and runs one poll loop over a
 * self-pipe (woken by signals and by the coordinator's callbacks) and local
 * rank 0's output.  The node coordinator (coord/node/node.c) runs on its own
 * threads and hands over epochs and job status through `inbox`.
 *
 * The fence: a node whose lease etcd has not confirmed for TTL - margin
 * (--lease_margin) stops acting before etcd can expire the lease and the
 * others re-form without it, so two groups never train at once.  Restart
 * mode: the agent stops its processes; in place, the worker library refuses
 * collectives by itself (worker/ecw.c).  Once the lease is confirmed again,
 * the node asks for a re-form of the same members (incarnation bump), or
 * rejoins as a new registration if the lease was lost meanwhile.
 *
 * Boots (in place, --join_ready_timeout > 0): a process never makes the job
 * wait for its start.  The agent starts its processes before its node is
 * admitted (at registration, and at once when it replaces a dead one), with
 * no epoch in their environment; each says when it is ready (ecw_init
 * writes the time into its progress file) and the node's record says
 * booting until every one has, so the leader admits the node only then.  A
 * member that replaces a process steps out of the job for the boot (its
 * record says booting, with a new incarnation): the others go on without
 * it, one epoch, and it comes back once ready. */
#define _GNU_SOURCE
#include "launch.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "barrier.h"
#include "connect.h"
#include "embed.h"
#include "endpoints.h"
#include "env.h"
#include "epoch_fetch.h"
#include "errorfile.h"
#include "gpus.h"
#include "keys.h"
#include "log.h"
#include "metrics.h"
#include "progress.h"
#include "netaddr.h"
#include "node.h"
#include "planner.h"
#include "procs.h"
#include "program.h"
#include "serve_etcd.h"

#define EC_VERSION "0.1.0"

extern char **environ;

static int wake_fd = -1;
/* sig_term: the first SIGINT, SIGTERM or SIGHUP (a graceful leave: a
 * closed terminal or a dropped SSH session too, as torchrun); sig_kill_now:
 * the second (stop the processes at once and exit), which also cuts short a
 * grace period in progress (ec_procs_set_abort). */
static volatile sig_atomic_t sig_term, sig_kill_now, sig_last;

static void on_signal(int s)
{
    int saved = errno;
    if (s == SIGINT || s == SIGTERM || s == SIGHUP) {
        if (sig_term)
            sig_kill_now = 1;
        sig_term = 1;
        sig_last = s;
    }
    if (wake_fd >= 0) {
        ssize_t w = write(wake_fd, "s", 1);
        (void)w;
    }
    errno = saved;
}

/* The console (stdout) behind a bounded queue: the coordinator's threads
 * log through it and rank 0's output is copied to it, and none of them may
 * block when nobody reads stdout (a stopped pager, Ctrl-S, a stuck log
 * shipper): what does not fit is dropped and counted. */
#define CONSOLE_QUEUE_BYTES (1u << 20)
#define CONSOLE_FLUSH_MS 2000
/* The stop barrier's etcd calls, from the main loop: a slow etcd delays a
 * start by at most this per look, never the loop's signals and reaping
 * by the client's default 5 s. */
#define BARRIER_CALL_MS 1000
static ec_outq_t *console_q;

/* LAUNCH INFO 2022-07-20 12:10:15,863 message (Paddle's console form). */
static void console(ec_log_level_t lvl, const char *msg, void *arg)
{
    (void)arg;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char ts[32];
    strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
    char line[1200];
    int n = snprintf(line, sizeof(line), "LAUNCH %s %s,%03d %s\n", ec_log_level_name(lvl), ts,
                     (int)(tv.tv_usec / 1000), msg);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line)) {
        n = (int)sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    if (console_q) {
        ec_outq_write_line(console_q, line, (size_t)n);
    } else {
        fputs(line, stdout);
        fflush(stdout);
    }
}

typedef struct agent {
    const ec_config_t *cfg;
    ec_program_t prog;  /* the command each local rank runs */
    ec_embed_t *embed;
    char *endpoints;
    ec_etcd_t *c;
    ec_node_t *node;
    /* Restart mode's stop barrier (barrier.h; NULL in place), on a client
     * of its own with a short call deadline: it reads from the main loop. */
    ec_barrier_t *barrier;
    ec_etcd_t *barrier_c;
    ec_procs_t *procs;
    ec_metrics_t *metrics; /* NULL: --metrics_port=0 */
    char host[256], ifname[64];
    char log_dir[4096]; /* --log_dir made absolute: ranks may change directory */
    int nproc;
    ec_gpus_t gpus; /* which GPUs the processes get (coord/util/gpus.h) */
    uint16_t *ports;
    int *resv;
    bool reserved;
    int pipefd[2];
    /* inbox, under lock */
    pthread_mutex_t lock;
    ec_epoch_t *new_epoch;
    ec_job_state_t job_state;
    char *job_reason;
    /* main thread */
    ec_epoch_t *epoch;
    int m_id;
    bool *done;
    bool node_done;
    int restarts;
    uint64_t epochs_seen;
    int64_t start_ms;
    /* A failure folded into a membership change (after_failure): the
     * processes are stopped and the epoch that drops the lost peer is
     * awaited until fold_until (monotonic ms; 0: none), after which the
     * failure of local rank fold_rank counts as this node's own. */
    int64_t fold_until;
    int fold_rank;
    /* In place: the local ranks whose failure was folded, started again
     * with the epoch that drops the lost peer (rank r: bit r % 64) */
    uint64_t fold_ranks;
    bool fenced;          /* the lease is not confirmed: processes stopped */
    int64_t fenced_since; /* monotonic ms */
    /* the ranks' progress (coord/agent/progress.h): sampled every pass, written
     * into our record when ec_progress_publish_due says so */
    ec_progress_t *progress;
    int64_t silence_ms;
    ec_node_progress_t pub; /* what was last written (seq 0: nothing) */
    int64_t pub_ms;
    int64_t hang_poll_ms;   /* last look for the leader's hang verdict */
    /* Boots (top of the file): gated, the node is admitted only once every
     * process is ready; booting, our record says it is not yet; per rank,
     * when the running process was started (monotonic ms, 0: none) and
     * whether it was killed for not becoming ready (reported already). */
    bool gated;
    bool booting;
    int64_t boot_started_ms;
    int64_t *rank_started_ms;
    uint64_t not_ready_killed;
    uint64_t not_ready_hinted; /* told that a program must join the epochs to be ready */
    bool admitted_once;     /* the console says +admitted once per boot */
    /* How this agent ends, for the closing block (set where it decides to
     * exit; "" until then). */
    char outcome[600];
    /* The janitor's watchdog deadline last armed (monotonic ms; 0: none):
     * a rank SIGKILLed at or after it was killed by the janitor because this
     * agent was stuck (in an etcd call past its fence deadline, frozen),
     * not by a fault of its own. */
    int64_t watchdog_at;
    /* The last deadline that passed before this agent renewed or disarmed
     * it (it was held up: the janitor fired then), 0: none; a rank SIGKILLed
     * that started before it was the watchdog's, whatever the deadline is
     * now (the agent, thawed, may confirm its lease and renew before it
     * reaps). */
    int64_t watchdog_missed;
    int64_t watchdog_counted; /* the firing counted (ec_node_count_fence_stop) */
    /* Fault tolerance off (cfg->fail_fast): the exit code of the last
     * failed process (128+signal when killed; 127: it could not start),
     * which the agent exits with (fail_job). */
    int fail_code;
} agent_t;

static void set_outcome(agent_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_outcome(agent_t *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->outcome, sizeof(a->outcome), fmt, ap);
    va_end(ap);
}

/* The fence margin and threshold, in ms. */
static int64_t lease_margin_ms(const ec_config_t *cfg)
{
    return cfg->lease_ttl_ms * cfg->lease_margin_pct / 100;
}

static int64_t fence_after_ms(const ec_config_t *cfg)
{
    return cfg->lease_ttl_ms - lease_margin_ms(cfg);
}

static void wake(agent_t *a)
{
    ssize_t w = write(a->pipefd[1], "e", 1);
    (void)w;
}

static void on_epoch(const ec_epoch_t *ep, void *arg)
{
    agent_t *a = arg;
    ec_epoch_t *cp = ec_epoch_dup(ep);
    pthread_mutex_lock(&a->lock);
    ec_epoch_free(a->new_epoch); /* only the newest matters */
    a->new_epoch = cp;
    pthread_mutex_unlock(&a->lock);
    wake(a);
}

static void on_job(const ec_job_status_t *st, void *arg)
{
    agent_t *a = arg;
    pthread_mutex_lock(&a->lock);
    a->job_state = st->state;
    free(a->job_reason);
    a->job_reason = st->reason && *st->reason ? strdup(st->reason) : NULL;
    pthread_mutex_unlock(&a->lock);
    wake(a);
}

static void on_event(const char *ev, void *arg)
{
    /* already logged through ec_log; leader and lease gauges follow it */
    ec_metrics_event(((agent_t *)arg)->metrics, ev);
}

static const char *rebuild_name(const ec_config_t *cfg)
{
    return cfg->rebuild == EC_REBUILD_INPROCESS ? "inprocess" : "restart";
}

static void write_endpoints_log(agent_t *a, const ec_epoch_t *ep)
{
    if (a->cfg->torchrun.on)
        return; /* Paddle's file: torchrun writes none */
    char *eps = NULL;
    if (ec_epoch_endpoints(ep, "\n", &eps, NULL) < 0)
        return;
    char path[600], tmp[620];
    snprintf(path, sizeof(path), "%s/endpoints.log", a->cfg->log_dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "PADDLE_TRAINER_ENDPOINTS:\n%s\n", eps);
        fclose(f);
        rename(tmp, path);
    }
    free(eps);
}

/* A follower holds a view of a split epoch (its own chunk and the next).
 * The environment's list of every rank's endpoint needs them all: when
 * that list fits one environment string (env.c; up to about 6,500 ranks),
 * the rest is read (a range of chunks, once per epoch per node, while
 * every node's copy is small); above it no process can be given the list
 * anyway, and the view is kept. */
static void complete_view(agent_t *a, ec_epoch_t *ep)
{
    if (ep->present == ep->nmembers || (int64_t)ep->world_size * 24 > 128 * 1024)
        return;
    ec_keys_t k;
    ec_error_t err = {0};
    if (ec_keys_init(&k, a->cfg->etcd_prefix, a->cfg->job_id, &err) < 0 ||
        ec_epoch_complete(a->c, &k, ep, &err) < 0)
        ec_log(EC_LOG_WARN, "epoch %" PRIu64 ": cannot read every member for "
               "PADDLE_TRAINER_ENDPOINTS: %s", ep->number, err.msg);
}

static int64_t failure_rank(const agent_t *a, int r)
{
    return a->m_id >= 0 ? ec_rank(a->m_id, a->nproc, r) : -1;
}

static void record_failure(agent_t *a, ec_failure_t *f)
{
    ec_metrics_failure(a->metrics, f->kind);
    ec_error_t err = {0};
    if (ec_node_record_failure(a->node, f, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot record the failure in etcd: %s", err.msg);
}

/* A rank that could not even be started is recorded like one that exited
 * 127 (a shell's "command not found"), with the reason as its log. */
static void record_start_failure(agent_t *a, int r, const char *why)
{
    int64_t rank = failure_rank(a, r);
    a->fail_code = 127;
    char *lines[] = {(char *)why};
    ec_failure_t f = {
        .node_id = (char *)a->cfg->node_id,
        .kind = EC_FAILURE_EXITED,
        .local_rank = r,
        .global_rank = rank >= 0 ? (int)rank : 0,
        .exit_code = 127,
        .epoch = a->epoch ? a->epoch->number : 0,
        .time_ms = ec_wall_ms(),
        .log_path = (char *)ec_procs_log_path(a->procs, r),
        .nlines = 1,
        .last_lines = lines,
    };
    record_failure(a, &f);
}

/* Local rank r's TORCHELASTIC_ERROR_FILE (coord/agent/procs.h): beside its
 * workerlog, or where torchrun puts it. */
static void error_file(const agent_t *a, int r, char *buf, size_t len)
{
    if (ec_procs_error_file(a->procs, r, a->restarts, buf, len) < 0)
        ec_log(EC_LOG_WARN, "cannot make the directory of %s: %s", buf, strerror(errno));
}

/* Local rank r's console prefix from torchrun's template
 * (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE), for the rank it holds now: a
 * process kept across epochs (in place) gets its new rank's. */
static void set_prefix(agent_t *a, int r, bool ahead)
{
    const char *tpl = a->cfg->torchrun.prefix_template;
    if (!a->cfg->torchrun.on || !*tpl)
        return;
    char buf[256];
    int64_t rank = !ahead && a->m_id >= 0 ? ec_rank(a->m_id, a->nproc, r) : -1;
    ec_procs_prefix_format(tpl, a->cfg->role, rank, r, a->cfg->hostname, buf, sizeof(buf));
    ec_procs_set_prefix(a->procs, r, buf);
}

/* Start local rank r in the current epoch (a->epoch, a->m_id), or, ahead
 * of admission (no epoch in its environment; in place only), as a process
 * that follows the job's epochs itself and is told its rank by them. */
static int start_rank_as(agent_t *a, int r, bool ahead)
{
    char errpath[4200];
    error_file(a, r, errpath, sizeof(errpath));
    /* what an earlier run of this rank reported is not about this one */
    if (unlink(errpath) < 0 && errno != ENOENT)
        ec_log(EC_LOG_WARN, "cannot remove the old error file %s (%s): a failure of local rank %d "
                            "may be shown with an old exception", errpath, strerror(errno), r);
    ec_env_ctx_t ctx = {
        .job_id = a->cfg->job_id,
        .node_id = a->cfg->node_id,
        .log_dir = a->cfg->log_dir,
        .elastic_server = a->endpoints,
        .etcd_prefix = a->cfg->etcd_prefix,
        .rebuild = rebuild_name(a->cfg),
        .ngpus = a->gpus.n,
        .visible_devices = a->gpus.n ? a->gpus.visible : NULL,
        .restart_count = a->restarts,
        .max_restarts = a->cfg->max_restart,
        .lease = ec_node_lease(a->node),
        .lease_ttl_ms = a->cfg->lease_ttl_ms,
        .lease_margin_ms = lease_margin_ms(a->cfg),
        .etcd = a->cfg,
        .error_file = errpath,
        .role = a->cfg->role,
        .nproc = a->nproc,
        .host = a->host,
        .port = a->ports[r],
        .start_epoch = ahead ? ec_node_epoch_floor(a->node) : 0,
        .incarnation = a->gated ? ec_node_incarnation(a->node) : 0,
        .torch_version = a->prog.needs && !strcmp(a->prog.needs, "torch") ? a->prog.version : NULL,
    };
    char **env = NULL;
    ec_error_t err = {0};
    if (a->progress) {
        if (ec_progress_reset(a->progress, r, ec_procs_log_file(a->procs, r), &err) == 0)
            ctx.progress_file = ec_progress_path(a->progress, r);
        else
            ec_log(EC_LOG_WARN, "%s", err.msg);
        err = (ec_error_t){0};
    }
    if (ec_env_build(ahead ? NULL : a->epoch, a->m_id, r, &ctx, environ, &env, &err) < 0) {
        ec_log(EC_LOG_ERROR, "cannot build the environment of local rank %d: %s", r, err.msg);
        return err.code;
    }
    char marker[512];
    if (ahead) {
        snprintf(marker, sizeof(marker),
                 "======== ecoord: local rank %d of node %s started before admission (epoch "
                 "%" PRIu64 " or later, incarnation %" PRIu64 "), restart %d ========\n",
                 r, a->cfg->node_id, ctx.start_epoch, ctx.incarnation, a->restarts);
    } else {
        int64_t rank = ec_rank(a->m_id, a->nproc, r);
        snprintf(marker, sizeof(marker),
                 "======== ecoord epoch %" PRIu64 ": rank %lld of world %d, local rank %d, node %s, "
                 "reason %s, restart %d ========\n",
                 a->epoch->number, (long long)rank, a->epoch->world_size, r, a->cfg->node_id,
                 ec_epoch_reason_name(a->epoch->reason), a->restarts);
    }
    set_prefix(a, r, ahead);
    int rc = ec_procs_start(a->procs, r, a->restarts, env, marker, &err);
    ec_env_free(env);
    if (rc < 0) {
        ec_log(EC_LOG_ERROR, "cannot start local rank %d: %s", r, err.msg);
        record_start_failure(a, r, err.msg);
    } else {
        a->rank_started_ms[r] = ec_mono_ms();
        a->not_ready_killed &= ~(1ULL << (r % 64));
        a->not_ready_hinted &= ~(1ULL << (r % 64));
    }
    return rc;
}

static int start_rank(agent_t *a, int r)
{
    return start_rank_as(a, r, false);
}

/* The node's boot as our record says it, phase booting since now. */
static void boot_begin(agent_t *a, const char *why, bool bump)
{
    ec_node_boot_t b = {.phase = EC_BOOT_BOOTING, .started_at_ms = ec_wall_ms()};
    snprintf(b.why, sizeof(b.why), "%s", why);
    for (int r = 0; r < a->nproc; r++)
        b.nready += ec_procs_pid(a->procs, r) > 0 && ec_progress_ready_ns(a->progress, r) != 0;
    ec_error_t err = {0};
    if (ec_node_set_boot(a->node, &b, bump, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot write this node's boot: %s (retrying)", err.msg);
    if (!a->booting)
        a->boot_started_ms = ec_mono_ms();
    a->booting = true;
    a->admitted_once = false;
}

/* In place, gated: (re)start local rank r ahead of admission and step this
 * node out of the job until it is ready: a new incarnation, so the leader
 * publishes an epoch without it at once, as for a lost node, and the new
 * process joins no epoch planned before it (not even one that admits this
 * node as it dies).  why: the record's and the console's reason. */
static int restart_ahead(agent_t *a, int r, const char *why)
{
    bool member = a->m_id >= 0;
    boot_begin(a, why, true); /* the new incarnation first: the process carries it */
    int rc = start_rank_as(a, r, true);
    if (member)
        ec_log(EC_LOG_INFO, "+step-out node %s: %s; local rank %d started again; the job goes on "
                            "without this node until it is ready, then admits it again",
               a->cfg->node_id, why, r);
    return rc;
}

/* Stop every local process (SIGTERM, then SIGKILL after grace_ms) and, in
 * restart mode, confirm it on this node's claim to its ranks, so that the
 * next holder of those ranks need not wait (barrier.h).  Not for the fence:
 * etcd is out of reach then (check_fence confirms once it is back). */
static void stop_all(agent_t *a, int64_t grace_ms)
{
    ec_procs_stop_all(a->procs, grace_ms);
    ec_barrier_cancel(a->barrier);
    ec_barrier_stopped(a->barrier);
}

/* Start every local rank (ahead: before admission): the first that could
 * not be started, or -1. */
static int start_all_as(agent_t *a, bool ahead)
{
    int failed = -1;
    for (int r = 0; r < a->nproc; r++) {
        a->done[r] = false;
        if (start_rank_as(a, r, ahead) < 0 && failed < 0)
            failed = r;
    }
    a->node_done = false;
    return failed;
}

static int start_all(agent_t *a)
{
    return start_all_as(a, false);
}

static int after_failure(agent_t *a, int r, bool start_failed, const char *what);

/* Start the processes of the epoch applied (a->epoch, a->m_id), and say
 * this node is ready.  Returns an exit code when the agent must exit, else
 * -1. */
static int start_epoch(agent_t *a)
{
    int failed = start_all(a);
    ec_error_t err = {0};
    if (ec_node_set_state(a->node, EC_NODE_READY, NULL, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot mark this node ready: %s", err.msg);
    return failed >= 0 ? after_failure(a, failed, true, "could not be started") : -1;
}

/* Restart mode, an epoch waiting for its barrier: look again, and start its
 * processes once it is through.  *wait_ms (may be NULL) is lowered to when
 * to look next.  Returns an exit code when the agent must exit, else -1. */
static int barrier_tick(agent_t *a, int64_t *wait_ms)
{
    if (!ec_barrier_pending(a->barrier))
        return -1;
    if (a->fenced || !a->epoch || a->m_id < 0) {
        ec_barrier_cancel(a->barrier); /* the fence's lift or the next epoch starts it */
        return -1;
    }
    int64_t next = 0;
    if (ec_barrier_tick(a->barrier, ec_node_lease(a->node), &next))
        return start_epoch(a);
    int64_t left = next - ec_mono_ms();
    if (wait_ms && left < *wait_ms)
        *wait_ms = left > 1 ? left : 1;
    return -1;
}

/* Returns an exit code when the agent must exit, else -1. */
static int apply_epoch(agent_t *a, ec_epoch_t *ep)
{
    ec_epoch_free(a->epoch);
    a->epoch = ep;
    a->epochs_seen++;
    int m = ec_epoch_find_member(ep, a->cfg->node_id);
    ec_log(EC_LOG_INFO, "+epoch %" PRIu64 " world=%d reason=%s%s%s nodes=%d leader=%s", ep->number,
           ep->world_size, ec_epoch_reason_name(ep->reason),
           ep->reason_detail && *ep->reason_detail ? ": " : "",
           ep->reason_detail ? ep->reason_detail : "", ep->nmembers, ep->leader_id);
    if (ep->np_max > 0 && (ep->np_min != a->cfg->np.min || ep->np_max != a->cfg->np.max)) {
        /* The job's node counts are its leader's; one node believing others
         * would decide differently once it leads. */
        char mine[32], job[32];
        snprintf(mine, sizeof(mine), "%d:%d", a->cfg->np.min, a->cfg->np.max);
        snprintf(job, sizeof(job), "%d:%d", ep->np_min, ep->np_max);
        ec_log(EC_LOG_ERROR, "-node %s: this node runs --np=%s but job %s runs --np=%s (every "
                             "node uses the same); leaving, the job goes on without it: restart "
                             "this node with --np=%s",
               a->cfg->node_id, mine, a->cfg->job_id, job, job);
        ec_error_t err = {0};
        stop_all(a, a->cfg->grace_period_ms);
        ec_node_leave(a->node, &err);
        set_outcome(a, "this node left the job: it runs --np=%s, the job --np=%s", mine, job);
        return 1;
    }
    if (m < 0 && ep->nproc != a->nproc) {
        /* The leader refuses a node whose N differs (planner.c); waiting
         * as a standby would wait forever. */
        ec_log(EC_LOG_ERROR, "-node %s: this node runs --nproc_per_node=%d but job %s runs %d "
                             "processes per node (every node runs the same number); leaving, the "
                             "job goes on without it: restart this node with --nproc_per_node=%d",
               a->cfg->node_id, a->nproc, a->cfg->job_id, ep->nproc, ep->nproc);
        ec_error_t err = {0};
        stop_all(a, a->cfg->grace_period_ms);
        ec_node_leave(a->node, &err);
        set_outcome(a, "this node left the job: it runs --nproc_per_node=%d, the job %d",
                    a->nproc, ep->nproc);
        return 1;
    }
    if (m < 0 && a->gated && ec_procs_running(a->procs)) {
        /* Its processes follow the job themselves and wait for an epoch
         * that admits this node: kept, booted and with their state. */
        a->m_id = -1;
        ec_error_t err = {0};
        ec_node_set_state(a->node, EC_NODE_JOINING, NULL, &err);
        ec_log(EC_LOG_INFO, "this node is a standby in epoch %" PRIu64 " (not a member): its "
                            "processes %s and wait to be admitted", ep->number,
               a->booting ? "are booting" : "are ready");
        return -1;
    }
    if (m < 0) {
        a->m_id = -1;
        if (ec_procs_running(a->procs))
            ec_log(EC_LOG_INFO, "this node is not in epoch %" PRIu64 ": stopping its processes",
                   ep->number);
        else
            ec_log(EC_LOG_INFO, "this node is a standby in epoch %" PRIu64 ": waiting", ep->number);
        /* and whatever finished ranks left running */
        stop_all(a, a->cfg->grace_period_ms);
        return -1;
    }
    bool was_running = ec_procs_running(a->procs) > 0;
    a->m_id = m;
    for (int r = 0; r < a->nproc; r++)
        set_prefix(a, r, false);
    complete_view(a, ep);
    write_endpoints_log(a, ep);
    ec_log(EC_LOG_INFO, "node %s is M_id %d: ranks %lld-%lld of %d", a->cfg->node_id, m,
           (long long)ec_rank(m, a->nproc, 0), (long long)ec_rank(m, a->nproc, a->nproc - 1),
           ep->world_size);
    if (a->cfg->rebuild == EC_REBUILD_INPROCESS && was_running) {
        /* The processes follow epochs themselves (worker library). */
        if (a->gated && !a->booting && !a->admitted_once) {
            a->admitted_once = true;
            ec_node_boot_t b = ec_node_boot(a->node);
            if (b.phase == EC_BOOT_READY && b.started_at_ms > 0)
                ec_log(EC_LOG_INFO, "+admitted node %s in epoch %" PRIu64 ": %lld ms after its "
                                    "processes started, %lld ms after they were ready",
                       a->cfg->node_id, ep->number, (long long)(ec_wall_ms() - b.started_at_ms),
                       (long long)(ec_wall_ms() - b.ready_at_ms));
        }
        ec_error_t err = {0};
        if (ec_node_set_state(a->node, EC_NODE_READY, NULL, &err) < 0)
            ec_log(EC_LOG_WARN, "cannot mark this node ready: %s", err.msg);
        return -1;
    }
    if (a->fenced && a->cfg->rebuild == EC_REBUILD_RESTART) {
        /* Started now, they could train past our lease: once it is
         * confirmed, the re-form this node asks for starts them. */
        ec_log(EC_LOG_INFO, "fenced: not starting the processes of epoch %" PRIu64 " until "
                            "this node's lease is confirmed", ep->number);
        return -1;
    }
    /* every process of the last epoch, and what finished ranks left running */
    stop_all(a, a->cfg->grace_period_ms);
    if (a->barrier) {
        /* not before the previous holders of our ranks stopped theirs */
        ec_barrier_begin(a->barrier, ep->number, m, ec_rank(m, a->nproc, 0),
                         ec_rank(m, a->nproc, a->nproc - 1));
        return barrier_tick(a, NULL);
    }
    return start_epoch(a);
}

/* The command line for messages: whole when short, else cut at about max
 * bytes with an ellipsis and how much was left out.  malloc'd. */
static char *command_line(const ec_program_t *p, size_t max)
{
    size_t total = 0;
    for (int i = 0; i < p->argc; i++)
        total += strlen(p->argv[i]) + 1;
    char *s = malloc(max + 64);
    if (!s)
        return NULL;
    size_t len = 0;
    s[0] = '\0';
    for (int i = 0; i < p->argc && len < total; i++) {
        size_t n = strlen(p->argv[i]);
        size_t room = max - len;
        if (n + 1 > room) {
            memcpy(s + len, p->argv[i], room);
            len += room;
            snprintf(s + len, 64, "... (%zu more bytes)", total - len - 1);
            return s;
        }
        memcpy(s + len, p->argv[i], n);
        len += n;
        s[len++] = i + 1 < p->argc ? ' ' : '\0';
    }
    s[len] = '\0';
    return s;
}

static void report_failure(agent_t *a, int r, int status)
{
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    int64_t rank = failure_rank(a, r);
    char what[64];
    if (sig)
        snprintf(what, sizeof(what), "signal %d (%s)", sig, strsignal(sig));
    else
        snprintf(what, sizeof(what), "exit code %d", code);
    char *cmd = command_line(&a->prog, 400); /* one console line (ec_log: 1 KB) */
    ec_log(EC_LOG_ERROR, "Container failed !!!");
    if (rank >= 0)
        ec_log(EC_LOG_ERROR, "  rank %lld (local rank %d, node %s, epoch %" PRIu64 ") ended with %s",
               (long long)rank, r, a->cfg->node_id, a->epoch ? a->epoch->number : 0, what);
    else /* started before its node was admitted (in place): no rank yet */
        ec_log(EC_LOG_ERROR, "  local rank %d of node %s (booting: no rank yet, the node not "
                             "admitted) ended with %s", r, a->cfg->node_id, what);
    ec_log(EC_LOG_ERROR, "  command: %s", cmd ? cmd : a->prog.argv[0]);
    free(cmd);
    ec_log(EC_LOG_ERROR, "  log: %s", ec_procs_log_path(a->procs, r));
    /* What the process said about its failure (torch's @record), if anything. */
    char errpath[4200];
    error_file(a, r, errpath, sizeof(errpath));
    ec_errfile_t ef = {0};
    ec_error_t eerr = {0};
    int erc = ec_errfile_read(errpath, &ef, &eerr);
    if (erc == 0) {
        char when[64] = "an unknown time";
        if (ef.timestamp > 0) {
            time_t t = (time_t)ef.timestamp;
            struct tm tm;
            localtime_r(&t, &tm);
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
        }
        ec_log(EC_LOG_ERROR, "  exception: %.700s", ef.message);
        if (ef.raised[0])
            ec_log(EC_LOG_ERROR, "  raised at: %.500s%s%.300s", ef.raised,
                   ef.raised_code[0] ? ": " : "", ef.raised_code);
        if (ef.entered[0] && strcmp(ef.entered, ef.raised) != 0)
            ec_log(EC_LOG_ERROR, "  entered at: %.500s", ef.entered);
        ec_log(EC_LOG_ERROR, "  reported by rank %lld (local rank %d) on node %s at %s, in %s",
               (long long)rank, r, a->cfg->node_id, when, errpath);
    } else if (erc != EC_ENOTFOUND) {
        ec_log(EC_LOG_WARN, "  the process's error file is unreadable: %s", eerr.msg);
    }
    char **lines = NULL;
    int n = ec_procs_tail(a->procs, r, 10, &lines);
    for (int i = 0; i < n; i++)
        ec_log(EC_LOG_ERROR, "  | %s", lines[i]);
    if (a->epoch)
        ec_log(EC_LOG_ERROR, "ABORT!!! Out of all %d trainers, the trainer process with rank=[%lld] "
                             "was aborted. Please check its log.",
               a->epoch->world_size, (long long)rank);
    ec_failure_t f = {
        .node_id = (char *)a->cfg->node_id,
        .kind = sig ? EC_FAILURE_SIGNALED : EC_FAILURE_EXITED,
        .local_rank = r,
        .global_rank = rank >= 0 ? (int)rank : 0,
        .exit_code = code >= 0 ? code : 0,
        .signal = sig,
        .epoch = a->epoch ? a->epoch->number : 0,
        .time_ms = ec_wall_ms(),
        .log_path = (char *)ec_procs_log_path(a->procs, r),
        .nlines = n,
        .last_lines = lines,
        .message = erc == 0 ? ef.message : NULL,
        .raised_at = erc == 0 ? ef.raised : NULL,
    };
    /* one etcd value: a message of a few pages is cut, the log has it all */
    if (f.message && strlen(f.message) > 2000)
        f.message[2000] = '\0';
    if (f.raised_at && strlen(f.raised_at) > 1000)
        f.raised_at[1000] = '\0';
    record_failure(a, &f);
    ec_errfile_release(&ef);
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

/* The watchdog's deadline is replaced (or dropped) at now: if it had passed,
 * the janitor fired at it (watchdog_missed). */
static void watchdog_disarm(agent_t *a, int64_t now)
{
    if (a->watchdog_at && now >= a->watchdog_at)
        a->watchdog_missed = a->watchdog_at;
    a->watchdog_at = 0;
}

/* The watchdog deadline at which the janitor may have killed a rank started
 * at `started` (monotonic ms): the armed one, passed; or one that passed
 * while this agent was held up, after the rank started; 0: none. */
static int64_t watchdog_fired(const agent_t *a, int64_t started)
{
    if (a->watchdog_at && ec_mono_ms() >= a->watchdog_at)
        return a->watchdog_at;
    if (a->watchdog_missed && started && started < a->watchdog_missed)
        return a->watchdog_missed;
    return 0;
}

/* Local rank r never said it was ready (in place, before admission): what
 * it did ("exited 0 before it was ready"), logged (ending with `then`) and
 * recorded as a failure of kind not-ready with the way out, `more` added
 * to it. */
static void record_not_ready(agent_t *a, int r, const char *what, const char *then,
                             const char *more)
{
    char msg[700];
    snprintf(msg, sizeof(msg), "local rank %d %s: under --rebuild=inprocess a process says it is "
             "ready when it has joined the job's epochs (ecw_init, ecoord.torch's init); a "
             "program that calls neither never does: run it with --rebuild=restart%s (see %s)",
             r, what, more, ec_procs_log_path(a->procs, r));
    ec_log(EC_LOG_ERROR, "-not-ready node %s: %s%s", a->cfg->node_id, msg, then);
    char *lines[] = {msg};
    ec_failure_t f = {
        .node_id = (char *)a->cfg->node_id,
        .kind = EC_FAILURE_NOT_READY,
        .local_rank = r,
        .global_rank = 0,
        .epoch = a->epoch ? a->epoch->number : 0,
        .time_ms = ec_wall_ms(),
        .log_path = (char *)ec_procs_log_path(a->procs, r),
        .nlines = 1,
        .last_lines = lines,
        .message = msg,
    };
    record_failure(a, &f);
}

/* Returns an exit code when the agent must exit, else -1. */
static int on_child_exit(agent_t *a, int r, int status)
{
    int64_t started = a->rank_started_ms[r];
    a->rank_started_ms[r] = 0;
    if (a->not_ready_killed & (1ULL << (r % 64))) {
        /* killed for not becoming ready: reported as such (boot_tick) */
        a->not_ready_killed &= ~(1ULL << (r % 64));
        return after_failure(a, r, true, "was not ready in time");
    }
    int64_t fired = watchdog_fired(a, started);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && fired) {
        /* The janitor's watchdog: this agent was stuck past its fence
         * deadline (an etcd call through a raft election, a cut), so its
         * ranks were stopped before the lease could expire.  Not a fault
         * of the program: nothing recorded or counted; the fence (next
         * pass) or a re-form starts them again. */
        ec_log(EC_LOG_WARN, "-fenced: local rank %d was stopped by the janitor's watchdog (this "
                            "agent was held up past its fence deadline): not a failure of the "
                            "program, not counted against --max_restart=%d", r,
               a->cfg->max_restart);
        if (a->watchdog_counted != fired) { /* once per firing, not per rank */
            a->watchdog_counted = fired;
            ec_node_count_fence_stop(a->node);
        }
        stop_all(a, a->cfg->grace_period_ms);
        ec_error_t err = {0};
        if (a->epoch && a->m_id >= 0 && ec_node_bump_incarnation(a->node, &err) < 0)
            ec_log(EC_LOG_WARN, "cannot ask for a re-form: %s (retrying)", err.msg);
        return -1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && a->gated && a->booting &&
        ec_progress_ready_ns(a->progress, r) == 0) {
        /* Done before it ever followed the job: its node can never be
         * admitted, and nothing it did belongs to an epoch. */
        record_not_ready(a, r, "exited 0 before it was ready", "", "");
        a->fail_code = 1;
        return after_failure(a, r, true, "exited 0 before it was ready");
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        a->done[r] = true;
        int ndone = 0;
        for (int i = 0; i < a->nproc; i++)
            ndone += a->done[i];
        ec_log(EC_LOG_INFO, "local rank %d finished (%d of %d done)", r, ndone, a->nproc);
        if (ndone == a->nproc && !a->node_done) {
            a->node_done = true;
            ec_error_t err = {0};
            ec_log(EC_LOG_INFO, "+node %s done: all its processes finished; waiting for the "
                                "others", a->cfg->node_id);
            ec_metrics_state(a->metrics, EC_MSTATE_DONE);
            if (ec_node_set_state(a->node, EC_NODE_DONE, NULL, &err) < 0)
                ec_log(EC_LOG_WARN, "cannot mark this node done: %s", err.msg);
        }
        return -1;
    }
    report_failure(a, r, status);
    a->fail_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                   : WIFEXITED(status) ? WEXITSTATUS(status)
                                       : 1;
    char what[64];
    if (WIFSIGNALED(status))
        snprintf(what, sizeof(what), "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(what, sizeof(what), "exited with code %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return after_failure(a, r, false, what);
}

/* How long a failure folded into a membership change waits for the epoch
 * that drops the lost peer: the leader's probe and eviction take well under
 * a second; a lease TTL is the fallback that this does not wait for. */
#define FOLD_WAIT_MS 3000

static int count_restart(agent_t *a, int r);
static int take_restart(agent_t *a);
static int fail_job(agent_t *a);

/* After local rank r failed (reported; what: "exited with code 3"):
 * restart within --max_restart, or leave the job.  start_failed: r could
 * not even be started (or never became ready), which says nothing about
 * the peers.  Returns an exit code when the agent must exit, else -1. */
static int after_failure(agent_t *a, int r, bool start_failed, const char *what)
{
    ec_error_t err = {0};
    /* A process often dies because a peer's node died: find silent peers
     * now and report them, so the leader can evict them without waiting for
     * their leases to expire. */
    int nd = 0;
    if (!start_failed && a->epoch && a->m_id >= 0) {
        char **dead = NULL;
        nd = ec_node_probe_members(a->node, 300, &dead, &err);
        if (nd > 0 && ec_node_report_suspects(a->node, a->epoch->number, (const char *const *)dead,
                                              (size_t)nd, &err) < 0)
            ec_log(EC_LOG_WARN, "cannot report silent peers: %s", err.msg);
        if (nd > 0)
            ec_log(EC_LOG_INFO, "+peer %s%s silent after local rank %d failed", dead[0],
                   nd > 1 ? " and others" : "", r);
        ec_node_free_ids(dead, nd > 0 ? nd : 0);
    }
    /* One loss, one epoch: a failure caused by a membership change (the
     * epoch it ran in is superseded already, or a peer of it is silent) is
     * not this node's own.  Restart mode: its processes stop and the epoch
     * that drops the peer starts them again; in place: the failed rank
     * starts again in that epoch while the others rebuild into it.  No
     * restart epoch of our own, and nothing taken from --max_restart.  A peer that was only slow answers
     * the leader's probe and no epoch comes: after FOLD_WAIT_MS the failure
     * counts after all (run()). */
    if (a->gated) {
        /* In place with boots gated: the process starts again at once and
         * this node steps out of the job until it is ready; nobody waits
         * for its boot.  Counted against --max_restart unless a peer's loss
         * caused it (the epoch was superseded, or a peer is silent). */
        bool folded = false;
        if (!start_failed && a->epoch && a->m_id >= 0) {
            pthread_mutex_lock(&a->lock);
            folded = (a->new_epoch && a->new_epoch->number > a->epoch->number) ||
                     ec_node_epoch_number(a->node) > a->epoch->number || nd > 0;
            pthread_mutex_unlock(&a->lock);
        }
        if (folded) {
            ec_log(EC_LOG_INFO, "+failure of local rank %d folded into the membership change "
                                "(a peer is gone): not counted against --max_restart=%d (%d "
                                "used)", r, a->cfg->max_restart, a->restarts);
        } else {
            int rc = take_restart(a);
            if (rc >= 0)
                return rc;
        }
        char why[EC_BOOT_WHY_MAX];
        snprintf(why, sizeof(why), "local rank %d %s", r, what ? what : "failed");
        if (restart_ahead(a, r, why) < 0)
            return after_failure(a, r, true, "could not be started"); /* bounded: counted */
        return -1;
    }
    if (!start_failed && a->epoch && a->m_id >= 0) {
        bool inplace = a->cfg->rebuild == EC_REBUILD_INPROCESS;
        pthread_mutex_lock(&a->lock);
        bool superseded = (a->new_epoch && a->new_epoch->number > a->epoch->number) ||
                          ec_node_epoch_number(a->node) > a->epoch->number;
        pthread_mutex_unlock(&a->lock);
        if (superseded || nd > 0) {
            ec_log(EC_LOG_INFO, "+failure of local rank %d folded into the membership change "
                                "(%s): %s, not counted against --max_restart=%d (%d used)",
                   r, superseded ? "its epoch was superseded" : "a peer of its epoch is silent",
                   inplace ? "started again in the next epoch (the others rebuild in place)"
                           : "stopping this node's processes for the next epoch",
                   a->cfg->max_restart, a->restarts);
            /* In place, the other ranks rebuild into the epoch that drops
             * the peer by themselves; this one starts in it (run()). */
            if (inplace)
                a->fold_ranks |= 1ULL << (r % 64);
            else
                stop_all(a, a->cfg->grace_period_ms);
            if (!a->fold_until) {
                a->fold_until = ec_mono_ms() + FOLD_WAIT_MS;
                a->fold_rank = r;
            }
            return -1;
        }
    }
    return count_restart(a, r);
}

/* In place: start the local ranks in `mask` (bit r % 64) that are not
 * running (a folded failure's, in the epoch that dropped the lost peer; an
 * epoch that found every rank stopped started them all already). */
static void start_folded(agent_t *a, uint64_t mask)
{
    if (!mask || a->cfg->rebuild != EC_REBUILD_INPROCESS || !a->epoch || a->m_id < 0)
        return;
    for (int r = 0; r < a->nproc; r++)
        if ((mask & (1ULL << (r % 64))) && ec_procs_pid(a->procs, r) == 0 && start_rank(a, r) < 0)
            ec_log(EC_LOG_WARN, "cannot start local rank %d again in epoch %" PRIu64, r,
                   a->epoch->number);
}

/* Restart this node's processes for local rank r's failure, within
 * --max_restart, or leave the job.  Returns an exit code when the agent
 * must exit, else -1. */
/* One more restart of this node's processes against --max_restart: -1
 * while within it (counted and logged), else leave the job and return the
 * exit code. */
static int take_restart(agent_t *a)
{
    ec_error_t err = {0};
    a->restarts++;
    if (a->restarts > a->cfg->max_restart && a->cfg->fail_fast)
        return fail_job(a);
    if (a->restarts > a->cfg->max_restart) {
        bool fixed = a->cfg->np.min == a->cfg->np.max;
        ec_log(EC_LOG_ERROR, "-node %s: --max_restart=%d exhausted; leaving the job%s",
               a->cfg->node_id, a->cfg->max_restart,
               fixed ? a->cfg->fixed_failure_exit == 101
                           ? " (exit 101: fixed-size job, let the scheduler restart this pod)"
                           : " (fixed-size job: --fixed_failure_exit)"
                     : a->cfg->node_failure_exit != 1 ? " (--node_failure_exit)" : "");
        ec_metrics_state(a->metrics, EC_MSTATE_FAILED);
        stop_all(a, a->cfg->grace_period_ms);
        ec_node_leave(a->node, &err);
        set_outcome(a, "this node gave up: its processes failed more than --max_restart=%d "
                    "times", a->cfg->max_restart);
        return fixed ? a->cfg->fixed_failure_exit : a->cfg->node_failure_exit;
    }
    ec_log(EC_LOG_INFO, "restarting this node's processes (%d of --max_restart=%d)", a->restarts,
           a->cfg->max_restart);
    ec_metrics_restart(a->metrics);
    return -1;
}

/* How long a failed node, fault tolerance off, waits for the leader to fail
 * the job (its record must be read before its lease goes). */
#define FAIL_JOB_WAIT_MS 5000

/* Fault tolerance off (--elastic_level=-1, Paddle's default): the first
 * failure ends the job, as Paddle's launcher stops at it.  This node's
 * processes stop, its record says failed, so the leader (this node or
 * another; planner rule 2b) fails the job and every node stops; once the job
 * says failed (or FAIL_JOB_WAIT_MS passed) the node leaves, and the agent
 * exits with the failed process's code. */
static int fail_job(agent_t *a)
{
    const ec_config_t *cfg = a->cfg;
    ec_log(EC_LOG_ERROR, "-node %s: a training process failed and fault tolerance is off "
                         "(--elastic_level=-1, Paddle's default): stopping the job, exit %d (the "
                         "process's); to restart failed processes instead pass --max_restart=N "
                         "or --elastic_level=1",
           cfg->node_id, a->fail_code);
    ec_metrics_state(a->metrics, EC_MSTATE_FAILED);
    stop_all(a, cfg->grace_period_ms);
    char why[160];
    snprintf(why, sizeof(why), "a training process failed (exit %d) and fault tolerance is off",
             a->fail_code);
    ec_error_t err = {0};
    if (ec_node_set_state(a->node, EC_NODE_FAILED, why, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot mark this node failed: %s", err.msg);
    /* A member's failure fails the job (rule 2b); a node not admitted
     * (booting in place) is no member: nothing to wait for */
    bool member = a->m_id >= 0;
    int64_t deadline = ec_mono_ms() + (member ? FAIL_JOB_WAIT_MS : 0);
    for (;;) {
        pthread_mutex_lock(&a->lock);
        ec_job_state_t js = a->job_state;
        pthread_mutex_unlock(&a->lock);
        if (js == EC_JOB_FAILED || js == EC_JOB_COMPLETED || sig_term)
            break;
        if (ec_mono_ms() >= deadline) {
            if (member)
                ec_log(EC_LOG_WARN, "the job was not marked failed within %d ms; leaving anyway",
                       FAIL_JOB_WAIT_MS);
            else
                ec_log(EC_LOG_INFO, "this node was never admitted (its process failed while it "
                                    "booted): the job does not stop for it; leaving");
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (member)
        set_outcome(a, "the job stopped at this node's failure: a training process exited %d "
                    "and fault tolerance is off (--elastic_level=-1; --max_restart=N restarts "
                    "instead)", a->fail_code);
    else
        set_outcome(a, "this node's process exited %d while the node booted, before it was "
                    "admitted, and fault tolerance is off (--elastic_level=-1; --max_restart=N "
                    "restarts instead): the node left, the job was not stopped", a->fail_code);
    err = (ec_error_t){0};
    ec_node_leave(a->node, &err);
    return a->fail_code;
}

static int count_restart(agent_t *a, int r)
{
    ec_error_t err = {0};
again:;
    int trc = take_restart(a);
    if (trc >= 0)
        return trc;
    if (a->cfg->rebuild == EC_REBUILD_INPROCESS) {
        if (start_rank(a, r) < 0) /* the peers rebuild in place around it */
            goto again;
    } else {
        stop_all(a, a->cfg->grace_period_ms);
    }
    if (ec_node_bump_incarnation(a->node, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot announce the restart: %s", err.msg);
    return -1;
}

/* The fence (see the top of the file), checked on every pass of the loop.
 * Returns how long until it must be checked again (ms). */
static int64_t check_fence(agent_t *a)
{
    const ec_config_t *cfg = a->cfg;
    int64_t confirmed = ec_node_lease_confirmed_ms(a->node);
    int64_t now = ec_mono_ms(), after = fence_after_ms(cfg);
    bool unconfirmed = confirmed <= 0 || now - confirmed >= after;
    if (unconfirmed && !a->fenced) {
        a->fenced = true;
        a->fenced_since = now;
        char why[128];
        if (confirmed > 0)
            snprintf(why, sizeof(why), "lease not confirmed for %lld ms",
                     (long long)(now - confirmed));
        else
            snprintf(why, sizeof(why), "no lease (lost, not registered again yet)");
        if (cfg->rebuild == EC_REBUILD_RESTART) {
            ec_log(EC_LOG_WARN, "-fenced: %s; stopping processes (etcd may expire the lease "
                                "%lld ms after its last confirmation; --lease_margin=%d%%)",
                   why, (long long)cfg->lease_ttl_ms, cfg->lease_margin_pct);
            /* They must be gone within the margin: SIGKILL after half of it
             * at most, whatever --grace_period says. */
            int64_t grace = lease_margin_ms(cfg) / 2;
            if (cfg->grace_period_ms < grace)
                grace = cfg->grace_period_ms;
            ec_procs_deadline(a->procs, 0); /* alive: the janitor's watchdog stands down */
            watchdog_disarm(a, now);
            bool had = ec_procs_running(a->procs) > 0;
            ec_procs_stop_all(a->procs, grace);
            if (had)
                ec_node_count_fence_stop(a->node); /* our record: `ecoord status` names it */
        } else {
            ec_log(EC_LOG_WARN, "-fenced: %s; the processes' worker library refuses "
                                "collectives until it confirms membership", why);
        }
        return 200;
    }
    if (!unconfirmed && a->fenced) {
        a->fenced = false;
        ec_log(EC_LOG_INFO, "+fence lifted: lease confirmed again after %lld ms fenced",
               (long long)(now - a->fenced_since));
        /* restart mode: the fence stopped our processes; say so now */
        ec_barrier_stopped(a->barrier);
        /* Our processes were stopped (restart) or aborted their communicator
         * (in place): have the same members re-form, which starts or
         * rebuilds them.  A node whose lease was lost meanwhile registered
         * again and is admitted as a joiner anyway. */
        ec_error_t err = {0};
        if (a->epoch && a->m_id >= 0 && ec_node_bump_incarnation(a->node, &err) < 0)
            ec_log(EC_LOG_WARN, "cannot ask for a re-form after the fence: %s (retrying)",
                   err.msg);
    }
    if (unconfirmed)
        return 200;
    /* The janitor's watchdog (coord/agent/janitor.h), for when this agent is
     * frozen and cannot fence: it SIGKILLs the ranks at our own SIGKILL
     * time, T + half the margin, still before etcd can expire the lease,
     * unless we renew the deadline (each confirmation) or fence first. */
    if (cfg->rebuild == EC_REBUILD_RESTART) {
        watchdog_disarm(a, now);
        a->watchdog_at = confirmed + after + lease_margin_ms(cfg) / 2;
        ec_procs_deadline(a->procs, a->watchdog_at);
    }
    int64_t left = confirmed + after - now;
    return left < 200 ? (left > 1 ? left : 1) : 200;
}

/* The leader found local rank r of this node hung (coord/node/node_hang.c):
 * stop every local process (a stopped one gets SIGCONT after SIGTERM) and
 * ask for a re-form of the same members, which starts them again (restart
 * mode: every node restarts; in place: the others rebuild around this
 * node's fresh processes).  Counts against --max_restart like a failure.
 * Returns an exit code when the agent must exit, else -1. */
static int on_hung(agent_t *a, int r, const char *why)
{
    ec_log(EC_LOG_WARN, "+hung %s local rank %d in epoch %" PRIu64 ": %s; stopping this node's "
                        "processes to restart them",
           a->cfg->node_id, r, a->epoch ? a->epoch->number : 0, why);
    stop_all(a, a->cfg->grace_period_ms);
    a->pub.silent_ms = 0; /* what we publish next says so */
    if (a->cfg->rebuild == EC_REBUILD_RESTART)
        return count_restart(a, r);
    if (a->gated) {
        /* started again at once, this node out of the job until ready */
        int rc = take_restart(a);
        if (rc >= 0)
            return rc;
        char b[EC_BOOT_WHY_MAX];
        snprintf(b, sizeof(b), "local rank %d hung", r);
        boot_begin(a, b, true);
        int failed = start_all_as(a, true);
        ec_log(EC_LOG_INFO, "+step-out node %s: %s; its processes started again; the job goes "
                            "on without this node until they are ready", a->cfg->node_id, b);
        return failed >= 0 ? after_failure(a, failed, true, "could not be started") : -1;
    }
    if (a->restarts + 1 > a->cfg->max_restart)
        return count_restart(a, r); /* leaves the job, with its message */
    a->restarts++;
    ec_log(EC_LOG_INFO, "restarting this node's processes (%d of --max_restart=%d)", a->restarts,
           a->cfg->max_restart);
    ec_metrics_restart(a->metrics);
    ec_error_t err = {0};
    if (ec_node_bump_incarnation(a->node, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot announce the restart: %s", err.msg);
    return -1;
}

/* Sample the ranks' progress; write the node's summary into its record
 * when it changed enough (coord/agent/progress.h); while it says a rank is
 * silent, look for the leader's verdict that it hung (one etcd read every
 * 500 ms, only then).  Returns how long until it must be looked at again
 * (ms); *exit_rc gets an exit code when the agent must exit. */
static int64_t progress_tick(agent_t *a, int *exit_rc)
{
    *exit_rc = -1;
    if (!a->progress)
        return 200;
    pid_t pid[EC_NPROC_MAX];
    for (int r = 0; r < a->nproc; r++) {
        pid[r] = a->m_id >= 0 && !a->done[r] && !a->fenced ? ec_procs_pid(a->procs, r) : 0;
        ec_progress_output(a->progress, r, ec_procs_output_bytes(a->procs, r));
    }
    int64_t now = ec_mono_ms();
    ec_progress_sample(a->progress, pid, now);
    ec_node_progress_t cur;
    ec_progress_summary(a->progress, &cur);
    int64_t next = -1;
    if (ec_progress_publish_due(&a->pub, a->pub_ms, &cur, a->silence_ms, now, &next)) {
        ec_error_t err = {0};
        if (ec_node_set_progress(a->node, &cur, &err) < 0)
            ec_log(EC_LOG_WARN, "cannot write this node's progress: %s (retrying)", err.msg);
        cur.seq = a->pub.seq + 1;
        /* Said only where hangs are watched (--hang_timeout on, or auto and
         * the program reports steps): elsewhere a silence means nothing. */
        bool watched = a->cfg->hang_timeout_ms > 0 ||
                       (a->cfg->hang_timeout_ms < 0 && cur.reporting);
        if (watched && (!a->pub.seq || (a->pub.silent_ms > 0) != (cur.silent_ms > 0) ||
                        a->pub.stopped != cur.stopped || a->pub.paused != cur.paused))
            ec_log(EC_LOG_INFO, "+progress %s: step %llu%s%s%s%s", a->cfg->node_id,
                   (unsigned long long)cur.step, cur.silent_ms > 0 ? ", silent" : "",
                   cur.silent_ms > 0 && cur.waiting ? " inside a collective" : "",
                   cur.stopped ? ", a process stopped (SIGSTOP)" : "",
                   cur.paused ? ", paused (checkpoint declared)" : "");
        a->pub = cur;
        a->pub_ms = now;
        ec_metrics_progress(a->metrics, a->cfg->node_id, &cur);
    }
    if (a->pub.silent_ms > 0 && a->epoch && a->m_id >= 0 && now - a->hang_poll_ms >= 500) {
        a->hang_poll_ms = now;
        int r = 0;
        char why[1200];
        ec_error_t err = {0};
        if (ec_node_take_hang(a->node, a->epoch->number, &r, why, sizeof(why), &err) > 0) {
            *exit_rc = on_hung(a, r >= 0 && r < a->nproc ? r : 0, why);
            return 0;
        }
    }
    return next > now && next - now < 200 ? next - now : 200;
}

/* Boots (top of the file): while this node's processes boot, look every
 * 20 ms for each one's ready mark; once all are, say so in our record (the
 * leader admits the node then).  A process not ready --join_ready_timeout
 * after its start is a failure: reported, killed, restarted within
 * --max_restart (on_child_exit).  Returns how long until the next look
 * (ms). */
static int64_t boot_tick(agent_t *a)
{
    if (!a->gated || !a->booting)
        return 200;
    int64_t now = ec_mono_ms();
    int ready = 0;
    for (int r = 0; r < a->nproc; r++) {
        if (ec_procs_pid(a->procs, r) == 0) {
            ready += a->done[r]; /* finished: nothing to wait for */
            continue;
        }
        if (ec_progress_ready_ns(a->progress, r) != 0) {
            ready++;
            continue;
        }
        uint64_t bit = 1ULL << (r % 64);
        int64_t t = a->rank_started_ms[r];
        /* Halfway, at most 10 s in: what ready means, before the long wait */
        int64_t hint_ms = a->cfg->join_ready_timeout_ms / 2 < 10000
                              ? a->cfg->join_ready_timeout_ms / 2 : 10000;
        if (t && !(a->not_ready_hinted & bit) && now - t >= hint_ms) {
            a->not_ready_hinted |= bit;
            ec_log(EC_LOG_WARN, "+not-ready-yet node %s: local rank %d is not ready %.3g s after "
                   "it started; under --rebuild=inprocess it is once it joins the job's epochs "
                   "(ecw_init, ecoord.torch's init): a program that calls neither is stopped "
                   "after --join_ready_timeout=%.3g s and should run with --rebuild=restart",
                   a->cfg->node_id, r, (double)(now - t) / 1000.0,
                   (double)a->cfg->join_ready_timeout_ms / 1000.0);
        }
        if ((a->not_ready_killed & bit) || !t || now - t < a->cfg->join_ready_timeout_ms)
            continue;
        char what[64];
        snprintf(what, sizeof(what), "was not ready %.3g s after it started",
                 (double)(now - t) / 1000.0);
        record_not_ready(a, r, what, "; stopping it",
                         " (--join_ready_timeout), or raise --join_ready_timeout if its start-up "
                         "takes longer");
        a->not_ready_killed |= bit;
        ec_procs_kill_rank(a->procs, r);
    }
    if (ready < a->nproc)
        return 20;
    a->booting = false;
    ec_node_boot_t b = ec_node_boot(a->node);
    b.phase = EC_BOOT_READY;
    b.ready_at_ms = ec_wall_ms();
    b.nready = a->nproc;
    ec_error_t err = {0};
    if (ec_node_set_boot(a->node, &b, false, &err) < 0)
        ec_log(EC_LOG_WARN, "cannot write that this node is ready: %s (retrying)", err.msg);
    ec_log(EC_LOG_INFO, "+ready node %s: its %d processes are ready %lld ms after they started "
                        "(%s); admitted with the next epoch", a->cfg->node_id, a->nproc,
           (long long)(now - a->boot_started_ms), b.why);
    return 200;
}

static void on_progress(const char *node_id, const ec_node_progress_t *p, void *arg)
{
    agent_t *a = arg;
    if (strcmp(node_id, a->cfg->node_id) != 0) /* our own is set from the source */
        ec_metrics_progress(a->metrics, node_id, p);
}

/* Sleep until a signal, the processes' output or wait_ms; then move what
 * the processes wrote to their logs and the console. */
static void await_wake(agent_t *a, int64_t wait_ms)
{
    struct pollfd pf[2] = {{a->pipefd[0], POLLIN, 0}, {ec_procs_out_fd(a->procs), POLLIN, 0}};
    int n = poll(pf, pf[1].fd >= 0 ? 2 : 1, (int)wait_ms);
    if (n > 0 && (pf[0].revents & POLLIN)) {
        char buf[64];
        while (read(a->pipefd[0], buf, sizeof(buf)) > 0)
            ;
    }
    ec_procs_pump(a->procs);
}

/* A stop signal: the first stops the processes (up to --grace_period) and
 * leaves the job, a second kills them at once and leaves the lease to
 * expire.  Under --rebuild=inprocess the node leaves first: the others
 * re-form at once, and its processes get their grace period after that
 * (nothing of theirs is needed: every member holds the state, and no rank
 * changes hands under a stop barrier).  On an H200 the leader learnt of a
 * leave ~100 ms after the signal when the leave came last: a CUDA
 * process's exit.  The exit code, or -1 without one. */
static int on_stop_signal(agent_t *a)
{
    const ec_config_t *cfg = a->cfg;
    ec_error_t err = {0};
    if (!sig_term)
        return -1;
    int s = sig_last;
    bool left = false;
    if (!sig_kill_now) {
        ec_log(EC_LOG_INFO, "-node %s stopping on %s: stopping processes (up to "
                            "--grace_period=%.3gs), leaving the job; send it again to "
                            "kill them at once",
               cfg->node_id, strsignal(s), (double)cfg->grace_period_ms / 1000.0);
        ec_metrics_state(a->metrics, EC_MSTATE_LEAVING);
        if (cfg->rebuild == EC_REBUILD_INPROCESS) {
            ec_node_leave(a->node, &err);
            left = true;
        }
        stop_all(a, cfg->grace_period_ms); /* cut short by a second */
    }
    if (sig_kill_now) {
        if (left) {
            ec_log(EC_LOG_WARN, "-node %s: second %s: killing the processes now (the node has "
                                "left the job)", cfg->node_id, strsignal(sig_last));
            ec_procs_kill_all(a->procs);
            set_outcome(a, "stopped by %s: this node left the job gracefully, its processes "
                        "killed by a second %s", strsignal(s), strsignal(sig_last));
            return 128 + s;
        }
        ec_log(EC_LOG_WARN, "-node %s: second %s: killing the processes now and exiting "
                            "without leaving the job (the others re-form when its lease "
                            "expires)",
               cfg->node_id, strsignal(sig_last));
        ec_procs_kill_all(a->procs);
        set_outcome(a, "stopped by a second %s: processes killed, the lease left to "
                    "expire", strsignal(s));
        return 128 + s;
    }
    if (!left)
        ec_node_leave(a->node, &err);
    set_outcome(a, "stopped by %s: this node left the job gracefully", strsignal(s));
    return 128 + s;
}

/* --join_timeout: the job never formed (no epoch at all).  1 (the node
 * left), or -1. */
/* Before this node has seen an epoch (after one, apply_epoch compares the
 * epoch's N with ours): whether the leader refused it (its
 * --nproc_per_node is not the job's: no epoch forms while it waits).
 * Returns an exit code when the agent must exit, else -1. */
static int check_refused(agent_t *a)
{
    const ec_config_t *cfg = a->cfg;
    char why[512];
    ec_error_t err = {0};
    if (a->epochs_seen != 0 || !ec_node_refusal(a->node, why, sizeof(why)))
        return -1;
    ec_log(EC_LOG_ERROR, "-node %s: this node runs --nproc_per_node=%d and the leader refused "
                         "it: %s; leaving (exit 1)", cfg->node_id, a->nproc, why);
    ec_metrics_state(a->metrics, EC_MSTATE_FAILED);
    stop_all(a, cfg->grace_period_ms);
    ec_node_leave(a->node, &err);
    set_outcome(a, "the leader refused this node: %s", why);
    return 1;
}

static int check_join_timeout(agent_t *a)
{
    const ec_config_t *cfg = a->cfg;
    ec_error_t err = {0};
    if (cfg->join_timeout_ms <= 0 || a->epochs_seen != 0 ||
        ec_mono_ms() - a->start_ms < cfg->join_timeout_ms)
        return -1;
    char t[32];
    snprintf(t, sizeof(t), "%.3g", (double)cfg->join_timeout_ms / 1000.0);
    ec_log(EC_LOG_ERROR, "-node %s: job %s did not form within --join_timeout=%s: it "
                         "needs at least %d nodes registered under the same --job_id "
                         "and --elastic_server; `ecoord status --job_id=%s` shows who "
                         "did. Leaving (exit 1)",
           cfg->node_id, cfg->job_id, t, cfg->np.min, cfg->job_id);
    ec_metrics_state(a->metrics, EC_MSTATE_FAILED);
    ec_node_leave(a->node, &err);
    set_outcome(a, "the job did not form within --join_timeout=%ss", t);
    return 1;
}

/* The job completed, failed, or this node's run was marked interrupted:
 * stop the processes, say so, leave.  The exit code. */
static int on_job_ended(agent_t *a, ec_job_state_t js, const char *why)
{
    const ec_config_t *cfg = a->cfg;
    ec_error_t err = {0};
    stop_all(a, cfg->grace_period_ms);
    double wall = (double)(ec_mono_ms() - a->start_ms) / 1000.0;
    if (js == EC_JOB_COMPLETED)
        ec_log(EC_LOG_INFO, "job %s completed: %" PRIu64 " epoch%s seen, %d restart%s on "
                            "this node, %.1f s", cfg->job_id, a->epochs_seen,
               a->epochs_seen == 1 ? "" : "s", a->restarts, a->restarts == 1 ? "" : "s", wall);
    else if (js == EC_JOB_INTERRUPTED)
        /* A later launch found no agent of our run alive: this node
         * was cut from etcd past its lease meanwhile. */
        ec_log(EC_LOG_ERROR, "job %s: this node's run was marked interrupted (%s); "
                             "the job goes on as a new run: start this node again to "
                             "join it", cfg->job_id, why ? why : "no reason given");
    else
        ec_log(EC_LOG_ERROR, "job %s failed: %s", cfg->job_id, why ? why : "no reason given");
    if (js == EC_JOB_COMPLETED)
        set_outcome(a, "the job completed: every process of every member exited 0 "
                    "(%.1f s, %" PRIu64 " epochs, %d restarts on this node)", wall,
                    a->epochs_seen, a->restarts);
    else if (js == EC_JOB_INTERRUPTED)
        set_outcome(a, "this node's run was marked interrupted: %s", why ? why : "?");
    else
        set_outcome(a, "the job failed: %s", why ? why : "no reason given");
    ec_node_leave(a->node, &err);
    return js == EC_JOB_COMPLETED ? 0 : 1;
}

/* A local rank's failure folded into a membership change and no new epoch
 * came within FOLD_WAIT_MS: the peer answered the leader after all, so the
 * failure is this node's own.  An exit code, or -1 to go on. */
static int check_fold_timeout(agent_t *a)
{
    if (!a->fold_until || ec_mono_ms() < a->fold_until)
        return -1;
    ec_log(EC_LOG_WARN, "no new epoch within %d ms of the failure of local rank %d "
                        "folded into a membership change: counting it as this node's",
           FOLD_WAIT_MS, a->fold_rank);
    a->fold_until = 0;
    /* in place: the other folded ranks start with this one */
    uint64_t others = a->fold_ranks & ~(1ULL << (a->fold_rank % 64));
    a->fold_ranks = 0;
    int rc = count_restart(a, a->fold_rank);
    if (rc >= 0)
        return rc;
    start_folded(a, others);
    return -1;
}

/* A new epoch: apply it, then start the ranks whose failures waited for
 * it.  An exit code, or -1 to go on. */
static int on_new_epoch(agent_t *a, ec_epoch_t *ep)
{
    a->fold_until = 0; /* the epoch a folded failure waited for */
    uint64_t folded = a->fold_ranks;
    a->fold_ranks = 0;
    int64_t t0 = ec_mono_ms();
    int rc = apply_epoch(a, ep);
    ec_metrics_epoch(a->metrics, a->epoch, a->m_id, ec_mono_ms() - t0);
    if (rc >= 0)
        return rc;
    start_folded(a, folded);
    return -1;
}

static int run(agent_t *a)
{
    int64_t wait_ms = 200;
    for (;;) {
        await_wake(a, wait_ms);
        int rc = on_stop_signal(a);
        if (rc < 0)
            rc = check_join_timeout(a);
        if (rc < 0)
            rc = check_refused(a);
        if (rc >= 0)
            return rc;
        /* The fence before the reap: an agent thawed after a freeze fences
         * (its lease is unconfirmed) and so does not count the ranks its
         * janitor killed meanwhile as failures. */
        wait_ms = check_fence(a);
        int hrc;
        int64_t pw = progress_tick(a, &hrc);
        if (hrc >= 0)
            return hrc;
        if (pw < wait_ms)
            wait_ms = pw;
        int64_t bw = boot_tick(a);
        if (bw < wait_ms)
            wait_ms = bw;
        int r, st;
        while (ec_procs_reap(a->procs, &r, &st)) {
            rc = on_child_exit(a, r, st);
            if (rc >= 0)
                return rc;
        }
        pthread_mutex_lock(&a->lock);
        ec_epoch_t *ep = a->new_epoch;
        a->new_epoch = NULL;
        ec_job_state_t js = a->job_state;
        char *why = a->job_reason ? strdup(a->job_reason) : NULL;
        pthread_mutex_unlock(&a->lock);
        if (ec_job_state_ended(js)) {
            ec_epoch_free(ep);
            rc = on_job_ended(a, js, why);
            free(why);
            return rc;
        }
        free(why);
        if (!ep && (rc = check_fold_timeout(a)) >= 0)
            return rc;
        if (ep && (rc = on_new_epoch(a, ep)) >= 0)
            return rc;
        int brc = barrier_tick(a, &wait_ms);
        if (brc >= 0)
            return brc;
    }
}

/* The run's root cause as one line ("rank 3 (node b, local rank 1) exited
 * with code 3 at 12:01:07: ValueError: loss is nan"): its earliest failure
 * record (one read of failures/).  false: none, or etcd unreadable. */
static bool root_cause(agent_t *a, uint64_t run, char *buf, size_t len)
{
    ec_keys_t k;
    char prefix[EC_KEY_MAX];
    ec_kv_list_t l = {0};
    if (!a->c || ec_keys_init(&k, a->cfg->etcd_prefix, a->cfg->job_id, NULL) < 0 ||
        ec_key_failures_prefix(&k, prefix, sizeof(prefix)) < 0 ||
        ec_etcd_get_prefix(a->c, prefix, 0, &l, NULL) < 0)
        return false;
    ec_failure_t *best = NULL;
    for (size_t i = 0; i < l.n; i++) {
        ec_failure_t *f = NULL;
        if (ec_failure_decode(l.kvs[i].value, l.kvs[i].value_len, l.kvs[i].key, &f, NULL) < 0)
            continue;
        if ((f->run == run || f->run == 0) && (!best || f->time_ms < best->time_ms)) {
            ec_failure_free(best);
            best = f;
        } else {
            ec_failure_free(f);
        }
    }
    ec_kv_list_free(&l);
    if (!best)
        return false;
    char what[128], when[32] = "?";
    ec_failure_what(best, what, sizeof(what));
    time_t t = (time_t)(best->time_ms / 1000);
    struct tm tm;
    if (localtime_r(&t, &tm))
        strftime(when, sizeof(when), "%H:%M:%S", &tm);
    if (best->kind == EC_FAILURE_NODE_LOST)
        snprintf(buf, len, "node %s was lost at %s", best->node_id, when);
    else if (best->epoch == 0) /* before any epoch: no rank */
        snprintf(buf, len, "local rank %d of node %s (before the job's first epoch) %s at %s%s%.300s",
                 best->local_rank, best->node_id, what, when,
                 best->message && *best->message ? ": " : "",
                 best->message ? best->message : "");
    else
        snprintf(buf, len, "rank %d (node %s, local rank %d) %s at %s%s%.300s", best->global_rank,
                 best->node_id, best->local_rank, what, when,
                 best->message && *best->message ? ": " : "",
                 best->message ? best->message : "");
    ec_failure_free(best);
    return true;
}

/* The closing block every agent prints: how it ended, the run's root cause
 * when something failed, the exit code and what it means, where the logs
 * are (torchrun's root-cause summary, Paddle's exit line). */
static void closing_block(agent_t *a, int rc, uint64_t run)
{
    const ec_config_t *cfg = a->cfg;
    ec_log_level_t lvl = rc == 0 ? EC_LOG_INFO : EC_LOG_ERROR;
    ec_log(lvl, "======== ecoord: node %s, job %s, run %llu ========", cfg->node_id, cfg->job_id,
           (unsigned long long)run);
    ec_log(lvl, "  outcome:    %s", a->outcome[0] ? a->outcome
                                 : rc == 0 ? "done"
                                 : "this node could not take part (see the error above)");
    char cause[800];
    if (rc != 0 && root_cause(a, run, cause, sizeof(cause)))
        ec_log(lvl, "  root cause: %s (the run's first failure; `ecoord status` shows them all)",
               cause);
    const char *means = rc == 0 ? "success"
                        : rc >= 128 ? "stopped by a signal"
                        : cfg->torchrun.on && rc == 1
                            ? "a failure: ecoord torchrun exits 1 for every one, as torchrun"
                        : rc == cfg->fixed_failure_exit && cfg->np.min == cfg->np.max
                            ? "this node gave up in a fixed-size job: let the scheduler replace it"
                        : "this node failed or left the job";
    ec_log(lvl, "  exit code:  %d (%s)", rc, means);
    if (cfg->torchrun.on) { /* its private directory is gone by now */
        const char *run_dir = a->procs ? ec_procs_run_dir(a->procs) : "";
        if (*run_dir)
            ec_log(lvl, "  logs:       %s (attempt_<N>/<local rank>/{stdout,stderr}.log, "
                        "as torchrun's --redirects and --tee)", run_dir);
        else
            ec_log(lvl, "  logs:       the console only (torchrun keeps files with --log_dir and "
                        "--redirects or --tee)");
    } else if (a->log_dir[0]) {
        ec_log(lvl, "  logs:       %s (workerlog.<local rank>, error.<local rank>.json)", a->log_dir);
    }
}

/* ---- ecoord launch, step by step -------------------------------------- */

/* stdout behind the console queue, the log into it. */
static void console_start(const ec_config_t *cfg)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    fflush(stdout); /* from here on, stdout is the queue's alone */
    char note[700];
    if (cfg->torchrun.on)
        snprintf(note, sizeof(note), "torchrun's --redirects and --tee keep a rank's output in a "
                                     "file");
    else
        snprintf(note, sizeof(note), "local rank 0's output is complete in %s/workerlog.0",
                 cfg->log_dir);
    console_q = ec_outq_create(STDOUT_FILENO, CONSOLE_QUEUE_BYTES, note);
    ec_log_set_sink(console, NULL, cfg->log_level);
    if (!console_q)
        ec_log(EC_LOG_WARN, "cannot start the console writer (%s): a stalled stdout will stall "
                            "this agent", strerror(errno));
}

/* What the agent was told: the warnings of the knob table, one line of
 * what is set, every knob at debug level, and Paddle's "Job:" line. */
static void say_configuration(const ec_config_t *cfg)
{
    for (int i = 0; i < cfg->nwarnings; i++)
        ec_log(EC_LOG_WARN, "%s", cfg->warnings[i]);
    /* One line; every knob and its source at debug level (Paddle's block
     * of 44 lines came before any error). */
    char *one = ec_config_summary(cfg);
    if (one)
        ec_log(EC_LOG_INFO, "%s", one);
    free(one);
    char *dump = ec_log_enabled(EC_LOG_DEBUG) ? ec_config_dump(cfg) : NULL;
    if (dump) {
        ec_log(EC_LOG_DEBUG, "-----------  Configuration  ----------------------");
        for (char *save = NULL, *l = strtok_r(dump, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
            ec_log(EC_LOG_DEBUG, "%s", l);
        ec_log(EC_LOG_DEBUG, "--------------------------------------------------");
        free(dump);
    }
    ec_log(EC_LOG_INFO, "Job: %s, mode collective, replicas %d[%d:%d], elastic %s", cfg->job_id,
           cfg->np.max, cfg->np.min, cfg->np.max, cfg->np.min != cfg->np.max ? "True" : "False");
}

static int setup_program(agent_t *a)
{
    const ec_config_t *cfg = a->cfg;
    ec_error_t err = {0};
    /* The program first: one that cannot run here is this node's
     * configuration error (exit 1), found before it joins anything. */
    if (ec_program_resolve(cfg, ec_config_environ, NULL, ec_program_probe, NULL, &a->prog,
                           &err) < 0) {
        ec_log(EC_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    if (a->prog.note[0])
        ec_log(EC_LOG_WARN, "%s", a->prog.note);
    if (a->prog.python) {
        char *cmd = command_line(&a->prog, 400);
        ec_log(EC_LOG_INFO, "%s; runs %s as %s (--no_python runs it as given)", a->prog.why,
               cfg->prog_argv[0], cmd ? cmd : "");
        free(cmd);
    }
    return 0;
}

static int setup_etcd(agent_t *a)
{
    const ec_config_t *cfg = a->cfg;
    ec_error_t err = {0};
    /* etcd: given, or our own on loopback, or (torchrun's static and c10d
     * rendezvous) the one this node or another serves for the job */
    ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
    eo.etcd_path = ec_config_environ("ETCD", NULL);
    eo.search_path = ec_config_environ("PATH", NULL);
    eo.tmpdir = ec_config_environ("TMPDIR", NULL);
    if (cfg->torchrun.serve) {
        char why[600];
        if (ec_serve_etcd_start(cfg, &eo, &a->embed, why, sizeof(why), &err) < 0) {
            ec_log(EC_LOG_ERROR, "%s", err.msg);
            return -1;
        }
        ec_log(EC_LOG_INFO, "%s", why);
        a->endpoints = a->embed ? strdup(ec_embed_endpoint(a->embed)) : ec_connect_endpoints(cfg);
    } else if (cfg->elastic_server.n == 0) {
        if (!(a->embed = ec_embed_start(&eo, &err))) {
            ec_log(EC_LOG_ERROR, "cannot start the embedded etcd: %s", err.msg);
            return -1;
        }
        a->endpoints = strdup(ec_embed_endpoint(a->embed));
        ec_log(EC_LOG_INFO, "no --elastic_server: started an embedded etcd at %s (data in %s)",
               a->endpoints, ec_embed_dir(a->embed));
        if (cfg->np.min > 1) {
            char np[48];
            if (cfg->np.min == cfg->np.max)
                snprintf(np, sizeof(np), "--np=%d asks for %d nodes", cfg->np.min, cfg->np.min);
            else
                snprintf(np, sizeof(np), "--np=%d:%d asks for at least %d nodes", cfg->np.min,
                         cfg->np.max, cfg->np.min);
            ec_log(EC_LOG_WARN, "%s, but without --elastic_server this node's etcd is its own, "
                                "on loopback: start the other nodes on this machine with "
                                "--elastic_server=%s --job_id=%s, each with a --node_id and a "
                                "--log_dir of its own (this one is %s, logging to %s), or give "
                                "every node one etcd (--elastic_server=HOST:PORT); --np counts "
                                "nodes, --nproc_per_node the processes on each",
                   np, a->endpoints, cfg->job_id, cfg->node_id, cfg->log_dir);
        }
    } else {
        a->endpoints = ec_connect_endpoints(cfg);
    }
    if (!a->embed && cfg->torchrun.serve_port) {
        /* the node that serves the job's etcd may start after this one */
        ec_log(EC_LOG_INFO, "connecting to the job's etcd at %s, which %s serves (waiting for it "
                            "up to --join_timeout)", a->endpoints,
               cfg->torchrun.static_rdzv ? "node_rank 0" : "the --rdzv_endpoint node");
        a->c = ec_serve_connect(cfg, cfg->join_timeout_ms ? a->start_ms + cfg->join_timeout_ms : 0,
                               &err);
    } else if (a->embed) {
        a->c = ec_connect(cfg, a->endpoints, 5000, &err);
    } else {
        a->c = ec_serve_wait_connect(cfg, &err); /* up to --etcd_wait */
    }
    if (!a->c) {
        ec_log(EC_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    if (cfg->metrics_port > 0) {
        ec_metrics_opts_t mo = EC_METRICS_OPTS_INIT;
        mo.port = cfg->metrics_port;
        mo.job_id = cfg->job_id;
        mo.node_id = cfg->node_id;
        mo.version = EC_VERSION;
        mo.etcd = a->c;
        if (!(a->metrics = ec_metrics_create(&mo, &err))) {
            ec_log(EC_LOG_ERROR, "%s", err.msg);
            return -1;
        }
        ec_log(EC_LOG_INFO, "metrics: serving /metrics, /healthz and /readyz on port %d",
               cfg->metrics_port);
    }
    return 0;
}

static int setup_address(agent_t *a)
{
    const ec_config_t *cfg = a->cfg;
    ec_error_t err = {0};
    /* our address and ports */
    if (*cfg->host) {
        snprintf(a->host, sizeof(a->host), "%s", cfg->host);
        ec_addr_ifname(a->host, a->ifname, sizeof(a->ifname));
    } else {
        ec__endpoints_t eps;
        /* the address peers reach: the one that routes to the etcd, or for
         * the node serving it to the others, its serving address */
        char served[300];
        snprintf(served, sizeof(served), "%s%s%s:%d", strchr(cfg->torchrun.serve_host, ':') ? "[" : "",
                 cfg->torchrun.serve_host, strchr(cfg->torchrun.serve_host, ':') ? "]" : "",
                 cfg->torchrun.serve_port);
        if (ec__endpoints_parse(a->embed && cfg->torchrun.serve ? served : a->endpoints, &eps,
                                &err) < 0 ||
            ec_route_addr(eps.ep[0].host, eps.ep[0].port, a->host, sizeof(a->host), a->ifname,
                          sizeof(a->ifname), &err) < 0) {
            ec_log(EC_LOG_ERROR, "%s", err.msg);
            return -1;
        }
    }
    ec_log(EC_LOG_INFO, "this node publishes host %s (interface %s)", a->host,
           a->ifname[0] ? a->ifname : "unknown");
    if (!*cfg->host && cfg->np.max > 1 && (!strncmp(a->host, "127.", 4) || !strcmp(a->host, "::1")))
        /* INFO, not WARN: every node on one host (a first try, a test) is
         * an ordinary path; it is the one line to read when another machine's
         * node cannot connect. */
        ec_log(EC_LOG_INFO, "this node's address %s is loopback: nodes on other machines cannot "
                            "reach its processes; pass --host=ADDR (torchrun's --local_addr) "
                            "unless every node runs on this machine", a->host);
    /* N ports for the ranks, one for a torch-style master store, one where
     * the agent answers liveness probes. */
    a->ports = calloc((size_t)a->nproc + 2, sizeof(uint16_t));
    a->resv = calloc((size_t)a->nproc + 2, sizeof(int));
    a->done = calloc((size_t)a->nproc, sizeof(bool));
    a->rank_started_ms = calloc((size_t)a->nproc, sizeof(int64_t));
    if (!a->ports || !a->resv || !a->done || !a->rank_started_ms) {
        ec_log(EC_LOG_ERROR, "out of memory for the state of this node's %d processes "
                             "(--nproc_per_node=%d): free memory on this machine or start fewer "
                             "processes per node", a->nproc, a->nproc);
        return -1;
    }
    ec_ports_note_t pnote;
    if (ec_ports_reserve(a->host, cfg->port_lo, cfg->port_hi, a->nproc + 2, a->ports, a->resv, &pnote,
                         &err) < 0) {
        ec_log(EC_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    if (pnote.moved[0])
        ec_log(EC_LOG_INFO, "%s", pnote.moved);
    if (pnote.ephemeral[0])
        ec_log(EC_LOG_WARN, "%s", pnote.ephemeral);
    a->reserved = true;
    return 0;
}

static int setup_processes(agent_t *a)
{
    const ec_config_t *cfg = a->cfg;
    ec_error_t err = {0};
    {
        /* where the ranks' output goes: Paddle's or torchrun's (procs.h) */
        ec_procs_opts_t po = EC_PROCS_OPTS_INIT;
        po.nproc = a->nproc;
        po.argv = a->prog.argv;
        po.console = console_q;
        po.style = cfg->torchrun.on ? EC_PROCS_TORCHRUN : EC_PROCS_PADDLE;
        po.log_dir = cfg->log_dir;
        po.run_id = cfg->torchrun.run_id;
        po.role = cfg->role;
        po.redirects = cfg->torchrun.redirects;
        po.tee = cfg->torchrun.tee;
        po.ranks_filter = cfg->torchrun.ranks_filter;
        po.tmpdir = ec_config_environ("TMPDIR", NULL);
        if (!(a->procs = ec_procs_create(&po, &err))) {
            ec_log(EC_LOG_ERROR, "%s", err.msg);
            return -1;
        }
    }
    ec_procs_set_abort(a->procs, &sig_kill_now);
    snprintf(a->log_dir, sizeof(a->log_dir), "%s", ec_procs_state_dir(a->procs));
    /* A rank counts as silent after half the hang timeout (so the leader
     * knows in time), 10 s when the timeout is off or automatic. */
    a->silence_ms = 10000;
    if (cfg->hang_timeout_ms > 0)
        a->silence_ms = cfg->hang_timeout_ms / 2 < 10000 ? cfg->hang_timeout_ms / 2 : 10000;
    if (!(a->progress = ec_progress_create(a->nproc, a->log_dir, a->silence_ms, &err)))
        ec_log(EC_LOG_WARN, "no progress reports on this node: %s", err.msg);
    ec_progress_set_max_pause(a->progress, cfg->max_pause_ms);
    /* Boots gated (top of the file): in place, with a progress file for
     * each process to say it is ready in. */
    a->gated = cfg->rebuild == EC_REBUILD_INPROCESS && cfg->join_ready_timeout_ms > 0 && a->progress;
    if (cfg->rebuild == EC_REBUILD_INPROCESS && cfg->join_ready_timeout_ms > 0 && !a->progress)
        ec_log(EC_LOG_WARN, "without progress files this node's processes cannot say they are "
                            "ready: they start when the node is admitted, and the others wait "
                            "for their start");
    {
        char np_s[32], g_s[32];
        snprintf(np_s, sizeof(np_s), "--nproc_per_node=%d", a->nproc);
        snprintf(g_s, sizeof(g_s), "--gpus");
        if (ec_gpus_plan(ec_config_environ("CUDA_VISIBLE_DEVICES", NULL), cfg->dev_gpus,
                         cfg->gpus.v, cfg->gpus.n, a->nproc, g_s, np_s, &a->gpus, &err) < 0) {
            ec_log(EC_LOG_ERROR, "%s", err.msg);
            return -1;
        }
        if (a->gpus.note[0])
            ec_log(EC_LOG_WARN, "%s", a->gpus.note);
        if (a->gpus.n)
            ec_log(EC_LOG_INFO, "GPUs: the processes see CUDA_VISIBLE_DEVICES=%s; local rank i "
                                "uses the i-th (FLAGS_selected_gpus=i, cuda:LOCAL_RANK); "
                                "PADDLE_DISTRI_BACKEND=nccl unless set", a->gpus.visible);
        else
            ec_log(EC_LOG_INFO, "no GPU for the processes: PADDLE_DISTRI_BACKEND=gloo");
    }
    if (ec_env_omp_default(a->nproc, environ))
        ec_log(EC_LOG_INFO, "OMP_NUM_THREADS is not set and this node runs %d processes: each "
                            "gets OMP_NUM_THREADS=1 (torchrun's default), so they do not all start "
                            "a thread per core; set OMP_NUM_THREADS to choose", a->nproc);
    char proxies[160];
    if (ec_env_proxies(environ, proxies, sizeof(proxies)))
        ec_log(EC_LOG_INFO, "the training processes get no %s (removed from their environment, "
                            "as Paddle's launcher does: their collectives and etcd connections "
                            "go straight to their peers; a program that needs a proxy sets it "
                            "itself)", proxies);
    return 0;
}

static int setup_signals(agent_t *a)
{
    if (pipe2(a->pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
        int e = errno;
        ec_log(EC_LOG_ERROR, "cannot create the pipe that wakes the agent on signals: %s%s",
               strerror(e), e == EMFILE || e == ENFILE
                                ? " (too many open files: raise the limit, e.g. ulimit -n 65536, "
                                  "or LimitNOFILE= in the systemd unit)"
                                : "");
        return -1;
    }
    wake_fd = a->pipefd[1];
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static int setup_node(agent_t *a)
{
    const ec_config_t *cfg = a->cfg;
    ec_error_t err = {0};
    /* The node record names each local rank's GPU as the user named it
     * (the entry of the node's CUDA_VISIBLE_DEVICES). */
    const char **devs = NULL;
    char *devbuf = NULL;
    if (a->gpus.n >= a->nproc) {
        devs = calloc((size_t)a->nproc, sizeof(char *));
        devbuf = strdup(a->gpus.visible);
        char *save = NULL, *tok = devbuf ? strtok_r(devbuf, ",", &save) : NULL;
        int i = 0;
        for (; devs && tok && i < a->nproc; i++, tok = strtok_r(NULL, ",", &save))
            devs[i] = tok;
        if (!devs || !devbuf || i < a->nproc) {
            free(devs);
            devs = NULL;
        }
    }
    ec_node_opts_t no = EC_NODE_OPTS_INIT;
    no.etcd = a->c;
    no.etcd_prefix = cfg->etcd_prefix;
    no.job_id = cfg->job_id;
    no.node_id = cfg->node_id;
    no.host = a->host;
    no.nproc = a->nproc;
    no.ports = a->ports;
    no.master_port = a->ports[a->nproc];
    no.probe_port = a->ports[a->nproc + 1];
    no.device_ids = devs;
    no.ndevices = devs ? a->nproc : 0;
    no.agent_version = EC_VERSION;
    no.np_min = cfg->np.min;
    no.np_max = cfg->np.max;
    no.elastic_timeout_ms = cfg->elastic_timeout_ms;
    no.replace_wait_ms = cfg->replace_wait_ms;
    no.lease_ttl_s = (int)(cfg->lease_ttl_ms / 1000);
    no.watch_peers_ms = (int)cfg->peer_probe_interval_ms;
    no.peer_pause_tolerance_ms = (int)cfg->peer_pause_tolerance_ms;
    no.hang_timeout_ms = cfg->hang_timeout_ms;
    no.straggler_factor = cfg->straggler_factor_x;
    no.epoch_chunk_members = cfg->epoch_chunk_members;
    no.boot_gated = a->gated;
    no.boot_why = "joining";
    no.join_ready_timeout_ms = cfg->join_ready_timeout_ms;
    no.fail_fast = cfg->fail_fast;
    no.place = cfg->torchrun.static_rdzv ? (uint32_t)cfg->torchrun.node_rank + 1 : 0;
    no.on_progress = on_progress;
    no.on_epoch = on_epoch;
    no.on_job = on_job;
    no.on_event = on_event;
    no.arg = a;
    a->node = ec_node_start(&no, &err);
    free(devs);
    free(devbuf);
    if (!a->node) {
        ec_log(EC_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    if (cfg->rebuild == EC_REBUILD_RESTART && !cfg->stop_barrier)
        ec_log(EC_LOG_INFO, "--stop_barrier=false: a rank taken from another node starts at "
                            "once, even while that node's process may still run");
    if (cfg->rebuild == EC_REBUILD_RESTART && cfg->stop_barrier) {
        ec_keys_t bk;
        a->barrier_c = ec_connect(cfg, a->endpoints, 5000, &err);
        if (a->barrier_c)
            ec_etcd_set_call_timeout(a->barrier_c, BARRIER_CALL_MS);
        if (!a->barrier_c || ec_keys_init(&bk, cfg->etcd_prefix, cfg->job_id, &err) < 0 ||
            !(a->barrier = ec_barrier_new(a->barrier_c, &bk, cfg->node_id, cfg->lease_ttl_ms))) {
            ec_log(EC_LOG_ERROR, "cannot set up the stop barrier: %s", err.msg[0] ? err.msg :
                   "out of memory");
            return -1;
        }
    }
    return 0;
}

int ec_cmd_launch(const ec_config_t *cfg)
{
    console_start(cfg);
    agent_t a = {.cfg = cfg, .m_id = -1, .pipefd = {-1, -1}, .fail_code = 1};
    a.start_ms = ec_mono_ms();
    a.nproc = cfg->nproc_per_node;
    pthread_mutex_init(&a.lock, NULL);
    int rc = 1;

    say_configuration(cfg);
    if (setup_program(&a) < 0 || setup_etcd(&a) < 0 || setup_address(&a) < 0 ||
        setup_processes(&a) < 0 || setup_signals(&a) < 0 || setup_node(&a) < 0)
        goto out;
    ec_log(EC_LOG_INFO, "Waiting peer start... (np=%d:%d, elastic_timeout=%.1fs)", cfg->np.min,
           cfg->np.max, (double)cfg->elastic_timeout_ms / 1000.0);
    if (a.gated) {
        /* Booting while the job forms or admits us: nobody waits for it. */
        a.booting = true;
        a.boot_started_ms = ec_mono_ms();
        ec_log(EC_LOG_INFO, "+booting node %s: its %d processes start now, before it is "
                            "admitted; it joins once every one is ready (--join_ready_timeout="
                            "%.3gs)", cfg->node_id, a.nproc,
               (double)cfg->join_ready_timeout_ms / 1000.0);
        int failed = start_all_as(&a, true);
        if (failed >= 0 && (rc = after_failure(&a, failed, true, "could not be started")) >= 0)
            goto out;
    }
    rc = run(&a);
out:
    if (a.procs)
        ec_procs_kill_all(a.procs);
    if (!a.fenced)
        ec_barrier_stopped(a.barrier); /* killed, all of them */
    ec_barrier_free(a.barrier);
    ec_etcd_destroy(a.barrier_c);
    uint64_t run = a.node ? ec_node_run(a.node) : 0;
    ec_node_stop(a.node);
    if (run)
        closing_block(&a, rc, run);
    ec_procs_destroy(a.procs);
    ec_progress_destroy(a.progress);
    ec_metrics_destroy(a.metrics); /* before the etcd client its prober uses */
    if (a.reserved)
        ec_ports_unlock(a.host, a.ports, a.resv, a.nproc + 2);
    if (a.embed && cfg->torchrun.serve) {
        /* the others read the job's end through our etcd: not before they did */
        int left = ec_serve_linger(a.c, cfg, cfg->lease_ttl_ms + 1000);
        if (left)
            ec_log(EC_LOG_WARN, "stopping the job's etcd while %d other node%s still registered",
                   left, left == 1 ? " is" : "s are");
    }
    ec_etcd_destroy(a.c);
    ec_embed_stop(a.embed);
    wake_fd = -1;
    if (a.pipefd[0] >= 0) {
        close(a.pipefd[0]);
        close(a.pipefd[1]);
    }
    ec_epoch_free(a.epoch);
    ec_epoch_free(a.new_epoch);
    free(a.job_reason);
    free(a.endpoints);
    free(a.ports);
    free(a.resv);
    free(a.done);
    free(a.rank_started_ms);
    ec_program_release(&a.prog);
    pthread_mutex_destroy(&a.lock);
    if (console_q) {
        uint64_t dropped = ec_outq_dropped(console_q);
        if (dropped)
            ec_log(EC_LOG_INFO, "the console dropped %" PRIu64 " lines in all (stdout was not "
                                "read fast enough)", dropped);
        ec_outq_flush(console_q, CONSOLE_FLUSH_MS);
        ec_log_set_sink(NULL, NULL, cfg->log_level);
        ec_outq_destroy(console_q);
        console_q = NULL;
    }
    return rc;
}
