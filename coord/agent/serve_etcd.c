/* The etcd a node serves for torchrun's static and c10d rendezvous. */
#define _GNU_SOURCE
#include "serve_etcd.h"
#include "clock.h"
#include "connect.h"
#include "keys.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

bool ec_serve_is_local(const char *host, char *ip, size_t iplen)
{
    if (ip && iplen)
        ip[0] = '\0';
    if (!strcasecmp(host, "localhost")) {
        if (ip)
            snprintf(ip, iplen, "127.0.0.1");
        return true;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return false;
    bool local = false;
    for (struct addrinfo *a = res; a && !local; a = a->ai_next) {
        char buf[INET6_ADDRSTRLEN] = "";
        if (a->ai_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, buf, sizeof(buf));
        else if (a->ai_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, buf, sizeof(buf));
        else
            continue;
        if (ip && !ip[0])
            snprintf(ip, iplen, "%s", buf);
        /* an address of this machine is one a socket can bind to */
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0) {
            local = true;
            if (ip)
                snprintf(ip, iplen, "%s", buf);
        }
        close(fd);
    }
    freeaddrinfo(res);
    return local;
}

int ec_serve_etcd_start(const ec_config_t *cfg, const ec_embed_opts_t *base, ec_embed_t **out,
                        char *why, size_t len, ec_error_t *err)
{
    *out = NULL;
    if (why && len)
        why[0] = '\0';
    int mode = cfg->torchrun.serve;
    const char *host = cfg->torchrun.serve_host;
    int port = cfg->torchrun.serve_port;
    if (mode == 0)
        return 0;
    char ip[INET6_ADDRSTRLEN + 1];
    if (mode == 2 && !ec_serve_is_local(host, ip, sizeof(ip))) {
        snprintf(why, len, "%s is not this machine: its node serves the job's etcd at %s:%d",
                 host, host, port);
        return 0;
    }
    /* on every interface, as torchrun's TCPStore listens: the address the
     * others use may be one this machine does not see as its own (a NAT, a
     * name /etc/hosts maps to 127.0.1.1), and this node's own client comes
     * in on loopback */
    char listen[128], adv[320];
    snprintf(listen, sizeof(listen), "--listen-client-urls=http://0.0.0.0:%d", port);
    snprintf(adv, sizeof(adv), "--advertise-client-urls=http://%s%s%s:%d",
             strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", port);
    const char *extra[] = {listen, adv, NULL};
    ec_embed_opts_t o = *base;
    o.size = sizeof(o);
    o.client_port = port;
    o.extra_args = extra;
    ec_error_t e = {0};
    ec_embed_t *em = ec_embed_start(&o, &e);
    if (em) {
        snprintf(why, len, "this node serves the job's etcd at %s:%d (%s)", host, port,
                 mode == 1 ? cfg->torchrun.static_rdzv ? "node_rank 0 of the static rendezvous"
                                                       : "rdzv_conf is_host"
                           : "the --rdzv_endpoint node");
        *out = em;
        return 0;
    }
    if (mode == 2) {
        /* another agent on this machine serves it (or something else holds
         * the port: the connection says so) */
        snprintf(why, len, "%s is this machine, but its etcd did not start here (%.300s): "
                           "another node on this machine serves it at %s:%d",
                 host, e.msg, host, port);
        return 0;
    }
    return ec_errorf(err, e.code ? e.code : EC_EIO,
                     "cannot serve the job's etcd at %s:%d (node_rank 0 of the static "
                     "rendezvous): %s; is the port free (--master_port)?",
                     host, port, e.msg);
}

/* Log every 10 s while waiting for etcd. */
#define WAIT_SAY_MS 10000

/* Connect to cfg's etcd, trying again every 200 ms while the failure may
 * pass by itself (ec_etcd_error_may_pass), until deadline_ms (monotonic; 0:
 * as long as it takes).  bound (NULL: silent) names the knob behind the
 * deadline: the first failure is logged with it, a line every 10 s, one
 * when etcd answers and one when the wait ends in vain. */
static ec_etcd_t *connect_until(const ec_config_t *cfg, int64_t deadline_ms, const char *bound,
                                ec_error_t *err)
{
    int64_t t0 = ec_mono_ms(), next_say = t0 + WAIT_SAY_MS;
    for (int tries = 1;; tries++) {
        ec_error_t e = {0};
        ec_etcd_t *c = ec_connect(cfg, NULL, 5000, &e);
        int64_t now = ec_mono_ms();
        if (c) {
            if (bound && tries > 1)
                ec_log(EC_LOG_INFO, "etcd answered after %.1f s (%d tries)",
                       (double)(now - t0) / 1000.0, tries);
            return c;
        }
        bool may_pass = ec_etcd_error_may_pass(&e);
        if (!may_pass || (deadline_ms > 0 && now >= deadline_ms)) {
            if (bound && may_pass && deadline_ms > t0) /* its own line: e.msg may be full */
                ec_log(EC_LOG_ERROR, "gave up after %s (%d tries); the last failure:", bound,
                       tries);
            if (err)
                *err = e;
            return NULL;
        }
        if (bound && tries == 1)
            ec_log(EC_LOG_WARN, "%s; waiting for it up to %s (0: give up at once)", e.msg, bound);
        else if (bound && now >= next_say) {
            ec_log(EC_LOG_INFO, "still waiting for etcd: %.0f s of %s",
                   (double)(now - t0) / 1000.0, bound);
            next_say = now + WAIT_SAY_MS;
        }
        int64_t left = deadline_ms > 0 ? deadline_ms - now : 200;
        pause_ms(left < 200 ? (long)left : 200);
    }
}

ec_etcd_t *ec_serve_connect(const ec_config_t *cfg, int64_t deadline_ms, ec_error_t *err)
{
    return connect_until(cfg, deadline_ms, NULL, err);
}

ec_etcd_t *ec_serve_wait_connect(const ec_config_t *cfg, ec_error_t *err)
{
    char bound[64];
    snprintf(bound, sizeof(bound), "--etcd_wait=%gs", (double)cfg->etcd_wait_ms / 1000.0);
    return connect_until(cfg, ec_mono_ms() + cfg->etcd_wait_ms, bound, err);
}

int ec_serve_linger(ec_etcd_t *c, const ec_config_t *cfg, int64_t timeout_ms)
{
    ec_keys_t k;
    ec_error_t err = {0};
    char prefix[EC_KEY_MAX], own[EC_KEY_MAX];
    if (!c || ec_keys_init(&k, cfg->etcd_prefix, cfg->job_id, &err) < 0 ||
        ec_key_nodes_prefix(&k, prefix, sizeof(prefix)) < 0 ||
        ec_key_node(&k, cfg->node_id, own, sizeof(own)) < 0)
        return 0;
    int64_t deadline = ec_mono_ms() + timeout_ms;
    int others = 0;
    for (;;) {
        ec_kv_list_t l = {0};
        err = (ec_error_t){0};
        if (ec_etcd_get_prefix(c, prefix, 0, &l, &err) < 0)
            return 0;
        others = 0;
        for (size_t i = 0; i < l.n; i++)
            others += strcmp(l.kvs[i].key, own) != 0;
        ec_kv_list_free(&l);
        if (!others || ec_mono_ms() >= deadline)
            return others;
        pause_ms(50);
    }
}
