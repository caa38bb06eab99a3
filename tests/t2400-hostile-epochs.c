/* Readers apply an epoch only if it names their job and was written under
 * the leader key that was current at its revision, and etcd losing its data
 * does not stall the job:
 *  - an epoch copied from another job, numbered above the current one, is
 *    ignored by every agent (no process stopped), the leader restores the
 *    last valid epoch, and the next real epoch numbers above the forged one;
 *  - an epoch written by a non-leader with its ranks swapped is ignored the
 *    same way;
 *  - an agent starting on a job whose epoch was written under a leadership
 *    that has ended checks it with a read of the leader key at the epoch's
 *    revision: a real one is applied, a replay of the ended leadership's
 *    token written after it ended is ignored;
 *  - etcd restarted with an EMPTY data dir on the same port: the agents see
 *    its history went backwards, elect a leader, publish an epoch numbered
 *    above the old one, and then handle a member's loss. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ec_select.h"
#include "epoch_delta.h"
#include "harness.h"
#include "keys.h"
#include "records.h"

EC_TEST_ETCD_FIXTURE("t2400", 16)

typedef struct {
    pid_t pid;
    char log[320];
} proc_t;

/* Start a coordinator (min, max, nproc 1, elastic_ms, ttl) and wait until
 * it is registered. */
static proc_t start_node(const char *job, const char *id, int min, int max, int elastic_ms, int ttl)
{
    proc_t p;
    char smin[16], smax[16], se[16], st[16];
    snprintf(smin, sizeof(smin), "%d", min);
    snprintf(smax, sizeof(smax), "%d", max);
    snprintf(se, sizeof(se), "%d", elastic_ms);
    snprintf(st, sizeof(st), "%d", ttl);
    snprintf(p.log, sizeof(p.log), "%s/%s-%s-%d.log", tmp, job, id, npids);
    char *argv[] = {(char *)ec_test_bin("EC_TEST_NODE", "tests/ec-test-node"),
                    (char *)ec_embed_endpoint(etcd), (char *)job, (char *)id, smin, smax, "1", se,
                    st, "0", NULL};
    p.pid = ec_test_spawn(argv, p.log);
    pids[npids++] = p.pid;
    ck_assert_msg(ec_test_wait_file(p.log, "STARTED", 10000), "node %s did not start (log %s)", id,
                  p.log);
    return p;
}

/* An epoch numbered min..max, of world size world (-1: any), without the
 * node without (NULL: any). */
static ec_epoch_t *wait_epoch(const char *root, uint64_t min, uint64_t max, int world,
                              const char *without, long ms)
{
    ec_test_epoch_want_t w = {.min = min, .max = max, .world = world, .without = without};
    ec_epoch_t *ep = ec_test_wait_epoch(c, root, &w, ms);
    ck_assert_msg(ep, "no epoch numbered %llu..%llu with world %d%s%s in %s within %ld ms",
                  (unsigned long long)min, (unsigned long long)max, world,
                  without ? " without " : "", without ? without : "", root, ms);
    return ep;
}

static void root_of(const char *job, char *root, size_t len)
{
    ec_keys_t k;
    ck_assert_int_eq(ec_keys_init(&k, NULL, job, NULL), 0);
    snprintf(root, len, "%s", ec_keys_root(&k));
}

/* Forge ep as a tool that knows the layout would: the epoch key, and in the
 * same transaction its delta from the current epoch at epochd, which is
 * what followers' coordinators watch (only the leader watches the epoch
 * key itself). */
static void put_epoch(const char *root, const ec_epoch_t *ep)
{
    char key[600], dkey[600];
    snprintf(key, sizeof(key), "%sepoch", root);
    snprintf(dkey, sizeof(dkey), "%sepochd", root);
    void *buf = NULL, *dbuf = NULL;
    size_t len = 0, dlen = 0;
    ec_error_t err = {0};
    ck_assert_msg(ec_epoch_encode(ep, &buf, &len, &err) == 0, "encode: %s", err.msg);
    ec_epoch_t *base = ec_test_epoch(c, root);
    ck_assert_msg(ec_epoch_delta_encode(base, ep, buf, len, &dbuf, &dlen, &err) == 0, "delta: %s",
                  err.msg);
    ec_epoch_free(base);
    ec_op_t ops[2] = {{.type = EC_OP_PUT, .key = key, .value = buf, .value_len = len},
                      {.type = EC_OP_PUT, .key = dkey, .value = dbuf, .value_len = dlen}};
    ck_assert_msg(ec_etcd_txn(c, NULL, 0, ops, 2, NULL, 0, NULL, &err) == 0, "put: %s", err.msg);
    free(buf);
    free(dbuf);
}

