"""Shared fixtures for the core tests."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_PLUGINS = sorted((ROOT / "tests" / "plugins").glob("ezpz-test-*"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

#: Variables a launcher or a user may have set that would change what a child process decides.
_LEAKY_PREFIXES = ("EZPZ_", "OMPI_", "PMI_", "PMIX_", "PALS_", "SLURM_", "TORCHELASTIC_", "MPI_LOCAL", "PBS_")
_LEAKY_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                "TORCH_DEVICE", "TORCH_BACKEND", "HOSTFILE")


# -- the CPU pin: tests that are not about device choice run on the CPU on purpose -------------------------
#
# On a host with an accelerator (or with the one-GPU stand-in of tests/plugins/one-gpu-standin installed, as
# scripts/standin-suite.sh does), its plugin outranks the cpu: setup() and plan() would pick it, and a test
# starting 2-4 local ranks would put them on one device, which ezpz rightly refuses. So one pin, EZPZ_DEVICE=cpu,
# reaches everything a test runs: this process's environment (setup(), plan() without environ), every
# environment clean_env() builds (subprocesses, torchrun and mpiexec ranks inherit it), and plan(environ=...)
# calls made in-process with an environment of the test's own. A test that names a device variable itself keeps
# its own. Tests about device choice are marked ``device_choice``: no pin anywhere, and they feed recorded facts.

#: The variable the pin sets, and every variable that names a device (a test naming one keeps its own).
CPU_PIN = ("EZPZ_DEVICE", "cpu")
_DEVICE_VARS = ("EZPZ_DEVICE", "TORCH_DEVICE")


def pinned(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` plus the CPU pin, unless the pin is off for this test or ``environ`` names a device itself."""
    env = dict(environ)
    name, value = CPU_PIN
    if os.environ.get(name) == value and not any(v in env for v in _DEVICE_VARS):
        env[name] = value
    return env


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without launcher/ezpz variables, plus ``extra``, plus the CPU pin.

    A ``PYTHONPATH`` in ``extra`` goes before the inherited one (packages installed through PYTHONPATH stay
    importable in the child).
    """
    env = {k: v for k, v in os.environ.items() if not (k.startswith(_LEAKY_PREFIXES) or k in _LEAKY_NAMES)}
    if "PYTHONPATH" in extra and env.get("PYTHONPATH"):
        extra = {**extra, "PYTHONPATH": os.pathsep.join([extra["PYTHONPATH"], env["PYTHONPATH"]])}
    env.update(extra)
    return pinned(env)


def unset_env(monkeypatch: pytest.MonkeyPatch, names: Iterable[str]) -> None:
    """Remove ``names`` from ``os.environ`` for this test, except the CPU pin (see above) where it is on."""
    name, value = CPU_PIN
    for key in names:
        if not (key == name and os.environ.get(key) == value):
            monkeypatch.delenv(key, raising=False)


def unset_launch_env(monkeypatch: pytest.MonkeyPatch, *more: str) -> None:
    """Remove every launcher/ezpz variable :func:`clean_env` leaves out (and ``more``) from ``os.environ``, pin kept."""
    unset_env(monkeypatch, [k for k in os.environ if k.startswith(_LEAKY_PREFIXES) or k in _LEAKY_NAMES or k in more])


@pytest.fixture
def builtin_plugins_only() -> Iterator[None]:
    """In this process, setup() and plan() see only ezpz's built-in plugins: a host whose one device is its CPU.

    For ``device_choice`` tests that need a host without an accelerator: whatever this machine has or has
    installed (a GPU and its plugin, the one-GPU stand-in), the choice rests on the cpu plugin's facts.
    """
    import ezpz.hooks
    from ezpz.inputs.settings import PluginSettings
    from ezpz.plugin_host.host import PluginHost

    host = PluginHost(PluginSettings(allow=frozenset()))  # an empty allow-list: the built-ins only
    host.discover()
    with ezpz.hooks.using_plugin_host(host):
        try:
            yield
        finally:
            ezpz.hooks.teardown()  # the block is left with no live runtime


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "device_choice: about which device ezpz picks: runs without the CPU pin and feeds recorded facts")
    name, value = CPU_PIN
    os.environ[name] = value  # before any test: this process and every child it starts
    import host_touch

    host_touch.register(config)  # which tests can depend on the host (scripts/standin-suite.sh), when asked


@pytest.fixture(autouse=True)
def _cpu_pin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CPU pin for this test (see above), or none for a ``device_choice`` test."""
    if request.node.get_closest_marker("device_choice") is not None:
        for name in _DEVICE_VARS:
            monkeypatch.delenv(name, raising=False)
        yield
        return
    import ezpz.hooks

    real_plan = ezpz.hooks.plan

    @functools.wraps(real_plan)
    def plan_on_the_cpu(*, environ: Mapping[str, str] | None = None, device: str | None = None, **kw):  # type: ignore[no-untyped-def]
        if environ is not None and device is None:
            environ = pinned(environ)
        return real_plan(environ=environ, device=device, **kw)

    monkeypatch.setattr(ezpz.hooks, "plan", plan_on_the_cpu)
    yield


