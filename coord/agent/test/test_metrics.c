/* Rule checked: the metrics an agent exposes follow what it reports (epoch,
 * world size, membership state, failures, restarts, leadership and lease
 * events, phase histograms), the text is valid Prometheus exposition format
 * (every sample's family declared with HELP and TYPE first, no series twice,
 * cumulative buckets that end in _count), and the HTTP face answers /metrics,
 * /healthz and /readyz, refuses other methods and pages, and explains a
 * port it cannot bind or a build without libmicrohttpd. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "ec_http.h"
#include "metrics.h"

static ec_metrics_t *mk(int port)
{
    ec_metrics_opts_t o = EC_METRICS_OPTS_INIT;
    o.port = port;
    o.job_id = "job1";
    o.node_id = "train-0";
    o.version = "0.1.0";
    ec_error_t err = {0};
    ec_metrics_t *m = ec_metrics_create(&o, &err);
    ck_assert_msg(m != NULL, "ec_metrics_create: %s", err.msg);
    return m;
}

static double val(ec_metrics_t *m, const char *series)
{
    char *t = ec_metrics_text(m);
    ck_assert_ptr_nonnull(t);
    double v = ec_prom_value(t, series, NAN);
    free(t);
    ck_assert_msg(!isnan(v), "no series %s", series);
    return v;
}

static ec_epoch_t *epoch(uint64_t number, int nodes, int nproc, ec_epoch_reason_t reason)
{
    ec_epoch_t *ep = ec_epoch_new(nodes, nproc);
    ck_assert_ptr_nonnull(ep);
    ep->number = number;
    ep->reason = reason;
    ep->observed_at_ms = 1700000000000;
    ep->decided_at_ms = ep->observed_at_ms + 20;
    ep->planner_us = 150;
    ep->published_at_ms = ep->decided_at_ms + 3;
    return ep;
}

/* Check the exposition format; returns the number of samples. */
static int check_format(const char *text)
{
    char typed[64][96];
    int ntyped = 0, nsamples = 0;
    char seen[512][192];
    int nseen = 0;
    char *copy = strdup(text), *save = NULL;
    ck_assert_msg(text[strlen(text) - 1] == '\n', "text must end with a newline");
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(l, "# HELP ", 7))
            continue;
        if (!strncmp(l, "# TYPE ", 7)) {
            char name[96], type[32];
            ck_assert_int_eq(sscanf(l + 7, "%95s %31s", name, type), 2);
            ck_assert_msg(!strcmp(type, "gauge") || !strcmp(type, "counter") ||
                              !strcmp(type, "histogram"), "bad type in '%s'", l);
            for (int i = 0; i < ntyped; i++)
                ck_assert_msg(strcmp(typed[i], name), "family %s declared twice", name);
            snprintf(typed[ntyped++], sizeof(typed[0]), "%s", name);
            continue;
        }
        ck_assert_msg(l[0] != '#', "stray comment '%s'", l);
        /* name{labels} value */
        char *sp = strrchr(l, ' ');
        ck_assert_msg(sp != NULL, "no value in '%s'", l);
        char *end;
        strtod(sp + 1, &end);
        ck_assert_msg(*end == '\0' && end != sp + 1, "bad value in '%s'", l);
        size_t nlen = strcspn(l, "{ ");
        char fam[96];
        snprintf(fam, sizeof(fam), "%.*s", (int)nlen, l);
        for (int i = 0; fam[i]; i++)
            ck_assert_msg((fam[i] >= 'a' && fam[i] <= 'z') || fam[i] == '_' ||
                              (fam[i] >= '0' && fam[i] <= '9'), "bad metric name '%s'", fam);
        bool declared = false;
        for (int i = 0; i < ntyped && !declared; i++) {
            size_t tl = strlen(typed[i]);
            declared = !strcmp(fam, typed[i]) ||
                       (!strncmp(fam, typed[i], tl) &&
                        (!strcmp(fam + tl, "_bucket") || !strcmp(fam + tl, "_sum") ||
                         !strcmp(fam + tl, "_count")));
        }
        ck_assert_msg(declared, "sample '%s' before its # TYPE", l);
        if (l[nlen] == '{')
            ck_assert_msg(strchr(l, '}') && strchr(l, '}') < sp, "unclosed labels in '%s'", l);
        *sp = '\0';
        for (int i = 0; i < nseen; i++)
            ck_assert_msg(strcmp(seen[i], l), "series %s twice", l);
        if (nseen < 512)
            snprintf(seen[nseen++], sizeof(seen[0]), "%s", l);
        nsamples++;
    }
    free(copy);
    return nsamples;
}

