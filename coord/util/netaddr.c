#define _GNU_SOURCE
#include "netaddr.h"
#include "clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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
 * agent dies.  The port must also be free to bind right now.
 *
 * A lock file lives only while it is held: whoever unlinks one holds its
 * lock (the agent releasing its port, or an agent reclaiming a file whose
 * holder died), and whoever locks one checks afterwards that the path
 * still names the file it locked (it may have locked a file just unlinked
 * under it: then it tries again).  So two agents never both hold a port,
 * and the directory holds only the live agents' ports. */
static const char *ports_dir = "/tmp/ecoord-ports";

void ec__ports_dir(const char *dir)
{
    ports_dir = dir ? dir : "/tmp/ecoord-ports";
}

static void lock_path(char *path, size_t len, const char *addr, int port)
{
    snprintf(path, len, "%s/%s:%d", ports_dir, addr, port);
}

/* Whether the locked fd is still the file at path. */
static bool still_there(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* The lock's descriptor; -1 when another agent holds the port; -2 (errno
 * set) when this process is out of descriptors. */
static int lock_port(const char *addr, int port)
{
    if (mkdir(ports_dir, 01777) == 0)
        chmod(ports_dir, 01777);
    char path[512];
    lock_path(path, sizeof(path), addr, port);
    for (int tries = 0; tries < 4; tries++) {
        int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0)
            return errno == EMFILE || errno == ENFILE ? -2 : -1;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            close(fd);
            return -1;
        }
        if (still_there(fd, path))
            return fd;
        close(fd); /* unlinked by its releaser between our open and our lock */
    }
    return -1;
}

/* Remove our lock file of addr:port, then drop the lock. */
static void unlock_port(const char *addr, int port, int fd)
{
    char path[512];
    lock_path(path, sizeof(path), addr, port);
    if (still_there(fd, path))
        unlink(path);
    close(fd);
}

/* Remove the lock files nobody holds (their agents died: the kernel dropped
 * the locks, the files stayed).  Bounded: at most 65,536 entries and half a
 * second per call; what is left waits for the next agent's start. */
static void reclaim_stale(void)
{
    DIR *d = opendir(ports_dir);
    if (!d)
        return;
    int64_t until = ec_mono_ms() + 500;
    struct dirent *e;
    for (int k = 0; k < 65536 && (e = readdir(d)); k++) {
        if (e->d_name[0] == '.' || !strchr(e->d_name, ':'))
            continue;
        if ((k & 255) == 255 && ec_mono_ms() > until)
            break;
        char path[768];
        snprintf(path, sizeof(path), "%s/%s", ports_dir, e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && still_there(fd, path))
            unlink(path);
        close(fd);
    }
    closedir(d);
}

/* "a-b" or "a" appended to buf, from used on; returns the new used. */
static size_t put_span(char *buf, size_t len, size_t used, const char *sep, int a, int b)
{
    if (used >= len)
        return used;
    int w = a == b ? snprintf(buf + used, len - used, "%s%d", sep, a)
                   : snprintf(buf + used, len - used, "%s%d-%d", sep, a, b);
    return used + (w > 0 ? (size_t)w : 0);
}

/* ports (n, ascending) as spans: "36000-36003", "6070,6072-6073". */
static void put_ports(char *buf, size_t len, const uint16_t *ports, int n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && ports[j + 1] == ports[j] + 1)
            j++;
        used = put_span(buf, len, used, i ? "," : "", ports[i], ports[j]);
        i = j + 1;
    }
}

/* Whether port is in the kernel's ip_local_reserved_ports list ("a-b,c"). */
static bool in_list(const char *list, int port)
{
    for (const char *p = list; p && *p;) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p)
            break;
        if (*end == '-')
            b = strtol(end + 1, &end, 10);
        if (port >= a && port <= b)
            return true;
        p = strchr(end, ',');
        p = p ? p + 1 : NULL;
    }
    return false;
}

void ec_ports_ephemeral_note(const uint16_t *ports, int n, int eph_lo, int eph_hi,
                             const char *reserved, char *note, size_t len)
{
    uint16_t in[64];
    int k = 0;
    for (int i = 0; i < n && k < 64; i++)
        if (ports[i] >= eph_lo && ports[i] <= eph_hi && !in_list(reserved, ports[i]))
            in[k++] = ports[i];
    if (len)
        note[0] = '\0';
    if (!k || !len)
        return;
    char list[256];
    put_ports(list, sizeof(list), in, k);
    snprintf(note, len,
             "port%s %s of this node lie%s in the kernel's ephemeral range %d-%d "
             "(/proc/sys/net/ipv4/ip_local_port_range), where any outgoing connection may take "
             "one before a training process binds it; choose --start_port below %d or a "
             "--port_range outside it, or keep them out of that range with sysctl "
             "net.ipv4.ip_local_reserved_ports=%s",
             k > 1 ? "s" : "", list, k > 1 ? "" : "s", eph_lo, eph_hi, eph_lo, list);
}

