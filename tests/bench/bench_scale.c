/* Scale benchmark: one real leader coordinator against thousands of simulated
 * nodes on one local etcd.  Issue #8's targets on the 2-core development
 * machine: 4096 nodes form their first epoch within 2 s of the last
 * registration and re-form after a loss within 300 ms; at steady state
 * nothing but keepalives reaches etcd.  (torchelastic's best published
 * figure: 10 s to rendezvous 4000 hosts.)
 *
 * A benchmark, not a test: it prints figures and exits 0 (1 only when it
 * cannot run at all: no etcd, no client).  Every wait has a deadline; one
 * that passes it is reported and the size is cut short, never hung on.
 *
 *   bench_scale [--sizes 64,256,1024,4096] [--nproc 8] [--steady-ms 6667]
 *               [--losses 5] [--fanout-max 1024] [--fanout-wave-max 1100000]
 *               [--fanout-start] [--fanout-root] [--fanout-no-prev-kv]
 *               [--no-ready-wave] [--no-hangs] [--json FILE]
 *   ECOORD_BENCH_ETCD=host:port   use that etcd (plain http) instead of an
 *                                 embedded one; its CPU is then not measured
 *
 * Who is real and who is simulated.  Only the leader is a real ec_node_t
 * (coord/node/node.h), started first so it wins the election, with np=1:N,
 * elastic_timeout one hour (so only "np_max reached" can form the first
 * epoch) and replace_wait 0 (a loss re-forms at once).  The other N-1 nodes
 * are what a real agent leaves in etcd and nothing more: a lease and a node
 * record, registered exactly as ec_node_start() does it (LeaseGrant, then a
 * Txn "create revision == 0 -> put under the lease, else get"), by
 * REG_THREADS threads over NCLIENTS shared clients, and kept alive by one
 * thread per client that multiplexes every lease it owns over a single
 * LeaseKeepAlive stream (coord/etcd/etcd_impl.h's stream API), each lease
 * refreshed every TTL/3 like ec_keepalive.  They run no coordinator and do
 * not watch, so the leader's work is measured alone; what followers'
 * watches would add is measured separately below ("fan-out").
 *
 * What is measured, per size N:
 *   first epoch   t0 = the moment the last registration's Txn was
 *                 acknowledged.  Milestones: the leader's watch applied the
 *                 last change (the record's observed_at), it decided
 *                 (decided_at), built the record (published_at), the epoch
 *                 is in etcd (a watch of our own on the epoch key, on another
 *                 client: commit plus one watch hop), the leader's own
 *                 on_epoch was called.  Record fields are wall-clock whole
 *                 ms, taken at the middle of their ms (+-0.5 ms).
 *   steady state  over --steady-ms (default two keepalive periods): etcd's
 *                 requests and bytes per second, writes (etcd_mvcc put/
 *                 delete/txn counters, raft proposals committed: keepalives
 *                 are served by etcd's lessor without raft, so both must stay
 *                 0), and CPU of etcd, of the leader and of the simulator.
 *   loss          --losses times: keepalive sending is paused (leases last
 *                 10 s; the pause is well under 2 s; not paused while
 *                 follower watches are open, when a change takes seconds)
 *                 and one simulated member's lease is revoked; t0 = just
 *                 before LeaseRevoke.
 *                 Same milestones for the epoch without it (p50 and max).
 *                 Then after SETTLE_MS (to let the leader re-plan once more
 *                 on its own epoch: part of the decision's cost) the change's
 *                 etcd requests, messages and bytes, and the CPU it cost, are
 *                 read.  The leader's own ec_keepalive is not paused: a
 *                 LeaseKeepAlive may show up in a change's requests.  etcd's
 *                 idle background CPU (raft ticks, lease checks), measured
 *                 for 1 s with everything paused, is subtracted.
 *   record        the epoch record's size (the stored value, which
 *                 ec_epoch_encode produced) and bytes per member; the epoch
 *                 Txn carries it twice (epoch and epochs/<n>) up to 256 KiB,
 *                 once above (the history copy goes in a Txn of its own),
 *                 and etcd refuses requests over 1.5 MiB.
 *   READY wave    every live simulated node rewrites its record with state
 *                 ready (a plain Put under its lease), as coord/agent/launch.c does
 *                 through ec_node_set_state() after every epoch in restart
 *                 mode: the leader's CPU and etcd's work for N writes that
 *                 change no decision (no epoch may follow), and how often
 *                 the leader planned meanwhile (ec_node_plans).
 *   progress wave every live simulated node writes its record again with a
 *                 new progress summary, as each agent's progress sampler
 *                 does on a change (docs/user-guide.md, "Hangs and stragglers"): the
 *                 leader runs its hang policy (hang_timeout 300 s, as
 *                 --hang_timeout=auto for programs that report progress,
 *                 and an on_progress callback, as the agent's metrics) and
 *                 must hand every summary on; measured until the last one
 *                 reached on_progress, with its CPU and plans.  The leader
 *                 runs the hang policy throughout (every pass of its loop
 *                 may run it); --no-hangs starts it without (as before it
 *                 had one) and skips this wave.
 *   fan-out       F = min(N-1, --fanout-max) simulated followers, each with
 *                 the watches a real follower's ec_node opens (issue 16: the
 *                 leader key, the epoch's delta epochd, the job status and
 *                 its own record, single keys, no prev_kv; it receives the
 *                 delta and does not rebuild the record from it), multiplexed over one Watch stream
 *                 per client (NCLIENTS streams carry 4F watches), one more
 *                 loss: bytes etcd sent, the time until the median follower
 *                 and until every follower had the new epoch.  Not simulated:
 *                 what a real follower does after it has the epoch (re-watch
 *                 and list epochs/<n>/suspect/, read its two ring successors'
 *                 records: 4 small requests), and the training processes'
 *                 own epoch watches and leader-key reads (ecw).  With
 *                 --fanout-root each follower opens one watch of the whole job
 *                 root instead, as before issue 16.  0 skips it.  The
 *                 readers share this machine's cores with etcd (in a deployment each follower
 *                 receives on its own host), so etcd's CPU and bytes are the
 *                 figures that carry over; the time is pessimistic.  Then,
 *                 the READY wave again with those watches open (with
 *                 --fanout-root only where N x F <= --fanout-wave-max: every
 *                 put reaches every watch; a follower's own-record watch
 *                 sees only its own put).
 *                 With --fanout-start the F watches are opened before the
 *                 registrations instead, so each registration reaches every
 *                 watch too, and the time until every watch has the first
 *                 epoch is reported, and each loss also waits until every
 *                 watch has the new epoch.  In that mode the leader's CPU
 *                 figures include gRPC's internal threads serving the
 *                 watches (one process), and etcd's idle baseline includes
 *                 keepalives: read them as upper bounds.
 *                 --fanout-no-prev-kv opens those watches without prev_kv,
 *                 to measure what that option costs etcd.
 *
 * How CPU is attributed.  getrusage(RUSAGE_THREAD) reads only the calling
 * thread, so each thread of this process is read from
 * /proc/self/task/<tid>/schedstat (ns on CPU).  The simulator's threads
 * (main, registration, keepalive, our epoch watcher, the fan-out readers)
 * record their tids; everything else (the coordinator thread, its watch and
 * keepalive threads, gRPC's internal threads) is counted as the leader.  The
 * coordinator thread alone is identified from inside its callbacks.  etcd's
 * CPU is the sum over /proc/<pid>/task/<tid>/schedstat.
 *
 * etcd's own counters come from its Prometheus endpoint on the client URL
 * (GET /metrics over plain HTTP): grpc_server_msg_received_total and
 * grpc_server_msg_sent_total by method (a unary call is one of each; stream
 * messages count one each), etcd_network_client_grpc_{received,sent}_
 * bytes_total (message payload bytes, not wire bytes), etcd_mvcc_*_total,
 * etcd_server_proposals_committed_total.  Scrapes are HTTP, not gRPC, so
 * they do not count themselves. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "embed.h"
#include "clock.h"
#include "etcd_impl.h"
#include "keys.h"
#include "log.h"
#include "node.h"
#include "epoch_delta.h"
#include "records.h"

#define PREFIX "/ecscale"
#define TTL_S 10
#define PERIOD_MS (TTL_S * 1000 / 3) /* refresh interval, as ec_keepalive */
#define NCLIENTS 4
#define REG_THREADS 8
#define WAIT_MS 30000   /* deadline of every wait for the coordinator */
#define SETTLE_MS 300   /* after a change, before its cost is read */
#define MAX_SIZES 8
#define MAX_TIDS 512

/* ---- clocks ------------------------------------------------------------- */

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A measurement window, not a wait for a condition. */
static void pause_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static pid_t my_tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

/* ---- etcd's Prometheus counters ------------------------------------------ */

enum { M_RANGE, M_PUT, M_TXN, M_DEL, M_GRANT, M_REVOKE, M_KA, M_TTL, M_WATCH, M_OTHER, NMETH };
static const char *const meth_name[NMETH] = {"Range", "Put", "Txn", "DeleteRange", "LeaseGrant",
                                             "LeaseRevoke", "LeaseKeepAlive", "LeaseTimeToLive",
                                             "Watch", "other"};

typedef struct met {
    bool ok;
    int64_t at_us; /* middle of the scrape (in a delta: the time between two) */
    double rx[NMETH], tx[NMETH]; /* messages received from / sent to clients */
    double rx_bytes, tx_bytes;
    double puts, dels, txns, ranges, proposals, renewed;
} met_t;

static int meth_of(const char *m, size_t len)
{
    for (int i = 0; i < M_OTHER; i++)
        if (strlen(meth_name[i]) == len && !strncmp(meth_name[i], m, len))
            return i;
    return M_OTHER;
}

/* Value of a plain counter line "name value" (or "name{...} value"). */
static bool line_is(const char *line, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(line, name, n) && (line[n] == ' ' || line[n] == '{');
}

static double line_value(const char *line)
{
    const char *sp = strrchr(line, ' ');
    return sp ? strtod(sp + 1, NULL) : 0;
}

static void add_by_method(double *v, const char *line)
{
    const char *m = strstr(line, "grpc_method=\"");
    if (!m)
        return;
    m += 13;
    const char *e = strchr(m, '"');
    if (e)
        v[meth_of(m, (size_t)(e - m))] += line_value(line);
}

/* GET http://127.0.0.1:port/metrics (etcd serves it on the client port). */
static void metrics_read(int port, met_t *m)
{
    memset(m, 0, sizeof(*m));
    int64_t t_start = mono_us();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (!buf || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
        goto out;
    for (;;) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                goto out;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    if (strncmp(buf, "HTTP/1.", 7) || !strstr(buf, " 200 "))
        goto out;
    for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (l[0] == '#')
            continue;
        if (line_is(l, "grpc_server_msg_received_total"))
            add_by_method(m->rx, l);
        else if (line_is(l, "grpc_server_msg_sent_total"))
            add_by_method(m->tx, l);
        else if (line_is(l, "etcd_network_client_grpc_received_bytes_total"))
            m->rx_bytes = line_value(l);
        else if (line_is(l, "etcd_network_client_grpc_sent_bytes_total"))
            m->tx_bytes = line_value(l);
        else if (line_is(l, "etcd_mvcc_put_total"))
            m->puts = line_value(l);
        else if (line_is(l, "etcd_mvcc_delete_total"))
            m->dels = line_value(l);
        else if (line_is(l, "etcd_mvcc_txn_total"))
            m->txns = line_value(l);
        else if (line_is(l, "etcd_mvcc_range_total"))
            m->ranges = line_value(l);
        else if (line_is(l, "etcd_server_proposals_committed_total"))
            m->proposals = line_value(l);
        else if (line_is(l, "etcd_debugging_lease_renewed_total"))
            m->renewed = line_value(l);
    }
    m->ok = true;
    m->at_us = (t_start + mono_us()) / 2;
out:
    free(buf);
    close(fd);
}

