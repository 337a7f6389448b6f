"""``rt.shard``: FSDP2's ``fully_shard`` on each child module with parameters, then the root; or a named refusal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ezpz.decisions import MeshSupport
from ezpz.errors import UnavailableError
from ezpz.primitives.torch_private import fsdp2
from ezpz.sharding.precision import ShardPrecision
from ezpz.sharding.reductions import gradient_reduction

if TYPE_CHECKING:
    import torch
    from torch.distributed.device_mesh import DeviceMesh

__all__ = ["fsdp2_for", "shard_model", "shard_units"]

_M = TypeVar("_M", bound="torch.nn.Module")


def fsdp2_for(device_type: str, device: str, support: MeshSupport | None, who: str = "rt.shard(model)") -> Any:
    """The module with ``fully_shard`` and ``MixedPrecisionPolicy`` for this device, or a refusal naming the fix."""
    if support is not None and (support.fsdp2_unavailable or support.mesh_unavailable):
        raise UnavailableError(
            name=who, value=f"FSDP2 on {device}",
            expected=f"a device FSDP2 runs on; on {device}: {support.fsdp2_unavailable or support.mesh_unavailable}",
            fix=f"use {support.alternative}" if support.alternative else "use DDP (torch.nn.parallel.DistributedDataParallel)")
    module = fsdp2()
    if module is None or (device_type == "cpu" and module.__name__ != "torch.distributed.fsdp"):
        import torch

        raise UnavailableError(
            name=who, value=f"torch {torch.__version__} on {device}",
            expected="a torch with FSDP2 for this device (torch.distributed.fsdp.fully_shard; the older "
                     "torch.distributed._composable.fsdp creates CUDA streams, so not on the CPU: seen on 2.4.1)",
            fix="use DDP (torch.nn.parallel.DistributedDataParallel), or torch 2.6 or newer")
    return module


def shard_units(model: Any) -> Iterator[Any]:
    """Children to shard before the root: each child with parameters, looking inside ModuleList/ModuleDict."""
    import torch

    for child in model.children():
        if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)):
            yield from (c for c in child.children() if any(True for _ in c.parameters()))
        elif any(True for _ in child.parameters()):
            yield child


def shard_model(model: _M, mesh: DeviceMesh, module: Any, precision: ShardPrecision,
                support: MeshSupport | None = None, **options: Any) -> _M:
    """``fully_shard`` each unit of ``model`` and then ``model`` on ``mesh``; ``options`` win over ``precision``.

    Where ``support`` says the backend lacks a reduce operation FSDP2 divides in (:mod:`.reductions`), every
    FSDP module reduces with ``SUM`` and divides once after (``set_force_sum_reduction_for_comms(True)``).
    """
    reduction = gradient_reduction(support, "this device") if support is not None else None
    if reduction is not None and reduction.force_sum:
        _need_force_sum(module, reduction.reason)
    if "mp_policy" not in options:
        kwargs = precision.policy_kwargs()
        if kwargs:
            options["mp_policy"] = module.MixedPrecisionPolicy(**kwargs)
    fully_shard = module.fully_shard
    units = [fully_shard(unit, mesh=mesh, **options) for unit in list(shard_units(model))]
    sharded: _M = fully_shard(model, mesh=mesh, **options)  # the same module, its class now also FSDPModule
    if reduction is not None and reduction.force_sum:
        for unit in (*units, sharded):  # each FSDP module keeps its own flag (its parameter group's)
            unit.set_force_sum_reduction_for_comms(True)
    return sharded


def _need_force_sum(module: Any, why: str) -> None:
    """Refuse before sharding where this torch's FSDP2 cannot be told to reduce with SUM only (before 2.8)."""
    if hasattr(getattr(module, "FSDPModule", None), "set_force_sum_reduction_for_comms"):
        return
    import torch

    raise UnavailableError(
        name="rt.shard(model)", value=f"torch {torch.__version__}: FSDPModule has no set_force_sum_reduction_for_comms",
        expected=f"a torch whose FSDP2 can reduce with SUM only, because {why}",
        fix="use torch 2.8 or newer (pytorch#155915 added it), or DDP (torch.nn.parallel.DistributedDataParallel)")
