"""A cached index of which distributions declare entry points in ezpz's groups.

Without it, every ``import ezpz`` asks :mod:`importlib.metadata` for the
group's entry points, which opens ``entry_points.txt`` in every ``*.dist-info``
on ``sys.path``: with 2,000 distributions installed, 2,000 file opens per
rank. The index remembers, for one ``sys.path``, the metadata directories that
declare entry points in ``ezpz``'s groups; a later process re-reads the entry
points from those directories only.

Safety:

- **Keyed by modification times.** The index is valid only while every
  ``sys.path`` entry has the ``st_mtime_ns``/inode/device it had when the
  index was built.
  Installing or removing a distribution adds or removes a ``*.dist-info``
  directory in a ``sys.path`` directory, which changes that directory's mtime.
  One exception: an entry that held no metadata directory (typically the
  script's own directory, which a job may write to) stays valid while a
  listing of it still shows none.
  An index built while a directory with distributions was changing (its mtime
  within :data:`RACY_WINDOW_NS` of now, or different after the scan) is not
  written; a directory without any (a job's directory, created moments before
  ``mkdir run-N && cd run-N && python -m ...``) does not hold it back.
- **Not keyed by the main module's directory.** ``sys.path[0]`` (the script's
  directory, or the current directory for ``-m`` and ``-c``) is left out of the
  file's key when it holds no distributions: a job in a new directory uses the
  index the previous job wrote, after a listing shows its directory holds none.
- **It never changes which plugins load.** Entry points are always read from
  the distributions' own ``entry_points.txt`` (so an edit to one is seen at
  once); the index only says which distributions to read, and only names
  metadata directories directly inside a ``sys.path`` entry.
- **Hostile or corrupt files are ignored, with a reason** (:func:`last_status`):
  not owned by this user, writable by group or others, a symlink, too large,
  not the expected JSON, or for another interpreter or ``sys.path``.
- **Where:** ``$XDG_CACHE_HOME/ezpz/entry-points`` (default ``~/.cache``, where
  stevedore keeps its own entry-point cache), one file per interpreter and
  ``sys.path`` (less its first entry), written atomically with mode 0600 in a 0700 directory. A
  read-only home moves it to the per-user fallback (:mod:`ezpz.primitives.bookkeeping_dir`, one
  warning), where later processes read it; a missing home means no cache. ``EZPZ_CACHE=0``
  turns it off.

stevedore has such a cache (``stevedore._cache``), but it stats every
``entry_points.txt`` on ``sys.path`` to validate it (the cost this avoids),
keeps one file per state forever, trusts the file's contents, and drops the
distribution each entry point came from, which ezpz needs to tell built-in
plugins from others (:mod:`ezpz.plugin_host.entry_points`).
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ezpz.primitives import user_cache

__all__ = ["GROUPS", "RACY_WINDOW_NS", "cache_dir", "entry_points", "last_status"]

KIND = "entry-points"

FORMAT = 2
GROUPS = ("ezpz", "ezpz.launchers")
"""The groups indexed together (one scan of the environment serves both)."""
RACY_WINDOW_NS = 2_000_000_000
"""A directory modified this recently may still be changing within one mtime tick: its index is not written."""
UNKNOWN = [-1, -1, -1]
"""The stamp of a directory that was changing while it was indexed: never current, so it is listed instead."""
_METADATA_SUFFIXES = (".dist-info", ".egg-info")

_status = "not used yet"


def last_status() -> str:
    """What the last lookup did: ``hit``, ``miss: <why>``, ``off: <why>``, plus any reason a file was ignored."""
    return _status


def cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where the index files live (:func:`ezpz.primitives.user_cache.cache_dir`)."""
    return user_cache.cache_dir(KIND, environ)


def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path or ".")
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_ino, st.st_dev]


def _stamps(paths: Iterable[str]) -> list[list[object]]:
    return [[p, _stamp(p)] for p in paths]


