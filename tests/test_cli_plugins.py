"""``ezpz plugins``: every plugin with entry point, distribution, version, hooks and status; the launch drivers."""

from __future__ import annotations

import json

from conftest import clean_env
from test_cli_support import broken_plugin, ezpz, site_driver, with_pythonpath


def test_plugins_lists_the_builtins_with_status():
    proc = ezpz("plugins")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.startswith("  ")}
    for name in ("cpu", "mps", "launchers"):
        assert rows[name][1] == "loaded" and rows[name][2] == "ezpz"
    assert "probe_devices" in " ".join(rows["cpu"]) and "detect_launch_env" in " ".join(rows["launchers"])
    for driver in ("torchrun", "mpiexec", "srun"):
        assert f"ezpz.launch_drivers.drivers:{driver.capitalize()}" in proc.stdout


def test_plugins_json():
    proc = ezpz("plugins", "--json")
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    plugins = {p["name"]: p for p in doc["plugins"]}
    assert plugins["cpu"]["target"] == "ezpz.builtin.cpu" and plugins["cpu"]["builtin"] is True
    assert plugins["cpu"]["distribution"] == "ezpz" and plugins["cpu"]["version"]
    assert "ezpz_probe_devices" in plugins["cpu"]["hooks"]
    assert plugins["launchers"]["hooks"] == ["ezpz_detect_launch_env", "ezpz_failure_signatures"]
    assert {d["name"] for d in doc["launchers"]} >= {"torchrun", "mpiexec", "srun"}


def test_failed_blocked_and_not_allowed_plugins(tmp_path):
    env = with_pythonpath(clean_env(EZPZ_DISABLE_PLUGINS="mps"), broken_plugin(tmp_path / "site"))
    proc = ezpz("plugins", "--json", env=env)
    assert proc.returncode == 1  # a plugin is broken
    plugins = {p["name"]: p for p in json.loads(proc.stdout)["plugins"]}
    assert plugins["broken"]["status"] == "failed" and "vendor SDK missing" in plugins["broken"]["error"]
    assert (plugins["broken"]["distribution"], plugins["broken"]["version"]) == ("ezpz-broken", "1.2.3")
    assert plugins["mps"]["status"] == "blocked" and "EZPZ_DISABLE_PLUGINS" in plugins["mps"]["reason"]
    text = ezpz("plugins", env=env).stdout
    assert "failed" in text and "RuntimeError: vendor SDK missing" in text and "blocked" in text

    env["EZPZ_PLUGINS"] = "cpu"  # an allow-list that leaves the broken one out: never imported
    plugins = {p["name"]: p for p in json.loads(ezpz("plugins", "--json", env=env).stdout)["plugins"]}
    assert plugins["broken"]["status"] == "not-allowed"


def test_a_site_launch_driver_is_listed(tmp_path):
    env = with_pythonpath(clean_env(), site_driver(tmp_path / "site"))
    doc = json.loads(ezpz("plugins", "--json", env=env).stdout)
    (site,) = [d for d in doc["launchers"] if d["name"] == "aprun"]
    assert site == {"name": "aprun", "target": "ezpz_site_aprun:Aprun", "distribution": "ezpz-site-aprun",
                    "version": "1.2.3"}
