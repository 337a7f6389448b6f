"""Detector for Slurm's srun job steps.

From Slurm's ``src/common/env.c``: srun sets SLURM_STEP_ID, SLURM_STEP_NUM_TASKS,
SLURM_STEP_NUM_NODES, SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE (and the older
SLURM_STEPID, SLURM_NTASKS, SLURM_NNODES, SLURM_TASKS_PER_NODE) for the step;
slurmstepd sets SLURM_PROCID, SLURM_LOCALID and SLURM_NODEID per task. A batch
script (sbatch) or salloc shell has SLURM_JOB_ID, SLURM_NTASKS, SLURM_PROCID=0 and
SLURM_TASKS_PER_NODE but no SLURM_STEP_* variables: it is one process, not the
job's ranks.
"""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.errors import LaunchEnvError
from ezpz.facts import LaunchEnv
from ezpz.launch_env._parse import MAX_INT, build, first_int, get, need_int, place

__all__ = ["detect_slurm"]

_TPN_VARS = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")


def _local_size(groups: list[tuple[int, int]], node: int) -> int | None:
    """Tasks on node ``node``, or None when the list is shorter."""
    for tasks, reps in groups:
        if node < reps:
            return tasks
        node -= reps
    return None


def _batch_reason(environ: Mapping[str, str]) -> str:
    job = get(environ, "SLURM_JOB_ID") or get(environ, "SLURM_JOBID")
    ntasks = get(environ, "SLURM_NTASKS")
    counted = f"; SLURM_NTASKS={ntasks} is what the allocation may run, not processes launched" if ntasks else ""
    return (f"SLURM_JOB_ID={job} is set but SLURM_STEP_NUM_TASKS is not: this is the batch script or salloc "
            f"shell, one process, not a task of an srun job step{counted}; start the ranks with srun (or mpiexec, "
            "torchrun)")


def detect_slurm(environ: Mapping[str, str]) -> LaunchEnv | str:
    """A task of an srun job step."""
    marker = "SLURM_STEP_NUM_TASKS"
    if get(environ, marker) is None:
        if get(environ, "SLURM_JOB_ID") or get(environ, "SLURM_JOBID"):
            return _batch_reason(environ)
        return "SLURM_STEP_NUM_TASKS and SLURM_JOB_ID not set"
    for name in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID"):
        if get(environ, name) is None:
            return f"{marker} is set but {name} not"
    lay: dict[str, int] = {}
    src: dict[str, str] = {"launcher": marker}
    lay["rank"], src["rank"] = need_int(environ, "SLURM_PROCID")
    lay["world_size"], src["world_size"] = need_int(environ, marker, minimum=1)
    lay["local_rank"], src["local_rank"] = need_int(environ, "SLURM_LOCALID")
    node = need_int(environ, "SLURM_NODEID")
    nodes = first_int(environ, ("SLURM_STEP_NUM_NODES", "SLURM_NNODES"), minimum=1)
    tpn_var = next((n for n in _TPN_VARS if get(environ, n) is not None), None)
    if tpn_var is not None:
        from ezpz.inputs.hostlist import parse_tasks_per_node  # only under Slurm, with a tasks-per-node list

        groups = parse_tasks_per_node(tpn_var, get(environ, tpn_var) or "")
        count = sum(reps for _, reps in groups)
        total = sum(tasks * reps for tasks, reps in groups)
        if nodes is not None and count != nodes[0]:
            raise LaunchEnvError(name=tpn_var, value=get(environ, tpn_var), expected=f"counts for {nodes[0]} nodes "
                                 f"({nodes[1]})", fix="the Slurm variables disagree; unset copies exported by hand")
        if total != lay["world_size"]:
            raise LaunchEnvError(name=tpn_var, value=get(environ, tpn_var), expected=f"counts adding up to "
                                 f"{lay['world_size']} ({marker})", fix="the Slurm variables disagree; unset copies "
                                 "exported by hand")
        local = _local_size(groups, node[0])
        if local is None:
            raise LaunchEnvError(name="SLURM_NODEID", value=node[0], expected=f"below the {count} nodes in "
                                 f"{tpn_var}", fix="the Slurm variables disagree; unset copies exported by hand")
        lay["local_world_size"], src["local_world_size"] = local, f"{tpn_var}[SLURM_NODEID]"
        nodes = nodes or (min(count, MAX_INT), f"derived: number of nodes in {tpn_var}")
    elif nodes is not None and lay["world_size"] % nodes[0] == 0:
        lay["local_world_size"] = lay["world_size"] // nodes[0]
        src["local_world_size"] = f"derived: {marker} // {nodes[1]}"
    else:
        raise LaunchEnvError(name="SLURM_STEP_TASKS_PER_NODE", value=None, expected="set by srun",
                             fix="run under srun, or export SLURM_STEP_TASKS_PER_NODE such as '4(x2)'")
    place(lay, src, node, nodes)
    return build("slurm", lay, src, "Slurm srun job step (SLURM_PROCID, SLURM_STEP_NUM_TASKS)")
