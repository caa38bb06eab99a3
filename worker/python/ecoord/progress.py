"""Progress reports for hang and straggler detection, from Python.

    import ecoord.progress as progress
    for batch in loader:
        train_step(batch)
        progress.step()              # once per training step: a few stores, no system call
    with progress.paused():          # a checkpoint, an evaluation: no hang while it lasts
        save_checkpoint()

The same as the C library's ecw_progress_step/pause/resume (worker/ecw.h), in pure
Python: `ecoord launch` gives every process a small file (ECOORD_PROGRESS_FILE,
layout in coord/core/progress_file.h) that this module maps and stores into; the agent
samples it and the leader acts when the job stops progressing for --hang_timeout
(on by default, 300 s, for programs that report).  Needs neither libecworker nor
torch; without an agent (the variable unset) every call does nothing.

ecoord.torch also says here when a rank waits on its peers inside a collective
it handed torch (DDP's gradient buckets, Context.all_reduce, Context.sync), as
the C library does for its own: a rank silent there waits on someone, and a
rank silent outside is the one the leader names when the job stops.
"""
import contextlib
import ctypes
import mmap
import os
import struct
import threading
import time

__all__ = ["step", "pause", "resume", "paused", "active"]

_MAGIC = 0x45435047
_VERSION = 1
_SIZE = 64
# offsets in the file (coord/core/progress_file.h)
_OFF_MAGIC, _OFF_VERSION, _OFF_STEP, _OFF_STEP_NS = 0, 4, 8, 16
_OFF_COLL_DONE_NS, _OFF_COLL_ENTER_NS = 24, 32
_OFF_PAUSED_NS, _OFF_RESUMED_NS = 40, 48

_map = None
_tried = False
_steps = 0
# The words as ctypes objects over the mapping: each store is one aligned
# 8-byte store made by C, never torn for the agent reading it.
_w = {}
# Collectives in flight (ecoord.torch's buckets finish on torch's threads):
# how many, and the era they were started in (a group aborted ends its era).
_coll_lock = threading.Lock()
_inside = 0
_era = 0
# Collectives whose end only a poll tells (a CUDA event's query): (token,
# done), and the thread polling them while there are any.
_pending = []
_poller = None
_POLL_S = 0.1


def _get():
    if _tried:
        return _map
    with _coll_lock:
        return _map_it()


def _map_it():
    global _map, _tried, _steps
    if _tried:
        return _map
    _tried = True
    path = os.environ.get("ECOORD_PROGRESS_FILE")
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        m = mmap.mmap(fd, _SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    _steps = struct.unpack_from("<Q", m, _OFF_STEP)[0]
    for name, off, typ in (("step", _OFF_STEP, ctypes.c_uint64),
                           ("step_ns", _OFF_STEP_NS, ctypes.c_int64),
                           ("coll_done_ns", _OFF_COLL_DONE_NS, ctypes.c_int64),
                           ("coll_enter_ns", _OFF_COLL_ENTER_NS, ctypes.c_int64),
                           ("paused_ns", _OFF_PAUSED_NS, ctypes.c_int64),
                           ("resumed_ns", _OFF_RESUMED_NS, ctypes.c_int64)):
        _w[name] = typ.from_buffer(m, off)
    ctypes.c_uint32.from_buffer(m, _OFF_VERSION).value = _VERSION
    ctypes.c_uint32.from_buffer(m, _OFF_MAGIC).value = _MAGIC  # last: the agent reads steps now
    _map = m
    return m


def active():
    """Whether an agent gave this process a progress file."""
    return _get() is not None


def step():
    """One training step completed."""
    global _steps
    m = _get()
    if m is None:
        return
    _steps += 1
    _w["step_ns"].value = time.monotonic_ns()
    _w["step"].value = _steps


def pause():
    """A long pause that is not a hang begins (a checkpoint being written)."""
    m = _get()
    if m is not None:
        _w["paused_ns"].value = time.monotonic_ns()


def resume():
    """The pause ended; silence is counted from now."""
    m = _get()
    if m is None:
        return
    t = time.monotonic_ns()
    _w["resumed_ns"].value = t
    _w["paused_ns"].value = 0
    _w["step_ns"].value = t


@contextlib.contextmanager
def paused():
    """`with paused():` around a checkpoint."""
    pause()
    try:
        yield
    finally:
        resume()


# ---- collectives (ecoord.torch's; not part of the API) -----------------------------------

def _collective_begin():
    """A collective was handed to torch: this rank waits on its peers until
    _collective_end(token, ok).  Returns the token (None without an agent)."""
    global _inside
    if _get() is None:
        return None
    with _coll_lock:
        _inside += 1
        if _inside == 1:
            _w["coll_enter_ns"].value = time.monotonic_ns()
        return _era


def _collective_end(token, ok):
    """The collective of token is over (ok: it completed, which is progress).
    Any thread; a collective of an era forgotten since changes nothing."""
    global _inside
    if token is None:
        return
    with _coll_lock:
        if token != _era or _inside == 0:
            return
        _inside -= 1
        if ok:
            _w["coll_done_ns"].value = time.monotonic_ns()
        if _inside == 0:
            _w["coll_enter_ns"].value = 0


def _collectives_forgotten():
    """The group the collectives in flight ran on is gone (aborted): none of
    them holds this rank inside a collective any more, even one torch never
    ends."""
    global _inside, _era
    if _get() is None:
        return
    with _coll_lock:
        _era += 1
        _inside = 0
        _pending.clear()
        _w["coll_enter_ns"].value = 0


def _collective_end_when(token, done):
    """The collective of token ends once done() returns true (or raises):
    a thread of this module polls it every 0.1 s, long enough after it
    for the agent, which samples every 0.2 s and judges silences of
    seconds.  For work queued on a GPU (done: a CUDA event's query)."""
    global _poller
    if token is None:
        return
    with _coll_lock:
        if token != _era:
            return
        _pending.append((token, done))
        if _poller is None:
            _poller = threading.Thread(target=_poll, name="ecoord-progress", daemon=True)
            _poller.start()


def _poll():
    global _poller
    while True:
        time.sleep(_POLL_S)
        with _coll_lock:
            if not _pending:
                _poller = None  # under the lock: the next _collective_end_when starts one
                return
            items = list(_pending)
        over = []
        for item in items:
            try:
                if item[1]():
                    over.append(item)
            except Exception:  # the query failed: nothing more to wait for
                over.append(item)
        with _coll_lock:
            over = [x for x in over if x in _pending]
            for x in over:
                _pending.remove(x)
        for token, _ in over:
            _collective_end(token, True)
