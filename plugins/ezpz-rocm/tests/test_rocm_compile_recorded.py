"""torch.compile and DeepSpeed answers of ezpz-rocm, from recorded facts only (no AMD GPU here).

Machines and builds are the recorded ones in rocm_recorded.py; ``triton_found``
is replaced to record an install with and without ``pytorch-triton-rocm``.
"""

from __future__ import annotations

import pytest
from rocm_recorded import BUILDS, NODES, torchrun_env

import ezpz
from ezpz.errors import UnavailableError
from ezpz.runtime.deepspeed import deepspeed_config
from ezpz.facts import TorchBuild
from ezpz_rocm import plugin


@pytest.fixture
def triton(monkeypatch: pytest.MonkeyPatch):
    def set_found(found: bool) -> None:
        monkeypatch.setattr(plugin, "triton_found", lambda: found)

    set_found(True)
    return set_found


@pytest.mark.parametrize("node", ["mi250x", "mi300x", "rx7900xtx"])
def test_recorded_rocm_machines_compile_with_inductor(use_amdsmi, triton, node: str) -> None:
    use_amdsmi(node)
    p, explanation = ezpz.hooks.plan(environ=torchrun_env(), build=BUILDS["2.8.0+rocm6.4"])
    assert p.compile.backend == "inductor"
    assert NODES[node].gpus[0].name in p.compile.reason
    assert explanation["compile"].chosen == "inductor"


def test_recorded_rocm_without_triton_falls_back_to_aot_eager(use_amdsmi, triton) -> None:
    triton(False)
    use_amdsmi("mi300x")
    p, _ = ezpz.hooks.plan(environ=torchrun_env(), build=BUILDS["2.8.0+rocm6.4"])
    assert p.compile.backend == "aot_eager"
    assert "Cannot find a working triton installation" in p.compile.alternatives[0].reason
    with pytest.raises(UnavailableError) as err:
        ezpz.hooks.plan(environ=torchrun_env(), build=BUILDS["2.8.0+rocm6.4"], compile="inductor")
    assert "MI300X" in str(err.value) and "setup(compile=...)" in str(err.value)


def test_rocm_build_before_torch_2_0_does_not_compile(use_amdsmi, triton) -> None:
    use_amdsmi("mi250x")
    # Synthetic pairing: a torch 1.13 ROCm 5.2 wheel (HIP 5.2.21151 is ROCm 5.2's HIP, ROCm 5.2 release notes).
    old = TorchBuild(version="1.13.1+rocm5.2", hip="5.2.21151-afdc89f8", distributed_backends=("gloo", "nccl"))
    p, _ = ezpz.hooks.plan(environ=torchrun_env(), build=old)
    assert p.compile.backend == "none" and "torch 2.0" in p.compile.alternatives[0].reason


def test_deepspeed_config_on_recorded_mi300x_and_mi100(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    p, _ = ezpz.hooks.plan(environ=torchrun_env(), build=BUILDS["2.8.0+rocm6.4"])
    assert deepspeed_config(p)["bf16"] == {"enabled": True}
    use_amdsmi("mi100")
    p, _ = ezpz.hooks.plan(environ=torchrun_env(), build=BUILDS["2.8.0+rocm6.4"])
    config = deepspeed_config(p)
    assert config["bf16"]["enabled"] is (p.amp.dtype == "bf16")
    assert config["fp16"]["enabled"] is (p.amp.dtype == "fp16")
