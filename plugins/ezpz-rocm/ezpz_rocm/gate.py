"""Rejection on torch-build facts alone: standard library only, so a CUDA or CPU torch never loads this
plugin's facts, probes or policies."""

from __future__ import annotations

__all__ = ["NOT_ROCM"]

NOT_ROCM = "torch is not a ROCm build (torch.version.hip is None)"
