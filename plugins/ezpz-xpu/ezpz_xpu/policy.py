"""Pure XPU policies: recorded facts in, explained decisions out. No torch, no environment.

Every table here names its public source; ``docs/vendors/xpu.md`` repeats them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from attrs import frozen
from ezpz.decisions import BackendOption, MeshSupport, PrecisionOption
from ezpz.errors import ConfigError
from ezpz.facts import DeviceCandidate, ProbeReport, TorchBuild
from ezpz.plugin_kit import vendor_then_gloo

from ezpz_xpu.facts import XpuDeviceProps, XpuFacts
from ezpz_xpu.gate import IPEX_EOL, NATIVE_XPU, XPU_WHEELS, build_rejection  # re-exported

__all__ = [
    "DISCRETE_PRIORITY",
    "INTEGRATED_PRIORITY",
    "IPEX_EOL",
    "LegacyImports",
    "backend_options",
    "bf16_support",
    "build_rejection",
    "device_label",
    "family",
    "hierarchy_mode",
    "is_integrated",
    "legacy_imports",
    "parse_affinity_mask",
    "physical_ids",
    "precision_options",
    "tf32_reason",
    "xpu_report",
]

#: Eager and torch.compile parity for Intel GPUs (PyTorch 2.7); from here IPEX adds nothing ezpz needs.
SOLID_XPU = (2, 7)
#: XCCL collectives in torch.distributed (PyTorch 2.8; DeepSpeed PR #7299 switched to it for 2.8).
XCCL_FROM = (2, 8)
DISCRETE_PRIORITY = 100
#: Below discrete accelerators (100), above cpu (0): an iGPU beside a dGPU never wins by accident.
INTEGRATED_PRIORITY = 40
HIERARCHIES = ("FLAT", "COMPOSITE", "COMBINED")
CCL_INSTALL = ("pip install oneccl_bind_pt "
               "--extra-index-url https://pytorch-extension.intel.com/release-whl/stable/xpu/us/")


@frozen(kw_only=True)
class Family:
    """What a GPU family's name tells when torch's capability flags are missing or unreliable.

    ``xmx``: has XMX/DPAS matrix engines (native bf16 and fp16 matmul), ``None``
    when one marketing name covers parts with and without them.
    """

    pattern: str
    arch: str
    integrated: bool
    tiles: int = 1
    xmx: bool | None = None
    tf32: bool = False


#: Sources: Intel product pages / ark.intel.com (tile counts, XMX), Intel's "Flattening GPU tile
#: hierarchy" article (Max 1550 = 2 stacks), pytorch#147731 (no FP64 on Arc A), the recorded
#: torch outputs cited in tests/xpu_recorded.py. First match wins.
FAMILIES: tuple[Family, ...] = (
    Family(pattern=r"Data Center GPU Max 1[345]50", arch="Xe-HPC (Ponte Vecchio)", integrated=False, tiles=2,
           xmx=True, tf32=True),
    Family(pattern=r"Data Center GPU Max", arch="Xe-HPC (Ponte Vecchio)", integrated=False, xmx=True, tf32=True),
    Family(pattern=r"Data Center GPU Flex", arch="Xe-HPG (Arctic Sound-M)", integrated=False, xmx=True),
    Family(pattern=r"Arc\(TM\) (Pro )?A\d", arch="Xe-HPG (Alchemist)", integrated=False, xmx=True),
    Family(pattern=r"Arc\(TM\) (Pro )?B\d", arch="Xe2-HPG (Battlemage)", integrated=False, xmx=True),
    Family(pattern=r"Arc\(TM\) \d{3}[VT]", arch="Xe2-LPG (Lunar Lake)", integrated=True, xmx=True),
    Family(pattern=r"Arc\(TM\) Graphics", arch="Xe-LPG (Meteor/Arrow/Panther Lake iGPU)", integrated=True),
    Family(pattern=r"Iris\(R\) Xe MAX", arch="Xe-LP (DG1)", integrated=False, xmx=False),
    Family(pattern=r"Iris\(R\) Xe|UHD Graphics|HD Graphics|Iris\(R\) Plus", arch="Xe-LP/Gen9-11 iGPU",
           integrated=True, xmx=False),
)


def family(name: str) -> Family | None:
    for fam in FAMILIES:
        if re.search(fam.pattern, name, flags=re.IGNORECASE):
            return fam
    return None


def _release(version: str) -> tuple[int, int]:
    return TorchBuild(version=version).release


# -- device discovery ------------------------------------------------------------------------


def hierarchy_mode(raw: str | None) -> str:
    """``ZE_FLAT_DEVICE_HIERARCHY``: FLAT (driver default since late 2023), COMPOSITE or COMBINED."""
    if raw is None or not raw.strip():
        return "FLAT"
    mode = raw.strip().upper()
    if mode not in HIERARCHIES:
        raise ConfigError(name="ZE_FLAT_DEVICE_HIERARCHY", value=raw, expected="one of FLAT, COMPOSITE, COMBINED",
                          fix="unset it (FLAT: each tile is a device) or set COMPOSITE (each card is a device)")
    return mode


def parse_affinity_mask(raw: str | None) -> tuple[tuple[int, int | None], ...] | None:
    """``"0,1"`` -> ((0, None), (1, None)); ``"0.0,0.1"`` -> ((0, 0), (0, 1)); unset or empty -> None."""
    if raw is None or not raw.strip():
        return None
    entries: list[tuple[int, int | None]] = []
    for token in raw.split(","):
        parts = token.strip().split(".")
        if len(parts) > 2 or not all(p.isdigit() for p in parts):
            raise ConfigError(name="ZE_AFFINITY_MASK", value=raw,
                              expected="a comma-separated list of device indices or device.tile pairs, "
                                       "e.g. '0,1' or '0.0,0.1'",
                              fix="fix or unset ZE_AFFINITY_MASK")
        entries.append((int(parts[0]), int(parts[1]) if len(parts) == 2 else None))
    return tuple(entries)


def tiles_per_card(devices: Sequence[XpuDeviceProps]) -> int:
    """Tiles (stacks) per card from the family table, when every visible device agrees; else 1."""
    counts = {(fam.tiles if (fam := family(d.name)) else 1) for d in devices}
    return counts.pop() if len(counts) == 1 else 1


def physical_ids(facts: XpuFacts, mode: str) -> tuple[tuple[str, ...], str]:
    """Map each torch index to the physical device (``card`` or ``card.tile``), with how.

    Level Zero applies ``ZE_AFFINITY_MASK`` as a set and keeps the driver's order,
    as torch's own parser assumes (``torch.xpu._parse_visible_devices``). In FLAT
    and COMBINED modes mask entries are flat (tile) indices; in COMPOSITE mode they
    are cards, and ``card.tile`` restricts a card to some of its tiles.
    Returns no ids when the mask cannot explain the count torch reports.
    """
    tiles = tiles_per_card(facts.devices)
    entries = parse_affinity_mask(facts.affinity_mask)
    ids: list[str]
    if mode in ("FLAT", "COMBINED"):
        # a FLAT mask names tiles; "card.tile" is read as that tile (torch's own parser rejects the form)
        flat = range(facts.device_count) if entries is None else sorted(
            {d if s is None else d * tiles + s for d, s in entries})
        ids = [f"{f // tiles}.{f % tiles}" if tiles > 1 else str(f) for f in flat]
        how = (f"{mode}: each of a card's {tiles} tiles is its own device, so physical id is card.tile"
               if tiles > 1 else f"{mode}: one device per card")
    else:
        if entries is None:
            ids = [str(i) for i in range(facts.device_count)]
        else:
            cards: dict[int, set[int] | None] = {}
            for d, s in entries:
                if s is None:
                    cards[d] = None  # the whole card
                elif d not in cards:
                    cards[d] = {s}
                elif (picked := cards[d]) is not None:
                    picked.add(s)
            ids = []
            for d in sorted(cards):
                chosen = cards[d]
                if chosen is None or (tiles > 1 and len(chosen) == tiles):
                    ids.append(str(d))
                else:
                    ids.append("+".join(f"{d}.{t}" for t in sorted(chosen)))
        how = (f"COMPOSITE: each card (all {tiles} tiles) is one device" if tiles > 1
               else "COMPOSITE: one device per card")
    if entries is not None:
        how += f", after ZE_AFFINITY_MASK={facts.affinity_mask}"
    if len(ids) != facts.device_count:
        return (), (f"ZE_AFFINITY_MASK={facts.affinity_mask!r} under {mode} names {len(ids)} device(s) but torch sees "
                    f"{facts.device_count}; physical ids unknown")
    return tuple(ids), how


def is_integrated(device: XpuDeviceProps) -> tuple[bool, str]:
    """Integrated (shares host memory) or discrete, and what said so."""
    if device.is_integrated_gpu is not None:
        return device.is_integrated_gpu, f"torch reports is_integrated_gpu={int(device.is_integrated_gpu)}"
    fam = family(device.name)
    if fam is not None:
        return fam.integrated, f"{fam.arch} is {'an integrated' if fam.integrated else 'a discrete'} GPU"
    return False, "name not in ezpz-xpu's family table; assumed discrete"


def device_label(facts: XpuFacts) -> str:
    names = sorted({d.name for d in facts.devices}) or ["Intel GPU"]
    kinds = {is_integrated(d)[0] for d in facts.devices}
    kind = "integrated" if kinds == {True} else "discrete" if kinds == {False} else "mixed"
    return f"xpu ({', '.join(names)}, {kind})"


def xpu_report(facts: XpuFacts) -> ProbeReport:
    """The ``xpu`` candidate, or the rejection saying why there is none."""
    mode = hierarchy_mode(facts.hierarchy)
    mode_text = f"ZE_FLAT_DEVICE_HIERARCHY={facts.hierarchy}" if facts.hierarchy else f"hierarchy {mode} (default)"
    if facts.device_count <= 0:
        if facts.affinity_mask is not None:
            where = f"under ZE_AFFINITY_MASK={facts.affinity_mask!r} ({mode_text})"
            fix = "widen or unset ZE_AFFINITY_MASK"
        else:
            where = f"to torch {facts.torch_version} ({mode_text})"
            fix = "check the Level Zero GPU driver (intel-level-zero-gpu / compute-runtime) and render-group access"
        return ProbeReport.rejected("xpu", "intel", f"0 devices visible {where}: {fix}")
    ids, how = physical_ids(facts, mode)
    integrated = [is_integrated(d) for d in facts.devices]
    any_discrete = any(not flag for flag, _ in integrated)
    priority = DISCRETE_PRIORITY if any_discrete else INTEGRATED_PRIORITY
    names: dict[str, int] = {}
    for d in facts.devices:
        names[d.name] = names.get(d.name, 0) + 1
    summary = ", ".join(f"{n} x {name}" for name, n in names.items())
    if any_discrete and not all(not flag for flag, _ in integrated):
        igpus = [i for i, (flag, _) in enumerate(integrated) if flag]
        dgpus = [str(i) for i, (flag, _) in enumerate(integrated) if not flag]
        kind = (f"mixed: integrated GPU at index {igpus} beside discrete ones; ranks take index = local rank, "
                "so hide it"
                + (f" with ZE_AFFINITY_MASK={','.join(dgpus)}" if facts.affinity_mask is None else ""))
    elif any_discrete:
        kind = f"discrete ({integrated[0][1]})"
    else:
        kind = (f"integrated ({integrated[0][1]}): priority {INTEGRATED_PRIORITY}, below discrete accelerators; "
                "EZPZ_DEVICE=xpu picks it anyway")
    tiles = tiles_per_card(facts.devices)
    reason = f"{facts.device_count} Intel GPU device(s) visible: {summary}; {kind}"
    if tiles > 1:
        reason += f"; {how}" + (" (ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE makes each card one device)"
                                if mode != "COMPOSITE" else "")
    bf16_ok, _ = bf16_support(facts.devices[0])
    details = {
        "hierarchy": mode if facts.hierarchy else f"{mode} (unset: driver default)",
        "affinity_mask": facts.affinity_mask if facts.affinity_mask is not None else "unset (all devices)",
        "tiles_per_card": tiles,
        "physical_id_mapping": how,
        "integrated": ",".join(str(int(flag)) for flag, _ in integrated),
        "native_bf16": bf16_ok,
        "torch_xpu": "prototype (< 2.7)" if _release(facts.torch_version) < SOLID_XPU else "native",
        "oneccl_bindings_installed": facts.ccl_bindings,
        "ipex_installed": facts.ipex,
    }
    arch = {(fam.arch if (fam := family(d.name)) else None) for d in facts.devices} - {None}
    return ProbeReport.found(DeviceCandidate(
        device_type="xpu", vendor="intel", reason=reason, count=facts.device_count, priority=priority,
        names=tuple(d.name for d in facts.devices), arch=", ".join(sorted(arch)) or None,  # type: ignore[arg-type]
        total_memory=tuple(d.total_memory for d in facts.devices), physical_ids=ids,
        visible_devices_var="ZE_AFFINITY_MASK", details=details, facts=facts,
    ))


# -- collectives -------------------------------------------------------------------------------


def backend_options(facts: XpuFacts, build: TorchBuild) -> list[BackendOption]:
    """``xccl`` (torch >= 2.8), then ``ccl`` (oneCCL bindings), then ``gloo`` (CPU tensors only), in that order."""
    have = set(build.distributed_backends)
    v = build.version
    if "xccl" in have:
        xccl = BackendOption(name="xccl", available=True,
                             reason=f"XCCL is torch {v}'s native collective backend for XPU "
                                    "(oneCCL built into torch, 2.8+)")
    elif build.at_least(*XCCL_FROM):
        xccl = BackendOption(name="xccl", available=False,
                             reason=f"torch {v} was built without XCCL "
                                    "(torch.distributed.is_xccl_available() is False)")
    else:
        xccl = BackendOption(name="xccl", available=False, reason=f"XCCL arrived in torch 2.8; this is torch {v}")
    if facts.ccl_bindings:
        ccl = BackendOption(name="ccl", available=True,
                            reason="oneccl_bindings_for_pytorch is installed; ezpz imports it just before "
                                   "init_process_group, which registers 'ccl' (torch-ccl is end of life after 2.8, "
                                   "intel/torch-ccl#80: prefer torch>=2.8 with xccl)")
    else:
        ccl = BackendOption(name="ccl", available=False,
                            reason=f"oneccl_bindings_for_pytorch is not installed: {CCL_INSTALL} (the build matching torch "
                                   f"{'.'.join(map(str, build.release))})")
    return vendor_then_gloo(build, (xccl, ccl), gloo_reason=(
        "WARNING: gloo runs collectives on CPU tensors only; XPU tensors (DDP gradients) fail or must be "
        f"copied to the host. For XPU collectives install the oneCCL bindings ({CCL_INSTALL}) or use "
        f"torch>=2.8 for xccl ({XPU_WHEELS})"))


XCCL_NO_SPLIT_SOURCES = (
    "https://github.com/pytorch/pytorch/issues/186548",  # ProcessGroupXCCL never overrides supportsSplitting
    "https://github.com/intel/torch-xpu-ops/issues/5385",  # oneCCL team: c10d's DeviceMesh does not need commsplit
    "https://github.com/saforem2/ezpz/pull/189",  # the original ezpz: new_group fallback, on Aurora/Sunspot XPUs
)


ONECCL_REDUCE_SOURCES = (
    "https://github.com/pytorch/torchtitan/pull/2332",  # PREMUL_SUM crashes on XPU; disable_fsdp_gradient_division
    "https://github.com/intel/torch-xpu-ops/pull/2903",  # oneCCL lacks PreMul_Sum beyond one node: multiply + SUM
    "https://github.com/intel/torch-xpu-ops/issues/1571",  # "Cannot use ReduceOp.PREMUL_SUM with XCCL" (FSDP2 test)
    "https://github.com/intel/torch-xpu-ops/issues/2361",  # FSDP2: "average operation is not supported for the
    # scheduler path" (oneCCL coll_param.cpp)
    "https://github.com/saforem2/ezpz/commit/42a69844567c8640c83c2973b4d5b39ba5374687",  # original v0.21.1: SUM on CCL/XPU
)
ONECCL_LACKS = frozenset({"AVG", "PREMUL_SUM"})


def _reduce_ops_reason(backend: str) -> str:
    return (f"{backend} runs oneCCL, which raises for PREMUL_SUM ('Cannot use ReduceOp.PREMUL_SUM with XCCL', "
            "torch-xpu-ops#1571; across nodes even where a build has it, torch-xpu-ops#2903, torchtitan#2332) "
            "and for AVG on its scheduler path ('average operation is not supported for the scheduler path', "
            "torch-xpu-ops#2361); torchtitan and the original ezpz (v0.21.1) force SUM for FSDP2 on Aurora")


def mesh_support(backend: str, torch_version: str) -> MeshSupport | None:
    """XCCL cannot ``split_group``: mesh groups by ``new_group``; XCCL and oneCCL (``ccl``) lack ``AVG`` and
    ``PREMUL_SUM``, so ``rt.shard`` reduces with SUM. gloo: the core's answer (None here)."""
    if backend not in ("xccl", "ccl"):
        return None
    if backend == "ccl":
        return MeshSupport(
            unsupported_reduce_ops=ONECCL_LACKS, reduce_ops_reason=_reduce_ops_reason("ccl"),
            sources=ONECCL_REDUCE_SOURCES,
            reason=f"ccl (oneccl_bindings_for_pytorch) on torch {torch_version}: torch's own mesh groups")
    return MeshSupport(
        split_group=False, sources=XCCL_NO_SPLIT_SOURCES + ONECCL_REDUCE_SOURCES,
        unsupported_reduce_ops=ONECCL_LACKS, reduce_ops_reason=_reduce_ops_reason("xccl"),
        reason=(f"xccl on torch {torch_version}: ProcessGroupXCCL does not override Backend::supportsSplitting (it "
                "inherits false; pytorch#186548, seen on torch 2.13), and DeviceMesh calls split_group for a "
                "device-bound default group, which then raises 'its backend does not support splitting'; "
                "new_group works with xccl (torch-xpu-ops#5385), so mesh groups are made with it, as the original "
                "ezpz's init_device_mesh_safe did"))


