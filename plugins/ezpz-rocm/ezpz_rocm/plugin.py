"""ezpz hook implementations for AMD ROCm (entry point ``rocm`` in group ``ezpz``).

Every hook but the probe answers only for a device this plugin offered
(:func:`ezpz.plugin_kit.facts_if_ours` with ``ezpz_rocm.facts:RocmFacts``) and returns None otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ezpz import hookimpl
from ezpz_rocm.gate import NOT_ROCM  # re-exported; standard library only

# The rest is imported inside the hooks, so that `import ezpz` (which imports this module) stays cheap.
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ezpz.compiling import CompilePolicy
    from ezpz.decisions import AmpPolicy, BackendChoice, LifecycleAction, ProfilingSupport, SetupPlan
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild
    from ezpz.failures.signatures import FailureSignature

__all__ = [
    "NOT_ROCM",
    "ezpz_amp_policy",
    "ezpz_before_init",
    "ezpz_compile_policy",
    "ezpz_failure_signatures",
    "ezpz_probe_devices",
    "ezpz_profiling",
    "ezpz_select_backend",
]

#: This plugin's facts record, by path: :func:`ezpz.plugin_kit.facts_if_ours` never imports it to ask.
FACTS = "ezpz_rocm.facts:RocmFacts"

PROFILING_REASON = (
    "ROCm builds trace HIP kernels under torch.profiler.ProfilerActivity.CUDA (there is no separate HIP activity); "
    "torch.cuda.nvtx is hipified to roctx (roctxRangePushA/roctxRangePop), so ranges appear in rocprof/rocprofv3 traces; "
    "memory statistics come from torch.cuda"
)


@hookimpl
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport:
    """Offer ``cuda`` (vendor ``amd``) on a ROCm build with at least one visible AMD GPU; say why not otherwise."""
    from ezpz.facts import ProbeReport

    if not build.hip:  # no facts, probe or policy module is imported for a torch that is not a ROCm build
        return ProbeReport.rejected("cuda", "amd", NOT_ROCM)
    from ezpz_rocm import policy, probe

    tunableop = policy.tunableop_requested(environ, build.hip)  # raises ConfigError naming EZPZ_ROCM_TUNABLEOP
    try:
        facts = probe.probe_rocm(build, environ, tunableop=tunableop)
    except Exception as err:  # a broken driver or runtime is a reason, not a crash
        return ProbeReport.rejected("cuda", "amd", f"ROCm build (HIP {build.hip}) but probing the GPUs failed: "
                                    f"{type(err).__name__}: {err}")
    if not facts.gpus:
        where = f" after {facts.visible.var} ({facts.visible.reason})" if facts.visible.var else ""
        return ProbeReport.rejected("cuda", "amd", f"ROCm build (HIP {build.hip}) but no AMD GPU is visible{where}; "
                                    f"probed via {facts.source}")
    return ProbeReport.found(policy.rocm_candidate(facts))


@hookimpl
def ezpz_select_backend(
    device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None
) -> BackendChoice | None:
    """RCCL (``nccl``) when the build has it, else gloo."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.policies import choose_backend
    from ezpz_rocm import policy

    return choose_backend(policy.backend_options(build), requested=requested, device=policy.device_label(facts))


@hookimpl
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    """bf16 on architectures with bf16 matrix units, else fp16 with a grad scaler; TF32 always off."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.policies import choose_precision
    from ezpz_rocm import policy

    return choose_precision(
        policy.precision_options(facts, requested), requested=requested,
        device=policy.device_label(facts), tf32=False, tf32_reason=policy.TF32_REASON,
    )


def _range_push(message: str) -> Any:
    import torch

    return torch.cuda.nvtx.range_push(message)


def _range_pop() -> Any:
    import torch

    return torch.cuda.nvtx.range_pop()


def _memory_stats(device: Any) -> Mapping[str, float]:
    import torch

    stats: dict[str, float] = {
        "allocated_bytes": float(torch.cuda.memory_allocated(device)),
        "max_allocated_bytes": float(torch.cuda.max_memory_allocated(device)),
        "reserved_bytes": float(torch.cuda.memory_reserved(device)),
        "max_reserved_bytes": float(torch.cuda.max_memory_reserved(device)),
    }
    for key, value in torch.cuda.memory_stats(device).items():
        if isinstance(value, (int, float)):
            stats[key] = float(value)
    return stats


def new_timing_event() -> Any:
    """A HIP event that records timing: ``torch.cuda.Event(enable_timing=True)`` (the device timer)."""
    import torch

    return torch.cuda.Event(enable_timing=True)


TIMER = "hip events"
TIMER_REASON = ("torch.cuda.Event(enable_timing=True) recorded at report boundaries: the device's own time between "
                "them, one event per report, synchronised only at the report")


@hookimpl
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    """CPU + CUDA profiler activities, roctx ranges through torch.cuda.nvtx, torch.cuda memory statistics."""
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:  # imports nothing: another vendor's device costs nothing here
        return None  # not our device: the plugin that offered it answers
    from ezpz.decisions import ProfilingSupport

    return ProfilingSupport(
        activities=("CPU", "CUDA"), marker="roctx", range_push=_range_push, range_pop=_range_pop,
        memory_stats=_memory_stats, reason=PROFILING_REASON,
        new_event=new_timing_event, timer=TIMER, timer_reason=TIMER_REASON,
    )


@hookimpl
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """``DS_ACCELERATOR=cuda`` for DeepSpeed; TunableOp (``PYTORCH_TUNABLEOP_ENABLED=1``) only when the user opted in."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(plan.device.candidate, FACTS)  # imports nothing for another vendor's device
    if facts is None:
        return None
    from ezpz.plugin_kit import with_ds_accelerator, with_nccl_hang_budget
    from ezpz_rocm import policy
    from ezpz_rocm.compile_policy import DS_ACCELERATOR

    return with_nccl_hang_budget(with_ds_accelerator(policy.tunableop_action(facts), DS_ACCELERATOR, "CUDA (HIP)"), plan, "RCCL")


@hookimpl
def ezpz_failure_signatures() -> list[FailureSignature]:
    """RCCL, HIP and ROCm runtime failure texts (:data:`ezpz_rocm.failures.SIGNATURES`), with their sources."""
    from ezpz.failures.signatures import FailureSignature
    from ezpz_rocm.failures import SIGNATURES

    return [FailureSignature(pattern=p, kind=k, reason=r, blames_host=b, source=src) for p, k, r, b, src in SIGNATURES]


def triton_found() -> bool:
    """Whether ``pytorch-triton-rocm`` (module ``triton``) is installed, found not imported; a seam tests replace."""
    from ezpz.compiling import triton_installed

    return triton_installed()


@hookimpl
def ezpz_compile_policy(device: DeviceCandidate, build: TorchBuild) -> CompilePolicy | None:
    """Inductor (Triton's AMD backend) on a ROCm build of torch 2.0+ with Triton installed, else aot_eager."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.compiling import choose_compile
    from ezpz_rocm import compile_policy, policy

    label = policy.device_label(facts)
    return choose_compile(compile_policy.compile_options(build, label, triton_found=triton_found()), device=label)