def _holds_metadata(entry: str) -> bool:
    """Whether ``entry`` may hold distributions: a directory listing a ``*.dist-info``/``*.egg-info``, or not a directory.

    importlib.metadata finds distributions only by those names in a
    ``sys.path`` directory's listing, so a directory without them adds none,
    whatever else is written to it.
    """
    try:
        with os.scandir(entry or ".") as it:
            return entry.endswith(".egg") or any(e.name.lower().endswith(_METADATA_SUFFIXES) for e in it)
    except FileNotFoundError:
        return False
    except OSError:  # a zip file, or unreadable: judged by its stamp alone
        return True


def _current(recorded: object, path: Sequence[str]) -> str:
    """Why the recorded ``[entry, stamp, holds_metadata]`` rows no longer describe ``path``, or ``""``.

    An entry that held no metadata directory (a script's own directory, which
    the job may be writing to) stays current while it still holds none; in the
    first place (the main module's directory) any directory without one will do.
    """
    if not isinstance(recorded, list) or len(recorded) != len(path):
        return "built for another sys.path"
    for i, (row, entry) in enumerate(zip(recorded, path)):
        if not isinstance(row, list) or len(row) != 3 or not isinstance(row[0], str):
            return "built for another sys.path"
        if row[0] != entry:
            if i == 0 and row[2] is False and not _holds_metadata(entry):
                continue  # another job's directory then, this one's now: neither holds a distribution
            return "built for another sys.path"
        if row[1] != _stamp(entry) and (row[2] is not False or _holds_metadata(entry)):
            return f"sys.path entry {entry or '.'} changed (a distribution was installed or removed)"
    return ""


def _file_name(path: Sequence[str]) -> str:
    """The index file for ``path``: keyed by the interpreter and ``path[1:]``, never by the main module's directory.

    ``path[0]`` (the script's directory, or the current directory under ``-m``
    and ``-c``) is new for every job started in a new directory; the index
    records it, and :func:`_current` accepts another one that holds no
    distributions either.
    """
    key = "\0".join((sys.executable, sys.prefix, sys.version, *(os.path.abspath(p or ".") for p in path[1:])))
    raw = key.encode("utf-8", "surrogateescape")  # a name, not a check: the file records what it was built for
    return f"{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}.json"


def _meta_dir(dist: importlib.metadata.Distribution) -> str | None:
    """The ``*.dist-info``/``*.egg-info`` directory of a path distribution, else None (not indexable)."""
    path = getattr(dist, "_path", None)  # PathDistribution's only record of where it is
    if not isinstance(path, Path) or not path.name.endswith(_METADATA_SUFFIXES):
        return None
    return str(path)


def _scan(groups: Sequence[str]) -> tuple[dict[str, list[importlib.metadata.EntryPoint]], list[str] | None]:
    """Entry points of ``groups`` as :mod:`importlib.metadata` lists them, and the directories they come from.

    The directories (in ``sys.path`` order) are None when one of them cannot
    be named (a distribution not backed by a metadata directory): such an
    environment is not indexed.
    """
    every = importlib.metadata.entry_points()
    found = {g: list(every.select(group=g)) for g in groups}
    dirs: list[str] = []
    for ep in (ep for g in groups for ep in found[g]):
        owner = getattr(ep, "dist", None)
        d = _meta_dir(owner) if owner is not None else None
        if d is None:
            return found, None
        if d not in dirs:
            dirs.append(d)
    order: dict[str, int] = {}  # sys.path order, as importlib.metadata lists distributions (no file is read)
    for i, dist in enumerate(importlib.metadata.distributions()):
        order.setdefault(str(getattr(dist, "_path", "")), i)
    return found, sorted(dirs, key=lambda d: order.get(d, len(order)))


