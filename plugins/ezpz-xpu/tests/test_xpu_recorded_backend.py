"""Collective backend by torch version, from recorded builds: xccl (2.8+), else ccl, else gloo with a warning."""

from __future__ import annotations

import pytest
from xpu_testlib import plan, torchrun_env
from ezpz.errors import UnavailableError
from xpu_recorded import (
    AURORA_FLAT,
    TORCH_2_4_XPU,
    TORCH_2_7_XPU,
    TORCH_2_8_XPU,
    TORCH_2_8_XPU_NO_XCCL,
    TORCH_2_13_XPU,
)

TWO_RANKS = torchrun_env(rank=0, world=2)


def _tried(the_plan) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {a.name: a.reason for a in the_plan.backend.alternatives}


@pytest.mark.parametrize("build", [TORCH_2_8_XPU, TORCH_2_13_XPU], ids=lambda b: b.version)
@pytest.mark.parametrize("ccl", [False, True], ids=["no-bindings", "bindings"])
def test_recorded_max1550_flat_torch_2_8_plus_uses_xccl(intel, build, ccl) -> None:
    intel(AURORA_FLAT, ccl=ccl)
    the_plan, _ = plan(build, TWO_RANKS)
    assert the_plan.backend.name == "xccl"
    assert "native collective backend for XPU" in the_plan.backend.reason
    assert set(_tried(the_plan)) == {"ccl", "gloo"}  # listed, not tried


@pytest.mark.parametrize("build", [TORCH_2_4_XPU, TORCH_2_7_XPU], ids=lambda b: b.version)
def test_recorded_max1550_flat_before_2_8_uses_ccl_when_bindings_importable(intel, build) -> None:
    intel(AURORA_FLAT, ccl=True)
    the_plan, _ = plan(build, TWO_RANKS)
    assert the_plan.backend.name == "ccl"
    assert "after xccl unavailable" in the_plan.backend.reason
    assert _tried(the_plan)["xccl"] == f"unavailable: XCCL arrived in torch 2.8; this is torch {build.version}"
    assert "registers 'ccl'" in the_plan.backend.reason


@pytest.mark.parametrize("build", [TORCH_2_4_XPU, TORCH_2_7_XPU], ids=lambda b: b.version)
def test_recorded_max1550_flat_before_2_8_without_bindings_falls_back_to_gloo_with_warning(intel, build) -> None:
    intel(AURORA_FLAT, ccl=False)
    the_plan, explanation = plan(build, TWO_RANKS)
    assert the_plan.backend.name == "gloo"
    reason = the_plan.backend.reason
    assert reason.startswith("WARNING: gloo runs collectives on CPU tensors only")
    assert "pip install oneccl_bind_pt" in reason and "torch>=2.8" in reason
    assert "after xccl, ccl unavailable" in reason
    tried = _tried(the_plan)
    assert "oneccl_bindings_for_pytorch is not installed" in tried["ccl"]
    assert "not xccl: unavailable: XCCL arrived in torch 2.8" in str(explanation)


def test_recorded_2_8_build_without_xccl_says_so(intel) -> None:
    intel(AURORA_FLAT, ccl=True)
    the_plan, _ = plan(TORCH_2_8_XPU_NO_XCCL, TWO_RANKS)
    assert the_plan.backend.name == "ccl"
    assert "built without XCCL (torch.distributed.is_xccl_available() is False)" in _tried(the_plan)["xccl"]


def test_recorded_backend_override_to_ccl_on_2_8(intel) -> None:
    intel(AURORA_FLAT, ccl=True)
    the_plan, _ = plan(TORCH_2_8_XPU, {**TWO_RANKS, "EZPZ_BACKEND": "ccl"})
    assert the_plan.backend.name == "ccl"
    assert the_plan.backend.reason.startswith("requested by EZPZ_BACKEND=ccl")


