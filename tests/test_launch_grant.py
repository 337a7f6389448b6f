"""``ezpz launch`` with no -n inside an allocation: as many ranks as the scheduler granted.

Slurm variables below are as ``salloc``/``sbatch`` set them (Slurm 22.05,
``src/common/env.c``; the first case was recorded from ``salloc -n 2`` on this
project's one-node test Slurm). PBS node files list a host once per ``mpiprocs``.
Device counts are recorded figures fed to the pure policy, never this host's.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from conftest import clean_env
from ezpz.errors import ConfigError
from ezpz.launch_drivers.grant import Grant, granted, pbs_grant, slurm_grant, use_grant
from test_cli_support import ezpz

pytestmark = pytest.mark.one_torch  # launch plumbing: the launch grant: runs on the pinned torch only (docs/ci.md)

SALLOC_N2 = {  # recorded: salloc -n 2 (one node, 2 CPUs granted)
    "SLURM_JOB_ID": "2", "SLURM_JOBID": "2", "SLURM_NTASKS": "2", "SLURM_NPROCS": "2", "SLURM_JOB_NUM_NODES": "1",
    "SLURM_NNODES": "1", "SLURM_TASKS_PER_NODE": "2", "SLURM_JOB_NODELIST": "vm", "SLURM_NODELIST": "vm",
    "SLURM_JOB_CPUS_PER_NODE": "2",
}
SBATCH_N3_PER_NODE4 = {  # sbatch -N 3 --ntasks-per-node 4
    "SLURM_JOB_ID": "77", "SLURM_NTASKS": "12", "SLURM_NTASKS_PER_NODE": "4", "SLURM_JOB_NUM_NODES": "3",
    "SLURM_TASKS_PER_NODE": "4(x3)", "SLURM_JOB_NODELIST": "nid[001-003]",
}
SALLOC_N2_NODES_ONLY = {  # salloc -N 2: no task count asked, one task per node
    "SLURM_JOB_ID": "78", "SLURM_JOB_NUM_NODES": "2", "SLURM_TASKS_PER_NODE": "1(x2)", "SLURM_JOB_NODELIST": "n[1-2]",
}
SBATCH_UNEVEN = {  # sbatch -n 7 -N 2: Slurm packs 4 then 3
    "SLURM_JOB_ID": "79", "SLURM_NTASKS": "7", "SLURM_JOB_NUM_NODES": "2", "SLURM_TASKS_PER_NODE": "4,3",
    "SLURM_JOB_NODELIST": "n[1-2]",
}


@pytest.mark.parametrize(("environ", "want"), [
    (SALLOC_N2, (2, 2, 1, True)),
    (SBATCH_N3_PER_NODE4, (12, 4, 3, True)),
    (SALLOC_N2_NODES_ONLY, (2, 1, 2, False)),
    (SBATCH_UNEVEN, (7, 4, 2, True)),
])
def test_slurm_grant_from_recorded_allocations(environ, want):
    grant = slurm_grant(environ)
    assert grant is not None
    assert (grant.n, grant.ppn, grant.nodes, grant.explicit) == want
    assert "Slurm allocation" in grant.source


def test_no_grant_outside_a_job(tmp_path):
    assert granted({"PATH": "/usr/bin"}) is None
    assert pbs_grant({"PBS_NODEFILE": str(tmp_path / "missing")}) is None


def test_a_garbled_slurm_count_names_the_variable():
    with pytest.raises(ConfigError, match="SLURM_NTASKS.*x2"):
        slurm_grant({**SALLOC_N2, "SLURM_NTASKS": "x2"})


def _nodefile(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "nodefile"
    path.write_text("".join(f"{h}\n" for h in lines))
    return str(path)


def test_pbs_grant_counts_lines_per_host(tmp_path):
    path = _nodefile(tmp_path, ["x1", "x1", "x1", "x2", "x2", "x2"])  # select=2:mpiprocs=3
    grant = pbs_grant({"PBS_JOBID": "1.pbs", "PBS_NODEFILE": path})
    assert grant == Grant(n=6, ppn=3, nodes=2, explicit=True, source=grant.source)
    single = pbs_grant({"PBS_NODEFILE": _nodefile(tmp_path, ["x1", "x2", "x3"])})
    assert single is not None and (single.n, single.ppn, single.nodes, single.explicit) == (3, 1, 3, False)


CPU = (1, "cpu is one device shared by all ranks")
FOUR_GPUS = (4, "4 cuda device(s) per node (nvidia)")  # recorded: a 4 x A100 node


@pytest.mark.parametrize(("grant", "devices", "shared", "want"), [
    (Grant(n=2, ppn=2, nodes=1, explicit=True, source="s"), CPU, True, (2, 2)),  # CPU runs what was granted
    (Grant(n=2, ppn=1, nodes=2, explicit=False, source="s"), CPU, True, (2, 1)),
    (Grant(n=16, ppn=8, nodes=2, explicit=True, source="s"), FOUR_GPUS, False, (8, 4)),  # devices cap
    (Grant(n=4, ppn=2, nodes=2, explicit=True, source="s"), FOUR_GPUS, False, (4, 2)),  # fewer asked: kept
    (Grant(n=2, ppn=1, nodes=2, explicit=False, source="s"), FOUR_GPUS, False, (8, 4)),  # default: one per device
])
def test_use_grant_policy(grant, devices, shared, want):
    n, ppn, why = use_grant(grant, devices, shared)
    assert (n, ppn) == want
    assert why


def dry_run(**env: str) -> tuple[list[str], str]:
    proc = ezpz("launch", "--dry-run", "--", "python", "job.py", env=clean_env(EZPZ_DEVICE="cpu", **env))
    assert proc.returncode == 0, proc.stderr
    return shlex.split(proc.stdout.strip()), proc.stderr


def test_launch_in_salloc_runs_what_was_granted():
    argv, said = dry_run(**SALLOC_N2)
    assert argv[:7] == ["srun", "-N", "1", "-n", "2", "--ntasks-per-node", "2"]
    assert "as granted (Slurm allocation: SLURM_NTASKS=2" in said


def test_launch_in_a_multi_node_batch_job():
    argv, said = dry_run(**SBATCH_N3_PER_NODE4)
    assert argv[:7] == ["srun", "-N", "3", "-n", "12", "--ntasks-per-node", "4"]
    assert "SLURM_NTASKS=12" in said


def test_an_explicit_n_still_wins_inside_an_allocation():
    proc = ezpz("launch", "--dry-run", "-n", "1", "--", "python", "job.py",
                env=clean_env(EZPZ_DEVICE="cpu", **SALLOC_N2))
    assert proc.returncode == 0, proc.stderr
    assert shlex.split(proc.stdout)[:5] == ["srun", "-N", "1", "-n", "1"]


def test_launch_in_a_pbs_job_uses_the_node_file(tmp_path):
    path = _nodefile(tmp_path, ["x1", "x1", "x2", "x2"])
    argv, said = dry_run(PBS_JOBID="9.pbs", PBS_NODEFILE=path)
    assert argv[0] == "mpiexec" and "4" in argv[:4]
    assert f"PBS_NODEFILE={path}" in said and "as granted" in said


def test_open_mpi_ranks_are_told_the_hostfile(tmp_path):
    """Open MPI exports no host list to ranks: ezpz launch passes HOSTFILE so they derive the rendezvous."""
    from conftest import need_tool

    need_tool("mpiexec")
    hosts = tmp_path / "hosts"
    hosts.write_text("198.18.0.1 slots=2\n198.18.0.2 slots=2\n")
    proc = ezpz("launch", "--dry-run", "--launcher", "mpiexec", "--hostfile", str(hosts), "--ppn", "2", "--",
                "python", "job.py", env=clean_env(EZPZ_DEVICE="cpu"))
    assert proc.returncode == 0, proc.stderr
    argv = shlex.split(proc.stdout)
    if "--map-by" not in argv:
        pytest.skip("mpiexec on PATH is not Open MPI")
    assert argv[argv.index(f"HOSTFILE={hosts.resolve()}") - 1] == "-x"
