"""Straggler detection end to end: ``ezpz launch -n 4`` with one rank 0.2 s slower in every 0.05 s step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, need_tool

PY = sys.executable
SLOW = str(Path(__file__).parent / "scripts" / "slow_rank.py")
pytestmark = [pytest.mark.launcher]


def test_the_report_names_the_slow_rank_and_its_host_within_50_steps_and_the_job_finishes(tmp_path):
    need_tool("torchrun")
    proc = subprocess.run([PY, "-m", "ezpz", "launch", "-n", "4", "--job-dir", "job", "--", PY, SLOW, "2", "50"],
                          env=clean_env(OMP_NUM_THREADS="1"), cwd=tmp_path, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.count("DONE rank") == 4 and "steps 50 sum 4" in proc.stdout, proc.stdout
    report = json.loads((tmp_path / "job" / "attempt-0" / "failures" / "stragglers.json").read_text())
    assert report["report"]["step"] <= 50
    [straggler] = report["report"]["stragglers"]
    host = report["hosts"]["2"]
    assert straggler["rank"] == 2 and straggler["host"] == host and host
    assert 0.0 < straggler["relative"] < 0.4, straggler  # 0.05 s vs 0.25 s: about 0.2
    assert "sections" in straggler and straggler["sections"]["compute"] < 0.4
    assert set(report["report"]["relative"]) == {"0", "1", "2", "3"}
    assert report["report"]["measure"] == "sections"  # step times are equal: every rank waits in the all-reduce
    log = (tmp_path / "job" / "attempt-0" / "output.log").read_text()
    assert "straggler step=25 ranks=2@" + host in log, log[-4000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("ezpz launch: attempt 0: ")]
    assert any(f"rank 2 host {host}: relative score 0." in line for line in said), proc.stderr  # when it changed
    chart = [line for line in said if line.startswith("ezpz launch: attempt 0:   rank    ")]
    assert [c for c in chart if "<- straggler" in c] == [c for c in chart if " rank    2 " in c] and len(chart) == 4
    svg = (tmp_path / "job" / "stragglers-attempt-0.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 4 and "rank 2" in svg
    print("\n" + "\n".join(said))
