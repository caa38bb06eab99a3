#!/usr/bin/python3
"""bench_torch_sync: what ecoord.torch's sync() of a model and its optimizer
costs against one broadcast of the same bytes (the link's bandwidth), and
against the pickled transfer it replaced (torch.save of the whole state,
broadcast, torch.load).  Prints figures; asserts nothing.

    tests/bench/bench_torch_sync.py [--sizes-mb 4,64,256] [--reps 5] [--backend gloo|nccl]

Two processes on this host (Gloo over loopback; --backend nccl: two GPUs, or
one GPU with NCCL_HOSTID set per rank by the script, see
../shared/docs/collectives.md "Several ranks on one GPU").  The state: one
Linear layer of the size asked for and SGD with momentum, one step taken, so
the optimizer holds a momentum buffer as large as the parameters (the state
is twice the parameters).  Rank 1 is behind and receives.  Each figure is
the median of --reps runs, in ms, and the rate in MB/s of the state's bytes.
"""
import argparse
import io
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "worker", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import ecoord.torch as et  # noqa: E402


class _Ctx:  # what _sync() reads of a Context
    def __init__(self, backend):
        self.backend = backend
        self.last_sync_ms = None
        self.last_sync_bytes = None


def _pickled_sync(model, opt, step, dev):
    """The transfer sync() made before: torch.save of every state dict,
    two broadcasts of the bytes, torch.load (staged)."""
    rank = dist.get_rank()
    if rank == 0:
        buf = io.BytesIO()
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, buf)
        payload = torch.frombuffer(bytearray(buf.getbuffer()), dtype=torch.uint8).to(dev)
        n = torch.tensor([payload.numel()], dtype=torch.int64, device=dev)
    else:
        n = torch.zeros(1, dtype=torch.int64, device=dev)
    dist.broadcast(n, 0)
    if rank != 0:
        payload = torch.empty(int(n.item()), dtype=torch.uint8, device=dev)
    dist.broadcast(payload, 0)
    if rank != 0:
        staged = torch.load(io.BytesIO(payload.cpu().numpy().tobytes()), map_location="cpu")
        model.load_state_dict(staged["model"])
        opt.load_state_dict(staged["optimizer"])


def _median(v):
    v = sorted(v)
    return v[len(v) // 2]


def _run(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if args.backend == "nccl":
        os.environ.setdefault("NCCL_HOSTID", "bench-rank-%d" % rank)
        torch.cuda.set_device(rank % torch.cuda.device_count())
        dev = torch.device("cuda", torch.cuda.current_device())
    else:
        dev = torch.device("cpu")
    dist.init_process_group(args.backend, rank=rank, world_size=2)
    ctx = _Ctx(args.backend)
    rows = []
    for mb in args.sizes_mb:
        n = max(1, mb * (1 << 20) // 4 // 2)   # floats: half the state is momentum
        torch.manual_seed(rank)                 # different parameters on each rank
        model = torch.nn.Linear(n, 1, bias=False).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        model(torch.ones(1, n, device=dev)).sum().backward()
        opt.step()
        state_bytes = 2 * n * 4
        raw = torch.empty(state_bytes, dtype=torch.uint8, device=dev)
        t_raw, t_new, t_old = [], [], []
        for _ in range(args.reps):
            dist.barrier()
            t = time.monotonic()
            dist.broadcast(raw, 0)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_raw.append((time.monotonic() - t) * 1000)
            dist.barrier()
            t = time.monotonic()
            et._sync(model, opt, 5 if rank == 0 else -1, None, ctx)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_new.append((time.monotonic() - t) * 1000)
            dist.barrier()
            t = time.monotonic()
            _pickled_sync(model, opt, 5, dev)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_old.append((time.monotonic() - t) * 1000)
        # the receiver holds the sender's parameters and momentum
        w = model.weight.detach().clone()
        dist.broadcast(w, 0)
        same = torch.equal(w, model.weight.detach())
        rows.append((mb, state_bytes, _median(t_raw), _median(t_new), _median(t_old), same))
        del model, opt, raw
    if rank == 1:
        print("state   bytes        broadcast   sync()            pickled (before)   state equal")
        for mb, b, r, s, o, same in rows:
            print("%4d MB %11d %9.1f ms %9.1f ms %6.0f MB/s %9.1f ms %6.0f MB/s   %s" %
                  (mb, b, r, s, b / 1e3 / s, o, b / 1e3 / o, "yes" if same else "NO"))
        sys.stdout.flush()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-mb", default="4,64,256")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    a = ap.parse_args()
    a.sizes_mb = [int(x) for x in a.sizes_mb.split(",")]
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    print("bench_torch_sync: 2 processes, %s, torch %s, load %s" %
          (a.backend, torch.__version__, open("/proc/loadavg").read().split()[:3]))
    mp.spawn(_run, args=(a, port), nprocs=2, join=True)


if __name__ == "__main__":
    main()
