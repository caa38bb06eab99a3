/* The environment of one training process (pure): what Paddle and torchrun
 * programs expect, plus ecoord's own, computed from the epoch alone so every
 * process of every node agrees. */
#ifndef EC_ENV_H
#define EC_ENV_H

#include "error.h"
#include "records.h"

typedef struct ec_env_ctx {
    const char *job_id;
    const char *node_id;
    const char *log_dir;
    const char *elastic_server;  /* endpoints, comma list */
    const char *etcd_prefix;     /* "" for none */
    const char *rebuild;         /* "restart" or "inprocess" */
    const int *gpus;             /* physical device per local rank, or NULL */
    int ngpus;
    int restart_count;
    int max_restarts;
    long long lease;             /* the node's lease, for keys workers write */
} ec_env_ctx_t;

/* Build the environment of local rank n_id on member m_id of ep: base
 * (NULL-terminated, e.g. environ) with every variable we set replaced.
 * *out is a malloc'd NULL-terminated array of malloc'd "K=V" strings; free
 * it with ec_env_free.  Returns 0, EC_EINVAL (m_id/n_id out of range) or
 * EC_ENOMEM. */
int ec_env_build(const ec_epoch_t *ep, int m_id, int n_id, const ec_env_ctx_t *ctx,
                 char *const *base, char ***out, ec_error_t *err);
void ec_env_free(char **env);
/* Value of name in env, or NULL. */
const char *ec_env_get(char *const *env, const char *name);

#endif
