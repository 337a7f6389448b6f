"""The reduce operations gloo lacks, by torch version: for a plugin whose collectives are gloo, or run through it.

torch's gloo backend raises ``Cannot use ReduceOp.PREMUL_SUM with Gloo`` on every version (seen on torch
2.13 for ``all_reduce``, ``reduce_scatter`` and ``reduce_scatter_tensor``). ``AVG`` arrived in torch 2.8
(pytorch#149781: "Cannot use ReduceOp.AVG with Gloo" before); its reduce-scatter gave wrong results under
FSDP (pytorch#162338, "module: correctness (silent)") until pytorch#171458, merged 2025-12-29, so ezpz
trusts gloo's ``AVG`` from torch 2.11. ``plan()`` uses this where no plugin answers ``ezpz_mesh_support`` and
the backend is gloo (any device); a plugin whose backend stages through gloo (``ezpz-example-emu``) adds it to
its own answer.
"""

from __future__ import annotations

from ezpz.decisions import MeshSupport
from ezpz.facts import TorchBuild

__all__ = ["GLOO_REDUCE_SOURCES", "gloo_mesh_support", "gloo_unsupported_reduce_ops"]

GLOO_REDUCE_SOURCES = (
    "https://github.com/pytorch/pytorch/pull/149781",  # ProcessGroupGloo: support ReduceOp::AVG (torch 2.8)
    "https://github.com/pytorch/pytorch/issues/162338",  # Incorrect AVG reduction for GLOO (silent)
    "https://github.com/pytorch/pytorch/pull/171458",  # its fix, merged 2025-12-29
)


def gloo_unsupported_reduce_ops(build: TorchBuild) -> tuple[frozenset[str], str]:
    """``(ops, reason)``: the ``ReduceOp`` names gloo refuses or gets wrong on this torch, and why."""
    if build.at_least(2, 11):
        return frozenset({"PREMUL_SUM"}), (f"gloo on torch {build.version} raises 'Cannot use ReduceOp.PREMUL_SUM "
                                           "with Gloo' (every torch version; AVG works from 2.11)")
    avg = ("AVG arrived in gloo in torch 2.8 (pytorch#149781) and its reduce-scatter was silently wrong until "
           "pytorch#171458 (2.11, pytorch#162338)" if build.at_least(2, 8)
           else "gloo raises 'Cannot use ReduceOp.AVG with Gloo' before torch 2.8 (pytorch#149781 added it)")
    return frozenset({"PREMUL_SUM", "AVG"}), (f"gloo on torch {build.version}: PREMUL_SUM raises on every "
                                              f"version; {avg}")


def gloo_mesh_support(build: TorchBuild) -> MeshSupport:
    """torch's own mesh construction, with the reduce operations gloo lacks on ``build``."""
    ops, why = gloo_unsupported_reduce_ops(build)
    return MeshSupport(reason="gloo: torch's own mesh groups", unsupported_reduce_ops=ops,
                       reduce_ops_reason=why, sources=GLOO_REDUCE_SOURCES)
