/* `ecoord check` (see check/command.h): the run around the pure comparison
 * (rules.h): publishing this node's facts (gathered by gather.c), the
 * report's writer, probes, the allreduce job, the report.
 *
 * Timeline of one node (every wait has a deadline and notices SIGINT/SIGTERM
 * within POLL_MS):
 *   1. connect to etcd (or start an embedded one); if that fails, compare this
 *      node's facts alone and report etcd as FAIL.
 *   2. gather the local facts (gather.c), reserve the ports training would use and
 *      listen on them (a thread answers each connection with a hello that
 *      carries this node's id, nonce and wall clock).
 *   3. grant a lease, publish the facts under check/nodes/<node_id> (create
 *      only: a second process with the same node id publishes under an
 *      alternate key, so the report can name both), and wait until --np MAX
 *      nodes have arrived or --elastic_timeout passed.
 *   4. try to create check/report (a create-revision compare): the winner is
 *      the leader of this run.
 *   5. connect to every port of every node (itself included), publish the
 *      results (phase 2), wait until everyone has, stop listening.
 *   6. run the allreduce job when every node has the program, publish its
 *      result (phase 3).
 *   7. the leader waits for every node's phase 3 (or its key vanishing),
 *      compares, publishes the report fenced on its create revision; the
 *      others wait for it.  Everyone prints it.
 *   8. followers revoke their lease; the leader waits (briefly) for them to be
 *      gone, then revokes its own, taking the report with it.
 * The state of check/ is followed by one watch; waits are condition waits.
 * check_run below is these steps in order, one function each; the files
 * they use are listed in command_impl.h.
 */
#define _GNU_SOURCE
#include "command_impl.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "connect.h"
#include "gather.h"
#include "log.h"
#include "netaddr.h"

static volatile sig_atomic_t g_abort;

static void on_signal(int s) { g_abort = s; }

/* Progress goes to errout, so stdout holds nothing but the report. */
static FILE *g_log_out;

static void log_sink(ec_log_level_t lvl, const char *msg, void *arg)
{
    (void)arg;
    if (g_log_out) {
        fprintf(g_log_out, "ecoord check: %s%s\n",
                lvl >= EC_LOG_WARN ? (lvl == EC_LOG_WARN ? "warning: " : "error: ") : "", msg);
        fflush(g_log_out);
    }
}

/* Median and max of a few reads of the report key (absent is fine). */
static void measure_etcd(ck_t *x)
{
    int64_t s[ETCD_SAMPLES];
    int n = 0;
    for (int i = 0; i < ETCD_SAMPLES; i++) {
        ec_kv_t kv;
        bool found = false;
        int64_t t0 = ec_mono_us();
        if (ec_etcd_get(x->c, x->k_report, &kv, &found, NULL, NULL) < 0)
            continue;
        s[n++] = ec_mono_us() - t0;
        if (found)
            ec_kv_free(&kv);
    }
    for (int i = 1; i < n; i++) /* insertion sort: five numbers */
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            int64_t t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    x->self.etcd_rtt_us = n ? s[n / 2] : -1;
    x->self.etcd_rtt_max_us = n ? s[n - 1] : -1;
    ec_etcd_status(x->c, NULL, x->self.etcd_version, sizeof(x->self.etcd_version), NULL);
}

/* Stop answering on our ports, then release them (training may bind them). */
static void listener_stop(ck_t *x)
{
    ec_check_listener_stop(x->listener);
    x->listener = NULL;
    if (x->reserved) {
        ec_ports_release(x->fds, x->nfds);
        ec_ports_unlock(x->self.host, x->ports, x->locks, x->nfds);
        x->reserved = false;
    }
}

