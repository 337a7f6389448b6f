"""What a lazy XLA step needs from torch_xla, for the plugin's ``StepBoundary``: compile counts, the step's
graph as text, and one host transfer for a checkpoint.

Imported by the ``ezpz_step_boundary`` hook only; each function imports torch_xla when first called (after
``PJRT_DEVICE`` is set). :func:`graph_lines` is pure over HLO text, testable without torch_xla.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["XlaCompiles", "graph_lines", "hlo_lines", "to_host"]


class XlaCompiles:
    """torch_xla's compile counter: graphs compiled so far in this process and their total seconds.

    ``UncachedCompile`` (a counter: cheap to read every step) says whether anything compiled; only then is
    the ``CompileTime`` metric read for the seconds (its data carries up to a thousand samples).
    """

    __slots__ = ("_count", "_seconds")

    def __init__(self) -> None:
        self._count, self._seconds = 0, 0.0

    def __call__(self) -> tuple[int, float]:
        import torch_xla.debug.metrics as met

        count = met.counter_value("UncachedCompile") or 0
        if count != self._count:
            data = met.metric_data("CompileTime")
            self._count = count
            self._seconds = data[1] / 1e9 if data else 0.0  # the accumulator is in nanoseconds
        return self._count, self._seconds


_ID = re.compile(r"%[\w.\-]+")
_META = re.compile(r",?\s*metadata=\{[^}]*\}")


def hlo_lines(text: str) -> tuple[str, ...]:
    """The instructions of an HLO module's text, names and source metadata stripped, so that two steps
    whose graphs differ only in a baked-in value (``constant(0.5)``, ``slice={[0:8], [2:3]}``) differ in that
    line alone."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if " = " not in line or line.startswith(("HloModule", "ENTRY", "}")):
            continue
        lines.append(_META.sub("", _ID.sub("%", line)))
    return tuple(lines)


def graph_lines(tensors: Sequence[Any]) -> tuple[str, ...]:
    """The pending graph of ``tensors`` (the step about to run) as HLO instruction lines (:func:`hlo_lines`)."""
    import torch_xla

    text = torch_xla._XLAC._get_xla_tensors_hlo(list(tensors))  # torch_xla's documented graph-debugging call
    return hlo_lines(text)


def to_host(obj: Any) -> Any:
    """``obj`` with every xla tensor in it copied to the host in one transfer: one graph run for all of them.

    ``torch.save`` of xla tensors moves them one by one (``Tensor.__reduce_ex__`` calls ``.cpu()`` on each),
    and a tensor whose graph was never cut compiles that graph once per tensor. This is what
    ``xm.save`` does before writing (``xm._maybe_convert_to_cpu``: all tensors synced together, then
    ``_xla_get_cpu_tensors``); where that private helper is gone, ``torch_xla.sync()`` then ``.cpu()`` each.
    """
    import torch_xla.core.xla_model as xm

    convert = getattr(xm, "_maybe_convert_to_cpu", None)
    if convert is not None:
        return convert(obj)
    import torch_xla

    torch_xla.sync()
    return _each_to_cpu(obj)


def _each_to_cpu(obj: Any) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        return type(obj)((k, _each_to_cpu(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_each_to_cpu(v) for v in obj)
    return obj
