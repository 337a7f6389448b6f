"""Reading files named by the outside world (hostfiles) without trusting them.

A path in ``PBS_NODEFILE`` or ``--hostfile`` may point anywhere: ``/dev/zero``
(endless), a FIFO (blocks forever), a directory, a file on a hung network
mount, or a few gigabytes of garbage. :func:`read_lines` only reads regular
files, stops at a size and a line limit, and gives up after a time limit; every
refusal is an :class:`InputFileError` saying why, which callers turn into an
error naming the variable or flag that pointed at the file.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import threading
from collections.abc import Iterator

__all__ = ["MAX_BYTES", "MAX_LINES", "READ_TIMEOUT_S", "InputFileError", "check_host", "read_lines"]

MAX_BYTES = 64 * 1024 * 1024
"""Largest file read: a PBS node file for 10,000 nodes x 128 slots is about 40 MB."""
MAX_LINES = 2_000_000
"""Most lines read."""
READ_TIMEOUT_S = 10.0
"""A read that takes longer (a hung network mount) is abandoned."""

_CHUNK = 1 << 20
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


class InputFileError(ValueError):
    """A file named by a variable or flag cannot be used; the message says why (no variable name)."""


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe), which could block forever"),
          (stat.S_ISCHR, "a character device (such as /dev/zero or a terminal), which can be endless"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str | None:
    """Why a file of this mode is refused, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((why for test, why in _KINDS if test(mode)), "not a regular file")


def _refuse_unless_regular(mode: int, path: str) -> None:
    why = _kind(mode)
    if why is not None:
        raise InputFileError(f"{path} is {why}; only a regular file is read")


def _read(path: str, max_bytes: int) -> bytes:
    """Open without blocking (a FIFO swapped in after the stat still cannot hang us) and read at most ``max_bytes``+1."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _refuse_unless_regular(os.fstat(fd).st_mode, path)
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_lines(path: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES, max_lines: int = MAX_LINES,
               timeout_s: float = READ_TIMEOUT_S) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a regular text file, within the size, line and time limits.

    Raises :class:`InputFileError` for anything else (and OSError when the file
    cannot be opened: missing, no permission).
    """
    path = os.fspath(path)
    _refuse_unless_regular(os.stat(path).st_mode, path)
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["data"] = _read(path, max_bytes)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = err

    reader = threading.Thread(target=work, name="ezpz-read-input", daemon=True)
    reader.start()
    reader.join(timeout_s)
    if reader.is_alive():
        raise InputFileError(f"reading {path} took longer than {timeout_s:g}s (a hung file system?)")
    error = box.get("error")
    if isinstance(error, MemoryError):
        raise InputFileError(f"ran out of memory reading {path}") from None
    if isinstance(error, BaseException):
        raise error
    data = box["data"]
    assert isinstance(data, bytes)
    if len(data) > max_bytes:
        raise InputFileError(f"{path} is larger than {max_bytes // (1024 * 1024)} MiB; refusing to read it")
    text = data.decode("utf-8", errors="replace")
    if "\x00" in text:
        raise InputFileError(f"{path} contains NUL bytes: not a text file")
    for number, line in enumerate(text.splitlines(), start=1):
        if number > max_lines:
            raise InputFileError(f"{path} has more than {max_lines} lines; refusing to read it")
        yield number, line


def check_host(name: str) -> str | None:
    """Why ``name`` is not an RFC 1123 host name or an IP address, or None when it is one."""
    if not name:
        return "empty host name"
    try:
        ipaddress.ip_address(name.strip("[]"))
        return None
    except ValueError:
        pass
    bare = name[:-1] if name.endswith(".") else name
    if len(bare) > 253:
        return f"host name longer than 253 characters ({len(bare)})"
    for label in bare.split("."):
        if not _LABEL.fullmatch(label):
            return (f"{name[:80]!r} is not a host name (RFC 1123: labels of letters, digits and '-', 1 to 63 "
                    "characters, not starting or ending with '-') or an IP address")
    return None
