"""Which installed distribution offers each plugin, and which entry points are refused before import.

A plugin is built-in when the distribution that declares its entry point is
``ezpz`` itself, as :mod:`importlib.metadata` reports it (a ``.dist-info`` or
``.egg-info`` on ``sys.path``, however it got there), never because of what
its target string looks like: any distribution can declare ``cpu =
ezpz.builtin.cpu`` or ``cpu = ezpz.builtin.evil``. The names of ezpz's own
plugins are reserved: another distribution's entry point with one of them is
*refused* (never imported) and reported with that distribution's name, so it
can neither shadow the built-in nor be confused with it. Two third-party
distributions claiming one name: the first on ``sys.path`` keeps it, the
second is refused.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable
from typing import NamedTuple

from ezpz.plugin_host.names import normalize_dist

__all__ = ["CORE_DISTRIBUTION", "RESERVED_NAMES", "Found", "is_builtin", "origin", "scan"]

CORE_DISTRIBUTION = "ezpz"
RESERVED_NAMES = frozenset({"cpu", "mps", "launchers"})
"""ezpz's own plugin names; any other name ezpz's distribution declares is reserved too."""


class Found(NamedTuple):  # a NamedTuple, not attrs: built at `import ezpz`, which must not load attrs
    """One entry point in the group, where it comes from, and whether it may be imported.

    ``key`` is the name the plugin host records it under: its entry-point name,
    or ``distribution:name`` for a refused one (so it never replaces the plugin
    that owns the name).
    """

    name: str
    target: str
    distribution: str
    version: str
    builtin: bool
    key: str
    refused: str | None
    entry_point: importlib.metadata.EntryPoint


def _headers(dist: importlib.metadata.Distribution) -> tuple[str | None, str | None]:
    """``Name`` and ``Version`` from the metadata file's header lines (no full RFC 822 parse: this runs at import)."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break  # end of the headers
        key, _, value = line.partition(":")
        if key.strip().lower() == "name" and name is None:
            name = value.strip() or None
        elif key.strip().lower() == "version" and version is None:
            version = value.strip() or None
        if name and version:
            break
    return name, version


def origin(ep: importlib.metadata.EntryPoint) -> tuple[str, str]:
    """``(distribution, version)`` that declares ``ep``; ``("unknown", "unknown")`` only if metadata has none."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ("unknown", "unknown")
    try:
        name, version = _headers(dist)
        if name is None or version is None:  # unusual metadata: let importlib.metadata parse it fully
            name, version = name or dist.metadata["Name"], version or dist.version
    except Exception:  # pragma: no cover - unreadable metadata
        return ("unknown", "unknown")
    return (str(name or "unknown"), str(version or "unknown"))


def is_builtin(ep: importlib.metadata.EntryPoint) -> bool:
    """Declared by the ``ezpz`` distribution itself."""
    return normalize_dist(origin(ep)[0]) == CORE_DISTRIBUTION


def scan(entry_points: Iterable[importlib.metadata.EntryPoint],
         reserved_names: frozenset[str] = RESERVED_NAMES) -> list[Found]:
    """Classify entry points (in ``sys.path`` order) without importing anything.

    ``reserved_names`` (plus every name ezpz's own distribution declares in the
    group) can only be held by ezpz.
    """
    eps = list(entry_points)
    origins: dict[int, tuple[str, str]] = {}  # entry points of one distribution share its Distribution object
    for ep in eps:
        dist_id = id(getattr(ep, "dist", None))
        if dist_id not in origins:
            origins[dist_id] = origin(ep)

    def core(ep: importlib.metadata.EntryPoint) -> bool:
        return normalize_dist(origins[id(getattr(ep, "dist", None))][0]) == CORE_DISTRIBUTION

    reserved = reserved_names | {ep.name for ep in eps if core(ep)}
    owners: dict[str, str] = {}
    found: list[Found] = []
    for ep in eps:
        dist, version = origins[id(getattr(ep, "dist", None))]
        builtin = core(ep)
        refused: str | None = None
        if builtin:
            if ep.name in owners:  # ezpz itself twice on sys.path: keep the first
                continue
        elif ep.name in reserved:
            refused = f"name {ep.name!r} is reserved by ezpz"
        elif ep.name in owners:
            refused = f"name {ep.name!r} is already used by distribution {owners[ep.name]}"
        if refused is None:
            owners[ep.name] = dist
        key = ep.name if refused is None else f"{normalize_dist(dist)}:{ep.name}"
        found.append(Found(name=ep.name, target=ep.value, distribution=dist, version=version, builtin=builtin,
                           key=key, refused=refused, entry_point=ep))
    return found
