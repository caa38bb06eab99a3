"""Releasing a collective blocked on a silent peer: shutdown(2) on the
sockets a process group created.

torch 1.13's Gloo process group has no abort, and its collectives wait up to
the group timeout for a peer that is alive but silent (stopped, partitioned).
Shutting down the group's TCP sockets from another thread wakes its event
loop, and every pending operation fails within milliseconds
(docs/collectives.md: 0.7-6.6 ms in 17 of 17 runs).  The sockets are not
exposed, so they are found by diffing the process's socket descriptors
around the group's creation, and each is *pinned*: a duplicate descriptor is
kept, so a number torch closes and the kernel reuses is never touched, and
the shutdown acts on the socket itself.  Listening sockets are left alone
(Gloo's device loop and torch's store server treat an error there as
fatal), and so are the connections to etcd (the worker library's), which a
gRPC reconnect may open at any moment.
"""
import ctypes
import errno
import os
import socket

__all__ = ["socket_inodes", "Pinned", "pin_new_sockets"]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shutdown.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.shutdown.restype = ctypes.c_int
_libc.recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.recv.restype = ctypes.c_ssize_t
_MSG_PEEK, _MSG_DONTWAIT = 0x2, 0x40


def socket_inodes():
    """{inode: fd} of this process's sockets now."""
    out = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError as e:
        raise OSError("cannot list /proc/self/fd (%s): releasing a blocked collective needs it; "
                      "mount /proc in the container" % e) from e
    for n in names:
        try:
            link = os.readlink("/proc/self/fd/" + n)
        except OSError:
            continue  # closed meanwhile, or the listing's own descriptor
        if link.startswith("socket:["):
            out[int(link[8:-1])] = int(n)
    return out


def _inode_of(fd):
    try:
        link = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        return None
    return int(link[8:-1]) if link.startswith("socket:[") else None


def _addr_key(addr):
    return (addr[0], addr[1]) if isinstance(addr, tuple) else None


class Pinned:
    """Duplicates of a set of sockets; shutdown() releases whatever is
    blocked on them, close() drops the duplicates (never the originals)."""

    def __init__(self, socks=()):
        self.socks = list(socks)  # [(dup_fd, description)]
        self.shut = False

    def add(self, fd, what):
        self.socks.append((fd, what))

    def shutdown(self, how=socket.SHUT_RDWR):
        """Shut every pinned socket down; returns how many.  No allocation,
        no lock: safe to call from a watcher thread while the owner blocks."""
        self.shut = True
        n = 0
        for fd, _ in self.socks:
            if _libc.shutdown(fd, how) == 0:
                n += 1
        return n

    def broken(self):
        """A description of the first pinned socket whose peer is gone (end
        of stream or an error such as a reset, seen by a peek that neither
        blocks nor consumes anything), or None when all look alive."""
        buf = ctypes.create_string_buffer(1)
        for fd, what in self.socks:
            n = _libc.recv(fd, buf, 1, _MSG_PEEK | _MSG_DONTWAIT)
            if n == 0:
                return what + " closed by the peer"
            if n < 0:
                e = ctypes.get_errno()
                if e not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
                    return "%s: %s" % (what, os.strerror(e))
        return None

    def close(self):
        socks, self.socks = self.socks, []
        for fd, _ in socks:
            try:
                os.close(fd)
            except OSError:
                pass

    def __len__(self):
        return len(self.socks)

    def describe(self):
        return ", ".join(w for _, w in self.socks)


def pin_new_sockets(before, exclude_peers=(), exclude_local_ports=(), listening=False,
                    pinned=None):
    """Pin the connected TCP sockets that exist now and whose inode is not in
    `before` (from socket_inodes()), except those whose peer (host, port) is
    in exclude_peers or whose local port is in exclude_local_ports (a store
    server's own connections).  listening: pin listening sockets too (only
    while a group is being connected, when a wait for a peer's connection
    can block on one).  Sockets already pinned (same inode) are skipped.
    Returns the Pinned set (pinned, if given, extended)."""
    pinned = pinned if pinned is not None else Pinned()
    have = {_inode_of(fd) for fd, _ in pinned.socks}
    excl = {_addr_key(a) for a in exclude_peers}
    for ino, fd in socket_inodes().items():
        if ino in before or ino in have:
            continue
        try:
            d = os.dup(fd)
        except OSError:
            continue
        if _inode_of(d) != ino:  # the number was reused meanwhile
            os.close(d)
            continue
        keep = False
        try:
            s = socket.socket(fileno=os.dup(d))
            try:
                if s.family in (socket.AF_INET, socket.AF_INET6) and s.type == socket.SOCK_STREAM:
                    me = s.getsockname()
                    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                        keep = listening and me[1] not in exclude_local_ports
                        what = "listening %s:%d" % (me[0], me[1])
                    else:
                        peer = s.getpeername()
                        keep = _addr_key(peer) not in excl and me[1] not in exclude_local_ports
                        what = "%s:%d->%s:%d" % (me[0], me[1], peer[0], peer[1])
            finally:
                s.close()
        except OSError:
            keep = False  # not connected (yet), or not a socket we understand
        if keep:
            pinned.add(d, what)
            have.add(ino)
        else:
            os.close(d)
    return pinned
