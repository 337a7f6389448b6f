"""The torch device module of a device type (``torch.cuda``, ``torch.cpu``, a PrivateUse1 backend's), if any.

The one place ezpz asks ``torch.get_device_module``: the runtime, setup, the
original's API, the CUDA-compat front, the conformance kit and the Lightning
integration all ask here. It raises for a device type that registers no module
with torch (torch_xla's ``xla`` does not) and for a string that names no device
type; here both give None, so a caller that only wants an optional
``synchronize``/``set_device``/memory counter reads it with ``getattr``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

__all__ = ["device_module"]


def device_module(device_type: str) -> ModuleType | Any | None:
    """``torch.get_device_module(device_type)`` (``torch.cpu`` for ``cpu``), or None where torch has no module.

    Typed ``Any`` besides ``ModuleType``: a PrivateUse1 backend may register any object as its module (the emu
    plugin's ``EmuModule``); callers read its functions with ``getattr``.
    """
    import torch

    try:
        return torch.get_device_module(device_type)
    except (RuntimeError, ValueError, AttributeError):  # "Device 'xla' does not have a corresponding module ..."
        return None
