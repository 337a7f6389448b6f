"""Decisions for recorded NVIDIA machines, through the real path: entry point -> ezpz.hooks.plan().

Every test named ``test_recorded_*`` is checked against the recorded facts in
``cuda_recorded.py`` (sources cited there), never against this machine.
"""

from __future__ import annotations

import pytest

import cuda_recorded as rec
from cuda_testlib import plan_with, rejection, torchrun
from ezpz.errors import UnavailableError
from ezpz_cuda.facts import CudaFacts

SINGLE: dict[str, str] = {}


# -- one device per vendor generation, across torch versions -----------------------------------


@pytest.mark.usefixtures("torchrun_supported")
def test_recorded_h100_node_torch_2_13_cu130_rank_picks_its_gpu(record):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    env = torchrun(rank=11, world_size=16, local_rank=3, local_world_size=8)
    plan, explanation = plan_with(env, rec.TORCH_2_13_CU130)

    assert plan.device.torch_device == "cuda:3"
    assert plan.device.candidate.plugin == "cuda"
    assert plan.device.candidate.vendor == "nvidia"
    assert plan.device.candidate.count == 8
    assert plan.device.candidate.physical_ids[3] == "3"
    assert "local rank 3" in plan.device.reason
    assert plan.backend.name == "nccl"
    assert plan.amp.dtype == "bf16" and plan.amp.autocast and not plan.amp.grad_scaler
    assert plan.amp.tf32
    assert "compute capability 9.0" in plan.amp.reason
    assert "fp32_precision" in plan.amp.tf32_reason  # torch >= 2.9 names the new TF32 API
    assert plan.profiling.marker == "nvtx"
    assert plan.profiling.activities == ("CPU", "CUDA")
    assert "NVIDIA H100 80GB HBM3" in str(explanation)


def test_recorded_h100_single_process_uses_cuda_0_via_nvml(record, unrecorded_probes):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_13_CU130)

    assert plan.device.torch_device == "cuda:0"
    assert plan.device.candidate.priority == 100
    assert plan.device.candidate.names == ("NVIDIA H100 80GB HBM3",) * 8
    assert plan.device.candidate.total_memory[0] == 81559 * rec.MiB
    assert plan.device.candidate.arch == "sm_90"
    assert plan.device.candidate.visible_devices_var == "CUDA_VISIBLE_DEVICES"
    assert "without creating a CUDA context" in plan.device.candidate.reason
    assert "torch_gpus" not in unrecorded_probes.calls  # NVML answered: CUDA never initialised


def test_recorded_a100_torch_2_4_cu121_bf16_and_tf32_legacy_api(record):
    record(rec.node(rec.A100_SXM4_40GB, 8), rec.TORCH_2_4_CU121)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_4_CU121)

    assert plan.backend.name == "nccl"
    assert (plan.amp.dtype, plan.amp.autocast, plan.amp.grad_scaler, plan.amp.tf32) == ("bf16", True, False, True)
    assert "NVIDIA A100-SXM4-40GB (compute capability 8.0)" in plan.amp.reason
    assert "allow_tf32" in plan.amp.tf32_reason and "fp32_precision" not in plan.amp.tf32_reason
    fp16 = [a for a in plan.amp.alternatives if a.name == "fp16"]
    assert fp16 and fp16[0].reason.startswith("supported")


@pytest.mark.parametrize("build", [rec.TORCH_2_4_CU121, rec.TORCH_2_6_CU124, rec.TORCH_2_8_CU128],
                         ids=lambda b: b.version)
def test_recorded_v100_fp16_with_grad_scaler_and_no_tf32(record, build):
    record(rec.node(rec.V100_SXM2_32GB, 8), build)
    plan, _ = plan_with(SINGLE, build)

    assert plan.device.torch_device == "cuda:0"
    assert (plan.amp.dtype, plan.amp.autocast, plan.amp.grad_scaler) == ("fp16", True, True)
    assert "fp16 tensor cores" in plan.amp.reason
    assert not plan.amp.tf32
    assert "below compute capability 8.0" in plan.amp.tf32_reason
    bf16 = [a for a in plan.amp.alternatives if a.name == "bf16"]
    assert bf16 and "unsupported" in bf16[0].reason and "8.0" in bf16[0].reason