# -- precision ---------------------------------------------------------------------------------


def bf16_support(device: XpuDeviceProps) -> tuple[bool, str]:
    """Native bf16 on ``device``: torch's flag when it says yes, the family table when the flag is absent or False.

    ``has_bfloat16_conversions`` comes from an offline-compiler query that reads
    False when torch cannot ask (pytorch#196074, Arc B580), so a False is only
    believed for families not known to have XMX.
    """
    name, flag = device.name, device.has_bfloat16_conversions
    fam = family(name)
    xmx = device.has_subgroup_matrix_multiply_accumulate
    if flag:
        engines = " with XMX (DPAS) matrix engines" if xmx or (fam and fam.xmx) else ""
        return True, f"{name} has native bf16 (has_bfloat16_conversions=1){engines}"
    if fam is not None and fam.xmx:
        said = "does not report has_bfloat16_conversions" if flag is None else \
            "reports has_bfloat16_conversions=0, which torch also says when it cannot query the device (pytorch#196074)"
        return True, f"{name} is {fam.arch} with XMX bf16 matrix engines (torch {said})"
    if flag is False:
        return False, (f"{name} has no native bf16 (has_bfloat16_conversions=0"
                       f"{', no XMX/DPAS' if xmx is False else ''}): torch would emulate bf16 slowly")
    if fam is not None and fam.xmx is False:
        return False, f"{name} ({fam.arch}) has no XMX and no native bf16"
    return True, f"torch does not report bf16 support for {name}; assumed native, as on every Intel GPU with XMX"


