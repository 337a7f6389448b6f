"""``ezpz test``: a short run of the main job on this machine, ending with decisions and speed."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import clean_env, need_tool
from test_cli_support import ezpz

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ezpz.examples.train") is None,
                                reason="the main job ezpz.examples.train is not there yet")
SMALL = ["--", "--batch-size", "4", "--dim", "32", "--layers", "1", "--seq", "16", "--log-every", "2"]


def test_one_process_json_report():
    proc = ezpz("test", "--steps", "3", "--json", *SMALL, env=clean_env(OMP_NUM_THREADS="1"), timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)  # the job's own output went to stderr
    assert report["steps"] == 3 and report["world_size"] == 1
    assert (report["device"], report["backend"]) == ("cpu", "gloo") and report["precision"] in ("bf16", "fp16", "fp32")
    assert report["steps_per_s"] > 0 and report["samples_per_s"] > 0 and report["peak_memory"]
    assert "ezpz test: running:" in proc.stderr


@pytest.mark.launcher
def test_two_processes_through_the_launcher():
    need_tool("torchrun")
    proc = ezpz("test", "-n", "2", "--steps", "3", *SMALL, env=clean_env(OMP_NUM_THREADS="1"), timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = proc.stdout[proc.stdout.index("ezpz test: passed"):]
    for line in ("launcher    torchrun", "ranks       2 on 1 node(s)", "device      cpu", "backend     gloo",
                 "precision", "steps/s", "samples/s", "peak memory"):
        assert line in summary
    assert "ezpz test: running: torchrun --standalone --nproc-per-node 2" in proc.stderr


def test_a_failing_job_fails_the_test():
    proc = ezpz("test", "--steps", "0", "--", "--no-such-flag", timeout=240)
    assert proc.returncode != 0 and "FAILED" in proc.stderr
