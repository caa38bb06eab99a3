/* Rules checked: the real node coordinator (node.h), several of them in one
 * process, each with a client of its own to one in-memory store (etcd.h,
 * ec_etcd_create_mem), forms and re-forms a job with no etcd process and no
 * socket.  Three nodes elect one leader, which publishes one epoch with all
 * three in registration order and their ports; a crashed node (stopped, its
 * lease expired at once by the store) is left out of the next epoch, with
 * reason lost; a graceful leave re-forms at once, with reason leave; a
 * crashed leader is replaced by another node, which publishes the next
 * number; a live node whose lease expires registers again and comes back.
 * Every test ends with the epoch-history checker (tests/lib/harness.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "etcd.h"
#include "harness.h"
#include "keys.h"
#include "log.h"
#include "node.h"
#include "node_impl.h" /* ec__feed_lost: one test has the loop list the job again */
#include "records.h"

#define NMAX 4

typedef struct {
    char id[16];
    ec_etcd_t *c;
    ec_node_t *n;
    uint16_t ports[4];
} node_t;

static ec_etcd_mem_t *store;
static ec_etcd_t *c; /* the test's own client: reads and the history checker */
static node_t nodes[NMAX];
static int nnodes;

/* Every node's events and the coordinator's log lines, in order. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char logbuf[1 << 18];
static size_t loglen;

static void log_add(const char *who, const char *msg)
{
    pthread_mutex_lock(&log_lock);
    int n = snprintf(logbuf + loglen, sizeof(logbuf) - loglen, "%s: %s\n", who, msg);
    if (n > 0 && loglen + (size_t)n < sizeof(logbuf))
        loglen += (size_t)n;
    pthread_mutex_unlock(&log_lock);
}

static void on_event(const char *ev, void *arg)
{
    log_add(((node_t *)arg)->id, ev);
}

static void on_log(ec_log_level_t level, const char *msg, void *arg)
{
    (void)level;
    (void)arg;
    log_add("log", msg);
}

static bool log_has(void *needle)
{
    pthread_mutex_lock(&log_lock);
    bool y = strstr(logbuf, needle) != NULL;
    pthread_mutex_unlock(&log_lock);
    return y;
}

static void wait_log(const char *needle, long ms)
{
    ck_assert_msg(ec_test_wait(log_has, (void *)needle, ms), "no '%s' within %ld ms; log:\n%s",
                  needle, ms, logbuf);
}

static void setup(void)
{
    ec_error_t err = {0};
    store = ec_etcd_mem_new(&err);
    ck_assert_msg(store, "%s", err.msg);
    c = ec_etcd_create_mem(store, &err);
    ck_assert_msg(c, "%s", err.msg);
    nnodes = 0;
    loglen = 0;
    logbuf[0] = '\0';
    ec_log_set_sink(on_log, NULL, EC_LOG_INFO);
}

static void teardown(void)
{
    ec_test_obs_stop_all();
    for (int i = 0; i < nnodes; i++) {
        ec_node_stop(nodes[i].n);
        ec_etcd_destroy(nodes[i].c);
    }
    ec_etcd_destroy(c);
    ec_etcd_mem_free(store);
    ec_log_set_sink(NULL, NULL, EC_LOG_INFO);
}

/* Start a coordinator with a client of its own, as an agent of its own
 * would have: no probe server (probe_port 0) and no ring, which need
 * sockets; fake ports, distinct per node. */