def precision_options(facts: XpuFacts, requested: str) -> list[PrecisionOption]:
    """bf16 first (Intel's default for training), then fp16 (mainly inference).

    fp16 training needs ``torch.amp.GradScaler``, which on XPU needs FP64
    (pytorch#147731: Arc A-series has none). Without FP64, ``auto`` never picks
    fp16; ``EZPZ_PRECISION=fp16`` still gets it, without a scaler, for inference.
    """
    devices = facts.devices or (XpuDeviceProps(name="Intel GPU"),)
    bf16 = [bf16_support(d) for d in devices]
    bf16_ok = all(ok for ok, _ in bf16)
    bf16_reason = next((why for ok, why in bf16 if not ok), bf16[0][1])
    no_fp16 = [d.name for d in devices if d.has_fp16 is False]
    no_fp64 = sorted({d.name for d in devices if d.has_fp64 is False})
    if no_fp16:
        fp16 = PrecisionOption(dtype="fp16", supported=False, reason=f"{no_fp16[0]} reports has_fp16=0")
    elif no_fp64:
        scaler_note = (f"no GradScaler: torch's XPU GradScaler needs FP64, which {', '.join(no_fp64)} lacks "
                       "(pytorch#147731); fp16 is for inference here, train in bf16")
        fp16 = PrecisionOption(dtype="fp16", supported=requested.strip().lower() == "fp16", grad_scaler=False,
                               reason=scaler_note if requested.strip().lower() == "fp16"
                               else f"not picked automatically: {scaler_note}; EZPZ_PRECISION=fp16 for inference")
    else:
        fp16 = PrecisionOption(dtype="fp16", supported=True, grad_scaler=True,
                               reason="fp16 with GradScaler (Intel recommends bf16 for training; "
                                      "fp16 mainly for inference)")
    return [PrecisionOption(dtype="bf16", supported=bf16_ok, reason=bf16_reason), fp16]


