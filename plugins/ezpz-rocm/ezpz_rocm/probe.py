"""The ROCm probe: thin and impure. Everything it learns goes into :class:`~ezpz_rocm.facts.RocmFacts`.

Two sources, in order:

1. ``amdsmi`` (AMD SMI's Python bindings), when importable: enumerates every
   physical GPU with its ``target_graphics_version`` (gfx arch), name, VRAM and
   UUID **without initialising the HIP runtime**. amdsmi ignores the
   visible-devices variables, so :func:`ezpz_rocm.policy.resolve_visible`
   applies them here.
2. ``torch.cuda``: ``device_count()`` and ``get_device_properties(i).gcnArchName``.
   ``get_device_properties`` **initialises the HIP runtime** (torch's lazy
   init), after which ``fork()``-started data-loader workers must not touch the
   GPU; the facts record that it happened. HIP has applied the masks itself.

Tests replace :func:`amdsmi_gpus` and :func:`torch_gpus` with recorded facts.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from ezpz.facts import TorchBuild
from ezpz_rocm.facts import RocmFacts, RocmGpu, VisibleDevices
from ezpz_rocm.policy import resolve_visible, rocm_notes

__all__ = ["amdsmi_gpus", "probe_rocm", "torch_gpus"]

_MIB = 1024 * 1024


def amdsmi_gpus() -> list[RocmGpu] | None:
    """Every physical AMD GPU as amdsmi sees it (unmasked), or None when amdsmi is unusable here.

    Does not initialise the HIP runtime. ``vram_size`` is reported in MiB.
    """
    try:
        import amdsmi  # type: ignore[import-not-found]
    except Exception:  # ImportError, or OSError when libamd_smi.so is missing
        return None
    try:
        amdsmi.amdsmi_init()
    except Exception:
        return None
    try:
        gpus: list[RocmGpu] = []
        for ordinal, handle in enumerate(amdsmi.amdsmi_get_processor_handles()):
            asic = amdsmi.amdsmi_get_gpu_asic_info(handle)
            try:
                vram_mib = int(amdsmi.amdsmi_get_gpu_vram_info(handle).get("vram_size", 0) or 0)
            except Exception:
                vram_mib = 0
            try:
                uuid = str(amdsmi.amdsmi_get_gpu_device_uuid(handle))
            except Exception:
                uuid = None
            name = str(asic.get("market_name") or "AMD GPU")
            gpus.append(RocmGpu(index=ordinal, physical_id=str(ordinal), name=name if name != "N/A" else "AMD GPU",
                                gcn_arch_name=str(asic.get("target_graphics_version", "")),
                                total_memory=vram_mib * _MIB, uuid=uuid))
        return gpus
    except Exception:
        return None
    finally:
        try:
            amdsmi.amdsmi_shut_down()
        except Exception:
            pass


def torch_gpus() -> list[RocmGpu]:
    """The visible GPUs as torch sees them (masks already applied by HIP). Initialises the HIP runtime."""
    import torch

    gpus: list[RocmGpu] = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        uuid = getattr(props, "uuid", None)
        gpus.append(RocmGpu(index=i, physical_id=str(i), name=str(props.name),
                            gcn_arch_name=str(getattr(props, "gcnArchName", "") or ""),
                            total_memory=int(props.total_memory), uuid=str(uuid) if uuid is not None else None))
    return gpus


def _from_amdsmi(raw: list[RocmGpu], environ: Mapping[str, str]) -> tuple[list[RocmGpu], VisibleDevices] | None:
    visible = resolve_visible(environ, len(raw), [g.uuid for g in raw])
    ids = visible.physical_ids if visible.physical_ids is not None else tuple(str(i) for i in range(len(raw)))
    if not all(pid.isdigit() and int(pid) < len(raw) for pid in ids):
        return None  # a UUID amdsmi cannot resolve: let HIP apply the masks instead
    return [attrs.evolve(raw[int(pid)], index=i, physical_id=pid) for i, pid in enumerate(ids)], visible


def probe_rocm(build: TorchBuild, environ: Mapping[str, str], *, tunableop: bool = False) -> RocmFacts:
    """Probe the AMD GPUs for a ROCm build of torch (``build.hip`` must be set).

    Tries :func:`amdsmi_gpus` first (no runtime initialisation), then
    :func:`torch_gpus`. ``environ`` supplies the visible-devices variables.
    """
    hip = build.hip or ""
    notes: list[str] = []
    raw = amdsmi_gpus()
    if raw is not None:
        mapped = _from_amdsmi(raw, environ)
        if mapped is not None:
            gpus, visible = mapped
            return RocmFacts(hip=hip, gpus=gpus, source="amdsmi", runtime_initialised=False, visible=visible,
                             tunableop=tunableop, notes=rocm_notes(gpus))
        notes.append("amdsmi could not resolve a GPU-<uuid> visible-devices entry; asked torch.cuda instead")
    else:
        notes.append("amdsmi not importable or not initialisable; asked torch.cuda (initialises the HIP runtime)")
    seen = torch_gpus()
    visible = resolve_visible(environ)
    if visible.physical_ids is not None:
        seen = [attrs.evolve(g, physical_id=visible.physical_ids[g.index]) if g.index < len(visible.physical_ids) else g
                for g in seen]
    return RocmFacts(hip=hip, gpus=seen, source="torch.cuda", runtime_initialised=True, visible=visible,
                     tunableop=tunableop, notes=(*notes, *rocm_notes(seen)))
