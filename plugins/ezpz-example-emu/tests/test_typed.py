"""The emu example plugin type-checks (mypy --strict, its own pyproject config) against the installed core's annotations.

The core ships ``py.typed`` (PEP 561); without it mypy reports every ``ezpz`` import as untyped and this fails.
In ``scripts/test.sh``'s wheel stage the core is the installed wheel, so this checks what plugin authors get.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parents[1]


def test_the_installed_core_is_marked_typed() -> None:
    spec = importlib.util.find_spec("ezpz")
    assert spec is not None and spec.origin is not None
    assert (Path(spec.origin).parent / "py.typed").is_file(), f"no py.typed beside {spec.origin}"
    assert (PLUGIN / "ezpz_example_emu" / "py.typed").is_file()


def test_mypy_strict_passes_against_the_installed_core(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: scripts/test.sh installs it with the test tools")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(PLUGIN / "pyproject.toml"), "--cache-dir",
         str(tmp_path / "mypy-cache"), str(PLUGIN / "ezpz_example_emu")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success: no issues found" in out.stdout
