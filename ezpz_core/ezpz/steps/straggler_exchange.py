"""The periodic straggler exchange behind ``Runtime.step()``: every N steps, one small all-gather, then a report.

Every rank calls :meth:`StragglerWatch.on_step` from ``rt.step()``; on every
``every``-th step each rank sends the median of its step times (and of its
:meth:`~ezpz.runtime.Runtime.range` sections) since the last report, in one
``all_gather_object`` under the process group's timeout. Nothing is
synchronised in between. Every rank scores the same gathered times
(:func:`ezpz.steps.straggler_scores.score`); rank 0 logs the report (a warning when a rank
is slow) and writes ``stragglers.json`` beside the failure records
(``EZPZ_FAILURE_DIR``), atomically, with the history of every rank's step time
for the chart ``ezpz launch`` draws.
"""

from __future__ import annotations

import socket
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ezpz.primitives import logger as _log
from ezpz.primitives.atomic_file import write_json_atomically
from ezpz.steps.straggler_scores import RankTimes, StragglerReport, score

__all__ = ["REPORT_NAME", "StragglerWatch"]

REPORT_NAME = "stragglers.json"
_MAX_HISTORY = 2000

log = _log.get_logger("ezpz.steps.straggler_scores")


class StragglerWatch:
    """One rank's side of straggler detection: section times, the exchange, the report."""

    def __init__(self, *, rank: int, world_size: int, every: int, factor: float, report_dir: str | None,
                 attempt: int = 0, host: str | None = None, gather: Any = None, new_event: Any = None,
                 timer: str = "wall clock") -> None:
        self.rank, self.world_size, self.every, self.factor = rank, world_size, every, factor
        self.attempt = attempt
        self.host = host or socket.gethostname()
        self.report_dir = Path(report_dir) if report_dir else None
        self._gather = gather
        self._new_event, self.timer, self._event = new_event, timer, None
        self._sections: dict[str, list[float]] = defaultdict(list)
        self._own_best: dict[int, float] = {}
        self._history: list[dict[str, Any]] = []
        self._consecutive: dict[str, int] = {}
        self._consecutive_ranks: dict[int, int] = {}
        self._last_count = 0
        self.last: StragglerReport | None = None

    def section(self, name: str, seconds: float) -> None:
        """Add one timed pass through the section ``name`` (from ``rt.range``)."""
        self._sections[name].append(seconds)

    def due(self, count: int) -> bool:
        """Whether step ``count`` is a report step (every rank answers the same: it counts its own steps)."""
        return count % self.every == 0

    def report(self, count: int, recent: tuple[float, ...]) -> StragglerReport:
        """On a report step, on every rank: this rank's times since the last report, the exchange, the scores."""
        steps = min(count - self._last_count, len(recent))
        self._last_count = count
        window = recent[len(recent) - steps:] if steps > 0 else ()
        mine = RankTimes(rank=self.rank, host=self.host, step=count,
                         step_s=statistics.median(window) if window else 0.0, steps=len(window),
                         sections={n: statistics.median(v) for n, v in self._sections.items() if v},
                         device_s=self._device_step_s(steps))
        self._sections.clear()
        gathered = self._exchange(mine)
        report = score(gathered, factor=self.factor, own_best=self._own_best)
        for t in gathered:
            took = t.work_s if report.measure == "sections" else t.step_s
            if t.steps:
                self._own_best[t.rank] = min(took, self._own_best.get(t.rank, took))
        self._remember(gathered, report)
        self.last = report
        if self.rank == 0:
            self._publish(gathered, report)
        return report

    def _device_step_s(self, steps: int) -> float | None:
        """The device timer's mean step time since the last report: one event per report, synchronised here."""
        if self._new_event is None:
            return None
        try:
            end = self._new_event()
            end.record()
            start, self._event = self._event, end
            if start is None or steps <= 0:
                return None
            end.synchronize()
            return max(0.0, start.elapsed_time(end) / 1e3 / steps)  # elapsed_time is in milliseconds
        except Exception as error:  # a broken device timer must not end training: the wall clock remains
            log.warning("device_timer_failed", timer=self.timer, error=f"{type(error).__name__}: {error}",
                        fallback="wall clock only")
            self._new_event = self._event = None
            return None

    def _exchange(self, mine: RankTimes) -> list[RankTimes]:
        if self._gather is not None:
            return [RankTimes.from_dict(d) for d in self._gather(mine.to_dict())]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, mine.to_dict())  # bounded by the process group's timeout (EZPZ_TIMEOUT)
        return [RankTimes.from_dict(d) for d in out]

    def _remember(self, gathered: list[RankTimes], report: StragglerReport) -> None:
        entry: dict[str, Any] = {"step": report.step, "step_s": {str(t.rank): t.step_s for t in gathered},
                                 "work_s": {str(t.rank): t.work_s for t in gathered}}
        if any(t.device_s is not None for t in gathered):
            entry["device_s"] = {str(t.rank): t.device_s for t in gathered}
        self._history.append(entry)
        del self._history[:-_MAX_HISTORY]
        slow = set(report.straggler_hosts)
        self._consecutive = {h: self._consecutive.get(h, 0) + 1 for h in slow}
        ranks = {s.rank for s in report.stragglers}
        self._consecutive_ranks = {r: self._consecutive_ranks.get(r, 0) + 1 for r in ranks}

    def _publish(self, gathered: list[RankTimes], report: StragglerReport) -> None:
        if report.stragglers:
            log.warning("straggler", step=report.step,
                        ranks=",".join(f"{s.rank}@{s.host}" for s in report.stragglers), reason=report.reason)
        else:
            log.info("no_straggler", step=report.step, reason=report.reason)
        if self.report_dir is None:
            return
        data = {"version": 1, "attempt": self.attempt, "time": time.time(), "every": self.every,
                "factor": self.factor, "timer": self.timer, "report": report.to_dict(),
                "hosts": {str(t.rank): t.host for t in gathered},
                "consecutive": dict(self._consecutive),
                "consecutive_ranks": {str(r): n for r, n in self._consecutive_ranks.items()},
                "history": self._history}
        try:
            self.report_dir.mkdir(parents=True, exist_ok=True)
            write_json_atomically(self.report_dir / REPORT_NAME, data)
        except OSError as error:  # the report is for people: a full disk must not end training
            log.warning("straggler_report_not_written", path=str(self.report_dir / REPORT_NAME), error=str(error))
