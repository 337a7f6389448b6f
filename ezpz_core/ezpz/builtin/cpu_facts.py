"""The CPU plugin's facts record, kept out of :mod:`ezpz.builtin.cpu` so that ``import ezpz`` does not load attrs."""

from __future__ import annotations

from attrs import field, frozen

from ezpz._convert import as_frozenset

__all__ = ["CpuFacts"]


@frozen(kw_only=True)
class CpuFacts:
    model: str
    machine: str
    flags: frozenset[str] = field(converter=as_frozenset)
