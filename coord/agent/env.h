/* The environment of one training process: what Paddle and torchrun
 * programs expect, plus ecoord's own, computed from the epoch alone so every
 * process of every node agrees.  Pure but for the etcd password file it
 * writes once per agent (kept in statics, removed by an atexit handler). */
#ifndef EC_ENV_H
#define EC_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "records.h"

struct ec_config;

typedef struct ec_env_ctx {
    const char *job_id;
    const char *node_id;
    const char *log_dir;
    const char *elastic_server;  /* endpoints, comma list */
    const char *etcd_prefix;     /* "" for none */
    const char *rebuild;         /* "restart" or "inprocess" */
    /* The node's GPUs (coord/util/gpus.h): ngpus, one per local rank (0: a CPU
     * node, PADDLE_DISTRI_BACKEND=gloo), and the CUDA_VISIBLE_DEVICES every
     * process gets (NULL: left as inherited).  Local rank i uses the i-th:
     * FLAGS_selected_gpus=i, PADDLE_LOCAL_DEVICE_IDS=i. */
    int ngpus;
    const char *visible_devices;
    int restart_count;
    int max_restarts;
    long long lease;             /* the node's lease, for keys workers write */
    /* The lease's TTL and the fence margin (--lease_margin, in ms): the
     * worker library refuses collectives once it cannot confirm the lease
     * for TTL - margin.  0: not passed (the library does not fence). */
    long long lease_ttl_ms, lease_margin_ms;
    /* The agent's configuration (NULL: none): the workers connect to etcd
     * with its TLS files and user.  The password itself never enters a
     * training process's environment: ECOORD_ETCD_PASSWORD is removed and
     * ECOORD_ETCD_PASSWORD_FILE names a file only this user can read (the
     * agent's --etcd_password_file, else one the agent writes once, 0600 in
     * a private 0700 directory, removed when the agent exits).  Until
     * launch.c names it, the configuration of the agent's own connection
     * (ec_connect_config) is used. */
    const struct ec_config *etcd;
    /* This process's TORCHELASTIC_ERROR_FILE (torch's @record writes the
     * exception there), an absolute path; NULL: not set. */
    const char *error_file;
    const char *progress_file;   /* ECOORD_PROGRESS_FILE (coord/core/progress_file.h); NULL: none */
    const char *role;            /* ROLE_NAME; NULL: "default" */
    /* A process started before its node is in an epoch (ec_env_build with
     * no epoch; in place, its node is admitted once it is ready): the
     * node's N, this rank's address (PADDLE_CURRENT_ENDPOINT: the node's
     * host and the rank's port, the same in every epoch), and the lowest
     * epoch it may join (ECOORD_EPOCH). */
    int nproc;
    const char *host;
    uint16_t port;
    uint64_t start_epoch;
    /* The node's incarnation the process belongs to (ECOORD_INCARNATION; 0:
     * not set): it joins only an epoch that admitted that incarnation of
     * its node, never one planned before it was started. */
    uint64_t incarnation;
    /* The program's torch version as its interpreter imports it ("2.11.0";
     * NULL or "": unknown): which name of the async error handling variable
     * it reads. */
    const char *torch_version;
} ec_env_ctx_t;

/* Build the environment of local rank n_id on member m_id of ep: base
 * (NULL-terminated, e.g. environ) with every variable we set replaced.
 * ep NULL (m_id ignored): a process started before its node is admitted
 * gets what its node says (local rank, GPUs, ecoord's variables, its own
 * endpoint) and nothing of an epoch (no RANK, WORLD_SIZE, MASTER_ADDR,
 * PADDLE_TRAINER_ID, ...): the worker library tells it those.
 * OMP_NUM_THREADS=1 is added, as torchrun does, when the node runs more than
 * one process and base does not set it (see ec_env_omp_default);
 * TORCH_NCCL_ASYNC_ERROR_HANDLING=1 when base sets neither it nor
 * NCCL_ASYNC_ERROR_HANDLING, and the old name too only for a torch known to
 * be older than 2.2 (which reads only it; later ones warn that it is
 * deprecated), as torchrun of each version does.
 * *out is a malloc'd NULL-terminated array of malloc'd "K=V" strings; free
 * it with ec_env_free.  Returns 0, EC_EINVAL (m_id/n_id out of range),
 * EC_ESYS (the password file could not be written) or EC_ENOMEM.
 * Pure but for that file: see ctx->etcd. */
int ec_env_build(const ec_epoch_t *ep, int m_id, int n_id, const ec_env_ctx_t *ctx,
                 char *const *base, char ***out, ec_error_t *err);

/* Whether version ("1.13.1", "2.11.0+cu128") is known and older than
 * major.minor. */
bool ec_env_torch_before(const char *version, int major, int minor);
void ec_env_free(char **env);
/* The proxy variables ec_env_build leaves out that base sets (http_proxy,
 * https_proxy, HTTP_PROXY, HTTPS_PROXY, all_proxy, ALL_PROXY, grpc_proxy):
 * their count, and their names into names ("http_proxy, https_proxy"; ""
 * for none), for the agent's one line that says so. */
size_t ec_env_proxies(char *const *base, char *names, size_t len);
/* Whether ec_env_build sets OMP_NUM_THREADS=1 for nproc processes per node
 * over base: the caller says so once, in its own words. */
bool ec_env_omp_default(int nproc, char *const *base);
/* Value of name in env, or NULL. */
const char *ec_env_get(char *const *env, const char *name);

#endif
