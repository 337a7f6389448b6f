"""Read-only probes the launch drivers use: the batch scheduler, PATH lookups, the MPI flavor."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping

__all__ = ["SCHEDULER_VARS", "mpi_flavor", "scheduler", "which"]

# Variable -> scheduler it proves we are inside. Checked in this order.
SCHEDULER_VARS: tuple[tuple[str, str], ...] = (
    ("SLURM_JOB_ID", "Slurm"),
    ("PBS_JOBID", "PBS"),
    ("PBS_NODEFILE", "PBS"),
    ("LSB_JOBID", "LSF"),
    ("FLUX_JOB_ID", "Flux"),
    ("FLUX_ENCLOSING_ID", "Flux"),  # a flux batch script / flux alloc shell (flux-core src/broker/runat.c)
    ("FLUX_URI", "Flux"),
    ("COBALT_JOBID", "Cobalt"),
)


def scheduler(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """``(scheduler, variable that says so)`` when inside a batch job, else None."""
    for var, name in SCHEDULER_VARS:
        if environ.get(var, "").strip():
            return name, var
    return None


def which(name: str, environ: Mapping[str, str]) -> str | None:
    """``name`` resolved on ``environ``'s PATH."""
    return shutil.which(name, path=environ.get("PATH", os.defpath))


@functools.lru_cache(maxsize=8)
def _version_text(path: str) -> str:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout + done.stderr


def mpi_flavor(path: str | None) -> str:
    """``openmpi``, ``hydra`` (MPICH, Intel MPI, MVAPICH) or ``pals`` (Cray PALS and anything unrecognised)."""
    if path is None:
        return "pals"
    text = _version_text(path).lower()
    if "open mpi" in text or "openrte" in text or "open-mpi" in text:
        return "openmpi"
    if "hydra" in text or "intel(r) mpi" in text or "mpich" in text or "mvapich" in text:
        return "hydra"
    return "pals"
