"""NVTX ranges -> ``rt.range``; ``ProfilerActivity.CUDA`` -> the device's profiler activities.

``rt.range`` is the device's own range marker where it has one and a torch record under the profiler.
"""

from __future__ import annotations

from typing import Any

from ezpz.cuda_compat.context import Compat
from ezpz.cuda_compat.patching import scoped
from ezpz.cuda_compat.scope import Site

__all__ = ["install"]


def install(c: Compat) -> None:
    import torch
    import torch.cuda.nvtx as nvtx
    import torch.profiler

    rt, scope, patches = c.rt, c.scope, c.patches
    marker = rt.profiling.marker or "a torch record_function under the profiler"
    open_ranges: list[Any] = []

    def push(site: Site, msg: str, *args: Any) -> int:
        section = rt.range(str(msg))
        section.__enter__()
        open_ranges.append(section)
        site.note("torch.cuda.nvtx.range_push()", f"rt.range() ({marker})", "same")
        return len(open_ranges) - 1

    def pop(site: Site) -> int:
        if open_ranges:
            open_ranges.pop().__exit__(None, None, None)
        site.note("torch.cuda.nvtx.range_pop()", "the rt.range() closed", "same")
        return len(open_ranges)

    def section(site: Site, msg: str, *args: Any, **kwargs: Any) -> Any:
        site.note("torch.cuda.nvtx.range()", f"rt.range() ({marker})", "same")
        return rt.range(str(msg).format(*args, **kwargs) if args or kwargs else str(msg))

    def mark(site: Site, msg: str) -> None:
        site.note("torch.cuda.nvtx.mark()", "nothing: no instant marker through ezpz", "none")

    for name, fn in (("range_push", push), ("range_pop", pop), ("range", section), ("mark", mark)):
        original = getattr(nvtx, name, None)
        if original is not None:
            patches.replace(nvtx, name, scoped(scope, original, fn))

    profile = torch.profiler.profile
    profile_init = profile.__init__
    cuda_activity = torch.profiler.ProfilerActivity.CUDA
    own = [getattr(torch.profiler.ProfilerActivity, a) for a in rt.profiling.activities
           if hasattr(torch.profiler.ProfilerActivity, a)]

    def asks_cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        activities = kwargs.get("activities")
        return activities is not None and cuda_activity in activities

    def activities(site: Site, this: Any, *args: Any, **kwargs: Any) -> None:
        asked = list(kwargs["activities"])
        chosen = [a for a in asked if a != cuda_activity] + [a for a in own if a not in asked]
        kwargs["activities"] = chosen
        site.note("profile(activities=[..., ProfilerActivity.CUDA])",
                  f"activities={[a.name for a in chosen]} ({c.target}'s: {', '.join(rt.profiling.activities)})",
                  "different" if cuda_activity not in own else "same")
        profile_init(this, *args, **kwargs)

    patches.replace(profile, "__init__", scoped(scope, profile_init, activities, asks_cuda))
