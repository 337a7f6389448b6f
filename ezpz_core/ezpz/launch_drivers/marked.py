"""Find the processes ``ezpz launch`` started, by the marker in their environment (Linux ``/proc``).

``ezpz launch`` sets ``EZPZ_LAUNCH_ID`` (and ``EZPZ_LAUNCHER_PID``, its own pid,
and ``EZPZ_ALLOCATION``, the scheduler job it ran in) on the command it runs;
every process below it inherits them. A process is the job's when
``/proc/<pid>/environ`` holds the marker and the process belongs to this user:
never a match on a command line or a name.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from attrs import field

from ezpz.primitives.frozen_records import frozen

__all__ = ["ALLOCATION_VAR", "LAUNCHER_PID_VAR", "MARKER", "SCHEDULER_JOB_VARS", "MarkedProcess", "allocation_of",
           "ancestors", "launch_markers", "launcher_of", "marked_processes", "rank_of", "scheduler_job"]

MARKER = "EZPZ_LAUNCH_ID"
"""Set by ``ezpz launch`` on the launched command: one id per ``ezpz launch`` run."""
LAUNCHER_PID_VAR = "EZPZ_LAUNCHER_PID"
"""The pid of the ``ezpz launch`` that started the job (checked to be an ancestor before it is trusted)."""
ALLOCATION_VAR = "EZPZ_ALLOCATION"
"""Set by ``ezpz launch``: the scheduler job it ran in (empty outside one), so every rank carries it, also where
a launcher passes only ``EZPZ_*`` variables to other nodes (Open MPI's ``-x``)."""
SCHEDULER_JOB_VARS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")
"""Where a scheduler puts the id of the job (allocation) a process runs in, in the order read."""

# Where launchers put a process's global rank, in the order trusted.
_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "PALS_RANKID", "SLURM_PROCID")
_MAX_ENVIRON = 1 << 20


@frozen(kw_only=True)
class MarkedProcess:
    """One process carrying the marker: its pid, launch id, attempt, rank (None if not a rank), command line."""

    pid: int
    ppid: int
    launch_id: str
    attempt: str = ""
    rank: int | None = None
    launcher_pid: int | None = None
    allocation: str = ""
    cmdline: str = ""
    env: Mapping[str, str] = field(factory=dict, repr=False, eq=False)


def _read(path: Path, limit: int = _MAX_ENVIRON) -> bytes | None:
    try:
        with path.open("rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _environ(raw: bytes) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def rank_of(env: Mapping[str, str]) -> int | None:
    """The global rank a launcher gave this process, from the first rank variable set to a number."""
    for name in _RANK_VARS:
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def scheduler_job(env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(variable, job id)`` from the first of :data:`SCHEDULER_JOB_VARS` set, or None outside any job."""
    for name in SCHEDULER_JOB_VARS:
        if value := env.get(name, "").strip():
            return name, value
    return None


def allocation_of(env: Mapping[str, str]) -> str:
    """The scheduler job a process runs in: ``ezpz launch``'s record of it, else the scheduler's own variable;
    "" outside any job."""
    if ALLOCATION_VAR in env:
        return env[ALLOCATION_VAR].strip()
    found = scheduler_job(env)
    return found[1] if found else ""


def launch_markers(launch_id: str, environ: Mapping[str, str]) -> dict[str, str]:
    """What ``ezpz launch`` sets on the command it runs: the launch id, its own pid, the job it runs in."""
    return {MARKER: launch_id, LAUNCHER_PID_VAR: str(os.getpid()), ALLOCATION_VAR: allocation_of(environ)}


def _ppid(pid: int) -> int:
    raw = _read(Path(f"/proc/{pid}/stat"), 4096)
    if not raw:
        return 0
    try:
        return int(raw.rsplit(b")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return 0


def ancestors(pid: int) -> set[int]:
    """``pid`` and every process above it."""
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        pid = _ppid(pid)
    return seen


def _own(pid: int, uid: int) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == uid
    except OSError:
        return False


def marked_processes(launch_id: str | None = None, *, uid: int | None = None,
                     proc: str = "/proc") -> Iterator[MarkedProcess]:
    """This user's processes carrying :data:`MARKER` (with value ``launch_id`` if given); never this process.

    Processes that vanish or cannot be read while scanning are skipped; without ``/proc`` there are none.
    """
    uid = os.getuid() if uid is None else uid
    me = os.getpid()
    try:
        entries = list(Path(proc).iterdir())
    except OSError:  # no /proc (macOS): nothing can be found by its environment
        return
    for entry in entries:
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == me or not _own(pid, uid):
            continue
        raw = _read(entry / "environ")
        if not raw or MARKER.encode() + b"=" not in raw:
            continue
        env = _environ(raw)
        found = env.get(MARKER, "")
        if not found or (launch_id is not None and found != launch_id):
            continue
        launcher = env.get(LAUNCHER_PID_VAR, "").strip()
        cmd = (_read(entry / "cmdline", 4096) or b"").replace(b"\0", b" ").decode("utf-8", "replace").strip()
        yield MarkedProcess(pid=pid, ppid=_ppid(pid), launch_id=found, attempt=env.get("EZPZ_ATTEMPT", ""),
                            rank=rank_of(env), launcher_pid=int(launcher) if launcher.isdigit() else None,
                            allocation=allocation_of(env), cmdline=cmd, env=env)


def launcher_of(process: MarkedProcess, uid: int | None = None) -> int | None:
    """The ``ezpz launch`` pid named by the process's environment, if it is really its ancestor and this user's."""
    pid = process.launcher_pid
    if pid is None or pid == os.getpid():
        return None
    if pid in ancestors(process.pid) and _own(pid, os.getuid() if uid is None else uid):
        return pid
    return None
