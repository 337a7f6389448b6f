"""The stand-in's facts record: the example device's facts, under a class of this plugin's own."""

from __future__ import annotations

from attrs import frozen

from ezpz_example_emu.core import EmuFacts


@frozen(kw_only=True)
class StandinFacts:
    """What the stand-in's probe saw: the emu device's facts (torch version, PrivateUse1 support)."""

    emu: EmuFacts
