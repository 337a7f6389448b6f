"""A process group made before setup() under a real torchrun: adopted (by hand, by accelerate) or refused."""

from __future__ import annotations

import importlib.util
from pathlib import Path
import subprocess

import pytest

from conftest import clean_env, need_tool, rank_rows
from test_real_launchers import free_port

SCRIPT = str(Path(__file__).parent / "scripts" / "adopt_check.py")
pytestmark = pytest.mark.launcher


def _torchrun(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [need_tool("torchrun"), "--nproc-per-node", "2", "--master-port", str(free_port()), SCRIPT, mode],
        env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="60"), capture_output=True, text=True, timeout=240,
    )


@pytest.mark.parametrize("mode", ["user", "accelerate"])
def test_existing_group_is_adopted_and_outlives_teardown(mode):
    if mode == "accelerate" and importlib.util.find_spec("accelerate") is None:
        pytest.skip("accelerate not installed (pip install -c constraints.txt 'accelerate==1.15.0')")
    proc = _torchrun(mode)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rank_rows(proc.stdout)
    assert [r["rank"] for r in rows] == [0, 1]
    for r in rows:
        assert r["ok"] and r["sum"] == 3.0 and r["after"] == 30.0 and r["second_init"] == 0
        assert r["adopted"].startswith("adopted from " + ("accelerate" if mode == "accelerate" else "the caller"))
        assert r["pg_after_teardown"] is True


def test_group_of_another_world_size_is_a_named_error_on_every_rank():
    proc = _torchrun("mismatch")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # each rank exits 0 only on ProcessGroupMismatchError
    rows = sorted(rank_rows(proc.stdout), key=lambda r: r["launcher_rank"])
    assert [r["launcher_rank"] for r in rows] == [0, 1], proc.stdout + proc.stderr
    for r in rows:
        assert r["error"] == "ProcessGroupMismatchError", r
        assert "world size" in r["message"] and "=1" in r["message"] and "world size 2" in r["message"]
