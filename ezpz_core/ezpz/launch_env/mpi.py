"""Detectors for MPI launchers: Open MPI, Cray PALS (with or without a world size), MPICH/Intel MPI Hydra.

Sources for the variable names:

- Open MPI 4.1 ``mpiexec`` (recorded here): OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE,
  OMPI_MCA_ess_base_jobid, PMIX_RANK, PMIX_NAMESPACE. OMPI_COMM_WORLD_NODE_RANK is the rank among
  processes on the node, *not* the node index; Open MPI exports no node index. OMPI_MCA_orte_num_nodes
  is not used: ORTE counts every node of the allocation there (its node pool), used or not.
- PALS: Slurm's mpi/cray_shasta plugin (which emulates PALS) and Flux's cray_pals plugin set
  PALS_RANKID, PALS_LOCAL_RANKID, PALS_NODEID, PALS_APID, PALS_SPOOL_DIR, PALS_APINFO and
  PMI_RANK, PMI_SIZE, PMI_LOCAL_RANK, PMI_LOCAL_SIZE, PMI_JOBID. PALS_LOCAL_SIZE is used on Aurora
  (ALCF) scripts; accepted as a fallback. PALS exports no node count. The world size is PMI_SIZE, else
  PALS_SIZE, else (meta-pytorch/torchcomms PR #79) the hosts of PBS_NODEFILE x PALS_LOCAL_SIZE, else a
  LaunchEnvError naming PALS_SIZE. Under Flux, libpals sets only part of this set: see ezpz.launch_env.flux.
- Hydra (MPICH ``src/pm/hydra/proxy/pmip_cb.c``): PMI_RANK, PMI_SIZE, PMI_FD, MPI_LOCALRANKID,
  MPI_LOCALNRANKS; in PMI-port mode PMI_ID and PMI_PORT instead of PMI_RANK/PMI_SIZE.
"""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.errors import LaunchEnvError
from ezpz.facts import LaunchEnv
from ezpz.launch_env._parse import Found, build, get, need_int, place, read_int

__all__ = ["detect_hydra", "detect_openmpi", "detect_pals"]


def _missing(environ: Mapping[str, str], marker: str, *groups: tuple[str, ...]) -> str | None:
    """Reason naming the first group of which no variable is set, or None."""
    for group in groups:
        if all(get(environ, n) is None for n in group):
            return f"{marker} is set but {' / '.join(group)} not"
    return None


def _mpi(environ: Mapping[str, str], launcher: str, reason: str, marker: str, *, rank: str, world: str,
         local_rank: tuple[str, ...], local_world: tuple[str, ...], node: Found | None,
         nodes: Found | None) -> LaunchEnv:
    lay: dict[str, int] = {}
    src: dict[str, str] = {"launcher": marker}
    lay["rank"], src["rank"] = need_int(environ, rank)
    lay["world_size"], src["world_size"] = need_int(environ, world, minimum=1)
    lay["local_rank"], src["local_rank"] = need_int(environ, *local_rank)
    lay["local_world_size"], src["local_world_size"] = need_int(environ, *local_world, minimum=1)
    place(lay, src, node, nodes)
    return build(launcher, lay, src, reason)


def detect_openmpi(environ: Mapping[str, str]) -> LaunchEnv | str:
    """Open MPI's mpirun/mpiexec (ORTE in 4.x, PRRTE in 5.x)."""
    marker = "OMPI_COMM_WORLD_SIZE"
    if get(environ, marker) is None:
        return f"{marker} not set"
    why = _missing(environ, marker, ("OMPI_COMM_WORLD_RANK",), ("OMPI_COMM_WORLD_LOCAL_RANK",),
                   ("OMPI_COMM_WORLD_LOCAL_SIZE",))
    if why:
        return why
    return _mpi(environ, "openmpi", "Open MPI mpiexec (OMPI_COMM_WORLD_*)", marker,
                rank="OMPI_COMM_WORLD_RANK", world=marker, local_rank=("OMPI_COMM_WORLD_LOCAL_RANK",),
                local_world=("OMPI_COMM_WORLD_LOCAL_SIZE",), node=None, nodes=None)


