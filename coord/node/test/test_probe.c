/* The rule under test: a probe counts an answer that is in the socket when
 * it looks, even when it looks after its deadline.  A prober that was stopped
 * or starved past its deadline (a SIGSTOPped agent, an overloaded host) must
 * not declare a target silent whose answer has been waiting for it all
 * along; only a target with nothing to read, then, is silent.  And the
 * ordinary round trip: an agent's probe server answers with its node id and
 * a proof made with its run's secret; a wrong id, a closed port, or (for a
 * prober with a verifier) another secret or lease does not count.
 */
#include "probe.h"
#include "clock.h"
#include "probe_proof.h"
#include "probe_server.h"
#include "suspects.h"

#include <arpa/inet.h>
#include <ec_check.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* A listening socket on a free loopback port; *port gets the port. */
static int listen_any(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    socklen_t sl = sizeof(a);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &sl), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Accept the prober's connection within a deadline. */
static int accept_within(int lfd, long ms)
{
    struct pollfd pf = {lfd, POLLIN, 0};
    ck_assert_msg(poll(&pf, 1, (int)ec_test_ms(ms)) == 1, "the prober never connected");
    int c = accept(lfd, NULL, NULL);
    ck_assert_int_ge(c, 0);
    return c;
}

START_TEST(answer_queued_before_a_late_look_counts)
{
    uint16_t port;
    int lfd = listen_any(&port);
    ec_probe_target_t t = {.host = "127.0.0.1", .port = port, .expect_id = "n1"};
    ec_probe_batch_t *b = ec_probe_begin(&t, 1);
    ck_assert_ptr_nonnull(b);
    /* The target answers at once; the prober is "descheduled" and looks only
     * after its deadline: the answer is in its socket (loopback: send() has
     * queued it at the receiver when it returns). */
    int c = accept_within(lfd, 5000);
    const char line[] = "ecoord n1\n";
    ck_assert_int_eq(send(c, line, sizeof(line) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(line) - 1);
    int got = ec_probe_collect(b, ec_mono_us() - 1000000); /* a second too late */
    ck_assert_msg(got == 1 && t.ok == 1, "an answer waiting in the socket was not counted "
                                         "(answered %d, ok %d)", got, t.ok);
    ck_assert_int_ge(t.rtt_us, 0);
    close(c);
    close(lfd);
}
END_TEST

START_TEST(nothing_to_read_after_the_deadline_is_silent)
{
    uint16_t port;
    int lfd = listen_any(&port);
    ec_probe_target_t t[2] = {{.host = "127.0.0.1", .port = port, .expect_id = "n1"},
                              {.host = "127.0.0.1", .port = port, .expect_id = "n2"}};
    ec_probe_batch_t *b = ec_probe_begin(t, 2);
    ck_assert_ptr_nonnull(b);
    /* Both connected (the kernel accepts for a frozen process too); one
     * answers with the wrong id, the other says nothing. */
    int c1 = accept_within(lfd, 5000), c2 = accept_within(lfd, 5000);
    const char line[] = "ecoord n9\n";
    ck_assert_int_eq(send(c1, line, sizeof(line) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(line) - 1);
    ck_assert_int_eq(send(c2, line, sizeof(line) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(line) - 1);
    int64_t t0 = ec_mono_us();
    ck_assert_int_eq(ec_probe_collect(b, t0 - 1), 0);
    ck_assert_int_eq(t[0].ok, 0);
    ck_assert_int_eq(t[1].ok, 0);
    /* and a silent target with a live deadline: waited for, not answered */
    ec_probe_target_t s = {.host = "127.0.0.1", .port = port, .expect_id = "n1"};
    t0 = ec_mono_us();
    ck_assert_int_eq(ec_probe_many(&s, 1, 100), 0);
    ck_assert_int_ge(ec_mono_us() - t0, 100000);
    ck_assert_int_eq(s.ok, 0);
    close(c1);
    close(c2);
    close(lfd);
}
END_TEST

/* A probe server that cannot get a socket says why, with the fix: out of
 * file descriptors read "Bad file descriptor" (errno of a later call). */
START_TEST(probe_server_out_of_descriptors_says_so)
{
    uint8_t secret[EC_PROBE_SECRET_LEN];
    memset(secret, 7, sizeof(secret));
    struct rlimit rl = {64, 64};
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    while (open("/dev/null", O_RDONLY) >= 0)
        ;
    ec_error_t err = {0};
    ec_probe_server_t *s = ec_probe_serve("127.0.0.1", 1, "n1", secret, 0x42, &err);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.msg, "Too many open files") && strstr(err.msg, "ulimit -n"), "%s",
                  err.msg);
}
END_TEST

/* What a failed probe tells the failure detector (coord/core/detector.h):
 * a port nobody listens on refuses; a listener that accepts and never
 * answers (a frozen agent's kernel) completed the handshake; one that
 * answers a line failing the check, or closes without a line, turned the
 * probe away. */
START_TEST(a_failed_probe_says_whether_it_was_refused_or_connected)
{
    uint16_t port;
    int lfd = listen_any(&port);
    ec_probe_target_t t = {.host = "127.0.0.1", .port = port, .expect_id = "n1"};
    ck_assert_int_eq(ec_probe_many(&t, 1, 100), 0); /* accepted by the kernel, never answered */
    ck_assert_int_eq(t.connected, 1);
    ck_assert_int_eq(t.refused, 0);
    ck_assert_int_ge(t.connect_us, 0);
    int c = accept_within(lfd, 5000);
    close(c);
    ec_probe_batch_t *b = ec_probe_begin(&t, 1); /* a wrong answer */
    c = accept_within(lfd, 5000);
    const char line[] = "ecoord n2\n";
    ck_assert_int_eq(send(c, line, sizeof(line) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(line) - 1);
    ck_assert_int_eq(ec_probe_collect(b, ec_mono_us() + ec_test_ms(2000) * 1000), 0);
    ck_assert_int_eq(t.refused, 1);
    close(c);
    b = ec_probe_begin(&t, 1); /* closed without a line */
    c = accept_within(lfd, 5000);
    close(c);
    ck_assert_int_eq(ec_probe_collect(b, ec_mono_us() + ec_test_ms(2000) * 1000), 0);
    ck_assert_int_eq(t.refused, 1);
    close(lfd); /* nobody listens now */
    ck_assert_int_eq(ec_probe_many(&t, 1, 1000), 0);
    ck_assert_int_eq(t.refused, 1);
    ck_assert_int_eq(t.connected, 0);
}
END_TEST

START_TEST(probe_server_round_trip)
{
    uint16_t port;
    int lfd = listen_any(&port);
    close(lfd); /* a free port for the server (loopback, this test only) */
    ec_error_t err = {0};
    uint8_t secret[EC_PROBE_SECRET_LEN], other[EC_PROBE_SECRET_LEN];
    memset(secret, 7, sizeof(secret));
    memset(other, 8, sizeof(other));
    ec_probe_key_t key, wrong;
    ec_probe_key_init(&key, secret);
    ec_probe_key_init(&wrong, other);
    ec_probe_server_t *s = ec_probe_serve("127.0.0.1", port, "n1", secret, 0x42, &err);
    ck_assert_msg(s != NULL, "%s", err.msg);
    ec_probe_target_t t[7] = {
        {.host = "127.0.0.1", .port = port, .expect_id = "n1"},
        {.host = "127.0.0.1", .port = port, .expect_id = "n2"},
        {.host = "127.0.0.1", .port = port},
        {.host = "127.0.0.1", .port = port, .expect_id = "n1", .verify = &key.v, .expect_lease = 0x42},
        {.host = "127.0.0.1", .port = port, .expect_id = "n1", .verify = &key.v},
        {.host = "127.0.0.1", .port = port, .expect_id = "n1", .verify = &wrong.v},
        {.host = "127.0.0.1", .port = port, .expect_id = "n1", .verify = &key.v, .expect_lease = 0x43}};
    ck_assert_int_eq(ec_probe_many(t, 7, (int)ec_test_ms(5000)), 4);
    ck_assert_int_eq(t[0].ok, 1);
    ck_assert_int_eq(t[1].ok, 0); /* another node answered */
    ck_assert_int_eq(t[2].ok, 1); /* any node */
    ck_assert_int_eq(t[3].ok, 1); /* proven, under its lease */
    ck_assert_int_eq(t[4].ok, 1); /* proven, any lease */
    ck_assert_int_eq(t[5].ok, 0); /* another run's secret */
    ck_assert_int_eq(t[6].ok, 0); /* another lease (an older registration) */
    ec_probe_server_set_lease(s, 0x43);
    ck_assert_int_eq(ec_probe_many(&t[6], 1, (int)ec_test_ms(5000)), 1);
    ec_probe_server_stop(s);
    /* closed now: refused, not waited for */
    ec_probe_target_t gone = {.host = "127.0.0.1", .port = port, .expect_id = "n1"};
    int64_t t0 = ec_mono_us();
    ck_assert_int_eq(ec_probe_many(&gone, 1, (int)ec_test_ms(5000)), 0);
    ck_assert_int_lt(ec_mono_us() - t0, ec_test_ms(5000) * 1000);
}
END_TEST

/* The probe-and-report logic the agent and the worker library share
 * (coord/core/suspects.h): every member but self probed at its host and
 * the port its record gives; a member without an answering agent, or
 * without a record (port 0), is silent. */
static uint16_t ports_of[2];
static uint16_t port_of_test(const char *id, void *arg)
{
    (void)arg;
    return !strcmp(id, "a") ? ports_of[0] : !strcmp(id, "b") ? ports_of[1] : 0;
}

START_TEST(members_probed_and_silent_ones_named)
{
    ec_error_t err = {0};
    ec_probe_server_t *srv[2];
    const char *ids[2] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        int lfd = listen_any(&ports_of[i]);
        close(lfd);
        uint8_t secret[EC_PROBE_SECRET_LEN] = {1};
        srv[i] = ec_probe_serve("127.0.0.1", ports_of[i], i == 0 ? ids[0] : "not-b", secret, 1,
                                &err);
        ck_assert_msg(srv[i] != NULL, "%s", err.msg);
    }
    ec_epoch_t *ep = ec_epoch_new(4, 1);
    ck_assert_ptr_nonnull(ep);
    const char *mids[4] = {"me", "a", "b", "c"};
    for (int m = 0; m < 4; m++) {
        ep->members[m].node_id = strdup(mids[m]);
        ep->members[m].host = strdup("127.0.0.1");
    }
    char **silent = NULL;
    /* a answers; b's port answers as another node; c has no record */
    int nd = ec_probe_members(ep, "me", 0, port_of_test, NULL, NULL, (int)ec_test_ms(5000), &silent);
    ck_assert_int_eq(nd, 2);
    ck_assert_str_eq(silent[0], "b");
    ck_assert_str_eq(silent[1], "c");
    ec_ids_free(silent, nd);
    ec_epoch_free(ep);
    for (int i = 0; i < 2; i++)
        ec_probe_server_stop(srv[i]);
}
END_TEST

/* Probe ports an epoch carries (its leader copies them from the records)
 * need no port_of, so no read of the node records: an epoch from an older
 * leader, without them, says it needs one. */
START_TEST(probe_ports_in_the_epoch_need_no_records)
{
    ec_error_t err = {0};
    uint16_t port;
    int lfd = listen_any(&port);
    close(lfd);
    uint8_t secret[EC_PROBE_SECRET_LEN] = {1};
    ec_probe_server_t *srv = ec_probe_serve("127.0.0.1", port, "a", secret, 1, &err);
    ck_assert_msg(srv != NULL, "%s", err.msg);
    ec_epoch_t *ep = ec_epoch_new(2, 1);
    ck_assert_ptr_nonnull(ep);
    ep->members[0].node_id = strdup("me");
    ep->members[1].node_id = strdup("a");
    for (int m = 0; m < 2; m++)
        ep->members[m].host = strdup("127.0.0.1");
    ck_assert(!ec_probe_ports_known(ep, "me", 0)); /* a's port not said */
    ep->members[1].probe_port = port;
    ck_assert(ec_probe_ports_known(ep, "me", 0)); /* ours is never needed */
    char **silent = NULL;
    int nd = ec_probe_members(ep, "me", 0, NULL, NULL, NULL, (int)ec_test_ms(5000), &silent);
    ck_assert_int_eq(nd, 0);
    ec_epoch_free(ep);
    ec_probe_server_stop(srv);
}
END_TEST

/* A large epoch (split in chunks) is probed around self, as a follower's
 * view holds it: self's chunk, the ones on either side and its two
 * successors', not every member (a failure that takes every node's processes at once would have
 * each agent probe the whole job: N x N connections, past the descriptor
 * limit beyond about a thousand members). */
static int asked;
static uint16_t count_port(const char *id, void *arg)
{
    (void)id;
    (void)arg;
    asked++;
    return 0; /* no agent: silent, nothing connects */
}

START_TEST(a_large_epoch_is_probed_around_self_not_whole)
{
    enum { N = 2000, C = 256 };
    ec_epoch_t *ep = ec_epoch_new(N, 1);
    ck_assert_ptr_nonnull(ep);
    ep->chunk_members = C;
    char id[16];
    for (int m = 0; m < N; m++) {
        snprintf(id, sizeof(id), "n%04d", m);
        ep->members[m].node_id = strdup(id);
        ep->members[m].host = strdup("127.0.0.1");
    }
    char **silent = NULL;
    asked = 0;
    int nd = ec_probe_members(ep, "n0600", 2, count_port, NULL, NULL, 100, &silent); /* chunk 2 */
    ck_assert_int_eq(asked, 3 * C - 1);
    ck_assert_int_eq(nd, 3 * C - 1);
    for (int i = 0; i < nd; i++) {
        int m = atoi(silent[i] + 1);
        ck_assert_msg(m >= C && m < 4 * C, "member %d is outside chunks 1..3", m);
    }
    ec_ids_free(silent, nd);
    /* at the end the window wraps: the last chunk (7, of 208), 6 and 0 */
    asked = 0;
    nd = ec_probe_members(ep, "n1999", 2, count_port, NULL, NULL, 100, &silent);
    ck_assert_int_eq(asked, (N - 7 * C) + C + C - 1);
    ec_ids_free(silent, nd);
    ec_epoch_free(ep);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("probe");
    TCase *tc = tcase_create("probe");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, answer_queued_before_a_late_look_counts);
    tcase_add_test(tc, nothing_to_read_after_the_deadline_is_silent);
    tcase_add_test(tc, a_failed_probe_says_whether_it_was_refused_or_connected);
    tcase_add_test(tc, probe_server_round_trip);
    tcase_add_test(tc, probe_server_out_of_descriptors_says_so);
    tcase_add_test(tc, members_probed_and_silent_ones_named);
    tcase_add_test(tc, a_large_epoch_is_probed_around_self_not_whole);
    tcase_add_test(tc, probe_ports_in_the_epoch_need_no_records);
    suite_add_tcase(s, tc);
    return s;
}

EC_CHECK_MAIN(suite)
