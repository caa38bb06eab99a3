/* The rule under test: a leader that has been deposed cannot publish, even
 * when it tries, because every epoch write is a transaction fenced on the
 * create revision of the leader key it won.
 *
 * Three agents (`ecoord launch`) on loopback, --nnodes=2:4: a and b form
 * epoch 1; c joins, and the leader L waits out --elastic_timeout before
 * admitting it.  L is frozen (SIGSTOP) in the middle of that wait, its leader
 * key is deleted (as a lease expiry or a follower's eviction would), another
 * agent F (b or c) takes the key and publishes the join itself.  Woken (SIGCONT),
 * L's timer has run out and it still believes it leads: it plans and sends
 * its own join epoch.  The fence refuses it: L logs "-leader L: the leader
 * key changed (epoch write fenced)", F's epoch stays, and the epoch-history
 * checker (each epoch written while its leadership lasted) passes over the
 * whole run.  Finally a transaction fenced on L's old create revision, sent
 * with the etcd client directly, fails too.
 *
 * So that L really attempts the write instead of learning of its deposition
 * first, the test makes its watch lag, as a loaded or just-resumed agent's
 * may: while L is frozen, thousands of unrelated keys are written under the
 * job before the leader key goes, and L's watch thread must read them all
 * before it sees the delete; L's coordinator thread, woken by its expired
 * timer, plans and writes meanwhile.  The lease is not what deposes L (its
 * keepalive would race the coordinator thread on waking); the key is
 * deleted, which is what the fence compares. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ec_select.h"
#include "harness.h"
#include "records.h"

#define JOB "jdep"
#define ROOT "/" JOB "/"

EC_TEST_ETCD_FIXTURE("t2200", 8)

typedef struct {
    pid_t pid;
    char id[16], log[320];
} agent_t;

static agent_t agents[4];
static int nagents;

/* Seconds, stretched by EC_TEST_TIMEOUT_MULTIPLIER. */
static long secs(long s)
{
    return ec_test_ms(s * 1000) / 1000;
}

static agent_t *start_agent(const char *id, int nproc)
{
    agent_t *a = &agents[nagents++];
    snprintf(a->id, sizeof(a->id), "%s", id);
    snprintf(a->log, sizeof(a->log), "%s/%s.console", tmp, id);
    char dump[300], logdir[300];
    snprintf(dump, sizeof(dump), "%s/dump", tmp);
    mkdir(dump, 0755);
    snprintf(logdir, sizeof(logdir), "%s/%s", tmp, id);
    /* elastic_timeout: long enough for the test to freeze the leader inside
     * it; lease: long enough that L's lease outlives its freeze (the key
     * delete deposes it, not the lease); no ring (--peer_probe_interval=0):
     * its followers would depose the frozen leader themselves, and this
     * checks the deposed leader's fenced write. */
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "exec %s launch --elastic_server=%s --job_id=" JOB " --nnodes=2:4 "
             "--nproc_per_node=%d --node_id=%s --log_dir=%s --grace_period=2 "
             "--elastic_timeout=%ld --lease_ttl=%ld --peer_probe_interval=0 -- %s %s 0",
             ec_test_bin("ECOORD", "./ecoord"), ec_embed_endpoint(etcd), nproc, id, logdir,
             secs(3), secs(30), ec_test_bin("EC_TEST_PROG", "tests/ec-test-prog"), dump);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    a->pid = ec_test_spawn(argv, a->log);
    pids[npids++] = a->pid;
    return a;
}

static agent_t *agent(const char *id)
{
    for (int i = 0; i < nagents; i++)
        if (!strcmp(agents[i].id, id))
            return &agents[i];
    ck_abort_msg("no agent %s", id);
    return NULL;
}

typedef struct {
    uint64_t number;
    const char *leader; /* NULL: any */
} want_epoch_t;

static bool epoch_reached(void *arg)
{
    want_epoch_t *w = arg;
    ec_epoch_t *ep = ec_test_epoch(c, ROOT);
    bool ok = ep && ep->number >= w->number &&
              (!w->leader || (ep->leader_id && !strcmp(ep->leader_id, w->leader)));
    ec_epoch_free(ep);
    return ok;
}

static bool key_exists(void *arg)
{
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, arg, &kv, &found, NULL, NULL) == 0 && found)
        ec_kv_free(&kv);
    return found;
}

/* Register node `id` by hand with nproc=1 (the job runs 2): the leader
 * refuses it in its record.  Not an agent, so it never campaigns. */
static void register_wrong_nproc(const char *id)
{
    ec_error_t err = {0};
    int64_t lease;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 600, &lease, NULL, &err), 0);
    uint16_t port = 1;
    ec_node_rec_t rec = {.node_id = (char *)id, .host = "127.0.0.1", .nproc = 1, .ports = &port,
                         .master_port = 2, .incarnation = 1, .state = EC_NODE_JOINING,
                         .registered_at_ms = 1};
    void *buf;
    size_t len;
    ck_assert_int_eq(ec_node_rec_encode(&rec, &buf, &len, &err), 0);
    char key[128];
    snprintf(key, sizeof(key), ROOT "nodes/%s", id);
    ck_assert_msg(ec_etcd_put(c, key, buf, len, lease, NULL, &err) == 0, "%s", err.msg);
    free(buf);
}

