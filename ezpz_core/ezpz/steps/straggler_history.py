"""Rank 0's bounded summary of every straggler report so far: its size never grows with the job's length.

Per rank (one number each, O(ranks)): its own best time (the individual
score), running mean and spread (Welford), how many reports in a row named it,
and the times of the last :data:`RECENT` reports (a ring). For the picture, a
heat map of at most :data:`MAX_ROWS` rank buckets x :data:`MAX_COLUMNS` time
columns: ranks are ordered by host (then rank) and cut into buckets of whole
runs of that order; each cell is the mean, over the reports in its column, of
the slowest rank in its bucket (so one slow rank in 64 still shows). When the
columns fill, neighbours merge in pairs and each column then spans twice as
many reports: 2,000 or 2 million reports take the same memory.

The per-rank arrays and the heat map's cells are written packed
(:func:`pack_ints`: ``{"int32_b64": ...}``, little-endian int32 in base64):
turning 100,000 numbers into JSON text, and back, would hold the GIL for tens
of milliseconds at 16,384 ranks; packed, it is about a millisecond each way.

:meth:`StragglerHistory.snapshot` copies what the report file needs (a few
tensor copies, O(ranks)); :meth:`HistorySnapshot.to_json` turns it into the
JSON the file holds, on the writer's thread. Times in the file are whole
microseconds: short to write and to read.
"""

from __future__ import annotations

import base64
import sys
from array import array
from collections.abc import Sequence
from typing import Any

from attrs import frozen

from ezpz.steps.straggler_scores import Scored

__all__ = ["MAX_COLUMNS", "MAX_ROWS", "RECENT", "SLOWEST", "HistorySnapshot", "StragglerHistory", "pack_ints",
           "unpack_ints"]

MAX_ROWS = 256
"""Rank buckets of the heat map (one rank each up to 256 ranks)."""
MAX_COLUMNS = 120
"""Time columns of the heat map (even: full columns merge in pairs)."""
RECENT = 60
"""Reports kept at full resolution (every rank's time), for the slowest ranks' rows of the text chart."""
SLOWEST = 16
"""Ranks the file carries recent times for: the slowest at the last report."""
LISTED = 256
"""Stragglers of the last report the file lists for the picture's labels."""
_BINS = 24
_PERCENTILES = (0, 1, 10, 50, 90, 99, 100)


