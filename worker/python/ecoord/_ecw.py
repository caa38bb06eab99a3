"""ctypes binding of libecworker (worker/ecw.h): the only way this package
talks to etcd.  Epochs, rank claims, the fence and the per-epoch keys are the
C library's; nothing here re-implements them.

Every foreign call goes through ctypes.CDLL, which releases the GIL for its
duration, so a thread blocked in ecw_wait_epoch or ecw_epoch_get never holds
up the training thread.
"""
import ctypes
import ctypes.util
import glob
import os

__all__ = ["Error", "Worker", "load_library", "BACKEND_AUTO", "BACKEND_GLOO", "BACKEND_NCCL",
           "BACKEND_NONE"]

# ---- errors: ECW_ERRNO_MAP, same values ---------------------------------------------------

_CODES = {
    "EINVAL": -1, "ENOMEM": -2, "EUNAVAILABLE": -3, "ETIMEDOUT": -4, "ENOTFOUND": -5,
    "ECOMPACTED": -6, "EUNAUTH": -7, "ETOOLARGE": -8, "ECANCELED": -9, "EPROTO": -10,
    "EINTERNAL": -11, "EPERM": -12, "ENOTLEADER": -13, "EFENCED": -14, "EEPOCHCHANGED": -15,
    "EABORTED": -16, "ECORRUPT": -17, "EEXIST": -18, "EIO": -19, "ESYS": -20,
    "EUNCONFIRMED": -21, "ERESTART": -22,
}
globals().update({"ECW_" + k: v for k, v in _CODES.items()})  # ECW_EINVAL ... ECW_EUNCONFIRMED
__all__ += ["ECW_" + k for k in _CODES]
# The ones this module tests, spelled out for readers and linters.
ECW_ETIMEDOUT, ECW_ETOOLARGE, ECW_EABORTED = _CODES["ETIMEDOUT"], _CODES["ETOOLARGE"], _CODES["EABORTED"]
ECW_EUNCONFIRMED = _CODES["EUNCONFIRMED"]

BACKEND_AUTO, BACKEND_GLOO, BACKEND_NCCL, BACKEND_NONE = 0, 1, 2, 3
LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR = 0, 1, 2, 3

EPOCH_KEY_MAX = 64
EPOCH_VALUE_MAX = 64 * 1024
ERRMSG_MAX = 512


class Error(Exception):
    """A libecworker call failed: code is the negative ECW_* value, name its
    ECW_* name, and the message says what happened and what to do."""

    def __init__(self, code, msg, call=None):
        self.code = code
        self.name = _lib_err_name(code)
        self.call = call
        super().__init__("%s%s: %s" % (call + ": " if call else "", self.name, msg))


class _Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * ERRMSG_MAX)]


LOG_CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class Options(ctypes.Structure):
    """ecw_options_t, field for field (checked against the C compiler's
    layout by tests/t3250-python-abi.sh).  ECW_OPTIONS_INIT's values."""
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("from_env", ctypes.c_int),
        ("backend", ctypes.c_int),
        ("etcd_endpoints", ctypes.c_char_p),
        ("etcd_prefix", ctypes.c_char_p),
        ("job_id", ctypes.c_char_p),
        ("node_id", ctypes.c_char_p),
        ("local_rank", ctypes.c_int),
        ("start_epoch", ctypes.c_uint64),
        ("lease", ctypes.c_int64),
        ("host", ctypes.c_char_p),
        ("device", ctypes.c_int),
        ("timeout_ms", ctypes.c_int),
        ("rebuild_timeout_ms", ctypes.c_int),
        ("epoch_wait_ms", ctypes.c_int),
        ("log_cb", LOG_CB),
        ("log_arg", ctypes.c_void_p),
        ("log_level", ctypes.c_int),
        ("etcd_cacert", ctypes.c_char_p),
        ("etcd_cert", ctypes.c_char_p),
        ("etcd_key", ctypes.c_char_p),
        ("etcd_user", ctypes.c_char_p),
        ("etcd_password_file", ctypes.c_char_p),
        ("suspect_after_ms", ctypes.c_int),
        ("lease_ttl_ms", ctypes.c_int),
        ("lease_margin_ms", ctypes.c_int),
        ("cuda_libdir", ctypes.c_char_p),
        ("nccl_rebuild", ctypes.c_char_p),
        ("nccl_roots", ctypes.c_int),
        ("nccl_scalable_min", ctypes.c_int),
        ("nccl_warm", ctypes.c_int),
    ]

    def __init__(self, **kw):
        super().__init__()
        self.size = ctypes.sizeof(Options)
        self.from_env = 1
        self.backend = BACKEND_AUTO
        self.local_rank = -1
        self.device = -1
        self.nccl_warm = -1
        self.log_level = LOG_INFO
        for k, v in kw.items():
            setattr(self, k, v.encode() if isinstance(v, str) else v)


