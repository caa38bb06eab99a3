/* The coordination core with a real etcd and coordinators in separate
 * processes: the first epoch forms at MAX at once and below MAX after
 * elastic_timeout; a lost lease and a graceful leave each yield a new epoch
 * without the node; a leader killed with -9 is replaced and numbering goes
 * on; a leader frozen past its TTL cannot publish when it wakes and steps
 * down; a standby takes a lost member's M_id and nobody else moves; a
 * duplicate node id is refused; a restart re-forms the same members; a node
 * with the wrong N is refused with the reason in its record; a process
 * squatting on a dead agent's probe port fools neither its ring watchers nor
 * its same-id restart (it cannot prove membership of the run); whether a node
 * leads can be read from another thread (a data race under TSan before).
 * Every test ends with the epoch-history checker. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ec_select.h"
#include "etcd_proxy.h"
#include "harness.h"
#include "keys.h"
#include "node.h"
#include "records.h"

EC_TEST_ETCD_FIXTURE("t2000", 32)

static const char *node_bin(void)
{
    return ec_test_bin("EC_TEST_NODE", "tests/ec-test-node");
}

typedef struct {
    pid_t pid;
    char log[320];
} proc_t;

#define wait_log ec_test_wait_file

/* Start a coordinator reaching etcd at endpoint and wait until it is
 * registered. */
static proc_t start_node_at(const char *endpoint, const char *job, const char *id, int min,
                            int max, int nproc, int elastic_ms, int ttl, int replace_ms)
{
    proc_t p;
    char smin[16], smax[16], sn[16], se[16], st[16], sr[16];
    snprintf(smin, sizeof(smin), "%d", min);
    snprintf(smax, sizeof(smax), "%d", max);
    snprintf(sn, sizeof(sn), "%d", nproc);
    snprintf(se, sizeof(se), "%d", elastic_ms);
    snprintf(st, sizeof(st), "%d", ttl);
    snprintf(sr, sizeof(sr), "%d", replace_ms);
    snprintf(p.log, sizeof(p.log), "%s/%s-%s-%d.log", tmp, job, id, npids);
    char *argv[] = {(char *)node_bin(), (char *)endpoint, (char *)job, (char *)id,
                    smin, smax, sn, se, st, sr, NULL};
    p.pid = ec_test_spawn(argv, p.log);
    pids[npids++] = p.pid;
    ck_assert_msg(wait_log(p.log, "STARTED", 10000) || wait_log(p.log, "ERROR", 1),
                  "node %s did not start (log %s)", id, p.log);
    return p;
}

static proc_t start_node(const char *job, const char *id, int min, int max, int nproc,
                         int elastic_ms, int ttl, int replace_ms)
{
    return start_node_at(ec_embed_endpoint(etcd), job, id, min, max, nproc, elastic_ms, ttl,
                         replace_ms);
}

/* An epoch numbered number or later, of world size world (-1: any), without
 * the node without (NULL: any). */
static ec_epoch_t *wait_epoch(const char *root, uint64_t number, int world, const char *without,
                              long ms)
{
    ec_test_epoch_want_t w = {.min = number, .world = world, .without = without};
    ec_epoch_t *ep = ec_test_wait_epoch(c, root, &w, ms);
    ck_assert_msg(ep, "no epoch >= %llu with world %d%s%s within %ld ms",
                  (unsigned long long)number, world, without ? " without " : "",
                  without ? without : "", ms);
    return ep;
}

static char *leader_of(const char *root)
{
    char key[600];
    snprintf(key, sizeof(key), "%sleader", root);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert(found);
    char *id = strdup((char *)kv.value);
    ec_kv_free(&kv);
    return id;
}

static char *leader_of_or_null(const char *root)
{
    char key[600];
    snprintf(key, sizeof(key), "%sleader", root);
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0 || !found)
        return NULL;
    char *id = strndup((char *)kv.value, kv.value_len);
    ec_kv_free(&kv);
    return id;
}

typedef struct {
    const char *root, *id;
} leads_t;

static bool leads(void *arg)
{
    leads_t *l = arg;
    char *id = leader_of_or_null(l->root);
    bool yes = id && !strcmp(id, l->id);
    free(id);
    return yes;
}

static proc_t *by_id(proc_t *ps, const char **ids, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(ids[i], id))
            return &ps[i];
    return NULL;
}

/* Three nodes of job (key root `root`, ids ids[], N = nproc, lease TTL
 * ttl s, --np=1:3) formed into epoch 1; its leader (malloc'd). */
static char *form_three(const char *job, const char *root, const char **ids, proc_t *ps,
                        int nproc, int ttl)
{
    for (int i = 0; i < 3; i++)
        ps[i] = start_node(job, ids[i], 1, 3, nproc, 600000, ttl, 0);
    ec_epoch_free(wait_epoch(root, 1, 3 * nproc, NULL, 10000));
    return leader_of(root);
}

START_TEST(first_epoch_at_max_at_once)
{
    const char *root = "/jmax/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    start_node("jmax", "n1", 2, 3, 2, 600000, 10, 0);
    start_node("jmax", "n2", 2, 3, 2, 600000, 10, 0);
    start_node("jmax", "n3", 2, 3, 2, 600000, 10, 0);
    /* elastic_timeout is 10 minutes: only reaching MAX can publish this. */
    ec_epoch_t *ep = wait_epoch(root, 1, 6, NULL, 10000);
    ck_assert_int_eq(ep->number, 1);
    ck_assert_int_eq(ep->reason, EC_REASON_START);
    ck_assert_int_eq(ep->nmembers, 3);
    ck_assert_str_eq(ep->members[0].node_id, "n1"); /* registration order */
    ck_assert_str_eq(ep->members[1].node_id, "n2");
    ck_assert_str_eq(ep->members[2].node_id, "n3");
    char *l = leader_of(root);
    ck_assert_str_eq(ep->leader_id, l);
    free(l);
    ec_epoch_free(ep);
    ck_assert_int_eq(ec_test_obs_check(o, 2, 3, 2), 1);
    ec_test_obs_stop(o);
}
END_TEST

START_TEST(below_max_after_elastic_timeout)
{
    const char *root = "/jtmo/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    start_node("jtmo", "a", 2, 4, 1, 1500, 10, 0);
    /* before b registers: the set is stable from b's registration on, so
     * the epoch comes no sooner than 1500 ms after this (taken after b's
     * start returned, a descheduled test would see less) */
    int64_t t0 = ec_test_now_ms();
    start_node("jtmo", "b", 2, 4, 1, 1500, 10, 0);
    ec_epoch_t *ep = wait_epoch(root, 1, 2, NULL, 10000);
    /* Not before the set has been stable for elastic_timeout. */
    ck_assert_int_ge(ec_test_now_ms() - t0, 1400);
    ck_assert_int_eq(ep->reason, EC_REASON_START);
    ec_epoch_free(ep);
    ec_test_obs_check(o, 2, 4, 1);
    ec_test_obs_stop(o);
}
END_TEST

START_TEST(lease_expiry_reforms_without_node)
{
    const char *root = "/jloss/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    /* TTL 4 s: the killed node is found by its peers' probes; a survivor's
     * keepalive stalled on a loaded machine does not lose its lease and
     * add an epoch */
    char *l = form_three("jloss", root, ids, ps, 2, 4);
    const char *victim = strcmp(l, "n2") ? "n2" : "n3";
    kill(by_id(ps, ids, 3, victim)->pid, SIGKILL);
    ec_epoch_t *ep = wait_epoch(root, 2, 4, victim, 10000);
    ck_assert_int_eq(ep->number, 2);
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ec_epoch_free(ep);
    free(l);
    ec_test_obs_check(o, 1, 3, 2);
    ec_test_obs_stop(o);
}
END_TEST

START_TEST(graceful_leave_reforms_at_once)
{
    /* TTL 60 s: only the revoke can explain a new epoch within 10 s. */
    const char *root = "/jleave/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    char *l = form_three("jleave", root, ids, ps, 1, 60);
    const char *victim = strcmp(l, "n2") ? "n2" : "n3";
    kill(by_id(ps, ids, 3, victim)->pid, SIGTERM);
    ec_epoch_t *ep = wait_epoch(root, 2, 2, victim, 10000);
    ck_assert_int_eq(ep->reason, EC_REASON_LEAVE);
    ck_assert_int_eq(ec_test_reap(by_id(ps, ids, 3, victim)->pid, 5000), 0);
    ec_epoch_free(ep);
    free(l);
    ec_test_obs_check(o, 1, 3, 1);
    ec_test_obs_stop(o);
}
END_TEST