/* Buckets of one histogram series are cumulative and end at _count. */
static void check_histogram(const char *text, const char *name, const char *label)
{
    char prefix[256];
    snprintf(prefix, sizeof(prefix), "%s_bucket{%s%sle=\"", name, label, *label ? "," : "");
    double prev = -1, inf = -1;
    for (const char *l = strstr(text, prefix); l; l = strstr(l + 1, prefix)) {
        double v = strtod(strchr(l, ' ') + 1, NULL);
        ck_assert_msg(v >= prev, "%s buckets not cumulative", name);
        prev = v;
        if (!strncmp(l + strlen(prefix), "+Inf", 4))
            inf = v;
    }
    ck_assert_msg(inf >= 0, "%s{%s} has no +Inf bucket", name, label);
    char count[256];
    snprintf(count, sizeof(count), "%s_count%s%s%s", name, *label ? "{" : "", label,
             *label ? "}" : "");
    ck_assert_double_eq(ec_prom_value(text, count, -1), inf);
}

START_TEST(values_follow_reports)
{
    ec_metrics_t *m = mk(0);
    ck_assert_double_eq(val(m, "ecoord_epoch"), 0);
    ck_assert_double_eq(val(m, "ecoord_node_index"), -1);
    ck_assert_double_eq(val(m, "ecoord_membership_state{state=\"joining\"}"), 1);
    ck_assert_double_eq(val(m, "ecoord_membership_state{state=\"member\"}"), 0);
    ck_assert_double_eq(val(m, "ecoord_info{job_id=\"job1\",node_id=\"train-0\",version=\"0.1.0\"}"), 1);

    ec_epoch_t *ep = epoch(1, 3, 2, EC_REASON_START);
    ec_metrics_epoch(m, ep, 1, 40);
    ec_epoch_free(ep);
    ck_assert_double_eq(val(m, "ecoord_epoch"), 1);
    ck_assert_double_eq(val(m, "ecoord_world_size"), 6);
    ck_assert_double_eq(val(m, "ecoord_nodes"), 3);
    ck_assert_double_eq(val(m, "ecoord_nproc_per_node"), 2);
    ck_assert_double_eq(val(m, "ecoord_node_index"), 1);
    ck_assert_double_eq(val(m, "ecoord_membership_state{state=\"member\"}"), 1);
    ck_assert_double_eq(val(m, "ecoord_membership_state{state=\"joining\"}"), 0);
    ck_assert_double_eq(val(m, "ecoord_epochs_total{reason=\"start\"}"), 1);
    ck_assert_double_eq(val(m, "ecoord_recovery_phase_seconds_count{phase=\"decide\"}"), 1);
    ck_assert_double_eq(val(m, "ecoord_recovery_phase_seconds_sum{phase=\"decide\"}"), 0.02);
    ck_assert_double_eq(val(m, "ecoord_recovery_phase_seconds_sum{phase=\"plan\"}"), 0.00015);
    ck_assert_double_eq(val(m, "ecoord_recovery_phase_seconds_sum{phase=\"publish\"}"), 0.003);
    ck_assert_double_eq(val(m, "ecoord_recovery_phase_seconds_sum{phase=\"apply\"}"), 0.04);
    ck_assert_double_eq(val(m, "ecoord_recovery_phase_seconds_count{phase=\"recover\"}"), 0);

    /* a failure, a restart, then the restart epoch: recover is measured once */
    ec_metrics_failure(m, EC_FAILURE_SIGNALED);
    ec_metrics_restart(m);
    ck_assert_double_eq(val(m, "ecoord_failures_total{kind=\"signaled\"}"), 1);
    ck_assert_double_eq(val(m, "ecoord_failures_total{kind=\"exited\"}"), 0);
    ck_assert_double_eq(val(m, "ecoord_restarts_total"), 1);
    ep = epoch(2, 3, 2, EC_REASON_RESTART);
    ec_metrics_epoch(m, ep, 1, 10);
    ck_assert_double_eq(val(m, "ecoord_recovery_phase_seconds_count{phase=\"recover\"}"), 1);
    ec_metrics_epoch(m, ep, 1, 10);
    ec_epoch_free(ep);
    ck_assert_double_eq(val(m, "ecoord_recovery_phase_seconds_count{phase=\"recover\"}"), 1);
    ck_assert_double_eq(val(m, "ecoord_epochs_total{reason=\"restart\"}"), 2);

    /* not a member any more: standby, index -1 */
    ep = epoch(3, 2, 2, EC_REASON_LEAVE);
    ec_metrics_epoch(m, ep, -1, 5);
    ec_epoch_free(ep);
    ck_assert_double_eq(val(m, "ecoord_world_size"), 4);
    ck_assert_double_eq(val(m, "ecoord_node_index"), -1);
    ck_assert_double_eq(val(m, "ecoord_membership_state{state=\"standby\"}"), 1);

    /* leaving is final: a late epoch does not turn it back into member */
    ec_metrics_state(m, EC_MSTATE_LEAVING);
    ep = epoch(4, 3, 2, EC_REASON_JOIN);
    ec_metrics_epoch(m, ep, 0, 5);
    ec_epoch_free(ep);
    ck_assert_double_eq(val(m, "ecoord_epoch"), 4);
    ck_assert_double_eq(val(m, "ecoord_membership_state{state=\"leaving\"}"), 1);
    ck_assert_double_eq(val(m, "ecoord_membership_state{state=\"member\"}"), 0);

    /* a phase with missing leader times is skipped, not reported from 1970 */
    ep = epoch(5, 3, 2, EC_REASON_JOIN);
    ep->observed_at_ms = ep->decided_at_ms = ep->published_at_ms = 0;
    ep->planner_us = 0;
    double before = val(m, "ecoord_recovery_phase_seconds_count{phase=\"total\"}");
    ec_metrics_epoch(m, ep, 0, 5);
    ec_epoch_free(ep);
    ck_assert_double_eq(val(m, "ecoord_recovery_phase_seconds_count{phase=\"total\"}"), before);
    ec_metrics_destroy(m);
}
END_TEST