static char *leader_of(const char *root, int64_t *create_rev)
{
    char key[600];
    snprintf(key, sizeof(key), "%sleader", root);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert_msg(found, "no leader key at %s", key);
    char *id = strndup((char *)kv.value, kv.value_len);
    if (create_rev)
        *create_rev = kv.create_revision;
    ec_kv_free(&kv);
    return id;
}

typedef struct {
    const char *root;
} has_leader_t;

static bool has_leader(void *arg)
{
    char key[600];
    snprintf(key, sizeof(key), "%sleader", ((has_leader_t *)arg)->root);
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0)
        return false;
    if (found)
        ec_kv_free(&kv);
    return found;
}

/* Both logs say the epoch was ignored, neither delivered it, and the
 * leader put the last valid epoch (number keep) back. */
static void assert_ignored(const char *root, uint64_t forged, uint64_t keep, proc_t *a, proc_t *b)
{
    char ignoring[64], delivered[64];
    snprintf(ignoring, sizeof(ignoring), "ignoring epoch %llu:", (unsigned long long)forged);
    snprintf(delivered, sizeof(delivered), "EPOCH %llu ", (unsigned long long)forged);
    ec_epoch_free(wait_epoch(root, keep, keep, -1, NULL, 10000)); /* repaired */
    ck_assert_msg(ec_test_wait_file(a->log, ignoring, 5000), "%s does not say '%s'", a->log,
                  ignoring);
    ck_assert_msg(ec_test_wait_file(b->log, ignoring, 5000), "%s does not say '%s'", b->log,
                  ignoring);
    ck_assert_msg(!ec_test_file_contains(a->log, delivered), "%s applied the forged epoch %llu",
                  a->log, (unsigned long long)forged);
    ck_assert_msg(!ec_test_file_contains(b->log, delivered), "%s applied the forged epoch %llu",
                  b->log, (unsigned long long)forged);
}

