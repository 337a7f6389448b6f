"""Sharded training on CPU ranks (gloo, fp32), real launchers: FSDP2 against DDP, and checkpoints across world sizes.

One job per launcher checks several things (CI time): 4 ranks under Open MPI's mpiexec train DDP and
sharded 20 steps (the same losses), then save a checkpoint at step 10, load it into fresh models and
resume to step 20 (the same parameters as 20 uninterrupted steps: the optimizer state came back);
2 ranks under torchrun compare again and load that 4-rank checkpoint; one process loads it into a
plain model. The worker is tests/scripts/sharded_train.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, need_tool, rank_rows

SCRIPT = str(Path(__file__).parent / "scripts" / "sharded_train.py")
pytestmark = pytest.mark.launcher
REL_TOL = 1e-4


def _env() -> dict[str, str]:
    return clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120", EZPZ_PRECISION="fp32")


def _rows(proc: subprocess.CompletedProcess[str], world: int) -> list[dict]:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    rows = rank_rows(proc.stdout)
    assert [r["rank"] for r in rows] == list(range(world)), proc.stdout
    assert all(r["world"] == world and r["dtype"] == "fp32" for r in rows), rows
    return rows


def _same_losses(rows: list[dict]) -> None:
    for row in rows:
        ddp, sharded = row["ddp"], row["sharded"]
        assert len(ddp) == len(sharded) == 20
        worst = max(abs(a - b) / abs(a) for a, b in zip(ddp, sharded))
        assert worst < REL_TOL, (row["rank"], worst, ddp, sharded)
        assert sharded[-1] < sharded[0] / 2, sharded  # it trains


def test_sharded_training_and_checkpoints_across_world_sizes(tmp_path):
    from test_real_launchers import free_port

    mpiexec, torchrun = need_tool("mpiexec"), need_tool("torchrun")
    four = _rows(subprocess.run(
        [mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", "4", "-x", "OMP_NUM_THREADS=1",
         sys.executable, SCRIPT, str(tmp_path), "compare,resume"],
        env=_env(), capture_output=True, text=True, timeout=400), 4)
    _same_losses(four)
    for row in four:
        assert row["step"] == 10 and row["latest"] == str(tmp_path / "ck" / "step-000010")
        assert row["untrained_differs"] and row["loaded_equal"] and row["resumed_equal"], row

    two = _rows(subprocess.run(
        [torchrun, "--nproc-per-node", "2", "--master-port", str(free_port()), SCRIPT, str(tmp_path), "compare,load"],
        env=_env(), capture_output=True, text=True, timeout=400), 2)
    _same_losses(two)
    for row in two:
        assert row["step"] == 10 and row["loaded_equal"], row
        assert "DTensor" in row["refused"] and "rt.save_checkpoint(" in row["refused"], row

    one = _rows(subprocess.run([sys.executable, SCRIPT, str(tmp_path), "load"], env=_env(), capture_output=True,
                               text=True, timeout=300), 1)
    assert one[0]["step"] == 10 and one[0]["loaded_equal"] and one[0]["refused"] == "not refused", one
