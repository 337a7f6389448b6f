"""torchrun on one node of a job whose scheduler starts one process per node (Kubeflow, PAI, SkyPilot).

The scheduler's variables (:mod:`ezpz.launch_env.node_jobs`) give ``--nnodes``,
``--node-rank``, ``--master-addr`` and ``--master-port``; ``--nproc-per-node``
is what the scheduler asked for, else one per accelerator (or ``--ppn``).
Every node runs ``ezpz launch`` with the same arguments and gets its own line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ezpz.errors import ConfigError
from ezpz.launch_drivers.base import Command, Layout, Match
from ezpz.launch_env.node_jobs import NodeJob, find_node_job, under_torchrun

__all__ = ["node_job", "node_job_command", "node_job_match"]


def node_job(environ: Mapping[str, str]) -> NodeJob | None:
    """The node-level contract that applies, or None (also None inside torchrun: it has launched already)."""
    if under_torchrun(environ) is not None:
        return None
    job, _ = find_node_job(environ)
    return job


def node_job_match(environ: Mapping[str, str]) -> Match | None:
    """``Match(True, ...)`` on a node of such a job; a refusal when its variables are broken; else None."""
    try:
        job = node_job(environ)
    except ConfigError as err:
        return Match(False, f"a one-process-per-node scheduler's variables are inconsistent: {err}")
    if job is None:
        return None
    said = ", ".join(f"{k} from {v}" for k, v in job.sources.items() if k in ("nnodes", "node_rank"))
    return Match(True, f"{job.reason}: torchrun on each of {job.nnodes} node(s) ({said})")


def node_job_command(argv: Sequence[str], layout: Layout, environ: Mapping[str, str]) -> Command | None:
    """The multi-node torchrun line for this node, or None when no such scheduler is here."""
    job = node_job(environ)
    if job is None:
        return None
    if job.master_addr is None:
        raise ConfigError(name=job.sources["master_addr"], value=None, expected="rank 0's node, set by the scheduler",
                          fix="export MASTER_ADDR=<the first node's address> on every node")
    cmd = ["torchrun", "--nnodes", str(job.nnodes), "--node-rank", str(job.node_rank),
           "--nproc-per-node", str(layout.ppn), "--master-addr", job.master_addr]
    notes = [f"--nnodes/--node-rank from {job.sources['nnodes']} / {job.sources['node_rank']}; "
             f"--master-addr from {job.sources['master_addr']}"]
    if job.master_port is not None:
        cmd += ["--master-port", str(job.master_port)]
        notes.append(f"--master-port from {job.sources['master_port']}")
    else:
        notes.append("no port from the scheduler: torchrun's default 29500 (export MASTER_PORT to choose)")
    if job.nproc_per_node is not None and layout.ppn != job.nproc_per_node:
        notes.append(f"--nproc-per-node {layout.ppn}, not the scheduler's {job.nproc_per_node} "
                     f"({job.sources['nproc_per_node']})")
    notes.append("--no-python: torchrun runs the command as given")
    return Command(argv=(*cmd, "--no-python", *argv), notes=tuple(notes))