class StragglerHistory:
    """The summary rank 0 keeps: per-rank running statistics, the last reports, and the heat map."""

    def __init__(self, hosts: Sequence[str], *, rows: int = MAX_ROWS, columns: int = MAX_COLUMNS,
                 recent: int = RECENT) -> None:
        import torch

        n = len(hosts)
        if n == 0:
            raise ValueError("StragglerHistory needs the host of at least one rank")
        if columns < 2 or columns % 2:
            raise ValueError(f"columns {columns!r} must be an even number of at least 2 (full columns merge in pairs)")
        index: dict[str, int] = {}
        self.host_names: list[str] = []
        per_rank = []
        for h in hosts:
            if h not in index:
                index[h] = len(self.host_names)
                self.host_names.append(h)
            per_rank.append(index[h])
        self.ranks = n
        self.host_index = torch.tensor(per_rank, dtype=torch.int32)
        order = torch.argsort(self.host_index.to(torch.int64) * n + torch.arange(n), stable=True)
        self.rows = min(n, rows)
        position = torch.empty(n, dtype=torch.int64)
        position[order] = torch.arange(n)
        self.row_of = position * self.rows // n
        starts = (torch.arange(self.rows) * n + self.rows - 1) // self.rows  # first position of each row
        ends = torch.cat([starts[1:], torch.tensor([n])])
        first, last = order[starts].tolist(), order[ends - 1].tolist()
        self.row_info = [{"ranks": [a, b], "n": int(e - s), "hosts": [hosts[a], hosts[b]]}
                         for a, b, s, e in zip(first, last, starts.tolist(), ends.tolist())]
        self.own_best = torch.full((n,), float("inf"), dtype=torch.float64)
        self.reports = 0
        self._mean = torch.zeros(n, dtype=torch.float64)
        self._m2 = torch.zeros(n, dtype=torch.float64)
        self.consecutive = torch.zeros(n, dtype=torch.int32)
        self.consecutive_hosts: dict[str, int] = {}
        self._recent = torch.zeros((recent, n), dtype=torch.float32)
        self._recent_steps: list[int] = []
        self._slot = 0
        self._cells = torch.zeros((columns, self.rows), dtype=torch.float64)
        self._col_reports = [0] * columns
        self._col_median = [0.0] * columns
        self._col_steps = [[0, 0] for _ in range(columns)]
        self._columns, self._ncols, self.span = columns, 0, 1
        self.latest: Scored | None = None

    def host_of(self, rank: int) -> str:
        return self.host_names[int(self.host_index[rank])]

    def add(self, scored: Scored) -> None:
        """Fold one report in: O(ranks), vectorised; nothing grows."""
        import torch

        took = scored.took
        if took.numel() != self.ranks:
            raise ValueError(f"a report of {took.numel()} ranks does not fit a history of {self.ranks}")
        measured = took > 0
        torch.minimum(self.own_best, torch.where(measured, took, self.own_best), out=self.own_best)
        self.reports += 1
        delta = took - self._mean
        self._mean += delta / self.reports
        self._m2 += delta * (took - self._mean)
        self.consecutive = torch.where(scored.slow, self.consecutive + 1, torch.zeros_like(self.consecutive))
        slow_hosts = torch.unique(self.host_index[scored.slow]).tolist()
        self.consecutive_hosts = {self.host_names[h]: self.consecutive_hosts.get(self.host_names[h], 0) + 1
                                  for h in slow_hosts}
        self._recent[self._slot % self._recent.shape[0]] = took.to(torch.float32)
        self._slot += 1
        self._recent_steps = (self._recent_steps + [scored.report.step])[-self._recent.shape[0]:]
        row_max = torch.zeros(self.rows, dtype=torch.float64).scatter_reduce_(0, self.row_of, took, "amax",
                                                                               include_self=False)
        self._fold_column(row_max, scored.report.median_s, scored.report.step)
        self.latest = scored

    def _fold_column(self, row_max: Any, median: float, step: int) -> None:
        c = self._ncols - 1
        if c < 0 or self._col_reports[c] >= self.span:
            if self._ncols == self._columns:
                self._merge_pairs()
            c = self._ncols
            self._ncols += 1
            self._cells[c].zero_()
            self._col_reports[c], self._col_median[c], self._col_steps[c] = 0, 0.0, [step, step]
        self._cells[c] += row_max
        self._col_reports[c] += 1
        self._col_median[c] += median
        self._col_steps[c][1] = step

    def _merge_pairs(self) -> None:
        half = self._columns // 2
        self._cells[:half] = self._cells[0::2] + self._cells[1::2]
        for i in range(half):
            a, b = 2 * i, 2 * i + 1
            self._col_reports[i] = self._col_reports[a] + self._col_reports[b]
            self._col_median[i] = self._col_median[a] + self._col_median[b]
            self._col_steps[i] = [self._col_steps[a][0], self._col_steps[b][1]]
        self._ncols, self.span = half, self.span * 2

    def consecutive_ranks(self, limit: int = 1024) -> dict[int, int]:
        """Ranks named in the last report with how many reports in a row named them (the longest runs first)."""
        import torch

        idx = torch.nonzero(self.consecutive).flatten()
        if idx.numel() > limit:
            idx = idx[torch.argsort(self.consecutive[idx], descending=True, stable=True)[:limit]]
        return {int(r): int(n) for r, n in zip(idx.tolist(), self.consecutive[idx].tolist())}

    def snapshot(self) -> HistorySnapshot:
        """What the report file needs, copied (a few O(ranks) tensor copies); JSON is made off the training thread."""
        if self.latest is None:
            raise ValueError("no report yet")
        s = self.latest
        recent = self._recent.shape[0]
        order = [(self._slot - len(self._recent_steps) + i) % recent for i in range(len(self._recent_steps))]
        slowest = s.took.topk(min(SLOWEST, self.ranks)).indices
        c = self._ncols
        return HistorySnapshot(
            report=s.report.to_dict(), ranks=self.ranks, reports=self.reports, span=self.span,
            host_names=list(self.host_names), host_index=self.host_index, took=s.took.clone(),
            best=self.own_best.clone(), mean=self._mean.clone(), m2=self._m2.clone(), device=s.device_s,
            slowest=slowest, slowest_recent=self._recent[:, slowest][order], recent_steps=list(self._recent_steps),
            stragglers=s.slowest_first[:LISTED].clone(), rows=self.row_info, cells=self._cells[:c].clone(),
            col_reports=self._col_reports[:c], col_median=self._col_median[:c],
            col_steps=[list(x) for x in self._col_steps[:c]])


