/* Rules checked: the job model's pure core (coord/node/model.c), driven by
 * generated event streams without etcd.  A node record that vanishes counts
 * as a graceful leave only when its last value (the deletion's previous
 * value, else the model's) said LEAVING or DONE, else as a lease expiry; a
 * record that does not decode or names another node is kept as corrupt,
 * never planned; our own record overwritten without a lease asks for a
 * rewrite (self_bad) unless we are leaving; a change the planner does not
 * read only touches the loop.  The leader key feeds the log of
 * leaderships.  An epoch is installed only if it names this job and was
 * written under the leadership that held the key at its revision; an older
 * number is refused; a number that skips ahead waits for the history check.
 * Suspicion reports are one entry per key, replaced in place; failures
 * stay sorted. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "keys.h"
#include "log.h"
#include "model.h"
#include "records.h"

/* ---- a little world: the job's keys, the model, etcd's revision, clocks -- */

typedef struct world {
    ec_keys_t keys;
    ec_model_t m;
    ec_model_ctx_t ctx;
    int64_t rev;            /* etcd's revision: every event bumps it */
    int64_t mono, wall;     /* the clocks handed to each event */
    char key[EC_KEY_MAX];   /* key(): the last key built */
} world_t;

static char logbuf[16384];

static void sink(ec_log_level_t level, const char *msg, void *arg)
{
    (void)level;
    (void)arg;
    size_t used = strlen(logbuf);
    snprintf(logbuf + used, sizeof(logbuf) - used, "%s\n", msg);
}

static bool logged(const char *what)
{
    return strstr(logbuf, what) != NULL;
}

static void w_init(world_t *w, const char *me, bool wide)
{
    memset(w, 0, sizeof(*w));
    ck_assert_int_eq(ec_keys_init(&w->keys, "/ecoord", "job1", NULL), 0);
    w->ctx = (ec_model_ctx_t){.keys = &w->keys, .node_id = me, .job_id = "job1"};
    w->rev = 10;
    w->mono = 1000;
    w->wall = 1700000000000LL;
    ec_model_reset(&w->m, wide, w->rev); /* an empty listing at revision 10 */
    logbuf[0] = '\0';
    ec_log_set_sink(sink, NULL, EC_LOG_DEBUG);
}

static void w_free(world_t *w)
{
    ec_model_free(&w->m);
    ec_log_set_sink(NULL, NULL, EC_LOG_INFO);
}

/* The job's key <root><suffix>. */
static const char *key(world_t *w, const char *suffix)
{
    snprintf(w->key, sizeof(w->key), "%s%s", ec_keys_root(&w->keys), suffix);
    return w->key;
}

typedef struct change {
    bool del;
    const char *key;
    const void *val;
    size_t len;
    int64_t lease;
    int64_t create_rev; /* 0: created by this change */
    int64_t rev;        /* 0: the next revision */
    const ec_kv_t *prev;
} change_t;

/* Apply one change as a watch would deliver it; returns its effects. */
static ec_model_effects_t apply(world_t *w, change_t c)
{
    char k[EC_KEY_MAX];
    snprintf(k, sizeof(k), "%s", c.key);
    uint8_t *v = malloc(c.len + 1);
    ck_assert_ptr_nonnull(v);
    if (c.len)
        memcpy(v, c.val, c.len);
    v[c.len] = '\0';
    int64_t rev = c.rev ? c.rev : w->rev + 1;
    if (rev > w->rev)
        w->rev = rev;
    ec_kv_t kv = {.key = k, .key_len = strlen(k), .value = v, .value_len = c.del ? 0 : c.len,
                  .create_revision = c.del ? 0 : c.create_rev ? c.create_rev : rev,
                  .mod_revision = rev, .version = 1, .lease = c.del ? 0 : c.lease};
    w->mono += 7;
    w->wall += 7;
    ec_model_event_t ev = {.put = !c.del, .kv = &kv, .prev = c.prev, .mono_ms = w->mono,
                           .wall_ms = w->wall};
    ec_model_effects_t fx = {0};
    ec_model_apply(&w->m, &w->ctx, &ev, &fx);
    free(v);
    return fx;
}

/* ---- values ----------------------------------------------------------------- */

typedef struct blob {
    void *buf;
    size_t len;
} blob_t;

static blob_t node_value(const char *id, ec_node_state_t st, uint64_t epoch_seen, uint64_t seq)
{
    ec_node_rec_t *r = ec_node_rec_new(1, 0);
    ck_assert_ptr_nonnull(r);
    r->node_id = strdup(id);
    r->host = strdup("10.0.0.1");
    r->ports[0] = 6170;
    r->master_port = 29500;
    r->incarnation = 1;
    r->state = st;
    r->run = 1;
    r->epoch_seen = epoch_seen;
    r->progress.seq = seq;
    r->progress.step = seq * 10;
    blob_t b;
    ec_error_t err = {0};
    ck_assert_msg(ec_node_rec_encode(r, &b.buf, &b.len, &err) == 0, "%s", err.msg);
    ec_node_rec_free(r);
    return b;
}

