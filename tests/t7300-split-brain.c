/* No split brain: a node that cannot confirm its lease stops acting before
 * the lease can have expired on the server, so two groups never train at
 * once.  With `--np=1:2`, nodes n1 and n2 in the epoch reaching etcd through
 * a proxy that is then paused (they still reach each other), n3 a standby
 * reaching etcd directly, and a short lease TTL:
 *
 *  - restart mode: by the time n3's epoch without n1 and n2 is published,
 *    no training process of n1's or n2's epoch is alive any more (each agent
 *    logged `-fenced`); after the proxy resumes, n1 or n2 rejoins in an
 *    epoch of world 2 and trains there;
 *  - in place (--rebuild=inprocess, the linreg example): the cut workers stop
 *    stepping and report ECW_EUNCONFIRMED instead, and no step of the old
 *    epoch is made after n3's epoch is published; after the proxy resumes
 *    they train again, in a newer epoch;
 *  - in place, a collective already blocked when the fence falls (its peer
 *    frozen) is aborted then, and reports ECW_EUNCONFIRMED, long before the
 *    collective's own timeout.
 *
 * Every test ends with the epoch-history checker; the restart-mode one also
 * with the rank tracker (tests/lib/rank_track.h): no rank held by live
 * processes of two epochs at once. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ec_select.h"
#include "etcd_proxy.h"
#include "harness.h"
#include "rank_track.h"
#include "records.h"
#include "stop_barrier.h"

/* Lease TTLs, short so that each test stays bounded.  In place, 4: the
 * worker library learns the lease's time left in whole seconds rounded
 * down, so it fences up to 1 s earlier than the agent; with 3 s it would
 * come close to fencing between two refreshes on a loaded machine. */
#define TTL_RESTART "3"
#define TTL_INPROCESS "4"

EC_TEST_ETCD_FIXTURE("t7300", 16)
static ec_proxy_t *px; /* n1 and n2 reach etcd through it */
static ec_test_obs_t *obs;
static ec_rank_track_t *ranks;

static void setup(void)
{
    etcd_up();
    px = ec_proxy_start(ec_embed_endpoint(etcd));
    ck_assert_msg(px != NULL, "cannot start the proxy to %s", ec_embed_endpoint(etcd));
}

static void teardown(void)
{
    ec_test_obs_stop_all();
    obs = NULL;
    ec_rank_track_destroy(ranks);
    ranks = NULL;
    if (px)
        ec_proxy_set(px, EC_PROXY_PASS, 0);
    ec_test_kill_all(pids, &npids); /* before the proxy they reach etcd through */
    ec_proxy_stop(px);
    px = NULL;
    etcd_down();
}

typedef struct {
    pid_t pid;
    char id[16], logdir[320], console[320];
} agent_t;

/* One agent of job with one process: ec-test-prog or linreg; np and ttl:
 * --np and --lease_ttl (NULL: 1:2 and the mode's TTL; ttl may carry more
 * flags after the number). */
static agent_t start_agent_with(const char *job, const char *id, bool cut, bool inprocess,
                                const char *np, const char *ttl)
{
    agent_t a;
    snprintf(a.id, sizeof(a.id), "%s", id);
    snprintf(a.logdir, sizeof(a.logdir), "%s/%s-%s", tmp, job, id);
    snprintf(a.console, sizeof(a.console), "%s/%s-%s.console", tmp, job, id);
    char prog[600], dump[300];
    snprintf(dump, sizeof(dump), "%s/dump-%s", tmp, job);
    mkdir(dump, 0755);
    if (inprocess)
        snprintf(prog, sizeof(prog), "%s --steps 100000000 --delay-ms 20",
                 ec_test_bin("ECW_LINREG", "worker/examples/linreg"));
    else
        snprintf(prog, sizeof(prog), "%s %s 0", ec_test_bin("EC_TEST_PROG", "tests/ec-test-prog"),
                 dump);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "exec %s launch --elastic_server=%s --job_id=%s --np=%s --nproc_per_node=1 "
             "--node_id=%s --log_dir=%s --grace_period=2 --elastic_timeout=1 --lease_ttl=%s "
             "--rebuild=%s -- %s",
             ec_test_bin("ECOORD", "./ecoord"),
             cut ? ec_proxy_endpoint(px) : ec_embed_endpoint(etcd), job, np ? np : "1:2", id,
             a.logdir, ttl ? ttl : inprocess ? TTL_INPROCESS : TTL_RESTART,
             inprocess ? "inprocess" : "restart", prog);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    a.pid = ec_test_spawn(argv, a.console);
    ck_assert_int_lt(npids, (int)(sizeof(pids) / sizeof(pids[0])));
    pids[npids++] = a.pid;
    return a;
}

