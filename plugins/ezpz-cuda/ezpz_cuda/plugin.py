"""ezpz hook implementations for NVIDIA GPUs (entry point ``cuda`` in group ``ezpz``).

Probe (``ezpz_cuda.probe``) -> facts (``ezpz_cuda.facts``) -> pure policies
(``ezpz_cuda.policy``). Every hook after the probe answers only for a device
this plugin offered (:func:`ezpz.plugin_kit.facts_if_ours` with ``ezpz_cuda.facts:CudaFacts``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ezpz import hookimpl
from ezpz_cuda.gate import build_rejection  # re-exported; standard library only

# The rest is imported inside the hooks, so that `import ezpz` (which imports this module) stays cheap.
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ezpz.compiling import CompilePolicy
    from ezpz.cuda_answers import CudaAnswers
    from ezpz.decisions import AmpPolicy, BackendChoice, LifecycleAction, ProfilingSupport, SetupPlan
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild
    from ezpz.failures.signatures import FailureSignature
    from ezpz_cuda.facts import CudaFacts

__all__ = [
    "build_rejection",
    "ezpz_amp_policy",
    "ezpz_before_init",
    "ezpz_compile_policy",
    "ezpz_failure_signatures",
    "ezpz_probe_devices",
    "ezpz_profiling",
    "ezpz_select_backend",
    "gather_facts",
]

#: This plugin's facts record, by path: :func:`ezpz.plugin_kit.facts_if_ours` never imports it to ask.
FACTS = "ezpz_cuda.facts:CudaFacts"


def gather_facts(build: TorchBuild, environ: Mapping[str, str]) -> CudaFacts | str:
    """Run the probes this build and environment call for; return the facts, or why there is no device."""
    from ezpz_cuda import policy, probe
    from ezpz_cuda.facts import CudaFacts

    rejected = build_rejection(build)
    if rejected:
        return rejected
    raw = environ.get(policy.VISIBLE_VAR)
    visible = policy.parse_visible_devices(raw)
    if visible.none:
        return policy.zero_devices_reason(visible, "nvml")
    notes: list[str] = []
    try:
        physical: tuple[Any, ...] | None = probe.nvml_gpus()
    except probe.ProbeUnavailable as err:
        physical = None
        notes.append(f"NVML unavailable: {err}")
    if physical is not None and (visible.mig or any(g.mig_enabled for g in physical)):
        notes.append("MIG is enabled: CUDA shows MIG instances, which NVML's list of whole GPUs does not "
                     "describe, so the CUDA runtime was asked instead")
        physical = None
    if physical is not None:
        selection = policy.select_visible(visible, physical)
        gpus = tuple(physical[i] for i in selection.indices)
        ids = tuple(str(i) for i in selection.indices)
        how = "nvml"
        notes += [*selection.notes, *policy.order_notes(environ, gpus)]
    else:
        try:
            gpus = probe.torch_gpus()
        except probe.ProbeUnavailable as err:
            return f"no CUDA device could be listed ({'; '.join([*notes, str(err)])})"
        ids = policy.torch_physical_ids(visible, len(gpus))
        how = "torch"
    if not gpus:
        reason = policy.zero_devices_reason(visible, how)
        return f"{reason} [{'; '.join(notes)}]" if notes else reason
    facts = CudaFacts(build=build, gpus=gpus, physical_ids=ids, probe=how, arch_list=probe.torch_arch_list(),
                      visible_devices=raw, notes=notes)
    return policy.unsupported_by_build(facts) or facts


@hookimpl
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport:
    """Offer ``cuda`` for the visible NVIDIA GPUs, or say why not."""
    from ezpz.facts import ProbeReport

    rejected = build_rejection(build)  # a CPU or ROCm torch: no facts, probe or policy module is imported
    if rejected:
        return ProbeReport.rejected("cuda", "nvidia", rejected)
    from ezpz_cuda import policy

    found = gather_facts(build, environ)
    if isinstance(found, str):
        return ProbeReport.rejected("cuda", "nvidia", found)
    return ProbeReport.found(policy.cuda_candidate(found))


@hookimpl
def ezpz_select_backend(
    device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None
) -> BackendChoice | None:
    """NCCL, else gloo."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.policies import choose_backend
    from ezpz_cuda import policy

    return choose_backend(policy.backend_options(build), requested=requested, device=policy.device_label(facts))


@hookimpl
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    """bf16 from compute capability 8.0, fp16 with a grad scaler below; TF32 from 8.0.

    Decided for the least capable visible GPU so every local rank agrees.
    """
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.policies import choose_precision
    from ezpz_cuda import policy

    gpu, label = facts.weakest, policy.device_label(facts)
    tf32, tf32_reason = policy.tf32_decision(gpu, build, requested)
    return choose_precision(policy.precision_options(gpu, label), requested=requested, device=label,
                            tf32=tf32, tf32_reason=tf32_reason)


