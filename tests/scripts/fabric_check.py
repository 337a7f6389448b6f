"""Run by tests/test_lightning_live.py: Lightning Fabric on ezpz's cluster environment, accelerator and precision.

argv[1]: ``setup`` (ezpz.hooks.setup() makes the group; Fabric finds it) or ``plan`` (only ezpz.hooks.plan(); Fabric
makes the group from ezpz's cluster environment). One DDP step of a 1-weight model on rank-dependent data: the
gradient every rank sees must be the mean over ranks. Each rank prints one JSON line; non-zero exit on a mismatch.
"""

import json
import os
import sys

if os.environ.get("EZPZ_TEST_NO_MPI4PY"):
    sys.modules["mpi4py"] = None  # prove the launch needs no mpi4py (Fabric's own MPIEnvironment does)

import torch
import torch.distributed as dist
from lightning.fabric import Fabric

import ezpz
from ezpz.integrations.lightning import fabric_arguments

mode = sys.argv[1]
source = ezpz.hooks.setup() if mode == "setup" else ezpz.hooks.plan()[0]
inits = []  # init_process_group calls from here on: Fabric's own (none when ezpz's group exists)
real_init = dist.init_process_group
dist.init_process_group = lambda *a, **k: inits.append(1) or real_init(*a, **k)
plan = source.plan if mode == "setup" else source
expected_device = source.device if mode == "setup" else torch.device(plan.device.torch_device)

fabric = Fabric(**fabric_arguments(source))
fabric.launch()
model = torch.nn.Linear(1, 1, bias=False)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
x = torch.tensor([[float(fabric.global_rank + 1)]], device=fabric.device)
with fabric.autocast():
    loss = model(x).sum()
fabric.backward(loss)
grad = model.module.weight.grad.item()  # d(w*x)/dw = x; DDP averages: mean of 1..world
world = plan.launch.world_size
expected_grad = (world + 1) / 2
env = fabric._connector.cluster_environment
row = {"rank": fabric.global_rank, "world_size": fabric.world_size, "local_rank": fabric.local_rank,
       "launcher": plan.launch.launcher, "grad": grad, "expected_grad": expected_grad,
       "fabric_device": str(fabric.device), "ezpz_device": str(expected_device),
       "param_device": str(model.module.weight.device), "environment": type(env).__name__,
       "strategy": type(fabric.strategy).__name__, "backend": dist.get_backend(),
       "precision": type(fabric.strategy.precision).__name__ + ":" + str(getattr(fabric.strategy.precision, "precision", "32-true")),
       "ezpz_precision": plan.amp.dtype, "inits": len(inits), "mpi4py": "mpi4py" in sys.modules and sys.modules["mpi4py"] is not None}
ok = (grad == expected_grad and fabric.world_size == world and fabric.global_rank == plan.launch.rank
      and fabric.device == expected_device and row["param_device"] == str(expected_device)
      and row["environment"] == "EzpzEnvironment" and row["backend"] == plan.backend.name
      and len(inits) == (0 if mode == "setup" else 1))
row["ok"] = ok
print(json.dumps(row), flush=True)
del model, optimizer  # DDP holds the group: release it so it is destroyed here, not at exit (docs/lightning.md)
if mode == "setup":
    ezpz.hooks.teardown()
else:
    dist.destroy_process_group()
sys.exit(0 if ok else 1)
