"""ecoord.torch: PyTorch training that survives membership changes in place.

Under ``ecoord launch --rebuild=inprocess`` the training processes are never
restarted when a node dies, leaves or joins: each follows the job's epochs
through libecworker and rebuilds torch.distributed's default process group
for every new epoch, then recovers the model and optimizer state from the
most advanced member.  The same program runs unchanged under
``ecoord launch --rebuild=restart`` and plain ``torchrun``: there init() makes
an ordinary env:// process group and no rebuild ever happens.

A training loop::

    import ecoord.torch as et

    ctx = et.init(timeout=300)              # joins the job: ctx.rank, ctx.world_size, ctx.epoch
    torch.manual_seed(0)                    # the same initial model everywhere
    model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step, ddp, rebuild = 0, None, False
    while step < steps:
        try:
            if rebuild:
                ctx.rebuild()                       # the newest epoch's group
                rebuild = False
            if ddp is None:
                step = ctx.sync(model, opt, step)   # the most advanced member's state
                ddp = ctx.wrap(model)               # DistributedDataParallel on the new group
            with ctx.step():                        # a collective cut off by a new epoch
                loss = train_one_step(ddp, opt)     # raises et.EpochChanged
            step += 1
        except et.EpochChanged:
            rebuild, ddp = True, None
    ctx.close()

A process that starts with no state (a joiner, a restarted process) passes
step=-1 (or anything lower than the others') to sync() and gets the live
state.

Before init() is the boot: under ``ecoord launch --rebuild=inprocess`` the
agent starts a joiner's processes (and the one that replaces a dead
process) before their node is admitted, and admits the node only once every
process is ready.  init() says "ready" (it also makes the CUDA context of
this process's GPU first, with NCCL, and pays NCCL's one-time set-up with a
one-rank group: _warm_nccl) and then waits to be admitted; the
job's running members are never stopped for what comes before it.  So
import, build the model and the optimizer, load data and warm up before
init(): whatever comes after it and before the first sync() is time the
others wait for the newcomer in sync().  Inside ``with ctx.step()`` and in sync()/wrap(), every collective
that fails because the job re-formed (a peer died, left, joined, or this
node's etcd lease cannot be confirmed) raises EpochChanged; other errors
pass through unchanged.  dist.* keeps working as usual on the default group.

How a blocked collective is released: a watcher thread waits on
ecw_wait_epoch(); when a newer epoch is published, or the fence trips (this
node's lease cannot be confirmed: it must stop collectives before etcd can
expire it and the others re-form without it), it aborts the current group:
Gloo (torch has no abort for it) by shutdown(2) of the sockets the group
created (see ecoord/_sockets.py); NCCL with torch's own abort where torch
has one (_abort_process_group, torch >= 2.5).  The old group is never
destroyed on the training thread (its destructor can block ~20 s while a
collective is stuck, holding the GIL): it is kept, and a reaper thread frees
it once the group timeout has passed since its retirement.
"""
import contextlib
import datetime
import logging
import os
import pickle
import socket
import threading
import time

import torch
import torch.distributed as dist

from . import _ecw, _sockets
from . import progress as _progress

__all__ = ["init", "Context", "EpochChanged", "Fenced", "STORE_KEY"]

log = logging.getLogger("ecoord.torch")

STORE_KEY = "torch-store"  # the epoch key under which rank 0 publishes its TCPStore


class EpochChanged(RuntimeError):
    """The job re-formed (or is re-forming): the current process group is
    gone.  Call ctx.rebuild(), then ctx.sync() and ctx.wrap(), and redo the
    step.  epoch is the group's epoch, latest the newest seen (may be None)."""

    def __init__(self, msg, epoch=None, latest=None):
        super().__init__(msg)
        self.epoch, self.latest = epoch, latest


class Fenced(EpochChanged):
    """This node's membership cannot be confirmed (etcd unreachable for
    longer than its lease TTL minus the margin): collectives stopped.  The
    state is kept; ctx.rebuild() waits for the confirmation and the epoch
    the job re-forms into."""


def _now_ms():
    return time.monotonic() * 1000.0


def _wall_ms():
    return int(time.time() * 1000)


def _seconds(t, default):
    if t is None:
        return default
    return t.total_seconds() if isinstance(t, datetime.timedelta) else float(t)


def _default_backend():
    if torch.cuda.is_available() and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def _mode():
    """'inprocess' under `ecoord launch --rebuild=inprocess`, else 'fallback'
    (restart mode, torchrun, or a plain single process)."""
    if os.environ.get("ECOORD_JOB_ID") and os.environ.get("ECOORD_REBUILD") == "inprocess":
        return "inprocess"
    return "fallback"


def init(backend=None, timeout=300, rebuild_timeout=None, epoch_wait=60, log_level="warn"):
    """Join the job and build the process group of its newest epoch.

    backend: "gloo" or "nccl" (default: NCCL when torch sees a GPU, else Gloo).
    timeout: the group's timeout, seconds or timedelta (torch's default is 30
      min; here 300 s).  Under ecoord in place it is only the last resort: a
      new epoch releases a blocked collective at once.
    rebuild_timeout: bound of one rebuild, waiting for a membership included
      (default: the worker library's, 120 s).
    epoch_wait: after a collective failed by itself (a killed peer fails
      Gloo's collectives in ~14 ms, before the job re-forms), how long
      rebuild() waits for the epoch that replaces the group before it
      raises ecoord.Error (ECW_ETIMEDOUT).
    log_level: least severe libecworker message passed to the "ecoord"
      logger ("debug", "info", "warn", "error").
    Hang detection: each `with ctx.step()` that completes is progress;
    time between them is silence, so wrap an evaluation pass, a checkpoint
    or anything long outside the steps in `ecoord.progress.paused()` (a
    silence every node shares is never blamed on one of them, but it is
    reported as a stall).
    Returns a Context.  Raises ecoord.Error when the worker library cannot
    join (etcd unreachable, no membership within rebuild_timeout)."""
    backend = backend or _default_backend()
    if _mode() == "inprocess":
        return Context(backend, timeout, rebuild_timeout, epoch_wait, log_level)
    return _FallbackContext(backend, timeout)


