"""Checking the names in ``EZPZ_PLUGINS`` and ``EZPZ_DISABLE_PLUGINS`` against what is installed.

Names are separated by ``,`` or whitespace. An entry is a plugin name
(``cuda``), ``distribution:name`` (``ezpz-cuda:cuda``) or, in the deny-list,
``*``. An entry with any other character (``cpu;launchers``: a separator ezpz
does not use) or naming nothing installed would silently match nothing, so it
is reported: a warning, or a :class:`~ezpz.errors.ConfigError` in strict mode.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["entry_problem", "normalize_dist", "normalize_entries"]

_NAME = r"[a-z0-9][a-z0-9._-]*"
_ENTRY = re.compile(rf"(?:{_NAME}:)?{_NAME}")


def normalize_dist(name: str) -> str:
    """A distribution name as PEP 503 compares them: ``Ezpz_CUDA`` -> ``ezpz-cuda``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def normalize_entries(entries: frozenset[str] | None) -> frozenset[str] | None:
    """List entries with the distribution part of ``distribution:name`` normalized (``Acme_Tools:cpu`` -> ``acme-tools:cpu``)."""
    if entries is None:
        return None
    return frozenset(f"{normalize_dist(e.rpartition(':')[0])}:{e.rpartition(':')[2]}" if ":" in e else e
                     for e in entries)


def entry_problem(entry: str, known: Iterable[tuple[str, str]], *, wildcard: bool) -> str | None:
    """Why ``entry`` (lower-cased) matches nothing, or None. ``known``: ``(distribution, name)`` installed."""
    if wildcard and entry == "*":
        return None
    if not _ENTRY.fullmatch(entry):
        odd = sorted({ch for ch in entry if not (ch.isascii() and (ch.isalnum() or ch in "._-:"))}) or [":"]
        return (f"{entry!r} is not a plugin name: it contains {' '.join(repr(c) for c in odd)}; separate names "
                "with ',' or spaces, and write a plugin of one distribution as distribution:name")
    dist, sep, name = entry.rpartition(":")
    pairs = list(known)
    if sep:
        if (normalize_dist(dist), name) in {(normalize_dist(d), n.lower()) for d, n in pairs}:
            return None
        return f"no installed distribution {dist!r} has a plugin {name!r}"
    if name in {n.lower() for _, n in pairs}:
        return None
    return f"no installed plugin is named {name!r}"
