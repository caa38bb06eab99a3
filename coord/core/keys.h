/* The etcd key layout: the one place that builds a key path.
 *
 * Every key of a job lives under its root "<prefix>/<job_id>/".  The trailing
 * slash is part of the root, so job "job1" never reads or deletes keys of job
 * "job10".  Under the root:
 *
 *   nodes/<node_id>                       node record, leased by the node
 *   leader                                election key, leased by the leader
 *   epoch                                 current epoch record
 *   epochd                                the same epoch as a delta from the
 *                                         one before (epoch_delta.h): what
 *                                         followers' coordinators watch
 *   epochs/<n>                            immutable copy of epoch n (history)
 *   epochs/<n>/comm/<name>                per-epoch worker keys, leased by the
 *   epochs/<n>/timings/<rank>             writer's node
 *   epochs/<n>/state/<rank>
 *   status                                job status record
 *   failures/<seq>/<node_id>[/<local_rank>]  failure records
 *   check/nodes/<node_id>                 `ecoord check`: a node's facts, leased
 *   check/report                          `ecoord check`: the report, leased
 *   holders/<m_id>                        restart mode's stop barrier: the last
 *                                         node that started M_id m_id's ranks
 *                                         (no lease; stop_barrier.h)
 *   gone/<node_id>                        why node_id was evicted, on a lease
 *                                         of its own that outlasts its wait
 *   runs/<run>/probe_secret               the run's secret that proves a probe's
 *                                         answer (probe_proof.h); no lease: it
 *                                         lasts the run (deleted with its end)
 *
 * <n> and <seq> are zero-padded to 20 digits (UINT64_MAX has 20), so a prefix
 * listing returns them in numeric order.  Because '/' sorts before every
 * digit, the range [epochs/, epochs/<n>) holds exactly the history copies and
 * the per-epoch worker keys of every epoch below n: that is the range to
 * delete when pruning history.  A listing of epochs/ returns both kinds of
 * key; ec_key_parse_epoch() tells a history copy from a worker key.
 * Ranks in worker keys are plain decimal (not padded).
 *
 * Keys are written into a caller buffer; a buffer of EC_KEY_MAX bytes always
 * fits a key built from valid ids.  Builders return the key length (>= 0,
 * excluding the NUL) or a negative EC_* code: EC_EINVAL for an invalid id
 * or argument, EC_ETOOLARGE if the buffer is too small (buf then holds "").
 */
#ifndef EC_KEYS_H
#define EC_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define EC_PREFIX_MAX 256   /* etcd prefix, after trailing slashes are stripped */
#define EC_JOB_ID_MAX 128
#define EC_NODE_ID_MAX 253  /* a DNS name; k8s pod names fit */
#define EC_COMM_NAME_MAX 128
#define EC_KV_NAME_MAX 64   /* a program's per-epoch key (ecw_epoch_put) */
#define EC_KEY_MAX 1024     /* fits every key built from valid ids */

/* A job id is 1..EC_JOB_ID_MAX characters from [A-Za-z0-9._-], and not "."
 * or ".." (ids also name log directories).  Returns 0 or EC_EINVAL with a
 * message naming the offending character. */
int ec_job_id_check(const char *job_id, ec_error_t *err);
/* A node id: same alphabet, 1..EC_NODE_ID_MAX characters. */
int ec_node_id_check(const char *node_id, ec_error_t *err);
/* Booleans for the same rules, for validators that write their own message;
 * len is the length of id (ids need not be NUL-terminated). */
int ec_node_id_valid(const char *id, size_t len);

/* A job's key root.  Plain value; fields are read-only after ec_keys_init. */
typedef struct ec_keys {
    char root[EC_PREFIX_MAX + EC_JOB_ID_MAX + 4]; /* "<prefix>/<job_id>/" */
    size_t root_len;
    size_t jobs_len; /* of "<prefix>/", the part every job under the prefix shares */
} ec_keys_t;

/* Build the root for prefix (NULL or "" for none, e.g. "/ecoord"; trailing
 * slashes are ignored, so "/ecoord" and "/ecoord/" are the same prefix) and
 * job_id.  The prefix is used verbatim otherwise: "ecoord" and "/ecoord" are
 * different prefixes.  A prefix must be printable ASCII without spaces and
 * without "//".  Returns 0, or EC_EINVAL for a bad prefix or job id. */
int ec_keys_init(ec_keys_t *k, const char *prefix, const char *job_id, ec_error_t *err);

/* "<prefix>/<job_id>/": the range to watch or delete for the whole job. */
const char *ec_keys_root(const ec_keys_t *k);
/* "<prefix>/": the range that holds every job under the prefix, each as
 * "<prefix>/<job_id>/...". */
int ec_keys_jobs_prefix(const ec_keys_t *k, char *buf, size_t len);

int ec_key_nodes_prefix(const ec_keys_t *k, char *buf, size_t len);   /* nodes/ */
int ec_key_node(const ec_keys_t *k, const char *node_id, char *buf, size_t len);
int ec_key_leader(const ec_keys_t *k, char *buf, size_t len);
int ec_key_epoch(const ec_keys_t *k, char *buf, size_t len);
int ec_key_epoch_delta(const ec_keys_t *k, char *buf, size_t len); /* epochd */
int ec_key_epochs_prefix(const ec_keys_t *k, char *buf, size_t len);  /* epochs/ */
/* epochs/<n>, n >= 1. */
int ec_key_epoch_history(const ec_keys_t *k, uint64_t n, char *buf, size_t len);
/* epochs/<n>/: every worker key of epoch n. */
int ec_key_epoch_worker_prefix(const ec_keys_t *k, uint64_t n, char *buf, size_t len);
/* epochs/<n>/comm/<name>, name checked like a node id (1..EC_COMM_NAME_MAX). */
int ec_key_epoch_comm(const ec_keys_t *k, uint64_t n, const char *name, char *buf, size_t len);
/* epochs/<n>/kv/<name>: a program's own per-epoch value (ecw_epoch_put), a
 * namespace apart from the library's comm/ keys; name checked by
 * ec_kv_name_check. */