START_TEST(events_drive_leader_and_lease)
{
    ec_metrics_t *m = mk(0);
    char why[256];
    ck_assert(!ec_metrics_ready(m, why, sizeof(why)));
    ck_assert_ptr_nonnull(strstr(why, "no live lease"));
    ec_metrics_event(m, "+node train-0 registered host=10.0.0.7 nproc=2 lease=1f");
    ck_assert_double_eq(val(m, "ecoord_lease_ok"), 1);
    ck_assert_double_eq(val(m, "ecoord_lease_info{lease_id=\"1f\"}"), 1);
    ck_assert(ec_metrics_ready(m, why, sizeof(why)));
    ec_metrics_event(m, "+leader train-0 rev=7");
    ck_assert_double_eq(val(m, "ecoord_is_leader"), 1);
    ck_assert_double_eq(val(m, "ecoord_leader_elections_total"), 1);
    ec_metrics_event(m, "-leader train-0: lease lost");
    ck_assert_double_eq(val(m, "ecoord_is_leader"), 0);
    ec_metrics_event(m, "-lease 1f lost; registering again");
    ck_assert_double_eq(val(m, "ecoord_lease_ok"), 0);
    ck_assert_double_eq(val(m, "ecoord_lease_losses_total"), 1);
    ck_assert(!ec_metrics_ready(m, why, sizeof(why)));
    ec_metrics_event(m, "+node train-0 registered host=10.0.0.7 nproc=2 lease=20");
    ck_assert_double_eq(val(m, "ecoord_lease_info{lease_id=\"20\"}"), 1);
    ec_metrics_event(m, "+epoch 3 world=4"); /* not ours to count: ignored */
    ec_metrics_event(m, "-node train-0 leaving: lease revoked");
    ck_assert_double_eq(val(m, "ecoord_lease_ok"), 0);
    ck_assert_double_eq(val(m, "ecoord_membership_state{state=\"leaving\"}"), 1);
    char *t = ec_metrics_text(m);
    ck_assert_ptr_null(strstr(t, "ecoord_lease_info{")); /* no lease, no series */
    free(t);
    /* a node that failed past --max_restart stays "failed" as it leaves */
    ec_metrics_state(m, EC_MSTATE_FAILED);
    ec_metrics_event(m, "-node train-0 leaving: lease revoked");
    ck_assert_double_eq(val(m, "ecoord_membership_state{state=\"failed\"}"), 1);
    /* NULL is a no-op everywhere, so the agent never tests for it */
    ec_metrics_event(NULL, "+leader x rev=1");
    ec_metrics_epoch(NULL, NULL, 0, 0);
    ec_metrics_failure(NULL, EC_FAILURE_EXITED);
    ec_metrics_restart(NULL);
    ec_metrics_state(NULL, EC_MSTATE_DONE);
    ck_assert_ptr_null(ec_metrics_text(NULL));
    ec_metrics_destroy(NULL);
    ec_metrics_destroy(m);
}
END_TEST

