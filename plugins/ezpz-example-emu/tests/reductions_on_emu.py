"""Run by test_emu_reductions.py on every rank under torchrun, with emuccl refusing AVG and PREMUL_SUM as XCCL does.

``EMUCCL_REFUSE_REDUCE_OPS=AVG,PREMUL_SUM`` is set by the test. Rank 0 writes what it saw to ``argv[1]`` (JSON):
the plan's reduce facts and ``explain()["sharding"]``; that an AVG all-reduce raises (refused, not computed
otherwise); one step's gradients under DDP, ``rt.shard`` and ``rt.shard`` with torchtitan's divide factor 1.0;
20 steps of losses under DDP and ``rt.shard``; and the error a plain ``fully_shard`` model raises in backward
(last: its failed backward leaves that model unusable).
"""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard

import ezpz

STEPS = 20


def model_on(device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1)).to(device)


def batches(rank: int) -> tuple[torch.Tensor, torch.Generator]:
    return torch.randn(16, 1, generator=torch.Generator().manual_seed(1)), torch.Generator().manual_seed(1000 + rank)


def step_loss(model: nn.Module, rt: object, target: torch.Tensor, data: torch.Generator) -> torch.Tensor:
    x = torch.randn(32, 16, generator=data)
    return F.mse_loss(model(x.to(rt.device)), (x @ target).to(rt.device))  # a mean over this rank's batch


def train(model: nn.Module, rt: object) -> list[float]:
    """STEPS of SGD on this rank's batches; the mean loss over ranks at each step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    target, data = batches(rt.rank)
    losses = []
    for _ in range(STEPS):
        loss = step_loss(model, rt, target, data)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(float(mean.cpu()) / rt.world_size)
    return losses


def first_grads(model: nn.Module, rt: object) -> list[torch.Tensor]:
    """The whole gradient of every parameter after one backward on this rank's first batch."""
    target, data = batches(rt.rank)
    step_loss(model, rt, target, data).backward()
    return [(p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).detach().cpu()
            for p in model.parameters()]


def worst(a: list[torch.Tensor], b: list[torch.Tensor], scale: float = 1.0) -> float:
    return max(float(((x * scale - y).abs().max() / y.abs().max())) for x, y in zip(a, b))


def main() -> None:
    out = sys.argv[1]
    rt = ezpz.hooks.setup()
    sharding = rt.explain()["sharding"]
    seen: dict[str, object] = {"device": str(rt.device), "backend": rt.backend, "world": rt.world_size,
                               "unsupported": sorted(rt.plan.mesh.unsupported_reduce_ops),
                               "sharding_chosen": sharding.chosen, "sharding_reason": sharding.reason,
                               "sharding_alternatives": [a.name for a in sharding.alternatives]}
    probe = torch.ones(2, device=rt.device)
    try:
        dist.all_reduce(probe, op=dist.ReduceOp.AVG)
        seen["avg_all_reduce"] = f"computed {probe.cpu().tolist()}"
    except RuntimeError as err:
        seen["avg_all_reduce"] = f"raised: {err}"

    ddp_grads = first_grads(nn.parallel.DistributedDataParallel(model_on(rt.device)), rt)
    shard_grads = first_grads(rt.shard(model_on(rt.device)), rt)
    titan = rt.shard(model_on(rt.device))
    for module in titan.modules():  # torchtitan's disable_fsdp_gradient_division (SUM is forced by rt.shard)
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)
    titan_grads = first_grads(titan, rt)
    seen["grads_rt_shard_vs_ddp"] = worst(shard_grads, ddp_grads)
    seen["grads_factor_1_vs_ddp_times_world"] = worst(titan_grads, ddp_grads, scale=1.0 / rt.world_size)
    seen["grads_factor_1_vs_ddp"] = worst(titan_grads, ddp_grads)

    seen["ddp"] = train(nn.parallel.DistributedDataParallel(model_on(rt.device)), rt)
    seen["rt_shard"] = train(rt.shard(model_on(rt.device)), rt)

    plain = model_on(rt.device)
    for layer in plain:
        if any(True for _ in layer.parameters()):
            fully_shard(layer)
    fully_shard(plain)
    try:
        seen["plain_fully_shard"] = f"trained: {train(plain, rt)}"
    except RuntimeError as err:
        seen["plain_fully_shard"] = f"raised: {err}"
    if rt.is_main:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(seen, f)
    ezpz.hooks.teardown()


if __name__ == "__main__":
    main()
