"""Where ezpz writes its own files: the configured place, else a per-user temporary directory, else nowhere; said once.

Every file ezpz writes for itself, as opposed to what the user's script writes, goes through
:func:`usable_dir`. The order:

1. the configured directory (created if missing), when a file can be created in it;
2. else the same path mirrored under the **fallback root** ``<tempfile.gettempdir()>/ezpz-<uid>``
   (``/tmp/ezpz-1000/home/me/run/ezpz-jobs/...``), created with mode 0700. The root is hostile until checked:
   it must be a real directory (not a symlink), owned by this user, closed to group and others;
3. else nowhere.

Each configured directory is decided once per process: one warning (``ezpz_files_redirected`` or
``ezpz_files_dropped`` on the ``ezpz.bookkeeping`` logger) names it, the reason, and where the files went
instead; later writes go there silently. Nothing here raises: ezpz's bookkeeping never changes how the user's
script ends.
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from ezpz.primitives import logger as _log

__all__ = ["fallback_of", "fallback_root", "forget", "usable_dir", "write_failed"]

log = _log.get_logger("ezpz.bookkeeping")

_lock = threading.Lock()
_decided: dict[str, Path | None] = {}
_failed_writes: set[str] = set()
_said: set[str] = set()  # the groups already warned about


def _uid() -> int | None:
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid is not None else None


def fallback_root(*, create: bool = True) -> tuple[Path | None, str]:
    """``<tempfile.gettempdir()>/ezpz-<uid>``, checked (and created if ``create``); else None and why."""
    try:
        base = tempfile.gettempdir()
    except OSError as err:  # tempfile found no directory it could write: TMPDIR, /tmp, /var/tmp, cwd
        return None, str(err.strerror or err)  # "No usable temporary directory found in [...]"
    uid = _uid()
    root = Path(base) / f"ezpz-{uid if uid is not None else os.environ.get('USERNAME', 'user')}"
    if create:
        try:
            os.mkdir(root, 0o700)
        except FileExistsError:
            pass
        except OSError as err:
            return None, f"cannot create {root} ({err.strerror or err})"
    try:
        st = os.lstat(root)
    except OSError as err:
        return None, f"cannot use {root} ({err.strerror or err})"
    if stat.S_ISLNK(st.st_mode):
        return None, f"{root} is a symbolic link: not trusted (remove it)"
    if not stat.S_ISDIR(st.st_mode):
        return None, f"{root} is not a directory (remove it)"
    if uid is not None and st.st_uid != uid:
        return None, f"{root} is owned by uid {st.st_uid}, not this user ({uid}): not trusted"
    if st.st_mode & 0o077:
        return None, f"{root} is open to group or others (mode {stat.S_IMODE(st.st_mode):o}): not trusted (remove it)"
    return root, ""


def _mirror(root: Path, configured: Path) -> Path:
    """``configured`` (made absolute) re-rooted under ``root``: unambiguous, and the same on every rank."""
    absolute = os.path.abspath(configured)
    drive, rest = os.path.splitdrive(absolute)
    return root.joinpath(drive.replace(":", ""), rest.lstrip("\\/")) if drive else root / rest.lstrip("\\/")


def fallback_of(configured: str | os.PathLike[str]) -> Path | None:
    """Where :func:`usable_dir` would put ``configured``'s files instead, if the fallback root exists and is
    trusted (nothing is created): for readers of a cache written there earlier."""
    root, _why = fallback_root(create=False)
    return _mirror(root, Path(configured)) if root is not None else None


def _writable(directory: Path, mode: int = 0o777) -> str:
    """Create ``directory`` and one file in it; ``""``, or why not (the system's reason: read-only, no permission)."""
    try:
        directory.mkdir(mode=mode, parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".ezpz-probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return err.strerror or str(err)
    return ""


def _decide(configured: Path, what: str, fix: str, mode: int, group: str) -> Path | None:
    why = _writable(configured, mode)
    if not why:
        return configured
    root, root_why = fallback_root()
    instead_why = root_why
    if root is not None:
        instead = _mirror(root, configured)
        try:
            os.makedirs(instead, mode=0o700, exist_ok=True)
        except OSError as err:
            instead_why = f"cannot create {instead} ({err.strerror or err})"
        else:
            instead_why = _writable(instead)
            if not instead_why:
                _say(group)("ezpz_files_redirected", what=what, path=str(configured), reason=why,
                            instead=str(instead), **({"fix": fix} if fix else {}))
                return instead
            instead_why = f"{instead}: {instead_why}"
    _say(group)("ezpz_files_dropped", what=what, path=str(configured), reason=why,
                instead=f"nowhere: the fallback failed too ({instead_why}); the run goes on without them",
                **({"fix": fix} if fix else {}))
    return None


def _say(group: str) -> Callable[..., None]:
    """``log.warning`` the first time for ``group`` (``""``: no group, always), ``log.info`` after."""
    if not group or group not in _said:
        _said.add(group)
        warning: Callable[..., None] = log.warning
        return warning
    info: Callable[..., None] = log.info
    return info


def usable_dir(configured: str | os.PathLike[str], *, what: str, fix: str = "", mode: int = 0o777,
               group: str = "") -> Path | None:
    """The directory to write ``what`` (e.g. ``"CUDA-compat report"``) into instead of ``configured``: itself,
    its fallback, or None (nothing writable). Decided, and said, once per process and directory; never raises.

    ``fix`` goes into the warning: how to choose another place (``"set EZPZ_CUDA_COMPAT_DIR ..."``); ``mode``:
    of the configured directory when it is created (the fallback is always 0700); ``group``: directories of one
    kind (``"cache"``) warned about once together, the others at info level.
    """
    key = os.path.abspath(configured)
    with _lock:
        if key in _decided:
            return _decided[key]
        try:
            chosen = _decide(Path(key), what, fix, mode, group)
        except Exception as err:  # a bug or an odd platform here must not end the user's run
            log.warning("ezpz_files_dropped", what=what, path=key, reason=f"{type(err).__name__}: {err}",
                        instead="nowhere; the run goes on without them")
            chosen = None
        _decided[key] = chosen
        return chosen


def write_failed(path: str | os.PathLike[str], *, what: str, error: BaseException) -> None:
    """Say once per process that writing ``path`` failed after its directory was found usable (a full disk)."""
    key = os.path.abspath(os.path.dirname(os.path.abspath(path)))
    with _lock:
        if key in _failed_writes:
            return
        _failed_writes.add(key)
    reason = getattr(error, "strerror", None) or f"{type(error).__name__}: {error}"
    log.warning("ezpz_file_not_written", what=what, path=str(path), reason=str(reason)[:300],
                instead="nowhere; the run goes on without it")


def forget() -> None:
    """Forget every decision (tests; a process that changed its working directory's mounts)."""
    with _lock:
        _decided.clear()
        _failed_writes.clear()
        _said.clear()