START_TEST(leader_kill9_replaced)
{
    const char *root = "/jldr/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    /* TTL 4 s: as in lease_expiry_reforms_without_node */
    char *old = form_three("jldr", root, ids, ps, 1, 4);
    kill(by_id(ps, ids, 3, old)->pid, SIGKILL);
    ec_epoch_t *ep = wait_epoch(root, 2, 2, old, 10000);
    ck_assert_int_eq(ep->number, 2); /* numbering goes on from the stored epoch */
    ck_assert_str_ne(ep->leader_id, old);
    char *now = leader_of(root);
    ck_assert_str_eq(ep->leader_id, now);
    free(now);
    free(old);
    ec_epoch_free(ep);
    ck_assert_int_eq(ec_test_obs_check(o, 1, 3, 1), 2);
    ec_test_obs_stop(o);
}
END_TEST

/* A vacant leadership is deferred to a senior member (a member of the
 * current epoch registered before it) for EC_CAMPAIGN_DEFER_MS only: a
 * junior (a standby registered after the epoch) takes it while the only
 * senior left is frozen with a long lease, long before that lease runs out.
 * (The loop used to restart the deferral on every pass: the junior waited
 * for the senior's lease.) */
START_TEST(junior_takes_vacant_leadership_after_the_seniors_head_start)
{
    const char *root = "/jdefer/";
    proc_t p1 = start_node("jdefer", "jd1", 1, 2, 1, 600000, 2, 0);
    ck_assert_msg(ec_test_wait_file(p1.log, "+leader", 10000), "jd1 did not lead");
    proc_t p2 = start_node("jdefer", "jd2", 1, 2, 1, 600000, 60, 0);
    ec_epoch_free(wait_epoch(root, 1, 2, NULL, 10000));
    proc_t p3 = start_node("jdefer", "jd3", 1, 2, 1, 600000, 2, 0); /* a standby: junior */
    char *l = leader_of(root);
    ck_assert_str_eq(l, "jd1");
    free(l);
    ec_test_sigstop(p2.pid); /* the senior: alive to etcd for 60 s, campaigning never */
    kill(p1.pid, SIGKILL);
    int64_t t0 = ec_test_now_ms();
    bool n3_leads = false;
    while (ec_test_now_ms() - t0 < 40000 && !n3_leads) {
        char *id = leader_of_or_null(root);
        n3_leads = id && !strcmp(id, "jd3");
        free(id);
        if (!n3_leads)
            ec_test_wait_file(p3.log, "+leader", 100);
    }
    int64_t took = ec_test_now_ms() - t0;
    kill(p2.pid, SIGCONT);
    ck_assert_msg(n3_leads, "the junior jd3 did not take the vacant leadership within 40 s "
                            "(the frozen senior's lease is 60 s)");
    printf("# the junior led %lld ms after the leader's death (its lease 2 s, the "
           "senior's head start %d ms)\n", (long long)took, 2000);
}
END_TEST

START_TEST(frozen_leader_cannot_publish)
{
    const char *root = "/jstop/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    char *old = form_three("jstop", root, ids, ps, 1, 2);
    proc_t *p = by_id(ps, ids, 3, old);
    ec_test_sigstop(p->pid);
    /* Past its TTL the others re-form without it under a new leader. */
    ec_epoch_t *ep = wait_epoch(root, 2, 2, old, 10000);
    ck_assert_str_ne(ep->leader_id, old);
    ec_epoch_free(ep);
    kill(p->pid, SIGCONT);
    /* It wakes as a deposed leader: it steps down, re-registers, and comes
     * back as a joiner in an epoch written by the new leader. */
    ck_assert_msg(wait_log(p->log, "-leader", 10000), "the old leader never stepped down");
    ep = wait_epoch(root, 3, 3, NULL, 15000);
    ck_assert_str_ne(ep->leader_id, old);
    ec_epoch_free(ep);
    free(old);
    ec_test_obs_check(o, 1, 3, 1); /* every epoch by the then-leader, none by the deposed one */
    ec_test_obs_stop(o);
}
END_TEST

START_TEST(standby_promotion_keeps_ranks)
{
    const char *root = "/jspare/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    const char *ids[] = {"n1", "n2", "n3", "n4"};
    proc_t ps[4];
    for (int i = 0; i < 4; i++)
        ps[i] = start_node("jspare", ids[i], 1, 3, 2, 600000, 60, 0);
    ec_epoch_t *ep = wait_epoch(root, 1, 6, NULL, 10000);
    ck_assert_int_lt(ec_epoch_find_member(ep, "n4"), 0); /* n4 is the standby */
    char *l = leader_of(root);
    const char *victim = strcmp(l, "n2") ? "n2" : "n1";
    int vmid = ec_epoch_find_member(ep, victim);
    ec_epoch_t *before = ep;
    kill(by_id(ps, ids, 4, victim)->pid, SIGTERM);
    ep = wait_epoch(root, 2, 6, victim, 10000);
    ck_assert_int_eq(ep->reason, EC_REASON_SPARE_PROMOTED);
    ck_assert_str_eq(ep->members[vmid].node_id, "n4"); /* the standby takes its M_id */
    for (int m = 0; m < 3; m++)
        if (m != vmid)
            ck_assert_str_eq(ep->members[m].node_id, before->members[m].node_id);
    ec_epoch_free(before);
    ec_epoch_free(ep);
    free(l);
    ec_test_obs_check(o, 1, 3, 2);
    ec_test_obs_stop(o);
}
END_TEST

/* The probe port in node id's record of job root ("/job/"), 0 if none. */
static uint16_t probe_port_of(const char *root, const char *id)
{
    char key[600];
    snprintf(key, sizeof(key), "%snodes/%s", root, id);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert_msg(found, "no record %s", key);
    ec_node_rec_t *rec = NULL;
    ck_assert_int_eq(ec_node_rec_decode(kv.value, kv.value_len, NULL, &rec, NULL), 0);
    uint16_t port = rec->probe_port;
    ec_node_rec_free(rec);
    ec_kv_free(&kv);
    return port;
}

/* Three nodes of job (key root root) with ids ids[], their rings probing
 * every 100 ms, formed into epoch 1; the leader (malloc'd), and a victim
 * that is not the leader with its probe port. */
static char *ring_of_three(const char *job, const char *root, const char **ids, proc_t *ps,
                           const char **victim, uint16_t *port)
{
    setenv("EC_TEST_WATCH_PEERS_MS", "100", 1);
    char *l = form_three(job, root, ids, ps, 1, 10);
    unsetenv("EC_TEST_WATCH_PEERS_MS");
    *victim = strcmp(l, ids[2]) ? ids[2] : ids[1];
    *port = probe_port_of(root, *victim);
    ck_assert_uint_gt(*port, 0);
    return l;
}

/* (In a child) a socket bound to 127.0.0.1:port as soon as the port is
 * free, trying for 10 s: every 10 ms, or without pause (spin) to take it
 * the moment a killed agent's socket goes; -1 when it never was. */
static int bind_when_free(uint16_t port, bool spin)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int64_t end = ec_test_now_ms() + 10000; ec_test_now_ms() < end;) {
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
        if (!spin)
            poll(NULL, 0, 10);
    }
    close(fd);
    return -1;
}

/* The attack the probe's proof stops: a process (not an agent of the job) listening on
 * a dead node's probe port on 127.0.0.1 and answering every connection
 * with what agents used to answer, "ecoord <id>\n", without reading
 * anything.  A child process (killed by teardown); returns once it
 * listens. */
static pid_t start_impostor(uint16_t port, const char *id)
{
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(ready[0]);
        int fd = bind_when_free(port, false); /* the killed agent's socket may linger */
        if (fd < 0 || listen(fd, 128) < 0)
            _exit(1);
        ssize_t w = write(ready[1], "x", 1);
        (void)w;
        char line[300];
        snprintf(line, sizeof(line), "ecoord %s\n", id);
        for (;;) {
            int cfd = accept(fd, NULL, NULL);
            if (cfd < 0)
                continue;
            w = send(cfd, line, strlen(line), MSG_NOSIGNAL);
            close(cfd);
        }
    }
    close(ready[1]);
    pids[npids++] = pid;
    struct pollfd pf = {ready[0], POLLIN, 0};
    char b;
    ck_assert_msg(poll(&pf, 1, (int)ec_test_ms(10000)) == 1 && read(ready[0], &b, 1) == 1,
                  "the impostor could not listen on 127.0.0.1:%u", port);
    close(ready[0]);
    return pid;
}

