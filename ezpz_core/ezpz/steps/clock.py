"""The step clock behind ``Runtime.step()``: how many training steps ended, and how long the recent ones took."""

from __future__ import annotations

import time
from collections import deque

__all__ = ["StepClock"]


class StepClock:
    """Counts step boundaries and keeps the wall time between the last ``keep`` of them.

    ``tick()`` is the whole per-step cost: one ``perf_counter`` read and one
    bounded append. A step's time runs from one boundary to the next, so the
    first boundary only starts the clock: ``recent()`` holds ``count - 1``
    durations at most.
    """

    __slots__ = ("_count", "_last", "_recent")

    def __init__(self, keep: int = 256) -> None:
        if keep < 1:
            raise ValueError(f"StepClock(keep={keep!r}): keep must be a positive number of steps")
        self._count = 0
        self._last: float | None = None
        self._recent: deque[float] = deque(maxlen=keep)

    def tick(self) -> int:
        """Mark a step boundary now; return how many steps have ended."""
        now = time.perf_counter()
        if self._last is not None:
            self._recent.append(now - self._last)
        self._last = now
        self._count += 1
        return self._count

    @property
    def count(self) -> int:
        """Steps ended so far (boundaries marked)."""
        return self._count

    @property
    def last_s(self) -> float | None:
        """The most recent step's wall time in seconds, or None before the second boundary."""
        return self._recent[-1] if self._recent else None

    def recent(self) -> tuple[float, ...]:
        """The wall times of the recent steps, oldest first, in seconds."""
        return tuple(self._recent)

    def since_last(self) -> float | None:
        """Seconds since the last boundary (how long the current step has run), or None before the first."""
        return None if self._last is None else time.perf_counter() - self._last
