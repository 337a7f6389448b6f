"""``ezpz launch``: the command it builds under PBS, Slurm and no scheduler, and real local runs."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import clean_env, need_tool
from ezpz.probes.cpu import physical_cores
from test_cli_support import ezpz, fake_mpiexec, path_without, site_driver, with_pythonpath

pytestmark = pytest.mark.one_torch  # launch plumbing: the launch CLI: runs on the pinned torch only (docs/ci.md)

PY = sys.executable


def dry_run(*args: str, **env: str) -> tuple[list[str], str]:
    """argv of the command ``ezpz launch --dry-run`` prints on stdout, and what it said on stderr."""
    proc = ezpz("launch", "--dry-run", *args, env=clean_env(**env))
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()  # stdout holds the command and nothing else
    return shlex.split(line), proc.stderr


@pytest.fixture
def nodefile(tmp_path: Path) -> Path:
    path = tmp_path / "nodefile"
    path.write_text("x1000c0s0b0n0\nx1000c0s0b0n0\nx1000c0s0b1n0\nx1000c0s0b1n0\n")  # PBS: one line per slot
    return path


def test_pbs_with_cray_pals(tmp_path, nodefile):
    bindir = fake_mpiexec(tmp_path / "bin", "mpiexec version 1.3.3 (HPE Cray PALS)")
    argv, said = dry_run("--ppn", "4", "--", "python", "train.py", "--lr", "1e-3",
                         PBS_JOBID="8675.aurora-pbs", PBS_NODEFILE=str(nodefile), PATH=path_without(prepend=bindir))
    assert argv == ["mpiexec", "--np", "8", "--ppn", "4", "--hostfile", str(nodefile), "python", "train.py",
                    "--lr", "1e-3"]
    assert "PBS job 8675.aurora-pbs" in said and "pals" in said


def test_pbs_with_mpich_hydra(tmp_path, nodefile):
    bindir = fake_mpiexec(tmp_path / "bin", "HYDRA build details:\n    Version: 4.1.2")
    argv, _ = dry_run("-n", "8", "--", "python", "train.py",
                      PBS_JOBID="1.pbs", PBS_NODEFILE=str(nodefile), PATH=path_without(prepend=bindir))
    assert argv == ["mpiexec", "-n", "8", "-ppn", "4", "-f", str(nodefile), "python", "train.py"]


def test_pbs_with_open_mpi(nodefile):
    need_tool("mpiexec")
    argv, said = dry_run("--ppn", "4", "--", "python", "train.py", PBS_JOBID="1.pbs", PBS_NODEFILE=str(nodefile),
                         EZPZ_DEVICE="cpu")
    assert argv[:7] == ["mpiexec", "-n", "8", "--hostfile", str(nodefile), "--map-by", "ppr:4:node"]
    assert argv[-2:] == ["python", "train.py"] and "openmpi" in said
    for name in ("PATH", "EZPZ_DEVICE"):  # remote ranks see only what Open MPI is told to pass
        assert argv[argv.index(name) - 1] == "-x"


@pytest.mark.parametrize(("flags", "want"), [
    (["--ppn", "4"], ["-N", "5", "-n", "20", "--ntasks-per-node", "4"]),
    (["-n", "8", "--ppn", "4"], ["-N", "2", "-n", "8", "--ntasks-per-node", "4"]),
    (["-n", "5"], ["-N", "5", "-n", "5", "--ntasks-per-node", "1"]),
])
def test_slurm(flags, want):
    argv, said = dry_run(*flags, "--", "python", "train.py", SLURM_JOB_ID="4242", SLURM_NODELIST="nid[001-004,007]")
    assert argv[0] == "srun" and argv[1:7] == want and argv[-2:] == ["python", "train.py"]
    assert "Slurm job 4242" in said and "SLURM_NODELIST=nid[001-004,007]" in said


def test_no_scheduler_uses_torchrun():
    need_tool("torchrun")
    argv, said = dry_run("-n", "2", "--", "python", "train.py", "--steps", "3")
    assert argv == ["torchrun", "--standalone", "--nproc-per-node", "2", "--no-python", "python", "train.py",
                    "--steps", "3"]
    assert "no scheduler" in said


def test_no_scheduler_without_torchrun_falls_back_to_mpiexec():
    need_tool("mpiexec")
    n = physical_cores() + 1
    argv, said = dry_run("-n", str(n), "--", "python", "train.py", PATH=path_without("torchrun"))
    assert argv[:3] == ["mpiexec", "-n", str(n)] and argv[-2:] == ["python", "train.py"]
    assert "--oversubscribe" in argv and f"{n} processes on {n - 1} core(s)" in said  # and says why
    assert ("--allow-run-as-root" in argv) == (os.geteuid() == 0)
    argv, _ = dry_run("-n", "1", "--", "python", "train.py", PATH=path_without("torchrun"))
    assert "--oversubscribe" not in argv


def test_unknown_launcher_lists_the_installed_ones():
    proc = ezpz("launch", "--dry-run", "--launcher", "nope", "--", "python", "train.py")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "nope" in proc.stderr and "mpiexec, srun, torchrun" in proc.stderr
    assert "Traceback" not in proc.stderr and "WARNING" not in proc.stderr


@pytest.mark.parametrize(("args", "env", "words"), [
    (["-n", "16", "--ppn", "4"], {"SLURM_JOB_ID": "1", "SLURM_NODELIST": "nid[1-2]"}, ["at most 8", "fix:"]),
    (["--launcher", "torchrun", "--hostfile", "HOSTFILE"], {}, ["torchrun", "fix:"]),
    (["--hostfile", "/nonexistent/hosts"], {}, ["--hostfile", "fix:"]),
    ([], {}, ["command", "fix:"]),
])
def test_impossible_launches_are_usage_errors(tmp_path, args, env, words):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a\nb\n")
    args = [str(hostfile) if a == "HOSTFILE" else a for a in args]
    proc = ezpz("launch", "--dry-run", *args, *(["--", "python", "x.py"] if args else []), env=clean_env(**env))
    assert proc.returncode == 2 and proc.stdout == ""
    for word in words:
        assert word in proc.stderr


def test_a_site_driver_is_chosen_for_its_scheduler_and_named_in_errors(tmp_path):
    env = with_pythonpath(clean_env(COBALT_JOBID="f00"), site_driver(tmp_path / "site"))
    proc = ezpz("launch", "--dry-run", "--ppn", "2", "--", "python", "train.py", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["aprun", "-n", "4", "-N", "2", "python", "train.py"]
    assert "Cobalt job f00" in proc.stderr
    proc = ezpz("launch", "--dry-run", "--launcher", "nope", "--", "true", env=env)
    assert "aprun, flux, jsrun, mpiexec, srun, torchrun" in proc.stderr


# -- real runs ----------------------------------------------------------------------------------------------

RANK_REPORT = ("import json, sys, ezpz; rt = ezpz.hooks.setup(); "  # one write per line: ranks share the pipe
               "sys.stdout.write(json.dumps({'rank': rt.rank, 'world': rt.world_size}) + '\\n'); "
               "sys.stdout.flush(); ezpz.hooks.teardown()")


@pytest.mark.launcher
@pytest.mark.parametrize("launcher", ["torchrun", "mpiexec"])
def test_launch_really_runs_two_ranks(launcher):
    need_tool(launcher)
    proc = ezpz("launch", "--launcher", launcher, "-n", "2", "--", PY, "-c", RANK_REPORT,
                env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120"), timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = sorted((json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")), key=lambda r: r["rank"])
    assert [(r["rank"], r["world"]) for r in rows] == [(0, 2), (1, 2)]
    assert f"ezpz launch: running: {launcher}" in proc.stderr  # the command is printed before it runs


@pytest.mark.launcher
def test_exit_status_is_the_commands():
    need_tool("mpiexec")
    proc = ezpz("launch", "--launcher", "mpiexec", "-n", "1", "--", PY, "-c", "raise SystemExit(3)", timeout=120)
    assert proc.returncode == 3, proc.stderr
    proc = ezpz("launch", "--launcher", "mpiexec", "-n", "1", "--", "no-such-program-ezpz", timeout=120)
    assert proc.returncode != 0


READY_THEN_SLEEP = "import sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(300)"


def _alive(marker: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_text():
                pids.append(int(cmdline.parent.name))
        except OSError:
            pass
    return pids


def _start(code: str, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen([PY, "-m", "ezpz", "launch", "--launcher", "torchrun", *flags, "--", PY, "-c", code],
                            env=clean_env(OMP_NUM_THREADS="1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _cleanup(proc: subprocess.Popen[str], marker: str) -> None:
    """Whatever happened, leave none of this test's processes behind."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    for pid in _alive(marker):
        os.kill(pid, signal.SIGKILL)


