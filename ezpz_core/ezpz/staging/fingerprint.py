"""The content hash of an environment, and whether the tarball beside it can be reused (the decision is pure)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from ezpz.primitives.frozen_records import frozen

__all__ = ["Reuse", "content_fingerprint", "read_stamp", "reuse_decision"]


@frozen
class Reuse:
    """Whether the existing tarball stands for the environment as it is now, and why (or why not)."""

    reuse: bool
    reason: str


def content_fingerprint(root: Path) -> str:
    """sha256 over every entry's relative path, type, size, mtime (ns) and link target, in sorted order.

    One ``lstat`` per entry, no file read: a changed, added or removed file changes it; ``__pycache__`` is left out
    (the interpreter writes there on import).
    """
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        base = Path(dirpath)
        for name in sorted(filenames + [d for d in dirnames if (base / d).is_symlink()]):
            path = base / name
            st = path.lstat()
            link = os.readlink(path) if path.is_symlink() else ""
            rel = path.relative_to(root).as_posix()
            digest.update(f"{rel}\0{st.st_mode:o}\0{st.st_size}\0{st.st_mtime_ns}\0{link}\n".encode())
    return digest.hexdigest()


def read_stamp(path: Path) -> dict[str, object] | None:
    """The stamp written beside a tarball (JSON), or None when missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def reuse_decision(stamp: Mapping[str, object] | None, fingerprint: str, tarball_size: int | None) -> Reuse:
    """Reuse when the stamp's fingerprint is the environment's now and the tarball has the size the stamp says."""
    if stamp is None:
        return Reuse(False, "no stamp beside the tarball (never packed here, or packing was cut off)")
    if tarball_size is None:
        return Reuse(False, "the tarball is missing")
    if stamp.get("fingerprint") != fingerprint:
        return Reuse(False, "the environment changed since it was packed (content hash differs)")
    if stamp.get("size") != tarball_size:
        return Reuse(False, f"the tarball is {tarball_size} bytes, the stamp says {stamp.get('size')} (cut short?)")
    return Reuse(True, f"unchanged since packed (content hash {fingerprint[:12]})")