def pack_ints(values: Sequence[int]) -> dict[str, str]:
    """``values`` (each within int32) as ``{"int32_b64": <little-endian int32, base64>}``."""
    packed = array("i", values)
    if sys.byteorder == "big":
        packed.byteswap()
    return {"int32_b64": base64.b64encode(packed.tobytes()).decode("ascii")}


def unpack_ints(value: Any, n: int | None = None) -> list[int] | None:
    """:func:`pack_ints` undone, checked (``n`` values when given); None when ``value`` is not that."""
    if not isinstance(value, dict) or not isinstance(value.get("int32_b64"), str):
        return None
    try:
        raw = base64.b64decode(value["int32_b64"], validate=True)
    except ValueError:
        return None
    if len(raw) % 4 or (n is not None and len(raw) != 4 * n):
        return None
    out = array("i")
    out.frombytes(raw)
    if sys.byteorder == "big":
        out.byteswap()
    return out.tolist()


@frozen(kw_only=True, eq=False)
class HistorySnapshot:
    """Copies of the history at one report; :meth:`to_json` builds the file's content (on the writer's thread)."""

    report: dict[str, Any]
    ranks: int
    reports: int
    span: int
    host_names: list[str]
    host_index: Any
    took: Any
    best: Any
    mean: Any
    m2: Any
    device: Any
    slowest: Any
    slowest_recent: Any
    recent_steps: list[int]
    stragglers: Any
    rows: list[dict[str, Any]]
    cells: Any
    col_reports: list[int]
    col_median: list[float]
    col_steps: list[list[int]]

    def to_json(self) -> dict[str, Any]:
        import torch

        def us(t: Any) -> list[int]:
            """Whole microseconds (at most 2**31 - 1: 35 minutes); -1 where there is no finite time."""
            v = (t.to(torch.float64) * 1e6).clamp(max=2**31 - 1)
            return torch.where(torch.isfinite(v), v + 0.5, torch.full_like(v, -1.0)).to(torch.int64).tolist()

        took = self.took
        ordered = torch.sort(took).values
        n = ordered.numel()
        percentiles = {str(p): int(round(float(ordered[round(p / 100 * (n - 1))]) * 1e6)) for p in _PERCENTILES}
        percentiles["50"] = int(round(self.report["median_s"] * 1e6))  # the report's median (even counts: the mean of two)
        lo, hi = float(ordered[0]), float(ordered[-1])
        bins = _BINS if hi > lo else 1
        at = ((took - lo) / ((hi - lo) or 1.0) * bins).to(torch.int64).clamp(0, bins - 1)
        counts = torch.bincount(at, minlength=bins).tolist()
        std = (self.m2 / (self.reports - 1)).clamp(min=0.0) ** 0.5 if self.reports > 1 else torch.zeros_like(self.m2)
        cells = self.cells / torch.tensor(self.col_reports, dtype=torch.float64).clamp(min=1)[:, None]
        edges = [int(round((lo + (hi - lo) * i / bins) * 1e6)) for i in range(bins + 1)]
        slowest = self.slowest.tolist()
        names = self.host_names
        data: dict[str, Any] = {
            "version": 2, "step": self.report["step"], "ranks": self.ranks, "reports": self.reports,
            "measure": self.report["measure"], "factor": self.report["factor"],
            "median_us": int(round(self.report["median_s"] * 1e6)),
            "hosts": names, "host_of_rank": pack_ints(self.host_index.tolist()),
            "latest_us": pack_ints(us(took)),
            "best_us": pack_ints(us(torch.where(torch.isinf(self.best), took, self.best))),
            "mean_us": pack_ints(us(self.mean)), "std_us": pack_ints(us(std)),
            "distribution": {"percentiles_us": percentiles, "edges_us": edges, "counts": counts},
            "recent_steps": self.recent_steps,
            "slowest": [{"rank": r, "host": names[int(self.host_index[r])], "recent_us": us(self.slowest_recent[:, i])}
                        for i, r in enumerate(slowest)],
            "stragglers": self.stragglers.tolist(),
            "heatmap": {"rows": self.rows, "reports_per_column": self.span,
                        "columns": [{"steps": s, "reports": k} for s, k in zip(self.col_steps, self.col_reports)],
                        "median_us": [int(round(m / k * 1e6)) if k else 0
                                      for m, k in zip(self.col_median, self.col_reports)],
                        "cells_us": pack_ints(us(cells.flatten()))},
        }
        if self.device is not None:
            data["device_us"] = pack_ints(us(self.device))
        return data
