"""Device memory helpers with the original ezpz's names, answered by each device's own torch module.

``get_memory_metrics`` reads the counters through the device plugin's
``memory_stats`` (the same numbers ``Runtime.memory_stats()`` gives) and,
like the original, returns ``{}`` where a device has no caching allocator
counters (CPU, MPS) or when ``EZPZ_TRACK_MEMORY=0``.
"""

from __future__ import annotations

import os
from typing import Any

from ezpz.primitives.device_module import device_module

__all__ = [
    "get_current_memory_allocated",
    "get_current_memory_reserved",
    "get_max_memory_allocated",
    "get_max_memory_reserved",
    "get_memory_metrics",
    "is_memory_metric_key",
    "reset_peak_memory_stats",
]

_GIB = 1024**3
#: metric name -> the plugins' memory_stats key, in the original's order.
_METRICS = (
    ("mem_alloc", "allocated_bytes"),
    ("mem_peak_alloc", "max_allocated_bytes"),
    ("mem_reserved", "reserved_bytes"),
    ("mem_peak_reserved", "max_reserved_bytes"),
)
_AGGREGATES = ("", "/mean", "/max", "/min", "/std")


def _device(device: Any) -> Any:
    import torch

    if device is None:
        from ezpz import hooks

        rt = hooks.get_runtime()
        if rt is not None:
            return rt.device
        from ezpz.original.compat import get_torch_device

        return torch.device(get_torch_device())
    if isinstance(device, int):
        from ezpz.original.compat import get_torch_device_type

        return torch.device(get_torch_device_type(), device)
    return torch.device(device)


def _counter(device: Any, name: str) -> float:
    """``torch.<type>.<name>(device)`` where that device type's module has it; 0.0 elsewhere (CPU, MPS)."""
    import torch

    dev = _device(device)
    module = device_module(dev.type)
    fn = getattr(module, name, None)
    return float(fn(dev)) if fn is not None else 0.0


def get_current_memory_allocated(device: Any) -> float:
    """Bytes currently allocated on ``device``; 0.0 on devices without allocator counters."""
    return _counter(device, "memory_allocated")


def get_current_memory_reserved(device: Any) -> float:
    """Bytes currently reserved by the caching allocator on ``device``; 0.0 where not counted."""
    return _counter(device, "memory_reserved")


def get_max_memory_allocated(device: Any) -> float:
    """Peak bytes allocated on ``device`` since the last reset; 0.0 where not counted."""
    return _counter(device, "max_memory_allocated")


def get_max_memory_reserved(device: Any) -> float:
    """Peak bytes reserved on ``device`` since the last reset; 0.0 where not counted."""
    return _counter(device, "max_memory_reserved")


def reset_peak_memory_stats(device: Any) -> None:
    """Reset the peak counters on ``device`` (no-op where there are none)."""
    import torch

    dev = _device(device)
    module = device_module(dev.type)
    reset = getattr(module, "reset_peak_memory_stats", None)
    if reset is not None:
        reset(dev)


def _stats(device: Any) -> dict[str, float]:
    """The device plugin's memory counters for ``device`` (empty where the plugin offers none)."""
    from ezpz import hooks

    rt = hooks.get_runtime()
    if rt is not None:
        profiling = rt.profiling
    else:
        from ezpz.original.compat import _plan

        profiling = _plan().profiling
    if profiling.memory_stats is None:
        return {}
    return dict(profiling.memory_stats(device))


def get_memory_metrics(device: Any = None, *, reset_peak: bool = True, prefix: str = "") -> dict[str, float]:
    """``{prefix}mem_alloc``, ``mem_peak_alloc``, ``mem_reserved``, ``mem_peak_reserved`` in GiB.

    ``{}`` where the device has no such counters (CPU, MPS) or with
    ``EZPZ_TRACK_MEMORY=0``. ``reset_peak`` resets the peaks after reading,
    so the next call covers only what happened in between.
    """
    from ezpz.inputs.settings import parse_bool

    if not parse_bool(os.environ, "EZPZ_TRACK_MEMORY", default=True):
        return {}
    dev = _device(device)
    if dev.type == "cpu":
        return {}
    stats = _stats(dev)
    if not all(key in stats for _, key in _METRICS):
        return {}
    metrics = {f"{prefix}{name}": stats[key] / _GIB for name, key in _METRICS}
    if reset_peak:
        reset_peak_memory_stats(dev)
    return metrics


def is_memory_metric_key(key: str) -> bool:
    """True for the four ``mem_*`` names, with any ``prefix/`` and an optional ``/mean``-style aggregate."""
    for name, _ in _METRICS:
        for suffix in _AGGREGATES:
            target = name + suffix
            if key == target or key.endswith("/" + target):
                return True
    return False
