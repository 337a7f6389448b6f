"""Built-in Apple MPS plugin: device ``mps``, gloo, precision by torch and macOS version.

Recorded facts (public sources):
- fp16 autocast on MPS arrived in torch 2.5 (pytorch/pytorch#99272); a grad
  scaler for MPS only in torch 2.8 (pytorch/pytorch#142397, noted in
  huggingface/accelerate#3373), so fp16 *training* needs 2.8.
- bf16 autocast on MPS arrived in torch 2.6 (pytorch/pytorch#139390) and needs
  macOS 14 (Sonoma) or later (pytorch/pytorch#119641, Apple MPSDataType docs).
- torch.compile: the default ``inductor`` backend did not support MPS before
  ``MPSInductor`` (Metal code generation) shipped in torch 2.8 (PyTorch 2.8
  release notes, MPS section: "MPSInductor: torch.compile for Apple GPUs",
  pytorch/pytorch#150121); before that the advice was
  ``torch.compile(m, backend="aot_eager")`` (discuss.pytorch.org/t/192079).
"""

from __future__ import annotations

from collections.abc import Mapping

from typing import TYPE_CHECKING, Any

from ezpz.primitives.markers import hookimpl

if TYPE_CHECKING:  # imported in the hook bodies to keep `import ezpz` cheap
    from ezpz.compiling import CompileOption, CompilePolicy
    from ezpz.decisions import AmpPolicy, BackendChoice, LifecycleAction, PrecisionOption, ProfilingSupport, SetupPlan
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild
    from ezpz.builtin.mps_facts import MpsFacts


#: This plugin's facts record, by path: :func:`ezpz.plugin_kit.facts_if_ours` never imports it to ask.
FACTS = "ezpz.builtin.mps_facts:MpsFacts"


def __getattr__(name: str) -> Any:
    """``MpsFacts`` lives in :mod:`ezpz.builtin.mps_facts`, imported on first use (it is an attrs record)."""
    if name == "MpsFacts":
        from ezpz.builtin.mps_facts import MpsFacts

        return MpsFacts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def probe_mps() -> MpsFacts:
    """``torch.backends.mps.is_available()`` (no Metal context) and the macOS version."""
    import platform

    import torch

    from ezpz.builtin.mps_facts import MpsFacts

    release = platform.mac_ver()[0]
    parts = [int(p) for p in release.split(".")[:2] if p.isdigit()] if release else []
    macos = (parts + [0, 0])[:2] if parts else (0, 0)
    return MpsFacts(available=bool(torch.backends.mps.is_available()), macos=(macos[0], macos[1]))


def mps_report(build: TorchBuild, facts: MpsFacts | None) -> ProbeReport:
    from ezpz.facts import DeviceCandidate, ProbeReport

    if not build.mps_built:
        return ProbeReport.rejected("mps", "apple", "torch built without MPS (only macOS arm64 builds have it)")
    if facts is None or not facts.available:
        return ProbeReport.rejected("mps", "apple", "torch has MPS but it is not available here (needs macOS 12.3+ on Apple silicon)")
    return ProbeReport.found(DeviceCandidate(
        device_type="mps", vendor="apple", priority=50, shared=True, count=1, facts=facts,
        reason=f"Apple GPU via Metal (macOS {facts.macos[0]}.{facts.macos[1]})",
    ))


def mps_precision_options(build: TorchBuild, facts: MpsFacts) -> list[PrecisionOption]:
    from ezpz.decisions import PrecisionOption

    macos = f"macOS {facts.macos[0]}.{facts.macos[1]}"
    if not build.at_least(2, 6):
        bf16 = PrecisionOption(dtype="bf16", supported=False, reason=f"bf16 autocast on MPS needs torch 2.6+ (have {build.version})")
    elif facts.macos < (14, 0):
        bf16 = PrecisionOption(dtype="bf16", supported=False, reason=f"bf16 on MPS needs macOS 14+ (have {macos})")
    else:
        bf16 = PrecisionOption(dtype="bf16", supported=True, reason=f"bf16 autocast on MPS (torch {build.version}, {macos})")
    if build.at_least(2, 8):
        fp16 = PrecisionOption(dtype="fp16", supported=True, grad_scaler=True, reason="fp16 autocast with the MPS grad scaler (torch 2.8+)")
    else:
        fp16 = PrecisionOption(dtype="fp16", supported=False,
                               reason=f"fp16 training on MPS needs the grad scaler from torch 2.8 (have {build.version})")
    return [bf16, fp16]


@hookimpl(trylast=True)
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport:
    return mps_report(build, probe_mps() if build.mps_built else None)


@hookimpl(trylast=True)
def ezpz_select_backend(device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None) -> BackendChoice | None:
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None
    from ezpz.plugin_kit import backend_in_build
    from ezpz.policies import choose_backend

    options = [backend_in_build(build, "gloo", reason="MPS has no collective library; gloo over host memory",
                                missing="torch built without gloo")]
    return choose_backend(options, requested=requested, device="mps")


@hookimpl(trylast=True)
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.policies import choose_precision

    return choose_precision(mps_precision_options(build, facts), requested=requested, device="mps")


@hookimpl(trylast=True)
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None
    from ezpz.decisions import ProfilingSupport

    def memory_stats(_device: object) -> dict[str, float]:
        import torch

        return {"allocated_bytes": float(torch.mps.current_allocated_memory()),
                "driver_allocated_bytes": float(torch.mps.driver_allocated_memory())}

    return ProfilingSupport(activities=("CPU",), memory_stats=memory_stats,
                            reason="the torch profiler records MPS work under the CPU activity; memory from torch.mps")


MPS_INDUCTOR_FROM = (2, 8)
#: DeepSpeed's accelerator name for Apple GPUs (deepspeed/accelerator/real_accelerator.py).
DS_ACCELERATOR = "mps"


def mps_compile_options(build: TorchBuild) -> list[CompileOption]:
    """Inductor from torch 2.8 (MPSInductor); before it, aot_eager."""
    from ezpz.compiling import CompileOption

    if build.at_least(*MPS_INDUCTOR_FROM):
        inductor = CompileOption(backend="inductor", available=True,
                                 reason=f"MPSInductor generates Metal kernels (torch 2.8+, have {build.version})")
    else:
        inductor = CompileOption(backend="inductor", available=False,
                                 reason=f"the inductor backend does not support MPS before torch 2.8's MPSInductor "
                                        f"(have {build.version})")
    return [inductor, CompileOption(backend="aot_eager", available=True,
                                    reason="AOTAutograd with eager MPS kernels")]


@hookimpl(trylast=True)
def ezpz_compile_policy(device: DeviceCandidate, build: TorchBuild) -> CompilePolicy | None:
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None
    from ezpz.compiling import choose_compile

    return choose_compile(mps_compile_options(build), device="mps")


@hookimpl(trylast=True)
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """Tell DeepSpeed to use its MPS accelerator instead of guessing (``DS_ACCELERATOR=mps``)."""
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(plan.device.candidate, FACTS) is None:
        return None
    from ezpz.plugin_kit import with_ds_accelerator

    return with_ds_accelerator(None, DS_ACCELERATOR, "MPS")
