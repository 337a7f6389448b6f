"""Putting a finished save in place: a rename, or an atomic exchange with the checkpoint it replaces.

Where Linux's ``renameat2(RENAME_EXCHANGE)`` works (through ``ctypes``; most local and network file
systems), the new checkpoint and the old one swap names in one step: at every instant the path holds
one complete checkpoint, and the old one is then removed under the staging name. Elsewhere the old
one is renamed aside (``.<name>.replaced``) and the new one renamed in: a crash between the two
leaves the path empty for a moment, and the next save puts the old one back
(:func:`ezpz.checkpoints.ownership.tidy`). Either way a crash never leaves no complete checkpoint.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from pathlib import Path

from ezpz.checkpoints.layout import set_aside_path
from ezpz.checkpoints.ownership import Claim, remove_owned

__all__ = ["exchange", "install"]

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}


def exchange(a: Path, b: Path) -> bool:
    """Swap the names ``a`` and ``b`` atomically; False where this system or file system cannot (nothing moved)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # a C library older than glibc 2.28 has no wrapper
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, f"renameat2(RENAME_EXCHANGE) of {a} and {b}: {os.strerror(err)}")


def _sync_directory(path: Path) -> None:
    """``fsync`` a directory, so the renames in it are on disk; a file system that cannot is left as it is."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def install(staging: Path, final: Path, found: Claim) -> None:
    """Rename the complete ``staging`` to ``final``, where :func:`~ezpz.checkpoints.ownership.claim` found ``found``."""
    if found is not Claim.CHECKPOINT:
        os.rename(staging, final)  # over nothing or an empty directory; a non-empty one refuses (ENOTEMPTY)
    elif exchange(staging, final):
        _sync_directory(final.parent)
        remove_owned(staging)  # now the old checkpoint
    else:
        set_aside = set_aside_path(final)
        os.rename(final, set_aside)
        os.rename(staging, final)
        _sync_directory(final.parent)
        remove_owned(set_aside)
    _sync_directory(final.parent)
