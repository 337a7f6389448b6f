"""The original's setup_torch(tensor_parallel_size=...) and model wrappers, in its style; two ranks.

    torchrun --nproc-per-node 2 mesh_and_wrappers.py

Run unmodified by tests/test_original_scripts.py; it prints one JSON line per rank.
"""

import json

import torch

import ezpz
import ezpz.distributed
import ezpz.errors

rank = ezpz.setup_torch(tensor_parallel_size=2)
mesh = ezpz.distributed.get_device_mesh()
tp_group = mesh["tp"].get_group()
value = torch.tensor([float(rank + 1)])
torch.distributed.all_reduce(value, group=tp_group)

wrapped = {}
for name, wrap in [("ddp", ezpz.wrap_model_for_ddp), ("fsdp2", ezpz.wrap_model_for_fsdp2)]:
    model = wrap(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)))
    model(torch.randn(2, 4)).sum().backward()
    wrapped[name] = type(model).__name__

try:
    ezpz.wrap_model_for_fsdp(torch.nn.Linear(4, 1))
except ezpz.errors.UnavailableError as err:  # FSDP1 needs an accelerator: said plainly on the CPU
    wrapped["fsdp"] = "refused: " + err.fix.split(":")[0]

print(json.dumps({
    "rank": rank,
    "mesh": dict(zip(mesh.mesh_dim_names, mesh.shape)),
    "tp_sum": value.item(),
    "broadcast": ezpz.distributed.broadcast({"from": rank}, root=0),
    "wrapped": wrapped,
}), flush=True)
ezpz.barrier()
ezpz.cleanup()
