"""torch.compile and DeepSpeed answers of ezpz-cuda, from recorded facts only (no NVIDIA GPU here).

Triton: the Linux CUDA wheels of torch declare ``triton`` as a dependency
(``Requires-Dist: triton==...; platform_system == "Linux"`` in their METADATA),
so a recorded Linux CUDA install has it; ``triton_found`` is replaced to record
an install without it. Compute capabilities are from cuda_recorded.py.
"""

from __future__ import annotations

import pytest

import cuda_recorded as rec
from cuda_testlib import plan_with
from ezpz.errors import UnavailableError
from ezpz.runtime.deepspeed import deepspeed_config
from ezpz_cuda import plugin

SINGLE: dict[str, str] = {}


@pytest.fixture
def triton(monkeypatch: pytest.MonkeyPatch):
    def set_found(found: bool) -> None:
        monkeypatch.setattr(plugin, "triton_found", lambda: found)

    set_found(True)
    return set_found


def test_recorded_h100_with_triton_compiles_with_inductor(record, triton):
    record(rec.node(rec.H100_SXM5_80GB, 1), rec.TORCH_2_13_CU130)
    plan, explanation = plan_with(SINGLE, rec.TORCH_2_13_CU130)
    assert plan.compile.backend == "inductor"
    assert "compute capability 9.0" in plan.compile.reason
    decision = explanation["compile"]
    assert decision.chosen == "inductor"
    assert [a.name for a in decision.alternatives] == ["aot_eager"]


def test_recorded_gtx1080_falls_back_to_aot_eager_with_torchs_own_message(record, triton):
    record([rec.GTX_1080], rec.TORCH_2_6_CU124)
    plan, explanation = plan_with(SINGLE, rec.TORCH_2_6_CU124)
    assert plan.compile.backend == "aot_eager"
    rejected = {a.backend: a for a in plan.compile.alternatives}["inductor"]
    assert not rejected.available
    assert ("Found NVIDIA GeForce GTX 1080 which is too old to be supported by the triton GPU compiler"
            in rejected.reason)
    assert "but your device is of CUDA capability 6.1" in rejected.reason
    assert "after inductor unavailable" in explanation["compile"].reason


def test_recorded_v100_is_the_oldest_inductor_target(record, triton):
    record(rec.node(rec.V100_SXM2_32GB, 1), rec.TORCH_2_6_CU124)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_6_CU124)
    assert plan.compile.backend == "inductor"


def test_recorded_install_without_triton_says_what_torch_says(record, triton):
    triton(False)
    record(rec.node(rec.H100_SXM5_80GB, 1), rec.TORCH_2_13_CU130)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_13_CU130)
    assert plan.compile.backend == "aot_eager"
    assert "Cannot find a working triton installation" in plan.compile.alternatives[0].reason


def test_requesting_inductor_on_a_gtx1080_raises_naming_the_device(record, triton):
    record([rec.GTX_1080], rec.TORCH_2_6_CU124)
    with pytest.raises(UnavailableError) as err:
        plan_with({"EZPZ_COMPILE": "inductor"}, rec.TORCH_2_6_CU124)
    text = str(err.value)
    assert "EZPZ_COMPILE" in text and "GTX 1080" in text and "aot_eager" in text


def test_compile_none_and_aot_eager_overrides_on_a_recorded_h100(record, triton):
    record(rec.node(rec.H100_SXM5_80GB, 1), rec.TORCH_2_13_CU130)
    plan, _ = plan_with({"EZPZ_COMPILE": "none"}, rec.TORCH_2_13_CU130)
    assert plan.compile.backend == "none" and "EZPZ_COMPILE=none" in plan.compile.reason
    plan, _ = plan_with({"EZPZ_COMPILE": "aot_eager"}, rec.TORCH_2_13_CU130)
    assert plan.compile.backend == "aot_eager"
    assert [a.backend for a in plan.compile.alternatives] == ["inductor"]


def test_deepspeed_config_on_a_recorded_v100_uses_fp16_with_dynamic_loss_scaling(record):
    record(rec.node(rec.V100_SXM2_32GB, 1), rec.TORCH_2_6_CU124)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_6_CU124)
    assert plan.amp.dtype == "fp16" and plan.amp.grad_scaler
    config = deepspeed_config(plan, {"train_micro_batch_size_per_gpu": 4, "fp16": {"initial_scale_power": 12}})
    assert config["fp16"] == {"enabled": True, "loss_scale": 0, "initial_scale_power": 12}
    assert config["bf16"] == {"enabled": False}
    assert config["train_micro_batch_size_per_gpu"] == 4


def test_deepspeed_config_refuses_bf16_on_a_recorded_v100_naming_the_key(record):
    record(rec.node(rec.V100_SXM2_32GB, 1), rec.TORCH_2_6_CU124)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_6_CU124)
    with pytest.raises(UnavailableError) as err:
        deepspeed_config(plan, {"bf16": {"enabled": True}})
    assert "bf16.enabled" in str(err.value) and "V100" in str(err.value)


def test_deepspeed_config_on_a_recorded_h100_uses_bf16(record):
    record(rec.node(rec.H100_SXM5_80GB, 1), rec.TORCH_2_13_CU130)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_13_CU130)
    config = deepspeed_config(plan)
    assert config["bf16"] == {"enabled": True} and config["fp16"] == {"enabled": False}
    # the user may still pick fp16 where the device can do it: kept, not overridden
    config = deepspeed_config(plan, {"fp16": {"enabled": True}})
    assert config["fp16"]["enabled"] and not config["bf16"]["enabled"]
