"""Where the user's project lives: the directories whose files the mode treats as the user's code, with reasons.

Everything that is not the standard library, torch, ezpz (or an ezpz plugin) or an installed distribution is the
project: the script's directory, each ``PYTHONPATH`` entry, the current directory, and the project's own editable
installs (``pip install -e``: a distribution whose ``direct_url.json`` says ``dir_info.editable`` and whose source
lies in the script's repository or under the current directory). ``--project-root`` replaces the search. Each
candidate is listed with why it is in or out; :mod:`.scope` then leaves out, file by file, what lies in an
installed location even inside a root (a ``.venv`` in the project, ezpz's own package on ``PYTHONPATH``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

import attr

__all__ = ["Root", "installed_dirs", "project_roots"]


@attr.frozen
class Root:
    """One candidate directory: whether the mode treats the files under it as the user's, and why."""

    path: str
    included: bool
    why: str


def _norm(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(path).rstrip(os.sep) + os.sep


def installed_dirs() -> tuple[str, ...]:
    """The standard library, every site directory, torch's, ezpz's and each ezpz plugin's package: never the user's."""
    import site
    import sysconfig

    import ezpz

    dirs = {p for k, p in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.update(getattr(site, "getsitepackages", lambda: [])())
    dirs.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else "")
    dirs.add(os.path.dirname(ezpz.__file__))
    dirs.update(_plugin_package_dirs())
    import importlib.util

    torch = importlib.util.find_spec("torch")  # not imported: a plugin may set variables torch reads on import
    if torch is not None:
        dirs.update(torch.submodule_search_locations or ())
    return tuple(_norm(d) for d in dirs if d)


def _plugin_package_dirs() -> set[str]:
    """The package directories of every installed ezpz plugin (its entry point's top-level module; not imported)."""
    import importlib.metadata as metadata
    import importlib.util

    found: set[str] = set()
    for entry in metadata.entry_points(group="ezpz"):
        try:
            spec = importlib.util.find_spec(entry.module.split(".")[0])
        except (ImportError, ValueError):
            continue
        if spec is not None:  # a package (a single-module plugin is left to the file-by-file rule)
            found.update(spec.submodule_search_locations or ())
    return found


def _editable_installs() -> list[tuple[str, str, bool]]:
    """``(distribution, source directory, is ezpz or an ezpz plugin)`` for each editable install on the path."""
    import importlib.metadata as metadata

    out = []
    for dist in metadata.distributions():
        try:
            text = dist.read_text("direct_url.json")
        except (OSError, UnicodeDecodeError):
            continue
        if not text or '"editable"' not in text:
            continue
        try:
            info = json.loads(text)
        except ValueError:
            continue
        url = urlparse(str(info.get("url", "")))
        if not (info.get("dir_info") or {}).get("editable") or url.scheme != "file":
            continue
        name = str(dist.metadata["Name"] or "?")
        ours = name.lower() == "ezpz" or any(ep.group == "ezpz" for ep in dist.entry_points)
        out.append((name, unquote(url.path), ours))
    return out


def _repository_of(directory: Path) -> Path | None:
    """The nearest directory at or above ``directory`` holding ``.git`` (the script's repository), or None."""
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def project_roots(script: Path, override: str | None, environ: Mapping[str, str], cwd: str,
                  outside: Sequence[str] | None = None) -> list[Root]:
    """Each candidate root of the project, in or out, with the reason."""
    if override:
        return [Root(_norm(override), True, "--project-root (replaces the search)")]
    outside = tuple(outside if outside is not None else installed_dirs())
    home = _norm(Path.home())
    roots: list[Root] = []
    seen: set[str] = set()

    def add(path: str, why: str, *, broad_ok: bool = False) -> None:
        norm = _norm(path)
        if norm in seen:
            return
        seen.add(norm)
        if not os.path.isdir(norm):
            roots.append(Root(norm, False, f"{why}: not a directory"))
        elif any(norm.startswith(d) for d in outside):
            roots.append(Root(norm, False, f"{why}: an installed location (standard library, site-packages, "
                                           "torch or ezpz)"))
        elif not broad_ok and norm in (os.sep, home):
            roots.append(Root(norm, False, f"{why}: the {'filesystem root' if norm == os.sep else 'home directory'}"
                                           " is too broad to be one project (pass --project-root)"))
        else:
            roots.append(Root(norm, True, why))

    add(str(script.parent), "the script's directory", broad_ok=True)
    for entry in filter(None, environ.get("PYTHONPATH", "").split(os.pathsep)):
        add(entry, "on PYTHONPATH")
    add(cwd, "the current directory")
    repository = _repository_of(script.parent)
    homes = [p for p in (str(repository) if repository else None, cwd) if p]
    for name, source, ours in _editable_installs():
        norm = _norm(source)
        if ours:
            if norm not in seen:
                seen.add(norm)
                roots.append(Root(norm, False, f"editable install of {name}: ezpz or an ezpz plugin"))
            continue
        if any(norm.startswith(_norm(h)) for h in homes):
            add(source, f"editable install of {name} (its source is in the script's repository or the current "
                        "directory)")
        elif norm not in seen:
            seen.add(norm)
            roots.append(Root(norm, False, f"editable install of {name} outside the script's repository and the "
                                           "current directory: an installed library (--project-root to include it)"))
    return roots
