/* Lifecycle soak: real `ecoord launch` agents and a real etcd under seeded
 * random events, and at the end nothing is left behind.  The rules checked:
 *
 *  - under joins, graceful leaves (SIGTERM), kill -9 of an agent, same-id
 *    restarts (kill -9, then at once a new agent with the same --node_id and
 *    a shorter --lease_ttl than the old lease's remainder), etcd restarts on
 *    the same data dir shorter than the TTL, and SIGSTOP/SIGCONT of an agent:
 *    every agent started registers (its node key written) within a deadline,
 *    no agent exits unless we told it to, every SIGTERMed one exits;
 *  - then, every churner gone, the job settles on the two long-lived agents
 *    and completes (both exit 0);
 *  - the epoch history passes the checker (tests/lib/harness.h), and no
 *    rank is held by live training processes of two epochs at once
 *    (tests/lib/rank_track.h);
 *  - no process is left: every process that ever carried the soak's tag in
 *    its environment (agents: EC_SOAK_TAG; their training processes and
 *    those processes' children: ECOORD_JOB_ID, set by the agent) is gone.
 *    Each training program leaves a child of its own (a `sleep`) to exercise
 *    that;
 *  - no key is left under the job but the durable ones (status, epoch,
 *    epochd, epochs/, failures/, holders/);
 *  - the long-lived agents' fd count and RSS stay within a generous bound of
 *    their values at the start.
 *
 * A failure message names the event kind whose rule broke.  Knobs:
 * SOAK_SECONDS (default 30: the event phase; the whole test takes about
 * twice that), SOAK_SEED (default: the time), SOAK_PERIOD_MS (mean gap
 * between events, default 1200), SOAK_EVENTS (kinds to run, comma-separated,
 * default all: join,leave,kill9,restart_same_id,etcd_restart,sigstop) and
 * SOAK_GRANDCHILD=0 (no child of the training program) narrow a failure
 * down; CI runs those six kinds.  Two more kinds are opt-in (name them in
 * SOAK_EVENTS): with either, the agents reach etcd through the fault proxy
 * (tests/lib/etcd_proxy.h), and proxy_pause silences etcd for every agent
 * for 0.3-1.5 s, proxy_drop makes the next request of any agent an
 * ambiguous commit (applied on etcd, an error to the agent).  Long runs:
 * tests/bench/soak.sh. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ec_select.h"
#include "etcd_proxy.h"
#include "harness.h"
#include "rank_track.h"
#include "records.h"

#define MAX_AGENTS 512
#define MAX_ALIVE 7   /* the job takes 1..8 nodes: never more agents than that */
#define CORE_TTL 4

typedef enum {
    EV_JOIN, EV_LEAVE, EV_KILL9, EV_RESTART, EV_ETCD, EV_STOP,
    EV_PXPAUSE, EV_PXDROP, /* opt-in: agents reach etcd through tests/lib/etcd_proxy.h */
    EV_N
} ev_t;
#define EV_CLASSIC EV_PXPAUSE /* the kinds run by default */
static const char *const ev_name[EV_N] = {"join", "leave", "kill9", "restart_same_id",
                                          "etcd_restart", "sigstop", "proxy_pause", "proxy_drop"};
static int ev_done[EV_N], ev_failed[EV_N]; /* per kind: events done, events that broke a rule */
/* Every event done, so a rule broken twice by one event counts it once. */
#define MAX_EVENTS 4096
static ev_t inst_kind[MAX_EVENTS];
static bool inst_broken[MAX_EVENTS];
static int ninst;
static const char *const completion = "completion";

typedef struct {
    pid_t pid;
    char id[32], log[320];
    int ttl;
    int born;             /* the event that started it (a join or a same-id restart) */
    int end_inst;         /* the event that signalled it to end, or -1 */
    int stop_inst;        /* its last SIGSTOP event, or -1 */
    bool core;
    int64_t start_rev;    /* etcd revision before it started */
    int64_t started_ms;
    bool registered;
    int ended_by;         /* kind of that event, or -1; EV_N: the job completed */
    int64_t signaled_ms;
    bool gone;
    bool stopped, was_stopped;
    int64_t cont_at;
    int64_t stop_ms;      /* its last SIGSTOP */
} agent_t;

