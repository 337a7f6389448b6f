"""Learned hang budgets: the pure policy, its settings, and a real 2-rank job whose rank 1 stops answering."""

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
from ezpz.errors import ConfigError
from ezpz.steps.hang_budget import hang_budget, p99
from ezpz.inputs.settings import HangSettings, SetupSettings

PY = sys.executable


def test_before_the_warm_up_the_timeout_is_the_budget_and_it_is_not_learned():
    b = hang_budget([0.1] * 5, 5, HangSettings(warmup=20), 300.0)
    assert b.seconds == 300.0 and not b.learned and "5 of 20 steps" in b.how


def test_after_the_warm_up_the_budget_is_factor_times_p99_within_floor_and_timeout():
    times = [0.1] * 99 + [0.5]
    assert p99(times) == 0.1  # the 99th of 100 sorted values
    b = hang_budget(times, 100, HangSettings(factor=200.0, floor_s=1.0, warmup=20), 300.0)
    assert b.learned and b.seconds == pytest.approx(20.0) and "200 x p99 0.1 s" in b.how
    floor = hang_budget(times, 100, HangSettings(factor=10.0, floor_s=10.0), 300.0)
    assert floor.seconds == 10.0 and "raised to the floor" in floor.how
    cap = hang_budget([50.0] * 30, 30, HangSettings(factor=10.0), 300.0)
    assert cap.seconds == 300.0 and "capped at EZPZ_TIMEOUT" in cap.how


def test_budgets_off_leave_the_timeout():
    b = hang_budget([0.1] * 50, 50, HangSettings(enabled=False), 90.0)
    assert b.seconds == 90.0 and not b.learned and "EZPZ_HANG_BUDGET=0" in b.how


@pytest.mark.parametrize(("name", "value"), [("EZPZ_HANG_BUDGET_FACTOR", "0.5"), ("EZPZ_HANG_BUDGET_FACTOR", "nan"),
                                             ("EZPZ_HANG_BUDGET_FLOOR", "-1"), ("EZPZ_HANG_BUDGET_FLOOR", "1e999"),
                                             ("EZPZ_HANG_BUDGET_WARMUP", "1"), ("EZPZ_HANG_BUDGET_WARMUP", "2.5"),
                                             ("EZPZ_HANG_BUDGET", "maybe")])
def test_a_bad_setting_is_an_error_naming_it(name, value):
    with pytest.raises(ConfigError) as err:
        SetupSettings.resolve({name: value})
    assert name in str(err.value) and value in str(err.value)


def test_settings_are_read_from_the_environment():
    got = HangSettings.from_environ({"EZPZ_HANG_BUDGET_FACTOR": "5", "EZPZ_HANG_BUDGET_FLOOR": "2.5",
                                     "EZPZ_HANG_BUDGET_WARMUP": "7"})
    assert got == HangSettings(enabled=True, factor=5.0, floor_s=2.5, warmup=7)
    assert HangSettings.from_environ({"EZPZ_HANG_BUDGET": "off"}).enabled is False


def test_explain_shows_the_policy_in_force():
    import ezpz

    env = {"EZPZ_HANG_BUDGET_FLOOR": "3"}
    _, explanation = ezpz.hooks.plan(environ=env)
    d = explanation["hang_budget"]
    assert "floor 3s" in d.chosen and "10 x the recent p99" in d.reason


def test_the_watchdog_stops_in_teardown_and_is_a_daemon():
    import ezpz
    from ezpz.steps import hang_watch

    ezpz.hooks.setup()
    try:
        thread = hang_watch._state["watch"]
        assert thread.daemon and hang_watch.watching()
    finally:
        ezpz.hooks.teardown()
    thread.join(timeout=5)
    assert not thread.is_alive() and not hang_watch.watching()


@pytest.mark.launcher
def test_a_rank_that_stops_answering_is_named_within_the_learned_budget_not_the_timeout(tmp_path):
    """Must-show: steps of ~0.1 s, EZPZ_TIMEOUT=300, rank 1 frozen (SIGSTOP) after step 40: a record names it
    (rank, host, step, budget) within 30 s of the hang."""
    need_tool("torchrun")
    failures = tmp_path / "failures"
    env = clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="300", EZPZ_FAILURE_DIR=str(failures))
    p = subprocess.Popen([PY, "-m", "ezpz", "launch", "-n", "2", "--", PY, "-m", "ezpz.examples.train", "--steps",
                          "2000", "--log-every", "10", "--test-step-sleep", "0.1", "--test-hang-at-step", "40",
                          "--test-fail-rank", "1"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen: list[str] = []
    hung_at, record = None, None
    threading.Thread(target=lambda: [seen.append(line) for line in iter(p.stdout.readline, "")], daemon=True).start()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and record is None and p.poll() is None:
            found = re.search(r"rank 1 stops answering after step 40 at ([\d.]+)", "".join(seen))
            if found and hung_at is None:
                hung_at = float(found.group(1))
            path = failures / "rank-0.json"
            if path.exists():
                record = json.loads(path.read_text())
                noticed = time.time()
            time.sleep(0.1)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=60)
        _kill_ranks_of(failures)  # the frozen rank: torchrun started it in a session of its own
    text = "".join(seen)
    assert hung_at is not None, text[-3000:]
    assert record is not None, text[-3000:]
    late = record["time"] - hung_at
    print(f"\nrank 1 frozen after step 40; rank 0 named it {late:.1f} s later (EZPZ_TIMEOUT 300 s; noticed by the "
          f"test {noticed - hung_at:.1f} s after): {record['first_line']}; budget {record['budget']}")
    assert record["kind"] == "hang" and record["missing_ranks"] == [1] and record["missing_hosts"], record
    assert record["step"] == 41 and "p99" in record["budget"], record
    assert late < 30, f"named {late:.1f} s after the hang, not within 30 s"


def _kill_ranks_of(failures: Path) -> None:
    """SIGKILL every process whose environment names this test's failure directory (its ranks, frozen or not)."""
    mark = f"EZPZ_FAILURE_DIR={failures}".encode()
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if mark in (d / "environ").read_bytes().split(b"\0"):
                os.kill(int(d.name), signal.SIGKILL)
        except (OSError, ValueError):
            pass
