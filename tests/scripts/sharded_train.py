"""Run by tests/test_sharded_training.py under torchrun / mpiexec / plain python (CPU ranks, fp32).

``sharded_train.py OUT MODE[,MODE...]``; every rank prints one flat JSON line, rank 0 also writes files under OUT:

* ``compare``: the same model trained 20 steps under DDP and sharded (FSDP2): each rank's losses.
* ``resume``: sharded, 10 steps, ``rt.save_checkpoint(OUT/ck/step-000010)`` (full parameters to
  OUT/saved.pt); a fresh model and optimizer ``rt.load_checkpoint`` it (full parameters equal?) and
  train 10 more steps; the same 20 steps uninterrupted (final full parameters equal?).
* ``load``: a fresh sharded (or, alone, plain) model loads OUT/ck/step-000010 on this world size:
  full parameters equal to OUT/saved.pt?
"""

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


def sharded(seed: int = 0) -> nn.Module:
    from torch.distributed.fsdp import fully_shard

    model = new_model(seed)
    if not rt.distributed:
        return model
    for layer in model:
        if any(True for _ in layer.parameters()):
            fully_shard(layer)
    return fully_shard(model)


def ddp(seed: int = 0) -> nn.Module:
    model = new_model(seed)
    return nn.parallel.DistributedDataParallel(model) if rt.distributed else model


def train(model: nn.Module, opt: torch.optim.Optimizer, steps: range) -> list[float]:
    losses = []
    for step in steps:  # the batch depends on the step and the rank only: a resumed run sees the same data
        x = torch.randn(16, 32, generator=torch.Generator().manual_seed(1000 * step + rt.rank))
        loss = F.mse_loss(model(x.to(rt.device)), (x @ TARGET).to(rt.device))
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


row: dict = {"rank": rt.rank, "world": rt.world_size, "dtype": rt.amp.dtype}
checkpoint = OUT / "ck" / "step-000010"
if "compare" in MODES:
    model = ddp()
    row["ddp"] = train(model, adam(model), range(20))
    model = sharded()
    row["sharded"] = train(model, adam(model), range(20))
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
    row["loaded_equal"] = same(full(fresh), torch.load(OUT / "saved.pt"))
    try:
        rt.save(fresh.state_dict(), OUT / f"refused-{rt.rank}.pt")
        row["refused"] = "not refused"
    except ConfigError as err:
        row["refused"] = str(err)
print(json.dumps(row), flush=True)
ezpz.hooks.teardown()
