"""Split an allocation's hosts into active hosts and spares; swap a bad host for a spare, or drop it (pure).

A bad host is dropped only under ``--min-nodes``, when no spare is left; ``--readmit`` makes an excluded host a spare
again."""

from __future__ import annotations

import math
from collections.abc import Sequence

from attrs import field

from ezpz.errors import ConfigError
from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen

__all__ = ["HostPool", "active_hosts_wanted", "split_allocation"]


@frozen(kw_only=True)
class HostPool:
    """The hosts of the next attempt, the spares left, and those excluded so far (in the order excluded)."""

    active: tuple[str, ...] = field(converter=as_tuple)
    spares: tuple[str, ...] = field(default=(), converter=as_tuple)
    excluded: tuple[str, ...] = field(default=(), converter=as_tuple)

    def swap(self, bad: Sequence[str]) -> tuple[HostPool, tuple[tuple[str, str], ...]]:
        """Replace each bad active host by the next spare, keeping positions; ValueError if too few spares."""
        bad = [h for h in dict.fromkeys(bad) if h in self.active]
        if len(bad) > len(self.spares):
            raise ValueError(f"{len(bad)} host(s) to replace but {len(self.spares)} spare(s) left")
        spares = list(self.spares)
        swaps = tuple((h, spares.pop(0)) for h in bad)
        mapping = dict(swaps)
        active = tuple(mapping.get(h, h) for h in self.active)
        return HostPool(active=active, spares=spares, excluded=(*self.excluded, *bad)), swaps

    def shrink(self, bad: Sequence[str], min_active: int
               ) -> tuple[HostPool, tuple[tuple[str, str], ...], tuple[str, ...]]:
        """Replace bad active hosts by spares while any are left, then drop the rest: ``(pool, swaps, dropped)``.

        The hosts kept stay in their order (ranks are renumbered over them). ValueError if fewer than
        ``min_active`` hosts would be left.
        """
        bad = [h for h in dict.fromkeys(bad) if h in self.active]
        swapped, dropped = bad[:len(self.spares)], tuple(bad[len(self.spares):])
        pool, swaps = self.swap(swapped)
        active = tuple(h for h in pool.active if h not in dropped)
        if len(active) < min_active:
            raise ValueError(f"{len(active)} host(s) would be left, fewer than {min_active}")
        return HostPool(active=active, spares=pool.spares, excluded=(*pool.excluded, *dropped)), swaps, dropped

    def readmit(self, sat_out: Sequence[str]) -> HostPool:
        """``--readmit``: the excluded hosts in ``sat_out`` (they missed at least one attempt) become spares again,
        after the spares never excluded."""
        back = tuple(h for h in self.excluded if h in set(sat_out) and h not in self.active and h not in self.spares)
        return HostPool(active=self.active, spares=(*self.spares, *back),
                        excluded=tuple(h for h in self.excluded if h not in back))


def active_hosts_wanted(nhosts: int | None, np: int | None, ppn: int | None) -> int:
    """How many hosts a job runs on: ``--nhosts``, else ``ceil(--np / --ppn)``; ConfigError naming the flag."""
    if nhosts is not None:
        if nhosts < 1:
            raise ConfigError(name="--nhosts", value=nhosts, expected="a positive number of hosts",
                              fix="pass --nhosts 1 or more")
        return nhosts
    if np is None:
        raise ConfigError(name="--auto-retry", value="", expected="the active size: --nhosts, or --np (with --ppn)",
                          fix="say how many hosts the job runs on, e.g. --nhosts 3 --spare-nodes 1")
    return math.ceil(np / (ppn or 1))


def split_allocation(hosts: Sequence[str], active: int, spares: int | None, source: str) -> HostPool:
    """The first ``active`` hosts run the job; the next ``spares`` (default: all the rest) wait as spares."""
    hosts = tuple(dict.fromkeys(hosts))
    if active > len(hosts):
        raise ConfigError(name="--nhosts", value=active, expected=f"at most the {len(hosts)} host(s) of {source}",
                          fix="ask for fewer active hosts, or run in a bigger allocation / a longer --hostfile")
    rest = len(hosts) - active
    if spares is None:
        spares = rest
    if spares < 0 or spares > rest:
        raise ConfigError(name="--spare-nodes", value=spares,
                          expected=f"0 to {rest}: {len(hosts)} host(s) in {source}, {active} active",
                          fix="pass --spare-nodes auto (all hosts not active) or a smaller number")
    return HostPool(active=hosts[:active], spares=hosts[active:active + spares])
