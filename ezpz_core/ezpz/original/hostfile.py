"""Hostfile helpers with the original ezpz's names; none of them writes a file unless asked to."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from pathlib import Path

from ezpz.inputs.hostlist import hosts_from_file

__all__ = [
    "get_hostfile_with_fallback",
    "get_hostname",
    "get_nodes_from_hostfile",
    "read_hosts",
    "write_hostfile_from_list_of_hosts",
    "write_localhost_to_hostfile",
]

#: Where a scheduler or the user names the job's hostfile, in the order checked.
HOSTFILE_VARIABLES = ("HOSTFILE", "PBS_NODEFILE")


def get_hostname() -> str:
    """This machine's host name, lower-case."""
    return (socket.gethostname() or "localhost").strip().lower()


def read_hosts(hostfile: str | os.PathLike[str]) -> list[str]:
    """The hosts ``hostfile`` names, each once (checked: :func:`ezpz.inputs.hostlist.hosts_from_file`); [] when it is not a file.

    A file that is there but malformed (a bad host name, too large) raises
    :class:`~ezpz.errors.ConfigError` naming the line.
    """
    if not Path(hostfile).is_file():
        return []
    return list(hosts_from_file(hostfile, f"hostfile {os.fspath(hostfile)}", required=False))


def get_nodes_from_hostfile(hostfile: str | os.PathLike[str]) -> list[str]:
    """Hosts listed in ``hostfile``; ``[this host]`` when it is not a file (as the original did)."""
    return read_hosts(hostfile) or [get_hostname()]


def get_hostfile_with_fallback(hostfile: str | os.PathLike[str] | None = None) -> Path | None:
    """``hostfile`` if it is a file, else ``HOSTFILE``'s, else ``PBS_NODEFILE``'s; None when there is none.

    The original wrote ``./hostfile`` containing this host as a last resort;
    this never writes (use :func:`write_localhost_to_hostfile` to do that).
    """
    candidates: list[str | os.PathLike[str] | None] = [hostfile] if hostfile is not None else []
    candidates += [os.environ.get(v, "").strip() or None for v in HOSTFILE_VARIABLES]
    for candidate in candidates:
        if candidate is not None and Path(candidate).is_file():
            return Path(candidate)
    return None


def write_localhost_to_hostfile(hostfile: str | os.PathLike[str]) -> None:
    """Write this host's name to ``hostfile`` (on rank 0 only, as the original did)."""
    if _rank() == 0:
        Path(hostfile).write_text(get_hostname(), encoding="utf-8")


def _rank() -> int:
    """This process's rank: the runtime's after setup(), else the launcher's (0 when none says)."""
    from ezpz.hooks import get_runtime

    runtime = get_runtime()
    if runtime is not None:
        return runtime.rank
    from ezpz.launch_env.detectors import detect_layout

    try:
        return detect_layout(os.environ).rank
    except Exception:  # partial launcher variables: the original wrote from every rank that could not tell
        return 0


def write_hostfile_from_list_of_hosts(hosts: Sequence[str], hostfile: str | os.PathLike[str]) -> Path:
    """Write ``hosts`` one per line to ``hostfile`` (parents created) and return its path."""
    path = Path(hostfile)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(hosts) + "\n", encoding="utf-8")
    return path
