"""Rejection on torch-build facts alone: standard library only, so a CPU or ROCm torch never loads this
plugin's facts, probes or policies (``import ezpz; setup()`` stays cheap where there is no NVIDIA GPU)."""

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
