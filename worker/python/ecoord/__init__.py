"""ecoord: Python bindings of the ecoord worker library (libecworker).

    import ecoord.torch          # PyTorch training that rebuilds in place
    ecoord.Worker(...)           # the worker library's handle (ctypes)

Everything about epochs, ranks, the fence and etcd is libecworker's (worker/ecw.h);
this package is a thin ctypes layer on it.  The library is found through
$ECOORD_LIBECWORKER, else the build tree this package sits in, else where
`make install` put it, else the loader's search path.
"""
from ._ecw import Error, Worker, load_library, library_path, strerror  # noqa: F401
from ._ecw import BACKEND_AUTO, BACKEND_GLOO, BACKEND_NCCL, BACKEND_NONE  # noqa: F401

__all__ = ["Error", "Worker", "load_library", "library_path", "strerror", "BACKEND_AUTO",
           "BACKEND_GLOO", "BACKEND_NCCL", "BACKEND_NONE"]