static node_t *start_node(const char *job, const char *id, int min, int max, int nproc,
                          int64_t elastic_ms, int ttl)
{
    ck_assert_int_lt(nnodes, NMAX);
    node_t *x = &nodes[nnodes];
    memset(x, 0, sizeof(*x));
    snprintf(x->id, sizeof(x->id), "%s", id);
    for (int i = 0; i < nproc; i++)
        x->ports[i] = (uint16_t)(20000 + nnodes * 10 + i);
    ec_error_t err = {0};
    x->c = ec_etcd_create_mem(store, &err);
    ck_assert_msg(x->c, "%s", err.msg);
    ec_node_opts_t o = EC_NODE_OPTS_INIT;
    o.etcd = x->c;
    o.job_id = job;
    o.node_id = x->id;
    o.host = "127.0.0.1";
    o.nproc = nproc;
    o.ports = x->ports;
    o.master_port = (uint16_t)(x->ports[0] + 9);
    o.np_min = min;
    o.np_max = max;
    o.elastic_timeout_ms = elastic_ms;
    o.lease_ttl_s = ttl;
    o.agent_version = "test";
    o.on_event = on_event;
    o.arg = x;
    x->n = ec_node_start(&o, &err);
    ck_assert_msg(x->n, "node %s did not start: %s", id, err.msg);
    nnodes++;
    return x;
}

static node_t *by_id(const char *id)
{
    for (int i = 0; i < nnodes; i++)
        if (!strcmp(nodes[i].id, id))
            return &nodes[i];
    ck_abort_msg("no node %s", id);
    return NULL;
}

/* A crash: the coordinator stops (its lease is not revoked), and the store
 * expires the lease at once instead of after its TTL. */
static void crash(node_t *x)
{
    int64_t lease = ec_node_lease(x->n);
    ec_node_stop(x->n);
    x->n = NULL;
    ec_error_t err = {0};
    ck_assert_msg(ec_etcd_mem_expire_lease(store, lease, &err) == 0, "%s", err.msg);
}

/* An epoch numbered number or later, of world size world, without the node
 * without (NULL: any). */
static ec_epoch_t *wait_epoch(const char *root, uint64_t number, int world, const char *without,
                              long ms)
{
    ec_test_epoch_want_t w = {.min = number, .world = world, .without = without};
    ec_epoch_t *ep = ec_test_wait_epoch(c, root, &w, ms);
    ck_assert_msg(ep, "no epoch >= %llu with world %d%s%s within %ld ms; log:\n%s",
                  (unsigned long long)number, world, without ? " without " : "",
                  without ? without : "", ms, logbuf);
    return ep;
}

static char *leader_of(const char *root)
{
    char key[256];
    snprintf(key, sizeof(key), "%sleader", root);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert_msg(found, "no leader key");
    char *id = strndup((char *)kv.value, kv.value_len);
    ec_kv_free(&kv);
    return id;
}

static int leaders(void)
{
    int n = 0;
    for (int i = 0; i < nnodes; i++)
        n += nodes[i].n && ec_node_is_leader(nodes[i].n);
    return n;
}

/* Three nodes of job, and their first epoch at MAX (elastic timeout long:
 * only MAX can publish it), checked member by member. */
static ec_epoch_t *form_three(const char *job, const char *root, int nproc, int ttl)
{
    const char *ids[] = {"n1", "n2", "n3"};
    for (int i = 0; i < 3; i++)
        start_node(job, ids[i], 1, 3, nproc, 600000, ttl);
    ec_epoch_t *ep = wait_epoch(root, 1, 3 * nproc, NULL, 10000);
    ck_assert_int_eq(ep->number, 1);
    ck_assert_int_eq(ep->reason, EC_REASON_START);
    ck_assert_int_eq(ep->nmembers, 3);
    for (int i = 0; i < 3; i++) {
        ec_member_t *mb = &ep->members[i];
        ck_assert_str_eq(mb->node_id, ids[i]); /* registration order */
        ck_assert_int_eq(mb->m_id, i);         /* ranks m_id * nproc + local */
        for (int r = 0; r < nproc; r++)
            ck_assert_int_eq(mb->ports[r], by_id(ids[i])->ports[r]);
    }
    return ep;
}

/* Every running node handed on epoch `number` (the store has it before
 * their watches do). */
static bool all_saw(void *number)
{
    for (int i = 0; i < nnodes; i++)
        if (nodes[i].n && ec_node_epoch_number(nodes[i].n) < *(uint64_t *)number)
            return false;
    return true;
}

