# The NCCL path of ecoord.torch on one GPU, without an agent (fallback:
# a 1-rank group): backend choice, device selection, state sync and DDP on
# CUDA tensors, one step, then torch's own abort of the group as the
# watcher would call it.  Multi-rank NCCL (a collective released by the
# abort) needs one GPU per rank and is not covered here.
# Prints "SKIP ..." without CUDA; exit 0 when every step worked.
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "worker", "python"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      "nccl", dist.is_nccl_available(), flush=True)
if not (torch.cuda.is_available() and dist.is_nccl_available()):
    print("SKIP no CUDA or no NCCL in this torch")
    sys.exit(0)
import ecoord.torch as et  # noqa: E402

# NCCL's one-time set-up at boot (as Context does under an agent), then the
# first group's build, which should no longer pay it.
torch.cuda.set_device(0)
warm = et._warm_nccl(torch.device("cuda", 0))
t0 = time.monotonic()
ctx = et.init(timeout=60)
print("nccl warm-up %s ms, then the first group built in %.0f ms" %
      ("%.0f" % warm if warm is not None else "failed", (time.monotonic() - t0) * 1000), flush=True)
assert warm is not None, "the NCCL warm-up failed (its warning above)"
print("backend", ctx.backend, "rank", ctx.rank, "world", ctx.world_size, flush=True)
assert ctx.backend == "nccl"
torch.manual_seed(0)
model = torch.nn.Linear(8, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
step = ctx.sync(model, opt, 0)
ddp = ctx.wrap(model)
with ctx.step():
    loss = ddp(torch.randn(4, 8, device="cuda")).pow(2).mean()
    loss.backward()
    opt.step()
    t = torch.ones(1, device="cuda")
    dist.all_reduce(t)
torch.cuda.synchronize()
print("step done, loss %.4f allreduce %.0f" % (loss.item(), t.item()), flush=True)
pg = dist.distributed_c10d._get_default_group()
t0 = time.monotonic()
ok = et._torch_abort(pg)
print("torch abort of the NCCL group: %s in %.1f ms (%s)" %
      (ok, (time.monotonic() - t0) * 1000,
       "_abort_process_group" if hasattr(dist.distributed_c10d, "_abort_process_group")
       else "backend abort() or none"), flush=True)
print("OK")