class _Gen:
    """One epoch's group, from the start of its build to its retirement."""

    def __init__(self, epoch):
        self.epoch = epoch
        self.pg = None
        self.store = None
        self.store_port = None
        self.before = None     # socket inodes when the build started
        self.pinned = None     # the group's sockets (Gloo)
        self.build_pinned = None
        self.aborted = None    # reason, once aborted
        self.abort_thread = None  # aborting its NCCL communicators (_nccl_abort)
        self.fenced = False
        self.retired_at = None


def _warm_up(backend):
    """The boot's share that is torch's: this process's GPU, its CUDA
    context and NCCL's one-time set-up (_warm_nccl), before the process says
    it is ready."""
    if backend != "nccl" or not torch.cuda.is_available():
        return
    n = torch.cuda.device_count()
    if n:
        dev = int(os.environ.get("LOCAL_RANK", "0")) % n
        torch.cuda.set_device(dev)
        torch.empty(1, device="cuda")  # makes the context now, not in the first sync()
        _warm_nccl(torch.device("cuda", dev))


def _release_warm(pg):
    """Abort the warm-up's communicator (the one-rank group of _warm_nccl):
    off the training thread, never raising."""
    try:
        _abort_backend(pg, ("abort", "_abort", "shutdown"))
    except Exception as e:  # a release must not take anything down
        log.debug("releasing the NCCL warm-up communicator: %s", e)


def _warm_nccl(device):
    """NCCL's one-time set-up, paid by the boot nobody waits for instead of by
    the first epoch's build that the job's members wait for: a one-rank
    communicator on `device`, built now and aborted on a thread of its own.
    A process's first NCCL communicator costs ~0.4 s on an H200 against
    8-60 ms for a later one (the C library's ECOORD_WORKER_NCCL_WARM, the
    same knob: 0 turns this off).  Returns the milliseconds it took, or None
    (off, or failed: said in a warning, and the cost stays where it was).
    Never raises."""
    if os.environ.get("ECOORD_WORKER_NCCL_WARM", "1").strip() == "0":
        return None
    t0 = time.monotonic()
    try:
        pg = dist.ProcessGroupNCCL(dist.HashStore(), 0, 1)
        if hasattr(pg, "eager_connect_single_device"):
            pg.eager_connect_single_device(device)  # torch >= 2.4: the communicator now
        else:  # NCCL connects on a group's first collective
            t = torch.zeros(1, device=device)
            pg.allreduce([t]).wait()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
    except Exception as e:
        log.warning("nccl warm-up (a one-rank communicator at boot) failed after %.0f ms: %s; the "
                    "first epoch's group pays NCCL's set-up (ECOORD_WORKER_NCCL_WARM=0: no warm-up)",
                    (time.monotonic() - t0) * 1000, str(e).splitlines()[0][:200] if str(e) else
                    type(e).__name__)
        return None
    ms = (time.monotonic() - t0) * 1000
    threading.Thread(target=_release_warm, args=(pg,), name="ecoord-nccl-warm",
                     daemon=True).start()
    log.info("+nccl warmed up in %.0f ms: a one-rank communicator at boot, released off the "
             "training thread (ECOORD_WORKER_NCCL_WARM=0: not)", ms)
    return ms


