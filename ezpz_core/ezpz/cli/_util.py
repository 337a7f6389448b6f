"""Shared CLI helpers: output, the relevant environment with secrets redacted, JSON of records."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence

from ezpz.primitives.json_values import jsonable
from ezpz.primitives.redact import REDACTED, is_secret, redacted_names
from ezpz.primitives.redact import scrub as _scrub

__all__ = ["REDACTED", "err", "is_secret", "jsonable", "relevant_env", "scrub", "table"]

_PREFIXES = (
    "EZPZ_", "TORCH_", "PYTORCH_", "TORCHELASTIC_", "MASTER_", "OMPI_", "PMI_", "PMIX_", "PALS_", "MPICH_", "I_MPI_",
    "MPI_LOCAL", "SLURM_", "PBS_", "COBALT_", "LSB_", "FLUX_", "ZE_", "NCCL_", "RCCL_", "CCL_", "HIP_", "ROCR_",
    "HSA_", "CUDA_", "FI_", "OMP_", "JSM_", "PET_", "SKYPILOT_",
)
_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "ROLE_RANK", "HOSTFILE",
          "NPROC_PER_NODE", "KUBERNETES_SERVICE_HOST")


def err(*parts: object) -> None:
    """A line for the user on stderr, secrets scrubbed (:mod:`ezpz.primitives.redact`)."""
    print(_scrub(" ".join(str(p) for p in parts)), file=sys.stderr, flush=True)


def relevant_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Variables that change what ezpz decides (ezpz, torch, launchers, vendor runtimes), secrets redacted."""
    keep = {k: v for k, v in environ.items()
            if k.startswith(_PREFIXES) or k in _NAMES or k.endswith("_VISIBLE_DEVICES")}
    secret = set(redacted_names(environ))
    return {k: (REDACTED if k in secret else v) for k, v in sorted(keep.items())}


def scrub(text: str, environ: Mapping[str, str]) -> str:
    """Remove secrets from ``text`` (see :mod:`ezpz.primitives.redact`): values, URL user-info, secret query parameters."""
    return _scrub(text, environ)


def table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None, indent: str = "  ") -> Iterable[str]:
    """Left-aligned columns; the last column is not padded."""
    every = [list(header)] if header else []
    every += [list(r) for r in rows]
    if not every:
        return []
    widths = [max(len(r[i]) for r in every) for i in range(len(every[0]) - 1)]
    return [indent + "  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in every]