def test_recorded_v100_bf16_request_raises_naming_the_device(record):
    record(rec.node(rec.V100_SXM2_32GB, 8), rec.TORCH_2_6_CU124)
    with pytest.raises(UnavailableError) as info:
        plan_with({"EZPZ_PRECISION": "bf16"}, rec.TORCH_2_6_CU124)
    message = str(info.value)
    assert "EZPZ_PRECISION" in message
    assert "Tesla V100-SXM2-32GB" in message
    assert "compute capability 7.0" in message
    assert "fp16" in message  # what it can do instead


def test_recorded_v100_on_torch_2_13_cu130_is_refused_for_missing_kernels(record):
    """cu130 wheels dropped sm_70: offering the V100 would fail at the first kernel."""
    record(rec.node(rec.V100_SXM2_32GB, 4), rec.TORCH_2_13_CU130)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_13_CU130)

    assert plan.device.candidate.plugin != "cuda"
    why = rejection(plan)
    assert "no kernels for Tesla V100-SXM2-32GB (compute capability 7.0)" in why
    assert "sm_75" in why and "sm_70" in why and "CUDA_VISIBLE_DEVICES" in why


def test_recorded_gtx_1080_fp16_without_tensor_cores_on_torch_2_6(record):
    record(rec.node(rec.GTX_1080, 1), rec.TORCH_2_6_CU124)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_6_CU124)

    assert (plan.amp.dtype, plan.amp.grad_scaler, plan.amp.tf32) == ("fp16", True, False)
    assert "no tensor cores" in plan.amp.reason
    assert "low rate" in plan.amp.reason


def test_recorded_gtx_1080_on_torch_2_8_cu128_is_refused(record):
    record(rec.node(rec.GTX_1080, 1), rec.TORCH_2_8_CU128)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_8_CU128)
    assert plan.device.candidate.plugin != "cuda"
    assert "no kernels for NVIDIA GeForce GTX 1080 (compute capability 6.1)" in rejection(plan)


def test_recorded_gtx_980_has_no_low_precision(record):
    record(rec.node(rec.GTX_980, 1), rec.TORCH_2_4_CU121)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_4_CU121)
    assert (plan.amp.dtype, plan.amp.autocast, plan.amp.grad_scaler) == ("fp32", False, False)
    assert "no low-precision dtype" in plan.amp.reason
    with pytest.raises(UnavailableError, match=r"GTX 980 \(compute capability 5\.2\)"):
        plan_with({"EZPZ_PRECISION": "fp16"}, rec.TORCH_2_4_CU121)


@pytest.mark.parametrize("build", [rec.TORCH_2_8_CU128, rec.TORCH_2_13_CU130], ids=lambda b: b.version)
def test_recorded_t4_fp16_with_scaler(record, build):
    record(rec.node(rec.T4, 4), build)
    plan, _ = plan_with(SINGLE, build)
    assert (plan.amp.dtype, plan.amp.grad_scaler, plan.amp.tf32) == ("fp16", True, False)
    assert "Tesla T4 (compute capability 7.5)" in plan.amp.reason


@pytest.mark.parametrize("gpu", [rec.RTX_4090, rec.RTX_3090], ids=lambda g: g.name)
@pytest.mark.parametrize("build", rec.CUDA_BUILDS, ids=lambda b: b.version)
def test_recorded_consumer_ampere_and_ada_bf16(record, gpu, build):
    record(rec.node(gpu, 2), build)
    plan, _ = plan_with(SINGLE, build)
    assert plan.device.candidate.plugin == "cuda"
    assert (plan.amp.dtype, plan.amp.grad_scaler, plan.amp.tf32) == ("bf16", False, True)
    assert f"compute capability {gpu.cc}" in plan.amp.reason


