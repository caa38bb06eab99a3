/* The address a node publishes and the ports it reserves. */
#ifndef EC_NETADDR_H
#define EC_NETADDR_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The local address of the interface that routes to host:port (a UDP
 * "connect" and getsockname: nothing is sent).  Loopback when etcd is on
 * loopback.  Writes the address and the interface name (may be NULL). */
int ec_route_addr(const char *host, int port, char *addr, size_t alen, char *ifname,
                  size_t iflen, ec_error_t *err);
/* The interface holding addr ("lo", "eth0", "docker0"), or "" if none. */
void ec_addr_ifname(const char *addr, char *ifname, size_t len);

/* Reserve n TCP ports on addr within [lo, hi] that are free now and not
 * reserved by another agent on this host (an flock on a file per port under
 * /tmp/ecoord-ports); fds[] hold the locks until ec_ports_release or exit.
 * Two agents on one host therefore never publish the same port, while the
 * training processes remain free to bind them. */
int ec_ports_reserve(const char *addr, int lo, int hi, int n, uint16_t *ports, int *fds,
                     ec_error_t *err);
void ec_ports_release(int *fds, int n);

#endif
