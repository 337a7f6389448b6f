"""The ``gpu`` suite itself, checked on any machine: it holds every check that ran live, and skips cleanly without a GPU.

No GPU is needed here: collection and the NVTX answer's judging are checked
directly; the whole script (``bash scripts/gpu-check.sh``) is run only where
there is no CUDA device, so that every check skips (on a GPU host it would run
them all for real: run it by hand there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_kit import GPU_CHECKS, NVTX_NO_PUSH_POP_TRACKING, no_device_reason, nvtx_push_result

HERE = Path(__file__).parent
ROOT = HERE.parents[2]

#: What the H200 record (docs/hardware-validation.md) says ran live, each named by the check that repeats it.
RAN_LIVE = ("setup", "doctor", "main job", "bf16 training step with rt.step()", "memory stats",
            "profiler trace: CUDA kernels and our range", "device timer", "inductor against eager",
            "checkpoint round trip", "live conformance kit", "DDP world of one under torchrun",
            "two ranks on one GPU refused", "DeepSpeed ZeRO-2", "CUDA-style trainer against its port")


def test_pytest_m_gpu_collects_every_check_that_ran_live():
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p",
                           "no:cacheprovider", str(HERE)], capture_output=True, text=True, timeout=300, cwd=HERE.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    collected = {line.split("::")[-1] for line in proc.stdout.splitlines() if "::" in line}
    assert set(RAN_LIVE) <= set(GPU_CHECKS)
    missing = {check: test for check, test in GPU_CHECKS.items() if test not in collected}
    assert not missing, f"pytest -m gpu does not collect: {missing}"
    untracked = collected - set(GPU_CHECKS.values())
    assert not untracked, f"gpu tests missing from gpu_kit.GPU_CHECKS (the report would not list them): {untracked}"


@pytest.mark.parametrize("depth", [NVTX_NO_PUSH_POP_TRACKING, 0, 3, None])
def test_nvtx_answers_that_are_not_failures(depth):
    """-2 is what range_push returned on the H200 with no NVTX tool attached: the range still reached the trace."""
    ok, why = nvtx_push_result(depth)
    assert ok, why
    if depth == -2:
        assert "no NVTX tool" in why and "not a failure" in why


@pytest.mark.parametrize("depth", [-1, -3, "0", 1.5, True])
def test_nvtx_errors_still_fail(depth):
    ok, why = nvtx_push_result(depth)
    assert not ok, why


def test_the_script_skips_every_check_naming_why_without_a_cuda_device(tmp_path):
    why = no_device_reason()
    if why is None:
        pytest.skip("this host has a CUDA device: the checks would run for real (run bash scripts/gpu-check.sh)")
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"gpu-check: {why}: every gpu check skips here" in proc.stdout
    lines = [line for line in proc.stdout.splitlines() if line.startswith("CHECK ")]
    assert lines == [f"CHECK {check}: SKIP {why}" for check in GPU_CHECKS], proc.stdout
    report = json.loads((tmp_path / "gpu-check-report.json").read_text())
    assert set(report["checks"]) == set(GPU_CHECKS)
    assert all(row["outcome"] == "skipped" and "no CUDA device" in row["detail"] for row in report["checks"].values())
