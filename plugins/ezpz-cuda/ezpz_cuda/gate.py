"""The gate: which torch builds cannot drive NVIDIA GPUs at all, from torch-build facts alone.

Standard library only, so the entry module (:mod:`ezpz_cuda.plugin`) rejects a CPU or ROCm torch without
loading the facts, probes or policies; :mod:`ezpz_cuda.policy` re-exports it. Both import it from here, so
neither imports the other.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_rejection"]


def build_rejection(build: Any) -> str | None:
    """Why this torch cannot drive NVIDIA GPUs at all, or None. ROCm builds are never claimed."""
    if build.hip:
        return f"torch is a ROCm build (torch.version.hip={build.hip}): left to ezpz-rocm"
    if not build.cuda:
        return f"torch built without CUDA (torch {build.version}: torch.version.cuda is None)"
    return None
