"""ezpz's own module finder (ezpz.primitives.core_finder): the same files as Python's, fewer metadata calls."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
import zipimport
from pathlib import Path

import pytest

import ezpz
from ezpz.primitives import core_finder
from ezpz.primitives.core_finder import PACKAGES, CoreFinder
from conftest import clean_env, last_json, run_python

ROOT = Path(ezpz.__file__).parent


def _package_dirs() -> set[str]:
    return {str(p.parent.relative_to(ROOT)).replace(os.sep, ".") for p in ROOT.rglob("__init__.py")
            if p.parent != ROOT and "__pycache__" not in p.parts}


def _module_names() -> list[str]:
    names = []
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if parts and "__pycache__" not in parts and all(part.isidentifier() for part in parts):
            names.append("ezpz." + ".".join(parts))
    return sorted(names)


def test_the_package_list_is_the_package_directories_on_disk() -> None:
    assert PACKAGES == _package_dirs(), (
        "ezpz.primitives.core_finder.PACKAGES must list every directory of ezpz with an __init__.py "
        f"(missing: {sorted(_package_dirs() - PACKAGES)}, stale: {sorted(PACKAGES - _package_dirs())})")


@pytest.mark.parametrize("name", _module_names())
def test_every_module_resolves_to_the_file_python_would_pick(name: str) -> None:
    parent = importlib.import_module(name.rpartition(".")[0])
    expected = importlib.machinery.PathFinder.find_spec(name, parent.__path__)
    found = CoreFinder(str(ROOT)).find_spec(name, parent.__path__)
    assert expected is not None and found is not None
    assert (found.origin, found.submodule_search_locations) == (expected.origin, expected.submodule_search_locations)


def test_names_it_cannot_place_fall_through_to_python(tmp_path: Path) -> None:
    finder = CoreFinder(str(ROOT))
    assert finder.find_spec("ezpz.no_such_module", ezpz.__path__) is None
    assert finder.find_spec("ezpz.cli.plugin_templates", [str(ROOT / "cli")]) is None  # a namespace directory
    assert finder.find_spec("torch", None) is None and finder.find_spec("ezpz_cuda.plugin", None) is None
    assert finder.find_spec("ezpz.hooks", [str(tmp_path)]) is None  # a parent that is not laid out as ours


def test_a_listed_package_wins_over_a_same_named_module_as_in_python(tmp_path: Path) -> None:
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "__init__.py").write_text("")
    (tmp_path / "steps.py").write_text("")
    spec = CoreFinder(str(tmp_path)).find_spec("ezpz.steps", [str(tmp_path)])
    assert spec is not None and spec.origin == str(tmp_path / "steps" / "__init__.py")
    python = importlib.machinery.FileFinder(str(tmp_path), (importlib.machinery.SourceFileLoader, [".py"]))
    assert python.find_spec("ezpz.steps").origin == spec.origin  # type: ignore[union-attr]


def test_the_loader_uses_the_finders_stat_once_then_stats_afresh(tmp_path: Path) -> None:
    file = tmp_path / "mod.py"
    file.write_text("X = 1\n")
    (tmp_path / "__init__.py").write_text("")
    spec = CoreFinder(str(tmp_path), packages=frozenset()).find_spec("ezpz.mod", [str(tmp_path)])
    assert spec is not None
    stat = os.stat(file)
    first = spec.loader.path_stats(str(file))  # type: ignore[union-attr]
    assert first == {"mtime": stat.st_mtime, "size": stat.st_size}
    file.write_text("X = 22\n")  # changed after the find: a later load (a reload) sees the new file
    second = spec.loader.path_stats(str(file))  # type: ignore[union-attr]
    assert second["size"] == len("X = 22\n")


def test_only_a_plain_source_directory_gets_the_finder(tmp_path: Path) -> None:
    zipped = importlib.machinery.ModuleSpec("ezpz", zipimport.zipimporter.__new__(zipimport.zipimporter),
                                            is_package=True)
    assert core_finder.install(zipped) is None
    assert core_finder.install(None) is None
    assert core_finder.install(ezpz.__spec__) is not None  # already installed: the same one, once
    assert sum(isinstance(f, CoreFinder) for f in sys.meta_path) == 1


def test_a_fresh_process_loads_every_ezpz_module_of_setup_through_it() -> None:
    code = (
        "import json, sys, ezpz\n"
        "ezpz.hooks.setup()\n"
        "from ezpz.primitives.core_finder import CoreFinder\n"
        "mods = {n: type(m.__spec__.loader).__name__ for n, m in list(sys.modules.items())\n"
        "        if n.startswith('ezpz.') and getattr(m, '__spec__', None) is not None}\n"
        "order = [getattr(f, '__name__', type(f).__name__) for f in sys.meta_path]\n"
        "print(json.dumps({'mods': mods, 'order': order}))\n"
    )
    proc = run_python(code, clean_env())
    assert proc.returncode == 0, proc.stderr
    seen = last_json(proc.stdout)
    before_it = {"ezpz.primitives", "ezpz.primitives.core_finder"}  # imported to install it
    others = {n: loader for n, loader in seen["mods"].items() if n not in before_it}
    assert len(others) > 30
    assert {loader for loader in others.values()} == {"_StatedSourceLoader"}, others
    assert seen["order"].index("CoreFinder") == seen["order"].index("PathFinder") - 1
