/* The etcd client's pure parts: endpoint lists become the right gRPC target,
 * gRPC statuses map to our codes with advice that always reaches the caller
 * whole (however long gRPC's details, whatever context is added), backoff
 * grows and is bounded. */
#include <grpc/status.h>
#include <string.h>

#include "backoff.h"
#include "ec_check.h"
#include "endpoints.h"
#include "error.h"
#include "etcd.h"

#include "etcd_impl.h"

static int map(const char *endpoints, bool tls, const char *method, int status,
               const char *details, ec_error_t *err)
{
    ec__conn_desc_t w = {endpoints, tls, NULL, NULL};
    return ec__grpc_error(&w, method, status, details, err);
}

static void target_of(const char *spec, char *t, size_t tl)
{
    ec__endpoints_t eps;
    ec_error_t err = {0};
    char auth[256];
    ck_assert_msg(ec__endpoints_parse(spec, &eps, &err) == 0, "%s: %s", spec, err.msg);
    ck_assert_int_eq(ec__endpoints_target(&eps, t, tl, auth, sizeof(auth), &err), 0);
}

START_TEST(endpoint_forms)
{
    char t[512];
    target_of("127.0.0.1:2379", t, sizeof(t));
    ck_assert_str_eq(t, "ipv4:127.0.0.1:2379");
    target_of("http://127.0.0.1:2379", t, sizeof(t));
    ck_assert_str_eq(t, "ipv4:127.0.0.1:2379");
    target_of("etcd://127.0.0.1:2379/", t, sizeof(t));
    ck_assert_str_eq(t, "ipv4:127.0.0.1:2379");
    target_of("127.0.0.1:2379, 127.0.0.2:22379", t, sizeof(t));
    ck_assert_str_eq(t, "ipv4:127.0.0.1:2379,127.0.0.2:22379");
    target_of("127.0.0.1", t, sizeof(t));
    ck_assert_str_eq(t, "ipv4:127.0.0.1:2379");
    target_of("[::1]:2379", t, sizeof(t));
    ck_assert_str_eq(t, "ipv6:[::1]:2379");
    target_of("localhost:2379", t, sizeof(t));
    ck_assert_str_eq(t, "dns:///localhost:2379");
    /* Several names: resolved here, since gRPC address lists can't mix names. */
    target_of("localhost:1,127.0.0.1:2", t, sizeof(t));
    ck_assert_str_eq(t, "ipv4:127.0.0.1:1,127.0.0.1:2");
}
END_TEST

START_TEST(endpoint_tls_scheme)
{
    ec__endpoints_t eps;
    ck_assert_int_eq(ec__endpoints_parse("https://127.0.0.1:2379", &eps, NULL), 0);
    ck_assert(eps.tls);
    ck_assert_int_eq(ec__endpoints_parse("http://127.0.0.1:2379", &eps, NULL), 0);
    ck_assert(!eps.tls);
}
END_TEST

START_TEST(endpoint_errors)
{
    const char *bad[] = {"", ",", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:abc",
                         "unix:///tmp/x", "::1:2379", "[::1", "http://", "a b:1", NULL};
    for (int i = 0; bad[i]; i++) {
        ec__endpoints_t eps;
        ec_error_t err = {0};
        ck_assert_msg(ec__endpoints_parse(bad[i], &eps, &err) == EC_EINVAL, "accepted '%s'", bad[i]);
        ck_assert_msg(strlen(err.msg) > 10, "no message for '%s'", bad[i]);
    }
    ec_error_t err = {0};
    ec__endpoints_t eps;
    ec__endpoints_parse("127.0.0.1:99999", &eps, &err);
    ck_assert_ptr_nonnull(strstr(err.msg, "1..65535"));
}
END_TEST

