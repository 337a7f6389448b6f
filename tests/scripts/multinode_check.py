"""Run on several "nodes" (network namespaces) by the multi-node tests.

Every rank sets up through ezpz, all-reduces its rank + 1 with gloo, and prints
one JSON line with its layout, the rendezvous ezpz derived and the address of
the namespace it runs in. Exit status is non-zero if the sum is wrong.
"""

import json
import subprocess
import sys

import torch
import torch.distributed as dist

import ezpz

expected_world = int(sys.argv[1])
rt = ezpz.hooks.setup()
value = torch.tensor([float(rt.rank + 1)])
dist.all_reduce(value)
shown = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", "eth0"], capture_output=True, text=True).stdout
address = shown.split("inet ", 1)[1].split("/", 1)[0] if "inet " in shown else None
ok = value.item() == expected_world * (expected_world + 1) / 2 and rt.world_size == expected_world
launch = rt.plan.launch
print(json.dumps({
    "rank": rt.rank, "local_rank": rt.local_rank, "world_size": rt.world_size, "local_world_size": rt.local_world_size,
    "node_rank": rt.node_rank, "num_nodes": rt.num_nodes, "launcher": launch.launcher, "backend": rt.backend,
    "master_addr": launch.master_addr, "master_addr_from": launch.sources.get("master_addr"),
    "address": address, "sum": value.item(), "ok": ok,
}), flush=True)
ezpz.hooks.teardown()
sys.exit(0 if ok else 1)