START_TEST(three_nodes_one_leader_one_epoch)
{
    const char *root = "/j3/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    ec_epoch_t *ep = form_three("j3", root, 2, 10);
    ck_assert_int_eq(ep->world_size, 6);
    char *l = leader_of(root);
    ck_assert_str_eq(ep->leader_id, l);
    ck_assert(ec_node_is_leader(by_id(l)->n));
    ck_assert_int_eq(leaders(), 1);
    char ev[64];
    snprintf(ev, sizeof(ev), "%s: +leader %s", l, l);
    ck_assert(log_has(ev));
    /* the phase machine's trace: every node registered, one won */
    snprintf(ev, sizeof(ev), "%s: +phase follower -> leader", l);
    ck_assert(log_has(ev));
    for (int i = 0; i < nnodes; i++) {
        snprintf(ev, sizeof(ev), "%s: +phase registering -> follower", nodes[i].id);
        ck_assert_msg(log_has(ev), "no '%s'", ev);
        ck_assert_int_eq(ec_node_phase(nodes[i].n),
                         strcmp(nodes[i].id, l) ? EC_PHASE_FOLLOWER : EC_PHASE_LEADER);
    }
    /* emitted once the transaction returned: maybe after the test read it;
     * it names the planner's rule that decided (EC_PLAN_WHY_MAP) */
    snprintf(ev, sizeof(ev), "%s: +published epoch 1 (rule start, txn ", l);
    wait_log(ev, 5000);
    uint64_t one = 1;
    ck_assert_msg(ec_test_wait(all_saw, &one, 5000), "a node did not see epoch 1");
    ec_epoch_free(ep);
    free(l);
    ck_assert_int_eq(ec_test_obs_check(o, 1, 3, 2), 1);
    ec_test_obs_stop(o);
}
END_TEST

START_TEST(crashed_node_lease_expiry_reforms_without_it)
{
    const char *root = "/jloss/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    /* TTL 60 s: only the store's expiry can explain a new epoch in time */
    ec_epoch_free(form_three("jloss", root, 2, 60));
    char *l = leader_of(root);
    const char *victim = strcmp(l, "n2") ? "n2" : "n3";
    crash(by_id(victim));
    ec_epoch_t *ep = wait_epoch(root, 2, 4, victim, 10000);
    ck_assert_int_eq(ep->number, 2);
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ck_assert_str_eq(ep->leader_id, l);
    char line[64];
    snprintf(line, sizeof(line), "-node %s lease expired", victim);
    wait_log(line, 5000);
    uint64_t two = 2;
    ck_assert(ec_test_wait(all_saw, &two, 5000));
    ec_epoch_free(ep);
    free(l);
    ck_assert_int_eq(ec_test_obs_check(o, 1, 3, 2), 2);
    ec_test_obs_stop(o);
}
END_TEST

START_TEST(graceful_leave_reforms_at_once)
{
    const char *root = "/jleave/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    ec_epoch_free(form_three("jleave", root, 1, 60));
    char *l = leader_of(root);
    const char *victim = strcmp(l, "n2") ? "n2" : "n3";
    node_t *x = by_id(victim);
    ec_error_t err = {0};
    ck_assert_msg(ec_node_leave(x->n, &err) == 0, "%s", err.msg);
    char line[64];
    snprintf(line, sizeof(line), "%s: -node %s leaving: lease revoked", victim, victim);
    ck_assert(log_has(line));
    ec_epoch_t *ep = wait_epoch(root, 2, 2, victim, 10000);
    ck_assert_int_eq(ep->reason, EC_REASON_LEAVE);
    ck_assert_int_eq(ep->number, 2);
    snprintf(line, sizeof(line), "%s: +published epoch 2 (rule shrink, txn ", l);
    wait_log(line, 5000);
    ec_epoch_free(ep);
    free(l);
    ck_assert_int_eq(ec_test_obs_check(o, 1, 3, 1), 2);
    ec_test_obs_stop(o);
}
END_TEST