START_TEST(error_mapping)
{
    ec_error_t err = {0};
    ck_assert_int_eq(map("e:1", false, "Put", GRPC_STATUS_NOT_FOUND,
                                    "etcdserver: requested lease not found", &err), EC_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(err.msg, "requested lease not found"));
    ck_assert_int_eq(map("e:1", false, "Range", GRPC_STATUS_OUT_OF_RANGE,
                                    "etcdserver: mvcc: required revision has been compacted", &err),
                     EC_ECOMPACTED);
    ck_assert_int_eq(map("e:1", false, "Put", GRPC_STATUS_INVALID_ARGUMENT,
                                    "etcdserver: request is too large", &err), EC_ETOOLARGE);
    ck_assert_int_eq(map("e:1", false, "Put", GRPC_STATUS_INVALID_ARGUMENT,
                                    "etcdserver: key is not provided", &err), EC_EINVAL);
    ck_assert_int_eq(map("e:1", false, "Put", GRPC_STATUS_INVALID_ARGUMENT,
                                    "etcdserver: user name is empty", &err), EC_EUNAUTH);
    ck_assert_int_eq(map("e:1", false, "Put", GRPC_STATUS_UNAUTHENTICATED,
                                    "etcdserver: invalid auth token", &err), EC_EUNAUTH);
    ck_assert_int_eq(map("127.0.0.1:9", false, "Status", GRPC_STATUS_UNAVAILABLE,
                                    "failed to connect", &err), EC_EUNAVAILABLE);
    ck_assert_ptr_nonnull(strstr(err.msg, "127.0.0.1:9"));
    ck_assert_ptr_nonnull(strstr(err.msg, "is etcd running"));
    ck_assert_ptr_null(strstr(err.msg, "certificate"));
    map("h:1", true, "Status", GRPC_STATUS_UNAVAILABLE, "x", &err);
    ck_assert_ptr_nonnull(strstr(err.msg, "certificate"));
    ck_assert_int_eq(map("e:1", false, "Put", GRPC_STATUS_DEADLINE_EXCEEDED, "", &err),
                     EC_ETIMEDOUT);
    ck_assert_int_eq(map("e:1", false, "Put", GRPC_STATUS_OK, "", &err), 0);
}
END_TEST

START_TEST(error_names)
{
    ck_assert_str_eq(ec_err_name(EC_ECOMPACTED), "EC_ECOMPACTED");
    ck_assert_str_eq(ec_strerror(EC_EEPOCHCHANGED), "epoch changed");
    ck_assert_str_eq(ec_err_name(12345), "EC_UNKNOWN");
    ec_error_t err = {0};
    ck_assert_int_eq(ec_errorf(&err, EC_EINVAL, "bad %d", 7), EC_EINVAL);
    ec_error_prefix(&err, "while %s", "x");
    ck_assert_str_eq(err.msg, "while x: bad 7");
}
END_TEST

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

START_TEST(unavailable_advice_is_whole_and_names_tls_and_proxies)
{
    ec_error_t err = {0};
    char details[700];
    memset(details, 'x', sizeof(details) - 1);
    details[sizeof(details) - 1] = '\0';
    /* gRPC's details are cut, never the advice */
    ck_assert_int_eq(map("https://10.0.0.1:2379", true, "Status", GRPC_STATUS_UNAVAILABLE,
                         details, &err), EC_EUNAVAILABLE);
    ck_assert_msg(ends_with(err.msg, "a wrong --etcd_cacert also shows up as this"), "%s", err.msg);
    ck_assert_ptr_nonnull(strstr(err.msg, "xxx..."));
    /* and no context added later cuts it either */
    ec_error_prefix(&err, "--elastic_server=%s", "https://10.0.0.1:2379");
    ck_assert_msg(ends_with(err.msg, "a wrong --etcd_cacert also shows up as this"), "%s", err.msg);

    /* a plain endpoint that hangs up: TLS may be why, and how to say it */
    const char *closed = "failed to connect to all addresses; last error: UNAVAILABLE: "
                         "ipv4:10.0.0.1:2379: Socket closed";
    map("10.0.0.1:2379", false, "Status", GRPC_STATUS_UNAVAILABLE, closed, &err);
    ck_assert_ptr_nonnull(strstr(err.msg, "etcd at 10.0.0.1:2379 closed the connection"));
    ck_assert_msg(ends_with(err.msg, ": if it serves TLS, write https://10.0.0.1:2379 and give "
                                     "--etcd_cacert"), "%s", err.msg);
    map("a:1,http://b:2", false, "Status", GRPC_STATUS_UNAVAILABLE, closed, &err);
    ck_assert_msg(strstr(err.msg, "write https://a:1,https://b:2 and"), "%s", err.msg);
    /* a connection lost in the middle of a call is no TLS matter */
    map("10.0.0.1:2379", false, "Put", GRPC_STATUS_UNAVAILABLE, "Socket closed", &err);
    ck_assert_msg(strstr(err.msg, "is unavailable") && !strstr(err.msg, "TLS"), "%s", err.msg);

    /* proxies: the one given may be why; the environment's is not used */
    ec__conn_desc_t w = {"10.0.0.1:2379", false, "http://proxy:3128", NULL};
    ec__grpc_error(&w, "Status", GRPC_STATUS_UNAVAILABLE, details, &err);
    ck_assert_msg(strstr(err.msg, "through the proxy http://proxy:3128 (--etcd_proxy)") &&
                      ends_with(err.msg, "or drop --etcd_proxy to connect directly"),
                  "%s", err.msg);
    ec__conn_desc_t e = {"10.0.0.1:2379", false, NULL, "https_proxy"};
    ec__grpc_error(&e, "Status", GRPC_STATUS_UNAVAILABLE, "Connection refused", &err);
    ck_assert_msg(strstr(err.msg, "is etcd running") &&
                      ends_with(err.msg, "https_proxy is set, but etcd connections never use a "
                                         "proxy: if etcd is reachable only through it, pass "
                                         "--etcd_proxy=http://HOST:PORT"),
                  "%s", err.msg);
}
END_TEST

