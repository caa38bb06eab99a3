/* The etcd client's KV and Txn calls against a real etcd: values round-trip,
 * prefixes come back whole across pages, transactions take the right branch,
 * and failures (dead endpoint, bad lease, oversize) fail fast and clearly.
 * Proxies: the proxy variables of the environment (https_proxy, as many
 * clusters set) never divert etcd's traffic, loopback included; a proxy
 * given on purpose (ec_etcd_opts_t.http_proxy, --etcd_proxy) is used, and
 * named when etcd cannot be reached through it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpc/support/log.h>

#include "ec_select.h"
#include "embed.h"
#include "log.h"
#include "harness.h"
#include "procstat.h"

static ec_embed_t *etcd;
static ec_etcd_t *c;

static void setup(void)
{
    etcd = ec_test_etcd_start(NULL);
    c = ec_test_client(ec_embed_endpoint(etcd));
}

static void teardown(void)
{
    ec_test_down(&etcd, &c);
}

START_TEST(put_get_delete)
{
    ec_error_t err = {0};
    int64_t rev = 0;
    ck_assert_int_eq(ec_etcd_put(c, "/t/a", "hello\0world", 11, 0, &rev, &err), 0);
    ck_assert_int_gt(rev, 0);
    ec_kv_t kv;
    bool found;
    int64_t rrev;
    ck_assert_int_eq(ec_etcd_get(c, "/t/a", &kv, &found, &rrev, &err), 0);
    ck_assert(found);
    ck_assert_int_eq(kv.value_len, 11);
    ck_assert_mem_eq(kv.value, "hello\0world", 11);
    ck_assert_int_eq(kv.create_revision, rev);
    ck_assert_int_eq(kv.mod_revision, rev);
    ck_assert_int_eq(kv.version, 1);
    ck_assert_int_ge(rrev, rev);
    ec_kv_free(&kv);
    int64_t deleted = 0;
    ck_assert_int_eq(ec_etcd_delete(c, "/t/a", false, &deleted, &err), 0);
    ck_assert_int_eq(deleted, 1);
    ck_assert_int_eq(ec_etcd_get(c, "/t/a", &kv, &found, NULL, &err), 0);
    ck_assert(!found);
}
END_TEST

START_TEST(prefix_pages_and_isolation)
{
    ec_error_t err = {0};
    char key[64];
    /* 2500 keys over pages of 1000 (and of 7) must come back whole and sorted. */
    for (int i = 0; i < 2500; i++) {
        snprintf(key, sizeof(key), "/p/job1/k%05d", i);
        ck_assert_int_eq(ec_etcd_put(c, key, key, strlen(key), 0, NULL, &err), 0);
    }
    ck_assert_int_eq(ec_etcd_put(c, "/p/job10/x", "x", 1, 0, NULL, &err), 0);
    ec_kv_list_t l;
    ck_assert_int_eq(ec_etcd_get_prefix(c, "/p/job1/", 0, &l, &err), 0);
    ck_assert_int_eq(l.n, 2500);
    for (size_t i = 0; i < l.n; i++) {
        snprintf(key, sizeof(key), "/p/job1/k%05zu", i);
        ck_assert_str_eq(l.kvs[i].key, key);
    }
    ck_assert_int_gt(l.revision, 0);
    ec_kv_list_free(&l);
    ck_assert_int_eq(ec_etcd_get_prefix(c, "/p/job1/k0000", 7, &l, &err), 0);
    ck_assert_int_eq(l.n, 10);
    ec_kv_list_free(&l);
    int64_t deleted = 0;
    ck_assert_int_eq(ec_etcd_delete(c, "/p/job1/", true, &deleted, &err), 0);
    ck_assert_int_eq(deleted, 2500);
    ck_assert_int_eq(ec_etcd_get_prefix(c, "/p/", 0, &l, &err), 0);
    ck_assert_int_eq(l.n, 1); /* job10's key untouched by job1's prefix delete */
    ck_assert_str_eq(l.kvs[0].key, "/p/job10/x");
    ec_kv_list_free(&l);
}
END_TEST