static void met_delta(const met_t *a, const met_t *b, met_t *d)
{
    d->ok = a->ok && b->ok;
    d->at_us = b->at_us - a->at_us;
    for (int i = 0; i < NMETH; i++) {
        d->rx[i] = b->rx[i] - a->rx[i];
        d->tx[i] = b->tx[i] - a->tx[i];
    }
    d->rx_bytes = b->rx_bytes - a->rx_bytes;
    d->tx_bytes = b->tx_bytes - a->tx_bytes;
    d->puts = b->puts - a->puts;
    d->dels = b->dels - a->dels;
    d->txns = b->txns - a->txns;
    d->ranges = b->ranges - a->ranges;
    d->proposals = b->proposals - a->proposals;
    d->renewed = b->renewed - a->renewed;
}

/* "Txn 1, LeaseRevoke 1" for the non-zero entries of v. */
static void meth_list(const double *v, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < NMETH && o < len; i++)
        if (v[i] > 0.5)
            o += (size_t)snprintf(out + o, len - o, "%s%s %.0f", o ? ", " : "", meth_name[i], v[i]);
    if (!o)
        snprintf(out, len, "none");
}

static double met_requests(const met_t *m)
{
    double req = 0;
    for (int k = 0; k < NMETH; k++)
        req += m->rx[k];
    return req;
}

/* ---- CPU time, per thread -------------------------------------------------- */

static pthread_mutex_t tid_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t bench_tids[MAX_TIDS];
static int nbench_tids;
static pid_t coord_tid;

static void tid_register(void)
{
    pid_t t = my_tid();
    pthread_mutex_lock(&tid_lock);
    bool have = false;
    for (int i = 0; i < nbench_tids; i++)
        have |= bench_tids[i] == t;
    if (!have && nbench_tids < MAX_TIDS)
        bench_tids[nbench_tids++] = t;
    pthread_mutex_unlock(&tid_lock);
}

static bool tid_is_bench(pid_t t)
{
    for (int i = 0; i < nbench_tids; i++)
        if (bench_tids[i] == t)
            return true;
    return false;
}

static int64_t schedstat_ns(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long long ns = 0;
    if (fscanf(f, "%lld", &ns) != 1)
        ns = 0;
    fclose(f);
    return ns;
}

typedef struct cpu {
    int64_t at_us;
    int64_t leader_ns, coord_ns, bench_ns, etcd_ns;
    int64_t ru_us; /* RUSAGE_SELF user+system, for a cross-check */
} cpu_t;

static void cpu_read(pid_t etcd_pid, cpu_t *c)
{
    memset(c, 0, sizeof(*c));
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    pthread_mutex_lock(&tid_lock);
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        pid_t t = (pid_t)atoi(e->d_name);
        char p[64];
        snprintf(p, sizeof(p), "/proc/self/task/%d/schedstat", (int)t);
        int64_t ns = schedstat_ns(p);
        if (tid_is_bench(t))
            c->bench_ns += ns;
        else
            c->leader_ns += ns;
        if (t == coord_tid)
            c->coord_ns = ns;
    }
    pthread_mutex_unlock(&tid_lock);
    if (d)
        closedir(d);
    if (etcd_pid > 0) {
        char dir[64];
        snprintf(dir, sizeof(dir), "/proc/%d/task", (int)etcd_pid);
        if ((d = opendir(dir))) {
            while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                    continue;
                char p[128];
                snprintf(p, sizeof(p), "%s/%s/schedstat", dir, e->d_name);
                c->etcd_ns += schedstat_ns(p);
            }
            closedir(d);
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    c->ru_us = (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
               ru.ru_stime.tv_usec;
    c->at_us = mono_us();
}

/* ---- shared state ----------------------------------------------------------- */

typedef struct sim {
    char id[32];
    int64_t lease;  /* atomic: 0 until registered */
    int alive;      /* atomic: keep refreshing */
    int64_t due_ms; /* next refresh; keepalive thread only once lease is set */
} sim_t;

typedef struct epoch_seen {
    uint64_t number;
    int nmembers;
    size_t bytes;
    int64_t mono_us;
    int64_t observed_ms, decided_ms, published_ms, planner_us;
    int64_t decode_us, encode_us; /* our watch: ec_epoch_decode, ec_epoch_encode */
    char reason[24];
} epoch_seen_t;

typedef struct bench {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    ec_etcd_t *cl[NCLIENTS];
    ec_etcd_t *ctl;          /* main thread: revokes, cleanup, our watch */
    ec_keys_t keys;
    char job[EC_JOB_ID_MAX];
    int nproc;
    /* simulated nodes of the current size */
    sim_t *sims;
    int nsims;
    int reg_next;            /* atomic */
    int reg_errors;          /* atomic */
    size_t node_rec_bytes;   /* atomic: size of one simulated node record */
    int64_t reg_first_us, reg_last_us, reg_last_wall_us; /* under lock */
    char reg_err[256];
    /* keepalive senders */
    int ka_pause, ka_stop;   /* atomic */
    int fan_open;            /* atomic: follower watches are open */
    bool fan_no_prev_kv;     /* --fanout-no-prev-kv: what a fixed ec_node would open */
    bool no_ready_wave;      /* --no-ready-wave: skip the READY and progress waves */
    bool no_hangs;           /* --no-hangs: the leader without the hang policy (nor
                                on_progress), as before it had one; no progress wave */
    int wave_seq;            /* > 0: the wave writes progress summaries of this seq */
    uint64_t progress_seen;  /* under lock: summaries the leader's hang policy got */
    bool fan_root;           /* --fanout-root: followers watch the whole job root (before
                                issue 16); default: the watches a follower opens now */
    int fan_per;             /* watches per simulated follower: 1 (root) or 4 */
    int64_t *fan_t;          /* mono us at which each follower had the epoch */
    int fan_nt, fan_tcap;
    int ka_pause_gen;        /* atomic: bumped after each pause is set */
    uint64_t ka_sent, ka_acked, ka_lost, ka_reopened; /* atomic */
    int64_t ka_max_late_ms;  /* atomic: how late a refresh went out, at most */
    /* the leader, under lock */
    bool leader_up, steady;
    int64_t txn_ms;
    epoch_seen_t lead;       /* newest epoch the leader's on_epoch was given */
    epoch_seen_t etcd;       /* newest epoch our own watch saw */
    int warnings;
    /* fan-out watchers, under lock */
    uint64_t fan_want;       /* epoch number every watch must see */
    int fan_have;            /* watches that saw it */
    int64_t fan_done_us;
    uint64_t fan_events, fan_bytes, fan_node_puts;
    uint64_t fan_need;       /* wake the waiter once fan_events reaches it */
    int64_t fan_last_us;
} bench_t;

static bench_t B;

typedef bool (*pred_fn)(const void *arg);

/* Wait until pred holds (evaluated under B.lock) or ms pass. */
static bool wait_for(pred_fn pred, const void *arg, int ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&B.lock);
    bool ok;
    while (!(ok = pred(arg)))
        if (pthread_cond_timedwait(&B.cond, &B.lock, &dl) != 0 && !(ok = pred(arg)))
            break;
    pthread_mutex_unlock(&B.lock);
    return ok;
}

static bool p_leader(const void *a)
{
    (void)a;
    return B.leader_up;
}

static bool p_steady(const void *a)
{
    (void)a;
    return B.steady;
}

/* Both our watch and the leader's on_epoch have epoch *a (or newer). */
static bool p_epoch(const void *a)
{
    uint64_t n = *(const uint64_t *)a;
    return B.etcd.number >= n && B.lead.number >= n;
}

/* Node-record puts seen, summed over every watch. */
static bool p_fan_node_puts(const void *a)
{
    B.fan_need = *(const uint64_t *)a;
    return B.fan_node_puts >= B.fan_need;
}

static bool p_fan(const void *a)
{
    int want = *(const int *)a;
    return B.fan_have >= want;
}

/* ---- callbacks ------------------------------------------------------------ */

static void on_log(ec_log_level_t level, const char *msg, void *arg)
{
    pthread_mutex_lock(&B.lock);
    int w = B.warnings++;
    pthread_mutex_unlock(&B.lock);
    if (w < 20)
        fprintf(stderr, "bench_scale: [%s] %s\n", ec_log_level_name(level), msg);
}

static void fill_seen(epoch_seen_t *s, const ec_epoch_t *ep, size_t bytes, int64_t t)
{
    s->number = ep->number;
    s->nmembers = ep->nmembers;
    s->bytes = bytes;
    s->mono_us = t;
    s->observed_ms = ep->observed_at_ms;
    s->decided_ms = ep->decided_at_ms;
    s->published_ms = ep->published_at_ms;
    s->planner_us = ep->planner_us;
    snprintf(s->reason, sizeof(s->reason), "%s", ec_epoch_reason_name(ep->reason));
}

/* The leader's callbacks run on its coordinator thread. */
static void on_epoch(const ec_epoch_t *ep, void *arg)
{
    int64_t t = mono_us();
    pthread_mutex_lock(&tid_lock);
    coord_tid = my_tid();
    pthread_mutex_unlock(&tid_lock);
    pthread_mutex_lock(&B.lock);
    fill_seen(&B.lead, ep, B.lead.bytes, t);
    pthread_cond_broadcast(&B.cond);
    pthread_mutex_unlock(&B.lock);
}

/* The leader's on_progress: a member's new summary reached its hang
 * policy (coordinator thread). */
static void on_progress(const char *node_id, const ec_node_progress_t *p, void *arg)
{
    (void)node_id;
    (void)p;
    (void)arg;
    pthread_mutex_lock(&B.lock);
    B.progress_seen++;
    pthread_cond_broadcast(&B.cond);
    pthread_mutex_unlock(&B.lock);
}

static bool p_progress(const void *a)
{
    return B.progress_seen >= *(const uint64_t *)a;
}

static void on_event(const char *ev, void *arg)
{
    pthread_mutex_lock(&tid_lock);
    coord_tid = my_tid();
    pthread_mutex_unlock(&tid_lock);
    pthread_mutex_lock(&B.lock);
    const char *t;
    if (!strncmp(ev, "+leader ", 8))
        B.leader_up = true;
    else if (!strncmp(ev, "+wait: steady", 13))
        B.steady = true;
    if (!strncmp(ev, "+published epoch", 16) && (t = strstr(ev, "txn ")))
        B.txn_ms = strtoll(t + 4, NULL, 10);
    pthread_cond_broadcast(&B.cond);
    pthread_mutex_unlock(&B.lock);
}

/* Our own watch of the epoch key, on a client of its own. */
static void on_epoch_key(const ec_watch_event_t *ev, void *arg)
{
    tid_register();
    if (ev->type != EC_WATCH_PUT)
        return;
    int64_t t = mono_us();
    ec_epoch_t *ep = NULL;
    /* a split epoch's head decodes as a view of member 0 (its size: the
     * head's; the chunks were written before it) */
    if (ec_epoch_decode_view(ev->kv->value, ev->kv->value_len, NULL, &ep, NULL) < 0)
        return;
    int64_t t1 = mono_us();
    void *buf = NULL;
    size_t len = 0;
    ec_epoch_encode_view(ep, &buf, &len, NULL);
    int64_t t2 = mono_us();
    free(buf);
    pthread_mutex_lock(&B.lock);
    fill_seen(&B.etcd, ep, ev->kv->value_len, t);
    B.etcd.decode_us = t1 - t;
    B.etcd.encode_us = t2 - t1;
    pthread_cond_broadcast(&B.cond);
    pthread_mutex_unlock(&B.lock);
    ec_epoch_free(ep);
}

/* ---- registration: what ec_node_start() writes, nothing more ----------- */

static int encode_sim(int i, const char *id, int nproc, ec_node_state_t st,
                      const ec_node_progress_t *pg, void **buf, size_t *len, ec_error_t *err)
{
    ec_node_rec_t *r = ec_node_rec_new(nproc, nproc);
    if (!r)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    char host[32];
    snprintf(host, sizeof(host), "10.%d.%d.%d", 20 + i / 65536, (i / 256) % 256, i % 256);
    r->node_id = strdup(id);
    r->host = strdup(host);
    r->nproc = nproc;
    for (int j = 0; j < nproc; j++) {
        char d[8];
        r->ports[j] = (uint16_t)(29500 + j);
        snprintf(d, sizeof(d), "%d", j);
        r->device_ids[j] = strdup(d);
    }
    r->master_port = 29400;
    r->incarnation = 1;
    r->agent_version = strdup("bench_scale");
    r->state = st;
    r->registered_at_ms = wall_us() / 1000;
    if (pg)
        r->progress = *pg;
    int rc = ec_node_rec_encode(r, buf, len, err);
    ec_node_rec_free(r);
    return rc;
}

