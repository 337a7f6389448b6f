"""No false success: the ranks' markers (written best-effort) against a launcher's exit 0, and one real launch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env
from ezpz.failures import rank_markers
from ezpz.failures.rank_markers import Markers, mark_ended, mark_started, read_markers
from ezpz.launch_drivers.false_success import judge_markers

RECORDED = Path(__file__).parent / "fixtures" / "rank_markers"
HOSTS = {0: "n1", 1: "n1", 2: "n2", 3: "n2"}


def test_a_real_success_is_left_alone():
    assert judge_markers(read_markers(RECORDED / "all_ended"), 4, known_ezpz=True, attempts_left=0) is None


def test_a_host_whose_ranks_started_and_went_silent_is_named():
    v = judge_markers(read_markers(RECORDED / "second_host_silent"), 4, known_ezpz=False, attempts_left=0,
                      rank_hosts=HOSTS)
    assert v is not None and v.outcome == "false_success" and not v.retry
    assert "4 of 4 rank(s) reported in" in v.evidence[0] and ", 2 ended" in v.evidence[0]
    assert v.evidence[1] == "rank(s) 2, 3 started and never ended, on host(s) n2"
    assert "n1" not in " ".join(v.evidence[1:])


def test_ranks_that_never_started_blame_no_host():
    v = judge_markers(read_markers(RECORDED / "one_never_started"), 4, known_ezpz=False, attempts_left=2,
                      rank_hosts=HOSTS, spares_left=3)
    assert v is not None and v.outcome == "false_success" and v.retry and v.exclude == ()
    assert "rank(s) 3 never started (no host blamed" in v.evidence[1] and "planned on n2" in v.evidence[1]


def test_silent_hosts_are_swapped_only_when_spares_cover_them():
    markers = read_markers(RECORDED / "second_host_silent")
    assert judge_markers(markers, 4, known_ezpz=True, attempts_left=1, spares_left=1).exclude == ("n2",)
    assert judge_markers(markers, 4, known_ezpz=True, attempts_left=1, spares_left=0).exclude == ()


def test_no_markers_judged_only_when_the_command_is_known_to_use_ezpz(tmp_path):
    empty = read_markers(tmp_path)  # Open MPI's mpiexec stopped while starting its daemons: exit 0, nothing ran
    assert not empty.any
    assert judge_markers(empty, 2, known_ezpz=False, attempts_left=0) is None  # a plain command writes none
    v = judge_markers(empty, 2, known_ezpz=True, attempts_left=0)
    assert v is not None and "0 of 2 rank(s) reported in" in v.evidence[0] and "rank(s) 0, 1 never started" in v.evidence[1]


def test_the_reader_skips_hostile_files(tmp_path):
    (tmp_path / "started-0").write_text('{"host": "n1"}')
    (tmp_path / "started-1").write_text("not json")  # a torn write still says the rank started
    (tmp_path / "ended-x").write_text("{}")
    (tmp_path / "started-2").write_text(json.dumps({"host": "n" * 5000}))  # too large: counted, host unknown
    (tmp_path / "rank-0.json").write_text("{}")
    assert read_markers(tmp_path) == Markers(started={0: "n1", 1: "?", 2: "?"}, ended={})
    assert read_markers(tmp_path / "missing") == Markers(started={}, ended={})


def test_writing_is_best_effort_and_ended_written_once(tmp_path, monkeypatch):
    monkeypatch.setattr(rank_markers, "_state", {"atexit": True})
    assert not mark_started(None, 0, "h") and not mark_started(str(tmp_path / "no" / "such"), 0, "h")
    monkeypatch.setattr(rank_markers, "_state", {"atexit": True})
    assert mark_started(str(tmp_path), 5, "h1") and mark_ended() and not mark_ended()
    assert read_markers(tmp_path) == Markers(started={5: "h1"}, ended={5: "h1"})


@pytest.mark.launcher
def test_a_launch_that_exits_0_without_its_ranks_is_a_false_success(tmp_path):
    """Two ranks expected (--expect-ezpz) that exit 0 without calling setup(): exit 1, named false_success."""
    proc = subprocess.run([sys.executable, "-m", "ezpz", "launch", "-n", "2", "--expect-ezpz", "--job-dir",
                           str(tmp_path / "job"), "--", sys.executable, "-c", "pass"],
                          env=clean_env(OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "attempt 0: false_success: the launcher exited 0 but ranks never started" in proc.stderr
    assert "0 of 2 rank(s) reported in" in proc.stderr
    verdict = json.loads((tmp_path / "job" / "attempt-0" / "verdict.json").read_text())
    assert verdict["verdict"]["outcome"] == "false_success"
