"""The only impure part of the plugin: read torch.xpu and the environment, import vendor modules.

Everything here is thin on purpose; tests replace these functions with recorded
facts and the policies in :mod:`ezpz_xpu.policy` do the thinking.

What starts the GPU runtime: in torch 2.13 ``torch.xpu.device_count()`` asks
Level Zero Sysman (through ``pyzes``, when installed) and then does not poison
``fork``; in older torch, or without ``pyzes``, it enumerates SYCL devices
(``torch._C._xpu_getDeviceCount``), which loads the Level Zero driver but
creates no queue or context of its own.
``torch.xpu.get_device_properties()`` always runs ``torch.xpu._lazy_init()``
(the SYCL device pool; forked children can no longer use XPU). So the probe
asks for the count first and reads properties only when there is a device to
describe: the cheap "no XPU here" answer never initialises anything.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from types import ModuleType

from ezpz.facts import TorchBuild

from ezpz_xpu.facts import XpuDeviceProps, XpuFacts

__all__ = [
    "CCL_MODULE",
    "IPEX_MODULE",
    "device_count",
    "device_properties",
    "import_module",
    "itt_available",
    "module_available",
    "probe_xpu",
]

CCL_MODULE = "oneccl_bindings_for_pytorch"
IPEX_MODULE = "intel_extension_for_pytorch"

_PROPS = (
    "total_memory", "device_id", "driver_version", "platform_name", "gpu_eu_count", "max_compute_units",
    "has_fp16", "has_fp64", "has_bfloat16_conversions", "has_subgroup_matrix_multiply_accumulate",
    "has_subgroup_matrix_multiply_accumulate_tensor_float32", "is_integrated_gpu",
)


def device_count() -> int:
    """``torch.xpu.device_count()`` (respects ``ZE_AFFINITY_MASK`` / ``ZE_FLAT_DEVICE_HIERARCHY``)."""
    import torch

    return int(torch.xpu.device_count())


def device_properties(index: int) -> XpuDeviceProps:
    """``torch.xpu.get_device_properties(index)`` as a record (initialises the XPU runtime)."""
    import torch

    props = torch.xpu.get_device_properties(index)
    values = {key: getattr(props, key, None) for key in _PROPS}
    if values["has_bfloat16_conversions"] is None:  # spelling in some 2.5 pre-releases
        values["has_bfloat16_conversions"] = getattr(props, "has_bf16_conversion", None)
    uuid = getattr(props, "uuid", None)
    return XpuDeviceProps(name=str(props.name), uuid=None if uuid is None else str(uuid),
                          **{k: v for k, v in values.items() if not (k == "total_memory" and v is None)})


def module_available(name: str) -> bool:
    """Whether ``name`` is importable, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def import_module(name: str) -> ModuleType:
    """Import a vendor module (the oneCCL bindings register ``ccl`` as a side effect)."""
    return importlib.import_module(name)


def itt_available() -> bool:
    """Whether torch was built with Intel ITT range markers (``torch.profiler.itt``)."""
    try:
        from torch.profiler import itt
    except ImportError:
        return False
    return bool(itt.is_available())


def probe_xpu(build: TorchBuild, environ: Mapping[str, str]) -> XpuFacts:
    """Collect :class:`~ezpz_xpu.facts.XpuFacts`: count first, properties only for visible devices."""
    count = device_count()
    devices = tuple(device_properties(i) for i in range(count)) if count > 0 else ()
    return XpuFacts(
        torch_version=build.version,
        device_count=count,
        devices=devices,
        affinity_mask=environ.get("ZE_AFFINITY_MASK"),
        hierarchy=environ.get("ZE_FLAT_DEVICE_HIERARCHY"),
        ccl_bindings=module_available(CCL_MODULE),
        ipex=module_available(IPEX_MODULE),
        itt=itt_available(),
    )