static ec_embed_t *etcd;
static ec_etcd_t *c;
static ec_test_obs_t *obs;
static ec_rank_track_t *ranks;
static ec_proxy_t *px; /* between the agents and etcd, with proxy_* events only */
static char agent_endpoint[64];
static int last_px = -1;      /* the last proxy event (an instance), for messages */
static int64_t last_px_ms;
static char tmp[256], job[64], root[80], dump[320];
static agent_t *ag;
static int nag;
static char failures[8192];
static size_t failures_len;
static int nfailures;
static bool grandchild = true; /* the training program leaves a child of its own */

static int new_inst(ev_t kind)
{
    ck_assert_int_lt(ninst, MAX_EVENTS);
    inst_kind[ninst] = kind;
    ev_done[kind]++;
    return ninst++;
}

/* Record a broken rule under the event that broke it (inst), or -1 for the
 * end checks (named in the message). */
static void broke(int inst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void broke(int inst, const char *fmt, ...)
{
    int ev = inst >= 0 ? (int)inst_kind[inst] : -1;
    if (inst >= 0 && !inst_broken[inst]) {
        inst_broken[inst] = true;
        ev_failed[ev]++;
    }
    nfailures++;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    printf("# FAIL [%s] %s\n", ev >= 0 ? ev_name[ev] : "end", line);
    fflush(stdout);
    if (failures_len + strlen(line) + 24 < sizeof(failures))
        failures_len += (size_t)snprintf(failures + failures_len, sizeof(failures) - failures_len,
                                         "[%s] %s; ", ev >= 0 ? ev_name[ev] : "end", line);
}

static int64_t store_rev(void)
{
    int64_t rev = 0;
    if (ec_etcd_status(c, &rev, NULL, 0, NULL) < 0)
        return -1;
    return rev;
}

/* ---- processes ------------------------------------------------------------ */

/* Whether /proc/<pid> is a live (not zombie) process carrying the soak's
 * tag; node (may be NULL) gets its ECOORD_NODE_ID, comm its name. */
static bool tagged(pid_t pid, char *node, size_t nlen, char *comm, size_t clen)
{
    char path[64], buf[32768];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[512] = "";
    bool ok = fgets(line, sizeof(line), f) != NULL;
    fclose(f);
    char *rp = strrchr(line, ')');
    if (!ok || !rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X')
        return false;
    if (comm) {
        char *lp = strchr(line, '(');
        snprintf(comm, clen, "%.*s", lp ? (int)(rp - lp - 1) : 0, lp ? lp + 1 : "");
    }
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    char tag1[128], tag2[128];
    snprintf(tag1, sizeof(tag1), "EC_SOAK_TAG=%s", job);
    snprintf(tag2, sizeof(tag2), "ECOORD_JOB_ID=%s", job);
    bool hit = false;
    if (node && nlen)
        node[0] = '\0';
    for (char *e = buf; e < buf + n; e += strlen(e) + 1) {
        if (!strcmp(e, tag1) || !strcmp(e, tag2))
            hit = true;
        if (node && !strncmp(e, "ECOORD_NODE_ID=", 15))
            snprintf(node, nlen, "%s", e + 15);
    }
    return hit;
}

/* The live processes carrying the tag, at most max; returns how many. */
static int scan_tagged(pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(de->d_name);
        if (pid != getpid() && tagged(pid, NULL, 0, NULL, 0))
            out[n++] = pid;
    }
    closedir(d);
    return n;
}

static bool none_tagged(void *arg)
{
    (void)arg;
    pid_t p[4];
    return scan_tagged(p, 4) == 0;
}

/* Kill every tagged process (ours: started by the soak's agents). */
static void kill_tagged(void)
{
    pid_t p[256];
    int n = scan_tagged(p, 256);
    for (int i = 0; i < n; i++) {
        kill(p[i], SIGCONT);
        kill(p[i], SIGKILL);
    }
}

static long fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    long n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long kib = -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6))
            kib = atol(line + 6);
    fclose(f);
    return kib;
}

/* ---- agents ---------------------------------------------------------------- */

