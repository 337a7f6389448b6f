"""The content hash of an environment, and whether the tarball beside it can be reused (the decision is pure)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from ezpz.primitives.frozen_records import frozen

__all__ = ["MANIFEST_DIRS", "Reuse", "content_fingerprint", "read_stamp", "reuse_decision"]


@frozen
class Reuse:
    """Whether the existing tarball stands for the environment as it is now, and why (or why not)."""

    reuse: bool
    reason: str


MANIFEST_DIRS = ("", "bin", "conda-meta", "lib/python*/site-packages", "Lib/site-packages")
"""Where an install, upgrade or removal shows: the environment's top, its ``bin``, conda's package records and the
top of ``site-packages`` (a package's ``*.dist-info`` name carries its version)."""


def content_fingerprint(root: Path) -> str:
    """sha256 over the names in :data:`MANIFEST_DIRS` and the mtimes (ns) of those directories and ``pyvenv.cfg``.

    Cheap on a shared file system (a few directory reads and stats, not one per file): installing, upgrading or
    removing a package changes it; editing a file inside an installed package does not (delete the stamp
    ``<tarball>.json`` to pack again).
    """
    digest = hashlib.sha256()
    for pattern in MANIFEST_DIRS:
        for d in sorted(root.glob(pattern)) if pattern else [root]:
            try:
                names = sorted(e.name for e in os.scandir(d) if e.name != "__pycache__")
                mtime = d.stat().st_mtime_ns
            except OSError:
                continue
            digest.update(f"{d.relative_to(root).as_posix()}\0{mtime}\0{'/'.join(names)}\n".encode())
    cfg = root / "pyvenv.cfg"
    if cfg.is_file():
        digest.update(f"pyvenv.cfg\0{cfg.stat().st_mtime_ns}\n".encode())
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
