"""Progress reports for hang and straggler detection, from Python.

    import ecoord.progress as progress
    for batch in loader:
        train_step(batch)
        progress.step()              # once per training step: a few stores, no system call
    with progress.paused():          # a checkpoint, an evaluation: no hang while it lasts
        save_checkpoint()

The same as the C library's ecw_progress_step/pause/resume (worker/ecw.h), in pure
Python: `ecoord launch` gives every process a small file (ECOORD_PROGRESS_FILE,
layout in coord/progress_file.h) that this module maps and stores into; the agent
samples it and the leader acts when the job stops progressing for --hang_timeout
(on by default, 300 s, for programs that report).  Needs neither libecworker nor
torch; without an agent (the variable unset) every call does nothing.
"""
import contextlib
import mmap
import os
import struct
import time

__all__ = ["step", "pause", "resume", "paused", "active"]

_MAGIC = 0x45435047
_VERSION = 1
_SIZE = 64
# offsets in the file (coord/progress_file.h)
_OFF_MAGIC, _OFF_VERSION, _OFF_STEP, _OFF_STEP_NS = 0, 4, 8, 16
_OFF_PAUSED_NS, _OFF_RESUMED_NS = 40, 48

_map = None
_tried = False
_steps = 0


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
    struct.pack_into("<I", m, _OFF_VERSION, _VERSION)
    struct.pack_into("<I", m, _OFF_MAGIC, _MAGIC)  # last: from here on the agent reads steps
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
    struct.pack_into("<q", m, _OFF_STEP_NS, time.monotonic_ns())
    struct.pack_into("<Q", m, _OFF_STEP, _steps)


def pause():
    """A long pause that is not a hang begins (a checkpoint being written)."""
    m = _get()
    if m is not None:
        struct.pack_into("<q", m, _OFF_PAUSED_NS, time.monotonic_ns())


def resume():
    """The pause ended; silence is counted from now."""
    m = _get()
    if m is None:
        return
    t = time.monotonic_ns()
    struct.pack_into("<q", m, _OFF_RESUMED_NS, t)
    struct.pack_into("<q", m, _OFF_PAUSED_NS, 0)
    struct.pack_into("<q", m, _OFF_STEP_NS, t)


@contextlib.contextmanager
def paused():
    """`with paused():` around a checkpoint."""
    pause()
    try:
        yield
    finally:
        resume()