static agent_t start_agent(const char *job, const char *id, bool cut, bool inprocess)
{
    return start_agent_with(job, id, cut, inprocess, NULL, NULL);
}

typedef struct {
    const char *root;
    uint64_t number; /* at least */
    int world;
    const char *with, *without;
} want_t;

static bool epoch_matches(void *arg)
{
    want_t *w = arg;
    ec_epoch_t *ep = ec_test_epoch(c, w->root);
    bool ok = ep && ep->number >= w->number && (w->world < 0 || ep->world_size == w->world) &&
              (!w->with || ec_epoch_find_member(ep, w->with) >= 0) &&
              (!w->without || ec_epoch_find_member(ep, w->without) < 0);
    ec_epoch_free(ep);
    return ok;
}

static bool file_exists(void *arg)
{
    return access((const char *)arg, F_OK) == 0;
}

/* PID of node's ec-test-prog started in epoch, waiting for its dump. */
static pid_t prog_pid(const char *job, const char *node, unsigned long long epoch)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/dump-%s/env.%s.0.%llu", tmp, job, node, epoch);
    ck_assert_msg(ec_test_wait(file_exists, p, 15000), "%s never started a process in epoch %llu",
                  node, epoch);
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    int pid = 0;
    ck_assert_int_eq(fscanf(f, "PID=%d", &pid), 1);
    fclose(f);
    return (pid_t)pid;
}

