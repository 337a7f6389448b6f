"""``ezpz new-plugin``: the package it writes, from the templates the core ships, for both shapes.

The full vendor path (wheels beside the core's wheel, the kit in live mode, ``mypy --strict``, the package's own
tests, the main job on the emulated device) is scripts/new-plugin-check.sh, which scripts/test.sh runs. Here: the
files, the inputs it refuses, emu's device code being the template rendered for ``emu``, and the kit on each shape
(recorded-facts mode) in a child process with the generated package on its path.
"""

from __future__ import annotations

import importlib.resources
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env
from ezpz.cli import main
from ezpz.cli.new_plugin import render, render_template, template_values

EMU = ROOT / "plugins" / "ezpz-example-emu" / "ezpz_example_emu"
COMMON = {"pyproject.toml", "README.md", "ezpz_nimbus/__init__.py", "ezpz_nimbus/py.typed", "ezpz_nimbus/core.py",
          "ezpz_nimbus/plugin.py", "tests/test_typed.py", "tests/test_plugin.py", "tests/test_live.py"}


@pytest.mark.parametrize("emulated", [False, True])
def test_the_package_has_every_file_and_no_placeholder_left(emulated: bool) -> None:
    files = render(template_values("nimbus", emulated=emulated), emulated=emulated)
    extra = {"ezpz_nimbus/device.py", "ezpz_nimbus/rnn_cells.py", "ezpz_nimbus/collectives.py",
             "tests/test_runs.py"} if emulated else set()
    assert set(files) == COMMON | extra
    for path, text in files.items():
        assert "${" not in text, f"{path}: a placeholder left"
    pyproject = files["pyproject.toml"]
    assert 'nimbus = "ezpz_nimbus.plugin"' in pyproject and '"ezpz>=1.0,<2"' in pyproject
    for path in files:
        if path.endswith(".py"):
            compile(files[path], path, "exec")  # valid Python


def test_the_plugin_implements_every_hook_a_device_plugin_answers() -> None:
    for emulated in (False, True):
        plugin = render(template_values("nimbus", emulated=emulated), emulated=emulated)["ezpz_nimbus/plugin.py"]
        for hook in ("ezpz_probe_devices", "ezpz_select_backend", "ezpz_amp_policy", "ezpz_profiling",
                     "ezpz_compile_policy", "ezpz_before_init", "ezpz_failure_signatures"):
            assert f"def {hook}(" in plugin, (emulated, hook)
        assert "ezpz_step_boundary" in plugin  # said why not: an eager device


@pytest.mark.parametrize("module", ["device.py", "rnn_cells.py", "collectives.py"])
def test_emus_device_code_is_the_template_rendered_for_emu(module: str) -> None:
    values = {"device": "emu", "Device": "Emu", "package": "ezpz_example_emu", "backend": "emuccl"}
    assert render_template(f"emulated/{module}.tmpl", values) == (EMU / module).read_text(), (
        f"plugins/ezpz-example-emu/ezpz_example_emu/{module} and ezpz/cli/plugin_templates/emulated/{module}.tmpl "
        "differ: change the template and render it for emu")


def test_the_templates_are_package_data() -> None:
    root = importlib.resources.files("ezpz.cli").joinpath("plugin_templates")
    assert root.joinpath("emulated", "device.py.tmpl").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"cli/plugin_templates/**/*.tmpl"' in pyproject


@pytest.mark.parametrize(("argv", "named"), [
    (["new-plugin", "Nimbus"], "NAME"),
    (["new-plugin", "nimbus", "--device-type", "Nim-bus"], "--device-type"),
    (["new-plugin", "nimbus", "--emulated", "--extension", "torch_nimbus"], "--extension"),
    (["new-plugin", "nimbus", "--emulated", "--device-type", "cuda"], "--device-type"),
])
def test_bad_input_is_refused_naming_it(argv: list[str], named: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "-o", str(tmp_path / "out")]) == 2
    assert f"error: {named}=" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_existing_directory_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep")
    assert main(["new-plugin", "nimbus", "-o", str(tmp_path / "out")]) == 2
    assert "--output=" in capsys.readouterr().err and (tmp_path / "out" / "mine.txt").read_text() == "keep"


KIT = """
import json, sys
from ezpz.testing import check_plugin
from ezpz_nimbus import plugin
report = check_plugin(plugin, environ={}, isolated_import=False)
print(json.dumps({"passed": report.passed, "text": str(report)}))
"""


@pytest.mark.parametrize("emulated", [False, True])
def test_the_written_package_is_conformant(emulated: bool, tmp_path: Path) -> None:
    out = tmp_path / "ezpz-nimbus"
    assert main(["new-plugin", "nimbus", *(["--emulated"] if emulated else []), "-o", str(out)]) == 0
    proc = subprocess.run([sys.executable, "-c", KIT], env=clean_env(PYTHONPATH=str(out)), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["passed"], got["text"]
    probe = "offers nimbus (priority -10)" if emulated else "rejects nimbus: torch_nimbus not installed"
    assert f"PASS ezpz_probe_devices(inputs): {probe}" in got["text"], got["text"]
    assert "PASS ezpz_compile_policy(foreign device): None" in got["text"]