def _nvtx_push(name: str) -> Any:
    import torch.cuda.nvtx

    return torch.cuda.nvtx.range_push(name)


def _nvtx_pop() -> Any:
    import torch.cuda.nvtx

    return torch.cuda.nvtx.range_pop()


def cuda_memory_stats(device: Any) -> dict[str, float]:
    """A flat view of ``torch.cuda`` memory counters for ``device`` (bytes and counts)."""
    import torch

    stats = torch.cuda.memory_stats(device)
    free, total = torch.cuda.mem_get_info(device)
    return {
        "allocated_bytes": float(torch.cuda.memory_allocated(device)),
        "reserved_bytes": float(torch.cuda.memory_reserved(device)),
        "max_allocated_bytes": float(torch.cuda.max_memory_allocated(device)),
        "max_reserved_bytes": float(torch.cuda.max_memory_reserved(device)),
        "alloc_retries": float(stats.get("num_alloc_retries", 0)),
        "ooms": float(stats.get("num_ooms", 0)),
        "device_free_bytes": float(free),
        "device_total_bytes": float(total),
    }


def new_timing_event() -> Any:
    """A CUDA event that records timing: ``torch.cuda.Event(enable_timing=True)`` (the device timer)."""
    import torch

    return torch.cuda.Event(enable_timing=True)


TIMER = "cuda events"
TIMER_REASON = ("torch.cuda.Event(enable_timing=True) recorded at report boundaries: the device's own time between "
                "them, one event per report, synchronised only at the report")


@hookimpl
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    """CPU+CUDA profiler activities, NVTX ranges, ``torch.cuda`` memory counters."""
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:  # imports nothing: another vendor's device costs nothing here
        return None  # not our device: the plugin that offered it answers
    from ezpz.decisions import ProfilingSupport

    return ProfilingSupport(
        activities=("CPU", "CUDA"),
        marker="nvtx",
        range_push=_nvtx_push,
        range_pop=_nvtx_pop,
        memory_stats=cuda_memory_stats,
        new_event=new_timing_event, timer=TIMER, timer_reason=TIMER_REASON,
        reason="CUDA kernels via the CUPTI-backed CUDA profiler activity; ranges as NVTX (Nsight Systems) "
        "plus torch record_function under the torch profiler; memory from torch.cuda's caching allocator",
    )


@hookimpl
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """``DS_ACCELERATOR=cuda`` for DeepSpeed; also says when the probe had to initialise CUDA (a fork hazard)."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(plan.device.candidate, FACTS)  # imports nothing for another vendor's device
    if facts is None:
        return None
    from ezpz.decisions import LifecycleAction

    from ezpz.plugin_kit import with_ds_accelerator, with_nccl_hang_budget
    from ezpz_cuda.compile_policy import DS_ACCELERATOR

    said = None
    if facts.probe == "torch":
        said = LifecycleAction(
            reason="CUDA was initialised while probing devices (NVML was not usable): subprocesses forked from here "
            "cannot use CUDA, so start CUDA workers with the 'spawn' method, or install ezpz-cuda[nvml]",
        )
    return with_nccl_hang_budget(with_ds_accelerator(said, DS_ACCELERATOR, "CUDA"), plan, "NCCL")


@hookimpl
def ezpz_failure_signatures() -> list[FailureSignature]:
    """NCCL and CUDA failure texts (:data:`ezpz_cuda.failures.SIGNATURES`), with their sources."""
    from ezpz.failures.signatures import FailureSignature
    from ezpz_cuda.failures import SIGNATURES

    return [FailureSignature(pattern=p, kind=k, reason=r, blames_host=b, source=src) for p, k, r, b, src in SIGNATURES]


def triton_found() -> bool:
    """Whether a ``triton`` package is installed (found, not imported); a seam tests replace."""
    from ezpz.compiling import triton_installed

    return triton_installed()


@hookimpl
def ezpz_compile_policy(device: DeviceCandidate, build: TorchBuild) -> CompilePolicy | None:
    """Inductor when Triton is installed and every visible GPU is compute capability 7.0+, else aot_eager."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.compiling import choose_compile
    from ezpz_cuda import compile_policy, policy

    options = compile_policy.compile_options(facts.weakest, build, triton_found=triton_found())
    return choose_compile(options, device=policy.device_label(facts))


@hookimpl
def ezpz_cuda_answers(device: DeviceCandidate, build: TorchBuild, backend: str) -> CudaAnswers | None:
    """On CUDA the script's CUDA calls are already right: ``python -m ezpz.cuda_compat`` redirects nothing."""
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None
    from ezpz.cuda_answers import CudaAnswers

    return CudaAnswers(redirect=False,
                       reason=f"CUDA is the chosen device ({', '.join(device.names) or 'cuda'}): "
                              "torch.cuda drives it, so the script's CUDA calls run as written; nothing is redirected")
