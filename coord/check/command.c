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
 */
#define _GNU_SOURCE
#include "command.h"
#include "child.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "gather.h"
#include "ports.h"
#include "rules.h"
#include "connect.h"
#include "embed.h"
#include "endpoints.h"
#include "etcd.h"
#include "keys.h"
#include "epoch_fetch.h"
#include "log.h"
#include "netaddr.h"
#include "records.h"

#define POLL_MS 200             /* how often a wait looks at the abort flag  */
#define CONNECT_MS 5000         /* etcd dial and call deadline                */
#define MIN_ARRIVAL_MS 1000     /* --elastic_timeout=0 still waits this long  */
#define PHASE_MS 10000          /* waiting for the others to finish a phase   */
#define REPORT_SLACK_MS 5000    /* what a follower waits beyond the leader    */
#define CLEANUP_MS 3000         /* the leader waiting for followers to leave  */
#define COLL_EXTRA_MS 20000     /* the allreduce job: every node starts it at the same
                                  * phase, so it forms at once; a node that died
                                  * since is reported when this runs out */
#define ETCD_SAMPLES 5          /* reads timed for the etcd round trip        */

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

/* ------------------------------------------------------------------------ */
/* the node's state                                                          */

/* One key under check/ as the watch last saw it. */
typedef struct peer {
    char *key;
    int present;
    int valid;               /* facts decoded */
    ec_check_facts_t f;
    char err[256];           /* why the facts did not decode */
} peer_t;

typedef struct ck {
    const ec_config_t *cfg;
    ec_getenv_fn env;
    void *env_arg;
    FILE *out, *errout;

    ec_embed_t *embed;
    char *endpoints;
    ec_etcd_t *c;
    ec_keys_t keys;
    char k_prefix[EC_KEY_MAX], k_self[EC_KEY_MAX], k_report[EC_KEY_MAX];
    int64_t lease;
    ec_keepalive_t *ka;
    int64_t pub_rev;         /* revision of our first publish */
    int64_t report_rev;      /* create revision of the report key we created */
    bool leader;

    ec_check_facts_t self;
    int nfds;
    int *locks;              /* ec_ports_reserve's hold on the ports */
    int *fds;                /* our listening sockets on them */
    uint16_t *ports;
    bool reserved;

    ec_check_listener_t *listener; /* answers hellos on our ports */

    pthread_mutex_t lock;
    pthread_cond_t cond;
    ec_watch_t *watch;
    peer_t *peers;
    int npeers;
    char *report;            /* raw value of check/report, NULL when absent */
    size_t report_len;
    int64_t report_create_rev;
    int64_t report_mod_rev;
    bool report_claim;       /* check/report holds the leader's claim, not the report yet */
    bool relist;             /* the watch lost its place (compaction): list again */

    int64_t start_ms;
    int64_t arrival_ms;      /* how long arrivals were awaited */
    char coll_log[PATH_MAX];
} ck_t;

static void peer_clear(peer_t *p)
{
    free(p->key);
    ec_check_facts_clear(&p->f);
    memset(p, 0, sizeof(*p));
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

/* ------------------------------------------------------------------------ */
/* the view of check/ (one listing, then one watch), under x->lock           */

static peer_t *peer_get(ck_t *x, const char *key, bool create)
{
    for (int i = 0; i < x->npeers; i++)
        if (!strcmp(x->peers[i].key, key))
            return &x->peers[i];
    if (!create)
        return NULL;
    peer_t *p = realloc(x->peers, (size_t)(x->npeers + 1) * sizeof(*p));
    if (!p)
        return NULL;
    x->peers = p;
    p = &x->peers[x->npeers];
    memset(p, 0, sizeof(*p));
    if (!(p->key = strdup(key)))
        return NULL;
    x->npeers++;
    return p;
}

static void model_put(ck_t *x, const ec_kv_t *kv)
{
    if (!strcmp(kv->key, x->k_report)) {
        char *v = malloc(kv->value_len + 1);
        if (!v)
            return;
        memcpy(v, kv->value, kv->value_len);
        v[kv->value_len] = '\0';
        free(x->report);
        x->report = v;
        x->report_len = kv->value_len;
        x->report_create_rev = kv->create_revision;
        x->report_mod_rev = kv->mod_revision;
        ec_check_report_t rep;
        x->report_claim =
            ec_check_report_decode(kv->value, kv->value_len, kv->key, &rep, NULL) == 0 &&
            rep.pending;
        ec_check_report_clear(&rep);
        return;
    }
    peer_t *p = peer_get(x, kv->key, true);
    if (!p)
        return;
    ec_check_facts_t f;
    ec_error_t err = {0};
    p->present = 1;
    if (ec_check_facts_decode(kv->value, kv->value_len, kv->key, &f, &err) == 0) {
        ec_check_facts_clear(&p->f);
        p->f = f;
        p->valid = 1;
        p->err[0] = '\0';
    } else {
        ec_check_facts_clear(&f);
        p->valid = 0;
        snprintf(p->err, sizeof(p->err), "%s", err.msg);
    }
}

static void model_del(ck_t *x, const char *key)
{
    if (!strcmp(key, x->k_report)) {
        free(x->report);
        x->report = NULL;
        x->report_len = 0;
        x->report_claim = false;
        x->report_create_rev = x->report_mod_rev = 0;
        return;
    }
    peer_t *p = peer_get(x, key, false);
    if (p)
        p->present = 0; /* its last facts stay: the report names it */
}

static void on_watch(const ec_watch_event_t *ev, void *arg)
{
    ck_t *x = arg;
    pthread_mutex_lock(&x->lock);
    if (ev->type == EC_WATCH_PUT)
        model_put(x, ev->kv);
    else if (ev->type == EC_WATCH_DELETE)
        model_del(x, ev->kv->key);
    else if (ev->type == EC_WATCH_COMPACTED)
        x->relist = true;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
}

static int model_sync(ck_t *x, ec_error_t *err)
{
    ec_watch_stop(x->watch);
    x->watch = NULL;
    ec_kv_list_t l;
    int rc = ec_etcd_get_prefix(x->c, x->k_prefix, 0, &l, err);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&x->lock);
    for (int i = 0; i < x->npeers; i++)
        x->peers[i].present = 0;
    free(x->report);
    x->report = NULL;
    for (size_t i = 0; i < l.n; i++)
        model_put(x, &l.kvs[i]);
    x->relist = false;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
    int64_t rev = l.revision;
    ec_kv_list_free(&l);
    x->watch = ec_watch_start(x->c, x->k_prefix, true, rev + 1, on_watch, x, err);
    return x->watch ? 0 : err->code;
}

