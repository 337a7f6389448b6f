"""``ezpz launch --timeout/--retries/--auto-retry`` and ``ezpz kill``, with real torchrun / Open MPI jobs."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env, need_tool

PY = sys.executable
JOB = str(Path(__file__).parent / "scripts" / "supervised_job.py")
FAILING = str(Path(__file__).parent / "scripts" / "failing_rank.py")
pytestmark = [pytest.mark.launcher]


def launch(*args: str, cwd: Path, timeout: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "ezpz", "launch", *args], env=clean_env(OMP_NUM_THREADS="1", **env), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def verdicts(job_dir: Path) -> list[dict]:
    return [json.loads((d / "verdict.json").read_text())
            for d in sorted(job_dir.glob("attempt-*"), key=lambda p: int(p.name.split("-")[1]))]


def test_a_finished_job_exits_0_even_where_the_launcher_cannot_import_torch(tmp_path):
    """The original ezpz's v0.25.0 fix: its cleanup() imported torch.distributed in the launcher after the job, and a
    broken torch (libsycl ImportError on Sunspot) turned a successful run into exit 1. ezpz launch never imports
    torch: here torch is unimportable in the launcher's process alone, and the 2-rank job's 0 is its status."""
    need_tool("torchrun")
    boot = ("import runpy, sys\n"
            "sys.modules['torch'] = None  # 'import torch' raises ImportError in this process only\n"
            "sys.argv = ['ezpz', 'launch', '-n', '2', '--', sys.executable, '-c', 'import torch; print(\"ran\")']\n"
            "runpy.run_module('ezpz', run_name='__main__')\n")
    proc = subprocess.run([PY, "-c", boot], env=clean_env(OMP_NUM_THREADS="1"), cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.count("ran") == 2, proc.stdout


def test_a_hung_rank_is_ended_after_the_idle_timeout_named_and_retried(tmp_path):
    need_tool("torchrun")
    t0 = time.monotonic()
    proc = launch("-n", "2", "--timeout", "15", "--retries", "1", "--retry-delay", "0", "--job-dir", "job", "--",
                  PY, JOB, "hang-once", cwd=tmp_path)
    wall = time.monotonic() - t0
    first, second = verdicts(tmp_path / "job")
    assert first["status"] == 124 and first["result"]["timed_out"], first
    assert 15 <= first["result"]["idle_s"] < 25, first["result"]
    assert first["result"]["alive_ranks"] == [1]
    assert "silent rank(s) still running here: 1 (host" in proc.stderr, proc.stderr
    assert "exit 124" in proc.stderr
    assert second["status"] == 0 and "rank 1 attempt 1" in proc.stdout
    assert proc.returncode == 0, proc.stderr
    print(f"\nhung rank: attempt 0 ended after {first['result']['idle_s']} s idle "
          f"(wall {first['result']['wall_s']} s), retry exit 0; total {wall:.1f} s")


def test_without_retries_the_watchdog_exits_124(tmp_path):
    need_tool("torchrun")
    proc = launch("-n", "2", "--timeout", "5", "--job-dir", "job", "--", PY, JOB, "hang-once", cwd=tmp_path)
    assert proc.returncode == 124, proc.stderr
    assert [v["status"] for v in verdicts(tmp_path / "job")] == [124]
    assert not [p for p in _job_pids("hang-once", tmp_path)], "the watchdog left a rank behind"


def _job_pids(mode: str, cwd: Path) -> list[int]:
    """Processes running the job script in ``mode`` from ``cwd``: this test's job only, not another test's."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (d / "cmdline").read_bytes()
            if JOB.encode() in cmdline and mode.encode() in cmdline and Path(os.readlink(d / "cwd")) == cwd.resolve():
                out.append(int(d.name))
        except OSError:
            pass
    return out


