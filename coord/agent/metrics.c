/* The agent's Prometheus metrics and health endpoints (see metrics.h).
 *
 * All values live in one struct under one mutex: the agent's main thread,
 * the node coordinator's thread, the etcd prober and the HTTP thread all
 * touch them, and a scrape must see one consistent snapshot.  Rendering
 * holds the lock only while it formats into memory. */
#define _GNU_SOURCE
#include "config.h"
#include "clock.h"

#include "metrics.h"
#include "keys.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "log.h"

#ifdef HAVE_MICROHTTPD
#include <microhttpd.h>
#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mhd_result_t;
#else
typedef int mhd_result_t;
#endif
#endif

/* Upper bounds, in seconds, shared by every histogram: recovery phases
 * range from a millisecond (publish) to minutes (decide waits out
 * --elastic_timeout), etcd probes from 100 us up to the call deadline. */
static const double bucket_le[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                   0.25,   0.5,   1,      2.5,   5,    10,    30,    60, 120};
#define NBUCKETS (sizeof(bucket_le) / sizeof(bucket_le[0]))

typedef struct {
    uint64_t in[NBUCKETS]; /* per bucket, not cumulative; above the last: n - sum(in) */
    uint64_t n;
    double sum;
} hist_t;

#define NREASONS 7  /* ec_epoch_reason_t values 0..6 */
#define NKINDS 4    /* ec_failure_kind_t values 0..3 */
#define NCODES 32   /* -EC_* codes */

struct ec_metrics {
    pthread_mutex_t lock;
    char *job_id, *node_id, *version;
    int64_t start_wall_ms;

    /* the job as this node sees it */
    uint64_t epoch;
    int world, nodes, nproc, m_id;
    int64_t applied_wall_ms;
    ec_mstate_t state;
    uint64_t epochs[NREASONS];
    uint64_t failures[NKINDS];
    uint64_t restarts;
    int64_t failed_at_mono_ms; /* 0: no recovery under way */
    hist_t phase[EC_PHASE__COUNT];

    /* coordinator events */
    bool leader;
    uint64_t elections;
    bool lease_ok;
    unsigned long long lease_id;
    uint64_t lease_losses;

    /* hangs and stragglers: per node progress (own; all members on the
     * leader), bounded by EC_METRICS_NODES_MAX; and the events */
    struct mprog {
        char id[EC_NODE_ID_MAX + 1];
        ec_node_progress_t p;
    } *prog;
    size_t nprog;
    uint64_t hang_suspects, hang_stalls, stragglers;

    /* etcd prober */
    ec_etcd_t *etcd;
    int probe_interval_ms;
    int etcd_up; /* -1: not probed yet */
    int64_t etcd_revision;
    hist_t probe;
    uint64_t probe_errors[NCODES];
    bool prober_started, stopping;
    pthread_cond_t cond;
    pthread_t prober;

#ifdef HAVE_MICROHTTPD
    struct MHD_Daemon *httpd;
#endif
    int port;
};

const char *ec_mstate_name(ec_mstate_t st)
{
    switch (st) {
#define EC__N(n, v, t) \
    case EC_MSTATE_##n: return t;
        EC_MSTATE_MAP(EC__N)
#undef EC__N
    default: break;
    }
    return "unknown";
}

const char *ec_phase_name(ec_phase_t ph)
{
    switch (ph) {
#define EC__N(n, v, t) \
    case EC_PHASE_##n: return t;
        EC_PHASE_MAP(EC__N)
#undef EC__N
    default: break;
    }
    return "unknown";
}

static void hist_add(hist_t *h, double v)
{
    if (v < 0)
        v = 0;
    for (size_t i = 0; i < NBUCKETS; i++)
        if (v <= bucket_le[i]) {
            h->in[i]++;
            break;
        }
    h->n++;
    h->sum += v;
}

/* ---- reports ------------------------------------------------------------ */

void ec_metrics_state(ec_metrics_t *m, ec_mstate_t st)
{
    if (!m || st < 0 || st >= EC_MSTATE__COUNT)
        return;
    pthread_mutex_lock(&m->lock);
    m->state = st;
    pthread_mutex_unlock(&m->lock);
}