# -- builds the plugin must not claim ------------------------------------------------------------


def test_recorded_rocm_build_is_left_to_ezpz_rocm(record, unrecorded_probes):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_6_ROCM62)  # even if NVML answered
    plan, _ = plan_with(SINGLE, rec.TORCH_2_6_ROCM62)

    assert plan.device.candidate.plugin != "cuda"
    assert rejection(plan) == "nvidia: torch is a ROCm build (torch.version.hip=6.2.41134-65d174c3e): left to ezpz-rocm"
    assert unrecorded_probes.calls == []  # decided from the build alone: nothing probed


def test_recorded_cpu_build_is_rejected_without_probing(record, unrecorded_probes):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CPU)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_13_CPU)
    assert plan.device.torch_device == "cpu"
    assert "torch built without CUDA" in rejection(plan)
    assert unrecorded_probes.calls == []


# -- CUDA_VISIBLE_DEVICES ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "-1", "-1,0"])
def test_recorded_h100_hidden_by_cuda_visible_devices(record, value):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    plan, _ = plan_with({"CUDA_VISIBLE_DEVICES": value}, rec.TORCH_2_13_CU130)
    assert plan.device.torch_device == "cpu"
    assert rejection(plan) == f"nvidia: 0 CUDA devices visible (CUDA_VISIBLE_DEVICES={value!r})"


@pytest.mark.usefixtures("torchrun_supported")
def test_recorded_h100_visible_subset_maps_to_physical_ids(record):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    env = torchrun(rank=1, world_size=2, local_rank=1, local_world_size=2, CUDA_VISIBLE_DEVICES="6,2")
    plan, _ = plan_with(env, rec.TORCH_2_13_CU130)

    assert plan.device.torch_device == "cuda:1"
    assert plan.device.candidate.physical_ids == ("6", "2")
    assert "physical device 2 via CUDA_VISIBLE_DEVICES" in plan.device.reason


def test_recorded_h100_visible_by_uuid_prefix(record):
    gpus = rec.node(rec.H100_SXM5_80GB, 4)
    record(gpus, rec.TORCH_2_13_CU130)
    value = f"{gpus[3].uuid[:12]},{gpus[0].uuid}"
    plan, _ = plan_with({"CUDA_VISIBLE_DEVICES": value, "EZPZ_DEVICE": "cuda:1"}, rec.TORCH_2_13_CU130)

    assert plan.device.candidate.physical_ids == ("3", "0")
    assert plan.device.torch_device == "cuda:1"
    assert plan.device.candidate.details["uuids"] == f"{gpus[3].uuid},{gpus[0].uuid}"


def test_recorded_ordinal_past_the_last_gpu_ends_the_list(record):
    record(rec.node(rec.A100_SXM4_40GB, 2), rec.TORCH_2_8_CU128)
    plan, _ = plan_with({"CUDA_VISIBLE_DEVICES": "1,7,0"}, rec.TORCH_2_8_CU128)
    cand = plan.device.candidate
    assert cand.count == 1 and cand.physical_ids == ("1",)
    assert "ordinal 7 is past the 2 GPU(s)" in cand.details["notes"]


def test_recorded_mig_instances_fall_back_to_the_cuda_runtime(record, unrecorded_probes, monkeypatch):
    """NVML lists whole GPUs; a MIG instance is only described by the CUDA runtime."""
    from ezpz_cuda import probe

    mig = rec.A100_SXM4_40GB.__class__(name="NVIDIA A100-SXM4-40GB MIG 3g.20gb", major=8, minor=0,
                                       total_memory=20 * rec.GiB)
    record([mig], rec.TORCH_2_8_CU128, via="torch")
    monkeypatch.setattr(probe, "nvml_gpus", lambda: rec.node(rec.A100_SXM4_40GB, 1))
    value = "MIG-a1b2c3d4-0000-4000-8000-000000000001"
    plan, _ = plan_with({"CUDA_VISIBLE_DEVICES": value}, rec.TORCH_2_8_CU128)

    cand = plan.device.candidate
    assert cand.physical_ids == (value,)
    assert cand.details["probe"] == "torch"
    assert "MIG is enabled" in cand.details["notes"]
    assert "initialised CUDA" in cand.reason
    assert plan.amp.dtype == "bf16"


