/* Gloo backend: the only C++ in the worker library.  See gloo_shim.h.
 *
 * Three things here are not plain Gloo calls; each is explained where it is:
 *
 * 1. The connect.  Instead of rendezvous::Context::connectFullMesh we run the
 *    same procedure on Gloo's public transport API (create every pair, publish
 *    their addresses, read the peers', connect pair by pair), the way Gloo's
 *    own ContextFactory builds contexts.  Owning the loop lets every wait check
 *    our deadline and the abort flag, and tells us exactly which listening
 *    sockets exist while it runs, so an abort can release a connect blocked on
 *    a peer that published its address and then went silent.
 *
 * 2. The abort.  Gloo has no abort, and Pair::close() from another thread does
 *    not wake blocked operations.  shutdown(2) on the context's sockets does:
 *    the device loop sees the hang-up and every pending operation throws.
 *    Gloo does not expose its sockets, so right after connecting we find them
 *    among the process's descriptors by addresses only they can have, and
 *    keep a duplicate of each (see pin_sockets()).  Abort then only calls
 *    shutdown() on those duplicates: no scan, no allocation, nothing that can
 *    fail or touch another socket, and no call into Gloo (so no Gloo lock).
 *    During the connect, abort shuts down the pairs' listening sockets
 *    instead (see shutdown_listeners()).
 *
 * 3. SIGPIPE.  Gloo writes with writev(2), which raises SIGPIPE when the peer
 *    is gone or the socket was shut down.  Every entry point blocks SIGPIPE
 *    for its duration and discards what it raised (SigpipeGuard); Gloo's
 *    event-loop thread is created inside that window and inherits the mask.
 *
 * 4. A send Gloo never releases.  When a non-blocking write of an unbound
 *    buffer fails (EPIPE, ECONNRESET, EAGAIN), Gloo queues the operation on
 *    the pair (tx_); when the pair then fails, Pair::signalException wakes
 *    the buffers of every queued operation except unbound ones (it looks at
 *    op.buf only, not op.ubuf), so the collective's waitSend sleeps until its
 *    timeout (seen: an allreduce still blocked 20 s after the abort).  Two
 *    things keep an abort prompt all the same: the abort shuts down only the
 *    read side of the sockets, so our own abort never makes a write fail
 *    (the pairs still see end-of-file and fail, waking every receive), and a
 *    "kicker" thread, started by the first abort, calls abortWaitSend() and
 *    abortWaitRecv() every millisecond on the buffers of the collective in
 *    flight until it returns (Gloo ignores the result of those waits; the
 *    collective then fails on its next post, or returns and is reported as
 *    aborted).  The write side is shut down once the collective has failed,
 *    or at destroy, so peers still learn of the abort.
 */
#include "gloo_shim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <new>
#include <string>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/pair.h>

namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;
namespace tcp = gloo::transport::tcp;

/* ---- errors -------------------------------------------------------------- */

/* Thrown by the shim's own code; caught at the C boundary like Gloo's. */
struct ShimError {
    int code;
    std::string msg;
};

[[noreturn]] __attribute__((format(printf, 2, 3))) void fail(int code, const char *fmt, ...)
{
    char buf[EC_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    throw ShimError{code, buf};
}

/* Gloo's messages start with "[/path/to/file.cc:123] "; drop that. */
const char *gloo_text(const char *what)
{
    if (what[0] == '[') {
        const char *end = strstr(what, "] ");
        if (end)
            return end + 2;
    }
    return what;
}

/* ---- SIGPIPE ------------------------------------------------------------- */

class SigpipeGuard {
  public:
    SigpipeGuard()
    {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        sigset_t pending;
        sigemptyset(&pending);
        sigpending(&pending);
        was_pending_ = sigismember(&pending, SIGPIPE) == 1;
        ok_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
    }
    ~SigpipeGuard()
    {
        if (!ok_)
            return;
        int saved = errno;
        if (!was_pending_) { /* discard only what this call raised */
            struct timespec zero = {0, 0};
            while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
            }
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
        errno = saved;
    }
    SigpipeGuard(const SigpipeGuard &) = delete;
    SigpipeGuard &operator=(const SigpipeGuard &) = delete;

  private:
    sigset_t pipe_, old_;
    bool was_pending_ = false, ok_ = false;
};

/* ---- socket addresses ------------------------------------------------------ */

bool same_addr(const sockaddr_storage &a, const sockaddr_storage &b)
{
    if (a.ss_family != b.ss_family)
        return false;
    if (a.ss_family == AF_INET) {
        auto &x = reinterpret_cast<const sockaddr_in &>(a);
        auto &y = reinterpret_cast<const sockaddr_in &>(b);
        return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
    }
    if (a.ss_family == AF_INET6) {
        auto &x = reinterpret_cast<const sockaddr_in6 &>(a);
        auto &y = reinterpret_cast<const sockaddr_in6 &>(b);
        return x.sin6_port == y.sin6_port &&
               memcmp(&x.sin6_addr, &y.sin6_addr, sizeof(x.sin6_addr)) == 0;
    }
    return false;
}

struct SockInfo {
    bool listening = false;
    bool has_self = false, has_peer = false;
    sockaddr_storage self{}, peer{};
};

/* Describe fd if it is a TCP socket; false for anything else.  Only
 * getsockopt/getsockname/getpeername: harmless on any descriptor. */
bool tcp_info(int fd, SockInfo *si)
{
    int v = 0;
    socklen_t l = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) != 0 || v != SOCK_STREAM)
        return false;
    l = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) != 0 || (v != AF_INET && v != AF_INET6))
        return false;
    l = sizeof(v);
    si->listening = getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) == 0 && v;
    l = sizeof(si->self);
    si->has_self = getsockname(fd, reinterpret_cast<sockaddr *>(&si->self), &l) == 0;
    l = sizeof(si->peer);
    si->has_peer = getpeername(fd, reinterpret_cast<sockaddr *>(&si->peer), &l) == 0;
    return true;
}

