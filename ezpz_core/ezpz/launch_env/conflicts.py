"""When torch-style variables (RANK, WORLD_SIZE, ...) disagree with the launcher that started the process.

A real launcher (Open MPI, PALS, Hydra, PMIx, a Slurm step) sets its own
variables on every process it starts; ``RANK``/``WORLD_SIZE`` may instead be
left over in the shell (a notebook, an earlier script) or set by the process
itself for workers it spawns. The rule, a pure function of the two layouts:

- they agree: the launcher's layout, nothing ignored;
- same world size, other ranks: the launcher's (a hand-set RANK cannot differ
  per rank unless a wrapper set it wrongly); the torch-style variables are ignored;
- the launcher started one process and RANK/WORLD_SIZE describe several: this
  process spawned its own workers (``mp.spawn``, a notebook), so theirs;
- the torch-style variables say one process and the launcher several: stale
  copies, the launcher's;
- both say several, of different sizes: a LaunchEnvError naming both sources
  and ``unset RANK WORLD_SIZE``, on every rank (every rank sees both sizes).

Never two "rank 0 of 1" under a launcher that started two.
"""

from __future__ import annotations

from collections.abc import Mapping

import attr

from ezpz.errors import LaunchEnvError
from ezpz.facts import Alternative, LaunchEnv
from ezpz.launch_env._parse import get

__all__ = ["TORCH_STYLE", "reconcile"]

#: Torch-style variables and the LaunchEnv field each one claims.
TORCH_STYLE: tuple[tuple[str, str], ...] = (
    ("RANK", "rank"), ("WORLD_SIZE", "world_size"), ("LOCAL_RANK", "local_rank"),
    ("LOCAL_WORLD_SIZE", "local_world_size"), ("GROUP_RANK", "node_rank"), ("GROUP_WORLD_SIZE", "num_nodes"),
)

_UNSET = "unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE"


def _disagreeing(launch: LaunchEnv, environ: Mapping[str, str]) -> tuple[str, ...]:
    """``NAME=value (launcher says N)`` for every torch-style variable set, not used and not matching ``launch``."""
    used = set(launch.sources.values())
    out = []
    for name, field in TORCH_STYLE:
        raw = get(environ, name)
        if raw is None or name in used:
            continue
        actual = getattr(launch, field)
        if raw != str(actual):
            out.append(f"{name}={raw} ({launch.launcher} says {field} {actual})")
    return tuple(out)


def _ignored(chosen: LaunchEnv, environ: Mapping[str, str], why: str) -> LaunchEnv:
    ignored = _disagreeing(chosen, environ)
    if not ignored:
        return chosen
    sources = {**chosen.sources, "ignored": f"{why}; to silence this: {_UNSET}"}
    return attr.evolve(chosen, ignored=ignored, sources=sources)


def reconcile(chosen: LaunchEnv, env: LaunchEnv | str | LaunchEnvError,
              environ: Mapping[str, str]) -> tuple[LaunchEnv, Alternative]:
    """The layout to use when launcher ``chosen`` ran first and ``env`` is what RANK/WORLD_SIZE say.

    Returns the winner and the loser's entry for the trace.
    """
    launcher = chosen.launcher
    said = f"{launcher} ({chosen.sources.get('launcher', launcher)}) started this process as rank " \
           f"{chosen.rank} of {chosen.world_size}"
    if isinstance(env, str):  # RANK/WORLD_SIZE not both set: still trace a stray LOCAL_RANK etc.
        return _ignored(chosen, environ, f"torch-style variables left in the environment; {said}"), \
            Alternative(name="env", reason=env)
    if isinstance(env, LaunchEnvError):
        winner = _ignored(chosen, environ, f"RANK/WORLD_SIZE are inconsistent ({env.name}) and {said}")
        return winner, Alternative(name="env", reason=f"IGNORED, inconsistent ({env}); {said}")
    theirs = f"rank {env.rank} of {env.world_size}"
    if (env.rank, env.world_size) == (chosen.rank, chosen.world_size):
        winner = _ignored(chosen, environ, f"they disagree on local/node placement; {said}")
        return winner, Alternative(name="env", reason=f"also present ({theirs}, agrees) but {launcher} comes first")
    if env.world_size == chosen.world_size or env.world_size == 1:
        why = f"RANK/WORLD_SIZE say {theirs}, left over from another run or exported by hand; {said}"
        return _ignored(chosen, environ, why), Alternative(name="env", reason=f"IGNORED: {why}")
    if chosen.world_size == 1:
        why = (f"{launcher} started one process (rank 0 of 1) and RANK/WORLD_SIZE describe {theirs}: "
               "this process was spawned by that one as a worker of its own group")
        sources = {**env.sources, "launcher": f"{env.sources.get('launcher', 'RANK')} ({why})"}
        return attr.evolve(env, sources=sources), Alternative(name=launcher, reason=f"describes the parent: {why}")
    raise LaunchEnvError(
        name="RANK / WORLD_SIZE", value=f"{theirs} (RANK={get(environ, 'RANK')}, WORLD_SIZE={get(environ, 'WORLD_SIZE')})",
        expected=f"the layout of the launcher that started this process: {said} "
        f"({', '.join(f'{k}={v}' for k, v in chosen.sources.items() if k in ('rank', 'world_size'))})",
        fix=f"{_UNSET} before launching (they are left over from another job or exported by hand), "
        f"or launch with that many ranks",
    )
