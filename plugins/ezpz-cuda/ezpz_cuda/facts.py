"""Frozen records of what the CUDA probes saw. Policies read these and nothing else."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import field, frozen, validators

from ezpz.facts import TorchBuild

__all__ = ["CudaFacts", "GpuFacts"]


def _gpu_facts(values: Iterable[GpuFacts]) -> tuple[GpuFacts, ...]:
    """attrs converter with a typed signature (``converter=tuple`` fails ``mypy --strict``)."""
    return tuple(values)


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    """attrs converter with a typed signature (``converter=tuple`` fails ``mypy --strict``)."""
    return tuple(values)


@frozen(kw_only=True)
class GpuFacts:
    """One NVIDIA GPU (or MIG instance) as NVML or the CUDA runtime describes it.

    ``total_memory`` is in bytes. ``uuid`` is NVML's ``GPU-...``/``MIG-...``
    identifier when known. ``mig_enabled`` means the GPU is split into MIG
    instances, which CUDA shows instead of the whole GPU.
    """

    name: str
    major: int = field(validator=validators.ge(1))
    minor: int = field(validator=validators.ge(0))
    total_memory: int = field(default=0, validator=validators.ge(0))
    uuid: str | None = None
    pci_bus_id: str | None = None
    mig_enabled: bool = False

    @property
    def capability(self) -> tuple[int, int]:
        return (self.major, self.minor)

    @property
    def cc(self) -> str:
        """``"9.0"``."""
        return f"{self.major}.{self.minor}"

    @property
    def sm(self) -> str:
        """``"sm_90"``."""
        return f"sm_{self.major}{self.minor}"

    @property
    def label(self) -> str:
        """``"NVIDIA H100 80GB HBM3 (compute capability 9.0)"``: how errors name the device."""
        return f"{self.name} (compute capability {self.cc})"


@frozen(kw_only=True)
class CudaFacts:
    """Everything the plugin's policies decide from, for the devices this process can see.

    ``gpus`` are in torch index order (``cuda:0`` first) after
    ``CUDA_VISIBLE_DEVICES``; ``physical_ids[i]`` names the physical device
    behind ``cuda:i``. ``probe`` says how they were found (``"nvml"``, or
    ``"torch"`` when the CUDA runtime had to be initialised). ``arch_list`` is
    ``torch.cuda.get_arch_list()`` (empty when unknown). ``notes`` are caveats
    worth showing in ``ezpz doctor``.
    """

    build: TorchBuild
    gpus: tuple[GpuFacts, ...] = field(converter=_gpu_facts)
    physical_ids: tuple[str, ...] = field(converter=_strings)
    probe: str = "nvml"
    arch_list: tuple[str, ...] = field(default=(), converter=_strings)
    visible_devices: str | None = None
    notes: tuple[str, ...] = field(default=(), converter=_strings)

    @property
    def weakest(self) -> GpuFacts:
        """The visible GPU with the lowest compute capability (ties: lowest index).

        Precision must be the same on every rank, so it is decided for this device.
        """
        return min(self.gpus, key=lambda g: g.capability)

    @property
    def homogeneous(self) -> bool:
        return len({(g.name, g.capability) for g in self.gpus}) <= 1