static blob_t epoch_value(uint64_t number, const char *job, const char *leader, int64_t leader_rev)
{
    ec_epoch_t *ep = ec_epoch_new(1, 1);
    ck_assert_ptr_nonnull(ep);
    ep->number = number;
    ep->members[0].node_id = strdup("a");
    ep->members[0].host = strdup("10.0.0.1");
    ep->members[0].ports[0] = 6170;
    ep->members[0].master_port = 29500;
    ep->members[0].incarnation = 1;
    ep->reason = EC_REASON_START;
    ep->leader_id = strdup(leader);
    ep->leader_rev = leader_rev;
    ep->run = 1;
    ep->job_id = strdup(job);
    blob_t b;
    ec_error_t err = {0};
    ck_assert_msg(ec_epoch_encode(ep, &b.buf, &b.len, &err) == 0, "%s", err.msg);
    ec_epoch_free(ep);
    return b;
}

static ec_model_effects_t put_node(world_t *w, const char *id, ec_node_state_t st, int64_t lease,
                                   int64_t create_rev)
{
    char suffix[128];
    snprintf(suffix, sizeof(suffix), "nodes/%s", id);
    blob_t b = node_value(id, st, 0, 0);
    ec_model_effects_t fx = apply(w, (change_t){.key = key(w, suffix), .val = b.buf, .len = b.len,
                                                .lease = lease, .create_rev = create_rev});
    free(b.buf);
    return fx;
}

static ec_model_effects_t del_node(world_t *w, const char *id, const ec_kv_t *prev)
{
    char suffix[128];
    snprintf(suffix, sizeof(suffix), "nodes/%s", id);
    return apply(w, (change_t){.del = true, .key = key(w, suffix), .prev = prev});
}

/* The leader key names `id`, created at create_rev (0: by this put). */
static ec_model_effects_t put_leader(world_t *w, const char *id, int64_t create_rev, int64_t rev)
{
    return apply(w, (change_t){.key = key(w, "leader"), .val = id, .len = strlen(id), .lease = 5,
                               .create_rev = create_rev, .rev = rev});
}

static ec_model_effects_t put_epoch(world_t *w, uint64_t number, const char *job,
                                    const char *leader, int64_t leader_rev, int64_t rev)
{
    blob_t b = epoch_value(number, job, leader, leader_rev);
    ec_model_effects_t fx = apply(w, (change_t){.key = key(w, "epoch"), .val = b.buf,
                                                .len = b.len, .create_rev = 3, .rev = rev});
    free(b.buf);
    return fx;
}

/* A leader's model (wide) of node "me", in a job that node "a" leads (its
 * key just created); returns the leadership's create revision. */
static int64_t w_init_led(world_t *w)
{
    w_init(w, "me", true);
    put_leader(w, "a", 0, 0);
    return w->rev;
}

static const ec_model_node_t *node(world_t *w, const char *id)
{
    bool found;
    size_t i = ec_model_node_find(&w->m, id, &found);
    return found ? &w->m.nodes[i] : NULL;
}

/* The generated streams' numbers: a fixed-seed LCG, the same on every run. */
static unsigned next_rand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

static void assert_sorted(const world_t *w)
{
    for (size_t i = 1; i < w->m.nnodes; i++)
        ck_assert_int_lt(strcmp(w->m.nodes[i - 1].id, w->m.nodes[i].id), 0);
}

/* ---- node records ----------------------------------------------------------- */

