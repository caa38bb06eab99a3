/* `ecoord status`: the job at a glance, read-only.
 *
 * One consistent read (a single prefix listing of the job root, served at one
 * revision) is decoded into a snapshot (gather.c), and the snapshot is
 * rendered as text or JSON (render.c; status_impl.h is what they share).
 * Decoding and rendering are pure: no I/O but the FILE they write to, so
 * whatever garbage sits in etcd becomes a row marked "corrupt" with the
 * decoder's message, never a crash.  This file is the command: the read, the
 * print, --watch.  status never writes to etcd.
 *
 * --watch prints once, then follows the job root with one watch started at
 * the listing's revision + 1 (so no change between the listing and the watch
 * is missed).  Changes are coalesced for DEBOUNCE_MS, then the job is read
 * again and printed again: text output gets a separator line with the time
 * and revision, JSON output is one object per line.  Writes to the per-epoch
 * worker keys (epochs/...) are not shown and do not trigger a reprint.  The
 * watch ends with exit 0 on SIGINT or SIGTERM, and on its own when the job
 * status says completed or failed (a finished job does not change again, so
 * a script can `ecoord status --watch` to wait for the end).
 *
 * Exit codes: 0 shown; 1 the job could not be read (etcd unreachable, no
 * keys under the job root); 2 usage (no --elastic_server).
 *
 * JSON (--json): one object on one line.  Field names are stable; fields are
 * added, never renamed.  Times are unix milliseconds (0 = not recorded).
 *
 *   job_id          string
 *   etcd            string: the endpoints as given
 *   root            string: the job's key root, "<prefix>/<job_id>/"
 *   revision        number: the etcd revision the snapshot was read at
 *   now_ms          number: when it was rendered (this host's clock)
 *   state           "running" | "completed" | "failed" | "interrupted" (from
 *                   the status key: interrupted when a later launch found no
 *                   agent of the run alive),
 *                   "running" without a status key but with an epoch,
 *                   "forming" with neither, "unknown" if the status is corrupt
 *   alive           bool: an agent of the run is alive (the leader key, or a
 *                   node record of the run); running and not alive: the run
 *                   is over, the next launch marks it interrupted
 *   status          null | {state, reason, epoch, run, updated_at_ms, updated_by}
 *   status_error    null | string: why the status record was not readable
 *   leader          null | string: the leader key's value (the leader's node id)
 *   epoch           null | {number, world_size, nproc, nmembers, reason,
 *                   reason_detail, leader_id, leader_rev, observed_at_ms,
 *                   decided_at_ms, published_at_ms, planner_us}
 *   epoch_error     null | string: why the epoch record was not readable
 *   nodes           array, members in M_id order, then the other nodes in
 *                   registration order, of
 *                   {node_id, m_id (null: not a member), host, nproc,
 *                    rank_first, rank_last (null: not a member),
 *                    endpoints [string, rank order], state, in_epoch (bool),
 *                    standby (bool), incarnation, registered_at_ms,
 *                    reason (string, "" when none), fence_stops (times its
 *                    agent stopped its processes for the fence: not failures),
 *                    progress (null | {seq,
 *                    reporting, step, silent_ms, silent_rank, waiting, stopped,
 *                    paused, step_p50_us, slowest_us, slowest_rank}: the
 *                    node's progress summary, coord/agent/progress.h), boot
 *                    (null | {phase "booting"|"ready", started_at_ms,
 *                    ready_at_ms, nready, why}: in place, its processes'
 *                    start before admission), error (null | string)}
 *                   state is the record's ("joining", "ready", "leaving",
 *                   "done", "failed"), "booting" for a non-member whose
 *                   processes boot, "pending" for one whose processes are
 *                   ready and that waits for its admission, "gone" for a
 *                   member whose record vanished, "corrupt" for a record that
 *                   did not decode (error then holds the decoder's message)
 *   failures_total  number: failure records under failures/
 *   failures        array, newest first, at most STATUS_MAX_FAILURES (plus
 *                   the root cause when it is older than those), of
 *                   {key, node_id, kind, local_rank, global_rank, exit_code,
 *                    signal, epoch, time_ms, log_path, last_lines [string],
 *                    message, raised_at (the exception the process reported
 *                    in its TORCHELASTIC_ERROR_FILE and where; "" when none),
 *                    run (0: not recorded), root_cause (bool: the earliest
 *                    failure of the current run, see gather.c),
 *                    error (null | string)}; ranks are -1 for node-lost
 *   run             number: the current run (the highest any record names)
 *   root_cause      null | string: the key of the root-cause failure
 */
