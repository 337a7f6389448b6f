"""``torch.cuda.*`` asked from the project, answered by the chosen device.

Availability and count describe the device CUDA requests go to; set/current device, synchronize, seeds and
memory statistics go to the device's torch module where it has them (else they do nothing, and the report
says so); capability and properties are the plugin's honest answer, ``(0, 0)`` where the device has no CUDA
compute capability; streams and events are the device's, or in-order stand-ins on a device without them
(work there runs in issue order, which is what stream ordering guarantees).
"""

from __future__ import annotations

import contextlib
import time
import types
from collections.abc import Callable
from typing import Any

from ezpz.cuda_compat.context import Compat
from ezpz.cuda_compat.patching import scoped, scoped_class
from ezpz.cuda_compat.scope import Site

__all__ = ["MEMORY_CALLS", "install"]

#: ``torch.cuda`` memory calls, each with what it answers where the device has no such counter.
MEMORY_CALLS: dict[str, Any] = {
    "memory_allocated": 0, "max_memory_allocated": 0, "memory_reserved": 0, "max_memory_reserved": 0,
    "memory_stats": {}, "reset_peak_memory_stats": None, "reset_max_memory_allocated": None, "empty_cache": None,
}


class _InOrderStream:
    """A stream on a device without streams: work is issued in order already, so there is nothing to order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def synchronize(self) -> None: ...
    def wait_stream(self, stream: Any) -> None: ...
    def wait_event(self, event: Any) -> None: ...
    def record_event(self, event: Any = None) -> Any:
        event = event or _WallEvent()
        event.record()
        return event

    def query(self) -> bool:
        return True


class _WallEvent:
    """A timing event on a device without events: the wall clock after the device's queued work is done."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                 sync: Callable[[], None] | None = None) -> None:
        self._t: float | None = None
        self._sync = sync

    def record(self, stream: Any = None) -> None:
        if self._sync is not None:
            self._sync()
        self._t = time.perf_counter()

    def synchronize(self) -> None: ...
    def wait(self, stream: Any = None) -> None: ...

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: _WallEvent) -> float:
        if self._t is None or end._t is None:
            raise RuntimeError("elapsed_time: both events must be recorded first")
        return (end._t - self._t) * 1e3


