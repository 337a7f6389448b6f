"""Run by test_emu_sharded.py on every rank under torchrun: DeviceMesh, FSDP2 and torch.distributed.checkpoint on emu.

Only torch's own APIs after ``ezpz.hooks.setup()`` (``init_device_mesh``, ``fully_shard``, ``DistributedDataParallel``,
``torch.distributed.checkpoint``), so what is tested is the device and its ``emuccl`` backend. Rank 0 writes what it
saw to ``argv[1]`` (JSON); the test judges it. ``argv[2]``: ``2d`` shards over a (2, world/2) mesh, replicating across
its first dimension (HSDP), instead of over a 1-D mesh.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import ezpz

STEPS = 20


def model_on(device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1)).to(device)


def sharded(device: torch.device, mesh: object) -> nn.Module:
    model = model_on(device)
    for layer in model:
        if any(True for _ in layer.parameters()):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def train(model: nn.Module, rt: object) -> list[float]:
    """STEPS of SGD on this rank's batches; the mean loss over ranks at each step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    target = torch.randn(16, 1, generator=torch.Generator().manual_seed(1))
    data = torch.Generator().manual_seed(1000 + rt.rank)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(32, 16, generator=data)
        loss = F.mse_loss(model(x.to(rt.device)), (x @ target).to(rt.device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(float(mean.cpu()) / rt.world_size)
    return losses


def on_each_dimension(mesh: object, rt: object) -> dict[str, list[float]]:
    """The sum of the global ranks over each dimension's group, on a device tensor."""
    sums = {}
    for name in mesh.mesh_dim_names:
        t = torch.full((2,), float(rt.rank), device=rt.device)
        dist.all_reduce(t, group=mesh[name].get_group())
        assert t.device.type == "emu", t.device
        sums[name] = t.cpu().tolist()
    return sums


def main() -> None:
    out, shape = sys.argv[1], sys.argv[2]
    rt = ezpz.hooks.setup()
    world = rt.world_size
    seen: dict[str, object] = {"device": str(rt.device), "backend": rt.backend, "world": world}

    flat = init_device_mesh(rt.device_type, (world,), mesh_dim_names=("all",))
    grid = init_device_mesh(rt.device_type, (2, world // 2), mesh_dim_names=("dp", "tp"))
    seen["groups"] = {"all": flat.get_group().group_name, "dp": grid["dp"].get_group().group_name,
                      "tp": grid["tp"].get_group().group_name}
    seen["sums"] = {**on_each_dimension(flat, rt), **on_each_dimension(grid, rt)}

    ddp = nn.parallel.DistributedDataParallel(model_on(rt.device))
    seen["ddp"] = train(ddp, rt)
    fsdp = sharded(rt.device, flat if shape == "1d" else grid)
    seen["fsdp"] = train(fsdp, rt)
    local = [p.to_local() for p in fsdp.parameters()]
    seen["sharded_on"] = sorted({t.device.type for t in local})
    seen["shard_rows"] = [t.shape[0] for t in local]

    with tempfile.TemporaryDirectory() if rt.rank == 0 else contextlib.nullcontext() as where:
        holder = [where]
        dist.broadcast_object_list(holder)
        directory = holder[0]
        dcp.save({"model": fsdp.state_dict()}, checkpoint_id=directory)
        fresh = sharded(rt.device, flat if shape == "1d" else grid)
        state = {"model": fresh.state_dict()}
        dcp.load(state, checkpoint_id=directory)
        fresh.load_state_dict(state["model"])
        plain = model_on(rt.device)  # unsharded: the same checkpoint, resharded to whole tensors
        whole = {"model": plain.state_dict()}
        dcp.load(whole, checkpoint_id=directory)
        plain.load_state_dict(whole["model"])
        dist.barrier()
    full = [p.full_tensor().cpu() for p in fsdp.parameters()]
    seen["reloaded_equal"] = all(torch.equal(a, b.full_tensor().cpu()) for a, b in zip(full, fresh.parameters()))
    seen["resharded_equal"] = all(torch.equal(a, b.detach().cpu()) for a, b in zip(full, plain.parameters()))
    seen["reloaded_on"] = sorted({p.to_local().device.type for p in fresh.parameters()})
    if rt.is_main:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(seen, f)
    ezpz.hooks.teardown()


if __name__ == "__main__":
    main()