static void *reg_main(void *arg)
{
    ec_etcd_t *c = arg;
    tid_register();
    for (;;) {
        int i = __atomic_fetch_add(&B.reg_next, 1, __ATOMIC_RELAXED);
        if (i >= B.nsims)
            break;
        sim_t *s = &B.sims[i];
        ec_error_t err = {0};
        int64_t lease = 0;
        void *buf = NULL;
        size_t len = 0;
        char key[EC_KEY_MAX];
        ec_key_node(&B.keys, s->id, key, sizeof(key));
        if (ec_etcd_lease_grant(c, TTL_S, &lease, NULL, &err) < 0 ||
            encode_sim(i, s->id, B.nproc, EC_NODE_JOINING, NULL, &buf, &len, &err) < 0)
            goto fail;
        ec_cmp_t absent = {.key = key, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
        ec_op_t put = {.type = EC_OP_PUT, .key = key, .value = buf, .value_len = len, .lease = lease};
        ec_op_t get = {.type = EC_OP_GET, .key = key};
        ec_txn_result_t r;
        if (ec_etcd_txn(c, &absent, 1, &put, 1, &get, 1, &r, &err) < 0)
            goto fail;
        bool ok = r.succeeded;
        ec_txn_result_free(&r);
        if (!ok) {
            ec_errorf(&err, EC_EEXIST, "node key %s already exists", key);
            goto fail;
        }
        free(buf);
        __atomic_store_n(&B.node_rec_bytes, len, __ATOMIC_RELAXED);
        int64_t t = mono_us(), tw = wall_us();
        /* Agents start at unrelated times: spread the refresh phases evenly
         * instead of refreshing the whole burst at once every period. */
        s->due_ms = t / 1000 + 1 + (int64_t)((uint64_t)i * 2654435761u % PERIOD_MS);
        __atomic_store_n(&s->alive, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->lease, lease, __ATOMIC_RELEASE);
        pthread_mutex_lock(&B.lock);
        if (!B.reg_first_us)
            B.reg_first_us = t;
        if (t > B.reg_last_us) {
            B.reg_last_us = t;
            B.reg_last_wall_us = tw;
        }
        pthread_mutex_unlock(&B.lock);
        continue;
    fail:
        free(buf);
        if (lease)
            ec_etcd_lease_revoke(c, lease, NULL);
        if (__atomic_fetch_add(&B.reg_errors, 1, __ATOMIC_RELAXED) == 0) {
            pthread_mutex_lock(&B.lock);
            snprintf(B.reg_err, sizeof(B.reg_err), "%s", err.msg);
            pthread_mutex_unlock(&B.lock);
        }
    }
    return NULL;
}

/* ---- keepalives: many leases over one stream per client ---------------- */

typedef struct ka_thread {
    int k;
    pthread_t th;
    pthread_mutex_t call_lock;
    int idle_gen; /* atomic: pause generation this sender saw between two passes */
} ka_thread_t;

static ka_thread_t kat[NCLIENTS];
static int nka;

static void ka_recv(ec__stream_t *s)
{
    Etcdserverpb__LeaseKeepAliveResponse *r = (Etcdserverpb__LeaseKeepAliveResponse *)ec__unpack(
        &etcdserverpb__lease_keep_alive_response__descriptor, s->recv);
    grpc_byte_buffer_destroy(s->recv);
    s->recv = NULL;
    if (!r)
        return;
    __atomic_fetch_add(&B.ka_acked, 1, __ATOMIC_RELAXED);
    if (r->ttl <= 0)
        __atomic_fetch_add(&B.ka_lost, 1, __ATOMIC_RELAXED);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

static void *ka_main(void *arg)
{
    ka_thread_t *t = arg;
    tid_register();
    Etcdserverpb__LeaseKeepAliveRequest req = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    while (!__atomic_load_n(&B.ka_stop, __ATOMIC_RELAXED)) {
        ec__stream_t s;
        ec_error_t err = {0};
        if (ec__stream_open(&s, B.cl[t->k], "/etcdserverpb.Lease/LeaseKeepAlive", &t->call_lock,
                            &err) < 0) {
            pause_ms(100);
            continue;
        }
        bool broken = false;
        while (!broken && !__atomic_load_n(&B.ka_stop, __ATOMIC_RELAXED)) {
            int64_t now = mono_us() / 1000;
            /* The generation is read before the flag: a sender that reports
             * the current generation has seen that pause. */
            int gen = __atomic_load_n(&B.ka_pause_gen, __ATOMIC_SEQ_CST);
            bool paused = __atomic_load_n(&B.ka_pause, __ATOMIC_SEQ_CST);
            if (paused)
                __atomic_store_n(&t->idle_gen, gen, __ATOMIC_SEQ_CST);
            for (int i = t->k; !paused && i < B.nsims; i += NCLIENTS) {
                sim_t *sm = &B.sims[i];
                int64_t lease = __atomic_load_n(&sm->lease, __ATOMIC_ACQUIRE);
                int64_t due = __atomic_load_n(&sm->due_ms, __ATOMIC_RELAXED);
                if (!lease || !__atomic_load_n(&sm->alive, __ATOMIC_RELAXED) || now < due)
                    continue;
                req.id = lease;
                if (ec__stream_send(&s, &req.base) < 0) {
                    broken = true;
                    break;
                }
                __atomic_fetch_add(&B.ka_sent, 1, __ATOMIC_RELAXED);
                int64_t late = now - due, seen = __atomic_load_n(&B.ka_max_late_ms, __ATOMIC_RELAXED);
                while (late > seen && !__atomic_compare_exchange_n(&B.ka_max_late_ms, &seen, late, false,
                                                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                    ;
                __atomic_store_n(&sm->due_ms, due + PERIOD_MS > now ? due + PERIOD_MS : now + PERIOD_MS,
                                 __ATOMIC_RELAXED);
                /* One send at a time per stream: pump until it is out. */
                while (s.send_busy) {
                    ec__ev_t ev = ec__stream_next(&s, ec_mono_ms() + 5000);
                    if (ev == EC__EV_RECV)
                        ka_recv(&s);
                    else if (ev == EC__EV_CLOSED || ev == EC__EV_TIMEOUT) {
                        broken = true;
                        break;
                    }
                }
            }
            if (broken)
                break;
            ec__ev_t ev = ec__stream_next(&s, ec_mono_ms() + 10);
            if (ev == EC__EV_RECV)
                ka_recv(&s);
            else if (ev == EC__EV_CLOSED)
                broken = true;
        }
        ec__stream_close(&s);
        if (broken && !__atomic_load_n(&B.ka_stop, __ATOMIC_RELAXED))
            __atomic_fetch_add(&B.ka_reopened, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Pause sending: every sender has seen the pause between two passes and
 * every refresh sent has been answered (bounded by 2 s). */
static bool ka_quiet(int gen)
{
    for (int i = 0; i < nka; i++)
        if (__atomic_load_n(&kat[i].idle_gen, __ATOMIC_SEQ_CST) != gen)
            return false;
    return __atomic_load_n(&B.ka_acked, __ATOMIC_RELAXED) >=
           __atomic_load_n(&B.ka_sent, __ATOMIC_RELAXED);
}

static bool ka_overdue(void)
{
    int64_t now = mono_us() / 1000;
    for (int i = 0; i < B.nsims; i++) {
        sim_t *sm = &B.sims[i];
        if (__atomic_load_n(&sm->lease, __ATOMIC_ACQUIRE) &&
            __atomic_load_n(&sm->alive, __ATOMIC_RELAXED) &&
            __atomic_load_n(&sm->due_ms, __ATOMIC_RELAXED) < now - 20)
            return true;
    }
    return false;
}

/* While follower watches are open (fan-out), changes take seconds: sending
 * is not paused then, or leases could outlive their TTL unrefreshed. */
static void ka_quiesce(void)
{
    if (__atomic_load_n(&B.fan_open, __ATOMIC_RELAXED))
        return;
    /* Refreshes that are due go out first, so no lease enters the pause
     * older than one period. */
    int64_t dl0 = mono_us() + 2000000;
    while (mono_us() < dl0 && ka_overdue())
        pause_ms(5);
    __atomic_store_n(&B.ka_pause, 1, __ATOMIC_SEQ_CST);
    int gen = __atomic_add_fetch(&B.ka_pause_gen, 1, __ATOMIC_SEQ_CST);
    int64_t dl = mono_us() + 2000000;
    while (mono_us() < dl && !ka_quiet(gen))
        pause_ms(2);
}

static void ka_resume(void)
{
    __atomic_store_n(&B.ka_pause, 0, __ATOMIC_SEQ_CST);
}

/* ---- fan-out: F root watches (prev_kv) multiplexed on one stream per client */

typedef struct fan_thread {
    int k, nwatch;
    int64_t start_rev;
    pthread_t th;
    pthread_mutex_t call_lock;
    int created;  /* atomic */
    int stop;     /* atomic */
    int failed;   /* atomic */
} fan_thread_t;

/* The bytes a follower reads for its view of the split epoch whose head
 * is in head (0: not split); the same reads as ec_epoch_fetch_view. */
static size_t view_reads(ec_etcd_t *c, const ec_kv_t *head, const char *self)
{
    ec_epoch_split_t info;
    if (ec_epoch_head_info(head->value, head->value_len, NULL, &info, NULL) != 1)
        return 0;
    size_t bytes = 0;
    char key[EC_KEY_MAX];
    int b = (int)ec_epoch_index_bucket(self, info.nbuckets), m = -1;
    ec_key_epoch_index(&B.keys, info.number, b, key, sizeof(key));
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) == 0 && found) {
        bytes += kv.value_len;
        ec_epoch_index_find(kv.value, kv.value_len, info.index_digest[b], info.number, b, self,
                            &m, NULL);
        ec_kv_free(&kv);
    }
    int want[5] = {-1, -1, -1, -1, -1};
    if (m >= 0) {
        want[0] = m / info.chunk_members;
        want[1] = want[0] - 1;
        want[2] = want[0] + 1 < info.nchunks ? want[0] + 1 : -1;
        want[3] = ((m + 1) % info.nmembers) / info.chunk_members;
        want[4] = ((m + 2) % info.nmembers) / info.chunk_members;
    }
    for (int j = 0; j < 5; j++) {
        bool dup = want[j] < 0;
        for (int i = 0; i < j; i++)
            dup = dup || want[i] == want[j];
        if (dup)
            continue;
        ec_key_epoch_chunk(&B.keys, info.number, want[j], key, sizeof(key));
        if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) == 0 && found) {
            bytes += kv.value_len;
            ec_kv_free(&kv);
        }
    }
    ec_epoch_split_free(&info);
    return bytes;
}

static void *fan_main(void *arg)
{
    fan_thread_t *f = arg;
    tid_register();
    ec__stream_t s;
    ec_error_t err = {0};
    if (ec__stream_open(&s, B.cl[f->k], "/etcdserverpb.Watch/Watch", &f->call_lock, &err) < 0) {
        __atomic_store_n(&f->failed, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    const char *root = ec_keys_root(&B.keys);
    char end[EC_KEY_MAX];
    size_t rl = strlen(root);
    memcpy(end, root, rl);
    end[rl - 1]++; /* "/x/job/" -> "/x/job0": the prefix's range end */
    /* A follower's watches (coord/node/node_model.c): the leader key, the epoch's
     * delta (epochd), the status and its own record, each a single key (the
     * simulated follower receives the delta but does not rebuild the
     * record: ec_epoch_delta_apply, on its own host); or (--fanout-root)
     * the whole job root, as every follower watched before issue 16. */
    char fk[3][EC_KEY_MAX];
    ec_key_leader(&B.keys, fk[0], EC_KEY_MAX);
    ec_key_epoch_delta(&B.keys, fk[1], EC_KEY_MAX);
    ec_key_status(&B.keys, fk[2], EC_KEY_MAX);
    char own[EC_KEY_MAX];
    Etcdserverpb__WatchCreateRequest cr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    cr.start_revision = f->start_rev;
    cr.prev_kv = B.fan_root && !B.fan_no_prev_kv;
    Etcdserverpb__WatchRequest wr = ETCDSERVERPB__WATCH_REQUEST__INIT;
    wr.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    wr.create_request = &cr;
    int sent = 0;
    /* the key whose event brings a follower the new epoch: the delta
     * (epochd) for a follower's watches, the epoch itself under the root */
    char ekey[EC_KEY_MAX];
    int eklen = B.fan_root ? ec_key_epoch(&B.keys, ekey, sizeof(ekey))
                           : ec_key_epoch_delta(&B.keys, ekey, sizeof(ekey));
    char nprefix[EC_KEY_MAX];
    size_t nplen = (size_t)ec_key_nodes_prefix(&B.keys, nprefix, sizeof(nprefix));
    while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED)) {
        int total = f->nwatch * B.fan_per;
        if (sent < total && !s.send_busy) {
            if (B.fan_root) {
                cr.key.data = (uint8_t *)root;
                cr.key.len = rl;
                cr.range_end.data = (uint8_t *)end;
                cr.range_end.len = rl;
            } else {
                int w = sent % B.fan_per, follower = f->k + (sent / B.fan_per) * NCLIENTS;
                const char *key = fk[w < 3 ? w : 0];
                if (w == 3) {
                    ec_key_node(&B.keys, B.sims[follower % B.nsims].id, own, sizeof(own));
                    key = own;
                }
                cr.key.data = (uint8_t *)key;
                cr.key.len = strlen(key);
                cr.range_end.data = NULL;
                cr.range_end.len = 0;
            }
            if (ec__stream_send(&s, &wr.base) < 0)
                break;
            sent++;
        }
        ec__ev_t ev = ec__stream_next(&s, ec_mono_ms() + (sent < total ? 1000 : 20));
        if (ev == EC__EV_CLOSED)
            break;
        if (ev != EC__EV_RECV)
            continue;
        size_t bytes = grpc_byte_buffer_length(s.recv);
        Etcdserverpb__WatchResponse *r = (Etcdserverpb__WatchResponse *)ec__unpack(
            &etcdserverpb__watch_response__descriptor, s.recv);
        grpc_byte_buffer_destroy(s.recv);
        s.recv = NULL;
        if (!r)
            continue;
        if (r->created)
            __atomic_fetch_add(&f->created, 1, __ATOMIC_RELAXED);
        int64_t t = mono_us();
        bool saw = false;
        uint64_t node_puts = 0;
        for (size_t i = 0; i < r->n_events; i++) {
            Mvccpb__KeyValue *kv = r->events[i]->kv;
            if (r->events[i]->type == MVCCPB__EVENT__EVENT_TYPE__PUT && kv &&
                kv->key.len > nplen && !memcmp(kv->key.data, nprefix, nplen))
                node_puts++;
            if (r->events[i]->type == MVCCPB__EVENT__EVENT_TYPE__PUT && kv &&
                kv->key.len == (size_t)eklen && !memcmp(kv->key.data, ekey, (size_t)eklen) &&
                kv->version > 0) {
                saw = true;
                /* A full marker (no base: the first epoch): a real follower
                 * reads the whole record at the delta's revision; so does
                 * the simulated one, on its client, inline. */
                uint64_t num = 0, base = 1;
                if (!B.fan_root &&
                    ec_epoch_delta_peek(kv->value.data, kv->value.len, &num, &base) == 0 &&
                    !base) {
                    char key[EC_KEY_MAX];
                    ec_key_epoch(&B.keys, key, sizeof(key));
                    ec_kv_t full;
                    bool found = false;
                    if (ec_etcd_get_at(B.cl[f->k], key, kv->mod_revision, &full, &found, NULL,
                                       NULL) == 0 && found) {
                        bytes += full.value_len;
                        /* a split epoch: the follower reads its view
                         * (index bucket, own chunk, the next), as
                         * ec_epoch_fetch_view does */
                        int follower = f->k + (int)(r->watch_id / B.fan_per) * NCLIENTS;
                        bytes += view_reads(B.cl[f->k], &full, B.sims[follower % B.nsims].id);
                        ec_kv_free(&full);
                    }
                    t = mono_us();
                }
            }
        }
        pthread_mutex_lock(&B.lock);
        B.fan_events += r->n_events;
        B.fan_node_puts += node_puts;
        B.fan_bytes += bytes;
        B.fan_last_us = t;
        if (B.fan_node_puts >= B.fan_need)
            pthread_cond_broadcast(&B.cond);
        if (saw && B.fan_want) {
            if (B.fan_nt < B.fan_tcap)
                B.fan_t[B.fan_nt++] = t;
            B.fan_have++;
            B.fan_done_us = t;
            pthread_cond_broadcast(&B.cond);
        }
        pthread_mutex_unlock(&B.lock);
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    ec__stream_close(&s);
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- one size ------------------------------------------------------------- */

#define MAX_LOSSES 16

/* One loss, ms from just before LeaseRevoke; CPU in ms. */
typedef struct loss {
    double revoke, obs, dec, built, etcd, lead, planner_ms, txn_ms;
    double lead_cpu, coord_cpu, etcd_cpu, ru; /* etcd_cpu: net of its idle background */
    double decode_ms, encode_ms; /* ec_epoch_decode/encode of this epoch, in our watch */
    double all_ms;               /* --fanout-start: every follower watch had the epoch */
    met_t met;
    int members;
    size_t rec;
    char reason[24];
} loss_t;

typedef struct result {
    int n;
    bool ok;
    char fail[256];
    /* registration */
    double reg_s;
    int reg_errors;
    size_t node_rec_bytes;
    /* first epoch, ms from the last registration's ack */
    double f_obs, f_dec, f_built, f_etcd, f_lead, f_planner_ms, f_txn_ms;
    char f_reason[24];
    int f_members;
    size_t rec_bytes;
    /* steady state, per second */
    double s_window_s, s_req, s_ka, s_rx_bytes, s_tx_bytes, s_writes, s_proposals;
    double s_etcd_cpu, s_leader_cpu, s_bench_cpu; /* fraction of one core */
    int64_t s_ka_late_ms; /* latest refresh sent after its due time */
    char s_req_list[256];
    double etcd_idle_cpu; /* fraction of one core, keepalives paused */
    /* losses */
    loss_t loss[MAX_LOSSES];
    int nloss;
    /* ready wave */
    bool rw_ok;
    int rw_puts;
    double rw_s, rw_lead_cpu_ms, rw_coord_cpu_ms, rw_etcd_cpu_ms, rw_tx_bytes, rw_requests,
        rw_proposals;
    uint64_t rw_epochs; /* epochs published during the wave (expected 0) */
    uint64_t rw_plans;  /* times the leader planned meanwhile (ec_node_plans) */
    /* progress wave: every member writes a new progress summary */
    bool pw_ok;
    int pw_puts;
    double pw_s, pw_lead_cpu_ms, pw_coord_cpu_ms, pw_seen_ms;
    uint64_t pw_plans, pw_seen, pw_epochs;
    /* fan-out */
    int fan_w;
    double fan_p50_ms; /* median follower's time to the epoch (fan_ms: the last one's) */
    double fan_ms, fan_etcd_ms, fan_bytes, fan_tx_bytes, fan_etcd_cpu_ms, fan_bench_cpu_ms,
        fan_events;
    bool fan_ok;
    /* --fanout-start: registration with the watches already open */
    int fs_w;
    bool fs_ok;
    double fs_ms, fs_events, fs_bytes, fs_etcd_cpu_ms;
    /* the READY wave under fan-out */
    bool fw_ok;
    int fw_puts;
    double fw_ms, fw_bytes, fw_events, fw_tx_bytes, fw_etcd_cpu_ms, fw_bench_cpu_ms, fw_lead_cpu_ms;
    uint64_t fw_epochs; /* epochs published meanwhile (expected 0) */
    /* keepalive health */
    uint64_t ka_lost, ka_reopened;
} result_t;

static double rel_ms(int64_t wall_ms_field, int64_t t0_wall_us)
{
    return wall_ms_field ? (double)wall_ms_field + 0.5 - t0_wall_us / 1000.0 : -1;
}

/* Every live simulated node rewrites its record with state ready, as
 * coord/agent/launch.c does through ec_node_set_state() after each epoch;
 * with B.wave_seq > 0, with a progress summary of that seq too, as its
 * progress sampler does through ec_node_set_progress() (the hangs of
 * README's "Hangs and stragglers"). */
static void *ready_main(void *arg)
{
    ec_etcd_t *c = arg;
    tid_register();
    for (;;) {
        int i = __atomic_fetch_add(&B.reg_next, 1, __ATOMIC_RELAXED);
        if (i >= B.nsims)
            break;
        sim_t *sm = &B.sims[i];
        int64_t l = __atomic_load_n(&sm->lease, __ATOMIC_ACQUIRE);
        if (!l || !__atomic_load_n(&sm->alive, __ATOMIC_RELAXED))
            continue;
        void *buf = NULL;
        size_t len = 0;
        char key[EC_KEY_MAX];
        ec_key_node(&B.keys, sm->id, key, sizeof(key));
        ec_node_progress_t pg = {.seq = (uint64_t)B.wave_seq, .reporting = 1,
                                 .step = 100 * (uint64_t)B.wave_seq, .silent_rank = -1,
                                 .step_p50_us = 250000, .slowest_us = 260000,
                                 .slowest_rank = i % B.nproc};
        if (encode_sim(i, sm->id, B.nproc, EC_NODE_READY, B.wave_seq > 0 ? &pg : NULL, &buf, &len,
                       NULL) == 0 &&
            ec_etcd_put(c, key, buf, len, l, NULL, NULL) < 0)
            __atomic_fetch_add(&B.reg_errors, 1, __ATOMIC_RELAXED);
        free(buf);
    }
    return NULL;
}

/* Open F root watches over one stream per client, from the current
 * revision + 1; returns how many etcd confirmed within WAIT_MS. */
static int fan_open(fan_thread_t *fan, int *nfan, int F)
{
    int64_t rev = 0;
    ec_etcd_status(B.ctl, &rev, NULL, 0, NULL);
    __atomic_store_n(&B.fan_open, 1, __ATOMIC_RELAXED);
    for (*nfan = 0; *nfan < NCLIENTS; (*nfan)++) {
        fan_thread_t *f = &fan[*nfan];
        f->k = *nfan;
        f->nwatch = F / NCLIENTS + (*nfan < F % NCLIENTS);
        f->start_rev = rev + 1;
        pthread_mutex_init(&f->call_lock, NULL);
        if (pthread_create(&f->th, NULL, fan_main, f) != 0)
            break;
    }
    int64_t dl = mono_us() + (int64_t)WAIT_MS * 1000;
    int created = 0;
    while (mono_us() < dl) {
        created = 0;
        for (int i = 0; i < *nfan; i++)
            created += __atomic_load_n(&fan[i].created, __ATOMIC_RELAXED);
        if (created >= F * B.fan_per)
            break;
        pause_ms(5);
    }
    return created / B.fan_per;
}

/* Run the READY wave; returns its duration in s. */
static double ready_wave(void)
{
    B.reg_next = 0;
    B.reg_errors = 0;
    pthread_t rw[REG_THREADS];
    int nrw;
    int64_t w0 = mono_us();
    for (nrw = 0; nrw < REG_THREADS; nrw++)
        if (pthread_create(&rw[nrw], NULL, ready_main, B.cl[nrw % NCLIENTS]) != 0)
            break;
    for (int i = 0; i < nrw; i++)
        pthread_join(rw[i], NULL);
    return (mono_us() - w0) / 1e6;
}

static void *revoke_main(void *arg)
{
    ec_etcd_t *c = arg;
    tid_register();
    for (;;) {
        int i = __atomic_fetch_add(&B.reg_next, 1, __ATOMIC_RELAXED);
        if (i >= B.nsims)
            break;
        int64_t l = __atomic_load_n(&B.sims[i].lease, __ATOMIC_ACQUIRE);
        if (l && __atomic_load_n(&B.sims[i].alive, __ATOMIC_RELAXED))
            ec_etcd_lease_revoke(c, l, NULL);
    }
    return NULL;
}

static void cleanup_size(ec_node_t **leader, pthread_t *reg, int nreg)
{
    for (int i = 0; i < nreg; i++)
        pthread_join(reg[i], NULL);
    __atomic_store_n(&B.ka_stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < nka; i++)
        pthread_join(kat[i].th, NULL);
    int64_t lead_lease = 0;
    if (*leader) {
        lead_lease = ec_node_lease(*leader);
        ec_node_stop(*leader);
        *leader = NULL;
    }
    if (lead_lease)
        ec_etcd_lease_revoke(B.ctl, lead_lease, NULL);
    /* Revoke every simulated lease, REG_THREADS at a time. */
    pthread_t rv[REG_THREADS];
    int nrv = 0;
    B.reg_next = 0;
    for (nrv = 0; nrv < REG_THREADS; nrv++)
        if (pthread_create(&rv[nrv], NULL, revoke_main, B.cl[nrv % NCLIENTS]) != 0)
            break;
    for (int i = 0; i < nrv; i++)
        pthread_join(rv[i], NULL);
    ec_etcd_delete(B.ctl, ec_keys_root(&B.keys), true, NULL, NULL);
}

static void run_size(int n, pid_t etcd_pid, int etcd_port, int steady_ms, int nlosses,
                     int fanout_max, bool fanout_wave, bool fanout_start, result_t *R)
{
    memset(R, 0, sizeof(*R));
    R->n = n;
    ec_error_t err = {0};
    ec_node_t *leader = NULL;
    ec_watch_t *ew = NULL;
    pthread_t reg[REG_THREADS];
    fan_thread_t fan[NCLIENTS];
    int nreg = 0, nfan = 0;
    nka = 0;
    memset(fan, 0, sizeof(fan));

    snprintf(B.job, sizeof(B.job), "scale-%d-%d", n, (int)getpid());
    ec_keys_init(&B.keys, PREFIX, B.job, NULL);
    pthread_mutex_lock(&B.lock);
    B.nsims = n - 1;
    B.sims = calloc((size_t)B.nsims, sizeof(sim_t));
    B.reg_next = B.reg_errors = 0;
    B.reg_first_us = B.reg_last_us = B.reg_last_wall_us = 0;
    B.reg_err[0] = '\0';
    B.ka_pause = B.ka_stop = B.ka_pause_gen = B.fan_open = 0;
    B.ka_sent = B.ka_acked = B.ka_lost = B.ka_reopened = 0;
    B.leader_up = B.steady = false;
    B.txn_ms = -1;
    memset(&B.lead, 0, sizeof(B.lead));
    memset(&B.etcd, 0, sizeof(B.etcd));
    B.fan_want = 0;
    B.fan_have = 0;
    B.fan_events = B.fan_bytes = 0;
    B.fan_need = UINT64_MAX;
    pthread_mutex_unlock(&B.lock);
    if (!B.sims) {
        snprintf(R->fail, sizeof(R->fail), "out of memory");
        return;
    }
    for (int i = 0; i < B.nsims; i++)
        snprintf(B.sims[i].id, sizeof(B.sims[i].id), "sim-%05d", i + 1);

    /* Our watch of the epoch key, from now. */
    char ekey[EC_KEY_MAX];
    ec_key_epoch(&B.keys, ekey, sizeof(ekey));
    if (!(ew = ec_watch_start(B.ctl, ekey, false, 0, on_epoch_key, NULL, &err))) {
        snprintf(R->fail, sizeof(R->fail), "epoch watch: %s", err.msg);
        goto out;
    }

    /* The leader: the one real coordinator, started first. */
    uint16_t ports[EC_NPROC_MAX];
    for (int j = 0; j < B.nproc; j++)
        ports[j] = (uint16_t)(20001 + j);
    ec_node_opts_t o = EC_NODE_OPTS_INIT;
    o.etcd = B.ctl;
    o.etcd_prefix = PREFIX;
    o.job_id = B.job;
    o.node_id = "leader-00000";
    o.host = "127.0.0.1";
    o.nproc = B.nproc;
    o.ports = ports;
    o.master_port = 20000;
    o.agent_version = "bench_scale";
    o.np_min = 1;
    o.np_max = n;
    o.elastic_timeout_ms = 3600 * 1000;
    o.replace_wait_ms = 0;
    o.lease_ttl_s = TTL_S;
    o.on_epoch = on_epoch;
    o.on_event = on_event;
    /* As a real leader of a job whose programs report progress: the hang
     * policy on (--hang_timeout=auto is 300 s for them), the summaries
     * handed on (the agent's metrics). */
    if (!B.no_hangs) {
        o.hang_timeout_ms = 300 * 1000;
        o.on_progress = on_progress;
    }
    if (!(leader = ec_node_start(&o, &err))) {
        snprintf(R->fail, sizeof(R->fail), "leader: %s", err.msg);
        goto out;
    }
    if (!wait_for(p_leader, NULL, WAIT_MS)) {
        snprintf(R->fail, sizeof(R->fail), "no +leader within %d ms", WAIT_MS);
        goto out;
    }

    /* With --fanout-start, followers' watches exist before anyone registers,
     * as they would with real agents: each registration reaches all of them. */
    int F = n - 1 < fanout_max ? n - 1 : fanout_max;
    cpu_t cs0;
    if (fanout_start && F > 0 && n >= 3) {
        if (fan_open(fan, &nfan, F) < F) {
            snprintf(R->fail, sizeof(R->fail), "not all %d fan-out watches were created", F);
            goto out;
        }
        pthread_mutex_lock(&B.lock);
        B.fan_want = 1;
        B.fan_have = 0;
        B.fan_events = B.fan_bytes = B.fan_node_puts = 0;
        pthread_mutex_unlock(&B.lock);
        R->fs_w = F;
    }
    cpu_read(etcd_pid, &cs0);

    /* Keepalive senders, then the registration burst. */
    for (nka = 0; nka < NCLIENTS; nka++) {
        kat[nka].k = nka;
        kat[nka].idle_gen = -1;
        pthread_mutex_init(&kat[nka].call_lock, NULL);
        if (pthread_create(&kat[nka].th, NULL, ka_main, &kat[nka]) != 0)
            break;
    }
    for (nreg = 0; nreg < REG_THREADS; nreg++)
        if (pthread_create(&reg[nreg], NULL, reg_main, B.cl[nreg % NCLIENTS]) != 0)
            break;
    int64_t reg_t0 = mono_us();
    for (int i = 0; i < nreg; i++)
        pthread_join(reg[i], NULL);
    nreg = 0;
    R->reg_errors = __atomic_load_n(&B.reg_errors, __ATOMIC_RELAXED);
    R->node_rec_bytes = __atomic_load_n(&B.node_rec_bytes, __ATOMIC_RELAXED);
    pthread_mutex_lock(&B.lock);
    int64_t t_last = B.reg_last_us, t_last_w = B.reg_last_wall_us;
    R->reg_s = (t_last - reg_t0) / 1e6;
    pthread_mutex_unlock(&B.lock);
    if (R->reg_errors) {
        snprintf(R->fail, sizeof(R->fail), "%d registrations failed: %s", R->reg_errors, B.reg_err);
        goto out;
    }

    /* (1) first epoch. */
    uint64_t want = 1;
    if (!wait_for(p_epoch, &want, WAIT_MS)) {
        snprintf(R->fail, sizeof(R->fail), "no first epoch within %d ms of the last registration",
                 WAIT_MS);
        goto out;
    }
    if (R->fs_w) {
        R->fs_ok = wait_for(p_fan, &F, 3 * WAIT_MS);
        cpu_t cs1;
        cpu_read(etcd_pid, &cs1);
        pthread_mutex_lock(&B.lock);
        R->fs_ms = (B.fan_done_us - t_last) / 1000.0;
        R->fs_events = (double)B.fan_events;
        R->fs_bytes = (double)B.fan_bytes;
        pthread_mutex_unlock(&B.lock);
        R->fs_etcd_cpu_ms = etcd_pid > 0 ? (cs1.etcd_ns - cs0.etcd_ns) / 1e6 : -1;
    }
    pthread_mutex_lock(&B.lock);
    R->f_obs = rel_ms(B.etcd.observed_ms, t_last_w);
    R->f_dec = rel_ms(B.etcd.decided_ms, t_last_w);
    R->f_built = rel_ms(B.etcd.published_ms, t_last_w);
    R->f_etcd = (B.etcd.mono_us - t_last) / 1000.0;
    R->f_lead = (B.lead.mono_us - t_last) / 1000.0;
    R->f_planner_ms = B.etcd.planner_us / 1000.0;
    R->f_txn_ms = (double)B.txn_ms;
    R->f_members = B.etcd.nmembers;
    R->rec_bytes = B.etcd.bytes;
    snprintf(R->f_reason, sizeof(R->f_reason), "%s", B.etcd.reason);
    pthread_mutex_unlock(&B.lock);
    if (!wait_for(p_steady, NULL, WAIT_MS)) {
        snprintf(R->fail, sizeof(R->fail), "leader never said +wait: steady");
        goto out;
    }

    /* (2) steady state: keepalives only. */
    pause_ms(SETTLE_MS);
    met_t m0, m1, md;
    cpu_t c0, c1;
    metrics_read(etcd_port, &m0);
    cpu_read(etcd_pid, &c0);
    __atomic_store_n(&B.ka_max_late_ms, 0, __ATOMIC_RELAXED);
    pause_ms(steady_ms);
    cpu_read(etcd_pid, &c1);
    metrics_read(etcd_port, &m1);
    met_delta(&m0, &m1, &md);
    double win = (c1.at_us - c0.at_us) / 1e6;
    double mwin = md.at_us > 0 ? md.at_us / 1e6 : win; /* between the two scrapes */
    R->s_window_s = mwin;
    R->s_ka_late_ms = __atomic_load_n(&B.ka_max_late_ms, __ATOMIC_RELAXED);
    double req = 0;
    for (int i = 0; i < NMETH; i++)
        req += md.rx[i];
    R->s_req = req / mwin;
    R->s_ka = md.rx[M_KA] / mwin;
    R->s_rx_bytes = md.rx_bytes / mwin;
    R->s_tx_bytes = md.tx_bytes / mwin;
    R->s_writes = md.puts + md.dels + md.txns;
    R->s_proposals = md.proposals;
    R->s_etcd_cpu = etcd_pid > 0 ? (c1.etcd_ns - c0.etcd_ns) / 1e9 / win : -1;
    R->s_leader_cpu = (c1.leader_ns - c0.leader_ns) / 1e9 / win;
    R->s_bench_cpu = (c1.bench_ns - c0.bench_ns) / 1e9 / win;
    meth_list(md.rx, R->s_req_list, sizeof(R->s_req_list));
    if (!md.ok)
        snprintf(R->s_req_list, sizeof(R->s_req_list), "(etcd metrics unreadable)");

    /* (3) losses, keepalive sending paused around each. */
    ka_quiesce();
    cpu_t q0, q1;
    cpu_read(etcd_pid, &q0);
    pause_ms(1000);
    cpu_read(etcd_pid, &q1);
    ka_resume();
    /* etcd's own background (raft ticks every 50 ms, lease expiry checks),
     * subtracted from each change's etcd CPU. */
    double idle_ns_per_us = (double)(q1.etcd_ns - q0.etcd_ns) / (double)(q1.at_us - q0.at_us);
    R->etcd_idle_cpu = etcd_pid > 0 ? idle_ns_per_us / 1000.0 : -1;
    uint64_t epoch_no = 1;
    for (int k = 0; k < nlosses && k < MAX_LOSSES; k++) {
        loss_t *L = &R->loss[k];
        int victim = (B.nsims / 2 + k) % B.nsims;
        int64_t vlease = B.sims[victim].lease;
        __atomic_store_n(&B.sims[victim].alive, 0, __ATOMIC_RELAXED);
        ka_quiesce();
        pause_ms(50);
        metrics_read(etcd_port, &m0);
        cpu_read(etcd_pid, &c0);
        pthread_mutex_lock(&B.lock);
        B.fan_want = epoch_no + 1;
        B.fan_have = 0;
        pthread_mutex_unlock(&B.lock);
        int64_t t0 = mono_us(), t0w = wall_us();
        if (ec_etcd_lease_revoke(B.ctl, vlease, &err) < 0) {
            snprintf(R->fail, sizeof(R->fail), "revoke: %s", err.msg);
            goto out;
        }
        L->revoke = (mono_us() - t0) / 1000.0;
        want = ++epoch_no;
        if (!wait_for(p_epoch, &want, WAIT_MS)) {
            snprintf(R->fail, sizeof(R->fail), "no epoch within %d ms of loss %d", WAIT_MS, k + 1);
            goto out;
        }
        L->all_ms = -1;
        if (R->fs_w) {
            /* The change is over when every follower has it, and the next
             * one must not start while etcd still fans this one out. */
            if (!wait_for(p_fan, &F, WAIT_MS)) {
                snprintf(R->fail, sizeof(R->fail), "not every watch had epoch %" PRIu64
                         " within %d ms", epoch_no, WAIT_MS);
                goto out;
            }
            pthread_mutex_lock(&B.lock);
            L->all_ms = (B.fan_done_us - t0) / 1000.0;
            pthread_mutex_unlock(&B.lock);
        }
        pause_ms(SETTLE_MS);
        cpu_read(etcd_pid, &c1);
        metrics_read(etcd_port, &m1);
        met_delta(&m0, &m1, &L->met);
        pthread_mutex_lock(&B.lock);
        L->obs = rel_ms(B.etcd.observed_ms, t0w);
        L->dec = rel_ms(B.etcd.decided_ms, t0w);
        L->built = rel_ms(B.etcd.published_ms, t0w);
        L->etcd = (B.etcd.mono_us - t0) / 1000.0;
        L->lead = (B.lead.mono_us - t0) / 1000.0;
        L->planner_ms = B.etcd.planner_us / 1000.0;
        L->txn_ms = (double)B.txn_ms;
        L->members = B.etcd.nmembers;
        L->rec = B.etcd.bytes;
        L->decode_ms = B.etcd.decode_us / 1000.0;
        L->encode_ms = B.etcd.encode_us / 1000.0;
        snprintf(L->reason, sizeof(L->reason), "%s", B.etcd.reason);
        pthread_mutex_unlock(&B.lock);
        L->lead_cpu = (c1.leader_ns - c0.leader_ns) / 1e6;
        L->coord_cpu = (c1.coord_ns - c0.coord_ns) / 1e6;
        L->etcd_cpu = etcd_pid > 0 ? (c1.etcd_ns - c0.etcd_ns -
                                      idle_ns_per_us * (double)(c1.at_us - c0.at_us)) / 1e6
                                   : -1;
        L->ru = (c1.ru_us - c0.ru_us) / 1000.0;
        R->nloss = k + 1;
        ka_resume();
    }
    R->ok = true;

    /* (4) the READY wave a launcher causes after each epoch (with the watches
     * of --fanout-start open, it is measured in (5) instead; --no-ready-wave
     * skips it). */
    if (!R->fs_w && !B.no_ready_wave) {
        ka_quiesce();
        pause_ms(50);
        metrics_read(etcd_port, &m0);
        cpu_read(etcd_pid, &c0);
        pthread_mutex_lock(&B.lock);
        uint64_t ep0 = B.etcd.number;
        pthread_mutex_unlock(&B.lock);
        uint64_t plans0 = ec_node_plans(leader);
        B.wave_seq = 0;
        R->rw_s = ready_wave();
        pause_ms(SETTLE_MS);
        R->rw_plans = ec_node_plans(leader) - plans0;
        cpu_read(etcd_pid, &c1);
        metrics_read(etcd_port, &m1);
        met_delta(&m0, &m1, &md);
        pthread_mutex_lock(&B.lock);
        R->rw_epochs = B.etcd.number - ep0;
        pthread_mutex_unlock(&B.lock);
        R->rw_puts = (int)(md.rx[M_PUT] + 0.5);
        R->rw_requests = met_requests(&md);
        R->rw_proposals = md.proposals;
        R->rw_tx_bytes = md.tx_bytes;
        R->rw_lead_cpu_ms = (c1.leader_ns - c0.leader_ns) / 1e6;
        R->rw_coord_cpu_ms = (c1.coord_ns - c0.coord_ns) / 1e6;
        R->rw_etcd_cpu_ms = etcd_pid > 0 ? (c1.etcd_ns - c0.etcd_ns -
                                            idle_ns_per_us * (double)(c1.at_us - c0.at_us)) / 1e6
                                         : -1;
        R->rw_ok = B.reg_errors == 0;
        ka_resume();
    }
    if (!R->fs_w && !B.no_ready_wave && !B.no_hangs) {
        /* (4b) a progress wave: every member writes a new progress summary
         * (its record, under its lease), as each agent does on a change, at
         * most every 5 s: the planner reads none of it, the hang policy
         * all of it (done when every summary reached its on_progress). */
        pause_ms(SETTLE_MS);
        ka_quiesce();
        pause_ms(50);
        cpu_read(etcd_pid, &c0);
        pthread_mutex_lock(&B.lock);
        uint64_t ep0 = B.etcd.number;
        uint64_t seen0 = B.progress_seen;
        pthread_mutex_unlock(&B.lock);
        uint64_t plans0 = ec_node_plans(leader);
        B.wave_seq++;
        int64_t p0 = mono_us();
        R->pw_s = ready_wave();
        R->pw_puts = B.nsims - R->nloss;
        uint64_t want_seen = seen0 + (uint64_t)R->pw_puts;
        R->pw_ok = wait_for(p_progress, &want_seen, WAIT_MS) && B.reg_errors == 0;
        R->pw_seen_ms = (mono_us() - p0) / 1000.0;
        pause_ms(SETTLE_MS);
        cpu_read(etcd_pid, &c1);
        R->pw_plans = ec_node_plans(leader) - plans0;
        pthread_mutex_lock(&B.lock);
        R->pw_seen = B.progress_seen - seen0;
        R->pw_epochs = B.etcd.number - ep0;
        pthread_mutex_unlock(&B.lock);
        R->pw_lead_cpu_ms = (c1.leader_ns - c0.leader_ns) / 1e6;
        R->pw_coord_cpu_ms = (c1.coord_ns - c0.coord_ns) / 1e6;
        B.wave_seq = 0;
        ka_resume();
    }

    /* (5) fan-out: followers' root watches, then one more loss. */
    if (F > 0 && n >= 3) {
        int created = nfan ? F : fan_open(fan, &nfan, F);
        R->fan_w = F;
        if (created < F) {
            fprintf(stderr, "bench_scale: N=%d: only %d of %d fan-out watches created\n", n,
                    created, F);
        } else {
            int victim2 = (B.nsims / 2 + R->nloss) % B.nsims;
            int64_t l2 = B.sims[victim2].lease;
            __atomic_store_n(&B.sims[victim2].alive, 0, __ATOMIC_RELAXED);
            ka_quiesce();
            pause_ms(SETTLE_MS); /* the watches' "created" answers are all in */
            pthread_mutex_lock(&B.lock);
            B.fan_want = epoch_no + 1;
            B.fan_have = 0;
            B.fan_nt = 0;
            B.fan_events = B.fan_bytes = 0;
            pthread_mutex_unlock(&B.lock);
            metrics_read(etcd_port, &m0);
            cpu_read(etcd_pid, &c0);
            int64_t f0 = mono_us();
            ec_etcd_lease_revoke(B.ctl, l2, NULL);
            R->fan_ok = wait_for(p_fan, &F, WAIT_MS);
            pthread_mutex_lock(&B.lock);
            R->fan_ms = (B.fan_done_us - f0) / 1000.0;
            /* arrival times come in order per client stream, not overall */
            qsort(B.fan_t, (size_t)B.fan_nt, sizeof(int64_t), cmp_i64);
            R->fan_p50_ms = B.fan_nt ? (B.fan_t[B.fan_nt / 2] - f0) / 1000.0 : -1;
            R->fan_etcd_ms = B.etcd.number > epoch_no ? (B.etcd.mono_us - f0) / 1000.0 : -1;
            pthread_mutex_unlock(&B.lock);
            pause_ms(SETTLE_MS);
            cpu_read(etcd_pid, &c1);
            metrics_read(etcd_port, &m1);
            met_delta(&m0, &m1, &md);
            pthread_mutex_lock(&B.lock);
            R->fan_bytes = (double)B.fan_bytes;
            R->fan_events = (double)B.fan_events;
            pthread_mutex_unlock(&B.lock);
            R->fan_tx_bytes = md.tx_bytes;
            R->fan_etcd_cpu_ms = etcd_pid > 0 ? (c1.etcd_ns - c0.etcd_ns) / 1e6 : -1;
            R->fan_bench_cpu_ms = (c1.bench_ns - c0.bench_ns) / 1e6;

            /* The READY wave again, now that every write fans out to F
             * watches: done when every watch has every put. */
            if (R->fan_ok && fanout_wave && !B.no_ready_wave) {
                /* Keepalives run: this wave takes seconds, a pause would
                 * outlive the leases. */
                ka_resume();
                pause_ms(SETTLE_MS);
                pthread_mutex_lock(&B.lock);
                B.fan_events = B.fan_bytes = B.fan_node_puts = 0;
                uint64_t ep_before = B.etcd.number;
                pthread_mutex_unlock(&B.lock);
                metrics_read(etcd_port, &m0);
                cpu_read(etcd_pid, &c0);
                int64_t w0 = mono_us();
                ready_wave();
                R->fw_puts = (int)B.nsims - R->nloss - 1;
                uint64_t need = (uint64_t)F * (uint64_t)R->fw_puts;
                if (!B.fan_root) { /* each follower watches its own record only */
                    need = 0;
                    for (int i = 0; i < F; i++)
                        need += __atomic_load_n(&B.sims[i].alive, __ATOMIC_RELAXED) ? 1 : 0;
                }
                R->fw_ok = wait_for(p_fan_node_puts, &need, WAIT_MS) && B.reg_errors == 0;
                pthread_mutex_lock(&B.lock);
                R->fw_epochs = B.etcd.number - ep_before;
                R->fw_ms = (B.fan_last_us - w0) / 1000.0;
                R->fw_bytes = (double)B.fan_bytes;
                R->fw_events = (double)B.fan_events;
                pthread_mutex_unlock(&B.lock);
                cpu_read(etcd_pid, &c1);
                metrics_read(etcd_port, &m1);
                met_delta(&m0, &m1, &md);
                R->fw_tx_bytes = md.tx_bytes;
                R->fw_etcd_cpu_ms = etcd_pid > 0 ? (c1.etcd_ns - c0.etcd_ns) / 1e6 : -1;
                R->fw_bench_cpu_ms = (c1.bench_ns - c0.bench_ns) / 1e6;
                R->fw_lead_cpu_ms = (c1.leader_ns - c0.leader_ns) / 1e6;
            }
            ka_resume();
        }
    }

out:
    for (int i = 0; i < nfan; i++) {
        __atomic_store_n(&fan[i].stop, 1, __ATOMIC_RELAXED); /* polled every 20 ms */
        pthread_join(fan[i].th, NULL);
    }
    R->ka_lost = __atomic_load_n(&B.ka_lost, __ATOMIC_RELAXED);
    R->ka_reopened = __atomic_load_n(&B.ka_reopened, __ATOMIC_RELAXED);
    ec_watch_stop(ew);
    cleanup_size(&leader, reg, nreg);
    free(B.sims);
    B.sims = NULL;
    B.nsims = 0;
}

/* ---- reporting ------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median and max of the field at off over r's losses. */
static void loss_stat(const result_t *r, size_t off, double *p50, double *max)
{
    double v[MAX_LOSSES];
    for (int i = 0; i < r->nloss; i++)
        v[i] = *(const double *)((const char *)&r->loss[i] + off);
    qsort(v, (size_t)r->nloss, sizeof(double), cmp_double);
    *p50 = r->nloss ? v[(r->nloss - 1) / 2] : -1;
    *max = r->nloss ? v[r->nloss - 1] : -1;
}

static double loss_p50(const result_t *r, size_t off)
{
    double p50, max;
    loss_stat(r, off, &p50, &max);
    return p50;
}

static double loss_max(const result_t *r, size_t off)
{
    double p50, max;
    loss_stat(r, off, &p50, &max);
    return max;
}

#define LP50(r, f) loss_p50((r), offsetof(loss_t, f))
#define LMAX(r, f) loss_max((r), offsetof(loss_t, f))

static void print_size(const result_t *r)
{
    printf("\n== N=%d nodes (1 real leader + %d simulated), nproc=%d, world=%d ==\n", r->n,
           r->n - 1, B.nproc, r->n * B.nproc);
    if (r->reg_s > 0)
        printf("registration: %d nodes in %.2f s (%.0f/s; %d threads over %d clients), %d errors\n",
               r->n - 1, r->reg_s, (r->n - 1) / r->reg_s, REG_THREADS, NCLIENTS, r->reg_errors);
    if (!r->ok) {
        printf("NOT MEASURED: %s\n", r->fail);
        return;
    }
    if (r->fs_w)
        printf("with %d followers' watches open during registration: %s %.1f ms after the last "
               "registration; %.0f events, %.0f bytes to the watches; etcd used %.1f ms CPU from "
               "the first registration on\n", r->fs_w,
               r->fs_ok ? "every watch had the first epoch" : "NOT every watch had the first epoch",
               r->fs_ms, r->fs_events, r->fs_bytes, r->fs_etcd_cpu_ms);
    printf("first epoch (ms after the last registration was acknowledged):\n");
    printf("  leader observed %.1f | decided %.1f | built %.1f | in etcd %.1f | leader on_epoch "
           "%.1f   %s\n", r->f_obs, r->f_dec, r->f_built, r->f_etcd, r->f_lead,
           r->f_etcd <= 2000 ? "(target <= 2000: met)" : "(target <= 2000: MISSED)");
    printf("  planner %.2f ms, epoch txn %.0f ms, reason %s, %d members\n", r->f_planner_ms,
           r->f_txn_ms, r->f_reason, r->f_members);
    int copies = r->rec_bytes > 256 * 1024 ? 1 : 2;
    if (r->n > EC_EPOCH_CHUNK_DEFAULT)
        printf("epoch head: %zu bytes (a split epoch: its %d members are in %d chunks of %d and "
               "an index, written before it; one epoch holds up to %d nodes, EC_MEMBERS_MAX, each "
               "part under etcd's limit: test_records); one node record %zu bytes\n",
               r->rec_bytes, r->n, (r->n + EC_EPOCH_CHUNK_DEFAULT - 1) / EC_EPOCH_CHUNK_DEFAULT,
               EC_EPOCH_CHUNK_DEFAULT, EC_MEMBERS_MAX, r->node_rec_bytes);
    else
        printf("epoch record: %zu bytes = %.1f bytes/member (the epoch txn carries it %s: %.1f%% "
               "of etcd's 1.5 MiB request limit); one node record %zu bytes\n", r->rec_bytes,
               (double)r->rec_bytes / r->n, copies == 2 ? "twice" : "once",
               100.0 * copies * r->rec_bytes / (1.5 * 1024 * 1024), r->node_rec_bytes);
    printf("steady state over %.1f s: %.0f requests/s (%s), LeaseKeepAlive %.0f/s (N/period = "
           "%.0f/s)\n", r->s_window_s, r->s_req, r->s_req_list, r->s_ka,
           r->n / (PERIOD_MS / 1000.0));
    printf("  bytes/s into etcd %.0f, out of etcd %.0f; writes (put+delete+txn) %.0f, raft "
           "proposals %.0f %s\n", r->s_rx_bytes, r->s_tx_bytes, r->s_writes, r->s_proposals,
           r->s_writes == 0 && r->s_proposals == 0 ? "(nothing but keepalives: met)"
                                                  : "(NOT keepalive-only)");
    printf("  CPU (cores): etcd %.3f (%.3f of it idle background), leader %.4f, simulator %.3f; "
           "the simulator sent each refresh at most %" PRId64 " ms after it was due\n",
           r->s_etcd_cpu, r->etcd_idle_cpu, r->s_leader_cpu, r->s_bench_cpu, r->s_ka_late_ms);
    const loss_t *L = &r->loss[r->nloss - 1];
    printf("loss of one member, %d times (ms after LeaseRevoke was sent)      p50      max\n",
           r->nloss);
    static const struct {
        const char *name;
        size_t off;
    } rows[] = {
        {"revoke returned", offsetof(loss_t, revoke)},
        {"leader observed", offsetof(loss_t, obs)},
        {"leader decided", offsetof(loss_t, dec)},
        {"epoch built", offsetof(loss_t, built)},
        {"epoch in etcd (target <= 300)", offsetof(loss_t, etcd)},
        {"leader's on_epoch", offsetof(loss_t, lead)},
        {"every follower watch had it (--fanout-start)", offsetof(loss_t, all_ms)},
        {"planner (planner_us)", offsetof(loss_t, planner_ms)},
        {"leader's epoch txn", offsetof(loss_t, txn_ms)},
        {"CPU: leader (all its threads)", offsetof(loss_t, lead_cpu)},
        {"CPU: coordinator thread", offsetof(loss_t, coord_cpu)},
        {"CPU: etcd (net of idle)", offsetof(loss_t, etcd_cpu)},
        {"ec_epoch_encode of this epoch (measured apart)", offsetof(loss_t, encode_ms)},
        {"ec_epoch_decode of this epoch (measured apart)", offsetof(loss_t, decode_ms)},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (rows[i].off == offsetof(loss_t, all_ms) && !r->fs_w)
            continue;
        double p50, max;
        loss_stat(r, rows[i].off, &p50, &max);
        printf("  %-56s %8.2f %8.2f\n", rows[i].name, p50, max);
    }
    printf("  %s; reason %s, %d members after the last loss\n",
           LMAX(r, etcd) <= 300 ? "re-form target met" : "re-form target MISSED", L->reason,
           L->members);
    char in[256], out[256];
    meth_list(L->met.rx, in, sizeof(in));
    meth_list(L->met.tx, out, sizeof(out));
    printf("  etcd per change: requests in: %s; messages out: %s\n", in, out);
    printf("  bytes in %.0f, out %.0f (our own epoch watch, with prev_kv, got ~%zu = 2 x record; "
           "the leader ~%.0f); mvcc put %.0f delete %.0f txn %.0f; raft proposals %.0f\n",
           L->met.rx_bytes, L->met.tx_bytes, 2 * L->rec, L->met.tx_bytes - 2.0 * L->rec,
           L->met.puts, L->met.dels, L->met.txns, L->met.proposals);
    if (r->rw_puts > 0)
        printf("READY wave (every member rewrites its record, as coord/agent/launch.c does after each "
               "epoch): %d puts in %.2f s, %.0f requests, %.0f raft proposals, etcd sent %.0f bytes "
               "to the leader; leader CPU %.1f ms (coordinator thread %.1f ms) = %.3f ms per put; "
               "etcd CPU %.1f ms net; %" PRIu64 " epochs published%s\n",
               r->rw_puts, r->rw_s, r->rw_requests, r->rw_proposals, r->rw_tx_bytes,
               r->rw_lead_cpu_ms, r->rw_coord_cpu_ms, r->rw_lead_cpu_ms / r->rw_puts,
               r->rw_etcd_cpu_ms, r->rw_epochs, r->rw_ok ? "" : " (some puts FAILED)");
    if (r->rw_puts > 0)
        printf("  the leader planned %" PRIu64 " times for them\n", r->rw_plans);
    if (r->pw_puts > 0)
        printf("progress wave (every member writes a new progress summary): %d puts in %.2f s, "
               "%s%" PRIu64 " summaries reached the leader's hang policy after %.1f ms; leader CPU "
               "%.1f ms (coordinator thread %.1f ms) = %.3f ms per put; %" PRIu64 " plans, %" PRIu64
               " epochs published\n",
               r->pw_puts, r->pw_s, r->pw_ok ? "" : "NOT ALL: ", r->pw_seen, r->pw_seen_ms,
               r->pw_lead_cpu_ms, r->pw_coord_cpu_ms, r->pw_lead_cpu_ms / r->pw_puts, r->pw_plans,
               r->pw_epochs);
    if (r->fan_w > 0) {
        if (r->fan_ok)
            printf("fan-out: %d followers with %s, one more loss: epoch in etcd after "
                   "%.1f ms, in the median follower's watch after %.1f ms, in every one after %.1f "
                   "ms; %.0f events, %.0f bytes (%.0f per follower = %.2f x record); etcd sent %.0f "
                   "bytes using %.1f ms CPU; receiving them cost this process %.1f ms CPU\n",
                   r->fan_w,
                   !B.fan_root ? "the watches a follower opens (leader, epoch delta, status, own record)"
                   : B.fan_no_prev_kv ? "a root watch WITHOUT prev_kv (--fanout-no-prev-kv)"
                                      : "a root watch with prev_kv (--fanout-root)",
                   r->fan_etcd_ms, r->fan_p50_ms, r->fan_ms, r->fan_events, r->fan_bytes,
                   r->fan_bytes / r->fan_w, r->fan_bytes / r->fan_w / (double)L->rec,
                   r->fan_tx_bytes, r->fan_etcd_cpu_ms, r->fan_bench_cpu_ms);
        else
            printf("fan-out with %d watches: not every watch saw the epoch within %d ms\n",
                   r->fan_w, WAIT_MS);
        if (r->fw_puts > 0)
            printf("READY wave under fan-out: %d puts x %d watches: %s after %.1f ms; %.0f events, "
                   "%.0f bytes (%.0f per event); etcd sent %.0f bytes using %.1f ms CPU; the "
                   "leader used %.1f ms, receiving cost this process %.1f ms CPU; %" PRIu64
                   " epochs published meanwhile\n",
                   r->fw_puts, r->fan_w,
                   r->fw_ok ? "every watch had every put" : "NOT every watch had every put",
                   r->fw_ms, r->fw_events, r->fw_bytes,
                   r->fw_events > 0 ? r->fw_bytes / r->fw_events : 0, r->fw_tx_bytes,
                   r->fw_etcd_cpu_ms, r->fw_lead_cpu_ms, r->fw_bench_cpu_ms, r->fw_epochs);
    }
    if (r->ka_lost || r->ka_reopened)
        printf("  WARNING: %" PRIu64 " keepalives answered TTL=0, %" PRIu64 " stream reopens\n",
               r->ka_lost, r->ka_reopened);
}

static void print_summary(const result_t *r, int nr)
{
    printf("\nsummary: first = ms from the last registration to the first epoch in etcd; re-form "
           "= ms from LeaseRevoke to the new epoch in etcd (p50/max); per change: requests into "
           "etcd, bytes etcd sent the leader, CPU ms (p50) of the leader and of etcd net of idle; "
           "fan-out = ms until all F followers had the epoch\n");
    printf("  %6s %7s %13s %8s %8s %8s %6s %9s %8s %8s %8s %6s %9s\n", "N", "first", "re-form",
           "planner", "record", "B/memb", "req", "B out", "lead CPU", "etcd CPU", "KA/s", "F",
           "fan-out");
    for (int i = 0; i < nr; i++) {
        const result_t *x = &r[i];
        if (!x->ok) {
            printf("  %6d not measured: %s\n", x->n, x->fail);
            continue;
        }
        const loss_t *L = &x->loss[x->nloss - 1];
        char fan[32] = "-";
        if (x->fan_w > 0 && x->fan_ok)
            snprintf(fan, sizeof(fan), "%.1f", x->fan_ms);
        printf("  %6d %7.1f %6.1f/%-6.1f %8.2f %8zu %6.1f %6.0f %9.0f %8.2f %8.2f %8.0f %6d %9s\n",
               x->n, x->f_etcd, LP50(x, etcd), LMAX(x, etcd), LP50(x, planner_ms), x->rec_bytes,
               (double)x->rec_bytes / x->n, met_requests(&L->met), L->met.tx_bytes - 2.0 * L->rec,
               LP50(x, lead_cpu), LP50(x, etcd_cpu), x->s_ka, x->fan_w, fan);
    }
}

static void write_json(const char *path, const result_t *r, int nr)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_scale: cannot write %s: %s\n", path, strerror(errno));
        return;
    }
    fprintf(f, "{\"nproc\": %d, \"ttl_s\": %d, \"sizes\": [\n", B.nproc, TTL_S);
    for (int i = 0; i < nr; i++) {
        const result_t *x = &r[i];
        fprintf(f, "  {\"n\": %d, \"ok\": %s", x->n, x->ok ? "true" : "false");
        if (x->ok) {
            const loss_t *L = &x->loss[x->nloss - 1];
            fprintf(f, ", \"registration_s\": %.3f, \"node_record_bytes\": %zu", x->reg_s,
                    x->node_rec_bytes);
            fprintf(f, ", \"first_epoch_ms\": {\"observed\": %.1f, \"decided\": %.1f, \"built\": "
                       "%.1f, \"in_etcd\": %.1f, \"leader_on_epoch\": %.1f, \"planner\": %.3f, "
                       "\"txn\": %.0f}",
                    x->f_obs, x->f_dec, x->f_built, x->f_etcd, x->f_lead, x->f_planner_ms,
                    x->f_txn_ms);
            fprintf(f, ", \"epoch_record_bytes\": %zu", x->rec_bytes);
            fprintf(f, ", \"steady\": {\"window_s\": %.2f, \"requests_per_s\": %.1f, "
                       "\"keepalives_per_s\": %.1f, \"rx_bytes_per_s\": %.0f, \"tx_bytes_per_s\": "
                       "%.0f, \"writes\": %.0f, \"proposals\": %.0f, \"etcd_cpu\": %.4f, "
                       "\"etcd_idle_cpu\": %.4f, \"leader_cpu\": %.4f, \"simulator_cpu\": %.4f, "
                       "\"keepalive_max_late_ms\": %" PRId64 "}",
                    x->s_window_s, x->s_req, x->s_ka, x->s_rx_bytes, x->s_tx_bytes, x->s_writes,
                    x->s_proposals, x->s_etcd_cpu, x->etcd_idle_cpu, x->s_leader_cpu,
                    x->s_bench_cpu, x->s_ka_late_ms);
            fprintf(f, ", \"loss_ms_p50\": {\"losses\": %d, \"revoke\": %.1f, \"observed\": %.1f, "
                       "\"decided\": %.1f, \"built\": %.1f, \"in_etcd\": %.1f, \"in_etcd_max\": "
                       "%.1f, \"leader_on_epoch\": %.1f, \"planner\": %.3f, \"txn\": %.0f}",
                    x->nloss, LP50(x, revoke), LP50(x, obs), LP50(x, dec), LP50(x, built),
                    LP50(x, etcd), LMAX(x, etcd), LP50(x, lead), LP50(x, planner_ms),
                    LP50(x, txn_ms));
            fprintf(f, ", \"per_change\": {\"requests\": %.0f, \"rx_bytes\": %.0f, \"tx_bytes\": "
                       "%.0f, \"tx_bytes_to_leader\": %.0f, \"puts\": %.0f, \"deletes\": %.0f, "
                       "\"proposals\": %.0f, \"leader_cpu_ms\": %.3f, "
                       "\"coordinator_thread_cpu_ms\": %.3f, \"etcd_cpu_ms\": %.3f}",
                    met_requests(&L->met), L->met.rx_bytes, L->met.tx_bytes,
                    L->met.tx_bytes - 2.0 * L->rec, L->met.puts, L->met.dels, L->met.proposals,
                    LP50(x, lead_cpu), LP50(x, coord_cpu), LP50(x, etcd_cpu));
            fprintf(f, ", \"ready_wave\": {\"puts\": %d, \"s\": %.3f, \"proposals\": %.0f, "
                       "\"tx_bytes\": %.0f, \"leader_cpu_ms\": %.2f, \"coordinator_thread_cpu_ms\": "
                       "%.2f, \"etcd_cpu_ms\": %.2f, \"epochs\": %" PRIu64 "}",
                    x->rw_puts, x->rw_s, x->rw_proposals, x->rw_tx_bytes, x->rw_lead_cpu_ms,
                    x->rw_coord_cpu_ms, x->rw_etcd_cpu_ms, x->rw_epochs);
            fprintf(f, ", \"ready_wave_plans\": %" PRIu64, x->rw_plans);
            if (x->pw_puts > 0)
                fprintf(f, ", \"progress_wave\": {\"puts\": %d, \"s\": %.3f, \"all_seen\": %s, "
                           "\"seen_ms\": %.1f, \"leader_cpu_ms\": %.2f, "
                           "\"coordinator_thread_cpu_ms\": %.2f, \"plans\": %" PRIu64
                           ", \"epochs\": %" PRIu64 "}",
                        x->pw_puts, x->pw_s, x->pw_ok ? "true" : "false", x->pw_seen_ms,
                        x->pw_lead_cpu_ms, x->pw_coord_cpu_ms, x->pw_plans, x->pw_epochs);
            if (x->fan_w > 0 && x->fan_ok)
                fprintf(f, ", \"fanout\": {\"watches\": %d, \"in_etcd_ms\": %.1f, "
                           "\"all_seen_ms\": %.1f, \"bytes\": %.0f, \"etcd_tx_bytes\": %.0f, "
                           "\"etcd_cpu_ms\": %.1f, \"receiver_cpu_ms\": %.1f}",
                        x->fan_w, x->fan_etcd_ms, x->fan_ms, x->fan_bytes, x->fan_tx_bytes,
                        x->fan_etcd_cpu_ms, x->fan_bench_cpu_ms);
            if (x->fw_puts > 0 && x->fw_ok)
                fprintf(f, ", \"ready_wave_fanout\": {\"puts\": %d, \"watches\": %d, "
                           "\"all_seen_ms\": %.1f, \"events\": %.0f, \"bytes\": %.0f, "
                           "\"etcd_tx_bytes\": %.0f, \"etcd_cpu_ms\": %.1f}",
                        x->fw_puts, x->fan_w, x->fw_ms, x->fw_events, x->fw_bytes, x->fw_tx_bytes,
                        x->fw_etcd_cpu_ms);
        } else {
            fprintf(f, ", \"why\": \"%s\"", x->fail);
        }
        fprintf(f, "}%s\n", i + 1 < nr ? "," : "");
    }
    fprintf(f, "]}\n");
    fclose(f);
}

/* ---- main ------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: bench_scale [--sizes 64,256,1024,4096] [--nproc 1..64] "
                    "[--steady-ms >=1000] [--losses 1..%d] [--fanout-max >=0] "
                    "[--fanout-wave-max N*F] [--fanout-start] [--fanout-root] [--fanout-no-prev-kv] [--no-ready-wave] [--no-hangs] "
                    "[--json FILE]\n",
            MAX_LOSSES);
}

int main(int argc, char **argv)
{
    int sizes[MAX_SIZES] = {64, 256, 1024, 4096}, nsizes = 4;
    int steady_ms = 2 * PERIOD_MS + 1, fanout_max = 1024, nlosses = 5;
    int64_t fanout_wave_max = 1100000; /* N x F above which the wave is not fanned out */
    bool fanout_start = false;
    const char *json = NULL;
    B.nproc = 8;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--sizes") && v) {
            nsizes = 0;
            char *dup = strdup(v);
            for (char *s = NULL, *t = strtok_r(dup, ",", &s); t && nsizes < MAX_SIZES;
                 t = strtok_r(NULL, ",", &s))
                sizes[nsizes++] = atoi(t);
            free(dup);
        } else if (!strcmp(argv[i], "--nproc") && v) {
            B.nproc = atoi(v);
        } else if (!strcmp(argv[i], "--steady-ms") && v) {
            steady_ms = atoi(v);
        } else if (!strcmp(argv[i], "--no-ready-wave")) {
            B.no_ready_wave = true;
            continue;
        } else if (!strcmp(argv[i], "--no-hangs")) {
            B.no_hangs = true;
            continue;
        } else if (!strcmp(argv[i], "--fanout-root")) {
            B.fan_root = true;
            continue;
        } else if (!strcmp(argv[i], "--fanout-no-prev-kv")) {
            B.fan_no_prev_kv = true;
            continue;
        } else if (!strcmp(argv[i], "--fanout-start")) {
            fanout_start = true;
            continue;
        } else if (!strcmp(argv[i], "--fanout-wave-max") && v) {
            fanout_wave_max = atoll(v);
        } else if (!strcmp(argv[i], "--losses") && v) {
            nlosses = atoi(v);
        } else if (!strcmp(argv[i], "--fanout-max") && v) {
            fanout_max = atoi(v);
        } else if (!strcmp(argv[i], "--json") && v) {
            json = v;
        } else {
            usage();
            return 2;
        }
        i++;
    }
    bool bad = B.nproc < 1 || B.nproc > 64 || steady_ms < 1000 || fanout_max < 0 || !nsizes ||
               nlosses < 1 || nlosses > MAX_LOSSES;
    for (int i = 0; i < nsizes; i++)
        bad |= sizes[i] < 2 || sizes[i] > 60000;
    if (bad) {
        usage();
        return 2;
    }

    B.fan_per = B.fan_root ? 1 : 4;
    B.fan_tcap = 60000;
    B.fan_t = calloc((size_t)B.fan_tcap, sizeof(int64_t));
    pthread_mutex_init(&B.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&B.cond, &ca);
    pthread_condattr_destroy(&ca);
    ec_log_set_sink(on_log, NULL, EC_LOG_WARN);
    tid_register();

    int status = 1;
    ec_error_t err = {0};
    ec_embed_t *e = NULL;
    pid_t etcd_pid = 0;
    int etcd_port = 0;
    const char *ep = getenv("ECOORD_BENCH_ETCD");
    if (!ep) {
        ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
        if (!(e = ec_embed_start(&eo, &err))) {
            fprintf(stderr, "bench_scale: %s\n", err.msg);
            return 1;
        }
        ep = ec_embed_endpoint(e);
        etcd_pid = ec_embed_pid(e);
        etcd_port = ec_embed_port(e);
    } else {
        const char *colon = strrchr(ep, ':');
        etcd_port = colon ? atoi(colon + 1) : 2379;
    }
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ep;
    o.call_timeout_ms = 10000;
    if (!(B.ctl = ec_etcd_create(&o, &err)))
        goto error;
    for (int i = 0; i < NCLIENTS; i++)
        if (!(B.cl[i] = ec_etcd_create(&o, &err)))
            goto error;
    met_t probe;
    metrics_read(etcd_port, &probe);

    double load[3] = {0};
    getloadavg(load, 3);
    printf("scale benchmark: 1 real leader (ec_node) + simulated nodes (lease + node record + "
           "keepalive, no coordinator), etcd %s at %s%s\n", e ? "embedded" : "external", ep,
           probe.ok ? "" : " (its /metrics is unreadable: request counts will be 0)");
    printf("nproc=%d, lease TTL %d s (keepalive every %d ms), np=1:N, elastic_timeout 1 h, "
           "replace_wait 0; %d registration threads and %d keepalive streams over %d clients; "
           "%ld CPUs, load average %.2f %.2f %.2f at start\n", B.nproc, TTL_S, PERIOD_MS,
           REG_THREADS, NCLIENTS, NCLIENTS, sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1],
           load[2]);

    result_t res[MAX_SIZES];
    int64_t t_all = mono_us();
    for (int i = 0; i < nsizes; i++) {
        int64_t t_sz = mono_us();
        run_size(sizes[i], etcd_pid, etcd_port, steady_ms, nlosses, fanout_max,
                 !B.fan_root || (int64_t)sizes[i] * fanout_max <= fanout_wave_max, fanout_start,
                 &res[i]);
        print_size(&res[i]);
        printf("  (size took %.1f s)\n", (mono_us() - t_sz) / 1e6);
        fflush(stdout);
    }
    print_summary(res, nsizes);
    getloadavg(load, 3);
    printf("\ntotal %.1f s; load average %.2f %.2f %.2f at end\n", (mono_us() - t_all) / 1e6,
           load[0], load[1], load[2]);
    pthread_mutex_lock(&B.lock);
    if (B.warnings)
        printf("%d coordinator warnings/errors were logged (first 20 on stderr)\n", B.warnings);
    pthread_mutex_unlock(&B.lock);
    if (json)
        write_json(json, res, nsizes);
    status = 0;
    goto done;
error:
    fprintf(stderr, "bench_scale: %s\n", err.msg);
done:
    for (int i = 0; i < NCLIENTS; i++)
        ec_etcd_destroy(B.cl[i]);
    ec_etcd_destroy(B.ctl);
    ec_embed_stop(e);
    return status;
}
