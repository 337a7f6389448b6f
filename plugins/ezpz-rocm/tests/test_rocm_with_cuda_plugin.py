"""With ezpz-cuda installed too, a ROCm build's ``cuda`` device belongs to ezpz-rocm alone.

Both plugins are the real installed ones (entry points ``cuda`` and ``rocm``);
only ``ezpz_rocm.probe`` is fed recorded facts.
"""

from __future__ import annotations

import importlib.util

import pytest
from rocm_recorded import BUILDS, torchrun_env

import ezpz

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ezpz_cuda") is None,
    reason="ezpz_cuda is not importable: install plugins/ezpz-cuda to run the cross-plugin checks",
)


def _cuda_loaded() -> None:
    record = ezpz.hooks.get_plugin_host().records.get("cuda")
    if record is None or record.status != "loaded":
        pytest.skip(f"the ezpz-cuda plugin is importable but not loaded by ezpz: {record}")


@pytest.mark.parametrize("build_key", sorted(BUILDS))
def test_recorded_mi300x_only_rocm_claims_cuda_on_a_rocm_build(use_amdsmi, build_key: str) -> None:
    _cuda_loaded()
    use_amdsmi("mi300x")
    p, _ = ezpz.hooks.plan(environ=torchrun_env(local_rank=3, local_world_size=8), build=BUILDS[build_key])
    assert p.device.candidate.plugin == "rocm" and p.device.candidate.vendor == "amd"
    offered = [a for a in p.device.alternatives if a.plugin == "cuda" and a.reason.startswith("priority")]
    assert offered == [], f"ezpz-cuda offered a device on a ROCm build: {offered}"
    cuda_rejections = [a for a in p.device.alternatives if a.plugin == "cuda"]
    assert len(cuda_rejections) == 1 and cuda_rejections[0].name == "cuda"
    assert "ROCm" in cuda_rejections[0].reason or "hip" in cuda_rejections[0].reason
    assert p.backend.name == "nccl" and "RCCL" in p.backend.reason and p.profiling.marker == "roctx"


def test_recorded_rx7900xtx_explicit_cuda_request_goes_to_rocm(use_amdsmi) -> None:
    _cuda_loaded()
    use_amdsmi("rx7900xtx")
    p, _ = ezpz.hooks.plan(environ={"EZPZ_DEVICE": "cuda:0"}, build=BUILDS["2.8.0+rocm6.4"])
    assert p.device.candidate.plugin == "rocm" and p.device.torch_device == "cuda:0"
    assert p.amp.tf32 is False


def test_cuda_build_is_left_to_cuda() -> None:
    """The mirror image: a CUDA build never gets a rocm candidate (rocm rejects before probing)."""
    _cuda_loaded()
    from ezpz.testing import recorded_build

    p, _ = ezpz.hooks.plan(environ={}, build=recorded_build("cuda"))
    assert p.device.candidate.plugin != "rocm"
    assert any(a.plugin == "rocm" and "torch.version.hip is None" in a.reason for a in p.device.alternatives)
