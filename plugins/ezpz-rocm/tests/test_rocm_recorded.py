"""Recorded AMD machines and ROCm torch builds, fed through the real decision path.

Only ``ezpz_rocm.probe.amdsmi_gpus`` / ``torch_gpus`` are replaced (see
``conftest.py``); the plugin is the one installed through its ``ezpz`` entry
point, and every decision comes from ``ezpz.hooks.plan(environ=..., build=...)``.
"""

from __future__ import annotations

import importlib.metadata

import pytest
from rocm_recorded import BUILDS, CPU, NO_RCCL, torchrun_env

import ezpz
from ezpz.plugin_host.calls import Hooks
from ezpz.decisions import SetupPlan
from ezpz.errors import ConfigError, UnavailableError
from ezpz_rocm.facts import RocmFacts
from ezpz_rocm.policy import NOT_ROCM, TF32_REASON

MI300X_BUILDS = sorted(BUILDS)


def plan(environ: dict[str, str], build=BUILDS["2.8.0+rocm6.4"], **kw: str) -> SetupPlan:
    the_plan, _ = ezpz.hooks.plan(environ=environ, build=build, **kw)
    return the_plan


def before_init(the_plan: SetupPlan) -> dict[str, object]:
    """What every plugin's ezpz_before_init says for this plan (the real facade ``setup()`` uses)."""
    actions = Hooks(ezpz.hooks.get_plugin_host()).before_init(the_plan)
    return dict(actions)


def _not_hang_budget(env) -> dict[str, str]:
    """``env`` without the TORCH_NCCL_* hang budget (checked in test_rocm_hang_budget.py)."""
    return {k: v for k, v in env.items() if not k.startswith("TORCH_NCCL_")}


def check_common_rocm(p: SetupPlan, *, local_rank: int) -> None:
    """What holds for every ROCm device: cuda:local_rank, RCCL, TF32 off, roctx, CUDA activity."""
    cand = p.device.candidate
    assert cand.plugin == "rocm" and cand.vendor == "amd" and cand.device_type == "cuda"
    assert isinstance(cand.facts, RocmFacts)
    assert p.launch.launcher == "torchrun" and p.launch.local_rank == local_rank
    assert p.device.index == local_rank and p.device.torch_device == f"cuda:{local_rank}"
    assert p.backend.name == "nccl" and "RCCL" in p.backend.reason
    assert p.amp.tf32 is False and p.amp.tf32_reason == TF32_REASON
    assert "allow_tf32" in p.amp.tf32_reason and "not supported on ROCm" in p.amp.tf32_reason
    assert p.profiling.marker == "roctx" and p.profiling.activities == ("CPU", "CUDA")
    assert p.profiling.range_push is not None and p.profiling.range_pop is not None
    assert p.profiling.memory_stats is not None
    assert p.profiling.timer == "hip events" and "torch.cuda.Event(enable_timing=True)" in p.profiling.timer_reason


def test_plugin_is_loaded_through_its_entry_point() -> None:
    record = ezpz.hooks.get_plugin_host().records["rocm"]
    assert record.status == "loaded" and record.target == "ezpz_rocm.plugin" and not record.builtin
    assert set(record.hooks) == {"ezpz_probe_devices", "ezpz_select_backend", "ezpz_amp_policy", "ezpz_profiling",
                                 "ezpz_before_init", "ezpz_compile_policy", "ezpz_failure_signatures"}
    assert record.distribution == ("ezpz-rocm", importlib.metadata.version("ezpz-rocm"))


def test_recorded_cpu_build_is_rejected_with_reason() -> None:
    p = plan({}, build=CPU)
    assert p.device.candidate.plugin != "rocm"
    rejected = [a for a in p.device.alternatives if a.plugin == "rocm"]
    assert [(a.name, a.reason) for a in rejected] == [("cuda", f"amd: {NOT_ROCM}")]


@pytest.mark.parametrize("build_key", MI300X_BUILDS)
def test_recorded_mi300x_full_node_across_rocm_builds(use_amdsmi, build_key: str) -> None:
    use_amdsmi("mi300x")
    p = plan(torchrun_env(local_rank=5, local_world_size=8), build=BUILDS[build_key])
    check_common_rocm(p, local_rank=5)
    cand = p.device.candidate
    assert cand.count == 8 and cand.arch == "gfx942" and cand.priority == 100
    assert cand.names == ("AMD Instinct MI300X",) * 8 and cand.total_memory == (192 * 1024**3,) * 8
    assert cand.physical_ids == tuple(str(i) for i in range(8)) and cand.visible_devices_var is None
    assert cand.details["hip"] == BUILDS[build_key].hip
    assert "HIP runtime was not initialised" in cand.reason and "amdsmi" in cand.reason
    assert (p.amp.dtype, p.amp.autocast, p.amp.grad_scaler) == ("bf16", True, False)
    assert "gfx942" in p.amp.reason and "CDNA3" in p.amp.reason


