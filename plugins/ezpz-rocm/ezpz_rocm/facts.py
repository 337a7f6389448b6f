"""Frozen records of what the ROCm probe saw. Policies read these and nothing else."""

from __future__ import annotations

from collections.abc import Iterable

import attrs
from attrs import field, frozen

__all__ = ["RocmFacts", "RocmGpu", "VisibleDevices", "base_arch", "hip_release"]


def base_arch(gcn_arch_name: str) -> str:
    """``"gfx90a:sramecc+:xnack-"`` -> ``"gfx90a"``: drop the target-feature suffixes, lower-case."""
    return gcn_arch_name.split(":", 1)[0].strip().lower()


def hip_release(hip: str) -> tuple[int, int]:
    """``"6.1.40091-a8dbc0c19"`` -> ``(6, 1)``; unparsable parts count as 0."""
    from ezpz.facts import parse_release

    return parse_release(hip)


def _rocm_gpus(values: Iterable[RocmGpu]) -> tuple[RocmGpu, ...]:
    """attrs converter with a typed signature (``converter=tuple`` fails ``mypy --strict``)."""
    return tuple(values)


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    """attrs converter with a typed signature (``converter=tuple`` fails ``mypy --strict``)."""
    return tuple(values)


@frozen(kw_only=True)
class RocmGpu:
    """One AMD GPU (or GCD / partition: each is its own HIP device).

    ``index`` is the torch device index after the visible-devices masks (for a
    raw, unmasked amdsmi record it is the physical ordinal). ``physical_id``
    is the ROCm ordinal (``"3"``) or the UUID a mask named. ``gcn_arch_name``
    is exactly what ``torch.cuda.get_device_properties(i).gcnArchName`` (or
    amdsmi's ``target_graphics_version``) says, feature suffixes included.
    """

    index: int = field(validator=attrs.validators.ge(0))
    physical_id: str
    name: str
    gcn_arch_name: str
    total_memory: int = 0
    uuid: str | None = None

    @property
    def arch(self) -> str:
        return base_arch(self.gcn_arch_name)


@frozen(kw_only=True)
class VisibleDevices:
    """How the visibility variables mapped torch indices to physical devices.

    ``physical_ids[i]`` is the physical device behind torch index ``i``, or
    None when no mask is set and the count is not known up front (identity).
    ``var`` names the variable(s) that applied, ``reason`` says how.
    """

    physical_ids: tuple[str, ...] | None = None
    var: str | None = None
    reason: str = "no visible-devices variable set: every GPU is visible, torch index = physical index"
    ignored: tuple[str, ...] = field(default=(), converter=_strings)


@frozen(kw_only=True)
class RocmFacts:
    """What the ROCm plugin knows about this machine, for its later hooks.

    ``source`` is the probe that answered (``"amdsmi"`` or ``"torch.cuda"``);
    ``runtime_initialised`` is True when probing had to start the HIP runtime
    (``torch.cuda.get_device_properties``), which makes later ``fork()`` unsafe.
    ``tunableop`` is the parsed ``EZPZ_ROCM_TUNABLEOP`` opt-in.
    """

    hip: str
    gpus: tuple[RocmGpu, ...] = field(converter=_rocm_gpus)
    source: str
    runtime_initialised: bool
    visible: VisibleDevices = field(factory=VisibleDevices)
    tunableop: bool = False
    notes: tuple[str, ...] = field(default=(), converter=_strings)

    @property
    def rocm_release(self) -> tuple[int, int]:
        return hip_release(self.hip)

    @property
    def archs(self) -> tuple[str, ...]:
        """Distinct base architectures of the visible GPUs, in index order."""
        return tuple(dict.fromkeys(g.arch for g in self.gpus))
