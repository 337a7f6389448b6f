"""Profiling support from recorded facts: XPU activity, ITT ranges (lazily imported), torch.xpu memory stats."""

from __future__ import annotations

import sys
import types

from xpu_testlib import plan
from xpu_recorded import ARC_A770, AURORA_FLAT, TORCH_2_8_XPU, TORCH_2_13_XPU


def test_recorded_max1550_flat_profiling_uses_xpu_activity_and_itt(intel) -> None:
    intel(AURORA_FLAT)
    prof = plan(TORCH_2_13_XPU)[0].profiling
    assert prof.activities == ("CPU", "XPU")
    assert prof.marker == "itt"
    assert prof.range_push is not None and prof.range_pop is not None and prof.memory_stats is not None
    assert "ITT" in prof.reason and "VTune" in prof.reason


def test_recorded_build_without_itt_keeps_record_function_ranges(intel) -> None:
    intel([ARC_A770], itt=False)
    prof = plan(TORCH_2_8_XPU)[0].profiling
    assert prof.marker is None and prof.range_push is None
    assert "torch.profiler.itt.is_available() is False" in prof.reason


def test_itt_ranges_call_torch_profiler_itt(intel, monkeypatch) -> None:
    intel([ARC_A770])
    prof = plan(TORCH_2_13_XPU)[0].profiling
    calls: list[tuple[str, ...]] = []
    import torch.profiler.itt as itt

    monkeypatch.setattr(itt, "range_push", lambda name: calls.append(("push", name)))
    monkeypatch.setattr(itt, "range_pop", lambda: calls.append(("pop",)))
    prof.range_push("forward")
    prof.range_pop()
    assert calls == [("push", "forward"), ("pop",)]


def test_memory_stats_read_torch_xpu_counters(intel, monkeypatch) -> None:
    intel([ARC_A770])
    prof = plan(TORCH_2_13_XPU)[0].profiling
    import torch

    fake = types.SimpleNamespace(
        memory_allocated=lambda d: 1.0, memory_reserved=lambda d: 2.0, max_memory_allocated=lambda d: 3.0,
        max_memory_reserved=lambda d: 4.0, mem_get_info=lambda d: (5, 16),
    )
    monkeypatch.setattr(torch, "xpu", fake)
    stats = prof.memory_stats("xpu:0")
    assert stats == {"allocated_bytes": 1.0, "reserved_bytes": 2.0, "max_allocated_bytes": 3.0,
                     "max_reserved_bytes": 4.0, "free_bytes": 5.0, "total_bytes": 16.0}
    del fake.max_memory_reserved, fake.mem_get_info  # an older torch.xpu
    assert set(prof.memory_stats("xpu:0")) == {"allocated_bytes", "reserved_bytes", "max_allocated_bytes"}
    assert "torch" in sys.modules


def test_recorded_device_timer_is_xpu_events_made_from_torch_xpu(intel, monkeypatch) -> None:
    """Recorded facts, no XPU: the choice, its reason, and torch.xpu.Event(enable_timing=True) (a recorder here)."""
    import torch

    for itt in (True, False):
        intel([ARC_A770], itt=itt)
        prof = plan(TORCH_2_13_XPU)[0].profiling
        assert prof.timer == "xpu events" and "torch.xpu.Event(enable_timing=True)" in prof.timer_reason
        made: list[dict] = []
        monkeypatch.setattr(torch.xpu, "Event", lambda **kw: made.append(kw) or "event", raising=False)
        assert prof.new_event() == "event" and made == [{"enable_timing": True}]
