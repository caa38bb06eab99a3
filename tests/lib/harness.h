/* Integration-test harness: a real etcd per test case (coord/embed.c),
 * clients, and polling with deadlines.  Tests never sleep and hope. */
#ifndef EC_TEST_HARNESS_H
#define EC_TEST_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "ec_check.h"
#include "embed.h"
#include "etcd.h"

/* Print "1..0 # SKIP <why>" and exit 0 when no etcd binary is installed. */
void ec_test_require_etcd(void);
/* Start a fresh etcd; fails the test if it cannot. */
ec_embed_t *ec_test_etcd_start(const ec_embed_opts_t *opts);
/* A client to endpoint, failing the test if it cannot connect. */
ec_etcd_t *ec_test_client(const char *endpoint);
int64_t ec_test_now_ms(void);
/* Poll cond(arg) every few ms until it holds or timeout_ms (scaled by
 * EC_TEST_TIMEOUT_MULTIPLIER) passes; returns whether it held. */
bool ec_test_wait(bool (*cond)(void *arg), void *arg, long timeout_ms);
/* Wait out a span of time while cond keeps holding; false as soon as it
 * fails.  For "X stays true for 3*TTL" checks. */
bool ec_test_holds(bool (*cond)(void *arg), void *arg, long span_ms);
/* Run a command (argv), returning its exit status, output into out. */
int ec_test_run(char *const argv[], char *out, size_t outlen);

#define EC_INTEGRATION_MAIN(suite_fn)                                  \
    int main(void)                                                     \
    {                                                                  \
        ec_test_require_etcd();                                        \
        SRunner *sr = srunner_create(suite_fn());                      \
        /* gRPC state must not cross fork(): run tests in-process. */  \
        srunner_set_fork_status(sr, CK_NOFORK);                        \
        srunner_set_tap(sr, "-");                                      \
        srunner_run_all(sr, CK_SILENT);                                \
        int failed = srunner_ntests_failed(sr);                        \
        srunner_free(sr);                                              \
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;                   \
    }

#endif
