"""The example plugin's knowledge of the ``emu`` device: facts, probe and pure policies.

:mod:`ezpz_example_emu.plugin` (the module the entry point names) holds only
the hooks and imports this module inside them; :mod:`ezpz_example_emu.device`
is the device itself and is imported only when ``setup()`` has chosen it.

Read it in three parts: the frozen facts the probe records, the probe (the
only code here that looks at the world), and the pure functions of the facts
that the hooks turn into answers.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen

from ezpz.compiling import CompileOption
from ezpz.decisions import BackendOption, MeshSupport, PrecisionOption
from ezpz.errors import ConfigError
from ezpz.facts import DeviceCandidate, TorchBuild
from ezpz.plugin_kit import parse_bool

__all__ = [
    "BACKEND",
    "DEVICE_TYPE",
    "OFFER_VAR",
    "PRIORITY",
    "VENDOR",
    "EmuFacts",
    "backend_options",
    "compile_options",
    "emu_candidate",
    "mesh_support",
    "precision_options",
    "read_request",
    "read_torch",
]

DEVICE_TYPE = "emu"
VENDOR = "example"
BACKEND = "emuccl"
OFFER_VAR = "EZPZ_EXAMPLE_EMU"

# Below the built-in cpu (0): a teaching device never wins the default choice. Asked for by name
# (EZPZ_DEVICE=emu), it is chosen because it was requested, and the trace says so.
PRIORITY = -10

# torch's Python-side PrivateUse1 device guard (torch/csrc/acc/Module.cpp, torch 2.13) reports one
# device, and the autograd engine keeps one ready queue per device index, so a backward pass on
# emu:1 fails. Each process therefore has one emu device, emu:0, shared like cpu: no per-rank index.
DEVICES_PER_PROCESS = 1


# -- facts: what the probe saw, frozen -------------------------------------------------------------


@frozen(kw_only=True)
class EmuFacts:
    """What the later hooks need to know, recorded once by the probe; tests build these directly."""

    requested_by: str
    """The variable that asked for the device (``EZPZ_DEVICE=emu`` or ``EZPZ_EXAMPLE_EMU=1``)."""
    torch_version: str
    python_backend: bool
    """Whether this torch can take a PrivateUse1 backend written in Python (``torch._C._acc``)."""
    privateuse1_owner: str = ""
    """Another backend that already holds torch's PrivateUse1 key in this process, if any."""
    refused_reduce_ops: frozenset[str] = frozenset()
    """The ``ReduceOp`` names emuccl is set to refuse (``EMUCCL_REFUSE_REDUCE_OPS``), as oneCCL/XCCL does."""


# -- probing: the only code that looks at the world --------------------------------------------------


def read_request(environ: Mapping[str, str]) -> str | None:
    """Which variable asks for ``emu`` (``EZPZ_DEVICE=emu[:N]`` or ``EZPZ_EXAMPLE_EMU=1``), or None: stay invisible.

    A malformed ``EZPZ_EXAMPLE_EMU`` raises :class:`~ezpz.errors.ConfigError` naming it.
    """
    device = environ.get("EZPZ_DEVICE", "").strip().lower()
    if device.partition(":")[0] == DEVICE_TYPE:
        return f"EZPZ_DEVICE={environ['EZPZ_DEVICE'].strip()}"
    if parse_bool(environ, OFFER_VAR, default=False):
        return f"{OFFER_VAR}={environ[OFFER_VAR].strip()}"
    return None


def read_torch(requested_by: str) -> EmuFacts:
    """Ask the installed torch whether it can host the device. Imports torch; registers nothing."""
    import torch

    owner = ""
    python_backend = hasattr(torch._C, "_acc") and hasattr(torch.utils, "backend_registration")
    if python_backend:
        name = torch._C._get_privateuse1_backend_name()
        owner = "" if name in ("privateuseone", DEVICE_TYPE) else name
    return EmuFacts(requested_by=requested_by, torch_version=torch.__version__.split("+")[0],
                    python_backend=python_backend, privateuse1_owner=owner)


def rejection(facts: EmuFacts) -> str | None:
    """Why this torch cannot host ``emu`` in this process, or None."""
    if not facts.python_backend:
        return (f"torch {facts.torch_version} has no Python PrivateUse1 backend support "
                "(torch._C._acc, torch.utils.backend_registration): install torch 2.13")
    if facts.privateuse1_owner:
        return (f"torch's PrivateUse1 key is already the {facts.privateuse1_owner!r} backend in this process "
                "(one out-of-tree backend per process)")
    return None


