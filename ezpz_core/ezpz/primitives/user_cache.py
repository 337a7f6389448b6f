"""ezpz's files under the user's cache directory: read only if trusted, written atomically, never required.

``$XDG_CACHE_HOME/ezpz/<kind>`` (default ``~/.cache/ezpz/<kind>``). A file is
read only if it is a regular file (not a symlink) owned by this user, not
writable by group or others, and at most :data:`MAX_BYTES`; anything else is
ignored, with the reason returned. Writes go to a temporary file (mode 0600,
in a 0700 directory) renamed into place, so readers never see half a file.
A read-only home moves the cache to the per-user fallback
(:mod:`ezpz.primitives.bookkeeping_dir`, with one warning), where later reads
find it; with nothing writable, nothing is cached.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

__all__ = ["MAX_BYTES", "cache_dir", "read_json", "write_json"]

MAX_BYTES = 1 << 20


def cache_dir(kind: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """``$XDG_CACHE_HOME/ezpz/<kind>``, else ``~/.cache/ezpz/<kind>``; None without a home."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):  # the XDG spec: a relative path is invalid and ignored
        home = os.path.expanduser("~")
        if home == "~" or not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "ezpz" / kind


def read_json(file: Path) -> tuple[object | None, str]:
    """The file's JSON value, or None and why it was not read or not trusted; a file not there is looked for
    where :func:`write_json` would have put it instead (its per-user fallback, when that exists and is trusted)."""
    data, why = _read_json(file)
    if why == _NOT_THERE:
        from ezpz.primitives.bookkeeping_dir import fallback_of

        instead = fallback_of(file.parent)
        if instead is not None:
            data, why = _read_json(instead / file.name)
    return data, why


_NOT_THERE = "nothing cached yet"


def _read_json(file: Path) -> tuple[object | None, str]:
    try:
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None, _NOT_THERE
    except OSError as err:
        return None, f"cannot open {file}: {err.strerror or err}"
    try:
        st = os.fstat(fd)
        getuid = getattr(os, "getuid", None)
        if not stat.S_ISREG(st.st_mode):
            return None, f"ignored {file}: not a regular file"
        if getuid is not None and st.st_uid != getuid():
            return None, f"ignored {file}: owned by uid {st.st_uid}, not this user ({getuid()})"
        if st.st_mode & 0o022:
            return None, f"ignored {file}: writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
        if st.st_size > MAX_BYTES:
            return None, f"ignored {file}: {st.st_size} bytes, more than {MAX_BYTES}"
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            raw = fh.read(MAX_BYTES + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    try:
        return json.loads(raw.decode("utf-8")), ""
    except UnicodeDecodeError:
        return None, f"ignored {file}: not UTF-8"
    except ValueError as err:
        return None, f"ignored {file}: not JSON ({err})"


def write_json(file: Path, data: object) -> str:
    """Write ``data`` atomically, into ``file``'s directory or its per-user fallback
    (:mod:`ezpz.primitives.bookkeeping_dir`, one warning says where); returns why not, or ``""``."""
    from ezpz.primitives import bookkeeping_dir
    from ezpz.primitives.atomic_file import write_json_atomically  # only when writing

    folder = bookkeeping_dir.usable_dir(file.parent, what=f"cache ({file.parent.name})",
                                        fix="set XDG_CACHE_HOME to a writable directory, or EZPZ_CACHE=0",
                                        mode=0o700, group="cache")  # one warning for all the caches
    if folder is None:
        return "not written (no writable directory; see the warning)"
    try:
        write_json_atomically(folder / file.name, data)  # mkstemp: mode 0600
    except OSError as err:  # a full disk: run without the file
        return f"not written ({err.strerror or err})"
    return ""
