"""After staging: go on with the nodes that hold the environment, or stop before any rank starts (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attrs import field

from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen

__all__ = ["StagingVerdict", "decide"]


@frozen(kw_only=True)
class StagingVerdict:
    """``go_on``: launch on ``hosts`` (``left_out`` named, with why); else stop, ``reason`` naming the nodes."""

    go_on: bool
    hosts: tuple[str, ...] = field(converter=as_tuple)
    left_out: tuple[tuple[str, str], ...] = field(default=(), converter=as_tuple)
    reason: str


def decide(hosts: Sequence[str], failed: Mapping[str, str], min_nodes: int | None) -> StagingVerdict:
    """Every host staged: go on. Some failed: go on without them if ``min_nodes`` allows it, else stop.

    ``failed`` maps a host to why it failed (after its retries). Hosts keep their order.
    """
    bad = tuple((h, failed[h]) for h in hosts if h in failed)
    good = tuple(h for h in hosts if h not in failed)
    named = "; ".join(f"{h}: {why}" for h, why in bad)
    if not bad:
        return StagingVerdict(go_on=True, hosts=good, reason=f"all {len(good)} node(s) hold the environment")
    if min_nodes is None:
        return StagingVerdict(go_on=False, hosts=good, left_out=bad,
                              reason=f"{len(bad)} of {len(hosts)} node(s) failed to stage ({named}); no rank started. "
                                     f"Fix the cause, or pass --min-nodes K to go on with K or more nodes")
    if len(good) < min_nodes:
        return StagingVerdict(go_on=False, hosts=good, left_out=bad,
                              reason=f"{len(good)} node(s) staged, fewer than --min-nodes {min_nodes} "
                                     f"({named}); no rank started")
    return StagingVerdict(go_on=True, hosts=good, left_out=bad,
                          reason=f"left out {len(bad)} node(s) that failed to stage ({named}); going on with "
                                 f"{len(good)} (--min-nodes {min_nodes})")