def install(c: Compat) -> None:  # noqa: C901 - one table of small answers
    import torch

    cuda, rt, answers, name = torch.cuda, c.rt, c.answers, c.target
    index = rt.device.index if rt.device.index is not None else 0

    mod = c.module_attr

    def answer(call: str, fn: Callable[..., Any]) -> None:
        original = getattr(cuda, call, None)
        if original is None:
            return
        front = scoped_class if isinstance(original, type) else scoped
        c.patches.replace(cuda, call, front(c.scope, original, fn))

    def is_available(site: Site) -> bool:
        site.note("torch.cuda.is_available()", f"True: CUDA requests go to {name}", "different")
        return True

    def device_count(site: Site) -> int:
        n = c.devices.count
        site.note("torch.cuda.device_count()", f"{n}: {name}'s device count", "different")
        return n

    def current_device(site: Site) -> int:
        site.note("torch.cuda.current_device()", f"{index} ({name})", "same")
        return index

    def set_device(site: Site, device: Any) -> None:
        target = c.devices.device(device) if c.devices.asks_cuda(device) else device
        fn = mod("set_device")
        if fn is not None and getattr(target, "index", None) is not None:
            fn(target)
            site.note(f"torch.cuda.set_device({device!r})", f"set_device({str(target)!r})", "same")
        else:
            site.note(f"torch.cuda.set_device({device!r})", f"nothing: {name} has no device index to set", "none")

    def synchronize(site: Site, device: Any = None) -> None:
        rt.synchronize()
        site.note("torch.cuda.synchronize()", f"rt.synchronize() on {name}", "same")

    def seeding(call: str) -> Callable[..., Any]:
        def seed(site: Site, value: int) -> None:
            fn = mod(call)
            if fn is not None:
                fn(value)
                site.note(f"torch.cuda.{call}()", f"{name}'s {call}", "same")
            else:
                site.note(f"torch.cuda.{call}()", f"nothing: {name} draws from torch.manual_seed's generator", "none")
        return seed

    def capability(site: Site, device: Any = None) -> tuple[int, int]:
        if answers.capability is not None:
            site.note("torch.cuda.get_device_capability()", f"{answers.capability} ({name})", "same")
            return answers.capability
        site.note("torch.cuda.get_device_capability()",
                  f"(0, 0): {name} has no CUDA compute capability (so capability-gated CUDA kernels stay off)",
                  "different")
        return (0, 0)

    def properties(site: Site, device: Any = None) -> Any:
        major, minor = answers.capability or (0, 0)
        props = {"name": name, "total_memory": 0, "multi_processor_count": 0, **answers.properties,
                 "major": major, "minor": minor}
        site.note("torch.cuda.get_device_properties()", f"{name}'s properties ({', '.join(sorted(props))})",
                  "different")
        return types.SimpleNamespace(**props)

    def device_name(site: Site, device: Any = None) -> str:
        fn = mod("get_device_name")
        value = fn() if fn is not None else str(answers.properties.get("name", name))
        site.note("torch.cuda.get_device_name()", repr(value), "different")
        return value

    def bf16(site: Site, including_emulation: bool = True) -> bool:
        why = rt.amp.why_unsupported("bf16", name)
        site.note("torch.cuda.is_bf16_supported()", f"{why is None}: {why or name + ' does bf16'}", "same")
        return why is None

    def stream_class(site: Site, *args: Any, **kwargs: Any) -> Any:
        if answers.streams and mod("Stream") is not None:
            site.note("torch.cuda.Stream()", f"{name}'s Stream", "same")
            return mod("Stream")(*args, **kwargs)
        site.note("torch.cuda.Stream()", f"an in-order stand-in: {name} has no streams; work runs in issue order",
                  "none")
        return _InOrderStream()

    def stream_ctx(site: Site, stream: Any = None) -> Any:
        if answers.streams and mod("stream") is not None and not isinstance(stream, _InOrderStream):
            site.note("torch.cuda.stream()", f"{name}'s stream()", "same")
            return mod("stream")(stream)
        site.note("torch.cuda.stream()", "no-op context: work runs in issue order", "none")
        return contextlib.nullcontext()

    def current_stream(site: Site, device: Any = None) -> Any:
        if answers.streams and mod("current_stream") is not None:
            site.note("torch.cuda.current_stream()", f"{name}'s current_stream()", "same")
            return mod("current_stream")()
        site.note("torch.cuda.current_stream()", "an in-order stand-in", "none")
        return _InOrderStream()

    def event_class(site: Site, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> Any:
        if answers.events and mod("Event") is not None:
            site.note("torch.cuda.Event()", f"{name}'s Event", "same")
            return mod("Event")(enable_timing=enable_timing, blocking=blocking)
        site.note("torch.cuda.Event()", f"a wall-clock event after rt.synchronize(): {name} has no events",
                  "different")
        return _WallEvent(enable_timing, sync=rt.synchronize)

    def device_ctx(site: Site, device: Any) -> Any:
        target = c.devices.device(device) if device is not None and c.devices.asks_cuda(device) else None
        block = mod("device")
        if block is not None and target is not None and target.index is not None:
            site.note(f"torch.cuda.device({device!r})", f"{c.devices.type} device {target.index} inside the block",
                      "same")
            return block(target)
        site.note(f"torch.cuda.device({device!r})", f"no-op context: this rank's device is {name}", "none")
        return contextlib.nullcontext()

    answer("is_available", is_available)
    def is_initialized(site: Site) -> bool:
        site.note("torch.cuda.is_initialized()", f"True: {name} is set up", "different")
        return True

    answer("is_initialized", is_initialized)
    answer("device_count", device_count)
    answer("current_device", current_device)
    answer("set_device", set_device)
    answer("synchronize", synchronize)
    for call in ("manual_seed", "manual_seed_all"):
        answer(call, seeding(call))
    for call, empty in MEMORY_CALLS.items():
        answer(call, c.memory_counter(f"torch.cuda.{call}", call, empty))
    answer("get_device_capability", capability)
    answer("get_device_properties", properties)
    answer("get_device_name", device_name)
    answer("is_bf16_supported", bf16)
    answer("Stream", stream_class)
    answer("stream", stream_ctx)
    answer("current_stream", current_stream)
    answer("default_stream", current_stream)
    answer("Event", event_class)
    answer("device", device_ctx)
