"""ezpz plugin for Google TPUs through torch_xla: device type ``xla``, collectives ``xla``.

Written only against ezpz's public plugin kit, as a third party would.

* ``ezpz_probe_devices``: a TPU VM's chips (``PJRT_DEVICE=TPU``, ``TPU_ACCELERATOR_TYPE`` or libtpu
  installed), priority 100; without a TPU, XLA's CPU runtime, priority -10 (below cpu): a testing device
  that only ``EZPZ_DEVICE=xla`` chooses. The probe reads the environment only: it never imports torch_xla.
* ``ezpz_select_backend``: ``xla`` (torch_xla's ProcessGroupXla) on TPU, gloo otherwise.
* ``ezpz_amp_policy``: bf16.
* ``ezpz_profiling``: ranges through ``torch_xla.debug.profiler.Trace`` (torch_xla's own trace annotations).
* ``ezpz_compile_policy``: the ``openxla`` dynamo backend.
* ``ezpz_step_boundary``: ``torch_xla.sync()``, which ends the lazily built graph of a step; torch_xla's
  compile counter and the step's HLO (to name a graph that recompiles every step); one host transfer for
  ``rt.save()`` (:mod:`ezpz_tpu.lazy_steps`).
* ``ezpz_before_init``: ``PJRT_DEVICE``, as an environment default, then the import of torch_xla
  (``LifecycleAction.then``: the core runs it once the variable is set).
* ``ezpz_failure_signatures``: PJRT/XLA failure texts.

Ordering: ``import torch_xla`` picks the PJRT runtime at import time (``runtime._maybe_select_default_device``),
so ``PJRT_DEVICE`` must be in the environment before torch_xla is first imported. No hook here imports
torch_xla: ``ezpz_before_init`` hands the core the import as ``LifecycleAction.then``, which the core
runs right after it set the environment defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ezpz import hookimpl

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ezpz.compiling import CompilePolicy
    from ezpz.cuda_answers import CudaAnswers
    from ezpz.decisions import AmpPolicy, BackendChoice, LifecycleAction, MeshSupport, ProfilingSupport, SetupPlan, StepBoundary
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild
    from ezpz.failures.signatures import FailureSignature

__all__ = [
    "ezpz_amp_policy",
    "ezpz_before_init",
    "ezpz_compile_policy",
    "ezpz_failure_signatures",
    "ezpz_mesh_support",
    "ezpz_probe_devices",
    "ezpz_profiling",
    "ezpz_select_backend",
    "ezpz_step_boundary",
]

#: This plugin's facts record, by path: :func:`ezpz.plugin_kit.facts_if_ours` never imports it to ask.
FACTS = "ezpz_tpu.facts:TpuFacts"


@hookimpl
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport:
    """Offer the xla device (TPU chips, or XLA's CPU runtime as a testing device); otherwise say why not."""
    from ezpz.facts import ProbeReport
    from ezpz_tpu.probe import DEVICE_TYPE, VENDOR, read_environment

    found = read_environment(environ)  # without torch_xla: one package lookup, no facts or policy imported
    if found is None:
        return ProbeReport.rejected(DEVICE_TYPE, VENDOR, "torch_xla not installed (pip install torch-xla, with "
                                                         "the torch version it was built for)")
    if isinstance(found, str):
        return ProbeReport.rejected(DEVICE_TYPE, VENDOR, found)
    from ezpz_tpu.policy import tpu_candidate

    return ProbeReport.found(tpu_candidate(found))


@hookimpl
def ezpz_select_backend(
    device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None
) -> BackendChoice | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.policies import choose_backend
    from ezpz_tpu.policy import backend_options

    return choose_backend(backend_options(facts, build), requested=requested, device=facts.label)


@hookimpl
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.policies import choose_precision
    from ezpz_tpu.policy import precision_options

    return choose_precision(precision_options(facts), requested=requested, device=facts.label, tf32=False,
                            tf32_reason="TF32 is a CUDA matmul setting; XLA chooses its own matmul precision")


class _XlaTraces:
    """Named ranges as torch_xla's own trace annotations (``torch_xla.debug.profiler.Trace``), nested."""

    def __init__(self) -> None:
        self._open: list[Any] = []

    def push(self, name: str) -> None:
        import torch_xla.debug.profiler as xp  # imported on first use: after PJRT_DEVICE is set

        trace = xp.Trace(name)
        trace.__enter__()
        self._open.append(trace)

    def pop(self) -> None:
        if self._open:
            self._open.pop().__exit__(None, None, None)


def xla_memory_stats(device: Any) -> dict[str, float]:
    """torch_xla's memory counters for ``device``; empty where the runtime keeps none (XLA's CPU runtime)."""
    import torch_xla.core.xla_model as xm

    try:
        info = xm.get_memory_info(device)
    except RuntimeError:  # CPU runtime: "UNIMPLEMENTED: GetAllocatorStats is not supported"
        return {}
    return {f"xla_{k}": float(v) for k, v in dict(info).items() if isinstance(v, (int, float))}


@hookimpl
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None
    from ezpz.decisions import ProfilingSupport

    traces = _XlaTraces()
    return ProfilingSupport(
        activities=("CPU",), marker="torch_xla.debug.profiler.Trace", range_push=traces.push, range_pop=traces.pop,
        memory_stats=xla_memory_stats,
        reason="torch.profiler records the host side (torch has no XLA profiler activity); ranges are "
               "torch_xla.debug.profiler.Trace annotations, which torch_xla's own trace "
               "(xp.start_server + xp.trace) shows on the device timeline",
    )


@hookimpl
def ezpz_compile_policy(device: DeviceCandidate, build: TorchBuild) -> CompilePolicy | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.compiling import choose_compile
    from ezpz_tpu.policy import compile_options

    return choose_compile(compile_options(facts), device=facts.label)


def xla_sync() -> None:
    """``torch_xla.sync()``: end the step's lazily built graph and run it (imports torch_xla on first call)."""
    import torch_xla

    torch_xla.sync()


def xla_wait() -> None:
    """``xm.wait_device_ops()``: block until the device has run everything queued (``Runtime.synchronize()``)."""
    import torch_xla.core.xla_model as xm

    xm.wait_device_ops()


@hookimpl
def ezpz_step_boundary(device: DeviceCandidate, build: TorchBuild) -> StepBoundary | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.decisions import StepBoundary
    from ezpz_tpu.lazy_steps import XlaCompiles, graph_lines, to_host

    return StepBoundary(
        name="torch_xla.sync()", mark=xla_sync, wait=xla_wait, compiles=XlaCompiles(), graph_text=graph_lines,
        to_host=to_host,
        reason=f"{facts.label} is lazy: ops build a graph until torch_xla.sync() compiles and runs it "
               "(torch_xla is imported on the first step, after PJRT_DEVICE is set); torch_xla's compile "
               "counter (UncachedCompile, CompileTime) tells a step that compiles anew every time",
    )


#: Where torch_xla documents its sharded data parallelism (its own FSDP, and FSDPv2 over SPMD).
SPMD_SOURCES = ("https://docs.pytorch.org/xla/release/r2.8/perf/fsdp_spmd.html",
                "https://docs.pytorch.org/xla/release/r2.7/perf/spmd_basic.html")


@hookimpl
def ezpz_mesh_support(device: DeviceCandidate, build: TorchBuild, backend: str) -> MeshSupport | None:
    """FSDP2 is not XLA's way to shard: rt.shard refuses, naming torch_xla's SPMD (FSDPv2)."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.decisions import MeshSupport

    return MeshSupport(
        fsdp2_unavailable=("torch's fully_shard runs on eager devices; torch_xla documents its own sharded data "
                           "parallelism for XLA devices (XlaFullyShardedDataParallel, and FSDPv2 over SPMD), not FSDP2"),
        alternative=("torch_xla's SPMD: FSDPv2 (torch_xla.experimental.spmd_fully_sharded_data_parallel."
                     "SpmdFullyShardedDataParallel) over a torch_xla.distributed.spmd Mesh with an 'fsdp' axis"),
        sources=SPMD_SOURCES,
        reason=f"{facts.label} is an XLA device: ops are traced into graphs that torch_xla's SPMD partitioner shards")


@hookimpl
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """``PJRT_DEVICE`` before torch_xla's first import; the xla backend's registration when it was chosen."""
    import os
    import sys

    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(plan.device.candidate, FACTS)
    if facts is None:
        return None
    from ezpz.decisions import LifecycleAction
    from ezpz_tpu.policy import env_defaults

    reason = (f"PJRT_DEVICE={facts.pjrt_device} for torch_xla, whose import picks its runtime from it "
              "(set before torch_xla is first imported)")
    if "torch_xla" in sys.modules and "PJRT_DEVICE" not in os.environ:
        reason += "; torch_xla was already imported, so it chose its runtime itself"
    reason += "; then imports torch_xla (its runtime and the xla tensor type)"
    if plan.backend.name == "xla":
        reason += " and torch_xla.distributed.xla_backend (registers the xla process-group backend)"
    return LifecycleAction(reason=reason, env_defaults=env_defaults(facts, os.environ),
                           then=import_xla_backend if plan.backend.name == "xla" else import_torch_xla)


def import_torch_xla() -> None:
    """Import torch_xla once ``PJRT_DEVICE`` is set: it registers the xla device type with torch."""
    import torch_xla  # noqa: F401


def import_xla_backend() -> None:
    """Import torch_xla and register its ``xla`` process-group backend with torch.distributed."""
    import torch_xla.distributed.xla_backend  # noqa: F401


@hookimpl
def ezpz_failure_signatures() -> list[FailureSignature]:
    """PJRT/XLA failure texts (:data:`ezpz_tpu.failures.SIGNATURES`), with their sources."""
    from ezpz.failures.signatures import FailureSignature
    from ezpz_tpu.failures import SIGNATURES

    return [FailureSignature(pattern=p, kind=k, reason=r, blames_host=b, source=src) for p, k, r, b, src in SIGNATURES]


@hookimpl
def ezpz_cuda_answers(device: DeviceCandidate, build: TorchBuild, backend: str) -> CudaAnswers | None:
    """What an XLA device answers a script written for CUDA: a lazy device with no CUDA features."""
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None
    from ezpz.cuda_answers import CudaAnswers

    return CudaAnswers(
        reason="XLA records a graph and runs it at the step boundary (torch_xla.sync() after optimizer.step()): "
               "no CUDA compute capability, streams, events, CUDA graphs or pinned host memory; the all-reduce "
               "average is taken as SUM then divide, which every XLA backend can do; torch's fused optimizer "
               "kernels do not run on xla tensors (torch.optim refuses fused=True there), so optimizers take "
               "their default implementation",
        properties={"name": device.names[0] if device.names else "xla"},
        streams=False, events=False, graphs=False, pinned_memory=False, missing_reduce_ops=("AVG",),
        fused_optimizers=False,
    )
