"""Pack an environment (or take a given tarball) once, beside it, and reuse it while its content is unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ezpz.errors import ConfigError
from ezpz.primitives.frozen_records import frozen
from ezpz.staging.fingerprint import content_fingerprint, read_stamp, reuse_decision

__all__ = ["Packed", "ensure_tarball", "what_to_stage"]

_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz")


@frozen(kw_only=True)
class Packed:
    """The tarball to deliver: its path, sha256 and size, the directory it holds (``top``) and where that directory
    lived when packed (``prefix``, rewritten on the nodes; None when unknown), whether it was reused, and why."""

    tarball: Path
    sha256: str
    size: int
    top: str
    prefix: str | None
    reused: bool
    reason: str
    pack_s: float


def what_to_stage(given: str | None, environ: Mapping[str, str], prefix: str, base_prefix: str) -> tuple[Path, str]:
    """The directory or tarball to stage and why: ``given``, else the active venv, else the active conda env (pure)."""
    if given:
        return Path(given).absolute(), f"given ({given})"
    if prefix != base_prefix:
        return Path(prefix), f"the active virtual environment (sys.prefix {prefix})"
    conda = (environ.get("CONDA_PREFIX") or "").strip()
    if conda:
        return Path(conda), f"the active conda environment (CONDA_PREFIX={conda})"
    raise ConfigError(name="--stage-src", value="", expected="a directory or tarball, or an active venv/conda env",
                      fix="activate the environment to stage, or pass --stage-src PATH")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(4 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _top_of(tarball: Path, timeout_s: float) -> str:
    proc = subprocess.run(["tar", "-tf", str(tarball)], capture_output=True, text=True, timeout=timeout_s)
    first = next((line for line in proc.stdout.splitlines() if line.strip()), "")
    top = first.lstrip("./").split("/", 1)[0]
    if proc.returncode != 0 or not top:
        raise ConfigError(name="--stage-src", value=str(tarball),
                          expected=f"a readable tar archive with one top directory ({proc.stderr.strip()[:200]})",
                          fix="pass the environment's directory instead; ezpz packs it")
    return top


def _given_tarball(src: Path, timeout_s: float) -> Packed:
    stamp = read_stamp(Path(f"{src}.json"))
    st = src.stat()
    same = stamp is not None and stamp.get("size") == st.st_size and stamp.get("mtime_ns") == st.st_mtime_ns
    t0 = time.monotonic()
    sha = str(stamp["sha256"]) if same and stamp else _sha256(src)
    prefix = stamp.get("prefix") if stamp else None
    top = str(stamp["top"]) if stamp and "top" in stamp else _top_of(src, timeout_s)
    why = "a given tarball" + ("" if prefix else " with no ezpz stamp: paths inside are not rewritten")
    return Packed(tarball=src, sha256=sha, size=st.st_size, top=top, prefix=str(prefix) if prefix else None,
                  reused=True, reason=why, pack_s=round(time.monotonic() - t0, 3))


def ensure_tarball(src: Path, pack_to: Path | None, timeout_s: float) -> Packed:
    """The tarball for ``src``: ``src`` itself when it is one, else ``pack_to`` (default ``<src>.ezpz-stage.tar``
    beside it), packed again only when the content hash differs from the stamp's (``<tarball>.json``)."""
    if src.is_file() and src.name.endswith(_TAR_SUFFIXES):
        return _given_tarball(src, timeout_s)
    if not src.is_dir():
        raise ConfigError(name="--stage-src", value=str(src), expected="an existing directory or .tar/.tar.gz file",
                          fix="pass the environment's directory (or its tarball)")
    tarball = pack_to or src.parent / f"{src.name}.ezpz-stage.tar"
    stamp_path = Path(f"{tarball}.json")
    fingerprint = content_fingerprint(src)
    size = tarball.stat().st_size if tarball.is_file() else None
    stamp = read_stamp(stamp_path)
    decision = reuse_decision(stamp, fingerprint, size)
    if decision.reuse and stamp is not None and size is not None:
        return Packed(tarball=tarball, sha256=str(stamp["sha256"]), size=size, top=src.name, prefix=str(src),
                      reused=True, reason=f"reused {tarball}: {decision.reason}", pack_s=0.0)
    t0 = time.monotonic()
    part = tarball.with_name(f".{tarball.name}.part-{os.getpid()}")
    try:
        proc = subprocess.run(["tar", "-cf", str(part), "-C", str(src.parent), src.name], capture_output=True,
                              text=True, timeout=timeout_s)
        if proc.returncode not in (0, 1):  # GNU tar: 1 = a file changed while read (still a usable archive)
            raise ConfigError(name="--stage-pack-to", value=str(tarball),
                              expected=f"a tarball tar can write ({proc.stderr.strip()[-300:]})",
                              fix="pass --stage-pack-to a path on a file system with room, writable by you")
        part.replace(tarball)
    except OSError as e:
        raise ConfigError(name="--stage-pack-to", value=str(tarball), expected=f"a writable path ({e})",
                          fix="pass --stage-pack-to PATH where you may write (default: beside the environment)"
                          ) from None
    except subprocess.TimeoutExpired:
        raise ConfigError(name="--stage-pack-to", value=str(tarball),
                          expected=f"packing within --stage-timeout {timeout_s:g} s",
                          fix="raise --stage-timeout, or pack once ahead with `ezpz stage --pack-only`") from None
    finally:
        part.unlink(missing_ok=True)
    st = tarball.stat()
    sha = _sha256(tarball)
    stamp_path.write_text(json.dumps({"fingerprint": fingerprint, "sha256": sha, "size": st.st_size,
                                      "mtime_ns": st.st_mtime_ns, "prefix": str(src), "top": src.name,
                                      "python": sys.version.split()[0]}))
    return Packed(tarball=tarball, sha256=sha, size=st.st_size, top=src.name, prefix=str(src), reused=False,
                  reason=f"packed {src} into {tarball}: {decision.reason}", pack_s=round(time.monotonic() - t0, 3))
