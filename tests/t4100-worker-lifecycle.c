/* The worker library lives as long as its training process, whatever happens
 * to etcd and to the agent's connection with it.  With `ecoord launch
 * --rebuild=inprocess` agents on loopback running the linreg example:
 *
 *  - etcd down for longer than the lease TTL, then back: the agents register
 *    again under new leases, and at the next membership change the survivors
 *    rebuild in place (same pids, state kept) on the new lease instead of
 *    failing `lease not found` and being restarted;
 *  - etcd with authentication: the training processes follow epochs with the
 *    agent's user and password, and the password is never in a training
 *    process's environment (they read it from a 0600 file the agent writes
 *    and removes); etcd over TLS with client certificates: they use the
 *    agent's CA, certificate and key;
 *  - a node lost while its peers build the epoch's communicator: the build
 *    reports the silent peer, as a failed collective does, when it fails and
 *    already while it waits for the peer, and the job re-forms well before
 *    the node's lease TTL. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ec_select.h"
#include "harness.h"
#include "keys.h"
#include "records.h"

static ec_embed_t *etcd;
static ec_etcd_t *c;
static char tmp[256];
static pid_t pids[16];
static int npids;

static void setup(void)
{
    snprintf(tmp, sizeof(tmp), "/tmp/ec-t4100-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void teardown(void)
{
    ec_test_kill_all(pids, &npids);
    ec_test_down(&etcd, &c);
    unsetenv("ECOORD_WORKER_TIMEOUT_MS");
    unsetenv("ECOORD_WORKER_SUSPECT_AFTER_MS");
    unsetenv("ECOORD_ETCD_PASSWORD");
}

static void plain_etcd(void)
{
    etcd = ec_test_etcd_start(NULL);
    c = ec_test_client(ec_embed_endpoint(etcd));
}

typedef struct {
    pid_t pid;
    char id[16], logdir[320], console[320];
} agent_t;

/* One agent of job with one linreg process, run through wrap (a command
 * in front of it; NULL: none), stopped within grace_s; flags go to
 * `ecoord launch`. */
static agent_t start_agent_as(const char *job, const char *id, const char *np,
                              const char *flags, const char *wrap, int grace_s)
{
    agent_t a;
    snprintf(a.id, sizeof(a.id), "%s", id);
    snprintf(a.logdir, sizeof(a.logdir), "%s/%s-%s", tmp, job, id);
    snprintf(a.console, sizeof(a.console), "%s/%s-%s.console", tmp, job, id);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "exec %s launch --elastic_server=%s --job_id=%s --np=%s --nproc_per_node=1 "
             "--node_id=%s --log_dir=%s --grace_period=%d --elastic_timeout=1 "
             "--rebuild=inprocess %s -- %s%s%s --steps 100000000 --delay-ms 20 --verbose",
             ec_test_bin("ECOORD", "./ecoord"), ec_embed_endpoint(etcd), job, np, id, a.logdir,
             grace_s, flags, wrap ? wrap : "", wrap ? " " : "",
             ec_test_bin("ECW_LINREG", "worker/examples/linreg"));
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    a.pid = ec_test_spawn(argv, a.console);
    ck_assert_int_lt(npids, (int)(sizeof(pids) / sizeof(pids[0])));
    pids[npids++] = a.pid;
    return a;
}

static agent_t start_agent(const char *job, const char *id, const char *np, const char *flags)
{
    return start_agent_as(job, id, np, flags, NULL, 2);
}

/* ---- the example's output --------------------------------------------------------- */

typedef struct {
    long long step;
    unsigned long long epoch;
    int world, pid;
} line_t;

/* The newest "linreg step=" line of the agent's process in epoch >= e (pid 0:
 * none yet).  first: the first such line instead. */
static line_t line_in(const agent_t *a, unsigned long long e, bool first)
{
    line_t out = {0};
    char path[400], buf[512];
    snprintf(path, sizeof(path), "%s/workerlog.0", a->logdir);
    FILE *f = fopen(path, "r");
    if (!f)
        return out;
    while (fgets(buf, sizeof(buf), f)) {
        line_t l;
        int rank, sum;
        double loss;
        char cs[24];
        if (strncmp(buf, "linreg step=", 12) != 0 || !strchr(buf, '\n') ||
            sscanf(buf, "linreg step=%lld epoch=%llu rank=%d world=%d sum=%d loss=%lg cs=%23s "
                   "pid=%d", &l.step, &l.epoch, &rank, &l.world, &sum, &loss, cs, &l.pid) != 8 ||
            l.epoch < e)
            continue;
        out = l;
        if (first)
            break;
    }
    fclose(f);
    return out;
}

