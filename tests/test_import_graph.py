"""The import graph of the core package: no cycles, and the import-linter contracts hold.

docs/architecture.md: data flows down, never back up. ``lint-imports`` (run by
scripts/test.sh) checks the layer contracts in pyproject.toml; this test also fails on
any import cycle, function-local imports included, contracts or not.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")

ROOT = Path(__file__).resolve().parents[1]


def _graph():  # type: ignore[no-untyped-def]
    return grimp.build_graph("ezpz", exclude_type_checking_imports=True)


def _cycles(graph) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """Strongly connected components with more than one module (Tarjan), each a cycle's members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(module: str) -> None:
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on_stack.add(module)
        for dep in graph.find_modules_directly_imported_by(module):
            if dep not in index:
                visit(dep)
                low[module] = min(low[module], low[dep])
            elif dep in on_stack:
                low[module] = min(low[module], index[dep])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles_beneath_the_facade():
    """Every module below the root facade (which imports ezpz.hooks to discover plugins) is acyclic."""
    graph = _graph()
    for edge in (("ezpz", "ezpz.hooks"), ("ezpz", "ezpz.original.migration")):  # the facade's documented edges
        graph.remove_import(importer=edge[0], imported=edge[1])
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    """The check above can fail: a graph with a planted cycle is reported."""
    graph = _graph()
    graph.add_import(importer="ezpz.facts", imported="ezpz.runtime")
    assert any("ezpz.facts" in c and "ezpz.runtime" in c for c in _cycles(graph))


def test_import_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint is None:
        pytest.skip("lint-imports is not installed (pip install import-linter; scripts/test.sh does)")
    done = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