START_TEST(exposition_format)
{
    ec_metrics_t *m = mk(0);
    ec_epoch_t *ep = epoch(7, 4, 8, EC_REASON_LOST);
    for (int i = 0; i < 5; i++)
        ec_metrics_epoch(m, ep, 2, 100 * i);
    ec_epoch_free(ep);
    ec_metrics_observe(m, EC_PHASE_RECOVER, 1000); /* above the last bucket */
    ec_metrics_observe(m, EC_PHASE_RECOVER, 0.0001);
    char *t = ec_metrics_text(m);
    ck_assert_int_gt(check_format(t), 50);
    for (int p = 0; p < EC_PHASE__COUNT; p++) {
        char label[64];
        snprintf(label, sizeof(label), "phase=\"%s\"", ec_phase_name((ec_phase_t)p));
        check_histogram(t, "ecoord_recovery_phase_seconds", label);
    }
    ck_assert_double_eq(ec_prom_value(t, "ecoord_recovery_phase_seconds_bucket{phase=\"recover\",le=\"+Inf\"}", -1), 2);
    ck_assert_double_eq(ec_prom_value(t, "ecoord_recovery_phase_seconds_bucket{phase=\"recover\",le=\"120\"}", -1), 1);
    ck_assert_double_eq(ec_prom_value(t, "ecoord_recovery_phase_seconds_bucket{phase=\"apply\",le=\"0.0005\"}", -1), 1);
    ck_assert_ptr_null(strstr(t, "ecoord_etcd_up")); /* no etcd given: no probe series */
    free(t);
    ec_metrics_destroy(m);
}
END_TEST