typedef struct {
    const agent_t *a;
    unsigned long long epoch;
    long long steps; /* past the first step of the epoch */
} progress_t;

static bool trained(void *arg)
{
    progress_t *p = arg;
    line_t f = line_in(p->a, p->epoch, true), l = line_in(p->a, p->epoch, false);
    return f.pid && l.step >= f.step + p->steps;
}

/* Wait until a's process has trained steps in epoch >= e; its first line there. */
static line_t train(const agent_t *a, unsigned long long e, long long steps, long ms)
{
    progress_t p = {a, e, steps};
    ck_assert_msg(ec_test_wait(trained, &p, ms), "%s never trained %lld steps in epoch %llu "
                  "(see %s/workerlog.0 and %s)", a->id, steps, e, a->logdir, a->console);
    return line_in(a, e, true);
}

/* ---- epochs --------------------------------------------------------------------------- */

/* An epoch >= number of world size world (the test fails without one). */
static ec_epoch_t *wait_epoch(const char *root, uint64_t number, int world, long ms)
{
    return ec_test_need_epoch(c, root, number, world, ms);
}

static int64_t lease_of(const char *root, const char *node)
{
    return ec_test_lease_of(c, root, node);
}


/* ---- 1. an etcd outage past the lease TTL ------------------------------------------------ */

START_TEST(rebuild_in_place_after_etcd_outage_past_ttl)
{
    plain_etcd();
    const char *job = "jout", *root = "/jout/";
    agent_t ag[3];
    ag[0] = start_agent(job, "a", "2:3", "--lease_ttl=2");
    ag[1] = start_agent(job, "b", "2:3", "--lease_ttl=2");
    ec_epoch_t *ep = wait_epoch(root, 1, 2, 20000);
    uint64_t e = ep->number;
    ec_epoch_free(ep);
    pid_t pid[2];
    int64_t lease[2];
    for (int i = 0; i < 2; i++) {
        pid[i] = train(&ag[i], e, 10, 20000).pid;
        lease[i] = lease_of(root, ag[i].id);
        ck_assert_int_gt(lease[i], 0);
    }

    /* Down until both agents have given their leases up for lost. */
    int64_t t0 = ec_test_now_ms();
    ec_embed_kill(etcd, SIGKILL);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(ec_test_wait_file(ag[i].console, "-lease ", 15000), "%s never lost its "
                      "lease (see %s)", ag[i].id, ag[i].console);
    ec_error_t err = {0};
    ck_assert_msg(ec_embed_restart(etcd, &err) == 0, "etcd restart: %s", err.msg);
    printf("# etcd down for %lld ms (lease TTL 2 s)\n", (long long)(ec_test_now_ms() - t0));
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(ec_test_wait_lease_remade(c, root, ag[i].id, lease[i], 15000),
                      "%s never re-made its lease", ag[i].id);
    }

    /* A membership change: the survivors rebuild on the agents' new leases. */
    ag[2] = start_agent(job, "c", "2:3", "--lease_ttl=2");
    ep = wait_epoch(root, e + 1, 3, 20000);
    e = ep->number;
    ec_epoch_free(ep);
    for (int i = 0; i < 2; i++) {
        line_t f = train(&ag[i], e, 10, 20000);
        ck_assert_msg(f.pid == pid[i], "%s's training process restarted (pid %d, was %d) "
                      "instead of rebuilding in place (see %s/workerlog.0)", ag[i].id, f.pid,
                      pid[i], ag[i].logdir);
        /* The join may be followed at once by restart epochs of the same
         * three members (each survivor's fence lifting after the outage bumps
         * its incarnation): in place too, so any epoch from the join on. */
        ck_assert_msg(f.epoch >= e && f.world == 3, "%s: first step after the join in epoch %llu "
                      "world %d, want epoch >= %" PRIu64 " world 3", ag[i].id, f.epoch, f.world, e);
    }
    train(&ag[2], e, 10, 20000);
    char path[400];
    snprintf(path, sizeof(path), "%s/workerlog.0", ag[0].logdir);
    ck_assert_msg(!ec_test_file_contains(path, "lease not found"), "see %s", path);
}
END_TEST

/* ---- 2. etcd with authentication ------------------------------------------------------ */

static void etcdctl(const char *ep, const char *args)
{
    const char *ctl = getenv("ETCDCTL");
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 %s --endpoints=%s %s", ctl && *ctl ? ctl : "etcdctl",
             ep, args);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int rc = ec_test_run(argv, out, sizeof(out));
    ck_assert_msg(rc == 0, "'%s' failed (%d): %s", cmd, rc, out);
}

