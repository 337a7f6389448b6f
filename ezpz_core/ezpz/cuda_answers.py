"""What a device answers when code written for CUDA asks it something: the record of ``ezpz_cuda_answers``.

A device plugin returns a :class:`CudaAnswers` from :func:`ezpz.hookspecs.ezpz_cuda_answers`; the CUDA-compat
front (``python -m ezpz.cuda_compat``) uses it to answer ``torch.cuda.*`` and to decide what it can redirect.
Where no plugin answers, the front reads the device's torch module (``torch.get_device_module``) instead.
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attr
from attr import field

from ezpz.primitives.converters import as_dict, as_tuple
from ezpz.primitives.frozen_records import frozen

__all__ = ["CudaAnswers"]


def _explained(instance: object, attribute: attr.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be a non-empty explanation")


def _capability(instance: object, attribute: attr.Attribute[Any], value: Any) -> None:
    if value is not None and not (isinstance(value, tuple) and len(value) == 2
                                  and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise ValueError(f"CudaAnswers.capability must be None or (major, minor) ints, not {value!r}")


def _as_capability(value: Any) -> Any:
    """A JSON list ``[major, minor]`` as the tuple; anything else as given, for the validator to judge."""
    return tuple(value) if isinstance(value, list) else value


@frozen(kw_only=True)
class CudaAnswers:
    """What the chosen device says to a script written for CUDA, and what it has no answer for.

    ``redirect``: False where ``torch.cuda`` already drives this device (CUDA itself, ROCm's HIP): the script's
    CUDA calls run as written and nothing is redirected. ``capability``: the ``(major, minor)`` that
    ``torch.cuda.get_device_capability()`` honestly answers, or None where the device has none (the front then
    answers ``(0, 0)`` and its report says so). ``properties``: what ``get_device_properties()`` answers
    (``name``, ``total_memory`` ...). ``streams``/``events``/``graphs``/``pinned_memory``: whether the device
    has them (None: read the device's torch module). ``missing_reduce_ops``: ``ReduceOp`` names the chosen
    collective backend lacks (``AVG`` on gloo: the front reduces with ``SUM`` and divides).
    ``fused_optimizers``: whether torch's fused optimizer kernels (``AdamW(fused=True)``) run on the device
    (None: as torch says; False: the front drops ``fused=True`` for the default implementation). ``notes``:
    ``torch.cuda`` names whose answer here differs from CUDA's, and how (copied into the report's header).
    """

    reason: str = field(validator=_explained)
    redirect: bool = True
    capability: tuple[int, int] | None = field(default=None, validator=_capability,
                                               converter=_as_capability)
    properties: Mapping[str, Any] = field(factory=dict, converter=as_dict, hash=False)
    streams: bool | None = None
    events: bool | None = None
    graphs: bool = False
    pinned_memory: bool | None = None
    missing_reduce_ops: tuple[str, ...] = field(default=(), converter=as_tuple)
    fused_optimizers: bool | None = None
    notes: Mapping[str, str] = field(factory=dict, converter=as_dict, hash=False)
    plugin: str = ""
