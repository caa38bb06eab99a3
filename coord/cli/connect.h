/* From the knob table to an etcd client: the one place that turns
 * --elastic_server, TLS and auth knobs into ec_etcd_opts_t. */
#ifndef EC_CONNECT_H
#define EC_CONNECT_H

#include "etcd.h"
#include "knobs.h"

/* Connect to cfg's etcd (cfg->elastic_server), or to `endpoints` when not
 * NULL (the embedded etcd).  The message names --elastic_server on failure. */
ec_etcd_t *ec_connect(const ec_config_t *cfg, const char *endpoints, int timeout_ms,
                      ec_error_t *err);
/* The configuration of this process's last successful ec_connect (the
 * agent's own connection), or NULL.  ec_env_build hands its TLS files and
 * user to the training processes when its caller names no configuration. */
const ec_config_t *ec_connect_config(void);
/* The name of the first proxy variable set in this process's environment
 * (grpc_proxy, https_proxy, http_proxy, ...), or NULL.  Etcd connections
 * never use them (etcd.h); messages say so. */
const char *ec_connect_proxy_env(void);
/* cfg's endpoints joined with commas (malloc'd), for messages and children. */
char *ec_connect_endpoints(const ec_config_t *cfg);

#endif
