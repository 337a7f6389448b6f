"""What this torch can make right now: device types and collective backends a plugin names, asked of torch itself.

A plugin may offer a device type (``npu``, a PrivateUse1 backend) that exists in torch only after the vendor's
torch extension is imported, or name a backend registered only by its bindings. These probes say which names
torch does not know *now*; :func:`ezpz.policies.refuse_unknown_device_types` turns that into rejections.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["backend_known", "unknown_device_types"]


def unknown_device_types(device_types: Iterable[str]) -> dict[str, str]:
    """Each device type ``torch.device`` refuses -> torch's own message (one line); known types are left out."""
    import torch

    unknown: dict[str, str] = {}
    for device_type in sorted(set(device_types)):
        try:
            torch.device(device_type)
        except (RuntimeError, ValueError, TypeError) as err:
            unknown[device_type] = " ".join(str(err).split())[:300]
    return unknown


def backend_known(name: str) -> bool:
    """Whether ``torch.distributed`` knows collective backend ``name`` now (built in or registered by a plugin).

    ``"cpu:gloo,cuda:nccl"`` style names are known when every backend in them is.
    """
    import torch.distributed as dist

    if not dist.is_available():
        return False
    known = {str(b).lower() for b in getattr(dist.Backend, "backend_list", ())}  # register_backend appends here
    parts = [p.rsplit(":", 1)[-1].strip().lower() for p in name.split(",")]
    return bool(parts) and all(p in known for p in parts)
