"""The tutorial plugin's tests: the conformance kit on three kinds of input, and one planned decision."""

from __future__ import annotations

import importlib.machinery
import sys
import types

import pytest

from ezpz.testing import assert_conformant, make_host, make_plan, recorded_build
from ezpz_example_hpu import plugin
from ezpz_example_hpu.plugin import SIMULATE_VAR, HpuFacts


def fake_module(monkeypatch: pytest.MonkeyPatch, name: str, **attrs: object) -> types.ModuleType:
    """An importable stand-in module, removed again after the test."""
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(attrs)
    monkeypatch.setitem(sys.modules, name, module)
    return module


@pytest.fixture
def fake_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in Habana SDK with 8 devices and the hccl bindings, for hooks that import them."""
    for name in ("habana_frameworks", "habana_frameworks.torch", "habana_frameworks.torch.distributed"):
        fake_module(monkeypatch, name)
    fake_module(monkeypatch, "habana_frameworks.torch.hpu", is_available=lambda: True, device_count=lambda: 8,
                get_device_name=lambda device=None: "GAUDI2")
    fake_module(monkeypatch, plugin.HCCL_MODULE)
    # Importing the real hccl module registers "hccl" with torch.distributed; the stand-in does the same (the
    # conformance kit checks that the backend is known after ezpz_before_init), undone after the test.
    import torch.distributed as dist

    monkeypatch.setattr(dist.Backend, "backend_list", [*dist.Backend.backend_list, "hccl"])


def test_conformant_without_a_device():
    report = assert_conformant("example-hpu", environ={})  # includes the import-without-SDK check
    assert "habana_frameworks not installed" in report["ezpz_probe_devices(inputs)"].detail


def test_conformant_with_a_simulated_device():
    report = assert_conformant(plugin, environ={SIMULATE_VAR: "2"}, isolated_import=False)
    assert report["ezpz_probe_devices(inputs)"].detail == "offers hpu (priority 110)"


def test_conformant_with_recorded_sdk_facts(fake_sdk):
    recorded = plugin.hpu_candidate(HpuFacts(source="sdk", count=8, names=["GAUDI2"] * 8,
                                             module_ids=[str(i) for i in range(8)], hccl_importable=True))
    report = assert_conformant(plugin, environ={}, candidates=[recorded], isolated_import=False)
    assert report["ezpz_select_backend(hpu#1, 2 ranks)"].detail.startswith("hccl")
    assert "imported habana_frameworks.torch.distributed.hccl" in report["ezpz_before_init(hpu#1)"].detail


def test_a_simulated_device_wins_and_plans_gloo():
    plan = make_plan(make_host(plugin), environ={SIMULATE_VAR: "2"}, build=recorded_build("cpu"))
    assert plan.device.candidate.device_type == "hpu" and plan.backend.name == "gloo"
    assert plan.amp.dtype == "bf16"
