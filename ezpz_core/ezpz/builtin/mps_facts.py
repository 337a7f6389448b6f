"""The MPS plugin's facts record, kept out of :mod:`ezpz.builtin.mps` so that ``import ezpz`` does not load attrs."""

from __future__ import annotations

from ezpz.primitives.frozen_records import frozen

__all__ = ["MpsFacts"]


@frozen(kw_only=True)
class MpsFacts:
    available: bool
    macos: tuple[int, int]
