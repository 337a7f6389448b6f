"""File-system probe (thin, impure, read-only): which mount a path lives on, and its type.

From ``/proc/self/mountinfo`` (Linux): the mount whose mount point is the longest prefix of the resolved path.
Elsewhere, or when the file cannot be read, nothing is known (None), and nothing is guessed.
"""

from __future__ import annotations

import os
import re

__all__ = ["Mount", "mount_of", "parse_mountinfo", "read_mount_of"]

Mount = tuple[str, str, str]
"""``(mount point, file-system type, source)`` as ``/proc/self/mountinfo`` names them."""


_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as ``\\ooo`` octal."""
    return _OCTAL.sub(lambda m: chr(int(m[1], 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """Every mount in ``/proc/self/mountinfo``'s text, in its order; malformed lines are skipped."""
    mounts: list[Mount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 2:
            continue
        mounts.append((_unescape(fields[4]), tail[0], _unescape(tail[1])))
    return mounts


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount ``path`` (absolute, resolved) is on: the longest mount point above it (the last one mounted,
    when two share a point); None when no mount covers it."""
    best: Mount | None = None
    for mount in mounts:
        point = mount[0]
        if path == point or path.startswith(point.rstrip("/") + "/"):
            if best is None or len(point) >= len(best[0]):
                best = mount
    return best


def read_mount_of(path: str, mountinfo: str = "/proc/self/mountinfo") -> Mount | None:
    """The mount ``path`` is on, from this process's mount table; None where there is none to read."""
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 22)
    except OSError:
        return None
    return mount_of(os.path.realpath(path), parse_mountinfo(text))
