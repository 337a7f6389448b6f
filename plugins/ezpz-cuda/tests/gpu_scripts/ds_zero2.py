"""DeepSpeed ZeRO-2 through ``rt.deepspeed_config()`` on the device ezpz chose; one JSON line per rank.

From the live H200 record's kit/ds_step.py (docs/hardware-validation.md). Usage:
``torchrun --nproc-per-node 1 ds_zero2.py``.
"""

from __future__ import annotations

import json

import torch

import ezpz

rt = ezpz.hooks.setup()
import deepspeed  # noqa: E402  (after setup(): DS_ACCELERATOR is set)
import torch.distributed as dist  # noqa: E402

model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256))
cfg = rt.deepspeed_config({"train_batch_size": 4 * rt.world_size, "zero_optimization": {"stage": 2},
                           "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "torch_adam": True}}})
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
dtype = next(engine.module.parameters()).dtype
for _ in range(3):
    x = torch.randn(4, 256).to(engine.device, dtype=dtype)
    loss = engine(x).float().pow(2).mean()
    engine.backward(loss)
    engine.step()
print(json.dumps({"rank": rt.rank, "device": str(engine.device), "ezpz_backend": rt.backend,
                  "dist_backend": dist.get_backend(), "param_dtype": str(dtype), "amp": rt.amp.dtype,
                  "bf16": cfg.get("bf16"), "fp16": cfg.get("fp16"), "loss": loss.item()}), flush=True)
if dist.is_initialized():
    dist.destroy_process_group()
