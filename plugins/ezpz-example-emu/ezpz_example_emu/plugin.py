"""Example ezpz plugin for a PrivateUse1 device emulated on the CPU: device type ``emu``, collectives ``emuccl``.

The worked example of a third-party accelerator joining ezpz end to end. Unlike
``ezpz-example-hpu``, whose device is only simulated for planning, ``emu`` is a
real torch device: :mod:`ezpz_example_emu.device` registers it with torch
(PrivateUse1, kernels through ``torch.library``) and
:mod:`ezpz_example_emu.collectives` a torch.distributed backend for it, so
``setup()``, a portable script, DDP, autocast, GradScaler, the profiler,
``torch.compile`` and checkpoints all run on it.

This module, the one the entry point names, holds only the hooks, each thin
glue to :mod:`ezpz_example_emu.core` (facts, probe, pure policies):

1. ``ezpz_probe_devices``: offers ``emu`` only when asked for, by
   ``EZPZ_DEVICE=emu`` or ``EZPZ_EXAMPLE_EMU=1``, and then with priority -10,
   below the built-in cpu: a teaching device never wins the default choice, and
   without either variable the plugin says nothing, so ``ezpz doctor`` looks as
   it did before it was installed;
2. ``ezpz_select_backend``: ``emuccl``;
3. ``ezpz_amp_policy``: bf16 (fp16 with a grad scaler on request);
4. ``ezpz_profiling``: CPU activity, ezpz's ranges, the device's allocation counters;
5. ``ezpz_compile_policy``: ``aot_eager``; Inductor refused, with why;
6. ``ezpz_mesh_support``: the reduce operations emuccl lacks (gloo's ``PREMUL_SUM``, and any
   ``EMUCCL_REFUSE_REDUCE_OPS`` names), so ``rt.shard`` reduces with SUM there;
7. ``ezpz_before_init``: registers the ``emuccl`` backend with torch.distributed.

No ``ezpz_step_boundary``: ``emu`` is eager, every kernel runs when called.

Why the device registers in the probe: the core asks torch, after every probe
and before a device is chosen, whether it can make each offered device type,
and refuses one it cannot (a real vendor's device type, ``npu``, likewise
exists only once its extension is imported). So the probe registers ``emu``,
but only when asked for by name: without the variables above it changes
nothing, and ``ezpz doctor`` with them registers it in the doctor's own
process only. The collective backend registers in ``ezpz_before_init``, for the
chosen device only; the core checks it is known right after. Registration is
process-wide torch state: forked data-loader workers inherit it; a spawned process that receives ``emu`` tensors, or a
script that calls ``torch.load`` on an ``emu`` checkpoint without ``setup()``,
calls :func:`ezpz_example_emu.device.register` first.

``import ezpz`` imports this module on every rank: it imports only the
standard library and ``ezpz.hookimpl`` at module level; torch, attrs and the
device are imported inside the hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ezpz import hookimpl

if TYPE_CHECKING:  # names for the annotations only: with `from __future__ import annotations` they stay strings
    from collections.abc import Callable, Mapping

    from ezpz.compiling import CompilePolicy
    from ezpz.cuda_answers import CudaAnswers
    from ezpz.decisions import AmpPolicy, BackendChoice, LifecycleAction, MeshSupport, ProfilingSupport, SetupPlan
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild

__all__ = [
    "emu_memory_stats",
    "ezpz_amp_policy",
    "ezpz_before_init",
    "ezpz_compile_policy",
    "ezpz_mesh_support",
    "ezpz_probe_devices",
    "ezpz_profiling",
    "ezpz_select_backend",
]

#: This plugin's facts record, by path: :func:`ezpz.plugin_kit.facts_if_ours` never imports it to ask.
FACTS = "ezpz_example_emu.core:EmuFacts"


#: The two variables that ask for ``emu`` (:func:`ezpz_example_emu.core.read_request` reads them; the plugin's
#: tests check these names against core's). Without either, the probe answers before importing anything.
_ASKED_BY = ("EZPZ_DEVICE", "EZPZ_EXAMPLE_EMU")


def _maybe_asked(environ: Mapping[str, str]) -> bool:
    """False only when neither variable could ask for ``emu``: the probe's answer is then None, at no cost.

    A plugin that is installed but not chosen costs what asking it costs: this check, not an import of
    :mod:`ezpz_example_emu.core` (its attrs record, ezpz's policies) on every ``setup()``.
    """
    device_var, offer_var = _ASKED_BY
    return environ.get(device_var, "").strip().lower().partition(":")[0] == "emu" or offer_var in environ


@hookimpl
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport | None:
    """Offer ``emu`` when asked for by name; otherwise say nothing at all."""
    if not _maybe_asked(environ):
        return None  # what core.read_request says here; a set EZPZ_EXAMPLE_EMU, any value, is parsed (and checked) there
    from ezpz_example_emu.core import DEVICE_TYPE, VENDOR, emu_candidate, read_request, read_torch, rejection

    requested_by = read_request(environ)
    if requested_by is None:
        return None  # invisible unless asked for: doctor, plan() and device choice are as without this plugin
    from ezpz.facts import ProbeReport

    import attrs

    facts = attrs.evolve(read_torch(requested_by), refused_reduce_ops=_read_refused(environ))
    why_not = rejection(facts)
    if why_not is not None:
        return ProbeReport.rejected(DEVICE_TYPE, VENDOR, why_not)
    from ezpz_example_emu import device

    try:
        device.register()  # like importing a vendor's torch extension: torch knows "emu" from here on
    except RuntimeError as err:  # another PrivateUse1 backend owns the key in this process
        return ProbeReport.rejected(DEVICE_TYPE, VENDOR, str(err))
    return ProbeReport.found(emu_candidate(facts))


@hookimpl
def ezpz_select_backend(
    device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None
) -> BackendChoice | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)  # imports nothing: another vendor's device costs nothing here
    if facts is None:
        return None
    from ezpz.policies import choose_backend
    from ezpz_example_emu.core import backend_options, device_label

    return choose_backend(backend_options(facts, build), requested=requested, device=device_label(facts))


@hookimpl
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.policies import choose_precision
    from ezpz_example_emu.core import device_label, precision_options

    return choose_precision(precision_options(facts), requested=requested, device=device_label(facts), tf32=False,
                            tf32_reason="TF32 is a CUDA matmul setting; emu runs fp32 matmuls on the CPU")


def emu_memory_stats(device: Any) -> dict[str, float]:
    """The device's allocation counters (``torch.emu.memory_stats()``), as floats for ``Runtime.memory_stats()``."""
    import torch

    return {f"emu_{k}": float(v) for k, v in torch.get_device_module("emu").memory_stats(device).items()}


@hookimpl
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None
    from ezpz.decisions import ProfilingSupport

    return ProfilingSupport(
        activities=("CPU",), marker=None, memory_stats=emu_memory_stats,
        reason="emu kernels run on the CPU, so the CPU activity records them (as aten ops under the Python "
               "fallback); no device tracer; Runtime.range() records torch ranges under the profiler",
    )


@hookimpl
def ezpz_compile_policy(device: DeviceCandidate, build: TorchBuild) -> CompilePolicy | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.compiling import choose_compile
    from ezpz_example_emu.core import compile_options, device_label

    return choose_compile(compile_options(build), device=device_label(facts))


@hookimpl
def ezpz_mesh_support(device: DeviceCandidate, build: TorchBuild, backend: str) -> MeshSupport | None:
    """The reduce operations emuccl lacks (gloo's, and ``EMUCCL_REFUSE_REDUCE_OPS``): ``rt.shard`` reduces with SUM."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz_example_emu.core import BACKEND, mesh_support

    return mesh_support(facts, build) if backend == BACKEND else None


@hookimpl
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """Register ``emuccl`` with torch.distributed for the chosen device (``emu`` itself registered in the probe)."""
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(plan.device.candidate, FACTS) is None:
        return None
    from ezpz.decisions import LifecycleAction
    from ezpz_example_emu import collectives, device

    device.register()
    said = "registered torch device 'emu' (PrivateUse1; Python kernels on CPU memory, autocast kernels)"
    if plan.backend.name == collectives.BACKEND:
        collectives.register_backend()
        said += f" and the {collectives.BACKEND} process-group backend (gloo on the emu tensors' CPU memory)"
    moved, undo = keep_shared_parameters_on_move()
    return LifecycleAction(reason=f"{said}; {moved}", undo=undo)


def keep_shared_parameters_on_move() -> tuple[str, Callable[[], None] | None]:
    """Make ``Module.to`` move parameters in place, so parameters shared by two modules stay shared.

    torch replaces a parameter in place only between tensor types it can shallow-copy (CPU, CUDA, XPU ...);
    for a PrivateUse1 tensor it makes a new ``Parameter`` per module, so ``module.to('emu')`` unties weights
    tied across modules (an embedding and its output layer). torch's swap mode keeps each parameter object.
    Returns what was done, and how ``teardown()`` turns the mode off again (None: it was on already).
    """
    import torch

    if torch.__future__.get_swap_module_params_on_conversion():
        return "Module.to already swaps parameters in place (torch.__future__), so tied weights stay tied", None
    torch.__future__.set_swap_module_params_on_conversion(True)
    return ("Module.to swaps parameters in place (torch.__future__.set_swap_module_params_on_conversion(True), "
            "until teardown()): otherwise moving a model to emu makes a new Parameter per module and weights tied "
            "across modules come apart"), _swap_mode_off


def _swap_mode_off() -> None:
    import torch

    torch.__future__.set_swap_module_params_on_conversion(False)


@hookimpl
def ezpz_cuda_answers(device: DeviceCandidate, build: TorchBuild, backend: str) -> CudaAnswers | None:
    """What emu answers a script written for CUDA: no capability, streams, events, graphs or pinned memory;
    emuccl runs gloo underneath, so no ``ReduceOp.AVG``."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.cuda_answers import CudaAnswers

    return CudaAnswers(
        reason="emu keeps its tensors in CPU memory and runs kernels in order on the host: no CUDA compute "
               "capability, streams, events, graphs or pinned host memory (torch.emu has none of them); "
               f"{backend} reduces through gloo, which has no ReduceOp.AVG",
        properties={"name": "emu (example device emulated on the CPU)"},
        streams=False, events=False, graphs=False, pinned_memory=False, missing_reduce_ops=("AVG",),
    )


def _read_refused(environ: Mapping[str, str]) -> frozenset[str]:
    """What ``EMUCCL_REFUSE_REDUCE_OPS`` has emuccl refuse; a name that is no ``ReduceOp`` raises ConfigError."""
    from ezpz.errors import ConfigError

    from ezpz_example_emu.collectives import REFUSE_VAR, refused_reduce_ops

    try:
        return refused_reduce_ops(environ)
    except ValueError as err:
        raise ConfigError(name=REFUSE_VAR, value=environ.get(REFUSE_VAR), expected="ReduceOp names, comma-separated",
                          fix=f"{err}") from None
