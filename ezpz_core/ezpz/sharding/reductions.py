"""How ``rt.shard`` has FSDP2 reduce gradients on this backend, from the reduce operations it lacks (pure).

FSDP2 divides gradients inside its collectives: ``ReduceOp.AVG`` for fp32/bf16 reductions, ``PREMUL_SUM``
once a divide factor is set (``set_gradient_divide_factor``); fp16 reductions already use ``SUM`` with a
divide before and after. A backend that lacks either (oneCCL/XCCL: both; gloo: ``PREMUL_SUM``) raises inside
backward. There ``rt.shard`` calls ``set_force_sum_reduction_for_comms(True)`` on every FSDP module and leaves
the divide factor unset: torch then sums and divides the summed shard once by the data-parallel size (the
reduce-scatter group's size times the HSDP replicas'), which is DDP's mean gradient.
"""

from __future__ import annotations

from ezpz.decisions import MeshSupport
from ezpz.primitives.frozen_records import frozen

__all__ = ["DIVIDING_OPS", "GradientReduction", "gradient_reduction"]

DIVIDING_OPS = ("AVG", "PREMUL_SUM")
"""The reduce operations FSDP2 divides in: ``AVG`` by default, ``PREMUL_SUM`` with a divide factor."""

#: torchtitan's Aurora setting (``disable_fsdp_gradient_division``), and why ``rt.shard`` does not take it.
TORCHTITAN_FACTOR = ("set_gradient_divide_factor(1.0) with SUM forced (torchtitan's disable_fsdp_gradient_division): "
                     "no division at all, right for torchtitan's loss (summed, divided by the global token count) "
                     "but world-size times DDP's gradients for a loss averaged on each rank")


@frozen(kw_only=True)
class GradientReduction:
    """Whether ``rt.shard`` forces FSDP2's gradient reductions to ``SUM``, what that does, and why."""

    force_sum: bool
    chosen: str
    reason: str
    rejected: str = ""
    """The alternative not taken (with ``force_sum``: torchtitan's divide factor 1.0)."""


def gradient_reduction(support: MeshSupport, device: str) -> GradientReduction:
    """``SUM`` forced, divided once after, where the backend lacks ``AVG`` or ``PREMUL_SUM``; else FSDP2's own."""
    lacking = [op for op in DIVIDING_OPS if op in support.unsupported_reduce_ops]
    if not lacking:
        return GradientReduction(
            force_sum=False, chosen="FSDP2's own gradient reduction (AVG inside the reduce-scatter for fp32/bf16)",
            reason=f"the collective backend on {device} is not known to lack AVG or PREMUL_SUM")
    fails = ("FSDP2's default reduce-scatter divides with AVG, which would raise in the first backward"
             if "AVG" in lacking else
             "FSDP2 divides with PREMUL_SUM once a divide factor is set (set_gradient_divide_factor), which would "
             "raise in backward")
    return GradientReduction(
        force_sum=True,
        chosen=("gradients reduced with SUM, then divided once by the data-parallel size "
                "(set_force_sum_reduction_for_comms(True); divide factor left to torch)"),
        reason=(f"the collective backend on {device} lacks {' and '.join(lacking)} ({support.reduce_ops_reason}): "
                f"{fails}; with SUM forced torch divides the summed shard once, after the reduction, by the "
                "reduce-scatter group's size times the HSDP replicas' (or by the divide factor, where one is set): "
                "DDP's mean gradient"),
        rejected=TORCHTITAN_FACTOR)
