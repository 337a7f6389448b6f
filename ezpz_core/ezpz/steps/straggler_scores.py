"""Straggler scoring (pure): each rank's recent step and section times in, the slow ranks named with scores out.

Scores follow nvidia-resiliency-ext's definitions, 0..1, 1 best: the
*relative* score is the best rank's time over this rank's time (0.5 = twice as
slow as the fastest rank); the *individual* score is this rank's own best time
(over the reports so far) over its time now (0.5 = twice as slow as it used to
be). A rank is a straggler when its step time is more than ``factor`` times the
median of all ranks' step times: the median, not the best, so that one fast
rank does not make every other rank a straggler.

Which time is compared: in a synchronous job every rank waits for the slowest
in its collectives, so the wall time between two ``rt.step()`` calls is about
the same on every rank. When every rank timed sections (``rt.range``), the sum
of their section times (the work, without the waiting outside them) is compared;
otherwise the step time. The report says which.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from attrs import field, frozen

__all__ = ["RankTimes", "Straggler", "StragglerReport", "score"]


def _seconds(value: object) -> float:
    number = float(value)  # type: ignore[arg-type]
    if not number >= 0.0 or number == float("inf"):
        raise ValueError(f"a time of {value!r} s is not a finite non-negative number")
    return number


def _sections(value: Mapping[str, Any]) -> dict[str, float]:
    return {str(k): _seconds(v) for k, v in dict(value).items()}


@frozen(kw_only=True)
class RankTimes:
    """What one rank sends at a report: its median step time (and sections') over the steps since the last one."""

    rank: int
    host: str
    step: int
    step_s: float = field(converter=_seconds)
    steps: int = 0
    """How many step times the median is over."""
    sections: Mapping[str, float] = field(factory=dict, converter=_sections)
    device_s: float | None = None
    """The device timer's mean step time over the same steps (CUDA/HIP/XPU events); None on the wall clock."""

    @property
    def work_s(self) -> float:
        """The time spent in sections (the sum of their medians); 0 when none was timed."""
        return sum(self.sections.values())

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "step": self.step, "step_s": self.step_s, "steps": self.steps,
                "sections": dict(self.sections), "device_s": self.device_s}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankTimes:
        return cls(rank=int(data["rank"]), host=str(data["host"]), step=int(data["step"]),
                   step_s=data["step_s"], steps=int(data.get("steps", 0)), sections=data.get("sections") or {},
                   device_s=None if data.get("device_s") is None else _seconds(data["device_s"]))


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
    """One comparison of every rank, with each rank's scores and the stragglers among them."""

    step: int
    factor: float
    measure: str
    """``"sections"`` (every rank timed ``rt.range`` sections: their sum) or ``"step"`` (wall time per step)."""
    median_s: float
    relative: Mapping[int, float]
    individual: Mapping[int, float]
    stragglers: tuple[Straggler, ...]
    reason: str

    @property
    def straggler_hosts(self) -> tuple[str, ...]:
        return tuple(sorted({s.host for s in self.stragglers}))

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "factor": self.factor, "measure": self.measure, "median_s": self.median_s,
                "relative": {str(r): v for r, v in self.relative.items()},
                "individual": {str(r): v for r, v in self.individual.items()},
                "stragglers": [s.to_dict() for s in self.stragglers], "reason": self.reason}


def _ratio(best: float, mine: float) -> float:
    """best / mine within 0..1; a zero time (no steps measured) scores 1."""
    if mine <= 0.0:
        return 1.0
    return max(0.0, min(1.0, best / mine))


def score(times: Sequence[RankTimes], *, factor: float, own_best: Mapping[int, float] | None = None) -> StragglerReport:
    """Compare the ranks' ``times`` (one per rank); ``own_best`` is each rank's best compared time so far.

    A rank whose step time is above ``factor`` x the median of all ranks' is a
    straggler; the reason says the median, the factor and who, or that none is.
    """
    if not times:
        raise ValueError("score() needs the times of at least one rank")
    if not factor > 1.0:
        raise ValueError(f"factor {factor!r} must be greater than 1 (how many times the median is slow)")
    own_best = own_best or {}
    measure = "sections" if all(t.sections for t in times) else "step"
    took = {t.rank: (t.work_s if measure == "sections" else t.step_s) for t in times}
    median = statistics.median(took.values())
    best = min(took.values())
    section_best: dict[str, float] = {}
    for t in times:
        for name, seconds in t.sections.items():
            section_best[name] = min(seconds, section_best.get(name, seconds))
    relative = {r: _ratio(best, s) for r, s in took.items()}
    individual = {r: _ratio(min(own_best.get(r, s), s), s) for r, s in took.items()}
    slow = tuple(
        Straggler(rank=t.rank, host=t.host, step_s=took[t.rank], median_s=median, relative=relative[t.rank],
                  individual=individual[t.rank],
                  sections={n: _ratio(section_best[n], s) for n, s in sorted(t.sections.items())})
        for t in sorted(times, key=lambda t: t.rank) if took[t.rank] > factor * median
    )
    step = max(t.step for t in times)
    what = "time in sections" if measure == "sections" else "step time"
    if slow:
        reason = (f"{len(slow)} of {len(times)} ranks slower than {factor:g}x the median {what} "
                  f"{median * 1e3:.1f} ms at step {step}: " + "; ".join(s.reason for s in slow))
    else:
        reason = (f"no straggler at step {step}: every one of {len(times)} ranks within {factor:g}x the median "
                  f"{what} {median * 1e3:.1f} ms (slowest {max(took.values()) * 1e3:.1f} ms)")
    return StragglerReport(step=step, factor=factor, measure=measure, median_s=median, relative=relative,
                           individual=individual, stragglers=slow, reason=reason)
