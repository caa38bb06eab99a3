#!/usr/bin/python3
"""torch_ddp: a DistributedDataParallel trainer that survives membership
changes in place (ecoord.torch).

    torch_ddp.py [--steps N] [--delay-ms MS] [--hidden H] [--lr X]
    (env: TORCH_DDP_STEPS, TORCH_DDP_DELAY_MS, TORCH_DDP_BACKEND=gloo|nccl;
     tests: TORCH_DDP_HANG=FILE, the process that finds FILE before a step
     removes it and sleeps forever outside any collective, as a rank hung
     in its data loading)

Under `ecoord launch --rebuild=inprocess` a node that dies, leaves or joins
never restarts the others: they rebuild torch's process group for the new
epoch, take the model and optimizer state from the most advanced member and
go on from its step.  Under `--rebuild=restart` or plain torchrun the same
program runs with an ordinary env:// group.

A small MLP fits a fixed synthetic regression (seed 0: every rank starts
from the same model; batch b of rank r is a pure function of (step, r)).

One line per step on stdout (tests parse them):
    torch_ddp step=S epoch=E rank=R world=W loss=L pid=P cs=C
and with TORCH_DDP_TIMESTAMPS=1 a last field t=<wall clock ms> (benchmarks).
(L: the mean loss over the ranks; C: CRC-32 of the parameters after the
step, equal on every rank when the state recovery was exact: momentum
included, since a rank without it would update differently.)
after each rebuild, once the first step in the new group is done:
    torch_ddp rebuilt epoch=E rank=R world=W step=S detect_at=T epoch_ms=A group_ms=B
              sync_ms=C step_ms=D total_ms=A+B+C+D at=T' pid=P why=...
(detect_at, at: wall clock ms of the first notice of the change and of the
first step done; epoch_ms: notice -> new epoch joined; group_ms: its store
and process group; sync_ms: state recovery and DDP wrap; step_ms: the first
step.)  At the end:  torch_ddp done steps=S pid=P
Exit 0 after --steps steps, 1 on an error.
"""
import argparse
import os
import sys
import time
import zlib

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))  # the build tree's ecoord package

import torch  # noqa: E402

import ecoord.torch as et  # noqa: E402


def batch(step, rank, n=64, dim=8):
    g = torch.Generator().manual_seed(step * 1009 + rank)
    x = torch.randn(n, dim, generator=g)
    y = (x * torch.arange(1, dim + 1, dtype=torch.float32) / dim).sum(1, keepdim=True).sin()
    return x, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=int(os.environ.get("TORCH_DDP_STEPS", "200")))
    ap.add_argument("--delay-ms", type=float,
                    default=float(os.environ.get("TORCH_DDP_DELAY_MS", "0")))
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("TORCH_DDP_TIMEOUT", "300")),
                    help="the process group's timeout, s")
    a = ap.parse_args()
    pid = os.getpid()
    stamps = os.environ.get("TORCH_DDP_TIMESTAMPS") == "1"
    # The boot: everything that needs no group comes before init(), which
    # says this process is ready (a joiner's node is admitted only then, so
    # the running members never wait for any of this).
    backend = os.environ.get("TORCH_DDP_BACKEND", "gloo")
    dev = torch.device("cpu")
    if backend == "nccl":  # this process's GPU: local rank i uses the i-th visible one
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) %
                           torch.cuda.device_count())
        torch.cuda.set_device(dev)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, a.hidden), torch.nn.Tanh(),
                                torch.nn.Linear(a.hidden, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    # One forward and backward pass, thrown away: the first one loads the
    # kernels and makes the GPU libraries' handles (~0.35 s on an H200), which
    # a joiner's peers would otherwise wait for in its first step.
    x, y = (t.to(dev) for t in batch(0, 0))
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.zero_grad()
    ctx = et.init(backend=backend, timeout=a.timeout)
    # A process started into a running job (a joiner, a restarted rank)
    # holds no state: -1 makes it take the live one.
    fresh = int(os.environ.get("ECOORD_EPOCH", "1")) <= 1 and \
        int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) == 0
    step = 0 if fresh else -1
    ddp, rebuild, timing = None, False, None
    hang = os.environ.get("TORCH_DDP_HANG")
    while step < a.steps:
        if hang and os.path.exists(hang):
            try:
                os.remove(hang)  # one process takes it
                while True:
                    time.sleep(3600)
            except FileNotFoundError:
                pass
        try:
            if rebuild:
                timing = dict(ctx.rebuild())
                rebuild = False
            if ddp is None:
                t = time.monotonic()
                step = max(ctx.sync(model, opt, step), 0)
                t1 = time.monotonic()
                ddp = ctx.wrap(model)
                if timing is not None:
                    timing["sync_ms"] = (time.monotonic() - t) * 1000
                    timing["wrap_ms"] = (time.monotonic() - t1) * 1000
            t = time.monotonic()
            with ctx.step():
                x, y = (t.to(dev) for t in batch(step, ctx.rank))
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(ddp(x), y)
                loss.backward()
                lsum = loss.detach().clone()
                ctx.all_reduce(lsum)  # not started on a group that is gone
                # No collective after the update: a membership change can
                # cut a collective on some ranks only, and a rank that
                # applied the update must also count the step, or two ranks
                # would hold the same step with different parameters and
                # ctx.sync() would see nothing to repair.
                opt.step()
            step += 1
            cs = zlib.crc32(torch.cat([p.detach().reshape(-1) for p in model.parameters()])
                            .cpu().numpy().tobytes())
            print("torch_ddp step=%d epoch=%d rank=%d world=%d loss=%.6f pid=%d cs=%08x%s" %
                  (step, ctx.epoch, ctx.rank, ctx.world_size, lsum.item() / ctx.world_size, pid,
                   cs, " t=%d" % int(time.time() * 1000) if stamps else ""), flush=True)
            if timing is not None:
                timing["step_ms"] = (time.monotonic() - t) * 1000
                tot = timing["epoch_ms"] + timing["group_ms"] + timing.get("sync_ms", 0) + \
                    timing["step_ms"]
                print("torch_ddp rebuilt epoch=%d rank=%d world=%d step=%d detect_at=%d "
                      "epoch_ms=%.1f group_ms=%.1f sync_ms=%.1f step_ms=%.1f total_ms=%.1f at=%d "
                      "pid=%d store_ms=%.1f wrap_ms=%.1f why=%s" %
                      (timing["epoch"], ctx.rank, ctx.world_size, step, timing["detected_at_ms"],
                       timing["epoch_ms"], timing["group_ms"], timing.get("sync_ms", 0),
                       timing["step_ms"], tot, int(time.time() * 1000), pid,
                       timing.get("store_ms", 0), timing.get("wrap_ms", 0), timing["why"].replace(" ", "_")[:120]), flush=True)
                timing = None
            if a.delay_ms > 0:
                time.sleep(a.delay_ms / 1000.0)
        except et.EpochChanged as e:
            print("torch_ddp event=epoch-changed epoch=%s step=%d pid=%d: %s" %
                  (e.epoch, step, pid, str(e).splitlines()[0][:200]), file=sys.stderr, flush=True)
            rebuild, ddp = True, None
    print("torch_ddp done steps=%d pid=%d" % (step, pid), flush=True)
    ctx.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # noqa: BLE001 -- one line a test can grep, then the exit code
        print("torch_ddp error: %s: %s" % (type(e).__name__, e), file=sys.stderr, flush=True)
        raise SystemExit(1)
