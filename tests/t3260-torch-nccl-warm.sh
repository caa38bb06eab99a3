#!/bin/sh
# Rules checked: ecoord.torch's NCCL warm-up at boot (_warm_nccl) builds a
# one-rank communicator on the process's device (a ProcessGroupNCCL on a
# HashStore, rank 0 of 1, connected at once where torch can, else by one
# allreduce) and releases it on a thread of its own, after the call has
# returned (the training thread never waits for NCCL's teardown); it is off
# with ECOORD_WORKER_NCCL_WARM=0 (nothing tried, nothing said); one that
# fails says so in a warning and never raises.  Debian's torch has no NCCL:
# the sequence is checked against a stand-in for torch's ProcessGroupNCCL,
# the failure against this torch as it is.  On a GPU the GPU suite's
# torch-nccl-smoke runs the real one (tests/gpu/run.sh).
set -u
PY=/usr/bin/python3
if ! $PY -c 'import torch.distributed' 2> /dev/null; then
    echo "1..0 # SKIP Debian's python3-torch is not installed (apt-get install python3-torch)"
    exit 0
fi
SRCDIR=${EC_SRCDIR:-${srcdir:-.}}
echo "1..4"
PYTHONPATH="$SRCDIR/worker/python" OMP_NUM_THREADS=1 $PY - << 'EOF'
import logging
import os
import threading
import time

import torch
import torch.distributed as dist

import ecoord.torch as et

records = []


class Catch(logging.Handler):
    def emit(self, r):
        records.append((r.levelname, r.getMessage()))


logging.getLogger("ecoord").addHandler(Catch())
logging.getLogger("ecoord").setLevel(logging.DEBUG)


def tap(n, ok, what):
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what), flush=True)


class StandIn:
    """torch's ProcessGroupNCCL as _warm_nccl uses it: what was called, on
    which thread; abort() holds until the test lets it go."""
    made = []

    def __init__(self, store, rank, size):
        self.store, self.rank, self.size = store, rank, size
        self.calls = []
        self.let_go = threading.Event()
        self.aborted = threading.Event()
        StandIn.made.append(self)

    def abort(self):
        self.calls.append(("abort", threading.get_ident()))
        self.let_go.wait(10)
        self.aborted.set()


class Eager(StandIn):
    def eager_connect_single_device(self, device):
        self.calls.append(("eager", threading.get_ident(), device))


class Work:
    def wait(self):
        return True


class Lazy(StandIn):
    def allreduce(self, tensors):
        self.calls.append(("allreduce", threading.get_ident(), tensors[0].numel()))
        return Work()


real = getattr(dist, "ProcessGroupNCCL", None)
me = threading.get_ident()
dev = torch.device("cpu")

# 1: the sequence, where torch connects at once
dist.ProcessGroupNCCL = Eager
records.clear()
t0 = time.monotonic()
ms = et._warm_nccl(dev)
returned = time.monotonic() - t0
pg = StandIn.made[-1]
held = not pg.aborted.is_set()  # its release still waits for the test: the call did not
pg.let_go.set()
released = pg.aborted.wait(10)
calls = [c[0] for c in pg.calls]
ok = (isinstance(pg.store, dist.HashStore) and (pg.rank, pg.size) == (0, 1) and
      calls == ["eager", "abort"] and pg.calls[0][1] == me and pg.calls[0][2] == dev and
      pg.calls[1][1] != me and held and released and ms is not None and returned < 5 and
      any(lv == "INFO" and m.startswith("+nccl warmed up in") for lv, m in records))
tap(1, ok, "a one-rank communicator (HashStore, rank 0 of 1) connected on the caller's device, "
    "released on another thread after the call returned (%s; %s)" % (calls, records[-1:]))

# 2: a torch without eager connection: one allreduce connects it
dist.ProcessGroupNCCL = Lazy
records.clear()
ms = et._warm_nccl(dev)
pg = StandIn.made[-1]
pg.let_go.set()
released = pg.aborted.wait(10)
calls = [c[0] for c in pg.calls]
tap(2, ms is not None and calls == ["allreduce", "abort"] and pg.calls[0][1] == me and
    pg.calls[0][2] == 1 and released,
    "without eager connection one allreduce of one element connects it (%s)" % calls)

# 3: off
os.environ["ECOORD_WORKER_NCCL_WARM"] = "0"
n = len(StandIn.made)
records.clear()
ms = et._warm_nccl(dev)
tap(3, ms is None and len(StandIn.made) == n and not records,
    "ECOORD_WORKER_NCCL_WARM=0: nothing built, nothing said")
del os.environ["ECOORD_WORKER_NCCL_WARM"]

# 4: this torch as it is (no NCCL): a warning, no exception
if real is None:
    del dist.ProcessGroupNCCL
else:
    dist.ProcessGroupNCCL = real
records.clear()
try:
    ms, raised = et._warm_nccl(dev), None
except Exception as e:  # the rule: never
    ms, raised = None, e
warned = [m for lv, m in records if lv == "WARNING"]
tap(4, raised is None and ms is None and len(warned) == 1 and
    "nccl warm-up (a one-rank communicator at boot) failed" in warned[0],
    "a warm-up that fails says so and does not raise (%s)" % (warned or raised))
EOF
