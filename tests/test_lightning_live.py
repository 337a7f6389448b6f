"""Lightning Fabric over ezpz, 2 real ranks: MPICH's mpiexec without mpi4py, and torchrun; one DDP step each."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, need_tool, rank_rows
from test_lightning import _need_lightning
from test_real_launchers import free_port

SCRIPT = str(Path(__file__).parent / "scripts" / "fabric_check.py")
pytestmark = pytest.mark.launcher


def _check(proc: subprocess.CompletedProcess, launcher: str, inits: int) -> None:
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    rows = rank_rows(proc.stdout)
    assert [r["rank"] for r in rows] == [0, 1] and [r["local_rank"] for r in rows] == [0, 1]
    for r in rows:
        assert r["launcher"] == launcher and r["environment"] == "EzpzEnvironment" and r["world_size"] == 2
        assert r["grad"] == r["expected_grad"] == 1.5  # DDP averaged d(w*x)/dw = x over x = 1, 2
        assert r["fabric_device"] == r["ezpz_device"] == r["param_device"]  # the device setup()/plan() picked
        assert r["strategy"] == "DDPStrategy" and r["inits"] == inits and r["ok"], r
        flag = {"bf16": "bf16-mixed", "fp16": "16-mixed"}.get(r["ezpz_precision"], "32-true")
        assert r["precision"].endswith(":" + flag)


def test_fabric_under_mpich_without_mpi4py():
    _need_lightning()
    env = clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="60", EZPZ_TEST_NO_MPI4PY="1")
    proc = subprocess.run([need_tool("mpiexec.mpich"), "-n", "2", sys.executable, SCRIPT, "setup"], env=env,
                          capture_output=True, text=True, timeout=300)
    _check(proc, "hydra", inits=0)
    assert not any(r["mpi4py"] for r in rank_rows(proc.stdout))


@pytest.mark.parametrize(("mode", "inits"), [("setup", 0), ("plan", 1)])
def test_fabric_under_torchrun(mode, inits):
    """``setup``: Fabric finds ezpz's group; ``plan``: Fabric makes it once, through ezpz's cluster environment."""
    _need_lightning()
    proc = subprocess.run(
        [need_tool("torchrun"), "--nproc-per-node", "2", "--master-port", str(free_port()), SCRIPT, mode],
        env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="60"), capture_output=True, text=True, timeout=300,
    )
    _check(proc, "torchrun", inits=inits)


def test_docs_fabric_script_runs_under_torchrun(tmp_path):
    """docs/lightning.md's whole script, as printed there, on 2 torchrun ranks."""
    _need_lightning()
    text = (Path(__file__).parents[1] / "docs" / "lightning.md").read_text(encoding="utf-8")
    found = re.search(r"```python\n(.*?)\n```", text[text.index("## The whole script"):], flags=re.DOTALL)
    assert found, "docs/lightning.md: no ```python block under '## The whole script'"
    script = tmp_path / "train_fabric.py"
    script.write_text(found.group(1) + "\n", encoding="utf-8")
    proc = subprocess.run(
        [need_tool("torchrun"), "--nproc-per-node", "2", "--master-port", str(free_port()), str(script)],
        cwd=tmp_path, env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="60"), capture_output=True, text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "step 4 loss " in proc.stdout
    for rank in (0, 1):
        assert f"rank {rank} of 2 on cpu (torchrun, " in proc.stdout, proc.stdout
