"""Pure ROCm policies: recorded facts in, explained decisions out. No torch, no amdsmi, no os.environ.

Every vendor fact here carries the public source it came from; see
``docs/vendors/rocm.md`` for the same table in prose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attrs import frozen

from ezpz.decisions import BackendOption, LifecycleAction, PrecisionOption
from ezpz.errors import UnavailableError
from ezpz.facts import DeviceCandidate, TorchBuild
from ezpz.plugin_kit import backend_in_build, parse_bool, parse_visible_devices, vendor_then_gloo
from ezpz_rocm.facts import RocmFacts, RocmGpu, VisibleDevices, hip_release
from ezpz_rocm.gate import NOT_ROCM  # re-exported: the gate the entry module applies first

__all__ = [
    "ARCHS",
    "ArchInfo",
    "NOT_ROCM",
    "PRIORITY",
    "TF32_REASON",
    "TUNABLEOP_MIN_ROCM",
    "TUNABLEOP_VAR",
    "arch_info",
    "backend_options",
    "device_label",
    "precision_options",
    "resolve_visible",
    "rocm_candidate",
    "tunableop_action",
    "tunableop_requested",
]

PRIORITY = 100

# Sources, cited once and referenced per table row.
SRC_PYTORCH_COMPAT = "https://rocm.docs.amd.com/en/latest/compatibility/ml-compatibility/pytorch-compatibility.html"
SRC_GPU_SPECS = "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html"
SRC_LAB_NOTES = "https://gpuopen.com/learn/amd-lab-notes/amd-lab-notes-matrix-cores-readme/"
SRC_LLVM_MFMA_BF16 = "https://reviews.llvm.org/D121956"
SRC_LLVM_AMDGPU = "https://llvm.org/docs/AMDGPUUsage.html"
SRC_CDNA3_ISA = (
    "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/instruction-set-architectures/"
    "amd-instinct-mi300-cdna3-instruction-set-architecture.pdf"
)
SRC_CDNA4_ISA = (
    "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/instruction-set-architectures/"
    "amd-instinct-cdna4-instruction-set-architecture.pdf"
)
SRC_RDNA4_MATRIX = "https://gpuopen.com/learn/using_matrix_core_amd_rdna4/"
SRC_RDNA3_WMMA = "https://gpuopen.com/learn/wmma_on_rdna3/"

TF32_REASON = (
    "TF32 stays off on ROCm: torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 "
    f"are not supported on ROCm (ROCm PyTorch compatibility table, {SRC_PYTORCH_COMPAT})"
)

TUNABLEOP_VAR = "EZPZ_ROCM_TUNABLEOP"
TUNABLEOP_ENV = "PYTORCH_TUNABLEOP_ENABLED"
TUNABLEOP_MIN_ROCM = (5, 4)


@frozen(kw_only=True)
class ArchInfo:
    """What ezpz-rocm knows about one GPU architecture (``gcnArchName`` without feature suffixes)."""

    arch: str
    family: str
    products: str
    bf16: bool
    why: str
    source: str


def _row(arch: str, family: str, products: str, bf16: bool, why: str, source: str) -> tuple[str, ArchInfo]:
    return arch, ArchInfo(arch=arch, family=family, products=products, bf16=bf16, why=why, source=source)


_CDNA3_WHY = "CDNA3 matrix cores run bf16 MFMA (V_MFMA_F32_*_BF16) at the fp16 rate"
_RDNA2_WHY = "RDNA2 has no matrix (WMMA/MFMA) units and no bf16 matrix throughput, so bf16 would be slow emulation"
_RDNA3_WHY = "RDNA3 WMMA runs bf16 at the fp16 rate (512 FLOPs/clock/CU on the RX 7900 XTX)"

ARCHS: Mapping[str, ArchInfo] = dict(
    [
        _row("gfx906", "GCN5 (Vega 20)", "Instinct MI50/MI60, Radeon VII", False,
             "GCN5 predates matrix cores (MFMA arrived with CDNA/gfx908) and has no bf16 dot or matrix instructions",
             f"{SRC_LLVM_AMDGPU} ; {SRC_LAB_NOTES}"),
        _row("gfx908", "CDNA", "Instinct MI100", True,
             "CDNA matrix cores run bf16 MFMA, at half the fp16 rate (512 vs 1024 FLOPs/clock/CU); "
             "bf16 is still preferred for its range (no grad scaler); set EZPZ_PRECISION=fp16 for peak matrix throughput",
             f"{SRC_LAB_NOTES} ; {SRC_LLVM_MFMA_BF16}"),
        _row("gfx90a", "CDNA2", "Instinct MI210/MI250/MI250X (each MI250/MI250X card is 2 GCDs)", True,
             "CDNA2 matrix cores run bf16 MFMA at the fp16 rate (1024 FLOPs/clock/CU)",
             f"{SRC_LAB_NOTES} ; {SRC_LLVM_MFMA_BF16}"),
        _row("gfx940", "CDNA3", "Instinct MI300 (early)", True, _CDNA3_WHY, f"{SRC_CDNA3_ISA} ; {SRC_LLVM_AMDGPU}"),
        _row("gfx941", "CDNA3", "Instinct MI300 (early)", True, _CDNA3_WHY, f"{SRC_CDNA3_ISA} ; {SRC_LLVM_AMDGPU}"),
        _row("gfx942", "CDNA3", "Instinct MI300X/MI300A/MI325X", True, _CDNA3_WHY, f"{SRC_CDNA3_ISA} ; {SRC_GPU_SPECS}"),
        _row("gfx950", "CDNA4", "Instinct MI350X/MI355X", True,
             "CDNA4 matrix cores run bf16 MFMA", f"{SRC_CDNA4_ISA} ; {SRC_GPU_SPECS}"),
        _row("gfx1030", "RDNA2", "Radeon RX 6800/6800 XT/6900 XT/6950 XT, Radeon PRO W6800", False, _RDNA2_WHY,
             f"{SRC_RDNA4_MATRIX} (BF16 N/A on the RX 6950 XT) ; {SRC_GPU_SPECS}"),
        _row("gfx1031", "RDNA2", "Radeon RX 6700 XT/6750 XT", False, _RDNA2_WHY, f"{SRC_RDNA4_MATRIX} ; {SRC_LLVM_AMDGPU}"),
        _row("gfx1032", "RDNA2", "Radeon RX 6600/6600 XT", False, _RDNA2_WHY, f"{SRC_RDNA4_MATRIX} ; {SRC_LLVM_AMDGPU}"),
        _row("gfx1100", "RDNA3", "Radeon RX 7900 XTX/XT/GRE, Radeon PRO W7900/W7800", True, _RDNA3_WHY,
             f"{SRC_RDNA4_MATRIX} ; {SRC_RDNA3_WMMA} ; {SRC_GPU_SPECS}"),
        _row("gfx1101", "RDNA3", "Radeon RX 7800 XT/7700 XT, Radeon PRO W7700", True, _RDNA3_WHY,
             f"{SRC_RDNA3_WMMA} ; {SRC_LLVM_AMDGPU}"),
        _row("gfx1102", "RDNA3", "Radeon RX 7600/7600 XT", True, _RDNA3_WHY, f"{SRC_RDNA3_WMMA} ; {SRC_LLVM_AMDGPU}"),
        _row("gfx1150", "RDNA3.5", "Radeon 890M (Ryzen AI 300 APU)", True,
             "RDNA3.5 has the GFX11 WMMA instructions, bf16 included", f"{SRC_LLVM_AMDGPU} ; {SRC_RDNA3_WMMA}"),
        _row("gfx1151", "RDNA3.5", "Radeon 8060S (Ryzen AI Max APU)", True,
             "RDNA3.5 has the GFX11 WMMA instructions, bf16 included", f"{SRC_LLVM_AMDGPU} ; {SRC_RDNA3_WMMA}"),
        _row("gfx1200", "RDNA4", "Radeon RX 9060/9060 XT", True,
             "RDNA4 matrix cores run bf16 at the fp16 rate (1024 FLOPs/clock/CU)", f"{SRC_RDNA4_MATRIX} ; {SRC_GPU_SPECS}"),
        _row("gfx1201", "RDNA4", "Radeon RX 9070/9070 XT, Radeon AI PRO R9700", True,
             "RDNA4 matrix cores run bf16 at the fp16 rate (1024 FLOPs/clock/CU on the RX 9070 XT)",
             f"{SRC_RDNA4_MATRIX} ; {SRC_GPU_SPECS}"),
    ]
)


def arch_info(arch: str) -> ArchInfo | None:
    """The table row for a base architecture (``"gfx942"``), or None when ezpz-rocm does not know it."""
    return ARCHS.get(arch.split(":", 1)[0].strip().lower())


# -- visible devices ---------------------------------------------------------------------------

ROCR_VAR = "ROCR_VISIBLE_DEVICES"
HIP_VAR = "HIP_VISIBLE_DEVICES"
CUDA_VAR = "CUDA_VISIBLE_DEVICES"


def _norm_uuid(value: str) -> str:
    text = value.strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def _apply_mask(spec: str, base: list[str] | None, uuids: Mapping[str, str]) -> tuple[list[str], str]:
    """Select from ``base`` (physical ids by index; None = unknown identity) with one mask value.

    The value is read by the kit's rules (:mod:`ezpz.plugin_kit.visible`, with ordinals and ``GPU-<uuid>``
    entries mixed as ROCr and HIP allow): the first invalid entry ends the list and a repeated one hides
    every device. Here, as in the runtimes, an index past the devices it indexes also ends the list, and so
    does a UUID of a device that is not visible at this level.
    """
    parsed = parse_visible_devices(spec, uuid_prefixes=("GPU-",), mixed=True)
    picked: list[str] = []
    for entry in parsed.entries:
        if isinstance(entry, int):
            if base is None:
                pid = str(entry)
            elif entry < len(base):
                pid = base[entry]
            else:
                return picked, f"entry {str(entry)!r} is past the {len(base)} device(s) it indexes, so the list ends there"
        else:
            pid = uuids.get(_norm_uuid(entry), entry)
            if base is not None and pid not in base and pid.isdigit():
                return picked, f"entry {entry!r} names a device that is not visible at this level, so the list ends there"
        if pid in picked:
            return [], f"entry {entry!r} is repeated, which hides every device"
        picked.append(pid)
    return picked, parsed.stop


def resolve_visible(
    environ: Mapping[str, str], physical_count: int | None = None, uuids: Sequence[str | None] = ()
) -> VisibleDevices:
    """Map torch indices to physical devices from the visibility variables.

    Precedence, as the ROCm runtimes apply it: ``ROCR_VISIBLE_DEVICES`` is
    applied first (by ROCr) and selects physical devices; then
    ``HIP_VISIBLE_DEVICES`` (or, when that is unset, ``CUDA_VISIBLE_DEVICES``,
    which HIP honours for portability) indexes into what ROCr left. This is
    also how ``torch.cuda._parse_visible_devices`` reads them on ROCm.

    :param physical_count: How many physical GPUs exist (amdsmi), or None when unknown.
    :param uuids: UUID of each physical GPU by ordinal, to resolve ``GPU-<uuid>`` entries.
    """
    by_uuid = {_norm_uuid(u): str(i) for i, u in enumerate(uuids) if u}
    level: list[str] | None = [str(i) for i in range(physical_count)] if physical_count is not None else None
    used: list[str] = []
    said: list[str] = []
    ignored: list[str] = []
    rocr = environ.get(ROCR_VAR)
    if rocr is not None:
        level, stop = _apply_mask(rocr, level, by_uuid)
        used.append(ROCR_VAR)
        said.append(f"{ROCR_VAR}={rocr!r} selects physical device(s) [{', '.join(level)}]" + (f" ({stop})" if stop else ""))
    index_var = HIP_VAR if environ.get(HIP_VAR) is not None else CUDA_VAR if environ.get(CUDA_VAR) is not None else None
    if index_var == HIP_VAR and environ.get(CUDA_VAR) is not None:
        ignored.append(f"{CUDA_VAR}={environ[CUDA_VAR]!r} (HIP_VISIBLE_DEVICES takes precedence)")
    if index_var is not None:
        spec = environ[index_var]
        level, stop = _apply_mask(spec, level, by_uuid)
        used.append(index_var)
        over = "the ROCr-visible devices" if rocr is not None else "the physical devices"
        said.append(f"{index_var}={spec!r} then indexes {over}: [{', '.join(level)}]" + (f" ({stop})" if stop else ""))
    if not used:
        ids = tuple(level) if level is not None else None
        return VisibleDevices(physical_ids=ids, var=None, ignored=ignored)
    mapping = ", ".join(f"torch {i} = physical {p}" for i, p in enumerate(level or [])) or "no device visible"
    return VisibleDevices(
        physical_ids=tuple(level or ()), var=" then ".join(used), reason="; ".join(said) + f"; so {mapping}",
        ignored=ignored,
    )


# -- candidate ---------------------------------------------------------------------------------


def _summary(gpus: Sequence[RocmGpu]) -> str:
    counts: dict[tuple[str, str], int] = {}
    for g in gpus:
        counts[(g.name, g.arch)] = counts.get((g.name, g.arch), 0) + 1
    return ", ".join(f"{n}x {name} ({arch})" if n > 1 else f"{name} ({arch})" for (name, arch), n in counts.items())


def device_label(facts: RocmFacts) -> str:
    """How errors name the device: ``"cuda (8x AMD Instinct MI300X (gfx942))"``."""
    return f"cuda ({_summary(facts.gpus)})"


def rocm_notes(gpus: Sequence[RocmGpu]) -> tuple[str, ...]:
    """Facts worth saying about these GPUs (MI250/MI250X cards are two GCDs, mixed architectures)."""
    notes: list[str] = []
    if any(g.arch == "gfx90a" and "MI250" in g.name.upper() for g in gpus):
        notes.append("each MI250/MI250X card is two GCDs and torch sees each GCD as its own device "
                     f"({len(gpus)} device(s) here = {len(gpus) / 2:g} card(s) if all GCDs are visible)")
    archs = list(dict.fromkeys(g.arch for g in gpus))
    if len(archs) > 1:
        notes.append(f"mixed architectures {', '.join(archs)}: precision follows the least capable one")
    return tuple(notes)


def rocm_candidate(facts: RocmFacts) -> DeviceCandidate:
    """The ``cuda`` device candidate for the GPUs in ``facts``."""
    gpus = facts.gpus
    runtime = ("the probe initialised the HIP runtime (torch.cuda.get_device_properties)"
               if facts.runtime_initialised else "the HIP runtime was not initialised")
    phys = tuple(g.physical_id for g in gpus)
    details: dict[str, object] = {
        "hip": facts.hip,
        "probe": f"{facts.source}; {runtime}",
        "gcnArchName": ", ".join(dict.fromkeys(g.gcn_arch_name for g in gpus)),
        "visible_devices": facts.visible.reason,
        "tunableop": (f"on ({TUNABLEOP_VAR}=1 -> {TUNABLEOP_ENV}=1 before init)" if facts.tunableop
                      else f"off (opt in with {TUNABLEOP_VAR}=1)"),
    }
    if facts.visible.ignored:
        details["visible_devices_ignored"] = "; ".join(facts.visible.ignored)
    for i, note in enumerate(facts.notes):
        details[f"note{i + 1}" if i else "note"] = note
    return DeviceCandidate(
        device_type="cuda", vendor="amd", priority=PRIORITY, count=len(gpus), facts=facts,
        names=tuple(g.name for g in gpus), arch=",".join(facts.archs) or None,
        total_memory=tuple(g.total_memory for g in gpus), physical_ids=phys,
        visible_devices_var=facts.visible.var,
        reason=f"ROCm build (HIP {facts.hip}): {_summary(gpus)} behind torch.cuda; probed via {facts.source}, {runtime}",
        details=details,
    )


# -- backend -----------------------------------------------------------------------------------


def backend_options(build: TorchBuild) -> list[BackendOption]:
    """RCCL (named ``nccl`` on ROCm builds) first, then gloo."""
    rccl = backend_in_build(
        build, "nccl", reason="RCCL, AMD's NCCL-compatible collectives, which ROCm builds of torch register as 'nccl'",
        missing="this ROCm torch build has no 'nccl' backend (RCCL not built in)",
    )
    return vendor_then_gloo(build, rccl, gloo_reason="gloo (fallback: host-staged, far slower than RCCL for GPU tensors)")


# -- precision ---------------------------------------------------------------------------------


def precision_options(facts: RocmFacts, requested: str = "auto") -> list[PrecisionOption]:
    """bf16 (when every visible architecture does it well), then fp16 with a grad scaler.

    An architecture missing from :data:`ARCHS` gets fp16 for ``auto``; an
    explicit ``bf16`` request on it is honoured (unverified) rather than refused.
    """
    archs = facts.archs
    infos = {a: arch_info(a) for a in archs}
    unknown = [a for a, info in infos.items() if info is None]
    lacking = [info for info in infos.values() if info is not None and not info.bf16]
    if lacking:
        bad = lacking[0]
        bf16 = PrecisionOption(dtype="bf16", supported=False,
                               reason=f"{bad.arch} ({bad.family}: {bad.products}): {bad.why} [source: {bad.source}]")
    elif unknown:
        names = ", ".join(unknown)
        if (requested or "").strip().lower() == "bf16":
            bf16 = PrecisionOption(dtype="bf16", supported=True,
                                   reason=f"architecture {names} is not in ezpz-rocm's table; bf16 is used because it was "
                                   "requested explicitly (unverified on this architecture)")
        else:
            bf16 = PrecisionOption(dtype="bf16", supported=False,
                                   reason=f"architecture {names} is not in ezpz-rocm's table, so bf16 support is unknown "
                                   "(request EZPZ_PRECISION=bf16 to use it anyway)")
    else:
        rows = [info for info in infos.values() if info is not None]
        bf16 = PrecisionOption(dtype="bf16", supported=True,
                               reason="; ".join(f"{r.arch} ({r.family}: {r.products}): {r.why} [source: {r.source}]" for r in rows)
                               or "no GPU visible")
    if unknown:
        fp16_why = (f"fp16 with a grad scaler: architecture {', '.join(unknown)} is unknown to ezpz-rocm, so bf16 is not "
                    "assumed; fp16 runs on every ROCm GPU and needs loss scaling for its narrow range")
    else:
        fp16_why = "fp16 with a grad scaler: fp16 runs on every ROCm GPU and needs loss scaling for its narrow range"
    return [bf16, PrecisionOption(dtype="fp16", supported=True, grad_scaler=True, reason=fp16_why)]


# -- TunableOp ---------------------------------------------------------------------------------


def tunableop_requested(environ: Mapping[str, str], hip: str) -> bool:
    """Parse the ``EZPZ_ROCM_TUNABLEOP`` opt-in; raise naming it when invalid or when ROCm is too old."""
    wanted = parse_bool(environ, TUNABLEOP_VAR)
    if wanted and hip_release(hip) < TUNABLEOP_MIN_ROCM:
        raise UnavailableError(
            name=TUNABLEOP_VAR, value=environ.get(TUNABLEOP_VAR),
            expected=f"ROCm {TUNABLEOP_MIN_ROCM[0]}.{TUNABLEOP_MIN_ROCM[1]} or newer for PyTorch TunableOp "
            f"(this torch was built with HIP {hip})",
            fix=f"unset {TUNABLEOP_VAR} or install a torch built for a newer ROCm",
        )
    return wanted


def tunableop_action(facts: RocmFacts) -> LifecycleAction | None:
    """The env default that turns TunableOp on, only when the user opted in."""
    if not facts.tunableop:
        return None
    return LifecycleAction(
        env_defaults={TUNABLEOP_ENV: "1"},
        reason=f"{TUNABLEOP_VAR}=1: enabling PyTorch TunableOp (available from ROCm 5.4; this build has HIP {facts.hip}) "
        f"with {TUNABLEOP_ENV}=1 before the process group starts; a {TUNABLEOP_ENV} you set yourself wins",
    )