static int reserve_ports(ck_t *x)
{
    ec_check_facts_t *f = &x->self;
    if (f->ports_err[0])
        return -1;
    int n = x->cfg->nproc_per_node + 1;
    x->locks = calloc((size_t)n, sizeof(int));
    x->fds = calloc((size_t)n, sizeof(int));
    x->ports = calloc((size_t)n, sizeof(uint16_t));
    f->ports = calloc((size_t)n, sizeof(int));
    if (!x->locks || !x->fds || !x->ports || !f->ports) {
        snprintf(f->ports_err, sizeof(f->ports_err), "out of memory");
        return -1;
    }
    ec_error_t err = {0};
    if (ec_ports_reserve(f->host, x->cfg->port_lo, x->cfg->port_hi, n, x->ports, x->locks, NULL,
                         &err) < 0) {
        snprintf(f->ports_err, sizeof(f->ports_err), "%s", err.msg);
        return -1;
    }
    x->nfds = n;
    x->reserved = true;
    for (int i = 0; i < n; i++)
        x->fds[i] = -1;
    /* Listen on exactly the address and ports training will publish. */
    for (int i = 0; i < n; i++) {
        struct sockaddr_storage ss;
        socklen_t sl;
        char why[160];
        if (ec_check_resolve(f->host, x->ports[i], SOCK_STREAM, &ss, &sl, why, sizeof(why)) < 0) {
            snprintf(f->ports_err, sizeof(f->ports_err), "%s", why);
            return -1;
        }
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
        if (fd >= 0)
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (fd < 0 || bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 64) < 0) {
            snprintf(f->ports_err, sizeof(f->ports_err), "cannot listen on %s:%u: %s", f->host,
                     x->ports[i], strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        x->fds[i] = fd;
    }
    f->nports = n;
    for (int i = 0; i < n; i++)
        f->ports[i] = x->ports[i];
    return 0;
}

/* ------------------------------------------------------------------------ */
/* the run, one step at a time                                               */

/* What a step leaves the run to do. */
typedef enum {
    STEP_NEXT,        /* go on with the next step */
    STEP_DONE,        /* the run is over: r->rc is its exit code */
    STEP_FAILED,      /* r->err says why; exit 1 */
    STEP_INTERRUPTED, /* a signal came: exit 128 + its number, no report */
} step_t;

/* One run's working state, beside the node's (ck_t). */
typedef struct run {
    ec_error_t err;
    int rc;
    char etcd_error[EC_ERRMSG_MAX + 64]; /* why etcd cannot be used, "" when it can */
    int want;                            /* the nodes awaited */
    snap_t snap;                         /* the nodes of this run */
    ec_check_target_t *targets;          /* and where to probe them */
    int nt;
    char leader[EC_NODE_ID_MAX + 1], lnonce[EC_CHECK_NONCE_LEN + 1]; /* the report's writer */
    bool ran;                            /* the allreduce job ran */
    char coll_job[EC_JOB_ID_MAX + 1];
    ec_check_report_t rep;
} run_t;

/* The keys of check/: its prefix, the report, this node's facts. */
static int run_keys(ck_t *x, ec_error_t *err)
{
    const ec_config_t *cfg = x->cfg;
    if (ec_keys_init(&x->keys, cfg->etcd_prefix, cfg->job_id, err) < 0 ||
        ec_key_check(&x->keys, "", x->k_prefix, sizeof(x->k_prefix)) < 0 ||
        ec_key_check(&x->keys, NULL, x->k_report, sizeof(x->k_report)) < 0 ||
        ec_key_check(&x->keys, cfg->node_id, x->k_self, sizeof(x->k_self)) < 0) {
        if (!err->msg[0])
            ec_node_id_check(cfg->node_id, err);
        return -1;
    }
    return 0;
}

/* 1. etcd: --elastic_server's, or an embedded one; r->etcd_error says why
 * not. */
static step_t step_connect(ck_t *x, run_t *r)
{
    const ec_config_t *cfg = x->cfg;
    if (cfg->elastic_server.n == 0) {
        ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
        eo.etcd_path = ec_config_environ("ETCD", NULL);
        eo.search_path = ec_config_environ("PATH", NULL);
        eo.tmpdir = ec_config_environ("TMPDIR", NULL);
        if ((x->embed = ec_embed_start(&eo, &r->err)))
            x->endpoints = strdup(ec_embed_endpoint(x->embed));
        else
            snprintf(r->etcd_error, sizeof(r->etcd_error), "no --elastic_server, and the "
                     "embedded etcd did not start: %s", r->err.msg);
        if (x->embed)
            ec_log(EC_LOG_INFO, "no --elastic_server: checking this node alone with an embedded "
                                "etcd at %s", x->endpoints);
    } else {
        x->endpoints = ec_connect_endpoints(cfg);
    }
    if (!r->etcd_error[0] && !x->endpoints)
        snprintf(r->etcd_error, sizeof(r->etcd_error), "out of memory");
    if (!r->etcd_error[0]) {
        if ((x->c = ec_connect(cfg, x->embed ? x->endpoints : NULL, CONNECT_MS, &r->err)))
            ec_etcd_set_call_timeout(x->c, CONNECT_MS);
        else
            snprintf(r->etcd_error, sizeof(r->etcd_error), "%s", r->err.msg);
    }
    return STEP_NEXT;
}

/* 2. the local facts and ports, and the view of check/; without etcd, the
 * report of this node alone. */
static step_t step_gather(ck_t *x, run_t *r)
{
    ec_check_gather_in_t gin = {x->cfg, x->endpoints, x->env, x->env_arg};
    ec_check_gather(&gin, &x->self);
    reserve_ports(x);
    if (!r->etcd_error[0]) {
        measure_etcd(x);
        if (ec__check_model_sync(x, &r->err) < 0)
            snprintf(r->etcd_error, sizeof(r->etcd_error), "cannot read %s: %s", x->k_prefix,
                     r->err.msg);
    }
    if (!r->etcd_error[0])
        return STEP_NEXT;
    x->arrival_ms = 0;
    if (ec__check_compute_report(x, NULL, x->self.node_id, x->self.nonce, r->etcd_error, &r->rep,
                                 &r->err) < 0)
        return STEP_FAILED;
    r->rc = ec__check_print_report(x, &r->rep);
    return STEP_DONE;
}

/* 3. publish on a lease, answer on our ports, wait for the others. */
static step_t step_publish(ck_t *x, run_t *r)
{
    const ec_config_t *cfg = x->cfg;
    int64_t granted = 0;
    if (ec_etcd_lease_grant(x->c, cfg->lease_ttl_ms / 1000, &x->lease, &granted, &r->err) < 0 ||
        !(x->ka = ec_keepalive_start(x->c, x->lease, granted ? granted : cfg->lease_ttl_ms / 1000,
                                     NULL, NULL, &r->err)))
        return STEP_FAILED;
    if (x->reserved && ec_check_listener_start(x->fds, x->nfds, x->self.node_id, x->self.nonce,
                                                &x->listener, &r->err) < 0)
        return STEP_FAILED;
    if (ec__check_publish_first(x, &r->err) < 0)
        return STEP_FAILED;
    r->want = x->embed ? 1 : cfg->np.max;
    int64_t wait_ms = cfg->elastic_timeout_ms > MIN_ARRIVAL_MS ? cfg->elastic_timeout_ms
                                                               : MIN_ARRIVAL_MS;
    ec_log(EC_LOG_INFO, "node %s published its facts (%s, ports %s); waiting up to %.0f s for "
                        "%d node%s", x->self.node_id, x->self.host,
           x->reserved ? "reserved" : "not reserved", (double)wait_ms / 1000.0, r->want,
           r->want == 1 ? "" : "s");
    ec__check_wait_arrived(x, r->want, x->start_ms + wait_ms);
    x->arrival_ms = ec_mono_ms() - x->start_ms;
    return *x->abort ? STEP_INTERRUPTED : STEP_NEXT;
}

/* The snapshot: the nodes of this run, and where to probe them. */
static step_t step_snapshot(ck_t *x, run_t *r)
{
    pthread_mutex_lock(&x->lock);
    r->snap.keys = calloc((size_t)x->npeers + 1, sizeof(char *));
    r->targets = calloc((size_t)x->npeers + 1, sizeof(*r->targets));
    for (int i = 0; r->snap.keys && r->targets && i < x->npeers; i++) {
        peer_t *p = &x->peers[i];
        if (!p->present || !p->valid)
            continue;
        if (!(r->snap.keys[r->snap.n] = strdup(p->key)))
            break;
        r->snap.n++;
        ec_check_target_t *t = &r->targets[r->nt++];
        snprintf(t->node_id, sizeof(t->node_id), "%s", p->f.node_id);
        snprintf(t->nonce, sizeof(t->nonce), "%s", p->f.nonce);
        snprintf(t->host, sizeof(t->host), "%s", p->f.host);
        t->nports = p->f.ports_err[0] ? 0 : p->f.nports;
        t->ports = t->nports ? malloc((size_t)t->nports * sizeof(int)) : NULL;
        if (t->ports)
            memcpy(t->ports, p->f.ports, (size_t)t->nports * sizeof(int));
        else
            t->nports = 0;
    }
    pthread_mutex_unlock(&x->lock);
    if (!r->snap.keys || !r->targets) {
        ec_errorf(&r->err, EC_ENOMEM, "out of memory");
        return STEP_FAILED;
    }
    return STEP_NEXT;
}

/* 4. who writes the report; a node that came after the others closed the
 * check is told to run it again. */
static step_t step_elect(ck_t *x, run_t *r)
{
    bool late = false;
    if (ec__check_elect(x, &late, r->leader, sizeof(r->leader), r->lnonce, &r->err) < 0)
        return STEP_FAILED;
    if (late) {
        fprintf(x->errout, "ecoord check: node %s arrived after the others had closed the check "
                           "(%s writes the report for the nodes that arrived within "
                           "--elastic_timeout); run `ecoord check` again on every node at once\n",
                x->self.node_id, r->leader);
        r->rc = 1;
        return STEP_DONE;
    }
    ec_log(EC_LOG_INFO, "%d of %d node%s arrived in %.1f s; %s writes the report", r->snap.n,
           r->want, r->want == 1 ? "" : "s", (double)x->arrival_ms / 1000.0, r->leader);
    return STEP_NEXT;
}

/* 5. probe every node's ports, publish the results, wait for the others. */
static step_t step_probe(ck_t *x, run_t *r)
{
    ec_check_probe_all(x->cfg->job_id, &x->self, r->targets, r->nt, x->abort);
    x->self.phase = EC_CHECK_PHASE_PROBED;
    if (ec__check_put_self(x, &r->err) < 0)
        return STEP_FAILED;
    ec__check_wait_phase(x, &r->snap, EC_CHECK_PHASE_PROBED, ec_mono_ms() + PHASE_MS);
    listener_stop(x);
    return *x->abort ? STEP_INTERRUPTED : STEP_NEXT;
}

/* 6. the allreduce job, when every node has its program; its result
 * published. */
static step_t step_collective(ck_t *x, run_t *r)
{
    char why[256];
    bool gpus = false;
    ec__check_coll_decide(x, &r->snap, why, sizeof(why), &gpus);
    r->ran = !why[0];
    if (r->ran) {
        ec__check_coll_job_id(x, r->lnonce, r->coll_job, sizeof(r->coll_job));
        ec__check_run_collective(x, r->snap.n, gpus, r->coll_job);
    } else {
        x->self.coll = EC_CHECK_COLL_SKIP;
        snprintf(x->self.coll_why, sizeof(x->self.coll_why), "%s", why);
    }
    x->self.phase = EC_CHECK_PHASE_DONE;
    if (ec__check_put_self(x, &r->err) < 0)
        return STEP_FAILED;
    return *x->abort ? STEP_INTERRUPTED : STEP_NEXT;
}

/* How much longer than a phase the last one may take: the allreduce job. */
static int64_t coll_ms(const run_t *r)
{
    return r->ran ? COLL_EXTRA_MS + 5000 : 0;
}

/* The leader's report into check/, fenced on the claim it created.  Only
 * encoding fails it: a report etcd refuses is printed here all the same. */
static int put_report(ck_t *x, const ec_check_report_t *rep, ec_error_t *err)
{
    void *buf = NULL;
    size_t len = 0;
    if (ec_check_report_encode(rep, &buf, &len, err) < 0)
        return -1;
    ec_cmp_t ours = {.key = x->k_report, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL,
                     .number = x->report_rev};
    ec_op_t put = {.type = EC_OP_PUT, .key = x->k_report, .value = buf, .value_len = len,
                   .lease = x->lease};
    ec_txn_result_t r;
    int trc = ec_etcd_txn(x->c, &ours, 1, &put, 1, NULL, 0, &r, err);
    free(buf);
    if (trc < 0)
        ec_log(EC_LOG_ERROR, "cannot publish the report: %s; the others will compute their "
                             "own", err->msg);
    else if (!r.succeeded)
        ec_log(EC_LOG_ERROR, "%s was replaced by someone else; the report is printed here "
                             "only", x->k_report);
    if (trc == 0)
        ec_txn_result_free(&r);
    return 0;
}

/* 7, the leader: wait for every node's result, remove the allreduce job's
 * keys, compare, publish. */
static step_t report_lead(ck_t *x, run_t *r)
{
    const ec_config_t *cfg = x->cfg;
    ec__check_wait_phase(x, &r->snap, EC_CHECK_PHASE_DONE, ec_mono_ms() + PHASE_MS + coll_ms(r));
    if (*x->abort)
        return STEP_INTERRUPTED;
    if (r->ran) {
        /* every node's allreduce job has ended: remove its keys (epoch,
         * history, status), which `ecoord launch` keeps for a job */
        ec_keys_t ck;
        if (ec_keys_init(&ck, cfg->etcd_prefix, r->coll_job, NULL) == 0 &&
            ec_etcd_delete(x->c, ec_keys_root(&ck), true, NULL, &r->err) < 0)
            ec_log(EC_LOG_WARN, "cannot remove the allreduce job's keys under %s: %s",
                   ec_keys_root(&ck), r->err.msg);
    }
    if (ec__check_compute_report(x, &r->snap, x->self.node_id, x->self.nonce, NULL, &r->rep,
                                 &r->err) < 0)
        return STEP_FAILED;
    return put_report(x, &r->rep, &r->err) < 0 ? STEP_FAILED : STEP_NEXT;
}

/* 7, the others: the leader's report, else one computed here from the facts
 * this node saw. */
static step_t report_follow(ck_t *x, run_t *r)
{
    int64_t deadline = ec_mono_ms() + PHASE_MS + REPORT_SLACK_MS + coll_ms(r);
    bool got = ec__check_wait_report(x, deadline);
    if (*x->abort)
        return STEP_INTERRUPTED;
    if (got) {
        pthread_mutex_lock(&x->lock);
        int drc = ec_check_report_decode(x->report, x->report_len, x->k_report, &r->rep, &r->err);
        pthread_mutex_unlock(&x->lock);
        if (drc < 0)
            got = false;
    }
    if (!got) {
        ec_log(EC_LOG_WARN, "%s published no report within %.0f s (%s); this report was "
                            "computed here from the facts this node saw", r->leader,
               (double)(PHASE_MS + REPORT_SLACK_MS + coll_ms(r)) / 1000.0,
               r->err.msg[0] ? r->err.msg : "it stopped or lost etcd");
        ec_check_report_clear(&r->rep);
        if (ec__check_compute_report(x, &r->snap, x->self.node_id, x->self.nonce, NULL, &r->rep,
                                     &r->err) < 0)
            return STEP_FAILED;
    }
    return STEP_NEXT;
}

/* 7. the report, printed by every node. */
static step_t step_report(ck_t *x, run_t *r)
{
    step_t s = x->leader ? report_lead(x, r) : report_follow(x, r);
    if (s != STEP_NEXT)
        return s;
    r->rc = ec__check_print_report(x, &r->rep);
    return STEP_NEXT;
}

/* 8. leave no key behind: followers go first, the report goes last (with
 * the leader's lease, in run_end). */
static step_t step_leave(ck_t *x, run_t *r)
{
    (void)r;
    if (x->leader)
        ec__check_wait_alone(x, ec_mono_ms() + CLEANUP_MS);
    return STEP_DONE;
}

/* Whatever step the run ended at: stop answering and following, revoke the
 * lease (taking this node's keys with it). */
static void run_end(ck_t *x, run_t *r)
{
    listener_stop(x);
    ec_watch_stop(x->watch);
    x->watch = NULL;
    ec_keepalive_stop(x->ka);
    x->ka = NULL;
    if (x->lease)
        ec_etcd_lease_revoke(x->c, x->lease, NULL);
    ec_check_report_clear(&r->rep);
    ec__check_snap_free(&r->snap);
    for (int i = 0; i < r->nt; i++)
        free(r->targets[i].ports);
    free(r->targets);
}

static int check_run(ck_t *x)
{
    static step_t (*const steps[])(ck_t *, run_t *) = {
        step_connect, step_gather,     step_publish, step_snapshot, step_elect,
        step_probe,   step_collective, step_report,  step_leave,
    };
    run_t r;
    memset(&r, 0, sizeof(r));
    r.rc = 1;
    if (run_keys(x, &r.err) < 0) {
        fprintf(x->errout, "ecoord check: %s\n", r.err.msg);
        return 2;
    }
    step_t s = STEP_NEXT;
    for (size_t i = 0; s == STEP_NEXT && i < sizeof(steps) / sizeof(steps[0]); i++)
        s = steps[i](x, &r);
    if (s == STEP_INTERRUPTED) {
        fprintf(x->errout, "ecoord check: interrupted by %s; no report\n", strsignal(*x->abort));
        r.rc = 128 + *x->abort;
    } else if (s == STEP_FAILED) {
        fprintf(x->errout, "ecoord check: %s\n", r.err.msg[0] ? r.err.msg : "failed");
        r.rc = 1;
    }
    run_end(x, &r);
    return r.rc;
}

int ec_cmd_check(const ec_config_t *cfg, FILE *out, FILE *errout)
{
    ck_t x;
    memset(&x, 0, sizeof(x));
    x.cfg = cfg;
    x.env = ec_config_environ;
    x.out = out;
    x.errout = errout;
    x.abort = &g_abort;
    x.start_ms = ec_mono_ms();
    pthread_mutex_init(&x.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&x.cond, &ca);
    pthread_condattr_destroy(&ca);

    g_abort = 0;
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term, old_pipe;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, &old_pipe);
    g_log_out = errout;
    ec_log_set_sink(log_sink, NULL, cfg->log_level);
    for (int i = 0; i < cfg->nwarnings; i++)
        ec_log(EC_LOG_WARN, "%s", cfg->warnings[i]);

    int rc = check_run(&x);

    ec_etcd_destroy(x.c);
    ec_embed_stop(x.embed);
    ec__check_view_clear(&x);
    free(x.endpoints);
    free(x.fds);
    free(x.locks);
    free(x.ports);
    ec_check_facts_clear(&x.self);
    pthread_cond_destroy(&x.cond);
    pthread_mutex_destroy(&x.lock);
    ec_log_set_sink(NULL, NULL, EC_LOG_INFO);
    g_log_out = NULL;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    return rc;
}
