"""The fan-out schedule: which holder copies the tarball to which node, at most ``cap`` copies per source (pure).

The shared file system is one source (:data:`SHARED`) used only while no node holds the tarball, one copy at a
time; every node that holds it serves up to ``cap`` others at once. With one seed the holders grow by a factor of
``1 + cap`` per round, so ``N`` nodes take ``1 + ceil(log_{1+cap} N)`` rounds (4,096 nodes with cap 8: 5 rounds).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence

from ezpz.primitives.frozen_records import frozen

__all__ = ["MAX_CAP", "SHARED", "Copy", "assign", "plan_rounds", "projected_seconds", "rounds_needed"]

SHARED = "<shared file system>"
"""The source that is the tarball on the shared file system (read by one node at a time)."""
MAX_CAP = 8
"""The most copies one node serves at once (the issue's bound; more only splits its bandwidth)."""


@frozen
class Copy:
    """One copy: ``source`` (a host, or :data:`SHARED`) sends the tarball to ``target``; ``why`` says why it."""

    source: str
    target: str
    why: str


def assign(pending: Sequence[str], holders: Sequence[str], busy: Mapping[str, int], cap: int,
           avoid: Mapping[str, Iterable[str]] | None = None) -> list[Copy]:
    """The copies to start now: each pending target (in order) from the least busy holder with a free slot.

    ``busy`` counts the copies each source is sending; ``avoid`` names, per target, sources that already failed it
    (a retry goes elsewhere when another holder exists). With no holder, one target reads from :data:`SHARED`.
    """
    if not 1 <= cap <= MAX_CAP:
        raise ValueError(f"cap {cap}: expected 1 to {MAX_CAP} copies per source")
    order = {h: i for i, h in enumerate(holders)}
    free = [(busy.get(h, 0), order[h], h) for h in holders if busy.get(h, 0) < cap]
    heapq.heapify(free)  # least busy first, then the earliest holder
    shared_busy = busy.get(SHARED, 0)
    out: list[Copy] = []
    for target in pending:
        if not free:
            if holders or shared_busy >= 1:
                break
            shared_busy += 1
            out.append(Copy(SHARED, target, "no node holds it yet: this one reads it from the shared file system"))
            continue
        bad = set((avoid or {}).get(target, ()))
        popped: list[tuple[int, int, str]] = []
        pick: tuple[int, int, str] | None = None
        while free:
            entry = heapq.heappop(free)
            if entry[2] != target and entry[2] not in bad:
                pick = entry
                break
            popped.append(entry)
        if pick is None:  # only holders that failed this target (or itself): the best of those
            pick = next((e for e in popped if e[2] != target), None)
            popped = [e for e in popped if e is not pick]
        for e in popped:
            heapq.heappush(free, e)
        if pick is None:
            continue
        load, i, source = pick
        if load + 1 < cap:
            heapq.heappush(free, (load + 1, i, source))
        retry = " (a retry, from another holder)" if bad else ""
        out.append(Copy(source, target, f"{source} holds it and sends {load + 1} of {cap}{retry}"))
    return out

def plan_rounds(nodes: Sequence[str], cap: int, held: Iterable[str] = ()) -> tuple[tuple[Copy, ...], ...]:
    """The schedule when every copy takes one round: ``rounds[r]`` are the copies of round ``r``.

    ``held`` nodes already hold the tarball (no copy; they serve from round 0).
    """
    have = set(held)
    holders = [n for n in nodes if n in have]
    pending = [n for n in nodes if n not in have]
    rounds: list[tuple[Copy, ...]] = []
    while pending:
        copies = assign(pending, holders, {}, cap)
        if not copies:  # cannot happen with cap >= 1; guards the loop
            raise RuntimeError(f"no copy possible with {len(holders)} holder(s) and {len(pending)} pending")
        done = {c.target for c in copies}
        holders += [n for n in pending if n in done]
        pending = [n for n in pending if n not in done]
        rounds.append(tuple(copies))
    return tuple(rounds)


def rounds_needed(n_nodes: int, cap: int) -> int:
    """Rounds for ``n_nodes`` from the shared file system: one seed round, then ``ceil(log_{1+cap} n_nodes)``."""
    if n_nodes < 1:
        return 0
    rounds, holders = 1, 1
    while holders < n_nodes:  # integer steps: math.log rounds badly at exact powers
        holders *= 1 + cap
        rounds += 1
    return rounds


def projected_seconds(n_nodes: int, cap: int, per_copy_s: float, shared_copy_s: float | None = None) -> float:
    """Time to stage ``n_nodes`` if every round takes ``per_copy_s`` (``shared_copy_s`` the seed round).

    ``per_copy_s`` should be measured with sources sending ``cap`` copies at once (they share the link).
    """
    rounds = rounds_needed(n_nodes, cap)
    if rounds == 0:
        return 0.0
    first = per_copy_s if shared_copy_s is None else shared_copy_s
    return first + (rounds - 1) * per_copy_s