void ec_metrics_observe(ec_metrics_t *m, ec_phase_t phase, double seconds)
{
    if (!m || phase < 0 || phase >= EC_PHASE__COUNT)
        return;
    pthread_mutex_lock(&m->lock);
    hist_add(&m->phase[phase], seconds);
    pthread_mutex_unlock(&m->lock);
}

void ec_metrics_epoch(ec_metrics_t *m, const ec_epoch_t *ep, int m_id, int64_t apply_ms)
{
    if (!m || !ep)
        return;
    int64_t now = ec_wall_ms(), seen = now - (apply_ms > 0 ? apply_ms : 0);
    pthread_mutex_lock(&m->lock);
    m->epoch = ep->number;
    m->world = ep->world_size;
    m->nodes = ep->nmembers;
    m->nproc = ep->nproc;
    m->m_id = m_id;
    m->applied_wall_ms = now;
    /* leaving, done and failed are final: a late epoch does not undo them */
    if (m->state == EC_MSTATE_JOINING || m->state == EC_MSTATE_MEMBER ||
        m->state == EC_MSTATE_STANDBY)
        m->state = m_id >= 0 ? EC_MSTATE_MEMBER : EC_MSTATE_STANDBY;
    if ((int)ep->reason > 0 && (int)ep->reason < NREASONS)
        m->epochs[ep->reason]++;
    /* Times the leader did not record are 0: skip those phases rather than
     * report durations from 1970. */
    if (ep->observed_at_ms > 0 && ep->decided_at_ms >= ep->observed_at_ms)
        hist_add(&m->phase[EC_PHASE_DECIDE], (double)(ep->decided_at_ms - ep->observed_at_ms) / 1e3);
    if (ep->planner_us > 0)
        hist_add(&m->phase[EC_PHASE_PLAN], (double)ep->planner_us / 1e6);
    if (ep->decided_at_ms > 0 && ep->published_at_ms >= ep->decided_at_ms)
        hist_add(&m->phase[EC_PHASE_PUBLISH],
                 (double)(ep->published_at_ms - ep->decided_at_ms) / 1e3);
    if (ep->published_at_ms > 0)
        hist_add(&m->phase[EC_PHASE_DELIVER], (double)(seen - ep->published_at_ms) / 1e3);
    hist_add(&m->phase[EC_PHASE_APPLY], (double)apply_ms / 1e3);
    if (ep->observed_at_ms > 0)
        hist_add(&m->phase[EC_PHASE_TOTAL], (double)(now - ep->observed_at_ms) / 1e3);
    if (m->failed_at_mono_ms && m_id >= 0) {
        hist_add(&m->phase[EC_PHASE_RECOVER], (double)(ec_mono_ms() - m->failed_at_mono_ms) / 1e3);
        m->failed_at_mono_ms = 0;
    }
    pthread_mutex_unlock(&m->lock);
}

void ec_metrics_failure(ec_metrics_t *m, ec_failure_kind_t kind)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    if ((int)kind > 0 && (int)kind < NKINDS)
        m->failures[kind]++;
    if (!m->failed_at_mono_ms)
        m->failed_at_mono_ms = ec_mono_ms();
    pthread_mutex_unlock(&m->lock);
}

void ec_metrics_restart(ec_metrics_t *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->restarts++;
    pthread_mutex_unlock(&m->lock);
}

