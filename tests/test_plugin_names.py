"""Built-in plugin names belong to ezpz: a squatting distribution is refused before import, and named.

``acme-fast-cpu`` (tests/plugins/squatters) is really pip-installed; it
declares ``cpu`` and ``launchers`` (ezpz's names) and ``acme-extra`` (its own).
Its squatting module writes a marker file when imported, so "never imported"
is checked on disk, not only in ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, last_json, pip_install_target, run_python

SQUATTER = ROOT / "tests" / "plugins" / "squatters" / "acme-fast-cpu"

REPORT = """
import json, sys, ezpz
host = ezpz.hooks.get_plugin_host()
out = {"records": {k: {"name": r.name, "status": r.status, "reason": r.reason, "builtin": r.builtin,
                       "dist": list(r.distribution), "target": r.target} for k, r in host.records.items()}}
try:
    rt = ezpz.hooks.setup()
    out["device"] = str(rt.device)
except Exception as err:
    out["setup_error"] = f"{type(err).__name__}: {err}"
out["imported"] = sorted(m for m in sys.modules if m.startswith("acme_fast_cpu"))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def squat_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The squatting distribution, really pip-installed (own .dist-info, real entry points) into a private dir."""
    target = tmp_path_factory.mktemp("squatter")
    pip_install_target(target, SQUATTER)
    assert list(target.glob("acme_fast_cpu-6.6.6.dist-info"))
    return target


def _marker(squat_dir: Path) -> Path:
    return squat_dir / "acme_fast_cpu" / "IMPORTED"


def _report(squat_dir: Path, **env: str) -> tuple[dict, str]:
    proc = run_python(REPORT, clean_env(PYTHONPATH=str(squat_dir), **env))
    assert proc.returncode == 0, proc.stderr
    return last_json(proc.stdout), proc.stderr


@pytest.mark.parametrize("deny", [None, "*", "cpu"])
def test_a_squatting_entry_point_is_never_imported(squat_dir, deny):
    data, stderr = _report(squat_dir, **({"EZPZ_DISABLE_PLUGINS": deny} if deny else {}))
    assert not _marker(squat_dir).exists(), "the squatting module was imported"
    assert "acme_fast_cpu.plugin" not in data["imported"]
    rec = data["records"]
    squat = rec["acme-fast-cpu:cpu"]
    assert squat["dist"] == ["acme-fast-cpu", "6.6.6"] and not squat["builtin"]
    if deny == "*":  # every third-party plugin denied: blocked, still not imported
        assert squat["status"] == "blocked"
    else:
        assert squat["status"] == "refused" and squat["reason"] == "name 'cpu' is reserved by ezpz"
    assert rec["acme-fast-cpu:launchers"]["status"] in ("refused", "blocked")
    # the real built-ins keep their names and their distribution
    if deny != "cpu":
        assert rec["cpu"] == {"name": "cpu", "status": "loaded", "reason": "built-in", "builtin": True,
                              "dist": ["ezpz", rec["cpu"]["dist"][1]], "target": "ezpz.builtin.cpu"}
        assert data["device"] == "cpu"
    assert rec["launchers"]["status"] == "loaded" and rec["launchers"]["dist"][0] == "ezpz"
    if deny is None:  # one warning per refused entry point, naming the distribution and the qualified fix
        lines = [ln for ln in stderr.splitlines() if "plugin_refused" in ln]
        assert len(lines) == 2, stderr
        assert "distribution=acme-fast-cpu" in lines[0] and "EZPZ_DISABLE_PLUGINS=acme-fast-cpu:cpu" in lines[0]


def test_its_own_name_loads_and_names_its_distribution(squat_dir):
    data, _ = _report(squat_dir)
    extra = data["records"]["acme-extra"]
    assert extra["status"] == "loaded" and extra["dist"] == ["acme-fast-cpu", "6.6.6"]


def test_distribution_qualified_name_addresses_one_plugin(squat_dir):
    data, stderr = _report(squat_dir, EZPZ_DISABLE_PLUGINS="acme-fast-cpu:cpu, acme_fast_cpu:launchers "
                                                          "acme-fast-cpu:acme-extra")
    rec = data["records"]
    assert rec["acme-fast-cpu:cpu"]["status"] == "blocked"  # acknowledged: no warning
    assert rec["acme-extra"]["status"] == "blocked"
    assert rec["cpu"]["status"] == "loaded"  # ezpz's own cpu is untouched
    assert "plugin_refused" not in stderr and "plugin_control_ignored" not in stderr, stderr
    assert not _marker(squat_dir).exists()


def test_plugins_and_doctor_list_it_as_refused(squat_dir):
    env = clean_env(PYTHONPATH=str(squat_dir))
    proc = subprocess.run([sys.executable, "-m", "ezpz", "plugins"], env=env, capture_output=True, text=True,
                          timeout=120)
    row = next(ln for ln in proc.stdout.splitlines() if ln.split()[:2] == ["cpu", "refused"])
    assert "acme-fast-cpu" in row and "6.6.6" in row and "refused: name 'cpu' is reserved by ezpz" in row
    assert proc.returncode == 1
    proc = subprocess.run([sys.executable, "-m", "ezpz", "doctor", "--json"], env=env, capture_output=True, text=True,
                          timeout=120)
    report = json.loads(proc.stdout)
    (row,) = [p for p in report["plugins"] if p["key"] == "acme-fast-cpu:cpu"]
    assert row["status"] == "refused" and row["distribution"] == "acme-fast-cpu"
    assert any("reserved by ezpz" in p["what"] and "acme-fast-cpu:cpu" in p["fix"] for p in report["problems"])
    proc = subprocess.run([sys.executable, "-m", "ezpz", "doctor"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert "refused: name 'cpu' is reserved by ezpz" in proc.stdout
    assert not _marker(squat_dir).exists()


def test_a_squatting_launch_driver_is_never_imported(squat_dir):
    env = clean_env(PYTHONPATH=str(squat_dir))
    proc = subprocess.run([sys.executable, "-m", "ezpz", "launch", "--dry-run", "--launcher", "mpiexec", "-n", "2",
                           "--", "true"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "mpiexec"
    proc = subprocess.run([sys.executable, "-m", "ezpz", "plugins", "--json"], env=env, capture_output=True,
                          text=True, timeout=120)
    drivers = [d for d in json.loads(proc.stdout)["launchers"] if d["name"] == "mpiexec"]
    assert {(d["distribution"], d.get("refused")) for d in drivers} == {
        ("ezpz", None), ("acme-fast-cpu", "name 'mpiexec' is reserved by ezpz")}
    assert not _marker(squat_dir).exists()


def test_strict_mode_refuses_to_start(squat_dir):
    proc = run_python("import ezpz; ezpz.hooks.setup()", clean_env(PYTHONPATH=str(squat_dir), EZPZ_STRICT_PLUGINS="1"))
    assert proc.returncode != 0 and "reserved by ezpz" in proc.stderr and "acme-fast-cpu" in proc.stderr
    assert not _marker(squat_dir).exists()


def test_a_plain_dist_info_names_its_distribution(tmp_path):
    """A hand-made ``.dist-info`` (no RECORD, no top_level.txt) on sys.path: metadata still names it."""
    (tmp_path / "handmade_plugin.py").write_text("from ezpz import hookimpl\n\n@hookimpl\n"
                                                 "def ezpz_after_setup(runtime):\n    return None\n")
    info = tmp_path / "Hand_Made-2.5.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: Hand_Made\nVersion: 2.5\n")
    (info / "entry_points.txt").write_text("[ezpz]\nhandmade = handmade_plugin\n")
    data, _ = _report(tmp_path)
    assert data["records"]["handmade"]["status"] == "loaded"
    assert data["records"]["handmade"]["dist"] == ["Hand_Made", "2.5"]
