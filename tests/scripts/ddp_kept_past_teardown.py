"""A DDP model still referenced after teardown(), as a script with a module-level model leaves it.

    torchrun --nproc-per-node 2 ddp_kept_past_teardown.py

A few real DDP steps (backward all-reduces over gloo), then ``ezpz.hooks.teardown()`` with the model, its
optimizer and the last loss still alive until interpreter exit. Each rank prints one JSON row; the process must
exit 0 (the abort this guards against: "terminate called without an active exception" at exit).
"""

import json

import torch
import torch.distributed as dist
from torch import nn

import ezpz

rt = ezpz.hooks.setup()
torch.manual_seed(0)  # the same initial weights on every rank
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.Generator().manual_seed(100 + rt.rank)  # different batches on every rank
for _ in range(5):
    loss = model(torch.randn(8, 16, generator=data)).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
weights = float(sum(p.detach().double().sum() for p in model.parameters()))
ezpz.hooks.teardown()  # model, opt and loss are kept: module-level names, never deleted
print(json.dumps({"rank": rt.rank, "world_size": rt.world_size, "weights": weights,
                  "group_after_teardown": dist.is_initialized()}), flush=True)
