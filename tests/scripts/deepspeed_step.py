"""One DeepSpeed ZeRO step through ezpz: run under torchrun with 2 ranks; prints one JSON row per rank.

Usage: torchrun --nproc-per-node 2 deepspeed_step.py <zero stage>
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist

import ezpz

stage = int(sys.argv[1])
rt = ezpz.hooks.setup()
world_before = dist.group.WORLD

import deepspeed  # noqa: E402  (after setup(): DS_ACCELERATOR is set, the process group exists)
from deepspeed.accelerator import get_accelerator  # noqa: E402

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
config = rt.deepspeed_config({
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 1,
    "zero_optimization": {"stage": stage},
    "zero_allow_untested_optimizer": True,
})
engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
torch.manual_seed(100 + rt.rank)  # different data per rank: only an all-reduce makes the weights agree again
x, y = torch.randn(4, 8), torch.randn(4, 4)
loss = torch.nn.functional.mse_loss(engine(x), y)
engine.backward(loss)
engine.step()
weights = float(sum(p.detach().double().sum() for p in engine.module.parameters()))
print(json.dumps({
    "rank": rt.rank, "stage": stage, "loss": float(loss.detach()), "weights": weights,
    "ds_accelerator_env": os.environ.get("DS_ACCELERATOR"), "ds_accelerator": get_accelerator().device_name(),
    "torch_backend": dist.get_backend(), "ezpz_backend": rt.backend, "same_group": dist.group.WORLD is world_before,
    "bf16": config["bf16"]["enabled"], "fp16": config["fp16"]["enabled"], "precision": rt.amp.dtype,
    "lifecycle": [d.reason for d in rt.explain().decisions if d.topic == "lifecycle"],
}), flush=True)
del engine, loss  # the engine holds the process group: release it before teardown() (open gloo exit abort, docs/compat.md)
ezpz.hooks.teardown()
