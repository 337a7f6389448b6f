"""``explain()["sharding"]``: what ``rt.mesh()`` and ``rt.shard()`` do on this device, and why (pure)."""

from __future__ import annotations

from ezpz.decisions import AmpPolicy, Decision, MeshSupport
from ezpz.facts import Alternative
from ezpz.sharding.precision import shard_precision
from ezpz.sharding.reductions import gradient_reduction

__all__ = ["sharding_decision"]


def _groups(support: MeshSupport) -> str:
    if support.split_group is False:
        return "mesh groups by new_group (the backend cannot split a group)"
    if support.split_group:
        return "mesh groups as torch makes them (split_group where the default group is device-bound)"
    return "mesh groups as torch makes them (split_group where the backend says it supports splitting)"


def sharding_decision(support: MeshSupport, amp: AmpPolicy, device: str) -> Decision:
    """The trace line: FSDP2 with its mixed precision, or the refusal and its alternative; the mesh's groups."""
    details: dict[str, object] = {}
    if support.sources:
        details["sources"] = list(support.sources)
    refused = support.mesh_unavailable or support.fsdp2_unavailable
    if refused:
        instead = f"; use {support.alternative}" if support.alternative else ""
        return Decision(topic="sharding", chosen=f"rt.shard() and rt.mesh() refuse on {device}" if support.mesh_unavailable
                        else f"rt.shard() refuses on {device}; {_groups(support)}",
                        reason=f"{refused}{instead} ({support.reason})", details=details)
    precision = shard_precision(amp, device)
    details["MixedPrecisionPolicy"] = (f"param_dtype={precision.param_dtype}, reduce_dtype={precision.reduce_dtype}"
                                       if precision.param_dtype else "FSDP2's default: as stored (fp32)")
    reduction = gradient_reduction(support, device)
    details["gradient reduction"] = reduction.chosen
    if support.unsupported_reduce_ops:
        details["unsupported_reduce_ops"] = sorted(support.unsupported_reduce_ops)
    dtype = precision.param_dtype or "fp32"
    other = "fp32" if precision.param_dtype else None
    alternatives: tuple[Alternative, ...] = ((Alternative(name=f"{other} parameters", reason="pass mp_policy= to rt.shard() to choose"),)
                    if other else ())
    if reduction.rejected:
        alternatives += (Alternative(name="divide factor 1.0", reason=reduction.rejected),)
    summed = "; SUM reductions, divided once after" if reduction.force_sum else ""
    return Decision(topic="sharding", chosen=f"rt.shard(): FSDP2, {dtype} parameters, fp32 reductions{summed}; "
                    f"{_groups(support)}" if precision.param_dtype else
                    f"rt.shard(): FSDP2 in fp32{summed}; {_groups(support)}",
                    reason=f"{precision.reason}; {reduction.reason}; {support.reason}", alternatives=alternatives,
                    details=details)
