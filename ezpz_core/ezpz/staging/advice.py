"""Where the running Python environment lives, and whether staging it would help (pure; ``ezpz doctor``).

At thousands of ranks every rank's ``import torch`` reads the environment (about 20,000 file-metadata calls per
rank, docs/staging.md): on a shared file system that is the start-up cost ``ezpz stage`` removes, on a node-local
one there is nothing to remove.
"""

from __future__ import annotations

from attrs import field

from ezpz.primitives.frozen_records import frozen

__all__ = ["SHARED_FILE_SYSTEMS", "EnvironmentPlacement", "StagingAdvice", "staging_advice"]

SHARED_FILE_SYSTEMS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "fuse.ceph", "fuse.cephfs", "glusterfs",
    "fuse.glusterfs", "dvs", "wekafs", "pvfs2", "orangefs", "panfs", "fuse.sshfs", "quobyte", "fuse.quobyte",
    "virtiofs", "9p", "afs",
})
"""File-system types (as ``/proc/self/mountinfo`` names them) that every node reads over the network: NFS,
Lustre, GPFS/Spectrum Scale, BeeGFS, SMB, CephFS, GlusterFS, Cray DVS (its projection of Lustre/GPFS on
compute nodes), WekaFS, OrangeFS/PVFS2, PanFS, sshfs, Quobyte, and a VM's host shares (virtiofs, 9p), AFS."""


@frozen(kw_only=True)
class EnvironmentPlacement:
    """The facts: the environment's prefix, the mount it is on (None: unknown), and a staged copy's stamp."""

    prefix: str
    mount_point: str | None = None
    fs_type: str | None = None
    staged_from: str | None = None
    """The original prefix, when ``prefix`` is a copy ``ezpz stage`` unpacked (its stamp says so)."""


@frozen(kw_only=True)
class StagingAdvice:
    """What doctor says: ``where`` (shared, node-local, staged or unknown), and why, with the way to act."""

    where: str = field()
    reason: str

    @where.validator
    def _known(self, _attr: object, value: str) -> None:
        if value not in ("staged", "shared", "node-local", "unknown"):
            raise ValueError(f"where={value!r}: expected staged, shared, node-local or unknown")


def staging_advice(facts: EnvironmentPlacement) -> StagingAdvice:
    """``staged`` when running from ``ezpz stage``'s copy; ``shared`` on a network file system (stage it at
    scale); ``node-local`` otherwise; ``unknown`` without a mount table."""
    if facts.staged_from is not None:
        return StagingAdvice(where="staged", reason=f"{facts.prefix} is ezpz stage's node-local copy of "
                             f"{facts.staged_from}: imports read no shared file system")
    if facts.fs_type is None:
        return StagingAdvice(where="unknown", reason=f"no mount table to read: where {facts.prefix} lives is not "
                             f"known (ezpz stage helps when it is a shared file system)")
    on = f"{facts.prefix} is on {facts.mount_point} ({facts.fs_type})"
    if facts.fs_type in SHARED_FILE_SYSTEMS:
        return StagingAdvice(where="shared", reason=f"{on}, a shared file system every node reads: at scale each "
                             f"rank's imports hit it (about 20,000 metadata calls for import torch); `ezpz launch "
                             f"--stage-env` copies it to node-local storage once per node (docs/staging.md)")
    return StagingAdvice(where="node-local", reason=f"{on}, not a shared file system ezpz knows: staging it would "
                         f"change nothing")