def detect_pals(environ: Mapping[str, str]) -> LaunchEnv | str:
    """HPE Cray PALS mpiexec/aprun (PBS on Cray EX: Aurora, Polaris), or Slurm's cray_shasta emulation."""
    marker = "PALS_RANKID"
    if get(environ, marker) is None:
        return f"{marker} not set"
    why = _missing(environ, marker, ("PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"), ("PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE"))
    if why:
        return why
    world = next((n for n in ("PMI_SIZE", "PALS_SIZE") if get(environ, n) is not None), None)
    if world is None:
        return _pals_derived_size(environ, marker)
    return _mpi(environ, "pals", f"Cray PALS (PALS_RANKID, PALS_NODEID, {world})", marker,
                rank=marker, world=world, local_rank=("PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"),
                local_world=("PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE"), node=read_int(environ, "PALS_NODEID"), nodes=None)


def _pals_derived_size(environ: Mapping[str, str], marker: str) -> LaunchEnv:
    """PALS without PMI_SIZE/PALS_SIZE: nodes in PBS_NODEFILE x ranks per node (meta-pytorch/torchcomms PR #79)."""
    local = need_int(environ, "PALS_LOCAL_SIZE", "PMI_LOCAL_SIZE", minimum=1)
    path = get(environ, "PBS_NODEFILE")
    if path is None:
        raise LaunchEnvError(
            name="PALS_SIZE", value=None,
            expected=f"set (or PMI_SIZE), or PBS_NODEFILE to derive it: {marker} is set but PALS exported no world "
            "size, and without the node file the number of nodes is unknown",
            fix="export PALS_SIZE=<ranks in all> (or WORLD_SIZE) to every rank, or run inside the PBS job",
        )
    from ezpz.inputs.hostlist import read_hostfile  # only under PALS without a size, to count the nodes

    try:
        nodes = len(dict.fromkeys(read_hostfile(path)))
    except (OSError, ValueError) as err:
        raise LaunchEnvError(name="PBS_NODEFILE", value=path, expected=f"PBS's readable node file ({err})",
                             fix="export PALS_SIZE=<ranks in all>, or unset a PBS_NODEFILE left from another job"
                             ) from err
    lay: dict[str, int] = {}
    src: dict[str, str] = {"launcher": marker}
    lay["rank"], src["rank"] = need_int(environ, marker)
    lay["local_rank"], src["local_rank"] = need_int(environ, "PALS_LOCAL_RANKID", "PMI_LOCAL_RANK")
    lay["local_world_size"], src["local_world_size"] = local
    lay["world_size"] = nodes * local[0]
    src["world_size"] = (f"derived: {nodes} host(s) in PBS_NODEFILE x {local[1]} (PALS exported no PALS_SIZE/PMI_SIZE; "
                         "assumes mpiexec ran on every node of the job)")
    place(lay, src, read_int(environ, "PALS_NODEID"), (nodes, "derived: hosts in PBS_NODEFILE"))
    return build("pals", lay, src, "Cray PALS (PALS_RANKID, PALS_NODEID; size from PBS_NODEFILE x PALS_LOCAL_SIZE)")


def detect_hydra(environ: Mapping[str, str]) -> LaunchEnv | str:
    """MPICH's or Intel MPI's Hydra mpiexec."""
    marker = "PMI_RANK"
    if get(environ, marker) is None:
        if get(environ, "PMI_ID") is not None:
            return "PMI_RANK not set (PMI_ID is: Hydra in PMI-port mode exports no PMI_SIZE)"
        return f"{marker} not set"
    why = _missing(environ, marker, ("PMI_SIZE",), ("MPI_LOCALRANKID", "PMI_LOCAL_RANK"),
                   ("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"))
    if why:
        return why
    return _mpi(environ, "hydra", "MPICH/Intel MPI Hydra mpiexec (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID)", marker,
                rank=marker, world="PMI_SIZE", local_rank=("MPI_LOCALRANKID", "PMI_LOCAL_RANK"),
                local_world=("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"), node=None, nodes=None)
