/* Endpoint lists: what users type (etcdctl, Paddle's --elastic_server) into
 * what gRPC core can dial. */
#include "endpoints.h"
#include "log.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOW "write host:port, e.g. 127.0.0.1:2379 (several: a,b)"

static int parse_one(const char *s, size_t len, ec__endpoint_t *ep, bool *tls, ec_error_t *err)
{
    char buf[512];
    if (len >= sizeof(buf))
        return ec_errorf(err, EC_EINVAL, "etcd endpoint '%.40s...' is too long; " HOW, s);
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *p = buf;
    char *sep = strstr(p, "://");
    if (sep) {
        *sep = '\0';
        if (!strcmp(p, "https"))
            *tls = true;
        else if (strcmp(p, "http") && strcmp(p, "etcd"))
            return ec_errorf(err, EC_EINVAL,
                             "etcd endpoint '%s://%s': unsupported scheme '%s'; use http://, "
                             "https://, etcd:// or none; " HOW, p, sep + 3, p);
        p = sep + 3;
    }
    size_t l = strlen(p);
    while (l > 0 && p[l - 1] == '/')
        p[--l] = '\0';
    if (l == 0)
        return ec_errorf(err, EC_EINVAL, "etcd endpoint '%.*s' has no host; " HOW, (int)len, s);
    memset(ep, 0, sizeof(*ep));
    char *portstr = NULL;
    if (p[0] == '[') {
        char *close = strchr(p, ']');
        if (!close)
            return ec_errorf(err, EC_EINVAL, "etcd endpoint '%s': missing ']' after IPv6 address; " HOW, p);
        *close = '\0';
        /* Found by tests/fuzz/fuzz_endpoints: a long bracketed host was cut
         * short silently, so another host would have been dialed. */
        if (strlen(p + 1) >= sizeof(ep->host))
            return ec_errorf(err, EC_EINVAL, "etcd endpoint host '%.40s...' is too long", p + 1);
        snprintf(ep->host, sizeof(ep->host), "%s", p + 1);
        if (close[1] == ':')
            portstr = close + 2;
        else if (close[1] != '\0')
            return ec_errorf(err, EC_EINVAL, "etcd endpoint '%s]%s': junk after ']'; " HOW, p, close + 1);
    } else {
        char *colon = strchr(p, ':');
        if (colon && strchr(colon + 1, ':'))
            return ec_errorf(err, EC_EINVAL,
                             "etcd endpoint '%s': put IPv6 addresses in brackets, e.g. [::1]:2379", p);
        if (colon) {
            *colon = '\0';
            portstr = colon + 1;
        }
        if (strlen(p) >= sizeof(ep->host))
            return ec_errorf(err, EC_EINVAL, "etcd endpoint host '%.40s...' is too long", p);
        snprintf(ep->host, sizeof(ep->host), "%s", p);
    }
    if (ep->host[0] == '\0')
        return ec_errorf(err, EC_EINVAL, "etcd endpoint '%.*s' has no host; " HOW, (int)len, s);
    for (const char *h = ep->host; *h; h++)
        if (!isalnum((unsigned char)*h) && !strchr(".-_:%", *h))
            return ec_errorf(err, EC_EINVAL, "etcd endpoint host '%s' has a bad character '%c'; " HOW,
                             ep->host, *h);
    ep->port = 2379;
    if (portstr) {
        char *end;
        long v = strtol(portstr, &end, 10);
        if (*portstr == '\0' || *end != '\0' || v < 1 || v > 65535)
            return ec_errorf(err, EC_EINVAL, "etcd endpoint '%.*s': port '%s' is not a number in 1..65535; " HOW,
                             (int)len, s, portstr);
        ep->port = (int)v;
    }
    struct in_addr a4;
    struct in6_addr a6;
    ep->ipv4 = inet_pton(AF_INET, ep->host, &a4) == 1;
    ep->ipv6 = inet_pton(AF_INET6, ep->host, &a6) == 1;
    return 0;
}