# ---- finding the library --------------------------------------------------------------------

SONAME = "libecworker.so.0"
_here = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    """Where libecworker is looked for, in order: $ECOORD_LIBECWORKER; the
    build tree this package sits in (worker/python/ecoord -> worker/.libs);
    the libdir `make install` recorded in _config.py (relative to the
    installed package first, so a DESTDIR staging copy finds its own); the
    loader's search path."""
    env = os.environ.get("ECOORD_LIBECWORKER")
    if env:
        yield env
        return
    libs = os.path.normpath(os.path.join(_here, "..", "..", "..", ".libs"))
    yield os.path.join(libs, SONAME)
    for p in sorted(glob.glob(os.path.join(libs, "libecworker.so*"))):
        yield p
    try:
        from . import _config
        if getattr(_config, "LIBDIR_FROM_PACKAGE", None):
            yield os.path.normpath(os.path.join(_here, _config.LIBDIR_FROM_PACKAGE, SONAME))
        if getattr(_config, "LIBDIR", None):
            yield os.path.join(_config.LIBDIR, SONAME)
    except ImportError:
        pass
    yield SONAME
    found = ctypes.util.find_library("ecworker")
    if found:
        yield found


_lib = None
_lib_path = None


def load_library():
    """The loaded libecworker (ctypes.CDLL), loading it on first use.
    Raises OSError naming every place it looked."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        _declare(lib)
        _lib, _lib_path = lib, path
        return lib
    raise OSError("cannot load libecworker; tried: %s (build it with `make`, install it with "
                  "`make install`, or set ECOORD_LIBECWORKER to its path)" % "; ".join(tried))


def library_path():
    load_library()
    return _lib_path


def _declare(lib):
    P, I, U64, SZ = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_size_t
    E = ctypes.POINTER(_Error)
    sig = {
        "ecw_init": (I, [ctypes.POINTER(Options), ctypes.POINTER(P), E]),
        "ecw_finalize": (None, [P]),
        "ecw_rebuild": (I, [P, E]),
        "ecw_epoch": (U64, [P]),
        "ecw_rank": (I, [P]),
        "ecw_world_size": (I, [P]),
        "ecw_local_rank": (I, [P]),
        "ecw_nnodes": (I, [P]),
        "ecw_member_index": (I, [P]),
        "ecw_nproc": (I, [P]),
        "ecw_node_id": (ctypes.c_char_p, [P]),
        "ecw_latest_epoch": (U64, [P]),
        "ecw_epoch_pending": (I, [P]),
        "ecw_confirmed": (I, [P]),
        "ecw_wait_epoch": (I, [P, U64, I, ctypes.POINTER(U64), E]),
        "ecw_epoch_put": (I, [P, ctypes.c_char_p, ctypes.c_char_p, SZ, E]),
        "ecw_epoch_get": (I, [P, ctypes.c_char_p, ctypes.c_char_p, SZ, ctypes.POINTER(SZ), I, E]),
        "ecw_strerror": (ctypes.c_char_p, [I]),
        "ecw_err_name": (ctypes.c_char_p, [I]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    # Optional, newer: a program's own collective failed (see Worker.report_failure).
    for name, (res, args) in {"ecw_report_failure": (I, [P, E])}.items():
        f = getattr(lib, name, None)
        if f is not None:
            f.restype, f.argtypes = res, args


def _lib_err_name(code):
    try:
        return load_library().ecw_err_name(code).decode()
    except OSError:
        for k, v in _CODES.items():
            if v == code:
                return "ECW_" + k
        return "ECW_UNKNOWN"


def strerror(code):
    return load_library().ecw_strerror(code).decode()


# ---- the handle -------------------------------------------------------------------------------

class Worker:
    """An ecw_t: follows the job's epochs.  Thread rules are ecw.h's: init,
    rebuild and finalize on one thread; the rest from any thread."""

    def __init__(self, backend=BACKEND_NONE, log=None, log_level=LOG_WARN, **opts):
        lib = load_library()
        self._lib = lib
        self._h = None
        # Kept alive as long as the handle: the library calls it from its threads.
        self._log_cb = LOG_CB(lambda lvl, msg, arg: log(lvl, msg.decode(errors="replace"))) \
            if log else LOG_CB()
        o = Options(backend=backend, log_level=log_level, **opts)
        o.log_cb = self._log_cb
        h = ctypes.c_void_p()
        err = _Error()
        rc = lib.ecw_init(ctypes.byref(o), ctypes.byref(h), ctypes.byref(err))
        if rc < 0:
            raise Error(rc, err.msg.decode(errors="replace"), "ecw_init")
        self._h = h

    def _check(self, rc, err, call):
        if rc < 0:
            raise Error(rc, err.msg.decode(errors="replace") or strerror(rc), call)
        return rc

    def finalize(self):
        h, self._h = self._h, None
        if h:
            self._lib.ecw_finalize(h)

    def rebuild(self):
        err = _Error()
        self._check(self._lib.ecw_rebuild(self._h, ctypes.byref(err)), err, "ecw_rebuild")

    @property
    def epoch(self):
        return self._lib.ecw_epoch(self._h)

    @property
    def rank(self):
        return self._lib.ecw_rank(self._h)

    @property
    def world_size(self):
        return self._lib.ecw_world_size(self._h)

    @property
    def local_rank(self):
        return self._lib.ecw_local_rank(self._h)

    @property
    def nnodes(self):
        return self._lib.ecw_nnodes(self._h)

    @property
    def member_index(self):
        return self._lib.ecw_member_index(self._h)

    @property
    def nproc(self):
        return self._lib.ecw_nproc(self._h)

    @property
    def node_id(self):
        s = self._lib.ecw_node_id(self._h)
        return s.decode() if s else None

    def latest_epoch(self):
        return self._lib.ecw_latest_epoch(self._h)

    def epoch_pending(self):
        return bool(self._lib.ecw_epoch_pending(self._h))

    def confirmed(self):
        return bool(self._lib.ecw_confirmed(self._h))

    def wait_epoch(self, after, timeout_ms):
        """(rc, latest): rc is 0, ECW_ETIMEDOUT, ECW_EUNCONFIRMED or
        ECW_EABORTED; any other code raises Error."""
        latest = ctypes.c_uint64(0)
        err = _Error()
        rc = self._lib.ecw_wait_epoch(self._h, after, int(timeout_ms), ctypes.byref(latest),
                                      ctypes.byref(err))
        if rc in (0, ECW_ETIMEDOUT, ECW_EUNCONFIRMED, ECW_EABORTED):
            return rc, latest.value
        return self._check(rc, err, "ecw_wait_epoch"), latest.value

    def report_failure(self):
        """Tell the library that the program's own collective of the current
        epoch failed, so that it probes the members' agents and reports the
        silent ones, as its own failed collectives do: a node killed with its
        agent is then evicted in tens of ms instead of at its lease's expiry.
        Needs ecw_report_failure (not in every libecworker): returns False
        when the library lacks it, True when it was called; never raises."""
        f = getattr(self._lib, "ecw_report_failure", None)
        if f is None or not self._h:
            return False
        err = _Error()
        f(self._h, ctypes.byref(err))
        return True

    def epoch_put(self, name, value):
        if isinstance(value, str):
            value = value.encode()
        err = _Error()
        self._check(self._lib.ecw_epoch_put(self._h, name.encode(), value, len(value),
                                            ctypes.byref(err)), err, "ecw_epoch_put")

    def epoch_get(self, name, timeout_ms, cap=4096):
        buf = ctypes.create_string_buffer(cap)
        n = ctypes.c_size_t(0)
        err = _Error()
        rc = self._lib.ecw_epoch_get(self._h, name.encode(), buf, cap, ctypes.byref(n),
                                     int(timeout_ms), ctypes.byref(err))
        if rc == ECW_ETOOLARGE and n.value > cap:
            return self.epoch_get(name, timeout_ms, n.value)
        self._check(rc, err, "ecw_epoch_get")
        return buf.raw[:n.value]

    def __del__(self):
        try:
            self.finalize()
        except Exception:
            pass