def _wait_ready(proc: subprocess.Popen[str], count: int, timeout: float = 120) -> None:
    """Until ``count`` ranks said ready (read in a thread: a blocked readline must not hang the test)."""
    seen = threading.Semaphore(0)

    def read() -> None:
        for line in proc.stdout:
            for _ in range(line.count("ready")):  # two ranks' lines can interleave on the shared pipe
                seen.release()

    threading.Thread(target=read, daemon=True).start()
    for _ in range(count):
        assert seen.acquire(timeout=timeout), f"the job did not start (exit status {proc.poll()})"


@pytest.mark.launcher
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_whole_job(sig):
    need_tool("torchrun")
    marker = f"ezpz-signal-test-{sig.name}-{os.getpid()}"
    proc = _start(f"{READY_THEN_SLEEP}  # {marker}", "-n", "2")
    try:
        _wait_ready(proc, 2)
        proc.send_signal(sig)  # as a scheduler or `kill` would: to ezpz only
        proc.wait(timeout=60)
        time.sleep(1)
        left = _alive(marker)
    finally:
        _cleanup(proc, marker)
    assert proc.returncode != 0 and left == []


@pytest.mark.launcher
def test_a_job_that_ignores_signals_is_killed_after_the_grace_period():
    need_tool("torchrun")
    marker = f"ezpz-grace-test-{os.getpid()}"
    code = ("import signal; [signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)]; "
            f"{READY_THEN_SLEEP}  # {marker}")
    proc = _start(code, "-n", "1", "--grace", "2")
    try:
        _wait_ready(proc, 1)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        took = time.monotonic() - start
        time.sleep(1)
        left = _alive(marker)
    finally:
        _cleanup(proc, marker)
    assert proc.returncode != 0 and took < 20 and left == []


