"""Host lists: Slurm's bracket notation and task counts, and hostfiles (PBS, MPICH, Open MPI), checked."""

from __future__ import annotations

import os
import re
from itertools import product

from ezpz.errors import ConfigError, LaunchEnvError
from ezpz.inputs.files import InputFileError, check_host, read_lines

__all__ = ["MAX_HOSTS", "expand_nodelist", "hosts_from_file", "parse_tasks_per_node", "rankfile_hosts", "read_hostfile"]

MAX_HOSTS = 1_000_000
"""Refuse node lists that expand to more hosts than this (a typo like ``n[0-999999999]``)."""

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_SLOTS = re.compile(r":\d+$")
_TASK_GROUP = re.compile(r"^(\d{1,9})(?:\(x(\d{1,9})\))?$")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            if depth:
                raise ValueError(f"nested '[' at position {i} in node list {text!r}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise ValueError(f"unmatched ']' at position {i} in node list {text!r}")
            depth = 0
        elif ch == "," and not depth:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unclosed '[' in node list {text!r}")
    parts.append(text[start:])
    return parts


def _ranges(body: str, text: str) -> list[str]:
    """``"001-003,7"`` -> ``["001", "002", "003", "7"]``; zero padding follows the low bound."""
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise ValueError(f"bad range {item!r} in node list {text!r} (expected N or N-M)")
        lo_s, hi_s = m.group(1), m.group(2)
        if hi_s is None:
            out.append(lo_s)
            continue
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise ValueError(f"range {item!r} runs backwards in node list {text!r}")
        if hi - lo >= MAX_HOSTS:
            raise ValueError(f"range {item!r} in node list {text!r} has more than {MAX_HOSTS} hosts")
        width = len(lo_s) if lo_s.startswith("0") else 0
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def _expand_one(pattern: str, text: str) -> list[str]:
    """One comma-free pattern, possibly with several bracket groups (``r[1-2]n[01-02]``)."""
    pieces = re.split(r"(\[[^\]]*\])", pattern)
    choices: list[list[str]] = []
    count = 1
    for piece in pieces:
        if piece.startswith("["):
            opts = _ranges(piece[1:-1], text)
            count *= len(opts)
            if count > MAX_HOSTS:
                raise ValueError(f"node list {text!r} expands to more than {MAX_HOSTS} hosts")
            choices.append(opts)
        elif piece:
            if any(ch.isspace() or ch in "[]" for ch in piece):
                raise ValueError(f"bad host name {piece!r} in node list {text!r}")
            choices.append([piece])
    return ["".join(parts) for parts in product(*choices)]


def expand_nodelist(text: str) -> list[str]:
    """Expand a Slurm-style node list: ``"nid[001-003,007],login1"`` -> ``["nid001", ..., "login1"]``.

    Supports comma-separated items, ranges with zero padding and several
    bracket groups per name. Order is kept, duplicates dropped. Raises
    ValueError on malformed input.
    """
    text = text.strip()
    if not text:
        raise ValueError("empty node list")
    hosts: dict[str, None] = {}
    for item in _split_top(text):
        item = item.strip()
        if not item:
            raise ValueError(f"empty item in node list {text!r}")
        for host in _expand_one(item, text):
            hosts[host] = None
            if len(hosts) > MAX_HOSTS:
                raise ValueError(f"node list {text!r} expands to more than {MAX_HOSTS} hosts")
    return list(hosts)


def read_hostfile(path: str | os.PathLike[str]) -> list[str]:
    """Hosts named in a hostfile, in order, each once.

    Understands PBS node files (one host per slot), MPICH (``host:4``) and
    Open MPI (``host slots=4``) lines; ``#`` starts a comment. Only a regular
    file is read, within :mod:`ezpz.inputs.files`' size, line and time limits, and
    every host must be an RFC 1123 name or an IP address. Raises OSError when
    the file cannot be opened and :class:`~ezpz.inputs.files.InputFileError` (a
    ValueError) for anything else, naming the line.
    """
    hosts: dict[str, None] = {}
    for number, line in read_lines(path):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        host = fields[0]
        if host.count(":") == 1:  # MPICH "host:slots"; leave IPv6 addresses alone
            host = _SLOTS.sub("", host)
        why = check_host(host)
        if why is not None:
            raise InputFileError(f"line {number} of {os.fspath(path)}: {why}")
        hosts[host] = None
        if len(hosts) > MAX_HOSTS:
            raise InputFileError(f"{os.fspath(path)} names more than {MAX_HOSTS} hosts")
    return list(hosts)


def rankfile_hosts(path: str | os.PathLike[str]) -> list[str]:
    """The compute hosts of an LSF rank file (``LSB_DJOB_RANKFILE``), in order, each once.

    LSF writes one line per slot and puts the job's launch node first; that node
    runs no ranks under ``jsrun``, so it is dropped (as Lightning's LSFEnvironment does).
    """
    return read_hostfile(path)[1:]


def hosts_from_file(path: str | os.PathLike[str], name: str, *, required: bool = True) -> tuple[str, ...]:
    """The hosts in the hostfile ``name`` (a variable, flag or argument) points at, each once.

    The one checked reader behind every hostfile ezpz reads (:func:`read_hostfile`'s limits). A
    missing, unreadable or malformed file raises :class:`~ezpz.errors.ConfigError` naming ``name``;
    so does an empty one when ``required``.
    """
    path = os.fspath(path)
    try:
        hosts = tuple(dict.fromkeys(h for h in read_hostfile(path) if h))
    except OSError as err:
        raise ConfigError(name=name, value=path, expected="a readable file with one host per line",
                          fix=f"check the path ({err.strerror or err})") from None
    except ValueError as err:  # ezpz.inputs.files.InputFileError: not a regular file, too big, a bad host name
        raise ConfigError(name=name, value=path, expected=f"a hostfile with one host per line ({err})",
                          fix=f"point {name} at the job's host list, one host name or IP address per line") from None
    if not hosts and required:
        raise ConfigError(name=name, value=path, expected="at least one host", fix="list one host per line")
    return hosts


def parse_tasks_per_node(name: str, text: str) -> list[tuple[int, int]]:
    """``"2(x3),1"`` -> ``[(2, 3), (1, 1)]`` (tasks, repeated on that many nodes); LaunchEnvError naming ``name``."""
    groups = []
    for item in text.split(","):
        m = _TASK_GROUP.match(item.strip())
        if not m or int(m.group(1)) < 1 or (m.group(2) is not None and int(m.group(2)) < 1):
            raise LaunchEnvError(
                name=name, value=text, expected="Slurm's compressed task counts such as '4' or '2(x3),1'",
                fix=f"{name} is set by srun; unset it if you exported it by hand",
            )
        groups.append((int(m.group(1)), int(m.group(2) or 1)))
    return groups