/* Which failures to connect may pass by themselves (the agent waits for
 * them, --etcd_wait): etcd not reachable yet, not a protocol or TLS
 * mismatch, nor a refused login. */
START_TEST(failures_that_may_pass_are_those_of_an_etcd_not_up_yet)
{
    ec_error_t err = {0};
    map("10.0.0.1:2379", false, "Status", GRPC_STATUS_UNAVAILABLE,
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.1:2379: Failed to "
        "connect to remote host: Connection refused", &err);
    ck_assert(ec_etcd_error_may_pass(&err));
    map("etcd-0.etcd:2379", false, "Status", GRPC_STATUS_UNAVAILABLE,
        "DNS resolution failed for etcd-0.etcd:2379: Domain name not found", &err);
    ck_assert(ec_etcd_error_may_pass(&err));
    map("10.0.0.1:2379", false, "Status", GRPC_STATUS_DEADLINE_EXCEEDED, "Deadline Exceeded",
        &err);
    ck_assert(ec_etcd_error_may_pass(&err));
    map("10.0.0.1:2379", false, "Status", GRPC_STATUS_UNAVAILABLE,
        "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:10.0.0.1:2379: Socket "
        "closed", &err);
    ck_assert_msg(!ec_etcd_error_may_pass(&err), "a TLS etcd reached plain: %s", err.msg);
    map("https://10.0.0.1:2379", true, "Status", GRPC_STATUS_UNAVAILABLE,
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.1:2379: Ssl "
        "handshake failed: SSL_ERROR_SSL: error:1000007d:SSL routines:OPENSSL_internal:"
        "CERTIFICATE_VERIFY_FAILED", &err);
    ck_assert_msg(!ec_etcd_error_may_pass(&err), "a failed handshake: %s", err.msg);
    map("127.0.0.1:2379", false, "Status", GRPC_STATUS_UNAVAILABLE,
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:2379: Too many "
        "open files", &err);
    ck_assert_msg(!ec_etcd_error_may_pass(&err), "out of descriptors: %s", err.msg);
    map("10.0.0.1:2379", false, "Authenticate", GRPC_STATUS_UNAUTHENTICATED, "bad password",
        &err);
    ck_assert(!ec_etcd_error_may_pass(&err));
    ck_assert(!ec_etcd_error_may_pass(NULL));
}
END_TEST

START_TEST(backoff_bounds)
{
    ec__backoff_t b;
    ec__backoff_init(&b, 100, 1000, 42);
    int prev_base = 0;
    for (int i = 0; i < 20; i++) {
        int base = b.cur_ms;
        int d = ec__backoff_next(&b);
        ck_assert_int_ge(d, base - base / 5);
        ck_assert_int_le(d, base + base / 5);
        ck_assert_int_ge(base, prev_base);
        ck_assert_int_le(base, 1000);
        prev_base = base;
    }
    ck_assert_int_eq(b.cur_ms, 1000);
    ec__backoff_reset(&b);
    ck_assert_int_eq(b.cur_ms, 100);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("etcd-unit");
    TCase *t = tcase_create("pure");
    tcase_add_test(t, endpoint_forms);
    tcase_add_test(t, endpoint_tls_scheme);
    tcase_add_test(t, endpoint_errors);
    tcase_add_test(t, error_mapping);
    tcase_add_test(t, error_names);
    tcase_add_test(t, unavailable_advice_is_whole_and_names_tls_and_proxies);
    tcase_add_test(t, failures_that_may_pass_are_those_of_an_etcd_not_up_yet);
    tcase_add_test(t, backoff_bounds);
    suite_add_tcase(s, t);
    return s;
}

EC_CHECK_MAIN(suite)