/* Whether pid runs (a zombie does not: it no longer acts). */
static bool running(pid_t pid)
{
    char p[64], buf[512];
    snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* Wait for the first epoch matching want; check(arg, false) runs at each
 * poll before etcd is read, check(arg, true) right after the read that first
 * finds the epoch: what it asserts held when that epoch was first seen. */
typedef struct {
    want_t want;
    void (*check)(void *arg, bool published);
    void *arg;
} watch_t;

static bool watch_cond(void *arg)
{
    watch_t *w = arg;
    w->check(w->arg, false);
    bool yes = epoch_matches(&w->want);
    if (yes)
        w->check(w->arg, true);
    return yes;
}

/* ---- restart mode ---------------------------------------------------- */

typedef struct {
    pid_t p1, p2;
} olds_t;

static void olds_gone(void *arg, bool published)
{
    olds_t *o = arg;
    if (!published)
        return;
    /* The epoch without n1 and n2 exists: their old processes must be gone. */
    ck_assert_msg(!running(o->p1), "split brain: n3's epoch is published while n1's process of "
                  "epoch 1 (pid %d) still runs", (int)o->p1);
    ck_assert_msg(!running(o->p2), "split brain: n3's epoch is published while n2's process of "
                  "epoch 1 (pid %d) still runs", (int)o->p2);
}

typedef struct {
    const char *job, *root;
    char node[8];
    unsigned long long epoch;
    pid_t pid;
} rejoin_t;

/* n1 or n2 is a member of the newest epoch and its process of that epoch
 * runs. */
static bool rejoined_running(void *arg)
{
    rejoin_t *r = arg;
    ec_epoch_t *ep = ec_test_epoch(c, r->root);
    if (!ep)
        return false;
    r->epoch = ep->number;
    snprintf(r->node, sizeof(r->node), "%s", ec_epoch_find_member(ep, "n1") >= 0 ? "n1" :
             ec_epoch_find_member(ep, "n2") >= 0 ? "n2" : "");
    ec_epoch_free(ep);
    if (!r->node[0])
        return false;
    char p[512];
    snprintf(p, sizeof(p), "%s/dump-%s/env.%s.0.%llu", tmp, r->job, r->node, r->epoch);
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    int pid = 0;
    bool ok = fscanf(f, "PID=%d", &pid) == 1;
    fclose(f);
    r->pid = (pid_t)pid;
    return ok && running(r->pid);
}

START_TEST(restart_mode_cut_nodes_stop_before_their_lease_can_expire)
{
    const char *job = "sb-r", *root = "/sb-r/";
    obs = ec_test_obs_start(c, root);
    ranks = ec_rank_track_start(job, 20);
    ck_assert_ptr_nonnull(ranks);
    agent_t n1 = start_agent(job, "n1", true, false);
    want_t first = {root, 1, 2, "n1", NULL};
    ck_assert_msg(ec_test_wait(file_exists, (void *)n1.console, 5000), "n1 never started");
    agent_t n2 = start_agent(job, "n2", true, false);
    ck_assert_msg(ec_test_wait(epoch_matches, &first, 20000), "no epoch of world 2 with n1");
    ec_epoch_t *ep = ec_test_epoch(c, root);
    uint64_t e1 = ep->number;
    ck_assert_int_ge(ec_epoch_find_member(ep, "n2"), 0);
    ec_epoch_free(ep);
    olds_t o = {prog_pid(job, "n1", e1), prog_pid(job, "n2", e1)};
    agent_t n3 = start_agent(job, "n3", false, false);
    ck_assert_msg(ec_test_wait_file(n3.console, "standby", 15000), "n3 never became a standby");

    int64_t t_cut = ec_test_now_ms();
    ec_proxy_set(px, EC_PROXY_PAUSE, 0);
    watch_t w = {{root, e1 + 1, 1, "n3", "n1"}, olds_gone, &o};
    ck_assert_msg(ec_test_wait(watch_cond, &w, 30000), "n3 never formed an epoch of its own");
    int64_t t_epoch = ec_test_now_ms();
    /* Logged before the processes were stopped, but the console is written
     * by the agent's console thread: wait for it rather than read once. */
    ck_assert_msg(ec_test_wait_file(n1.console, "-fenced", 5000) &&
                  ec_test_wait_file(n2.console, "-fenced", 5000),
                  "n1 and n2 should have logged -fenced");
    printf("# cut at 0 ms; epoch of n3 alone seen at %lld ms; n1's and n2's processes gone by "
           "then\n", (long long)(t_epoch - t_cut));

    ec_proxy_set(px, EC_PROXY_PASS, 0);
    ep = ec_test_epoch(c, root);
    want_t back = {root, ep->number + 1, 2, "n3", NULL};
    ec_epoch_free(ep);
    ck_assert_msg(ec_test_wait(epoch_matches, &back, 30000),
                  "n1 or n2 never rejoined after etcd came back");
    /* The newest epoch at each poll: a rejoin may be followed at once by
     * another epoch (seen: "+epoch 4 reason=restart: n1 restarted" 5 ms
     * after epoch 3), whose process replaces that of the first. */
    rejoin_t rj = {job, root, "", 0, 0};
    ck_assert_msg(ec_test_wait(rejoined_running, &rj, 15000),
                  "%s rejoined epoch %llu but its process is not running", rj.node[0] ? rj.node : "n1/n2",
                  rj.epoch);
    printf("# %s rejoined in epoch %llu (process %d)\n", rj.node, rj.epoch, (int)rj.pid);
    int n = ec_test_obs_check(obs, 1, 2, 1);
    ec_test_obs_stop(obs);
    obs = NULL;
    printf("# %d epochs checked\n", n);
    ec_rank_track_check(ranks);
}
END_TEST

static bool not_running(void *arg)
{
    return !running(*(pid_t *)arg);
}

/* A rank moved off a frozen node waits for that node's processes.  Three
 * nodes, one process each; the agent of M_id 1 is frozen (SIGSTOP): the
 * ring evicts it in about a second and the next epoch gives its rank 1 to
 * another node, while its own process of rank 1 lives on until its
 * janitor's watchdog kills it, a few seconds later (before its lease could
 * have expired).  No process of the new epoch may hold rank 1 before then:
 * the rank tracker checks it, with nothing excused. */
START_TEST(restart_mode_a_moved_rank_waits_for_its_frozen_holder)
{
    const char *job = "sb-f", *root = "/sb-f/";
    obs = ec_test_obs_start(c, root);
    ranks = ec_rank_track_start(job, 20);
    ck_assert_ptr_nonnull(ranks);
    agent_t ag[3] = {start_agent_with(job, "f1", false, false, "2:3", "5"),
                     start_agent_with(job, "f2", false, false, "2:3", "5"),
                     start_agent_with(job, "f3", false, false, "2:3", "5")};
    want_t all = {root, 1, 3, NULL, NULL};
    ck_assert_msg(ec_test_wait(epoch_matches, &all, 30000), "no epoch of world 3");
    ec_epoch_t *ep = ec_test_epoch(c, root);
    uint64_t e1 = ep->number;
    char frozen[16];
    snprintf(frozen, sizeof(frozen), "%s", ep->members[1].node_id);
    ec_epoch_free(ep);
    agent_t *fa = NULL;
    for (int i = 0; i < 3; i++)
        if (!strcmp(ag[i].id, frozen))
            fa = &ag[i];
    ck_assert_ptr_nonnull(fa);
    pid_t old = prog_pid(job, frozen, e1);

    int64_t t_stop = ec_test_now_ms();
    kill(fa->pid, SIGSTOP);
    want_t without = {root, e1 + 1, 2, NULL, frozen};
    ck_assert_msg(ec_test_wait(epoch_matches, &without, 20000), "%s was never evicted", frozen);
    int64_t t_epoch = ec_test_now_ms();
    ep = ec_test_epoch(c, root);
    uint64_t e2 = ep->number;
    char heir[16];
    snprintf(heir, sizeof(heir), "%s", ep->members[1].node_id);
    ec_epoch_free(ep);
    pid_t young = prog_pid(job, heir, e2);
    int64_t t_start = ec_test_now_ms();
    bool old_alive = running(old);
    /* the frozen holder's process ends by its watchdog, well within 15 s */
    ck_assert_msg(ec_test_wait(not_running, &old, 15000),
                  "the frozen node's process %d outlived its lease", (int)old);
    int64_t t_old = ec_test_now_ms();
    printf("# froze %s at 0 ms; epoch %llu without it at %lld ms; %s's rank-1 process (%d) seen "
           "at %lld ms; the frozen one's (%d) gone by %lld ms%s\n",
           frozen, (unsigned long long)e2, (long long)(t_epoch - t_stop), heir, (int)young,
           (long long)(t_start - t_stop), (int)old, (long long)(t_old - t_stop),
           old_alive ? " (still alive when the new one was seen)" : "");
    kill(fa->pid, SIGCONT);
    /* the heir's claim on M_id 1 is what the next holder will read */
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, "/sb-f/holders/1", &kv, &found, NULL, NULL), 0);
    ck_assert_msg(found, "no claim on M_id 1's ranks (holders/1)");
    ec_rank_holder_t h;
    ck_assert_int_eq(ec_rank_holder_decode(kv.value, kv.value_len, kv.key, &h, NULL), 0);
    ec_kv_free(&kv);
    ck_assert_msg(h.epoch >= e2, "holders/1 names epoch %llu, before %llu",
                  (unsigned long long)h.epoch, (unsigned long long)e2);
    ec_test_obs_stop(obs);
    obs = NULL;
    ec_rank_track_check(ranks);
}
END_TEST

