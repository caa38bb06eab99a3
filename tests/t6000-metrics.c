/* Rule checked: the metrics an agent serves on --metrics_port follow the job
 * as etcd records it.  Two agents on a real etcd: each one's ecoord_epoch and
 * ecoord_world_size match the published epoch, exactly one reports itself
 * leader, both hold a lease and see etcd up, /healthz and /readyz answer 200.
 * A killed training process shows up as a failure and a restart, and the
 * epoch goes up on both nodes.  A SIGTERMed agent leaves gracefully: the
 * survivor's epoch goes up again and its world size halves, long before the
 * 60 s lease could have expired.  A spare node reports itself standby.  A
 * port already in use stops the agent before it starts anything. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ec_select.h"
#include "ec_http.h"
#include "harness.h"
#include "metrics.h"
#include "records.h"

EC_TEST_ETCD_FIXTURE("t6000", 8)

typedef struct {
    pid_t pid;
    int port;
    char id[32], log[320];
} agent_t;

static agent_t start_agent(const char *job, const char *id, const char *np, int port)
{
    agent_t a = {.port = port};
    snprintf(a.id, sizeof(a.id), "%s", id);
    snprintf(a.log, sizeof(a.log), "%s/%s-%s.console", tmp, job, id);
    char dump[300];
    snprintf(dump, sizeof(dump), "%s/dump-%s", tmp, job);
    mkdir(dump, 0755);
    char cmd[2048];
    /* TTL 60 s: only a graceful leave explains a quick re-form. */
    snprintf(cmd, sizeof(cmd),
             "exec %s launch --elastic_server=%s --job_id=%s --np=%s --nproc_per_node=2 "
             "--node_id=%s --log_dir=%s/%s-%s --grace_period=2 --lease_ttl=60 "
             "--elastic_timeout=1 --metrics_port=%d -- %s %s 0",
             ec_test_bin("ECOORD", "./ecoord"), ec_embed_endpoint(etcd), job, np, id, tmp, job,
             id, port, ec_test_bin("EC_TEST_PROG", "tests/ec-test-prog"), dump);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    a.pid = ec_test_spawn(argv, a.log);
    pids[npids++] = a.pid;
    return a;
}

/* One scrape of /metrics: the value of series, NAN when the agent does not
 * answer or has no such series. */
static double scrape(int port, const char *series)
{
    static char resp[1 << 17];
    if (ec_http_request(port, "GET", "/metrics", resp, sizeof(resp)) != 200)
        return NAN;
    return ec_prom_value(ec_http_body(resp), series, NAN);
}

typedef struct {
    int port;
    const char *series;
    double min, max; /* wait until min <= value <= max */
} want_t;

static bool in_range(void *arg)
{
    want_t *w = arg;
    double v = scrape(w->port, w->series);
    return !isnan(v) && v >= w->min && v <= w->max;
}

static void wait_metric(const agent_t *a, const char *series, double min, double max, long ms)
{
    want_t w = {a->port, series, min, max};
    ck_assert_msg(ec_test_wait(in_range, &w, ms), "agent %s: %s is %g, want %g..%g (log %s)",
                  a->id, series, scrape(a->port, series), min, max, a->log);
}

static const char *dump_pid(const char *job, const char *node, int lr, unsigned long long epoch)
{
    static char pid[32];
    char p[512], line[256];
    snprintf(p, sizeof(p), "%s/dump-%s/env.%s.%d.%llu", tmp, job, node, lr, epoch);
    pid[0] = '\0';
    FILE *f = fopen(p, "r");
    if (!f)
        return pid;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "PID=", 4)) {
            snprintf(pid, sizeof(pid), "%.*s", (int)strcspn(line + 4, "\n"), line + 4);
            break;
        }
    fclose(f);
    return pid;
}

static bool has_pid(void *arg)
{
    const char **a = arg;
    return *dump_pid(a[0], a[1], 1, strtoull(a[2], NULL, 10)) != '\0';
}

