#include "connect.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic(const ec_config_t *) connected;

const ec_config_t *ec_connect_config(void)
{
    return atomic_load(&connected);
}

char *ec_connect_endpoints(const ec_config_t *cfg)
{
    size_t len = 1;
    for (int i = 0; i < cfg->elastic_server.n; i++)
        len += strlen(cfg->elastic_server.v[i]) + 1;
    char *eps = calloc(1, len);
    for (int i = 0; eps && i < cfg->elastic_server.n; i++) {
        if (i)
            strcat(eps, ",");
        strcat(eps, cfg->elastic_server.v[i]);
    }
    return eps;
}

/* The proxy variables gRPC would read (and curl and Python's urllib), in the
 * order gRPC reads them: the client never uses them (etcd.h), and an etcd
 * that cannot be reached while one is set is said to be reached directly. */
static const char *const proxy_env[] = {"grpc_proxy", "https_proxy", "http_proxy", "HTTPS_PROXY",
                                        "HTTP_PROXY", "all_proxy", "ALL_PROXY", NULL};

const char *ec_connect_proxy_env(void)
{
    for (int i = 0; proxy_env[i]; i++) {
        const char *v = ec_config_environ(proxy_env[i], NULL);
        if (v && *v)
            return proxy_env[i];
    }
    return NULL;
}

ec_etcd_t *ec_connect(const ec_config_t *cfg, const char *endpoints, int timeout_ms,
                      ec_error_t *err)
{
    char *eps = endpoints ? strdup(endpoints) : ec_connect_endpoints(cfg);
    if (!eps) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = eps;
    o.ca_file = *cfg->etcd_cacert ? cfg->etcd_cacert : NULL;
    o.cert_file = *cfg->etcd_cert ? cfg->etcd_cert : NULL;
    o.key_file = *cfg->etcd_key ? cfg->etcd_key : NULL;
    o.user = *cfg->etcd_user ? cfg->etcd_user : NULL;
    o.password = cfg->etcd_password;
    o.dial_timeout_ms = timeout_ms;
    o.http_proxy = *cfg->etcd_proxy ? cfg->etcd_proxy : NULL;
    o.proxy_env = ec_connect_proxy_env();
    o.call_timeout_ms = timeout_ms;
    ec_etcd_t *c = ec_etcd_create(&o, err);
    if (!c && !endpoints)
        ec_error_prefix(err, "--elastic_server=%s", eps);
    if (c)
        atomic_store(&connected, cfg);
    free(eps);
    return c;
}