class Context:
    """A process's membership in an elastic job under `ecoord launch
    --rebuild=inprocess`.  Methods are for the training thread; pending()
    and the properties may be read from any thread."""

    elastic = True

    def __init__(self, backend, timeout, rebuild_timeout, epoch_wait, log_level):
        self.backend = backend
        _warm_up(backend)
        self.timeout = datetime.timedelta(seconds=_seconds(timeout, 300))
        self._rebuild_timeout = _seconds(rebuild_timeout, 120)
        self._epoch_wait_ms = int(_seconds(epoch_wait, 60) * 1000)
        levels = {"debug": 0, "info": 1, "warn": 2, "warning": 2, "error": 3}
        lib_log = logging.getLogger("ecoord")
        pylevels = [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR]
        opts = {}
        if rebuild_timeout is not None:
            opts["rebuild_timeout_ms"] = int(self._rebuild_timeout * 1000)
        # ecw_init: follows the job's epochs, says this process is ready,
        # and waits (without the rebuild's deadline) until its node is
        # admitted.
        self._w = _ecw.Worker(backend=_ecw.BACKEND_NONE,
                              log=lambda lvl, msg: lib_log.log(pylevels[min(lvl, 3)], "%s", msg),
                              log_level=levels.get(str(log_level).lower(), 2), **opts)
        self._lock = threading.Lock()
        self._cur = None
        self._old = []            # retired generations, freed by the reaper
        self._aborting = []       # threads aborting retired NCCL groups (_nccl_abort)
        self._detect = None       # (monotonic ms, wall ms, why) of the first notice of a change
        self._stop = threading.Event()
        self._host = self._store_host()
        self._etcd = self._etcd_peers()
        self.last_rebuild = None  # the timings of the last rebuild()
        self.last_sync_ms = None
        self.rebuilds = 0
        # The watcher runs before the first group is built: a member lost
        # during that first rendezvous releases it too.
        self._watcher = threading.Thread(target=self._watch, name="ecoord-watcher", daemon=True)
        self._watcher.start()
        self._reaper = threading.Thread(target=self._reap, name="ecoord-reaper", daemon=True)
        self._reaper.start()
        try:
            self._rebuild_loop(first=True)
        except BaseException:
            self.close()
            raise
        import atexit
        atexit.register(self.close)

    # ---- where this process stands ----

    @property
    def rank(self):
        return self._w.rank

    @property
    def world_size(self):
        return self._w.world_size

    @property
    def local_rank(self):
        return self._w.local_rank

    @property
    def epoch(self):
        return self._w.epoch

    @property
    def nnodes(self):
        return self._w.nnodes

    @property
    def node_id(self):
        return self._w.node_id

    def pending(self):
        """True when the group is no longer usable (a newer epoch was
        published, the fence tripped, or a collective failed): rebuild.
        No I/O."""
        cur = self._cur
        return cur is None or cur.aborted is not None or self._w.epoch_pending()

    # ---- the group of one epoch ----

    @staticmethod
    def _store_host():
        ep = os.environ.get("PADDLE_CURRENT_ENDPOINT", "")
        if ":" in ep:
            return ep.rsplit(":", 1)[0]
        return os.environ.get("POD_IP") or socket.gethostname()

    @staticmethod
    def _etcd_peers():
        """(ip, port) of the etcd endpoints: the worker library's own
        connections, never to be shut down."""
        peers = set()
        for ep in os.environ.get("ECOORD_ELASTIC_SERVER", "").split(","):
            ep = ep.strip()
            if "://" in ep:
                ep = ep.split("://", 1)[1]
            if ":" not in ep:
                continue
            host, port = ep.rsplit(":", 1)
            try:
                for ai in socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM):
                    peers.add((ai[4][0], ai[4][1]))
            except (OSError, ValueError):
                pass
        return peers

    def _note_change(self, why):
        with self._lock:
            if self._detect is None:
                self._detect = (_now_ms(), _wall_ms(), why)

    def _abort(self, gen, why, fenced=False, how=socket.SHUT_RD):
        """Make everything blocked in gen's group fail now (any thread).

        Only the read side by default, as the C Gloo shim does: every pair
        then reads end-of-file and fails, waking each receive, while our own
        writes keep working.  A write that failed because we shut the write
        side would leave its unbound send queued on the pair, where Gloo
        never wakes it: the collective then waits out the group timeout
        (seen: "Timed out waiting 120000ms for send operation to complete").
        The write side goes once the collective has failed (_retire), so
        the peers learn of it then."""
        with self._lock:
            if gen is None or gen.aborted is not None:
                return
            gen.aborted, gen.fenced = why, fenced
            _progress._collectives_forgotten()  # what is in flight on gen fails, or never ends
            if self._detect is None:
                self._detect = (_now_ms(), _wall_ms(), why)
            if gen.pg is not None and self.backend == "nccl":
                self._nccl_abort(gen)
            if gen.pinned is not None:
                gen.pinned.shutdown(how)
            elif gen.before is not None:
                # Still building: the store client and whatever Gloo
                # connected so far; never the store server's own sockets.
                try:
                    gen.build_pinned = _sockets.pin_new_sockets(
                        gen.before, self._etcd, listening=True,
                        exclude_local_ports={gen.store_port} if gen.store_port else ())
                    gen.build_pinned.shutdown()
                except OSError as e:
                    log.warning("cannot release the build of epoch %d: %s", gen.epoch, e)

    def _nccl_abort(self, gen):
        """Abort gen's NCCL communicators (self._lock held, any thread).

        On a thread of its own: torch's abort of a group costs ~0.6-0.7 s on
        an H200 (one ncclCommAbort per communicator), and nothing of the next
        epoch needs it finished.  NCCL's abort first raises the flag its
        kernels poll, so what the training thread waits on ends within
        milliseconds; the rest runs beside the next group's build.  Only the
        backend is aborted there (ProcessGroup.abort(), torch >= 2.5):
        torch's group registry is changed by the training thread alone
        (_retire), never by this one.  The bound: one thread per aborted
        group, each ending when torch's abort returns; a torch without
        ProcessGroup.abort() is aborted here, inline, as before."""
        pg = gen.pg
        if not hasattr(pg, "abort"):
            _torch_abort(pg)
            return
        t0 = time.monotonic()

        def run():
            try:
                pg.abort()
            except Exception as e:  # an abort must not take anything down
                log.warning("torch abort of the NCCL group of epoch %d failed: %s", gen.epoch, e)
            log.debug("the NCCL group of epoch %d aborted in %.0f ms, off the training thread",
                      gen.epoch, (time.monotonic() - t0) * 1000)

        t = threading.Thread(target=run, name="ecoord-nccl-abort-%d" % gen.epoch, daemon=True)
        t.start()
        gen.abort_thread = t
        self._aborting = [a for a in self._aborting if a.is_alive()] + [t]

    def _build(self, deadline):
        """The process group of the worker library's current epoch."""
        w = self._w
        gen = _Gen(w.epoch)
        rank, world = w.rank, w.world_size
        gen.before = set(_sockets.socket_inodes())
        with self._lock:
            self._cur = gen
        if w.latest_epoch() > gen.epoch:
            self._abort(gen, "epoch %d published" % w.latest_epoch())
        self._raise_if_aborted(gen)
        try:
            left = max(1.0, deadline - time.monotonic())
            if rank == 0:
                store = dist.TCPStore(self._host, 0, world, True, timeout=self.timeout,
                                      wait_for_workers=False)
                gen.store_port = store.port
                w.epoch_put(STORE_KEY, "%s:%d" % (self._host, store.port))
            else:
                try:
                    addr = w.epoch_get(STORE_KEY, int(left * 1000)).decode()
                except _ecw.Error as e:
                    if e.code in (_ecw.ECW_EEPOCHCHANGED, _ecw.ECW_EUNCONFIRMED):
                        raise EpochChanged("epoch %d: %s" % (gen.epoch, e), gen.epoch) from e
                    raise
                host, port = addr.rsplit(":", 1)
                # A short connect bound: a dead rank 0's port refuses, and
                # torch retries until this timeout, which no abort can cut.
                store = dist.TCPStore(host, int(port), world, False,
                                      timeout=datetime.timedelta(seconds=min(left, 15)))
                store.set_timeout(self.timeout)
            gen.store = store
            gen.t_store = _now_ms()
            self._raise_if_aborted(gen)
            pre = set(_sockets.socket_inodes())
            opts = {}
            if self.backend == "nccl":
                torch.cuda.set_device(self.local_rank % torch.cuda.device_count())
            with _barrier_without_polling():
                dist.init_process_group(self.backend,
                                        store=dist.PrefixStore("ecoord/%d" % gen.epoch, store),
                                        rank=rank, world_size=world, timeout=self.timeout,
                                        **opts)
            gen.pg = dist.distributed_c10d._get_default_group()
            pinned = None
            if self.backend == "gloo":
                pinned = _sockets.pin_new_sockets(pre, self._etcd,
                                                  exclude_local_ports={gen.store_port}
                                                  if gen.store_port else ())
        except EpochChanged:
            raise
        except Exception as e:
            if gen.aborted is not None:
                raise EpochChanged("building the group of epoch %d: %s" % (gen.epoch, gen.aborted),
                                   gen.epoch) from e
            raise
        with self._lock:
            gen.pinned = pinned
            if gen.aborted is not None and pinned is not None:
                pinned.shutdown()  # aborted between init_process_group and the pin
        self._raise_if_aborted(gen)
        return gen

    def _gone(self, gen):
        """Why gen's group may not be used (None: it may): aborted, or a
        newer epoch is published, which aborts it now (any thread)."""
        if gen.aborted is None:
            latest = self._w.latest_epoch()
            if latest > gen.epoch:
                self._abort(gen, "epoch %d published" % latest)
        return gen.aborted

    def _raise_if_aborted(self, gen):
        if gen.aborted is not None:
            cls = Fenced if gen.fenced else EpochChanged
            raise cls("the group of epoch %d was aborted: %s" % (gen.epoch, gen.aborted),
                      gen.epoch, self._w.latest_epoch())

    def _retire(self, gen):
        """Take gen's group out of torch.distributed without destroying it."""
        if gen is None:
            return
        self._abort(gen, "retired")
        with self._lock:
            if gen.pinned is not None:
                gen.pinned.shutdown(socket.SHUT_RDWR)  # its collective is over: tell the peers
        if gen.pg is not None and dist.is_initialized() and \
                dist.distributed_c10d._get_default_group() is gen.pg:
            if (gen.abort_thread is None or not _forget_default_group(gen.pg)) and \
                    dist.is_initialized():
                dist.destroy_process_group()
        with self._lock:
            gen.retired_at = time.monotonic()
            self._old.append(gen)
            if self._cur is gen:
                self._cur = None

    def _rebuild_loop(self, first=False):
        deadline = time.monotonic() + self._rebuild_timeout
        w = self._w
        t_start = _now_ms()
        old = self._cur
        old_epoch = old.epoch if old is not None else 0
        self._retire(old)
        while True:
            if time.monotonic() > deadline:
                raise _ecw.Error(_ecw.ECW_ETIMEDOUT, "no process group could be built within "
                                 "%.0f s (see the agent's log for the epochs)" %
                                 self._rebuild_timeout, "rebuild")
            if not first and w.latest_epoch() <= old_epoch:
                # A collective failed before the job re-formed (a peer died:
                # Gloo notices in ms, the agents in tens of ms).  The same
                # epoch is never rebuilt: wait for the one that replaces it.
                left = int(min(self._epoch_wait_ms, (deadline - time.monotonic()) * 1000))
                rc, latest = w.wait_epoch(old_epoch, max(left, 1))
                if rc == _ecw.ECW_EABORTED:
                    raise _ecw.Error(rc, "closed", "rebuild")
                if rc == _ecw.ECW_ETIMEDOUT:
                    raise _ecw.Error(rc, "the group of epoch %d failed and no new epoch was "
                                     "published within %d ms: the job did not re-form (see the "
                                     "agents' logs)" % (old_epoch, left), "rebuild")
                if rc == _ecw.ECW_EUNCONFIRMED:
                    self._wait_confirmed(deadline)
                    continue
            if not first:
                try:
                    w.rebuild()
                except _ecw.Error as e:
                    if e.code == _ecw.ECW_EUNCONFIRMED:
                        self._wait_confirmed(deadline)
                        continue
                    raise
                # The wait to be admitted (this node out of the job while one
                # of its processes boots) is no part of the rebuild's time.
                deadline = max(deadline, time.monotonic() + self._rebuild_timeout)
            first = False
            t_epoch = _now_ms()
            try:
                gen = self._build(deadline)
            except EpochChanged:
                old_epoch = self._cur.epoch if self._cur is not None else old_epoch
                self._retire(self._cur)
                continue
            except Exception as e:
                # A build that failed by itself (a member died during the
                # rendezvous, its store went away): never this epoch again;
                # the loop waits for the next one within epoch_wait.
                failed = self._cur
                old_epoch = failed.epoch if failed is not None else w.epoch
                log.warning("building the group of epoch %d failed: %s; waiting for the next "
                            "epoch", old_epoch, str(e).splitlines()[0][:300] if str(e) else e)
                self._note_change("building epoch %d failed" % old_epoch)
                self._retire(failed)
                continue
            t_group = _now_ms()
            det = self._detect or (t_start, _wall_ms() - int(_now_ms() - t_start), "rebuild()")
            self.last_rebuild = {
                "epoch": gen.epoch, "rank": self.rank, "world_size": self.world_size,
                "detected_at_ms": det[1], "why": det[2],
                "epoch_ms": t_epoch - det[0],     # first notice -> the new epoch joined
                "group_ms": t_group - t_epoch,     # store + init_process_group
                "store_ms": getattr(gen, "t_store", t_epoch) - t_epoch,
                "total_ms": t_group - det[0],
            }
            with self._lock:
                self._detect = None
            return self.last_rebuild

    def _wait_confirmed(self, deadline):
        while not self._w.confirmed() and time.monotonic() < deadline:
            self._stop.wait(0.05)

    # ---- the training thread's calls ----

    def rebuild(self):
        """Retire the current group and build the newest epoch's; returns the
        timings (ms) as a dict: epoch_ms (from the first notice of the change
        to the new epoch joined), group_ms (its store and process group),
        total_ms, and detected_at_ms (wall clock of that first notice).
        Raises ecoord.Error when no group can be built within rebuild_timeout."""
        self.rebuilds += 1
        return self._rebuild_loop()

    def _translate(self, exc):
        """The EpochChanged that explains exc, or None when it is not about
        membership.  A collective that failed by itself (a killed peer fails
        Gloo's collectives in ~14 ms, before the job re-forms) counts when
        the group's connections are broken: the group is aborted at once,
        so that the peers still blocked in it learn now, and rebuild()
        waits for the epoch that replaces it."""
        if isinstance(exc, EpochChanged):
            return exc
        gen = self._cur
        if gen is None:
            return EpochChanged("no process group: call rebuild()", None, self._w.latest_epoch())
        if gen.aborted is None:
            if not isinstance(exc, RuntimeError):
                return None
            latest = self._w.latest_epoch()
            if latest > gen.epoch:
                self._abort(gen, "epoch %d published" % latest)
            elif not self._w.confirmed():
                self._abort(gen, "fenced: this node's membership cannot be confirmed", True)
            else:
                why = gen.pinned.broken() if gen.pinned is not None else None
                if why is None and self.backend == "nccl":
                    why = _nccl_failure(exc)
                if why is None:
                    return None  # not a membership change: the caller's error, as it is
                # Our collective is over: the write side too, so the peers
                # still blocked in the group learn of it now.
                self._abort(gen, "collective failed: %s" % why, how=socket.SHUT_RDWR)
                # Without it a node killed with its agent waits for its lease to expire.
                self._w.report_failure()
        cls = Fenced if gen.fenced else EpochChanged
        return cls("the group of epoch %d is gone: %s (%s)" % (gen.epoch, gen.aborted,
                                                              str(exc).splitlines()[0][:200]),
                   gen.epoch, self._w.latest_epoch())

    @contextlib.contextmanager
    def step(self):
        """Wraps a training step: raises EpochChanged at once when a rebuild
        is due, and turns a collective error caused by a membership change
        into EpochChanged.  A step that completes is reported to the agent
        (ecoord.progress: hang and straggler detection); wrap a checkpoint
        in ecoord.progress.paused()."""
        gen = self._cur
        if gen is None:
            raise EpochChanged("no process group: call rebuild()", None, self._w.latest_epoch())
        if self._gone(gen) is not None:
            self._raise_if_aborted(gen)
        try:
            yield self
        except Exception as e:
            _progress._collectives_forgotten()  # the step's, abandoned (a backward that
            # raised runs none of its end-of-pass callbacks)
            ec = self._translate(e)
            if ec is None or ec is e:
                raise
            raise ec from e
        _progress.step()

    def sync(self, model, optimizer=None, step=-1, extra=None):
        """Collective: agree on the most advanced state.  Every rank gives
        its step (< 0: holds no state); the lowest rank with the greatest
        step broadcasts model.state_dict(), optimizer.state_dict() and each
        extra object's state_dict() ({name: obj}); ranks behind it load them
        only once the whole transfer arrived (no torn state if another epoch
        cuts it).  Returns the agreed step (the greatest; -1 if nobody held
        state).  The step number must say which update a rank applied: make
        no collective after optimizer.step() in a step (a cut collective can
        finish on some ranks only), or two ranks may hold the same step with
        different parameters and nothing is repaired."""
        with self.step(), _collective(self.backend == "nccl"):
            return _sync(model, optimizer, step, extra, self)

    def all_reduce(self, tensor, op=None):
        """torch.distributed.all_reduce(tensor, op) on the current group,
        in place, unless the group is gone (aborted, or a newer epoch
        published): then EpochChanged, without reaching torch, where over
        NCCL the call would wait for the group's abort to end (see wrap).
        For a program's own collectives inside a step."""
        gen = self._cur
        if gen is None:
            raise EpochChanged("no process group: call rebuild()", None, self._w.latest_epoch())
        if self._gone(gen) is not None:
            self._raise_if_aborted(gen)  # as step() raises it: EpochChanged or Fenced
        with _collective(self.backend == "nccl"):
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op is None else op, group=gen.pg)
        return tensor

    def wrap(self, model, comm_hook=None, comm_state=None, **ddp_args):
        """DistributedDataParallel(model) on the current group (build a new
        one after every rebuild).  Its gradient buckets go through a DDP
        comm hook that starts no allreduce on a group that is gone (aborted,
        or a newer epoch published): the bucket's future fails instead, so
        backward raises and the step turns it into EpochChanged.  Without
        it a bucket reaching torch while the group's NCCL abort runs waits
        for that abort (torch holds the communicator's lock through
        ncclCommAbort, ~0.3-0.7 s).  DDP takes one hook: give yours as
        comm_hook (and its state as comm_state) and it runs behind the
        check; by default torch's allreduce_hook, the averaging DDP does
        itself.  For a collective of your own in the step use all_reduce,
        which checks the same way."""
        with self.step():
            ddp = _wrap(model, self.backend, self.local_rank, **ddp_args)
            _hook_buckets(ddp, self, self._cur, comm_hook, comm_state)
            return ddp

    def close(self):
        """Stop the watcher, leave torch.distributed, free the handle.
        Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        # No call may start on the handle once ecw_finalize has: the watcher
        # leaves first (its waits last at most 500 ms).
        if self._watcher.is_alive() and threading.current_thread() is not self._watcher:
            self._watcher.join(5)
        w = self._w
        if w is not None:
            w.finalize()
        gen = self._cur
        if gen is not None and dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:
                pass
        self._cur = None
        # torch's aborts still running: a daemon thread inside NCCL at
        # interpreter exit can crash it; each ends within its abort's time
        for t in self._aborting:
            t.join(30)
        self._leak_retired()

    # ---- the threads ----

    def _watch(self):
        seen = 0
        w = self._w
        while not self._stop.is_set():
            gen = self._cur
            after = max(seen, gen.epoch if gen is not None else w.epoch)
            try:
                rc, latest = w.wait_epoch(after, 500)
            except _ecw.Error as e:
                log.warning("ecoord watcher: %s", e)
                self._stop.wait(0.2)
                continue
            if rc == _ecw.ECW_EABORTED:
                return
            if rc == 0:
                seen = latest
                gen = self._cur
                if gen is not None and gen.epoch < latest:
                    self._abort(gen, "epoch %d published" % latest)
                elif gen is None and self._w.epoch:
                    self._note_change("epoch %d published" % latest)
            elif rc == _ecw.ECW_EUNCONFIRMED:
                self._abort(self._cur, "fenced: this node's membership cannot be confirmed "
                            "(etcd unreachable)", fenced=True)
                while not self._stop.is_set() and not w.confirmed() and \
                        w.latest_epoch() <= after:
                    self._stop.wait(0.05)

    def _reap(self):
        """Free retired groups off the training thread, and only once the
        group timeout has passed since their retirement.  A Gloo operation
        can outlive the abort (an unbound send Gloo never wakes waits for its
        timeout, see worker/gloo_shim.cc), and torch's destructor joins it
        holding the GIL: freed earlier, a group could freeze every thread of
        the process, the watcher included, for up to the timeout."""
        keep = os.environ.get("ECOORD_TORCH_KEEP_GROUPS") == "1"
        grace = self.timeout.total_seconds() + 5
        while not self._stop.wait(1.0):
            if keep:
                continue
            now = time.monotonic()
            with self._lock:
                ripe = [g for g in self._old if g.retired_at and now - g.retired_at > grace]
                self._old = [g for g in self._old if g not in ripe]
            for g in ripe:
                for p in (g.pinned, g.build_pinned):
                    if p is not None:
                        p.close()
                g.pg = g.store = None

    def _leak_retired(self):
        """At close: the groups not freed yet are never freed (their
        destructors could block interpreter exit up to the group timeout)."""
        import ctypes
        with self._lock:
            old, self._old = self._old, []
        for g in old:
            for o in (g.pg, g.store):
                if o is not None:
                    ctypes.pythonapi.Py_IncRef(ctypes.py_object(o))


class _FallbackContext:
    """No ecoord agent in place (restart mode, torchrun, a single process):
    one ordinary process group from the env:// variables, never rebuilt."""

    elastic = False

    def __init__(self, backend, timeout):
        self.backend = backend
        self.timeout = datetime.timedelta(seconds=_seconds(timeout, 300))
        self.last_rebuild = None
        self.last_sync_ms = None
        self.rebuilds = 0
        if not dist.is_initialized():
            if self.backend == "nccl":
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) %
                                      torch.cuda.device_count())
            if "WORLD_SIZE" in os.environ:
                dist.init_process_group(self.backend, init_method="env://", timeout=self.timeout)
            else:  # a plain single process
                dist.init_process_group(self.backend, store=dist.HashStore(), rank=0,
                                        world_size=1, timeout=self.timeout)

    rank = property(lambda self: dist.get_rank())
    world_size = property(lambda self: dist.get_world_size())
    local_rank = property(lambda self: int(os.environ.get("LOCAL_RANK", "0")))
    epoch = property(lambda self: int(os.environ.get("ECOORD_EPOCH", "0")))
    nnodes = property(lambda self: int(os.environ.get("GROUP_WORLD_SIZE", "1")))
    node_id = property(lambda self: os.environ.get("ECOORD_NODE_ID"))

    def pending(self):
        return False

    def rebuild(self):
        raise RuntimeError("ecoord.torch: this process runs without `ecoord launch "
                           "--rebuild=inprocess` (ECOORD_REBUILD=%s): its group is never "
                           "rebuilt in place; the launcher restarts it" %
                           os.environ.get("ECOORD_REBUILD", "unset"))

    @contextlib.contextmanager
    def step(self):
        try:
            yield self
        except BaseException:
            _progress._collectives_forgotten()  # the step's, abandoned
            raise
        _progress.step()

    def sync(self, model, optimizer=None, step=-1, extra=None):
        with _collective(self.backend == "nccl"):
            return _sync(model, optimizer, step, extra, self)

    def all_reduce(self, tensor, op=None):
        with _collective(self.backend == "nccl"):
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op is None else op)
        return tensor

    def wrap(self, model, comm_hook=None, comm_state=None, **ddp_args):
        ddp = _wrap(model, self.backend, self.local_rank, **ddp_args)
        hook, state = _default_hook(comm_hook, comm_state, None)
        if hook is not None:  # never rebuilt: nothing to check, the buckets only marked
            ddp.register_comm_hook(state, _marked(hook, self.backend == "nccl"))
        return ddp

    def close(self):
        if dist.is_initialized():
            dist.destroy_process_group()


