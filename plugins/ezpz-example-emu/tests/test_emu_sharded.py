"""FSDP2, DeviceMesh and sharded checkpoints on emu, under torchrun: torch's own APIs on the emulated device.

``sharded_on_emu.py`` runs on every rank after ``ezpz.hooks.setup()`` with ``EZPZ_DEVICE=emu`` and fp32: a 1-D and a
2-D ``init_device_mesh("emu", ...)`` with an all-reduce over each dimension's group, 20 steps of DDP and of the same
model under ``fully_shard`` (their mean losses compared step by step), and a ``torch.distributed.checkpoint`` save
loaded back into a fresh sharded model and into an unsharded one. Real processes, real emuccl collectives.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emu_testlib import PY, child_env, free_port, need_tool, run

SCRIPT = Path(__file__).with_name("sharded_on_emu.py")


def _run(tmp_path: Path, ranks: int, shape: str) -> dict:
    need_tool("torchrun")
    out = tmp_path / "seen.json"
    argv = [PY, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--master-port", str(free_port()),
            str(SCRIPT), str(out), shape]
    proc = run(argv, env=child_env(EZPZ_DEVICE="emu", EZPZ_PRECISION="fp32"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(out.read_text())


def _same_losses(seen: dict) -> None:
    ddp, fsdp = seen["ddp"], seen["fsdp"]
    assert len(ddp) == len(fsdp) == 20
    worst = max(abs(a - b) / abs(a) for a, b in zip(ddp, fsdp))
    assert worst < 1e-4, f"FSDP2 and DDP losses differ by {worst:.2e} (relative): {list(zip(ddp, fsdp))}"
    assert fsdp[-1] < fsdp[0] / 2, fsdp


def _round_trip(seen: dict) -> None:
    assert seen["sharded_on"] == seen["reloaded_on"] == ["emu"]
    assert seen["reloaded_equal"], "a fresh sharded model loaded from the checkpoint differs from the saved one"
    assert seen["resharded_equal"], "an unsharded model loaded from the sharded checkpoint differs from it"


@pytest.mark.launcher
def test_fsdp2_on_a_1d_mesh_trains_like_ddp_and_checkpoints_on_emu(tmp_path):
    seen = _run(tmp_path, 2, "1d")
    assert seen["device"] == "emu" and seen["backend"] == "emuccl" and seen["world"] == 2
    assert all(seen["groups"].values()), seen["groups"]  # every group torch built for the meshes has a name
    assert seen["sums"] == {"all": [1.0, 1.0], "dp": [1.0, 1.0], "tp": [0.0, 0.0]}  # a (2, 1) mesh on rank 0
    assert seen["shard_rows"] == [32, 32, 32, 32, 1, 1], seen["shard_rows"]  # rank 0: half of each dim 0 (1 of 1)
    _same_losses(seen)
    _round_trip(seen)


@pytest.mark.launcher
def test_fsdp2_on_a_2d_mesh_of_4_ranks_trains_like_ddp_on_emu(tmp_path):
    """(dp=2, tp=2): sub-groups of two ranks each; FSDP2 shards over tp and replicates over dp (HSDP)."""
    seen = _run(tmp_path, 4, "2d")
    assert seen["world"] == 4 and seen["backend"] == "emuccl"
    assert len(set(seen["groups"].values())) == 3, seen["groups"]  # three groups, three names
    # rank 0: all ranks 0+1+2+3, its dp column ranks 0 and 2, its tp row ranks 0 and 1
    assert seen["sums"] == {"all": [6.0, 6.0], "dp": [2.0, 2.0], "tp": [1.0, 1.0]}
    assert seen["shard_rows"] == [32, 32, 32, 32, 1, 1], seen["shard_rows"]
    _same_losses(seen)
    _round_trip(seen)
