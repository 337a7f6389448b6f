"""Under a live one-node Slurm (``bash scripts/slurm.sh start``): srun, salloc + ezpz launch, sbatch, mpiexec.

Skipped, with the reason, when no Slurm controller answers here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env, need_tool, probe_tool, rank_rows

SCRIPT = str(Path(__file__).parent / "scripts" / "allreduce_check.py")
EZPZ = [sys.executable, "-m", "ezpz"]
#: Jobs end on their own (-t minutes) even if a test is killed; salloc gives up if the node stays busy.
JOB = ["-t", "5", "--immediate=60"]


def _live_slurm() -> str | None:
    """None when a Slurm controller answers with a usable node, else why not (``sinfo`` tried twice)."""
    if shutil.which("sinfo") is None or shutil.which("srun") is None:
        return "Slurm client tools not installed (bash scripts/slurm.sh start installs and starts a one-node Slurm)"

    def usable(done: subprocess.CompletedProcess[str]) -> str | None:
        states = done.stdout.split()
        if not states:
            return "no node listed"
        if not any(s.startswith(("idle", "mix", "alloc")) for s in states[::2]):
            return f"no usable node ({done.stdout.strip()})"
        return None

    why = probe_tool(["sinfo", "-h", "-o", "%t %c"], timeout=15, judge=usable)
    return None if why is None else f"no live Slurm: {why}; run bash scripts/slurm.sh start"


_WHY_NOT = _live_slurm()
# One worker runs them all under pytest-xdist (--dist loadgroup, this group): the one node holds one job at a time, and a second
# job waiting for it gives up (salloc --immediate) under a parallel run.
pytestmark = [pytest.mark.slurm, pytest.mark.launcher, pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or ""),
              pytest.mark.xdist_group("live-slurm")]


def env() -> dict[str, str]:
    return clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120", EZPZ_DEVICE="cpu")


def run(argv: list[str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env(), capture_output=True, text=True, timeout=timeout, cwd="/tmp")


def check(rows: list[dict], world: int, launcher: str) -> None:
    assert [r["rank"] for r in rows] == list(range(world))
    for r in rows:
        assert r["ok"] and r["sum"] == world * (world + 1) / 2
        assert (r["world_size"], r["num_nodes"], r["node_rank"]) == (world, 1, 0)
        assert r["launcher"] == launcher and r["pg"] is True


def test_srun_two_tasks_set_up_and_all_reduce():
    proc = run(["srun", *JOB, "-n", "2", sys.executable, SCRIPT, "2"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check(rank_rows(proc.stdout), 2, "slurm")


def test_the_main_jobs_first_line_names_srun():
    proc = run(["srun", *JOB, "-n", "2", sys.executable, "-m", "ezpz.examples.train", "--steps", "2", "--log-every",
                "2", "--batch-size", "4"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("[ezpz] slurm: 2 ranks on 1 node (SLURM_STEP_NUM_TASKS, SLURM_PROCID); device "), first


def test_ezpz_launch_inside_salloc_runs_the_granted_two_ranks():
    proc = run(["salloc", *JOB, "-n", "2", *EZPZ, "launch", "--", sys.executable, SCRIPT, "2"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "as granted (Slurm allocation: SLURM_NTASKS=2" in proc.stderr
    check(rank_rows(proc.stdout), 2, "slurm")


def test_sbatch_script_that_runs_ezpz_launch(tmp_path):
    out = tmp_path / "job.out"
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{' '.join(EZPZ)} launch -- {sys.executable} {SCRIPT} 2\n")
    proc = run(["sbatch", "--wait", *JOB[:2], "-n", "2", "-o", str(out), str(script)])
    text = out.read_text() if out.exists() else ""
    assert proc.returncode == 0, proc.stdout + proc.stderr + text
    assert "as granted" in text
    check(rank_rows(text), 2, "slurm")


def test_open_mpi_mpiexec_inside_an_allocation():
    mpiexec = need_tool("mpiexec")
    proc = run(["salloc", *JOB, "-n", "2", mpiexec, "--allow-run-as-root", "-n", "2", sys.executable, SCRIPT, "2"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check(rank_rows(proc.stdout), 2, "openmpi")


def test_a_failing_rank_ends_the_step():
    code = ("import os, sys, time\n"
            "if os.environ['SLURM_PROCID'] == '1': sys.exit(3)\n"
            "time.sleep(200)\n")
    start = time.monotonic()
    proc = run(["salloc", *JOB, "-n", "2", *EZPZ, "launch", "--", sys.executable, "-c", code], timeout=180)
    took = time.monotonic() - start
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert took < 150, f"the surviving rank kept the step alive for {took:.0f}s"  # it would sleep 200 s
    assert "--kill-on-bad-exit=1" in proc.stderr


def test_doctor_inside_an_allocation_names_slurm_and_its_shape():
    proc = run(["salloc", *JOB, "-n", "2", *EZPZ, "doctor"])
    assert "srun: Slurm job" in proc.stdout, proc.stdout + proc.stderr
    assert "allocation: 2 task(s), at most 2 per node, on 1 node(s) (Slurm allocation: SLURM_NTASKS=2" in proc.stdout


def test_retries_inside_salloc_rerun_a_rank_that_failed_once(tmp_path):
    """ezpz launch --retries 1 inside salloc -n 2: rank 1 exits 3 in attempt 0; attempt 1 (same hosts) succeeds."""
    import json

    job = str(Path(__file__).parent / "scripts" / "supervised_job.py")
    proc = run(["salloc", *JOB, "-n", "2", *EZPZ, "launch", "--retries", "1", "--retry-delay", "0",
                "--job-dir", str(tmp_path / "job"), "--", sys.executable, job, "fail-once"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = (json.loads((tmp_path / "job" / f"attempt-{k}" / "verdict.json").read_text()) for k in (0, 1))
    assert first["status"] != 0 and second["status"] == 0, (first, second)
    assert "launcher srun" in proc.stderr and "rank 1 attempt 1" in proc.stdout
    assert not (tmp_path / "job" / "attempt-2").exists()
    print(f"\nsalloc -n 2: attempt 0 exit {first['status']} ({first['result']['wall_s']} s), "
          f"attempt 1 exit 0 ({second['result']['wall_s']} s)")


def test_kill_all_nodes_inside_salloc_reaches_the_job_through_srun(tmp_path):
    """ezpz kill --all-nodes (srun --overlap on each node) lists and stops the job ezpz launch started, only it."""
    job = str(Path(__file__).parent / "scripts" / "supervised_job.py")
    out = tmp_path / "job.out"
    script = tmp_path / "kill.sh"
    script.write_text(
        f"{sys.executable} -m ezpz launch -- {sys.executable} {job} sleep > {out} 2>&1 &\nL=$!\n"
        f"{sys.executable} -c 'import time; time.sleep(120)' &\nB=$!\n"
        f"for i in $(seq 100); do [ \"$(grep -c READY {out})\" = 2 ] && break; sleep 0.2; done\n"
        f"echo BYSTANDER $B\n{sys.executable} -m ezpz kill --all-nodes --dry-run\n"
        f"{sys.executable} -m ezpz kill --all-nodes\nwait $L; echo LAUNCH_EXIT $?\n"
        f"kill -0 $B && echo BYSTANDER_ALIVE; kill $B\n")
    # a launch of the same user outside this allocation (CI's stop-58 miss: this kill SIGTERMed another test's)
    outside = subprocess.Popen([sys.executable, job, "sleep"], stdout=subprocess.PIPE, text=True,
                               env={**env(), "EZPZ_LAUNCH_ID": f"outside-{tmp_path.name}", "EZPZ_ALLOCATION": ""})
    try:
        assert outside.stdout is not None and "READY" in outside.stdout.readline()
        proc = run(["salloc", *JOB, "-n", "2", "bash", str(script)], timeout=180)
        assert outside.poll() is None, "ezpz kill inside the allocation signalled a launch outside it"
    finally:
        outside.kill()
        outside.wait()
    listed = [line for line in proc.stdout.splitlines() if "supervised_job.py sleep" in line and " -  " in line]
    bystander = proc.stdout.split("BYSTANDER ", 1)[1].split()[0]
    assert len({line.split()[5] for line in listed if line.split()[5].isdigit()}) == 2, proc.stdout + proc.stderr
    assert f" {bystander} " not in proc.stdout.split("BYSTANDER ", 1)[1].split("LAUNCH_EXIT", 1)[0]
    assert f" {outside.pid} " not in proc.stdout, proc.stdout
    assert "SIGTERM sent to" in proc.stdout and "LAUNCH_EXIT 143" in proc.stdout and "BYSTANDER_ALIVE" in proc.stdout


def test_ezpz_submit_runs_a_two_rank_launch_and_names_its_output(tmp_path):
    proc = subprocess.run([*EZPZ, "submit", "-N", "1", "-n", "2", "-t", "5", "--wait", "--", sys.executable, SCRIPT,
                           "2"], env=env(), capture_output=True, text=True, timeout=240, cwd=tmp_path)
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("job ", "output ")))
    out = Path(lines.get("output", str(tmp_path / "none")))
    text = out.read_text() if out.exists() else ""
    assert proc.returncode == 0, proc.stdout + proc.stderr + text
    assert lines["job"].isdigit() and out.parent == tmp_path / "ezpz-jobs", proc.stdout
    check(rank_rows(text), 2, "slurm")
