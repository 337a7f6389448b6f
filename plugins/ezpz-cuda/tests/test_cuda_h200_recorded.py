"""The NVIDIA H200 ezpz ran on (2026-11-27), fed back as recorded facts: the decisions here must equal the live ones.

Recorded only: these tests run on any machine, against the facts the probes
reported on that host (``cuda_recorded.H200_LIVE``, ``TORCH_2_11_CU130``,
``ARCH_2_11_CU130_LIVE``; sources cited there). What ran on the real device
is in ``test_gpu.py`` (``pytest -m gpu``) and docs/hardware-validation.md.
"""

from __future__ import annotations

import pytest

import cuda_recorded as rec
import ezpz
from cuda_testlib import plan_with, torchrun
from ezpz.plugin_host.calls import Hooks
from ezpz.startup.environ import apply_env_defaults, decide_env_defaults
from ezpz_cuda import plugin

ASYNC = "TORCH_NCCL_ASYNC_ERROR_HANDLING"

#: The device line ``ezpz doctor`` printed on the H200 host (run1-log.txt), cut where the layout part begins.
LIVE_DEVICE_WHY = ("1 x NVIDIA H200 (compute capability 9.0, 140 GiB) visible, found via NVML, "
                   "without creating a CUDA context")
LIVE_PRECISION_WHY = ("auto: NVIDIA H200 (compute capability 9.0) has bf16 tensor cores (compute capability >= 8.0): "
                      "fp32's range, so no grad scaler")


@pytest.fixture
def h200(record, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probes answer as they did on the H200 host (Triton present, as on that host's CUDA wheel)."""
    record((rec.H200_LIVE,), rec.TORCH_2_11_CU130)
    monkeypatch.setattr(plugin, "triton_found", lambda: True)


@pytest.mark.usefixtures("h200")
def test_recorded_h200_single_process_decides_what_the_live_host_decided(unrecorded_probes):
    plan, explanation = plan_with({}, rec.TORCH_2_11_CU130)

    assert plan.device.torch_device == "cuda:0"
    cand = plan.device.candidate
    assert (cand.plugin, cand.vendor, cand.count, cand.names) == ("cuda", "nvidia", 1, ("NVIDIA H200",))
    assert cand.total_memory == (143771 * rec.MiB,)
    assert cand.arch == "sm_90"
    assert LIVE_DEVICE_WHY in plan.device.reason
    assert "torch_gpus" not in unrecorded_probes.calls  # NVML answered, as live: CUDA never initialised
    assert plan.backend.name == "nccl"
    assert (plan.amp.dtype, plan.amp.autocast, plan.amp.grad_scaler, plan.amp.tf32) == ("bf16", True, False, True)
    assert LIVE_PRECISION_WHY in plan.amp.reason
    assert plan.profiling.marker == "nvtx" and plan.profiling.activities == ("CPU", "CUDA")
    assert plan.compile.backend == "inductor"
    text = str(explanation)
    assert "torch_arch_list: sm_75 sm_80 sm_86 sm_90 sm_100 sm_120" in text
    assert "uuids: GPU-ab4d4a0c-598a-366f-8698-444f3204c880" in text


def _lifecycle(env: dict[str, str]):
    """The cuda plugin's lifecycle answer for ``env`` through the real hook, and setup()'s env decision on it."""
    plan, _ = plan_with(env, rec.TORCH_2_11_CU130)
    actions = dict(Hooks(ezpz.hooks.get_plugin_host()).before_init(plan))
    action = actions["cuda"]
    return plan, action, {c.name: c for c in decide_env_defaults(action.env_defaults, env)}


@pytest.mark.usefixtures("h200", "torchrun_supported")
def test_recorded_h200_under_torchrun_names_torchrun_not_the_user_and_applies_the_plugins_value():
    """As live on the H200: torchrun's agent exported ASYNC=1; the trace blamed the user and 1 stayed. Now 3 applies."""
    env = torchrun(rank=1, world_size=2, local_rank=0, local_world_size=1, **{ASYNC: "1"})
    plan, action, changes = _lifecycle(env)
    assert (plan.launch.launcher, plan.device.torch_device, plan.backend.name) == ("torchrun", "cuda:0", "nccl")
    assert action.env_defaults[ASYNC] == "3"

    change = changes[ASYNC]
    assert change.applies and change.set_by == "torchrun" and change.current == "1"
    assert "set by the user" not in change.note
    assert f"{ASYNC}=1 was set by torchrun, not by the user" in change.note
    assert "local_elastic_agent.py" in change.note  # where torchrun does it
    assert f"the plugin's {ASYNC}=3 applies" in change.note
    assert change.detail == "set to '3', replacing '1' set by torchrun (not the user)"

    applied_env = dict(env)
    applied, kept = apply_env_defaults(action.env_defaults, applied_env)
    assert applied_env[ASYNC] == "3" and ASYNC in applied and ASYNC not in kept


@pytest.mark.usefixtures("h200", "torchrun_supported")
@pytest.mark.parametrize(("extra", "value"), [
    ({"TORCHELASTIC_RUN_ID": "ezpz-cuda-recorded"}, "0"),  # under torchrun, a value torchrun never exports: the user's
    ({"TORCHELASTIC_RUN_ID": ""}, "1"),  # no torchrun run id: nobody but the user set it
], ids=["torchrun-user-0", "no-torchrun-user-1"])
def test_recorded_h200_a_value_the_user_set_is_kept_and_said(extra, value):
    env = torchrun(rank=1, world_size=2, local_rank=0, local_world_size=1, **{ASYNC: value})
    env.update(extra)
    if not env["TORCHELASTIC_RUN_ID"]:
        del env["TORCHELASTIC_RUN_ID"]
    _, _, changes = _lifecycle(env)
    change = changes[ASYNC]
    assert not change.applies and change.set_by == "user"
    assert change.note == f"{ASYNC}={value} set by the user was kept (the plugin proposed 3)"