START_TEST(txn_branches)
{
    ec_error_t err = {0};
    int64_t rev;
    ck_assert_int_eq(ec_etcd_put(c, "/x/leader", "n1", 2, 0, &rev, &err), 0);
    /* create-if-absent fails: the else branch reads the current holder */
    ec_cmp_t absent = {.key = "/x/leader", .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL, .number = 0};
    ec_op_t put = {.type = EC_OP_PUT, .key = "/x/leader", .value = "n2", .value_len = 2};
    ec_op_t get = {.type = EC_OP_GET, .key = "/x/leader"};
    ec_txn_result_t r;
    ck_assert_int_eq(ec_etcd_txn(c, &absent, 1, &put, 1, &get, 1, &r, &err), 0);
    ck_assert(!r.succeeded);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.results[0].type, EC_OP_GET);
    ck_assert_int_eq(r.results[0].kvs.n, 1);
    ck_assert_str_eq((char *)r.results[0].kvs.kvs[0].value, "n1");
    ck_assert_int_eq(r.results[0].kvs.kvs[0].create_revision, rev);
    ec_txn_result_free(&r);
    /* fenced write: create revision and value both match → then branch */
    ec_cmp_t fence[2] = {
        {.key = "/x/leader", .target = EC_CMP_CREATE, .result = EC_CMP_EQUAL, .number = rev},
        {.key = "/x/leader", .target = EC_CMP_VALUE, .result = EC_CMP_EQUAL, .value = "n1", .value_len = 2},
    };
    ec_op_t ops[2] = {
        {.type = EC_OP_PUT, .key = "/x/epoch", .value = "e1", .value_len = 2},
        {.type = EC_OP_DELETE, .key = "/x/stale", .prefix = true},
    };
    ck_assert_int_eq(ec_etcd_txn(c, fence, 2, ops, 2, NULL, 0, &r, &err), 0);
    ck_assert(r.succeeded);
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(r.results[0].type, EC_OP_PUT);
    ck_assert_int_gt(r.results[0].revision, rev);
    ck_assert_int_eq(r.results[1].type, EC_OP_DELETE);
    int64_t epoch_rev = r.revision;
    ec_txn_result_free(&r);
    /* mod revision and version comparisons */
    ec_cmp_t modc = {.key = "/x/epoch", .target = EC_CMP_MOD, .result = EC_CMP_EQUAL, .number = epoch_rev};
    ec_cmp_t verc = {.key = "/x/epoch", .target = EC_CMP_VERSION, .result = EC_CMP_GREATER, .number = 1};
    ck_assert_int_eq(ec_etcd_txn(c, &modc, 1, NULL, 0, NULL, 0, &r, &err), 0);
    ck_assert(r.succeeded);
    ec_txn_result_free(&r);
    ck_assert_int_eq(ec_etcd_txn(c, &verc, 1, NULL, 0, NULL, 0, &r, &err), 0);
    ck_assert(!r.succeeded);
    ec_txn_result_free(&r);
    /* the same key twice is etcd's INVALID_ARGUMENT, mapped with its text */
    ec_op_t dup[2] = {put, put};
    ck_assert_int_eq(ec_etcd_txn(c, NULL, 0, dup, 2, NULL, 0, NULL, &err), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "duplicate key"));
}
END_TEST

START_TEST(error_cases)
{
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_put(c, "/e/k", "v", 1, 0x1234567, NULL, &err), EC_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(err.msg, "lease not found"));
    size_t big = 2 * 1024 * 1024;
    char *v = calloc(1, big);
    ck_assert_int_eq(ec_etcd_put(c, "/e/big", v, big, 0, NULL, &err), EC_ETOOLARGE);
    free(v);
    ck_assert_int_eq(ec_etcd_put(c, "", "v", 1, 0, NULL, &err), EC_EINVAL);
    ck_assert_int_eq(ec_etcd_lease_revoke(c, 0x7777, &err), EC_ENOTFOUND);
}
END_TEST

static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd); /* nothing listens there now */
    return ntohs(a.sin_port);
}

START_TEST(unreachable_fails_within_deadline)
{
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", dead_port());
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ep;
    o.dial_timeout_ms = 1500;
    ec_error_t err = {0};
    int64_t t0 = ec_test_now_ms();
    ec_etcd_t *bad = ec_etcd_create(&o, &err);
    int64_t took = ec_test_now_ms() - t0;
    ck_assert_ptr_null(bad);
    ck_assert_int_le(took, 1500 + ec_test_ms(1000)); /* the dial deadline, plus slack for load */
    ck_assert(err.code == EC_EUNAVAILABLE || err.code == EC_ETIMEDOUT);
    ck_assert_msg(strstr(err.msg, ep) != NULL, "message does not name the endpoint: %s", err.msg);
    ck_assert_msg(strstr(err.msg, "is etcd running") || strstr(err.msg, "unreachable"),
                  "message gives no advice: %s", err.msg);
}
END_TEST