#define _GNU_SOURCE /* open_memstream */
#include "status.h"
#include "status_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "connect.h"
#include "etcd.h"
#include "keys.h"

#define DEBOUNCE_MS 100
#define CONNECT_TIMEOUT_MS 3000
#define CALL_TIMEOUT_MS 5000

typedef struct st_ctx {
    const ec_config_t *cfg;
    FILE *out, *errout;
    ec_etcd_t *c;
    ec_keys_t keys;
    char *etcd;               /* endpoints as given, for messages */
    const char *prefix_shown;
} st_ctx_t;

/* The jobs under the prefix of x's keys, for a job id that is not there:
 * "; the jobs there: A, B" (at most JOBS_LISTED) into buf, or "; nothing
 * under PREFIX/ at all".  One read per job: after /A/'s first key the next
 * read starts at "/A0" ('/' + 1), past every key of A.  Empty on an error. */
#define JOBS_LISTED 10
static void jobs_there(st_ctx_t *x, char *buf, size_t len)
{
    buf[0] = '\0';
    char base[EC_KEY_MAX], from[EC_KEY_MAX], key[EC_KEY_MAX], jobs[800] = "";
    if (ec_keys_jobs_prefix(&x->keys, base, sizeof(base)) < 0)
        return;
    size_t blen = strlen(base);
    snprintf(from, sizeof(from), "%s", base);
    size_t used = 0;
    int n = 0;
    bool more = false;
    for (int reads = 0; reads < 4 * JOBS_LISTED; reads++) {
        bool found = false;
        ec_error_t err = {0};
        if (ec_etcd_next_key(x->c, base, from, key, sizeof(key), &found, &err) < 0)
            return;
        if (!found)
            break;
        const char *id = key + blen, *slash = strchr(id, '/');
        if (!slash || slash == id) { /* a key that is no job's: the next one after it */
            snprintf(from, sizeof(from), "%s\x01", key);
            continue;
        }
        if (n == JOBS_LISTED) {
            more = true;
            break;
        }
        int w = snprintf(jobs + used, sizeof(jobs) - used, "%s%.*s", n ? ", " : "",
                         (int)(slash - id), id);
        if (w < 0 || (size_t)w >= sizeof(jobs) - used) {
            more = true;
            break;
        }
        used += (size_t)w;
        n++;
        snprintf(from, sizeof(from), "%.*s0", (int)(slash - key), key); /* '/' + 1 */
    }
    if (n == 0)
        snprintf(buf, len, "; nothing under %s at all", base);
    else
        snprintf(buf, len, "; the jobs there: %s%s", jobs, more ? ", ..." : "");
}

/* Read the job once and print it.  Returns 0 (printed; *rev the listing's
 * revision, *finished whether the job status says completed or failed), or
 * a negative code with err filled (EC_ENOTFOUND: no keys at all). */
