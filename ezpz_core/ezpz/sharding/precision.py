"""FSDP2's mixed precision from the AMP decision (pure: no torch): what ``rt.shard`` gathers parameters in."""

from __future__ import annotations

from typing import Any

from ezpz.decisions import AmpPolicy
from ezpz.primitives.frozen_records import frozen

__all__ = ["ShardPrecision", "shard_precision"]

_TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@frozen(kw_only=True)
class ShardPrecision:
    """The ``MixedPrecisionPolicy`` ``rt.shard`` gives ``fully_shard``, and why. ``print()`` it to read it.

    ``param_dtype`` is what parameters are gathered in for forward and backward (None: as stored, fp32);
    ``reduce_dtype`` what gradients are reduced in; the sharded parameters and the optimizer stay fp32.
    """

    param_dtype: str | None
    reduce_dtype: str | None
    grad_scaler: bool
    reason: str

    def policy_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``MixedPrecisionPolicy`` (empty: FSDP2's default, everything as stored)."""
        if self.param_dtype is None:
            return {}
        import torch

        return {"param_dtype": getattr(torch, _TORCH_NAMES[self.param_dtype]),
                "reduce_dtype": getattr(torch, _TORCH_NAMES[self.reduce_dtype or "fp32"])}

    def __str__(self) -> str:
        if self.param_dtype is None:
            return f"parameters and gradient reductions as stored (fp32): {self.reason}"
        scaler = "; rt.grad_scaler() is on" if self.grad_scaler else ""
        return (f"parameters gathered in {self.param_dtype}, gradients reduced in {self.reduce_dtype}{scaler}: "
                f"{self.reason}")


def shard_precision(amp: AmpPolicy, device: str) -> ShardPrecision:
    """bf16 or fp16 parameters where the precision policy chose that autocast dtype, reductions in fp32."""
    if not amp.autocast or amp.dtype == "fp32":
        return ShardPrecision(param_dtype=None, reduce_dtype=None, grad_scaler=False,
                              reason=f"the precision policy for {device} is fp32 ({amp.reason})")
    scaler = ("; fp16 needs loss scaling: rt.grad_scaler(), whose unscale reduces the overflow flag over the "
              "mesh for sharded (DTensor) gradients, so every rank skips the same steps" if amp.grad_scaler else "")
    return ShardPrecision(
        param_dtype=amp.dtype, reduce_dtype="fp32", grad_scaler=amp.grad_scaler,
        reason=(f"the precision policy chose {amp.dtype} autocast for {device} ({amp.reason}); FSDP2 gathers the "
                f"parameters in {amp.dtype} for compute and reduces gradients in fp32, and the sharded parameters "
                f"and optimizer state stay fp32{scaler}"))
