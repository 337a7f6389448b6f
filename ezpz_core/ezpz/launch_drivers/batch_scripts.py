"""The batch script ``ezpz submit`` hands to ``sbatch`` or ``qsub``: a pure function of a :class:`BatchJob`.

The script holds the scheduler's directives (nodes, walltime, account, queue,
where the output goes), the environment the submitting shell had that a batch
job does not (the Python environment activated, the working directory), and
the line ``python -m ezpz launch -- CMD``. PBS Pro's directives follow the
recorded usage on ALCF machines (saforem2/ezpz ``experiments/aurora/lora_239_xpu.sh``:
``qsub -l select=2 -l walltime=00:60:00 -l filesystems=flare:home -A datascience -q workq -o ... -e ...``);
``-l filesystems=`` is site-specific and written only when given.
"""

from __future__ import annotations

import re
import shlex

from attr import field

from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen

__all__ = ["SCHEDULERS", "BatchJob", "batch_script", "walltime_seconds"]

SCHEDULERS = ("slurm", "pbs")
"""The schedulers ``ezpz submit`` writes for."""

_TIME = re.compile(r"^(?:(?P<d>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
                   r"|(?P<a>\d+)(?::(?P<b>\d+)(?::(?P<c>\d+))?)?)$")


def walltime_seconds(text: str) -> int | None:
    """Seconds in a Slurm time (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``), or None
    when ``text`` is none of these or is zero."""
    m = _TIME.match(text.strip())
    if m is None:
        return None
    if m["d"] is not None:
        total = int(m["d"]) * 86400 + int(m["dh"]) * 3600 + int(m["dm"] or 0) * 60 + int(m["ds"] or 0)
    elif m["c"] is not None:
        total = int(m["a"]) * 3600 + int(m["b"]) * 60 + int(m["c"])
    elif m["b"] is not None:
        total = int(m["a"]) * 60 + int(m["b"])
    else:
        total = int(m["a"]) * 60
    return total or None


def _hms(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


@frozen
class BatchJob:
    """What the batch script needs: scheduler, layout, limits, where it runs and what.

    ``python`` is the interpreter the job runs ezpz with (the submitting one);
    ``ntasks``/``ppn`` the launch's ``-n``/``--ppn`` (Slurm reserves that many tasks; PBS Pro's ``select=N``
    takes whole nodes); ``activate`` a venv's ``bin/activate`` to source first, or None; ``output``
    the file the scheduler writes the job's stdout and stderr to.
    """

    scheduler: str
    nodes: int
    command: tuple[str, ...] = field(converter=as_tuple)
    workdir: str
    python: str
    output: str
    walltime_s: int | None = None
    account: str | None = None
    queue: str | None = None
    name: str = "ezpz"
    activate: str | None = None
    filesystems: str | None = None
    ntasks: int | None = None
    ppn: int | None = None
    launch_args: tuple[str, ...] = field(default=(), converter=as_tuple)


def _directives(job: BatchJob) -> list[str]:
    if job.scheduler == "slurm":
        lines = [f"#SBATCH --job-name={job.name}", f"#SBATCH --nodes={job.nodes}", f"#SBATCH --output={job.output}"]
        if job.ntasks is not None:  # srun inside the job may start no more tasks than the job holds
            lines.append(f"#SBATCH --ntasks={job.ntasks}")
        if job.ppn is not None:
            lines.append(f"#SBATCH --ntasks-per-node={job.ppn}")
        if job.walltime_s is not None:
            lines.append(f"#SBATCH --time={_hms(job.walltime_s)}")
        if job.account:
            lines.append(f"#SBATCH --account={job.account}")
        if job.queue:
            lines.append(f"#SBATCH --partition={job.queue}")
        return lines
    lines = [f"#PBS -N {job.name}", f"#PBS -l select={job.nodes}"]
    if job.walltime_s is not None:
        lines.append(f"#PBS -l walltime={_hms(job.walltime_s)}")
    if job.filesystems:
        lines.append(f"#PBS -l filesystems={job.filesystems}")
    if job.account:
        lines.append(f"#PBS -A {job.account}")
    if job.queue:
        lines.append(f"#PBS -q {job.queue}")
    lines += ["#PBS -j oe", f"#PBS -o {job.output}"]
    return lines


def batch_script(job: BatchJob) -> str:
    """The whole script text for ``job`` (directives, environment, the ``ezpz launch`` line)."""
    if job.scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler {job.scheduler!r}: expected one of {', '.join(SCHEDULERS)}")
    q = shlex.quote
    body = ["#!/bin/bash", *_directives(job), "# written by `ezpz submit`", "set -o pipefail",
            f"cd {q(job.workdir)} || exit 1"]
    if job.activate:
        body.append(f"source {q(job.activate)} || exit 1")
    launch = [job.python, "-m", "ezpz", "launch", *job.launch_args, "--", *job.command]
    body.append(f"exec {shlex.join(launch)}")
    return "\n".join(body) + "\n"