int ec_key_epoch_kv(const ec_keys_t *k, uint64_t n, const char *name, char *buf, size_t len);
/* 1..EC_KV_NAME_MAX characters from [A-Za-z0-9._-], not "." or "..": 0, or
 * EC_EINVAL with a message naming the rule. */
int ec_kv_name_check(const char *name, ec_error_t *err);
/* epochs/<n>/timings/<rank>, rank >= 0. */
int ec_key_epoch_timing(const ec_keys_t *k, uint64_t n, int rank, char *buf, size_t len);
/* epochs/<n>/state/<rank>, rank >= 0. */
int ec_key_epoch_state(const ec_keys_t *k, uint64_t n, int rank, char *buf, size_t len);
/* A split epoch's parts (records.h): epochs/<n>/members/<k>,
 * epochs/<n>/index/<b>, and the prefix of the chunks, epochs/<n>/members/. */
int ec_key_epoch_chunk(const ec_keys_t *k, uint64_t n, int chunk, char *buf, size_t len);
int ec_key_epoch_chunks_prefix(const ec_keys_t *k, uint64_t n, char *buf, size_t len);
int ec_key_epoch_index(const ec_keys_t *k, uint64_t n, int bucket, char *buf, size_t len);
/* epochs/<n>/suspect/<node_id>: the node (reporter) suspects members of
 * epoch n are dead; the value lists them.  Leased by the reporter. */
int ec_key_epoch_suspect(const ec_keys_t *k, uint64_t n, const char *reporter, char *buf,
                         size_t len);
/* epochs/<n>/suspect/<node_id>/<source>: the same, from another source on
 * that node than its agent (the worker library: source "rank<local rank>"),
 * so that the agent's report and each process's never replace each other;
 * every source's report counts for the node (coord/node/model.c). */
int ec_key_epoch_suspect_src(const ec_keys_t *k, uint64_t n, const char *reporter,
                             const char *source, char *buf, size_t len);
int ec_key_status(const ec_keys_t *k, char *buf, size_t len);
/* hang/<node_id>: the leader's verdict that node_id's ranks hung (its
 * agent restarts them; coord/node/node_hang.c), on the leader's lease. */
int ec_key_hang(const ec_keys_t *k, const char *node_id, char *buf, size_t len);
/* Restart mode's stop barrier (stop_barrier.h): holders/<m_id>, the last
 * node that started M_id m_id's ranks (m_id >= 0; no lease: bounded by
 * --np's MAX), and gone/<node_id>, why node_id was evicted (on a lease of
 * its own, granted by the evictor, that outlasts the wait it announces). */
int ec_key_holder(const ec_keys_t *k, int m_id, char *buf, size_t len);
int ec_key_gone(const ec_keys_t *k, const char *node_id, char *buf, size_t len);
int ec_key_failures_prefix(const ec_keys_t *k, char *buf, size_t len); /* failures/ */
/* failures/<seq>/<node_id>/<local_rank>, or failures/<seq>/<node_id> when
 * local_rank < 0 (a whole-node failure).  seq is chosen by the writer (unix
 * ms, say); the node id keeps two nodes failing in the same ms apart. */
int ec_key_failure(const ec_keys_t *k, uint64_t seq, const char *node_id, int local_rank,
                   char *buf, size_t len);

/* runs/<run>/probe_secret, run >= 1 (zero-padded like epochs), and runs/,
 * the prefix of every run's keys: [runs/, runs/<run>) holds the earlier
 * runs'. */
int ec_key_probe_secret(const ec_keys_t *k, uint64_t run, char *buf, size_t len);
int ec_key_run(const ec_keys_t *k, uint64_t run, char *buf, size_t len);
int ec_key_runs_prefix(const ec_keys_t *k, char *buf, size_t len);

/* `ecoord check`'s keys, apart from the training job's: node_id a valid id
 * gives check/nodes/<node_id> (that node's facts), NULL gives check/report,
 * and "" gives check/, the prefix holding both (to list and watch). */
int ec_key_check(const ec_keys_t *k, const char *node_id, char *buf, size_t len);

/* If key[0..keylen) is exactly nodes/<valid node id> under k's root, copy the
 * node id (NUL-terminated) into node_id and return its length.  Returns
 * EC_EINVAL for any other key (other job, other kind, nested path, bad id),
 * EC_ETOOLARGE if node_id is too small.  A buffer of EC_NODE_ID_MAX + 1
 * always fits. */
int ec_key_parse_node(const ec_keys_t *k, const char *key, size_t keylen, char *node_id,
                      size_t len);

/* Classify a key found under epochs/.  Returns EC_KEY_EPOCH_HISTORY for
 * epochs/<20 digits>, EC_KEY_EPOCH_WORKER for epochs/<20 digits>/<anything>,
 * and fills *n (may be NULL) with the epoch number; EC_EINVAL otherwise. */
enum { EC_KEY_EPOCH_HISTORY = 1, EC_KEY_EPOCH_WORKER = 2 };
int ec_key_parse_epoch(const ec_keys_t *k, const char *key, size_t keylen, uint64_t *n);

#endif