/* A port that refuses connections for as long as the test holds *fd: bound,
 * never listening, so nothing else can take it meanwhile. */
static int closed_port(int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    ck_assert_int_eq(bind(*fd, (struct sockaddr *)&a, sizeof(a)), 0);
    getsockname(*fd, (struct sockaddr *)&a, &l);
    return ntohs(a.sin_port);
}

static const char *const proxy_vars[] = {"https_proxy", "http_proxy", "HTTPS_PROXY",
                                         "HTTP_PROXY", "grpc_proxy", "all_proxy", NULL};

/* gRPC reads the proxy variables when a channel is made (and no_proxy,
 * which must not be what saves us). */
START_TEST(proxy_variables_do_not_divert_etcd_traffic)
{
    int hold;
    char proxy[64];
    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", closed_port(&hold));
    for (int i = 0; proxy_vars[i]; i++)
        setenv(proxy_vars[i], proxy, 1);
    unsetenv("no_proxy");
    unsetenv("NO_PROXY");
    unsetenv("no_grpc_proxy");
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ec_embed_endpoint(etcd);
    o.dial_timeout_ms = 3000;
    ec_error_t err = {0};
    ec_etcd_t *c2 = ec_etcd_create(&o, &err);
    for (int i = 0; proxy_vars[i]; i++)
        unsetenv(proxy_vars[i]);
    close(hold);
    ck_assert_msg(c2 != NULL, "with https_proxy=%s set: %s", proxy, err.msg);
    ck_assert_int_eq(ec_etcd_put(c2, "/proxy/k", "v", 1, 0, NULL, &err), 0);
    ec_etcd_destroy(c2);
}
END_TEST

/* A minimal HTTP CONNECT proxy (what squid or a site proxy answers):
 * "CONNECT host:port HTTP/1.1", then bytes both ways. */
typedef struct {
    int lfd, port;
    atomic_int connects, stop;
    char target[128];
    pthread_t thr;
} cproxy_t;

static void splice_both(int a, int b, atomic_int *stop)
{
    char buf[16384];
    while (!atomic_load(stop)) {
        struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
        if (poll(p, 2, 100) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t r = read(p[i].fd, buf, sizeof(buf));
            if (r <= 0 || write(i ? a : b, buf, (size_t)r) != r)
                return;
        }
    }
}

