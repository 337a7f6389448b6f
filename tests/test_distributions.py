"""The six distributions: versions that cannot be confused with PyPI's unrelated ``ezpz``, core ranges, doctor."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import ezpz
from conftest import ROOT, clean_env
from ezpz.cli.versions import core_requirement, distribution_rows, version_problems
from test_cli_support import ezpz as run_ezpz
from test_cli_support import with_pythonpath

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

#: The unrelated project that owns the name ``ezpz`` on PyPI ("Easy pan-zoom crop-resizing"): releases 0.1.0-0.1.2.
UNRELATED = [Version("0.1.0"), Version("0.1.1"), Version("0.1.2")]
PLUGINS = ["ezpz-cuda", "ezpz-rocm", "ezpz-xpu", "ezpz-example-hpu", "ezpz-example-emu"]


def _project(path: Path) -> dict:
    return tomllib.loads(path.read_text())["project"]


def test_core_version_is_above_the_unrelated_package_and_matches_the_module():
    core = _project(ROOT / "pyproject.toml")
    assert core["name"] == "ezpz" and core["version"] == ezpz.__version__
    assert Version(core["version"]) > max(UNRELATED)


@pytest.mark.parametrize("dist", PLUGINS)
def test_each_plugin_requires_a_core_range_the_unrelated_package_cannot_satisfy(dist):
    core = Version(_project(ROOT / "pyproject.toml")["version"])
    plugin = _project(ROOT / "plugins" / dist / "pyproject.toml")
    assert plugin["name"] == dist and Version(plugin["version"]) > max(UNRELATED)
    req = core_requirement(plugin["dependencies"])
    assert req is not None, f"{dist} must depend on ezpz"
    assert req.specifier.contains(core), f"{dist} requires ezpz{req.specifier}, core is {core}"
    assert not any(req.specifier.contains(v) for v in UNRELATED)
    assert not req.specifier.contains(Version(f"{core.major + 1}.0")), "upper bound: the next major may break hooks"


@pytest.mark.parametrize("dist", PLUGINS)
def test_a_plugin_module_version_equals_its_distribution_version(dist):
    version = _project(ROOT / "plugins" / dist / "pyproject.toml")["version"]
    init = ROOT / "plugins" / dist / dist.replace("-", "_") / "__init__.py"
    found = re.search(r'^__version__ = "([^"]+)"', init.read_text(), re.M)
    assert found is None or found[1] == version, f"{init}: __version__ {found[1]} != pyproject's {version}"


def test_core_extras_pin_the_plugins_to_this_release_line():
    extras = _project(ROOT / "pyproject.toml")["optional-dependencies"]
    for extra in ("cuda", "rocm", "xpu"):
        (line,) = extras[extra]
        req = Requirement(line)
        assert req.name == f"ezpz-{extra}" and not any(req.specifier.contains(v) for v in UNRELATED)


def test_core_requirement_ignores_extras_and_other_packages():
    lines = ["torch>=2.4", 'ezpz>=9; extra == "test"', "ezpz<2,>=1.0", "not a requirement !!"]
    assert str(core_requirement(lines).specifier) == "<2,>=1.0"
    assert core_requirement(["torch"]) is None
    assert str(core_requirement(["EZPZ"]).specifier) == ""


def test_version_problems_name_the_plugin_its_range_and_the_fix():
    dists = {"core": {"distribution": "ezpz", "version": "1.0.0"},
             "plugins": [{"distribution": "ezpz-acme", "version": "3.1", "requires_core": "<3,>=2", "compatible": False},
                         {"distribution": "ezpz-ok", "version": "1.0", "requires_core": "<2,>=1", "compatible": True}]}
    (problem,) = version_problems(dists)
    assert "ezpz-acme 3.1 requires ezpz<3,>=2" in problem["what"] and "ezpz 1.0.0 is installed" in problem["what"]
    assert "pip install -U ezpz-acme" in problem["fix"]


def test_installed_plugins_fit_the_installed_core():
    rows = distribution_rows([{"distribution": d} for d in ["ezpz", *PLUGINS]])
    installed = {r["distribution"] for r in rows["plugins"]}
    assert installed, "no plugin distribution installed"
    assert all(r["compatible"] for r in rows["plugins"]), rows


def test_doctor_flags_a_really_installed_plugin_built_for_another_core(tmp_path):
    """A plugin distribution requiring ezpz 2.x, pip-installed for real (its own dist-info and entry point)."""
    src = tmp_path / "ezpz-future"
    (src / "ezpz_future").mkdir(parents=True)
    (src / "ezpz_future" / "__init__.py").write_text('"""A plugin made for a future core."""\n')
    (src / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "ezpz-future"
        version = "2.0.0"
        dependencies = ["ezpz>=2,<3"]

        [project.entry-points.ezpz]
        future = "ezpz_future"
        """))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(src)], check=True, capture_output=True, text=True, timeout=300)
    env = with_pythonpath(clean_env(), site)
    proc = run_ezpz("doctor", "--json", env=env)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and not report["ok"]
    row = next(r for r in report["distributions"]["plugins"] if r["distribution"] == "ezpz-future")
    assert row == {"distribution": "ezpz-future", "version": "2.0.0", "requires_core": "<3,>=2", "compatible": False}
    (problem,) = [p for p in report["problems"] if "ezpz-future" in p["what"]]
    assert f"ezpz {report['distributions']['core']['version']} is installed" in problem["what"]
    text = run_ezpz("doctor", env=env).stdout
    assert "ezpz-future 2.0.0  requires ezpz<3,>=2: EXCLUDES the installed core" in text


OURS = {"ezpz", "ezpz-cuda", "ezpz-rocm", "ezpz-xpu", "ezpz-example-hpu", "ezpz-example-emu"}
_TAKES_VALUE = {"-c", "-e", "-r", "-t", "--target", "--constraint", "--requirement", "--editable", "--index-url",
                "--extra-index-url", "-i"}


def _requirements(command: str) -> list[str]:
    """The requirement arguments of one ``pip install ...`` command (options and their values dropped)."""
    words, out, skip = command.split()[2:], [], False
    for word in words:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = word in _TAKES_VALUE
        else:
            out.append(word.strip("'\""))
    return out


def _install_commands(path: Path):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for cmd in re.findall(r"pip install[^`#\n;&)]*", line):
            yield n, cmd.strip()


def test_no_doc_installs_our_packages_from_an_index_that_does_not_have_them():
    """Until publication, every install of these distributions needs --find-links (or an editable path)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted(ROOT.glob("plugins/*/README.md"))]
    bad = []
    for page in pages:
        for n, cmd in _install_commands(page):
            if re.search(r"""-e\s+["']?\.\[(cuda|rocm|xpu)""", cmd):  # -e ".[xpu]": the extra's plugin is on no index
                bad.append(f"{page.relative_to(ROOT)}:{n}: {cmd}")
                continue
            names = {re.split(r"[\[<>=!~;]", r, maxsplit=1)[0].lower() for r in _requirements(cmd)}
            if names & OURS and "--find-links" not in cmd:
                bad.append(f"{page.relative_to(ROOT)}:{n}: {cmd}")
    assert not bad, "install lines that fetch an unrelated 'ezpz' or nothing at all:\n" + "\n".join(bad)


def test_the_install_line_checker_catches_the_broken_forms():
    assert _requirements('pip install -c constraints.txt -e . "ezpz[xpu]" ezpz-cuda>=1') == ["ezpz[xpu]", "ezpz-cuda>=1"]
    assert _requirements("pip install -e plugins/ezpz-xpu --no-build-isolation") == []