# ---- state recovery and DDP --------------------------------------------------------------

def _unwrap(model):
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


# State travels as tensors, not as a pickle: a small manifest (the state
# dicts with every tensor replaced by its place) and the tensors' bytes,
# broadcast as they are on the collective's device: a tensor of _DIRECT bytes
# or more on its own, straight from the sender's memory, smaller ones packed
# into buffers of up to _BUCKET.  A sync costs about the state's size over the
# link's bandwidth, where torch.save() of the whole state went through a
# pickle (and, for GPU tensors, through host memory) on both sides.
_DIRECT = 1 << 20
_BUCKET = 4 << 20
_ALIGN = 16


class _Slot:
    """A tensor's place in the manifest: its part, offset, size and kind."""

    def __init__(self, part, offset, nbytes, dtype, shape, cuda):
        self.part, self.offset, self.nbytes, self.dtype, self.shape, self.cuda = \
            part, offset, nbytes, dtype, shape, cuda


class _Parts:
    """The sender's side: the parts to broadcast, in order.  A part is
    [tensor] (direct) or a list of (tensor, offset) packed into one buffer;
    sizes[i] is part i's size in bytes."""

    def __init__(self):
        self.parts, self.sizes, self.open = [], [], None

    def place(self, t):
        n = t.numel() * t.element_size()
        if n >= _DIRECT:
            self.parts.append([t])
            self.sizes.append(n)
            return len(self.parts) - 1, 0
        if self.open is None or self.sizes[self.open] + n > _BUCKET:
            self.parts.append([])
            self.sizes.append(0)
            self.open = len(self.parts) - 1
        off = (self.sizes[self.open] + _ALIGN - 1) // _ALIGN * _ALIGN
        self.parts[self.open].append((t, off))
        self.sizes[self.open] = off + n
        return self.open, off

    def buffer(self, i, dev):
        """Part i as one uint8 tensor on dev (a direct part: the tensor's
        own memory when it is contiguous and there already)."""
        p = self.parts[i]
        if len(p) == 1 and not isinstance(p[0], tuple):
            return p[0].to(dev).contiguous().reshape(-1).view(torch.uint8)
        buf = torch.empty(self.sizes[i], dtype=torch.uint8, device=dev)
        for t, off in p:
            n = t.numel() * t.element_size()
            buf[off:off + n].copy_(t.contiguous().reshape(-1).view(torch.uint8))
        return buf


