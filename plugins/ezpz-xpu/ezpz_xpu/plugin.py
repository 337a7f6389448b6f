"""ezpz hook implementations for Intel GPUs (``xpu``).

Each hook answers only for a candidate this plugin offered
(:func:`ezpz.plugin_kit.facts_if_ours` with ``ezpz_xpu.facts:XpuFacts``). Vendor modules (IPEX, the oneCCL
bindings) are imported only inside :func:`ezpz_before_init`, only when the
plan needs them, through :func:`ezpz_xpu.probe.import_module`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ezpz import hookimpl
from ezpz_xpu.gate import IPEX_EOL, NATIVE_XPU, XPU_WHEELS, build_rejection  # re-exported; standard library only

# The rest is imported inside the hooks, so that `import ezpz` (which imports this module) stays cheap.
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ezpz.compiling import CompilePolicy
    from ezpz.decisions import AmpPolicy, BackendChoice, LifecycleAction, MeshSupport, ProfilingSupport, SetupPlan
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild
    from ezpz.failures.signatures import FailureSignature

__all__ = [
    "IPEX_EOL",
    "NATIVE_XPU",
    "XPU_WHEELS",
    "build_rejection",
    "ezpz_amp_policy",
    "ezpz_before_init",
    "ezpz_compile_policy",
    "ezpz_failure_signatures",
    "ezpz_mesh_support",
    "ezpz_probe_devices",
    "ezpz_profiling",
    "ezpz_select_backend",
]

#: This plugin's facts record, by path: :func:`ezpz.plugin_kit.facts_if_ours` never imports it to ask.
FACTS = "ezpz_xpu.facts:XpuFacts"

_MEMORY_FUNCS = (
    ("allocated_bytes", "memory_allocated"),
    ("reserved_bytes", "memory_reserved"),
    ("max_allocated_bytes", "max_memory_allocated"),
    ("max_reserved_bytes", "max_memory_reserved"),
)


@hookimpl
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport:
    """Offer ``xpu`` when torch has XPU and Level Zero shows at least one device; otherwise say why not."""
    from ezpz.facts import ProbeReport

    why_not = build_rejection(build)  # no facts, probe or policy module is imported for a torch without XPU
    if why_not:
        return ProbeReport.rejected("xpu", "intel", why_not)
    from ezpz_xpu import policy, probe

    try:
        facts = probe.probe_xpu(build, environ)
    except Exception as err:  # a broken driver must not take the other plugins down
        return ProbeReport.rejected("xpu", "intel", f"probing torch.xpu failed: {type(err).__name__}: {err}")
    return policy.xpu_report(facts)


@hookimpl
def ezpz_select_backend(
    device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None
) -> BackendChoice | None:
    """xccl (torch >= 2.8), else ccl (oneCCL bindings installed), else gloo with a warning."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.policies import choose_backend
    from ezpz_xpu import policy

    return choose_backend(policy.backend_options(facts, build), requested=requested,
                          device=policy.device_label(facts))


@hookimpl
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    """bf16 where the device has it natively, else fp16 with a scaler where FP64 allows, else fp32."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.policies import choose_precision
    from ezpz_xpu import policy

    return choose_precision(policy.precision_options(facts, requested), requested=requested,
                            device=policy.device_label(facts), tf32=False,
                            tf32_reason=policy.tf32_reason(facts))


def new_timing_event() -> Any:
    """A XPU event that records timing: ``torch.xpu.Event(enable_timing=True)`` (the device timer)."""
    import torch

    return torch.xpu.Event(enable_timing=True)


TIMER = "xpu events"
TIMER_REASON = ("torch.xpu.Event(enable_timing=True) recorded at report boundaries: the device's own time between "
                "them, one event per report, synchronised only at the report")


@hookimpl
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    """XPU profiler activity, ITT ranges (VTune), memory from ``torch.xpu``."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.decisions import ProfilingSupport

    if facts.itt:
        return ProfilingSupport(
            activities=("CPU", "XPU"), marker="itt", range_push=_itt_push, range_pop=_itt_pop,
            memory_stats=_memory_stats, new_event=new_timing_event, timer=TIMER, timer_reason=TIMER_REASON,
            reason="torch.profiler XPU activity (Kineto over PTI); ranges as Intel ITT tasks for VTune "
                   "(torch.profiler.itt); memory from torch.xpu",
        )
    return ProfilingSupport(
        activities=("CPU", "XPU"), memory_stats=_memory_stats,
        new_event=new_timing_event, timer=TIMER, timer_reason=TIMER_REASON,
        reason="torch.profiler XPU activity; this torch has no ITT (torch.profiler.itt.is_available() is False), "
               "so ranges are torch record_function only; memory from torch.xpu",
    )