#: The docs toolchain (mkdocs.yml): module -> the pinned distribution that provides it (as in scripts/test.sh).
DOCS_TOOLS = {"mkdocs": "mkdocs==1.6.1", "material": "mkdocs-material==9.8.1", "mkdocstrings": "mkdocstrings[python]==1.0.8",
              "mkdocstrings_handlers.python": "mkdocstrings-python==2.0.11"}


def skip_or_fail_in_ci(skip_reason: str, ci_reason: str) -> NoReturn:
    """Skip the test saying ``skip_reason``; under CI fail it saying ``ci_reason`` instead.

    CI installs every tool, package and service the suite needs (.ci/run, scripts/test.sh), so a skip there
    would hide a broken install.
    """
    if IN_CI:
        pytest.fail(ci_reason)
    pytest.skip(skip_reason)


def need_docs_toolchain() -> None:
    """Skip (fail in CI) unless the docs toolchain of mkdocs.yml is importable."""
    missing = [dist for module, dist in DOCS_TOOLS.items() if importlib.util.find_spec(module.split(".")[0]) is None
               or importlib.util.find_spec(module) is None]
    if missing:
        skip_or_fail_in_ci(f"docs toolchain not installed: pip install {' '.join(repr(m) for m in missing)}",
                           f"the docs toolchain is required in CI (scripts/test.sh installs it) but {missing} is missing")


def need_tool(name: str) -> str:
    """Path of a launcher; skipped locally when missing or unusable, a failure in CI (a skip there hides a bug).

    An ``mpiexec`` must also start one process here (:func:`mpiexec_unusable`): on a host without an ssh/rsh
    agent, Open MPI's is on PATH but exits 243 before starting anything.
    """
    path = shutil.which(name)
    if path is None:
        skip_or_fail_in_ci(f"{name} not installed (apt-get install openmpi-bin)",
                           f"{name} is required in CI (.ci/run installs it) but is not on PATH")
    if os.path.basename(name).startswith("mpiexec"):
        why = mpiexec_unusable(os.path.realpath(path))
        if why is not None:
            skip_or_fail_in_ci(f"{name} is on PATH ({path}) but cannot run here: {why}",
                               f"{name} is required to run in CI but cannot: {why}")
    return path


def _exit_said(returncode: int) -> str:
    """``exited 3``, ``killed by signal 13 (SIGPIPE)``, or a shell's ``exited 141 (128 + 13: SIGPIPE)``."""
    def name(number: int) -> str:
        try:
            return signal.Signals(number).name
        except ValueError:
            return "unknown signal"

    if returncode < 0:
        return f"killed by signal {-returncode} ({name(-returncode)})"
    if 128 < returncode < 128 + 65:
        return f"exited {returncode} (128 + {returncode - 128}: {name(returncode - 128)}, as a shell reports it)"
    return f"exited {returncode}"


def _output_said(stdout: str | bytes | None, stderr: str | bytes | None) -> str:
    text = "".join(t.decode(errors="replace") if isinstance(t, bytes) else t for t in (stderr, stdout) if t)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().strip("-")]
    if len(lines) > 4:  # the first lines say what failed, the last ones often why (pip's ERROR line)
        lines = [*lines[:2], "...", *lines[-2:]]
    return " / ".join(lines)[:400] if lines else "no output"


