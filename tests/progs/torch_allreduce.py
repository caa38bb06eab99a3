# A program written for torchrun, unchanged: env:// rendezvous, gloo on CPU.
# Writes "<epoch> <rank> <world> <allreduce result>" to $OUT_DIR/torch.<epoch>.<rank>
# and keeps running (a step loop) until SIGTERM, or exits after STEPS steps.
# With UNTIL_WORLD=W it steps on (until SIGTERM) while the world is smaller
# than W, and only at world W or more counts STEPS: a job that finishes once
# a node has joined.
import os, signal, sys, time
import torch
import torch.distributed as dist

stop = False
def on_term(signum, frame):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)

dist.init_process_group(backend="gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.ones(1)
dist.all_reduce(t)
epoch = os.environ.get("ECOORD_EPOCH", "?")
out = os.path.join(os.environ["OUT_DIR"], "torch.%s.%d" % (epoch, rank))
with open(out + ".tmp", "w") as f:
    f.write("%s %d %d %d\n" % (epoch, rank, world, int(t.item())))
os.rename(out + ".tmp", out)
print("torch rank %d/%d allreduce=%d" % (rank, world, int(t.item())), flush=True)
steps = int(os.environ.get("STEPS", "0"))
if world < int(os.environ.get("UNTIL_WORLD", "0")):
    steps = 0
i = 0
while not stop and (steps == 0 or i < steps):
    time.sleep(0.05)  # a training step
    i += 1
dist.destroy_process_group()