def test_recorded_backend_override_to_unavailable_nccl_lists_what_works(intel) -> None:
    intel(AURORA_FLAT)
    with pytest.raises(UnavailableError) as err:
        plan(TORCH_2_8_XPU, {**TWO_RANKS, "TORCH_BACKEND": "nccl"})
    assert "xccl, gloo" in str(err.value)
    assert "Intel(R) Data Center GPU Max 1550" in str(err.value)


def test_recorded_backend_override_to_ccl_without_bindings_says_how_to_install(intel) -> None:
    intel(AURORA_FLAT, ccl=False)
    with pytest.raises(UnavailableError, match="pip install oneccl_bind_pt"):
        plan(TORCH_2_7_XPU, {**TWO_RANKS, "EZPZ_BACKEND": "ccl"})


def test_recorded_xccl_builds_mesh_groups_with_new_group(intel) -> None:
    """xccl cannot split a group (pytorch#186548): rt.mesh() lifts the device binding so torch takes new_group."""
    intel(AURORA_FLAT, ccl=True)
    the_plan, explanation = plan(TORCH_2_13_XPU, TWO_RANKS)
    assert the_plan.backend.name == "xccl" and the_plan.mesh.split_group is False
    assert "https://github.com/pytorch/pytorch/issues/186548" in the_plan.mesh.sources
    assert "supportsSplitting" in the_plan.mesh.reason and "torch 2.13" in the_plan.mesh.reason
    assert "mesh groups by new_group" in explanation["sharding"].chosen
    ccl_plan, _ = plan(TORCH_2_7_XPU, TWO_RANKS)  # ccl: no split recorded, torch's own way
    assert ccl_plan.backend.name == "ccl" and ccl_plan.mesh.split_group is None
    assert "torch's own mesh groups" in ccl_plan.mesh.reason


@pytest.mark.parametrize(("build", "backend"), [(TORCH_2_13_XPU, "xccl"), (TORCH_2_8_XPU, "xccl"),
                                                (TORCH_2_7_XPU, "ccl")], ids=["2.13-xccl", "2.8-xccl", "2.7-ccl"])
def test_recorded_oneccl_lacks_avg_and_premul_sum_so_rt_shard_reduces_with_sum(intel, build, backend) -> None:
    """oneCCL/XCCL raise for PREMUL_SUM and AVG (torchtitan#2332, torch-xpu-ops#2903/#1571/#2361): FSDP2's
    in-collective divide is taken out, SUM forced, divided once after; torchtitan's factor 1.0 is named and
    rejected."""
    intel(AURORA_FLAT, ccl=True)
    the_plan, explanation = plan(build, TWO_RANKS)
    assert the_plan.backend.name == backend
    assert the_plan.mesh.unsupported_reduce_ops == {"AVG", "PREMUL_SUM"}
    assert "https://github.com/pytorch/torchtitan/pull/2332" in the_plan.mesh.sources
    assert "https://github.com/intel/torch-xpu-ops/pull/2903" in the_plan.mesh.sources
    sharding = explanation["sharding"]
    assert "SUM reductions, divided once after" in sharding.chosen
    assert f"lacks AVG and PREMUL_SUM ({backend} runs oneCCL" in sharding.reason
    assert "DDP's mean gradient" in sharding.reason
    rejected = {a.name: a.reason for a in sharding.alternatives}
    assert "world-size times DDP's gradients" in rejected["divide factor 1.0"]
    assert sharding.details["unsupported_reduce_ops"] == ["AVG", "PREMUL_SUM"]


def test_recorded_gloo_fallback_on_xpu_says_what_gloo_lacks(intel) -> None:
    """torch 2.7 without the oneCCL bindings falls back to gloo: the core's gloo facts (AVG only from 2.8)."""
    intel(AURORA_FLAT, ccl=False)
    the_plan, explanation = plan(TORCH_2_7_XPU, TWO_RANKS)
    assert the_plan.backend.name == "gloo"
    assert the_plan.mesh.unsupported_reduce_ops == {"AVG", "PREMUL_SUM"}
    assert "Cannot use ReduceOp.AVG with Gloo" in the_plan.mesh.reduce_ops_reason
    assert "SUM reductions" in explanation["sharding"].chosen
