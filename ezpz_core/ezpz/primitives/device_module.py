"""The torch device module of a device type (``torch.cuda``, ``torch.xpu``, a PrivateUse1 backend's), if any.

``torch.get_device_module`` raises for a device type that registers no module
with torch (torch_xla's ``xla`` does not); runtime paths that only want an
optional ``synchronize``/``set_device``/memory counter ask here instead, and
find None for ``cpu`` and for such devices.
"""

from __future__ import annotations

from typing import Any

__all__ = ["device_module"]


def device_module(device_type: str) -> Any:
    """``torch.get_device_module(device_type)``, or None for ``cpu`` and device types without a module."""
    if device_type == "cpu":
        return None
    import torch

    try:
        return torch.get_device_module(device_type)
    except RuntimeError:  # "Device 'xla' does not have a corresponding module registered as 'torch.xla'"
        return None
