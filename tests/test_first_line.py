"""The main job's first line names the launcher it detected and where the layout was read.

``[ezpz] torchrun: 2 ranks on 1 node (TORCHELASTIC_RUN_ID, RANK); device cpu ...``: a user sees which launcher
ezpz believed started the job without ``--explain``. Real launchers, the real example job
(``python -m ezpz.examples.train``); srun is checked in tests/test_live_slurm.py.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import clean_env, need_tool
from test_real_launchers import free_port

pytestmark = pytest.mark.one_torch  # launch plumbing: the main job's first line: runs on the pinned torch only (docs/ci.md)

RECORDED = {  # environments as each launcher sets them (the detectors' docstrings cite the sources)
    "torchrun: 4 ranks on 2 nodes (TORCHELASTIC_RUN_ID, RANK)": {
        "TORCHELASTIC_RUN_ID": "j", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "RANK": "2", "WORLD_SIZE": "4",
        "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "n0", "MASTER_PORT": "29500"},
    "pals: 2 ranks on 1 node (PALS_RANKID)": {
        "PALS_RANKID": "0", "PMI_RANK": "0", "PMI_SIZE": "2", "PMI_LOCAL_RANK": "0", "PMI_LOCAL_SIZE": "2",
        "PALS_APID": "7", "MASTER_PORT": "29500"},
    "env: 1 rank on 1 node (RANK)": {"RANK": "0", "WORLD_SIZE": "1"},
    "no launcher: 1 rank on 1 node (no launcher variables set)": {},
}


@pytest.mark.parametrize("want", list(RECORDED))
def test_the_summary_names_the_launcher_and_its_variables(want):
    from ezpz.launch_env.detectors import detect_layout

    assert detect_layout(RECORDED[want]).summary == want


TRAIN = ["-m", "ezpz.examples.train", "--steps", "2", "--log-every", "2", "--batch-size", "4"]


def first_line(argv: list[str]) -> str:
    proc = subprocess.run(argv, env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120"), capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()[0]


def test_one_process_says_no_launcher():
    line = first_line([sys.executable, *TRAIN])
    assert line.startswith("[ezpz] no launcher: 1 rank on 1 node (no launcher variables set); device "), line


@pytest.mark.launcher
def test_torchrun():
    torchrun = need_tool("torchrun")
    line = first_line([torchrun, "--nproc-per-node", "2", "--master-port", str(free_port()), *TRAIN])
    assert line.startswith("[ezpz] torchrun: 2 ranks on 1 node (TORCHELASTIC_RUN_ID, RANK); device "), line


@pytest.mark.launcher
def test_open_mpi_mpiexec():
    mpiexec = need_tool("mpiexec.openmpi")
    line = first_line([mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", "2", sys.executable, *TRAIN])
    assert line.startswith("[ezpz] openmpi: 2 ranks on 1 node (OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK); "), line


@pytest.mark.launcher
def test_mpich_mpiexec():
    mpiexec = need_tool("mpiexec.mpich")
    line = first_line([mpiexec, "-n", "2", sys.executable, *TRAIN])
    assert line.startswith("[ezpz] hydra: 2 ranks on 1 node (PMI_RANK); device "), line
