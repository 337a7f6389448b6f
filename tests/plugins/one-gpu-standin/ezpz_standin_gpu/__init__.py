"""A stand-in for a one-GPU host, for the core suite only: device ``emu`` at an accelerator's priority, one per host.

Built on ``plugins/ezpz-example-emu`` (its real torch device and collectives, its pure policies), with
the three facts that make a host a one-GPU host: the device outranks the cpu (priority 100, as a
discrete accelerator), there is one of it, and it is not shared (a second local rank is refused by the
core's device choice, as on a node with one GPU). Unlike the example plugin, it needs no variable to
appear: installed, it is there in every process, as the GPU is.

Its own facts record keeps the example plugin's hooks from answering for this device, and this one's
from answering for the example's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ezpz import hookimpl

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ezpz.compiling import CompilePolicy
    from ezpz.decisions import AmpPolicy, BackendChoice, LifecycleAction, ProfilingSupport, SetupPlan
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild

FACTS = "ezpz_standin_gpu.facts:StandinFacts"
VENDOR = "standin"
#: A discrete accelerator's priority (the cuda, rocm and xpu plugins use 100): it outranks the built-in cpu (0).
PRIORITY = 100
#: One device on this host, as on a one-GPU machine.
DEVICES = 1


@hookimpl
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport:
    """Offer one unshared ``emu`` device at priority 100, unless the example's ``emu`` is asked for by name."""
    from ezpz.facts import DeviceCandidate, ProbeReport
    from ezpz_example_emu.core import DEVICE_TYPE, read_request, read_torch, rejection
    from ezpz_standin_gpu.facts import StandinFacts

    asked = read_request(environ)
    if asked is not None:  # on a real one-GPU host, EZPZ_DEVICE=emu gets the example plugin's emu: so here too
        return ProbeReport.rejected(DEVICE_TYPE, VENDOR, f"{asked} asks for the example plugin's emu device: the "
                                                         "one-GPU stand-in, which is emu too, steps aside for it")
    emu = read_torch("the ezpz-standin-gpu test plugin being installed")
    why_not = rejection(emu)
    if why_not is not None:
        return ProbeReport.rejected(DEVICE_TYPE, VENDOR, why_not)
    from ezpz_example_emu import device

    try:
        device.register()
    except RuntimeError as err:  # another PrivateUse1 backend owns the key in this process
        return ProbeReport.rejected(DEVICE_TYPE, VENDOR, str(err))
    return ProbeReport.found(DeviceCandidate(
        device_type=DEVICE_TYPE, vendor=VENDOR, count=DEVICES, priority=PRIORITY, shared=False,
        reason=(f"stand-in for a one-GPU host (test plugin ezpz-standin-gpu): {DEVICES} emu device, priority "
                f"{PRIORITY} like a discrete accelerator, one rank per device"),
        names=("emu (one-GPU stand-in)",), details={"torch": emu.torch_version},
        facts=StandinFacts(emu=emu),
    ))


def _ours(device: Any) -> Any:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    return None if facts is None else facts.emu


@hookimpl
def ezpz_select_backend(
    device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None
) -> BackendChoice | None:
    emu = _ours(device)
    if emu is None:
        return None
    from ezpz.policies import choose_backend
    from ezpz_example_emu.core import backend_options

    return choose_backend(backend_options(emu, build), requested=requested, device="emu (one-GPU stand-in)")


@hookimpl
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    emu = _ours(device)
    if emu is None:
        return None
    from ezpz.policies import choose_precision
    from ezpz_example_emu.core import precision_options

    return choose_precision(precision_options(emu), requested=requested, device="emu (one-GPU stand-in)",
                            tf32=False, tf32_reason="TF32 is a CUDA matmul setting; emu runs fp32 on the CPU")


@hookimpl
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    if _ours(device) is None:
        return None
    from ezpz.decisions import ProfilingSupport
    from ezpz_example_emu.plugin import emu_memory_stats

    return ProfilingSupport(activities=("CPU",), marker=None, memory_stats=emu_memory_stats,
                            reason="emu kernels run on the CPU: the CPU activity records them")


@hookimpl
def ezpz_compile_policy(device: DeviceCandidate, build: TorchBuild) -> CompilePolicy | None:
    if _ours(device) is None:
        return None
    from ezpz.compiling import choose_compile
    from ezpz_example_emu.core import compile_options

    return choose_compile(compile_options(build), device="emu (one-GPU stand-in)")


@hookimpl
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """Register ``emuccl`` when it is the chosen backend (``emu`` itself registered in the probe)."""
    if _ours(plan.device.candidate) is None:
        return None
    from ezpz.decisions import LifecycleAction
    from ezpz_example_emu import collectives

    if plan.backend.name == collectives.BACKEND:
        collectives.register_backend()
    return LifecycleAction(reason="one-GPU stand-in: emu registered in the probe; emuccl registered if chosen")
