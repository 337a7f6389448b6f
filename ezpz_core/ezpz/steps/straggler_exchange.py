"""The periodic straggler exchange behind ``Runtime.step()``: every N steps, one fixed-size gather, then a verdict.

Every rank calls :meth:`StragglerWatch.report` from ``rt.step()`` on every
``every``-th step. Each rank sends one row of a few numbers (its median step
time and section times since the last report, :mod:`ezpz.steps.straggler_rows`)
to rank 0 in one ``gather`` of a tensor on the process group's device; rank 0
scores the table (:mod:`ezpz.steps.straggler_scores`, O(ranks)), folds it into a
bounded summary (:mod:`ezpz.steps.straggler_history`) and broadcasts one
verdict row back; every rank then knows the stragglers and its own scores
(O(1)). Nothing is pickled; nothing is synchronised in between; both
collectives are bounded by the process group's timeout. Host names travel
once, at the first report, as fixed-size byte rows.

Rank 0 logs the report (a warning when a rank is slow) and, with a report
directory (``EZPZ_FAILURE_DIR``), hands the files to a writer thread
(:mod:`ezpz.steps.straggler_writer`): ``stragglers.json``, small (the verdict,
the named stragglers, the consecutive counts; what ``ezpz launch`` follows
while the job runs), and ``stragglers-history.json`` (per-rank statistics, the
slowest ranks' recent times, the heat map; read once, at the attempt's end).

``gather=`` and ``broadcast=`` replace the two collectives (tests, and the
benchmark that simulates thousands of ranks through this same code).
"""

from __future__ import annotations

import socket
import statistics
import time
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from ezpz.primitives import logger as _log
from ezpz.steps.straggler_history import StragglerHistory
from ezpz.steps.straggler_rows import (HOST_BYTES, ROW_SIZE, VERDICT_SIZE, RankTimes, StragglerVerdict,
                                       host_row, hosts_from_rows, section_key)
from ezpz.steps.straggler_scores import Scored, score_table
from ezpz.steps.straggler_writer import ReportWriter

__all__ = ["HISTORY_NAME", "REPORT_NAME", "StragglerWatch"]

REPORT_NAME = "stragglers.json"
HISTORY_NAME = "stragglers-history.json"
_SAMPLES = 256  # section times kept per section between reports (the median is over these)
_SECTION_NAMES = 64  # distinct section names kept between reports

log = _log.get_logger("ezpz.steps.straggler_scores")