@pytest.mark.launcher
def test_ctrl_c_at_a_terminal_stops_the_whole_job():
    """^C typed at a terminal (SIGINT to the foreground process group) ends launcher and ranks, once."""
    import pty
    import select

    need_tool("torchrun")
    marker = f"ezpz-ctrl-c-test-{os.getpid()}"
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session whose controlling terminal is the pty
        env = clean_env(OMP_NUM_THREADS="1")
        os.execve(PY, [PY, "-m", "ezpz", "launch", "--launcher", "torchrun", "-n", "2", "--",
                       PY, "-c", f"{READY_THEN_SLEEP}  # {marker}"], env)
    output, status, start = b"", None, time.monotonic()
    try:
        while output.count(b"ready") < 2 and time.monotonic() - start < 120:
            if select.select([fd], [], [], 1)[0]:
                output += os.read(fd, 4096)
        os.write(fd, b"\x03")  # the terminal's interrupt character
        start = time.monotonic()
        while status is None and time.monotonic() - start < 60:
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    output += os.read(fd, 4096)
                except OSError:
                    pass
            done, code = os.waitpid(pid, os.WNOHANG)
            status = os.waitstatus_to_exitcode(code) if done else None
        time.sleep(1)
        left = _alive(marker)
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        for leftover in _alive(marker):
            os.kill(leftover, signal.SIGKILL)
        os.close(fd)
    assert status not in (None, 0), output.decode(errors="replace")
    assert left == []
