"""Checkpoints for the main job: rank 0 writes atomically, a restarted attempt resumes from the last complete one.

A checkpoint is ``<dir>/step-<NNNNNNNN>.pt``, written to a temporary file in the
same directory and renamed into place (``os.replace`` is atomic on POSIX), so a
rank killed mid-write leaves a ``.tmp`` file that is never read, never a torn
checkpoint. The directory need not be shared: rank 0 reads the newest one and
broadcasts it to the others. A plain file named ``step-<NNNNNNNN>.pt`` there is taken as
one of these checkpoints (replaced, or pruned past :data:`KEEP`); anything else of that name
(a directory, a symbolic link, a FIFO) is refused, never replaced, and other names are never touched.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["latest", "load_latest", "save"]

_NAME = re.compile(r"^step-(\d{8})\.pt$")
KEEP = 2
"""Checkpoints kept on disk (the newest ones): the one being resumed from survives a failure while writing the next."""


def save(directory: Path, step: int, state: dict[str, Any], *, write: Callable[[Any, Any], None] = torch.save) -> Path:
    """Write ``state`` as the checkpoint of ``step`` atomically; drop all but the newest :data:`KEEP`.

    ``write`` is ``rt.save`` in the main job: ``torch.save`` that brings a lazy device's tensors (XLA) to the
    host in one transfer first.
    """
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"step-{step:08d}.pt"
    if final.is_symlink() or (final.exists() and not final.is_file()):
        from ezpz.errors import CheckpointError

        found = "a symbolic link" if final.is_symlink() else "not a file"
        raise CheckpointError(name="--checkpoint-dir", value=f"{final} is {found}",
                              expected="a directory whose step-<NNNNNNNN>.pt entries are checkpoints this script wrote",
                              fix="move it away, or pass another --checkpoint-dir")
    fd, tmp = tempfile.mkstemp(prefix=f".step-{step:08d}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            write({**state, "step": step}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    mine = (p for p in directory.iterdir() if _NAME.match(p.name) and p.is_file() and not p.is_symlink())
    for old in sorted(mine)[:-KEEP]:
        old.unlink(missing_ok=True)
    return final


def latest(directory: Path) -> Path | None:
    """The newest complete checkpoint in ``directory``, or None."""
    try:
        found = sorted(p for p in directory.iterdir() if _NAME.match(p.name))
    except OSError:
        return None
    return found[-1] if found else None


def load_latest(directory: Path | None, *, is_main: bool, distributed: bool) -> dict[str, Any] | None:
    """Rank 0 loads the newest checkpoint (or None) and, when distributed, broadcasts it to every rank."""
    state = None
    if is_main and directory is not None:
        path = latest(directory)
        if path is not None:
            state = torch.load(path, map_location="cpu", weights_only=True)
    if distributed:
        import torch.distributed as dist

        box = [state]
        dist.broadcast_object_list(box, src=0)
        state = box[0]
    return state