def test_recorded_mi300x_explanation_names_rccl_roctx_and_tf32(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    _, explanation = ezpz.hooks.plan(environ=torchrun_env(local_rank=0, local_world_size=8),
                                     build=BUILDS["2.13.0+rocm7.2"])
    text = str(explanation)
    assert "RCCL" in text and "roctx" in text and "allow_tf32" in text and "gfx942:sramecc+:xnack-" in text


def test_recorded_mi250x_eight_gcds_are_eight_devices(use_amdsmi) -> None:
    use_amdsmi("mi250x")
    p = plan(torchrun_env(local_rank=7, local_world_size=8), build=BUILDS["2.6.0+rocm6.2.4"])
    check_common_rocm(p, local_rank=7)
    cand = p.device.candidate
    assert cand.count == 8 and cand.arch == "gfx90a"
    assert "two GCDs" in cand.details["note"] and "4 card(s)" in cand.details["note"]
    assert (p.amp.dtype, p.amp.grad_scaler) == ("bf16", False) and "CDNA2" in p.amp.reason


def test_recorded_mi100_prefers_bf16_and_says_it_is_half_rate(use_amdsmi) -> None:
    use_amdsmi("mi100")
    p = plan(torchrun_env(local_rank=2, local_world_size=4), build=BUILDS["2.4.0+rocm6.1"])
    check_common_rocm(p, local_rank=2)
    assert (p.amp.dtype, p.amp.grad_scaler) == ("bf16", False)
    assert "gfx908" in p.amp.reason and "half the fp16 rate" in p.amp.reason
    fp16 = plan(torchrun_env(local_rank=2, local_world_size=4), build=BUILDS["2.4.0+rocm6.1"], precision="fp16")
    assert (fp16.amp.dtype, fp16.amp.grad_scaler) == ("fp16", True)


def test_recorded_rx7900xtx_single_process_bf16_via_wmma(use_amdsmi) -> None:
    use_amdsmi("rx7900xtx")
    p = plan({}, build=BUILDS["2.8.0+rocm6.4"])
    cand = p.device.candidate
    assert cand.plugin == "rocm" and p.device.torch_device == "cuda:0" and cand.arch == "gfx1100"
    assert p.launch.world_size == 1 and p.backend.name == "nccl"
    assert (p.amp.dtype, p.amp.grad_scaler) == ("bf16", False) and "WMMA" in p.amp.reason
    assert p.profiling.marker == "roctx"


def test_recorded_rx6900xt_auto_is_fp16_with_grad_scaler(use_amdsmi) -> None:
    use_amdsmi("rx6900xt")
    p = plan({}, build=BUILDS["2.6.0+rocm6.2.4"])
    assert (p.amp.dtype, p.amp.autocast, p.amp.grad_scaler) == ("fp16", True, True)
    bf16 = {a.name: a.reason for a in p.amp.alternatives}["bf16"]
    assert bf16.startswith("unsupported: gfx1030 (RDNA2") and "no matrix" in bf16


def test_recorded_rx6900xt_bf16_request_raises_naming_device_and_arch(use_amdsmi) -> None:
    use_amdsmi("rx6900xt")
    with pytest.raises(UnavailableError) as info:
        plan({"EZPZ_PRECISION": "bf16"}, build=BUILDS["2.6.0+rocm6.2.4"])
    message = str(info.value)
    assert info.value.name == "EZPZ_PRECISION" and "AMD Radeon RX 6900 XT" in message and "gfx1030" in message


def test_recorded_unknown_arch_falls_back_to_fp16_naming_the_arch(use_amdsmi) -> None:
    use_amdsmi("unknown")
    p = plan({}, build=BUILDS["2.13.0+rocm7.2"])
    assert (p.amp.dtype, p.amp.grad_scaler) == ("fp16", True)
    assert "gfx1999" in p.amp.reason and "unknown" in p.amp.reason


def test_recorded_unknown_arch_honours_an_explicit_bf16_request(use_amdsmi) -> None:
    use_amdsmi("unknown")
    p = plan({"EZPZ_PRECISION": "bf16"}, build=BUILDS["2.13.0+rocm7.2"])
    assert (p.amp.dtype, p.amp.grad_scaler) == ("bf16", False)
    assert "gfx1999" in p.amp.reason and "unverified" in p.amp.reason


def test_recorded_mi300x_fp32_request_turns_autocast_off(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    p = plan({"EZPZ_PRECISION": "fp32"})
    assert (p.amp.dtype, p.amp.autocast, p.amp.tf32) == ("fp32", False, False)


def test_recorded_mi300x_build_without_rccl_falls_back_to_gloo(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    p = plan(torchrun_env(local_rank=1, local_world_size=8), build=NO_RCCL)
    assert p.backend.name == "gloo" and "after nccl unavailable" in p.backend.reason
    assert {a.name: a.reason for a in p.backend.alternatives}["nccl"].startswith("unavailable: this ROCm torch build")


def test_recorded_mi300x_backend_request(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    env = torchrun_env(local_rank=0, local_world_size=8)
    assert plan({**env, "EZPZ_BACKEND": "gloo"}).backend.name == "gloo"
    with pytest.raises(UnavailableError) as info:
        plan({**env, "TORCH_BACKEND": "xccl"})
    assert info.value.name == "TORCH_BACKEND" and "nccl" in str(info.value)


def test_recorded_mi300x_more_local_ranks_than_gpus_is_an_error(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    with pytest.raises(UnavailableError) as info:
        plan(torchrun_env(local_rank=8, local_world_size=9))
    assert "below the 8 cuda device(s)" in str(info.value)


def test_recorded_mi300x_tunableop_is_off_unless_opted_in(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    p = plan(torchrun_env(local_rank=0, local_world_size=8))
    assert _not_hang_budget(before_init(p)["rocm"].env_defaults) == {"DS_ACCELERATOR": "cuda"}
    assert p.device.candidate.details["tunableop"].startswith("off (opt in with EZPZ_ROCM_TUNABLEOP=1)")


@pytest.mark.parametrize("value", ["1", "true", "on", "YES"])
def test_recorded_mi300x_tunableop_opt_in_sets_the_env_default(use_amdsmi, value: str) -> None:
    use_amdsmi("mi300x")
    p = plan(torchrun_env(local_rank=0, local_world_size=8, EZPZ_ROCM_TUNABLEOP=value))
    action = before_init(p)["rocm"]
    assert _not_hang_budget(action.env_defaults) == {"PYTORCH_TUNABLEOP_ENABLED": "1", "DS_ACCELERATOR": "cuda"}
    assert "EZPZ_ROCM_TUNABLEOP=1" in action.reason and "ROCm 5.4" in action.reason


@pytest.mark.parametrize("value", ["0", "off", ""])
def test_recorded_mi300x_tunableop_explicitly_off(use_amdsmi, value: str) -> None:
    use_amdsmi("mi300x")
    action = before_init(plan({"EZPZ_ROCM_TUNABLEOP": value}))["rocm"]
    assert "PYTORCH_TUNABLEOP_ENABLED" not in action.env_defaults


def test_recorded_mi300x_bad_tunableop_value_names_the_variable(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    with pytest.raises(ConfigError) as info:
        plan({"EZPZ_ROCM_TUNABLEOP": "please"})
    assert info.value.name == "EZPZ_ROCM_TUNABLEOP" and info.value.value == "please"
    assert "EZPZ_ROCM_TUNABLEOP" in str(info.value)


def test_recorded_tunableop_ignored_on_a_cpu_build() -> None:
    """The variable is ROCm-only: a CUDA/CPU machine with it set (even badly) is not refused."""
    assert plan({"EZPZ_ROCM_TUNABLEOP": "please"}, build=CPU).device.candidate.plugin != "rocm"


def test_recorded_other_plugins_get_no_rocm_answer(use_amdsmi) -> None:
    """On a CPU choice the rocm hooks stay silent (they answer only for RocmFacts)."""
    use_amdsmi("mi300x")
    p = plan({"EZPZ_DEVICE": "cpu", "EZPZ_ROCM_TUNABLEOP": "1"})
    assert p.device.candidate.device_type == "cpu" and p.backend.name == "gloo"
    assert "rocm" not in before_init(p)
    assert any(a.plugin == "rocm" and a.name == "cuda" for a in p.device.alternatives)


def test_recorded_device_request_by_vendor_or_plugin_name(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    for request in ("amd", "rocm", "cuda:3"):
        p = plan({"EZPZ_DEVICE": request})
        assert p.device.candidate.plugin == "rocm"
    assert plan({"EZPZ_DEVICE": "cuda:3"}).device.index == 3


def test_device_timer_is_a_hip_event_made_from_torch_cuda(monkeypatch) -> None:
    """No GPU here: ROCm's torch.cuda.Event is replaced by a recorder; the plugin asks for timing."""
    import torch

    from ezpz_rocm.plugin import new_timing_event

    made: list[dict] = []
    monkeypatch.setattr(torch.cuda, "Event", lambda **kw: made.append(kw) or "event")
    assert new_timing_event() == "event" and made == [{"enable_timing": True}]