/* --stop_barrier=false: no claim is written or waited for; the agent says
 * so once. */
START_TEST(restart_mode_without_the_stop_barrier_claims_nothing)
{
    const char *job = "sb-off", *root = "/sb-off/";
    agent_t a = start_agent_with(job, "o1", false, false, "1:1", "5 --stop_barrier=false");
    want_t one = {root, 1, 1, "o1", NULL};
    ck_assert_msg(ec_test_wait(epoch_matches, &one, 20000), "no epoch");
    ec_epoch_t *ep = ec_test_epoch(c, root);
    uint64_t e = ep->number;
    ec_epoch_free(ep);
    prog_pid(job, "o1", e);
    ck_assert_msg(ec_test_wait_file(a.console, "--stop_barrier=false: a rank taken", 5000),
                  "the agent did not say the barrier is off");
    ec_kv_t kv;
    bool found = true;
    ck_assert_int_eq(ec_etcd_get(c, "/sb-off/holders/0", &kv, &found, NULL, NULL), 0);
    ck_assert_msg(!found, "holders/0 written with the barrier off");
}
END_TEST

/* ---- in place -------------------------------------------------------- */

typedef struct {
    long long steps;            /* linreg step lines of epoch <= e */
    unsigned long long maxepoch;
    bool fenced;                /* an ECW_EUNCONFIRMED report */
} wlog_t;