static void *cproxy_loop(void *arg)
{
    cproxy_t *x = arg;
    while (!atomic_load(&x->stop)) {
        struct pollfd pl = {.fd = x->lfd, .events = POLLIN};
        if (poll(&pl, 1, 100) <= 0)
            continue;
        int cfd = accept(x->lfd, NULL, NULL);
        if (cfd < 0)
            continue;
        char req[2048];
        size_t n = 0;
        while (n + 1 < sizeof(req) && !strstr(req, "\r\n\r\n")) {
            ssize_t r = read(cfd, req + n, sizeof(req) - n - 1);
            if (r <= 0)
                break;
            n += (size_t)r;
            req[n] = '\0';
        }
        req[n] = '\0';
        char host[128];
        int port = 0;
        if (sscanf(req, "CONNECT %127[^:]:%d ", host, &port) == 2) {
            atomic_fetch_add(&x->connects, 1);
            snprintf(x->target, sizeof(x->target), "%s:%d", host, port);
            int sfd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
            inet_pton(AF_INET, host, &a.sin_addr);
            const char *ok = "HTTP/1.1 200 Connection established\r\n\r\n";
            if (connect(sfd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
                write(cfd, ok, strlen(ok)) == (ssize_t)strlen(ok))
                splice_both(cfd, sfd, &x->stop);
            close(sfd);
        }
        close(cfd);
    }
    return NULL;
}

static void cproxy_start(cproxy_t *x)
{
    memset(x, 0, sizeof(*x));
    x->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    ck_assert_int_eq(bind(x->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(x->lfd, 8), 0);
    getsockname(x->lfd, (struct sockaddr *)&a, &l);
    x->port = ntohs(a.sin_port);
    pthread_create(&x->thr, NULL, cproxy_loop, x);
}

static void cproxy_stop(cproxy_t *x)
{
    atomic_store(&x->stop, 1);
    pthread_join(x->thr, NULL);
    close(x->lfd);
}

START_TEST(proxy_given_on_purpose_is_used_and_named_when_it_fails)
{
    cproxy_t x;
    cproxy_start(&x);
    char proxy[64];
    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", x.port);
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ec_embed_endpoint(etcd);
    o.http_proxy = proxy;
    o.dial_timeout_ms = 3000;
    ec_error_t err = {0};
    ec_etcd_t *c2 = ec_etcd_create(&o, &err);
    ck_assert_msg(c2 != NULL, "through the proxy %s: %s", proxy, err.msg);
    ck_assert_int_eq(ec_etcd_put(c2, "/proxy/k2", "v", 1, 0, NULL, &err), 0);
    ec_etcd_destroy(c2);
    cproxy_stop(&x);
    int connects = atomic_load(&x.connects);
    ck_assert_msg(connects >= 1, "the client never asked the proxy for a connection");
    ck_assert_str_eq(x.target, ec_embed_endpoint(etcd));

    /* A proxy that is not there: the message names it and the way out. */
    int hold;
    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", closed_port(&hold));
    o.http_proxy = proxy;
    o.dial_timeout_ms = 1500;
    c2 = ec_etcd_create(&o, &err);
    close(hold);
    ck_assert_ptr_null(c2);
    ck_assert_int_eq(err.code, EC_EUNAVAILABLE);
    ck_assert_msg(strstr(err.msg, proxy) && strstr(err.msg, "--etcd_proxy"),
                  "the proxy is not named: %s", err.msg);

    /* Without a proxy given, one set in the environment (the caller says
     * which) is named when etcd is unavailable: it is not used. */
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", closed_port(&hold));
    ec_etcd_opts_t d = EC_ETCD_OPTS_INIT;
    d.endpoints = ep;
    d.proxy_env = "https_proxy";
    d.dial_timeout_ms = 1500;
    c2 = ec_etcd_create(&d, &err);
    close(hold);
    ck_assert_ptr_null(c2);
    ck_assert_msg(strstr(err.msg, "https_proxy is set") && strstr(err.msg, "--etcd_proxy="),
                  "the environment's proxy is not named: %s", err.msg);
}
END_TEST

START_TEST(second_endpoint_used)
{
    char eps[128];
    snprintf(eps, sizeof(eps), "127.0.0.1:%d,%s", dead_port(), ec_embed_endpoint(etcd));
    ec_etcd_t *c2 = ec_test_client(eps);
    ec_error_t err = {0};
    ck_assert_int_eq(ec_etcd_put(c2, "/s/k", "v", 1, 0, NULL, &err), 0);
    ec_kv_t kv;
    bool found;
    ck_assert_int_eq(ec_etcd_get(c2, "/s/k", &kv, &found, NULL, &err), 0);
    ck_assert(found);
    ec_kv_free(&kv);
    ec_etcd_destroy(c2);
}
END_TEST

START_TEST(compact_then_old_read)
{
    ec_error_t err = {0};
    int64_t r1, r2;
    ck_assert_int_eq(ec_etcd_put(c, "/c/k", "1", 1, 0, &r1, &err), 0);
    ck_assert_int_eq(ec_etcd_put(c, "/c/k", "2", 1, 0, &r2, &err), 0);
    ck_assert_int_eq(ec_etcd_compact(c, r2, true, &err), 0);
    int64_t rev;
    char ver[32];
    ck_assert_int_eq(ec_etcd_status(c, &rev, ver, sizeof(ver), &err), 0);
    ck_assert_int_ge(rev, r2);
    ck_assert_str_ne(ver, "");
}
END_TEST

/* gRPC core stops the process on a broken invariant (GPR_ASSERT: its log
 * line "assertion failed: ...", then abort()).  Its log goes to ours at
 * debug level, where an agent's console queue or a quiet level would lose
 * it: that line alone is written to stderr at once, so a process that
 * gRPC aborts (as with too few open files) says why. */
START_TEST(grpcs_fatal_assertion_reaches_stderr_before_it_aborts)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(pfd[1], STDERR_FILENO);
        close(pfd[0]);
        close(pfd[1]);
        signal(SIGABRT, SIG_DFL);
        ec_log_set_sink(NULL, NULL, EC_LOG_INFO); /* a quiet level, as by default */
        volatile int broken = 0;
        GPR_ASSERT(broken == 1);
        _exit(0);
    }
    close(pfd[1]);
    char out[4096];
    size_t used = 0;
    ssize_t r;
    while (used + 1 < sizeof(out) && (r = read(pfd[0], out + used, sizeof(out) - 1 - used)) > 0)
        used += (size_t)r;
    out[used] = '\0';
    close(pfd[0]);
    ck_assert_int_eq(ec_test_reap(pid, 10000), 128 + SIGABRT);
    ck_assert_msg(strstr(out, "assertion failed: broken == 1"), "gRPC's reason is lost: '%s'", out);
    ck_assert_msg(strstr(out, "t1000-etcd-kv.c"), "no place in '%s'", out);
}
END_TEST

