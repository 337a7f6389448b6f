"""Checking what a hook returned: every reason a non-empty string, callables callable; and a one-line summary."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ezpz.compiling import CompilePolicy
from ezpz.decisions import AmpPolicy, BackendChoice, LifecycleAction, ProfilingSupport
from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport

__all__ = ["summary", "value_problems"]


def _text(value: object, where: str, out: list[str]) -> None:
    if not isinstance(value, str):
        out.append(f"{where} is {type(value).__name__}, not a string")
    elif not value.strip():
        out.append(f"{where} is empty")


def _alternatives(alts: Iterable[Any], where: str, out: list[str]) -> None:
    for i, alt in enumerate(alts):
        _text(getattr(alt, "name", None), f"{where}[{i}].name", out)
        _text(getattr(alt, "reason", None), f"{where}[{i}].reason", out)


def value_problems(value: object) -> list[str]:
    """Reasons that are empty or not strings, and other malformed fields."""
    out: list[str] = []
    if isinstance(value, ProbeReport):
        for i, c in enumerate(value.candidates):
            if not isinstance(c, DeviceCandidate):
                out.append(f"candidates[{i}] is {type(c).__name__}, not DeviceCandidate")
                continue
            _text(c.device_type, f"candidates[{i}].device_type", out)
            _text(c.reason, f"candidates[{i}].reason", out)
            if not isinstance(c.priority, int):
                out.append(f"candidates[{i}].priority is {type(c.priority).__name__}, not int")
        for i, r in enumerate(value.rejections):
            _text(getattr(r, "device_type", None), f"rejections[{i}].device_type", out)
            _text(getattr(r, "reason", None), f"rejections[{i}].reason", out)
    elif isinstance(value, BackendChoice):
        _text(value.name, "name", out)
        _text(value.reason, "reason", out)
        _alternatives(value.alternatives, "alternatives", out)
    elif isinstance(value, AmpPolicy):
        _text(value.reason, "reason", out)
        _text(value.tf32_reason, "tf32_reason", out)
        _alternatives(value.alternatives, "alternatives", out)
    elif isinstance(value, ProfilingSupport):
        _text(value.reason, "reason", out)
        for i, a in enumerate(value.activities):
            _text(a, f"activities[{i}]", out)
        if (value.range_push is None) != (value.range_pop is None):
            out.append("range_push and range_pop must both be set or both be None")
        for attr in ("range_push", "range_pop", "memory_stats"):
            fn = getattr(value, attr)
            if fn is not None and not callable(fn):
                out.append(f"{attr} is not callable")
    elif isinstance(value, LifecycleAction):
        _text(value.reason, "reason", out)
        for k, v in value.env_defaults.items():
            if not isinstance(k, str) or not isinstance(v, str):
                out.append(f"env_defaults[{k!r}] must map str to str, got {type(v).__name__}")
    elif isinstance(value, LaunchEnv):
        _alternatives(value.rejected, "rejected", out)
    return out


def summary(value: object) -> str:
    if isinstance(value, ProbeReport):
        parts = [f"offers {c.device_type} (priority {c.priority})" for c in value.candidates]
        parts += [f"rejects {r.device_type}: {r.reason}" for r in value.rejections]
        return "; ".join(parts) or "empty report"
    if isinstance(value, BackendChoice):
        return f"{value.name}: {value.reason}"
    if isinstance(value, AmpPolicy):
        return f"{value.dtype} (autocast {'on' if value.autocast else 'off'}): {value.reason}"
    if isinstance(value, ProfilingSupport):
        return f"activities {','.join(value.activities)}, marker {value.marker}"
    if isinstance(value, LifecycleAction):
        return value.reason
    if isinstance(value, CompilePolicy):
        mode = f", mode {value.mode}" if value.mode else ""
        return f"{value.backend}{mode}: {value.reason}"
    if isinstance(value, LaunchEnv):
        return f"{value.launcher}: rank {value.rank}/{value.world_size}"
    return type(value).__name__
