/* TLS and authentication against a real etcd: certificates made by openssl
 * at test time; a wrong CA fails with advice about certificates; user and
 * password work, a wrong password is refused clearly, and an expired token
 * is renewed without the caller noticing.  The usual TLS mistakes made with
 * `ecoord` itself (a plain HOST:PORT for a TLS etcd, no --etcd_cacert) get
 * ecoord's advice whole, and none of gRPC's raw log lines. */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ec_select.h"
#include "harness.h"

static char dir[256];

static void sh(const char *cmd)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    char out[4096];
    int rc = ec_test_run(argv, out, sizeof(out));
    ck_assert_msg(rc == 0, "'%s' failed (%d): %s", cmd, rc, out);
}

static const char *openssl(void)
{
    const char *o = getenv("OPENSSL");
    return o && *o ? o : "openssl";
}

/* A CA, a server certificate for 127.0.0.1/localhost and a client one. */
static void make_certs(const char *d, const char *ca_name)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "cd %s && %s req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=%s "
             "-keyout ca.key -out ca.pem 2>/dev/null && "
             "%s req -newkey rsa:2048 -nodes -subj /CN=etcd -keyout server.key -out server.csr 2>/dev/null && "
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth,clientAuth\\n' > ext && "
             "%s x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
             "-extfile ext -out server.pem 2>/dev/null && "
             "%s req -newkey rsa:2048 -nodes -subj /CN=client -keyout client.key -out client.csr 2>/dev/null && "
             "printf 'extendedKeyUsage=clientAuth\\n' > cext && "
             "%s x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
             "-extfile cext -out client.pem 2>/dev/null",
             d, openssl(), ca_name, openssl(), openssl(), openssl(), openssl());
    sh(cmd);
}

static int rm_one(const char *p, const struct stat *sb, int f, struct FTW *ftw)
{
    (void)sb; (void)f; (void)ftw;
    return remove(p);
}

static void tls_setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/ec-tls-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void tls_teardown(void)
{
    nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

START_TEST(tls_with_client_certs)
{
    if (access("/usr/bin/openssl", X_OK) != 0 && !getenv("OPENSSL")) {
        printf("# SKIP no openssl\n");
        return;
    }
    make_certs(dir, "ecoord-test-ca");
    char cert[300], key[300], ca[300], ccert[300], ckey[300];
    snprintf(cert, sizeof(cert), "%s/server.pem", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    snprintf(ccert, sizeof(ccert), "%s/client.pem", dir);
    snprintf(ckey, sizeof(ckey), "%s/client.key", dir);
    ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
    eo.cert_file = cert;
    eo.key_file = key;
    eo.ca_file = ca;
    ec_embed_t *e = ec_test_etcd_start(&eo);
    ck_assert_ptr_nonnull(strstr(ec_embed_endpoint(e), "https://"));

    ec_error_t err = {0};
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ec_embed_endpoint(e);
    o.ca_file = ca;
    o.cert_file = ccert;
    o.key_file = ckey;
    o.dial_timeout_ms = 5000;
    ec_etcd_t *c = ec_etcd_create(&o, &err);
    ck_assert_msg(c != NULL, "TLS connect: %s", err.msg);
    ck_assert_int_eq(ec_etcd_put(c, "/tls/k", "v", 1, 0, NULL, &err), 0);
    ec_kv_t kv;
    bool found;
    ck_assert_int_eq(ec_etcd_get(c, "/tls/k", &kv, &found, NULL, &err), 0);
    ck_assert(found);
    ec_kv_free(&kv);
    ec_etcd_destroy(c);

    /* A CA that did not sign the server: refused, and the message says why. */
    char other[300];
    snprintf(other, sizeof(other), "%s/other", dir);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", other);
    sh(cmd);
    make_certs(other, "some-other-ca");
    char badca[400];
    snprintf(badca, sizeof(badca), "%s/ca.pem", other);
    o.ca_file = badca;
    o.dial_timeout_ms = 2000;
    c = ec_etcd_create(&o, &err);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err.msg, "certificate") != NULL, "no TLS hint in: %s", err.msg);

    /* Only a cert without its key: a clear configuration error. */
    o.ca_file = ca;
    o.key_file = NULL;
    c = ec_etcd_create(&o, &err);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(err.code, EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--etcd_key"));
    ec_embed_stop(e);
}
END_TEST

static const char *ecoord(void)
{
    const char *e = getenv("ECOORD");
    return e && *e ? e : "./ecoord";
}

/* Run `ecoord ARGS` with stderr into out; its exit status. */
static int run_ecoord(const char *args, char *out, size_t len)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "exec %s %s 2>&1", ecoord(), args);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    return ec_test_run(argv, out, len);
}

