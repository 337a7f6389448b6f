"""The import graph of the core and of every plugin under plugins/: no cycles, and the import-linter contracts hold.

docs/architecture.md: data flows down, never back up. ``lint-imports`` (run by
scripts/test.sh) checks the layer contracts in pyproject.toml, and each plugin's own
(``[tool.importlinter]`` in ``plugins/<name>/pyproject.toml``); this test also fails on
any import cycle, function-local imports included, contracts or not, in one graph of
the core and all the plugins (so a circle through the core is seen too).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import skip_or_fail_in_ci

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")

ROOT = Path(__file__).resolve().parents[1]
#: Every plugin of the repository: (its directory, its import package), read from the disk, not listed by hand.
PLUGINS = sorted((d, pkg.name) for d in (ROOT / "plugins").iterdir() if (d / "pyproject.toml").is_file()
                 for pkg in d.iterdir() if (pkg / "__init__.py").is_file() and pkg.name != "tests")


def _plugin_packages() -> list[str]:
    """The plugins' import packages; each must be installed (scripts/test.sh installs all, editable)."""
    missing = [pkg for _, pkg in PLUGINS if importlib.util.find_spec(pkg) is None]
    if missing:
        skip_or_fail_in_ci(f"plugins not installed, so their imports cannot be checked: {missing} "
                           "(pip install -e plugins/<name>)",
                           f"every plugin is installed in CI (scripts/test.sh) but {missing} is not importable")
    return [pkg for _, pkg in PLUGINS]


def _graph():  # type: ignore[no-untyped-def]
    return grimp.build_graph("ezpz", *_plugin_packages(), exclude_type_checking_imports=True)


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


def test_the_graph_holds_every_plugin_and_its_modules():
    """The walk covers plugins/: each plugin package found on disk, with its modules, is in the graph."""
    assert {pkg for _, pkg in PLUGINS} >= {"ezpz_cuda", "ezpz_rocm", "ezpz_xpu", "ezpz_tpu"}
    graph = _graph()
    for directory, pkg in PLUGINS:
        on_disk = {f"{pkg}.{f.stem}" for f in (directory / pkg).glob("*.py") if f.stem != "__init__"}
        assert on_disk and on_disk <= graph.modules, (pkg, on_disk - graph.modules)


def test_no_import_cycles_beneath_the_facade():
    """Every module below the root facade (which imports ezpz.hooks to discover plugins) is acyclic, the plugins'
    modules too (issue 44: each vendor plugin's policy imported its gate back from the entry module)."""
    graph = _graph()
    for edge in (("ezpz", "ezpz.hooks"), ("ezpz", "ezpz.original.migration")):  # the facade's documented edges
        graph.remove_import(importer=edge[0], imported=edge[1])
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    """The check above can fail: a graph with a planted cycle is reported."""
    graph = _graph()
    graph.add_import(importer="ezpz.facts", imported="ezpz.runtime")
    assert any("ezpz.facts" in c and "ezpz.runtime" in c for c in _cycles(graph))
    graph.add_import(importer="ezpz_cuda.gate", imported="ezpz_cuda.plugin")  # a plugin's own circle
    assert any("ezpz_cuda.gate" in c and "ezpz_cuda.plugin" in c for c in _cycles(graph))


@pytest.mark.parametrize("config", ["pyproject.toml", *(f"plugins/{d.name}/pyproject.toml" for d, _ in PLUGINS)])
def test_import_contracts_hold(config):
    """The core's contracts, and each plugin's own (every plugin has some: an acyclic and a layers contract)."""
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint is None:
        pytest.skip("lint-imports is not installed (pip install import-linter; scripts/test.sh does)")
    if config != "pyproject.toml":
        _plugin_packages()
        text = (ROOT / config).read_text()
        assert "[tool.importlinter]" in text and 'type = "acyclic_siblings"' in text and 'type = "layers"' in text
    done = subprocess.run([lint, "--no-cache", "--config", config], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
