"""ezpz leaves Hydra's PMI session with cmd=finalize, so a rank that finished is never reported as failed.

Hydra (MPICH's mpiexec) counts a process whose PMI connection closes after ``cmd=init`` and without
``cmd=finalize`` as failed (exit status 1, "Hangup (signal 1)") and kills its node's other ranks, whenever it sees
the closed connection before the real exit status: a race that failed CI once (tests/test_lightning_live.py). The
scripts here force the losing order: an exit handler registered before ezpz's (so it runs after it) closes
``PMI_FD`` and waits, so Hydra sees the closed connection first. Real mpiexec.mpich, real gloo.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import clean_env, need_tool, rank_rows

pytestmark = pytest.mark.launcher

SCRIPT = """
import atexit, json, os, sys, time
def close_pmi_first():  # runs after ezpz's handlers (atexit is last in, first out)
    os.close(int(os.environ["PMI_FD"])); time.sleep(1.0)
atexit.register(close_pmi_first)
import ezpz, torch, torch.distributed as dist
if sys.argv[1] == "without-release":  # the control: what happened before ezpz said cmd=finalize
    import ezpz.launch_env.pmi_release as release
    release.release_at_exit = lambda *args, **kwargs: None
rt = ezpz.hooks.setup()
t = torch.tensor([rt.rank + 1.0]); dist.all_reduce(t)
print(json.dumps({"rank": rt.rank, "sum": t.item(), "exchange": rt.plan.launch.exchange}), flush=True)
ezpz.hooks.teardown()
"""


def _run(mode: str, *hydra_args: str) -> subprocess.CompletedProcess[str]:
    cmd = [need_tool("mpiexec.mpich"), *hydra_args, "-n", "2", sys.executable, "-c", SCRIPT, mode]
    return subprocess.run(cmd, env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="30"), capture_output=True,
                          text=True, timeout=150)


@pytest.mark.timeout(200)
def test_ranks_that_finish_after_the_pmi_rendezvous_exit_0_even_when_hydra_sees_the_closed_connection_first():
    """ezpz's duplicate of PMI_FD is closed after the rendezvous; the session is finalized at exit over a new one."""
    proc = _run("with-release")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [(r["rank"], r["sum"], r["exchange"]) for r in rank_rows(proc.stdout)] == [(0, 3.0, "pmi"), (1, 3.0, "pmi")]


@pytest.mark.timeout(200)
def test_control_without_the_finalize_hydra_kills_the_finished_job():
    """Proves the scenario above is the failing one: without ezpz's cmd=finalize the same job is killed."""
    proc = _run("without-release")
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "BAD TERMINATION" in proc.stdout + proc.stderr


MPI_PROBE = """
import json, sys
from ezpz.launch_env.pmi_release import mpi_initialized_in_process
before = mpi_initialized_in_process()
import mpi4py
mpi4py.rc.initialize = False
from mpi4py import MPI
loaded = mpi_initialized_in_process()
MPI.Init()
via_mpi4py = mpi_initialized_in_process()
del sys.modules["mpi4py.MPI"]  # as a C library that linked MPI would look: only the mapped libmpi is left to ask
via_library = mpi_initialized_in_process()
sys.modules["mpi4py.MPI"] = MPI
print(json.dumps([before, loaded, via_mpi4py, via_library]))
"""


@pytest.mark.timeout(120)
def test_an_mpi_library_that_initialised_mpi_keeps_the_session_through_mpi4py_or_the_mapped_library():
    """ezpz must not finalize a session MPI_Finalize will end (Hydra never answers a second finalize)."""
    from test_rendezvous_reliability import _mpi4py_for_mpich

    where = _mpi4py_for_mpich()
    proc = subprocess.run([sys.executable, "-c", MPI_PROBE], env=clean_env(PYTHONPATH=where), capture_output=True,
                          text=True, timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[false, false, true, true]"


EXIT_NOW = """
import os, sys, time
import ezpz, torch.distributed as dist
rt = ezpz.hooks.setup()
dist.barrier()
if rt.rank == 1:  # as the hang watchdog and the preemption deadline leave: os._exit skips atexit
    if sys.argv[1] == "finalize":
        from ezpz.launch_env.pmi_release import finalize_now
        finalize_now(2.0)
    os.close(int(os.environ["PMI_FD"])); time.sleep(1.0)
    os._exit(7)
time.sleep(3.0)
"""


@pytest.mark.timeout(200)
@pytest.mark.parametrize("mode", ["finalize", "control"])
def test_a_rank_leaving_by_os_exit_is_reported_with_its_own_status_after_finalize_now(mode):
    cmd = [need_tool("mpiexec.mpich"), "-n", "2", sys.executable, "-c", EXIT_NOW, mode]
    proc = subprocess.run(cmd, env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="30"), capture_output=True,
                          text=True, timeout=150)
    out = proc.stdout + proc.stderr
    if mode == "finalize":  # mpiexec passes the rank's own status on
        assert proc.returncode == 7, out[-3000:]
    else:  # without it Hydra kills the job on seeing the closed connection and reports its own status instead
        assert proc.returncode not in (0, 7) and "BAD TERMINATION" in out, out[-3000:]