/* Whether /proc/<pid>/environ holds needle; with val, the value of the
 * variable needle names ("NAME=") goes there. */
static bool environ_get(pid_t pid, const char *needle, char *val, size_t vlen)
{
    char path[64], buf[65536];
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (!buf[i])
            buf[i] = '\n';
    buf[n] = '\0';
    const char *p = strstr(buf, needle);
    if (p && val) {
        p += strlen(needle);
        snprintf(val, vlen, "%.*s", (int)strcspn(p, "\n"), p);
    }
    return p != NULL;
}

static bool environ_has(pid_t pid, const char *needle)
{
    return environ_get(pid, needle, NULL, 0);
}

START_TEST(inprocess_workers_authenticate_without_the_password_in_their_environment)
{
    etcd = ec_test_etcd_start(NULL);
    const char *ep = ec_embed_endpoint(etcd);
    etcdctl(ep, "user add root --new-user-password=pw-Zq81x --interactive=false");
    etcdctl(ep, "auth enable");
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ep;
    o.user = "root";
    o.password = "pw-Zq81x";
    ec_error_t err = {0};
    c = ec_etcd_create(&o, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);

    setenv("ECOORD_ETCD_PASSWORD", "pw-Zq81x", 1);
    agent_t ag[2];
    ag[0] = start_agent("jauth", "a", "2", "--etcd_user=root --lease_ttl=2");
    ag[1] = start_agent("jauth", "b", "2", "--etcd_user=root --lease_ttl=2");
    unsetenv("ECOORD_ETCD_PASSWORD");
    char pwf[2][512];
    ec_epoch_t *e = wait_epoch("/jauth/", 1, 2, 20000);
    uint64_t n = e->number;
    ec_epoch_free(e);
    for (int i = 0; i < 2; i++) {
        line_t f = train(&ag[i], n, 10, 20000);
        ck_assert_int_eq(f.world, 2);
        ck_assert_msg(!environ_has(f.pid, "pw-Zq81x"), "the password is in the environment of "
                      "%s's training process %d", ag[i].id, f.pid);
        ck_assert_msg(!environ_has(f.pid, "ECOORD_ETCD_PASSWORD="), "ECOORD_ETCD_PASSWORD is "
                      "in the environment of %s's training process %d", ag[i].id, f.pid);
        /* the file it reads instead: only this user can open it */
        ck_assert(environ_get(f.pid, "ECOORD_ETCD_PASSWORD_FILE=", pwf[i], sizeof(pwf[i])));
        struct stat st;
        ck_assert_msg(stat(pwf[i], &st) == 0, "%s", pwf[i]);
        ck_assert_msg((st.st_mode & 0777) == 0600, "%s has mode %o", pwf[i], st.st_mode & 0777);
        char dir[sizeof(pwf[i])];
        snprintf(dir, sizeof(dir), "%s", pwf[i]);
        *strrchr(dir, '/') = '\0';
        ck_assert_int_eq(stat(dir, &st), 0);
        ck_assert_msg((st.st_mode & 0777) == 0700, "%s has mode %o", dir, st.st_mode & 0777);
    }
    /* An agent that ends removes it. */
    for (int i = 0; i < 2; i++) {
        kill(ag[i].pid, SIGTERM);
        ck_assert_int_eq(ec_test_reap(ag[i].pid, 15000), 128 + SIGTERM);
        ck_assert_msg(access(pwf[i], F_OK) != 0, "%s left behind", pwf[i]);
    }
}
END_TEST

/* A CA, a server certificate for 127.0.0.1 and a client one, made in dir. */
static bool make_certs(const char *dir)
{
    const char *o = getenv("OPENSSL");
    o = o && *o ? o : "/usr/bin/openssl";
    if (access(o, X_OK) != 0)
        return false;
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof(cmd),
             "cd %s && %s req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=t4100-ca "
             "-keyout ca.key -out ca.pem && "
             "%s req -newkey rsa:2048 -nodes -subj /CN=etcd -keyout server.key -out server.csr && "
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth,"
             "clientAuth\\n' > ext && "
             "%s x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
             "-extfile ext -out server.pem && "
             "%s req -newkey rsa:2048 -nodes -subj /CN=client -keyout client.key -out client.csr && "
             "printf 'extendedKeyUsage=clientAuth\\n' > cext && "
             "%s x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
             "-extfile cext -out client.pem",
             dir, o, o, o, o, o);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    int rc = ec_test_run(argv, out, sizeof(out));
    ck_assert_msg(rc == 0, "making certificates failed (%d): %s", rc, out);
    return true;
}

