"""Check an installed (non-editable) ezpz and plugins, the way a user's install is: run inside the venv under test.

    python scripts/check_installed.py [PLUGIN ...]

Fails (exit 1) unless the core and each named plugin are installed from a wheel (not editable, not this
checkout's sources) with its PEP 561 ``py.typed`` marker, each plugin is discovered through its entry point and loaded, its declared core range fits
the installed core, and ``ezpz.testing``'s conformance kit passes on it.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path


def _installed_from_wheel(dist: str) -> str | None:
    """None if ``dist`` is a regular (non-editable) install, else what is wrong."""
    try:
        meta = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return f"{dist} is not installed"
    direct = meta.read_text("direct_url.json")
    if direct and json.loads(direct).get("dir_info", {}).get("editable"):
        return f"{dist} is an editable install ({direct.strip()})"
    top = (meta.read_text("top_level.txt") or "").split() or [dist.replace("-", "_")]
    for name in top:
        files = [f for f in meta.files or () if f.parts[0] == name and f.name == "__init__.py"]
        if not files or not Path(meta.locate_file(files[0])).is_file():
            return f"{dist}: package {name!r} is not inside the installed distribution (missing from the wheel?)"
        if not any(f.parts[0] == name and f.name == "py.typed" for f in meta.files or ()):
            return (f"{dist}: package {name!r} has no py.typed in its wheel: type checkers would treat it as untyped "
                    "(add it to [tool.setuptools.package-data])")
    return None


def main(plugins: list[str]) -> int:
    import ezpz
    from ezpz.cli.plugins import plugin_rows
    from ezpz.cli.versions import distribution_rows
    from ezpz.testing import assert_conformant

    problems = [p for p in [_installed_from_wheel("ezpz")] if p]
    if "site-packages" not in ezpz.__file__:
        problems.append(f"ezpz imported from {ezpz.__file__}, not from site-packages")
    rows = {r["name"]: r for r in plugin_rows(ezpz.hooks.get_plugin_host())}
    dists = {r["distribution"]: r for r in distribution_rows(list(rows.values()))["plugins"]}
    for name in plugins:
        row = rows.get(name)
        if row is None or row["status"] != "loaded":
            problems.append(f"plugin {name!r} not loaded: {row and (row['error'] or row['reason'])}")
            continue
        before = len(problems)
        problems += [p for p in [_installed_from_wheel(row["distribution"])] if p]
        if dists.get(row["distribution"], {}).get("compatible") is not True:
            problems.append(f"{row['distribution']}: core range does not fit: {dists.get(row['distribution'])}")
        try:
            assert_conformant(row["target"])
        except AssertionError as err:
            problems.append(f"plugin {name!r} fails the conformance kit: {err}")
        if len(problems) == before:
            print(f"ok: {name} ({row['distribution']} {row['version']}, wheel) loaded, core range fits, conformant")
    for p in problems:
        print(f"FAIL: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
