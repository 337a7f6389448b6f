"""Plugins that exit, leak BaseExceptions or never return: really pip-installed, run as a user would.

A third-party plugin is code ezpz does not control. Whatever it raises short of
Ctrl-C is a quarantine; a hook that never returns meets a deadline
(``EZPZ_HOOK_TIMEOUT``). Neither ``setup()`` nor ``ezpz doctor`` may die or hang on it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, last_json, pip_install_target, run_python
from test_cli_support import ezpz

pytestmark = pytest.mark.one_torch  # the plugin host's quarantine of hostile plugins: runs on the pinned torch only (docs/ci.md)

HOSTILE = sorted((ROOT / "tests" / "hostile_plugins").glob("ezpz-test-*"))

SETUP = """
import json, ezpz
host = ezpz.hooks.get_plugin_host()
out = {}
try:
    rt = ezpz.hooks.setup()
    out["device"] = str(rt.device); out["backend"] = rt.backend
except Exception as err:
    out["setup_error"] = f"{type(err).__name__}: {err}"
out["records"] = {n: {"status": r.status, "stage": r.stage, "error": r.error} for n, r in host.records.items()}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hostile plugin packages, pip-installed into a private dir (never into the shared environment)."""
    target = tmp_path_factory.mktemp("ezpz-hostile-plugins")
    pip_install_target(target, *HOSTILE)
    return target


def _env(hostile_dir: Path, plugins: str, **extra: str) -> dict[str, str]:
    return clean_env(PYTHONPATH=str(hostile_dir), EZPZ_PLUGINS=plugins, **extra)


def _setup(hostile_dir: Path, plugins: str, **extra: str) -> tuple[dict, str]:
    proc = run_python(SETUP, _env(hostile_dir, plugins, **extra))
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    return last_json(proc.stdout), proc.stderr


@pytest.mark.parametrize(("plugin", "stage", "error"), [
    ("test-exits", "hook ezpz_probe_devices", "SystemExit: 3"),
    ("test-exits-at-import", "import", "SystemExit: 4"),
    ("test-generator-exit", "hook ezpz_select_backend", "GeneratorExit: leaked from a closed generator"),
])
def test_a_plugin_that_exits_is_quarantined_and_setup_returns_the_cpu_runtime(hostile_dir, plugin, stage, error):
    data, stderr = _setup(hostile_dir, plugin)
    assert "setup_error" not in data and data["device"] == "cpu" and data["backend"] == "gloo"
    rec = data["records"][plugin]
    assert rec["status"] == "failed" and rec["stage"] == stage and rec["error"].startswith(error), rec
    (warning,) = [ln for ln in stderr.splitlines() if f"plugin={plugin} " in ln]
    assert f"EZPZ_DISABLE_PLUGINS={plugin}" in warning


def test_doctor_survives_a_plugin_that_exits_and_names_it(hostile_dir):
    env = _env(hostile_dir, "test-exits,test-exits-at-import")
    proc = ezpz("doctor", "--json", env=env)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert any(d["topic"] == "device" and d["chosen"] == "cpu" for d in report["decisions"])
    for name, version in [("test-exits", "0.1.1"), ("test-exits-at-import", "0.1.2")]:
        (problem,) = [p for p in report["problems"] if f"'{name}'" in p["what"]]
        assert f"ezpz-{name} {version}" in problem["what"] and "SystemExit" in problem["what"]
        assert f"EZPZ_DISABLE_PLUGINS={name}" in problem["fix"]
    text = ezpz("doctor", env=env)
    assert text.returncode == 1 and "test-exits" in text.stdout and "SystemExit: 3" in text.stdout


def test_ctrl_c_from_a_hook_still_propagates(tmp_path):
    """KeyboardInterrupt is the user's, not the plugin's: it is never swallowed."""
    code = (
        "import ezpz\n"
        "class P:\n"
        "    @ezpz.hookimpl(tryfirst=True)\n"
        "    def ezpz_probe_devices(self, build, environ):\n"
        "        raise KeyboardInterrupt\n"
        "ezpz.hooks.get_plugin_host().register('ctrl-c', P())\n"
        "try:\n"
        "    ezpz.hooks.setup()\n"
        "except KeyboardInterrupt:\n"
        "    print('propagated')\n"
    )
    proc = run_python(code, clean_env())
    assert proc.stdout.strip() == "propagated", proc.stderr


def test_a_hook_that_never_returns_makes_setup_raise_naming_plugin_and_hook(hostile_dir):
    """Must show: EZPZ_HOOK_TIMEOUT=5, a probe sleeping forever: setup() raises within 20 s, naming it."""
    code = ("import time, torch\nstarted = time.monotonic()\n" + SETUP
            + "print(json.dumps({'setup_s': time.monotonic() - started}))\n"
            + "ezpz.hooks.teardown(); rt = ezpz.hooks.setup(); print(json.dumps({'again': str(rt.device)}))\n")
    proc = run_python(code, _env(hostile_dir, "test-hangs", EZPZ_HOOK_TIMEOUT="5"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    error = lines[0]["setup_error"]
    assert 5 <= lines[1]["setup_s"] < 20, lines[1]  # the deadline, not the machine's load, decides
    assert error.startswith("PluginTimeoutError: plugin 'test-hangs' (ezpz-test-hangs 0.1.4) did not return from "
                            "ezpz_probe_devices within 5s"), error
    assert "ezpz_test_hangs/__init__.py" in error and "threading.Event().wait()" in error  # the stuck stack
    assert "EZPZ_DISABLE_PLUGINS=test-hangs" in error
    assert lines[0]["records"]["test-hangs"]["status"] == "failed"
    # the process stays usable: the stuck plugin is quarantined, a second setup() answers with the CPU
    assert lines[2] == {"again": "cpu"}
    # the early warning, at a quarter of the deadline, named the plugin
    (slow,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("hook_slow")]
    assert "plugin=test-hangs" in slow and "hook=ezpz_probe_devices" in slow and "deadline_s=5.0" in slow


def test_doctor_ends_names_the_stuck_plugin_and_goes_on_with_the_others(hostile_dir):
    proc = ezpz("doctor", "--json", env=_env(hostile_dir, "test-hangs,test-exits", EZPZ_HOOK_TIMEOUT="2"), timeout=120)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    (stuck,) = [p for p in report["problems"] if "'test-hangs'" in p["what"]]
    assert "PluginTimeoutError" in stuck["what"] and "ezpz_probe_devices within 2s" in stuck["what"]
    assert "EZPZ_DISABLE_PLUGINS=test-hangs" in stuck["fix"]
    assert any("'test-exits'" in p["what"] for p in report["problems"])  # the other culprit is reported too
    assert report["error"] is None  # and the plan was made without them
    assert any(d["topic"] == "device" and d["chosen"] == "cpu" for d in report["decisions"])


def test_a_slow_hook_under_the_deadline_warns_and_answers(hostile_dir):
    data, stderr = _setup(hostile_dir, "test-slow", EZPZ_HOOK_TIMEOUT="2", EZPZ_TEST_SLOW_S="1")
    assert "setup_error" not in data and data["records"]["test-slow"]["status"] == "loaded"
    (slow,) = [ln for ln in stderr.splitlines() if ln.startswith("hook_slow")]
    assert "plugin=test-slow" in slow and "distribution=ezpz-test-slow" in slow


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf", "100000"])
def test_bad_hook_timeout_names_the_variable_and_the_range(value):
    proc = run_python("import ezpz; ezpz.hooks.setup()", clean_env(EZPZ_HOOK_TIMEOUT=value))
    assert proc.returncode == 1
    assert f"EZPZ_HOOK_TIMEOUT={value!r} is not valid: expected a number of seconds from 0.1 to 86400" in proc.stderr
