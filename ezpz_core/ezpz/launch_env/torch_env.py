"""Detectors for torch-style variables: torchrun, RANK/WORLD_SIZE set by hand, and PMIx.

torchrun (torch.distributed.run) sets RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, GROUP_RANK (node index), GROUP_WORLD_SIZE (nodes),
ROLE_*, MASTER_ADDR, MASTER_PORT and TORCHELASTIC_RUN_ID/RESTART_COUNT/...
(recorded from torchrun 2.x on this project's CI machine).
PMIx exports PMIX_RANK, PMIX_NAMESPACE and PMIX_ID but no job size: the size
is only available through PMIx_Get(PMIX_JOB_SIZE) (Open MPI issue #9167).
"""

from __future__ import annotations

from collections.abc import Mapping

from ezpz.errors import LaunchEnvError
from ezpz.facts import LaunchEnv
from ezpz.launch_env._parse import build, get, need_int, place, read_int

__all__ = ["detect_env", "detect_pmix", "detect_torchrun"]

_TORCHRUN_MARKERS = ("TORCHELASTIC_RUN_ID", "GROUP_RANK")


def _need(environ: Mapping[str, str], *names: str) -> list[str]:
    return [n for n in names if get(environ, n) is None]


def _torch_style(environ: Mapping[str, str], launcher: str, rank_var: str, reason: str, marker: str) -> LaunchEnv:
    """Layout from ``rank_var`` + WORLD_SIZE, LOCAL_RANK/LOCAL_WORLD_SIZE when given, one node otherwise."""
    lay: dict[str, int] = {}
    src: dict[str, str] = {"launcher": marker}
    lay["rank"], src["rank"] = need_int(environ, rank_var)
    lay["world_size"], src["world_size"] = need_int(environ, "WORLD_SIZE", minimum=1)
    lworld = read_int(environ, "LOCAL_WORLD_SIZE", minimum=1)
    lrank = read_int(environ, "LOCAL_RANK")
    if lworld is not None:
        lay["local_world_size"], src["local_world_size"] = lworld
    elif lrank is not None and lrank[0] != lay["rank"]:
        raise LaunchEnvError(
            name="LOCAL_WORLD_SIZE", value=None,
            expected=f"set, since LOCAL_RANK={lrank[0]} differs from {rank_var}={lay['rank']} (ranks on several nodes)",
            fix="export LOCAL_WORLD_SIZE (ranks on this node) alongside LOCAL_RANK",
        )
    else:
        lay["local_world_size"] = lay["world_size"]
        src["local_world_size"] = "assumed: world_size (LOCAL_WORLD_SIZE not set, so all ranks on one node)"
    if lrank is not None:
        lay["local_rank"], src["local_rank"] = lrank
    else:
        lay["local_rank"] = lay["rank"] % lay["local_world_size"]
        src["local_rank"] = "derived: rank % local_world_size (LOCAL_RANK not set)"
    place(lay, src, read_int(environ, "GROUP_RANK"), read_int(environ, "GROUP_WORLD_SIZE", minimum=1))
    return build(launcher, lay, src, reason)


def detect_torchrun(environ: Mapping[str, str]) -> LaunchEnv | str:
    """torchrun / torch.distributed.run workers."""
    marker = next((n for n in _TORCHRUN_MARKERS if get(environ, n) is not None), None)
    if marker is None:
        return "TORCHELASTIC_RUN_ID and GROUP_RANK not set"
    missing = _need(environ, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    if missing:
        return f"{marker} is set but {', '.join(missing)} not: not a torchrun worker (torchrun sets all of them)"
    return _torch_style(environ, "torchrun", "RANK", "torchrun worker (TORCHELASTIC_RUN_ID, RANK, WORLD_SIZE)", marker)


def detect_env(environ: Mapping[str, str]) -> LaunchEnv | str:
    """RANK and WORLD_SIZE set by hand (or by a launcher ezpz does not know)."""
    missing = _need(environ, "RANK", "WORLD_SIZE")
    if missing:
        return f"{' and '.join(missing)} not set"
    return _torch_style(environ, "env", "RANK", "RANK and WORLD_SIZE set in the environment", "RANK")


def detect_pmix(environ: Mapping[str, str]) -> LaunchEnv | str:
    """A PMIx launch not claimed by Open MPI or Slurm: PMIX_RANK plus a WORLD_SIZE set by hand."""
    raw = get(environ, "PMIX_RANK")
    if raw is None:
        return "PMIX_RANK not set"
    if get(environ, "WORLD_SIZE") is None:
        return (f"PMIX_RANK={raw} is set but PMIx puts no job size in the environment (only PMIx_Get(PMIX_JOB_SIZE) "
                "knows it); set WORLD_SIZE (and LOCAL_RANK, LOCAL_WORLD_SIZE) to use PMIX_RANK alone")
    return _torch_style(environ, "pmix", "PMIX_RANK", "PMIx (PMIX_RANK, with WORLD_SIZE set by hand)", "PMIX_RANK")
