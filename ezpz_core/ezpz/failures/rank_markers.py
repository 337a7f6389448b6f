"""Rank markers: ``started-<rank>`` at ``setup()``, ``ended-<rank>`` at ``teardown()`` or exit, in ``EZPZ_FAILURE_DIR``.

``ezpz launch`` counts them after an attempt (:mod:`ezpz.launch_drivers.false_success`): a launcher that exits 0
while ranks never started, or started and never ended, did not succeed. Each marker is one small file holding
the rank's host and pid. Writing is best-effort and cheap (one file create each, only when the supervisor set
``EZPZ_FAILURE_DIR``): it never raises and never changes how the script ends. Readers treat every file as
hostile: a bad name, a large file or an unreadable one is skipped.
"""

from __future__ import annotations

import atexit
import json
import os
import re
from pathlib import Path

from ezpz.primitives.frozen_records import frozen

__all__ = ["Markers", "mark_ended", "mark_started", "read_markers"]

_NAME = re.compile(r"^(started|ended)-(\d{1,9})$")
_MAX_BYTES = 4096
_state: dict[str, object] = {}


def _write(directory: str, name: str, host: str) -> bool:
    try:
        path = Path(directory) / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, json.dumps({"host": host, "pid": os.getpid()}).encode())
        finally:
            os.close(fd)
        return True
    except Exception:  # bookkeeping: an unwritable directory must not change how the script ends
        return False


def mark_started(directory: str | None, rank: int, host: str) -> bool:
    """Write ``started-<rank>`` and arrange for ``ended-<rank>`` at exit; False when not written (no directory,
    or it could not be written)."""
    if not directory:
        return False
    _state["ended"] = (directory, rank, host)
    if not _state.get("atexit"):
        atexit.register(mark_ended)
        _state["atexit"] = True
    return _write(directory, f"started-{rank}", host)


def mark_ended() -> bool:
    """Write ``ended-<rank>`` for the rank :func:`mark_started` marked (once); False when there is none."""
    pending = _state.pop("ended", None)
    if not isinstance(pending, tuple):
        return False
    directory, rank, host = pending
    return _write(directory, f"ended-{rank}", host)


@frozen
class Markers:
    """What one attempt's ranks left: rank -> host for those that started, and for those that ended."""

    started: dict[int, str]
    ended: dict[int, str]

    @property
    def any(self) -> bool:
        return bool(self.started or self.ended)


def read_markers(directory: str | Path) -> Markers:
    """The markers in ``directory`` (none when it is missing or unreadable; a bad file is skipped)."""
    found: dict[str, dict[int, str]] = {"started": {}, "ended": {}}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return Markers(started={}, ended={})
    for entry in entries:
        m = _NAME.match(entry.name)
        if m is None:
            continue
        host = "?"
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_size <= _MAX_BYTES:
                value = json.loads(Path(entry.path).read_text(encoding="utf-8") or "{}")
                if isinstance(value, dict) and isinstance(value.get("host"), str) and value["host"]:
                    host = value["host"][:255]
        except (OSError, ValueError):
            pass
        found[m[1]][int(m[2])] = host
    return Markers(started=found["started"], ended=found["ended"])
