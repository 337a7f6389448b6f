"""Preemption: on SIGTERM every rank stops after the same step, the main job checkpoints it, the status is 143."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import clean_env, need_tool
from ezpz.steps.preemption import PREEMPTED_STATUS, Preemption

PY = sys.executable


def test_the_stop_step_is_agreed_once_then_reached_and_a_script_that_goes_on_is_ended():
    p = Preemption()
    asked: list[int] = []
    stopped: list[int] = []
    p.agree = lambda count: asked.append(count) or 7
    p.on_stop = stopped.append
    p.requested = True
    p.at_boundary(6)
    assert asked == [6] and not p.reached and p.stop_after == 7
    p.at_boundary(7)
    assert p.reached and stopped == [7] and asked == [6]
    with pytest.raises(SystemExit) as ended:
        p.at_boundary(8)  # rt.preempted was not looked at
    assert ended.value.code == PREEMPTED_STATUS == 143


def test_a_rank_past_the_agreed_step_stops_at_once():
    p = Preemption()
    p.agree = lambda count: 3
    p.requested = True
    p.at_boundary(5)
    assert p.reached


SINGLE = """
import os, signal, sys, ezpz
rt = ezpz.hooks.setup()
for step in range(1, 1000):
    rt.step()
    if step == 5:
        os.kill(os.getpid(), signal.SIGTERM)
    if rt.preempted:
        print(f"stopped after {step}", flush=True)
        break