START_TEST(test_epoch_of_another_job_is_ignored)
{
    char ra[300], rb[300];
    root_of("ja", ra, sizeof(ra));
    root_of("jb", rb, sizeof(rb));
    proc_t a1 = start_node("ja", "a1", 1, 2, 60000, 2);
    proc_t a2 = start_node("ja", "a2", 1, 2, 60000, 2);
    ec_epoch_free(wait_epoch(ra, 1, 1, 2, NULL, 10000));
    start_node("jb", "b1", 1, 1, 0, 5);
    ec_epoch_t *eb = wait_epoch(rb, 1, 1, 1, NULL, 10000);
    /* Job jb's epoch, renumbered above ja's, written into ja. */
    eb->number = 10;
    free(eb->job_id);
    eb->job_id = strdup("jb");
    put_epoch(ra, eb);
    ec_epoch_free(eb);
    assert_ignored(ra, 10, 1, &a1, &a2);
    /* The next real epoch numbers above the forged one. */
    kill(a2.pid, SIGKILL);
    ec_epoch_t *ep = wait_epoch(ra, 11, UINT64_MAX, 1, "a2", 15000);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(test_epoch_of_a_non_leader_is_ignored)
{
    char r[300];
    root_of("jc", r, sizeof(r));
    proc_t c1 = start_node("jc", "c1", 1, 2, 60000, 5);
    proc_t c2 = start_node("jc", "c2", 1, 2, 60000, 5);
    ec_epoch_t *ep = wait_epoch(r, 1, 1, 2, NULL, 10000);
    int64_t lrev = 0;
    char *leader = leader_of(r, &lrev);
    const char *other = strcmp(leader, "c1") ? "c1" : "c2";
    /* The non-leader's epoch 2 with ranks swapped, citing the real
     * leadership's revision under its own name. */
    ec_member_t m0 = ep->members[0];
    ep->members[0] = ep->members[1];
    ep->members[1] = m0;
    ep->members[0].m_id = 0;
    ep->members[1].m_id = 1;
    ep->number = 2;
    free(ep->leader_id);
    ep->leader_id = strdup(other);
    ep->leader_rev = lrev;
    put_epoch(r, ep);
    assert_ignored(r, 2, 1, &c1, &c2);
    /* Same, under the leader's name but a leader revision that never held
     * the key. */
    free(ep->leader_id);
    ep->leader_id = strdup(leader);
    ep->leader_rev = lrev + 1000;
    ep->number = 3;
    put_epoch(r, ep);
    assert_ignored(r, 3, 1, &c1, &c2);
    ec_epoch_free(ep);
    free(leader);
    /* Real epochs go on above both. */
    kill(c2.pid, SIGUSR1); /* processes restarted: the same members re-form */
    ec_epoch_free(wait_epoch(r, 4, UINT64_MAX, 2, NULL, 10000));
}
END_TEST

static bool no_leader(void *arg)
{
    return !has_leader(arg);
}

/* Delete the job's leader key, ending whichever leadership holds it. */
static void end_leadership(const char *root)
{
    char key[600];
    snprintf(key, sizeof(key), "%sleader", root);
    ec_error_t err = {0};
    ck_assert_msg(ec_etcd_delete(c, key, false, NULL, &err) == 0, "delete %s: %s", key,
                  err.msg);
}

static uint64_t epoch_number(const char *root)
{
    ec_epoch_t *ep = ec_test_epoch(c, root);
    ck_assert_ptr_nonnull(ep);
    uint64_t n = ep->number;
    ec_epoch_free(ep);
    return n;
}

START_TEST(test_epoch_of_an_ended_leadership_is_checked_at_its_revision)
{
    char r[300];
    root_of("jl", r, sizeof(r));
    has_leader_t hl = {r};
    /* TTL 10: x1 stays registered while frozen until y1 has joined its run
     * (with 5, under load, its lease expired while y1 started, and y1 took
     * run 1 for interrupted and started run 2) */
    proc_t x1 = start_node("jl", "x1", 1, 1, 0, 10);
    ec_epoch_free(wait_epoch(r, 1, 1, 1, NULL, 10000));
    /* x1's leadership ends while x1 is still registered (frozen, its key
     * deleted: as a lost campaign would), so run 1 still has an agent and a
     * new one joins it rather than starting a run of its own; epoch 1 stays. */
    kill(x1.pid, SIGSTOP);
    end_leadership(r);
    ck_assert_msg(ec_test_wait(no_leader, &hl, 10000), "x1's leader key outlived it");
    /* A new agent lists epoch 1, written under x1's ended leadership: it
     * reads the leader key at epoch 1's revision and applies it. */
    proc_t y1 = start_node("jl", "y1", 1, 1, 0, 5);
    ck_assert_msg(ec_test_wait_file(y1.log, "EPOCH 1 1 start x1", 10000),
                  "y1 did not apply the real epoch 1 of an ended leadership (log %s)", y1.log);
    ck_assert_msg(ec_test_wait(has_leader, &hl, 10000), "y1 did not lead");
    int64_t yrev = 0;
    free(leader_of(r, &yrev));
    /* x1 leaves the epoch when its lease expires: up to its TTL after it froze */
    ec_epoch_free(wait_epoch(r, 2, UINT64_MAX, 1, "x1", 20000));
    kill(x1.pid, SIGKILL);
    kill(y1.pid, SIGSTOP); /* as x1: registered, its leadership ended */
    end_leadership(r);
    ck_assert_msg(ec_test_wait(no_leader, &hl, 10000), "y1's leader key outlived it");
    /* y1's token replayed after its leadership ended */
    uint64_t forged = epoch_number(r) + 5;
    ec_epoch_t *ep = ec_test_epoch(c, r);
    ep->number = forged;
    free(ep->leader_id);
    ep->leader_id = strdup("y1");
    ep->leader_rev = yrev;
    put_epoch(r, ep);
    ec_epoch_free(ep);
    proc_t z1 = start_node("jl", "z1", 1, 1, 0, 5);
    char ignoring[64], delivered[64];
    snprintf(ignoring, sizeof(ignoring), "ignoring epoch %llu:", (unsigned long long)forged);
    snprintf(delivered, sizeof(delivered), "EPOCH %llu ", (unsigned long long)forged);
    ck_assert_msg(ec_test_wait_file(z1.log, ignoring, 10000), "%s does not say '%s'", z1.log,
                  ignoring);
    ck_assert_msg(ec_test_file_contains(z1.log, "no leader key existed at its revision"), "%s",
                  z1.log);
    /* z1 forms the job, numbered above the forged epoch */
    ec_epoch_free(wait_epoch(r, forged + 1, UINT64_MAX, 1, "y1", 10000));
    ck_assert_msg(!ec_test_file_contains(z1.log, delivered), "z1 applied the forged epoch");
}
END_TEST

START_TEST(test_etcd_restarted_empty_reforms_the_job)
{
    char r[300];
    root_of("jw", r, sizeof(r));
    start_node("jw", "w1", 2, 3, 60000, 2);
    start_node("jw", "w2", 2, 3, 60000, 2);
    proc_t w3 = start_node("jw", "w3", 2, 3, 60000, 2);
    ec_epoch_t *ep = wait_epoch(r, 1, UINT64_MAX, 3, NULL, 10000);
    uint64_t old = ep->number;
    ec_epoch_free(ep);
    /* Bump the numbering a little, so "above the old one" means something. */
    kill(w3.pid, SIGUSR1);
    ep = wait_epoch(r, old + 1, UINT64_MAX, 3, NULL, 10000);
    old = ep->number;
    ec_epoch_free(ep);

    ec_embed_kill(etcd, SIGKILL);
    char data[600], moved[600];
    snprintf(data, sizeof(data), "%s/data", ec_embed_dir(etcd));
    snprintf(moved, sizeof(moved), "%s/data.lost", ec_embed_dir(etcd));
    ck_assert_int_eq(rename(data, moved), 0);
    ec_error_t err = {0};
    ck_assert_msg(ec_embed_restart(etcd, &err) == 0, "etcd restart: %s", err.msg);

    has_leader_t hl = {r};
    ck_assert_msg(ec_test_wait(has_leader, &hl, 20000),
                  "no leader elected after etcd lost its data");
    ep = wait_epoch(r, old + 1, UINT64_MAX, 3, NULL, 20000);
    ec_epoch_free(ep);
    /* Then a member's loss is handled. */
    kill(w3.pid, SIGKILL);
    ec_epoch_free(wait_epoch(r, old + 2, UINT64_MAX, 2, "w3", 20000));
}
END_TEST

/* An epoch numbered far above the one applied, even under the current
 * leadership (a tool with write access copies it: only etcd's auth stops
 * that), is refused when the job's history does not hold the numbers it
 * skips: numbered UINT64_MAX it would stop the job from ever re-forming
 * (no number above it).  The leader restores the last valid epoch and the
 * job goes on re-forming above it. */
START_TEST(test_epoch_that_skips_numbers_is_refused_unless_history_holds_them)
{
    char r[300];
    root_of("jg", r, sizeof(r));
    proc_t g1 = start_node("jg", "g1", 1, 2, 60000, 5);
    proc_t g2 = start_node("jg", "g2", 1, 2, 60000, 5);
    ec_epoch_t *ep = wait_epoch(r, 1, UINT64_MAX, 2, NULL, 10000);
    uint64_t keep = ep->number;
    int64_t lrev = 0;
    char *leader = leader_of(r, &lrev);
    ck_assert_str_eq(ep->leader_id, leader);
    ck_assert_int_eq(ep->leader_rev, lrev);
    ep->number = UINT64_MAX;
    put_epoch(r, ep);
    ec_epoch_free(ep);
    assert_ignored(r, UINT64_MAX, keep, &g1, &g2);
    ck_assert_msg(ec_test_file_contains(g1.log, "and the job's history holds neither it nor them") ||
                      ec_test_file_contains(g2.log, "and the job's history holds neither it nor them"),
                  "neither %s nor %s names the skipped numbers", g1.log, g2.log);
    /* a member lost: the job re-forms above the restored epoch */
    proc_t *other = strcmp(leader, "g1") ? &g1 : &g2;
    const char *other_id = other == &g1 ? "g1" : "g2";
    kill(other->pid, SIGKILL);
    ec_epoch_free(wait_epoch(r, keep + 1, keep + 10, 1, other_id, 15000));
    free(leader);
}
END_TEST

static ec_job_status_t *status_of(const char *root, int64_t *mod_rev)
{
    char key[600];
    snprintf(key, sizeof(key), "%sstatus", root);
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0 || !found)
        return NULL;
    ec_job_status_t *st = NULL;
    ec_job_status_decode(kv.value, kv.value_len, key, &st, NULL);
    if (mod_rev)
        *mod_rev = kv.mod_revision;
    ec_kv_free(&kv);
    return st;
}

