"""Hostile checkpoint directories, shared by tests/test_checkpoint_fuzz.py (one process) and its 2-rank worker.

Each case damages a copy of a good checkpoint (and may use a second checkpoint, ``other``, of the same
model saved from other values) and says what the first line of the ``CheckpointError`` must name.
A case that would run code makes it create ``sentinel``; a case that points outside the checkpoint
points at ``outside``, whose contents the test compares before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import posix
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MARKER, METADATA, VALUES = "ezpz-checkpoint.json", ".metadata", "values.pt"


@dataclass(frozen=True)
class Case:
    name: str
    damage: Callable[[Path, Path, Path, Path], None]  # (checkpoint, other checkpoint, outside dir, sentinel)
    expect: str  # in the error's first line
    model: str = "same"  # "same", "wider" (another shape) or "double" (another dtype)
    needs_non_root: bool = False


class _RunsCode:
    """Pickles as a call to ``posix.system``: unpickling it without restriction would create the sentinel file.

    ``posix.system``, not ``os.system``: the host-touch record (tests/host_touch.py) wraps ``os.system``, and pickle
    refuses a function that is not the object its module holds under its name."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self) -> tuple[object, ...]:
        return posix.system, (f"touch {self.sentinel}",)


def shard(directory: Path, rank: int) -> Path:
    """The first shard file rank ``rank`` wrote (``__<rank>_0.distcp``)."""
    return directory / f"__{rank}_0.distcp"


def _truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def _strip_to_marker(ck: Path, *_: Path) -> None:
    for entry in ck.iterdir():
        if entry.name != MARKER:
            entry.unlink()


def _symlink_outside(ck: Path, other: Path, outside: Path, sentinel: Path, rank: int) -> None:
    target = outside / "a-shard-elsewhere.distcp"
    shutil.copyfile(shard(ck, rank), target)  # a shard torch would read happily, were the link followed
    shard(ck, rank).unlink()
    shard(ck, rank).symlink_to(target)


def _unreadable(ck: Path, other: Path, outside: Path, sentinel: Path, rank: int) -> None:
    shard(ck, rank).chmod(0)


def cases(rank: int) -> list[Case]:
    """Every case; shard cases use rank ``rank``'s shard, so a 2-rank job names the other rank's file."""
    return [
        Case("garbage marker", lambda ck, *_: (ck / MARKER).write_bytes(b"\x00{not json"), MARKER),
        Case("marker of a newer format", lambda ck, *_: (ck / MARKER).write_text(json.dumps(
            {**json.loads((ck / MARKER).read_text()), "format": 99})), "format 99, newer than this ezpz reads"),
        Case("marker without data", _strip_to_marker, f"missing '{METADATA}'"),
        Case("truncated .metadata", lambda ck, *_: _truncate(ck / METADATA), "'.metadata' is truncated or damaged"),
        Case("missing .metadata", lambda ck, *_: (ck / METADATA).unlink(), f"missing '{METADATA}'"),
        Case(".metadata that would run code", lambda ck, other, out, sentinel: (ck / METADATA).write_bytes(
            pickle.dumps(_RunsCode(sentinel))), "'.metadata' holds a pickle that calls posix.system"),
        Case("truncated shard", lambda ck, *_: _truncate(shard(ck, rank)),
             f"shard file '__{rank}_0.distcp' is truncated (written by rank {rank})"),
        Case("missing shard", lambda ck, *_: shard(ck, rank).unlink(),
             f"shard file '__{rank}_0.distcp' is missing (written by rank {rank})"),
        Case("shard from another checkpoint", lambda ck, other, *_: shutil.copyfile(shard(other, rank), shard(ck, rank)),
             f"'__{rank}_0.distcp' is not the file this checkpoint's save wrote (written by rank {rank}"),
        Case("values.pt that would run code", lambda ck, other, out, sentinel: (ck / VALUES).write_bytes(
            pickle.dumps(_RunsCode(sentinel))), "'values.pt' holds a pickle that calls posix.system"),
        Case("symlink pointing outside", lambda ck, other, out, sentinel: _symlink_outside(ck, other, out, sentinel, rank),
             f"'__{rank}_0.distcp' is a symbolic link"),
        Case("FIFO in place of a shard", lambda ck, *_: (shard(ck, rank).unlink(), os.mkfifo(shard(ck, rank))),
             f"'__{rank}_0.distcp' is not a plain file"),
        Case("unreadable shard", lambda ck, other, out, sentinel: _unreadable(ck, other, out, sentinel, rank),
             f"cannot read '__{rank}_0.distcp'", needs_non_root=True),
        Case("model of another shape", lambda *_: None, "shape or dtype mismatch", model="wider"),
        Case("model of another dtype", lambda *_: None, "shape or dtype mismatch", model="double"),
    ]


def build(kind: str, seed: int):  # -> torch.nn.Module (torch is imported only by the tests that build one)
    """The model a case saves or loads: ``same`` as saved, ``wider`` (8 -> 10 features) or ``double`` (float64)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    width = 10 if kind == "wider" else 8
    model = nn.Sequential(nn.Linear(4, width), nn.Linear(width, 2))
    if kind == "double":
        model = model.double()
    return model


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` (links not followed) with its content's hash: what "untouched" is compared by."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_file():
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                out[rel] = "dir"
    return out
