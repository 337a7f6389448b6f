"""What a save may write over: nothing, an empty directory, or an ezpz checkpoint; everything else is refused.

A save never moves or deletes what ezpz did not write. :func:`claim` looks at the path a save
names (without following a symbolic link) and says whether it is free, an empty directory, or a
checkpoint ezpz wrote (its marker, and only names a save writes, all plain files); anything else
(a user's directory or file, a symbolic link, a FIFO, a device) is a :class:`CheckpointError`
naming what is there. :func:`tidy` handles what an interrupted save left beside it: a staging
directory, or a checkpoint set aside by a replace; each is removed file by file, known names
only, never with ``rmtree``. No torch here.
"""

from __future__ import annotations

import json
import os
import stat
from enum import Enum
from pathlib import Path

from ezpz.checkpoints.layout import MARKER, is_complete, is_ezpz_file, set_aside_path, staging_path
from ezpz.errors import CheckpointError

__all__ = ["Claim", "claim", "remove_owned", "tidy"]

_SHOWN = 4  # foreign entries named in a refusal; the rest are counted
_MAX_MARKER_BYTES = 1 << 20  # enough to tell ezpz's marker from another file of its name


class Claim(Enum):
    """What a save finds at its path, among the things it may write over."""

    FREE = "nothing"
    EMPTY = "an empty directory"
    CHECKPOINT = "an ezpz checkpoint"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISREG, "a file"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "something that is neither a file nor a directory"


def _foreign_entries(path: Path) -> list[str]:
    """The entries of ``path`` a save never writes: other names, links, sub-directories, anything not a plain file."""
    foreign = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        mode = entry.stat(follow_symlinks=False).st_mode
        if not stat.S_ISREG(mode):
            foreign.append(f"{entry.name!r} ({_kind(mode)})")
        elif not is_ezpz_file(entry.name):
            foreign.append(repr(entry.name))
    return foreign


def _marker_is_ezpz(path: Path) -> bool:
    """Whether ``path``'s marker is a plain file holding ezpz's record (a JSON object with an integer format)."""
    marker = path / MARKER
    try:
        if not stat.S_ISREG(os.lstat(marker).st_mode):
            return False
        with open(marker, "rb") as f:
            data = json.loads(f.read(_MAX_MARKER_BYTES))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("format"), int) and not isinstance(data["format"], bool)


def _refuse(path: Path, found: str, who: str, named: Path | None = None) -> CheckpointError:
    """The refusal of ``path``; ``named`` is the path the save was given, when ``path`` is a hidden sibling of it."""
    beside = " (beside it, under a name a save of it uses)" if named is not None else ""
    return CheckpointError(
        name=f"{who}({str(named or path)!r})", value=f"{path}{beside} is {found}",
        expected="a path where nothing is, an empty directory, or an ezpz checkpoint (its marker "
                 f"{MARKER} and only the files a save writes): a save never writes over what ezpz did not write",
        fix="choose another path (e.g. a new directory named with ezpz.checkpoints.checkpoint_name(step)), "
            "or move what is there yourself")


def claim(path: Path, who: str = "save_checkpoint") -> Claim:
    """What is at ``path``, when a save may write there; else :class:`CheckpointError` naming what was found."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return Claim.FREE
    if stat.S_ISLNK(mode):
        raise _refuse(path, f"a symbolic link (to {os.readlink(path)!r})", who)
    if not stat.S_ISDIR(mode):
        raise _refuse(path, _kind(mode), who)
    foreign = _foreign_entries(path)
    if foreign:
        more = f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
        raise _refuse(path, f"a directory holding {', '.join(foreign[:_SHOWN])}{more}, not an ezpz checkpoint", who)
    if not any(os.scandir(path)):
        return Claim.EMPTY
    if not _marker_is_ezpz(path):
        raise _refuse(path, f"a directory of checkpoint files without ezpz's marker {MARKER} (a save that was "
                            "copied or never finished, or another tool's)", who)
    return Claim.CHECKPOINT


def remove_owned(path: Path, who: str = "save_checkpoint", named: Path | None = None) -> None:
    """Delete ``path``, a directory ezpz wrote: each file a save writes, then the directory. Anything else in it is
    refused before a file goes, so a directory that is not ezpz's is never emptied."""
    foreign = _foreign_entries(path)
    if foreign:
        raise _refuse(path, f"a directory holding {', '.join(foreign[:_SHOWN])} besides checkpoint files; ezpz "
                            "removes only what it wrote", who, named)
    for entry in os.scandir(path):
        os.unlink(entry.path)
    os.rmdir(path)


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def tidy(final: Path, who: str = "save_checkpoint") -> None:
    """Finish what an interrupted save of ``final`` left: put a set-aside checkpoint back where none is in its place,
    else remove it; remove a staging directory. Each must hold only what a save writes, or it is refused."""
    set_aside, staging = set_aside_path(final), staging_path(final)
    if os.path.lexists(set_aside):
        if not _is_dir(set_aside):
            raise _refuse(set_aside, "not a directory ezpz set aside", who, final)
        if not os.path.lexists(final) and is_complete(set_aside) and not _foreign_entries(set_aside):
            os.rename(set_aside, final)  # the replace stopped between its two renames: the old one goes back
        else:
            remove_owned(set_aside, who, final)
    if os.path.lexists(staging):
        if not _is_dir(staging):
            raise _refuse(staging, "not a directory ezpz stages a save in", who, final)
        remove_owned(staging, who, final)
