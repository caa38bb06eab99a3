/* Parsing etcd endpoint lists into a gRPC target (pure; no I/O but the
 * optional name resolution in ec__endpoints_target). */
#ifndef EC_ETCD_ENDPOINTS_H
#define EC_ETCD_ENDPOINTS_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define EC_EP_MAX 16
#define EC_EP_HOST_MAX 256

typedef struct ec__endpoint {
    char host[EC_EP_HOST_MAX]; /* without brackets for IPv6 */
    int port;
    bool ipv4, ipv6;           /* a literal address of that family */
} ec__endpoint_t;

typedef struct ec__endpoints {
    ec__endpoint_t ep[EC_EP_MAX];
    int n;
    bool tls;                  /* https:// was given */
} ec__endpoints_t;

/* "127.0.0.1:2379", "http://h:2379", "https://h:2379", "etcd://h:2379",
 * "[::1]:2379", "h" (port 2379), comma separated, spaces ignored. */
int ec__endpoints_parse(const char *spec, ec__endpoints_t *out, ec_error_t *err);

/* Build a gRPC target: "ipv4:a:p,b:p" for IPv4 literals, "ipv6:[a]:p,..."
 * for IPv6 literals, "dns:///h:p" for one host name.  Several endpoints with
 * host names are resolved here (getaddrinfo, IPv4) and unresolvable ones
 * skipped, since gRPC's address lists cannot mix names.  authority gets the
 * first endpoint's host (for TLS name checks). */
int ec__endpoints_target(const ec__endpoints_t *eps, char *target, size_t len,
                         char *authority, size_t alen, ec_error_t *err);

#endif
