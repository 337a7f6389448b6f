"""Run by the launcher tests under torchrun / mpiexec / plain python.

Every rank sets up through ezpz, checks an all-reduce result and its own rank
layout against what the launcher was asked for, and prints one JSON line.
Exit status is non-zero on any mismatch.
"""

import json
import sys

import torch
import torch.distributed as dist

import ezpz

expected_world = int(sys.argv[1])
rt = ezpz.hooks.setup()
value = torch.tensor([float(rt.rank + 1)])
if rt.distributed:
    dist.all_reduce(value)
expected_sum = expected_world * (expected_world + 1) / 2
ok = (
    value.item() == expected_sum
    and rt.world_size == expected_world
    and 0 <= rt.rank < rt.world_size
    and 0 <= rt.local_rank < rt.local_world_size
    and (not rt.distributed or dist.get_rank() == rt.rank and dist.get_world_size() == rt.world_size)
)
print(json.dumps({
    "rank": rt.rank, "local_rank": rt.local_rank, "world_size": rt.world_size,
    "local_world_size": rt.local_world_size, "node_rank": rt.node_rank, "num_nodes": rt.num_nodes,
    "launcher": rt.plan.launch.launcher, "backend": rt.backend, "device": str(rt.device),
    "sum": value.item(), "ok": ok, "pg": dist.is_initialized(), "ignored": list(rt.plan.launch.ignored),
}), flush=True)
ezpz.hooks.teardown()
sys.exit(0 if ok else 1)
