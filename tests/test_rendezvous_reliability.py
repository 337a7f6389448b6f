"""Every wait bounded, one job one world, re-setup in one process: real sockets, real launchers.

Reliability guarantees checked here (listed in docs/security.md):

- a non-zero rank whose MASTER_ADDR:MASTER_PORT is a listener that accepts and never
  speaks fails with RendezvousTimeoutError within EZPZ_TIMEOUT + 10 s;
- a store that dies mid-rendezvous ends in a named error within the same bound;
- a process of another launch that reaches a job's store is refused with
  JobMismatchError, the owner names it, and its sums stay right;
- two MPICH jobs side by side with no MASTER_PORT each get their own world;
- setup() -> teardown() -> setup() cycles in one process complete under torchrun and Open MPI;
- ezpz's PMI exchange coexists with mpi4py's MPI_Init under MPICH.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import clean_env, need_tool, rank_rows

HERE = Path(__file__).parent
ALLREDUCE = str(HERE / "scripts" / "allreduce_check.py")
CYCLES = str(HERE / "scripts" / "cycles_check.py")
TIMEOUT_S = 3
# plan() first: the clock then times the rendezvous, not cold imports and probes (seconds on a loaded machine,
# e.g. beside another pytest-xdist worker)
TIMED_SETUP = """
import json, sys, time, ezpz
ezpz.hooks.plan()
t = time.monotonic()
try:
    ezpz.hooks.setup()
    print(json.dumps({"error": None}))
