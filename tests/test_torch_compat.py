"""The compatibility suite: what a user runs first, on every torch of the tested span.

``scripts/compat.sh`` (a stage of ``scripts/test.sh``) runs this file in one venv per torch -- the oldest the core
declares and the newest on PyPI, each the build PyPI ships (CUDA, running on the CPU here) -- against the core
installed from its wheel, with ``EZPZ_COMPAT_TORCH`` naming the torch. The normal suite runs it too, on the pinned
torch. Real launchers, gloo, the real main job and the script of docs/portable-script.md; docs/compat.md says what
runs and how long it takes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.version import Version

import ezpz
from conftest import ROOT, clean_env, need_tool, rank_rows, skip_or_fail_in_ci
from test_docs import portable_script
from test_real_launchers import free_port

pytestmark = pytest.mark.torch_compat

SCRIPTS = Path(__file__).parent / "scripts"
COMPAT_TORCH = os.environ.get("EZPZ_COMPAT_TORCH", "")  # set by scripts/compat.sh: the torch this venv was made with
NO_DEEPSPEED = os.environ.get("EZPZ_COMPAT_NO_DEEPSPEED", "")  # set by scripts/compat.sh: why DeepSpeed did not install
ABORT = "terminate called"  # what a rank prints when it aborts at exit


def run(argv: list[str], cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, cwd=cwd, env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120", **env),
                          capture_output=True, text=True, timeout=280)
    assert ABORT not in proc.stderr, proc.stderr[-4000:]
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc


def torchrun(*args: str) -> list[str]:
    """Two ranks under torchrun of this interpreter (the console script on PATH may belong to another Python)."""
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
            *args]


# -- what is under test --------------------------------------------------------------------------------------


def test_the_torch_and_the_ezpz_under_test():
    """torch is inside the span the installed core declares; under compat.sh, it is that venv's torch and ezpz its wheel."""
    from importlib.metadata import requires

    declared = next(r for r in map(Requirement, requires("ezpz") or []) if r.name == "torch")
    assert Version(torch.__version__).base_version in declared.specifier, (torch.__version__, str(declared))
    if COMPAT_TORCH:
        assert Version(torch.__version__).base_version == COMPAT_TORCH, torch.__version__
        where = Path(ezpz.__file__).resolve()
        assert where.is_relative_to(Path(sys.prefix).resolve()), f"ezpz imported from {where}, not the venv's wheel"


def test_the_tested_span_is_stated_alike_in_compat_sh_readme_and_docs():
    found = re.search(r"^TORCHES=\(([^)]*)\)", (ROOT / "scripts" / "compat.sh").read_text(), flags=re.MULTILINE)
    assert found, "scripts/compat.sh: no TORCHES=(...) line"
    oldest, newest = found.group(1).split()
    declared = re.search(r'"torch(>=[\d.]+)', (ROOT / "pyproject.toml").read_text())
    assert declared, "pyproject.toml: no torch>= requirement"
    assert Version(oldest).release[:2] == Version(declared.group(1)[2:]).release[:2], (
        f"the oldest torch tested ({oldest}) is not the oldest the core declares (torch{declared.group(1)})")
    span = f"torch {oldest} to {newest}"
    for doc in ("README.md", "docs/compat.md"):
        assert span in (ROOT / doc).read_text(encoding="utf-8"), f"{doc} does not say '{span}' (scripts/compat.sh)"


def test_ezpz_doctor_runs_and_reports_this_torch():
    report = json.loads(run([sys.executable, "-m", "ezpz", "doctor", "--json"]).stdout)
    assert report["torch"]["version"] == torch.__version__
    assert "gloo" in report["torch"]["distributed_backends"]


# -- the main job and the portable script --------------------------------------------------------------------


def test_the_main_job_trains(tmp_path):
    """The README's main job, as one process: the loss falls."""
    report_path = tmp_path / "report.json"
    run([sys.executable, "-m", "ezpz.examples.train", "--steps", "20", "--log-every", "10", "--report",
         str(report_path)], cwd=tmp_path)
    report = json.loads(report_path.read_text())
    assert (report["world_size"], report["steps"]) == (1, 20)
    assert report["final_loss"] < report["first_loss"], report


@pytest.fixture
def portable(tmp_path: Path) -> Path:
    path = tmp_path / "portable_train.py"
    path.write_text(portable_script(), encoding="utf-8")
    return path


