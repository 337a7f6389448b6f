"""Straggler scoring (pure): the table of every rank's row in, the slow ranks named with scores out.

Scores follow nvidia-resiliency-ext's definitions, 0..1, 1 best: the
*relative* score is the best rank's time over this rank's time (0.5 = twice as
slow as the fastest rank); the *individual* score is this rank's own best time
(over the reports so far) over its time now (0.5 = twice as slow as it used to
be). A rank is a straggler when its time is more than ``factor`` times the
median of all ranks' times: the median, not the best, so that one fast rank
does not make every other rank a straggler.

Which time is compared: in a synchronous job every rank waits for the slowest
in its collectives, so the wall time between two ``rt.step()`` calls is about
the same on every rank. When every rank timed sections (``rt.range``), the sum
of their section times (the work, without the waiting outside them) is compared;
otherwise the step time. The report says which.

:func:`score_table` works on the gathered ``(ranks, ROW_SIZE)`` tensor
(:mod:`ezpz.steps.straggler_rows`) in a few vectorised passes, O(ranks); only
the named stragglers (at most :data:`DETAILED`) become records. torch is
imported when a table is scored, never at import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from attrs import field, frozen

from ezpz.steps.straggler_rows import NAMED, Col, RankTimes, StragglerVerdict, ratio, section_key

__all__ = ["DETAILED", "Scored", "Straggler", "StragglerReport", "score", "score_table", "table_of"]

DETAILED = 64
"""Stragglers a report describes in full (host, scores, sections), slowest first; ``count`` says how many in all."""
_IN_REASON = 8
_MAX_SECTION_KEYS = 64


@frozen(kw_only=True)
class Straggler:
    """One slow rank: where it runs, how slow, and its scores (0..1, 1 best)."""

    rank: int
    host: str
    step_s: float
    """The time compared (:attr:`StragglerReport.measure`): sections' sum or the step's wall time."""
    median_s: float
    relative: float
    individual: float
    sections: Mapping[str, float] = field(factory=dict)
    """Relative score of each section this rank timed (best rank's section time over its own)."""

    @property
    def reason(self) -> str:
        return (f"rank {self.rank} (host {self.host}): {self.step_s * 1e3:.1f} ms is "
                f"{self.step_s / self.median_s if self.median_s else float('inf'):.1f}x the median "
                f"{self.median_s * 1e3:.1f} ms; relative score {self.relative:.2f}, individual {self.individual:.2f}")

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "step_s": self.step_s, "median_s": self.median_s,
                "relative": self.relative, "individual": self.individual, "sections": dict(self.sections),
                "reason": self.reason}


@frozen(kw_only=True)
class StragglerReport:
    """One comparison of every rank: the yardsticks and the stragglers (the first :data:`DETAILED` in full)."""

    step: int
    factor: float
    measure: str
    """``"sections"`` (every rank timed ``rt.range`` sections: their sum) or ``"step"`` (wall time per step)."""
    median_s: float
    best_s: float
    slowest_s: float
    ranks: int
    """How many ranks were compared."""
    count: int
    """How many of them are stragglers (``stragglers`` holds the slowest :data:`DETAILED`)."""
    stragglers: tuple[Straggler, ...]
    reason: str

    @property
    def straggler_hosts(self) -> tuple[str, ...]:
        return tuple(sorted({s.host for s in self.stragglers}))

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "factor": self.factor, "measure": self.measure, "median_s": self.median_s,
                "best_s": self.best_s, "slowest_s": self.slowest_s, "ranks": self.ranks, "count": self.count,
                "stragglers": [s.to_dict() for s in self.stragglers], "reason": self.reason}


@frozen(kw_only=True, eq=False)
class Scored:
    """A scored table: the report, and per-rank tensors (rank 0 keeps running statistics from them)."""

    report: StragglerReport
    took: Any
    """Each rank's compared time (float64 tensor, one per rank)."""
    relative: Any
    individual: Any
    slow: Any
    """Which ranks are stragglers (bool tensor)."""
    slowest_first: Any
    """The stragglers' ranks, slowest first (int64 tensor, every straggler)."""
    device_s: Any | None
    """Each rank's device step time (NaN where none), or None when no rank had a device timer."""

    def verdict(self) -> list[float]:
        """The row rank 0 broadcasts (:class:`~ezpz.steps.straggler_rows.StragglerVerdict`)."""
        r = self.report
        return StragglerVerdict(step=r.step, measure=r.measure, median_s=r.median_s, best_s=r.best_s,
                                factor=r.factor, count=r.count, ranks=tuple(self.slowest_first[:NAMED].tolist()),
                                rank=0, took_s=0.0, relative=1.0, individual=1.0).row()