static wlog_t read_wlog(const agent_t *a, unsigned long long e)
{
    wlog_t out = {0};
    char path[400], buf[512];
    snprintf(path, sizeof(path), "%s/workerlog.0", a->logdir);
    FILE *f = fopen(path, "r");
    if (!f)
        return out;
    while (fgets(buf, sizeof(buf), f)) {
        long long step;
        unsigned long long ep;
        /* a refused collective, or the library's own fence line: a
         * collective already blocked when the fence falls may end by the
         * epoch that arrives with it instead (seen under a CPU hog: "ended
         * by epoch 2"), and the worker still refused from then on */
        if (strstr(buf, "ECW_EUNCONFIRMED") || strstr(buf, "ecw WARN: -fenced:"))
            out.fenced = true;
        if (sscanf(buf, "linreg step=%lld epoch=%llu ", &step, &ep) != 2)
            continue;
        if (ep <= e)
            out.steps++;
        if (ep > out.maxepoch)
            out.maxepoch = ep;
    }
    fclose(f);
    return out;
}

typedef struct {
    const agent_t *a[2];
    unsigned long long e1;
    long long steps[2];
} wsnap_t;

/* Counts taken before each read of the epoch: the last ones are those of
 * the poll that found n3's epoch. */
static void snap_steps(void *arg, bool published)
{
    wsnap_t *s = arg;
    if (published)
        return;
    for (int i = 0; i < 2; i++)
        s->steps[i] = read_wlog(s->a[i], s->e1).steps;
}

static bool no_new_steps(void *arg)
{
    wsnap_t *s = arg;
    for (int i = 0; i < 2; i++)
        if (read_wlog(s->a[i], s->e1).steps > s->steps[i])
            return false;
    return true;
}

typedef struct {
    const agent_t *a;
    unsigned long long after;
} newer_t;

static bool trains_after(void *arg)
{
    newer_t *n = arg;
    return read_wlog(n->a, 0).maxepoch > n->after;
}

