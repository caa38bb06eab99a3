/* The rule under test: a probe's answer proves membership of the run only
 * when it is exactly the answer the named node makes to this nonce with the
 * run's secret (coord/core/probe_proof.h).  Another secret (a stranger, an
 * agent of an earlier run), another nonce (a replayed answer), another id or
 * lease, an answer cut short or altered anywhere, and the fixed line agents
 * answered before the proof, all fail it.  And the request line: its nonce
 * read back, a prefix waited for, anything else refused. */
#include "probe.h"
#include "probe_proof.h"

#include <ec_check.h>
#include <stdio.h>
#include <string.h>

#include "keys.h"

static uint8_t secret[EC_PROBE_SECRET_LEN], nonce[EC_PROBE_NONCE_LEN];

static void fill(void)
{
    for (size_t i = 0; i < sizeof(secret); i++)
        secret[i] = (uint8_t)(i * 7 + 1);
    for (size_t i = 0; i < sizeof(nonce); i++)
        nonce[i] = (uint8_t)(0xa0 + i);
}

static int check(const uint8_t *s, const uint8_t *nc, const char *id, int64_t lease,
                 const char *line)
{
    return ec_probe_answer_check(s, nc, id, lease, line, strlen(line));
}

START_TEST(the_right_answer_passes)
{
    fill();
    char a[EC_PROBE_ANSWER_MAX + 1];
    int n = ec_probe_answer_make(secret, nonce, "node-1", 0x1234, a, sizeof(a));
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq((size_t)n, strlen(a));
    ck_assert(!strncmp(a, "ecoord node-1 0000000000001234 ", 31));
    ck_assert_int_eq(a[n - 1], '\n');
    ck_assert_int_eq(check(secret, nonce, "node-1", 0x1234, a), 1);
    ck_assert_int_eq(check(secret, nonce, "node-1", 0, a), 1); /* any lease */
    /* the verifier does the same */
    ec_probe_key_t k;
    ec_probe_key_init(&k, secret);
    ck_assert_int_eq(k.v.check(&k.v, nonce, "node-1", 0x1234, a, (size_t)n), 1);
    /* the longest id fits the documented buffer */
    char id[EC_NODE_ID_MAX + 2];
    memset(id, 'x', EC_NODE_ID_MAX);
    id[EC_NODE_ID_MAX] = '\0';
    ck_assert_int_gt(ec_probe_answer_make(secret, nonce, id, -1, a, sizeof(a)), 0);
    ck_assert_int_eq(check(secret, nonce, id, -1, a), 1);
    id[EC_NODE_ID_MAX] = 'x';
    id[EC_NODE_ID_MAX + 1] = '\0';
    ck_assert_int_eq(ec_probe_answer_make(secret, nonce, id, 1, a, sizeof(a)), -1);
    ck_assert_int_eq(ec_probe_answer_make(secret, nonce, "n", 1, a, 20), -1); /* too small */
}
END_TEST

START_TEST(wrong_secret_nonce_id_or_lease_fails)
{
    fill();
    char a[EC_PROBE_ANSWER_MAX + 1];
    ck_assert_int_gt(ec_probe_answer_make(secret, nonce, "node-1", 77, a, sizeof(a)), 0);
    uint8_t s2[EC_PROBE_SECRET_LEN], n2[EC_PROBE_NONCE_LEN];
    memcpy(s2, secret, sizeof(s2));
    s2[31] ^= 1;
    memcpy(n2, nonce, sizeof(n2));
    n2[0] ^= 0x80;
    ck_assert_int_eq(check(s2, nonce, "node-1", 77, a), 0);  /* another run's secret */
    ck_assert_int_eq(check(secret, n2, "node-1", 77, a), 0); /* a replay to another nonce */
    ck_assert_int_eq(check(secret, nonce, "node-2", 77, a), 0);
    ck_assert_int_eq(check(secret, nonce, "node-", 77, a), 0);
    ck_assert_int_eq(check(secret, nonce, "node-10", 77, a), 0);
    ck_assert_int_eq(check(secret, nonce, "node-1", 78, a), 0); /* an older registration */
    /* an answer made for another id does not pass for this one, even with the
     * id in the line changed to this one */
    char b[EC_PROBE_ANSWER_MAX + 1];
    ck_assert_int_gt(ec_probe_answer_make(secret, nonce, "node-2", 77, b, sizeof(b)), 0);
    b[12] = '1';
    ck_assert_int_eq(check(secret, nonce, "node-1", 77, b), 0);
    /* nor one made under another lease with the lease in the line changed */
    ck_assert_int_gt(ec_probe_answer_make(secret, nonce, "node-1", 76, b, sizeof(b)), 0);
    b[7 + 6 + 1 + 15] = 'd'; /* ...4c -> ...4d: 77 */
    ck_assert_int_eq(check(secret, nonce, "node-1", 0, b), 0);
}
END_TEST