START_TEST(node_records_put_and_deleted)
{
    world_t w;
    w_init(&w, "a", true);
    /* a new record: the planner's input changed */
    ec_model_effects_t fx = put_node(&w, "b", EC_NODE_JOINING, 7, 0);
    ck_assert(fx.dirty && !fx.touched && !fx.self_bad);
    ck_assert_int_eq(w.m.nnodes, 1);
    const ec_model_node_t *b = node(&w, "b");
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(b->rec);
    ck_assert_int_eq(b->rec->state, EC_NODE_JOINING);
    ck_assert_int_eq(b->lease, 7);
    ck_assert_int_eq(b->create_rev, w.rev);
    ck_assert_int_eq(b->mod_rev, w.rev);
    ck_assert_int_eq(b->boot_seen_ms, 0);
    ck_assert_int_eq(w.m.changed_at_ms, w.wall);
    int64_t created = w.rev;
    /* ready after joining, a progress summary: nothing the planner reads */
    fx = put_node(&w, "b", EC_NODE_READY, 7, created);
    ck_assert(fx.touched && !fx.dirty);
    ck_assert_int_eq(node(&w, "b")->rec->state, EC_NODE_READY);
    ck_assert_int_eq(node(&w, "b")->mod_rev, w.rev);
    blob_t v = node_value("b", EC_NODE_READY, 0, 42);
    fx = apply(&w, (change_t){.key = key(&w, "nodes/b"), .val = v.buf, .len = v.len, .lease = 7,
                              .create_rev = created});
    free(v.buf);
    ck_assert(fx.touched && !fx.dirty);
    ck_assert_int_eq(node(&w, "b")->rec->progress.seq, 42);
    /* a new lease (re-registered) or a leave: planned again */
    fx = put_node(&w, "b", EC_NODE_READY, 8, created);
    ck_assert(fx.dirty && !fx.touched);
    fx = put_node(&w, "b", EC_NODE_LEAVING, 8, created);
    ck_assert(fx.dirty);
    /* deleted with no previous value: the model's last record said LEAVING */
    fx = del_node(&w, "b", NULL);
    ck_assert(fx.dirty);
    ck_assert_int_eq(w.m.nnodes, 0);
    ck_assert(ec_model_has_left(&w.m, "b"));
    ck_assert(logged("-node b left"));
    /* deleted while READY: its lease expired, not a leave */
    put_node(&w, "c", EC_NODE_READY, 9, 0);
    blob_t prev = node_value("c", EC_NODE_READY, 0, 0);
    ec_kv_t pkv = {.key = (char *)key(&w, "nodes/c"), .value = prev.buf, .value_len = prev.len};
    pkv.key_len = strlen(pkv.key);
    fx = del_node(&w, "c", &pkv);
    free(prev.buf);
    ck_assert(fx.dirty);
    ck_assert(!ec_model_has_left(&w.m, "c"));
    ck_assert(logged("-node c lease expired"));
    /* the deletion's previous value wins over the model's: it said DONE */
    put_node(&w, "d", EC_NODE_READY, 9, 0);
    prev = node_value("d", EC_NODE_DONE, 0, 0);
    pkv = (ec_kv_t){.key = (char *)key(&w, "nodes/d"), .value = prev.buf, .value_len = prev.len};
    pkv.key_len = strlen(pkv.key);
    del_node(&w, "d", &pkv);
    free(prev.buf);
    ck_assert(ec_model_has_left(&w.m, "d"));
    ck_assert(logged("-node d left"));
    /* a record not in the model: nothing to count (but the loop looks) */
    logbuf[0] = '\0';
    del_node(&w, "zz", NULL);
    ck_assert(!logged("-node zz"));
    ck_assert(!ec_model_has_left(&w.m, "zz"));
    w_free(&w);
}
END_TEST

START_TEST(epochs_seen_in_leased_records_are_never_reused)
{
    world_t w;
    w_init(&w, "a", true);
    blob_t v = node_value("b", EC_NODE_READY, 9, 0);
    apply(&w, (change_t){.key = key(&w, "nodes/b"), .val = v.buf, .len = v.len, .lease = 0});
    ck_assert_int_eq(w.m.epoch_seen_max, 0); /* unleased: no agent wrote it */
    apply(&w, (change_t){.key = key(&w, "nodes/b"), .val = v.buf, .len = v.len, .lease = 4});
    ck_assert_int_eq(w.m.epoch_seen_max, 9);
    free(v.buf);
    v = node_value("c", EC_NODE_READY, 3, 0);
    apply(&w, (change_t){.key = key(&w, "nodes/c"), .val = v.buf, .len = v.len, .lease = 4});
    free(v.buf);
    ck_assert_int_eq(w.m.epoch_seen_max, 9); /* only ever grows */
    w_free(&w);
}
END_TEST

START_TEST(corrupt_or_foreign_records_are_kept_unplanned)
{
    world_t w;
    w_init(&w, "a", true);
    ec_model_effects_t fx = apply(&w, (change_t){.key = key(&w, "nodes/b"), .val = "\xff\xff junk",
                                                 .len = 7, .lease = 3});
    ck_assert(fx.dirty);
    ck_assert_ptr_nonnull(node(&w, "b"));
    ck_assert_ptr_null(node(&w, "b")->rec);
    ck_assert(logged("ignoring node record /ecoord/job1/nodes/b"));
    /* corrupt before and after: never planned, so nothing changed for it */
    fx = apply(&w, (change_t){.key = key(&w, "nodes/b"), .val = "junk", .len = 4, .lease = 3,
                              .create_rev = node(&w, "b")->create_rev});
    ck_assert(fx.touched && !fx.dirty);
    /* a record naming another node */
    blob_t v = node_value("c", EC_NODE_READY, 0, 0);
    fx = apply(&w, (change_t){.key = key(&w, "nodes/x"), .val = v.buf, .len = v.len, .lease = 3});
    free(v.buf);
    ck_assert_ptr_null(node(&w, "x")->rec);
    ck_assert(logged("ignoring node record /ecoord/job1/nodes/x: it names node 'c'; the key may "
                     "have been written by another tool"));
    /* not a node key at all; another job's keys; keys outside the model */
    size_t had = w.m.nnodes;
    fx = apply(&w, (change_t){.key = key(&w, "nodes/bad id"), .val = "x", .len = 1});
    ck_assert(!fx.dirty && !fx.touched);
    ck_assert(logged("not a valid node key"));
    fx = apply(&w, (change_t){.key = "/ecoord/job2/nodes/q", .val = "x", .len = 1});
    ck_assert(!fx.dirty && !fx.touched);
    fx = apply(&w, (change_t){.key = key(&w, "epochs/00000000000000000003/timing/0"), .val = "x",
                              .len = 1});
    ck_assert(!fx.dirty && !fx.touched);
    ck_assert_int_eq(w.m.nnodes, had);
    w_free(&w);
}
END_TEST

