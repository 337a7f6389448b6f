"""Sharded training on CPU ranks (gloo, fp32), real launchers: rt.shard against DDP, rt.mesh, checkpoints.

One job per launcher checks several things (CI time): 4 ranks under Open MPI's mpiexec train DDP and
``rt.shard`` 20 steps (the same losses), build a 1-D and a 2x2 mesh, then save a checkpoint at step 10,
load it into fresh models and resume to step 20 (the same parameters as 20 uninterrupted steps: the
optimizer state came back); 2 ranks under torchrun compare again, check fp16 loss scaling on sharded
gradients and load that 4-rank checkpoint; one process loads it into a plain model. Only the CPU ran
these (no accelerator here). The worker is tests/scripts/sharded_train.py.
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


def _env(**extra: str) -> dict[str, str]:
    return clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120", **extra)


def _rows(proc: subprocess.CompletedProcess[str], world: int, dtype: str | None = "fp32",
          device: str = "cpu") -> list[dict]:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    rows = rank_rows(proc.stdout)
    assert [r["rank"] for r in rows] == list(range(world)), proc.stdout
    assert all(r["world"] == world and r["device"] == device for r in rows), rows
    assert dtype is None or all(r["dtype"] == dtype for r in rows), rows
    return rows


def _auto_falls(rows: list[dict]) -> None:
    """In the device's automatic precision rt.shard gathers parameters in its autocast dtype, and the loss falls."""
    for row in rows:
        expected = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp32": "torch.float32"}[row["dtype"]]
        assert row["param_dtype"] == expected, row
        assert len(row["auto"]) == 20 and row["auto"][-1] < row["auto"][0] / 2, row["auto"]


def _same_losses(rows: list[dict], world: int) -> None:
    tp = world // 2
    for row in rows:
        on = row["device"]
        assert row["meshes"] == f"{on} ({world},) None / {on} (2, {tp}) ('dp', 'tp')", row["meshes"]
        assert row["meshes_kept"] and row["tp_group_size"] == tp, row
        assert f"= {6} ranks" in row["wrong_mesh"] and f"the world size, {world}" in row["wrong_mesh"], row
        ddp, sharded = row["ddp"], row["sharded"]
        assert len(ddp) == len(sharded) == 20
        worst = max(abs(a - b) / abs(a) for a, b in zip(ddp, sharded))
        assert worst < REL_TOL, (row["rank"], worst, ddp, sharded)
        assert sharded[-1] < sharded[0] / 2, sharded  # it trains
        assert row["divide_factor"] == "ok", row["divide_factor"]  # SUM forced: a divide factor applies after it


def test_sharded_training_and_checkpoints_across_world_sizes(tmp_path):
    from test_real_launchers import free_port

    mpiexec, torchrun = need_tool("mpiexec"), need_tool("torchrun")
    four = _rows(subprocess.run(
        [mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", "4", "-x", "OMP_NUM_THREADS=1",
         sys.executable, SCRIPT, str(tmp_path), "compare,resume"],
        env=_env(EZPZ_PRECISION="fp32"), capture_output=True, text=True, timeout=400), 4)
    _same_losses(four, 4)
    for row in four:
        assert row["step"] == 10 and row["latest"] == str(tmp_path / "ck" / "step-000010")
        assert row["untrained_differs"] and row["loaded_equal"] and row["resumed_equal"], row

    two = _rows(subprocess.run(  # the CPU's automatic precision (bf16 where it has it); compare passes fp32
        [torchrun, "--nproc-per-node", "2", "--master-port", str(free_port()), SCRIPT, str(tmp_path),
         "compare,auto,scaler,load"],
        env=_env(), capture_output=True, text=True, timeout=400), 2, dtype=None)
    _same_losses(two, 2)
    _auto_falls(two)
    for row in two:  # an overflow in rank 1's shard alone: every rank skips that step and halves the scale
        assert row["scaler_skipped"] == [False, True, False] and row["scaler_scales"] == [1024.0, 512.0, 512.0], row
        assert row["step"] == 10 and row["loaded_equal"] and row["ddp_loaded_equal"], row
        assert "DTensor" in row["refused"] and "rt.save_checkpoint(" in row["refused"], row

    one = _rows(subprocess.run([sys.executable, SCRIPT, str(tmp_path), "load"], env=_env(EZPZ_PRECISION="fp32"),
                               capture_output=True, text=True, timeout=300), 1)
    assert one[0]["step"] == 10 and one[0]["loaded_equal"] and one[0]["ddp_loaded_equal"], one
    assert one[0]["refused"] == "not refused", one


_GROUP_NAME_PROBE = """
import torch.distributed as dist
import ezpz
rt = ezpz.hooks.setup()
dist.init_process_group(rt.backend, store=dist.HashStore(), rank=0, world_size=1)
try:
    dist.group.WORLD.group_name
    print("named")
except RuntimeError as err:
    print(f"{rt.backend}: {err}")
dist.destroy_process_group()
"""


def _emu_backend_cannot_name_its_groups() -> str | None:
    """Why emu's backend cannot carry a DeviceMesh (its group has no name torch resolves), or None when it can."""
    proc = subprocess.run([sys.executable, "-c", _GROUP_NAME_PROBE], env=_env(EZPZ_DEVICE="emu"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout.strip().splitlines()[-1]
    return None if said == "named" else said


def test_rt_shard_on_emu_trains_like_ddp_and_its_loss_falls_in_bf16(tmp_path):
    """The emulated PrivateUse1 device (ezpz-example-emu), 2 ranks under torchrun: fp32 losses equal DDP's, and
    in emu's automatic precision (bf16) rt.shard gathers bf16 parameters and the loss falls."""
    import importlib.util

    from test_real_launchers import free_port

    if importlib.util.find_spec("ezpz_example_emu") is None:
        pytest.skip("ezpz-example-emu is not installed here (scripts/test.sh installs it)")
    why = _emu_backend_cannot_name_its_groups()
    if why is not None:  # detected on this checkout's emuccl: DeviceMesh (and so FSDP2) needs named groups
        pytest.skip(f"emu's collective backend gives its process group no name, which DeviceMesh needs ({why})")
    torchrun = need_tool("torchrun")
    two = _rows(subprocess.run(
        [torchrun, "--nproc-per-node", "2", "--master-port", str(free_port()), SCRIPT, str(tmp_path), "compare,auto"],
        env=_env(EZPZ_DEVICE="emu"), capture_output=True, text=True, timeout=400), 2, dtype="bf16", device="emu")
    _same_losses(two, 2)
    _auto_falls(two)
