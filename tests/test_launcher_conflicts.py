"""The launcher that started the process wins, loudly, over stale RANK/WORLD_SIZE (recorded facts + real mpiexec)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, need_tool, rank_rows
from test_launch_env import HYDRA, OPENMPI, PALS, SLURM_STEP, TORCHRUN
from ezpz.errors import LaunchEnvError
from ezpz.launch_env import detect_launch_env

SCRIPT = str(Path(__file__).parent / "scripts" / "allreduce_check.py")
STALE = {"RANK": "0", "WORLD_SIZE": "1"}


def verdict(env, name: str) -> str:
    return next(a.reason for a in env.rejected if a.name == name)


@pytest.mark.parametrize("recorded", [OPENMPI, {**PALS, "MASTER_ADDR": "h0"}, {**HYDRA, "MASTER_ADDR": "h0"}, SLURM_STEP],
                         ids=["openmpi", "pals", "hydra", "slurm"])
def test_stale_rank_zero_of_one_is_ignored_and_named(recorded):
    clean = detect_launch_env(recorded)
    env = detect_launch_env({**recorded, **STALE})
    assert (env.launcher, env.rank, env.world_size) == (clean.launcher, clean.rank, clean.world_size)
    assert env.world_size > 1 and env.rank > 0
    assert any(i.startswith("RANK=0 ") for i in env.ignored) and any(i.startswith("WORLD_SIZE=1 ") for i in env.ignored)
    assert "unset RANK WORLD_SIZE" in env.sources["ignored"]
    assert verdict(env, "env").startswith("IGNORED") and f"rank {env.rank} of {env.world_size}" in verdict(env, "env")


def test_ignored_variables_are_in_the_trace():
    import ezpz

    _, explanation = ezpz.hooks.plan(environ={**OPENMPI, **STALE})
    text = str(explanation)
    assert "ignored: ('RANK=0 (openmpi says rank 1)', 'WORLD_SIZE=1 (openmpi says world_size 2)')" in text
    assert "unset RANK WORLD_SIZE" in text and "not env: IGNORED" in text


def test_agreeing_wrapper_variables_are_not_reported():
    env = detect_launch_env({**OPENMPI, "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert env.launcher == "openmpi" and env.ignored == () and "agrees" in verdict(env, "env")


def test_stray_local_rank_alone_is_ignored_and_named():
    env = detect_launch_env({**OPENMPI, "LOCAL_RANK": "0"})
    assert env.local_rank == 1 and env.ignored == ("LOCAL_RANK=0 (openmpi says local_rank 1)",)


def test_same_world_other_rank_uses_the_launcher():
    env = detect_launch_env({**OPENMPI, "RANK": "0", "WORLD_SIZE": "2"})
    assert env.rank == 1 and env.ignored == ("RANK=0 (openmpi says rank 1)",)


def test_two_different_multi_rank_worlds_raise_naming_both_sources_and_the_fix():
    with pytest.raises(LaunchEnvError) as caught:
        detect_launch_env({**OPENMPI, "RANK": "3", "WORLD_SIZE": "4"})
    text = str(caught.value)
    assert "RANK=3" in text and "WORLD_SIZE=4" in text and "OMPI_COMM_WORLD_SIZE" in text
    assert "unset RANK WORLD_SIZE" in text


def test_worker_spawned_by_a_one_process_launch_keeps_its_own_rank():
    one = {**OPENMPI, "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "RANK": "2", "WORLD_SIZE": "4", "MASTER_PORT": "29555"}
    env = detect_launch_env(one)
    assert (env.launcher, env.rank, env.world_size) == ("env", 2, 4)
    assert "spawned" in verdict(env, "openmpi")


def test_torchrun_under_mpiexec_keeps_torchrun():
    """torchrun is the innermost launcher: its workers inherit the agent's OMPI_* and must not take them."""
    env = detect_launch_env({**OPENMPI, **TORCHRUN, "OMPI_COMM_WORLD_RANK": "0"})
    assert env.launcher == "torchrun" and env.rank == 1 and env.ignored == ()


def _launch(cmd: list[str]) -> list[dict]:
    env = clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="60", **STALE)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("launch_variables_ignored") == 2, proc.stderr  # said on every rank
    return rank_rows(proc.stdout)


@pytest.mark.launcher
@pytest.mark.timeout(200)
def test_openmpi_two_ranks_with_stale_rank_zero_of_one():
    mpiexec = need_tool("mpiexec")
    rows = _launch([mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", "2", "-x", "RANK", "-x", "WORLD_SIZE",
                    sys.executable, SCRIPT, "2"])
    assert [(r["rank"], r["world_size"], r["launcher"], r["sum"]) for r in rows] == [(0, 2, "openmpi", 3.0),
                                                                                    (1, 2, "openmpi", 3.0)]
    assert rows[0]["ignored"] == ["WORLD_SIZE=1 (openmpi says world_size 2)"]
    assert rows[1]["ignored"] == ["RANK=0 (openmpi says rank 1)", "WORLD_SIZE=1 (openmpi says world_size 2)"]


@pytest.mark.launcher
@pytest.mark.timeout(200)
def test_mpich_two_ranks_with_stale_rank_zero_of_one():
    mpiexec = need_tool("mpiexec.mpich")
    rows = _launch([mpiexec, "-n", "2", sys.executable, SCRIPT, "2"])
    assert [(r["rank"], r["world_size"], r["launcher"], r["sum"]) for r in rows] == [(0, 2, "hydra", 3.0),
                                                                                    (1, 2, "hydra", 3.0)]
    assert all("WORLD_SIZE=1 (hydra says world_size 2)" in r["ignored"] for r in rows)