START_TEST(inprocess_cut_workers_refuse_collectives_until_confirmed)
{
    const char *job = "sb-i", *root = "/sb-i/";
    obs = ec_test_obs_start(c, root);
    agent_t n1 = start_agent(job, "n1", true, true);
    ck_assert_msg(ec_test_wait(file_exists, (void *)n1.console, 5000), "n1 never started");
    agent_t n2 = start_agent(job, "n2", true, true);
    want_t first = {root, 1, 2, "n1", NULL};
    ck_assert_msg(ec_test_wait(epoch_matches, &first, 20000), "no epoch of world 2 with n1");
    ec_epoch_t *ep = ec_test_epoch(c, root);
    uint64_t e1 = ep->number;
    ec_epoch_free(ep);
    wsnap_t s = {{&n1, &n2}, e1, {0, 0}};
    for (int i = 0; i < 2; i++) {
        newer_t t = {s.a[i], 0};
        ck_assert_msg(ec_test_wait(trains_after, &t, 30000), "%s never trained", s.a[i]->id);
    }
    agent_t n3 = start_agent(job, "n3", false, true);
    ck_assert_msg(ec_test_wait_file(n3.console, "standby", 15000), "n3 never became a standby");

    int64_t t_cut = ec_test_now_ms();
    ec_proxy_set(px, EC_PROXY_PAUSE, 0);
    watch_t w = {{root, e1 + 1, 1, "n3", "n1"}, snap_steps, &s};
    ck_assert_msg(ec_test_wait(watch_cond, &w, 30000), "n3 never formed an epoch of its own");
    int64_t t_epoch = ec_test_now_ms();
    /* Hold the cut one more TTL: the old group must not step meanwhile. */
    ck_assert_msg(ec_test_holds(no_new_steps, &s, 3000),
                  "split brain: n1 or n2 stepped in epoch %llu after n3's epoch was published",
                  (unsigned long long)e1);
    for (int i = 0; i < 2; i++) {
        wlog_t l = read_wlog(s.a[i], e1);
        ck_assert_msg(l.fenced, "%s's worker never fenced (no ECW_EUNCONFIRMED, no -fenced) while cut",
                      s.a[i]->id);
        ck_assert_msg(l.steps <= s.steps[i],
                      "split brain: %s stepped in epoch %llu after n3's epoch was published "
                      "(%lld steps before, %lld after)", s.a[i]->id,
                      (unsigned long long)e1, s.steps[i], l.steps);
    }
    printf("# cut at 0 ms; n3's epoch seen at %lld ms; n1 and n2 refused collectives and made "
           "no step after it\n", (long long)(t_epoch - t_cut));

    ec_proxy_set(px, EC_PROXY_PASS, 0);
    ep = ec_test_epoch(c, root);
    unsigned long long e2 = ep->number;
    ec_epoch_free(ep);
    bool any = false;
    for (int i = 0; i < 2 && !any; i++) {
        newer_t t = {s.a[i], e2};
        any = ec_test_wait(trains_after, &t, i == 0 ? 30000 : 5000);
    }
    ck_assert_msg(any, "neither n1 nor n2 trained again after etcd came back");
    int n = ec_test_obs_check(obs, 1, 2, 1);
    ec_test_obs_stop(obs);
    obs = NULL;
    printf("# %d epochs checked\n", n);
}
END_TEST

/* The pid in the newest "linreg step=" line of a's worker log, or 0. */
/* In place, a node evicted while its agent is frozen: its workers fence as
 * soon as etcd says their lease is gone (the eviction revoked it), not at
 * the bound their last confirmation gave (a TTL later): no collective of
 * theirs runs once the others have re-formed without them. */
START_TEST(inprocess_workers_of_an_evicted_node_fence_at_once)
{
    const char *job = "sb-e", *root = "/sb-e/";
    agent_t ag[3] = {start_agent_with(job, "e1", false, true, "2:3", "10"),
                     start_agent_with(job, "e2", false, true, "2:3", "10"),
                     start_agent_with(job, "e3", false, true, "2:3", "10")};
    want_t all = {root, 1, 3, NULL, NULL};
    ck_assert_msg(ec_test_wait(epoch_matches, &all, 30000), "no epoch of world 3");
    ec_epoch_t *ep = ec_test_epoch(c, root);
    uint64_t e1 = ep->number;
    char frozen[16] = "";
    for (int i = 0; i < ep->nmembers && !frozen[0]; i++)
        if (strcmp(ep->members[i].node_id, ep->leader_id))
            snprintf(frozen, sizeof(frozen), "%s", ep->members[i].node_id);
    ec_epoch_free(ep);
    agent_t *fa = NULL;
    for (int i = 0; i < 3; i++) {
        newer_t t = {&ag[i], 0};
        ck_assert_msg(ec_test_wait(trains_after, &t, 30000), "%s never trained", ag[i].id);
        if (!strcmp(ag[i].id, frozen))
            fa = &ag[i];
    }
    ck_assert_ptr_nonnull(fa);
    char wlog[400];
    snprintf(wlog, sizeof(wlog), "%s/workerlog.0", fa->logdir);
    int64_t t0 = ec_test_now_ms();
    ec_test_sigstop(fa->pid);
    want_t without = {root, e1 + 1, 2, NULL, frozen};
    ck_assert_msg(ec_test_wait(epoch_matches, &without, 20000), "%s was never evicted", frozen);
    int64_t t_epoch = ec_test_now_ms();
    /* Thawed at once: its agent registers again under a new lease, which
     * its worker takes up; but the worker's first look after the eviction
     * still asks about the old lease, gone by then.  (Its output reaches
     * workerlog.0 through the agent: read once the agent runs again.  Its
     * processes stay: they booted ahead of admission and wait as a
     * standby's.) */
    kill(fa->pid, SIGCONT);
    ck_assert_msg(ec_test_wait_file(wlog, "-fenced", 15000),
                  "%s's worker never fenced after its node was evicted (TTL 10 s: its old "
                  "lease bound was still seconds ahead)", frozen);
    ck_assert_msg(ec_test_file_contains(wlog, "is gone"),
                  "%s's worker fenced on its lease's old bound, not on the eviction", frozen);
    printf("# froze %s's agent at 0 ms; evicted (epoch without it) at %lld ms; its worker "
           "fenced on the revoked lease (TTL 10 s)\n", frozen, (long long)(t_epoch - t0));
}
END_TEST