class StragglerWatch:
    """One rank's side of straggler detection: section times, the exchange, the verdict; on rank 0 the report."""

    def __init__(self, *, rank: int, world_size: int, every: int, factor: float, report_dir: str | None,
                 attempt: int = 0, host: str | None = None, gather: Any = None, broadcast: Any = None,
                 new_event: Any = None, timer: str = "wall clock", device: Any = None) -> None:
        """``gather(tensor)``: the ``(world_size, len)`` stack of every rank's tensor on rank 0, None elsewhere;
        ``broadcast(tensor)``: rank 0's tensor on every rank. Default: ``torch.distributed`` on ``device``."""
        self.rank, self.world_size, self.every, self.factor = rank, world_size, every, factor
        self.attempt = attempt
        self.host = host or socket.gethostname()
        self.report_dir = Path(report_dir) if report_dir else None
        self._gather, self._broadcast, self._device = gather, broadcast, device
        self._coll_device: Any = None
        self._new_event, self.timer, self._event = new_event, timer, None
        self._sections: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=_SAMPLES))
        self._names: dict[int, str] = {}
        self._own_best: float | None = None
        self._own_consecutive = 0
        self._hosts_sent = False
        self._last_count = 0
        self._buffers: dict[tuple[Any, int], tuple[Any, list[Any]]] = {}
        self.history: StragglerHistory | None = None
        """Rank 0: the bounded summary of the reports so far."""
        self.writer: ReportWriter | None = None
        self.sent: RankTimes | None = None
        """What this rank sent at the last report."""
        self.last: StragglerVerdict | None = None
        self.last_scored: Scored | None = None
        """Rank 0: the last report with every rank's scores."""

    def section(self, name: str, seconds: float) -> None:
        """Add one timed pass through the section ``name`` (from ``rt.range``)."""
        if name in self._sections or len(self._sections) < _SECTION_NAMES:
            self._sections[name].append(seconds)

    def due(self, count: int) -> bool:
        """Whether step ``count`` is a report step (every rank answers the same: it counts its own steps)."""
        return count % self.every == 0

    def report(self, count: int, recent: tuple[float, ...]) -> StragglerVerdict:
        """On a report step, on every rank: this rank's times since the last report, the exchange, the verdict."""
        import torch

        steps = min(count - self._last_count, len(recent))
        self._last_count = count
        window = recent[len(recent) - steps:] if steps > 0 else ()
        mine = RankTimes(rank=self.rank, host=self.host, step=count,
                         step_s=statistics.median(window) if window else 0.0, steps=len(window),
                         sections={n: statistics.median(v) for n, v in self._sections.items() if v},
                         device_s=self._device_step_s(steps))
        self._names.update({section_key(n): n for n in mine.sections})
        self._sections.clear()
        self.sent = mine
        if not self._hosts_sent:
            self._hosts_sent = True
            hosts = self._collect(torch.tensor(host_row(self.host), dtype=torch.uint8), HOST_BYTES)
            if hosts is not None:
                self.history = StragglerHistory(hosts_from_rows(bytes(hosts.flatten().tolist())))
        table = self._collect(torch.tensor(mine.row(), dtype=torch.float64), ROW_SIZE)
        if table is not None and self.history is not None:
            scored = score_table(table, factor=self.factor, own_best=self.history.own_best,
                                 host_of=self.history.host_of, names=self._names)
            self.history.add(scored)
            self.last_scored = scored
            sent = torch.tensor(scored.verdict(), dtype=torch.float64)
        else:
            sent = torch.zeros(VERDICT_SIZE, dtype=torch.float64)
        row = self._share(sent).tolist()
        took = mine.work_s if row[1] >= 0.5 else mine.step_s
        verdict = StragglerVerdict.from_row(row, rank=self.rank, took_s=took, own_best_s=self._own_best)
        if mine.steps:
            self._own_best = took if self._own_best is None else min(self._own_best, took)
        self._own_consecutive = self._own_consecutive + 1 if verdict.is_straggler else 0
        self.last = verdict
        if self.rank == 0 and self.last_scored is not None:
            self._publish(self.last_scored)
        return verdict

    @property
    def consecutive(self) -> int:
        """How many reports in a row named this rank."""
        return self._own_consecutive

    def close(self) -> None:
        """Write the last report now (bounded); the writer also does so at exit."""
        if self.writer is not None:
            self.writer.close()

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

    def _collect(self, mine: Any, width: int) -> Any:
        """Every rank's ``mine`` stacked on rank 0 (a CPU tensor of ``world_size`` rows); None on other ranks."""
        if self._gather is not None:
            got = self._gather(mine)
        else:
            got = self._dist_gather(mine, width)
        if got is None or self.rank != 0:
            return None
        if tuple(got.shape) != (self.world_size, width):
            raise ValueError(f"the straggler exchange gathered a table of shape {tuple(got.shape)}, not "
                             f"({self.world_size}, {width})")
        return got.cpu()

    def _dist_gather(self, mine: Any, width: int) -> Any:
        import torch.distributed as dist

        device = self._collective_device()
        key = (mine.dtype, width)
        if key not in self._buffers:  # rank 0: one buffer and its row views, made once, reused at every report
            table = mine.new_empty((self.world_size, width), device=device) if self.rank == 0 else None
            self._buffers[key] = (table, list(table.unbind(0)) if table is not None else [])
        table, rows = self._buffers[key]
        dist.gather(mine.to(device), rows if self.rank == 0 else None, dst=0)  # bounded by the group's timeout
        if key[1] == HOST_BYTES:
            del self._buffers[key]  # host names travel once
        return table

    def _share(self, verdict: Any) -> Any:
        if self._broadcast is not None:
            return self._broadcast(verdict)
        import torch.distributed as dist

        out = verdict.to(self._collective_device())
        dist.broadcast(out, src=0)
        return out.cpu()

    def _collective_device(self) -> Any:
        """The device the group's collectives take tensors on: the job's device, unless gloo serves its type."""
        if self._coll_device is None:
            import torch
            import torch.distributed as dist

            device = torch.device(self._device if self._device is not None else "cpu")
            parts: dict[str, str] = {}
            try:  # "nccl", "gloo", "cpu:gloo,cuda:nccl"
                for part in str(dist.get_backend()).split(","):
                    kind, _, name = part.rpartition(":")
                    parts[kind or "*"] = name
            except Exception:  # not a group torch knows: the CPU is always served
                parts = {}
            served_by = parts.get(device.type, parts.get("*", "gloo"))
            self._coll_device = torch.device("cpu") if device.type == "cpu" or served_by == "gloo" else device
        return self._coll_device

    def _publish(self, scored: Scored) -> None:
        report, history = scored.report, self.history
        if report.count:
            shown = ",".join(f"{s.rank}@{s.host}" for s in report.stragglers[:8])
            more = f",+{report.count - 8}" if report.count > 8 else ""
            log.warning("straggler", step=report.step, ranks=shown + more, reason=report.reason)
        else:
            log.info("no_straggler", step=report.step, reason=report.reason)
        if self.report_dir is None or history is None:
            return
        head = {"version": 2, "attempt": self.attempt, "time": time.time(), "every": self.every,
                "factor": self.factor, "timer": self.timer, "ranks": self.world_size, "report": report.to_dict(),
                "consecutive": dict(history.consecutive_hosts),
                "consecutive_ranks": {str(r): n for r, n in history.consecutive_ranks().items()},
                "history": HISTORY_NAME}
        snapshot = history.snapshot()
        if self.writer is None:
            self.writer = ReportWriter(self.report_dir)
        self.writer.submit(lambda: {REPORT_NAME: head}, lambda: {HISTORY_NAME: snapshot.to_json()})
