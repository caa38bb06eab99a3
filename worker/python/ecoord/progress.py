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
"""
import contextlib
import ctypes
import mmap
import os
import struct
import time

__all__ = ["step", "pause", "resume", "paused", "active"]

_MAGIC = 0x45435047
_VERSION = 1
_SIZE = 64
# offsets in the file (coord/core/progress_file.h)
_OFF_MAGIC, _OFF_VERSION, _OFF_STEP, _OFF_STEP_NS = 0, 4, 8, 16
_OFF_PAUSED_NS, _OFF_RESUMED_NS = 40, 48

_map = None
_tried = False
_steps = 0
# The words as ctypes objects over the mapping: each store is one aligned
# 8-byte store made by C, never torn for the agent reading it.
_w = {}


def _get():
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
