"""Rendezvous: MASTER_ADDR/MASTER_PORT given, or derived identically on every rank.

Only values every rank of a launch sees alike are used, per launcher: under
Open MPI on Slurm, for example, ranks on mpirun's node lack the SLURM_STEP_*
and SLURM_NODELIST values that ranks under remote daemons inherit, so those
are ignored for Open MPI. Derived addresses assume rank 0 runs on the first
host of the node list or hostfile (every launcher's default placement).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

import attr

from ezpz.errors import LaunchEnvError
from ezpz.facts import LaunchEnv
from ezpz.launch_env._parse import get, parse_int

__all__ = ["DEFAULT_PORT", "PORT_RANGE", "derive_port", "job_identity", "launch_identity", "resolve_rendezvous", "this_host"]


_JOB_WIDE: tuple[tuple[str, ...], ...] = (("PBS_JOBID",), ("SLURM_JOB_ID",), ("LSB_JOBID",))

#: Per launcher, variables naming this launch (same on every rank, new for each launch), best first.
_IDENTITY: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "torchrun": (("TORCHELASTIC_RUN_ID",),),
    "openmpi": (("OMPI_MCA_ess_base_jobid",), ("PMIX_NAMESPACE",)),
    "pals": (("PALS_APID",),),
    "pmix": (("PMIX_NAMESPACE",),),
    "slurm": (("SLURM_JOB_ID", "SLURM_STEP_ID"),),
    "flux": (("FLUX_JOB_ID",),),  # every flux run/submit is a job of its own
    "jsrun": (("PMIX_NAMESPACE",),),  # jsrun's PMIx server names each job step
    "skypilot": (("SKYPILOT_TASK_ID",),),
}

_HOSTFILES = (("hostfile", "PBS_NODEFILE"), ("hostfile", "HOSTFILE"))
_SLURM_STEP = (("nodelist", "SLURM_STEP_NODELIST"),)
_SLURM_JOB = (("nodelist", "SLURM_JOB_NODELIST"),)
#: Per launcher, where the host list comes from, best first. SLURM_STEP_* only where every rank is an srun task.
_HOSTS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "slurm": (*_SLURM_STEP, *_SLURM_JOB, ("nodelist", "SLURM_NODELIST")),
    "pals": (*_HOSTFILES, *_SLURM_STEP, *_SLURM_JOB),
    "pmix": (*_HOSTFILES, *_SLURM_STEP, *_SLURM_JOB),
    # orte_default_hostfile: an Open MPI 4 MCA parameter (ompi_info); the PRRTE (Open MPI 5) name is by analogy.
    "openmpi": (*_HOSTFILES, ("hostfile", "OMPI_MCA_orte_default_hostfile"),
                ("hostfile", "PRTE_MCA_prte_default_hostfile"), *_SLURM_JOB),
    # LSF's rank file: its first line is the launch node, not a compute host (ezpz.launch_env.lsf).
    "jsrun": (("rankfile", "LSB_DJOB_RANKFILE"),),
    "flux": (),  # Flux names no hosts to its tasks: rank 0 publishes its address over PMI, or MASTER_ADDR
}
_DEFAULT_HOSTS = (*_HOSTFILES, *_SLURM_JOB)


def launch_identity(launcher: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """Like :func:`job_identity`, but only variables new for every launch (never the job-wide ones)."""
    for names in _IDENTITY.get(launcher, ()):
        values = [get(environ, n) for n in names]
        if all(v is not None for v in values):
            return ".".join(values), ".".join(names)  # type: ignore[arg-type]
    return None


def job_identity(launcher: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """``(value, variables)`` naming this launch, e.g. ``("1234.0", "SLURM_JOB_ID.SLURM_STEP_ID")``."""
    for names in (*_IDENTITY.get(launcher, ()), *_JOB_WIDE):
        values = [get(environ, n) for n in names]
        if all(v is not None for v in values):
            return ".".join(values), ".".join(names)  # type: ignore[arg-type]
    return None


def _port(environ: Mapping[str, str], ident: tuple[str, str] | None) -> tuple[int, str]:
    raw = get(environ, "MASTER_PORT")
    if raw is not None:
        port = parse_int("MASTER_PORT", raw, minimum=1)
        if port > 65535:
            raise LaunchEnvError(name="MASTER_PORT", value=raw, expected="a TCP port from 1 to 65535",
                                 fix="set MASTER_PORT to a free port such as 29500, or unset it to derive one")
        return port, "MASTER_PORT"
    if ident is None:
        raise LaunchEnvError(
            name="MASTER_PORT", value=None,
            expected="set, since the launcher names no launch of its own to derive a port from (a job-wide "
            "PBS_JOBID/SLURM_JOB_ID is shared by every mpiexec in the allocation, and two jobs on one port can "
            "cross-join)",
            fix="export MASTER_PORT=<a free port of this job's own> (and MASTER_ADDR) to every rank",
        )
    from ezpz.launch_env.ports import PORT_RANGE, derive_port  # only with several ranks: one process derives none

    return derive_port(f"{ident[1]}={ident[0]}"), f"derived: hash of {ident[1]} into {PORT_RANGE[0]}..{PORT_RANGE[1]}"


def _hosts_from(kind: str, name: str, value: str) -> list[str]:
    try:
        from ezpz.inputs.hostlist import expand_nodelist, rankfile_hosts, read_hostfile  # only when a host list is read

        if kind == "nodelist":
            hosts = expand_nodelist(value)
        else:
            hosts = rankfile_hosts(value) if kind == "rankfile" else read_hostfile(value)
    except (OSError, ValueError) as err:
        what = "a Slurm node list such as nid[001-004]" if kind == "nodelist" else "a readable hostfile"
        raise LaunchEnvError(name=name, value=value, expected=f"{what} ({err})",
                             fix=f"fix or unset {name}, or set MASTER_ADDR to rank 0's host") from err
    if not hosts:
        raise LaunchEnvError(name=name, value=value, expected="at least one host",
                             fix=f"fix or unset {name}, or set MASTER_ADDR to rank 0's host")
    return hosts


def _addr(env: LaunchEnv, environ: Mapping[str, str]) -> tuple[str, str, tuple[str, ...], str | None]:
    """``(address, source, hosts, hosts source)``."""
    if env.master_addr is not None:  # the launch contract named it (PET_MASTER_ADDR, SKYPILOT_NODE_IPS)
        return env.master_addr, env.sources.get("master_addr", "launch contract"), (), None
    given = get(environ, "MASTER_ADDR")
    if given is not None:
        if any(ch.isspace() for ch in given):
            raise LaunchEnvError(name="MASTER_ADDR", value=given, expected="one host name or IP address",
                                 fix="set MASTER_ADDR to rank 0's host, without spaces")
        return given, "MASTER_ADDR", (), None
    if env.local_world_size == env.world_size:
        return "127.0.0.1", f"derived: 127.0.0.1 (all {env.world_size} ranks on one node)", (), None
    sources = _HOSTS.get(env.launcher, _DEFAULT_HOSTS)
    for kind, name in sources:
        value = get(environ, name)
        if value is not None:
            hosts = _hosts_from(kind, name, value)
            return hosts[0], f"derived: first host of {name}", tuple(hosts), name
    raise LaunchEnvError(
        name="MASTER_ADDR", value=None,
        expected=f"rank 0's host: {env.world_size} ranks span {env.num_nodes} nodes and {env.launcher} gives no "
        f"host list to derive it from ({', '.join(n for _, n in sources)} not set)",
        fix="export MASTER_ADDR=<rank 0's host name> (and MASTER_PORT) to every rank, "
        "for example mpiexec -x MASTER_ADDR or --env MASTER_ADDR",
    )


def resolve_rendezvous(env: LaunchEnv, environ: Mapping[str, str]) -> LaunchEnv:
    """``env`` with job id and, when it has several ranks, master address and port filled in."""
    ident = job_identity(env.launcher, environ)
    sources = dict(env.sources)
    changes: dict[str, Any] = {}
    if ident is not None:
        changes["job_id"], sources["job_id"] = ident
    if env.world_size > 1 and _pmi_exchange(env, environ):
        return _resolve_by_pmi(env, environ, sources, changes)
    if env.world_size > 1:
        addr, sources["master_addr"], hosts, hosts_from = _addr(env, environ)
        if env.master_port is not None:  # the launch contract named it (PET_MASTER_PORT, MASTER_PORT)
            port = env.master_port
        else:
            port, sources["master_port"] = _port(environ, launch_identity(env.launcher, environ))
        changes.update(master_addr=addr, master_port=port, hosts=hosts)
        if hosts_from:
            sources["hosts"] = hosts_from
    return attr.evolve(env, sources=sources, **changes)


def _pmi_exchange(env: LaunchEnv, environ: Mapping[str, str]) -> bool:
    """Hydra or Flux (whose shell serves the same PMI-1 protocol on PMI_FD, flux-core src/shell/pmi/pmi.c) with a
    PMI connection and no MASTER_PORT: rank 0 publishes the port it binds (:mod:`ezpz.launch_env.store`)."""
    from ezpz.launch_env.pmi import available

    return env.launcher in ("hydra", "flux") and get(environ, "MASTER_PORT") is None and available(environ) is not None


def _resolve_by_pmi(env: LaunchEnv, environ: Mapping[str, str], sources: dict[str, str],
                    changes: dict[str, Any]) -> LaunchEnv:
    from ezpz.launch_env.pmi import available

    via = available(environ)
    try:
        addr, sources["master_addr"], hosts, hosts_from = _addr(env, environ)
    except LaunchEnvError as err:
        if err.name != "MASTER_ADDR":
            raise
        addr, hosts, hosts_from = None, (), None
        sources["master_addr"] = f"published by rank 0 through the process manager ({via}): its host name"
    if hosts_from:
        sources["hosts"] = hosts_from
    sources["master_port"] = (f"published by rank 0 through the process manager ({via}): a port it bound, free "
                              "on its host, so two jobs on one host never share one")
    changes.update(master_addr=addr, master_port=None, hosts=hosts, exchange="pmi")
    return attr.evolve(env, sources=sources, **changes)


def __getattr__(name: str) -> object:
    """``DEFAULT_PORT``, ``PORT_RANGE`` and ``derive_port`` from :mod:`ezpz.launch_env.ports`, imported on first use."""
    if name in ("DEFAULT_PORT", "PORT_RANGE", "derive_port"):
        from ezpz.launch_env import ports

        return getattr(ports, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def this_host(launch: LaunchEnv) -> str:
    """How other nodes know this rank's host: the launcher's host list entry, else the address this host uses
    to reach the rendezvous (distinct per node even when hostnames are not), else the hostname."""
    if launch.hosts and 0 <= launch.node_rank < len(launch.hosts):
        return launch.hosts[launch.node_rank]
    name = socket.gethostname()
    if launch.master_addr and launch.num_nodes > 1:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # sends nothing: picks the route
                probe.connect((launch.master_addr, 9))
                addr: str = probe.getsockname()[0]
            if not addr.startswith("127."):
                return addr
        except OSError:
            pass
    return name