def score_table(table: Any, *, factor: float, own_best: Any = None, host_of: Callable[[int], str] | None = None,
                names: Mapping[int, str] | None = None) -> Scored:
    """Score the gathered ``table`` (row ``r`` is rank ``r``'s :meth:`RankTimes.row`) in O(ranks).

    ``own_best`` is each rank's best compared time so far (a float64 tensor, +inf where none yet);
    ``host_of`` names a rank's host; ``names`` maps section keys to names.
    """
    import torch

    if table.ndim != 2 or table.shape[0] == 0 or table.shape[1] < Col.SLOTS:
        raise ValueError(f"score_table() needs a (ranks, row) table with at least one rank, not {tuple(table.shape)}")
    if not factor > 1.0:
        raise ValueError(f"factor {factor!r} must be greater than 1 (how many times the median is slow)")
    table = table.to(torch.float64)
    host_of = host_of or (lambda r: "?")
    names = names or {}
    work = table[:, Col.WORK_S]
    sections = bool((~torch.isnan(work)).all())
    measure = "sections" if sections else "step"
    took = (work if sections else table[:, Col.STEP_S]).clone()
    took = torch.nan_to_num(took, nan=0.0, posinf=0.0).clamp_(min=0.0)  # hostile rows: never NaN scores
    n = took.numel()
    lower = took.kthvalue((n + 1) // 2).values  # two selections, O(ranks): the median of an even count is their mean
    median = float((lower + took.kthvalue(n // 2 + 1).values) / 2) if n % 2 == 0 else float(lower)
    best, slowest = float(took.min()), float(took.max())
    safe = torch.where(took > 0, took, torch.ones_like(took))
    relative = torch.where(took > 0, (best / safe).clamp(0.0, 1.0), torch.ones_like(took))
    prior = took if own_best is None else torch.minimum(own_best.to(torch.float64), took)
    individual = torch.where(took > 0, (prior / safe).clamp(0.0, 1.0), torch.ones_like(took))
    slow = took > factor * median
    idx = torch.nonzero(slow).flatten()
    slowest_first = idx[torch.argsort(took[idx], descending=True, stable=True)]
    named = slowest_first[:DETAILED].tolist()
    section_best = _section_best(torch, table, [table[r] for r in named])
    stragglers = tuple(
        Straggler(rank=r, host=host_of(r), step_s=float(took[r]), median_s=median, relative=float(relative[r]),
                  individual=float(individual[r]), sections=_section_scores(table[r], section_best, names))
        for r in named)
    step = int(table[:, Col.STEP].max())
    count = int(idx.numel())
    what = "time in sections" if sections else "step time"
    if count:
        more = f"; and {count - _IN_REASON} more" if count > _IN_REASON else ""
        reason = (f"{count} of {n} ranks slower than {factor:g}x the median {what} {median * 1e3:.1f} ms at step "
                  f"{step}: " + "; ".join(s.reason for s in stragglers[:_IN_REASON]) + more)
    else:
        reason = (f"no straggler at step {step}: every one of {n} ranks within {factor:g}x the median "
                  f"{what} {median * 1e3:.1f} ms (slowest {slowest * 1e3:.1f} ms)")
    device = table[:, Col.DEVICE_S]
    report = StragglerReport(step=step, factor=factor, measure=measure, median_s=median, best_s=best,
                             slowest_s=slowest, ranks=n, count=count, stragglers=stragglers, reason=reason)
    return Scored(report=report, took=took, relative=relative, individual=individual, slow=slow,
                  slowest_first=slowest_first, device_s=None if bool(torch.isnan(device).all()) else device.clone())


def _section_best(torch: Any, table: Any, rows: Sequence[Any]) -> dict[int, float]:
    """The best (smallest) time of each section key the given rows carry, over every rank's row."""
    keys = table[:, Col.SLOTS::2]
    secs = table[:, Col.SLOTS + 1::2]
    wanted: list[int] = []
    for row in rows:
        for k in row[Col.SLOTS::2].tolist():
            if k >= 0 and int(k) not in wanted and len(wanted) < _MAX_SECTION_KEYS:
                wanted.append(int(k))
    if not wanted:
        return {}
    if bool((keys == keys[0]).all()):  # every rank timed the same sections (the usual case): a column each
        mins = torch.where(torch.isnan(secs), torch.full_like(secs, float("inf")), secs).min(dim=0).values
        return {int(k): float(m) for k, m in zip(keys[0].tolist(), mins.tolist())
                if k >= 0 and int(k) in wanted and m != float("inf")}
    best = {}
    for k in wanted:
        found = secs[(keys == float(k)) & ~torch.isnan(secs)]
        if found.numel():
            best[k] = float(found.min())
    return best


def _section_scores(row: Any, best: Mapping[int, float], names: Mapping[int, str]) -> dict[str, float]:
    values = row[Col.SLOTS:].tolist()
    out = {}
    for key, seconds in zip(values[0::2], values[1::2]):
        if key >= 0 and seconds == seconds and int(key) in best:
            out[names.get(int(key), f"section {int(key):08x}")] = ratio(best[int(key)], seconds)
    return dict(sorted(out.items()))


def table_of(times: Sequence[RankTimes]) -> Any:
    """The table the exchange would gather from these ranks' times (ranks 0..n-1, in any order)."""
    import torch

    ordered = sorted(times, key=lambda t: t.rank)
    if [t.rank for t in ordered] != list(range(len(ordered))):
        raise ValueError(f"the ranks must be 0..{len(ordered) - 1} once each, not {[t.rank for t in ordered]}")
    return torch.tensor([t.row() for t in ordered], dtype=torch.float64)


def score(times: Sequence[RankTimes], *, factor: float, own_best: Mapping[int, float] | None = None) -> StragglerReport:
    """Compare the ranks' ``times`` (one per rank, ranks 0..n-1); ``own_best`` is each rank's best time so far."""
    import torch

    if not times:
        raise ValueError("score() needs the times of at least one rank")
    table = table_of(times)
    best = None
    if own_best:
        best = torch.tensor([own_best.get(r, float("inf")) for r in range(len(times))], dtype=torch.float64)
    hosts = {t.rank: t.host for t in times}
    names = {}
    for t in times:
        names.update({section_key(n): n for n in t.sections})
    return score_table(table, factor=factor, own_best=best, host_of=hosts.__getitem__, names=names).report