START_TEST(own_record_overwritten_without_a_lease_is_rewritten)
{
    world_t w;
    w_init(&w, "a", true);
    ck_assert(!put_node(&w, "a", EC_NODE_READY, 7, 0).self_bad); /* ours, leased */
    ck_assert(!put_node(&w, "b", EC_NODE_READY, 0, 0).self_bad); /* another's */
    ck_assert(put_node(&w, "a", EC_NODE_READY, 0, 0).self_bad);  /* ours, no lease */
    ck_assert(apply(&w, (change_t){.key = key(&w, "nodes/a"), .val = "junk", .len = 4, .lease = 7})
                  .self_bad); /* junk on our lease */
    w.ctx.leaving = true; /* leaving: never written again */
    ck_assert(!put_node(&w, "a", EC_NODE_READY, 0, 0).self_bad);
    /* our record saying failed is told (the leader refusing us); another's is not */
    ck_assert(put_node(&w, "a", EC_NODE_FAILED, 7, 0).self_failed);
    ck_assert(!put_node(&w, "b", EC_NODE_FAILED, 7, 0).self_failed);
    ck_assert(!put_node(&w, "a", EC_NODE_READY, 7, 0).self_failed);
    w_free(&w);
}
END_TEST

/* A generated stream of puts and deletes of 12 nodes in random states,
 * against a reference of what should be present and who left. */
START_TEST(generated_node_streams_match_a_reference)
{
    world_t w;
    w_init(&w, "n0", true);
    enum { IDS = 12 };
    int present[IDS] = {0}; /* 0: absent, else the state */
    int nleft = 0;
    unsigned seed = 12345;
    for (int step = 0; step < 3000; step++) {
        unsigned r = next_rand(&seed);
        int i = (int)(r % IDS);
        char id[8];
        snprintf(id, sizeof(id), "n%d", i);
        if (r / IDS % 3) {
            ec_node_state_t st = (ec_node_state_t)(1 + r / 36 % 5);
            put_node(&w, id, st, 1 + i, 0);
            present[i] = st;
        } else {
            bool had = present[i] != 0;
            del_node(&w, id, NULL);
            if (had && (present[i] == EC_NODE_LEAVING || present[i] == EC_NODE_DONE))
                nleft++;
            present[i] = 0;
        }
        size_t want = 0;
        for (int j = 0; j < IDS; j++)
            want += present[j] != 0;
        ck_assert_int_eq(w.m.nnodes, want);
        ck_assert_int_eq(w.m.nleft, nleft);
        assert_sorted(&w);
        for (int j = 0; j < IDS; j++) {
            snprintf(id, sizeof(id), "n%d", j);
            const ec_model_node_t *x = node(&w, id);
            ck_assert_int_eq(x != NULL, present[j] != 0);
            if (x)
                ck_assert_int_eq(x->rec->state, present[j]);
        }
        logbuf[0] = '\0';
    }
    w_free(&w);
}
END_TEST

/* ---- the leader key ----------------------------------------------------------- */

START_TEST(leader_key_and_its_log)
{
    world_t w;
    w_init(&w, "me", true);
    ec_model_effects_t fx = put_leader(&w, "a", 0, 0);
    int64_t a_rev = w.rev;
    ck_assert(fx.dirty);
    ck_assert_str_eq(w.m.leader_id, "a");
    ck_assert_int_eq(w.m.leader_create_rev, a_rev);
    ck_assert_int_eq(w.m.leader_mod_rev, a_rev);
    ck_assert_int_eq(w.m.leader_lease, 5);
    /* touched by a's epoch transaction: same leadership, newer mod revision */
    put_leader(&w, "a", a_rev, 0);
    ck_assert_int_eq(w.m.leader_create_rev, a_rev);
    ck_assert_int_eq(w.m.leader_mod_rev, w.rev);
    /* deleted: gone, and remembered as the leader that went */
    fx = apply(&w, (change_t){.del = true, .key = key(&w, "leader")});
    int64_t del_rev = w.rev;
    ck_assert(fx.dirty);
    ck_assert_ptr_null(w.m.leader_id);
    ck_assert_int_eq(w.m.leader_create_rev, 0);
    ck_assert_int_eq(w.m.leader_lease, 0);
    ck_assert_int_eq(w.m.leader_deleted_rev, del_rev);
    ck_assert_str_eq(w.m.gone_leader, "a");
    ck_assert_int_eq(w.m.gone_leader_rev, del_rev);
    /* the log tells who held the key at each revision */
    const ec_leadership_t *ls = NULL;
    ck_assert_int_eq(ec_leader_log_at(&w.m.llog, a_rev + 1, &ls), 1);
    ck_assert_str_eq(ls->id, "a");
    ck_assert_int_eq(ec_leader_log_at(&w.m.llog, del_rev, &ls), 0);
    /* our own leadership deleted: no gone leader to look into */
    put_leader(&w, "me", 0, 0);
    int64_t me_rev = w.rev;
    apply(&w, (change_t){.del = true, .key = key(&w, "leader")});
    ck_assert_str_eq(w.m.gone_leader, "a");
    ck_assert_int_eq(ec_leader_log_at(&w.m.llog, me_rev, &ls), 1);
    ck_assert_str_eq(ls->id, "me");
    w_free(&w);
}
END_TEST

