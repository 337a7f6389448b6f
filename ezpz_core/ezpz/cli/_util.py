"""Shared CLI helpers: output, the relevant environment with secrets redacted, JSON of records."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = ["REDACTED", "err", "is_secret", "jsonable", "relevant_env", "scrub", "table"]

REDACTED = "<redacted>"
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|_KEY$|^KEY$", re.IGNORECASE)
_PREFIXES = (
    "EZPZ_", "TORCH_", "PYTORCH_", "TORCHELASTIC_", "MASTER_", "OMPI_", "PMI_", "PMIX_", "PALS_", "MPICH_", "I_MPI_",
    "MPI_LOCAL", "SLURM_", "PBS_", "COBALT_", "LSB_", "FLUX_", "ZE_", "NCCL_", "RCCL_", "CCL_", "HIP_", "ROCR_",
    "HSA_", "CUDA_", "FI_", "OMP_",
)
_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "ROLE_RANK", "HOSTFILE")


def err(*parts: object) -> None:
    """A line for the user on stderr."""
    print(*parts, file=sys.stderr, flush=True)


def is_secret(name: str) -> bool:
    """Names that look like credentials: ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*API_KEY*``, ``*_KEY``."""
    return bool(_SECRET.search(name))


def relevant_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Variables that change what ezpz decides (ezpz, torch, launchers, vendor runtimes), secrets redacted."""
    keep = {k: v for k, v in environ.items()
            if k.startswith(_PREFIXES) or k in _NAMES or k.endswith("_VISIBLE_DEVICES")}
    return {k: (REDACTED if is_secret(k) else v) for k, v in sorted(keep.items())}


def scrub(text: str, environ: Mapping[str, str]) -> str:
    """Remove the value of every secret-looking variable from ``text``, wherever it turned up."""
    for name, value in environ.items():
        if len(value) >= 4 and is_secret(name):
            text = text.replace(value, REDACTED).replace(json.dumps(value)[1:-1], REDACTED)
    return text


def jsonable(value: Any) -> Any:
    """attrs records, mappings and sequences as plain JSON types (anything else as ``str``)."""
    if attrs.has(type(value)):
        return {f.name: jsonable(getattr(value, f.name)) for f in attrs.fields(type(value)) if f.eq or f.repr}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return str(value)


def table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None, indent: str = "  ") -> Iterable[str]:
    """Left-aligned columns; the last column is not padded."""
    every = [list(header)] if header else []
    every += [list(r) for r in rows]
    if not every:
        return []
    widths = [max(len(r[i]) for r in every) for i in range(len(every[0]) - 1)]
    return [indent + "  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in every]