def probe_tool(cmd: list[str], *, timeout: float, env: Mapping[str, str] | None = None, tries: int = 2,
               judge: Callable[[subprocess.CompletedProcess[str]], str | None] | None = None) -> str | None:
    """Run a tool probe; None when it works, else what every try saw (exit code or signal, and its output).

    A probe that fails is tried again (``tries`` in all): one transient failure on a loaded machine (an
    ``mpiexec.hydra -n 1 true`` once died of SIGPIPE with no output) must neither hide a launcher for a whole
    test worker nor fail CI. stdin is closed, output captured and kept for the reason. A tool that cannot start
    at all (OSError) is not tried again. A try that failed before one that worked is reported as a warning.
    ``judge``, given a run that exited 0, says why its output still means "unusable" (or None).
    """
    said, seen = " ".join(cmd), []
    for attempt in range(1, tries + 1):
        try:
            done = subprocess.run(cmd, env=None if env is None else dict(env), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as err:
            seen.append(f"try {attempt}: did not finish within {timeout:g} s ({_output_said(err.stdout, err.stderr)})")
            continue
        except OSError as err:
            return f"`{said}` could not start: {err}"
        verdict = judge(done) if judge is not None and done.returncode == 0 else None
        if done.returncode == 0 and verdict is None:
            if seen:
                warnings.warn(f"`{said}` failed, then worked on try {attempt}: {'; '.join(seen)}", stacklevel=2)
            return None
        seen.append(f"try {attempt}: {verdict or _exit_said(done.returncode)}: {_output_said(done.stdout, done.stderr)}")
    return f"`{said}` failed {tries} times: {'; '.join(seen)}"


@functools.lru_cache(maxsize=None)
def mpiexec_unusable(path: str) -> str | None:
    """Why ``<path> -n 1 true`` fails here (each try's exit and output), or None when it works; run once per
    launcher and test process, tried again once when it fails (:func:`probe_tool`)."""
    from ezpz.probes.launcher_tools import mpi_flavor

    openmpi = mpi_flavor(path) == "openmpi"
    cmd = [path, *(["--allow-run-as-root", "--oversubscribe"] if openmpi else []), "-n", "1", "true"]
    return probe_tool(cmd, timeout=60, env=clean_env())


@functools.lru_cache(maxsize=None)
def package_index_unreachable() -> str | None:
    """Why pip cannot resolve from its package index here (an offline GPU host, say), or None when it can."""
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps", "--ignore-installed",
           "--retries", "0", "--timeout", "15", "setuptools"]
    return probe_tool(cmd, timeout=120)


def need_package_index() -> None:
    """Skip (fail in CI) unless pip reaches its package index: tests that install as a user would need it."""
    why = package_index_unreachable()
    if why is not None:
        skip_or_fail_in_ci(f"no package index reachable: {why}",
                           f"the package index is required in CI but pip cannot reach it: {why}")


def pip_install_target(target: Path, *projects: Path | str, upgrade: bool = False, timeout: float = 300) -> None:
    """``pip install --target target`` of local ``projects``, each built from a private copy.

    pip builds a local project in its own tree (``build/``, ``*.egg-info``): two pytest-xdist workers building
    the same tree at once would race, so each build gets a copy of its own, beside ``target``.
    """
    copies = []
    for project in map(Path, projects):
        copy = Path(tempfile.mkdtemp(prefix="src-", dir=target.parent)) / project.name
        shutil.copytree(project, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        copies.append(str(copy))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    *(["--upgrade"] if upgrade else []), "--target", str(target), *copies],
                   check=True, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def test_plugins_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test plugin packages, really pip-installed (own dist-info, real entry points) into a private dir.

    They are kept off the main environment so broken ones cannot disturb other suites;
    subprocesses see them through PYTHONPATH.
    """
    target = tmp_path_factory.mktemp("ezpz-test-plugins")
    pip_install_target(target, *TEST_PLUGINS)
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
