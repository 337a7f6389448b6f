"""Shared fixtures for the core tests."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_PLUGINS = sorted((ROOT / "tests" / "plugins").glob("ezpz-test-*"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

#: Variables a launcher or a user may have set that would change what a child process decides.
_LEAKY_PREFIXES = ("EZPZ_", "OMPI_", "PMI_", "PMIX_", "PALS_", "SLURM_", "TORCHELASTIC_", "MPI_LOCAL", "PBS_")
_LEAKY_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                "TORCH_DEVICE", "TORCH_BACKEND", "HOSTFILE")


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without launcher/ezpz variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith(_LEAKY_PREFIXES) or k in _LEAKY_NAMES)}
    env.update(extra)
    return env


#: The docs toolchain (mkdocs.yml): module -> the pinned distribution that provides it (as in scripts/test.sh).
DOCS_TOOLS = {"mkdocs": "mkdocs==1.6.1", "material": "mkdocs-material==9.8.1", "mkdocstrings": "mkdocstrings[python]==1.0.8",
              "mkdocstrings_handlers.python": "mkdocstrings-python==2.0.11"}


def need_docs_toolchain() -> None:
    """Skip (fail in CI) unless the docs toolchain of mkdocs.yml is importable."""
    missing = [dist for module, dist in DOCS_TOOLS.items() if importlib.util.find_spec(module.split(".")[0]) is None
               or importlib.util.find_spec(module) is None]
    if missing:
        if IN_CI:
            pytest.fail(f"the docs toolchain is required in CI (scripts/test.sh installs it) but {missing} is missing")
        pytest.skip(f"docs toolchain not installed: pip install {' '.join(repr(m) for m in missing)}")


def need_tool(name: str) -> str:
    """Path of a launcher; skipped locally when missing, a failure in CI (a skipped launcher test hides a bug)."""
    path = shutil.which(name)
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI (.ci/run installs it) but is not on PATH")
        pytest.skip(f"{name} not installed (apt-get install openmpi-bin)")
    return path


@pytest.fixture(scope="session")
def test_plugins_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test plugin packages, really pip-installed (own dist-info, real entry points) into a private dir.

    They are kept off the main environment so broken ones cannot disturb other suites;
    subprocesses see them through PYTHONPATH.
    """
    target = tmp_path_factory.mktemp("ezpz-test-plugins")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target),
         *map(str, TEST_PLUGINS)],
        check=True, capture_output=True, text=True,
    )
    return target


def run_python(code: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


def rank_rows(stdout: str) -> list[dict]:
    """Flat JSON objects printed by each rank, sorted by rank.

    A launcher may merge several ranks' lines into one (seen with torchrun and
    Open MPI on a busy machine), so objects are found anywhere in the text.
    """
    rows = [json.loads(m) for m in re.findall(r"\{[^{}]*\}", stdout)]
    return sorted(rows, key=lambda r: r["rank"])


def last_json(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line in output:\n{stdout}")


@pytest.fixture
def recorded_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Make the CPU plugin see a recorded machine (``tests/cpu_recorded.py``) instead of this host.

    ``recorded_cpu("sapphire-rapids-8470")`` returns the record; the real probe parses its cpuinfo text.
    """
    from cpu_recorded import BY_NAME

    import ezpz.builtin.cpu as cpu

    real_probe = cpu.probe_cpu

    def use(name: str):
        record = BY_NAME[name]
        path = str(record.write(tmp_path))
        monkeypatch.setattr(cpu, "probe_cpu", lambda *a, **k: real_probe(path, machine=record.machine))
        return record

    return use


@pytest.fixture(autouse=True)
def _fresh_runtime():
    """Each test starts and ends without a live runtime or process group."""
    import ezpz

    ezpz.hooks.teardown()
    yield
    ezpz.hooks.teardown()