START_TEST(inprocess_workers_use_the_agents_tls)
{
    char f[5][400];
    const char *names[] = {"server.pem", "server.key", "ca.pem", "client.pem", "client.key"};
    if (!make_certs(tmp)) {
        printf("# SKIP inprocess_workers_use_the_agents_tls: no openssl\n");
        return;
    }
    for (int i = 0; i < 5; i++)
        snprintf(f[i], sizeof(f[i]), "%s/%s", tmp, names[i]);
    ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
    eo.cert_file = f[0];
    eo.key_file = f[1];
    eo.ca_file = f[2]; /* and client certificates required */
    etcd = ec_test_etcd_start(&eo);
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ec_embed_endpoint(etcd);
    o.ca_file = f[2];
    o.cert_file = f[3];
    o.key_file = f[4];
    ec_error_t err = {0};
    c = ec_etcd_create(&o, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    char flags[1600];
    snprintf(flags, sizeof(flags), "--etcd_cacert=%s --etcd_cert=%s --etcd_key=%s --lease_ttl=2",
             f[2], f[3], f[4]);
    agent_t ag[2];
    ag[0] = start_agent("jtls", "a", "2", flags);
    ag[1] = start_agent("jtls", "b", "2", flags);
    ec_epoch_t *e = wait_epoch("/jtls/", 1, 2, 20000);
    uint64_t n = e->number;
    ec_epoch_free(e);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(train(&ag[i], n, 10, 20000).world, 2);
}
END_TEST

/* ---- 3. a node lost during the build ------------------------------------------------------ */

/* A build waits timeout_ms (NULL: the default, 30 s) for a silent peer.
 * The lost node must be found through the failed build, well before its
 * lease could expire: the lease lasts 15 s (stretched by
 * EC_TEST_TIMEOUT_MULTIPLIER, like the 7 s bound below), and a lease kept
 * alive every third of its TTL expires no sooner than two thirds of it
 * (10 s, stretched) after the node died, so even a slow machine cannot
 * pass through the lease instead. */
static void node_lost_during_build(const char *job, const char *root, const char *timeout_ms)
{
    plain_etcd();
    if (timeout_ms)
        setenv("ECOORD_WORKER_TIMEOUT_MS", timeout_ms, 1);
    const char *ids[] = {"a", "b", "c"};
    agent_t ag[3];
    long ttl_s = ec_test_ms(15000) / 1000, bound_ms = ec_test_ms(7000);
    char flags[128];
    snprintf(flags, sizeof(flags), "--lease_ttl=%ld --peer_probe_interval=0", ttl_s);
    for (int i = 0; i < 3; i++)
        /* the agents' ring (--peer_probe_interval) would find the dead
         * node first: off, this checks what the failed build reports */
        ag[i] = start_agent(job, ids[i], "1:3", flags);
    ec_epoch_t *ep = wait_epoch(root, 1, 3, 30000);
    uint64_t e = ep->number;
    /* The leader stays; of the other two one leaves, the other is lost. */
    int leader = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(ep->leader_id, ids[i]))
            leader = i;
    ec_epoch_free(ep);
    ck_assert_int_ge(leader, 0);
    agent_t *keep = &ag[leader], *leave = &ag[(leader + 1) % 3], *lost = &ag[(leader + 2) % 3];
    pid_t lost_proc = 0;
    for (int i = 0; i < 3; i++) {
        line_t f = train(&ag[i], e, 10, 20000);
        if (&ag[i] == lost)
            lost_proc = f.pid;
    }

    /* The lost node's process never joins the next build; the node dies
     * right after that epoch is announced. */
    kill(lost_proc, SIGSTOP);
    kill(leave->pid, SIGTERM);
    ep = wait_epoch(root, e + 1, 2, 20000);
    e = ep->number;
    ck_assert_int_ge(ec_epoch_find_member(ep, lost->id), 0);
    ec_epoch_free(ep);
    kill(lost->pid, SIGKILL);
    kill(lost_proc, SIGKILL);
    int64_t t0 = ec_test_now_ms();
    ec_test_reap(lost->pid, 5000);

    ep = wait_epoch(root, e + 1, 1, 30000);
    int64_t took = ec_test_now_ms() - t0;
    ck_assert_int_eq(ep->reason, EC_REASON_LOST);
    ck_assert_int_ge(ec_epoch_find_member(ep, keep->id), 0);
    ec_epoch_free(ep);
    printf("# node lost during the build: re-formed %" PRId64 " ms after it died (lease TTL "
           "%ld s, build timeout %s ms)\n", took, ttl_s, timeout_ms ? timeout_ms : "30000");
    char path[400];
    snprintf(path, sizeof(path), "%s/workerlog.0", keep->logdir);
    /* The worker logs the report after its put returned, and the leader may
     * act on the put first: wait for the line, do not read once. */
    ck_assert_msg(ec_test_wait_file(path, "reported them so the leader can evict them", 5000),
                  "the failed build reported no suspect (see %s)", path);
    ck_assert_msg(took < bound_ms, "re-formed %" PRId64 " ms after the node died: its lease TTL "
                  "(%ld s) found it, not the failed build", took, ttl_s);
    train(keep, e + 1, 5, 20000);
}

