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

__all__ = ["FORMAT", "MARKER", "METADATA", "VALUES", "checkpoint_name", "is_complete", "is_ezpz_file",
           "latest_checkpoint", "missing_parts", "read_marker", "require_complete", "set_aside_path", "shard_writer",
           "staging_path"]

MARKER = "ezpz-checkpoint.json"
"""The completion marker: written last, inside the staging directory, before the rename."""
METADATA = ".metadata"
"""``torch.distributed.checkpoint``'s own index of the tensors (its ``FileSystemWriter`` writes it last)."""
VALUES = "values.pt"
"""The plain values (``step=...``) and small stateful objects (schedulers, grad scalers), written by rank 0."""
FORMAT = 1
_STEP_NAME = re.compile(r"step-(\d+)")
_SHARD = re.compile(r"__(\d+)_\d+\.distcp")
_EZPZ_FILE = re.compile(r"ezpz-checkpoint\.json|\.metadata|values\.pt|__\d+_\d+\.distcp|(__\d+)?\.metadata(\.tmp)?"
                        r"|\.tmp-[A-Za-z0-9_]+\.tmp")
"""Every name a save writes in a checkpoint: the marker, DCP's index and shards (and their temporary names), values."""
_MAX_MARKER_BYTES = 16 << 20  # a marker lists names and one short record per file: far below this on any world size


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


def set_aside_path(directory: str | os.PathLike[str]) -> Path:
    """Where a replaced checkpoint waits while its successor is renamed in (only where an atomic exchange is not
    available); the next save puts it back, or removes it once the successor is in place."""
    path = Path(directory)
    return path.with_name(f".{path.name}.replaced")


def is_ezpz_file(name: str) -> bool:
    """Whether ``name`` is one a save writes inside a checkpoint directory."""
    return _EZPZ_FILE.fullmatch(name) is not None


def shard_writer(name: str) -> str:
    """Which rank wrote the file ``name`` in a checkpoint: DCP names each shard ``__<rank>_<n>.distcp``."""
    match = _SHARD.fullmatch(name)
    return f"rank {match.group(1)}" if match else "rank 0"


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
    staging, set_aside = staging_path(path), set_aside_path(path)
    interrupted = (f"; {staging} is a save that never finished (delete it)" if staging.exists() else "")
    if set_aside.exists() and not path.exists():
        interrupted += (f"; {set_aside} is the previous checkpoint, set aside by a replace that was interrupted "
                        f"(the next save_checkpoint puts it back; or rename it to {path.name})")
    raise CheckpointError(
        name=f"{who}({str(path)!r})", value=f"missing {', '.join(missing)}",
        expected="a directory save_checkpoint completed (it writes the marker last, then renames it into place)",
        fix=(f"pass a complete checkpoint: ezpz.checkpoints.latest_checkpoint({str(path.parent)!r}) finds the newest "
             f"one under its parent, or start without resuming{interrupted}"))


def read_marker(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The completion marker's record (format, world size, the keys saved by kind) of a complete checkpoint."""
    path = require_complete(directory)
    try:
        if not (path / MARKER).is_file() or (path / MARKER).is_symlink():
            raise ValueError("not a regular file")
        with open(path / MARKER, "rb") as f:
            data = json.loads(f.read(_MAX_MARKER_BYTES + 1)[:_MAX_MARKER_BYTES].decode("utf-8"))
    except (OSError, ValueError) as err:
        raise CheckpointError(name=f"load_checkpoint({str(path)!r})", value=f"{MARKER}: {err}",
                              expected=f"the JSON record save_checkpoint writes (format {FORMAT})",
                              fix="the marker was changed or damaged: resume from another checkpoint") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        newer = isinstance(data, dict) and isinstance(data.get("format"), int) and data["format"] > FORMAT
        raise CheckpointError(
            name=f"load_checkpoint({str(path)!r})",
            value=(f"{MARKER} says format {data['format']}, newer than this ezpz reads" if newer else
                   f"{MARKER} format {data.get('format')!r}" if isinstance(data, dict)
                   else f"{MARKER} holds a JSON {type(data).__name__}, not ezpz's record"),
            expected=f"format {FORMAT}", fix="load it with the ezpz release that wrote it")
    for kind in ("modules", "optimizers", "stateful", "values"):
        names = data.get(kind, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise CheckpointError(name=f"load_checkpoint({str(path)!r})", value=f"{MARKER}[{kind!r}] = {names!r:.80}",
                                  expected="a list of the names saved", fix="the marker was changed or damaged: "
                                  "resume from another checkpoint")
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
