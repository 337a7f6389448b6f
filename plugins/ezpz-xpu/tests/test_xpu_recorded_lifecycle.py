"""Lifecycle: IPEX only where the torch version needs it, the oneCCL bindings only for ccl, and the trace says so."""

from __future__ import annotations

import logging

import pytest
from xpu_testlib import plan, torchrun_env
from ezpz.plugin_host.calls import Hooks
from ezpz.errors import UnavailableError
from xpu_recorded import AURORA_FLAT, MTL_IGPU, TORCH_2_4_XPU, TORCH_2_7_XPU, TORCH_2_8_XPU, TORCH_2_13_XPU, XPU_BUILDS

import ezpz.hooks
from ezpz_xpu import plugin, probe

TWO_RANKS = torchrun_env(rank=0, world=2)


@pytest.mark.parametrize("ccl", [False, True], ids=["no-bindings", "bindings"])
def test_recorded_max1550_flat_torch_2_4_imports_ipex_only_when_installed(intel, ccl) -> None:
    fake = intel(AURORA_FLAT, ipex=True, ccl=ccl)
    action = plugin.ezpz_before_init(plan(TORCH_2_4_XPU, TWO_RANKS)[0])
    assert fake.imported == ([probe.IPEX_MODULE, probe.CCL_MODULE] if ccl else [probe.IPEX_MODULE])
    assert "importing intel_extension_for_pytorch" in action.reason
    assert "end of life in March 2026" in action.reason
    if ccl:
        assert "importing oneccl_bindings_for_pytorch to register the 'ccl' backend (torch 2.4.0+xpu has no XCCL" \
            in action.reason
    else:
        assert "collectives fall back to gloo" in action.reason


def test_recorded_max1550_flat_torch_2_4_without_ipex_imports_nothing_and_says_upgrade(intel) -> None:
    fake = intel(AURORA_FLAT, ipex=False, ccl=False)
    action = plugin.ezpz_before_init(plan(TORCH_2_4_XPU)[0])
    assert fake.imported == []
    assert "IPEX not installed" in action.reason and "prototype" in action.reason
    assert "end of life in March 2026" in action.reason


@pytest.mark.parametrize("build", [TORCH_2_7_XPU, TORCH_2_8_XPU, TORCH_2_13_XPU], ids=lambda b: b.version)
def test_recorded_max1550_flat_torch_2_7_plus_never_imports_ipex(intel, build) -> None:
    fake = intel(AURORA_FLAT, ipex=True, ccl=True)
    the_plan, _ = plan(build, TWO_RANKS)
    action = plugin.ezpz_before_init(the_plan)
    assert probe.IPEX_MODULE not in fake.imported
    assert "IPEX not imported: native torch" in action.reason
    assert "it is installed; ezpz leaves it alone" in action.reason and "March 2026" in action.reason
    expected = [probe.CCL_MODULE] if the_plan.backend.name == "ccl" else []
    assert fake.imported == expected
    assert the_plan.backend.name == ("ccl" if build is TORCH_2_7_XPU else "xccl")


def test_recorded_ccl_import_happens_only_for_ccl(intel) -> None:
    fake = intel(AURORA_FLAT, ccl=True)
    plugin.ezpz_before_init(plan(TORCH_2_13_XPU, TWO_RANKS)[0])
    assert fake.imported == []  # xccl: the bindings are installed but not needed
    plugin.ezpz_before_init(plan(TORCH_2_13_XPU, {**TWO_RANKS, "EZPZ_BACKEND": "ccl"})[0])
    assert fake.imported == [probe.CCL_MODULE]


def test_recorded_broken_ccl_bindings_raise_with_a_fix(intel) -> None:
    fake = intel(AURORA_FLAT, ccl=True)
    fake.import_error[probe.CCL_MODULE] = ImportError("undefined symbol: _ZN3c1010Dispatcher")
    with pytest.raises(UnavailableError) as err:
        plugin.ezpz_before_init(plan(TORCH_2_7_XPU, TWO_RANKS)[0])
    assert "undefined symbol" in str(err.value) and "EZPZ_BACKEND=gloo" in str(err.value)


def test_recorded_broken_ipex_is_reported_and_skipped(intel) -> None:
    fake = intel(AURORA_FLAT, ipex=True)
    fake.import_error[probe.IPEX_MODULE] = ImportError("IPEX 2.3 needs torch 2.3")
    action = plugin.ezpz_before_init(plan(TORCH_2_4_XPU)[0])
    assert "the import failed (ImportError: IPEX 2.3 needs torch 2.3), continuing on native torch" in action.reason


def test_recorded_gloo_fallback_warns_in_the_log(intel, caplog) -> None:
    intel(AURORA_FLAT)
    with caplog.at_level(logging.WARNING, logger="ezpz.xpu"):
        plugin.ezpz_before_init(plan(TORCH_2_7_XPU, TWO_RANKS)[0])
    assert any("xpu_backend_fallback" in r.getMessage() and "oneccl_bind_pt" in r.getMessage()
               for r in caplog.records)


def test_recorded_ipex_import_is_logged_as_a_warning(intel, caplog) -> None:
    intel([MTL_IGPU], ipex=True)
    with caplog.at_level(logging.WARNING, logger="ezpz.xpu"):
        plugin.ezpz_before_init(plan(TORCH_2_4_XPU)[0])
    assert any("March 2026" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("build", XPU_BUILDS, ids=lambda b: b.version)
def test_recorded_lifecycle_runs_through_the_hook_facade(intel, build) -> None:
    intel(AURORA_FLAT, ipex=True, ccl=True)
    answers = Hooks(ezpz.hooks.get_plugin_host()).before_init(plan(build, TWO_RANKS)[0])
    assert [name for name, _ in answers] == ["xpu"]  # the other plugins stay quiet for an xpu plan


def test_before_init_ignores_plans_for_other_devices(intel) -> None:
    intel([])
    cpu_plan, _ = plan(TORCH_2_13_XPU)
    assert cpu_plan.device.candidate.device_type == "cpu"
    assert plugin.ezpz_before_init(cpu_plan) is None
