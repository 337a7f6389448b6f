"""Real multi-process runs through ezpz.hooks.setup(): torchrun, Open MPI's mpiexec, plain python, a missing rank."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env, need_tool, rank_rows

SCRIPT = str(Path(__file__).parent / "scripts" / "allreduce_check.py")
pytestmark = pytest.mark.launcher


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_layout(rows: list[dict], world: int, launcher: str) -> None:
    assert [r["rank"] for r in rows] == list(range(world))
    assert sorted(r["local_rank"] for r in rows) == list(range(world))  # one node
    for r in rows:
        assert r["ok"] and r["sum"] == world * (world + 1) / 2
        assert (r["world_size"], r["local_world_size"], r["node_rank"], r["num_nodes"]) == (world, world, 0, 1)
        assert r["launcher"] == launcher and r["backend"] == "gloo" and r["pg"] is True


def test_torchrun_four_ranks():
    torchrun = need_tool("torchrun")
    proc = subprocess.run(
        [torchrun, "--nproc-per-node", "4", "--master-port", str(free_port()), SCRIPT, "4"],
        env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120"), capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_layout(rank_rows(proc.stdout), 4, "torchrun")


def test_openmpi_mpiexec_four_ranks_without_mpi4py():
    mpiexec = need_tool("mpiexec")
    proc = subprocess.run(
        [mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", "4", "-x", "OMP_NUM_THREADS=1",
         sys.executable, SCRIPT, "4"],
        env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120"), capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_layout(rank_rows(proc.stdout), 4, "openmpi")


def test_plain_python_without_launcher_or_mpi():
    env = clean_env()
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not Path(p, "mpiexec").exists())
    code = "import sys; sys.modules['mpi4py'] = None; sys.argv = ['x', '1']; exec(open(%r).read())" % SCRIPT
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (row,) = rank_rows(proc.stdout)
    assert row["launcher"] == "single" and row["world_size"] == 1 and row["pg"] is False


@pytest.mark.parametrize("present_rank", [0, 1])
def test_missing_rank_times_out_with_a_named_rendezvous(present_rank):
    """World size 2, only one rank started: setup() must fail within EZPZ_TIMEOUT, naming the rendezvous."""
    port = free_port()
    env = clean_env(RANK=str(present_rank), WORLD_SIZE="2", LOCAL_RANK=str(present_rank), LOCAL_WORLD_SIZE="2",
                    MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), EZPZ_TIMEOUT="3")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, SCRIPT, "2"], env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    assert "RendezvousTimeoutError" in proc.stderr, proc.stderr
    assert f"127.0.0.1:{port}" in proc.stderr and "EZPZ_TIMEOUT" in proc.stderr
    assert f"rank {present_rank} of 2" in proc.stderr
    assert elapsed < 60, f"took {elapsed:.0f}s for a 3s timeout"
