# A Python program that reports its steps through ecoord.progress (no torch,
# no libecworker): 50 ms steps, its step count written to
# $EC_TEST_PROG_STEPS_TO/step.<node>.<local rank>.<epoch>; with
# EC_TEST_PROG_HANG=NODE:LR:STEP:FILE that rank sleeps forever at STEP unless
# FILE exists (it creates it first: it hangs once).
import os
import sys
import time

import ecoord.progress as progress

node = os.environ.get("ECOORD_NODE_ID", "")
lr = os.environ.get("LOCAL_RANK", "0")
epoch = os.environ.get("ECOORD_EPOCH", "0")
out = os.environ.get("EC_TEST_PROG_STEPS_TO", "")
hang = os.environ.get("EC_TEST_PROG_HANG", "").split(":", 3)

if not progress.active():
    print("ecoord.progress: no progress file (ECOORD_PROGRESS_FILE unset)", flush=True)
    sys.exit(3)
step = 0
while True:
    if (len(hang) == 4 and hang[0] == node and hang[1] == lr and int(hang[2]) == step
            and not os.path.exists(hang[3])):
        open(hang[3], "w").close()
        print("progress_steps: hanging at step %d" % step, flush=True)
        while True:
            time.sleep(3600)
    time.sleep(0.05)
    step += 1
    progress.step()
    if out:
        path = "%s/step.%s.%s.%s" % (out, node, lr, epoch)
        with open(path + ".tmp", "w") as f:
            f.write("%d\n" % step)
        os.rename(path + ".tmp", path)