def test_recorded_without_nvml_probes_through_torch_and_says_so(record, unrecorded_probes):
    record(rec.node(rec.H100_SXM5_80GB, 2), rec.TORCH_2_13_CU130, via="torch")
    plan, _ = plan_with({"CUDA_VISIBLE_DEVICES": "4,5"}, rec.TORCH_2_13_CU130)

    cand = plan.device.candidate
    assert cand.physical_ids == ("4", "5")
    assert "NVML unavailable" in cand.details["notes"]
    assert "initialised CUDA" in cand.reason and "ezpz-cuda[nvml]" in cand.reason
    assert unrecorded_probes.calls[:2] == ["nvml_gpus", "torch_gpus"]
    from ezpz_cuda.plugin import ezpz_before_init

    note = ezpz_before_init(plan=plan)
    assert note is not None and "spawn" in note.reason and dict(note.env_defaults) == {"DS_ACCELERATOR": "cuda"}


def test_recorded_heterogeneous_node_uses_the_weakest_gpu_and_warns_about_order(record):
    record([rec.RTX_4090, rec.GTX_1080], rec.TORCH_2_6_CU124)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_6_CU124)
    assert plan.amp.dtype == "fp16"
    assert "GTX 1080 (compute capability 6.1), the least capable of 2 visible GPUs" in plan.amp.reason
    assert "CUDA_DEVICE_ORDER" in plan.device.candidate.details["notes"]

    plan, _ = plan_with({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, rec.TORCH_2_6_CU124)
    assert "notes" not in plan.device.candidate.details


# -- local ranks vs devices --------------------------------------------------------------------


@pytest.mark.usefixtures("torchrun_supported")
def test_recorded_more_local_ranks_than_visible_gpus_is_an_error(record):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    env = torchrun(rank=2, world_size=4, local_rank=2, local_world_size=4, CUDA_VISIBLE_DEVICES="0,1")
    with pytest.raises(UnavailableError) as info:
        plan_with(env, rec.TORCH_2_13_CU130)
    message = str(info.value)
    assert "2 cuda device(s) visible (after CUDA_VISIBLE_DEVICES)" in message
    assert "4 local rank(s)" in message


def test_recorded_requested_index_past_visible_gpus_is_an_error(record):
    record(rec.node(rec.A100_SXM4_40GB, 2), rec.TORCH_2_8_CU128)
    with pytest.raises(UnavailableError, match=r"below the 2 cuda device\(s\) visible"):
        plan_with({"EZPZ_DEVICE": "cuda:2"}, rec.TORCH_2_8_CU128)


# -- overrides ----------------------------------------------------------------------------------


@pytest.mark.parametrize("request_", ["cpu", "CPU"])
def test_recorded_h100_ezpz_device_cpu_override(record, request_):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    plan, _ = plan_with({"EZPZ_DEVICE": request_}, rec.TORCH_2_13_CU130)
    assert plan.device.torch_device == "cpu"
    assert any(a.plugin == "cuda" and a.name == "cuda" for a in plan.device.alternatives)


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("EZPZ_DEVICE", "cuda:5", "cuda:5"),
    ("EZPZ_DEVICE", "nvidia", "cuda:0"),
    ("TORCH_DEVICE", "cuda:2", "cuda:2"),
])
def test_recorded_h100_ezpz_device_selects_cuda(record, var, value, expected):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    plan, _ = plan_with({var: value}, rec.TORCH_2_13_CU130)
    assert plan.device.torch_device == expected
    assert f"requested by {var}={value}" in plan.device.reason