def tf32_reason(facts: XpuFacts) -> str:
    """Why ezpz leaves TF32 off on XPU, and how to turn XPU's own fp32 math mode on."""
    has = [d.has_subgroup_matrix_multiply_accumulate_tensor_float32 for d in facts.devices]
    fams = [family(d.name) for d in facts.devices]
    capable = bool(facts.devices) and all(h or (h is None and f is not None and f.tf32) for h, f in zip(has, fams))
    base = ("TF32 off: ezpz's TF32 switch sets torch.backends.cuda/cudnn.allow_tf32, which XPU ignores. XPU's fp32 "
            "math mode is oneDNN's torch.backends.mkldnn.allow_tf32 (XPU matmul/conv from torch 2.7, "
            "pytorch#137570, pytorch#144240; IPEX's set_fp32_math_mode before that); ezpz keeps fp32 exact")
    if capable:
        return base + (f"; {facts.devices[0].name} has TF32 XMX: set torch.backends.mkldnn.allow_tf32 = True "
                       "to trade accuracy for speed")
    return base + "; this device has no TF32 matrix path (check torch.xpu.is_tf32_supported() where torch has it)"


# -- lifecycle -----------------------------------------------------------------------------------


@frozen(kw_only=True)
class LegacyImports:
    """Which legacy Intel modules ``ezpz_before_init`` imports, and the sentence for each decision."""

    ipex: bool
    ccl: bool
    ipex_reason: str
    ccl_reason: str | None = None


