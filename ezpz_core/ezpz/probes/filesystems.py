"""File-system probe (thin, impure, read-only): which mount a path lives on, and its type.

From ``/proc/self/mountinfo`` (Linux): the mount whose mount point is the longest prefix of the resolved path.
Elsewhere, or when the file cannot be read, nothing is known (None), and nothing is guessed.
"""

from __future__ import annotations

import os

__all__ = ["Mount", "mount_of", "parse_mountinfo", "read_mount_of"]

Mount = tuple[str, str, str]
"""``(mount point, file-system type, source)`` as ``/proc/self/mountinfo`` names them."""


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as ``\\ooo`` octal."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit() and len(field[i + 1:i + 4]) == 3:
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


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
        if path == point or path.startswith(point.rstrip("/") + "/") or point == "/":
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
