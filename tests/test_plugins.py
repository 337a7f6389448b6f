"""Plugin discovery, controls and quarantine, with real pip-installed plugin packages."""

from __future__ import annotations

import pytest

from conftest import clean_env, last_json, run_python

REPORT = """
import json, sys, ezpz
host = ezpz.hooks.get_plugin_host()
out = {}
try:
    rt = ezpz.hooks.setup()
    out["device"] = str(rt.device); out["precision"] = rt.amp.dtype
    out["explain"] = str(rt.explain())
except Exception as err:
    out["setup_error"] = f"{type(err).__name__}: {err}"
out["records"] = {n: {"status": r.status, "stage": r.stage, "error": r.error, "hooks": list(r.hooks),
                      "dist": list(r.distribution)} for n, r in host.records.items()}
out["imported"] = sorted(m for m in sys.modules if m.startswith("ezpz_test_"))
print(json.dumps(out))
"""


def report(plugins_dir, **env):
    proc = run_python(REPORT, clean_env(PYTHONPATH=str(plugins_dir), **env))
    assert proc.returncode == 0, proc.stderr
    return last_json(proc.stdout), proc.stderr


def test_installed_plugins_are_discovered_through_entry_points(test_plugins_dir):
    data, _ = report(test_plugins_dir, EZPZ_PLUGINS="test-good")
    good = data["records"]["test-good"]
    assert good["status"] == "loaded"
    assert good["hooks"] == ["ezpz_before_init", "ezpz_probe_devices"]
    assert good["dist"] == ["ezpz-test-good", "0.0.1"]
    assert {"cpu", "mps", "launchers"} <= {n for n, r in data["records"].items() if r["status"] == "loaded"}
    # its candidate was considered (and lost on priority), its lifecycle action ran
    assert "not privateuseone [test-good]: priority -10" in data["explain"]
    assert "lifecycle: test-good" in data["explain"]


def test_broken_plugins_are_quarantined_and_the_rest_keeps_working(test_plugins_dir):
    data, stderr = report(test_plugins_dir)
    rec = data["records"]
    assert rec["test-broken-import"]["status"] == "failed" and rec["test-broken-import"]["stage"] == "import"
    assert "libfake.so" in rec["test-broken-import"]["error"]
    assert rec["test-broken-hook"]["stage"] == "hook ezpz_probe_devices"
    assert "driver query failed" in rec["test-broken-hook"]["error"]
    assert rec["test-garbage"]["stage"] == "hook ezpz_amp_policy"
    assert "returned str" in rec["test-garbage"]["error"] and "expected AmpPolicy" in rec["test-garbage"]["error"]
    assert rec["test-unknown-hook"]["stage"] == "validate"
    assert "ezpz_probe_device" in rec["test-unknown-hook"]["error"]
    assert rec["test-good"]["status"] == "loaded"
    # everything else still works: the CPU was chosen with its normal precision
    assert data["device"] == "cpu" and "setup_error" not in data
    # exactly one warning per failed plugin, naming plugin, distribution, version and error
    for name, dist, version in [("test-broken-import", "ezpz-test-broken-import", "0.0.2"),
                                ("test-broken-hook", "ezpz-test-broken-hook", "0.0.3"),
                                ("test-garbage", "ezpz-test-garbage", "0.0.4"),
                                ("test-unknown-hook", "ezpz-test-unknown-hook", "0.0.5")]:
        lines = [ln for ln in stderr.splitlines() if f"plugin={name} " in ln]
        assert len(lines) == 1, stderr
        assert f"distribution={dist}" in lines[0] and f"version={version}" in lines[0]
        assert f"EZPZ_DISABLE_PLUGINS={name}" in lines[0]
    assert "FAILED at hook ezpz_probe_devices" in data["explain"]


def test_deny_list_never_imports_the_module(test_plugins_dir):
    data, _ = report(test_plugins_dir, EZPZ_DISABLE_PLUGINS="test-sentinel,test-broken-import")
    assert data["records"]["test-sentinel"]["status"] == "blocked"
    assert data["records"]["test-broken-import"]["status"] == "blocked"
    assert "ezpz_test_sentinel" not in data["imported"]
    assert "ezpz_test_broken_import" not in data["imported"]
    # and the control case: not denied, it is imported
    data, _ = report(test_plugins_dir, EZPZ_PLUGINS="test-sentinel")
    assert "ezpz_test_sentinel" in data["imported"]