def legacy_imports(version: str, backend: str, facts: XpuFacts) -> LegacyImports:
    """Native torch first: IPEX only below torch 2.7 and only when installed; oneCCL bindings only for ``ccl``."""
    release = _release(version)
    if release >= SOLID_XPU:
        ipex, why = False, (f"IPEX not imported: native torch {version} XPU needs no extension"
                            + (" (it is installed; ezpz leaves it alone" if facts.ipex else " (not installed")
                            + f"; IPEX reaches end of life in {IPEX_EOL})")
    elif facts.ipex:
        ipex, why = True, (f"importing intel_extension_for_pytorch: torch {version}'s native XPU is a prototype "
                           f"(solid from 2.7) and IPEX fills its gaps; IPEX reaches end of life in {IPEX_EOL}, "
                           f"so upgrade to torch>=2.7 and drop it")
    else:
        ipex, why = False, (f"IPEX not installed: torch {version}'s native XPU is a prototype (solid from 2.7), some "
                            f"ops may be missing or slow; upgrade torch ({XPU_WHEELS}) rather than install IPEX, "
                            f"which reaches end of life in {IPEX_EOL}")
    ccl_reason = None
    if backend == "ccl":
        ccl_reason = ("importing oneccl_bindings_for_pytorch to register the 'ccl' backend"
                      + (f" (torch {version} has no XCCL; torch>=2.8 has it built in)" if release < XCCL_FROM else ""))
    return LegacyImports(ipex=ipex, ccl=backend == "ccl", ipex_reason=why, ccl_reason=ccl_reason)