ezpz.hooks.teardown()
print("not reached")
"""


def test_one_process_stops_at_the_next_boundary_and_exits_143(tmp_path):
    proc = subprocess.run([PY, "-c", SINGLE], env=clean_env(OMP_NUM_THREADS="1",
                                                            EZPZ_FAILURE_DIR=str(tmp_path / "f")),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 143, proc.stderr[-3000:]
    assert "stopped after 6" in proc.stdout and "not reached" not in proc.stdout
    record = json.loads((tmp_path / "f" / "rank-0.json").read_text())
    assert record["kind"] == "preempted" and record["step"] == 6


def test_a_bad_grace_is_an_error_naming_it():
    from ezpz.errors import ConfigError
    from ezpz.inputs.settings import SetupSettings

    with pytest.raises(ConfigError) as err:
        SetupSettings.resolve({"EZPZ_PREEMPT_GRACE": "0"})
    assert "EZPZ_PREEMPT_GRACE" in str(err.value)
    assert SetupSettings.resolve({"EZPZ_PREEMPT_GRACE": "45"}).preempt_grace_s == 45.0


def _run_until(argv: list[str], cwd: Path, env: dict[str, str], pattern: str, then_signal: bool = True
               ) -> tuple[subprocess.Popen, list[str], re.Match | None]:
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(line) for line in iter(p.stdout.readline, "")], daemon=True).start()
    found, deadline = None, time.monotonic() + 240
    while found is None and time.monotonic() < deadline and p.poll() is None:
        found = re.search(pattern, "".join(lines))
        time.sleep(0.05)
    if found is not None and then_signal:
        p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        _kill_job(str(cwd))
    time.sleep(0.2)
    return p, lines, found


@pytest.mark.launcher
def test_sigterm_to_ezpz_launch_checkpoints_the_last_step_and_the_same_command_resumes(tmp_path):
    """Must-show: SIGTERM to ``ezpz launch -n 2 -- python -m ezpz.examples.train --checkpoint-every 1000
    --checkpoint-dir D`` after step 20: a checkpoint of step 20 or later in D before exit; the same command again
    resumes from it."""
    need_tool("torchrun")
    ck = tmp_path / "D"
    argv = [PY, "-m", "ezpz", "launch", "-n", "2", "--", PY, "-m", "ezpz.examples.train", "--steps", "100000",
            "--log-every", "10", "--checkpoint-every", "1000", "--checkpoint-dir", str(ck)]
    env = clean_env(OMP_NUM_THREADS="1", EZPZ_FAILURE_DIR=str(tmp_path / "failures"))
    t0 = time.monotonic()
    p, lines, found = _run_until(argv, tmp_path, env, r"\[ezpz\] step\s+20\b")
    took = time.monotonic() - t0
    text = "".join(lines)
    assert found is not None, text[-3000:]
    saved = sorted(ck.glob("step-*.pt"))
    assert saved, text[-3000:]
    first = int(saved[-1].name[5:13])
    assert first >= 20 and f"preempted: stopped after step {first}" in text, text[-3000:]
    assert p.returncode == 143, text[-3000:]
    records = [json.loads(f.read_text()) for f in sorted((tmp_path / "failures").glob("rank-*.json"))]
    assert [r["kind"] for r in records] == ["preempted", "preempted"] and {r["step"] for r in records} == {first}

    p2, lines2, found2 = _run_until(argv, tmp_path, env, rf"resumed from the step-{first} checkpoint(?s:.*)"
                                                         r"\[ezpz\] step\s+\d+")
    text2 = "".join(lines2)
    assert found2 is not None, text2[-3000:]
    second = int(sorted(ck.glob("step-*.pt"))[-1].name[5:13])
    print(f"\nSIGTERM after step 20: checkpoint of step {first}, exit {p.returncode} ({took:.1f} s); the same command "
          f"resumed from step {first} and, signalled again, saved step {second} (exit {p2.returncode})")
    assert second > first and p2.returncode == 143


@pytest.mark.launcher
def test_a_rank_that_never_got_the_signal_learns_it_from_the_store_and_stops_with_the_others(tmp_path):
    """SIGTERM to rank 0 alone: rank 1 waits in the next step's collective, its watchdog finds rank 0's post in
    the store, and both stop after the same step; no deadlock."""
    need_tool("torchrun")
    ck = tmp_path / "D"
    env = clean_env(OMP_NUM_THREADS="1", EZPZ_FAILURE_DIR=str(tmp_path / "failures"), EZPZ_HANG_BUDGET_WARMUP="5")
    p = subprocess.Popen([PY, "-m", "ezpz", "launch", "-n", "2", "--", PY, "-m", "ezpz.examples.train", "--steps",
                          "100000", "--log-every", "10", "--checkpoint-every", "1000", "--checkpoint-dir", str(ck)],
                         env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(line) for line in iter(p.stdout.readline, "")], daemon=True).start()
    try:
        deadline = time.monotonic() + 240
        while not re.search(r"\[ezpz\] step\s+20\b", "".join(lines)) and time.monotonic() < deadline:
            time.sleep(0.05)
        rank0 = _rank_pid(0, str(ck))
        os.kill(rank0, signal.SIGTERM)
        p.wait(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        _kill_job(str(ck))
    text = "".join(lines)
    records = [json.loads(f.read_text()) for f in sorted((tmp_path / "failures").glob("rank-*.json"))]
    assert [r["kind"] for r in records] == ["preempted", "preempted"], text[-3000:]
    assert records[0]["step"] == records[1]["step"], records
    assert (ck / f"step-{records[0]['step']:08d}.pt").exists()
    assert "another rank's SIGTERM, seen in the rendezvous store" in text


def _rank_pid(rank: int, mark: str) -> int:
    """The pid of this job's rank ``rank``: its command line names ``mark`` (this test's own directory), so
    another job on the machine is never signalled."""
    for d in Path("/proc").glob("[0-9]*"):
        try:
            environ = (d / "environ").read_bytes().split(b"\0")
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if mark.encode() in cmd and b"ezpz.examples.train" in cmd and b"torchrun" not in cmd \
                and f"RANK={rank}".encode() in environ and int(d.name) != os.getpid():
            return int(d.name)
    raise AssertionError(f"rank {rank} not found")


def _kill_job(mark: str) -> None:
    """SIGKILL what is left of this test's job (torchrun and its ranks name ``mark``, this test's directory)."""
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if mark.encode() in (d / "cmdline").read_bytes() and int(d.name) != os.getpid():
                os.kill(int(d.name), signal.SIGKILL)
        except (OSError, ValueError):
            pass
