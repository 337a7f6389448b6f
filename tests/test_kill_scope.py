"""``ezpz kill`` inside a scheduler job touches only that job's launches, never the same user's launches of
another job sharing the node (CI's stop-58 miss: a live Slurm test's ``ezpz kill --all-nodes`` SIGTERMed a
process another test had marked, running beside it).

The pure part (which job, which processes) is fed recorded facts; the rest runs real processes marked as
``ezpz launch`` marks its ranks, and real ``ezpz launch`` runs, each scoped to a job id of its own so that the
user's other launches on this machine (other tests') are never signalled.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import clean_env, need_tool
from ezpz.cli.kill import JobScope, job_scope, targets
from ezpz.errors import ConfigError
from ezpz.launch_drivers.marked import MarkedProcess, allocation_of

PY = sys.executable
JOB = str(Path(__file__).parent / "scripts" / "supervised_job.py")


def _marked(pid: int, launch_id: str, allocation: str) -> MarkedProcess:
    return MarkedProcess(pid=pid, ppid=1, launch_id=launch_id, allocation=allocation)


@pytest.mark.parametrize(("environ", "job"), [
    ({"SLURM_JOB_ID": "4242"}, "4242"),
    ({"PBS_JOBID": "1234.pbs01"}, "1234.pbs01"),
    ({"LSB_JOBID": "77"}, "77"),
    ({"SLURM_JOB_ID": " ", "PBS_JOBID": "9.srv"}, "9.srv"),  # an empty variable is not a job
    ({}, ""),
])
def test_the_default_scope_is_the_job_this_runs_in(environ, job):
    scope = job_scope(None, False, None, environ)
    assert scope.job == job
    assert (job in scope.reason) if job else "every launch" in scope.reason


def test_job_any_job_and_id_choose_the_scope_over_the_environment():
    env = {"SLURM_JOB_ID": "4242"}
    assert job_scope("17", False, None, env).job == "17"
    assert job_scope(None, True, None, env).job == ""
    assert job_scope(None, False, "host-1-abc", env).job == ""  # one launch, whichever job started it
    assert job_scope("17", False, "host-1-abc", env).job == "17"


@pytest.mark.parametrize(("job", "environ", "name"), [
    ("12 34", {}, "--job"),
    ("", {}, "--job"),
    (None, {"SLURM_JOB_ID": "42\x1b[2J"}, "SLURM_JOB_ID"),
    (None, {"PBS_JOBID": "x" * 300}, "PBS_JOBID"),
])
def test_a_bad_job_id_is_refused_naming_where_it_came_from(job, environ, name):
    with pytest.raises(ConfigError) as caught:
        job_scope(job, False, None, environ)
    assert caught.value.name == name and "--any-job" in caught.value.fix


def test_a_process_job_is_ezpz_launch_record_first_then_the_schedulers_variable():
    assert allocation_of({"EZPZ_ALLOCATION": "5", "SLURM_JOB_ID": "6"}) == "5"
    assert allocation_of({"EZPZ_ALLOCATION": "", "SLURM_JOB_ID": "6"}) == ""  # launched outside any job
    assert allocation_of({"PBS_JOBID": "7.srv"}) == "7.srv"
    assert allocation_of({}) == ""


def test_targets_split_this_jobs_launches_from_other_jobs_and_spare_this_command():
    found = [_marked(10, "a", "4242"), _marked(11, "a", "4242"), _marked(12, "b", "999"), _marked(13, "c", ""),
             _marked(14, "a", "4242")]
    scope = JobScope(job="4242", reason="test")
    chosen, elsewhere = targets(None, scope, found, spared={14})
    assert [p.pid for p in chosen] == [10, 11] and [p.pid for p in elsewhere] == [12, 13]
    chosen, elsewhere = targets("b", JobScope(job="", reason="test"), found, spared=set())
    assert [p.pid for p in chosen] == [12] and elsewhere == []


def _start(launch_id: str, allocation: str) -> subprocess.Popen[str]:
    """A process marked as ``ezpz launch`` marks a rank it started inside job ``allocation``."""
    return subprocess.Popen([PY, JOB, "sleep"], env=clean_env(EZPZ_LAUNCH_ID=launch_id, EZPZ_ALLOCATION=allocation),
                            stdout=subprocess.PIPE, text=True)


def _ready(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        assert p.stdout is not None and "READY" in p.stdout.readline()


def _kill(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "ezpz", "kill", *args], env=clean_env(**env), capture_output=True, text=True,
                          timeout=120)


def _listed(out: str) -> set[int]:
    return {int(line.split()[0]) for line in out.splitlines()[1:] if line.split() and line.split()[0].isdigit()}


def test_kill_inside_a_job_stops_its_launch_and_leaves_another_jobs_launch_running():
    here, there = f"t-{uuid.uuid4().hex[:10]}", f"t-{uuid.uuid4().hex[:10]}"
    ours = [_start(f"{here}-launch", here) for _ in range(2)]
    theirs = _start(f"{there}-launch", there)
    try:
        _ready([*ours, theirs])
        listed = _kill("--dry-run", SLURM_JOB_ID=here)
        assert listed.returncode == 0, listed.stderr
        assert _listed(listed.stdout) == {p.pid for p in ours}, listed.stdout
        assert "left alone" in listed.stderr and there in listed.stderr and f"job {here} (SLURM_JOB_ID)" in \
            listed.stderr, listed.stderr
        killed = _kill(SLURM_JOB_ID=here)
        assert killed.returncode == 0 and "SIGTERM sent to 2 process(es)" in killed.stderr, killed.stderr
        assert [p.wait(timeout=30) for p in ours] == [-15, -15]
        assert theirs.poll() is None, "ezpz kill signalled another job's launch"
        other = _kill("--job", there)  # the other job's, named from outside it
        assert other.returncode == 0 and "SIGTERM sent to 1 process(es)" in other.stderr, other.stderr
        assert theirs.wait(timeout=30) == -15
    finally:
        for p in (*ours, theirs):
            p.kill()
            p.wait()


def test_all_nodes_sends_the_job_along_so_a_host_reached_by_ssh_keeps_the_scope(tmp_path):
    """ssh carries none of the job's variables: the remote ``ezpz kill`` gets ``--job`` on its command line."""
    here, there = f"t-{uuid.uuid4().hex[:10]}", f"t-{uuid.uuid4().hex[:10]}"
    rsh = tmp_path / "rsh.sh"  # stands in for ssh: a fresh environment without the scheduler's variables
    rsh.write_text(f'#!/bin/sh\nshift\necho "$*" > {tmp_path}/remote-command\n'
                   'exec env -u PBS_JOBID -u SLURM_JOB_ID /bin/sh -c "$*"\n')
    rsh.chmod(0o755)
    (tmp_path / "hosts").write_text("h1\n")
    ours, theirs = _start(f"{here}-launch", here), _start(f"{there}-launch", there)
    try:
        _ready([ours, theirs])
        proc = _kill("--all-nodes", "--dry-run", "--hostfile", str(tmp_path / "hosts"), "--rsh", str(rsh),
                     PBS_JOBID=here)
        assert proc.returncode == 0, proc.stderr
        listed = {int(line.split()[1]) for line in proc.stdout.splitlines() if line.split()[1:2] != ["PID"]
                  and line.split()[1].isdigit()}
        assert listed == {ours.pid}, proc.stdout
        assert f"--job {here}" in (tmp_path / "remote-command").read_text()
    finally:
        for p in (ours, theirs):
            p.kill()
            p.wait()


