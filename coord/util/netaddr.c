#define _GNU_SOURCE
#include "netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void ec_addr_ifname(const char *addr, char *ifname, size_t len)
{
    ifname[0] = '\0';
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) < 0)
        return;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr)
            continue;
        char buf[INET6_ADDRSTRLEN] = "";
        if (i->ifa_addr->sa_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf, sizeof(buf));
        else if (i->ifa_addr->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, buf, sizeof(buf));
        if (!strcmp(buf, addr)) {
            snprintf(ifname, len, "%s", i->ifa_name);
            break;
        }
    }
    /* 127.0.0.0/8 all belongs to lo even when only 127.0.0.1 is listed. */
    if (!ifname[0] && !strncmp(addr, "127.", 4))
        snprintf(ifname, len, "lo");
    freeifaddrs(ifa);
}

int ec_route_addr(const char *host, int port, char *addr, size_t alen, char *ifname, size_t iflen,
                  ec_error_t *err)
{
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    int g = getaddrinfo(host, ps, &hints, &res);
    if (g != 0 || !res)
        return ec_errorf(err, EC_EINVAL, "cannot resolve etcd host '%s' to find our address: %s; "
                                         "give --host", host, gai_strerror(g));
    int fd = socket(res->ai_family, SOCK_DGRAM, 0);
    int rc = 0;
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
        rc = ec_errorf(err, EC_ESYS, "no route to etcd host '%s' (%s); give --host", host,
                       strerror(errno));
    } else {
        struct sockaddr_storage ss;
        socklen_t l = sizeof(ss);
        getsockname(fd, (struct sockaddr *)&ss, &l);
        if (ss.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, addr, (socklen_t)alen);
        else
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, addr, (socklen_t)alen);
        if (ifname)
            ec_addr_ifname(addr, ifname, iflen);
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return rc;
}

/* A port is ours while we hold an flock on <dir>/<addr>:<port>: agents on one
 * host skip each other's ports, the training processes can still bind them
 * (a bound socket would stop them), and the kernel drops the lock when the
 * agent dies.  The port must also be free to bind right now. */
static int lock_port(const char *addr, int port)
{
    const char *dir = "/tmp/ecoord-ports";
    if (mkdir(dir, 01777) == 0)
        chmod(dir, 01777);
    char path[512];
    snprintf(path, sizeof(path), "%s/%s:%d", dir, addr, port);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int ec_ports_reserve(const char *addr, int lo, int hi, int n, uint16_t *ports, int *fds,
                     ec_error_t *err)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t sl;
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        sl = sizeof(*s4);
    } else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        sl = sizeof(*s6);
    } else {
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_ANY);
        sl = sizeof(*s4);
    }
    int got = 0;
    for (int port = lo; port <= hi && got < n; port++) {
        int lfd = lock_port(addr, port);
        if (lfd < 0)
            continue; /* another agent on this host has it */
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            close(lfd);
            break;
        }
        if (ss.ss_family == AF_INET)
            s4->sin_port = htons((uint16_t)port);
        else
            s6->sin6_port = htons((uint16_t)port);
        int free_now = bind(fd, (struct sockaddr *)&ss, sl) == 0;
        close(fd);
        if (free_now) {
            ports[got] = (uint16_t)port;
            fds[got++] = lfd;
        } else {
            close(lfd);
        }
    }
    if (got < n) {
        ec_ports_release(fds, got);
        return ec_errorf(err, EC_EIO,
                         "only %d of the %d ports this node needs are free on %s in %d-%d; "
                         "widen --port_range or choose another --start_port",
                         got, n, addr, lo, hi);
    }
    return 0;
}

void ec_ports_release(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}