def test_recorded_v100_torch_2_13_ezpz_device_cuda_names_the_rejection(record):
    record(rec.node(rec.V100_SXM2_32GB, 1), rec.TORCH_2_13_CU130)
    try:
        with pytest.raises(UnavailableError) as info:
            plan_with({"EZPZ_DEVICE": "cuda"}, rec.TORCH_2_13_CU130)
    except AttributeError as err:  # the core's choose_device, not this plugin
        if "device_type" not in str(err):
            raise
        pytest.xfail(f"core bug: ezpz.policies.choose_device reads Alternative.device_type ({err})")
    assert "no kernels for Tesla V100-SXM2-32GB" in str(info.value)


@pytest.mark.parametrize("var", ["EZPZ_BACKEND", "TORCH_BACKEND"])
def test_recorded_a100_backend_override_to_gloo(record, var):
    record(rec.node(rec.A100_SXM4_40GB, 8), rec.TORCH_2_8_CU128)
    plan, _ = plan_with({var: "gloo"}, rec.TORCH_2_8_CU128)
    assert plan.backend.name == "gloo"
    # The reason names the variable the user actually set (the core rewrites the canonical name).
    assert plan.backend.reason.startswith(f"requested by {var}=gloo")
    assert [a.name for a in plan.backend.alternatives] == ["nccl"]


@pytest.mark.parametrize("var", ["EZPZ_BACKEND", "TORCH_BACKEND"])
def test_recorded_a100_backend_override_not_available_raises(record, var):
    record(rec.node(rec.A100_SXM4_40GB, 8), rec.TORCH_2_8_CU128)
    with pytest.raises(UnavailableError, match=rf"{var}='mpi'.*nccl, gloo"):
        plan_with({var: "mpi"}, rec.TORCH_2_8_CU128)


def test_recorded_windows_build_without_nccl_falls_back_to_gloo(record):
    record(rec.node(rec.RTX_4090, 1), rec.TORCH_2_6_CU124_WINDOWS, arch=rec.ARCH_CU124)
    plan, _ = plan_with(SINGLE, rec.TORCH_2_6_CU124_WINDOWS)
    assert plan.backend.name == "gloo"
    assert "after nccl unavailable" in plan.backend.reason
    assert "built without NCCL" in plan.backend.alternatives[0].reason
    with pytest.raises(UnavailableError, match="built without NCCL"):
        plan_with({"EZPZ_BACKEND": "nccl"}, rec.TORCH_2_6_CU124_WINDOWS)


def test_recorded_h100_precision_fp32_turns_autocast_and_tf32_off(record):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    plan, _ = plan_with({"EZPZ_PRECISION": "fp32"}, rec.TORCH_2_13_CU130)
    assert (plan.amp.dtype, plan.amp.autocast, plan.amp.grad_scaler, plan.amp.tf32) == ("fp32", False, False, False)
    assert "fp32 was requested" in plan.amp.tf32_reason


def test_recorded_a100_precision_fp16_request_gets_a_scaler(record):
    record(rec.node(rec.A100_SXM4_40GB, 8), rec.TORCH_2_8_CU128)
    plan, _ = plan_with({"EZPZ_PRECISION": "fp16"}, rec.TORCH_2_8_CU128)
    assert (plan.amp.dtype, plan.amp.autocast, plan.amp.grad_scaler, plan.amp.tf32) == ("fp16", True, True, True)
    assert plan.amp.reason.startswith("fp16 requested by EZPZ_PRECISION")


def test_recorded_h100_plan_carries_the_plugin_facts(record):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    plan, explanation = plan_with(SINGLE, rec.TORCH_2_13_CU130)
    facts = plan.device.candidate.facts
    assert isinstance(facts, CudaFacts)
    assert facts.arch_list == rec.ARCH_CU130
    assert facts.build == rec.TORCH_2_13_CU130
    device = explanation["device"]
    assert device.details["torch_arch_list"] == " ".join(rec.ARCH_CU130)
    assert device.details["compute_capability"] == ",".join(["9.0"] * 8)
