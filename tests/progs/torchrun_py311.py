# torchrun (python -m torch.distributed.run) as Debian ships it, with one fix:
# torch 1.13's Std.from_str looks a value up by iterating the IntFlag, and
# since Python 3.11 iterating a flag yields only its single-bit members, so
# NONE (0) and ALL (3) are never found and every torchrun run dies in
# start_processes ("'NoneType' object has no attribute 'get'").  Std(int)
# gives the member directly.  Everything else is torchrun unchanged.
import re
import runpy
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(vm):
    if re.match(api._VALUE_REGEX, vm):
        return api.Std(int(vm))
    return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}


api.Std.from_str = staticmethod(_from_str)
sys.argv[0] = "torchrun"
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