except Exception as err:
    print(json.dumps({"error": type(err).__name__, "text": str(err), "s": time.monotonic() - t}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_one(port: int, **extra: str) -> dict[str, str]:
    return clean_env(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port), EZPZ_TIMEOUT=str(TIMEOUT_S), **extra)


def timed_setup(env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", TIMED_SETUP], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S + 60)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(90)
def test_listener_that_accepts_and_never_speaks_is_a_named_error_within_timeout_plus_10s():
    held: list[socket.socket] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)

        def accept_forever() -> None:
            while True:
                try:
                    held.append(listener.accept()[0])  # accept, never read or write
                except OSError:
                    return

        threading.Thread(target=accept_forever, daemon=True).start()
        out = timed_setup(rank_one(listener.getsockname()[1]))
    for conn in held:
        conn.close()
    assert out["error"] == "RendezvousTimeoutError", out
    assert out["s"] < TIMEOUT_S + 10, out
    assert "never answered" in out["text"] and "MASTER_PORT" in out["text"]


DYING_STORE = """
import datetime, os, time
import torch.distributed as dist
from ezpz.launch_env.store import fingerprint
store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=30), wait_for_workers=False)
store.set("ezpz/owner", fingerprint("env", None, 2))  # a genuine claim: rank 1 gets past the ownership check
print(store.port, flush=True)
deadline = time.monotonic() + 60
while store.num_keys() < 2 and time.monotonic() < deadline:  # rank 1 has joined the process group's rendezvous
    time.sleep(0.05)
os._exit(0)  # rank 0 dies mid-rendezvous
"""


@pytest.mark.timeout(90)
def test_store_that_dies_mid_rendezvous_is_a_named_error_within_timeout_plus_10s():
    """Rank 0 claims the store, then dies while rank 1 waits in the process group's rendezvous."""
    owner = subprocess.Popen([sys.executable, "-c", DYING_STORE], env=clean_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(owner.stdout.readline())
        out = timed_setup(rank_one(port))
    finally:
        owner.kill()
        owner.wait(10)
    assert out["error"] in ("RendezvousError", "RendezvousTimeoutError"), out
    assert out["s"] < TIMEOUT_S + 10, out
    assert f"127.0.0.1:{port}" in out["text"]


FOREIGN_OWNER = """
import datetime, sys, time
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=30), wait_for_workers=False)
store.set("ezpz/owner", "another-launch")
print(store.port, flush=True)
deadline = time.monotonic() + 30
while store.add("ezpz/refused", 0) < 1 and time.monotonic() < deadline:
    time.sleep(0.1)
print(store.get("ezpz/refused/1").decode(), flush=True)
"""


@pytest.mark.timeout(90)
def test_process_of_another_launch_is_refused_and_recorded_for_the_owner():
    owner = subprocess.Popen([sys.executable, "-c", FOREIGN_OWNER], env=clean_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(owner.stdout.readline())
        out = timed_setup(rank_one(port))
        recorded = owner.stdout.readline()
    finally:
        owner.kill()
        owner.wait(10)
    assert out["error"] == "JobMismatchError", out
    assert "another-launch" in out["text"] and "not counted as a rank" in out["text"]
    assert "rank 1 of 2 (env" in recorded


def _mpich(*extra_env: str) -> list[str]:
    return [need_tool("mpiexec.mpich"), "-n", "2", "env", "OMP_NUM_THREADS=1", f"EZPZ_TIMEOUT={30}", *extra_env,
            sys.executable]


def _side_by_side(extra_env: tuple[str, ...], code_or_script: list[str]) -> list[subprocess.CompletedProcess[str]]:
    procs = [subprocess.Popen(_mpich(*extra_env) + code_or_script, env=clean_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    done = []
    for p in procs:
        out, err = p.communicate(timeout=150)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


@pytest.mark.launcher
@pytest.mark.timeout(400)
def test_two_mpich_jobs_side_by_side_without_master_port_each_get_their_own_world():
    """Hydra exports no job id: rank 0 binds a free port and publishes it over PMI (2 rounds; 10 in benchmarks/)."""
    for _ in range(2):
        for job in _side_by_side((), [ALLREDUCE, "2"]):
            assert job.returncode == 0, job.stdout + job.stderr
            rows = rank_rows(job.stdout)
            assert [(r["rank"], r["sum"], r["launcher"]) for r in rows] == [(0, 3.0, "hydra"), (1, 3.0, "hydra")]


SUM_AND_LINGER = """
import json, logging, time, ezpz, torch, torch.distributed as dist
logging.basicConfig()
rt = ezpz.hooks.setup()
t = torch.tensor([rt.rank + 1.0]); dist.all_reduce(t)
print(json.dumps({"rank": rt.rank, "sum": t.item()}), flush=True)
time.sleep(4)  # keep the store up while the other job's ranks arrive
ezpz.hooks.teardown()
"""


@pytest.mark.launcher
@pytest.mark.timeout(300)
def test_two_mpich_jobs_forced_onto_one_port_never_mix():
    """Both jobs given the same MASTER_PORT: one owns it; the other's ranks fail with named errors on both sides."""
    port = free_port()
    jobs = _side_by_side((f"MASTER_PORT={port}",), ["-c", SUM_AND_LINGER])
    winners = [j for j in jobs if j.returncode == 0]
    assert len(winners) >= 1, [j.stderr for j in jobs]
    for job in jobs:
        for row in rank_rows(job.stdout):
            assert row["sum"] == 3.0  # never a wrong sum: a stranger is never counted as a rank
    for loser in (j for j in jobs if j.returncode != 0):
        assert "JobMismatchError" in loser.stderr or "MASTER_PORT" in loser.stderr, loser.stderr
        if "JobMismatchError" in loser.stderr:
            assert "job_fingerprint_refused" in "".join(w.stderr for w in winners)


def _cycles(cmd: list[str]) -> list[dict]:
    env = clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="60")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    rows = rank_rows(proc.stdout)
    assert proc.returncode == 0 and len(rows) == 2 and all(r["ok"] for r in rows), proc.stdout + proc.stderr
    return rows


@pytest.mark.launcher
@pytest.mark.timeout(400)
def test_three_setup_teardown_cycles_under_torchrun_twice():
    torchrun = need_tool("torchrun")
    for _ in range(2):
        rows = _cycles([torchrun, "--nproc-per-node", "2", "--master-port", str(free_port()), CYCLES, "2", "3", "ezpz"])
        assert [r["sums"] for r in rows] == [[3.0, 3.0, 3.0]] * 2


@pytest.mark.launcher
@pytest.mark.timeout(400)
def test_three_setup_teardown_cycles_under_openmpi_twice():
    mpiexec = need_tool("mpiexec")
    for _ in range(2):
        rows = _cycles([mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", "2", "-x", "OMP_NUM_THREADS",
                        "-x", "EZPZ_TIMEOUT", sys.executable, CYCLES, "2", "3", "ezpz"])
        assert [r["sums"] for r in rows] == [[3.0, 3.0, 3.0]] * 2


def _mpi4py_for_mpich() -> str:
    """A PYTHONPATH entry with mpi4py built against MPICH, or skip saying why."""
    where = os.environ.get("EZPZ_TEST_MPI4PY_MPICH", "")
    probe = "import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; print(MPI.Get_library_version())"
    proc = subprocess.run([sys.executable, "-c", probe], env=clean_env(PYTHONPATH=where), capture_output=True,
                          text=True, timeout=60)
    if proc.returncode != 0 or "MPICH" not in proc.stdout:
        pytest.skip("mpi4py built against MPICH not importable (MPICC=mpicc.mpich pip install --no-binary mpi4py "
                    "mpi4py, then set EZPZ_TEST_MPI4PY_MPICH to its directory)")
    return where


MPI_AFTER_EZPZ = """
import json, sys, ezpz, torch, torch.distributed as dist
rt = ezpz.hooks.setup()
t = torch.tensor([rt.rank + 1.0]); dist.all_reduce(t)
from mpi4py import MPI  # MPI_Init after ezpz used the PMI connection
c = MPI.COMM_WORLD
print(json.dumps({"rank": rt.rank, "sum": t.item(), "mpi_rank": c.Get_rank(), "mpi_sum": c.allreduce(rt.rank + 1),
                  "exchange": rt.plan.launch.exchange}), flush=True)
ezpz.hooks.teardown()
"""


@pytest.mark.launcher
@pytest.mark.timeout(200)
def test_pmi_exchange_coexists_with_a_later_mpi_init_from_mpi4py():
    where = _mpi4py_for_mpich()
    proc = subprocess.run(_mpich(f"PYTHONPATH={where}") + ["-c", MPI_AFTER_EZPZ], env=clean_env(),
                          capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rank_rows(proc.stdout)
    assert [(r["rank"], r["mpi_rank"], r["sum"], r["mpi_sum"], r["exchange"]) for r in rows] == \
        [(0, 0, 3.0, 3, "pmi"), (1, 1, 3.0, 3, "pmi")]


def test_two_launches_in_one_allocation_get_their_own_port_and_fingerprint():
    """Ensemble members share SLURM_JOB_ID/PBS_JOBID; their launchers' own ids keep them apart (recorded facts)."""
    from test_launch_env import OPENMPI, PALS, SLURM_STEP

    from ezpz.launch_env import detect_launch_env
    from ezpz.launch_env.store import fingerprint

    job_wide = {"SLURM_JOB_ID": "4242", "PBS_JOBID": "4242.pbs"}
    pairs = [
        ({**OPENMPI, **job_wide}, {**OPENMPI, **job_wide, "OMPI_MCA_ess_base_jobid": "2033451010"}),
        ({**PALS, **job_wide, "MASTER_ADDR": "h0"}, {**PALS, **job_wide, "MASTER_ADDR": "h0", "PALS_APID": "other"}),
        (SLURM_STEP, {**SLURM_STEP, "SLURM_STEP_ID": "1", "SLURM_STEPID": "1"}),
    ]
    for first, second in pairs:
        a, b = detect_launch_env(first), detect_launch_env(second)
        assert a.master_port != b.master_port, (a.launcher, a.master_port)
        assert fingerprint(a.launcher, a.job_id, a.world_size) != fingerprint(b.launcher, b.job_id, b.world_size)