/* A host that is gone, as its peers see it: nothing answers a SYN to its
 * probe port (no handshake, no refusal).  A child process binds port on
 * 127.0.0.1 as soon as it is free (trying without pause, so that the
 * killed agent's port refuses for as short a time as possible), listens
 * with no backlog and fills it with one connection of its own: the kernel
 * then drops every SYN to it.  Killed by teardown; *ready becomes readable
 * once it holds the port (black_hole_ready). */
static pid_t start_black_hole(uint16_t port, int *ready_fd)
{
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(ready[0]);
        int fd = bind_when_free(port, true);
        if (fd < 0 || listen(fd, 0) < 0)
            _exit(1);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int self = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(self, (struct sockaddr *)&sa, sizeof(sa)) < 0)
            _exit(1);
        ssize_t w = write(ready[1], "x", 1);
        (void)w;
        for (;;)
            pause();
    }
    close(ready[1]);
    pids[npids++] = pid;
    *ready_fd = ready[0];
    return pid;
}

/* Wait for start_black_hole's child to hold its port. */
static void black_hole_ready(pid_t pid, int ready_fd, uint16_t port)
{
    struct pollfd rf = {ready_fd, POLLIN, 0};
    char b;
    ck_assert_msg(poll(&rf, 1, (int)ec_test_ms(10000)) == 1 && read(ready_fd, &b, 1) == 1,
                  "process %d could not hold 127.0.0.1:%u", (int)pid, port);
    close(ready_fd);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* a connect now gets no handshake: poll it for 200 ms */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(fd, 0);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    ck_assert(rc < 0 && errno == EINPROGRESS);
    struct pollfd pf = {fd, POLLOUT, 0};
    ck_assert_msg(poll(&pf, 1, 200) == 0, "127.0.0.1:%u still completes a handshake", port);
    close(fd);
}

/* A node whose host is gone (its probe port drops every SYN) is found by
 * its ring watchers, and the leader's confirmation takes no handshake to a
 * whole set of its probes as final when the watchers measured the link
 * fast: one set of the floor's deadline (250 ms), not a second of twice
 * that (the allowance for a slow link).  The re-formed epoch comes long
 * before the 10 s lease. */
START_TEST(a_gone_host_is_evicted_on_one_set_of_the_leaders_probes)
{
    const char *root = "/jgh/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    const char *ids[] = {"gh1", "gh2", "gh3"}, *victim;
    proc_t ps[3];
    uint16_t port;
    char *l = ring_of_three("jgh", root, ids, ps, &victim, &port);
    proc_t *v = by_id(ps, ids, 3, victim);
    /* both its watchers (the other two) measured the link to it */
    char watching[64];
    snprintf(watching, sizeof(watching), "ring: watching %s at", victim);
    for (int i = 0; i < 3; i++)
        if (strcmp(ids[i], victim))
            ck_assert(wait_log(ps[i].log, watching, 5000));
    int hole_ready;
    pid_t hole = start_black_hole(port, &hole_ready);
    int64_t t0 = ec_test_now_ms();
    kill(v->pid, SIGKILL);
    ck_assert_int_eq(ec_test_reap(v->pid, 5000), 128 + SIGKILL);
    black_hole_ready(hole, hole_ready, port);
    ec_epoch_t *ep = wait_epoch(root, 2, 2, victim, 5000);
    printf("# host gone (SYNs dropped): %lld ms from the kill to an epoch without it (lease TTL "
           "10 s)\n", (long long)(ec_test_now_ms() - t0));
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ec_epoch_free(ep);
    /* the leader's line: no answer within one set of 250 ms, on a link its
     * reporters measured (a loaded machine can stretch their estimate past
     * what takes the set as final: then two sets, and the line says why) */
    const char *leader_log = by_id(ps, ids, 3, l)->log;
    char want[200];
    snprintf(want, sizeof(want), "-node %s evicted: suspected by ", victim);
    ck_assert(wait_log(leader_log, want, 2000));
    ck_assert_msg(ec_test_file_contains(leader_log, "probes of 127.0.0.1:") &&
                      (ec_test_file_contains(leader_log, "within 250 ms; round trip ") ||
                       ec_test_file_contains(leader_log, "too slow to take")),
                  "the leader's confirmation did not take the watchers' round trip");
    ck_assert_msg(!ec_test_file_contains(leader_log, "refused to"),
                  "the gone host's port refused: the black hole came too late");
    free(l);
    ec_test_obs_check(o, 1, 3, 1);
    ec_test_obs_stop(o);
}
END_TEST

START_TEST(duplicate_node_id_refused)
{
    start_node("jdup", "same", 1, 2, 1, 600000, 2, 0);
    proc_t b = start_node("jdup", "same", 1, 2, 1, 600000, 2, 0);
    /* The second waits out at most one TTL for the record to expire; it keeps
     * being refreshed, so it is a live duplicate. */
    int st = ec_test_reap(b.pid, 10000);
    ck_assert_int_eq(st, 3);
    ck_assert(ec_test_file_contains(b.log, "already registered by a live agent"));
    ck_assert(ec_test_file_contains(b.log, "--node_id"));
}
END_TEST

/* What a StatefulSet pod restart does: the agent is killed and starts again
 * at once with the same node id, while its old record (long TTL) is still
 * there.  The old agent does not answer a probe, so the new one takes its
 * record over at once; it never waits out the old lease, and its own lease
 * never expires while it waits.  The old leader key (on the old lease) goes
 * with it, so the job re-forms under a new leadership. */
START_TEST(restarted_node_id_takes_over_its_record)
{
    const char *root = "/jsame/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    proc_t a = start_node("jsame", "a", 1, 2, 1, 0, 30, 0);
    ec_epoch_free(wait_epoch(root, 1, 1, NULL, 10000));
    kill(a.pid, SIGKILL);
    ck_assert_int_eq(ec_test_reap(a.pid, 5000), 128 + SIGKILL);
    /* a TTL shorter than the old record's remainder, as reported */
    proc_t b = start_node("jsame", "a", 1, 2, 1, 0, 3, 0);
    ck_assert_msg(wait_log(b.log, "STARTED", 10000),
                  "the restarted node did not register within 10 s (old TTL 30 s); log %s",
                  b.log);
    ck_assert(!ec_test_file_contains(b.log, "ERROR"));
    /* it leads again and publishes an epoch with itself, well before 30 s */
    ec_epoch_t *ep = wait_epoch(root, 2, 1, NULL, 10000);
    ck_assert_int_eq(ec_epoch_find_member(ep, "a"), 0);
    ec_epoch_free(ep);
    /* its new lease stays alive: still registered after more than its TTL */
    ck_assert(!wait_log(b.log, "registering again", 4500));
    ec_test_obs_check(o, 1, 2, 1);
    ec_test_obs_stop(o);
}
END_TEST

/* The same restart with an impostor on the dead agent's probe port (issue
 * 27): it answers the old fixed line but cannot prove membership of the
 * run, so the restarted agent takes it for dead and takes its record over
 * at once; it neither waits out the old 30 s lease nor refuses to start as
 * a duplicate.  (The restarted agent answers on another port: the impostor
 * holds the old one.) */
START_TEST(restarted_node_id_not_fooled_by_an_impostor)
{
    const char *root = "/jimp/";
    proc_t a = start_node("jimp", "imp-a", 1, 2, 1, 0, 30, 0);
    ec_epoch_free(wait_epoch(root, 1, 1, NULL, 10000));
    uint16_t port = probe_port_of(root, "imp-a");
    ck_assert_uint_gt(port, 0);
    kill(a.pid, SIGKILL);
    ck_assert_int_eq(ec_test_reap(a.pid, 5000), 128 + SIGKILL);
    start_impostor(port, "imp-a");
    char other[16];
    snprintf(other, sizeof(other), "%u", (unsigned)(port - 1));
    setenv("EC_TEST_PROBE_PORT", other, 1);
    int64_t t0 = ec_test_now_ms();
    proc_t b = start_node("jimp", "imp-a", 1, 2, 1, 0, 3, 0);
    int64_t took = ec_test_now_ms() - t0;
    unsetenv("EC_TEST_PROBE_PORT");
    printf("# same-id restart with an impostor on the old probe port: registered in %lld ms "
           "(old lease TTL 30 s)\n", (long long)took);
    ck_assert_msg(wait_log(b.log, "STARTED", 1) && took < ec_test_ms(3000),
                  "the restarted node did not register within 3 s with an impostor on its old "
                  "probe port (old TTL 30 s); log %s", b.log);
    ck_assert(!ec_test_file_contains(b.log, "ERROR"));
    ck_assert(wait_log(b.log, "took over its record", 1000));
}
END_TEST

