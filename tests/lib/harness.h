/* Integration-test harness: a real etcd per test case (coord/etcd/embed.c),
 * clients, and polling with deadlines.  Tests never sleep and hope. */
#ifndef EC_TEST_HARNESS_H
#define EC_TEST_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

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

/* Start argv with stdout+stderr appended to logpath; its process dies with
 * ours.  Returns the pid. */
pid_t ec_test_spawn(char *const argv[], const char *logpath);
/* SIGSTOP pid and wait (5 s, scaled) until every thread of it is stopped:
 * kill() returns before a thread running elsewhere has stopped, and a test
 * that counts on silence from now on must not race it.  Fails the test if
 * it does not stop. */
void ec_test_sigstop(pid_t pid);
/* Reap pid within timeout_ms: its exit status (128+sig if killed), or -1. */
int ec_test_reap(pid_t pid, long timeout_ms);
/* Whether the file contains needle (a line-oriented log). */
bool ec_test_file_contains(const char *path, const char *needle);
/* Write text to path (a script, a config), then chmod it to mode. */
void ec_test_write_file(const char *path, const char *text, unsigned mode);
/* Poll until the file contains needle or timeout_ms (scaled) passes. */
bool ec_test_wait_file(const char *path, const char *needle, long timeout_ms);
/* A program under test: $env when set (make check sets it), else fallback. */
const char *ec_test_bin(const char *env, const char *fallback);
/* $name when set and not empty, else def (a test's own knob). */
const char *ec_test_env_or(const char *name, const char *def);
/* For ec_test_wait: whether the file at path (a const char *) exists. */
bool ec_test_exists(void *path);
/* Pace a load generator (churn, a soak) by ms: its clock, never a wait for
 * a condition (ec_test_wait is that). */
void ec_test_pace_ms(long ms);
/* The job's current epoch (decoded, validated) or NULL. */
struct ec_epoch *ec_test_epoch(ec_etcd_t *c, const char *root);
/* An epoch a test waits for: numbered min..max (max 0: no upper bound), of
 * world size world (-1: any), without the node without (NULL: any). */
typedef struct {
    uint64_t min, max;
    int world;
    const char *without;
} ec_test_epoch_want_t;
/* Poll root's current epoch until it is as wanted, at most timeout_ms
 * (scaled): that epoch, or NULL at the deadline. */
struct ec_epoch *ec_test_wait_epoch(ec_etcd_t *c, const char *root,
                                    const ec_test_epoch_want_t *want, long timeout_ms);
/* The lease node's record at root is under (root "/job/"), -1 when it has
 * none or cannot be read. */
int64_t ec_test_lease_of(ec_etcd_t *c, const char *root, const char *node);
/* Poll until node's record is under a lease other than old (it registered
 * again), at most timeout_ms (scaled). */
bool ec_test_wait_lease_remade(ec_etcd_t *c, const char *root, const char *node, int64_t old,
                               long timeout_ms);
/* The Watch streams etcd has opened so far, from its /metrics on the client
 * port (the test fails when it cannot be read). */
long ec_test_etcd_watch_streams(ec_embed_t *etcd);
/* Whether every node record under root's nodes/ belongs to one of ids[0..n)
 * (the others left or their leases expired); false when it cannot be read. */
bool ec_test_only_registered(ec_etcd_t *c, const char *root, const char *const *ids, int n);
/* The same for an epoch numbered `number` or later of world size `world`;
 * fails the test at the deadline.  The epoch read after the wait (the
 * caller frees it). */
struct ec_epoch *ec_test_need_epoch(ec_etcd_t *c, const char *root, uint64_t number, int world,
                                    long timeout_ms);

/* Records every leadership of a job from now on (leader key created: its
 * holder and create revision; leader key deleted: the revision it ended at),
 * and at the end checks the job's epoch history with ec_history_check, each
 * epoch with the mod revision of its epochs/<n> key, so that an epoch written
 * by a deposed leader after its key went is caught. */
typedef struct ec_test_obs ec_test_obs_t;
ec_test_obs_t *ec_test_obs_start(ec_etcd_t *c, const char *root);
/* Sync (sentinel write), read epochs/, check; fails the test on a violation.
 * Returns the number of epochs checked. */
int ec_test_obs_check(ec_test_obs_t *o, int min_nodes, int max_nodes, int nproc);
void ec_test_obs_stop(ec_test_obs_t *o);
/* Stop every observer still running (call from teardown, before the client
 * goes). */
void ec_test_obs_stop_all(void);

/* The fixture most integration tests share, as calls on their own statics:
 * a fresh etcd and a client of it, and a temporary directory
 * /tmp/ec-<name>-XXXXXX (tmp: room for 256 bytes). */
void ec_test_up(ec_embed_t **etcd, ec_etcd_t **c, char *tmp, size_t tmplen, const char *name);
/* Client then etcd, each set to NULL; either may be NULL already. */
void ec_test_down(ec_embed_t **etcd, ec_etcd_t **c);
/* Every process a test started: SIGCONT (a stopped one), SIGKILL, reaped
 * within 5 s each; *n set to 0. */
void ec_test_kill_all(pid_t *pids, int *n);

/* The statics an integration test file works on, and its fixture:
 *   EC_TEST_ETCD_FIXTURE("t2400", 16)
 * declares etcd (the file's own etcd), c (a client of it), tmp (its scratch
 * directory), pids[max_pids] and npids (what its tests started, each
 * recorded there), and two functions for tcase_add_checked_fixture, or for
 * the file's own setup and teardown to call first and last: etcd_up (a
 * fresh etcd, client and directory) and etcd_down (every observer stopped
 * and every recorded process killed, then the client and etcd). */
#define EC_TEST_ETCD_FIXTURE(name, max_pids)                                  \
    static ec_embed_t *etcd;                                                   \
    static ec_etcd_t *c;                                                       \
    static char tmp[256];                                                      \
    static pid_t pids[max_pids];                                               \
    static int npids;                                                          \
    __attribute__((unused)) static void etcd_up(void)                         \
    {                                                                          \
        ec_test_up(&etcd, &c, tmp, sizeof(tmp), name);                         \
    }                                                                          \
    __attribute__((unused)) static void etcd_down(void)                       \
    {                                                                          \
        ec_test_obs_stop_all(); /* before the client goes */                   \
        ec_test_kill_all(pids, &npids);                                        \
        ec_test_down(&etcd, &c);                                               \
    }

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