/* The node's record says the leader refused it: the leader's coordinator
 * thread has planned with every node registered before it. */
static bool refused(void *arg)
{
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, arg, &kv, &found, NULL, NULL) < 0 || !found)
        return false;
    ec_node_rec_t *rec = NULL;
    bool ok = ec_node_rec_decode(kv.value, kv.value_len, kv.key, &rec, NULL) == 0 &&
              rec->state == EC_NODE_FAILED && rec->reason;
    ec_node_rec_free(rec);
    ec_kv_free(&kv);
    return ok;
}

typedef struct {
    const char *id; /* the holder wanted; NULL: anyone but `not` */
    const char *not;
    int64_t rev;    /* out: its create revision */
} want_leader_t;

static bool leader_is(void *arg)
{
    want_leader_t *w = arg;
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, ROOT "leader", &kv, &found, NULL, NULL) < 0 || !found)
        return false;
    const char *v = (const char *)kv.value;
    bool ok = w->id ? !strcmp(v, w->id) : strcmp(v, w->not) != 0;
    w->rev = kv.create_revision;
    ec_kv_free(&kv);
    return ok;
}

/* Thousands of keys under the job that no agent reads: a backlog in the
 * frozen leader's watch stream ahead of the leader key's delete. */
static void write_backlog(int nkeys)
{
    static char val[200];
    memset(val, 'j', sizeof(val) - 1);
    char keys[128][64];
    ec_op_t ops[128];
    ec_error_t err = {0};
    for (int done = 0; done < nkeys;) {
        int n = nkeys - done < 128 ? nkeys - done : 128;
        for (int i = 0; i < n; i++) {
            snprintf(keys[i], sizeof(keys[i]), ROOT "zz-backlog/%06d", done + i);
            ops[i] = (ec_op_t){.type = EC_OP_PUT, .key = keys[i], .value = val,
                               .value_len = sizeof(val) - 1};
        }
        ck_assert_msg(ec_etcd_txn(c, NULL, 0, ops, (size_t)n, NULL, 0, NULL, &err) == 0,
                      "backlog: %s", err.msg);
        done += n;
    }
}

/* One try of the scenario: 1 when the deposed leader's write was fenced
 * (and every check passed), 0 when its watch caught up first, so that it
 * never tried (a race the backlog makes unlikely but, on a loaded machine,
 * not impossible: the caller tries again). */
