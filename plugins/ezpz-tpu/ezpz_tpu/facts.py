"""What the TPU plugin knows: the frozen facts its probe records, and the TPU generations from Google's docs.

Pure data. :class:`TpuFacts` is what the probe saw; :data:`GENERATIONS` is
what Google Cloud publishes about each TPU generation (the public pages are
named per row), used to turn ``TPU_ACCELERATOR_TYPE`` (``v5litepod-8``) into
a generation and the chips this host drives.
"""

from __future__ import annotations

from collections.abc import Iterable

from typing import Literal

from attrs import field, frozen

__all__ = ["GENERATIONS", "Generation", "TpuFacts"]


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    """attrs converter with a typed signature (``converter=tuple`` fails ``mypy --strict``)."""
    return tuple(values)


@frozen(kw_only=True)
class Generation:
    """One TPU generation as Google Cloud documents it.

    ``type_counts`` says what the number in an accelerator type counts:
    ``"cores"`` (v4, v5p: ``v4-8`` is 8 TensorCores = 4 chips) or ``"chips"``
    (v5e, v6e: ``v6e-8`` is 8 chips). ``chips_per_host`` is the most chips one
    TPU VM drives; ``multi_host_chips_per_host`` what each VM of a multi-host
    slice drives.
    """

    name: str
    type_prefix: str
    cores_per_chip: int
    type_counts: Literal["cores", "chips"]
    chips_per_host: int
    multi_host_chips_per_host: int
    hbm_gb: int
    bf16_tflops: int
    source: str

    def chips_in(self, type_number: int) -> int:
        """Chips in a slice whose accelerator type ends in ``type_number``."""
        return type_number // self.cores_per_chip if self.type_counts == "cores" else type_number

    def chips_on_this_host(self, chips: int) -> int:
        """Chips one VM drives in a slice of ``chips`` chips."""
        return chips if chips <= self.chips_per_host else self.multi_host_chips_per_host


#: Google Cloud TPU system architecture, per generation (the ``source`` page of each row).
GENERATIONS: tuple[Generation, ...] = (
    Generation(name="v4", type_prefix="v4", cores_per_chip=2, type_counts="cores", chips_per_host=4,
               multi_host_chips_per_host=4, hbm_gb=32, bf16_tflops=275,
               source="https://cloud.google.com/tpu/docs/v4"),
    Generation(name="v5e", type_prefix="v5litepod", cores_per_chip=1, type_counts="chips", chips_per_host=8,
               multi_host_chips_per_host=4, hbm_gb=16, bf16_tflops=197,
               source="https://cloud.google.com/tpu/docs/v5e"),
    Generation(name="v5p", type_prefix="v5p", cores_per_chip=2, type_counts="cores", chips_per_host=4,
               multi_host_chips_per_host=4, hbm_gb=95, bf16_tflops=459,
               source="https://cloud.google.com/tpu/docs/v5p"),
    Generation(name="v6e", type_prefix="v6e", cores_per_chip=1, type_counts="chips", chips_per_host=8,
               multi_host_chips_per_host=4, hbm_gb=32, bf16_tflops=918,
               source="https://cloud.google.com/tpu/docs/v6e"),
)


@frozen(kw_only=True)
class TpuFacts:
    """What the probe saw, frozen: the PJRT device type and, on a TPU VM, the slice.

    ``pjrt_device`` is torch_xla's runtime (``"TPU"``, ``"CPU"``); ``source``
    says where it came from (``"PJRT_DEVICE"``, ``"TPU_ACCELERATOR_TYPE"``,
    ``"libtpu"``, or ``"default"``: no TPU, so torch_xla's CPU runtime).
    """

    pjrt_device: str
    source: str
    count: int
    accelerator_type: str | None = None
    generation: Generation | None = None
    slice_chips: int | None = None
    worker_id: int | None = None
    worker_hostnames: tuple[str, ...] = field(default=(), converter=_strings)

    @property
    def on_tpu(self) -> bool:
        return self.pjrt_device == "TPU"

    @property
    def label(self) -> str:
        if self.on_tpu:
            return f"TPU {self.generation.name}" if self.generation else "TPU"
        return f"XLA on the {self.pjrt_device} runtime"
