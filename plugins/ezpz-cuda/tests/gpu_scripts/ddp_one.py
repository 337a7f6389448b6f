"""Under torchrun: setup(), a DDP training step on the device ezpz chose, rt.step(), teardown; one JSON line per rank.

From the live H200 record's kit/ddp_one.py (docs/hardware-validation.md). Usage:
``torchrun --nproc-per-node N ddp_one.py``.
"""

from __future__ import annotations

import json

import torch
import torch.distributed as dist

import ezpz

rt = ezpz.hooks.setup()
model = torch.nn.Linear(64, 64).to(rt.device)
if rt.distributed:
    model = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[rt.device.index] if rt.device.index is not None else None)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
torch.manual_seed(0)
for _ in range(20):
    with rt.autocast():
        loss = model(torch.randn(8, 64, device=rt.device)).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    rt.step()
print(json.dumps({"rank": rt.rank, "world_size": rt.world_size, "device": str(rt.device), "backend": rt.backend,
                  "process_group": dist.is_initialized(), "loss": loss.item()}), flush=True)
ezpz.hooks.teardown()