/* What the leader waits for is said once, with the planner's rule that
 * decided it (EC_PLAN_WHY_MAP), and the epoch that ends the wait names its
 * own. */
START_TEST(a_wait_and_its_end_name_the_planners_rule)
{
    const char *root = "/jwait/";
    start_node("jwait", "n1", 2, 2, 1, 600000, 60);
    wait_log("n1: +wait: waiting for 1 more node", 10000);
    wait_log("(rule need-nodes)", 1000);
    start_node("jwait", "n2", 2, 2, 1, 600000, 60);
    ec_epoch_free(wait_epoch(root, 1, 2, NULL, 10000));
    wait_log("n1: +published epoch 1 (rule start, txn ", 5000);
}
END_TEST

/* The value of n's report of epoch 1 in job `job` (malloc'd). */
static char *report_of(const char *job, const char *id)
{
    ec_keys_t k;
    ec_error_t err = {0};
    ck_assert_msg(ec_keys_init(&k, NULL, job, &err) == 0, "%s", err.msg);
    char key[512];
    ck_assert_int_gt(ec_key_epoch_suspect(&k, 1, id, key, sizeof(key)), 0);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert_msg(found, "no report at %s", key);
    char *v = strndup((char *)kv.value, kv.value_len);
    ec_kv_free(&kv);
    return v;
}

/* An agent's report of an epoch is the union of what it reported, each
 * suspect once: with the round trip it measured to it when it gave one
 * ("<id>@<rtt_us>", what the ring's watchers give; the leader's probe
 * reads it), the newest round trip kept, not lost to a later report of the
 * same id without one (a follower adding its own report of a leader). */
START_TEST(a_report_keeps_each_suspect_once_with_its_round_trip)
{
    ec_epoch_free(form_three("jrep", "/jrep/", 1, 60));
    node_t *x = by_id("n1");
    ec_error_t err = {0};
    const char *a[] = {"n2@87"}, *b[] = {"n2"}, *d[] = {"n3", "n2@90", "n3"};
    ck_assert_msg(ec_node_report_suspects(x->n, 1, a, 1, &err) == 0, "%s", err.msg);
    char *v = report_of("jrep", "n1");
    ck_assert_str_eq(v, "n2@87");
    free(v);
    ck_assert_msg(ec_node_report_suspects(x->n, 1, b, 1, &err) == 0, "%s", err.msg);
    v = report_of("jrep", "n1");
    ck_assert_str_eq(v, "n2@87");
    free(v);
    ck_assert_msg(ec_node_report_suspects(x->n, 1, d, 3, &err) == 0, "%s", err.msg);
    v = report_of("jrep", "n1");
    ck_assert_str_eq(v, "n3,n2@90");
    free(v);
    wait_log("n1: +suspect n3,n2 in epoch 1 (reported by n1)", 1000);
}
END_TEST

/* What the agent asks of its own node: the fence's clock (when etcd last
 * confirmed our lease), our lease, incarnation and boot, the epoch it
 * follows, its phase and leadership, the counters tests read, and the
 * fence's stop counted.  None of it may wait for the coordinator's loop,
 * which waits for etcd's answers as long as etcd takes, up to an etcd
 * call's deadline (a slow or frozen etcd, a large job), when the fence must
 * still trip (and lift) on time. */
typedef struct {
    ec_node_t *n;
    atomic_bool done;
    int64_t confirmed, lease;
    uint64_t incarnation, epoch, floor;
    bool leader;
    ec_node_phase_t phase;
    uint64_t events, plans;
    int created;
} own_calls_t;

