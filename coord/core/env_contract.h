/* The environment contract between the agent and the worker library: the
 * variables `ecoord launch` sets in every training process
 * (coord/agent/env.c) that the worker library (worker/options.c) and the
 * Python package (through it) read.  One name each, written here once;
 * both sides use these macros, never the string.  What each means is in
 * worker/options.c's table (the reader's side) and docs/user-guide.md, "Environment of
 * each process".
 *
 * The variables Paddle and torch programs read (PADDLE_TRAINER_ID, RANK,
 * WORLD_SIZE, MASTER_ADDR, ...) are their contract, not ours: env.c sets
 * them by their own names. */
#ifndef EC_ENV_CONTRACT_H
#define EC_ENV_CONTRACT_H

/* ecoord's own, set by the agent, read by the worker library */
#define EC_ENV_ELASTIC_SERVER "ECOORD_ELASTIC_SERVER"     /* etcd endpoints */
#define EC_ENV_ETCD_PREFIX "ECOORD_ETCD_PREFIX"           /* key prefix */
#define EC_ENV_JOB_ID "ECOORD_JOB_ID"
#define EC_ENV_NODE_ID "ECOORD_NODE_ID"
#define EC_ENV_EPOCH "ECOORD_EPOCH"                       /* epoch started in (before
                                                           * admission: the lowest it may join) */
#define EC_ENV_INCARNATION "ECOORD_INCARNATION"           /* its node's incarnation */
#define EC_ENV_LEASE "ECOORD_LEASE"                       /* node's lease, hex */
#define EC_ENV_LEASE_TTL_MS "ECOORD_LEASE_TTL_MS"
#define EC_ENV_LEASE_MARGIN_MS "ECOORD_LEASE_MARGIN_MS"
#define EC_ENV_REBUILD "ECOORD_REBUILD"                   /* restart | inprocess */
#define EC_ENV_PROGRESS_FILE "ECOORD_PROGRESS_FILE"       /* progress_file.h; the Python package
                                                           * (ecoord/progress.py) reads it too */
#define EC_ENV_ETCD_CACERT "ECOORD_ETCD_CACERT"
#define EC_ENV_ETCD_CERT "ECOORD_ETCD_CERT"
#define EC_ENV_ETCD_KEY "ECOORD_ETCD_KEY"
#define EC_ENV_ETCD_USER "ECOORD_ETCD_USER"
#define EC_ENV_ETCD_PASSWORD_FILE "ECOORD_ETCD_PASSWORD_FILE"
#define EC_ENV_ETCD_PROXY "ECOORD_ETCD_PROXY"               /* "" or http://HOST:PORT */
/* never set in a training process (the agent's own input): removed */
#define EC_ENV_ETCD_PASSWORD "ECOORD_ETCD_PASSWORD"

/* Paddle's and torch's names the worker library also reads, as fallbacks
 * or for the process's place on its node */
#define EC_ENV_LOCAL_RANK "LOCAL_RANK"
#define EC_ENV_PADDLE_LOCAL_RANK "PADDLE_LOCAL_RANK"
#define EC_ENV_PADDLE_JOB_ID "PADDLE_JOB_ID"
#define EC_ENV_POD_NAME "POD_NAME"
#define EC_ENV_PADDLE_CURRENT_ENDPOINT "PADDLE_CURRENT_ENDPOINT"
#define EC_ENV_SELECTED_GPUS "FLAGS_selected_gpus"

#endif
