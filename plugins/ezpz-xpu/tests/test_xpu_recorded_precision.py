"""AMP policy from recorded device facts: bf16 by default, fp16 for inference, no silent downgrade, no TF32."""

from __future__ import annotations

import pytest
from xpu_testlib import plan, torchrun_env
from ezpz.errors import UnavailableError
from xpu_recorded import (
    ARC_A770,
    AURORA_FLAT,
    MAX1550_TILE,
    MAX1550_TILE_FLAGS_UNQUERIED,
    MAX1550_TILE_IPEX_ERA,
    MTL_IGPU,
    TORCH_2_4_XPU,
    TORCH_2_8_XPU,
    TORCH_2_13_XPU,
    XPU_BUILDS,
)


def _amp(build, **env):  # type: ignore[no-untyped-def]
    return plan(build, torchrun_env(**env))[0].amp


@pytest.mark.parametrize("build", XPU_BUILDS, ids=lambda b: b.version)
def test_recorded_max1550_flat_auto_is_bf16_without_scaler(intel, build) -> None:
    intel(AURORA_FLAT)
    amp = _amp(build)
    assert (amp.dtype, amp.autocast, amp.grad_scaler, amp.tf32) == ("bf16", True, False, False)
    assert "Xe-HPC (Ponte Vecchio) with XMX bf16" in amp.reason


def test_recorded_max1550_ipex_era_record_still_gets_bf16_from_the_family_table(intel) -> None:
    intel([MAX1550_TILE_IPEX_ERA] * 12)
    amp = _amp(TORCH_2_4_XPU)
    assert amp.dtype == "bf16"
    assert "does not report has_bfloat16_conversions" in amp.reason


def test_recorded_max1550_unqueried_flags_do_not_disable_bf16(intel) -> None:
    intel([MAX1550_TILE_FLAGS_UNQUERIED] * 2)
    amp = _amp(TORCH_2_13_XPU)
    assert amp.dtype == "bf16"
    assert "pytorch#196074" in amp.reason


def test_recorded_max1550_native_flag_is_believed(intel) -> None:
    from attrs import evolve

    intel([evolve(MAX1550_TILE, has_bfloat16_conversions=True, has_subgroup_matrix_multiply_accumulate=True)])
    amp = _amp(TORCH_2_13_XPU)
    assert amp.dtype == "bf16" and "has_bfloat16_conversions=1" in amp.reason and "XMX" in amp.reason


def test_recorded_max1550_fp16_request_gets_a_scaler_and_an_inference_note(intel) -> None:
    intel(AURORA_FLAT)
    amp = _amp(TORCH_2_8_XPU, EZPZ_PRECISION="fp16")
    assert (amp.dtype, amp.autocast, amp.grad_scaler) == ("fp16", True, True)
    assert "Intel recommends bf16 for training; fp16 mainly for inference" in amp.reason


def test_recorded_arc_a770_auto_is_bf16(intel) -> None:
    intel([ARC_A770])
    amp = _amp(TORCH_2_8_XPU)
    assert amp.dtype == "bf16" and "Xe-HPG (Alchemist) with XMX bf16" in amp.reason
    fp16 = next(a for a in amp.alternatives if a.name == "fp16")
    assert "not picked automatically" in fp16.reason and "pytorch#147731" in fp16.reason


def test_recorded_arc_a770_fp16_is_inference_only_without_fp64(intel) -> None:
    intel([ARC_A770])
    amp = _amp(TORCH_2_8_XPU, EZPZ_PRECISION="fp16")
    assert (amp.dtype, amp.autocast, amp.grad_scaler) == ("fp16", True, False)
    assert "needs FP64, which Intel(R) Arc(TM) A770 Graphics lacks" in amp.reason


def test_recorded_mtl_igpu_auto_falls_back_to_fp16_with_scaler(intel) -> None:
    intel([MTL_IGPU])
    amp = _amp(TORCH_2_8_XPU)
    assert (amp.dtype, amp.grad_scaler) == ("fp16", True)
    bf16 = next(a for a in amp.alternatives if a.name == "bf16")
    assert "unsupported: Intel(R) Arc(TM) Graphics has no native bf16 (has_bfloat16_conversions=0, no XMX/DPAS)" \
        in bf16.reason


def test_recorded_mtl_igpu_bf16_request_raises_naming_the_device(intel) -> None:
    intel([MTL_IGPU])
    with pytest.raises(UnavailableError) as err:
        _amp(TORCH_2_13_XPU, EZPZ_PRECISION="bf16")
    text = str(err.value)
    assert "EZPZ_PRECISION='bf16'" in text
    assert "xpu (Intel(R) Arc(TM) Graphics, integrated)" in text
    assert "fp16, fp32" in text


def test_recorded_fp32_request_turns_autocast_off(intel) -> None:
    intel([ARC_A770])
    amp = _amp(TORCH_2_13_XPU, EZPZ_PRECISION="fp32")
    assert (amp.dtype, amp.autocast, amp.grad_scaler, amp.tf32) == ("fp32", False, False, False)


@pytest.mark.parametrize(("device", "says"), [
    (MAX1550_TILE, "has TF32 XMX: set torch.backends.mkldnn.allow_tf32 = True"),
    (ARC_A770, "no TF32 matrix path"),
    (MTL_IGPU, "no TF32 matrix path"),
])
def test_recorded_tf32_stays_off_and_says_how_xpu_does_it(intel, device, says) -> None:
    intel([device])
    amp = _amp(TORCH_2_13_XPU)
    assert amp.tf32 is False
    assert "torch.backends.cuda/cudnn.allow_tf32, which XPU ignores" in amp.tf32_reason
    assert "torch.backends.mkldnn.allow_tf32" in amp.tf32_reason
    assert says in amp.tf32_reason
