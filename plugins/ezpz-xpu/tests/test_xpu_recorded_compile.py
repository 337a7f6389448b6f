"""torch.compile and DeepSpeed answers of ezpz-xpu, from recorded facts only (no Intel GPU here).

Devices and builds are the recorded ones in xpu_recorded.py; the operating
system and whether ``pytorch-triton-xpu`` is installed are recorded per test by
replacing ``ezpz_xpu.plugin.host_platform`` / ``triton_found``.
"""

from __future__ import annotations

import pytest
from xpu_recorded import AURORA_FLAT, MTL_IGPU, TORCH_2_4_XPU, TORCH_2_7_XPU, TORCH_2_8_XPU, TORCH_2_13_XPU
from xpu_testlib import plan

from ezpz.plugin_host.calls import Hooks
from ezpz.errors import UnavailableError
from ezpz.runtime.deepspeed import deepspeed_config
import ezpz.hooks
from ezpz_xpu import plugin


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch):
    def record(platform: str = "linux", triton: bool = True) -> None:
        monkeypatch.setattr(plugin, "host_platform", lambda: platform)
        monkeypatch.setattr(plugin, "triton_found", lambda: triton)

    return record


@pytest.mark.parametrize("build", [TORCH_2_4_XPU, TORCH_2_8_XPU, TORCH_2_13_XPU], ids=lambda b: b.version)
def test_recorded_max1550_on_linux_compiles_with_inductor(intel, host, build) -> None:
    intel(AURORA_FLAT)
    host("linux")
    p, explanation = plan(build)
    assert p.compile.backend == "inductor" and "Max 1550" in p.compile.reason
    assert explanation["compile"].chosen == "inductor"


@pytest.mark.parametrize(("build", "backend"), [(TORCH_2_4_XPU, "aot_eager"), (TORCH_2_7_XPU, "inductor"),
                                                (TORCH_2_13_XPU, "inductor")], ids=lambda v: getattr(v, "version", v))
def test_recorded_meteor_lake_igpu_on_windows_needs_torch_2_7(intel, host, build, backend) -> None:
    intel([MTL_IGPU])
    host("win32")
    p, _ = plan(build)
    assert p.compile.backend == backend
    if backend == "aot_eager":
        assert "Inductor supports XPU on Windows from torch 2.7 (have 2.4.0+xpu)" in p.compile.alternatives[0].reason


def test_recorded_install_without_triton_and_a_request_for_inductor(intel, host) -> None:
    intel(AURORA_FLAT)
    host("linux", triton=False)
    p, _ = plan(TORCH_2_13_XPU)
    assert p.compile.backend == "aot_eager"
    assert "pytorch-triton-xpu" in p.compile.alternatives[0].reason
    with pytest.raises(UnavailableError) as err:
        plan(TORCH_2_13_XPU, compile="inductor")
    assert "Max 1550" in str(err.value) and "Cannot find a working triton installation" in str(err.value)


def test_recorded_max1550_lifecycle_names_deepspeeds_xpu_accelerator(intel, host) -> None:
    intel(AURORA_FLAT)
    host("linux")
    p, _ = plan(TORCH_2_13_XPU)
    actions = dict(Hooks(ezpz.hooks.get_plugin_host()).before_init(p))
    assert actions["xpu"].env_defaults["DS_ACCELERATOR"] == "xpu"
    assert "DS_ACCELERATOR=xpu" in actions["xpu"].reason
    assert "cpu" not in actions  # the built-in cpu plugin answers only for its own device


def test_recorded_max1550_deepspeed_config_is_bf16(intel, host) -> None:
    intel(AURORA_FLAT)
    host("linux")
    p, _ = plan(TORCH_2_13_XPU)
    config = deepspeed_config(p, {"zero_optimization": {"stage": 1}})
    assert config == {"zero_optimization": {"stage": 1}, "bf16": {"enabled": True}, "fp16": {"enabled": False}}