/* No line of gRPC's own log (E1127 05:29:37.368853812 2025
 * ssl_transport_security.cc:1501] ...): those go to ecoord's log at debug
 * level, never raw on stderr. */
static void no_raw_grpc_lines(const char *what, const char *out)
{
    ck_assert_msg(!strstr(out, "ssl_transport_security"), "%s: gRPC's raw log line: %s", what,
                  out);
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        ck_assert_msg(!(l[0] == 'E' && l[1] == '1'), "%s: gRPC's raw log line: %s", what, out);
}

START_TEST(tls_mistakes_get_the_whole_hint_and_no_grpc_lines)
{
    if (access("/usr/bin/openssl", X_OK) != 0 && !getenv("OPENSSL")) {
        printf("# SKIP no openssl\n");
        return;
    }
    make_certs(dir, "ecoord-test-ca");
    char cert[300], key[300], ca[300];
    snprintf(cert, sizeof(cert), "%s/server.pem", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
    eo.cert_file = cert; /* server TLS only: no client certificates asked */
    eo.key_file = key;
    ec_embed_t *e = ec_test_etcd_start(&eo);
    const char *ep = ec_embed_endpoint(e);
    ck_assert_ptr_nonnull(strstr(ep, "https://"));
    const char *plain = ep + strlen("https://");
    char args[1024], out[16384], want[512];

    /* 1. A plain HOST:PORT: etcd closes the connection; say that TLS may
     * be why and how to write it. */
    snprintf(args, sizeof(args), "status --elastic_server=%s --job_id=x", plain);
    ck_assert_int_eq(run_ecoord(args, out, sizeof(out)), 1);
    snprintf(want, sizeof(want), "etcd at %s closed the connection", plain);
    ck_assert_msg(strstr(out, want), "no '%s' in: %s", want, out);
    snprintf(want, sizeof(want),
             "if it serves TLS, write https://%s and give --etcd_cacert\n", plain);
    ck_assert_msg(strstr(out, want), "no whole '%s' in: %s", want, out);
    no_raw_grpc_lines("plain endpoint", out);

    /* the same from `ecoord launch` (its log) */
    snprintf(args, sizeof(args),
             "launch --elastic_server=%s --job_id=x --log_dir=%s/log -- /bin/true", plain, dir);
    ck_assert_int_eq(run_ecoord(args, out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, want), "launch: no whole '%s' in: %s", want, out);
    no_raw_grpc_lines("launch, plain endpoint", out);

    /* 2. https:// without --etcd_cacert: the certificate is not trusted;
     * the TLS hint reaches the user whole (it was cut at 357 bytes). */
    snprintf(args, sizeof(args), "status --elastic_server=%s --job_id=x", ep);
    ck_assert_int_eq(run_ecoord(args, out, sizeof(out)), 1);
    const char *hint = "with TLS, a certificate that does not match the endpoint (SAN) or a "
                       "wrong --etcd_cacert also shows up as this\n";
    ck_assert_msg(strstr(out, hint), "TLS hint cut or missing: %s", out);
    no_raw_grpc_lines("no CA", out);

    /* 3. Given the CA, it works (the job does not exist: exit 1, said so). */
    snprintf(args, sizeof(args), "status --elastic_server=%s --etcd_cacert=%s --job_id=x", ep, ca);
    run_ecoord(args, out, sizeof(out));
    ck_assert_msg(strstr(out, "no job 'x'"), "with the CA: %s", out);
    ec_embed_stop(e);
}
END_TEST

static void etcdctl(const char *ep, const char *args)
{
    const char *ctl = getenv("ETCDCTL");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 %s --endpoints=%s %s", ctl && *ctl ? ctl : "etcdctl",
             ep, args);
    sh(cmd);
}