static void *own_calls(void *arg)
{
    own_calls_t *r = arg;
    r->confirmed = ec_node_lease_confirmed_ms(r->n);
    r->lease = ec_node_lease(r->n);
    r->incarnation = ec_node_incarnation(r->n);
    (void)ec_node_boot(r->n);
    r->epoch = ec_node_epoch_number(r->n);
    r->floor = ec_node_epoch_floor(r->n);
    r->leader = ec_node_is_leader(r->n);
    r->phase = ec_node_phase(r->n);
    r->events = ec_node_watch_events(r->n);
    r->created = ec_node_watches_created(r->n);
    r->plans = ec_node_plans(r->n);
    ec_node_count_fence_stop(r->n); /* the fence tripped: the loop writes the count */
    atomic_store(&r->done, true);
    return NULL;
}

static bool own_calls_done(void *arg)
{
    return atomic_load(&((own_calls_t *)arg)->done);
}

/* The coordinator is in an etcd call that waits on the frozen store. */
static bool loop_in_etcd(void *arg)
{
    (void)arg;
    return ec_etcd_mem_frozen_calls(store) > 0;
}

/* Our record as etcd has it shows a stop of the fence. */
static bool fence_stop_written(void *arg)
{
    char key[256];
    snprintf(key, sizeof(key), "%snodes/n1", (const char *)arg);
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0 || !found)
        return false;
    ec_node_rec_t *rec = NULL;
    bool ok = ec_node_rec_decode(kv.value, kv.value_len, key, &rec, NULL) == 0 &&
              rec->fence_stops == 1;
    ec_node_rec_free(rec);
    ec_kv_free(&kv);
    return ok;
}

/* The node's own calls (the agent's, and those the harness watches it
 * with) while the coordinator lists the job and the listing waits on a
 * frozen etcd (a SIGSTOPped server: up to the call's deadline, 5 s): they
 * answer at once, none waits for the listing; the fence path counts its
 * stop and reads the fence's clock, and the loop writes the count into our
 * record once etcd answers again. */
START_TEST(a_nodes_own_calls_answer_while_its_loop_waits_on_a_frozen_etcd)
{
    const char *root = "/jfz/";
    node_t *x = start_node("jfz", "n1", 1, 1, 1, 600000, 30);
    ec_epoch_free(wait_epoch(root, 1, 1, NULL, 10000));
    uint64_t one = 1;
    ck_assert_msg(ec_test_wait(all_saw, &one, 5000), "n1 did not see epoch 1");
    uint64_t events = ec_node_watch_events(x->n), plans = ec_node_plans(x->n);
    ec_etcd_mem_set_frozen(store, true);
    /* a watch event was lost (white-box: what the watch thread does when it
     * cannot queue one): the loop lists the job again, and the frozen store
     * keeps the listing waiting */
    ec__feed_lost(x->n);
    ck_assert_msg(ec_test_wait(loop_in_etcd, NULL, 4000), "the loop never listed the job");
    own_calls_t r = {.n = x->n};
    pthread_t t;
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(pthread_create(&t, NULL, own_calls, &r), 0);
    bool answered = ec_test_wait(own_calls_done, &r, 1000);
    int64_t took = ec_test_now_ms() - t0;
    bool still_listing = loop_in_etcd(NULL);
    ec_etcd_mem_set_frozen(store, false);
    pthread_join(t, NULL);
    ck_assert_msg(answered && still_listing,
                  "the node's own calls waited for the listing (answered %d after %lld ms, listing "
                  "still on %d)", answered, (long long)took, still_listing);
    ck_assert_int_gt(r.confirmed, 0);
    ck_assert_int_eq(r.epoch, 1);
    ck_assert(r.leader);
    ck_assert_int_eq(r.phase, EC_PHASE_LEADER);
    ck_assert_uint_ge(r.events, events);
    ck_assert_uint_ge(r.plans, plans);
    ck_assert_int_ge(r.created, 0);
    ck_assert_msg(ec_test_wait(fence_stop_written, (void *)root, 10000),
                  "the loop never wrote the fence's stop into our record");
}
END_TEST