def _flatten(obj, parts):
    """obj with every dense tensor replaced by a _Slot placed in parts."""
    if isinstance(obj, torch.Tensor) and obj.layout == torch.strided:
        t = obj.detach()
        part, off = parts.place(t)
        return _Slot(part, off, t.numel() * t.element_size(), t.dtype, tuple(t.shape), t.is_cuda)
    if isinstance(obj, dict):
        return type(obj)((k, _flatten(v, parts)) for k, v in obj.items()) \
            if type(obj) is not dict else {k: _flatten(v, parts) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        out = [_flatten(v, parts) for v in obj]
        return out if isinstance(obj, list) else type(obj)(out) if type(obj) is tuple else \
            type(obj)(*out)
    return obj


def _restore(obj, buffers):
    """obj with every _Slot replaced by its tensor: a view into the received
    buffers (copied to the host when it came from there)."""
    if isinstance(obj, _Slot):
        t = buffers[obj.part][obj.offset:obj.offset + obj.nbytes].view(obj.dtype) \
            .reshape(obj.shape)
        return t if obj.cuda else t.cpu()
    if isinstance(obj, dict):
        return {k: _restore(v, buffers) for k, v in obj.items()} if type(obj) is dict else \
            type(obj)((k, _restore(v, buffers)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        out = [_restore(v, buffers) for v in obj]
        return out if isinstance(obj, list) else type(obj)(out) if type(obj) is tuple else \
            type(obj)(*out)
    return obj


def _sync(model, optimizer, step, extra, ctx):
    t0 = _now_ms()
    model = _unwrap(model)
    dev = torch.device("cuda", torch.cuda.current_device()) if ctx.backend == "nccl" \
        else torch.device("cpu")
    world, rank = dist.get_world_size(), dist.get_rank()
    mine = torch.tensor([int(step)], dtype=torch.int64, device=dev)
    steps = [torch.zeros(1, dtype=torch.int64, device=dev) for _ in range(world)]
    dist.all_gather(steps, mine)
    steps = [int(s.item()) for s in steps]
    best = max(steps)
    if best < 0 or min(steps) == best:
        ctx.last_sync_ms = _now_ms() - t0
        ctx.last_sync_bytes = 0
        return best
    src = steps.index(best)
    if rank == src:
        state = {"model": model.state_dict(), "step": best}
        if optimizer is not None:
            state["optimizer"] = optimizer.state_dict()
        for k, o in (extra or {}).items():
            state["extra." + k] = o.state_dict()
        parts = _Parts()
        manifest = _flatten(state, parts)
        sizes = parts.sizes
        # the manifest holds no tensor: plain pickle (torch.load of newer
        # torch takes only tensors by default)
        head = torch.frombuffer(bytearray(pickle.dumps({"manifest": manifest, "sizes": sizes})),
                                dtype=torch.uint8).to(dev)
        n = torch.tensor([head.numel()], dtype=torch.int64, device=dev)
    else:
        n = torch.zeros(1, dtype=torch.int64, device=dev)
    dist.broadcast(n, src)
    if rank != src:
        head = torch.empty(int(n.item()), dtype=torch.uint8, device=dev)
    dist.broadcast(head, src)
    if rank != src:
        meta = pickle.loads(head.cpu().numpy().tobytes())
        manifest, sizes = meta["manifest"], meta["sizes"]
    buffers = []
    for i, size in enumerate(sizes):
        if rank == src:
            b = parts.buffer(i, dev)
        else:
            b = torch.empty(size, dtype=torch.uint8, device=dev)  # staged
        dist.broadcast(b, src)
        buffers.append(b if rank != src else None)
    total = sum(sizes)
    # The whole transfer is here: only now is anything loaded (an error while
    # decoding leaves the live state as it was).
    if int(step) < best:
        staged = _restore(manifest, buffers)
        model.load_state_dict(staged["model"])
        if optimizer is not None and "optimizer" in staged:
            optimizer.load_state_dict(staged["optimizer"])
        for k, o in (extra or {}).items():
            if "extra." + k in staged:
                o.load_state_dict(staged["extra." + k])
    ctx.last_sync_ms = _now_ms() - t0
    ctx.last_sync_bytes = total
    return best


def _default_hook(hook, state, pg):
    """The program's comm hook and state, else torch's allreduce_hook on pg
    (None: the default group); (None, None) for a torch without comm hooks."""
    if hook is not None:
        return hook, state
    try:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    except ImportError:
        return None, None
    return allreduce_hook, pg


def _collective_over(token, cuda):
    """The collective of token returned: over, or over NCCL (cuda) once what
    the current stream holds now is done (a CUDA event, polled)."""
    if cuda and token is not None:
        ev = torch.cuda.Event()
        ev.record()
        _progress._collective_end_when(token, ev.query)
    else:
        _progress._collective_end(token, True)


@contextlib.contextmanager
def _collective(cuda):
    """`with _collective(cuda):` around a collective of ours: the rank is
    inside it (ecoord.progress) until it returns, or over NCCL until the GPU
    did it (_collective_over)."""
    token = _progress._collective_begin()
    try:
        yield
    except BaseException:
        _progress._collective_end(token, False)
        raise
    _collective_over(token, cuda)


def _marked(hook, cuda):
    """hook, with each bucket's collective marked in the progress file from
    the hook's call until the backward pass has waited for every bucket
    (ecoord.progress: a rank silent there waits on a peer).  The end is an
    autograd engine callback, run by the thread of the backward pass, and
    queued from a callback of its own: the engine runs its callbacks in
    order, those queued meanwhile last, so the end comes after DDP's own
    (finalize_backward, which waits for the buckets), whether DDP queued it
    before the first bucket's hook or after the last (torch 1.13).  A
    future's callback would run on torch's communication thread and cost
    each bucket a hand-over of the GIL.  Over NCCL (cuda) DDP's wait only
    makes the current stream wait for the allreduce: the end then records a
    CUDA event on that stream, and the collective is over once the event
    is (ecoord.progress polls it), so a rank whose peer never joined stays
    marked wherever it then waits for the GPU (its next loss.item())."""
    engine = getattr(getattr(torch.autograd, "Variable", None), "_execution_engine", None)

    def marked(st, bucket):
        token = _progress._collective_begin()
        try:
            fut = hook(st, bucket)
        except BaseException:
            _progress._collective_end(token, False)
            raise
        if token is not None:
            def end():
                _collective_over(token, cuda)
            try:
                engine.queue_callback(lambda: engine.queue_callback(end))
            except (AttributeError, RuntimeError):  # outside a backward pass, or no engine
                fut.add_done_callback(lambda f: end())
        return fut
    return marked


def _hook_buckets(ddp, ctx, gen, hook, state):
    """Register on ddp a comm hook that refuses every bucket once gen's group
    is gone (Context.wrap) and marks the others (_marked).  Runs on
    autograd's threads (ctx._gone may abort the group: any thread may)."""
    hook, state = _default_hook(hook, state, gen.pg)
    if hook is None:  # a torch without comm hooks: DDP's own allreduce, unchecked
        return
    hook = _marked(hook, ctx.backend == "nccl")

    def checked(st, bucket):
        why = ctx._gone(gen)
        if why is None:
            return hook(st, bucket)
        fut = torch.futures.Future()
        fut.set_exception(EpochChanged(
            "gradient bucket %d not reduced: the group of epoch %d is gone: %s"
            % (bucket.index(), gen.epoch, why), gen.epoch, ctx._w.latest_epoch()))
        return fut

    ddp.register_comm_hook(state, checked)


def _wrap(model, backend, local_rank, **ddp_args):
    model = _unwrap(model)
    if backend == "nccl" and "device_ids" not in ddp_args:
        ddp_args["device_ids"] = [torch.cuda.current_device()]
    return torch.nn.parallel.DistributedDataParallel(model, **ddp_args)


@contextlib.contextmanager
def _barrier_without_polling():
    """During our init_process_group: torch 1.13 ends it with a store barrier
    that polls the store every 10 ms (_store_based_barrier), 5-10 ms of every
    rebuild.  The same barrier (same key, every rank checked in) with a
    blocking store.wait instead: the last rank to check in sets a key the
    others wait on.  Torch versions without that function are left alone."""
    c10d = dist.distributed_c10d
    orig = getattr(c10d, "_store_based_barrier", None)
    prefix = getattr(c10d, "STORE_BASED_BARRIER_PREFIX", None)
    if orig is None or prefix is None:
        yield
        return

    def barrier(rank, store, timeout, *args, **kwargs):
        key = "%s:%s" % (prefix, c10d._group_count)
        if store.add(key, 1) == c10d.get_world_size():
            store.set(key + ":all", "1")
        store.wait([key + ":all"], timeout)

    c10d._store_based_barrier = barrier
    try:
        yield
    finally:
        c10d._store_based_barrier = orig


def _nccl_failure(exc):
    """NCCL reports a peer's failure only in the error text."""
    msg = str(exc)
    for m in ("NCCL error", "ncclRemoteError", "ncclSystemError", "Connection reset",
              "Connection closed", "aborted"):
        if m in msg:
            return msg.splitlines()[0][:200]
    return None


def _forget_default_group(pg):
    """Take pg, the default group, out of torch.distributed without shutting
    it down: its NCCL communicators are being aborted on a thread of their
    own (_nccl_abort), and torch's shutdown would wait for that abort under
    the group's lock (~0.6 s on the training thread).  The bookkeeping of
    torch >= 2.5's destroy_process_group for the default group, without its
    shutdown() calls.  False when this torch lacks a piece, or the job made
    groups of its own (new_group: theirs to destroy): the caller then
    destroys the group as before."""
    c10d = dist.distributed_c10d
    world = getattr(c10d, "_world", None)
    update = getattr(c10d, "_update_default_pg", None)
    unregister = getattr(c10d, "_unregister_all_process_groups", None)
    names = ("pg_map", "pg_names", "pg_group_ranks", "pg_backend_config", "pg_to_tag",
             "tags_to_pg", "pg_coalesce_state")
    if world is None or update is None or unregister is None or \
            any(not hasattr(world, n) for n in names) or list(world.pg_map) != [pg]:
        return False
    try:
        update(None)
        for n in names:
            getattr(world, n).clear()
        unregister()
        world.group_count = 0
    except Exception as e:
        log.warning("taking the aborted group out of torch.distributed failed (%s): "
                    "destroying it instead", e)
        return False
    return True


def _torch_abort(pg):
    """torch's own abort of an NCCL group, where this torch has one: the
    public helper of torch >= 2.5, else the backend's abort().  torch 1.13
    has none (its watchdog aborts at the group timeout).  Never raises."""
    try:
        fn = getattr(dist.distributed_c10d, "_abort_process_group", None)
        if fn is not None:
            fn(pg)
            return True
        be = pg._get_backend(torch.device("cuda")) if hasattr(pg, "_get_backend") else pg
        return _abort_backend(be)
    except Exception as e:  # an abort must not take the watcher down
        log.warning("torch abort of the NCCL group failed: %s", e)
    return False


def _abort_backend(be, names=("abort", "_abort")):
    """A backend's own abort, by the first of names it has; whether it had
    one.  Raises what the abort raises."""
    for name in names:
        if hasattr(be, name):
            getattr(be, name)()
            return True
    return False