START_TEST(http_endpoints)
{
    if (!ec_metrics_http_available()) {
        /* the build without libmicrohttpd refuses a port and says why */
        ec_metrics_opts_t o = EC_METRICS_OPTS_INIT;
        o.port = 9400;
        ec_error_t err = {0};
        ck_assert_ptr_null(ec_metrics_create(&o, &err));
        ck_assert_int_eq(err.code, EC_EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "apt-get install libmicrohttpd-dev"));
        return;
    }
    int port = ec_free_port();
    ck_assert_int_gt(port, 0);
    ec_metrics_t *m = mk(port);
    static char resp[1 << 17];
    ck_assert_int_eq(ec_http_request(port, "GET", "/metrics", resp, sizeof(resp)), 200);
    ck_assert_ptr_nonnull(strstr(resp, "text/plain; version=0.0.4"));
    check_format(ec_http_body(resp));
    ck_assert_double_eq(ec_prom_value(ec_http_body(resp), "ecoord_epoch", -1), 0);
    ck_assert_int_eq(ec_http_request(port, "GET", "/healthz", resp, sizeof(resp)), 200);
    ck_assert_str_eq(ec_http_body(resp), "ok\n");
    ck_assert_int_eq(ec_http_request(port, "GET", "/readyz", resp, sizeof(resp)), 503);
    ck_assert_ptr_nonnull(strstr(ec_http_body(resp), "no live lease"));
    ec_metrics_event(m, "+node train-0 registered host=h nproc=1 lease=5");
    ck_assert_int_eq(ec_http_request(port, "GET", "/readyz", resp, sizeof(resp)), 200);
    ck_assert_int_eq(ec_http_request(port, "HEAD", "/metrics", resp, sizeof(resp)), 200);
    ck_assert_str_eq(ec_http_body(resp), "");
    ck_assert_int_eq(ec_http_request(port, "POST", "/metrics", resp, sizeof(resp)), 405);
    ck_assert_ptr_nonnull(strstr(resp, "Allow: GET, HEAD"));
    ck_assert_int_eq(ec_http_request(port, "GET", "/nope", resp, sizeof(resp)), 404);
    ck_assert_ptr_nonnull(strstr(ec_http_body(resp), "/metrics"));

    /* the same port again: refused with the fix in the message */
    ec_metrics_opts_t o = EC_METRICS_OPTS_INIT;
    o.port = port;
    ec_error_t err = {0};
    ck_assert_ptr_null(ec_metrics_create(&o, &err));
    ck_assert_int_eq(err.code, EC_ESYS);
    ck_assert_msg(strstr(err.msg, "pick another --metrics_port") != NULL, "%s", err.msg);
    ec_metrics_destroy(m);
    /* stopped means closed */
    ck_assert_int_eq(ec_http_request(port, "GET", "/healthz", resp, sizeof(resp)), -1);

    /* a bind address that is not an IP address */
    o.bind_addr = "not-an-address";
    ck_assert_ptr_null(ec_metrics_create(&o, &err));
    ck_assert_int_eq(err.code, EC_EINVAL);
}
END_TEST

/* Hangs and stragglers: a gauge per node from each progress summary, the
 * last one for a node replacing its earlier one; the leader's hang events
 * counted by kind. */
START_TEST(progress_gauges_per_node_and_hang_events)
{
    ec_metrics_t *m = mk(0);
    ec_node_progress_t p = {.seq = 1, .reporting = 1, .step = 40, .silent_rank = -1,
                            .step_p50_us = 50000, .slowest_us = 52000, .slowest_rank = 1};
    ec_metrics_progress(m, "a", &p);
    p.step_p50_us = 200000;
    p.slowest_us = 210000;
    p.slowest_rank = 0;
    p.silent_ms = 3000;
    p.stopped = 1;
    ec_metrics_progress(m, "c", &p);
    p.step_p50_us = 60000;
    ec_metrics_progress(m, "a", &p);
    ck_assert_double_eq(val(m, "ecoord_node_step_seconds{node=\"a\"}"), 0.06);
    ck_assert_double_eq(val(m, "ecoord_node_step_seconds{node=\"c\"}"), 0.2);
    ck_assert_double_eq(val(m, "ecoord_node_slowest_rank_step_seconds{node=\"c\",local_rank=\"0\"}"),
                        0.21);
    ck_assert_double_eq(val(m, "ecoord_node_step{node=\"c\"}"), 40);
    ck_assert_double_eq(val(m, "ecoord_node_silent{node=\"c\"}"), 2);
    ck_assert_double_eq(val(m, "ecoord_hang_events_total{event=\"suspect\"}"), 0);
    ec_metrics_event(m, "+hang-suspect c epoch 3: c: local rank 0 silent 3.0 s");
    ec_metrics_event(m, "+hang-stalled epoch 4: ...");
    ec_metrics_event(m, "+straggler c epoch 5: ...");
    ck_assert_double_eq(val(m, "ecoord_hang_events_total{event=\"suspect\"}"), 1);
    ck_assert_double_eq(val(m, "ecoord_hang_events_total{event=\"stalled\"}"), 1);
    ck_assert_double_eq(val(m, "ecoord_hang_events_total{event=\"straggler\"}"), 1);
    ec_metrics_destroy(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_set_timeout(tc, ec_test_ms(30000) / 1000.0);
    tcase_add_test(tc, values_follow_reports);
    tcase_add_test(tc, events_drive_leader_and_lease);
    tcase_add_test(tc, exposition_format);
    tcase_add_test(tc, http_endpoints);
    tcase_add_test(tc, progress_gauges_per_node_and_hang_events);
    suite_add_tcase(s, tc);
    return s;
}

EC_CHECK_MAIN(suite)
