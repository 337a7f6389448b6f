"""The fixed-size rows of the straggler exchange: what each rank sends (its times), what rank 0 sends back.

Each rank sends one row of :data:`ROW_SIZE` numbers, whatever the job's size:
its step count, how many steps its medians cover, its median step time, the
sum of its section medians (NaN when it timed none), its device timer's mean
step time (NaN on the wall clock), how many sections it timed, and up to
:data:`SECTION_SLOTS` sections as (key, median seconds) pairs. A section's key
is the CRC-32 of its name, the same on every rank, so rank 0 matches sections
across ranks without strings on the wire. Rank 0 gathers the rows into one
``(ranks, ROW_SIZE)`` table and broadcasts back one verdict row of
:data:`VERDICT_SIZE` numbers: the step, the measure, the median and best
times, how many stragglers and the first :data:`NAMED` of them, slowest first.

Pure: lists of floats in and out; the exchange turns them into tensors.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from attrs import field, frozen

__all__ = ["HOST_BYTES", "NAMED", "ROW_SIZE", "SECTION_SLOTS", "VERDICT_SIZE", "Col", "RankTimes", "StragglerVerdict",
           "hosts_from_rows", "host_row", "ratio", "section_key"]

SECTION_SLOTS = 8
"""Sections a row carries by name (the first 8 by name); their sum (``work_s``) always covers every section."""
NAMED = 32
"""Stragglers the verdict names by rank (slowest first); the count says how many there were in all."""
HOST_BYTES = 64
"""A host name's UTF-8 bytes sent once, at the first report (longer names are cut)."""


class Col:
    """Column indices of a rank's row."""

    STEP, STEPS, STEP_S, WORK_S, DEVICE_S, SECTIONS = range(6)
    SLOTS = 6
    """Then ``SECTION_SLOTS`` pairs: (key, median seconds); an unused slot has key -1."""


ROW_SIZE = Col.SLOTS + 2 * SECTION_SLOTS
_V_STEP, _V_MEASURE, _V_MEDIAN, _V_BEST, _V_COUNT, _V_FACTOR, _V_NAMED = range(7)
VERDICT_SIZE = _V_NAMED + NAMED


def section_key(name: str) -> int:
    """The key a section's name travels as: CRC-32 of its UTF-8 bytes (exact in a float64)."""
    return zlib.crc32(name.encode("utf-8", "replace"))


def _seconds(value: object) -> float:
    number = float(value)  # type: ignore[arg-type]
    if not number >= 0.0 or number == float("inf"):
        raise ValueError(f"a time of {value!r} s is not a finite non-negative number")
    return number


def _sections(value: Mapping[str, Any]) -> dict[str, float]:
    return {str(k): _seconds(v) for k, v in dict(value).items()}


def _finite_or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


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

    def row(self) -> list[float]:
        """This rank's fixed-size row (:class:`Col`): the same length on every rank, whatever it timed."""
        nan = float("nan")
        out = [float(self.step), float(self.steps), self.step_s, self.work_s if self.sections else nan,
               nan if self.device_s is None else float(self.device_s), float(len(self.sections))]
        named = sorted(self.sections.items())[:SECTION_SLOTS]
        for name, seconds in named:
            out += [float(section_key(name)), seconds]
        out += [-1.0, nan] * (SECTION_SLOTS - len(named))
        return out

    @classmethod
    def from_row(cls, row: Sequence[float], *, rank: int, host: str, names: Mapping[int, str]) -> RankTimes:
        """A row back as a record (tests and reports): ``names`` maps section keys to names (unknown: its key)."""
        sections = {}
        for i in range(SECTION_SLOTS):
            key, seconds = row[Col.SLOTS + 2 * i], row[Col.SLOTS + 2 * i + 1]
            if key >= 0 and not math.isnan(seconds):
                sections[names.get(int(key), f"section {int(key):08x}")] = seconds
        return cls(rank=rank, host=host, step=int(row[Col.STEP]), step_s=row[Col.STEP_S], steps=int(row[Col.STEPS]),
                   sections=sections, device_s=_finite_or_none(row[Col.DEVICE_S]))


def host_row(host: str) -> list[int]:
    """A host name as :data:`HOST_BYTES` bytes (UTF-8, cut, zero-padded), sent once at the first report."""
    raw = host.encode("utf-8", "replace")[:HOST_BYTES]
    return list(raw) + [0] * (HOST_BYTES - len(raw))


def hosts_from_rows(raw: bytes) -> list[str]:
    """Host names back from the gathered rows' bytes, :data:`HOST_BYTES` each (a cut character is replaced)."""
    return [raw[i:i + HOST_BYTES].rstrip(b"\0").decode("utf-8", "replace") or "?"
            for i in range(0, len(raw), HOST_BYTES)]


@frozen(kw_only=True)
class StragglerVerdict:
    """What every rank learns at a report (rank 0 broadcasts it), with this rank's own scores (0..1, 1 best)."""

    step: int
    measure: str
    """``"sections"`` or ``"step"``: which time was compared (:mod:`ezpz.steps.straggler_scores`)."""
    median_s: float
    best_s: float
    factor: float
    count: int
    """How many ranks were stragglers."""
    ranks: tuple[int, ...]
    """The first :data:`NAMED` of them, slowest first."""
    rank: int
    took_s: float
    """This rank's compared time."""
    relative: float
    """The best rank's time over this rank's."""
    individual: float
    """This rank's own best time over its time now."""

    @property
    def is_straggler(self) -> bool:
        return self.took_s > self.factor * self.median_s

    def row(self) -> list[float]:
        named = [float(r) for r in self.ranks[:NAMED]]
        return [float(self.step), 1.0 if self.measure == "sections" else 0.0, self.median_s, self.best_s,
                float(self.count), self.factor, *named, *([-1.0] * (NAMED - len(named)))]

    @classmethod
    def from_row(cls, row: Sequence[float], *, rank: int, took_s: float, own_best_s: float | None) -> StragglerVerdict:
        """The broadcast row, with this rank's scores computed here (O(1): its own time, its own best)."""
        best = float(row[_V_BEST])
        mine = min(took_s, own_best_s) if own_best_s is not None else took_s
        return cls(step=int(row[_V_STEP]), measure="sections" if row[_V_MEASURE] >= 0.5 else "step",
                   median_s=float(row[_V_MEDIAN]), best_s=best, factor=float(row[_V_FACTOR]),
                   count=int(row[_V_COUNT]),
                   ranks=tuple(int(r) for r in row[_V_NAMED:_V_NAMED + NAMED] if r >= 0), rank=rank,
                   took_s=took_s, relative=ratio(best, took_s), individual=ratio(mine, took_s))


def ratio(best: float, mine: float) -> float:
    """best / mine within 0..1; a zero time (no steps measured) scores 1."""
    if mine <= 0.0:
        return 1.0
    return max(0.0, min(1.0, best / mine))