static int64_t lease_in_log(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    long long lease = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "STARTED %*s lease=%llx", &lease) == 1)
            break;
    fclose(f);
    return (int64_t)lease;
}

/* A leader key that names this node on this node's lease, while the node
 * does not believe it leads (a campaign applied whose reply was lost, a
 * failed read after a rejected publish): the node adopts the leadership
 * instead of leaving the job leaderless for good.  Produced here by doing
 * the node's own campaign for it while it is stopped. */
START_TEST(leader_key_naming_me_is_adopted)
{
    const char *root = "/jadopt/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    char key[128];
    snprintf(key, sizeof(key), "%sleader", root);
    /* someone else (a live lease) leads, so the node does not campaign */
    int64_t other;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 30, &other, NULL, NULL), 0);
    ck_assert_int_eq(ec_etcd_put(c, key, "ghost", 5, other, NULL, NULL), 0);
    proc_t a = start_node("jadopt", "a", 1, 1, 1, 0, 5, 0);
    int64_t mine = lease_in_log(a.log);
    ck_assert(mine != 0);
    ec_test_sigstop(a.pid);
    /* the other leader goes; a's campaign (create if absent, on a's lease)
     * is applied, and a never hears the answer */
    ec_etcd_lease_revoke(c, other, NULL);
    ec_cmp_t absent = {.key = key, .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL};
    ec_op_t put = {.type = EC_OP_PUT, .key = key, .value = "a", .value_len = 1, .lease = mine};
    ec_txn_result_t r;
    ck_assert_int_eq(ec_etcd_txn(c, &absent, 1, &put, 1, NULL, 0, &r, NULL), 0);
    ck_assert(r.succeeded);
    ec_txn_result_free(&r);
    kill(a.pid, SIGCONT);
    ec_epoch_t *ep = wait_epoch(root, 1, 1, NULL, 10000);
    ck_assert_str_eq(ep->leader_id, "a");
    ec_epoch_free(ep);
    ck_assert(wait_log(a.log, "+leader a", 1000));
    ec_test_obs_check(o, 1, 1, 1);
    ec_test_obs_stop(o);
}
END_TEST

/* The same, produced for real: the node's campaign reaches etcd and is
 * applied, and the connection is cut before the answer comes back (the
 * fault-injecting proxy); the node adopts the leadership it cannot know it
 * won. */
static int node_watches(proc_t *p, int k);

START_TEST(ambiguous_campaign_is_adopted)
{
    const char *root = "/jambig/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    ec_proxy_t *px = ec_proxy_start(ec_embed_endpoint(etcd));
    ck_assert_ptr_nonnull(px);
    char key[128];
    snprintf(key, sizeof(key), "%sleader", root);
    int64_t other;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 30, &other, NULL, NULL), 0);
    ck_assert_int_eq(ec_etcd_put(c, key, "ghost", 5, other, NULL, NULL), 0);
    proc_t a = start_node_at(ec_proxy_endpoint(px), "jambig", "a", 1, 1, 1, 0, 5, 0);
    ck_assert(wait_log(a.log, "STARTED", 1000));
    /* its watches open first (a new stream each would be a request): the
     * node's next request is then its campaign, once the ghost is gone */
    int k = 0, w = 0;
    for (int64_t end = ec_test_now_ms() + ec_test_ms(10000); w < 4 && ec_test_now_ms() < end;)
        w = node_watches(&a, ++k);
    ck_assert_msg(w >= 4, "the node's 4 watches were not created (log %s)", a.log);
    ec_proxy_set(px, EC_PROXY_DROP_NEXT, 0);
    ec_etcd_lease_revoke(c, other, NULL);
    ck_assert_msg(wait_log(a.log, "campaign for leader failed", 10000),
                  "the campaign's answer was not lost (log %s)", a.log);
    ec_epoch_t *ep = wait_epoch(root, 1, 1, NULL, 10000);
    ck_assert_str_eq(ep->leader_id, "a");
    ec_epoch_free(ep);
    ck_assert(wait_log(a.log, "adopted", 1000));
    ec_test_obs_check(o, 1, 1, 1);
    ec_test_obs_stop(o);
    kill(a.pid, SIGKILL);
    ec_test_reap(a.pid, 5000);
    ec_proxy_stop(px);
}
END_TEST

/* An incarnation bump (processes restarted) whose write fails is written
 * again once etcd is back: the job re-forms with reason restart instead of
 * waiting forever for a bump that never reached etcd. */
START_TEST(failed_incarnation_bump_is_retried)
{
    const char *root = "/jbump/";
    ec_proxy_t *px = ec_proxy_start(ec_embed_endpoint(etcd));
    ck_assert_ptr_nonnull(px);
    proc_t a = start_node_at(ec_proxy_endpoint(px), "jbump", "a", 1, 1, 1, 0, 10, 0);
    ec_epoch_free(wait_epoch(root, 1, 1, NULL, 10000));
    ec_proxy_set(px, EC_PROXY_CUT, 1); /* etcd unreachable: connections refused */
    kill(a.pid, SIGUSR1);
    ck_assert_msg(wait_log(a.log, "BUMP rc=-", 10000), "the bump did not fail (log %s)", a.log);
    ec_proxy_set(px, EC_PROXY_PASS, 0);
    ec_epoch_t *ep = wait_epoch(root, 2, 1, NULL, 10000);
    ck_assert_int_eq(ep->reason, EC_REASON_RESTART);
    ck_assert_uint_eq(ep->members[0].incarnation, 2);
    ec_epoch_free(ep);
    kill(a.pid, SIGKILL);
    ec_test_reap(a.pid, 5000);
    ec_proxy_stop(px);
}
END_TEST

/* A leader whose coordinator loop is wedged (a callback blocked on a full
 * pipe, say) while its process and keepalive thread live on must not keep
 * the leadership: its lease stops being refreshed, another node leads, and
 * the wedged one comes back as a member once it is unwedged. */
START_TEST(wedged_leader_loses_its_lease)
{
    const char *root = "/jwedge/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    char wedge[320];
    snprintf(wedge, sizeof(wedge), "%s/wedge", tmp);
    FILE *f = fopen(wedge, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    setenv("EC_TEST_WEDGE_FILE", wedge, 1);
    proc_t a = start_node("jwedge", "a", 2, 2, 1, 0, 3, 0);
    unsetenv("EC_TEST_WEDGE_FILE");
    ck_assert(wait_log(a.log, "+leader a", 10000));
    start_node("jwedge", "b", 2, 2, 1, 0, 3, 0);
    ec_epoch_free(wait_epoch(root, 1, 2, NULL, 10000));
    ck_assert_msg(wait_log(a.log, "WEDGED", 10000), "the leader's callback did not block");
    /* b takes over once a's lease is no longer refreshed */
    leads_t lb = {root, "b"};
    bool b_leads = ec_test_wait(leads, &lb, 20000);
    ck_assert_msg(b_leads, "node b never led while a's loop was wedged");
    unlink(wedge);
    ck_assert(wait_log(a.log, "UNWEDGED", 5000));
    /* a re-registers as a member under b's leadership */
    ck_assert(wait_log(a.log, "-leader a", 10000));
    ck_assert(wait_log(a.log, "registering again", 10000));
    /* the coordinator's phase machine traced the same story */
    ck_assert(wait_log(a.log, "+phase registering -> follower", 1000));
    ck_assert(wait_log(a.log, "+phase follower -> leader", 1000));
    ck_assert(wait_log(a.log, "+phase leader -> registering: our lease was lost", 10000));
    ck_assert(ec_test_holds(leads, &lb, 2000));
    ec_epoch_t *ep = wait_epoch(root, 1, 2, NULL, 5000);
    ck_assert_int_ge(ec_epoch_find_member(ep, "a"), 0);
    ec_epoch_free(ep);
    ec_test_obs_check(o, 1, 2, 1);
    ec_test_obs_stop(o);
}
END_TEST

/* Failure records outlive their nodes for the post-mortem but do not
 * accumulate forever: the leader keeps the newest 64. */
START_TEST(old_failure_records_are_pruned)
{
    const char *root = "/jprune/";
    char key[128];
    for (int i = 1; i <= 70; i++) {
        snprintf(key, sizeof(key), "%sfailures/%020d/n%d", root, i, i);
        ck_assert_int_eq(ec_etcd_put(c, key, "x", 1, 0, NULL, NULL), 0);
    }
    start_node("jprune", "a", 1, 1, 1, 0, 5, 0);
    ec_epoch_free(wait_epoch(root, 1, 1, NULL, 10000));
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "%sfailures/", root);
    bool pruned = false;
    for (int tries = 0; tries < 100 && !pruned; tries++) {
        ec_kv_list_t l;
        ck_assert_int_eq(ec_etcd_get_prefix(c, prefix, 0, &l, NULL), 0);
        pruned = l.n == 64;
        if (pruned) {
            /* the newest are the ones kept */
            ck_assert(strstr(l.kvs[0].key, "/00000000000000000007/") != NULL);
            ck_assert(strstr(l.kvs[63].key, "/00000000000000000070/") != NULL);
        }
        ec_kv_list_free(&l);
        if (!pruned)
            wait_log("/dev/null", "never", 50); /* polling interval */
    }
    ck_assert_msg(pruned, "failure records were not pruned to the newest 64");
}
END_TEST

