"""What the scheduler granted this job: ranks in all, ranks per node, nodes; and how a launch uses it.

Pure functions of the environment (the PBS node file named by ``PBS_NODEFILE``
is the only file read). Sources:

* Slurm (``sbatch``/``salloc``, Slurm's ``src/common/env.c``): ``SLURM_NTASKS``
  (``-n``; also set from ``--ntasks-per-node`` x nodes), ``SLURM_NTASKS_PER_NODE``
  (``--ntasks-per-node``), ``SLURM_JOB_NUM_NODES`` (``-N``), ``SLURM_TASKS_PER_NODE``
  (always set, compressed like ``2(x3),1``). Without ``-n``/``--ntasks-per-node``
  a job is granted one task per node, which is what ``srun`` then starts.
* PBS (PBS Pro and Torque): ``PBS_NODEFILE`` lists each host once per MPI rank it
  was granted (``select=N:mpiprocs=M`` gives M lines per host). A node file that
  names every host once is also what ``mpiprocs`` left at its default looks like,
  so it grants "one per node" only weakly (``explicit`` is False).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ezpz.errors import ConfigError
from ezpz.primitives.frozen_records import frozen

__all__ = ["Grant", "granted", "node_job_grant", "pbs_grant", "slurm_grant", "use_grant"]


@frozen(kw_only=True)
class Grant:
    """Ranks the scheduler granted: ``n`` in all, at most ``ppn`` per node, on ``nodes`` nodes.

    ``explicit`` is True when the user asked the scheduler for that many tasks
    (``-n``, ``--ntasks-per-node``, ``mpiprocs``) rather than leaving the default one per node.
    """

    n: int
    ppn: int
    nodes: int
    explicit: bool
    source: str


def _int(environ: Mapping[str, str], name: str) -> int | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(name=name, value=raw, expected="a positive whole number (set by the scheduler)",
                          fix=f"unset {name} if you exported it by hand, or pass -n/--ppn to ezpz launch")
    return int(raw)


def slurm_grant(environ: Mapping[str, str]) -> Grant | None:
    """The tasks a Slurm allocation grants (None outside one)."""
    if not (environ.get("SLURM_JOB_ID", "").strip() or environ.get("SLURM_JOBID", "").strip()):
        return None
    from ezpz.inputs.hostlist import parse_tasks_per_node

    ntasks = _int(environ, "SLURM_NTASKS") or _int(environ, "SLURM_NPROCS")
    per_node = _int(environ, "SLURM_NTASKS_PER_NODE")
    nodes = _int(environ, "SLURM_JOB_NUM_NODES") or _int(environ, "SLURM_NNODES")
    tpn_text = environ.get("SLURM_TASKS_PER_NODE", "").strip()
    groups = parse_tasks_per_node("SLURM_TASKS_PER_NODE", tpn_text) if tpn_text else []
    if nodes is None:
        nodes = sum(reps for _, reps in groups) or None
    if nodes is None:
        return None
    most = max((tasks for tasks, _ in groups), default=None)
    explicit = ntasks is not None or per_node is not None
    if ntasks is not None:
        ppn = per_node or most or -(-ntasks // nodes)
        said = f"SLURM_NTASKS={ntasks}"
    elif per_node is not None:
        ntasks, ppn, said = per_node * nodes, per_node, f"SLURM_NTASKS_PER_NODE={per_node}"
    elif groups:
        ntasks, ppn = sum(t * r for t, r in groups), most or 1
        said = f"SLURM_TASKS_PER_NODE={tpn_text}"
    else:
        ntasks, ppn, said = nodes, 1, "one task per node (no -n or --ntasks-per-node given)"
    ppn = min(ppn, ntasks)
    return Grant(n=ntasks, ppn=ppn, nodes=nodes, explicit=explicit,
                 source=f"Slurm allocation: {said}, SLURM_JOB_NUM_NODES={nodes}")


def pbs_grant(environ: Mapping[str, str]) -> Grant | None:
    """The ranks a PBS job grants, from its node file (None outside one or when it cannot be read)."""
    path = environ.get("PBS_NODEFILE", "").strip()
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            hosts = [f[0] for f in (line.split("#", 1)[0].split() for line in fh) if f]
    except OSError:
        return None
    if not hosts:
        return None
    counts = Counter(hosts)  # PBS writes one line per granted rank (mpiprocs) on each host
    ppn = max(counts.values())
    return Grant(n=len(hosts), ppn=ppn, nodes=len(counts), explicit=ppn > 1,
                 source=f"PBS allocation: {len(hosts)} line(s) for {len(counts)} host(s) in PBS_NODEFILE={path}")


def node_job_grant(environ: Mapping[str, str]) -> Grant | None:
    """Kubeflow, PAI or SkyPilot (:mod:`ezpz.launch_env.node_jobs`): the nodes and processes per node they ask for."""
    from ezpz.launch_drivers.node_torchrun import node_job

    try:
        job = node_job(environ)
    except ConfigError:
        return None  # the driver reports it
    if job is None:
        return None
    ppn = job.nproc_per_node or 1
    return Grant(n=job.nnodes * ppn, ppn=ppn, nodes=job.nnodes, explicit=job.nproc_per_node is not None,
                 source=f"{job.reason}: {job.nnodes} node(s) ({job.sources['nnodes']}), "
                        f"{job.nproc_per_node or 'one per accelerator'} per node ({job.sources['nproc_per_node']})")


def granted(environ: Mapping[str, str]) -> Grant | None:
    """The first scheduler's grant found (Slurm, PBS, then Kubeflow/PAI/SkyPilot), or None outside a batch job."""
    return slurm_grant(environ) or pbs_grant(environ) or node_job_grant(environ)


def use_grant(grant: Grant, devices: tuple[int, str], shared: bool) -> tuple[int, int, str]:
    """``(n, ppn, why)`` for a launch with no -n/--ppn inside an allocation. Pure.

    A CPU (a device ``shared`` by all ranks) runs what was granted. On
    accelerators ezpz places one rank per device: an explicit grant may ask for
    fewer ranks per node but never more than the node has devices; a grant of
    the scheduler's default (one per node) gives way to one per device.
    """
    per_dev, dev_why = devices
    if shared:
        return grant.n, grant.ppn, f"as granted ({grant.source}); {dev_why}"
    if not grant.explicit:
        return per_dev * grant.nodes, per_dev, (f"{dev_why} x {grant.nodes} granted node(s) ({grant.source}; "
                                                "no task count was asked of the scheduler)")
    if grant.ppn > per_dev:
        return per_dev * grant.nodes, per_dev, (f"{per_dev} per node: {dev_why} caps the {grant.ppn} per node "
                                                f"granted ({grant.source})")
    return grant.n, grant.ppn, f"as granted ({grant.source}); within {dev_why}"