def test_deny_star_blocks_every_third_party_plugin_but_not_builtins(test_plugins_dir):
    data, _ = report(test_plugins_dir, EZPZ_DISABLE_PLUGINS="*")
    assert all(r["status"] == "blocked" for n, r in data["records"].items() if n.startswith("test-"))
    assert data["imported"] == [] and data["device"] == "cpu"


@pytest.mark.parametrize(
    ("env", "loaded"),
    [
        ({"EZPZ_PLUGINS": ""}, set()),
        ({"EZPZ_PLUGINS": "test-good, TEST-SENTINEL"}, {"test-good", "test-sentinel"}),
        ({"EZPZ_DISABLE_PLUGIN_AUTOLOAD": "1"}, set()),
        ({"EZPZ_DISABLE_PLUGIN_AUTOLOAD": "1", "EZPZ_PLUGINS": "test-good"}, {"test-good"}),
    ],
)
def test_allow_list_and_autoload_switch(test_plugins_dir, env, loaded):
    data, _ = report(test_plugins_dir, **env)
    third_party = {n for n, r in data["records"].items() if n.startswith("test-") and r["status"] == "loaded"}
    assert third_party == loaded
    assert {n for n in data["imported"]} == {f"ezpz_{n.replace('-', '_')}" for n in loaded}
    assert all(r["status"] == "not-allowed" for n, r in data["records"].items() if n.startswith("test-") and n not in loaded)


def test_strict_mode_raises_naming_the_plugin(test_plugins_dir):
    proc = run_python("import ezpz", clean_env(PYTHONPATH=str(test_plugins_dir), EZPZ_STRICT_PLUGINS="1",
                                               EZPZ_PLUGINS="test-broken-import"))
    assert proc.returncode != 0
    assert "PluginError" in proc.stderr
    assert "test-broken-import" in proc.stderr and "ezpz-test-broken-import 0.0.2" in proc.stderr
    assert "libfake.so" in proc.stderr


def test_bad_control_value_names_the_variable_at_setup_not_import(test_plugins_dir):
    code = ("import ezpz; h = ezpz.hooks.get_plugin_host(); "
            "print(sorted(n for n, r in h.records.items() if r.status == 'loaded')); ezpz.hooks.setup()")
    proc = run_python(code, clean_env(PYTHONPATH=str(test_plugins_dir), EZPZ_STRICT_PLUGINS="maybe"))
    assert proc.returncode != 0
    # import worked (so `ezpz doctor` can report it), with the built-ins only: never the user's unmeant settings
    assert proc.stdout.strip() == "['cpu', 'launchers', 'mps']"
    assert "EZPZ_STRICT_PLUGINS='maybe'" in proc.stderr and "1/0" in proc.stderr


def test_trace_logs_every_hook_call(test_plugins_dir):
    code = "import logging; logging.basicConfig(level=logging.INFO); import ezpz; ezpz.hooks.setup()"
    proc = run_python(code, clean_env(PYTHONPATH=str(test_plugins_dir), EZPZ_TRACE_PLUGINS="1", EZPZ_PLUGINS="test-good"))
    assert proc.returncode == 0, proc.stderr
    calls = [ln for ln in proc.stderr.splitlines() if "hook_call" in ln]
    for hook, plugin in [("ezpz_probe_devices", "test-good"), ("ezpz_probe_devices", "cpu"),
                         ("ezpz_detect_launch_env", "launchers"), ("ezpz_select_backend", "cpu"),
                         ("ezpz_amp_policy", "cpu"), ("ezpz_before_init", "test-good")]:
        assert any(f"hook={hook}" in ln and f"plugin={plugin}" in ln for ln in calls), (hook, plugin, calls)
    # without the switch: silent
    proc = run_python(code, clean_env(PYTHONPATH=str(test_plugins_dir), EZPZ_PLUGINS="test-good"))
    assert "hook_call" not in proc.stderr
