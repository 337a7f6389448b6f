"""Device-string translation: ``'cuda'``, ``'cuda:N'``, ``torch.device('cuda')`` and bare ordinals -> the chosen device.

``'cuda'`` is the current CUDA device, so it becomes the device ``setup()`` chose for this rank. ``'cuda:N'``
becomes the chosen device when N is this rank's local rank (the usual ``f'cuda:{local_rank}'``) or the device
has one index per process; the device of the same type and index N where the device has N+1 of them; the
chosen device's type alone where the device has no index (``cpu``); otherwise it raises, naming the ordinal.
"""

from __future__ import annotations

from typing import Any

from ezpz.primitives.cuda_device import is_cuda_device_string

__all__ = ["DeviceMap"]


class DeviceMap:
    """Answers "where does this CUDA request go" for one rank."""

    def __init__(self, target: Any, *, local_rank: int, count: int) -> None:
        import torch

        self.torch_device = torch.device
        self.target = target  # torch.device
        self.type = target.type
        self.count = max(count, 1)
        self.local_rank = local_rank
        self.name = str(target)

    def asks_cuda(self, value: Any, *, ordinals: bool = True) -> bool:
        """Whether ``value`` names a CUDA device (a bare int counts where ``ordinals``: ``.to(0)``)."""
        kind = value.__class__
        if kind is str:
            return is_cuda_device_string(value)
        if kind is self.torch_device:
            return value.type == "cuda"
        return ordinals and kind is int

    def index_of(self, value: Any) -> int | None:
        """The ordinal ``value`` names (None for plain ``'cuda'``)."""
        if value.__class__ is int:
            return value
        if value.__class__ is str:
            head, _, tail = value.partition(":")
            if head != "cuda":
                raise ValueError(f"{value!r} is not a CUDA device string")
            return int(tail) if tail else None
        return value.index

    def device(self, value: Any) -> Any:
        """The ``torch.device`` a CUDA request ``value`` becomes."""
        index = self.index_of(value)
        target = self.target
        if index is None or target.index is None:
            return target
        if index == self.local_rank or index == target.index or self.count == 1:
            return target
        if index < self.count:
            return self.torch_device(self.type, index)
        from ezpz.errors import ConfigError

        raise ConfigError(
            name="CUDA device ordinal", value=value,
            expected=f"an ordinal below {self.count} ({self.count} {self.type} device(s) visible to this process)",
            fix=f"this rank runs on {self.name}; ask for 'cuda' or f'cuda:{{local_rank}}'",
        )

    def same_kind(self, value: Any) -> Any:
        """``value`` translated, keeping its kind: a string stays a string, a ``torch.device`` a device."""
        dev = self.device(value)
        return str(dev) if value.__class__ is str else dev
