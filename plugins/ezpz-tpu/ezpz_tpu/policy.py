"""Pure functions of :class:`~ezpz_tpu.facts.TpuFacts`: the plugin's answers, testable anywhere."""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.compiling import CompileOption
from ezpz.decisions import BackendOption, PrecisionOption
from ezpz.facts import DeviceCandidate, TorchBuild
from ezpz.plugin_kit import vendor_then_gloo

from ezpz_tpu.facts import TpuFacts
from ezpz_tpu.probe import DEVICE_TYPE, PJRT_VAR, VENDOR

__all__ = [
    "CPU_RUNTIME_PRIORITY",
    "DEVICE_TYPE",
    "TPU_PRIORITY",
    "VENDOR",
    "backend_options",
    "compile_options",
    "env_defaults",
    "precision_options",
    "tpu_candidate",
]

#: A TPU wins device selection, like any discrete accelerator (the GPU plugins use 100).
TPU_PRIORITY = 100
#: XLA on its CPU runtime is a testing device: below the built-in cpu (0), so only EZPZ_DEVICE=xla picks it.
CPU_RUNTIME_PRIORITY = -10


def tpu_candidate(facts: TpuFacts) -> DeviceCandidate:
    """The xla device this plugin offers, with a reason the user can read."""
    details = {"pjrt_device": facts.pjrt_device, "from": facts.source}
    if facts.on_tpu:
        gen = facts.generation
        if gen is not None:
            reason = (f"{facts.count} TPU {gen.name} chip(s) on this host ({facts.accelerator_type}: "
                      f"{facts.slice_chips} chip(s) in the slice; {gen.hbm_gb} GB HBM per chip, {gen.source})")
            details.update(generation=gen.name, slice_chips=str(facts.slice_chips),
                           chips_per_host=str(facts.count), hbm_gb=str(gen.hbm_gb))
        else:
            reason = f"TPU through torch_xla ({facts.source}; TPU_ACCELERATOR_TYPE unset, so the generation is unknown)"
        if facts.worker_id is not None:
            details["worker_id"] = str(facts.worker_id)
        if facts.worker_hostnames:
            details["workers"] = str(len(facts.worker_hostnames))
        priority = TPU_PRIORITY
    else:
        why = ("PJRT_DEVICE=CPU" if facts.source == PJRT_VAR else
               "torch_xla is installed but no TPU was found (no TPU_ACCELERATOR_TYPE, no libtpu)")
        reason = (f"XLA on its CPU runtime ({why}): a testing device, ranked below cpu so it is never the default; "
                  "EZPZ_DEVICE=xla chooses it")
        priority = CPU_RUNTIME_PRIORITY
    # torch_xla gives each process its own chip(s) (TPU_VISIBLE_CHIPS, set per process by torch_xla's launcher
    # support), and xla:0 is always this process's first device: no per-rank index to pick, hence shared.
    return DeviceCandidate(
        device_type=DEVICE_TYPE, vendor=VENDOR, reason=reason, count=facts.count, priority=priority, shared=True,
        names=((facts.label,) * facts.count), arch=facts.generation.name if facts.generation else None,
        total_memory=((facts.generation.hbm_gb * 10**9,) * facts.count if facts.generation else ()),
        visible_devices_var="TPU_VISIBLE_CHIPS" if facts.on_tpu else None, details=details, facts=facts,
    )


def backend_options(facts: TpuFacts, build: TorchBuild) -> list[BackendOption]:
    """``xla`` (torch_xla's ProcessGroupXla, registered on importing torch_xla.distributed.xla_backend), then gloo."""
    if facts.on_tpu:
        # torch_xla registers "xla" with torch.distributed only when torch_xla.distributed.xla_backend is
        # imported (ezpz_before_init does it), so the build's backend list cannot show it yet.
        xla = BackendOption(
            name="xla", available=build.distributed,
            reason="torch_xla's ProcessGroupXla: collectives over the TPU interconnect (ICI) for xla tensors"
            if build.distributed else "torch was built without torch.distributed")
    else:
        xla = BackendOption(
            name="xla", available=False,
            reason="XLA's CPU runtime does not form a multi-process world (each rank reports rank 0 of 1, "
                   "checked with torch-xla 2.9.0 under torchrun), so the xla backend cannot join ranks here")
    gloo = ("XLA's CPU runtime: gloo carries host-side collectives; xla tensors must be moved to the CPU for them"
            if not facts.on_tpu else "gloo moves CPU tensors only: a fallback for host-side collectives, not xla tensors")
    return vendor_then_gloo(build, xla, gloo_reason=gloo)


def precision_options(facts: TpuFacts) -> list[PrecisionOption]:
    """Low-precision dtypes in preference order for ``EZPZ_PRECISION=auto``."""
    if facts.on_tpu:
        return [
            PrecisionOption(dtype="bf16", supported=True,
                            reason="TPU matrix units compute bf16 natively; torch.autocast('xla') uses bf16 on TPU"),
            PrecisionOption(dtype="fp16", supported=False,
                            reason="TPUs have no fp16 matrix path: bf16 is the TPU's reduced precision"),
        ]
    return [
        PrecisionOption(dtype="bf16", supported=True,
                        reason="torch.autocast('xla', dtype=bfloat16) runs on XLA's CPU runtime (checked with "
                               "torch-xla 2.9.0: bf16 outputs, backward and an optimizer step), as on a TPU"),
        PrecisionOption(dtype="fp16", supported=False,
                        reason="the CPU runtime stands in for a TPU, which has no fp16 matrix path; fp16 autocast "
                               "runs here but would not on the device this runtime tests for"),
    ]


def compile_options(facts: TpuFacts) -> list[CompileOption]:
    """``openxla``, torch_xla's dynamo backend, first; it needs nothing beyond torch_xla itself."""
    where = "on the TPU" if facts.on_tpu else "on XLA's CPU runtime (checked with torch-xla 2.9.0)"
    return [
        CompileOption(backend="openxla", available=True,
                      reason=f"openxla: torch_xla's dynamo backend, compiling the captured graph with XLA {where}"),
        CompileOption(backend="inductor", available=False,
                      reason="inductor generates Triton/C++ kernels for cuda/cpu tensors, not xla tensors"),
    ]


def env_defaults(facts: TpuFacts, environ: Mapping[str, str]) -> dict[str, str]:
    """What torch_xla must read before its runtime starts: the PJRT device this plugin decided on."""
    return {PJRT_VAR: facts.pjrt_device}