static int show_once(st_ctx_t *x, bool separator, int64_t *rev, bool *finished, ec_error_t *err)
{
    ec_kv_list_t l = {0};
    st_snap_t s;
    int rc = ec_etcd_get_prefix(x->c, ec_keys_root(&x->keys), 0, &l, err);
    if (rc < 0)
        return rc;
    if (l.n == 0) {
        *rev = l.revision;
        ec_kv_list_free(&l);
        char there[1200];
        jobs_there(x, there, sizeof(there));
        return ec_errorf(err, EC_ENOTFOUND,
                         "no job '%s' under prefix %s at %s (no keys under %s): check --job_id "
                         "and --etcd_prefix%s",
                         x->cfg->job_id, x->prefix_shown, x->etcd, ec_keys_root(&x->keys), there);
    }
    rc = ec__status_gather(&s, &x->keys, &l, err);
    ec_kv_list_free(&l);
    if (rc < 0)
        return rc;
    *rev = s.revision;
    *finished = s.status && ec_job_state_ended(s.status->state);

    /* Render into memory first: one write per snapshot, so a reader of a
     * --watch stream never sees half a block. */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        ec__status_snap_free(&s);
        return ec_errorf(err, EC_ENOMEM, "out of memory rendering the status");
    }
    int64_t now = ec_wall_ms();
    if (separator && !x->cfg->json) {
        char t[64];
        ec__status_fmt_time(now, t, sizeof(t));
        fprintf(m, "\n---- %s  revision %" PRId64 " ----\n", t, s.revision);
    }
    const char *root = ec_keys_root(&x->keys);
    rc = x->cfg->json ? ec__status_render_json(m, &s, x->cfg->job_id, x->etcd, root, now)
                      : ec__status_render_text(m, &s, x->cfg->job_id, x->etcd, root, now);
    ec__status_snap_free(&s);
    if (fclose(m) != 0 || rc < 0) {
        free(buf);
        return ec_errorf(err, EC_ENOMEM, "out of memory rendering the status");
    }
    fwrite(buf, 1, len, x->out);
    fflush(x->out);
    free(buf);
    return 0;
}

/* --watch: the watch thread marks changes; the command's thread debounces
 * and reprints. */
typedef struct st_watch {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    const ec_keys_t *keys;
    bool changed;
    int64_t first_change_ms;  /* monotonic */
    bool compacted;
    char broken[EC_ERRMSG_MAX];
} st_watch_t;

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

static void watch_cb(const ec_watch_event_t *ev, void *arg)
{
    st_watch_t *w = arg;
    pthread_mutex_lock(&w->lock);
    switch (ev->type) {
    case EC_WATCH_PUT:
    case EC_WATCH_DELETE:
        /* Epoch history and worker keys: not shown, so no reprint. */
        if (ec_key_parse_epoch(w->keys, ev->kv->key, ev->kv->key_len, NULL) > 0)
            break;
        if (!w->changed)
            w->first_change_ms = ec_mono_ms();
        w->changed = true;
        pthread_cond_signal(&w->cond);
        break;
    case EC_WATCH_COMPACTED:
        w->compacted = true;
        if (!w->changed)
            w->first_change_ms = ec_mono_ms();
        w->changed = true;
        pthread_cond_signal(&w->cond);
        break;
    case EC_WATCH_BROKEN:
        snprintf(w->broken, sizeof(w->broken), "%s", ev->message ? ev->message : "stream broke");
        pthread_cond_signal(&w->cond);
        break;
    default:
        break;
    }
    pthread_mutex_unlock(&w->lock);
}

