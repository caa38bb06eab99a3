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

/* What a node should be told about the ports it reserved. */
typedef struct ec_ports_note {
    /* "" or one line: the ports skipped because they were busy or held by
     * another agent on this host, and those taken instead (a busy start port
     * used to be moved silently). */
    char moved[400];
    /* "" or a warning: ports taken in the kernel's ephemeral range
     * (ec_ports_ephemeral_note). */
    char ephemeral[600];
} ec_ports_note_t;

/* Reserve n TCP ports on addr within [lo, hi] that are free now and not
 * reserved by another agent on this host (an flock on a file per port under
 * /tmp/ecoord-ports); fds[] hold the locks until ec_ports_unlock or exit.
 * Lock files nobody holds (their agent died) are removed on the way.
 * Two agents on one host therefore never publish the same port, while the
 * training processes remain free to bind them.  note (may be NULL) gets what
 * to tell the user: ports skipped, ports in the ephemeral range. */
int ec_ports_reserve(const char *addr, int lo, int hi, int n, uint16_t *ports, int *fds,
                     ec_ports_note_t *note, ec_error_t *err);
/* Close fds[0..n) (any descriptors; set to -1). */
void ec_ports_release(int *fds, int n);
/* Give back ports ec_ports_reserve took on addr: their lock files are
 * removed, then the locks dropped (fds[] set to -1). */
void ec_ports_unlock(const char *addr, const uint16_t *ports, int *fds, int n);

/* Tests: the directory of the lock files (NULL: the default,
 * /tmp/ecoord-ports). */
void ec__ports_dir(const char *dir);

/* The kernel's ephemeral port range (/proc/sys/net/ipv4/ip_local_port_range:
 * an outgoing connection's local port comes from it) and its reserved list
 * (ip_local_reserved_ports, "a-b,c", into reserved; "" for none).  0, or -1
 * when the range cannot be read. */
int ec_ports_ephemeral_range(int *lo, int *hi, char *reserved, size_t rlen);
/* Pure: a warning into note when some of ports[0..n) lie in the ephemeral
 * range [eph_lo, eph_hi] and not in reserved (as above): which, why it
 * matters, and the fixes (--start_port below it, --port_range, or
 * ip_local_reserved_ports); "" when none do. */
void ec_ports_ephemeral_note(const uint16_t *ports, int n, int eph_lo, int eph_hi,
                             const char *reserved, char *note, size_t len);

#endif