START_TEST(crashed_leader_replaced)
{
    const char *root = "/jldr/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    ec_epoch_free(form_three("jldr", root, 1, 60));
    char *old = leader_of(root);
    crash(by_id(old));
    ec_epoch_t *ep = wait_epoch(root, 2, 2, old, 15000);
    ck_assert_int_eq(ep->number, 2); /* numbering goes on from the stored epoch */
    ck_assert_str_ne(ep->leader_id, old);
    char *now = leader_of(root);
    ck_assert_str_eq(ep->leader_id, now);
    ck_assert(ec_node_is_leader(by_id(now)->n));
    ck_assert_int_eq(leaders(), 1);
    char line[64];
    snprintf(line, sizeof(line), "%s: +leader %s", now, now);
    ck_assert(log_has(line));
    snprintf(line, sizeof(line), "%s: +published epoch 2", now);
    wait_log(line, 5000);
    free(now);
    free(old);
    ec_epoch_free(ep);
    ck_assert_int_eq(ec_test_obs_check(o, 1, 3, 1), 2);
    ec_test_obs_stop(o);
}
END_TEST

typedef struct {
    node_t *x;
    int64_t old;
} lease_t;

static bool has_new_lease(void *arg)
{
    lease_t *l = arg;
    int64_t now = ec_node_lease(l->x->n);
    return now != 0 && now != l->old;
}

START_TEST(live_node_whose_lease_expired_comes_back)
{
    const char *root = "/jback/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    /* a short elastic timeout: the job re-forms below MAX, then takes the
     * node back */
    const char *ids[] = {"n1", "n2", "n3"};
    for (int i = 0; i < 3; i++)
        start_node("jback", ids[i], 1, 3, 1, 1000, 10);
    ec_epoch_free(wait_epoch(root, 1, 3, NULL, 10000));
    char *l = leader_of(root);
    const char *victim = strcmp(l, "n2") ? "n2" : "n3";
    node_t *x = by_id(victim);
    int64_t old = ec_node_lease(x->n);
    ck_assert_int_eq(ec_etcd_mem_expire_lease(store, old, NULL), 0);
    /* its keepalive learns it at its next refresh (TTL/3), and it
     * registers again with a new lease */
    char line[96];
    snprintf(line, sizeof(line), "%s: -lease %llx lost; registering again", victim,
             (unsigned long long)old);
    wait_log(line, 10000);
    /* through the phase machine: follower -> registering -> follower */
    snprintf(line, sizeof(line), "%s: +phase follower -> registering", victim);
    wait_log(line, 1000);
    snprintf(line, sizeof(line), "%s: +phase registering -> follower", victim);
    wait_log(line, 10000);
    ec_epoch_t *ep = wait_epoch(root, 2, 3, NULL, 15000);
    ck_assert_int_ge(ep->number, 2);
    ck_assert_int_ge(ec_epoch_find_member(ep, victim), 0);
    /* its record (and so that epoch) may come before it keeps the lease */
    lease_t nl = {x, old};
    ck_assert_msg(ec_test_wait(has_new_lease, &nl, 5000), "%s kept its old lease", victim);
    ec_epoch_free(ep);
    free(l);
    ec_test_obs_check(o, 1, 3, 1);
    ec_test_obs_stop(o);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("node_mem");
    TCase *tc = tcase_create("node_mem");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, ec_test_ms(60));
    tcase_add_test(tc, three_nodes_one_leader_one_epoch);
    tcase_add_test(tc, crashed_node_lease_expiry_reforms_without_it);
    tcase_add_test(tc, graceful_leave_reforms_at_once);
    tcase_add_test(tc, a_wait_and_its_end_name_the_planners_rule);
    tcase_add_test(tc, a_report_keeps_each_suspect_once_with_its_round_trip);
    tcase_add_test(tc, a_nodes_own_calls_answer_while_its_loop_waits_on_a_frozen_etcd);
    tcase_add_test(tc, crashed_leader_replaced);
    tcase_add_test(tc, live_node_whose_lease_expired_comes_back);
    suite_add_tcase(s, tc);
    return s;
}

EC_CHECK_MAIN(suite)