/* A node record without a lease (written by hand, or by a crashed older
 * tool) is never admitted: it would never expire, so a job that took it in
 * would wait on it forever. */
START_TEST(unleased_node_record_is_never_a_member)
{
    const char *root = "/junleased/";
    ec_node_rec_t *nr = ec_node_rec_new(1, 0);
    nr->node_id = strdup("ghost");
    nr->host = strdup("127.0.0.1");
    nr->ports[0] = 1000;
    nr->master_port = 1001;
    nr->state = EC_NODE_READY;
    nr->incarnation = 1;
    void *buf;
    size_t len;
    ck_assert_int_eq(ec_node_rec_encode(nr, &buf, &len, NULL), 0);
    ec_node_rec_free(nr);
    ck_assert_int_eq(ec_etcd_put(c, "/junleased/nodes/ghost", buf, len, 0, NULL, NULL), 0);
    free(buf);
    start_node("junleased", "a", 1, 2, 1, 0, 5, 0);
    ec_epoch_t *ep = wait_epoch(root, 1, -1, NULL, 10000);
    ck_assert_int_eq(ep->nmembers, 1);
    ck_assert_int_lt(ec_epoch_find_member(ep, "ghost"), 0);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(restart_reforms_same_members)
{
    const char *root = "/jrst/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    proc_t a = start_node("jrst", "a", 2, 2, 1, 600000, 10, 0);
    start_node("jrst", "b", 2, 2, 1, 600000, 10, 0);
    ec_epoch_t *e1 = wait_epoch(root, 1, 2, NULL, 10000);
    kill(a.pid, SIGUSR1); /* its processes restarted: incarnation + 1 */
    ec_epoch_t *e2 = wait_epoch(root, 2, 2, NULL, 10000);
    ck_assert_int_eq(e2->reason, EC_REASON_RESTART);
    ck_assert_str_eq(e2->members[0].node_id, e1->members[0].node_id);
    ck_assert_str_eq(e2->members[1].node_id, e1->members[1].node_id);
    int ma = ec_epoch_find_member(e2, "a");
    ck_assert_int_eq(e2->members[ma].incarnation, e1->members[ma].incarnation + 1);
    ec_epoch_free(e1);
    ec_epoch_free(e2);
    ec_test_obs_check(o, 2, 2, 1);
    ec_test_obs_stop(o);
}
END_TEST

static bool refused(void *arg)
{
    (void)arg;
    ec_kv_t kv;
    bool found = false;
    ec_etcd_get(c, "/jref/nodes/wrong", &kv, &found, NULL, NULL);
    bool ok = false;
    if (found) {
        ec_node_rec_t *r = NULL;
        if (ec_node_rec_decode(kv.value, kv.value_len, NULL, &r, NULL) == 0)
            ok = r->state == EC_NODE_FAILED && r->reason && strstr(r->reason, "nproc=3") &&
                 strstr(r->reason, "--nproc_per_node=2");
        ec_node_rec_free(r);
    }
    ec_kv_free(&kv);
    return ok;
}

START_TEST(mismatched_nproc_refused_with_reason)
{
    const char *root = "/jref/";
    start_node("jref", "good", 1, 1, 2, 600000, 10, 0);
    ec_epoch_free(wait_epoch(root, 1, 2, NULL, 10000));
    start_node("jref", "wrong", 1, 1, 3, 600000, 10, 0);
    ck_assert_msg(ec_test_wait(refused, NULL, 10000), "the refused node's record says nothing");
    ec_epoch_t *ep = ec_test_epoch(c, root);
    ck_assert_int_eq(ep->number, 1); /* no epoch for a refused node */
    ec_epoch_free(ep);
}
END_TEST

static void report_suspect(const char *root_job, uint64_t epoch, const char *reporter,
                           const char *suspect)
{
    ec_keys_t k;
    char key[EC_KEY_MAX];
    ck_assert_int_eq(ec_keys_init(&k, NULL, root_job, NULL), 0);
    ck_assert_int_gt(ec_key_epoch_suspect(&k, epoch, reporter, key, sizeof(key)), 0);
    ck_assert_int_eq(ec_etcd_put(c, key, suspect, strlen(suspect), 0, NULL, NULL), 0);
}

START_TEST(silent_member_evicted_before_its_ttl)
{
    /* TTL 30 s: only an eviction explains a new epoch within 5 s. */
    const char *root = "/jev/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    char *l = form_three("jev", root, ids, ps, 1, 30);
    const char *victim = strcmp(l, "n3") ? "n3" : "n2";
    const char *reporter = strcmp(l, "n1") ? "n1" : (strcmp(victim, "n2") ? "n2" : "n3");
    proc_t *v = by_id(ps, ids, 3, victim);
    ec_test_sigstop(v->pid); /* alive to the kernel, silent to everyone */
    int64_t t0 = ec_test_now_ms();
    report_suspect("jev", 1, reporter, victim);
    ec_epoch_t *ep = wait_epoch(root, 2, 2, victim, 5000);
    int64_t took = ec_test_now_ms() - t0;
    printf("# eviction of a frozen member: %lld ms from report to new epoch (lease TTL 30 s)\n",
           (long long)took);
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ec_epoch_free(ep);
    char *leader_log = by_id(ps, ids, 3, l)->log;
    ck_assert(wait_log(leader_log, "evicted: suspected by", 2000));
    /* Wrongly evicted?  It wakes, finds its lease revoked, and rejoins. */
    kill(v->pid, SIGCONT);
    ep = wait_epoch(root, 3, 3, NULL, 15000);
    ck_assert_int_ge(ec_epoch_find_member(ep, victim), 0);
    ec_epoch_free(ep);
    free(l);
    ec_test_obs_check(o, 1, 3, 1);
    ec_test_obs_stop(o);
}
END_TEST

/* Issue 27's attack on the ring: a node's agent is killed with -9 and a
 * process that is no agent of the job listens on its probe port, answering
 * the old fixed line.  Its ring watchers must take the failed proof for
 * silence and the job re-form without the node in about a second, not at
 * its 10 s lease. */
START_TEST(dead_node_behind_an_impostor_evicted_before_its_ttl)
{
    const char *root = "/jri/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    /* ids of their own: probe ports derive from ids, and other tests may run
     * beside this one on the machine */
    const char *ids[] = {"ri1", "ri2", "ri3"}, *victim;
    proc_t ps[3];
    uint16_t port;
    char *l = ring_of_three("jri", root, ids, ps, &victim, &port);
    proc_t *v = by_id(ps, ids, 3, victim);
    kill(v->pid, SIGKILL);
    ck_assert_int_eq(ec_test_reap(v->pid, 5000), 128 + SIGKILL);
    int64_t t0 = ec_test_now_ms();
    start_impostor(port, victim);
    ec_epoch_t *ep = wait_epoch(root, 2, 2, victim, 3000);
    printf("# dead node with an impostor on its probe port: %lld ms to an epoch without it "
           "(lease TTL 10 s)\n", (long long)(ec_test_now_ms() - t0));
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ec_epoch_free(ep);
    free(l);
    ec_test_obs_check(o, 1, 3, 1);
    ec_test_obs_stop(o);
}
END_TEST

/* The two members of ids[3] that are not the leader l, in ids' order. */
static void followers_of(const char *const *ids, const char *l, const char **others)
{
    for (int i = 0, k = 0; i < 3; i++)
        if (strcmp(ids[i], l))
            others[k++] = ids[i];
}

/* Of n1..n3 led by l: a follower to accuse and the other to report it. */
static void two_followers(const char *l, const char **accused, const char **reporter)
{
    const char *ids[] = {"n1", "n2", "n3"}, *f[2];
    followers_of(ids, l, f);
    *reporter = f[0];
    *accused = f[1];
}

START_TEST(silent_leader_evicted_by_a_follower)
{
    /* TTL 30 s: only an eviction explains a new leader within 5 s. */
    const char *root = "/jel/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    char *l = form_three("jel", root, ids, ps, 1, 30);
    const char *others[2];
    followers_of(ids, l, others);
    /* One follower alone is not enough (it may be the one cut off): the
     * other probes the leader itself, finds it answering, and adds nothing;
     * a strict majority of the other members must report it. */
    report_suspect("jel", 1, others[0], l);
    ck_assert(wait_log(by_id(ps, ids, 3, others[1])->log, "rejected: its agent answered", 5000));
    leads_t still = {root, l};
    ck_assert_msg(ec_test_holds(leads, &still, 1500), "one follower's report deposed the leader");
    /* Frozen now, and reported again: the other follower probes it again
     * (a newer report), finds it silent, adds its report: deposed. */
    ec_test_sigstop(by_id(ps, ids, 3, l)->pid);
    int64_t t0 = ec_test_now_ms();
    report_suspect("jel", 1, others[0], l);
    ec_epoch_t *ep = wait_epoch(root, 2, 2, l, 5000);
    printf("# frozen leader, reported by one follower, to an epoch without it: %lld ms "
           "(lease TTL 30 s)\n", (long long)(ec_test_now_ms() - t0));
    ck_assert_str_ne(ep->leader_id, l);
    ec_epoch_free(ep);
    kill(by_id(ps, ids, 3, l)->pid, SIGCONT);
    ep = wait_epoch(root, 3, 3, NULL, 15000); /* it rejoins as a member */
    ck_assert_str_ne(ep->leader_id, l);
    ec_epoch_free(ep);
    free(l);
    ec_test_obs_check(o, 1, 3, 1); /* no epoch from the deposed leader */
    ec_test_obs_stop(o);
}
END_TEST

START_TEST(false_suspicion_costs_one_probe)
{
    const char *root = "/jfs/";
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    char *l = form_three("jfs", root, ids, ps, 1, 30);
    const char *accused, *reporter;
    two_followers(l, &accused, &reporter);
    report_suspect("jfs", 1, reporter, accused);
    ck_assert(wait_log(by_id(ps, ids, 3, l)->log, "rejected: its agent answered", 5000));
    ec_epoch_t *ep = ec_test_epoch(c, root);
    ck_assert_int_eq(ep->number, 1); /* no epoch, no restart: the accused answered */
    ec_epoch_free(ep);
    /* a report from a non-member is ignored altogether */
    report_suspect("jfs", 1, "stranger", accused);
    ep = ec_test_epoch(c, root);
    ck_assert_int_eq(ep->number, 1);
    ec_epoch_free(ep);
    free(l);
}
END_TEST

/* The leader probes a reported member again when a newer report names it:
 * a member found alive once and frozen later in the same epoch is evicted
 * on the next report, not after its lease. */
START_TEST(member_found_alive_then_silent_evicted_on_a_newer_report)
{
    const char *root = "/jre/";
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    char *l = form_three("jre", root, ids, ps, 1, 30);
    const char *accused, *reporter;
    two_followers(l, &accused, &reporter);
    report_suspect("jre", 1, reporter, accused);
    ck_assert(wait_log(by_id(ps, ids, 3, l)->log, "rejected: its agent answered", 5000));
    ec_test_sigstop(by_id(ps, ids, 3, accused)->pid); /* silent from now on */
    report_suspect("jre", 1, reporter, accused);     /* the reporter sees it again */
    ec_epoch_t *ep = wait_epoch(root, 2, 2, accused, 5000); /* TTL 30 s: an eviction */
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ec_epoch_free(ep);
    kill(by_id(ps, ids, 3, accused)->pid, SIGCONT);
    free(l);
}
END_TEST

/* A node's agent and its worker library report under keys of their own
 * (epochs/<n>/suspect/<node> and .../<node>/<source>): the worker's report
 * naming another member does not erase the agent's report of the leader,
 * and both count towards the majority that deposes it. */
START_TEST(agent_and_worker_reports_of_one_node_both_count)
{
    /* Leader l and a follower f0 frozen (TTL 30 s): f0's reports, written
     * here as its agent and one of its processes would, stay as they are.
     * The live follower f1 needs f0's report of the leader besides its own
     * (a strict majority of the two others), and f0's process reported f1
     * after its agent reported l: on one shared key the later report
     * replaced the earlier and the leader stayed until its lease. */
    const char *root = "/jsrc/";
    ec_test_obs_t *o = ec_test_obs_start(c, root);
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    char *l = form_three("jsrc", root, ids, ps, 1, 30);
    const char *others[2];
    followers_of(ids, l, others);
    ec_test_sigstop(by_id(ps, ids, 3, l)->pid);
    ec_test_sigstop(by_id(ps, ids, 3, others[0])->pid);
    report_suspect("jsrc", 1, others[0], l); /* f0's agent */
    ec_keys_t k;
    char key[EC_KEY_MAX];
    ck_assert_int_eq(ec_keys_init(&k, NULL, "jsrc", NULL), 0);
    ck_assert_int_gt(ec_key_epoch_suspect_src(&k, 1, others[0], "rank0", key, sizeof(key)), 0);
    ck_assert_int_eq(ec_etcd_put(c, key, others[1], strlen(others[1]), 0, NULL, NULL), 0);
    ec_epoch_t *ep = wait_epoch(root, 2, 2, l, 5000); /* deposed by f1 */
    ck_assert_str_eq(ep->leader_id, others[1]);
    ec_epoch_free(ep);
    ck_assert(wait_log(by_id(ps, ids, 3, others[1])->log, "adding our report", 1000));
    kill(by_id(ps, ids, 3, others[0])->pid, SIGCONT);
    kill(by_id(ps, ids, 3, l)->pid, SIGCONT);
    free(l);
    ec_test_obs_check(o, 1, 3, 1);
    ec_test_obs_stop(o);
}
END_TEST

/* Whether epoch `num` of job `job` (its copy under epochs/) lists `id`. */
static bool history_has(const char *job, uint64_t num, const char *id)
{
    ec_keys_t k;
    char key[EC_KEY_MAX];
    ck_assert_int_eq(ec_keys_init(&k, NULL, job, NULL), 0);
    ck_assert_int_gt(ec_key_epoch_history(&k, num, key, sizeof(key)), 0);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert_msg(found, "no copy of epoch %llu", (unsigned long long)num);
    ec_epoch_t *ep = NULL;
    ck_assert_int_eq(ec_epoch_decode(kv.value, kv.value_len, key, &ep, NULL), 0);
    bool has = ec_epoch_find_member(ep, id) >= 0;
    ec_epoch_free(ep);
    ec_kv_free(&kv);
    return has;
}

/* The leader evicts a frozen member while another member's processes
 * restart (an incarnation bump arriving during the eviction's probe): the
 * next epoch is planned on a model that has seen the eviction, so no epoch
 * after it lists the evicted node (issue 20: once in 20 evictions the
 * leader published a restart epoch still naming the node it had just
 * evicted, its model not having seen the deletion yet). */
START_TEST(evicted_member_never_in_the_next_epoch)
{
    const char *root = "/jnx/";
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    char *l = form_three("jnx", root, ids, ps, 1, 30);
    const char *victim = strcmp(l, "n3") ? "n3" : "n2";
    const char *reporter = strcmp(l, "n1") ? "n1" : (strcmp(victim, "n2") ? "n2" : "n3");
    ec_test_sigstop(by_id(ps, ids, 3, victim)->pid);
    report_suspect("jnx", 1, reporter, victim);
    kill(by_id(ps, ids, 3, reporter)->pid, SIGUSR1); /* during the probe's 250 ms */
    ck_assert(wait_log(by_id(ps, ids, 3, reporter)->log, "BUMP rc=0", 5000));
    ec_epoch_t *ep = wait_epoch(root, 2, 2, victim, 5000);
    uint64_t last = ep->number;
    ec_epoch_free(ep);
    for (uint64_t e = 2; e <= last; e++)
        ck_assert_msg(!history_has("jnx", e, victim),
                      "epoch %llu lists %s, evicted before it was published",
                      (unsigned long long)e, victim);
    kill(by_id(ps, ids, 3, victim)->pid, SIGCONT);
    free(l);
}
END_TEST

/* SIGUSR2 to a node: its model's applied watch events so far (the k-th
 * STATS line it prints). */
typedef struct {
    unsigned long long events, plans; /* ec_node_watch_events, ec_node_plans */
    int watches;                      /* ec_node_watches_created */
} stats_t;

/* The node's k-th STATS line (SIGUSR2; k counts from 1 per node). */
static stats_t node_stats(proc_t *p, int k)
{
    char needle[32];
    snprintf(needle, sizeof(needle), "STATS %d ", k);
    bool got = false;
    for (int i = 0; i < 10 && !got; i++) {
        kill(p->pid, SIGUSR2);
        got = wait_log(p->log, needle, 1000);
    }
    ck_assert_msg(got, "node did not print its stats (log %s)", p->log);
    FILE *f = fopen(p->log, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    stats_t st = {0};
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, needle, strlen(needle)))
            ck_assert_int_eq(sscanf(line + strlen(needle),
                                    "events=%llu leader=%*d plans=%llu watches=%d", &st.events,
                                    &st.plans, &st.watches), 3);
    fclose(f);
    return st;
}

