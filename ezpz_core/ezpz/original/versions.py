"""The original ezpz's torch-version helpers."""

from __future__ import annotations

__all__ = ["get_torch_version_as_float", "get_torch_version_tuple"]


def get_torch_version_tuple() -> tuple[int, int]:
    """torch's ``(major, minor)``, e.g. ``(2, 13)``; compare tuples, not floats."""
    import torch

    from ezpz.facts import parse_release

    major, minor = parse_release(torch.__version__)[:2]
    return major, minor


def get_torch_version_as_float() -> float:
    """torch's version as ``major.minor`` float (``2.13`` -> 2.13); prefer :func:`get_torch_version_tuple`."""
    major, minor = get_torch_version_tuple()
    return float(f"{major}.{minor}")