static agent_t *start_agent(const char *id, int ttl, int born, bool core)
{
    ck_assert_int_lt(nag, MAX_AGENTS);
    agent_t *a = &ag[nag];
    memset(a, 0, sizeof(*a));
    snprintf(a->id, sizeof(a->id), "%s", id);
    snprintf(a->log, sizeof(a->log), "%s/%s-g%d.console", tmp, id, nag);
    a->ttl = ttl;
    a->born = born;
    a->core = core;
    a->ended_by = a->end_inst = a->stop_inst = -1;
    a->start_rev = store_rev();
    a->started_ms = ec_test_now_ms();
    /* The training program leaves a child of its own: a grandchild of the
     * agent, which must not outlive the job either. */
    char cmd[3072];
    snprintf(cmd, sizeof(cmd),
             "EC_SOAK_TAG=%s exec %s launch --elastic_server=%s --job_id=%s --np=1:8 "
             "--nproc_per_node=1 --node_id=%s --log_dir=%s/%s-g%d --grace_period=2 "
             "--lease_ttl=%d --elastic_timeout=0.5 -- /bin/sh -c "
             "'%s exec \"$0\" \"$@\"' %s %s 0",
             job, ec_test_bin("ECOORD", "./ecoord"), agent_endpoint, job, id, tmp, id, nag,
             ttl, grandchild ? "sleep 3600 </dev/null >/dev/null 2>&1 &" : "",
             ec_test_bin("EC_TEST_PROG", "tests/ec-test-prog"), dump);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    a->pid = ec_test_spawn(argv, a->log);
    ck_assert_int_gt(a->pid, 0);
    nag++;
    return a;
}

static bool alive(const agent_t *a)
{
    return !a->gone && a->ended_by < 0;
}

static int count_alive(void)
{
    int n = 0;
    for (int i = 0; i < nag; i++)
        n += alive(&ag[i]);
    return n;
}

/* A random live agent: churners only unless cores is set; registered and
 * running only when settled is set.  NULL if none. */
static agent_t *pick(bool cores, bool settled)
{
    int cand[MAX_AGENTS], n = 0;
    for (int i = 0; i < nag; i++) {
        agent_t *a = &ag[i];
        if (!alive(a) || (a->core && !cores) || (settled && (!a->registered || a->stopped)))
            continue;
        cand[n++] = i;
    }
    return n ? &ag[cand[rand() % n]] : NULL;
}

/* A SIGSTOPped agent cannot fence, but its janitor (not frozen with it)
 * kills its ranks before etcd can expire its lease (coord/agent/janitor.h,
 * the watchdog), and no other node starts a rank it held before then (the
 * stop barrier, coord/core/stop_barrier.h): no overlap is excused. */

/* Whether the agent's node key was written since it started. */
static bool node_written(agent_t *a)
{
    char key[256];
    snprintf(key, sizeof(key), "%snodes/%s", root, a->id);
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0 || !found)
        return false;
    bool ok = kv.mod_revision > a->start_rev; /* start_rev -1: etcd was down, any write counts */
    ec_kv_free(&kv);
    return ok;
}

/* Between events: reap, wake stopped agents, check registrations and
 * leaves against their deadlines. */
static void service(void)
{
    int64_t now = ec_test_now_ms();
    for (int i = 0; i < nag; i++) {
        agent_t *a = &ag[i];
        if (a->gone)
            continue;
        int st = ec_test_reap(a->pid, 0);
        if (st >= 0) {
            a->gone = true;
            if (a->ended_by < 0) {
                char px_note[96] = "";
                if (last_px >= 0)
                    snprintf(px_note, sizeof(px_note), "; the last proxy event, %s, was %lld ms before",
                             ev_name[inst_kind[last_px]], (long long)(now - last_px_ms));
                broke(a->was_stopped ? a->stop_inst : a->born,
                      "agent %s (started by %s%s) exited by itself with status %d (log %s%s)", a->id,
                      ev_name[inst_kind[a->born]], a->was_stopped ? ", later SIGSTOPped" : "", st,
                      a->log, px_note);
            }
            continue;
        }
        if (a->stopped && now >= a->cont_at) {
            kill(a->pid, SIGCONT);
            a->stopped = false;
        }
        if (a->ended_by == EV_LEAVE && now - a->signaled_ms > ec_test_ms(20000)) {
            broke(a->end_inst, "agent %s did not exit within 20 s of SIGTERM (log %s)", a->id, a->log);
            kill(a->pid, SIGKILL);
            a->ended_by = EV_KILL9;
        }
        if (!a->registered && a->ended_by < 0 && !a->stopped) {
            if (node_written(a)) {
                a->registered = true;
            } else if (now - a->started_ms > ec_test_ms(20000)) {
                broke(a->born, "agent %s (started by %s) never registered in 20 s (log %s)",
                      a->id, ev_name[inst_kind[a->born]], a->log);
                a->registered = true; /* reported once */
            }
        }
    }
}