@hookimpl
def ezpz_mesh_support(device: DeviceCandidate, build: TorchBuild, backend: str) -> MeshSupport | None:
    """xccl cannot split groups (DeviceMesh's groups by new_group); xccl and ccl lack AVG and PREMUL_SUM
    (``rt.shard`` reduces with SUM): :func:`ezpz_xpu.policy.mesh_support`."""
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz_xpu import policy

    return policy.mesh_support(backend, build.version)


@hookimpl
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """Import IPEX only where the torch version needs it, the oneCCL bindings only for ``ccl``; say so."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(plan.device.candidate, FACTS)  # imports nothing for another vendor's device
    if facts is None:
        return None
    from ezpz.plugin_kit import get_logger
    from ezpz.decisions import LifecycleAction
    from ezpz.errors import UnavailableError
    from ezpz_xpu import policy, probe

    log = get_logger("ezpz.xpu")
    todo = policy.legacy_imports(plan.build.version, plan.backend.name, facts)
    said: list[str] = []
    if todo.ipex:
        try:
            probe.import_module(probe.IPEX_MODULE)
        except Exception as err:  # IPEX is optional help; a broken install should not stop the run
            said.append(f"{todo.ipex_reason}; the import failed ({type(err).__name__}: {err}), "
                        "continuing on native torch")
        else:
            said.append(todo.ipex_reason)
        log.warning("ipex", action=said[-1])
    else:
        said.append(todo.ipex_reason)
    if todo.ccl:
        try:
            probe.import_module(probe.CCL_MODULE)
        except Exception as err:
            raise UnavailableError(
                name="backend", value="ccl",
                expected=f"importable {probe.CCL_MODULE} matching torch {plan.build.version}",
                fix=f"importing it failed ({type(err).__name__}: {err}): reinstall with {policy.CCL_INSTALL}, "
                    "or use torch>=2.8 (xccl), or EZPZ_BACKEND=gloo",
            ) from err
        said.append(todo.ccl_reason or "imported oneccl_bindings_for_pytorch")
    if plan.backend.name == "gloo" and plan.launch.distributed:
        log.warning("xpu_backend_fallback", backend="gloo", reason=plan.backend.reason)
        said.append("collectives fall back to gloo (CPU tensors only): " + plan.backend.reason)
    from ezpz.plugin_kit import with_ds_accelerator
    from ezpz_xpu.compile_policy import DS_ACCELERATOR

    if plan.launch.distributed and plan.backend.name in ("xccl", "ccl"):
        from ezpz_xpu.failures import HANG_BUDGET_REASON

        said.append(HANG_BUDGET_REASON)
    return with_ds_accelerator(LifecycleAction(reason="; ".join(said)), DS_ACCELERATOR, "XPU")


@hookimpl
def ezpz_failure_signatures() -> list[FailureSignature]:
    """Level Zero / Unified Runtime failure texts (:data:`ezpz_xpu.failures.SIGNATURES`), with their sources."""
    from ezpz.failures.signatures import FailureSignature
    from ezpz_xpu.failures import SIGNATURES

    return [FailureSignature(pattern=p, kind=k, reason=r, blames_host=b, source=src) for p, k, r, b, src in SIGNATURES]


def host_platform() -> str:
    """``sys.platform`` (``"linux"``, ``"win32"``)."""
    import sys

    return sys.platform


def triton_found() -> bool:
    """Whether ``pytorch-triton-xpu`` (module ``triton``) is installed, found not imported; a seam tests replace."""
    from ezpz.compiling import triton_installed

    return triton_installed()


@hookimpl
def ezpz_compile_policy(device: DeviceCandidate, build: TorchBuild) -> CompilePolicy | None:
    """Inductor where this torch supports XPU on this OS (Linux 2.4+, Windows 2.7+) with Triton, else aot_eager."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None  # not our device: the plugin that offered it answers
    from ezpz.compiling import choose_compile
    from ezpz_xpu import compile_policy, policy

    label = policy.device_label(facts)
    options = compile_policy.compile_options(build, label, platform=host_platform(), triton_found=triton_found())
    return choose_compile(options, device=label)


def _itt_push(name: str) -> Any:
    from torch.profiler import itt

    return itt.range_push(name)


def _itt_pop() -> Any:
    from torch.profiler import itt

    return itt.range_pop()


def _memory_stats(device: Any) -> dict[str, float]:
    """Allocator counters from ``torch.xpu`` (those this torch has), plus free/total from ``mem_get_info``."""
    import torch

    stats: dict[str, float] = {}
    for key, func in _MEMORY_FUNCS:
        fn = getattr(torch.xpu, func, None)
        if fn is not None:
            stats[key] = float(fn(device))
    info = getattr(torch.xpu, "mem_get_info", None)
    if info is not None:
        try:
            free, total = info(device)
        except RuntimeError:  # some drivers cannot report free memory
            pass
        else:
            stats["free_bytes"], stats["total_bytes"] = float(free), float(total)
    return stats
