"""The installed example plugin as a user meets it: `ezpz plugins` lists it, `ezpz doctor` shows it winning."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def ezpz(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    child = {k: v for k, v in os.environ.items() if not k.startswith(("EZPZ_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    child.update(env)
    return subprocess.run([sys.executable, "-m", "ezpz", *args], env=child, capture_output=True, text=True, timeout=120)


def test_ezpz_plugins_lists_the_installed_example_plugin():
    proc = ezpz("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = [p for p in json.loads(proc.stdout)["plugins"] if p["name"] == "example-hpu"]
    assert row["status"] == "loaded" and row["distribution"] == "ezpz-example-hpu"
    assert {"ezpz_probe_devices", "ezpz_select_backend", "ezpz_amp_policy", "ezpz_profiling"} <= set(row["hooks"])


def test_doctor_shows_the_example_device_winning_when_its_probe_reports_one():
    proc = ezpz("doctor", "--json", EZPZ_EXAMPLE_HPU_SIMULATE="2")
    data = json.loads(proc.stdout)
    device = next(d for d in data["decisions"] if d["topic"] == "device")
    assert device["chosen"] == "hpu:0"
    assert "highest priority (110)" in device["reason"]
    # and without a device it rejects cleanly: doctor stays healthy and picks something else
    proc = ezpz("doctor", "--json")
    data = json.loads(proc.stdout)
    device = next(d for d in data["decisions"] if d["topic"] == "device")
    assert device["chosen"] != "hpu:0" and data["ok"] is True
