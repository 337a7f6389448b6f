"""Scripts written in the original ezpz's style, run unmodified: plain python, torchrun x2, MPICH mpiexec x2.

Each compares what the original's docs promise: every rank knows its rank and
device, INFO lines come from rank 0 only and are formatted, warnings from
every rank, timed functions log their timing on rank 0.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, need_tool

SCRIPTS = Path(__file__).parent / "scripts" / "original_style"
HELLO, TRAIN = str(SCRIPTS / "hello_ranks.py"), str(SCRIPTS / "train_loop.py")
MESH = str(SCRIPTS / "mesh_and_wrappers.py")
STAMP = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\]"
HELLO_INFO = re.compile(STAMP + r"\[I\]\[__main__:\d+\] hello from rank (\d+) of (\d+) on (\w+)")
HELLO_WARN = re.compile(STAMP + r"\[W\]\[__main__:\d+\] rank (\d+) says hi")
STEP_INFO = re.compile(STAMP + r"\[I\]\[__main__:\d+\] step=(\d+) loss=\d+\.\d{4} metrics=")
TIMING = re.compile(STAMP + r"\[I\]\[ezpz\.timing:\d+\] train_step\((\d+)\) took \d+\.\d{4} s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rows(stdout: str) -> list[dict]:
    """One JSON object per rank; found anywhere in the text, since a launcher may merge ranks' lines."""
    decoder = json.JSONDecoder()
    found = [decoder.raw_decode(stdout, m.start())[0] for m in re.finditer(r'\{"rank"', stdout)]
    return sorted(found, key=lambda r: r["rank"])


def launch(how: str, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120")
    if how == "python":
        cmd = [sys.executable, script, *args]
    elif how == "torchrun":
        cmd = [need_tool("torchrun"), "--nproc-per-node", "2", "--master-port", str(free_port()), script, *args]
    else:
        cmd = [need_tool("mpiexec.mpich"), "-n", "2", sys.executable, script, *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_hello_script_under_plain_python_prints_its_info_line():
    """Must show: get_logger(__name__) + logger.info("... %s", x), ezpz.distributed.get_rank(),
    get_dist_info() and @ezpz.timeitlogit(rank=0), under plain python, INFO line formatted on rank 0."""
    proc = launch("python", HELLO)
    lines = proc.stdout.splitlines()
    assert re.fullmatch(STAMP + r"\[I\]\[__main__:\d+\] hello from rank 0 of 1 on cpu", lines[0]), lines
    assert re.fullmatch(STAMP + r"\[W\]\[__main__:\d+\] rank 0 says hi", lines[1]), lines
    (row,) = rows(proc.stdout)
    assert row == {"rank": 0, "rank_before_setup": 0, "local_rank": 0, "world_size": 1, "device": "cpu",
                   "backend": "gloo", "info_rank": 0, "scheduler": "single", "double": 42}
    assert proc.stderr == ""


@pytest.mark.launcher
@pytest.mark.parametrize(("how", "scheduler"), [("torchrun", "torchrun"), ("mpich", "hydra")])
def test_hello_script_on_two_ranks(how, scheduler):
    proc = launch(how, HELLO)
    got = rows(proc.stdout)
    assert [r["rank"] for r in got] == [0, 1]
    for r in got:
        assert r["rank_before_setup"] == r["info_rank"] == r["local_rank"] == r["rank"]
        assert (r["world_size"], r["device"], r["backend"], r["scheduler"], r["double"]) == (2, "cpu", "gloo",
                                                                                          scheduler, 42)
    assert HELLO_INFO.findall(proc.stdout) == [("0", "2", "cpu")]  # INFO from rank 0 only
    assert sorted(HELLO_WARN.findall(proc.stdout)) == ["0", "1"]  # warnings from every rank


@pytest.mark.launcher
@pytest.mark.parametrize("how", ["python", "torchrun", "mpich"])
def test_training_loop_script(how):
    proc = launch(how, TRAIN, "3")
    world = 1 if how == "python" else 2
    got = rows(proc.stdout)
    assert [r["rank"] for r in got] == list(range(world))
    for r in got:
        assert (r["world_size"], r["device"], r["steps"], r["all_reduce"]) == (world, "cpu", 3, world)
        assert r["wrapped"] == ("Sequential" if world == 1 else "DistributedDataParallel")
    assert STEP_INFO.findall(proc.stdout) == ["0", "1", "2"]  # rank 0 only, once per step
    assert TIMING.findall(proc.stdout) == ["0", "1", "2"]


@pytest.mark.launcher
def test_tensor_parallel_mesh_and_wrappers_under_torchrun():
    """setup_torch(tensor_parallel_size=2) gives the original's layout (tp fastest) as a DeviceMesh."""
    got = rows(launch("torchrun", MESH).stdout)
    assert [r["rank"] for r in got] == [0, 1]
    for r in got:
        assert r["mesh"] == {"dp": 1, "pp": 1, "cp": 1, "tp": 2} and r["tp_sum"] == 3.0
        assert r["broadcast"] == {"from": 0}
        assert r["wrapped"] == {"ddp": "DistributedDataParallel", "fsdp2": "FSDPSequential",
                                "fsdp": "refused: torch's FSDP1 refuses the CPU"}
