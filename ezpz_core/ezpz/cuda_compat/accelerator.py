"""``torch.accelerator`` asked from the project, answered for the chosen device (on the CPU too).

Code written for ``torch.accelerator`` (today's pytorch/examples) asks ``is_available()``,
``current_accelerator()``, ``device_count()``, then uses ``torch.device(type, local_rank)``,
``set_device_index(local_rank)`` and ``get_default_backend_for_device(device)``. Here the chosen device is the
accelerator, even the CPU; with L processes on this host the count is at least L and ``<type>:<local_rank>`` is
this rank's device (:class:`.devices.DeviceMap` maps it, as it maps ``'cuda:N'``). Synchronize and memory calls
go to the device's torch module where it has them (else ``0`` / ``{}`` / nothing, and the report says so).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ezpz.cuda_compat.context import Compat
from ezpz.cuda_compat.patching import scoped
from ezpz.cuda_compat.scope import Site

__all__ = ["MEMORY_CALLS", "install"]

#: ``torch.accelerator`` memory calls, each with what it answers where the device's module has no such call.
MEMORY_CALLS: dict[str, Any] = {
    "memory_allocated": 0, "max_memory_allocated": 0, "memory_reserved": 0, "max_memory_reserved": 0,
    "memory_stats": {}, "reset_peak_memory_stats": None, "reset_accumulated_memory_stats": None,
    "empty_cache": None, "empty_host_cache": None,
}


def install(c: Compat) -> None:  # noqa: C901 - one table of small answers
    import torch

    accelerator, devices, rt, name = torch.accelerator, c.devices, c.rt, c.target
    kind = devices.type
    count = max(devices.count, devices.local_world_size)
    view = {"index": devices.local_rank if devices.local_world_size > 1 else (devices.target.index or 0)}

    def answer(call: str, fn: Callable[..., Any]) -> None:
        original = getattr(accelerator, call, None)
        if original is not None:
            c.patches.replace(accelerator, call, scoped(c.scope, original, fn))

    def is_available(site: Site) -> bool:
        site.note("torch.accelerator.is_available()", f"True: {name} is the chosen device", "different")
        return True

    def current(site: Site, check_available: bool = False) -> Any:
        site.note("torch.accelerator.current_accelerator()", f"torch.device({kind!r})", "different")
        return torch.device(kind)

    def device_count(site: Site) -> int:
        site.note("torch.accelerator.device_count()",
                  f"{count}: {devices.local_world_size} process(es) on this host, {devices.count} {kind} device(s) "
                  "each sees", "different")
        return count

    def current_index(site: Site) -> int:
        site.note("torch.accelerator.current_device_index()", f"{view['index']} ({name})", "same")
        return view["index"]

    def select(device: Any) -> Any:
        """Make ``device`` (an index, or the chosen type with one) current; the device it became."""
        index = device if isinstance(device, int) else torch.device(device).index
        target = devices.device(index) if isinstance(index, int) else devices.target
        setter = c.module_attr("set_device")
        if setter is not None and target.index is not None:
            setter(target)
        if isinstance(index, int):
            view["index"] = index
        return target

    def set_index(call: str) -> Callable[..., None]:
        def set_device_index(site: Site, device: Any) -> None:
            target = select(device)
            site.note(f"torch.accelerator.{call}({device!r})", f"{name}: this rank's device is {target}", "same")
        return set_device_index

    @contextlib.contextmanager
    def _block(device: Any) -> Iterator[None]:
        before = view["index"]
        if device is not None:
            select(device)
        try:
            yield
        finally:
            if device is not None:
                select(before)

    def device_index(site: Site, device: Any) -> Any:
        site.note(f"torch.accelerator.device_index({device!r})", f"{name} inside the block", "same")
        return _block(device)

    def synchronize(site: Site, device: Any = None) -> None:
        rt.synchronize()
        site.note("torch.accelerator.synchronize()", f"rt.synchronize() on {name}", "same")

    answer("is_available", is_available)
    answer("current_accelerator", current)
    answer("device_count", device_count)
    answer("current_device_index", current_index)
    answer("current_device_idx", current_index)
    answer("set_device_index", set_index("set_device_index"))
    answer("set_device_idx", set_index("set_device_idx"))
    answer("synchronize", synchronize)
    for call, empty in MEMORY_CALLS.items():
        answer(call, c.memory_counter(f"torch.accelerator.{call}", call, empty))
    answer("device_index", device_index)  # a class torch uses only as ``with device_index(i):``
    _install_backend(c)


def _install_backend(c: Compat) -> None:
    """``get_default_backend_for_device(device)`` from the project: the backend the plugins chose."""
    import torch.distributed as dist

    if not dist.is_available() or not hasattr(dist, "get_default_backend_for_device"):
        return
    original, backend, devices = dist.get_default_backend_for_device, c.rt.backend, c.devices

    def names_ours(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        device = args[0] if args else kwargs.get("device")
        text = str(device)
        return text.startswith("cuda") or text.split(":")[0] == devices.type

    def default_backend(site: Site, device: Any) -> str:
        site.note(f"get_default_backend_for_device({str(device)!r})", f"{backend!r}: the backend ezpz chose",
                  "different" if backend != "nccl" else "same")
        return backend

    c.patches.replace(dist, "get_default_backend_for_device", scoped(c.scope, original, default_backend, names_ours))
