"""Learned hang budgets: how long one training step may run before the rank is named as stalled (pure).

After a warm-up of ``warmup`` steps the budget is ``factor`` x the recent
steps' 99th percentile, never below ``floor_s`` and never above the timeout
(``EZPZ_TIMEOUT``); before it, the timeout itself. The watchdog
(:mod:`ezpz.steps.hang_watch`) asks :func:`hang_budget` with the step times
``rt.step()`` recorded (:class:`~ezpz.steps.clock.StepClock`); every answer
says how it was derived, for the failure record and ``rt.explain()``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from ezpz.inputs.settings import HangSettings

__all__ = ["Budget", "HangSettings", "hang_budget", "p99"]


class Budget(NamedTuple):
    """How long the current step may run (seconds), whether it was learned, and how it was derived."""

    seconds: float
    learned: bool
    how: str


def p99(times: Sequence[float]) -> float:
    """The 99th percentile of ``times`` (nearest rank); 0.0 for none."""
    if not times:
        return 0.0
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(0.99 * len(ordered)) - 1))]


def hang_budget(recent: Sequence[float], steps: int, settings: HangSettings, timeout_s: float) -> Budget:
    """The budget for the step after ``steps`` ended ones whose recent wall times are ``recent`` (pure)."""
    if not settings.enabled:
        return Budget(timeout_s, False, f"EZPZ_TIMEOUT ({timeout_s:g} s): learned budgets are off (EZPZ_HANG_BUDGET=0)")
    if steps < settings.warmup or not recent:
        return Budget(timeout_s, False, f"EZPZ_TIMEOUT ({timeout_s:g} s) during the warm-up: {steps} of "
                                        f"{settings.warmup} steps seen (EZPZ_HANG_BUDGET_WARMUP)")
    q = p99(recent)
    raw = settings.factor * q
    seconds = min(max(raw, settings.floor_s), timeout_s)
    bound = ("the floor EZPZ_HANG_BUDGET_FLOOR" if seconds == settings.floor_s and raw < settings.floor_s else
             "EZPZ_TIMEOUT" if seconds == timeout_s and raw > timeout_s else "")
    how = (f"{settings.factor:g} x p99 {q:.3g} s of the last {len(recent)} steps = {raw:.3g} s"
           + (f", raised to {bound} {seconds:g} s" if bound.startswith("the floor") else
              f", capped at {bound} {seconds:g} s" if bound else ""))
    return Budget(seconds, True, how)
