# Under `ecoord launch --rebuild=inprocess` (one process is enough, Gloo):
# once the group is gone, DDP's backward starts no bucket allreduce on it.
# Context.wrap's comm hook fails the bucket's future instead, backward raises
# and ctx.step() turns that into EpochChanged naming the bucket; a hook of the
# caller's own (comm_hook=) runs behind the same check, and ctx.all_reduce
# (the program's own collective) refuses the same way.  The group is aborted
# the way the watcher aborts it on a new epoch.  Prints OK when all holds.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "worker", "python"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402
import ecoord.torch as et  # noqa: E402

ctx = et.init(backend="gloo", timeout=60)
torch.manual_seed(0)
model, mine = torch.nn.Linear(8, 1), torch.nn.Linear(8, 1)
ctx.sync(model, None, 0)
reduces, user_calls = [], []
real_all_reduce = dist.all_reduce


def counted(*a, **k):
    reduces.append(1)
    return real_all_reduce(*a, **k)


dist.all_reduce = counted  # what torch's allreduce_hook calls


def user_hook(state, bucket):
    user_calls.append(state)
    return default_hooks.allreduce_hook(None, bucket)


ddp = ctx.wrap(model)
ddp_mine = ctx.wrap(mine, comm_hook=user_hook, comm_state="mine")
with ctx.step():
    ddp(torch.randn(4, 8)).pow(2).mean().backward()
    ddp_mine(torch.randn(4, 8)).pow(2).mean().backward()
    ones = ctx.all_reduce(torch.ones(2))
assert ones.tolist() == [ctx.world_size] * 2, ones
print("a step on a live group: %d allreduce(s), the caller's hook called %d time(s) with %s" %
      (len(reduces), len(user_calls), user_calls[:1]), flush=True)
assert reduces and user_calls == ["mine"] * len(user_calls) and user_calls, "no bucket reduced"

before, before_user = len(reduces), len(user_calls)
err = None
try:
    with ctx.step():
        loss = ddp(torch.randn(4, 8)).pow(2).mean()
        loss_mine = ddp_mine(torch.randn(4, 8)).pow(2).mean()
        ctx._abort(ctx._cur, "aborted by the test, as on a new epoch")
        loss.backward()
except et.EpochChanged as e:
    err = e
print("backward on the aborted group: %s" % (err if err is not None else "went through"),
      flush=True)
assert err is not None, "backward went through on an aborted group"
assert "gradient bucket" in str(err) and "not reduced" in str(err), "not the hook's refusal"
try:
    loss_mine.backward()
    raise AssertionError("the caller's hook's backward went through on an aborted group")
except RuntimeError as e:
    assert "not reduced" in str(e), "not the hook's refusal: %s" % e
try:
    ctx.all_reduce(torch.ones(2))
    raise AssertionError("ctx.all_reduce went through on an aborted group")
except et.EpochChanged as e:
    print("ctx.all_reduce on the aborted group: %s" % e, flush=True)
assert len(reduces) == before, "%d allreduce(s) started on the aborted group" % (
    len(reduces) - before)
assert len(user_calls) == before_user, "the caller's hook ran on the aborted group"
print("OK", flush=True)
ctx.close()
