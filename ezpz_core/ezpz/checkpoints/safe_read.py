"""Reading a checkpoint's files without running anything they hold.

``torch.distributed.checkpoint`` reads its index (``.metadata``) with plain ``pickle`` and the
non-tensor entries of a shard with ``torch.load(weights_only=False)``: a crafted file runs code
in every rank. Here the index goes through an unpickler that builds only DCP's index types
(:data:`_ALLOWED`; torch's ``Size``, dtypes, layouts and memory formats, paths), shard entries
and ``values.pt`` through ``torch.load(weights_only=True)``. ezpz never executes checkpoint
contents, and never suggests turning that off.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from pathlib import Path
from typing import IO, Any

import torch
from torch.distributed.checkpoint import DefaultLoadPlanner, FileSystemReader
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

__all__ = ["SafeLoadPlanner", "SafeReader", "load_weights_only", "read_metadata", "what_it_runs"]

_ALLOWED = {
    "torch.distributed.checkpoint.metadata": frozenset({
        "Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata", "TensorProperties",
        "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING"}),
    "torch.distributed.checkpoint.filesystem": frozenset({"_StorageInfo"}),
    "torch.serialization": frozenset({"_get_layout"}),  # looks a layout up by name in torch's own table
    "torch": frozenset({"Size"}),
    "collections": frozenset({"OrderedDict"}),
    "pathlib": frozenset({"Path", "PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath"}),
    "pathlib._local": frozenset({"Path", "PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath"}),
}
"""What DCP's index pickles (torch 2.4 to 2.15): checked by tests/test_checkpoint_fuzz.py on the torch it runs."""
_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


class _IndexUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if name in _ALLOWED.get(module, ()):
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), (torch.dtype, torch.layout,
                                                                             torch.memory_format)):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"GLOBAL {module}.{name} is not part of a checkpoint index")


def read_metadata(stream: IO[bytes]) -> Metadata:
    """DCP's index from ``stream``, built from its own types only; :class:`pickle.UnpicklingError` for anything else."""
    metadata = _IndexUnpickler(stream).load()
    if not isinstance(metadata, Metadata):
        raise pickle.UnpicklingError(f"it holds a {type(metadata).__name__}, not DCP's Metadata")
    return metadata


def what_it_runs(err: BaseException) -> str:
    """What a refused pickle would have called (``os.system``), from the unpickler's message."""
    found = _GLOBAL.search(str(err))
    return f"a pickle that calls {found.group(1)}" if found else "something other than plain values"


def load_weights_only(source: str | os.PathLike[str] | IO[bytes]) -> Any:
    """``torch.load(weights_only=True)`` on the CPU: tensors and plain values, never code."""
    return torch.load(source, map_location="cpu", weights_only=True)


class SafeReader(FileSystemReader):
    """DCP's file-system reader with the index read by :func:`read_metadata`."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        with open(Path(self.path) / ".metadata", "rb") as f:
            metadata = read_metadata(f)
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """DCP's load planner with a shard's non-tensor entries read ``weights_only`` (DCP's own reads them unrestricted)."""

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        super().load_bytes(read_item, io.BytesIO(_checked_bytes(value)))


def _checked_bytes(value: io.BytesIO) -> bytes:
    """``value``'s bytes once ``torch.load(weights_only=True)`` reads them; DCP then reads plain values only."""
    data = value.read()
    load_weights_only(io.BytesIO(data))
    return data
