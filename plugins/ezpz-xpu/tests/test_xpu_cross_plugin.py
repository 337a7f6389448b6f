"""A laptop with an Intel iGPU and a discrete NVIDIA GPU: cuda wins, explained; EZPZ_DEVICE=xpu overrides.

Public torch wheels carry one GPU backend, so a build offering both ``cuda`` and
``xpu`` is a source build; the decision must still be deterministic and
explained, because ezpz also decides from recorded facts (``ezpz doctor``).
Besides ``ezpz_xpu.probe``, this test has to replace ``ezpz_cuda.probe`` to put
a recorded NVIDIA card on the machine.
"""

from __future__ import annotations

import pytest
from xpu_testlib import plan, torchrun_env
from ezpz.facts import TorchBuild
from xpu_recorded import MTL_IGPU

from ezpz_xpu import policy

ezpz_cuda = pytest.importorskip("ezpz_cuda", reason="ezpz-cuda is not installed: the cross-vendor test needs it")

# Both GPU backends in one (source) build of torch 2.8; CUDA arch list as the cu128 wheels.
BOTH = TorchBuild(version="2.8.0", cuda="12.8", xpu_built=True, distributed_backends=("gloo", "nccl", "xccl"))
ARCH_CU128 = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


@pytest.fixture
def laptop(intel, monkeypatch):  # type: ignore[no-untyped-def]
    """Meteor Lake iGPU (recorded, see xpu_recorded.MTL_IGPU) + GeForce RTX 4090 (compute capability 8.9, per
    NVIDIA's CUDA GPUs table; 24 GB), as NVML would list it."""
    from ezpz_cuda import probe as cuda_probe
    from ezpz_cuda.facts import GpuFacts

    rtx = GpuFacts(name="NVIDIA GeForce RTX 4090", major=8, minor=9, total_memory=24 * 2**30,
                   uuid="GPU-00000001-0000-4000-8000-000000000001", pci_bus_id="00000000:01:00.0")
    monkeypatch.setattr(cuda_probe, "nvml_gpus", lambda: (rtx,))
    monkeypatch.setattr(cuda_probe, "torch_gpus", lambda: (rtx,))
    monkeypatch.setattr(cuda_probe, "torch_arch_list", lambda: ARCH_CU128)
    return intel([MTL_IGPU])


def test_recorded_mtl_igpu_beside_nvidia_dgpu_picks_cuda_with_reason(laptop) -> None:
    the_plan, explanation = plan(BOTH)
    assert the_plan.device.torch_device == "cuda:0"
    assert the_plan.backend.name == "nccl"
    xpu_alt = next(a for a in the_plan.device.alternatives if a.name == "xpu")
    assert xpu_alt.reason.startswith(f"priority {policy.INTEGRATED_PRIORITY} (intel)")
    assert "integrated" in xpu_alt.reason
    assert "highest priority (100)" in the_plan.device.reason
    assert "not xpu [xpu]" in str(explanation)


def test_recorded_mtl_igpu_beside_nvidia_dgpu_is_deterministic(laptop) -> None:
    picks = {plan(BOTH)[0].device.torch_device for _ in range(5)}
    assert picks == {"cuda:0"}


@pytest.mark.parametrize("var", ["EZPZ_DEVICE", "TORCH_DEVICE"])
def test_recorded_ezpz_device_xpu_overrides_nvidia(laptop, var) -> None:
    the_plan, _ = plan(BOTH, torchrun_env(**{var: "xpu"}))
    assert the_plan.device.torch_device == "xpu:0"
    assert the_plan.device.reason.startswith(f"requested by {var}=xpu")
    assert the_plan.backend.name == "xccl"
    assert the_plan.amp.dtype == "fp16"  # the iGPU has no native bf16 (recorded flags)
