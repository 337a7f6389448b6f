"""Facts the XPU probe records: frozen, torch-free, safe to build from recorded data in tests."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import field, frozen

__all__ = ["XpuDeviceProps", "XpuFacts"]


def _opt_bool(value: object) -> bool | None:
    """torch reports capability flags as bool or 0/1; ``None`` means "this torch does not say"."""
    return None if value is None else bool(value)


def _xpu_device_props(values: Iterable[XpuDeviceProps]) -> tuple[XpuDeviceProps, ...]:
    """attrs converter with a typed signature (``converter=tuple`` fails ``mypy --strict``)."""
    return tuple(values)


@frozen(kw_only=True)
class XpuDeviceProps:
    """One torch XPU device as ``torch.xpu.get_device_properties(i)`` described it.

    Field names follow torch. Any field may be ``None`` where the installed torch
    does not report it: ``has_bfloat16_conversions`` and the DPAS flags arrived
    in torch 2.5 (pytorch#131738), ``is_integrated_gpu`` later still. The DPAS and
    bf16 flags are derived from an offline-compiler query and read ``False`` when
    torch could not ask (pytorch#196074), so policies never trust a ``False`` alone.
    """

    name: str
    total_memory: int = 0
    device_id: int | None = None
    uuid: str | None = None
    driver_version: str | None = None
    platform_name: str | None = None
    gpu_eu_count: int | None = None
    max_compute_units: int | None = None
    has_fp16: bool | None = field(default=None, converter=_opt_bool)
    has_fp64: bool | None = field(default=None, converter=_opt_bool)
    has_bfloat16_conversions: bool | None = field(default=None, converter=_opt_bool)
    has_subgroup_matrix_multiply_accumulate: bool | None = field(default=None, converter=_opt_bool)
    has_subgroup_matrix_multiply_accumulate_tensor_float32: bool | None = field(default=None, converter=_opt_bool)
    is_integrated_gpu: bool | None = field(default=None, converter=_opt_bool)


@frozen(kw_only=True)
class XpuFacts:
    """Everything the XPU plugin decides on; attached to its :class:`~ezpz.facts.DeviceCandidate`.

    ``devices`` is indexed by torch device index (after ``ZE_AFFINITY_MASK`` and
    ``ZE_FLAT_DEVICE_HIERARCHY`` were applied by the driver). ``affinity_mask``
    and ``hierarchy`` are the raw environment values (``None`` when unset).
    ``ccl_bindings`` / ``ipex`` say whether ``oneccl_bindings_for_pytorch`` /
    ``intel_extension_for_pytorch`` are importable (found, not imported).
    ``itt`` is ``torch.profiler.itt.is_available()``.
    """

    torch_version: str
    device_count: int
    devices: tuple[XpuDeviceProps, ...] = field(default=(), converter=_xpu_device_props)
    affinity_mask: str | None = None
    hierarchy: str | None = None
    ccl_bindings: bool = False
    ipex: bool = False
    itt: bool = True
