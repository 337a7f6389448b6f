"""A graph that compiles anew every step, named: pure bookkeeping over the device's compile counter.

A lazy device (XLA) compiles a step's graph once and reuses it while the graph stays the same. A value the
script changes every step and that an operation bakes into the graph (an exponent, a shift, a slice bound,
a shape; under ``torch.compile`` also a learning rate kept as a Python float) makes every step's graph new:
every step compiles, slowly and silently. :class:`RecompileWatch` reads the counter the device's plugin
offers (``StepBoundary.compiles``) after each step boundary; after the warm-up, a run of steps that each
compiled is reported once, with the lines that differ between the last two steps' graphs (the plugin's
``StepBoundary.graph_text``), what to do, and the compile time per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Recompiling", "RecompileWatch", "changed_lines"]

WARMUP = 3
"""Boundaries not judged: the first step compiles, and so may the next ones (optimizer state created lazily)."""
WINDOW = 5
"""Consecutive boundaries that each compiled before a rank says so."""
_SHOWN = 4
_WIDTH = 160
_CAUSE = ("a value the step passes to torch as a Python number changes every step and is baked into the graph "
          "(a constant, a slice bound, a shift; under torch.compile also a learning rate kept as a Python float)")


class Recompiling(NamedTuple):
    """What the warning says: how many steps each compiled, their compile time, and what changed."""

    steps: int
    compiles: int
    seconds_per_step: float
    changed: tuple[str, ...]
    cause: str

    def fix(self) -> str:
        if self.changed:
            return ("keep a value that changes every step in a tensor on the device and update it in place "
                    "(x = torch.tensor(v, device=rt.device), then x.fill_(v) each step; a learning rate as "
                    "torch.optim's lr=torch.tensor(...)), or keep it fixed")
        return ("keep every step's shapes and code path the same (pad or drop a last partial batch, avoid "
                "branches on tensor values inside the step)")


def _token_start(text: str, index: int) -> int:
    """Where the token holding ``text[index]`` starts (after a space, ``(``, ``=``, ``,``, ``[`` or ``{``)."""
    while index > 0 and text[index - 1] not in " (=,[{":
        index -= 1
    return index


def _one_change(a: str, b: str) -> str:
    """``a -> b`` shortened to where they differ: ``f32[] constant(0.5) -> constant(0.25)``."""
    same = 0
    while same < min(len(a), len(b)) and a[same] == b[same]:
        same += 1
    cut = _token_start(a, same)
    word = a.rfind(" ", 0, cut) + 1  # the changed token with its operation: constant(0.25), not 0.25)
    head = a[:cut].rsplit(" = ", 1)[-1]
    if len(head) > 60:
        head = "..." + head[-57:]
    text = f"{head}{a[cut:]} -> {b[word:]}"
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


def changed_lines(before: Sequence[str], after: Sequence[str]) -> tuple[tuple[str, ...], str]:
    """What differs between two steps' graphs, line by line, and a sentence on why it recompiles."""
    if not before or not after:
        return (), "the step's graph could not be read (no optimizer step seen on this rank)"
    if len(before) != len(after):
        return (), (f"the graph itself changes between steps ({len(before)} instructions, then {len(after)}): a "
                    "shape or a code path differs")
    changed = tuple(_one_change(a, b) for a, b in zip(before, after) if a != b)
    if not changed:
        return (), "the graph's text is the same: shapes, dtypes or the inputs' layout differ between steps"
    shown = changed[:_SHOWN] + ((f"... and {len(changed) - _SHOWN} more",) if len(changed) > _SHOWN else ())
    return shown, _CAUSE


class RecompileWatch:
    """Counts boundaries that compiled; says once when :data:`WINDOW` of them in a row did, after the warm-up.

    ``wants_graph()`` tells the caller when to read the pending graph's text (the last two boundaries of a
    window: reading it costs a walk over the graph, so not every step).
    """

    __slots__ = ("_boundaries", "_last", "_streak", "_seconds", "_compiles", "_graphs", "reported", "warmup",
                 "window")

    def __init__(self, *, warmup: int = WARMUP, window: int = WINDOW) -> None:
        if warmup < 0 or window < 2:
            raise ValueError(f"warmup must be >= 0 and window >= 2, got {warmup}, {window}")
        self.warmup, self.window = warmup, window
        self._boundaries = 0
        self._last: tuple[int, float] | None = None
        self._streak = 0
        self._seconds = 0.0
        self._compiles = 0
        self._graphs: list[tuple[str, ...]] = []
        self.reported: Recompiling | None = None

    def wants_graph(self) -> bool:
        """True when the boundary about to run is one of the last two of a window that may be reported."""
        return self.reported is None and self._boundaries >= self.warmup and self._streak >= self.window - 2

    def observe(self, count: int, seconds: float, graph: Sequence[str] | None = None) -> Recompiling | None:
        """Record one boundary: the device's compile count and total compile seconds after it, and the text
        of the graph it ran (when :meth:`wants_graph` asked). Returns the finding, once."""
        last, self._last = self._last, (count, seconds)
        self._boundaries += 1
        if last is None or self.reported is not None or self._boundaries <= self.warmup:
            return None
        compiled, spent = count - last[0], seconds - last[1]
        if compiled <= 0:
            self._streak, self._seconds, self._compiles, self._graphs = 0, 0.0, 0, []
            return None
        self._streak += 1
        self._seconds += max(spent, 0.0)
        self._compiles += compiled
        if graph is not None:
            self._graphs = [*self._graphs[-1:], tuple(graph)]
        if self._streak < self.window:
            return None
        before, after = self._graphs if len(self._graphs) == 2 else ((), ())
        changed, cause = changed_lines(before, after)
        self.reported = Recompiling(steps=self._streak, compiles=self._compiles,
                                    seconds_per_step=self._seconds / self._streak, changed=changed, cause=cause)
        return self.reported
