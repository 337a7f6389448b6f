"""Run by tests/test_sharded_training.py under torchrun / mpiexec / plain python (CPU ranks, fp32).

``sharded_train.py OUT MODE[,MODE...]``; every rank prints one flat JSON line, rank 0 also writes files under OUT:

* ``compare``: the same model trained 20 steps under DDP and ``rt.shard`` (FSDP2), both fp32 (``rt.shard``'s own
  choice under EZPZ_PRECISION=fp32, else ``mp_policy=`` fp32 given): each rank's losses; one more step with
  ``set_gradient_divide_factor(2 x world)`` on every FSDP module ("ok", or the error: PREMUL_SUM without rt.shard's SUM);
  ``rt.mesh()`` and a 2-D ``rt.mesh(dp=2, tp=...)`` (shape, names, kept), and a wrong one refused.
* ``auto``: ``rt.shard`` in the precision setup() chose, 20 steps under ``rt.autocast()``: the losses.
* ``scaler``: fp16 parameters (``mp_policy``) and ``rt.grad_scaler``: an overflow in rank 1's shard alone
  makes every rank skip the step and halve the scale.
* ``resume``: sharded, 10 steps, ``rt.save_checkpoint(OUT/ck/step-000010)`` (full parameters to
  OUT/saved.pt); a fresh model and optimizer ``rt.load_checkpoint`` it (full parameters equal?) and
  train 10 more steps; the same 20 steps uninterrupted (final full parameters equal?).
* ``load``: a fresh sharded (or, alone, plain) model, and a DDP one, load OUT/ck/step-000010 on this world
  size: full parameters equal to OUT/saved.pt? ``rt.save`` of the sharded state dict is refused.
"""

import contextlib
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

import ezpz
from ezpz.errors import ConfigError

OUT, MODES = Path(sys.argv[1]), sys.argv[2].split(",")
rt = ezpz.hooks.setup()
TARGET = torch.randn(32, 1, generator=torch.Generator().manual_seed(1))


def new_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1)).to(rt.device)


def sharded(seed: int = 0, **options) -> nn.Module:
    return rt.shard(new_model(seed), **options)


def ddp(seed: int = 0) -> nn.Module:
    model = new_model(seed)
    ids = [rt.device.index] if rt.device.index is not None else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids) if rt.distributed else model


