"""docs/writing-a-plugin.md is a complete walk-through: its code blocks, copied in order, make a working plugin.

The test does what a reader would: every code block marked ``<!-- file: PATH -->`` is appended to PATH in a
fresh directory, the result is really pip-installed (``--target``, its own dist-info and entry point), its tests
(the tutorial's own test file, which runs ``ezpz.testing``'s conformance kit) and ``ezpz doctor`` run against
the installed copy. The files must also equal ``plugins/ezpz-example-hpu``'s, so the tutorial and the example
package cannot drift apart.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env

DOC = ROOT / "docs" / "writing-a-plugin.md"
EXAMPLE = ROOT / "plugins" / "ezpz-example-hpu"
_FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.S | re.M)
_MARK = re.compile(r"<!-- file: (?P<path>[\w./-]+) -->\n$")


def tutorial_files() -> dict[str, str]:
    """PATH -> the text of every block marked for it, in the order they appear."""
    text = DOC.read_text()
    files: dict[str, list[str]] = {}
    for fence in _FENCE.finditer(text):
        mark = _MARK.search(text, 0, fence.start())
        if mark and mark.end() == fence.start():
            files.setdefault(mark["path"], []).append(fence["body"].strip("\n"))
        elif fence["lang"] in ("python", "toml"):
            raise AssertionError(f"a {fence['lang']} block without <!-- file: PATH --> in {DOC.name}:\n{fence['body']}")
    return {path: "\n\n\n".join(parts) + "\n" for path, parts in files.items()}


def _normalised(text: str) -> str:
    return re.sub(r"\n{2,}", "\n\n", text.strip()) + "\n"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """(work dir, --target site dir, environment) with the tutorial's package really installed."""
    work = tmp_path_factory.mktemp("tutorial")
    pkg = work / "ezpz-example-hpu"
    for path, text in tutorial_files().items():
        (pkg / path).parent.mkdir(parents=True, exist_ok=True)
        (pkg / path).write_text(text)
    (pkg / "README.md").write_text("# ezpz-example-hpu\n\nThe plugin built in ezpz's writing-a-plugin tutorial.\n")
    site = work / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--target", str(site), str(pkg)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return work, site, clean_env(PYTHONPATH=str(site))


def _run(work: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    # cwd is the work dir, which holds no importable package: only the installed copy can be imported.
    return subprocess.run([sys.executable, *argv], cwd=work, env=env, capture_output=True, text=True, timeout=300)


def test_every_file_of_the_package_is_in_the_tutorial():
    files = tutorial_files()
    assert set(files) == {"pyproject.toml", "ezpz_example_hpu/__init__.py", "ezpz_example_hpu/core.py",
                          "ezpz_example_hpu/plugin.py", "tests/test_tutorial.py"}
    elided = [ln for text in files.values() for ln in text.splitlines() if ln.strip() in ("...", "# ...")]
    assert not elided, "an elided snippet in the tutorial"


@pytest.mark.parametrize("path", ["pyproject.toml", "ezpz_example_hpu/__init__.py", "ezpz_example_hpu/core.py",
                                  "ezpz_example_hpu/plugin.py"])
def test_tutorial_files_equal_the_example_package(path):
    doc, repo = _normalised(tutorial_files()[path]), _normalised((EXAMPLE / path).read_text())
    assert doc == repo, f"docs/writing-a-plugin.md's {path} differs from plugins/ezpz-example-hpu/{path}: update the doc"


def test_the_installed_tutorial_package_is_the_one_imported(installed):
    work, site, env = installed
    proc = _run(work, env, "-c", "import ezpz, ezpz_example_hpu; r = ezpz.hooks.get_plugin_host().records"
                                 "['example-hpu']; print(ezpz_example_hpu.__file__, r.status, r.distribution)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(str(site)) and "loaded ('ezpz-example-hpu', '1.0.0')" in proc.stdout


def test_the_tutorials_tests_pass_on_the_installed_package(installed):
    """The tutorial's test file: the conformance kit (which calls ezpz_before_init) and a planned decision."""
    work, _, env = installed
    proc = _run(work, env, "-m", "pytest", "ezpz-example-hpu/tests", "-q", "-p", "no:cacheprovider")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed" in proc.stdout


def test_the_conformance_report_matches_the_tutorial(installed):
    sys.path.insert(0, str(ROOT / "scripts"))
    from doc_samples import shape

    work, _, env = installed
    proc = _run(work, env, "-c", "from ezpz.testing import check_plugin; print(check_plugin('example-hpu', environ={}))")
    assert proc.returncode == 0, proc.stderr
    doc = next(b for b in re.findall(r"```text\n(.*?)```", DOC.read_text(), re.S) if b.startswith("plugin 'example-hpu'"))
    assert shape(doc) == shape(proc.stdout), f"update the conformance report in {DOC.name}:\n{proc.stdout}"


def test_ezpz_doctor_on_the_installed_package(installed):
    work, _, env = installed
    proc = _run(work, env, "-m", "ezpz", "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ezpz-example-hpu 1.0.0  requires ezpz<2,>=1.0: ok" in proc.stdout
    assert "not hpu [example-hpu]: habana: habana_frameworks not installed" in proc.stdout
    simulated = _run(work, {**env, "EZPZ_EXAMPLE_HPU_SIMULATE": "2"}, "-m", "ezpz", "doctor")
    assert simulated.returncode == 0, simulated.stdout
    assert "device: hpu:0" in simulated.stdout and "backend: gloo" in simulated.stdout
