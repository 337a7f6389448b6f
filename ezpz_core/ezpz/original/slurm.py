"""The original ezpz's ``ezpz.slurm``, answered from the Slurm job this process runs in.

The original asked ``sacct``/``scontrol``; here the job is the one named by
``SLURM_JOB_ID`` and ``SLURM_JOB_NODELIST`` (what ``setup()`` and ``ezpz
launch`` read); another job's id raises a ConfigError saying so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ezpz.errors import ConfigError
from ezpz.original._launch_cmd import launch_prefix

__all__ = [
    "build_launch_cmd", "get_nodelist_from_slurm_jobid", "get_slurm_jobid_of_active_job", "get_slurm_nodefile_from_jobid",
    "get_slurm_nodefile_of_active_job", "get_slurm_running_jobs", "get_slurm_running_jobs_for_user",
]


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def get_slurm_jobid_of_active_job(*, environ: Mapping[str, str] | None = None) -> str | None:
    """``SLURM_JOB_ID`` (or the older ``SLURM_JOBID``), or None outside a Slurm job."""
    env = _env(environ)
    return (env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "").strip() or None


def get_slurm_running_jobs(*, environ: Mapping[str, str] | None = None) -> list[str] | None:
    """The job this process runs in, as a one-item list; None outside a Slurm job (other jobs are not queried)."""
    active = get_slurm_jobid_of_active_job(environ=environ)
    return None if active is None else [active]


def get_nodelist_from_slurm_jobid(jobid: str | int, *, environ: Mapping[str, str] | None = None) -> list[str]:
    """The hosts of job ``jobid`` (``SLURM_JOB_NODELIST`` expanded), when it is this process's job."""
    from ezpz.inputs.hostlist import expand_nodelist

    env = _env(environ)
    active = get_slurm_jobid_of_active_job(environ=env)
    if active is None or str(jobid).strip() != active:
        raise ConfigError(name="jobid", value=jobid,
                          expected=f"the Slurm job this process runs in (SLURM_JOB_ID={active or 'not set'})",
                          fix="call it from inside that job (ezpz answers from the job's own variables, not sacct)")
    text = (env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "").strip()
    if not text:
        raise ConfigError(name="SLURM_JOB_NODELIST", value=None, expected="set by Slurm inside the job",
                          fix="run inside the Slurm allocation (sbatch / salloc), where Slurm sets it")
    return expand_nodelist(text)


def get_slurm_running_jobs_for_user(*, environ: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """``{jobid: hosts}`` for the job this process runs in (empty outside one)."""
    active = get_slurm_jobid_of_active_job(environ=environ)
    return {} if active is None else {active: get_nodelist_from_slurm_jobid(active, environ=environ)}


def get_slurm_nodefile_from_jobid(jobid: int | str, *, environ: Mapping[str, str] | None = None) -> str:
    """Write ``./nodefile-<jobid>`` (one host per line, as the original did) and return its absolute path."""
    from ezpz.original.hostfile import write_hostfile_from_list_of_hosts

    hosts = get_nodelist_from_slurm_jobid(jobid, environ=environ)
    return str(write_hostfile_from_list_of_hosts(hosts, Path.cwd() / f"nodefile-{jobid}").resolve())


def get_slurm_nodefile_of_active_job(*, environ: Mapping[str, str] | None = None) -> str | None:
    """The node file of this process's job (written as above), or None outside a Slurm job."""
    active = get_slurm_jobid_of_active_job(environ=environ)
    return None if active is None else get_slurm_nodefile_from_jobid(active, environ=environ)


def build_launch_cmd(ngpus: int | None = None, nhosts: int | None = None, ngpu_per_host: int | None = None,
                     hostfile: str | os.PathLike[str] | None = None, cpu_bind: str | None = None, *,
                     environ: Mapping[str, str] | None = None) -> str:
    """The ``srun`` prefix for this Slurm job, as ``ezpz launch`` builds it."""
    return launch_prefix("srun", ngpus=ngpus, nhosts=nhosts, ngpu_per_host=ngpu_per_host, hostfile=hostfile,
                         cpu_bind=cpu_bind, environ=environ)