typedef bool (*pred_fn)(ck_t *x, void *arg);

/* Wait until pred holds (checked under the lock), the deadline passes or a
 * signal arrives.  Returns whether pred held. */
static bool wait_for(ck_t *x, pred_fn pred, void *arg, int64_t deadline)
{
    pthread_mutex_lock(&x->lock);
    for (;;) {
        if (pred(x, arg)) {
            pthread_mutex_unlock(&x->lock);
            return true;
        }
        int64_t now = ec_mono_ms();
        if (g_abort || now >= deadline) {
            pthread_mutex_unlock(&x->lock);
            return false;
        }
        if (x->relist) {
            pthread_mutex_unlock(&x->lock);
            ec_error_t err = {0};
            if (model_sync(x, &err) < 0)
                ec_log(EC_LOG_WARN, "cannot follow %s again: %s", x->k_prefix, err.msg);
            pthread_mutex_lock(&x->lock);
            continue;
        }
        int64_t until = deadline < now + POLL_MS ? deadline : now + POLL_MS;
        struct timespec ts = ec_deadline_ts(until - now);
        pthread_cond_timedwait(&x->cond, &x->lock, &ts);
    }
}

static bool pred_arrived(ck_t *x, void *arg)
{
    int want = *(int *)arg, n = 0;
    for (int i = 0; i < x->npeers; i++)
        n += x->peers[i].present && x->peers[i].valid;
    return n >= want;
}

/* The nodes of this run: keys of the facts present when arrivals closed. */
typedef struct snap {
    int n;
    char **keys;
} snap_t;

static void snap_free(snap_t *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->keys[i]);
    free(s->keys);
    s->n = 0;
    s->keys = NULL;
}

static bool pred_phase(ck_t *x, void *arg)
{
    const struct {
        snap_t *s;
        int phase;
    } *a = arg;
    for (int i = 0; i < a->s->n; i++) {
        peer_t *p = peer_get(x, a->s->keys[i], false);
        if (p && p->present && p->valid && p->f.phase < a->phase)
            return false; /* (facts that stopped decoding will not get further) */
    }
    return true;
}

static bool wait_phase(ck_t *x, snap_t *s, int phase, int64_t deadline)
{
    struct {
        snap_t *s;
        int phase;
    } a = {s, phase};
    return wait_for(x, pred_phase, &a, deadline);
}

static bool pred_report(ck_t *x, void *arg)
{
    (void)arg;
    /* the report itself, or a value that is no claim (decoding it says why) */
    return x->report && x->report_create_rev > x->pub_rev && !x->report_claim;
}

static bool pred_alone(ck_t *x, void *arg)
{
    (void)arg;
    for (int i = 0; i < x->npeers; i++)
        if (x->peers[i].present && strcmp(x->peers[i].key, x->k_self))
            return false;
    return true;
}

/* Whether a node with this nonce has facts in etcd now. */
static bool nonce_present(ck_t *x, const char *nonce)
{
    for (int i = 0; i < x->npeers; i++)
        if (x->peers[i].present && x->peers[i].valid && !strcmp(x->peers[i].f.nonce, nonce))
            return true;
    return false;
}

/* ------------------------------------------------------------------------ */
/* publishing                                                                */

static int put_self(ck_t *x, ec_error_t *err)
{
    void *buf = NULL;
    size_t len = 0;
    x->self.wall_ms = ec_wall_us() / 1000;
    int rc = ec_check_facts_encode(&x->self, &buf, &len, err);
    if (rc == 0)
        rc = ec_etcd_put(x->c, x->k_self, buf, len, x->lease, NULL, err);
    free(buf);
    return rc;
}

/* The first publish: create only.  Another live process already holding
 * check/nodes/<node_id> means a duplicate node id: publish under
 * <node_id>.dup-<nonce> instead, so the report shows both.  A record left by a
 * crashed check of this same machine (its pid gone) is taken over. */