/* ---- epochs --------------------------------------------------------------------- */

START_TEST(epochs_under_the_current_leadership_are_installed_in_order)
{
    world_t w;
    int64_t lr = w_init_led(&w);
    ec_model_effects_t fx = put_epoch(&w, 1, "job1", "a", lr, 0);
    ck_assert(fx.dirty && fx.epoch_installed && !fx.epoch_refused && !fx.epoch_pending);
    ck_assert_ptr_nonnull(w.m.epoch);
    ck_assert_int_eq(w.m.epoch->number, 1);
    ck_assert_int_eq(w.m.epoch_gen, 1);
    ck_assert_int_eq(w.m.epoch_mod_rev, w.rev);
    ck_assert(!w.m.epoch_bad);
    blob_t v = epoch_value(1, "job1", "a", lr);
    ck_assert_int_eq(w.m.epoch_raw_len, v.len);
    ck_assert_mem_eq(w.m.epoch_raw, v.buf, v.len);
    free(v.buf);
    fx = put_epoch(&w, 2, "job1", "a", lr, 0);
    ck_assert(fx.epoch_installed);
    ck_assert_int_eq(w.m.epoch->number, 2);
    ck_assert_int_eq(w.m.epoch_gen, 2);
    ck_assert_int_eq(w.m.epoch_seen_max, 2);
    /* an older number: refused, the epoch stays */
    fx = put_epoch(&w, 1, "job1", "a", lr, 0);
    ck_assert(fx.epoch_refused && !fx.epoch_installed);
    ck_assert(w.m.epoch_bad);
    ck_assert_int_eq(w.m.epoch->number, 2);
    ck_assert(logged("ignoring epoch 1 at /ecoord/job1/epoch: older than epoch 2 already seen "
                     "(epoch numbers only increase; forged?)"));
    /* the leader restores it: good again */
    fx = put_epoch(&w, 2, "job1", "a", lr, 0);
    ck_assert(fx.epoch_installed && !w.m.epoch_bad);
    /* deleted by someone: bad until the leader restores it */
    fx = apply(&w, (change_t){.del = true, .key = key(&w, "epoch")});
    ck_assert(fx.dirty && fx.epoch_refused && w.m.epoch_bad);
    ck_assert_int_eq(w.m.epoch_mod_rev, 0);
    ck_assert_int_eq(w.m.epoch->number, 2);
    ck_assert(logged("the epoch key /ecoord/job1/epoch was deleted by someone"));
    /* garbage */
    fx = apply(&w, (change_t){.key = key(&w, "epoch"), .val = "junk", .len = 4});
    ck_assert(fx.epoch_refused && w.m.epoch_bad);
    ck_assert(logged("ignoring epoch record: "));
    w_free(&w);
}
END_TEST

START_TEST(epoch_skipping_numbers_waits_for_the_history)
{
    world_t w;
    int64_t lr = w_init_led(&w);
    put_epoch(&w, 2, "job1", "a", lr, 0);
    /* 5 skips 3 and 4: pending until the history shows them */
    ec_model_effects_t fx = put_epoch(&w, 5, "job1", "a", lr, 0);
    int64_t r5 = w.rev;
    ck_assert(fx.epoch_pending && !fx.epoch_installed && !fx.epoch_refused);
    ck_assert(w.m.verify_pending);
    ck_assert_int_eq(w.m.verify_gap, 2);
    ck_assert_int_eq(w.m.verify_rev, r5);
    ck_assert_int_eq(w.m.verify_since_ms, w.mono);
    ck_assert_int_eq(w.m.epoch->number, 2);
    ck_assert_int_eq(w.m.epoch_seen_max, 5); /* never reused, even unbelieved */
    /* a check for another revision changes nothing */
    fx = (ec_model_effects_t){0};
    ec_model_gap_done(&w.m, r5 - 1, true, &fx);
    ck_assert(w.m.verify_pending && !fx.dirty);
    /* the history shows them: on to the leadership check, then installed */
    ec_model_gap_done(&w.m, r5, false, &fx);
    ck_assert(w.m.verify_pending);
    ck_assert_int_eq(w.m.verify_gap, 0);
    ec_leadership_t a = {.create_rev = lr, .id = (char *)"a"};
    ec_model_verify_done(&w.m, &w.ctx, r5, &a, false, &fx);
    ck_assert(fx.dirty && fx.epoch_installed && !w.m.verify_pending);
    ck_assert_int_eq(w.m.epoch->number, 5);
    /* 9 skips 6 to 8 and the history does not show them: refused */
    put_epoch(&w, 9, "job1", "a", lr, 0);
    int64_t r9 = w.rev;
    fx = (ec_model_effects_t){0};
    ec_model_gap_done(&w.m, r9, true, &fx);
    ck_assert(fx.dirty && fx.epoch_refused && w.m.epoch_bad && !w.m.verify_pending);
    ck_assert_int_eq(w.m.epoch->number, 5);
    /* a pending epoch overwritten before its check: the newer one is judged */
    put_epoch(&w, 8, "job1", "a", lr, 0);
    ck_assert(w.m.verify_pending);
    fx = put_epoch(&w, 6, "job1", "a", lr, 0);
    ck_assert(fx.epoch_installed && !w.m.verify_pending);
    ck_assert_int_eq(w.m.epoch->number, 6);
    w_free(&w);
}
END_TEST

