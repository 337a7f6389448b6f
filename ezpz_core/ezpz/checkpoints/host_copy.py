"""A host-memory copy of a checkpoint's tensors, so a background save writes what the step had while training goes on.

Training changes its tensors in place (``optimizer.step()``), so a save that returns before its files
are written must first copy them. :class:`HostCopy` keeps one set of host buffers and copies into them
on each save (allocating gigabytes every save costs more than the copy: page faults, and pinning):

- **Tensors on the host** (a CPU device): a plain copy; pinning has no meaning there.
- **Tensors on an accelerator**: torch's own staging (``BlockingAsyncStager``, public in
  ``torch.distributed.checkpoint.staging``, the one ``dcp.async_save`` uses) into pinned host
  buffers, where device-to-host copies run at full speed. Where this torch lacks it, or pinning
  fails (a build without pinned memory), the plain copy, unpinned, and :attr:`HostCopy.pinned` says so.

Sharded tensors (FSDP2's ``DTensor``) keep their sharding: the copy holds this rank's shard with the
same mesh and placements, so ``torch.distributed.checkpoint`` writes it as it would the original.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["HostCopy"]


def _is_dtensor(value: object) -> bool:
    """A ``DTensor``, known by its public methods: torch 2.4 keeps the class under a private module name."""
    return callable(getattr(value, "to_local", None)) and hasattr(value, "placements")


def _new_buffer(value: Any) -> Any:
    """A host tensor (or DTensor with a host shard) like ``value``, its contents not yet copied."""
    import torch

    with torch.no_grad():
        if _is_dtensor(value):
            if value.device.type == "cpu":
                return copy.deepcopy(value.detach())  # same mesh and placements; its own storage
            return value.detach().to("cpu")  # a DTensor whose shard is on the host, as torch's staging makes it
        return torch.empty_like(value, device="cpu").copy_(value)


def _copy_into(buffer: Any, value: Any) -> Any:
    """``value``'s contents into ``buffer`` (made by :func:`_new_buffer` for a tensor of this shape and dtype)."""
    import torch

    with torch.no_grad():
        if _is_dtensor(value):
            buffer.to_local().copy_(value.to_local())
        else:
            buffer.copy_(value)
    return buffer


def _fits(buffer: Any, value: Any) -> bool:
    import torch

    if not isinstance(buffer, torch.Tensor) or buffer.shape != value.shape or buffer.dtype != value.dtype:
        return False
    kept: Any = buffer  # a DTensor is a torch.Tensor subclass, known here by its methods
    if _is_dtensor(kept) != _is_dtensor(value):
        return False
    return not _is_dtensor(value) or bool(kept.to_local().shape == value.to_local().shape)


def _plain_copy(value: Any, kept: Any) -> Any:
    """``value`` (nested dicts and lists of tensors and plain values) copied to the host, into ``kept`` where it fits."""
    import torch

    if isinstance(value, torch.Tensor):
        return _copy_into(kept, value) if _fits(kept, value) else _new_buffer(value)
    if isinstance(value, Mapping):
        old = kept if isinstance(kept, Mapping) else {}
        return {key: _plain_copy(item, old.get(key)) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        old_items = list(kept) if isinstance(kept, (list, tuple)) and len(kept) == len(value) else [None] * len(value)
        items = [_plain_copy(item, before) for item, before in zip(value, old_items)]
        return items if isinstance(value, list) else tuple(items)
    return copy.deepcopy(value)  # a number, a string, None: the optimizer's hyperparameters


def _on_accelerator(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return value.device.type not in ("cpu", "meta")
    if isinstance(value, Mapping):
        return any(_on_accelerator(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_on_accelerator(v) for v in value)
    return False


class HostCopy:
    """One rank's host buffers for background saves: :meth:`copy` fills them (reused while the state keeps its shapes).

    Call :meth:`copy` only when no write still reads the previous copy (``BackgroundSaves`` waits for it first).
    """

    def __init__(self) -> None:
        self._kept: Any = None
        self._stager: Any = None
        self.pinned = False
        """Whether the last copy went to pinned host memory (tensors on an accelerator, torch's stager)."""
        self.why = "nothing copied yet"
        """Why the last copy was pinned or not, in words."""

    def copy(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """``state``'s tensors copied to host memory; the copy is complete (synchronized) when this returns."""
        if _on_accelerator(state):
            staged = self._pinned_copy(state)
            if staged is not None:
                return staged
        else:
            self.pinned, self.why = False, "the tensors are in host memory already (a CPU device): a plain copy"
        self._kept = _plain_copy(state, self._kept)
        return dict(self._kept)

    def _pinned_copy(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        """torch's ``BlockingAsyncStager`` into cached pinned buffers, or None (and why) where it cannot."""
        try:
            from torch.distributed.checkpoint.staging import BlockingAsyncStager
        except ImportError as err:
            self.pinned, self.why = False, f"this torch has no BlockingAsyncStager ({err}): a plain, unpinned copy"
            return None
        if self._stager is None:
            self._stager = BlockingAsyncStager(cache_staged_state_dict=True)
        try:
            staged = self._stager.stage(dict(state))
        except (RuntimeError, ValueError, TypeError, KeyError) as err:  # no pinned memory in this build, or a state it cannot copy
            self._stager = None
            self.pinned, self.why = False, (f"torch's pinned staging failed ({type(err).__name__}: "
                                            f"{str(err).splitlines()[0] if str(err) else ''}): a plain, unpinned copy")
            return None
        self.pinned, self.why = True, "tensors on an accelerator: torch's BlockingAsyncStager into pinned host memory"
        return dict(staged)
