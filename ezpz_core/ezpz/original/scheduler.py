"""The original ezpz's scheduler helpers, answered from the launch contracts' variables.

``get_scheduler()``, ``get_active_jobid()``, ``get_nodelist_of_active_job()``
and ``get_machine()``. Unlike the original these never run ``qstat``,
``sacct`` or ``scontrol``: the job is the one this process runs in, named by
its scheduler's variables (the same ones ``setup()`` and ``ezpz launch`` read).
The only command run is ``flux resource list`` (bounded), for Flux's host list.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
from collections.abc import Callable, Mapping

from ezpz.errors import ConfigError
from ezpz.primitives.frozen_records import frozen
from ezpz.original.machines import SCHEDULER_OF_MACHINE, machine_of

__all__ = ["ActiveJob", "active_job", "get_active_jobid", "get_machine", "get_nodelist_of_active_job",
           "get_scheduler", "short_host"]

#: (scheduler, variable that says this process runs in one of its jobs), checked in order.
_BATCH: tuple[tuple[str, str], ...] = (
    ("PBS", "PBS_JOBID"),
    ("SLURM", "SLURM_JOB_ID"),
    ("SLURM", "SLURM_JOBID"),
    ("LSF", "LSB_JOBID"),
    ("FLUX", "FLUX_JOB_ID"),  # a task of flux run
    ("FLUX", "FLUX_ENCLOSING_ID"),  # a flux batch script / flux alloc shell (flux-core src/broker/runat.c)
    ("COBALT", "COBALT_JOBID"),
)


@frozen
class ActiveJob:
    """The job this process runs in: its scheduler, id (None when the scheduler names none) and the variable."""

    scheduler: str
    jobid: str | None
    source: str


def _get(environ: Mapping[str, str], name: str) -> str | None:
    value = (environ.get(name) or "").strip()
    return value or None


def active_job(environ: Mapping[str, str]) -> ActiveJob | None:
    """The scheduler's job from the environment (batch schedulers first, then Kubeflow/PAI/SkyPilot), or None."""
    for name, var in _BATCH:
        value = _get(environ, var)
        if value is not None:
            return ActiveJob(name, value.split(".")[0] if name == "PBS" else value, var)
    from ezpz.launch_env.node_jobs import find_node_job

    try:
        job, _ = find_node_job(environ)
    except ConfigError:
        job = None
    if job is not None:
        task = _get(environ, "SKYPILOT_TASK_ID") if job.scheduler == "skypilot" else None
        return ActiveJob(job.scheduler.upper(), task, job.reason)
    return None


def get_machine(hostname: str | None = None) -> str:
    """The machine this host (or ``hostname``) belongs to, from :data:`ezpz.original.machines.MACHINES`."""
    if hostname is None:
        from ezpz.original.hostfile import get_hostname

        hostname = get_hostname()
    return machine_of(hostname)


def get_scheduler(_scheduler: str | None = None, *, environ: Mapping[str, str] | None = None) -> str:
    """``PBS``, ``SLURM``, ``LSF``, ``FLUX``, ``COBALT``, ``KUBEFLOW``, ``PAI``, ``SKYPILOT`` or ``UNKNOWN``.

    The argument, then ``EZPZ_SCHEDULER``, then the scheduler whose job this
    process runs in, then the machine's scheduler (by host name), then whether
    ``qsub`` or ``sbatch`` is on PATH, as the original did.
    """
    env = os.environ if environ is None else environ
    if _scheduler is not None:
        return _scheduler.upper()
    override = _get(env, "EZPZ_SCHEDULER")
    if override is not None:
        return override.upper()
    job = active_job(env)
    if job is not None:
        return job.scheduler
    machine = SCHEDULER_OF_MACHINE.get(get_machine())
    if machine is not None:
        return machine
    path = env.get("PATH", os.defpath)
    if shutil.which("qsub", path=path):
        return "PBS"
    if shutil.which("sbatch", path=path):
        return "SLURM"
    return "UNKNOWN"


def get_active_jobid(*, environ: Mapping[str, str] | None = None) -> str | None:
    """The id of the job this process runs in (PBS's without its server suffix), or None outside one."""
    job = active_job(os.environ if environ is None else environ)
    return None if job is None else job.jobid


def short_host(host: str) -> str:
    """``x4102c1s0b0n0`` for ``x4102c1s0b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov`` (an IP address stays whole)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.split(".")[0]
    return host


def _pbs_hosts(env: Mapping[str, str]) -> list[str] | None:
    from ezpz.inputs.hostlist import read_hostfile

    path = _get(env, "PBS_NODEFILE")
    return None if path is None else list(dict.fromkeys(short_host(h) for h in read_hostfile(path)))


def _slurm_hosts(env: Mapping[str, str]) -> list[str] | None:
    from ezpz.inputs.hostlist import expand_nodelist

    text = _get(env, "SLURM_JOB_NODELIST") or _get(env, "SLURM_NODELIST")
    return None if text is None else expand_nodelist(text)


def _lsf_hosts(env: Mapping[str, str]) -> list[str] | None:
    from ezpz.inputs.hostlist import rankfile_hosts

    path = _get(env, "LSB_DJOB_RANKFILE")
    return None if path is None else rankfile_hosts(path)


def _flux_hosts(env: Mapping[str, str]) -> list[str] | None:
    from ezpz.inputs.hostlist import expand_nodelist
    from ezpz.probes.flux import resource_nodelist

    found = resource_nodelist(env)
    return None if found is None else expand_nodelist(found[0])


def _skypilot_hosts(env: Mapping[str, str]) -> list[str] | None:
    return [h.strip() for h in (env.get("SKYPILOT_NODE_IPS") or "").splitlines() if h.strip()] or None


#: Where each scheduler names its job's hosts. Kubeflow and PAI name only rank 0's: no entry, so None.
_HOSTS: dict[str, Callable[[Mapping[str, str]], "list[str] | None"]] = {
    "PBS": _pbs_hosts, "SLURM": _slurm_hosts, "LSF": _lsf_hosts, "FLUX": _flux_hosts, "SKYPILOT": _skypilot_hosts,
}


def get_nodelist_of_active_job(*, environ: Mapping[str, str] | None = None) -> list[str] | None:
    """The hosts of the job this process runs in, from its scheduler's variables; None outside a job.

    PBS: ``PBS_NODEFILE`` (short names, as the original's qstat lookup gave);
    Slurm: ``SLURM_JOB_NODELIST``/``SLURM_NODELIST`` expanded; LSF:
    ``LSB_DJOB_RANKFILE`` less its launch node; Flux: ``flux resource list``;
    SkyPilot: ``SKYPILOT_NODE_IPS``. Kubeflow and PAI name only rank 0's host: None.
    """
    env = os.environ if environ is None else environ
    job = active_job(env)
    hosts = None if job is None else _HOSTS.get(job.scheduler)
    return None if hosts is None else hosts(env)
