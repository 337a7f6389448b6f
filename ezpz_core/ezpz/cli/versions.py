"""Installed versions of the core and each plugin distribution, and whether each plugin's core range fits.

A plugin declares the core versions it works with in its metadata (``Requires-Dist: ezpz>=1.0,<2``);
``ezpz doctor`` reads that back with :mod:`importlib.metadata` and flags a plugin built for another core.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable
from typing import Any

__all__ = ["CORE", "core_requirement", "distribution_rows", "text_lines", "version_problems"]

CORE = "ezpz"


def _core_version() -> str:
    try:
        return importlib.metadata.version(CORE)
    except importlib.metadata.PackageNotFoundError:  # running from a source tree that was never installed
        import ezpz

        return ezpz.__version__


def core_requirement(requires: Iterable[str]) -> Any | None:
    """The unconditional requirement on the core among ``Requires-Dist`` lines, or None if there is none."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != CORE:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # only under an extra: not what a plain install gets
        return req
    return None


def distribution_rows(plugins: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"core": {...}, "plugins": [...]}``: one row per plugin distribution (built-ins belong to the core)."""
    from packaging.version import InvalidVersion, Version

    core = _core_version()
    rows = []
    for dist in sorted({p["distribution"] for p in plugins} - {CORE, "unknown"}):
        try:
            meta = importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        req = core_requirement(meta.requires or ())
        row: dict[str, Any] = {"distribution": dist, "version": meta.version,
                               "requires_core": None if req is None else str(req.specifier),
                               "compatible": None}
        if req is not None:
            try:
                row["compatible"] = req.specifier.contains(Version(core), prereleases=True)
            except InvalidVersion:
                row["compatible"] = None
        rows.append(row)
    return {"core": {"distribution": CORE, "version": core}, "plugins": rows}


def version_problems(dists: dict[str, Any]) -> list[dict[str, str]]:
    """A problem for each plugin whose declared core range excludes the installed core."""
    core = dists["core"]["version"]
    return [
        {"what": f"plugin distribution {r['distribution']} {r['version']} requires {CORE}{r['requires_core']}, "
                 f"but {CORE} {core} is installed",
         "fix": f"install a {r['distribution']} release made for {CORE} {core} (pip install -U {r['distribution']}), "
                f"or install '{CORE}{r['requires_core']}'"}
        for r in dists["plugins"] if r["compatible"] is False
    ]


def text_lines(dists: dict[str, Any]) -> list[str]:
    """The doctor's ``versions`` section."""
    lines = [f"  {dists['core']['distribution']} {dists['core']['version']} (core)"]
    for r in dists["plugins"]:
        if r["requires_core"] is None:
            verdict = f"declares no {CORE} dependency"
        elif not r["requires_core"]:
            verdict = f"requires any {CORE} (declares no range)"
        else:
            ok = {True: "ok", False: "EXCLUDES the installed core", None: "cannot be checked"}[r["compatible"]]
            verdict = f"requires {CORE}{r['requires_core']}: {ok}"
        lines.append(f"  {r['distribution']} {r['version']}  {verdict}")
    return lines