static int attempt(void)
{
    ec_test_obs_t *o = ec_test_obs_start(c, ROOT);
    start_agent("a", 2);
    start_agent("b", 2);
    want_epoch_t w1 = {1, NULL};
    ck_assert_msg(ec_test_wait(epoch_reached, &w1, 30000 + secs(3) * 1000), "no first epoch");
    ec_epoch_t *ep1 = ec_test_epoch(c, ROOT);
    ck_assert_int_eq(ep1->nmembers, 2);
    char lid[16], fid[16];
    snprintf(lid, sizeof(lid), "%s", ep1->leader_id);
    int64_t old_rev = ep1->leader_rev;
    agent_t *L = agent(lid);
    want_leader_t still = {lid, NULL, 0};
    ck_assert(leader_is(&still) && still.rev == old_rev);

    /* c joins: L waits out elastic_timeout before admitting it.  d (wrong
     * nproc) registers after c; once L has written d's refusal, L has
     * planned with c in view, and its join timer runs. */
    start_agent("c", 2);
    ck_assert_msg(ec_test_wait(key_exists, ROOT "nodes/c", 20000), "c never registered");
    register_wrong_nproc("d");
    ck_assert_msg(ec_test_wait(refused, ROOT "nodes/d", 20000), "the leader never refused d");
    ck_assert_int_eq(kill(L->pid, SIGSTOP), 0);
    int64_t frozen_at = ec_test_now_ms();
    ec_epoch_t *ep = ec_test_epoch(c, ROOT);
    ck_assert_msg(ep->number == 1, "leader %s admitted c before it could be frozen (epoch %llu); "
                  "raise EC_TEST_TIMEOUT_MULTIPLIER", lid, (unsigned long long)ep->number);
    ec_epoch_free(ep);

    /* Depose it: backlog first, then its key goes (only if still its). */
    write_backlog(100000);
    ec_cmp_t same = {.key = ROOT "leader", .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL,
                     .number = old_rev};
    ec_op_t del = {.type = EC_OP_DELETE, .key = ROOT "leader"};
    ec_txn_result_t r;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_txn(c, &same, 1, &del, 1, NULL, 0, &r, &err), 0);
    ck_assert_msg(r.succeeded, "the leader key changed while %s was frozen", lid);
    ec_txn_result_free(&r);

    /* Another agent (b or c: whoever campaigns first) leads and publishes
     * the join itself. */
    want_leader_t nl = {NULL, lid, 0};
    ck_assert_msg(ec_test_wait(leader_is, &nl, 20000), "nobody took the leader key from %s", lid);
    ec_kv_t lk;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, ROOT "leader", &lk, &found, NULL, &err), 0);
    ck_assert(found);
    snprintf(fid, sizeof(fid), "%s", (const char *)lk.value);
    ec_kv_free(&lk);
    want_epoch_t w2 = {2, fid};
    ck_assert_msg(ec_test_wait(epoch_reached, &w2, 20000 + secs(3) * 1000),
                  "%s never published epoch 2", fid);
    ep = ec_test_epoch(c, ROOT);
    ck_assert_int_eq(ep->nmembers, 3);
    ck_assert_int_eq(ep->leader_rev, nl.rev);
    ec_epoch_free(ep);
    long frozen_ms = (long)(ec_test_now_ms() - frozen_at);

    /* Woken, L tries its own epoch 2 and is fenced. */
    ck_assert_int_eq(kill(L->pid, SIGCONT), 0);
    int64_t woken_at = ec_test_now_ms();
    char want[128];
    snprintf(want, sizeof(want), "-leader %s: the leader key changed (epoch write fenced)", lid);
    bool fenced = ec_test_wait_file(L->log, want, 20000);
    if (!fenced) {
        char other[128];
        snprintf(other, sizeof(other), "-leader %s: ", lid);
        if (ec_test_file_contains(L->log, other)) {
            /* it learned of its deposition before it tried to publish */
            ec_epoch_free(ep1);
            return 0;
        }
        ck_abort_msg("%s never logged '%s'", L->log, want);
    }
    long fenced_ms = (long)(ec_test_now_ms() - woken_at);
    /* and then it follows F's epoch as a member */
    ck_assert_msg(ec_test_wait_file(L->log, "+epoch 2 world=6", 20000),
                  "%s never followed epoch 2", lid);
    long caught_ms = (long)(ec_test_now_ms() - woken_at);
    printf("# %s frozen %ld ms, deposed at leader revision %lld; %s leads (revision %lld); "
           "woken, %s's epoch write was fenced after %ld ms, it followed epoch 2 after %ld ms\n",
           lid, frozen_ms, (long long)old_rev, fid, (long long)nl.rev, lid, fenced_ms, caught_ms);

    /* Nothing of L's landed: epoch 2 is still F's, no epoch 3. */
    ep = ec_test_epoch(c, ROOT);
    ck_assert_uint_eq(ep->number, 2);
    ck_assert_str_eq(ep->leader_id, fid);
    ec_epoch_free(ep);
    ck_assert(!key_exists(ROOT "epochs/3"));

    /* The fence itself, by hand: L's old token no longer opens the epoch. */
    ec_cmp_t fence = {.key = ROOT "leader", .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL,
                      .number = old_rev};
    ec_op_t put = {.type = EC_OP_PUT, .key = ROOT "epoch", .value = "forged", .value_len = 6};
    ck_assert_int_eq(ec_etcd_txn(c, &fence, 1, &put, 1, NULL, 0, &r, &err), 0);
    ck_assert_msg(!r.succeeded, "a txn fenced on the deposed leader's revision %lld succeeded",
                  (long long)old_rev);
    ec_txn_result_free(&r);
    ep = ec_test_epoch(c, ROOT);
    ck_assert_ptr_nonnull(ep);
    ck_assert_uint_eq(ep->number, 2);
    ec_epoch_free(ep);

    /* Each epoch written by its leader while it led. */
    ck_assert_int_ge(ec_test_obs_check(o, 2, 4, 2), 2);
    ec_test_obs_stop(o);
    ec_epoch_free(ep1);
    return 1;
}

START_TEST(deposed_leader_write_is_fenced)
{
    for (int i = 1; i <= 3; i++) {
        if (attempt())
            return;
        printf("# try %d: the deposed leader's watch caught up before it tried to publish "
               "(correct, but not the write under test): again, on a fresh etcd\n", i);
        etcd_down();
        nagents = 0;
        etcd_up();
    }
    ck_abort_msg("in 3 tries the deposed leader always learned of its deposition before it "
                 "tried to publish: the fenced write was never exercised");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("deposed-leader");
    TCase *tc = tcase_create("deposed-leader");
    tcase_add_checked_fixture(tc, etcd_up, etcd_down);
    tcase_set_timeout(tc, (double)ec_test_ms(150000) / 1000);
    ec_tcase_add(tc, deposed_leader_write_is_fenced);
    suite_add_tcase(s, tc);
    return s;
}

EC_INTEGRATION_MAIN(suite)
