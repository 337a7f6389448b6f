"""The gate: why a torch cannot drive AMD GPUs at all, from torch-build facts alone.

Standard library only, so the entry module (:mod:`ezpz_rocm.plugin`) rejects a torch that is not a ROCm build
without loading the facts, probes or policies; :mod:`ezpz_rocm.policy` re-exports it. Both import it from here,
so neither imports the other.
"""

from __future__ import annotations

__all__ = ["NOT_ROCM"]

NOT_ROCM = "torch is not a ROCm build (torch.version.hip is None)"
