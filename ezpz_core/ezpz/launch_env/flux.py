"""Detector for Flux (LLNL: El Capitan, Tuolumne, ...): ``flux run`` / ``flux submit`` tasks.

Sources:

* flux-core ``doc/man7/flux-environment.rst`` and ``src/shell/task.c``,
  ``src/shell/shell.c``: every task gets ``FLUX_TASK_RANK`` (global rank, "block"
  task mapping by default), ``FLUX_TASK_LOCAL_ID`` (rank on the node),
  ``FLUX_JOB_SIZE`` (tasks in the job), ``FLUX_JOB_NNODES`` (nodes hosting
  tasks), ``FLUX_JOB_ID``. No local task count and no node index.
* flux-core ``src/shell/pmi/pmi.c``: the simple-PMI plugin adds ``PMI_FD``,
  ``PMI_RANK``, ``PMI_SIZE`` (PMI-1 wire protocol, as MPICH's Hydra).
* flux-coral2 ``src/shell/plugins/cray_pals.c`` (libpals, for Cray MPICH):
  ``PALS_RANKID`` (= ``FLUX_TASK_RANK``), ``PALS_NODEID`` (the shell's rank:
  the node index), ``PALS_APID``, ``PALS_APINFO``, ``PALS_SPOOL_DIR``; it
  *unsets* ``PALS_LOCAL_RANKID``, ``PALS_LOCAL_SIZE``, ``PMI_LOCAL_RANK`` and
  ``PMI_LOCAL_SIZE``. So under Flux the PALS set is partial, and the ``FLUX_*``
  variables win over it.

When ``PMI_RANK``/``PALS_RANKID`` disagree with ``FLUX_TASK_RANK``, another
launcher (``mpiexec`` inside a Flux job) started this process: Flux does not claim it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.errors import LaunchEnvError
from ezpz.facts import LaunchEnv
from ezpz.launch_env._parse import BLOCKS, build, get, need_int, read_int

__all__ = ["detect_flux"]

_REQUIRED = ("FLUX_TASK_LOCAL_ID", "FLUX_JOB_SIZE", "FLUX_JOB_NNODES")


def _inner(environ: Mapping[str, str], rank: int, size: int) -> str | None:
    """Why an inner launcher, not Flux, started this process; None when all agree."""
    for rank_var, size_var in (("PMI_RANK", "PMI_SIZE"), ("PALS_RANKID", None)):
        raw = get(environ, rank_var)
        if raw is not None and raw != str(rank):
            return (f"FLUX_TASK_RANK={rank} but {rank_var}={raw}: another launcher started this process inside "
                    "the Flux task")
        raw_size = get(environ, size_var) if size_var else None
        if raw_size is not None and raw_size != str(size):
            return (f"FLUX_JOB_SIZE={size} but {size_var}={raw_size}: another launcher started this process inside "
                    "the Flux task")
    return None


def detect_flux(environ: Mapping[str, str]) -> LaunchEnv | str:
    """A task of ``flux run``; its ``FLUX_*`` variables win over libpals' partial ``PALS_*``."""
    marker = "FLUX_TASK_RANK"
    if get(environ, marker) is None:
        return f"{marker} not set"
    missing = [n for n in _REQUIRED if get(environ, n) is None]
    if missing:
        return f"{marker} is set but {', '.join(missing)} not"
    lay: dict[str, int] = {}
    src: dict[str, str] = {"launcher": marker}
    lay["rank"], src["rank"] = need_int(environ, marker)
    lay["world_size"], src["world_size"] = need_int(environ, "FLUX_JOB_SIZE", minimum=1)
    inner = _inner(environ, lay["rank"], lay["world_size"])
    if inner:
        return inner
    lay["local_rank"], src["local_rank"] = need_int(environ, "FLUX_TASK_LOCAL_ID")
    nodes, src["num_nodes"] = need_int(environ, "FLUX_JOB_NNODES", minimum=1)
    lay["num_nodes"] = nodes
    world = lay["world_size"]
    if world % nodes:
        raise LaunchEnvError(
            name="FLUX_JOB_SIZE", value=world,
            expected=f"a multiple of FLUX_JOB_NNODES={nodes}: Flux exports no per-node task count, so ezpz needs the "
            "same number of tasks on every node",
            fix=f"run a task count divisible by the node count (flux run -N {nodes} --tasks-per-node=K)",
        )
    lay["local_world_size"] = world // nodes
    src["local_world_size"] = "derived: FLUX_JOB_SIZE // FLUX_JOB_NNODES (Flux exports no per-node count)"
    node = read_int(environ, "PALS_NODEID")
    if node is not None:
        lay["node_rank"], src["node_rank"] = node[0], "PALS_NODEID (libpals: the Flux shell's rank)"
    else:
        lay["node_rank"] = lay["rank"] // lay["local_world_size"]
        src["node_rank"] = f"derived: FLUX_TASK_RANK // local_world_size (Flux's default block task map: {BLOCKS})"
    pals = " with libpals (PALS_RANKID, PALS_NODEID)" if get(environ, "PALS_RANKID") is not None else ""
    return build("flux", lay, src, f"Flux task (FLUX_TASK_RANK, FLUX_JOB_SIZE){pals}")
