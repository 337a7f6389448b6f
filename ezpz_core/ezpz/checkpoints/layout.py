"""A checkpoint directory's format, without torch: what makes one complete, and the latest complete one.

``save_checkpoint`` writes into a hidden sibling (``.step-000010.incomplete``), writes the
completion marker (:data:`MARKER`) into it last and then renames it to its name: a directory
with that name and its marker is complete, anything else is not a checkpoint. ``ezpz launch``
and scripts find where to resume with :func:`latest_checkpoint` (``step-000010``,
``step-000020``, ... under one parent).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ezpz.errors import CheckpointError

__all__ = ["FORMAT", "MARKER", "METADATA", "VALUES", "checkpoint_name", "is_complete", "latest_checkpoint",
           "missing_parts", "read_marker", "require_complete", "staging_path"]

MARKER = "ezpz-checkpoint.json"
"""The completion marker: written last, inside the staging directory, before the rename."""
METADATA = ".metadata"
"""``torch.distributed.checkpoint``'s own index of the tensors (its ``FileSystemWriter`` writes it last)."""
VALUES = "values.pt"
"""The plain values (``step=...``) and small stateful objects (schedulers, grad scalers), written by rank 0."""
FORMAT = 1
_STEP_NAME = re.compile(r"step-(\d+)")


def checkpoint_name(step: int) -> str:
    """The directory name for ``step``: ``step-000010`` (zero-padded so names sort as steps do)."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CheckpointError(name="checkpoint_name(step)", value=step, expected="a step number >= 0",
                              fix="pass the number of optimizer steps taken, e.g. checkpoint_name(10)")
    return f"step-{step:06d}"


def staging_path(directory: str | os.PathLike[str]) -> Path:
    """Where ``directory`` is written before it is complete: a hidden sibling, renamed to ``directory`` last."""
    path = Path(directory)
    return path.with_name(f".{path.name}.incomplete")


def missing_parts(directory: str | os.PathLike[str]) -> list[str]:
    """What ``directory`` lacks to be a complete checkpoint (empty: it is one)."""
    path = Path(directory)
    if not path.exists():
        return ["the directory itself"]
    if not path.is_dir():
        return ["a directory (it is a file)"]
    return [f"{name!r} ({why})" for name, why in ((MARKER, "the completion marker, written last"),
                                                  (METADATA, "torch.distributed.checkpoint's index"))
            if not (path / name).is_file()]


def is_complete(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` is a checkpoint ``save_checkpoint`` finished."""
    return not missing_parts(directory)


def require_complete(directory: str | os.PathLike[str], who: str = "load_checkpoint") -> Path:
    """``directory`` as a path when it is complete; else :class:`CheckpointError` naming what is missing and the fix."""
    path = Path(directory)
    missing = missing_parts(path)
    if not missing:
        return path
    staging = staging_path(path)
    interrupted = (f"; {staging} is a save that never finished (delete it)" if staging.exists() else "")
    raise CheckpointError(
        name=f"{who}({str(path)!r})", value=f"missing {', '.join(missing)}",
        expected="a directory save_checkpoint completed (it writes the marker last, then renames it into place)",
        fix=(f"pass a complete checkpoint: ezpz.checkpoints.latest_checkpoint({str(path.parent)!r}) finds the newest "
             f"one under its parent, or start without resuming{interrupted}"))


def read_marker(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The completion marker's record (format, world size, the keys saved by kind) of a complete checkpoint."""
    path = require_complete(directory)
    try:
        data = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CheckpointError(name=f"load_checkpoint({str(path)!r})", value=f"{MARKER}: {err}",
                              expected=f"the JSON record save_checkpoint writes (format {FORMAT})",
                              fix="the marker was changed or damaged: resume from another checkpoint") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(name=f"load_checkpoint({str(path)!r})", value=f"{MARKER} format {data.get('format')!r}"
                              if isinstance(data, dict) else f"{MARKER}: {type(data).__name__}",
                              expected=f"format {FORMAT}", fix="load it with the ezpz release that wrote it")
    return data


def latest_checkpoint(parent: str | os.PathLike[str]) -> Path | None:
    """The complete checkpoint under ``parent`` with the highest step (``step-000020`` over ``step-000010``).

    Directories not named ``step-<number>``, unfinished ones (no marker, or still under their
    hidden staging name) and files are passed over. None when there is none, or no ``parent``.
    """
    try:
        entries = list(os.scandir(parent))
    except (FileNotFoundError, NotADirectoryError):
        return None
    best: tuple[int, Path] | None = None
    for entry in entries:
        match = _STEP_NAME.fullmatch(entry.name)
        if match is None or not entry.is_dir():
            continue
        step = int(match.group(1))
        if (best is None or step > best[0]) and is_complete(entry.path):
            best = (step, Path(entry.path))
    return best[1] if best else None