static int node_watches(proc_t *p, int k)
{
    return node_stats(p, k).watches;
}

static unsigned long long model_events(proc_t *p, int k)
{
    return node_stats(p, k).events;
}

static stats_t stats_until(proc_t *p, int *k, unsigned long long want_events,
                           unsigned long long want_plans);

/* Only the leader follows the node records: a change of one node's record
 * reaches the leader and that node, not every follower; and a follower gets
 * a new epoch as a delta from the one it holds (issue 16: O(N) bytes per
 * change, not O(N^2)). */
START_TEST(follower_model_skips_node_record_churn)
{
    const char *root = "/jchurn/";
    const char *ids[] = {"n1", "n2"};
    proc_t ps[2];
    for (int i = 0; i < 2; i++)
        ps[i] = start_node("jchurn", ids[i], 1, 2, 1, 600000, 30, 0);
    ec_epoch_free(wait_epoch(root, 1, 2, NULL, 10000));
    char *l = leader_of(root);
    proc_t *leader = by_id(ps, ids, 2, l), *follower = by_id(ps, ids, 2, strcmp(l, "n1") ? "n1" : "n2");
    unsigned long long f0 = model_events(follower, 1), l0 = model_events(leader, 1);
    /* 40 writes of other nodes' records (not valid records: never members,
     * so no epoch comes of them) */
    for (int i = 0; i < 40; i++) {
        char key[64];
        snprintf(key, sizeof(key), "%snodes/x%d", root, i % 4);
        ck_assert_int_eq(ec_etcd_put(c, key, "junk", 4, 0, NULL, NULL), 0);
    }
    /* the leader sees them all (the counter counts) ... */
    int k = 2;
    unsigned long long l1 = stats_until(leader, &k, l0 + 40, 0).events;
    ck_assert_uint_ge(l1, l0 + 40);
    /* ... the follower none of them */
    unsigned long long f1 = model_events(follower, 2);
    ck_assert_msg(f1 - f0 < 5, "the follower applied %llu events for 40 other nodes' writes",
                  f1 - f0);
    ec_epoch_t *ep = ec_test_epoch(c, root);
    ck_assert_int_eq(ep->number, 1);
    ec_epoch_free(ep);
    /* The next epoch reaches the follower as a delta from epoch 1, which it
     * rebuilds (the record's digest checked) without reading the record. */
    kill(follower->pid, SIGUSR1); /* its processes restarted: a restart epoch */
    ec_epoch_free(wait_epoch(root, 2, 2, NULL, 10000));
    ck_assert_msg(wait_log(follower->log, "EPOCH 2 ", 5000), "the follower did not deliver epoch 2");
    ck_assert_msg(ec_test_file_contains(follower->log, "epoch 2: rebuilt from its delta"),
                  "the follower did not rebuild epoch 2 from its delta (log %s)", follower->log);
    free(l);
}
END_TEST