@pytest.mark.launcher
@pytest.mark.parametrize("supervised", [False, True], ids=["plain", "supervised"])
def test_ezpz_launch_records_the_job_it_ran_in_on_every_rank(tmp_path, supervised):
    need_tool("torchrun")
    job = f"t-{uuid.uuid4().hex[:10]}"
    show = "import os; print('RANK', os.environ['RANK'], 'JOB', os.environ['EZPZ_ALLOCATION'], flush=True)"
    proc = subprocess.run([PY, "-m", "ezpz", "launch", "--launcher", "torchrun", "-n", "2",
                           *(["--timeout", "120"] if supervised else []), "--", PY, "-c", show],
                          env=clean_env(OMP_NUM_THREADS="1", LSB_JOBID=job), cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("RANK")) == \
        [f"RANK 0 JOB {job}", f"RANK 1 JOB {job}"], proc.stdout


def test_kill_outside_any_job_still_reaches_every_launch_of_the_user():
    """No scheduler variable: as before, every launch of this user (here checked on this test's own, by --dry-run
    listing it; nothing is signalled)."""
    launch = f"t-{uuid.uuid4().hex[:10]}"
    p = _start(launch, "")
    try:
        _ready([p])
        listed = _kill("--dry-run")
        assert p.pid in _listed(listed.stdout), listed.stdout + listed.stderr
        assert "left alone" not in listed.stderr
    finally:
        p.kill()
        p.wait()