/* ---- the end ---------------------------------------------------------------- */

/* Every churner has exited (serviced meanwhile: reaped, checked against
 * its deadlines). */
static bool churners_gone(void *arg)
{
    (void)arg;
    service();
    for (int i = 0; i < nag; i++)
        if (!ag[i].gone && !ag[i].core)
            return false;
    return true;
}

typedef struct {
    const char *const *ids;
    int n;
} exactly_t;

static bool epoch_exactly(void *arg)
{
    exactly_t *x = arg;
    ec_epoch_t *ep = ec_test_epoch(c, root);
    bool ok = ep && ep->nmembers == x->n;
    for (int i = 0; ok && i < x->n; i++)
        ok = ec_epoch_find_member(ep, x->ids[i]) >= 0;
    ec_epoch_free(ep);
    return ok;
}

/* Only these nodes have a record under nodes/: every other agent left or
 * its lease expired. */
static bool only_registered(void *arg)
{
    exactly_t *x = arg;
    return ec_test_only_registered(c, root, x->ids, x->n);
}

static pid_t prog_pid(const char *node, unsigned long long epoch);

typedef struct {
    exactly_t *x;
    uint64_t epoch; /* out */
} settled_t;

/* The newest epoch has exactly x's nodes and each one's process of it runs. */
static bool settled(void *arg)
{
    settled_t *st = arg;
    if (!epoch_exactly(st->x))
        return false;
    ec_epoch_t *ep = ec_test_epoch(c, root);
    bool ok = ep != NULL;
    for (int i = 0; ok && i < st->x->n; i++) {
        pid_t pp = prog_pid(st->x->ids[i], ep->number);
        ok = pp > 0 && kill(pp, 0) == 0;
    }
    if (ok)
        st->epoch = ep->number;
    ec_epoch_free(ep);
    return ok;
}

static pid_t prog_pid(const char *node, unsigned long long epoch)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/env.%s.0.%llu", dump, node, epoch);
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    int pid = -1;
    if (fscanf(f, "PID=%d", &pid) != 1)
        pid = -1;
    fclose(f);
    return (pid_t)pid;
}

static bool durable(const char *rest)
{
    return !strcmp(rest, "status") || !strcmp(rest, "epoch") || !strcmp(rest, "epochd") ||
           !strncmp(rest, "epochs/", 7) ||
           !strncmp(rest, "failures/", 9) || !strncmp(rest, "holders/", 8) ||
           !strcmp(rest, "zz-test-sentinel");
}

typedef struct {
    char first[512];
    int n;
} leftover_t;

static bool only_durable(void *arg)
{
    leftover_t *l = arg;
    ec_kv_list_t kl;
    if (ec_etcd_get_prefix(c, root, 0, &kl, NULL) < 0)
        return false;
    l->n = 0;
    l->first[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < kl.n; i++) {
        const char *rest = kl.kvs[i].key + strlen(root);
        if (durable(rest))
            continue;
        l->n++;
        if (used + strlen(rest) + 3 < sizeof(l->first))
            used += (size_t)snprintf(l->first + used, sizeof(l->first) - used, "%s%s",
                                     used ? ", " : "", rest);
    }
    ec_kv_list_free(&kl);
    return l->n == 0;
}

/* Which events ended agents with this node id (for a leaked process). */
static void ended_by_of(const char *node, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < nag; i++) {
        if (strcmp(ag[i].id, node))
            continue;
        int e = ag[i].ended_by;
        const char *how = e < 0 ? "itself" : e < EV_N ? ev_name[e] : completion;
        if (used + strlen(how) + 3 < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "", how);
    }
}

/* ---- the soak ---------------------------------------------------------------- */