int ec_ports_ephemeral_range(int *lo, int *hi, char *reserved, size_t rlen)
{
    if (rlen)
        reserved[0] = '\0';
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (!f)
        return -1;
    int ok = fscanf(f, "%d %d", lo, hi) == 2;
    fclose(f);
    if (!ok)
        return -1;
    if ((f = fopen("/proc/sys/net/ipv4/ip_local_reserved_ports", "r"))) {
        if (rlen && !fgets(reserved, (int)rlen, f))
            reserved[0] = '\0';
        reserved[strcspn(reserved, "\n")] = '\0';
        fclose(f);
    }
    return 0;
}

int ec_ports_reserve(const char *addr, int lo, int hi, int n, uint16_t *ports, int *fds,
                     ec_ports_note_t *note, ec_error_t *err)
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
    /* The ports skipped on the way, for the note: a busy start port used to
     * be moved silently. */
    uint16_t busy[64], held[64];
    int nbusy = 0, nheld = 0;
    int got = 0;
    reclaim_stale();
    for (int port = lo; port <= hi && got < n; port++) {
        int lfd = lock_port(addr, port);
        int fd = lfd >= 0 ? socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
        if (lfd == -2 || (lfd >= 0 && fd < 0)) {
            int e = errno;
            if (lfd >= 0)
                unlock_port(addr, port, lfd);
            ec_ports_unlock(addr, ports, fds, got);
            return ec_errorf(err, EC_ESYS, "cannot reserve this node's ports: %s%s", strerror(e),
                             e == EMFILE || e == ENFILE
                                 ? "; raise the limit on open files (ulimit -n, or LimitNOFILE= "
                                   "in a systemd unit)"
                                 : "");
        }
        if (lfd < 0) {
            if (nheld < 64)
                held[nheld++] = (uint16_t)port; /* another agent on this host has it */
            continue;
        }
        if (ss.ss_family == AF_INET)
            s4->sin_port = htons((uint16_t)port);
        else
            s6->sin6_port = htons((uint16_t)port);
        int free_now = bind(fd, (struct sockaddr *)&ss, sl) == 0;
        if (!free_now && errno == EADDRNOTAVAIL) {
            /* every port would fail the same way: say why once */
            close(fd);
            unlock_port(addr, port, lfd);
            ec_ports_unlock(addr, ports, fds, got);
            return ec_errorf(err, EC_EINVAL,
                             "--host %s is not an address of this machine (no interface has it); "
                             "pass --host=ADDR of one of this machine's interfaces (ip -brief "
                             "addr lists them), or leave --host out to use the one that routes "
                             "to etcd",
                             addr);
        }
        close(fd);
        if (free_now) {
            ports[got] = (uint16_t)port;
            fds[got++] = lfd;
        } else {
            unlock_port(addr, port, lfd);
            if (nbusy < 64)
                busy[nbusy++] = (uint16_t)port;
        }
    }
    if (got < n) {
        ec_ports_unlock(addr, ports, fds, got);
        return ec_errorf(err, EC_EIO,
                         "only %d of the %d ports this node needs are free on %s in %d-%d; "
                         "widen --port_range or choose another --start_port",
                         got, n, addr, lo, hi);
    }
    if (!note)
        return 0;
    memset(note, 0, sizeof(*note));
    if (nbusy || nheld) {
        char b[128], h[128], taken[128];
        put_ports(b, sizeof(b), busy, nbusy);
        put_ports(h, sizeof(h), held, nheld);
        put_ports(taken, sizeof(taken), ports, n);
        snprintf(note->moved, sizeof(note->moved),
                 "%s%s%s%s%s%s%s: this node uses port%s %s instead (--start_port or --port_range "
                 "choose others)",
                 nbusy ? (nbusy > 1 ? "ports " : "port ") : "", nbusy ? b : "",
                 nbusy ? (nbusy > 1 ? " are in use" : " is in use") : "",
                 nbusy && nheld ? "; " : "",
                 nheld ? (nheld > 1 ? "ports " : "port ") : "", nheld ? h : "",
                 nheld ? (nheld > 1 ? " are held by other ecoord agents on this host"
                                    : " is held by another ecoord agent on this host")
                       : "",
                 n > 1 ? "s" : "", taken);
    }
    int elo, ehi;
    char reserved[512];
    if (ec_ports_ephemeral_range(&elo, &ehi, reserved, sizeof(reserved)) == 0)
        ec_ports_ephemeral_note(ports, n, elo, ehi, reserved, note->ephemeral,
                                sizeof(note->ephemeral));
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


void ec_ports_unlock(const char *addr, const uint16_t *ports, int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            unlock_port(addr, ports[i], fds[i]);
            fds[i] = -1;
        }
}