static bool always(void *arg)
{
    (void)arg;
    return true;
}

/* /a/k written as v with c, and read back (when: what the call follows). */
static void put_and_read_back(ec_etcd_t *c, const char *v, const char *when)
{
    ec_error_t err = {0};
    ck_assert_msg(ec_etcd_put(c, "/a/k", v, strlen(v), 0, NULL, &err) == 0, "%s: %s", when, err.msg);
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, "/a/k", &kv, &found, NULL, &err), 0);
    ck_assert(found);
    ck_assert_str_eq((char *)kv.value, v);
    ec_kv_free(&kv);
}

START_TEST(auth_user_password_and_token_renewal)
{
    const char *extra[] = {"--auth-token-ttl=2", NULL};
    ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
    eo.extra_args = extra;
    ec_embed_t *e = ec_test_etcd_start(&eo);
    const char *ep = ec_embed_endpoint(e);
    etcdctl(ep, "user add root --new-user-password=s3cret --interactive=false");
    etcdctl(ep, "auth enable");

    ec_error_t err = {0};
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ep;
    /* no user: refused with advice */
    ec_etcd_t *c = ec_etcd_create(&o, &err);
    if (c) {
        ck_assert_int_eq(ec_etcd_put(c, "/a/k", "v", 1, 0, NULL, &err), EC_EUNAUTH);
        ec_etcd_destroy(c);
    } else {
        ck_assert_int_eq(err.code, EC_EUNAUTH);
    }
    ck_assert_ptr_nonnull(strstr(err.msg, "--etcd_user"));
    /* wrong password */
    o.user = "root";
    o.password = "wrong";
    c = ec_etcd_create(&o, &err);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(err.code, EC_EUNAUTH);
    ck_assert_ptr_null(strstr(err.msg, "wrong")); /* the password is never echoed */
    /* right password */
    o.password = "s3cret";
    c = ec_etcd_create(&o, &err);
    ck_assert_msg(c != NULL, "auth connect: %s", err.msg);
    ck_assert_int_eq(ec_etcd_put(c, "/a/k", "v1", 2, 0, NULL, &err), 0);
    /* Idle past the 2 s token TTL: the token expires; the next call must
     * re-authenticate by itself. */
    ec_test_holds(always, NULL, 3500);
    put_and_read_back(c, "v2", "after expiry");
    ec_etcd_destroy(c);
    ec_embed_stop(e);
}
END_TEST

/* A client given a user, on an etcd whose authentication is still off (the
 * agents of a job started before its setup turned it on): it goes on
 * without logging in, as etcd's own clients do, and logs in by itself on
 * the first call refused once authentication is on. */
START_TEST(a_user_goes_on_until_etcd_turns_authentication_on)
{
    ec_embed_opts_t eo = EC_EMBED_OPTS_INIT;
    ec_embed_t *e = ec_test_etcd_start(&eo);
    const char *ep = ec_embed_endpoint(e);
    ec_error_t err = {0};
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = ep;
    o.user = "root";
    o.password = "s3cret";
    ec_etcd_t *c = ec_etcd_create(&o, &err);
    ck_assert_msg(c != NULL, "a user on an etcd without authentication: %s", err.msg);
    ck_assert_int_eq(ec_etcd_put(c, "/a/k", "v1", 2, 0, NULL, &err), 0);
    etcdctl(ep, "user add root --new-user-password=s3cret --interactive=false");
    etcdctl(ep, "auth enable");
    put_and_read_back(c, "v2", "after authentication was turned on");
    ec_etcd_destroy(c);
    ec_embed_stop(e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t1300-etcd-secure");
    TCase *t = tcase_create("tls");
    tcase_add_checked_fixture(t, tls_setup, tls_teardown);
    ec_tcase_add(t, tls_with_client_certs);
    ec_tcase_add(t, tls_mistakes_get_the_whole_hint_and_no_grpc_lines);
    suite_add_tcase(s, t);
    TCase *a = tcase_create("auth");
    ec_tcase_add(a, auth_user_password_and_token_renewal);
    ec_tcase_add(a, a_user_goes_on_until_etcd_turns_authentication_on);
    suite_add_tcase(s, a);
    return s;
}

EC_INTEGRATION_MAIN(suite)