START_TEST(epochs_of_another_job_or_leadership_are_refused)
{
    world_t w;
    w_init(&w, "me", true);
    /* no leader key since the listing: nobody may have written it */
    ec_model_effects_t fx = put_epoch(&w, 1, "job1", "a", 3, 0);
    ck_assert(fx.epoch_refused && !w.m.epoch);
    ck_assert(logged("no leader key existed at its revision"));
    put_leader(&w, "a", 0, 0);
    int64_t lr = w.rev;
    put_epoch(&w, 1, "job1", "a", lr, 0);
    ck_assert_int_eq(w.m.epoch->number, 1);
    /* another job's */
    logbuf[0] = '\0';
    fx = put_epoch(&w, 2, "job2", "a", lr, 0);
    ck_assert(fx.epoch_refused && !fx.epoch_installed);
    ck_assert(logged("names job 'job2', not 'job1'"));
    /* another leadership's token, or another node citing this one */
    fx = put_epoch(&w, 2, "job1", "a", lr - 1, 0);
    ck_assert(fx.epoch_refused);
    fx = put_epoch(&w, 2, "job1", "b", lr, 0);
    ck_assert(fx.epoch_refused);
    ck_assert_int_eq(w.m.epoch->number, 1);
    ck_assert_int_eq(w.m.epoch_gen, 1);
    /* refused numbers are seen all the same */
    ck_assert_int_eq(w.m.epoch_seen_max, 2);
    /* the leader's own 2 is installed (3 would skip it: pending) */
    put_epoch(&w, 2, "job1", "a", lr, 0);
    ck_assert_int_eq(w.m.epoch->number, 2);
    ck_assert(!w.m.epoch_bad);
    w_free(&w);
}
END_TEST

/* A follower watches the leader key and the epoch apart: the epoch can
 * come before the leader key's event of the same revision. */
START_TEST(follower_epoch_ahead_of_its_leader_events)
{
    world_t w;
    w_init(&w, "me", false); /* listed at 10 */
    ck_assert_int_eq(w.m.leader_through, 10);
    /* epoch at 12, written by a leadership created at 11 the model has not
     * seen yet: pending until the leader key's events catch up */
    ec_model_effects_t fx = put_epoch(&w, 1, "job1", "a", 11, 12);
    ck_assert(fx.epoch_pending && w.m.verify_pending && !w.m.epoch);
    put_leader(&w, "a", 11, 11);
    ck_assert(w.m.verify_pending); /* the log covers up to 11 only */
    ck_assert_int_eq(w.m.leader_through, 11);
    fx = put_leader(&w, "a", 11, 12); /* the epoch transaction's touch */
    ck_assert(fx.dirty && fx.epoch_installed && !w.m.verify_pending);
    ck_assert_int_eq(w.m.epoch->number, 1);
    ck_assert_int_eq(w.m.leader_through, 12);
    /* ahead again, but under the leadership the model holds: applied at once */
    fx = put_epoch(&w, 2, "job1", "a", 11, 14);
    ck_assert(fx.epoch_installed && !fx.epoch_pending);
    ck_assert_int_eq(w.m.epoch->number, 2);
    /* ahead under another leadership: pending; the leader key read at its
     * revision decides (here: another leader held it) */
    fx = put_epoch(&w, 3, "job1", "b", 13, 15);
    ck_assert(fx.epoch_pending);
    ec_leadership_t a = {.create_rev = 11, .id = (char *)"a"};
    fx = (ec_model_effects_t){0};
    ec_model_verify_done(&w.m, &w.ctx, 15, &a, false, &fx);
    ck_assert(fx.dirty && fx.epoch_refused && !w.m.verify_pending);
    ck_assert_int_eq(w.m.epoch->number, 2);
    /* an epoch too old for etcd's history: accepted */
    put_epoch(&w, 3, "job1", "b", 13, 16);
    fx = (ec_model_effects_t){0};
    ec_model_verify_done(&w.m, &w.ctx, 16, NULL, true, &fx);
    ck_assert(fx.epoch_installed);
    ck_assert_int_eq(w.m.epoch->number, 3);
    ck_assert(logged("which etcd compacted: its writer cannot be checked; accepting it"));
    /* the read says no leader key existed then: refused */
    put_epoch(&w, 4, "job1", "b", 13, 18);
    ck_assert(w.m.verify_pending);
    fx = (ec_model_effects_t){0};
    ec_model_verify_done(&w.m, &w.ctx, 18, NULL, false, &fx);
    ck_assert(fx.epoch_refused && !w.m.verify_pending);
    ck_assert_int_eq(w.m.epoch->number, 3);
    ck_assert(logged("no leader key existed at its revision 18"));
    w_free(&w);
}
END_TEST

