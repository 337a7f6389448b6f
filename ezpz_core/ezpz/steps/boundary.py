"""A lazy device's step boundary, once per training step: at ``rt.step()``, or after ``optimizer.step()``.

A lazy device (XLA) builds one graph until its plugin's ``mark`` (``torch_xla.sync()``) compiles and runs
it. A script written for CUDA never calls ``rt.step()``; so ``setup()`` reaches its loop through torch's
public global optimizer step hook (``torch.optim.optimizer.register_optimizer_step_post_hook``) and the
mark runs after every ``optimizer.step()``. A script that calls ``rt.step()`` gets exactly one mark per
step: from its first ``rt.step()`` on, ``rt.step()`` is the boundary and the hook stands aside (in that
first step, ``rt.step()`` does not mark again what the hook just marked). ``teardown()`` removes the hook;
``EZPZ_STEP_HOOK=0`` never installs it.

After each mark, where the plugin offers its compile counter, :class:`~ezpz.steps.recompiles.RecompileWatch`
names a graph that compiles anew every step.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ezpz.primitives import logger as _log

if TYPE_CHECKING:
    from ezpz.decisions import StepBoundary
    from ezpz.steps.recompiles import RecompileWatch

__all__ = ["StepMarker"]


class StepMarker:
    """Runs the device's step boundary (``StepBoundary.mark``) once per step; counts what ran it."""

    __slots__ = ("_compiles", "_deferred", "_explicit", "_graph_text", "_handle", "_hook_marked", "_optimizer",
                 "_ranges", "_watch", "by_hook", "mark", "marks", "optimizer_hook")

    def __init__(self, boundary: StepBoundary | None, *, optimizer_hook: bool = False) -> None:
        self.mark: Callable[[], Any] | None = boundary.mark if boundary is not None else None
        self.optimizer_hook = optimizer_hook and self.mark is not None
        """Whether :meth:`install` registers the optimizer hook (a lazy device, ``EZPZ_STEP_HOOK`` on)."""
        self._compiles = boundary.compiles if self.mark is not None and boundary is not None else None
        self._graph_text = boundary.graph_text if self._compiles is not None and boundary is not None else None
        self._watch: RecompileWatch | None = None
        if self._compiles is not None:  # a lazy device that counts its compilations; no other loads the watch
            from ezpz.steps.recompiles import RecompileWatch

            self._watch = RecompileWatch()
        self._handle: Any = None
        self._explicit = False  # the script called rt.step(): from then on, rt.step() is the boundary
        self._hook_marked = False  # the hook marked since the last rt.step()
        self._optimizer: weakref.ref[Any] | None = None
        self._ranges = 0  # rt.range() blocks open: a boundary due inside one runs when the outermost closes
        self._deferred = False
        self.marks = 0
        """Boundaries run so far (by either path)."""
        self.by_hook = 0
        """Of those, the ones the optimizer hook ran."""

    @property
    def installed(self) -> bool:
        return self._handle is not None

    def install(self) -> None:
        """Register the optimizer hook (``setup()``), where the device is lazy and the hook is wanted."""
        if self.optimizer_hook and self._handle is None:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self._handle = register_optimizer_step_post_hook(self._after_optimizer_step)

    def remove(self) -> None:
        """Remove the optimizer hook (``teardown()``); idempotent."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.remove()

    def at_step(self) -> None:
        """``rt.step()``: the boundary, unless the hook already ran it for this step."""
        if self.mark is None:
            return
        self._explicit = True
        if self._hook_marked:
            self._hook_marked = False
            return
        self._run()

    def enter_range(self) -> None:
        """An ``rt.range()`` opened (a device trace scope, inside which XLA refuses to end a graph)."""
        self._ranges += 1

    def exit_range(self) -> None:
        """An ``rt.range()`` closed: run the boundary the hook deferred, once the outermost one is closed."""
        self._ranges = max(self._ranges - 1, 0)
        if self._ranges == 0 and self._deferred:
            self._deferred = False
            self._run()

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._watch is not None:
            self._optimizer = weakref.ref(optimizer)
        if self._explicit:
            return
        if self._ranges:
            self._deferred = True  # optimizer.step() inside rt.range("step"): the boundary runs as the range closes
        else:
            self._run()
        self._hook_marked = True
        self.by_hook += 1

    def _run(self) -> None:
        watch = self._watch
        if watch is not None and watch.reported is not None:
            watch = None  # said once: no more reading of counters
        graph = self._read_graph() if watch is not None and watch.wants_graph() else None
        self.mark()  # type: ignore[misc]  # _run is only reached with a mark
        self.marks += 1
        if watch is not None:
            self._judge(watch, graph)

    def _read_graph(self) -> tuple[str, ...] | None:
        """The graph about to run as lines (the plugin's ``graph_text``), from the last stepped optimizer's parameters."""
        optimizer = self._optimizer() if self._optimizer is not None else None
        if optimizer is None or self._graph_text is None:
            return None
        params = [p for group in optimizer.param_groups for p in group["params"]]
        try:
            return tuple(self._graph_text(params))
        except Exception as err:  # the plugin's reader failed: never the training's problem
            self._graph_text = None
            _log.get_logger("ezpz.step").debug("graph_text_unreadable", error=repr(err))
            return None

    def _judge(self, watch: RecompileWatch, graph: tuple[str, ...] | None) -> None:
        try:
            count, seconds = self._compiles()  # type: ignore[misc]  # a watch exists only with a counter
        except Exception as err:  # the plugin's counter failed: stop watching, keep training
            self._watch = None
            _log.get_logger("ezpz.step").debug("compile_counter_unreadable", error=repr(err))
            return
        found = watch.observe(int(count), float(seconds), graph)
        if found is not None:
            _log.get_logger("ezpz.step").warning(
                "graph_recompiles_every_step", steps=found.steps, compiles=found.compiles,
                compile_s_per_step=round(found.seconds_per_step, 3),
                changed=" | ".join(found.changed) if found.changed else "none seen", cause=found.cause,
                fix=found.fix())

    @property
    def recompiling(self) -> Any:
        """The finding :class:`~ezpz.steps.recompiles.RecompileWatch` reported, or None."""
        return self._watch.reported if self._watch is not None else None