/* Call fn(fd, info) for every TCP socket of this process.  Returns false if
 * /proc/self/fd cannot be read. */
template <typename F>
bool for_each_tcp_socket(F fn)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return false;
    int self = dirfd(d);
    while (struct dirent *e = readdir(d)) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd == self)
            continue;
        SockInfo si;
        if (tcp_info((int)fd, &si))
            fn((int)fd, si);
    }
    closedir(d);
    return true;
}

/* A duplicate of fd, made only after checking on the duplicate itself that it
 * is the socket we matched: if fd was closed and its number reused between
 * the scan and the dup, the check fails and the duplicate is dropped.  A
 * duplicate refers to the open socket, not to the number, so later closes and
 * reuses of the number cannot redirect it. */
template <typename Match>
int dup_if(int fd, Match match)
{
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0)
        return -1;
    SockInfo si;
    if (tcp_info(d, &si) && match(si))
        return d;
    close(d);
    return -1;
}

/* Whether fd is the same open socket as one of fds (sockets are inodes of
 * their own: two descriptors of one socket share st_dev and st_ino). */
bool same_socket_as_any(int fd, const std::vector<int> &fds)
{
    struct stat a;
    if (fstat(fd, &a) != 0)
        return false;
    for (int o : fds) {
        struct stat b;
        if (fstat(o, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return true;
    }
    return false;
}

std::string addr_str(const sockaddr_storage &ss)
{
    try {
        return tcp::Address(ss).str();
    } catch (...) {
        return "?";
    }
}

/* A pair's address as a sockaddr.  Through bytes() and the public
 * tcp::Address constructor, because Debian's Gloo headers cannot compile
 * tcp/pair.h (it includes gloo/common/memory.h, which is not shipped). */
sockaddr_storage sockaddr_of(const gloo::transport::Address &a)
{
    return tcp::Address(a.bytes()).getSockaddr();
}

/* A pair's address as bytes for the rendezvous record, and as a sockaddr.
 * Gloo's bytes() copies a sockaddr_storage whose tail past the address was
 * never written; rebuilding it from a zeroed one keeps uninitialised memory
 * out of the store. */
std::vector<char> wire_address(const gloo::transport::Address &a, sockaddr_storage *ss)
{
    tcp::Address parsed(a.bytes());
    const sockaddr_storage &src = parsed.getSockaddr();
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, &src, src.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    return tcp::Address(*ss, parsed.getSeq()).bytes();
}

/* gloo::Context keeps device and transport context protected; the subclass
 * adopts the ones our connect built (as connectFullMesh would assign them). */
class ShimContext : public gloo::Context {
  public:
    ShimContext(int r, int n) : gloo::Context(r, n) {}
    void adopt(std::shared_ptr<gloo::transport::Device> dev,
               std::shared_ptr<gloo::transport::Context> tctx)
    {
        device_ = std::move(dev);
        transportContext_ = std::move(tctx);
    }
};

/* Rendezvous record under "<prefix>/<rank>": a header, then nranks address
 * slots of addrlen bytes (tcp::Address::bytes() of the pair that listens for
 * that peer; the rank's own slot is zero).  Host byte order, like the
 * addresses themselves: Gloo assumes homogeneous hosts already. */
struct WireHeader {
    char magic[4]; /* "EGL1" */
    uint32_t rank, nranks, addrlen;
};
const char kMagic[4] = {'E', 'G', 'L', '1'};

enum Phase { NEW, CONNECTING, READY, BROKEN };

} // namespace

struct ecw_gloo {
    int rank = 0, nranks = 0, timeout_ms = 0;
    std::string hostname, iface, prefix;
    ecw_gloo_store_t store{};

    std::shared_ptr<gloo::transport::Device> dev;
    std::shared_ptr<ShimContext> ctx;

    /* Shared with ecw_gloo_abort(); everything below is guarded by mu. */
    std::mutex mu;
    std::atomic<bool> aborted{false};
    Phase phase = NEW;
    /* While connecting: the listening address of each pair not yet connected
     * (ss_family 0 once connected or for our own rank). */
    std::vector<sockaddr_storage> listening;
    /* Once connected: our duplicates of the context's sockets, one per peer. */
    std::vector<int> pinned;
    int first_error = 0;
    /* The buffers of the collective in flight, and the thread that keeps
     * waking their waits once the communicator is aborted (point 4). */
    std::vector<gloo::transport::UnboundBuffer *> inflight;
    std::thread kicker;
    std::condition_variable kick_cv;
    bool kicker_started = false, kicker_stop = false;
};

namespace {

/* ---- abort ------------------------------------------------------------------ */

/* Caller holds g->mu. */
void shutdown_pinned(ecw_gloo *g, int how = SHUT_RDWR)
{
    for (int fd : g->pinned)
        shutdown(fd, how);
}

/* The kicker thread (point 4): while the communicator lives, wake the waits
 * of whatever collective is in flight, every millisecond. */
void kick_loop(ecw_gloo *g)
{
    std::unique_lock<std::mutex> lk(g->mu);
    while (!g->kicker_stop) {
        if (g->inflight.empty()) {
            g->kick_cv.wait(lk);
            continue;
        }
        for (auto *b : g->inflight) {
            b->abortWaitSend();
            b->abortWaitRecv();
        }
        g->kick_cv.wait_for(lk, Ms(1));
    }
}

/* Register the buffers of a collective for the kicker for its duration.
 * Declare it after the options that own the buffers, so that it goes
 * first. */
class InFlight {
  public:
    InFlight(ecw_gloo *g, std::initializer_list<gloo::transport::UnboundBuffer *> bufs)
        : g_(g)
    {
        std::lock_guard<std::mutex> lk(g_->mu);
        for (auto *b : bufs)
            if (b)
                g_->inflight.push_back(b);
        g_->kick_cv.notify_all();
    }
    ~InFlight()
    {
        std::lock_guard<std::mutex> lk(g_->mu);
        g_->inflight.clear();
    }
    InFlight(const InFlight &) = delete;
    InFlight &operator=(const InFlight &) = delete;

  private:
    ecw_gloo *g_;
};

/* Gloo's option classes keep their buffers protected; these expose them to
 * InFlight. */
struct AllreduceOpts : gloo::AllreduceOptions {
    using gloo::AllreduceOptions::AllreduceOptions;
    gloo::transport::UnboundBuffer *out0() { return impl_.out.empty() ? nullptr : impl_.out[0].get(); }
};
struct BroadcastOpts : gloo::BroadcastOptions {
    using gloo::BroadcastOptions::BroadcastOptions;
    gloo::transport::UnboundBuffer *inb() { return in.get(); }
    gloo::transport::UnboundBuffer *outb() { return out.get(); }
};
struct AllgatherOpts : gloo::AllgatherOptions {
    using gloo::AllgatherOptions::AllgatherOptions;
    gloo::transport::UnboundBuffer *inb() { return in.get(); }
    gloo::transport::UnboundBuffer *outb() { return out.get(); }
};
struct BarrierOpts : gloo::BarrierOptions {
    using gloo::BarrierOptions::BarrierOptions;
    gloo::transport::UnboundBuffer *buf() { return buffer.get(); }
};

/* Abort during the connect: the waits that can block are a pair waiting for
 * its peer to connect to its listening socket, and the store.  Shutting down a
 * listening socket makes Gloo's accept fail and the waiting connect throw.  A
 * listening socket is identified by its exact local address, which no other
 * listening socket of the host can share (Gloo binds without SO_REUSEPORT).
 * Caller holds g->mu. */
void shutdown_listeners(ecw_gloo *g)
{
    for_each_tcp_socket([g](int fd, const SockInfo &si) {
        if (!si.listening || !si.has_self)
            return;
        auto ours = [g](const SockInfo &s) {
            if (!s.listening || !s.has_self)
                return false;
            for (auto &l : g->listening)
                if (l.ss_family && same_addr(l, s.self))
                    return true;
            return false;
        };
        if (!ours(si))
            return;
        int d = dup_if(fd, ours);
        if (d >= 0) {
            shutdown(d, SHUT_RDWR);
            close(d);
        }
    });
}

void check_abort(ecw_gloo *g, const char *when)
{
    if (g->aborted.load())
        fail(EC_EABORTED, "gloo connect of rank %d of %d aborted %s by ecw_gloo_abort(): "
             "destroy this communicator and build one for the next epoch",
             g->rank, g->nranks, when);
}

/* Find this context's sockets and keep a duplicate of each.
 *
 * For pair i we know three addresses: L, where its socket listened during the
 * connect; P, where the peer's pair listened (from the peer's record); and S,
 * the local address of the connected socket (Gloo resets a pair's address()
 * from getsockname() once connected).  Exactly one side of each connection
 * called connect(2):
 *   - if we did, our socket is the 4-tuple (S, P): a 4-tuple names a single
 *     TCP connection in the host, so no other socket can match it;
 *   - if we accepted, our socket's local address is L itself (S == L), a port
 *     our listener bound explicitly, which connect(2)'s automatic port choice
 *     never shares; Gloo accepts one connection per listener.
 * So pair i's socket is the non-listening TCP socket with local address S and
 * either remote address P or S == L.  The gRPC channel to etcd on loopback, a
 * previous epoch's sockets and the application's cannot match even on the
 * same addresses.  Each pair must match exactly one socket and each socket at
 * most one pair; otherwise the communicator is refused, because one that
 * could not be aborted safely would bring back the hang this shim prevents. */
void pin_sockets(ecw_gloo *g, gloo::transport::Context &tctx,
                 const std::vector<sockaddr_storage> &listen,
                 const std::vector<sockaddr_storage> &peer_listen, std::vector<int> &out)
{
    struct Want {
        sockaddr_storage self{}, listen{}, peer{};
        std::vector<int> found;
    };
    std::vector<Want> want(g->nranks);
    for (int i = 0; i < g->nranks; i++) {
        if (i == g->rank)
            continue;
        want[i].self = sockaddr_of(tctx.getPair(i)->address());
        want[i].listen = listen[i];
        want[i].peer = peer_listen[i];
    }
    /* The pair si belongs to, -1 for none, -2 for several. */
    auto which = [&](const SockInfo &si) {
        if (si.listening || !si.has_self || !si.has_peer)
            return -1;
        int hit = -1;
        for (int i = 0; i < g->nranks; i++) {
            if (i == g->rank || !same_addr(want[i].self, si.self))
                continue;
            if (!same_addr(want[i].peer, si.peer) && !same_addr(want[i].self, want[i].listen))
                continue;
            if (hit != -1)
                return -2;
            hit = i;
        }
        return hit;
    };
    bool ambiguous = false;
    bool ok = for_each_tcp_socket([&](int fd, const SockInfo &si) {
        int i = which(si);
        if (i == -2)
            ambiguous = true;
        if (i < 0)
            return;
        int d = dup_if(fd, [&](const SockInfo &s) { return which(s) == i; });
        /* The same socket under two numbers is one socket: our own duplicate
         * made earlier in this scan (the listing may show descriptors created
         * while it runs), or another communicator's in this process. */
        if (d >= 0 && same_socket_as_any(d, want[i].found))
            close(d);
        else if (d >= 0)
            want[i].found.push_back(d);
    });
    int saved = errno;
    auto drop_all = [&]() {
        for (auto &w : want)
            for (int fd : w.found)
                close(fd);
    };
    if (!ok) {
        drop_all();
        fail(EC_ESYS, "cannot list /proc/self/fd (%s): the Gloo communicator needs it "
             "to find its sockets for abort; mount /proc in the worker's container",
             strerror(saved));
    }
    for (int i = 0; i < g->nranks; i++) {
        if (i == g->rank || (want[i].found.size() == 1 && !ambiguous))
            continue;
        size_t n = want[i].found.size();
        drop_all();
        fail(EC_EINTERNAL, "found %zu sockets%s for the Gloo connection from %s to rank %d "
             "(listening at %s) instead of one: refusing a communicator that could not be "
             "aborted safely; rebuild for the next epoch, and report this if it recurs", n,
             ambiguous ? " (one matching several pairs)" : "",
             addr_str(want[i].self).c_str(), i, addr_str(want[i].peer).c_str());
    }
    for (int i = 0; i < g->nranks; i++)
        if (i != g->rank)
            out.push_back(want[i].found[0]);
}

/* ---- connect ---------------------------------------------------------------- */

std::vector<char> store_get(ecw_gloo *g, const std::string &key, int peer,
                            Clock::time_point deadline)
{
    for (;;) {
        check_abort(g, "while waiting for the rendezvous");
        long left = std::chrono::duration_cast<Ms>(deadline - Clock::now()).count();
        if (left <= 0)
            fail(EC_ETIMEDOUT, "rank %d did not publish its Gloo address under '%s' within "
                 "%d ms (it has not started, or it died): wait for the next epoch",
                 peer, key.c_str(), g->timeout_ms);
        int slice = (int)std::min<long>(left, ECW_GLOO_STORE_SLICE_MS);
        void *val = nullptr;
        size_t len = 0;
        ec_error_t serr;
        ec_error_clear(&serr);
        int rc = g->store.get(g->store.arg, key.c_str(), &val, &len, slice, &serr);
        if (rc == 0) {
            std::vector<char> out(static_cast<char *>(val), static_cast<char *>(val) + len);
            free(val);
            return out;
        }
        free(val);
        if (rc != EC_ETIMEDOUT)
            fail(rc < 0 ? rc : EC_EINTERNAL, "rendezvous store get '%s' failed: %s",
                 key.c_str(), serr.msg[0] ? serr.msg : ec_strerror(rc));
    }
}

void connect_impl(ecw_gloo *g)
{
    const auto deadline = Clock::now() + Ms(g->timeout_ms);
    check_abort(g, "before connecting");

    tcp::attr attr;
    if (!g->iface.empty())
        attr.iface = g->iface;
    else
        attr.hostname = g->hostname;
    /* dev before tctx: the pairs must go before the device they use. */
    std::shared_ptr<gloo::transport::Device> dev = tcp::CreateDevice(attr);
    std::shared_ptr<gloo::transport::Context> tctx = dev->createContext(g->rank, g->nranks);
    /* A pair waits up to 5x its timeout for its peer to connect: bound that
     * by our timeout.  Collectives get their own timeout explicitly. */
    tctx->setTimeout(Ms(std::max(1, g->timeout_ms / 5)));

    std::vector<sockaddr_storage> listening(g->nranks), peer_listening(g->nranks);
    std::vector<std::vector<char>> mine(g->nranks);
    size_t addrlen = 0;
    for (int i = 0; i < g->nranks; i++) {
        if (i == g->rank)
            continue;
        auto &pair = tctx->createPair(i);
        mine[i] = wire_address(pair->address(), &listening[i]);
        addrlen = mine[i].size();
    }
    {
        std::lock_guard<std::mutex> lk(g->mu);
        g->listening = listening;
        g->phase = CONNECTING;
    }
    check_abort(g, "before the rendezvous");

    std::vector<char> rec(sizeof(WireHeader) + addrlen * g->nranks, 0);
    WireHeader h;
    memcpy(h.magic, kMagic, sizeof(kMagic));
    h.rank = (uint32_t)g->rank;
    h.nranks = (uint32_t)g->nranks;
    h.addrlen = (uint32_t)addrlen;
    memcpy(rec.data(), &h, sizeof(h));
    for (int i = 0; i < g->nranks; i++)
        if (i != g->rank)
            memcpy(rec.data() + sizeof(h) + addrlen * i, mine[i].data(), addrlen);
    std::string key = g->prefix + "/" + std::to_string(g->rank);
    ec_error_t serr;
    ec_error_clear(&serr);
    int rc = g->store.set(g->store.arg, key.c_str(), rec.data(), rec.size(), &serr);
    if (rc != 0)
        fail(rc < 0 ? rc : EC_EINTERNAL, "rendezvous store set '%s' failed: %s", key.c_str(),
             serr.msg[0] ? serr.msg : ec_strerror(rc));

    /* Same order as Gloo's connectFullMesh: ascending peer rank.  The side
     * that connects never waits for the other to reach its connect call, so
     * this cannot deadlock. */
    for (int i = 0; i < g->nranks; i++) {
        if (i == g->rank)
            continue;
        std::string pkey = g->prefix + "/" + std::to_string(i);
        std::vector<char> prec = store_get(g, pkey, i, deadline);
        WireHeader ph;
        if (prec.size() < sizeof(ph))
            fail(EC_EPROTO, "rendezvous record '%s' is %zu bytes, too short", pkey.c_str(),
                 prec.size());
        memcpy(&ph, prec.data(), sizeof(ph));
        if (memcmp(ph.magic, kMagic, sizeof(kMagic)) != 0 || ph.rank != (uint32_t)i ||
            ph.addrlen != addrlen || prec.size() != sizeof(ph) + (size_t)ph.addrlen * ph.nranks)
            fail(EC_EPROTO, "rendezvous record '%s' is not a Gloo address record for rank %d "
                 "(another program or version wrote it?)", pkey.c_str(), i);
        if (ph.nranks != (uint32_t)g->nranks)
            fail(EC_EINVAL, "rank %d joined '%s' with %u ranks, this rank with %d: the epoch's "
                 "members disagree on its size (stale prefix reused?)", i, g->prefix.c_str(),
                 ph.nranks, g->nranks);
        const char *slot = prec.data() + sizeof(ph) + addrlen * g->rank;
        std::vector<char> peer(slot, slot + addrlen);
        peer_listening[i] = tcp::Address(peer).getSockaddr();
        check_abort(g, "while connecting");
        tctx->getPair(i)->connect(peer);
        std::lock_guard<std::mutex> lk(g->mu);
        g->listening[i].ss_family = 0; /* connected: Gloo closed that listener */
    }

    auto ctx = std::make_shared<ShimContext>(g->rank, g->nranks);
    ctx->setTimeout(Ms(g->timeout_ms));
    ctx->adopt(dev, tctx);

    std::vector<int> pinned;
    pin_sockets(g, *tctx, listening, peer_listening, pinned);
    std::lock_guard<std::mutex> lk(g->mu);
    g->pinned = std::move(pinned);
    g->listening.clear();
    if (g->aborted.load()) { /* abort() ran between the last check and here */
        shutdown_pinned(g);
        g->phase = BROKEN;
        g->dev = std::move(dev);
        g->ctx = std::move(ctx);
        fail(EC_EABORTED, "gloo connect of rank %d of %d aborted by ecw_gloo_abort(): destroy "
             "this communicator and build one for the next epoch", g->rank, g->nranks);
    }
    g->dev = std::move(dev);
    g->ctx = std::move(ctx);
    g->phase = READY;
}

/* ---- the C boundary ------------------------------------------------------------ */

/* Map a failure to an EC code and message.  gloo_msg is a Gloo exception's
 * what(); io tells whether it was an IoException (a socket-level failure). */
int map_gloo_failure(ecw_gloo *g, const char *what, const char *gloo_msg, bool io,
                     ec_error_t *err)
{
    const char *m = gloo_text(gloo_msg);
    if (g->aborted.load())
        return ec_errorf(err, EC_EABORTED, "gloo %s on rank %d of %d aborted by "
                         "ecw_gloo_abort(): destroy this communicator and build one for the "
                         "next epoch (gloo: %s)", what, g->rank, g->nranks, m);
    if (strstr(m, "Timed out") || strstr(m, "timeout"))
        return ec_errorf(err, EC_ETIMEDOUT, "gloo %s on rank %d of %d made no progress within "
                         "%d ms: a member is stalled or cut off; abort and rebuild for the "
                         "next epoch (gloo: %s)", what, g->rank, g->nranks, g->timeout_ms, m);
    if (io)
        return ec_errorf(err, EC_EIO, "gloo %s on rank %d of %d: peer closed the connection: "
                         "a member likely died; wait for the next epoch (gloo: %s)", what,
                         g->rank, g->nranks, m);
    return ec_errorf(err, EC_EINTERNAL, "gloo %s on rank %d of %d failed: %s", what, g->rank,
                     g->nranks, m);
}

/* Run f, translating every exception.  On failure the communicator is
 * marked broken and its sockets are shut down: peers with an operation
 * pending on this rank fail at once instead of at their timeout.  (It also
 * stands in for the close Gloo does on a failed pair: our duplicates would
 * otherwise keep those sockets open until destroy.) */
template <typename F>
int guarded(ecw_gloo *g, const char *what, ec_error_t *err, F f)
{
    int rc;
    try {
        f();
        /* An abort may have woken its waits (point 4): nothing it returned
         * after an abort can be trusted. */
        if (!g->aborted.load())
            return 0;
        rc = ec_errorf(err, EC_EABORTED, "gloo %s on rank %d of %d aborted by "
                       "ecw_gloo_abort(): destroy this communicator and build one for the "
                       "next epoch", what, g->rank, g->nranks);
    } catch (const ShimError &e) {
        rc = ec_errorf(err, e.code, "%s", e.msg.c_str());
    } catch (const gloo::IoException &e) {
        rc = map_gloo_failure(g, what, e.what(), true, err);
    } catch (const std::bad_alloc &) {
        rc = ec_errorf(err, EC_ENOMEM, "gloo %s on rank %d of %d: out of memory", what,
                       g->rank, g->nranks);
    } catch (const std::exception &e) {
        rc = map_gloo_failure(g, what, e.what(), false, err);
    } catch (...) {
        rc = ec_errorf(err, EC_EINTERNAL, "gloo %s on rank %d of %d: unknown exception", what,
                       g->rank, g->nranks);
    }
    std::lock_guard<std::mutex> lk(g->mu);
    shutdown_pinned(g);
    g->phase = BROKEN;
    if (!g->first_error)
        g->first_error = rc;
    return rc;
}

/* Common checks before a collective; 0 if it may run. */
int ready(ecw_gloo *g, const char *what, ec_error_t *err)
{
    if (!g)
        return ec_errorf(err, EC_EINVAL, "gloo %s: NULL communicator", what);
    if (g->aborted.load())
        return ec_errorf(err, EC_EABORTED, "gloo %s on rank %d of %d: the communicator was "
                         "aborted; destroy it and build one for the next epoch", what, g->rank,
                         g->nranks);
    std::lock_guard<std::mutex> lk(g->mu);
    if (g->phase == BROKEN)
        return ec_errorf(err, g->first_error ? g->first_error : EC_EIO,
                         "gloo %s on rank %d of %d: the communicator failed earlier (%s); "
                         "destroy it and build one for the next epoch", what, g->rank,
                         g->nranks, ec_strerror(g->first_error));
    if (g->phase != READY)
        return ec_errorf(err, EC_EINVAL, "gloo %s on rank %d of %d: not connected (call "
                         "ecw_gloo_connect first)", what, g->rank, g->nranks);
    return 0;
}

using ReduceFn = void (*)(void *, const void *, const void *, size_t);

/* An enum argument as the int a C caller passed.  C lets any int through an
 * enum parameter; C++ deems a load of a value outside the enumerators' range
 * undefined, so the value is copied out as bytes before it is looked at. */
template <typename E>
int raw(const E &e)
{
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
    int v;
    memcpy(&v, &e, sizeof(v));
    return v;
}

template <typename T>
void allreduce_t(ecw_gloo *g, void *buf, size_t count, int op)
{
    ReduceFn fn = &gloo::sum<T>;
    if (op == ECW_GLOO_MIN)
        fn = &gloo::min<T>;
    else if (op == ECW_GLOO_MAX)
        fn = &gloo::max<T>;
    T *p = static_cast<T *>(buf);
    AllreduceOpts opts(g->ctx);
    opts.setOutput<T>(p, count); /* no input: in place */
    opts.setReduceFunction(fn);
    opts.setTimeout(Ms(g->timeout_ms));
    InFlight fl(g, {opts.out0()});
    gloo::allreduce(opts);
    if (op == ECW_GLOO_AVG)
        for (size_t i = 0; i < count; i++)
            p[i] = static_cast<T>(p[i] / static_cast<T>(g->nranks));
}

template <typename T>
void broadcast_t(ecw_gloo *g, void *buf, size_t count, int root)
{
    BroadcastOpts opts(g->ctx);
    opts.setOutput<T>(static_cast<T *>(buf), count);
    opts.setRoot(root);
    opts.setTimeout(Ms(g->timeout_ms));
    InFlight fl(g, {opts.inb(), opts.outb()});
    gloo::broadcast(opts);
}

template <typename T>
void allgather_t(ecw_gloo *g, const void *sendbuf, void *recvbuf, size_t count)
{
    AllgatherOpts opts(g->ctx);
    if (sendbuf) /* Gloo only reads its input */
        opts.setInput<T>(const_cast<T *>(static_cast<const T *>(sendbuf)), count);
    opts.setOutput<T>(static_cast<T *>(recvbuf), count * (size_t)g->nranks);
    opts.setTimeout(Ms(g->timeout_ms));
    InFlight fl(g, {opts.inb(), opts.outb()});
    gloo::allgather(opts);
}

/* Call the template instance for dtype. */
#define ECW__DISPATCH(dtype, fn, ...)                         \
    do {                                                      \
        switch (dtype) {                                      \
        case ECW_GLOO_F32: fn<float>(__VA_ARGS__); break;     \
        case ECW_GLOO_F64: fn<double>(__VA_ARGS__); break;    \
        case ECW_GLOO_I32: fn<int32_t>(__VA_ARGS__); break;   \
        case ECW_GLOO_I64: fn<int64_t>(__VA_ARGS__); break;   \
        case ECW_GLOO_U8: fn<uint8_t>(__VA_ARGS__); break;    \
        }                                                     \
    } while (0)

size_t dtype_bytes(int dtype)
{
    switch (dtype) {
    case ECW_GLOO_F32: return 4;
    case ECW_GLOO_F64: return 8;
    case ECW_GLOO_I32: return 4;
    case ECW_GLOO_I64: return 8;
    case ECW_GLOO_U8: return 1;
    }
    return 0;
}

int check_count(ecw_gloo *g, const char *what, const void *buf, size_t count, int dtype,
                ec_error_t *err)
{
    size_t es = dtype_bytes(dtype);
    if (!es)
        return ec_errorf(err, EC_EINVAL, "gloo %s: unknown dtype %d", what, dtype);
    if (count && !buf)
        return ec_errorf(err, EC_EINVAL, "gloo %s: NULL buffer for %zu elements", what, count);
    if (count > SIZE_MAX / es / (size_t)g->nranks)
        return ec_errorf(err, EC_EINVAL, "gloo %s: %zu elements overflow the buffer size",
                         what, count);
    return 0;
}

} // namespace

/* ---- public functions ------------------------------------------------------------- */

extern "C" {

size_t ecw_gloo_dtype_size(ecw_gloo_dtype_t dtype)
{
    return dtype_bytes(raw(dtype));
}

ecw_gloo_t *ecw_gloo_new(const ecw_gloo_options_t *o, ec_error_t *err)
{
    if (!o || o->size < sizeof(ecw_gloo_options_t)) {
        ec_errorf(err, EC_EINVAL, "gloo: options missing or from an older header "
                  "(initialize them with ECW_GLOO_OPTIONS_INIT)");
        return nullptr;
    }
    if (o->nranks < 1 || o->rank < 0 || o->rank >= o->nranks) {
        ec_errorf(err, EC_EINVAL, "gloo: rank %d is not in 0..%d", o->rank, o->nranks - 1);
        return nullptr;
    }
    if (!o->store || !o->store->set || !o->store->get) {
        ec_errorf(err, EC_EINVAL, "gloo: a rendezvous store with set and get is required");
        return nullptr;
    }
    if (!o->prefix || !o->prefix[0]) {
        ec_errorf(err, EC_EINVAL, "gloo: a key prefix unique to the epoch is required");
        return nullptr;
    }
    if (o->timeout_ms <= 0) {
        ec_errorf(err, EC_EINVAL, "gloo: timeout_ms must be positive, not %d", o->timeout_ms);
        return nullptr;
    }
    try {
        auto *g = new ecw_gloo;
        g->rank = o->rank;
        g->nranks = o->nranks;
        g->timeout_ms = o->timeout_ms;
        g->hostname = o->hostname ? o->hostname : "";
        g->iface = o->iface ? o->iface : "";
        g->prefix = o->prefix;
        g->store = *o->store;
        return g;
    } catch (...) {
        ec_errorf(err, EC_ENOMEM, "gloo: out of memory");
        return nullptr;
    }
}

int ecw_gloo_connect(ecw_gloo_t *g, ec_error_t *err)
{
    if (!g)
        return ec_errorf(err, EC_EINVAL, "gloo connect: NULL communicator");
    {
        std::lock_guard<std::mutex> lk(g->mu);
        if (g->phase != NEW)
            return ec_errorf(err, EC_EINVAL, "gloo connect: rank %d of %d was already "
                             "connected or failed; a communicator connects once", g->rank,
                             g->nranks);
        g->phase = CONNECTING;
    }
    SigpipeGuard sg;
    int rc = guarded(g, "connect", err, [g]() { connect_impl(g); });
    if (rc)
        ec_error_prefix(err, "rank %d of %d connecting under '%s' (%s%s)", g->rank,
                        g->nranks, g->prefix.c_str(), g->iface.empty() ? "host " : "iface ",
                        g->iface.empty() ? (g->hostname.empty() ? "<hostname>"
                                                                : g->hostname.c_str())
                                         : g->iface.c_str());
    return rc;
}

ecw_gloo_t *ecw_gloo_create(const ecw_gloo_options_t *opts, ec_error_t *err)
{
    ecw_gloo_t *g = ecw_gloo_new(opts, err);
    if (g && ecw_gloo_connect(g, err) != 0) {
        ecw_gloo_destroy(g);
        g = nullptr;
    }
    return g;
}

int ecw_gloo_allreduce(ecw_gloo_t *g, void *buf, size_t count, ecw_gloo_dtype_t dtype,
                       ecw_gloo_op_t op, ec_error_t *err)
{
    const int dt = raw(dtype);
    int rc = ready(g, "allreduce", err);
    if (rc)
        return rc;
    if ((rc = check_count(g, "allreduce", buf, count, dt, err)))
        return rc;
    int o = raw(op);
    if (o < ECW_GLOO_SUM || o > ECW_GLOO_AVG)
        return ec_errorf(err, EC_EINVAL, "gloo allreduce: unknown op %d", o);
    if (!count)
        return 0;
    SigpipeGuard sg;
    return guarded(g, "allreduce", err,
                   [&]() { ECW__DISPATCH(dt, allreduce_t, g, buf, count, o); });
}

int ecw_gloo_broadcast(ecw_gloo_t *g, void *buf, size_t count, ecw_gloo_dtype_t dtype,
                       int root, ec_error_t *err)
{
    const int dt = raw(dtype);
    int rc = ready(g, "broadcast", err);
    if (rc)
        return rc;
    if ((rc = check_count(g, "broadcast", buf, count, dt, err)))
        return rc;
    if (root < 0 || root >= g->nranks)
        return ec_errorf(err, EC_EINVAL, "gloo broadcast: root %d is not in 0..%d", root,
                         g->nranks - 1);
    if (!count)
        return 0;
    SigpipeGuard sg;
    return guarded(g, "broadcast", err,
                   [&]() { ECW__DISPATCH(dt, broadcast_t, g, buf, count, root); });
}

int ecw_gloo_allgather(ecw_gloo_t *g, const void *sendbuf, void *recvbuf, size_t count,
                       ecw_gloo_dtype_t dtype, ec_error_t *err)
{
    const int dt = raw(dtype);
    int rc = ready(g, "allgather", err);
    if (rc)
        return rc;
    if ((rc = check_count(g, "allgather", recvbuf, count, dt, err)))
        return rc;
    if (!count)
        return 0;
    SigpipeGuard sg;
    return guarded(g, "allgather", err,
                   [&]() { ECW__DISPATCH(dt, allgather_t, g, sendbuf, recvbuf, count); });
}

int ecw_gloo_barrier(ecw_gloo_t *g, ec_error_t *err)
{
    int rc = ready(g, "barrier", err);
    if (rc)
        return rc;
    SigpipeGuard sg;
    return guarded(g, "barrier", err, [g]() {
        BarrierOpts opts(g->ctx);
        opts.setTimeout(Ms(g->timeout_ms));
        InFlight fl(g, {opts.buf()});
        gloo::barrier(opts);
    });
}

void ecw_gloo_abort(ecw_gloo_t *g)
{
    if (!g)
        return;
    int saved = errno;
    std::lock_guard<std::mutex> lk(g->mu);
    g->aborted.store(true);
    if (g->phase == CONNECTING)
        shutdown_listeners(g);
    /* Read side only: every pair sees end-of-file and fails, and no write of
     * ours fails because of it (point 4). */
    shutdown_pinned(g, SHUT_RD);
    if (!g->kicker_started && !g->pinned.empty()) {
        try {
            g->kicker = std::thread(kick_loop, g);
            g->kicker_started = true;
        } catch (...) {
            for (auto *b : g->inflight) { /* no thread: one wake at least */
                b->abortWaitSend();
                b->abortWaitRecv();
            }
        }
    }
    errno = saved;
}

void ecw_gloo_destroy(ecw_gloo_t *g)
{
    if (!g)
        return;
    int saved = errno;
    if (g->kicker_started) {
        {
            std::lock_guard<std::mutex> lk(g->mu);
            g->kicker_stop = true;
            g->kick_cv.notify_all();
        }
        g->kicker.join();
    }
    {
        SigpipeGuard sg;
        try {
            /* Gloo first (its pairs close their descriptors, its loop thread
             * is joined), then our duplicates, which actually close the
             * sockets: peers see the end of the connection only now. */
            g->ctx.reset();
            g->dev.reset();
        } catch (...) {
        }
    }
    for (int fd : g->pinned)
        close(fd);
    delete g;
    errno = saved;
}

int ecw_gloo_rank(const ecw_gloo_t *g)
{
    return g ? g->rank : -1;
}

int ecw_gloo_nranks(const ecw_gloo_t *g)
{
    return g ? g->nranks : -1;
}

} // extern "C"
