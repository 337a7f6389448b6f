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


def _pickle_of(data: bytes) -> bytes:
    """The pickle inside ``data``: a ``torch.save`` zip archive's ``data.pkl``, else ``data`` itself."""
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            name = next((n for n in archive.namelist() if n.endswith("/data.pkl")), None)
            return archive.read(name) if name is not None else data
    except (zipfile.BadZipFile, OSError, ValueError, KeyError):
        return data


def _globals_in(data: bytes) -> list[str]:
    """The names a pickle imports (``GLOBAL``/``STACK_GLOBAL``), read opcode by opcode: nothing is built or run."""
    import pickletools

    found: list[str] = []
    strings: list[str] = []
    try:
        for opcode, arg, _ in pickletools.genops(_pickle_of(data)):
            if isinstance(arg, str):
                if opcode.name == "GLOBAL":
                    found.append(arg.replace(" ", "."))
                strings = [*strings[-1:], arg]
            elif opcode.code == "\x93" and len(strings) == 2:  # STACK_GLOBAL: module and name pushed before it
                found.append(".".join(strings))
    except (ValueError, EOFError):  # a damaged pickle: what was read so far
        pass
    return found


def what_it_runs(err: BaseException, data: bytes = b"") -> str:
    """What a refused pickle would have called (``posix.system``): from the pickle's opcodes, else the unpickler's
    message."""
    allowed = ("torch.", "collections.", "builtins.", "_codecs.", "pathlib.")
    calls = [g for g in _globals_in(data) if not g.startswith(allowed)] if data else []
    if not calls:
        found = _GLOBAL.search(str(err))
        calls = [found.group(1)] if found else []
    return f"a pickle that calls {', '.join(dict.fromkeys(calls))}" if calls else "something other than plain values"


def load_weights_only(source: str | os.PathLike[str] | IO[bytes]) -> Any:
    """``torch.load(weights_only=True)`` on the CPU: tensors and plain values, never code."""
    return torch.load(source, map_location="cpu", weights_only=True)


class SafeReader(FileSystemReader):
    """DCP's file-system reader with the index read by :func:`read_metadata`."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        with open(Path(self.path) / ".metadata", "rb") as f:
            metadata = read_metadata(f)
        storage_meta = getattr(metadata, "storage_meta", None) or StorageMeta()  # as DCP's own reader does
        storage_meta.load_id = self.load_id
        metadata.storage_meta = storage_meta
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """DCP's load planner with a shard's non-tensor entries read ``weights_only`` (DCP's own reads them unrestricted)."""

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        data = value.read()
        try:
            load_weights_only(io.BytesIO(data))  # DCP's own read below then meets plain values only
        except Exception as err:  # torch.load fails in many ways on a hostile entry; its advice is not repeated
            key = getattr(getattr(read_item, "dest_index", None), "fqn", "an entry")
            raise pickle.UnpicklingError(f"{key} holds {what_it_runs(err, data)}; ezpz loads checkpoint contents "
                                         "with weights_only=True and never executes them") from None
        super().load_bytes(read_item, io.BytesIO(data))
