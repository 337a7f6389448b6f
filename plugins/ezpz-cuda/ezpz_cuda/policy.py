"""Pure NVIDIA policies: facts in, explained decisions out. No torch, no NVML, no environment.

Every threshold here is keyed by compute capability (and, where it matters, the
torch version); the sources are listed in ``docs/vendors/cuda.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from attrs import field, frozen

from ezpz.decisions import BackendOption, PrecisionOption
from ezpz.facts import DeviceCandidate, TorchBuild
from ezpz.plugin_kit import backend_in_build, vendor_then_gloo
from ezpz_cuda.facts import CudaFacts, GpuFacts
from ezpz_cuda.gate import build_rejection  # re-exported: the gate the entry module applies first

__all__ = [
    "BF16_MIN_CC",
    "FP16_MIN_CC",
    "PRIORITY",
    "TENSOR_CORE_MIN_CC",
    "TF32_MIN_CC",
    "VISIBLE_VAR",
    "VisibleDevices",
    "Selection",
    "arch_supports",
    "backend_options",
    "build_rejection",
    "cuda_candidate",
    "device_label",
    "order_notes",
    "parse_visible_devices",
    "precision_options",
    "select_visible",
    "tf32_decision",
    "torch_physical_ids",
    "unsupported_by_build",
    "zero_devices_reason",
]

PRIORITY = 100
VISIBLE_VAR = "CUDA_VISIBLE_DEVICES"
BF16_MIN_CC = (8, 0)  # Ampere: bf16 and TF32 tensor cores
TF32_MIN_CC = (8, 0)
TENSOR_CORE_MIN_CC = (7, 0)  # Volta: first fp16 tensor cores
FP16_MIN_CC = (5, 3)  # native half arithmetic (cuda_fp16.h) from sm_53
LOW_RATE_FP16 = frozenset({(6, 1)})  # GP10x: fp16 arithmetic at a small fraction of the fp32 rate
# Jetson/Tegra integrated GPUs: a cubin for the discrete part of the same major does not run there.
INTEGRATED_CC = frozenset({(5, 3), (6, 2), (7, 2), (8, 7)})


# -- the torch build ---------------------------------------------------------------------


def _arch_code(entry: str) -> tuple[str, tuple[int, int], str] | None:
    """``"sm_90a"`` -> ``("sm", (9, 0), "a")``; ``"compute_120"`` -> ``("compute", (12, 0), "")``."""
    kind, sep, rest = entry.strip().lower().partition("_")
    if not sep or kind not in ("sm", "compute"):
        return None
    suffix = rest[-1] if rest and rest[-1] in "af" else ""
    digits = rest[: len(rest) - len(suffix)]
    if len(digits) < 2 or not digits.isdigit():
        return None
    return kind, (int(digits[:-1]), int(digits[-1])), suffix


def arch_supports(arch_list: Sequence[str], capability: tuple[int, int]) -> bool | None:
    """Whether a torch built for ``arch_list`` has kernels that run on ``capability``.

    A cubin ``sm_XY`` runs on the same major with minor >= Y (not on an
    integrated part unless built for exactly it; ``sm_XYa`` only on X.Y); PTX
    ``compute_XY`` is JIT-compiled for any capability >= X.Y. None when the list
    is unknown (empty).
    """
    codes = [c for c in (_arch_code(a) for a in arch_list) if c is not None]
    if not codes:
        return None
    for kind, code, suffix in codes:
        if kind == "compute":
            if capability >= code:
                return True
        elif suffix == "a" or code in INTEGRATED_CC:
            if capability == code:
                return True
        elif capability[0] == code[0] and capability[1] >= code[1] and (
            capability not in INTEGRATED_CC or capability == code
        ):
            return True
    return False


def unsupported_by_build(facts: CudaFacts) -> str | None:
    """A rejection reason when some visible GPU has no kernels in this torch build, else None."""
    bad = [g for g in facts.gpus if arch_supports(facts.arch_list, g.capability) is False]
    if not bad:
        return None
    which = ", ".join(sorted({g.label for g in bad}))
    return (
        f"torch {facts.build.version} has no kernels for {which}: it was built for "
        f"{' '.join(facts.arch_list)} (torch.cuda.get_arch_list()), so every CUDA op would fail with "
        f"'no kernel image is available'. Install a torch build whose arch list covers {bad[0].sm}, "
        f"or hide the device with {VISIBLE_VAR}"
    )


# -- which devices are visible -----------------------------------------------------------


def _ints(values: Iterable[int]) -> tuple[int, ...]:
    """attrs converter with a typed signature (``converter=tuple`` fails ``mypy --strict``)."""
    return tuple(values)


def _ints_or_strings(values: Iterable[int | str]) -> tuple[int | str, ...]:
    """attrs converter with a typed signature (``converter=tuple`` fails ``mypy --strict``)."""
    return tuple(values)


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    """attrs converter with a typed signature (``converter=tuple`` fails ``mypy --strict``)."""
    return tuple(values)


@frozen
class VisibleDevices:
    """``CUDA_VISIBLE_DEVICES`` parsed the way CUDA and ``torch.cuda`` read it.

    ``restricted`` is False when the variable is unset (all devices visible).
    ``entries`` are ordinals (``int``) or UUID prefixes (``"GPU-..."``/``"MIG-..."``).
    """

    raw: str | None
    restricted: bool
    entries: tuple[int | str, ...] = field(default=(), converter=_ints_or_strings)

    @property
    def none(self) -> bool:
        return self.restricted and not self.entries

    @property
    def mig(self) -> bool:
        return any(isinstance(e, str) and e.startswith("MIG-") for e in self.entries)


def parse_visible_devices(raw: str | None) -> VisibleDevices:
    """Parse ``CUDA_VISIBLE_DEVICES`` by the kit's rules (:mod:`ezpz.plugin_kit.visible`), which are
    ``torch.cuda._parse_visible_devices``'s.

    Unset: everything visible. ``""`` or ``-1``: nothing. Ordinals stop at the
    first negative or non-numeric entry; UUID lists stop at the first entry
    without the ``GPU-``/``MIG-`` prefix; a repeated entry hides every device.
    """
    from ezpz.plugin_kit import parse_visible_devices as parse

    parsed = parse(raw, uuid_prefixes=("GPU-", "MIG-"))
    return VisibleDevices(raw=raw, restricted=parsed.restricted, entries=parsed.entries)


@frozen
class Selection:
    """The physical GPUs (NVML indices) behind ``cuda:0``, ``cuda:1``, ..., with caveats."""

    indices: tuple[int, ...] = field(converter=_ints)
    notes: tuple[str, ...] = field(default=(), converter=_strings)


def select_visible(visible: VisibleDevices, physical: Sequence[GpuFacts]) -> Selection:
    """Map the visible-devices list onto NVML's physical GPUs (torch index -> NVML index).

    As in CUDA, an ordinal past the last GPU, or a UUID prefix that matches no GPU
    or several, ends the list there.
    """
    if not visible.restricted:
        return Selection(indices=range(len(physical)))
    chosen: list[int] = []
    notes: list[str] = []
    for entry in visible.entries:
        if isinstance(entry, int):
            if entry >= len(physical):
                notes.append(f"{VISIBLE_VAR}={visible.raw!r}: ordinal {entry} is past the {len(physical)} GPU(s) "
                             "NVML reports; entries from there on are ignored")
                break
            chosen.append(entry)
            continue
        matches = [i for i, g in enumerate(physical) if g.uuid and g.uuid.startswith(entry)]
        if len(matches) != 1:
            what = "matches no GPU" if not matches else f"is ambiguous ({len(matches)} GPUs match)"
            notes.append(f"{VISIBLE_VAR}={visible.raw!r}: {entry!r} {what}; entries from there on are ignored")
            break
        if matches[0] in chosen:
            return Selection(indices=(), notes=(f"{VISIBLE_VAR}={visible.raw!r} names one GPU twice, "
                                                "which hides every device",))
        chosen.append(matches[0])
    return Selection(indices=chosen, notes=notes)


def torch_physical_ids(visible: VisibleDevices, count: int) -> tuple[str, ...]:
    """Physical ids when only the CUDA runtime could be asked: the visible-devices entries themselves."""
    if visible.restricted:
        return tuple(str(e) for e in visible.entries[:count])
    return tuple(str(i) for i in range(count))


def order_notes(environ: Mapping[str, str], gpus: Sequence[GpuFacts]) -> tuple[str, ...]:
    """Warn when CUDA's default FASTEST_FIRST order may differ from NVML's PCI order."""
    order = environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST").strip().upper()
    if order == "PCI_BUS_ID" or len({(g.name, g.capability) for g in gpus}) <= 1:
        return ()
    return (
        "the GPUs differ and CUDA_DEVICE_ORDER is FASTEST_FIRST (CUDA's default), so cuda:N and the "
        f"{VISIBLE_VAR} ordinals may not follow nvidia-smi's order; set CUDA_DEVICE_ORDER=PCI_BUS_ID "
        "to make the physical ids certain",
    )


def zero_devices_reason(visible: VisibleDevices, probe: str) -> str:
    """The rejection when no device is left to offer."""
    if visible.restricted:
        return f"0 CUDA devices visible ({VISIBLE_VAR}={visible.raw!r})"
    source = "NVML lists no NVIDIA GPU" if probe == "nvml" else "torch.cuda.device_count() is 0"
    return f"0 CUDA devices visible ({source}; is the NVIDIA driver loaded?)"


# -- the candidate -------------------------------------------------------------------------


def _gib(n: int) -> str:
    return f"{n / 2**30:.0f} GiB" if n else "memory unknown"


def device_label(facts: CudaFacts) -> str:
    """How precision errors name the device: the least capable visible GPU, with its capability."""
    weakest = facts.weakest
    if facts.homogeneous:
        return weakest.label
    return f"{weakest.label}, the least capable of {len(facts.gpus)} visible GPUs"


def cuda_candidate(facts: CudaFacts) -> DeviceCandidate:
    """The ``cuda`` candidate for the visible GPUs."""
    gpus = facts.gpus
    if facts.homogeneous:
        g = gpus[0]
        summary = f"{len(gpus)} x {g.name} (compute capability {g.cc}, {_gib(g.total_memory)})"
    else:
        summary = ", ".join(f"{g.name} ({g.cc})" for g in gpus)
    how = (
        "NVML, without creating a CUDA context"
        if facts.probe == "nvml"
        else "torch.cuda.get_device_properties, which initialised CUDA in this process "
        "(install ezpz-cuda[nvml] to probe without it)"
    )
    where = f" after {VISIBLE_VAR}={facts.visible_devices!r}" if facts.visible_devices is not None else ""
    details: dict[str, object] = {
        "compute_capability": ",".join(g.cc for g in gpus),
        "probe": facts.probe,
        "torch_arch_list": " ".join(facts.arch_list) or "unknown",
    }
    uuids = [g.uuid for g in gpus if g.uuid]
    if uuids:
        details["uuids"] = ",".join(uuids)
    if facts.notes:
        details["notes"] = "; ".join(facts.notes)
    archs = sorted({g.sm for g in gpus}, key=lambda s: int(s[3:]))
    return DeviceCandidate(
        device_type="cuda",
        vendor="nvidia",
        reason=f"{summary} visible{where}, found via {how}",
        count=len(gpus),
        priority=PRIORITY,
        names=tuple(g.name for g in gpus),
        arch=",".join(archs),
        total_memory=tuple(g.total_memory for g in gpus),
        physical_ids=facts.physical_ids,
        visible_devices_var=VISIBLE_VAR,
        details=details,
        facts=facts,
    )


# -- backend -------------------------------------------------------------------------------


def backend_options(build: TorchBuild) -> list[BackendOption]:
    """NCCL first, gloo as the fallback, each available only if this torch has it."""
    nccl = backend_in_build(
        build, "nccl", reason="NCCL is NVIDIA's collective library for CUDA tensors (NVLink, InfiniBand, GPUDirect)",
        missing=f"torch {build.version} was built without NCCL (torch.distributed.is_nccl_available() is False; "
        "Windows and macOS wheels never include it)",
    )
    return vendor_then_gloo(build, nccl, gloo_reason="gloo runs broadcast/all_reduce on CUDA tensors by staging "
                            "through host memory: much slower than NCCL and without GPU support for every collective")


# -- precision -----------------------------------------------------------------------------


def precision_options(gpu: GpuFacts, label: str | None = None) -> list[PrecisionOption]:
    """bf16 then fp16 (auto takes the first supported), for ``gpu``'s compute capability.

    ``label`` names the device in the reasons (default ``gpu.label``).
    """
    cc = gpu.capability
    name = label or gpu.label
    if cc >= BF16_MIN_CC:
        bf16 = PrecisionOption(dtype="bf16", supported=True,
                               reason=f"{name} has bf16 tensor cores (compute capability >= 8.0): "
                               "fp32's range, so no grad scaler")
    else:
        bf16 = PrecisionOption(dtype="bf16", supported=False,
                               reason=f"{name} has no native bf16 (needs compute capability >= 8.0, Ampere); "
                               "torch would emulate it slowly")
    if cc >= TENSOR_CORE_MIN_CC:
        fp16_reason = f"{name} has fp16 tensor cores (compute capability >= 7.0)"
    elif cc >= FP16_MIN_CC:
        fp16_reason = (f"{name} has native fp16 arithmetic (compute capability >= 5.3) but no tensor cores "
                       "(those start at 7.0): it saves memory more than time")
        if cc in LOW_RATE_FP16:
            fp16_reason += "; compute capability 6.1 runs fp16 arithmetic at a low rate"
    else:
        fp16_reason = f"{name} has no native fp16 arithmetic (needs compute capability >= 5.3)"
    fp16_ok = cc >= FP16_MIN_CC
    if fp16_ok:
        fp16_reason += "; fp16's narrow range needs a grad scaler"
    fp16 = PrecisionOption(dtype="fp16", supported=fp16_ok, grad_scaler=fp16_ok, reason=fp16_reason)
    return [bf16, fp16]


def tf32_decision(gpu: GpuFacts, build: TorchBuild, requested: str) -> tuple[bool, str]:
    """Whether to let fp32 matmuls and convolutions use TF32 tensor cores, and why."""
    if gpu.capability < TF32_MIN_CC:
        return False, (f"no TF32 tensor cores below compute capability 8.0 ({gpu.label}): "
                       "fp32 matmuls stay full fp32")
    if (requested or "auto").strip().lower() == "fp32":
        return False, ("fp32 was requested, so ezpz leaves TF32 at torch's defaults "
                       "(matmuls full fp32, cuDNN convolutions may use TF32)")
    api = "torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32"
    if build.at_least(2, 9):
        api += (" (from torch 2.9 the legacy spelling of fp32_precision='tf32'; torch refuses to read the flags "
                "once code mixes the two APIs)")
    return True, (f"{gpu.label} has TF32 tensor cores (compute capability >= 8.0): fp32 matmuls and convolutions "
                  "run with a 10-bit mantissa at tensor-core speed; torch leaves matmul TF32 off by default "
                  f"(since 1.12), so ezpz turns on {api}")
