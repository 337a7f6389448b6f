"""The core's plugin conformance kit (``ezpz.testing``) run against ezpz-xpu, here and on recorded machines."""

from __future__ import annotations

import pytest
from xpu_recorded import ARC_A770, AURORA_FLAT, MTL_IGPU, TORCH_2_4_XPU, TORCH_2_8_XPU, TORCH_2_13_XPU

testing = pytest.importorskip("ezpz.testing", reason="ezpz.testing (the conformance kit) is not in this ezpz")

from ezpz_xpu import policy  # noqa: E402
from ezpz_xpu.facts import XpuFacts  # noqa: E402


def test_conformant_on_this_machine() -> None:
    report = testing.assert_conformant("xpu")
    assert report["imports without vendor SDKs"].passed


@pytest.mark.parametrize(("build", "devices", "ccl", "ipex"), [
    (TORCH_2_4_XPU, AURORA_FLAT, False, True),
    (TORCH_2_4_XPU, AURORA_FLAT, True, True),
    (TORCH_2_8_XPU, (ARC_A770,), False, False),
    (TORCH_2_13_XPU, (MTL_IGPU,), True, True),
], ids=["2.4-max1550-gloo", "2.4-max1550-ccl", "2.8-a770", "2.13-mtl"])
def test_recorded_conformant(intel, build, devices, ccl, ipex) -> None:
    intel(devices, ccl=ccl, ipex=ipex)
    facts = XpuFacts(torch_version=build.version, device_count=len(devices), devices=devices, ccl_bindings=ccl,
                     ipex=ipex)
    candidate = policy.xpu_report(facts).candidates[0]
    report = testing.assert_conformant("xpu", build=build, environ={}, candidates=[candidate],
                                       isolated_import=False)
    assert any(r.name.startswith("ezpz_before_init(") and r.passed for r in report.results)
