"""The CPU plugin's facts record, kept out of :mod:`ezpz.builtin.cpu` so that ``import ezpz`` does not load attrs."""

from __future__ import annotations

from attr import field

from ezpz.primitives.converters import as_frozenset
from ezpz.primitives.frozen_records import frozen

__all__ = ["CpuFacts"]


@frozen(kw_only=True)
class CpuFacts:
    model: str
    machine: str
    flags: frozenset[str] = field(converter=as_frozenset)