static int publish_first(ck_t *x, ec_error_t *err)
{
    void *buf = NULL;
    size_t len = 0;
    x->self.wall_ms = ec_wall_us() / 1000;
    int rc = ec_check_facts_encode(&x->self, &buf, &len, err);
    if (rc < 0)
        return rc;
    bool published = false;
    for (int attempt = 0; attempt < 3 && !published; attempt++) {
        ec_cmp_t absent = {.key = x->k_self, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
        ec_op_t put = {.type = EC_OP_PUT, .key = x->k_self, .value = buf, .value_len = len,
                       .lease = x->lease};
        ec_op_t get = {.type = EC_OP_GET, .key = x->k_self};
        ec_txn_result_t r;
        if ((rc = ec_etcd_txn(x->c, &absent, 1, &put, 1, &get, 1, &r, err)) < 0)
            break;
        if (r.succeeded) {
            x->pub_rev = r.revision;
            published = true;
            ec_txn_result_free(&r);
            break;
        }
        ec_check_facts_t other;
        bool stale = false;
        int64_t mod = 0;
        if (r.n && r.results[0].kvs.n) {
            const ec_kv_t *kv = &r.results[0].kvs.kvs[0];
            mod = kv->mod_revision;
            if (ec_check_facts_decode(kv->value, kv->value_len, kv->key, &other, NULL) == 0)
                stale = !strcmp(other.boot_id, x->self.boot_id) &&
                        !strcmp(other.pidns, x->self.pidns) && other.pid != x->self.pid &&
                        kill(other.pid, 0) < 0 && errno == ESRCH;
            else
                stale = true; /* not ours to keep: unreadable */
            ec_check_facts_clear(&other);
        }
        ec_txn_result_free(&r);
        if (stale) {
            ec_cmp_t same = {.key = x->k_self, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                             .number = mod};
            ec_txn_result_t r2;
            if ((rc = ec_etcd_txn(x->c, &same, 1, &put, 1, NULL, 0, &r2, err)) < 0)
                break;
            published = r2.succeeded;
            x->pub_rev = r2.revision;
            ec_txn_result_free(&r2);
            continue;
        }
        char alt[EC_NODE_ID_MAX + 1];
        snprintf(alt, sizeof(alt), "%.*s.dup-%s", EC_NODE_ID_MAX - 5 - EC_CHECK_NONCE_LEN,
                 x->self.node_id, x->self.nonce);
        ec_log(EC_LOG_WARN, "another process already checks as node %s: publishing under %s so "
                            "the report names both", x->self.node_id, alt);
        if (ec_key_check(&x->keys, alt, x->k_self, sizeof(x->k_self)) < 0) {
            rc = ec_errorf(err, EC_EINVAL, "cannot build a key for node id %s", alt);
            break;
        }
    }
    free(buf);
    if (rc == 0 && !published)
        rc = ec_errorf(err, EC_EEXIST, "cannot publish the facts of node %s: %s is taken",
                       x->self.node_id, x->k_self);
    return rc;
}

/* Leader of this run: the first to create check/report.  A report whose
 * writer is no longer in etcd is a leftover of a crashed run: removed (if it
 * did not change meanwhile) and the creation retried.  *late is set when a
 * live report was created before this node arrived. */
static int elect_with(ck_t *x, const void *pending, size_t pl, bool *late, char *leader,
                      size_t llen, char *lnonce, ec_error_t *err)
{
    *late = false;
    for (int attempt = 0; attempt < 3; attempt++) {
        ec_cmp_t absent = {.key = x->k_report, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
        ec_op_t put = {.type = EC_OP_PUT, .key = x->k_report, .value = pending,
                       .value_len = pl, .lease = x->lease};
        ec_op_t get = {.type = EC_OP_GET, .key = x->k_report};
        ec_txn_result_t r;
        int rc = ec_etcd_txn(x->c, &absent, 1, &put, 1, &get, 1, &r, err);
        if (rc < 0)
            return rc;
        if (r.succeeded) {
            x->leader = true;
            x->report_rev = r.revision;
            snprintf(leader, llen, "%s", x->self.node_id);
            snprintf(lnonce, EC_CHECK_NONCE_LEN + 1, "%s", x->self.nonce);
            ec_txn_result_free(&r);
            return 0;
        }
        char who[EC_NODE_ID_MAX + 1] = "", nonce[EC_CHECK_NONCE_LEN + 1] = "";
        int64_t mod = 0, create = 0;
        if (r.n && r.results[0].kvs.n) {
            const ec_kv_t *kv = &r.results[0].kvs.kvs[0];
            mod = kv->mod_revision;
            create = kv->create_revision;
            ec_check_report_t rep;
            if (ec_check_report_decode(kv->value, kv->value_len, kv->key, &rep, NULL) == 0) {
                snprintf(who, sizeof(who), "%s", rep.leader);
                snprintf(nonce, sizeof(nonce), "%s", rep.leader_nonce);
                ec_check_report_clear(&rep);
            }
        }
        ec_txn_result_free(&r);
        if (!mod)
            continue; /* vanished meanwhile: try again */
        pthread_mutex_lock(&x->lock);
        bool live = nonce[0] && nonce_present(x, nonce);
        pthread_mutex_unlock(&x->lock);
        if (live) {
            snprintf(leader, llen, "%s", who);
            snprintf(lnonce, EC_CHECK_NONCE_LEN + 1, "%s", nonce);
            *late = create < x->pub_rev;
            return 0;
        }
        ec_log(EC_LOG_INFO, "removing the report of an earlier check (by %s, no longer running)",
               who[0] ? who : "an unknown node");
        ec_cmp_t same = {.key = x->k_report, .target = EC_CMP_MOD, .result = EC_CMP_EQUAL,
                         .number = mod};
        ec_op_t del = {.type = EC_OP_DELETE, .key = x->k_report};
        if ((rc = ec_etcd_txn(x->c, &same, 1, &del, 1, NULL, 0, NULL, err)) < 0)
            return rc;
    }
    return ec_errorf(err, EC_EINTERNAL, "could not settle who writes the report in %s",
                     x->k_report);
}

static int elect(ck_t *x, bool *late, char *leader, size_t llen, char *lnonce, ec_error_t *err)
{
    /* the claim: a report with only its writer, pending */
    ec_check_report_t claim = {.version = EC_CHECK_REPORT_VERSION, .pending = 1};
    snprintf(claim.job_id, sizeof(claim.job_id), "%s", x->cfg->job_id);
    snprintf(claim.leader, sizeof(claim.leader), "%s", x->self.node_id);
    snprintf(claim.leader_nonce, sizeof(claim.leader_nonce), "%s", x->self.nonce);
    void *pending = NULL;
    size_t pl = 0;
    int rc = ec_check_report_encode(&claim, &pending, &pl, err);
    if (rc == 0)
        rc = elect_with(x, pending, pl, late, leader, llen, lnonce, err);
    free(pending);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* the allreduce: an ordinary job of the worker library (see check/command.h)     */

static void coll_parse(ec_check_facts_t *f, const char *log)
{
    FILE *in = fopen(log, "r");
    char line[1024], last[1024] = "";
    while (in && fgets(line, sizeof(line), in)) {
        const char *m = strstr(line, "ecoord-allreduce: ");
        if (m)
            snprintf(last, sizeof(last), "%s", m + 18);
    }
    if (in)
        fclose(in);
    last[strcspn(last, "\n")] = '\0';
    char backend[16];
    int ranks;
    long long bytes;
    double secs, bw;
    if (sscanf(last, "ok backend=%15s ranks=%d bytes=%lld seconds=%lf busbw_gbps=%lf", backend,
               &ranks, &bytes, &secs, &bw) == 5) {
        f->coll = EC_CHECK_COLL_OK;
        snprintf(f->coll_backend, sizeof(f->coll_backend), "%s", backend);
        f->coll_ranks = ranks;
        f->coll_bytes = bytes;
        f->coll_seconds = secs;
        f->coll_busbw_gbps = bw;
    } else if (!f->coll_why[0]) {
        f->coll = EC_CHECK_COLL_FAIL;
        snprintf(f->coll_why, sizeof(f->coll_why), "%s (log: %s)",
                 last[0] ? last : "no result line from the allreduce program", log);
    }
}

/* The allreduce job's id: one per run of the check (named after the
 * leader's nonce), so a finished job's status never meets the next run. */
static void coll_job_id(const ck_t *x, const char *lnonce, char *buf, size_t len)
{
    snprintf(buf, len, "%.*s.check-%.8s", EC_JOB_ID_MAX - 15, x->cfg->job_id, lnonce);
}

static void run_collective(ck_t *x, int nnodes, bool gpus, const char *job)
{
    const ec_config_t *cfg = x->cfg;
    ec_check_facts_t *f = &x->self;
    char prog[PATH_MAX], why[256] = "", exe[PATH_MAX];
    ec_check_find_coll_prog(x->env, x->env_arg, prog, sizeof(prog), why, sizeof(why));
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (!prog[0] || n <= 0) {
        f->coll = EC_CHECK_COLL_SKIP;
        snprintf(f->coll_why, sizeof(f->coll_why), "%s", why[0] ? why : "no ecoord binary");
        return;
    }
    exe[n] = '\0';
    /* <log_dir>/check/<node_id>/: several nodes may share a machine and a log_dir */
    char dir[PATH_MAX], log[PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/check", cfg->log_dir);
    mkdir(cfg->log_dir, 0755);
    mkdir(dir, 0755);
    snprintf(dir, sizeof(dir), "%s/check/%s", cfg->log_dir, f->node_id);
    mkdir(dir, 0755);
    snprintf(log, sizeof(log), "%s/launch.log", dir);
    snprintf(x->coll_log, sizeof(x->coll_log), "%s", log);
    char a_eps[600], a_job[EC_JOB_ID_MAX + 32], a_np[32], a_nproc[32], a_host[128], a_id[300],
        a_log[PATH_MAX + 16], a_to[48], a_ttl[48], a_bytes[48], a_gpus[1200] = "",
        a_prefix[300] = "", a_ca[PATH_MAX + 20] = "", a_cert[PATH_MAX + 20] = "",
        a_key[PATH_MAX + 20] = "", a_user[300] = "", a_pwf[PATH_MAX + 30] = "";
    snprintf(a_eps, sizeof(a_eps), "--elastic_server=%s", x->endpoints);
    snprintf(a_job, sizeof(a_job), "--job_id=%s", job);
    snprintf(a_np, sizeof(a_np), "--np=%d", nnodes);
    snprintf(a_nproc, sizeof(a_nproc), "--nproc_per_node=%d", cfg->nproc_per_node);
    snprintf(a_host, sizeof(a_host), "--host=%s", f->host);
    /* the id this node published under (a duplicate got <id>.dup-<nonce>) */
    const char *pub_id = strrchr(x->k_self, '/') ? strrchr(x->k_self, '/') + 1 : f->node_id;
    snprintf(a_id, sizeof(a_id), "--node_id=%s", pub_id);
    snprintf(a_log, sizeof(a_log), "--log_dir=%s", dir);
    snprintf(a_to, sizeof(a_to), "--elastic_timeout=%lld",
             (long long)(cfg->elastic_timeout_ms / 1000 + 1));
    snprintf(a_ttl, sizeof(a_ttl), "--lease_ttl=%lld", (long long)(cfg->lease_ttl_ms / 1000));
    snprintf(a_bytes, sizeof(a_bytes), "--bytes=%lld", gpus ? 256LL << 20 : 16LL << 20);
    const char *argv[32];
    int ac = 0;
    argv[ac++] = exe;
    argv[ac++] = "launch";
    argv[ac++] = a_eps;
    argv[ac++] = a_job;
    argv[ac++] = a_np;
    argv[ac++] = a_nproc;
    argv[ac++] = a_host;
    argv[ac++] = a_id;
    argv[ac++] = a_log;
    argv[ac++] = a_to;
    argv[ac++] = a_ttl;
    argv[ac++] = "--max_restart=0";
    if (cfg->gpus.n) {
        size_t used = (size_t)snprintf(a_gpus, sizeof(a_gpus), "--gpus=");
        for (int i = 0; i < cfg->gpus.n && used < sizeof(a_gpus) - 8; i++)
            used += (size_t)snprintf(a_gpus + used, sizeof(a_gpus) - used, "%s%d", i ? "," : "",
                                     cfg->gpus.v[i]);
        argv[ac++] = a_gpus;
    }
#define PASS_FLAG(buf, flag, val)                                     \
    if ((val) && *(val)) {                                            \
        snprintf(buf, sizeof(buf), "--" flag "=%s", (val));           \
        argv[ac++] = buf;                                             \
    }
    PASS_FLAG(a_prefix, "etcd_prefix", cfg->etcd_prefix);
    PASS_FLAG(a_ca, "etcd_cacert", cfg->etcd_cacert);
    PASS_FLAG(a_cert, "etcd_cert", cfg->etcd_cert);
    PASS_FLAG(a_key, "etcd_key", cfg->etcd_key);
    PASS_FLAG(a_user, "etcd_user", cfg->etcd_user);
    PASS_FLAG(a_pwf, "etcd_password_file", cfg->etcd_password_file);
#undef PASS_FLAG
    argv[ac++] = "--";
    argv[ac++] = prog;
    argv[ac++] = a_bytes;
    argv[ac] = NULL;

    ec_log(EC_LOG_INFO, "running the allreduce job %s (%s; log %s)", job, prog, log);
    pid_t parent = getpid();
    sigset_t saved;
    ec_child_fork_begin(&saved);
    pid_t pid = fork();
    if (pid == 0) {
        if (ec_child_reset(SIGKILL, parent) < 0)
            _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    int fork_errno = errno;
    ec_child_fork_end(&saved);
    errno = fork_errno;
    if (pid < 0) {
        f->coll = EC_CHECK_COLL_FAIL;
        snprintf(f->coll_why, sizeof(f->coll_why), "cannot start ecoord launch: %s",
                 strerror(errno));
        return;
    }
    int64_t deadline = ec_mono_ms() + COLL_EXTRA_MS;
    int st = 0;
    pid_t r = 0;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && !g_abort && ec_mono_ms() < deadline) {
        struct timespec ts = {0, 50 * 1000000L}; /* polls the child: no event to wait on */
        nanosleep(&ts, NULL);
    }
    if (r == 0) {
        /* deadline or signal: stop it, give it its grace, then kill */
        kill(pid, SIGTERM);
        int64_t grace = ec_mono_ms() + 3000;
        while ((r = waitpid(pid, &st, WNOHANG)) == 0 && ec_mono_ms() < grace) {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (r == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        }
        f->coll = EC_CHECK_COLL_FAIL;
        snprintf(f->coll_why, sizeof(f->coll_why),
                 "the allreduce job did not finish within "
                 "%lld s: a node died or never joined it (log: %s)",
                 (long long)(COLL_EXTRA_MS / 1000), log);
        return;
    }
    coll_parse(f, log);
    if (f->coll == EC_CHECK_COLL_OK && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        f->coll = EC_CHECK_COLL_FAIL;
        snprintf(f->coll_why, sizeof(f->coll_why), "ecoord launch ended with status %d after "
                 "the allreduce (log: %s)", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
                 log);
    }
}

/* ------------------------------------------------------------------------ */
/* the run                                                                   */

/* The node ids the training job knows: its current epoch's members and its
 * registered nodes (read only; the check never writes the job's keys).  So a
 * node that never arrives can be named.  Best effort: errors give none. */
static void read_known(ck_t *x, char ***out, int *n)
{
    char key[EC_KEY_MAX];
    *out = NULL;
    *n = 0;
    char **v = NULL;
    int nv = 0;
    ec_kv_t kv;
    bool found = false;
    if (ec_key_epoch(&x->keys, key, sizeof(key)) > 0 &&
        ec_etcd_get(x->c, key, &kv, &found, NULL, NULL) == 0 && found) {
        ec_epoch_t *ep = NULL;
        if (ec_epoch_fetch(x->c, &x->keys, kv.value, kv.value_len, key, &ep, NULL, NULL,
                           NULL) == 0) {
            v = calloc((size_t)ep->nmembers + 1, sizeof(char *));
            for (int i = 0; v && i < ep->nmembers; i++)
                if ((v[nv] = strdup(ep->members[i].node_id)))
                    nv++;
        }
        ec_epoch_free(ep);
        ec_kv_free(&kv);
    }
    ec_kv_list_t l;
    if (ec_key_nodes_prefix(&x->keys, key, sizeof(key)) > 0 &&
        ec_etcd_get_prefix(x->c, key, 0, &l, NULL) == 0) {
        char **w = realloc(v, ((size_t)nv + l.n + 1) * sizeof(char *));
        if (w) {
            v = w;
            for (size_t i = 0; i < l.n; i++) {
                char id[EC_NODE_ID_MAX + 1];
                if (ec_key_parse_node(&x->keys, l.kvs[i].key, l.kvs[i].key_len, id,
                                      sizeof(id)) > 0 && (v[nv] = strdup(id)))
                    nv++;
            }
        }
        ec_kv_list_free(&l);
    }
    *out = v;
    *n = nv;
}

/* Compare the facts of the snapshot's nodes (this node alone when snap is
 * NULL) into rep.  Runs under the lock: the facts are the watch's. */
static int compute_report(ck_t *x, const snap_t *snap, const char *leader, const char *nonce,
                          const char *etcd_error, ec_check_report_t *rep, ec_error_t *err)
{
    const ec_config_t *cfg = x->cfg;
    ec_check_input_t in = {
        .job_id = cfg->job_id,
        .np_min = cfg->np.min,
        .np_max = cfg->np.max,
        .waited_ms = x->arrival_ms,
        .final_phase = snap ? EC_CHECK_PHASE_DONE : EC_CHECK_PHASE_LOCAL,
        .leader = leader,
        .leader_nonce = nonce,
        .embedded = x->embed != NULL,
        .etcd_error = etcd_error,
        .limits = EC_CHECK_LIMITS_INIT,
    };
    char **known = NULL;
    int nknown = 0;
    if (snap && snap->n < cfg->np.max && x->c)
        read_known(x, &known, &nknown);
    in.known = (const char *const *)known;
    in.nknown = nknown;
    ec_check_facts_t *facts = calloc(snap ? (size_t)snap->n + 1 : 1, sizeof(*facts));
    if (!facts) {
        for (int i = 0; i < nknown; i++)
            free(known[i]);
        free(known);
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    }
    int n = 0;
    ec_check_unreadable_t *bad = NULL;
    if (!snap) {
        facts[n++] = x->self;
    } else {
        pthread_mutex_lock(&x->lock);
        for (int i = 0; i < snap->n; i++) {
            peer_t *p = peer_get(x, snap->keys[i], false);
            if (!p || !p->valid)
                continue;
            facts[n] = p->f; /* shallow: the lock keeps it alive */
            facts[n++].gone = !p->present;
        }
        /* facts that never decoded (another ecoord version): named, not
         * silently missing */
        bad = calloc((size_t)x->npeers + 1, sizeof(*bad));
        for (int i = 0; bad && i < x->npeers; i++) {
            const peer_t *p = &x->peers[i];
            if (!p->present || p->valid)
                continue;
            const char *slash = strrchr(p->key, '/');
            bad[in.nunreadable].name = slash ? slash + 1 : p->key;
            bad[in.nunreadable++].why = p->err;
        }
        in.unreadable = bad;
    }
    in.facts = facts;
    in.nfacts = n;
    int rc = ec_check_compare(&in, rep, err);
    if (snap)
        pthread_mutex_unlock(&x->lock);
    free(bad);
    free(facts);
    for (int i = 0; i < nknown; i++)
        free(known[i]);
    free(known);
    return rc;
}

static int print_report(ck_t *x, const ec_check_report_t *rep)
{
    if (x->cfg->json)
        ec_check_report_print_json(rep, x->out);
    else
        ec_check_report_print(rep, x->out);
    fflush(x->out);
    int c[4];
    ec_check_report_counts(rep, c);
    return c[EC_CHECK_FAIL] ? 1 : 0;
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

/* Why the allreduce cannot run everywhere, or "" when it can. */
static void coll_decide(ck_t *x, const snap_t *snap, char *why, size_t len, bool *gpus)
{
    why[0] = '\0';
    *gpus = false;
    char missing[512] = "";
    int nmiss = 0;
    pthread_mutex_lock(&x->lock);
    for (int i = 0; i < snap->n; i++) {
        peer_t *p = peer_get(x, snap->keys[i], false);
        if (!p || !p->valid)
            continue;
        *gpus |= p->f.driver;
        if (!p->f.coll_prog && strlen(missing) + strlen(p->f.node_id) + 3 < sizeof(missing)) {
            snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
                     nmiss ? ", " : "", p->f.node_id);
            nmiss++;
        }
    }
    pthread_mutex_unlock(&x->lock);
    if (!x->self.coll_prog) {
        char prog[PATH_MAX];
        ec_check_find_coll_prog(x->env, x->env_arg, prog, sizeof(prog), why, len);
    } else if (nmiss) {
        snprintf(why, len, "the worker library's allreduce program is missing on %s", missing);
    }
}

static int check_run(ck_t *x)
{
    const ec_config_t *cfg = x->cfg;
    ec_error_t err = {0};
    int rc = 1;
    char etcd_error[EC_ERRMSG_MAX + 64] = "";
    char leader[EC_NODE_ID_MAX + 1] = "", lnonce[EC_CHECK_NONCE_LEN + 1] = "";
    char coll_job[EC_JOB_ID_MAX + 1] = "";
    ec_check_report_t rep;
    memset(&rep, 0, sizeof(rep));
    snap_t snap = {0};
    ec_check_target_t *targets = NULL;
    int nt = 0;

    if (ec_keys_init(&x->keys, cfg->etcd_prefix, cfg->job_id, &err) < 0 ||
        ec_key_check(&x->keys, "", x->k_prefix, sizeof(x->k_prefix)) < 0 ||
        ec_key_check(&x->keys, NULL, x->k_report, sizeof(x->k_report)) < 0 ||
        ec_key_check(&x->keys, cfg->node_id, x->k_self, sizeof(x->k_self)) < 0) {
        if (!err.msg[0])
            ec_node_id_check(cfg->node_id, &err);
        fprintf(x->errout, "ecoord check: %s\n", err.msg);
        return 2;
    }

    /* 1. etcd */
    if (cfg->elastic_server.n == 0) {
        ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
        eo.etcd_path = ec_config_environ("ETCD", NULL);
        eo.search_path = ec_config_environ("PATH", NULL);
        eo.tmpdir = ec_config_environ("TMPDIR", NULL);
        if ((x->embed = ec_embed_start(&eo, &err)))
            x->endpoints = strdup(ec_embed_endpoint(x->embed));
        else
            snprintf(etcd_error, sizeof(etcd_error), "no --elastic_server, and the embedded etcd "
                                                     "did not start: %s", err.msg);
        if (x->embed)
            ec_log(EC_LOG_INFO, "no --elastic_server: checking this node alone with an embedded "
                                "etcd at %s", x->endpoints);
    } else {
        x->endpoints = ec_connect_endpoints(cfg);
    }
    if (!etcd_error[0] && !x->endpoints)
        snprintf(etcd_error, sizeof(etcd_error), "out of memory");
    if (!etcd_error[0]) {
        if ((x->c = ec_connect(cfg, x->embed ? x->endpoints : NULL, CONNECT_MS, &err)))
            ec_etcd_set_call_timeout(x->c, CONNECT_MS);
        else
            snprintf(etcd_error, sizeof(etcd_error), "%s", err.msg);
    }

    /* 2. local facts, ports */
    ec_check_gather_in_t gin = {x->cfg, x->endpoints, x->env, x->env_arg};
    ec_check_gather(&gin, &x->self);
    reserve_ports(x);
    if (!etcd_error[0]) {
        measure_etcd(x);
        if (model_sync(x, &err) < 0)
            snprintf(etcd_error, sizeof(etcd_error), "cannot read %s: %s", x->k_prefix, err.msg);
    }
    if (etcd_error[0]) {
        x->arrival_ms = 0;
        if (compute_report(x, NULL, x->self.node_id, x->self.nonce, etcd_error, &rep, &err) < 0)
            goto error;
        rc = print_report(x, &rep);
        goto out;
    }

    /* 3. publish, wait for the others */
    int64_t granted = 0;
    if (ec_etcd_lease_grant(x->c, cfg->lease_ttl_ms / 1000, &x->lease, &granted, &err) < 0 ||
        !(x->ka = ec_keepalive_start(x->c, x->lease, granted ? granted : cfg->lease_ttl_ms / 1000,
                                     NULL, NULL, &err)))
        goto error;
    if (x->reserved && ec_check_listener_start(x->fds, x->nfds, x->self.node_id, x->self.nonce,
                                                &x->listener, &err) < 0)
        goto error;
    if (publish_first(x, &err) < 0)
        goto error;
    int want = x->embed ? 1 : cfg->np.max;
    int64_t wait_ms = cfg->elastic_timeout_ms > MIN_ARRIVAL_MS ? cfg->elastic_timeout_ms
                                                               : MIN_ARRIVAL_MS;
    ec_log(EC_LOG_INFO, "node %s published its facts (%s, ports %s); waiting up to %.0f s for "
                        "%d node%s", x->self.node_id, x->self.host,
           x->reserved ? "reserved" : "not reserved", (double)wait_ms / 1000.0, want,
           want == 1 ? "" : "s");
    wait_for(x, pred_arrived, &want, x->start_ms + wait_ms);
    x->arrival_ms = ec_mono_ms() - x->start_ms;
    if (g_abort)
        goto interrupted;

    /* the snapshot: the nodes of this run */
    pthread_mutex_lock(&x->lock);
    snap.keys = calloc((size_t)x->npeers + 1, sizeof(char *));
    targets = calloc((size_t)x->npeers + 1, sizeof(*targets));
    for (int i = 0; snap.keys && targets && i < x->npeers; i++) {
        peer_t *p = &x->peers[i];
        if (!p->present || !p->valid)
            continue;
        if (!(snap.keys[snap.n] = strdup(p->key)))
            break;
        snap.n++;
        ec_check_target_t *t = &targets[nt++];
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
    if (!snap.keys || !targets) {
        ec_errorf(&err, EC_ENOMEM, "out of memory");
        goto error;
    }

    /* 4. who writes the report */
    bool late = false;
    if (elect(x, &late, leader, sizeof(leader), lnonce, &err) < 0)
        goto error;
    if (late) {
        fprintf(x->errout, "ecoord check: node %s arrived after the others had closed the check "
                           "(%s writes the report for the nodes that arrived within "
                           "--elastic_timeout); run `ecoord check` again on every node at once\n",
                x->self.node_id, leader);
        rc = 1;
        goto out;
    }
    ec_log(EC_LOG_INFO, "%d of %d node%s arrived in %.1f s; %s writes the report", snap.n, want,
           want == 1 ? "" : "s", (double)x->arrival_ms / 1000.0, leader);

    /* 5. probes */
    ec_check_probe_all(x->cfg->job_id, &x->self, targets, nt, &g_abort);
    x->self.phase = EC_CHECK_PHASE_PROBED;
    if (put_self(x, &err) < 0)
        goto error;
    wait_phase(x, &snap, EC_CHECK_PHASE_PROBED, ec_mono_ms() + PHASE_MS);
    listener_stop(x);
    if (g_abort)
        goto interrupted;

    /* 6. the allreduce */
    char why[256];
    bool gpus = false;
    coll_decide(x, &snap, why, sizeof(why), &gpus);
    bool ran = !why[0];
    if (ran) {
        coll_job_id(x, lnonce, coll_job, sizeof(coll_job));
        run_collective(x, snap.n, gpus, coll_job);
    } else {
        x->self.coll = EC_CHECK_COLL_SKIP;
        snprintf(x->self.coll_why, sizeof(x->self.coll_why), "%s", why);
    }
    x->self.phase = EC_CHECK_PHASE_DONE;
    if (put_self(x, &err) < 0)
        goto error;
    if (g_abort)
        goto interrupted;

    /* 7. the report */
    int64_t coll_ms = ran ? COLL_EXTRA_MS + 5000 : 0;
    if (x->leader) {
        wait_phase(x, &snap, EC_CHECK_PHASE_DONE, ec_mono_ms() + PHASE_MS + coll_ms);
        if (g_abort)
            goto interrupted;
        if (ran) {
            /* every node's allreduce job has ended: remove its keys (epoch,
             * history, status), which `ecoord launch` keeps for a job */
            ec_keys_t ck;
            if (ec_keys_init(&ck, cfg->etcd_prefix, coll_job, NULL) == 0 &&
                ec_etcd_delete(x->c, ec_keys_root(&ck), true, NULL, &err) < 0)
                ec_log(EC_LOG_WARN, "cannot remove the allreduce job's keys under %s: %s",
                       ec_keys_root(&ck), err.msg);
        }
        if (compute_report(x, &snap, x->self.node_id, x->self.nonce, NULL, &rep, &err) < 0)
            goto error;
        void *buf = NULL;
        size_t len = 0;
        if (ec_check_report_encode(&rep, &buf, &len, &err) < 0)
            goto error;
        ec_cmp_t ours = {.key = x->k_report, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL,
                         .number = x->report_rev};
        ec_op_t put = {.type = EC_OP_PUT, .key = x->k_report, .value = buf, .value_len = len,
                       .lease = x->lease};
        ec_txn_result_t r;
        int trc = ec_etcd_txn(x->c, &ours, 1, &put, 1, NULL, 0, &r, &err);
        free(buf);
        if (trc < 0)
            ec_log(EC_LOG_ERROR, "cannot publish the report: %s; the others will compute their "
                                 "own", err.msg);
        else if (!r.succeeded)
            ec_log(EC_LOG_ERROR, "%s was replaced by someone else; the report is printed here "
                                 "only", x->k_report);
        if (trc == 0)
            ec_txn_result_free(&r);
    } else {
        int64_t deadline = ec_mono_ms() + PHASE_MS + REPORT_SLACK_MS + coll_ms;
        bool got = wait_for(x, pred_report, NULL, deadline);
        if (g_abort)
            goto interrupted;
        if (got) {
            pthread_mutex_lock(&x->lock);
            int drc = ec_check_report_decode(x->report, x->report_len, x->k_report, &rep, &err);
            pthread_mutex_unlock(&x->lock);
            if (drc < 0)
                got = false;
        }
        if (!got) {
            ec_log(EC_LOG_WARN, "%s published no report within %.0f s (%s); this report was "
                                "computed here from the facts this node saw", leader,
                   (double)(PHASE_MS + REPORT_SLACK_MS + coll_ms) / 1000.0,
                   err.msg[0] ? err.msg : "it stopped or lost etcd");
            ec_check_report_clear(&rep);
            if (compute_report(x, &snap, x->self.node_id, x->self.nonce, NULL, &rep, &err) < 0)
                goto error;
        }
    }
    rc = print_report(x, &rep);

    /* 8. leave no key behind: followers go first, the report goes last */
    if (x->leader)
        wait_for(x, pred_alone, NULL, ec_mono_ms() + CLEANUP_MS);
    goto out;

interrupted:
    fprintf(x->errout, "ecoord check: interrupted by %s; no report\n", strsignal(g_abort));
    rc = 128 + g_abort;
    goto out;
error:
    fprintf(x->errout, "ecoord check: %s\n", err.msg[0] ? err.msg : "failed");
    rc = 1;
out:
    listener_stop(x);
    ec_watch_stop(x->watch);
    x->watch = NULL;
    ec_keepalive_stop(x->ka);
    x->ka = NULL;
    if (x->lease)
        ec_etcd_lease_revoke(x->c, x->lease, NULL);
    ec_check_report_clear(&rep);
    snap_free(&snap);
    for (int i = 0; i < nt; i++)
        free(targets[i].ports);
    free(targets);
    return rc;
}

int ec_cmd_check(const ec_config_t *cfg, FILE *out, FILE *errout)
{
    ck_t x;
    memset(&x, 0, sizeof(x));
    x.cfg = cfg;
    x.env = ec_config_environ;
    x.out = out;
    x.errout = errout;
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
    for (int i = 0; i < x.npeers; i++)
        peer_clear(&x.peers[i]);
    free(x.peers);
    free(x.report);
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
