"""On a real Intel GPU: the live probe, the plan, and a short autocast step. Skipped elsewhere."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not (hasattr(torch, "xpu") and torch.xpu.is_available()),
                       reason="no Intel GPU here (torch.xpu.is_available() is False)"),
]


def test_live_probe_matches_torch() -> None:
    import ezpz.hooks
    from ezpz.probes.torch_build import probe_torch_build

    from ezpz_xpu import probe

    facts = probe.probe_xpu(probe_torch_build(), os.environ)
    assert facts.device_count == torch.xpu.device_count()
    assert facts.devices[0].name == torch.xpu.get_device_name(0)
    the_plan, explanation = ezpz.hooks.plan(environ={k: v for k, v in os.environ.items()
                                                     if not k.startswith("EZPZ_")})
    assert the_plan.device.candidate.device_type == "xpu", str(explanation)


def test_live_autocast_step_with_the_planned_dtype() -> None:
    import ezpz.hooks

    the_plan, _ = ezpz.hooks.plan(environ={})
    device = torch.device(the_plan.device.torch_device)
    model = torch.nn.Linear(64, 64).to(device)
    with torch.autocast("xpu", dtype=the_plan.amp.torch_dtype, enabled=the_plan.amp.autocast):
        out = model(torch.randn(8, 64, device=device))
    if the_plan.amp.autocast:
        assert out.dtype == the_plan.amp.torch_dtype
    out.float().sum().backward()
    stats = the_plan.profiling.memory_stats(device)
    assert stats["allocated_bytes"] > 0
    if the_plan.profiling.range_push is not None:
        the_plan.profiling.range_push("ezpz-xpu-test")
        the_plan.profiling.range_pop()