/* ---- status, suspicion reports, failures ---------------------------------------- */

START_TEST(job_status)
{
    world_t w;
    w_init(&w, "me", false);
    ec_job_status_t st = {.state = EC_JOB_COMPLETED, .reason = (char *)"", .epoch = 3, .run = 2};
    blob_t v;
    ck_assert_int_eq(ec_job_status_encode(&st, &v.buf, &v.len, NULL), 0);
    ec_model_effects_t fx = apply(&w, (change_t){.key = key(&w, "status"), .val = v.buf,
                                                 .len = v.len});
    ck_assert(fx.dirty);
    ck_assert_int_eq(w.m.status_state, EC_JOB_COMPLETED);
    ck_assert_int_eq(w.m.status_run, 2);
    ck_assert_int_eq(w.m.status_mod_rev, w.rev);
    ck_assert_int_eq(w.m.status_raw_len, v.len);
    ck_assert_mem_eq(w.m.status_raw, v.buf, v.len);
    free(v.buf);
    /* corrupt: kept as stored, decoded as nothing */
    apply(&w, (change_t){.key = key(&w, "status"), .val = "junk", .len = 4});
    ck_assert_int_eq(w.m.status_state, 0);
    ck_assert_int_eq(w.m.status_run, 0);
    ck_assert_int_eq(w.m.status_raw_len, 4);
    apply(&w, (change_t){.del = true, .key = key(&w, "status")});
    ck_assert_ptr_null(w.m.status_raw);
    ck_assert_int_eq(w.m.status_mod_rev, 0);
    w_free(&w);
}
END_TEST

START_TEST(suspicion_reports_one_entry_per_key)
{
    world_t w;
    w_init(&w, "me", true);
    char k[EC_KEY_MAX], kr[EC_KEY_MAX];
    ck_assert_int_ge(ec_key_epoch_suspect(&w.keys, 3, "b", k, sizeof(k)), 0);
    ck_assert_int_ge(ec_key_epoch_suspect_src(&w.keys, 3, "b", "rank0", kr, sizeof(kr)), 0);
    /* new */
    ec_model_effects_t fx = apply(&w, (change_t){.key = k, .val = "c", .len = 1, .lease = 4});
    ck_assert(fx.dirty);
    ck_assert_int_eq(w.m.nsus, 1);
    ck_assert_int_eq(w.m.sus[0].epoch, 3);
    ck_assert_str_eq(w.m.sus[0].src, "b");
    ck_assert_str_eq(w.m.sus[0].reporter, "b");
    ck_assert_str_eq(w.m.sus[0].ids, "c");
    ck_assert_int_eq(w.m.sus[0].mod_rev, w.rev);
    ck_assert_int_eq(w.m.sus[0].seen_ms, w.mono);
    /* another source of the same node: an entry of its own, counting for b */
    apply(&w, (change_t){.key = kr, .val = "c,d", .len = 3, .lease = 4});
    ck_assert_int_eq(w.m.nsus, 2);
    ck_assert_str_eq(w.m.sus[1].src, "b/rank0");
    ck_assert_str_eq(w.m.sus[1].reporter, "b");
    /* replaced: a newer sighting */
    fx = apply(&w, (change_t){.key = k, .val = "d", .len = 1, .lease = 4});
    ck_assert(fx.dirty);
    ck_assert_int_eq(w.m.nsus, 2);
    ck_assert_str_eq(w.m.sus[0].ids, "d");
    ck_assert_int_eq(w.m.sus[0].mod_rev, w.rev);
    int64_t put_rev = w.rev;
    /* deleted: emptied in place, its last write's revision kept */
    fx = apply(&w, (change_t){.del = true, .key = k});
    ck_assert(fx.dirty);
    ck_assert_int_eq(w.m.nsus, 2);
    ck_assert_str_eq(w.m.sus[0].ids, "");
    ck_assert_int_eq(w.m.sus[0].mod_rev, put_rev);
    ck_assert_int_eq(w.m.sus[0].seen_ms, w.mono);
    /* a report of another epoch is another entry; a deletion of a report
     * never seen changes nothing */
    ck_assert_int_ge(ec_key_epoch_suspect(&w.keys, 4, "b", k, sizeof(k)), 0);
    fx = apply(&w, (change_t){.del = true, .key = k});
    ck_assert(!fx.dirty);
    ck_assert_int_eq(w.m.nsus, 2);
    apply(&w, (change_t){.key = k, .val = "c", .len = 1});
    ck_assert_int_eq(w.m.nsus, 3);
    ck_assert_int_eq(w.m.sus[2].epoch, 4);
    w_free(&w);
}
END_TEST