typedef struct {
    proc_t *p;
    int *k;
    unsigned long long want_events, want_plans;
    stats_t st;
} stats_want_t;

static bool stats_reach(void *arg)
{
    stats_want_t *w = arg;
    w->st = node_stats(w->p, (*w->k)++);
    return w->st.events >= w->want_events && w->st.plans >= w->want_plans;
}

/* Stats of p from the k-th on, until events >= want_events and plans >=
 * want_plans, or 10 s (scaled) passed: a count of lines would end early
 * when the node answers fast and applies slowly (a loaded machine); *k is
 * the next line's number. */
static stats_t stats_until(proc_t *p, int *k, unsigned long long want_events,
                           unsigned long long want_plans)
{
    stats_want_t w = {p, k, want_events, want_plans, {0}};
    ec_test_wait(stats_reach, &w, 10000);
    return w.st;
}

/* The leader plans only when something its planner reads changed (issue
 * 16, 18): node-record writes that change only a progress summary, the
 * epoch the node saw, or ready after joining cost it no plan, yet each
 * summary still reaches the hang policy (its on_progress); a write the
 * planner reads (an incarnation bump) is planned as before. */
START_TEST(leader_skips_the_plan_for_progress_only_writes)
{
    const char *root = "/jskip/";
    const char *ids[] = {"n1", "n2"};
    proc_t ps[2];
    for (int i = 0; i < 2; i++)
        ps[i] = start_node("jskip", ids[i], 1, 2, 1, 600000, 30, 0);
    ec_epoch_free(wait_epoch(root, 1, 2, NULL, 10000));
    char *l = leader_of(root);
    proc_t *leader = by_id(ps, ids, 2, l);
    const char *fid = strcmp(l, "n1") ? "n1" : "n2";
    char key[64];
    snprintf(key, sizeof(key), "%snodes/%s", root, fid);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert(found && kv.lease);
    int k = 1;
    stats_t s0 = node_stats(leader, k++);
    /* 30 writes of the follower's record, as its agent would write its
     * progress (under its lease) */
    enum { WRITES = 30 };
    for (int i = 0; i < WRITES; i++) {
        ec_node_rec_t *r = NULL;
        ck_assert_int_eq(ec_node_rec_decode(kv.value, kv.value_len, key, &r, NULL), 0);
        r->progress = (ec_node_progress_t){.seq = 100 + (uint64_t)i, .reporting = 1,
                                           .step = 10 * (uint64_t)i, .silent_rank = -1,
                                           .step_p50_us = 1000, .slowest_rank = -1};
        r->epoch_seen = (uint64_t)(i % 2); /* never above the epoch: no renumbering */
        r->state = i % 3 ? EC_NODE_READY : EC_NODE_JOINING;
        void *buf;
        size_t len;
        ck_assert_int_eq(ec_node_rec_encode(r, &buf, &len, NULL), 0);
        ec_node_rec_free(r);
        ck_assert_int_eq(ec_etcd_put(c, key, buf, len, kv.lease, NULL, NULL), 0);
        free(buf);
    }
    stats_t s1 = stats_until(leader, &k, s0.events + WRITES, 0);
    ck_assert_uint_ge(s1.events, s0.events + WRITES);
    /* the hang policy had the last summary ... */
    char needle[64];
    snprintf(needle, sizeof(needle), "PROGRESS %s seq=%d step=%d", fid, 100 + WRITES - 1,
             10 * (WRITES - 1));
    ck_assert_msg(wait_log(leader->log, needle, 5000), "the leader's hang policy did not get "
                  "the last progress summary (log %s)", leader->log);
    /* ... and the planner ran for none of them */
    stats_t s2 = node_stats(leader, k++);
    ck_assert_msg(s2.plans - s0.plans <= 1, "the leader planned %llu times for %d writes that "
                  "change nothing its planner reads", s2.plans - s0.plans, WRITES);
    /* A change the planner reads is planned: a restart epoch. */
    kill(by_id(ps, ids, 2, fid)->pid, SIGUSR1);
    ec_epoch_t *ep = wait_epoch(root, 2, 2, NULL, 10000);
    ck_assert_int_eq(ep->reason, EC_REASON_RESTART);
    ec_epoch_free(ep);
    ec_kv_free(&kv);
    free(l);
}
END_TEST