START_TEST(truncated_altered_or_old_answers_fail)
{
    fill();
    char a[EC_PROBE_ANSWER_MAX + 1];
    int n = ec_probe_answer_make(secret, nonce, "n1", 5, a, sizeof(a));
    ck_assert_int_gt(n, 0);
    for (int len = 0; len < n; len++) /* cut short anywhere */
        ck_assert_msg(!ec_probe_answer_check(secret, nonce, "n1", 5, a, (size_t)len),
                      "an answer cut to %d of %d bytes passed", len, n);
    for (int i = 0; i < n; i++) { /* one byte altered anywhere */
        char b[EC_PROBE_ANSWER_MAX + 1];
        memcpy(b, a, (size_t)n + 1);
        b[i] = b[i] == 'A' ? 'B' : 'A';
        ck_assert_msg(!ec_probe_answer_check(secret, nonce, "n1", 5, b, (size_t)n),
                      "an answer altered at byte %d passed", i);
    }
    char longer[EC_PROBE_ANSWER_MAX + 8];
    snprintf(longer, sizeof(longer), "%.*s x\n", n - 1, a); /* trailing garbage */
    ck_assert_int_eq(check(secret, nonce, "n1", 5, longer), 0);
    ck_assert_int_eq(check(secret, nonce, "n1", 5, "ecoord n1\n"), 0); /* the old fixed line */
    ck_assert_int_eq(check(secret, nonce, "n1", 5, ""), 0);
    /* the same hex in upper case is not the answer (one spelling only) */
    char up[EC_PROBE_ANSWER_MAX + 1];
    memcpy(up, a, (size_t)n + 1);
    for (int i = 27; i < n - 1; i++)
        if (up[i] >= 'a' && up[i] <= 'f')
            up[i] = (char)(up[i] - 'a' + 'A');
    if (strcmp(up, a))
        ck_assert_int_eq(check(secret, nonce, "n1", 5, up), 0);
}
END_TEST

START_TEST(request_round_trip)
{
    fill();
    char req[EC_PROBE_REQUEST_LEN + 1];
    ec_probe_request_format(nonce, req);
    ck_assert_int_eq(strlen(req), EC_PROBE_REQUEST_LEN);
    ck_assert(!strncmp(req, "ecoord? a0a1a2", 14));
    uint8_t got[EC_PROBE_NONCE_LEN];
    ck_assert_int_eq(ec_probe_request_parse(req, EC_PROBE_REQUEST_LEN, got), 1);
    ck_assert(!memcmp(got, nonce, sizeof(got)));
    for (size_t len = 0; len < EC_PROBE_REQUEST_LEN; len++)
        ck_assert_int_eq(ec_probe_request_parse(req, len, got), 0); /* more to come */
    ck_assert_int_eq(ec_probe_request_parse("GET / HTTP/1.1\r\n", 16, got), -1);
    ck_assert_int_eq(ec_probe_request_parse("ecoord? zz", 10, got), -1);
    char two[2 * EC_PROBE_REQUEST_LEN];
    memcpy(two, req, EC_PROBE_REQUEST_LEN);
    memcpy(two + EC_PROBE_REQUEST_LEN, req, EC_PROBE_REQUEST_LEN);
    ck_assert_int_eq(ec_probe_request_parse(two, sizeof(two), got), -1);
    uint8_t r1[16], r2[16];
    ck_assert_int_eq(ec_probe_random(r1, sizeof(r1)), 0);
    ck_assert_int_eq(ec_probe_random(r2, sizeof(r2)), 0);
    ck_assert(memcmp(r1, r2, sizeof(r1)) != 0);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("probe_proof", NULL, NULL,
                          EC_CHECK_TESTS(
                              the_right_answer_passes,
                              wrong_secret_nonce_id_or_lease_fails,
                              truncated_altered_or_old_answers_fail,
                              request_round_trip));
}

EC_CHECK_MAIN(suite)
