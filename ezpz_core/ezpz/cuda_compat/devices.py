"""Device-string translation: ``'cuda'``, ``'cuda:N'``, ``torch.device('cuda')`` and bare ordinals -> the chosen device.

``'cuda'`` is the current CUDA device, so it becomes the device ``setup()`` chose for this rank. ``'cuda:N'``
becomes the chosen device when N is this rank's local rank (the usual ``f'cuda:{local_rank}'``) or the device
has one index per process; the device of the same type and index N where the device has N+1 of them; the
chosen device's type alone where the device has no index (``cpu``); otherwise it raises, naming the ordinal.

``torch.accelerator`` code names this rank's device ``<type>:<local_rank>``: where this process sees fewer
devices of the chosen type than that (``emu``: one per process), that alias is this rank's device too.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DeviceMap"]


class DeviceMap:
    """Answers "where does this CUDA request go" for one rank."""

    def __init__(self, target: Any, *, local_rank: int, count: int, local_world_size: int = 1) -> None:
        import torch

        self.torch_device = torch.device
        self.target = target  # torch.device
        self.type = target.type
        self.count = max(count, 1)
        self.local_rank = local_rank
        self.local_world_size = max(local_world_size, 1)
        self.name = str(target)
        aliased = target.type != "cpu" and local_rank != (target.index or 0) and local_rank >= self.count
        self._alias_type = self.type if aliased else None  # '<type>:<local_rank>' names this rank's device
        self._alias_text = f"{self.type}:{local_rank}" if aliased else None

    def asks_cuda(self, value: Any, *, ordinals: bool = True) -> bool:
        """Whether ``value`` names a CUDA device (a bare int counts where ``ordinals``: ``.to(0)``)."""
        kind = value.__class__
        if kind is str:
            return value.startswith("cuda") or value == self._alias_text
        if kind is self.torch_device:
            return value.type == "cuda" or (value.type == self._alias_type and value.index == self.local_rank)
        return ordinals and kind is int

    def index_of(self, value: Any) -> int | None:
        """The ordinal ``value`` names (None for plain ``'cuda'``)."""
        if value.__class__ is int:
            return value
        if value.__class__ is str:
            head, _, tail = value.partition(":")
            if head not in ("cuda", self._alias_type):
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