# -- pure functions of the facts: the plugin's knowledge, unit-testable anywhere ---------------------------


def emu_candidate(facts: EmuFacts) -> DeviceCandidate:
    """The device this plugin offers, with a reason the user can read."""
    return DeviceCandidate(
        device_type=DEVICE_TYPE, vendor=VENDOR, count=DEVICES_PER_PROCESS, priority=PRIORITY, shared=True,
        reason=(f"emulated PrivateUse1 device on CPU memory, offered because {facts.requested_by} "
                f"(priority {PRIORITY}, below cpu: chosen only when asked for by name); one emu device per "
                "process, as torch's Python device guard reports one"),
        names=("emu (PrivateUse1 emulated on the CPU)",),
        details={"torch": facts.torch_version, "kernels": "Python (torch.library), run on CPU aliases"},
        facts=facts,  # handed back to this plugin's later hooks
    )


def backend_options(facts: EmuFacts, build: TorchBuild) -> list[BackendOption]:
    """``emuccl`` (gloo underneath, on CPU aliases of emu tensors); plain gloo cannot take emu tensors."""
    gloo_built = build.distributed and "gloo" in build.distributed_backends
    emuccl = BackendOption(
        name=BACKEND, available=gloo_built,
        reason=("the emu device's collectives: registered for cpu and emu tensors just before the process group "
                "is created; each collective runs gloo on the CPU memory behind the emu tensors")
        if gloo_built else f"emuccl stages through gloo, and torch {build.version} was built without gloo")
    gloo = BackendOption(name="gloo", available=False,
                         reason="gloo takes cpu tensors only; collectives on emu tensors need emuccl")
    return [emuccl, gloo]


def precision_options(facts: EmuFacts) -> list[PrecisionOption]:
    """bf16 and fp16 autocast: the device's AutocastPrivateUse1 kernels really cast (to CPU kernels' dtypes)."""
    return [
        PrecisionOption(dtype="bf16", supported=True,
                        reason="the emu autocast kernels cast matmuls and convolutions to bf16 and run them with "
                               "the CPU's bf16 kernels (emulated: no speed-up, the rounding is real)"),
        PrecisionOption(dtype="fp16", supported=True, grad_scaler=True,
                        reason="fp16 autocast through the same kernels; GradScaler's unscale and update run "
                               "on the CPU kernels"),
    ]


def compile_options(build: TorchBuild) -> list[CompileOption]:
    """``aot_eager`` (traced, then run on the emu kernels); Inductor has no code generator for emu."""
    return [
        CompileOption(backend="inductor", available=False,
                      reason="Inductor generates code per device type and has no backend registered for emu "
                             "(a vendor registers one with torch._inductor.codegen.common.register_backend_for_device)"),
        CompileOption(backend="aot_eager", available=True,
                      reason="TorchDynamo and AOTAutograd trace the model; the captured graph runs on the "
                             "emu kernels"),
    ]


def mesh_support(facts: EmuFacts, build: TorchBuild) -> MeshSupport:
    """torch's mesh groups; the reduce operations emuccl lacks: gloo's (it runs through gloo), and those refused."""
    from ezpz.plugin_kit import GLOO_REDUCE_SOURCES, gloo_unsupported_reduce_ops

    ops, why = gloo_unsupported_reduce_ops(build)
    if facts.refused_reduce_ops:
        why += (f"; EMUCCL_REFUSE_REDUCE_OPS={','.join(sorted(facts.refused_reduce_ops))} has emuccl raise for "
                f"{' and '.join(sorted(facts.refused_reduce_ops))}, as oneCCL/XCCL does")
    return MeshSupport(reason=f"{BACKEND}: torch's own mesh groups, made of gloo groups underneath",
                       unsupported_reduce_ops=ops | facts.refused_reduce_ops,
                       reduce_ops_reason=f"{BACKEND} runs its collectives through gloo: {why}",
                       sources=GLOO_REDUCE_SOURCES)


def device_label(facts: EmuFacts) -> str:
    """How the device is named in reasons and errors."""
    return "emu (emulated PrivateUse1)"