static void setup(void)
{
    snprintf(tmp, sizeof(tmp), "/tmp/ec-t7200-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    snprintf(job, sizeof(job), "soak%d", (int)getpid());
    snprintf(root, sizeof(root), "/%s/", job);
    snprintf(dump, sizeof(dump), "%s/dump", tmp);
    mkdir(dump, 0755);
    etcd = ec_test_etcd_start(NULL);
    c = ec_test_client(ec_embed_endpoint(etcd));
    ag = calloc(MAX_AGENTS, sizeof(*ag));
    nag = 0;
}

static void teardown(void)
{
    ec_test_obs_stop_all();
    obs = NULL;
    ec_rank_track_destroy(ranks);
    ranks = NULL;
    for (int i = 0; i < nag; i++) {
        if (ag[i].gone)
            continue;
        kill(ag[i].pid, SIGCONT);
        kill(ag[i].pid, SIGKILL);
        ec_test_reap(ag[i].pid, 5000);
    }
    kill_tagged(); /* whatever a broken run left behind */
    ec_proxy_stop(px);
    px = NULL;
    free(ag);
    ag = NULL;
    ec_test_down(&etcd, &c);
}

START_TEST(lifecycle_soak_leaves_nothing_behind)
{
    int secs = atoi(ec_test_env_or("SOAK_SECONDS", "30"));
    unsigned seed = (unsigned)strtoul(ec_test_env_or("SOAK_SEED", "0"), NULL, 10);
    if (!seed)
        seed = (unsigned)time(NULL);
    long period = atol(ec_test_env_or("SOAK_PERIOD_MS", "1200"));
    /* SOAK_EVENTS=kind[,kind]: only these kinds (default all; for telling
     * one kind's failures from another's, never to hide one in CI). */
    const char *only = ec_test_env_or("SOAK_EVENTS", "");
    bool on[EV_N];
    int non = 0;
    for (int k = 0; k < EV_N; k++) {
        size_t l = strlen(ev_name[k]);
        on[k] = !*only && k < EV_CLASSIC;
        for (const char *q = strstr(only, ev_name[k]); q && !on[k]; q = strstr(q + 1, ev_name[k]))
            on[k] = (q == only || q[-1] == ',') && (q[l] == '\0' || q[l] == ',');
        non += on[k];
    }
    if (!non || !on[EV_JOIN])
        ck_abort_msg("SOAK_EVENTS='%s' must name join and any of leave, kill9, restart_same_id, "
                     "etcd_restart, sigstop, proxy_pause, proxy_drop, comma-separated", only);
    snprintf(agent_endpoint, sizeof(agent_endpoint), "%s", ec_embed_endpoint(etcd));
    if (on[EV_PXPAUSE] || on[EV_PXDROP]) {
        px = ec_proxy_start(ec_embed_endpoint(etcd));
        ck_assert_msg(px != NULL, "cannot start the etcd proxy");
        snprintf(agent_endpoint, sizeof(agent_endpoint), "%s", ec_proxy_endpoint(px));
    }
    int64_t px_resume = 0; /* when a proxy pause ends; 0: none */
    grandchild = atoi(ec_test_env_or("SOAK_GRANDCHILD", "1")) != 0;
    if (secs < 1 || period < 50) {
        ck_abort_msg("SOAK_SECONDS must be >= 1 and SOAK_PERIOD_MS >= 50 (got %d, %ld)", secs, period);
    }
    printf("# soak: job %s, %d s of events every ~%ld ms, seed %u, events %s, grandchildren %s "
           "(SOAK_SECONDS, SOAK_PERIOD_MS, SOAK_SEED, SOAK_EVENTS, SOAK_GRANDCHILD); logs in %s\n",
           job, secs, period, seed, *only ? only : "all", grandchild ? "on" : "off", tmp);
    fflush(stdout);
    srand(seed);
    obs = ec_test_obs_start(c, root);
    ranks = ec_rank_track_start(job, 25);
    ck_assert_ptr_nonnull(ranks);

    agent_t *core[2];
    core[0] = start_agent("core0", CORE_TTL, new_inst(EV_JOIN), true);
    core[1] = start_agent("core1", CORE_TTL, new_inst(EV_JOIN), true);
    pid_t core_pid[2] = {core[0]->pid, core[1]->pid};
    const char *core_ids[] = {"core0", "core1"};
    exactly_t both = {core_ids, 2};
    ck_assert_msg(ec_test_wait(epoch_exactly, &both, 20000), "the two core agents never formed epoch 1");
    long fd0[2], rss0[2], fdmax[2], rssmax[2];
    for (int i = 0; i < 2; i++) {
        fd0[i] = fdmax[i] = fd_count(core_pid[i]);
        rss0[i] = rssmax[i] = rss_kib(core_pid[i]);
    }

    /* The first events are every enabled kind once, in a seeded order. */
    ev_t order[EV_N];
    for (int i = 0; i < EV_N; i++)
        order[i] = (ev_t)i;
    for (int i = EV_N - 1; i > 0; i--) {
        int j = rand() % (i + 1);
        ev_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    /* join 25, leave 15, kill9 15, restart 15, etcd 10, sigstop 20 (%) */
    int weight[EV_N] = {25, 15, 15, 15, 10, 20, 10, 10}, wsum = 0;
    for (int k = 0; k < EV_N; k++)
        wsum += weight[k] *= on[k];
    int norder = 0;
    for (int i = 0; i < EV_N; i++)
        if (on[order[i]])
            order[norder++] = order[i];
    int nev = 0, nid = 0;
    uint64_t last = 0;
    long etcd_down_max = 0;
    int64_t end = ec_test_now_ms() + secs * 1000L, next = ec_test_now_ms(), next_sample = 0;
    while (ec_test_now_ms() < end && nag < MAX_AGENTS - 2 && ninst < MAX_EVENTS - 2 * MAX_AGENTS) {
        service();
        int64_t now = ec_test_now_ms();
        if (px_resume && now >= px_resume) {
            ec_proxy_set(px, EC_PROXY_PASS, 0);
            px_resume = 0;
        }
        if (now >= next_sample) {
            for (int i = 0; i < 2; i++) {
                long f = fd_count(core_pid[i]), r = rss_kib(core_pid[i]);
                fdmax[i] = f > fdmax[i] ? f : fdmax[i];
                rssmax[i] = r > rssmax[i] ? r : rssmax[i];
            }
            next_sample = now + 500;
        }
        if (now < next) {
            ec_test_pace_ms(20);
            continue;
        }
        next = now + period / 2 + rand() % (period + 1);
        ev_t ev;
        if (nev < norder) {
            ev = order[nev];
        } else {
            int r = rand() % wsum, k = 0;
            while (r >= weight[k]) {
                r -= weight[k];
                k++;
            }
            ev = (ev_t)k;
        }
        nev++;
        agent_t *v = NULL;
        /* An event with no agent to act on becomes a join. */
        if ((ev == EV_LEAVE || ev == EV_KILL9 || ev == EV_RESTART) && !(v = pick(false, true)))
            ev = EV_JOIN;
        if (ev == EV_STOP && !(v = pick(true, true)))
            ev = EV_JOIN;
        if (ev == EV_JOIN && count_alive() >= MAX_ALIVE) {
            if (!on[EV_LEAVE] || !(v = pick(false, true)))
                continue;
            ev = EV_LEAVE;
        }
        int inst = new_inst(ev);
        switch (ev) {
        case EV_JOIN: {
            char id[32];
            snprintf(id, sizeof(id), "n%d", nid++);
            start_agent(id, 3 + rand() % 3, inst, false);
            break;
        }
        case EV_LEAVE:
            kill(v->pid, SIGTERM);
            v->ended_by = EV_LEAVE;
            v->end_inst = inst;
            v->signaled_ms = now;
            break;
        case EV_KILL9:
            kill(v->pid, SIGKILL);
            v->ended_by = EV_KILL9;
            v->end_inst = inst;
            v->signaled_ms = now;
            break;
        case EV_RESTART: {
            /* kill -9, then the same id again at once with a TTL shorter
             * than what is left of the old lease (3..5 s). */
            kill(v->pid, SIGKILL);
            v->ended_by = EV_RESTART;
            v->end_inst = inst;
            v->signaled_ms = now;
            if (ec_test_reap(v->pid, 5000) >= 0)
                v->gone = true;
            char id[32];
            snprintf(id, sizeof(id), "%s", v->id);
            start_agent(id, 2, inst, false);
            break;
        }
        case EV_ETCD: {
            int64_t t0 = ec_test_now_ms();
            ec_embed_kill(etcd, SIGKILL);
            ec_error_t err = {0};
            if (ec_embed_restart(etcd, &err) != 0) {
                broke(inst, "etcd did not restart: %s", err.msg);
                goto out; /* nothing more can run */
            }
            long down = (long)(ec_test_now_ms() - t0);
            etcd_down_max = down > etcd_down_max ? down : etcd_down_max;
            break;
        }
        case EV_STOP:
            kill(v->pid, SIGSTOP);
            v->stopped = v->was_stopped = true;
            v->stop_ms = now;
            v->stop_inst = inst;
            v->cont_at = now + 300 + rand() % (v->ttl * 1000 + 1500); /* sometimes past its TTL */
            break;
        case EV_PXPAUSE:
            /* etcd silent to every agent for less than the shortest TTL (2 s) */
            ec_proxy_set(px, EC_PROXY_PAUSE, 0);
            last_px = inst;
            last_px_ms = now;
            px_resume = now + 300 + rand() % 1200;
            break;
        case EV_PXDROP:
            /* the next request of any agent is applied and answered with an error:
             * an ambiguous commit (a registration, a keepalive, a publish...) */
            if (!px_resume) {
                ec_proxy_set(px, EC_PROXY_DROP_NEXT, 0);
                last_px = inst;
                last_px_ms = now;
            }
            break;
        case EV_N:
            break;
        }
    }
    if (px)
        ec_proxy_set(px, EC_PROXY_PASS, 0);

    /* ---- the end: churners leave, the cores settle and complete ---- */
    for (int i = 0; i < nag; i++)
        if (ag[i].stopped) {
            kill(ag[i].pid, SIGCONT);
            ag[i].stopped = false;
        }
    for (int i = 0; i < nag; i++)
        if (alive(&ag[i]) && !ag[i].core) {
            kill(ag[i].pid, SIGTERM);
            ag[i].ended_by = EV_LEAVE;
            ag[i].end_inst = new_inst(EV_LEAVE);
            ag[i].signaled_ms = ec_test_now_ms();
        }
    (void)ec_test_wait(churners_gone, NULL, 25000); /* service() reports the late ones */
    /* A churner killed just before (or a restarted one's old incarnation)
     * keeps its record until its lease (2..5 s) expires, and a joiner's
     * record is admitted even if its agent is dead: an epoch of exactly the
     * cores seen before then can be followed by one with the dead node and
     * another without it, and the processes signalled below would be the
     * replaced ones.  So: no churner's record left, then the newest epoch of
     * exactly the cores with both their processes running. */
    if (!ec_test_wait(only_registered, &both, 20000))
        broke(-1, "completion: churners' node records outlived their leases");
    settled_t settle = {&both, 0};
    if (!ec_test_wait(epoch_exactly, &both, 30000)) {
        broke(-1, "completion: the job never settled on core0, core1 after the churn");
    } else {
        if (ec_test_wait(settled, &settle, 15000)) {
            last = settle.epoch;
        } else {
            ec_epoch_t *ep = ec_test_epoch(c, root);
            last = ep ? ep->number : 0;
            ec_epoch_free(ep);
        }
        for (int i = 0; i < 2; i++) {
            char p[512];
            snprintf(p, sizeof(p), "%s/env.%s.0.%llu", dump, core_ids[i], (unsigned long long)last);
            if (!ec_test_wait_file(p, "PID=", 15000)) {
                broke(-1, "completion: %s never started its process in epoch %llu", core_ids[i],
                     (unsigned long long)last);
                continue;
            }
            pid_t pp = prog_pid(core_ids[i], last);
            if (pp > 0)
                kill(pp, SIGTERM); /* ec-test-prog exits 0 on SIGTERM: "training done" */
        }
        for (int i = 0; i < 2; i++) {
            int st = ec_test_reap(core[i]->pid, 30000);
            if (st >= 0)
                core[i]->gone = true;
            core[i]->ended_by = EV_N; /* done */
            if (st != 0)
                broke(-1, "completion: %s exited with %d, not 0 (log %s)", core_ids[i], st,
                      core[i]->log);
        }
    }
out:;
    /* ---- what is left ---- */

    /* Every agent is gone by now (SIGKILLed ones too): wait for all
     * their descendants, then name what is left. */
    for (int i = 0; i < nag; i++)
        if (!ag[i].gone) {
            kill(ag[i].pid, SIGCONT);
            kill(ag[i].pid, SIGKILL);
            ag[i].gone = ec_test_reap(ag[i].pid, 5000) >= 0;
        }
    int leaked = 0;
    if (!ec_test_wait(none_tagged, NULL, 5000)) {
        pid_t p[256];
        int n = scan_tagged(p, 256);
        for (int i = 0; i < n; i++) {
            char node[64], comm[64], how[256];
            if (!tagged(p[i], node, sizeof(node), comm, sizeof(comm)))
                continue;
            leaked++;
            ended_by_of(node, how, sizeof(how));
            /* charged to an abrupt end of one of the node's agents, if any */
            int inst = -1;
            for (int k = 0; k < nag && inst < 0; k++)
                if (!strcmp(ag[k].id, node) &&
                    (ag[k].ended_by == EV_KILL9 || ag[k].ended_by == EV_RESTART))
                    inst = ag[k].end_inst;
            broke(inst, "leaked process %d (%s) of node %s, whose agents ended by: %s", (int)p[i],
                 comm, node[0] ? node : "?", how[0] ? how : "?");
        }
        kill_tagged();
    }

    /* A kill -9'd agent's keys go with its lease: within the longest TTL. */
    leftover_t lo = {{0}, 0};
    if (!ec_test_wait(only_durable, &lo, 5 * 1000 + 10000))
        broke(-1, "keys left under %s after the job: %d (%s)", root, lo.n, lo.first);

    for (int i = 0; i < 2; i++) {
        printf("# soak: %s fds %ld -> max %ld, RSS %ld -> max %ld KiB\n", core_ids[i], fd0[i],
               fdmax[i], rss0[i], rssmax[i]);
        if (fd0[i] >= 0 && fdmax[i] > fd0[i] + 64)
            broke(-1, "%s's fd count grew from %ld to %ld", core_ids[i], fd0[i], fdmax[i]);
        if (rss0[i] >= 0 && rssmax[i] > 2 * rss0[i] + 65536)
            broke(-1, "%s's RSS grew from %ld to %ld KiB", core_ids[i], rss0[i], rssmax[i]);
    }

    if (px) {
        ec_proxy_stats_t ps;
        ec_proxy_stats(px, &ps);
        printf("# soak: proxy forwarded %llu connections, %llu requests; %llu connections cut "
               "after their request was forwarded (ambiguous), %llu B of answers dropped\n",
               (unsigned long long)ps.accepted, (unsigned long long)ps.requests,
               (unsigned long long)ps.cuts, (unsigned long long)ps.dropped_down);
    }
    /* Last: the checker stops the test on a violation, and the findings
     * above are printed by then. */
    int epochs = ec_test_obs_check(obs, 1, 8, 1);
    ec_test_obs_stop(obs);
    obs = NULL;
    ec_rank_track_check(ranks);

    char sum[512];
    size_t used = 0;
    for (int k = 0; k < EV_N; k++)
        used += (size_t)snprintf(sum + used, sizeof(sum) - used, "%s %d/%d, ", ev_name[k],
                                 ev_done[k] - ev_failed[k], ev_done[k]);
    printf("# soak summary: seed %u, %d s, events survived/done: %s%d agents started, "
           "final epoch %llu, %d epochs checked, etcd down max %ld ms, %d leaked processes, "
           "%d leftover keys, %d failures\n", seed, secs, sum, nag, (unsigned long long)last,
           epochs, etcd_down_max, leaked, lo.n, nfailures);
    fflush(stdout);
    ck_assert_msg(nfailures == 0, "soak (seed %u) broke %d rule(s): %s", seed, nfailures, failures);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t7200-lifecycle-soak");
    TCase *t = tcase_create("soak");
    tcase_add_checked_fixture(t, setup, teardown);
    ec_tcase_add(t, lifecycle_soak_leaves_nothing_behind);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