def train(model: nn.Module, opt: torch.optim.Optimizer, steps: range, autocast: bool = False) -> list[float]:
    losses = []
    for step in steps:  # the batch depends on the step and the rank only: a resumed run sees the same data
        x = torch.randn(16, 32, generator=torch.Generator().manual_seed(1000 * step + rt.rank))
        with rt.autocast() if autocast else contextlib.nullcontext():
            loss = F.mse_loss(model(x.to(rt.device)).float(), (x @ TARGET).to(rt.device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def full(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter whole, on every rank (a collective for a sharded model)."""
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    return {k: v.detach().cpu().clone() for k, v in state.items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def adam(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=1e-2)


row: dict = {"rank": rt.rank, "world": rt.world_size, "dtype": rt.amp.dtype, "device": rt.device_type}
checkpoint = OUT / "ck" / "step-000010"
if "compare" in MODES:
    from torch.distributed.fsdp import MixedPrecisionPolicy

    model = ddp()
    row["ddp"] = train(model, adam(model), range(20))
    fp32 = {} if rt.amp.dtype == "fp32" else {"mp_policy": MixedPrecisionPolicy()}  # fp32 as DDP here; options win
    model = sharded(**fp32)
    row["sharded"] = train(model, adam(model), range(20))
    from torch.distributed.fsdp import FSDPModule

    for unit in model.modules():  # a divide factor FSDP2 would apply with PREMUL_SUM, which gloo lacks
        if isinstance(unit, FSDPModule):
            unit.set_gradient_divide_factor(2.0 * rt.world_size)  # not the group size: FSDP2 would take AVG
    try:
        train(model, adam(model), range(20, 21))
        row["divide_factor"] = "ok"
    except RuntimeError as err:
        row["divide_factor"] = str(err)
    one_d = rt.mesh()
    two_d = rt.mesh(dp=2, tp=rt.world_size // 2)
    row["meshes"] = (f"{one_d.device_type} {tuple(one_d.shape)} {one_d.mesh_dim_names} / {two_d.device_type} "
                     f"{tuple(two_d.shape)} {two_d.mesh_dim_names}")
    row["meshes_kept"] = rt.mesh() is one_d and rt.mesh(dp=2, tp=rt.world_size // 2) is two_d
    row["tp_group_size"] = two_d["tp"].size()
    try:
        rt.mesh(dp=3, tp=2)
        row["wrong_mesh"] = "accepted"
    except ConfigError as err:
        row["wrong_mesh"] = str(err)
if "auto" in MODES:  # the device's automatic precision: rt.shard's MixedPrecisionPolicy and rt.autocast()
    model = sharded()
    seen: list[str] = []  # the first layer's weight as forward computes with it (after FSDP2's all-gather)
    model[0].register_forward_pre_hook(lambda module, args: seen.append(str(module.weight.dtype)))
    row["auto"] = train(model, adam(model), range(20), autocast=True)
    row["param_dtype"] = seen[0]
if "scaler" in MODES:
    from torch.distributed.fsdp import MixedPrecisionPolicy

    model = sharded(mp_policy=MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32))
    opt, scaler = adam(model), rt.grad_scaler(enabled=True, init_scale=1024.0)
    scales, skipped = [], []
    for step in range(3):
        x = torch.randn(16, 32, generator=torch.Generator().manual_seed(1000 * step + rt.rank))
        loss = F.mse_loss(model(x.to(rt.device)).float(), (x @ TARGET).to(rt.device))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if step == 1 and rt.rank == 1:  # an overflow in this rank's shard of one gradient only
            with torch.no_grad():
                next(model.parameters()).grad.to_local().fill_(float("inf"))
        before = full(model)
        scaler.step(opt)
        scaler.update()
        skipped.append(same(before, full(model)))
        scales.append(scaler.get_scale())
    row["scaler_skipped"], row["scaler_scales"] = skipped, scales
if "resume" in MODES:
    model = sharded()
    opt = adam(model)
    train(model, opt, range(10))
    rt.save_checkpoint(checkpoint, model=model, optim=opt, step=10)
    saved = full(model)
    if rt.is_main:
        torch.save(saved, OUT / "saved.pt")
    row["latest"] = str(rt.latest_checkpoint(checkpoint.parent))
    fresh = sharded(seed=1)  # other initial weights: only the checkpoint can make them equal
    fresh_opt = adam(fresh)
    values = rt.load_checkpoint(checkpoint, model=fresh, optim=fresh_opt)
    row["step"] = values["step"]
    row["loaded_equal"] = same(full(fresh), saved)
    train(fresh, fresh_opt, range(values["step"], 20))
    whole = sharded()
    whole_opt = adam(whole)
    train(whole, whole_opt, range(20))
    row["resumed_equal"] = same(full(fresh), full(whole))
    row["untrained_differs"] = not same(full(sharded(seed=1)), saved)
if "load" in MODES:
    fresh = sharded(seed=1)
    values = rt.load_checkpoint(checkpoint, model=fresh, optim=adam(fresh))
    row["step"] = values["step"]
    saved = torch.load(OUT / "saved.pt")
    row["loaded_equal"] = same(full(fresh), saved)
    replicated = ddp(seed=1)  # the sharded checkpoint into a DDP (or, alone, plain) model and its optimizer
    rt.load_checkpoint(checkpoint, model=replicated, optim=adam(replicated))
    row["ddp_loaded_equal"] = same(full(replicated), saved)
    try:
        rt.save(fresh.state_dict(), OUT / f"refused-{rt.rank}.pt")
        row["refused"] = "not refused"
    except ConfigError as err:
        row["refused"] = str(err)
print(json.dumps(row), flush=True)
ezpz.hooks.teardown()
