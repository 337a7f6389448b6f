"""The original ezpz's ``ezpz.pbs``, answered from the PBS job this process runs in.

The original asked ``qstat`` about every running job of the user. Here the
job is the one named by ``PBS_JOBID`` and ``PBS_NODEFILE`` (what ``setup()``
and ``ezpz launch`` read); another job's id raises a ConfigError saying so.
Nothing writes ``os.environ``: ``get_pbs_env`` returns the values instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ezpz.errors import ConfigError
from ezpz.original._launch_cmd import launch_prefix
from ezpz.original.scheduler import get_machine, short_host

__all__ = [
    "build_launch_cmd", "get_pbs_env", "get_pbs_jobid_of_active_job", "get_pbs_launch_cmd", "get_pbs_launch_info",
    "get_pbs_nodefile", "get_pbs_nodefile_from_jobid", "get_pbs_nodefile_of_active_job", "get_pbs_nodelist_from_jobid",
    "get_pbs_running_jobs_for_user", "get_running_jobs_from_qstat",
]

PathLike = str | os.PathLike[str]


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def get_pbs_jobid_of_active_job(*, environ: Mapping[str, str] | None = None) -> str | None:
    """``PBS_JOBID`` without its server suffix (``1234567`` for ``1234567.aurora-pbs-0001...``), or None."""
    raw = (_env(environ).get("PBS_JOBID") or "").strip()
    return raw.split(".")[0] or None


def _nodefile(environ: Mapping[str, str] | None) -> str | None:
    return (_env(environ).get("PBS_NODEFILE") or "").strip() or None


def _active(jobid: int | str, environ: Mapping[str, str] | None) -> str:
    active = get_pbs_jobid_of_active_job(environ=environ)
    wanted = str(jobid).strip().split(".")[0]
    if active is None or wanted != active:
        raise ConfigError(
            name="jobid", value=jobid,
            expected=f"the PBS job this process runs in (PBS_JOBID={active or 'not set'})",
            fix="call it from inside that job (ezpz answers from the job's own variables and no longer asks qstat)",
        )
    return active


def get_pbs_nodefile_from_jobid(jobid: int | str, *, environ: Mapping[str, str] | None = None) -> str:
    """The node file of job ``jobid``: ``PBS_NODEFILE``, when ``jobid`` is this process's job."""
    _active(jobid, environ)
    path = _nodefile(environ)
    if path is None:
        raise ConfigError(name="PBS_NODEFILE", value=None, expected="set by PBS inside the job",
                          fix="run inside the PBS job (qsub / qsub -I), where PBS sets it")
    return os.path.abspath(path)


def get_pbs_nodefile_of_active_job(*, environ: Mapping[str, str] | None = None) -> str | None:
    """``PBS_NODEFILE`` (absolute), or None outside a PBS job."""
    path = _nodefile(environ)
    return None if get_pbs_jobid_of_active_job(environ=environ) is None or path is None else os.path.abspath(path)


def get_pbs_nodefile(jobid: int | str | None = None, *, environ: Mapping[str, str] | None = None) -> str | None:
    """The node file of ``jobid`` (default: this process's job), or None outside a PBS job."""
    if jobid is None:
        return get_pbs_nodefile_of_active_job(environ=environ)
    return get_pbs_nodefile_from_jobid(jobid, environ=environ)


def get_pbs_nodelist_from_jobid(jobid: int | str, *, environ: Mapping[str, str] | None = None) -> list[str]:
    """The hosts of job ``jobid`` (short names, each once), from its node file."""
    from ezpz.inputs.hostlist import read_hostfile

    return list(dict.fromkeys(short_host(h) for h in read_hostfile(get_pbs_nodefile_from_jobid(jobid, environ=environ))))


def get_pbs_running_jobs_for_user(*, environ: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """``{jobid: hosts}`` for the job this process runs in (empty outside one); other jobs are not queried."""
    active = get_pbs_jobid_of_active_job(environ=environ)
    if active is None or _nodefile(environ) is None:
        return {}
    return {active: get_pbs_nodelist_from_jobid(active, environ=environ)}


def get_running_jobs_from_qstat(*, environ: Mapping[str, str] | None = None) -> list[int]:
    """The numeric id of the job this process runs in, as a one-item list (empty outside one)."""
    active = get_pbs_jobid_of_active_job(environ=environ)
    return [int(active)] if active is not None and active.isdigit() else []


def get_pbs_launch_cmd(ngpus: int | None = None, nhosts: int | None = None, ngpu_per_host: int | None = None,
                       hostfile: PathLike | None = None, cpu_bind: str | None = None, *, verbose: bool = False,
                       environ: Mapping[str, str] | None = None) -> str:
    """The ``mpiexec`` prefix for this PBS job (PALS, MPICH or Open MPI flags, as ``ezpz launch`` builds them)."""
    del verbose  # the original logged the command; ezpz's library does not configure logging
    return launch_prefix("mpiexec", ngpus=ngpus, nhosts=nhosts, ngpu_per_host=ngpu_per_host,
                         hostfile=hostfile or get_pbs_nodefile_of_active_job(environ=environ), cpu_bind=cpu_bind,
                         environ=environ)


def build_launch_cmd(ngpus: int | None = None, nhosts: int | None = None, ngpu_per_host: int | None = None,
                     hostfile: PathLike | None = None, cpu_bind: str | None = None, *,
                     environ: Mapping[str, str] | None = None) -> str:
    """Same as :func:`get_pbs_launch_cmd`."""
    return get_pbs_launch_cmd(ngpus, nhosts, ngpu_per_host, hostfile, cpu_bind, environ=environ)


def get_pbs_launch_info(hostfile: PathLike | None = None, jobid: int | str | None = None, *,
                        environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``HOSTFILE``, ``HOSTS``, ``NHOSTS``, ``NGPU_PER_HOST``, ``NGPUS``, ``MACHINE``, ``LAUNCH_CMD`` as strings."""
    from ezpz.inputs.hostlist import read_hostfile
    from ezpz.original._launch_cmd import _device_slots

    path = os.fspath(hostfile) if hostfile is not None else get_pbs_nodefile(jobid, environ=environ)
    if path is None:
        raise ConfigError(name="hostfile", value=None, expected="a node file: PBS_NODEFILE or the argument",
                          fix="run inside a PBS job, or pass hostfile=")
    hosts = list(dict.fromkeys(short_host(h) for h in read_hostfile(path)))
    per_host = _device_slots(_env(environ)).per_node
    return {
        "HOSTFILE": path,
        "HOSTS": f"[{', '.join(hosts)}]" if len(hosts) < 1000 else "[truncated (>1000 nodes)]",
        "NHOSTS": str(len(hosts)),
        "NGPU_PER_HOST": str(per_host),
        "NGPUS": str(per_host * len(hosts)),
        "MACHINE": get_machine(),
        "LAUNCH_CMD": get_pbs_launch_cmd(hostfile=path, environ=environ),
    }


def get_pbs_env(hostfile: PathLike | None = None, jobid: int | str | None = None, verbose: bool | None = None, *,
                environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job's ``PBS*`` variables plus :func:`get_pbs_launch_info`; ``os.environ`` is left as it is."""
    del verbose
    env = _env(environ)
    out = {k: v for k, v in env.items() if "PBS" in k}
    if hostfile is not None or get_pbs_nodefile(jobid, environ=environ) is not None:
        out.update(get_pbs_launch_info(hostfile, jobid, environ=environ))
    return out
