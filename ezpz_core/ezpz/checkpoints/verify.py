"""Checking a checkpoint before DCP reads it, so a load fails with its cause named, never deep in a collective.

:func:`check_files` (rank 0, whose verdict every rank hears) reads the marker, the index through
:func:`~ezpz.checkpoints.safe_read.read_metadata`, and ``values.pt`` through ``weights_only``;
checks that every shard file the index names is a plain file inside the directory (no link),
long enough for the index, and the one this save wrote (its size and :func:`fingerprint` as the
marker recorded them). :func:`check_shapes` (every rank) compares the tensors a load fills with
the index: each key whose shape or dtype differs is listed. Each failure is a
:class:`~ezpz.errors.CheckpointError` whose value names the file (and the rank that wrote it) or
the keys.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import torch
from torch.distributed.checkpoint.metadata import BytesStorageMetadata, Metadata, TensorStorageMetadata

from ezpz.checkpoints.layout import METADATA, VALUES, read_marker, shard_writer
from ezpz.checkpoints.safe_read import load_weights_only, read_metadata, what_it_runs
from ezpz.errors import CheckpointError

__all__ = ["check_files", "check_shapes", "fingerprint"]

_BLOCK = 1 << 16  # bytes hashed at the start, middle and end of a file
_SHOWN = 6  # mismatched keys named in full
_SNIFF = 64 << 20  # bytes of a refused pickle read to name what it calls


def fingerprint(path: Path) -> list[Any]:
    """``[size, hash]`` of a file: BLAKE2b of three 64 KiB blocks (start, middle, end), constant time on any size.

    Tells a shard from the same-sized shard of another save (trained values differ everywhere); a change
    confined to the bytes between the blocks is not seen.
    """
    size = os.stat(path).st_size
    digest = hashlib.blake2b(str(size).encode(), digest_size=16)
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
        for start in sorted({0, max(0, size // 2 - _BLOCK // 2), max(0, size - _BLOCK)}):
            f.seek(start)
            digest.update(f.read(_BLOCK))
    return [size, digest.hexdigest()]


def _error(path: Path, value: str, fix: str, expected: str = "a checkpoint as save_checkpoint wrote it") -> CheckpointError:
    return CheckpointError(name=f"load_checkpoint({str(path)!r})", value=value, expected=expected, fix=fix)


_OTHER = "resume from another checkpoint (ezpz.checkpoints.latest_checkpoint lists complete ones)"


def _plain_files(path: Path) -> dict[str, int]:
    """Every file in ``path`` with its size; a link, a FIFO or any other non-file inside is refused by name."""
    sizes = {}
    for entry in os.scandir(path):
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            raise _error(path, f"{entry.name!r} is a symbolic link (to {os.readlink(entry.path)!r})",
                         "ezpz never follows a link inside a checkpoint: replace it with the file itself, or "
                         + _OTHER)
        if stat.S_ISREG(mode):
            sizes[entry.name] = entry.stat(follow_symlinks=False).st_size
        elif not stat.S_ISDIR(mode):
            raise _error(path, f"{entry.name!r} is not a plain file", _OTHER)
    return sizes


def _open(path: Path, name: str, what: str) -> BinaryIO:
    """``name`` opened for reading, non-blocking (a FIFO swapped in after the check cannot hang the read)."""
    try:
        return os.fdopen(os.open(path / name, os.O_RDONLY | os.O_NONBLOCK), "rb")
    except OSError as err:
        raise _error(path, f"cannot read {name!r} ({what}, written by {shard_writer(name)}): "
                           f"{type(err).__name__}: {err.strerror or err}",
                     "check the file's permissions and that this host sees the file system every rank wrote to") from err


def _head(f: BinaryIO) -> bytes:
    """The start of a refused file, for naming what it would run: read only so far (a huge file is not loaded)."""
    try:
        f.seek(0)
        return f.read(_SNIFF)
    except OSError:
        return b""


def _metadata(path: Path, sizes: Mapping[str, int]) -> Metadata:
    with _open(path, METADATA, "torch.distributed.checkpoint's index") as f:
        try:
            return read_metadata(f)
        except Exception as err:  # a damaged pickle fails in many ways (EOFError, UnpicklingError, KeyError, ...)
            refused = "not part of a checkpoint index" in str(err)
            value = (f"{METADATA!r} holds {what_it_runs(err, _head(f))}, not a checkpoint index; ezpz never executes "
                     "checkpoint contents" if refused else
                     f"{METADATA!r} is truncated or damaged ({sizes.get(METADATA, 0)} bytes; written by rank 0 last "
                     f"in the save): {type(err).__name__}: {err}")
            raise _error(path, value, _OTHER) from err


def _check_shards(path: Path, metadata: Metadata, sizes: Mapping[str, int]) -> None:
    needed: dict[str, int] = {}
    for info in metadata.storage_data.values():
        name = str(info.relative_path)
        if os.path.basename(name) != name or name in ("", ".", ".."):
            raise _error(path, f"the index names {name!r}, outside the checkpoint directory", _OTHER)
        needed[name] = max(needed.get(name, 0), int(info.offset) + int(info.length))
    for name, end in sorted(needed.items()):
        if name not in sizes:
            raise _error(path, f"shard file {name!r} is missing (written by {shard_writer(name)})",
                         "copy the whole checkpoint directory, every rank's files, or " + _OTHER)
        if sizes[name] < end:
            raise _error(path, f"shard file {name!r} is truncated (written by {shard_writer(name)}): "
                               f"{sizes[name]} bytes, the index needs {end}", _OTHER)


def _check_fingerprints(path: Path, recorded: Any) -> None:
    if not isinstance(recorded, dict):
        return  # a checkpoint saved before ezpz recorded its files
    for name, expected in sorted(recorded.items()):
        if not os.path.isfile(path / name):
            raise _error(path, f"{name!r} is missing (written by {shard_writer(name)})", _OTHER)
        try:
            found = fingerprint(path / name)
        except OSError as err:
            raise _error(path, f"cannot read {name!r} (written by {shard_writer(name)}): {type(err).__name__}: "
                               f"{err.strerror or err}", "check the file's permissions and that this host sees the "
                               "file system every rank wrote to") from err
        if found != expected:
            how = (f"{found[0]} bytes, the save wrote {expected[0]}" if isinstance(expected, list) and expected
                   and found[0] != expected[0] else "its contents differ from what the save wrote")
            raise _error(path, f"{name!r} is not the file this checkpoint's save wrote (written by "
                               f"{shard_writer(name)}; {how}): a file from another checkpoint, or changed since", _OTHER)


def _values(path: Path) -> dict[str, Any]:
    with _open(path, VALUES, "the plain values") as f:
        try:
            saved = load_weights_only(f)
        except Exception as err:  # torch.load's failures are many kinds; each is a file that is not plain values
            raise _error(path, f"{VALUES!r} holds {what_it_runs(err, _head(f))} (written by rank 0); ezpz loads "
                               "checkpoint contents with weights_only=True and never executes them",
                         _OTHER, expected="plain values: numbers, strings, lists, dicts, tensors") from err
    if not (isinstance(saved, dict) and isinstance(saved.get("values"), dict)
            and isinstance(saved.get("stateful"), dict)):
        raise _error(path, f"{VALUES!r} holds a {type(saved).__name__}, not the record save_checkpoint writes", _OTHER)
    return saved


def check_files(path: Path) -> tuple[dict[str, Any], Metadata, dict[str, Any]]:
    """The marker, the index and the plain values of the checkpoint at ``path``, once every file checks out."""
    marker = read_marker(path)
    sizes = _plain_files(path)
    metadata = _metadata(path, sizes)
    _check_shards(path, metadata, sizes)
    values = _values(path)  # what a file holds is named before whether it is the one saved
    _check_fingerprints(path, marker.get("files"))
    return marker, metadata, values


def _leaves(obj: Any, prefix: str) -> Any:
    """``(key, tensor)`` for every tensor in a state dict, keyed as DCP flattens it (path parts joined by dots)."""
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _leaves(value, f"{prefix}.{key}")
    elif isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            yield from _leaves(value, f"{prefix}.{index}")


def _shape(size: Any) -> str:
    return f"[{', '.join(str(int(n)) for n in size)}]"


def check_shapes(path: Path, metadata: Metadata, tensors: Mapping[str, Any], modules: list[str]) -> None:
    """Refuse, listing each key, when a tensor to load differs from the saved one in shape or dtype, or either
    side lacks a module's key."""
    saved = metadata.state_dict_metadata
    wrong: list[str] = []
    current: set[str] = set()
    for top, state in tensors.items():
        for key, tensor in _leaves(state, top):
            current.add(key)
            entry = saved.get(key)
            if entry is None:
                wrong.append(f"{key}: current {_shape(tensor.shape)}, not in the checkpoint")
            elif isinstance(entry, BytesStorageMetadata):
                wrong.append(f"{key}: current {_shape(tensor.shape)}, saved as a non-tensor value")
            elif isinstance(entry, TensorStorageMetadata) and (tuple(entry.size) != tuple(tensor.shape)
                                                                or entry.properties.dtype != tensor.dtype):
                wrong.append(f"{key}: saved {_shape(entry.size)} {entry.properties.dtype}, "
                             f"current {_shape(tensor.shape)} {tensor.dtype}")
    for key, entry in saved.items():
        if key.split(".", 1)[0] in modules and key not in current and isinstance(entry, TensorStorageMetadata):
            wrong.append(f"{key}: saved {_shape(entry.size)}, not in the current model")
    if wrong:
        more = f"; and {len(wrong) - _SHOWN} more" if len(wrong) > _SHOWN else ""
        raise _error(path, f"shape or dtype mismatch in {len(wrong)} key(s): {'; '.join(wrong[:_SHOWN])}{more}",
                     "build the model (and its optimizer) as the one that saved it, with the same sizes and dtype, "
                     "before loading", expected="tensors of the shapes and dtypes saved")