START_TEST(metrics_follow_the_job)
{
    int pa = ec_free_port(), pb;
    while ((pb = ec_free_port()) == pa) /* not bound yet: the kernel may offer it twice */
        ;
    agent_t a = start_agent("jmet", "a", "1:2", pa);
    agent_t b = start_agent("jmet", "b", "1:2", pb);
    const agent_t *ag[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        wait_metric(ag[i], "ecoord_world_size", 4, 4, 20000);
        wait_metric(ag[i], "ecoord_lease_ok", 1, 1, 5000);
        wait_metric(ag[i], "ecoord_etcd_up", 1, 1, 10000);
    }
    ec_epoch_t *ep = ec_test_epoch(c, "/jmet/");
    ck_assert_ptr_nonnull(ep);
    uint64_t e1 = ep->number;
    for (int i = 0; i < 2; i++) {
        wait_metric(ag[i], "ecoord_epoch", (double)e1, (double)e1, 5000);
        ck_assert_double_eq(scrape(ag[i]->port, "ecoord_nodes"), 2);
        ck_assert_double_eq(scrape(ag[i]->port, "ecoord_node_index"),
                            ec_epoch_find_member(ep, ag[i]->id));
        ck_assert_double_eq(scrape(ag[i]->port, "ecoord_membership_state{state=\"member\"}"), 1);
        char info[128];
        snprintf(info, sizeof(info), "ecoord_info{job_id=\"jmet\",node_id=\"%s\",version=\"0.1.0\"}",
                 ag[i]->id);
        ck_assert_double_eq(scrape(ag[i]->port, info), 1);
        ck_assert_double_ge(scrape(ag[i]->port, "ecoord_etcd_probe_duration_seconds_count"), 1);
        ck_assert_double_ge(scrape(ag[i]->port, "ecoord_recovery_phase_seconds_count{phase=\"apply\"}"), 1);
        static char resp[4096];
        ck_assert_int_eq(ec_http_request(ag[i]->port, "GET", "/healthz", resp, sizeof(resp)), 200);
        ck_assert_int_eq(ec_http_request(ag[i]->port, "GET", "/readyz", resp, sizeof(resp)), 200);
    }
    /* the leader is the one that wrote the epoch, and only it says so */
    const agent_t *leader = !strcmp(ep->leader_id, "a") ? &a : &b;
    const agent_t *other = leader == &a ? &b : &a;
    wait_metric(leader, "ecoord_is_leader", 1, 1, 5000);
    ck_assert_double_eq(scrape(other->port, "ecoord_is_leader"), 0);
    ec_epoch_free(ep);

    /* a training process of b killed: a failure, a restart, a new epoch */
    char e1s[32];
    snprintf(e1s, sizeof(e1s), "%llu", (unsigned long long)e1);
    const char *which[3] = {"jmet", "b", e1s};
    ck_assert(ec_test_wait(has_pid, which, 10000));
    kill((pid_t)atoi(dump_pid("jmet", "b", 1, e1)), SIGKILL);
    wait_metric(&b, "ecoord_failures_total{kind=\"signaled\"}", 1, 1, 10000);
    wait_metric(&b, "ecoord_restarts_total", 1, 1, 5000);
    for (int i = 0; i < 2; i++) {
        wait_metric(ag[i], "ecoord_epoch", (double)e1 + 1, 1e9, 10000);
        wait_metric(ag[i], "ecoord_epochs_total{reason=\"restart\"}", 1, 1e9, 5000);
        ck_assert_double_eq(scrape(ag[i]->port, "ecoord_world_size"), 4);
    }
    wait_metric(&b, "ecoord_recovery_phase_seconds_count{phase=\"recover\"}", 1, 1, 5000);
    ck_assert_double_eq(scrape(a.port, "ecoord_failures_total{kind=\"signaled\"}"), 0);

    /* b SIGTERMed: graceful leave, a re-forms alone without waiting 60 s */
    double e2 = scrape(a.port, "ecoord_epoch");
    int64_t t0 = ec_test_now_ms();
    kill(b.pid, SIGTERM);
    ck_assert_int_eq(ec_test_reap(b.pid, 15000), 128 + SIGTERM);
    wait_metric(&a, "ecoord_world_size", 2, 2, 15000);
    ck_assert_int_lt(ec_test_now_ms() - t0, 30000);
    ck_assert_double_gt(scrape(a.port, "ecoord_epoch"), e2);
    ck_assert_double_eq(scrape(a.port, "ecoord_nodes"), 1);
    ck_assert_double_eq(scrape(a.port, "ecoord_node_index"), 0);
    ck_assert_double_ge(scrape(a.port, "ecoord_epochs_total{reason=\"leave\"}"), 1);
    ep = ec_test_epoch(c, "/jmet/");
    ck_assert_ptr_nonnull(ep);
    ck_assert_double_eq(scrape(a.port, "ecoord_epoch"), (double)ep->number);
    ec_epoch_free(ep);
    /* b's server went away with it */
    ck_assert(isnan(scrape(b.port, "ecoord_epoch")));
    /* with b gone, a leads */
    wait_metric(&a, "ecoord_is_leader", 1, 1, 10000);
}
END_TEST

START_TEST(spare_node_reports_standby)
{
    agent_t x = start_agent("jspare", "x", "1", ec_free_port());
    wait_metric(&x, "ecoord_world_size", 2, 2, 20000); /* x's port is bound from here on */
    agent_t y = start_agent("jspare", "y", "1", ec_free_port());
    wait_metric(&y, "ecoord_lease_ok", 1, 1, 10000);
    wait_metric(&y, "ecoord_membership_state{state=\"standby\"}", 1, 1, 10000);
    ck_assert_double_eq(scrape(y.port, "ecoord_node_index"), -1);
    ck_assert_double_eq(scrape(y.port, "ecoord_world_size"), 2);
    ck_assert_double_eq(scrape(x.port, "ecoord_membership_state{state=\"member\"}"), 1);
}
END_TEST

START_TEST(port_in_use_stops_the_agent)
{
    /* hold a port, then ask an agent to serve metrics on it */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 1), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    agent_t z = start_agent("jport", "z", "1", ntohs(sa.sin_port));
    int rc = ec_test_reap(z.pid, 15000);
    close(fd);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(ec_test_file_contains(z.log, "pick another --metrics_port"), "see %s", z.log);
    char p[400];
    snprintf(p, sizeof(p), "%s/jport-z/workerlog.0", tmp);
    ck_assert_msg(access(p, F_OK) != 0, "a training process started");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t6000-metrics");
    TCase *t = tcase_create("metrics");
    tcase_add_checked_fixture(t, etcd_up, etcd_down);
    tcase_set_timeout(t, ec_test_ms(120000) / 1000.0);
    ec_tcase_add(t, port_in_use_stops_the_agent);
    ec_tcase_add(t, metrics_follow_the_job);
    ec_tcase_add(t, spare_node_reports_standby);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    if (!ec_metrics_http_available()) {
        /* coord/agent/test/test_metrics checks the refusal such a build gives */
        printf("1..0 # SKIP ecoord was built without libmicrohttpd (apt-get install "
               "libmicrohttpd-dev, then ./configure)\n");
        return 0;
    }
    ec_test_require_etcd();
    SRunner *sr = srunner_create(suite());
    srunner_set_fork_status(sr, CK_NOFORK); /* gRPC state must not cross fork() */
    srunner_set_tap(sr, "-");
    srunner_run_all(sr, CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