int ec__endpoints_parse(const char *spec, ec__endpoints_t *out, ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (!spec || !*spec)
        return ec_errorf(err, EC_EINVAL, "no etcd endpoint given; " HOW);
    const char *p = spec;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len > 0) {
            if (out->n == EC_EP_MAX)
                return ec_errorf(err, EC_EINVAL, "more than %d etcd endpoints given", EC_EP_MAX);
            bool tls = false;
            int rc = parse_one(p, len, &out->ep[out->n], &tls, err);
            if (rc < 0)
                return rc;
            out->tls |= tls;
            out->n++;
        }
        if (!end)
            break;
        p = end + 1;
    }
    if (out->n == 0)
        return ec_errorf(err, EC_EINVAL, "no etcd endpoint in '%s'; " HOW, spec);
    return 0;
}

static int append(char *dst, size_t len, size_t *used, const char *fmt, const char *h, int port)
{
    int w = snprintf(dst + *used, len - *used, fmt, *used ? "," : "", h, port);
    if (w < 0 || (size_t)w >= len - *used)
        return -1;
    *used += (size_t)w;
    return 0;
}

int ec__endpoints_target(const ec__endpoints_t *eps, char *target, size_t len,
                         char *authority, size_t alen, ec_error_t *err)
{
    bool all4 = true, all6 = true;
    for (int i = 0; i < eps->n; i++) {
        all4 &= eps->ep[i].ipv4;
        all6 &= eps->ep[i].ipv6;
    }
    snprintf(authority, alen, "%s", eps->ep[0].host);
    size_t used = 0;
    if (all4 || all6) {
        used = (size_t)snprintf(target, len, "%s", all4 ? "ipv4:" : "ipv6:");
        size_t base = used;
        char *t = target + base;
        size_t tl = len - base, u = 0;
        for (int i = 0; i < eps->n; i++)
            if (append(t, tl, &u, all4 ? "%s%s:%d" : "%s[%s]:%d", eps->ep[i].host, eps->ep[i].port) < 0)
                return ec_errorf(err, EC_EINVAL, "etcd endpoint list too long");
        return 0;
    }
    if (eps->n == 1) {
        if (eps->ep[0].ipv6)
            snprintf(target, len, "ipv6:[%s]:%d", eps->ep[0].host, eps->ep[0].port);
        else
            snprintf(target, len, "dns:///%s:%d", eps->ep[0].host, eps->ep[0].port);
        return 0;
    }
    /* Mixed or several names: resolve to IPv4 here. */
    used = (size_t)snprintf(target, len, "ipv4:");
    char *t = target + used;
    size_t tl = len - used, u = 0;
    int ok = 0;
    for (int i = 0; i < eps->n; i++) {
        char addr[INET_ADDRSTRLEN];
        if (eps->ep[i].ipv4) {
            snprintf(addr, sizeof(addr), "%s", eps->ep[i].host);
        } else if (eps->ep[i].ipv6) {
            /* Found by tests/fuzz/fuzz_endpoints: this used to be dropped
             * without a word (an AF_INET lookup of an IPv6 literal fails). */
            ec_log(EC_LOG_WARN, "etcd endpoint [%s]:%d is not used: gRPC dials one address "
                                "family per list and this list has IPv4 addresses or host "
                                "names; list only IPv6 addresses to use it", eps->ep[i].host,
                   eps->ep[i].port);
            continue;
        } else {
            struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
            if (getaddrinfo(eps->ep[i].host, NULL, &hints, &res) != 0 || !res)
                continue; /* a dead name is skipped like a dead address */
            inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, addr, sizeof(addr));
            freeaddrinfo(res);
        }
        if (append(t, tl, &u, "%s%s:%d", addr, eps->ep[i].port) < 0)
            return ec_errorf(err, EC_EINVAL, "etcd endpoint list too long");
        ok++;
    }
    if (!ok)
        return ec_errorf(err, EC_EUNAVAILABLE,
                         "none of the etcd endpoints' host names resolve; check --elastic_server");
    return 0;
}