/* A graceful leave re-forms the others at once: the leaving node's
 * processes get --grace_period to stop after the job re-formed without
 * them, not before (on an H200 the leader learnt of a leave ~100 ms after
 * the SIGTERM, a CUDA process's exit, of 198 ms until the survivors
 * stepped).  The leaving process here ignores SIGTERM, as one that saves
 * something first would: the epoch without its node comes while it runs. */
START_TEST(a_graceful_leave_reforms_while_its_processes_stop)
{
    plain_etcd();
    char deaf[400];
    snprintf(deaf, sizeof(deaf), "%s/deaf.sh", tmp);
    ec_test_write_file(deaf, "#!/bin/sh\ntrap '' TERM\nexec \"$@\"\n", 0755);
    /* a lease of 60 s: only the leave explains a quick re-form */
    agent_t stay = start_agent("jgrace", "a", "1:2", "--lease_ttl=60");
    agent_t leave = start_agent_as("jgrace", "b", "1:2", "--lease_ttl=60", deaf, 30);
    ec_epoch_t *ep = wait_epoch("/jgrace/", 1, 2, 30000);
    uint64_t e = ep->number;
    ec_epoch_free(ep);
    train(&stay, e, 5, 20000);
    pid_t proc = train(&leave, e, 5, 20000).pid;
    ck_assert_int_gt(proc, 0);
    int64_t t0 = ec_test_now_ms();
    kill(leave.pid, SIGTERM);
    ep = wait_epoch("/jgrace/", e + 1, 1, 10000);
    int64_t took = ec_test_now_ms() - t0;
    ck_assert_int_ge(ec_epoch_find_member(ep, stay.id), 0);
    ck_assert_int_lt(ec_epoch_find_member(ep, leave.id), 0);
    ec_epoch_free(ep);
    ck_assert_msg(kill(proc, 0) == 0, "the leaving process had already stopped: nothing shows "
                  "the order");
    printf("# graceful leave: the job re-formed %" PRId64 " ms after the SIGTERM, its process "
           "still stopping\n", took);
    train(&stay, e + 1, 5, 20000);
    /* a second signal: the leaving process is killed at once */
    kill(leave.pid, SIGTERM);
    ck_assert_int_eq(ec_test_reap(leave.pid, 10000), 128 + SIGTERM);
}
END_TEST

/* The build gives up on the silent peer (2 s) and reports it (no probe
 * while it waits, so only the failed build can). */
START_TEST(node_lost_during_build_is_reported_before_its_ttl)
{
    setenv("ECOORD_WORKER_SUSPECT_AFTER_MS", "60000", 1);
    node_lost_during_build("jbuild", "/jbuild/", "2000");
}
END_TEST

/* The build still waits (30 s) but looks for silent agents after 1 s (the
 * default of ECOORD_WORKER_SUSPECT_AFTER_MS). */
START_TEST(node_lost_during_long_build_is_reported_before_its_ttl)
{
    node_lost_during_build("jbuild2", "/jbuild2/", NULL);
}
END_TEST

/* EC_TEST_ONLY=name[,name...] runs only those tests (ec_select.h). */
static Suite *suite(void)
{
    Suite *s = suite_create("t4100-worker-lifecycle");
    TCase *t = tcase_create("lifecycle");
    tcase_add_checked_fixture(t, setup, teardown);
    ec_tcase_add(t, rebuild_in_place_after_etcd_outage_past_ttl);
    ec_tcase_add(t, inprocess_workers_authenticate_without_the_password_in_their_environment);
    ec_tcase_add(t, inprocess_workers_use_the_agents_tls);
    ec_tcase_add(t, node_lost_during_build_is_reported_before_its_ttl);
    ec_tcase_add(t, node_lost_during_long_build_is_reported_before_its_ttl);
    ec_tcase_add(t, a_graceful_leave_reforms_while_its_processes_stop);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