/* A valid record of a standby node sid (nproc 1): eligible, but the job is
 * at its maximum, so it changes the planner's input and no epoch. */
static void standby_put(ec_op_t *op, const char *key, const char *sid, int64_t lease, void **buf,
                        size_t *len)
{
    ec_node_rec_t *r = ec_node_rec_new(1, 0);
    r->node_id = strdup(sid);
    r->host = strdup("127.0.0.1");
    r->ports[0] = 1000;
    r->master_port = 1001;
    r->state = EC_NODE_JOINING;
    r->incarnation = 1;
    r->run = 1;
    ck_assert_int_eq(ec_node_rec_encode(r, buf, len, NULL), 0);
    ec_node_rec_free(r);
    *op = (ec_op_t){.type = EC_OP_PUT, .key = key, .value = *buf, .value_len = *len,
                    .lease = lease};
}

/* The leader applies a batch of changes that reach it together (one
 * transaction's: one watch response) at once and plans once for it, not
 * once per record (issue 16: a READY wave of 16,384 writes planned one by
 * one took the leader 7 s); the batch's deletion (its lease revoked) is
 * one more plan. */
START_TEST(leader_plans_once_per_burst)
{
    const char *root = "/jburst/";
    const char *ids[] = {"n1", "n2"};
    proc_t ps[2];
    for (int i = 0; i < 2; i++)
        ps[i] = start_node("jburst", ids[i], 1, 2, 1, 600000, 30, 0);
    ec_epoch_free(wait_epoch(root, 1, 2, NULL, 10000));
    char *l = leader_of(root);
    proc_t *leader = by_id(ps, ids, 2, l);
    enum { BURST = 48 };
    int64_t lease = 0;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 30, &lease, NULL, NULL), 0);
    static char keys[BURST][64], sids[BURST][16];
    ec_op_t ops[BURST];
    void *bufs[BURST];
    size_t lens[BURST];
    for (int i = 0; i < BURST; i++) {
        snprintf(sids[i], sizeof(sids[i]), "s%02d", i);
        snprintf(keys[i], sizeof(keys[i]), "%snodes/%s", root, sids[i]);
        standby_put(&ops[i], keys[i], sids[i], lease, &bufs[i], &lens[i]);
    }
    int k = 1;
    stats_t s0 = node_stats(leader, k++);
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, ops, BURST, NULL, 0, NULL, NULL), 0);
    for (int i = 0; i < BURST; i++)
        free(bufs[i]);
    stats_t s1 = stats_until(leader, &k, s0.events + BURST, s0.plans + 1);
    ck_assert_uint_ge(s1.events, s0.events + BURST);
    ck_assert_msg(s1.plans - s0.plans == 1, "the leader planned %llu times for one "
                  "transaction of %d records", s1.plans - s0.plans, BURST);
    /* the standbys go with their lease: one revision, one more plan */
    ck_assert_int_eq(ec_etcd_lease_revoke(c, lease, NULL), 0);
    stats_t s2 = stats_until(leader, &k, s1.events + BURST, s1.plans + 1);
    ck_assert_uint_ge(s2.events, s1.events + BURST);
    ck_assert_msg(s2.plans - s1.plans == 1, "the leader planned %llu times for %d records "
                  "deleted together", s2.plans - s1.plans, BURST);
    ec_epoch_t *ep = ec_test_epoch(c, root);
    ck_assert_int_eq(ep->number, 1); /* standbys: never members */
    ec_epoch_free(ep);
    free(l);
}
END_TEST

/* A leader that leaves gracefully (SIGTERM) is a leave, not a loss, for
 * the follower that takes over, although a follower's model never sees
 * other nodes' records: it reads the old leader's record as it was just
 * before its key went. */
START_TEST(leader_leaving_gracefully_is_a_leave)
{
    const char *root = "/jlleave/";
    const char *ids[] = {"n1", "n2", "n3"};
    proc_t ps[3];
    char *l = form_three("jlleave", root, ids, ps, 1, 30);
    kill(by_id(ps, ids, 3, l)->pid, SIGTERM);
    ec_epoch_t *ep = wait_epoch(root, 2, 2, l, 5000); /* TTL 30 s: only the leave explains it */
    ck_assert_int_eq(ep->reason, EC_REASON_LEAVE);
    ck_assert_str_ne(ep->leader_id, l);
    ec_epoch_free(ep);
    free(l);
}
END_TEST

/* ec_node_is_leader may be called from any thread (node.h): here the test's
 * main thread polls it while the node's coordinator thread wins the leader
 * key.  Under ThreadSanitizer (tests/tsan.sh) this is the check that the
 * coordinator's own flag is published safely: reading it unguarded was a
 * data race between the loop's campaign and the caller. */
static void no_epoch_cb(const ec_epoch_t *ep, void *arg)
{
    (void)ep;
    (void)arg;
}

static bool is_leader(void *arg)
{
    return ec_node_is_leader(arg);
}

START_TEST(leadership_is_read_from_another_thread)
{
    const char *root = "/jread/";
    uint16_t port = 29999; /* recorded, never bound: no process is started */
    ec_node_opts_t o = EC_NODE_OPTS_INIT;
    o.etcd = c;
    o.job_id = "jread";
    o.node_id = "n1";
    o.host = "127.0.0.1";
    o.nproc = 1;
    o.ports = &port;
    o.master_port = 29998;
    o.np_min = 1;
    o.np_max = 1;
    o.elastic_timeout_ms = 600000;
    o.lease_ttl_s = 10;
    o.on_epoch = no_epoch_cb;
    ec_error_t err = {0};
    ec_node_t *n = ec_node_start(&o, &err);
    ck_assert_msg(n, "ec_node_start: %s", err.msg);
    bool led = ec_test_wait(is_leader, n, 10000);
    ec_epoch_t *ep = led ? wait_epoch(root, 1, 1, NULL, 10000) : NULL;
    ec_node_stop(n);
    ck_assert_msg(led, "the only node never said it leads");
    ck_assert_str_eq(ep->leader_id, "n1");
    ec_epoch_free(ep);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t2000-coord");
    TCase *t = tcase_create("coord");
    tcase_add_checked_fixture(t, etcd_up, etcd_down);
    ec_tcase_add(t, first_epoch_at_max_at_once);
    ec_tcase_add(t, below_max_after_elastic_timeout);
    ec_tcase_add(t, lease_expiry_reforms_without_node);
    ec_tcase_add(t, graceful_leave_reforms_at_once);
    ec_tcase_add(t, leader_kill9_replaced);
    ec_tcase_add(t, frozen_leader_cannot_publish);
    ec_tcase_add(t, standby_promotion_keeps_ranks);
    ec_tcase_add(t, duplicate_node_id_refused);
    ec_tcase_add(t, restarted_node_id_takes_over_its_record);
    ec_tcase_add(t, restarted_node_id_not_fooled_by_an_impostor);
    ec_tcase_add(t, leader_key_naming_me_is_adopted);
    ec_tcase_add(t, ambiguous_campaign_is_adopted);
    ec_tcase_add(t, wedged_leader_loses_its_lease);
    ec_tcase_add(t, failed_incarnation_bump_is_retried);
    ec_tcase_add(t, old_failure_records_are_pruned);
    ec_tcase_add(t, unleased_node_record_is_never_a_member);
    ec_tcase_add(t, restart_reforms_same_members);
    ec_tcase_add(t, mismatched_nproc_refused_with_reason);
    ec_tcase_add(t, silent_member_evicted_before_its_ttl);
    ec_tcase_add(t, dead_node_behind_an_impostor_evicted_before_its_ttl);
    ec_tcase_add(t, a_gone_host_is_evicted_on_one_set_of_the_leaders_probes);
    ec_tcase_add(t, junior_takes_vacant_leadership_after_the_seniors_head_start);
    ec_tcase_add(t, silent_leader_evicted_by_a_follower);
    ec_tcase_add(t, false_suspicion_costs_one_probe);
    ec_tcase_add(t, member_found_alive_then_silent_evicted_on_a_newer_report);
    ec_tcase_add(t, agent_and_worker_reports_of_one_node_both_count);
    ec_tcase_add(t, evicted_member_never_in_the_next_epoch);
    ec_tcase_add(t, follower_model_skips_node_record_churn);
    ec_tcase_add(t, leader_skips_the_plan_for_progress_only_writes);
    ec_tcase_add(t, leader_plans_once_per_burst);
    ec_tcase_add(t, leader_leaving_gracefully_is_a_leave);
    ec_tcase_add(t, leadership_is_read_from_another_thread);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