/* Failure records arrive in any order (a generated shuffle); the model
 * keeps their keys sorted, each once, and planning ignores them. */
START_TEST(failures_kept_sorted)
{
    world_t w;
    w_init(&w, "me", true);
    enum { NF = 64 };
    int order[NF];
    for (int i = 0; i < NF; i++)
        order[i] = i;
    unsigned seed = 7;
    for (int i = NF - 1; i > 0; i--) {
        int j = (int)(next_rand(&seed) % (unsigned)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    char k[EC_KEY_MAX];
    for (int i = 0; i < NF; i++) {
        ck_assert_int_ge(ec_key_failure(&w.keys, 1700000000000ULL + (uint64_t)order[i] * 3, "b",
                                        order[i] % 4 - 1, k, sizeof(k)), 0);
        ec_model_effects_t fx = apply(&w, (change_t){.key = k, .val = "f", .len = 1});
        ck_assert(!fx.dirty && !fx.touched);
        fx = apply(&w, (change_t){.key = k, .val = "f", .len = 1}); /* again: once */
        ck_assert_int_eq(w.m.nfails, (size_t)i + 1);
        for (size_t j = 1; j < w.m.nfails; j++)
            ck_assert_int_lt(strcmp(w.m.fails[j - 1], w.m.fails[j]), 0);
    }
    /* deleted (pruned), in another order */
    for (int i = 0; i < NF; i += 2) {
        ck_assert_int_ge(ec_key_failure(&w.keys, 1700000000000ULL + (uint64_t)i * 3, "b",
                                        i % 4 - 1, k, sizeof(k)), 0);
        apply(&w, (change_t){.del = true, .key = k});
        apply(&w, (change_t){.del = true, .key = k}); /* gone already: nothing */
    }
    ck_assert_int_eq(w.m.nfails, NF / 2);
    for (size_t j = 1; j < w.m.nfails; j++)
        ck_assert_int_lt(strcmp(w.m.fails[j - 1], w.m.fails[j]), 0);
    w_free(&w);
}
END_TEST

/* A new listing forgets what it rebuilds and keeps the epoch it judged. */
START_TEST(reset_for_a_new_listing)
{
    world_t w;
    int64_t lr = w_init_led(&w);
    put_epoch(&w, 1, "job1", "a", lr, 0);
    put_node(&w, "b", EC_NODE_READY, 3, 0);
    char k[EC_KEY_MAX];
    ec_key_epoch_suspect(&w.keys, 1, "b", k, sizeof(k));
    apply(&w, (change_t){.key = k, .val = "c", .len = 1});
    ec_key_failure(&w.keys, 5, "b", 0, k, sizeof(k));
    apply(&w, (change_t){.key = k, .val = "f", .len = 1});
    ec_model_reset(&w.m, false, 40);
    ck_assert(!w.m.wide);
    ck_assert_int_eq(w.m.leader_through, 40);
    ck_assert_int_eq(w.m.nnodes, 0);
    ck_assert_int_eq(w.m.nsus, 0);
    ck_assert_int_eq(w.m.nfails, 0);
    ck_assert_ptr_null(w.m.leader_id);
    ck_assert_int_eq(w.m.epoch_mod_rev, 0);
    ck_assert_ptr_nonnull(w.m.epoch);
    ck_assert_int_eq(w.m.epoch->number, 1);
    ck_assert_int_eq(w.m.llog.n, 0);
    /* dropped by a read (not a leave) and forgotten after a data loss */
    put_node(&w, "c", EC_NODE_LEAVING, 3, 0);
    ck_assert(ec_model_drop_node(&w.m, "c"));
    ck_assert(!ec_model_drop_node(&w.m, "c"));
    ck_assert(!ec_model_has_left(&w.m, "c"));
    uint64_t gen = w.m.epoch_gen;
    ec_model_forget_epoch(&w.m);
    ck_assert_ptr_null(w.m.epoch);
    ck_assert_ptr_null(w.m.epoch_raw);
    ck_assert_int_eq(w.m.epoch_gen, gen + 1);
    ck_assert_int_eq(w.m.epoch_seen_max, 1);
    w_free(&w);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("model", NULL, NULL,
                          EC_CHECK_TESTS(
                              node_records_put_and_deleted,
                              epochs_seen_in_leased_records_are_never_reused,
                              corrupt_or_foreign_records_are_kept_unplanned,
                              own_record_overwritten_without_a_lease_is_rewritten,
                              generated_node_streams_match_a_reference,
                              leader_key_and_its_log,
                              epochs_under_the_current_leadership_are_installed_in_order,
                              epoch_skipping_numbers_waits_for_the_history,
                              epochs_of_another_job_or_leadership_are_refused,
                              follower_epoch_ahead_of_its_leader_events,
                              job_status,
                              suspicion_reports_one_entry_per_key,
                              failures_kept_sorted,
                              reset_for_a_new_listing));
}

EC_CHECK_MAIN(suite)
