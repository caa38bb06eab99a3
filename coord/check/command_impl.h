/* Inside `ecoord check`'s run (command.h): what command.c and the
 * command_*.c files share (not for callers).
 *
 *   command.c            ec_cmd_check: the run as its steps, in order
 *   command_view.c       the view of <job>/check/ (one watch) and the waits on it
 *   command_publish.c    this node's facts into etcd; who writes the report
 *   command_collective.c the allreduce job (an ordinary `ecoord launch`)
 *   command_report.c     the report: compared from the facts, printed
 *
 * Everything is the run's thread's but what lives under ck_t.lock: the
 * view (peers, report) is written by the watch's thread.
 */
#ifndef EC_CHECK_COMMAND_IMPL_H
#define EC_CHECK_COMMAND_IMPL_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "command.h"
#include "embed.h"
#include "etcd.h"
#include "facts.h"
#include "keys.h"
#include "ports.h"
#include "report.h"

#define POLL_MS 200             /* how often a wait looks at the abort flag  */
#define CONNECT_MS 5000         /* etcd dial and call deadline                */
#define MIN_ARRIVAL_MS 1000     /* --elastic_timeout=0 still waits this long  */
#define PHASE_MS 10000          /* waiting for the others to finish a phase   */
#define REPORT_SLACK_MS 5000    /* what a follower waits beyond the leader    */
#define CLEANUP_MS 3000         /* the leader waiting for followers to leave  */
#define COLL_EXTRA_MS 20000     /* the allreduce job: every node starts it at the same
                                  * phase, so it forms at once; a node that died
                                  * since is reported when this runs out */
#define ETCD_SAMPLES 5          /* reads timed for the etcd round trip        */

/* One key under check/ as the watch last saw it. */
typedef struct peer {
    char *key;
    int present;
    int valid;               /* facts decoded */
    ec_check_facts_t f;
    char err[256];           /* why the facts did not decode */
} peer_t;

typedef struct ck {
    const ec_config_t *cfg;
    ec_getenv_fn env;
    void *env_arg;
    FILE *out, *errout;

    ec_embed_t *embed;
    char *endpoints;
    ec_etcd_t *c;
    ec_keys_t keys;
    char k_prefix[EC_KEY_MAX], k_self[EC_KEY_MAX], k_report[EC_KEY_MAX];
    int64_t lease;
    ec_keepalive_t *ka;
    int64_t pub_rev;         /* revision of our first publish */
    int64_t report_rev;      /* create revision of the report key we created */
    bool leader;

    ec_check_facts_t self;
    int nfds;
    int *locks;              /* ec_ports_reserve's hold on the ports */
    int *fds;                /* our listening sockets on them */
    uint16_t *ports;
    bool reserved;

    ec_check_listener_t *listener; /* answers hellos on our ports */

    pthread_mutex_t lock;
    pthread_cond_t cond;
    ec_watch_t *watch;
    peer_t *peers;
    int npeers;
    char *report;            /* raw value of check/report, NULL when absent */
    size_t report_len;
    int64_t report_create_rev;
    int64_t report_mod_rev;
    bool report_claim;       /* check/report holds the leader's claim, not the report yet */
    bool relist;             /* the watch lost its place (compaction): list again */

    volatile sig_atomic_t *abort; /* the signal that ends the run, 0 until one comes */
    int64_t start_ms;
    int64_t arrival_ms;      /* how long arrivals were awaited */
    char coll_log[PATH_MAX];
} ck_t;

/* The nodes of this run: keys of the facts present when arrivals closed. */
typedef struct snap {
    int n;
    char **keys;
} snap_t;

void ec__check_snap_free(snap_t *s);

/* ---- the view of check/ (command_view.c) --------------------------------- */

/* List check/ again and follow it from there (a new watch). */
int ec__check_model_sync(ck_t *x, ec_error_t *err);
/* The peer of key (under x->lock); create adds it when absent.  NULL when
 * absent (or out of memory). */
peer_t *ec__check_peer_get(ck_t *x, const char *key, bool create);
/* Whether a node with this nonce has facts in etcd now (under x->lock). */
bool ec__check_nonce_present(ck_t *x, const char *nonce);
/* Free the view (peers and report). */
void ec__check_view_clear(ck_t *x);
/* Wait (until deadline, or a signal) for: want nodes with readable facts;
 * every node of s at phase or beyond; the leader's report; every other
 * node's facts gone.  Each returns whether it happened. */
bool ec__check_wait_arrived(ck_t *x, int want, int64_t deadline);
bool ec__check_wait_phase(ck_t *x, snap_t *s, int phase, int64_t deadline);
bool ec__check_wait_report(ck_t *x, int64_t deadline);
bool ec__check_wait_alone(ck_t *x, int64_t deadline);

/* ---- publishing (command_publish.c) -------------------------------------- */

/* Publish x->self again (a later phase) under the key first published. */
int ec__check_put_self(ck_t *x, ec_error_t *err);
/* The first publish of x->self: create only (a duplicate node id publishes
 * under another key); sets x->pub_rev. */
int ec__check_publish_first(ck_t *x, ec_error_t *err);
/* Settle who writes the report: leader and lnonce get its node id and nonce
 * (x->leader when it is this node); *late when the report was created
 * before this node arrived. */
int ec__check_elect(ck_t *x, bool *late, char *leader, size_t llen, char *lnonce,
                    ec_error_t *err);

/* ---- the allreduce (command_collective.c) -------------------------------- */

/* Why the allreduce cannot run on every node of snap (into why, "" when it
 * can); *gpus when a node has an NVIDIA driver. */
void ec__check_coll_decide(ck_t *x, const snap_t *snap, char *why, size_t len, bool *gpus);
/* The allreduce job's id for the run led by lnonce. */
void ec__check_coll_job_id(const ck_t *x, const char *lnonce, char *buf, size_t len);
/* Run the allreduce job on this node; its outcome goes into x->self. */
void ec__check_run_collective(ck_t *x, int nnodes, bool gpus, const char *job);

/* ---- the report (command_report.c) --------------------------------------- */

/* Compare the facts of snap's nodes (this node alone when snap is NULL)
 * into rep. */
int ec__check_compute_report(ck_t *x, const snap_t *snap, const char *leader, const char *nonce,
                             const char *etcd_error, ec_check_report_t *rep, ec_error_t *err);
/* Print rep to x->out; returns the exit code it calls for (1 when a check
 * failed). */
int ec__check_print_report(ck_t *x, const ec_check_report_t *rep);

#endif