/* Returns the put's revision. */
static int64_t put_status(const char *root, const ec_job_status_t *st)
{
    char key[600];
    snprintf(key, sizeof(key), "%sstatus", root);
    void *buf = NULL;
    size_t len = 0;
    ec_error_t err = {0};
    ck_assert_msg(ec_job_status_encode(st, &buf, &len, &err) == 0, "encode: %s", err.msg);
    int64_t rev = 0;
    ck_assert_msg(ec_etcd_put(c, key, buf, len, 0, &rev, &err) == 0, "put: %s", err.msg);
    free(buf);
    return rev;
}

typedef struct {
    const char *root;
    int64_t after;
} running_t;

static bool running_again(void *arg)
{
    running_t *w = arg;
    int64_t rev = 0;
    ec_job_status_t *st = status_of(w->root, &rev);
    bool ok = st && st->state == EC_JOB_RUNNING && rev > w->after;
    ec_job_status_free(st);
    return ok;
}

/* A status that ends the run (completed, failed) makes every agent exit:
 * written by anyone but the leadership holding the leader key at the
 * time, it is ignored by every agent and the leader puts the running
 * status back; the job goes on. */
START_TEST(test_status_not_written_by_the_leadership_is_ignored_and_repaired)
{
    char r[300];
    root_of("js", r, sizeof(r));
    proc_t s1 = start_node("js", "s1", 1, 2, 60000, 5);
    proc_t s2 = start_node("js", "s2", 1, 2, 60000, 5);
    ec_epoch_t *ep = wait_epoch(r, 1, UINT64_MAX, 2, NULL, 10000);
    uint64_t keep = ep->number;
    ec_epoch_free(ep);
    int64_t lrev = 0;
    char *leader = leader_of(r, &lrev);
    ec_job_status_t *cur = status_of(r, NULL);
    ck_assert_ptr_nonnull(cur);
    uint64_t run = cur->run;
    ec_job_status_free(cur);
    /* by a tool: no leadership; then copying the leader's name under a
     * revision that never held the key */
    const char *by[2] = {"", leader};
    int64_t lr[2] = {0, lrev + 1000};
    ec_job_state_t states[2] = {EC_JOB_COMPLETED, EC_JOB_FAILED};
    proc_t *lp = strcmp(leader, "s1") ? &s2 : &s1, *fp = lp == &s1 ? &s2 : &s1;
    for (int i = 0; i < 2; i++) {
        ec_job_status_t st = {.state = states[i], .reason = "forged", .epoch = keep,
                              .updated_by = (char *)(i ? leader : "tool"), .run = run,
                              .leader_id = (char *)by[i], .leader_rev = lr[i]};
        char ignoring[96];
        snprintf(ignoring, sizeof(ignoring), "ignoring job status %s of run %llu",
                 ec_job_state_name(states[i]), (unsigned long long)run);
        /* The follower must see the forged status itself: a status is a
         * value, not a queue, and a repair that lands before the
         * follower's loop reads it would hide it (seen under load).  So
         * the leader is paused (for well under its lease's TTL: no ring
         * here) until the follower has judged it. */
        kill(lp->pid, SIGSTOP);
        /* the put's own revision: the repair is waited for after it */
        int64_t forged_rev = put_status(r, &st);
        bool judged = ec_test_wait_file(fp->log, ignoring, 2000);
        kill(lp->pid, SIGCONT);
        ck_assert_msg(judged, "%s (the follower) does not say '%s'", fp->log, ignoring);
        running_t w = {r, forged_rev};
        ck_assert_msg(ec_test_wait(running_again, &w, 10000),
                      "the leader did not put the running status back over a forged %s",
                      ec_job_state_name(states[i]));
        ck_assert_msg(ec_test_wait_file(lp->log, ignoring, 5000), "%s (the leader) does not say '%s'",
                      lp->log, ignoring);
    }
    ck_assert_msg(!ec_test_file_contains(s1.log, "JOB completed") &&
                      !ec_test_file_contains(s1.log, "JOB failed") &&
                      !ec_test_file_contains(s2.log, "JOB completed") &&
                      !ec_test_file_contains(s2.log, "JOB failed"),
                  "an agent acted on a forged status (%s, %s)", s1.log, s2.log);
    /* the job goes on: a member's loss re-forms it */
    proc_t *other = strcmp(leader, "s1") ? &s1 : &s2;
    kill(other->pid, SIGKILL);
    ec_epoch_free(wait_epoch(r, keep + 1, UINT64_MAX, 1, other == &s1 ? "s1" : "s2", 15000));
    free(leader);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t2400-hostile-epochs");
    TCase *t = tcase_create("hostile-epochs");
    tcase_add_checked_fixture(t, etcd_up, etcd_down);
    ec_tcase_add(t, test_epoch_of_another_job_is_ignored);
    ec_tcase_add(t, test_epoch_of_a_non_leader_is_ignored);
    ec_tcase_add(t, test_epoch_of_an_ended_leadership_is_checked_at_its_revision);
    ec_tcase_add(t, test_etcd_restarted_empty_reforms_the_job);
    ec_tcase_add(t, test_epoch_that_skips_numbers_is_refused_unless_history_holds_them);
    ec_tcase_add(t, test_status_not_written_by_the_leadership_is_ignored_and_repaired);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