/* A data dir as an embedded etcd leaves it: name under tmp, owner "PID START". */
static void fake_data_dir(const char *tmp, const char *name, const char *owner)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", tmp, name);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/%s/member", tmp, name);
    ck_assert_int_eq(mkdir(p, 0700), 0); /* something inside, as etcd's */
    if (!owner)
        return;
    snprintf(p, sizeof(p), "%s/%s/owner", tmp, name);
    char text[80];
    snprintf(text, sizeof(text), "%s\n", owner);
    ec_test_write_file(p, text, 0600);
}

static bool exists_in(const char *tmp, const char *name)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", tmp, name);
    return access(p, F_OK) == 0;
}

START_TEST(data_dirs_of_dead_owners_are_removed_by_the_next_start)
{
    /* An agent killed with -9 leaves its embedded etcd's data dir (~120 MB
     * in /tmp); the next embedded start removes every such dir whose owner
     * is gone, and only those. */
    char tmp[] = "/tmp/ec-t1000-tmpdir-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmp));
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    char owner[64];
    unsigned long long start = 0;
    ck_assert(ec_proc_stat(getpid(), NULL, NULL, &start));
    snprintf(owner, sizeof(owner), "%d 12345", (int)dead);
    fake_data_dir(tmp, "ecoord-etcd-dead01", owner);
    snprintf(owner, sizeof(owner), "%d %llu", (int)getpid(), start + 1); /* pid reused */
    fake_data_dir(tmp, "ecoord-etcd-reuse1", owner);
    snprintf(owner, sizeof(owner), "%d %llu", (int)getpid(), start);
    fake_data_dir(tmp, "ecoord-etcd-alive1", owner);
    fake_data_dir(tmp, "ecoord-etcd-kept01", NULL); /* kept on purpose, or older */
    fake_data_dir(tmp, "not-ecoord-etcd-1", "1 1");
    ec_embed_opts_t o = EC_EMBED_OPTS_INIT;
    o.etcd_path = getenv("ETCD");
    o.search_path = getenv("PATH");
    o.tmpdir = tmp;
    ec_error_t err = {0};
    ec_embed_t *e = ec_embed_start(&o, &err);
    ck_assert_msg(e != NULL, "%s", err.msg);
    ck_assert_msg(!exists_in(tmp, "ecoord-etcd-dead01"), "a dead owner's dir is still there");
    ck_assert_msg(!exists_in(tmp, "ecoord-etcd-reuse1"), "a dir of a reused pid is still there");
    ck_assert(exists_in(tmp, "ecoord-etcd-alive1"));
    ck_assert(exists_in(tmp, "ecoord-etcd-kept01"));
    ck_assert(exists_in(tmp, "not-ecoord-etcd-1"));
    char own[600];
    snprintf(own, sizeof(own), "%s/owner", ec_embed_dir(e));
    ck_assert_msg(access(own, R_OK) == 0, "the new data dir names no owner");
    char dir[300];
    snprintf(dir, sizeof(dir), "%s", ec_embed_dir(e));
    ec_embed_stop(e);
    ck_assert_msg(access(dir, F_OK) != 0, "%s left after a stop", dir);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t1000-etcd-kv");
    TCase *t = tcase_create("kv");
    tcase_add_unchecked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 60);
    ec_tcase_add(t, put_get_delete);
    ec_tcase_add(t, prefix_pages_and_isolation);
    ec_tcase_add(t, txn_branches);
    ec_tcase_add(t, error_cases);
    ec_tcase_add(t, unreachable_fails_within_deadline);
    ec_tcase_add(t, second_endpoint_used);
    ec_tcase_add(t, compact_then_old_read);
    ec_tcase_add(t, proxy_variables_do_not_divert_etcd_traffic);
    ec_tcase_add(t, proxy_given_on_purpose_is_used_and_named_when_it_fails);
    ec_tcase_add(t, grpcs_fatal_assertion_reaches_stderr_before_it_aborts);
    ec_tcase_add(t, data_dirs_of_dead_owners_are_removed_by_the_next_start);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
