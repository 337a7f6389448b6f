"""``torchrun --nproc-per-node 2 -m ezpz.cuda_compat``: the CUDA-only scripts with gloo / emuccl in place of nccl.

The trainer's rank-0 losses equal those of its hand port under the same launcher; the DDP project's
``init_process_group('nccl')`` adopts the group ``setup()`` made (emuccl), its ``ReduceOp.AVG`` becomes SUM and
a division (emuccl runs gloo underneath), and every rank writes its report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env
from test_cuda_compat import ARGS, PORTED, TRAINER, assert_same_losses, losses
from test_real_launchers import free_port

pytestmark = pytest.mark.launcher


def torchrun(args: list[str], tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
         *args], cwd=tmp, capture_output=True, text=True, timeout=300,
        env=clean_env(EZPZ_PRECISION="fp32", EZPZ_CUDA_COMPAT_DIR=str(tmp / "report"), **env))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


def test_trainer_under_torchrun_with_gloo_equals_its_port(tmp_path):
    ported = losses(torchrun([str(PORTED), *ARGS], tmp_path).stdout)
    proc = torchrun(["-m", "ezpz.cuda_compat", str(TRAINER), *ARGS], tmp_path)
    assert_same_losses(losses(proc.stdout), ported)
    for rank in (0, 1):
        data = json.loads((tmp_path / "report" / f"rank-{rank}.json").read_text())
        assert (data["rank"], data["world_size"], data["backend"], data["device"]) == (rank, 2, "gloo", "cpu")
        assert any(r["call"] == "Module.to('cuda')" for r in data["sites"])


def test_ddp_project_under_torchrun_on_emu_adopts_the_group_and_averages(tmp_path):
    proc = torchrun(["-m", "ezpz.cuda_compat", str(ROOT / "tests" / "cuda_projects" / "ddp_snapshot" / "train.py"),
                     "--epochs", "4"], tmp_path, EZPZ_DEVICE="emu")
    epochs = [float(line.split("loss ")[1]) for line in proc.stdout.splitlines() if line.startswith("epoch ")]
    assert len(epochs) == 4 and epochs[-1] < epochs[0], proc.stdout
    for rank in (0, 1):
        data = json.loads((tmp_path / "report" / f"rank-{rank}.json").read_text())
        assert data["backend"] == "emuccl" and data["device"].split(":")[0] == "emu"
        rows = {r["call"]: r for r in data["sites"]}
        assert rows["init_process_group('nccl')"]["became"] == "the group setup() made (emuccl, 2 ranks), adopted"
        assert rows["all_reduce(op=ReduceOp.AVG)"]["became"].startswith("all_reduce(op=SUM) then / world size")
        assert rows[f"DistributedDataParallel(device_ids=[{rank}])"]["behaves"] == "same"
        assert rows["DataLoader(pin_memory=True)"]["behaves"] == "none"
        assert rows["destroy_process_group()"]["became"].startswith("left to ezpz's teardown()")
        assert rows["torch.cuda.nvtx.range_push()"]["became"].startswith("rt.range()")
        assert rows["profile(activities=[..., ProfilerActivity.CUDA])"]["became"].startswith("activities=['CPU']")


def test_torchrun_style_project_under_mpiexec_gets_the_torchrun_variables(tmp_path):
    from conftest import mpiexec_unusable, need_tool

    mpiexec = need_tool("mpiexec")
    why = mpiexec_unusable(mpiexec)
    if why:
        pytest.skip(why)
    proc = subprocess.run(
        [mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", "2", "-x", "OMP_NUM_THREADS=1", sys.executable,
         "-m", "ezpz.cuda_compat", str(ROOT / "tests" / "cuda_projects" / "ddp_snapshot" / "train.py"),
         "--epochs", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=clean_env(OMP_NUM_THREADS="1", EZPZ_PRECISION="fp32", EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert [line.split(":")[0] for line in proc.stdout.splitlines() if line.startswith("epoch")] == [
        "epoch 1", "epoch 2"]  # one DDP job (rank 0 prints), not two single-process runs
    for rank in (0, 1):
        data = json.loads((tmp_path / "report" / f"rank-{rank}.json").read_text())
        assert data["set_for_the_script"]["RANK"] == str(rank) and data["set_for_the_script"]["WORLD_SIZE"] == "2"
        rows = {r["call"]: r for r in data["sites"]}
        assert rows["init_process_group('nccl')"]["became"] == "the group setup() made (gloo, 2 ranks), adopted"
