"""Detector for schedulers that start one process per node: Kubeflow, Alibaba PAI, SkyPilot.

The contracts themselves are in :mod:`ezpz.node_jobs`. With one process per
node that process *is* the rank (rank = node index, one rank per node). With
more per node the process is the node's entry point, not a rank: it must start
them (``ezpz launch`` runs torchrun from the same variables), and ``setup()``
there raises a LaunchEnvError saying so rather than run as rank 0 of 1.
"""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.errors import LaunchEnvError
from ezpz.facts import LaunchEnv
from ezpz.launch_env._parse import build
from ezpz.node_jobs import find_node_job, under_torchrun

__all__ = ["detect_node_job"]


def detect_node_job(environ: Mapping[str, str]) -> LaunchEnv | str:
    """One rank per node under Kubeflow, PAI or SkyPilot; LaunchEnvError when the node should run several."""
    inner = under_torchrun(environ)
    job, passed = find_node_job(environ)
    if job is None:
        return "; ".join(f"{name}: {why}" for name, why in passed)
    if inner is not None:
        return f"{job.reason} describes the node; torchrun ({inner} is set) started this process inside it"
    if job.nproc_per_node != 1:
        raise LaunchEnvError(
            name=job.nproc_var, value=job.nproc_per_node or environ.get(job.nproc_var, "auto"),
            expected=f"1 for the script to run as the node's only rank: {job.reason} asks for "
            f"{f'{job.nproc_per_node} processes' if job.nproc_per_node else 'one process per accelerator'} on each of "
            f"{job.nnodes} node(s), and this "
            "process is the node's entry point, not one of them",
            fix="start the ranks with `ezpz launch -- python train.py` (it runs torchrun --nnodes/--node-rank/"
            "--master-addr from these variables) or with torchrun itself",
        )
    lay = {"rank": job.node_rank, "world_size": job.nnodes, "local_rank": 0, "local_world_size": 1,
           "node_rank": job.node_rank, "num_nodes": job.nnodes}
    src = {"rank": job.sources["node_rank"], "world_size": job.sources["nnodes"],
           "local_rank": f"derived: 0 (one process per node: {job.sources['nproc_per_node']})",
           "local_world_size": f"derived: 1 ({job.sources['nproc_per_node']})",
           "node_rank": job.sources["node_rank"], "num_nodes": job.sources["nnodes"]}
    env = build(job.scheduler, lay, src, job.reason)
    return _with_rendezvous(env, job.master_addr, job.master_port, job.sources)


def _with_rendezvous(env: LaunchEnv, addr: str | None, port: int | None, sources: Mapping[str, str]) -> LaunchEnv:
    import attrs

    merged = dict(env.sources)
    if addr is not None:
        merged["master_addr"] = sources["master_addr"]
    if port is not None:
        merged["master_port"] = sources["master_port"]
    return attrs.evolve(env, master_addr=addr, master_port=port, sources=merged)