static pid_t linreg_pid(const agent_t *a)
{
    char path[400], buf[512];
    snprintf(path, sizeof(path), "%s/workerlog.0", a->logdir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int pid = 0;
    while (fgets(buf, sizeof(buf), f)) {
        const char *p = strncmp(buf, "linreg step=", 12) == 0 ? strstr(buf, " pid=") : NULL;
        if (p)
            pid = atoi(p + 5);
    }
    fclose(f);
    return (pid_t)pid;
}

START_TEST(inprocess_blocked_collective_aborted_by_the_fence)
{
    const char *job = "sb-b";
    agent_t n1 = start_agent(job, "n1", true, true);
    ck_assert_msg(ec_test_wait(file_exists, (void *)n1.console, 5000), "n1 never started");
    agent_t n2 = start_agent(job, "n2", true, true);
    newer_t t1 = {&n1, 0}, t2 = {&n2, 0};
    ck_assert_msg(ec_test_wait(trains_after, &t1, 30000) && ec_test_wait(trains_after, &t2, 30000),
                  "n1 and n2 never trained");
    /* n2's process frozen: n1's next collective blocks (30 s timeout). */
    pid_t p2 = linreg_pid(&n2);
    ck_assert_int_gt(p2, 0);
    ck_assert_int_eq(kill(p2, SIGSTOP), 0);
    char path[400];
    snprintf(path, sizeof(path), "%s/workerlog.0", n1.logdir);
    int64_t t0 = ec_test_now_ms();
    ec_proxy_set(px, EC_PROXY_PAUSE, 0);
    bool aborted = ec_test_wait_file(path, "aborted: membership cannot be confirmed", 15000);
    int64_t t = ec_test_now_ms() - t0;
    bool said = ec_test_wait_file(path, "ECW_EUNCONFIRMED", 5000);
    kill(p2, SIGCONT);
    ck_assert_msg(aborted, "n1's blocked collective was not aborted by the fence");
    ck_assert_msg(said, "n1's linreg never reported ECW_EUNCONFIRMED");
    printf("# n1's blocked allreduce aborted by the fence %lld ms after the cut (TTL " TTL_INPROCESS
           " s; the collective's own timeout: 30 s)\n", (long long)t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t7300-split-brain");
    /* Two cases, so that CK_RUN_CASE=restart or =inprocess runs one. */
    TCase *tc = tcase_create("restart");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 0);
    ec_tcase_add(tc, restart_mode_cut_nodes_stop_before_their_lease_can_expire);
    ec_tcase_add(tc, restart_mode_a_moved_rank_waits_for_its_frozen_holder);
    ec_tcase_add(tc, restart_mode_without_the_stop_barrier_claims_nothing);
    suite_add_tcase(s, tc);
    tc = tcase_create("inprocess");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 0);
    ec_tcase_add(tc, inprocess_cut_workers_refuse_collectives_until_confirmed);
    ec_tcase_add(tc, inprocess_blocked_collective_aborted_by_the_fence);
    ec_tcase_add(tc, inprocess_workers_of_an_evicted_node_fence_at_once);
    suite_add_tcase(s, tc);
    return s;
}

EC_INTEGRATION_MAIN(suite)