@pytest.mark.launcher
def test_the_portable_script_under_torchrun(portable):
    proc = run(torchrun(str(portable), "--steps", "3"), cwd=portable.parent)
    assert "launch: torchrun: rank 0/2" in proc.stdout and "rank 0 of 2 on " in proc.stdout, proc.stdout


@pytest.mark.launcher
def test_the_portable_script_under_open_mpi_mpiexec(portable):
    mpiexec = need_tool("mpiexec.openmpi")
    proc = run([mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", "2", "-x", "OMP_NUM_THREADS=1",
                sys.executable, str(portable), "--steps", "3"], cwd=portable.parent)
    assert "launch: openmpi: rank 0/2" in proc.stdout and "rank 0 of 2 on " in proc.stdout, proc.stdout


# -- teardown with a DDP model kept --------------------------------------------------------------------------


@pytest.mark.launcher
def test_a_ddp_model_kept_past_teardown_exits_cleanly():
    for _ in range(2):  # the abort this guards against came in some runs only
        rows = rank_rows(run(torchrun(str(SCRIPTS / "ddp_kept_past_teardown.py"))).stdout)
        assert [r["rank"] for r in rows] == [0, 1]
        assert rows[0]["weights"] == pytest.approx(rows[1]["weights"], abs=1e-9)  # DDP really all-reduced
        assert not any(r["group_after_teardown"] for r in rows)


@pytest.mark.launcher
def test_a_group_kept_past_teardown_with_a_late_collective_exits_cleanly(tmp_path):
    """The forced timing of tests/test_gloo_quiesce.py: a peer joins the last collective late."""
    if not hasattr(torch._C, "_remove_obj_from_tls"):  # torch 2.4.1 has the stash but no remove
        pytest.skip(f"torch {torch.__version__}'s backward leaves no Python object in its collectives (no "
                    "torch._C._remove_obj_from_tls), so there is no late drop to force; ezpz's quiesce is not "
                    "attempted on it either")
    proc = run(torchrun(str(SCRIPTS / "gloo_kept_past_teardown.py"), "teardown", str(tmp_path / "finalizing")))
    assert "finished rank 0" in proc.stdout and "finished rank 1" in proc.stdout, proc.stdout


# -- DeepSpeed and torch.compile -----------------------------------------------------------------------------


@pytest.mark.launcher
def test_a_deepspeed_zero_step_through_ezpz():
    if NO_DEEPSPEED:
        pytest.skip(NO_DEEPSPEED)
    if importlib.util.find_spec("deepspeed") is None:
        skip_or_fail_in_ci("deepspeed is not installed (scripts/test.sh installs it)",
                           "deepspeed is required in CI (scripts/test.sh and scripts/compat.sh install it, or record why not)")
    proc = run(torchrun(str(SCRIPTS / "deepspeed_step.py"), "2"), EZPZ_PRECISION="fp32")
    assert "unable to detect" not in proc.stdout + proc.stderr  # DeepSpeed took ezpz's accelerator, did not guess
    rows = rank_rows(proc.stdout)
    assert [r["rank"] for r in rows] == [0, 1]
    for r in rows:
        assert r["stage"] == 2 and r["same_group"] is True
        assert r["ds_accelerator"] == r["ds_accelerator_env"] and r["torch_backend"] == r["ezpz_backend"]
    assert rows[0]["loss"] != rows[1]["loss"]
    assert rows[0]["weights"] == pytest.approx(rows[1]["weights"], abs=1e-9)


@pytest.mark.timeout(600)
def test_rt_compile_matches_eager(tmp_path):
    """rt.compile() with the backend ezpz chose, in a process of its own; the result equals eager."""
    code = """if True:
        import json, torch, ezpz
        rt = ezpz.hooks.setup(precision="fp32")
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).to(rt.device)
        x = torch.randn(4, 16).to(rt.device)
        with torch.no_grad():
            expected, got = model(x), rt.compile(model)(x)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        from torch._dynamo.utils import counters
        print(json.dumps({"backend": rt.explain()["compile"].chosen, "inductor": bool(counters["inductor"]),
                          "frames": counters["stats"]["unique_graphs"]}))
        ezpz.hooks.teardown()
    """
    row = json.loads(run([sys.executable, "-c", code], cwd=tmp_path).stdout.strip().splitlines()[-1])
    from ezpz.builtin.cxx import probe_cxx

    if probe_cxx().works:  # with a C++ compiler ezpz chooses Inductor, and Inductor really lowered the graph
        assert row == {"backend": "inductor", "inductor": True, "frames": 1}, row
    else:
        assert row["backend"] == "aot_eager" and row["frames"] == 1, row