def test_retries_rerun_a_failed_attempt_with_its_attempt_number_and_records_dir(tmp_path):
    need_tool("torchrun")
    proc = launch("-n", "2", "--retries", "2", "--retry-delay", "0", "--job-dir", "job", "--", PY, JOB, "fail-once",
                  cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    runs = verdicts(tmp_path / "job")
    assert [v["status"] for v in runs] == [1, 0]  # torchrun reports a failed worker as 1
    assert "rank 1 attempt 1" in proc.stdout and (tmp_path / "job" / "attempt-0" / "output.log").read_text()
    assert "--retries allows 2 more" in proc.stderr


def test_an_interrupt_stops_the_retry_loop_at_once(tmp_path):
    need_tool("torchrun")
    p = subprocess.Popen([PY, "-m", "ezpz", "launch", "-n", "2", "--retries", "5", "--retry-delay", "0",
                          "--job-dir", "job", "--", PY, JOB, "sleep"], env=clean_env(), cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_ready(p, 2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130, err
    assert sorted(d.name for d in (tmp_path / "job").glob("attempt-*")) == ["attempt-0"]
    assert "no more attempts" in err


def _wait_ready(p: subprocess.Popen, ranks: int, timeout: float = 120) -> list[int]:
    """The pids of ``ranks`` ranks that printed READY, within ``timeout`` (a reader thread: readline can block)."""
    import queue
    import threading

    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in iter(p.stdout.readline, "")], daemon=True).start()
    pids, seen, deadline = [], [], time.monotonic() + timeout
    while len(pids) < ranks and time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        seen.append(line)
        # two ranks' lines can arrive interleaved on one line ("...READYrank 0 ... READY"): take every one
        pids += [int(pid) for pid in re.findall(r"pid (\d+) READY", line)]
    if len(pids) < ranks:
        status = p.poll()  # before the caller's cleanup kills it: None means it was still running
        raise AssertionError(f"the job did not start within {timeout:g}s (launcher status {status}, -9: SIGKILL); "
                             f"its stdout so far: {''.join(seen)[-2000:]!r}")
    return pids


def _launch_id_of(pid: int) -> str:
    """The launch id ``ezpz launch`` marked process ``pid`` with (the marker ``ezpz kill`` finds it by)."""
    from ezpz.launch_drivers.marked import marked_processes

    found = [p.launch_id for p in marked_processes() if p.pid == pid]
    assert found, f"process {pid} carries no launch marker"
    return found[0]


def test_kill_dry_run_lists_exactly_the_job_and_kill_stops_it(tmp_path):
    need_tool("torchrun")
    launcher = subprocess.Popen([PY, "-m", "ezpz", "launch", "-n", "2", "--", PY, JOB, "sleep"], env=clean_env(),
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # an unrelated python beside the job, started the same way and running the same script
    bystander = subprocess.Popen([PY, JOB, "sleep"], env=clean_env(), stdout=subprocess.PIPE, text=True)
    try:
        ranks = _wait_ready(launcher, 2)
        # only this test's launch (--id): other tests may run launches of the same user beside this one
        launch_id = _launch_id_of(ranks[0])
        listed = subprocess.run([PY, "-m", "ezpz", "kill", "--dry-run", "--id", launch_id], env=clean_env(),
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        pids = {int(line.split()[0]) for line in listed.stdout.splitlines()[1:]}
        torchrun = {int(x) for x in subprocess.run(["pgrep", "-P", str(launcher.pid)], capture_output=True,
                                                   text=True).stdout.split()}
        assert pids == {*ranks, *torchrun, launcher.pid}, listed.stdout
        assert bystander.pid not in pids
        print(f"\nezpz kill --dry-run listed {len(pids)} processes: 2 ranks, torchrun, ezpz launch; "
              f"bystander {bystander.pid} not listed")
        killed = subprocess.run([PY, "-m", "ezpz", "kill", "--id", launch_id], env=clean_env(), capture_output=True,
                                text=True, timeout=60)
        assert killed.returncode == 0, killed.stderr
        launcher.wait(timeout=60)
        assert launcher.returncode != 0
        assert bystander.poll() is None, "ezpz kill touched a process it did not launch"
        assert not any(Path(f"/proc/{pid}").exists() for pid in ranks)
    finally:
        for p in (launcher, bystander):
            p.kill()
            p.wait()


def test_kill_all_nodes_runs_on_every_host_through_rsh(tmp_path):
    rsh = tmp_path / "rsh.sh"  # stands in for ssh: records the host, runs the command here
    rsh.write_text(f'#!/bin/sh\nhost=$1; shift\necho "$host" >> {tmp_path}/hosts-reached\nexec /bin/sh -c "$*"\n')
    rsh.chmod(0o755)
    (tmp_path / "hosts").write_text("h1\nh2\nh2\nh3\n")
    proc = subprocess.run([PY, "-m", "ezpz", "kill", "--all-nodes", "--dry-run", "--hostfile", str(tmp_path / "hosts"),
                           "--rsh", str(rsh), "--id", "no-such-launch"], env=clean_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted((tmp_path / "hosts-reached").read_text().split()) == ["h1", "h2", "h3"]
    for h in ("h1", "h2", "h3"):
        assert f"{h}: ezpz kill: no process of yours carries EZPZ_LAUNCH_ID=no-such-launch" in proc.stdout


def test_auto_retry_stops_after_one_attempt_on_a_code_error(tmp_path):
    need_tool("mpiexec")
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost\nspare-never-used\n")
    proc = launch("--auto-retry", "--nhosts", "1", "--ppn", "2", "--spare-nodes", "1", "--launcher", "mpiexec",
                  "--hostfile", str(hosts), "--retry-delay", "0", "--job-dir", "job", "--", PY, FAILING, "raise",
                  cwd=tmp_path, EZPZ_DEVICE="cpu", EZPZ_TIMEOUT="60")
    runs = verdicts(tmp_path / "job")
    assert len(runs) == 1, proc.stderr
    v = runs[0]
    assert v["verdict"]["outcome"] == "code_error" and not v["verdict"]["retry"] and v["verdict"]["exclude"] == []
    assert sorted(r["rank"] for r in v["records"]) == [0, 1]
    assert {r["kind"] for r in v["records"]} == {"code_error"}
    assert "code_error on every rank" in proc.stderr and "no spare is used" in proc.stderr
    assert "spare-never-used" not in (tmp_path / "job" / "attempt-0" / "hostfile").read_text()
    assert proc.returncode != 0


def need_open_mpi() -> None:
    """Skip, naming what ``mpiexec`` is, unless it is Open MPI's."""
    mpiexec = need_tool("mpiexec")
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30).stdout
    if "Open MPI" not in version and "OpenRTE" not in version:
        pytest.skip(f"mpiexec is not Open MPI here ({version.splitlines()[0] if version else 'no --version'})")


def test_auto_retry_stops_when_open_mpi_finds_no_rsh_agent(tmp_path):
    """Open MPI's exit 243 (no ssh/rsh agent), as on the H200 host: one attempt, the fix named, no spare used.

    The agent is named in ``OMPI_MCA_plm_rsh_agent`` and does not exist: Open MPI prints the same help text
    ([agent-not-found]) and exits 243, as it does on a host without ssh.
    """
    need_open_mpi()
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost\nspare-never-used\n")
    proc = launch("--auto-retry", "--nhosts", "1", "--ppn", "1", "--spare-nodes", "1", "--launcher", "mpiexec",
                  "--hostfile", str(hosts), "--retry-delay", "0", "--job-dir", "job", "--", PY, "-c", "pass",
                  cwd=tmp_path, EZPZ_DEVICE="cpu", OMPI_MCA_plm_rsh_agent="ezpz-no-such-rsh-agent")
    runs = verdicts(tmp_path / "job")
    assert len(runs) == 1, proc.stderr
    v = runs[0]
    assert v["status"] == 243, proc.stderr
    assert v["verdict"]["outcome"] == "launcher_config" and not v["verdict"]["retry"], v["verdict"]
    assert v["verdict"]["exclude"] == []
    assert "openssh-client" in proc.stderr and "OMPI_MCA_plm_rsh_agent=" in proc.stderr
    assert proc.returncode == 243


DYING_AGENT = """#!/bin/sh
host=$1; shift
case $host in
  nodec) exec /bin/sh -c 'sleep 3; exit 137' ;;
esac
exec 3<&0
/bin/sh -c "$*" <&3 3<&- &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM INT HUP
rc=0
while :; do wait $child; rc=$?; kill -0 $child 2>/dev/null || break; done
exit $rc
"""
"""Open MPI's launch agent (``plm_rsh_agent``) for three hosts on this one machine: this machine's own name (no
agent: the launcher's node), ``nodeb`` (its daemon runs here, the agent staying as ssh does) and ``nodec``, whose
daemon never starts: its agent drops the host from its command line at once (as a connection that ended between two
of the watcher's looks) and exits 137 three seconds later, as ssh does when the remote ``orted`` is SIGKILLed. By
then ``nodeb``'s connection has been up a while, seen at several looks even on a loaded machine."""


def test_auto_retry_names_the_node_whose_open_mpi_daemon_died_at_once(tmp_path):
    """Open MPI says only "ORTE was unable to reliably start one or more daemons": ezpz names ``nodec`` from the
    launcher's connections (the one that ended first, or, when it ended before it could be seen, the one daemon
    host never seen while ``nodeb``'s was), leaves ``nodeb`` and this machine alone, and the job goes on without it.
    """
    need_open_mpi()
    agent = tmp_path / "agent.sh"
    agent.write_text(DYING_AGENT)
    agent.chmod(0o755)
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{socket.gethostname()}\nnodeb\nnodec\n")
    proc = launch("--auto-retry", "--nhosts", "3", "--ppn", "1", "--spare-nodes", "0", "--min-nodes", "2",
                  "--launcher", "mpiexec", "--hostfile", str(hosts), "--retry-delay", "0", "--job-dir", "job", "--",
                  PY, "-c", "print('rank ran')", cwd=tmp_path, EZPZ_DEVICE="cpu", OMPI_MCA_plm_rsh_agent=str(agent))
    runs = verdicts(tmp_path / "job")
    assert len(runs) == 2, proc.stderr
    first = runs[0]
    assert first["status"] != 0 and "unable to reliably start one or more daemons" in \
        (tmp_path / "job" / "attempt-0" / "output.log").read_text()
    assert first["verdict"]["outcome"] == "shrink" and first["verdict"]["exclude"] == ["nodec"], first["verdict"]
    assert first["result"]["channel_here"] == [socket.gethostname()]
    assert "the launcher's connection to host nodec" in first["verdict"]["evidence"][0]
    assert runs[1]["verdict"]["outcome"] == "success" and runs[1]["hosts"] == [socket.gethostname(), "nodeb"]
    assert proc.returncode == 0 and proc.stdout.count("rank ran") == 2, proc.stderr


def test_retries_do_not_rerun_a_script_that_does_not_compile(tmp_path):
    """``--retries`` without ``--auto-retry``: a SyntaxError fails the same way on the same hosts: one attempt."""
    need_tool("torchrun")
    (tmp_path / "broken.py").write_text("def train(:\n    pass\n")
    proc = launch("-n", "2", "--retries", "3", "--retry-delay", "0", "--job-dir", "job", "--", PY, "broken.py",
                  cwd=tmp_path)
    runs = verdicts(tmp_path / "job")
    assert len(runs) == 1, proc.stderr
    assert runs[0]["verdict"]["outcome"] == "code_error" and not runs[0]["verdict"]["retry"], runs[0]["verdict"]
    assert "SyntaxError" in proc.stderr and "--retries does not run it again" in proc.stderr
    assert proc.returncode != 0


def test_retries_do_not_rerun_open_mpi_without_an_rsh_agent(tmp_path):
    """``--retries`` (same hosts): Open MPI's exit 243 would come back on every attempt: one attempt, the fix named."""
    need_open_mpi()
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost\n")
    proc = launch("-n", "1", "--launcher", "mpiexec", "--hostfile", str(hosts), "--retries", "2", "--retry-delay", "0",
                  "--job-dir", "job", "--", PY, "-c", "pass", cwd=tmp_path, EZPZ_DEVICE="cpu",
                  OMPI_MCA_plm_rsh_agent="ezpz-no-such-rsh-agent")
    runs = verdicts(tmp_path / "job")
    assert len(runs) == 1 and runs[0]["status"] == 243, proc.stderr
    assert runs[0]["verdict"]["outcome"] == "launcher_config" and not runs[0]["verdict"]["retry"], runs[0]["verdict"]
    assert "--retries does not run it again" in proc.stderr and "openssh-client" in proc.stderr
    assert proc.returncode == 243
