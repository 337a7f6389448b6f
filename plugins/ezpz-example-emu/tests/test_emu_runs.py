"""Real runs on emu with nothing device-specific in the scripts: the portable script, the main job, DDP, resume.

Every script here is run unchanged; ``EZPZ_DEVICE=emu`` is the only difference from a run on the CPU. DDP runs
compare the final weights with the same run on ``cpu`` (fp32, so both take the same arithmetic).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from emu_testlib import PY, child_env, free_port, mpiexec_argv, need_tool, portable_script, recorder, run


def _weights(path: Path) -> list[torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)


def _max_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    assert len(a) == len(b) and all(x.shape == y.shape for x, y in zip(a, b))
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def test_portable_script_on_emu_with_the_profiler(tmp_path):
    script = portable_script(tmp_path)
    proc = run([PY, str(script), "--steps", "5", "--profile"], env=child_env(EZPZ_DEVICE="emu"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "rank 0 of 1 on emu (emuccl, bf16): mean loss" in out, out
    assert "device: emu\n    why: requested by EZPZ_DEVICE=emu" in out and "lifecycle: example-emu" in out
    assert "backward" in out and "aten::" in out  # rt.range() and the ops it ran, in the profiler's table


def test_main_job_on_emu_learns_and_reports_the_device(tmp_path):
    report = tmp_path / "report.json"
    proc = run([PY, "-m", "ezpz.examples.train", "--steps", "20", "--report", str(report)],
               env=child_env(EZPZ_DEVICE="emu"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "device emu (example), backend emuccl, precision bf16 (autocast on)" in first, first
    data = json.loads(report.read_text())
    assert data["device"] == "emu" and data["backend"] == "emuccl" and data["final_loss"] < data["first_loss"] / 2
    assert data["peak_memory"]["emu_allocated_bytes_total"] > 0
    chosen = {d["topic"]: d["chosen"] for d in data["decisions"]}
    assert chosen["device"] == "emu" and chosen["compile"] == "aot_eager" and chosen["lifecycle"] == "example-emu"


def test_doctor_names_emu_and_its_plugin_only_when_asked(tmp_path):
    proc = run([PY, "-m", "ezpz", "doctor", "--json"], env=child_env(EZPZ_DEVICE="emu"), cwd=tmp_path)
    data = json.loads(proc.stdout)
    device = next(d for d in data["decisions"] if d["topic"] == "device")
    assert device["chosen"] == "emu" and device["details"]["plugin"] == "example-emu", device
    quiet = json.loads(run([PY, "-m", "ezpz", "doctor", "--json"], env=child_env(), cwd=tmp_path).stdout)
    device = next(d for d in quiet["decisions"] if d["topic"] == "device")
    assert quiet["ok"] and device["chosen"] != "emu"
    assert not [a for a in device["alternatives"] if a["name"] == "emu" or "emu" in a.get("plugin", "")]


def _portable_ddp(tmp_path: Path, device: str, launcher: list[str]) -> list[torch.Tensor]:
    script, rec = portable_script(tmp_path), recorder(tmp_path)
    out = tmp_path / f"weights-{device}.pt"
    env = child_env(EZPZ_DEVICE=device, EZPZ_PRECISION="fp32")
    proc = run([*launcher, str(rec), str(script), str(out), "--steps", "10"], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    backend = "emuccl" if device == "emu" else "gloo"
    assert f"rank 0 of 2 on {device} ({backend}, fp32)" in proc.stdout, proc.stdout
    return _weights(out)


@pytest.mark.launcher
def test_portable_script_ddp_under_torchrun_equals_the_cpu_run(tmp_path):
    need_tool("torchrun")
    launcher = [PY, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port())]
    cpu = _portable_ddp(tmp_path, "cpu", launcher)
    launcher[-1] = str(free_port())
    emu = _portable_ddp(tmp_path, "emu", launcher)
    assert _max_difference(cpu, emu) <= 1e-6


@pytest.mark.launcher
def test_portable_script_ddp_under_mpiexec_equals_the_cpu_run(tmp_path):
    launcher = [*mpiexec_argv(2, "EZPZ_DEVICE", "EZPZ_PRECISION"), PY]
    cpu = _portable_ddp(tmp_path, "cpu", launcher)
    emu = _portable_ddp(tmp_path, "emu", launcher)
    assert _max_difference(cpu, emu) <= 1e-6


def _main_job_ddp(tmp_path: Path, device: str, launcher: list[str]) -> dict[str, torch.Tensor]:
    out = tmp_path / f"main-{device}.pt"
    env = child_env(EZPZ_DEVICE=device, EZPZ_PRECISION="fp32")
    proc = run([*launcher, "-m", "ezpz.examples.train", "--steps", "10", "--final-weights", str(out)], env=env,
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"device {device} (" in proc.stdout.splitlines()[0], proc.stdout
    return torch.load(out, map_location="cpu", weights_only=True)


@pytest.mark.launcher
def test_main_job_ddp_under_mpiexec_equals_the_cpu_run(tmp_path):
    """The transformer: attention and layer norm take the CPU's kernels on emu too, so the weights match."""
    launcher = [*mpiexec_argv(2, "EZPZ_DEVICE", "EZPZ_PRECISION"), PY]
    cpu = _main_job_ddp(tmp_path, "cpu", launcher)
    emu = _main_job_ddp(tmp_path, "emu", launcher)
    assert cpu.keys() == emu.keys() and _max_difference(list(cpu.values()), list(emu.values())) <= 1e-6


def _train(tmp_path: Path, name: str, *extra: str) -> tuple[str, dict]:
    report = tmp_path / f"{name}.json"
    argv = [PY, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()), *extra,
            "-m", "ezpz.examples.train", "--steps", "12", "--log-every", "4", "--checkpoint-every", "5",
            "--checkpoint-dir", str(tmp_path / f"ck-{name}"), "--final-weights", str(tmp_path / f"{name}.pt"),
            "--report", str(report)]
    if extra:
        argv += ["--test-fail-at-step", "5", "--test-fail-rank", "1"]
    proc = run(argv, env=child_env(EZPZ_DEVICE="emu", EZPZ_TIMEOUT="60"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(report.read_text())


@pytest.mark.launcher
def test_main_job_resumes_on_emu_to_the_same_weights(tmp_path):
    """DDP on emu, a rank killed at step 5, torchrun restarts, rank 0's checkpoint is loaded back onto emu."""
    need_tool("torchrun")
    _, plain = _train(tmp_path, "plain")
    out, resumed = _train(tmp_path, "restarted", "--max-restarts", "1")
    assert plain["device"] == resumed["device"] == "emu"
    assert resumed["attempt"] == 1 and resumed["start_step"] == 5 and "resumed from the step-5 checkpoint" in out
    a = torch.load(tmp_path / "plain.pt", map_location="cpu", weights_only=True)
    b = torch.load(tmp_path / "restarted.pt", map_location="cpu", weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # bitwise
