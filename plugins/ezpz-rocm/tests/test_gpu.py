"""Checks on a real AMD GPU with a ROCm build of torch; skipped everywhere else.

Run on an AMD machine with ``pytest -m gpu plugins/ezpz-rocm/tests``. These use the
real probe (amdsmi if installed, else torch.cuda), unlike the recorded-facts suite.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not getattr(torch.version, "hip", None), reason="torch is not a ROCm build (torch.version.hip is None)"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no AMD GPU visible to torch.cuda"),
]


def _plan():
    import ezpz

    the_plan, _ = ezpz.hooks.plan(environ={})
    return the_plan


def test_real_probe_finds_the_visible_gpus() -> None:
    p = _plan()
    cand = p.device.candidate
    assert cand.plugin == "rocm" and cand.device_type == "cuda"
    assert cand.count == torch.cuda.device_count()
    real = torch.cuda.get_device_properties(0).gcnArchName.split(":", 1)[0]
    assert cand.facts.gpus[0].arch == real


def test_real_setup_runs_a_step_with_the_chosen_precision() -> None:
    import ezpz

    rt = ezpz.hooks.setup()
    try:
        assert rt.device.type == "cuda" and rt.backend in ("nccl", "gloo")
        model = torch.nn.Linear(64, 64).to(rt.device)
        x = torch.randn(8, 64, device=rt.device)
        with torch.autocast("cuda", dtype=rt.amp.torch_dtype, enabled=rt.amp.autocast):
            y = model(x)
        if rt.amp.autocast:
            assert y.dtype == rt.amp.torch_dtype
        assert not torch.backends.cuda.matmul.allow_tf32
    finally:
        ezpz.hooks.teardown()


def test_real_roctx_ranges_and_memory_stats() -> None:
    prof = _plan().profiling
    assert prof.marker == "roctx"
    prof.range_push("ezpz-rocm-test")
    torch.ones(1, device="cuda").add_(1)
    prof.range_pop()
    stats = prof.memory_stats(torch.device("cuda:0"))
    assert stats["allocated_bytes"] >= 0 and "reserved_bytes" in stats


def test_real_profiler_traces_hip_kernels_under_the_cuda_activity() -> None:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        (torch.randn(256, 256, device="cuda") @ torch.randn(256, 256, device="cuda")).sum().item()
    assert any(e.device_type.name == "CUDA" for e in p.events())