def _valid(data: object, path: Sequence[str]) -> tuple[list[str] | None, str]:
    """The indexed directories if ``data`` is a current index for ``path``, else None and why not."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None, "not an ezpz entry-point index of this format"
    if data.get("executable") != sys.executable or data.get("prefix") != sys.prefix:
        return None, "built for another interpreter"
    recorded = data.get("path")
    if not isinstance(recorded, list) or len(recorded) != len(path) or recorded[1:] != list(path[1:]):
        return None, "built for another sys.path"
    why = _current(data.get("stamps"), path)
    if why:
        return None, why
    dirs = data.get("dirs")
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        return None, "no list of directories"
    roots = set(path)  # the main module's directory may differ from the recorded one only if neither holds any
    for d in dirs:
        if os.path.dirname(d) not in roots or not d.endswith(_METADATA_SUFFIXES):
            return None, f"names {d!r}, not a metadata directory directly on sys.path"
    return dirs, ""


def _read(dirs: Sequence[str], groups: Sequence[str]) -> dict[str, list[importlib.metadata.EntryPoint]]:
    """Each group's entry points, read from the indexed directories' own ``entry_points.txt``."""
    out: dict[str, list[importlib.metadata.EntryPoint]] = {g: [] for g in groups}
    for d in dirs:
        eps = importlib.metadata.PathDistribution(Path(d)).entry_points
        for g in groups:
            out[g].extend(eps.select(group=g))
    return out


def entry_points(group: str, *, enabled: bool = True, write: bool = True,
                 directory: Path | None = None) -> list[importlib.metadata.EntryPoint]:
    """The entry points of ``group`` (one of :data:`GROUPS`) in ``sys.path`` order, as importlib.metadata lists them.

    ``enabled`` is ``EZPZ_CACHE`` and ``write`` is false in all but
    the first rank of a job (:class:`~ezpz.inputs.settings.PluginSettings`);
    ``directory`` defaults to :func:`cache_dir`.
    """
    global _status
    path = tuple(sys.path)
    if group not in GROUPS:
        raise ValueError(f"group {group!r} is not indexed; expected one of {', '.join(GROUPS)}")
    groups = GROUPS
    where = directory or cache_dir()
    if not enabled:
        _status, where = "off: EZPZ_CACHE=0", None
    elif where is None:
        _status = "off: no home or XDG_CACHE_HOME directory"
    if where is not None:
        file = where / _file_name(path)
        data, why = user_cache.read_json(file)
        if data is not None:
            dirs, why = _valid(data, path)
            if dirs is not None:
                try:
                    found = _read(dirs, groups)
                except OSError as err:  # a directory vanished between the stat and the read
                    why = f"indexed metadata unreadable ({err})"
                else:
                    _status = "hit"
                    return list(found[group])
        _status = f"miss: {why}"
    before = [[entry, stamp, _holds_metadata(str(entry))] for entry, stamp in _stamps(path)]
    found, dirs = _scan(groups)
    if where is not None:
        now = time.time_ns()
        stamps = [[entry, stamp, held] for (entry, stamp), (_, _, held) in zip(_stamps(path), before)]
        changed = any(row[1] != old[1] and (old[2] is not False or _holds_metadata(row[0]))  # type: ignore[arg-type]
                      for row, old in zip(stamps, before))
        for row in stamps:  # a busy directory without distributions (/tmp, a job's output directory): list it each time
            if row[1] is not None and now - row[1][0] < RACY_WINDOW_NS and row[2] is False:  # type: ignore[index]
                row[1] = UNKNOWN
        racy = any(s is not None and now - s[0] < RACY_WINDOW_NS for _, s, _ in stamps)  # type: ignore[index]
        if not write:
            _status += "; not written (only the first rank of a job writes it)"
        elif dirs is None:
            _status += "; not written (a distribution has no metadata directory)"
        elif any(os.path.dirname(d) not in path for d in dirs):
            _status += "; not written (a distribution's metadata is not directly in a sys.path entry)"
        elif changed or racy:
            _status += "; not written (sys.path changed during the scan or moments before it)"
        else:
            why = user_cache.write_json(where / _file_name(path), {
                "format": FORMAT, "executable": sys.executable, "prefix": sys.prefix, "path": list(path),
                "stamps": stamps, "dirs": dirs})
            _status += f"; {why}" if why else "; index written"
    return list(found[group])