static int watch_loop(st_ctx_t *x, int64_t rev)
{
    st_watch_t w = {.keys = &x->keys};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, &ca);
    pthread_condattr_destroy(&ca);

    ec_error_t err = {0};
    int rc = 0;
    ec_watch_t *wt = ec_watch_start(x->c, ec_keys_root(&x->keys), true, rev + 1, watch_cb, &w,
                                    &err);
    if (!wt) {
        fprintf(x->errout, "ecoord status: cannot watch job '%s': %s\n", x->cfg->job_id, err.msg);
        rc = 1;
        goto out;
    }
    while (!stop_signal) {
        /* Wake at least every 50 ms to notice a signal: the handler cannot
         * signal a condition variable. */
        pthread_mutex_lock(&w.lock);
        struct timespec ts = ec_deadline_ts(50);
        if (!w.changed && !w.broken[0])
            pthread_cond_timedwait(&w.cond, &w.lock, &ts);
        char broken[EC_ERRMSG_MAX] = "";
        if (w.broken[0]) {
            snprintf(broken, sizeof(broken), "%s", w.broken);
            w.broken[0] = '\0';
        }
        bool due = w.changed && ec_mono_ms() - w.first_change_ms >= DEBOUNCE_MS;
        bool compacted = due && w.compacted;
        if (due)
            w.changed = w.compacted = false;
        pthread_mutex_unlock(&w.lock);

        if (broken[0])
            fprintf(x->errout, "ecoord status: the watch on etcd broke (%s); reconnecting\n",
                    broken);
        if (!due)
            continue;
        bool finished = false;
        ec_error_clear(&err);
        int r = show_once(x, true, &rev, &finished, &err);
        if (r < 0)
            fprintf(x->errout, "ecoord status: %s\n", err.msg);
        if (r == 0 && finished)
            break;
        if (compacted) {
            /* The watch stopped at a compacted revision: follow on from the
             * revision just read (or from now, if the read failed). */
            ec_watch_stop(wt);
            ec_error_clear(&err);
            wt = ec_watch_start(x->c, ec_keys_root(&x->keys), true, r == 0 ? rev + 1 : 0,
                                watch_cb, &w, &err);
            if (!wt) {
                fprintf(x->errout, "ecoord status: cannot watch job '%s' again: %s\n",
                        x->cfg->job_id, err.msg);
                rc = 1;
                break;
            }
        }
    }
out:
    ec_watch_stop(wt);
    pthread_cond_destroy(&w.cond);
    pthread_mutex_destroy(&w.lock);
    return rc;
}

int ec_cmd_status(const ec_config_t *cfg, FILE *out, FILE *errout)
{
    st_ctx_t x = {.cfg = cfg, .out = out, .errout = errout};
    ec_error_t err = {0};
    int rc = 1;
    if (cfg->elastic_server.n == 0) {
        fprintf(errout, "ecoord status: no etcd to read: pass the job's --elastic_server=HOST:PORT "
                        "(or set ECOORD_ELASTIC_SERVER)\n");
        return 2;
    }
    if (ec_keys_init(&x.keys, cfg->etcd_prefix, cfg->job_id, &err) < 0) {
        fprintf(errout, "ecoord status: %s\n", err.msg);
        return 2;
    }
    x.prefix_shown = cfg->etcd_prefix[0] ? cfg->etcd_prefix : "'' (none)";
    /* --watch ends with exit 0 on SIGINT/SIGTERM.  The handlers go in before
     * anything is printed, so a signal sent after the first block is always
     * a clean stop; one that comes earlier stops the watch at its start. */
    struct sigaction sa = {.sa_handler = on_stop_signal}, old_int = {0}, old_term = {0};
    sigemptyset(&sa.sa_mask);
    if (cfg->watch) {
        stop_signal = 0;
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
    }
    x.c = ec_connect(cfg, NULL, CONNECT_TIMEOUT_MS, &err);
    if (!x.c) {
        fprintf(errout, "ecoord status: %s\n", err.msg);
        goto out;
    }
    ec_etcd_set_call_timeout(x.c, CALL_TIMEOUT_MS);
    if (!(x.etcd = strdup(ec_etcd_endpoints(x.c)))) {
        fprintf(errout, "ecoord status: out of memory\n");
        goto out;
    }
    int64_t rev = 0;
    bool finished = false;
    if (show_once(&x, false, &rev, &finished, &err) < 0) {
        fprintf(errout, "ecoord status: %s\n", err.msg);
        goto out;
    }
    rc = cfg->watch && !finished ? watch_loop(&x, rev) : 0;
out:
    free(x.etcd);
    ec_etcd_destroy(x.c);
    if (cfg->watch) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    return rc;
}