static bool starts(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

void ec_metrics_event(ec_metrics_t *m, const char *ev)
{
    if (!m || !ev)
        return;
    pthread_mutex_lock(&m->lock);
    if (starts(ev, "+leader ")) {
        m->leader = true;
        m->elections++;
    } else if (starts(ev, "-leader ")) {
        m->leader = false;
    } else if (starts(ev, "+node ") && strstr(ev, " registered")) {
        m->lease_ok = true;
        const char *l = strstr(ev, " lease=");
        if (l)
            m->lease_id = strtoull(l + 7, NULL, 16);
    } else if (starts(ev, "-lease ")) {
        m->lease_ok = false;
        m->lease_losses++;
    } else if (starts(ev, "+hang-suspect ")) {
        m->hang_suspects++;
    } else if (starts(ev, "+hang-stalled ")) {
        m->hang_stalls++;
    } else if (starts(ev, "+straggler ")) {
        m->stragglers++;
    } else if (starts(ev, "-node ") && strstr(ev, " leaving")) {
        m->lease_ok = false;
        m->leader = false;
        if (m->state != EC_MSTATE_DONE && m->state != EC_MSTATE_FAILED)
            m->state = EC_MSTATE_LEAVING; /* done and failed say more */
    }
    pthread_mutex_unlock(&m->lock);
}

void ec_metrics_progress(ec_metrics_t *m, const char *node_id, const ec_node_progress_t *p)
{
    if (!m || !node_id || !p)
        return;
    pthread_mutex_lock(&m->lock);
    size_t i = 0;
    while (i < m->nprog && strcmp(m->prog[i].id, node_id) != 0)
        i++;
    if (i == m->nprog && m->nprog < EC_METRICS_NODES_MAX) {
        struct mprog *g = realloc(m->prog, (m->nprog + 1) * sizeof(*g));
        if (g) {
            m->prog = g;
            snprintf(g[i].id, sizeof(g[i].id), "%s", node_id);
            m->nprog++;
        }
    }
    if (i < m->nprog)
        m->prog[i].p = *p;
    pthread_mutex_unlock(&m->lock);
}

bool ec_metrics_ready(ec_metrics_t *m, char *why, size_t len)
{
    if (!m) {
        snprintf(why, len, "no metrics");
        return false;
    }
    bool ok = false;
    pthread_mutex_lock(&m->lock);
    if (!m->lease_ok)
        snprintf(why, len, "node %s holds no live lease in etcd (not registered yet, lease lost, "
                           "or leaving)", m->node_id);
    else if (m->etcd && m->etcd_up == 0)
        snprintf(why, len, "the last etcd probe failed (see ecoord_etcd_probe_errors_total)");
    else if (m->state == EC_MSTATE_LEAVING || m->state == EC_MSTATE_DONE ||
             m->state == EC_MSTATE_FAILED)
        snprintf(why, len, "node %s is %s", m->node_id, ec_mstate_name(m->state));
    else
        ok = true;
    pthread_mutex_unlock(&m->lock);
    return ok;
}

/* ---- exposition ---------------------------------------------------------- */

/* Label values here are node ids, job ids and versions (restricted
 * alphabets), but escape anyway: the format requires it. */
static void put_label(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fputc('\\', f), fputc(*s, f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_hist(FILE *f, const char *name, const char *label, const char *value,
                     const hist_t *h)
{
    char lab[128] = "";
    if (label)
        snprintf(lab, sizeof(lab), "%s=\"%s\",", label, value);
    uint64_t cum = 0;
    for (size_t i = 0; i < NBUCKETS; i++) {
        cum += h->in[i];
        fprintf(f, "%s_bucket{%sle=\"%g\"} %" PRIu64 "\n", name, lab, bucket_le[i], cum);
    }
    fprintf(f, "%s_bucket{%sle=\"+Inf\"} %" PRIu64 "\n", name, lab, h->n);
    if (label) {
        lab[strlen(lab) - 1] = '\0'; /* drop the trailing comma */
        fprintf(f, "%s_sum{%s} %.6f\n%s_count{%s} %" PRIu64 "\n", name, lab, h->sum, name, lab,
                h->n);
    } else {
        fprintf(f, "%s_sum %.6f\n%s_count %" PRIu64 "\n", name, h->sum, name, h->n);
    }
}

static void render(ec_metrics_t *m, FILE *f)
{
    head(f, "ecoord_info", "gauge", "The agent: its job, node id and version.");
    fputs("ecoord_info{job_id=\"", f);
    put_label(f, m->job_id);
    fputs("\",node_id=\"", f);
    put_label(f, m->node_id);
    fputs("\",version=\"", f);
    put_label(f, m->version);
    fputs("\"} 1\n", f);
    head(f, "ecoord_start_time_seconds", "gauge", "When the agent started (unix time).");
    fprintf(f, "ecoord_start_time_seconds %.3f\n", (double)m->start_wall_ms / 1e3);

    head(f, "ecoord_epoch", "gauge", "Number of the epoch this node applied last (0: none yet).");
    fprintf(f, "ecoord_epoch %" PRIu64 "\n", m->epoch);
    head(f, "ecoord_world_size", "gauge", "Training processes in the current epoch (nodes x nproc_per_node).");
    fprintf(f, "ecoord_world_size %d\n", m->world);
    head(f, "ecoord_nodes", "gauge", "Member nodes in the current epoch.");
    fprintf(f, "ecoord_nodes %d\n", m->nodes);
    head(f, "ecoord_nproc_per_node", "gauge", "Training processes per node in the current epoch.");
    fprintf(f, "ecoord_nproc_per_node %d\n", m->nproc);
    head(f, "ecoord_node_index", "gauge", "This node's M_id in the current epoch; -1 when it is not a member.");
    fprintf(f, "ecoord_node_index %d\n", m->m_id);
    head(f, "ecoord_epoch_applied_timestamp_seconds", "gauge",
         "When this node applied the current epoch (unix time; 0: none yet).");
    fprintf(f, "ecoord_epoch_applied_timestamp_seconds %.3f\n", (double)m->applied_wall_ms / 1e3);
    head(f, "ecoord_membership_state", "gauge", "What this node is doing in the job: one state is 1.");
    for (int s = 0; s < EC_MSTATE__COUNT; s++)
        fprintf(f, "ecoord_membership_state{state=\"%s\"} %d\n", ec_mstate_name((ec_mstate_t)s),
                m->state == (ec_mstate_t)s);
    head(f, "ecoord_epochs_total", "counter", "Epochs this node applied, by the reason the leader gave.");
    for (int r = 1; r < NREASONS; r++)
        fprintf(f, "ecoord_epochs_total{reason=\"%s\"} %" PRIu64 "\n",
                ec_epoch_reason_name((ec_epoch_reason_t)r), m->epochs[r]);

    head(f, "ecoord_failures_total", "counter", "Training processes of this node that failed, by how they ended.");
    for (int k = EC_FAILURE_EXITED; k <= EC_FAILURE_SIGNALED; k++)
        fprintf(f, "ecoord_failures_total{kind=\"%s\"} %" PRIu64 "\n",
                ec_failure_kind_name((ec_failure_kind_t)k), m->failures[k]);
    head(f, "ecoord_restarts_total", "counter", "Times this node restarted its processes after a failure (see --max_restart).");
    fprintf(f, "ecoord_restarts_total %" PRIu64 "\n", m->restarts);

    head(f, "ecoord_is_leader", "gauge", "1 while this node holds the job's leader key.");
    fprintf(f, "ecoord_is_leader %d\n", m->leader);
    head(f, "ecoord_leader_elections_total", "counter", "Times this node won the leader key.");
    fprintf(f, "ecoord_leader_elections_total %" PRIu64 "\n", m->elections);
    head(f, "ecoord_lease_ok", "gauge", "1 while this node is registered under a live etcd lease.");
    fprintf(f, "ecoord_lease_ok %d\n", m->lease_ok);
    /* The id is a label, not a value: 64-bit ids do not survive a float. */
    head(f, "ecoord_lease_info", "gauge", "This node's live etcd lease, by id (hex, as etcdctl lease list shows it); absent without one.");
    if (m->lease_ok)
        fprintf(f, "ecoord_lease_info{lease_id=\"%llx\"} 1\n", m->lease_id);
    head(f, "ecoord_lease_losses_total", "counter", "Times this node's lease expired or was revoked under it and it registered again.");
    fprintf(f, "ecoord_lease_losses_total %" PRIu64 "\n", m->lease_losses);

    head(f, "ecoord_node_step_seconds", "gauge", "Median step time of a node's ranks over a sliding window (its agent's progress summary; the leader shows every member, other agents their own node).");
    for (size_t i = 0; i < m->nprog; i++)
        if (m->prog[i].p.step_p50_us > 0)
            fprintf(f, "ecoord_node_step_seconds{node=\"%s\"} %.6f\n", m->prog[i].id,
                    (double)m->prog[i].p.step_p50_us / 1e6);
    head(f, "ecoord_node_slowest_rank_step_seconds", "gauge", "Step time of a node's slowest rank over the same window.");
    for (size_t i = 0; i < m->nprog; i++)
        if (m->prog[i].p.slowest_us > 0)
            fprintf(f, "ecoord_node_slowest_rank_step_seconds{node=\"%s\",local_rank=\"%d\"} %.6f\n",
                    m->prog[i].id, m->prog[i].p.slowest_rank,
                    (double)m->prog[i].p.slowest_us / 1e6);
    head(f, "ecoord_node_step", "gauge", "Lowest step count among a node's ranks, as last published (published when silence, pauses or step times change, not every step).");
    for (size_t i = 0; i < m->nprog; i++)
        fprintf(f, "ecoord_node_step{node=\"%s\"} %llu\n", m->prog[i].id,
                (unsigned long long)m->prog[i].p.step);
    head(f, "ecoord_node_silent", "gauge", "1 while a rank of the node has made no progress for the silence threshold (half of --hang_timeout, at most 10 s), as last published; 2 when one is also stopped (SIGSTOP).");
    for (size_t i = 0; i < m->nprog; i++)
        fprintf(f, "ecoord_node_silent{node=\"%s\"} %d\n", m->prog[i].id,
                m->prog[i].p.stopped ? 2 : m->prog[i].p.silent_ms > 0);
    head(f, "ecoord_hang_events_total", "counter", "Hang and straggler decisions this node took as leader: suspect (a node evicted as hung), stalled (no single node to blame), straggler.");
    fprintf(f, "ecoord_hang_events_total{event=\"suspect\"} %" PRIu64 "\n", m->hang_suspects);
    fprintf(f, "ecoord_hang_events_total{event=\"stalled\"} %" PRIu64 "\n", m->hang_stalls);
    fprintf(f, "ecoord_hang_events_total{event=\"straggler\"} %" PRIu64 "\n", m->stragglers);

    head(f, "ecoord_recovery_phase_seconds", "histogram",
         "Duration of each phase of a membership change: decide (leader observed the change to "
         "decision), plan (planner run), publish (decision to the epoch written), deliver "
         "(written to seen here), apply (old processes stopped and new ones started), recover "
         "(a local failure to its replacement running), total (observed to running here).");
    for (int p = 0; p < EC_PHASE__COUNT; p++)
        put_hist(f, "ecoord_recovery_phase_seconds", "phase", ec_phase_name((ec_phase_t)p),
                 &m->phase[p]);

    if (m->etcd) {
        head(f, "ecoord_etcd_up", "gauge", "1 when the last etcd probe (Maintenance.Status) succeeded; -1 before the first.");
        fprintf(f, "ecoord_etcd_up %d\n", m->etcd_up);
        head(f, "ecoord_etcd_revision", "gauge", "etcd's store revision at the last successful probe.");
        fprintf(f, "ecoord_etcd_revision %" PRId64 "\n", m->etcd_revision);
        head(f, "ecoord_etcd_probe_duration_seconds", "histogram", "Round trip of the etcd probes that succeeded.");
        put_hist(f, "ecoord_etcd_probe_duration_seconds", NULL, NULL, &m->probe);
        head(f, "ecoord_etcd_probe_errors_total", "counter", "etcd probes that failed, by error code.");
        bool any = false;
        for (int c = 1; c < NCODES; c++)
            if (m->probe_errors[c]) {
                fprintf(f, "ecoord_etcd_probe_errors_total{code=\"%s\"} %" PRIu64 "\n",
                        ec_err_name(-c), m->probe_errors[c]);
                any = true;
            }
        if (!any) /* keep the series alive so rate() works from the start */
            fprintf(f, "ecoord_etcd_probe_errors_total{code=\"%s\"} 0\n",
                    ec_err_name(EC_EUNAVAILABLE));
    }
}

char *ec_metrics_text(ec_metrics_t *m)
{
    if (!m)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    pthread_mutex_lock(&m->lock);
    render(m, f);
    pthread_mutex_unlock(&m->lock);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* ---- the etcd prober ------------------------------------------------------ */

static void *prober_main(void *arg)
{
    ec_metrics_t *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stopping) {
        pthread_mutex_unlock(&m->lock);
        int64_t rev = 0;
        char ver[32];
        ec_error_t err = {0};
        int64_t t0 = ec_mono_us();
        int rc = ec_etcd_status(m->etcd, &rev, ver, sizeof(ver), &err);
        double dt = (double)(ec_mono_us() - t0) / 1e6;
        pthread_mutex_lock(&m->lock);
        if (rc == 0) {
            if (m->etcd_up == 0)
                ec_log(EC_LOG_INFO, "+etcd-up: probe answered in %.3f s", dt);
            m->etcd_up = 1;
            m->etcd_revision = rev;
            hist_add(&m->probe, dt);
        } else {
            if (m->etcd_up != 0)
                ec_log(EC_LOG_WARN, "-etcd-down: probe failed: %s", err.msg);
            m->etcd_up = 0;
            m->probe_errors[rc < 0 && -rc < NCODES ? -rc : -EC_EINTERNAL]++;
        }
        struct timespec until = ec_deadline_ts(m->probe_interval_ms);
        while (!m->stopping && pthread_cond_timedwait(&m->cond, &m->lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

/* ---- HTTP ------------------------------------------------------------------- */

#ifdef HAVE_MICROHTTPD
/* Only ec_metrics_create's thread writes this, while MHD starts: the reason
 * a daemon failed to start, for the error message. */
static __thread char mhd_start_error[256];

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char buf[512];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    snprintf(mhd_start_error, sizeof(mhd_start_error), "%s", buf);
    ec_log(EC_LOG_DEBUG, "metrics http: %s", buf);
}

static mhd_result_t reply(struct MHD_Connection *conn, unsigned status, const char *ctype,
                          char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    mhd_result_t rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dupf(const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static mhd_result_t on_request(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **state)
{
    ec_metrics_t *m = cls;
    (void)version;
    (void)upload;
    /* MHD calls once with the headers, then again: answer on the second
     * call so a request body (none expected) is drained first. */
    static int first;
    if (!*state) {
        *state = &first;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    const char *text = "text/plain; charset=utf-8";
    char *body;
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
        body = dupf("%s is not served here: use GET /metrics, /healthz or /readyz\n", method);
        return body ? reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, text, body) : MHD_NO;
    }
    if (!strcmp(url, "/metrics")) {
        body = ec_metrics_text(m);
        return body ? reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body)
                    : MHD_NO;
    }
    if (!strcmp(url, "/healthz") || !strcmp(url, "/livez")) {
        body = dupf("ok\n");
        return body ? reply(conn, MHD_HTTP_OK, text, body) : MHD_NO;
    }
    if (!strcmp(url, "/readyz")) {
        char why[256];
        bool ok = ec_metrics_ready(m, why, sizeof(why));
        body = ok ? dupf("ok\n") : dupf("not ready: %s\n", why);
        return body ? reply(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, text, body)
                    : MHD_NO;
    }
    body = dupf("no page %s here: this agent serves /metrics, /healthz and /readyz\n", url);
    return body ? reply(conn, MHD_HTTP_NOT_FOUND, text, body) : MHD_NO;
}

static int http_start(ec_metrics_t *m, const ec_metrics_opts_t *o, ec_error_t *err)
{
    struct sockaddr_storage ss;
    bool have_addr = false;
    if (o->bind_addr && *o->bind_addr) {
        struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE,
                                 .ai_socktype = SOCK_STREAM};
        struct addrinfo *ai = NULL;
        char port[8];
        snprintf(port, sizeof(port), "%d", o->port);
        if (getaddrinfo(o->bind_addr, port, &hints, &ai) != 0 || !ai)
            return ec_errorf(err, EC_EINVAL, "metrics: '%s' is not a numeric IP address to "
                                             "listen on", o->bind_addr);
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
        have_addr = true;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    /* Any address: IPv6 and IPv4 on one socket where the host has IPv6 (a
     * pod may be single-stack either way); IPv4 alone otherwise. */
    unsigned tries[2] = {flags | (have_addr ? 0 : MHD_USE_DUAL_STACK), flags};
    for (int i = 0; i < (have_addr ? 1 : 2) && !m->httpd; i++) {
        mhd_start_error[0] = '\0';
        m->httpd = MHD_start_daemon(tries[i], (uint16_t)o->port, NULL, NULL, on_request, m,
                                    MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, NULL,
                                    MHD_OPTION_CONNECTION_LIMIT, 64u,
                                    MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                                    have_addr ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, &ss,
                                    MHD_OPTION_END);
    }
    if (!m->httpd)
        return ec_errorf(err, EC_ESYS,
                         "metrics: cannot listen on %s port %d%s%s (is another process using "
                         "it? pick another --metrics_port, or 0 to turn metrics off)",
                         have_addr ? o->bind_addr : "every address,", o->port,
                         mhd_start_error[0] ? ": " : "", mhd_start_error);
    return 0;
}
#endif

bool ec_metrics_http_available(void)
{
#ifdef HAVE_MICROHTTPD
    return true;
#else
    return false;
#endif
}

/* ---- lifecycle --------------------------------------------------------------- */

ec_metrics_t *ec_metrics_create(const ec_metrics_opts_t *o, ec_error_t *err)
{
    if (!o || o->size < sizeof(ec_metrics_opts_t) || o->port < 0 || o->port > 65535) {
        ec_errorf(err, EC_EINVAL, "metrics: bad options (port must be 0..65535)");
        return NULL;
    }
#ifndef HAVE_MICROHTTPD
    if (o->port > 0) {
        ec_errorf(err, EC_EINVAL,
                  "--metrics_port=%d: this ecoord was built without libmicrohttpd, so it cannot "
                  "serve metrics; install it ('apt-get install libmicrohttpd-dev'), run "
                  "./configure and make again, or leave --metrics_port at 0",
                  o->port);
        return NULL;
    }
#endif
    ec_metrics_t *m = calloc(1, sizeof(*m));
    if (!m) {
        ec_errorf(err, EC_ENOMEM, "metrics: out of memory");
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    m->job_id = strdup(o->job_id ? o->job_id : "");
    m->node_id = strdup(o->node_id ? o->node_id : "");
    m->version = strdup(o->version ? o->version : "");
    m->start_wall_ms = ec_wall_ms();
    m->m_id = -1;
    m->state = EC_MSTATE_JOINING;
    m->etcd = o->etcd;
    m->etcd_up = -1;
    m->probe_interval_ms = o->probe_interval_ms > 0 ? o->probe_interval_ms : 5000;
    m->port = o->port;
    if (!m->job_id || !m->node_id || !m->version) {
        ec_errorf(err, EC_ENOMEM, "metrics: out of memory");
        goto error;
    }
    if (m->etcd) {
        if (pthread_create(&m->prober, NULL, prober_main, m) != 0) {
            ec_errorf(err, EC_ESYS, "metrics: cannot start the etcd prober thread: %s",
                      strerror(errno));
            goto error;
        }
        m->prober_started = true;
    }
#ifdef HAVE_MICROHTTPD
    if (o->port > 0 && http_start(m, o, err) < 0)
        goto error;
#endif
    return m;
error:
    ec_metrics_destroy(m);
    return NULL;
}

void ec_metrics_destroy(ec_metrics_t *m)
{
    if (!m)
        return;
    int saved = errno;
#ifdef HAVE_MICROHTTPD
    if (m->httpd)
        MHD_stop_daemon(m->httpd); /* joins the HTTP thread: no scrape runs after this */
#endif
    if (m->prober_started) {
        pthread_mutex_lock(&m->lock);
        m->stopping = true;
        pthread_cond_signal(&m->cond);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->prober, NULL);
    }
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->lock);
    free(m->job_id);
    free(m->node_id);
    free(m->version);
    free(m->prog);
    free(m);
    errno = saved;
}
