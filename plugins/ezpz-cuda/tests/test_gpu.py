"""On a real NVIDIA GPU: every check that ran live on the H200 (2026-11-27), one test each (``pytest -m gpu``).

The list of checks is ``gpu_kit.GPU_CHECKS``; ``bash scripts/gpu-check.sh`` runs
them, prints one line per check and writes a JSON report. Without a CUDA
device every test skips, naming why. Single-process tests use this process;
the launcher checks (torchrun, DeepSpeed, the main job, the CUDA-style
trainer) run their own processes, each under a timeout.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import ezpz
from gpu_kit import LAUNCH_VARS, check_env, last_loss, no_device_reason, nvtx_push_result, python

_NO_DEVICE = no_device_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_NO_DEVICE is not None, reason=_NO_DEVICE or "")]

HERE = Path(__file__).parent
SCRIPTS = HERE / "gpu_scripts"
ROOT = HERE.parents[2]
TIMEOUT_S = 600


@pytest.fixture(autouse=True)
def real_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the suite's recorded-probe stubs: these tests read the real machine."""
    monkeypatch.undo()


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[ezpz.runtime.Runtime]:
    for var in LAUNCH_VARS:
        monkeypatch.delenv(var, raising=False)
    matmul_before = torch.backends.cuda.matmul.allow_tf32
    cudnn_before = torch.backends.cudnn.allow_tf32
    ezpz.hooks.teardown()
    rt = ezpz.hooks.setup()
    yield rt
    ezpz.hooks.teardown()
    torch.backends.cuda.matmul.allow_tf32 = matmul_before
    torch.backends.cudnn.allow_tf32 = cudnn_before


def _run(argv: list[str], cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """A check's own process, with this machine's devices and no inherited launcher variables."""
    return subprocess.run(argv, env=check_env(OMP_NUM_THREADS="1", **env), cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def _torchrun(nproc: int, script: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return _run([python(), "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port",
                 str(port), str(script), *args], **env)


def _rows(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _cc() -> tuple[int, int]:
    return torch.cuda.get_device_capability(0)


def test_gpu_setup_chooses_this_gpu(runtime):
    assert runtime.device == torch.device("cuda", 0)
    assert (runtime.device_type, runtime.vendor) == ("cuda", "nvidia")
    cand = runtime.plan.device.candidate
    assert cand.plugin == "cuda"
    assert cand.names[0] == torch.cuda.get_device_name(0)
    assert cand.facts.gpus[0].capability == _cc()
    assert cand.count == torch.cuda.device_count()
    print(runtime.explain())  # the trace, for the record of this run


def test_gpu_nccl_process_group_of_one(runtime):
    import torch.distributed as dist

    if not dist.is_nccl_available():
        pytest.skip("this torch has no NCCL")
    assert runtime.backend == "nccl"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group(backend=runtime.backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                            device_id=runtime.device)
    try:
        assert dist.get_backend() == "nccl"
        t = torch.arange(4, dtype=torch.float32, device=runtime.device)
        dist.all_reduce(t)
        torch.cuda.synchronize()
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    finally:
        dist.destroy_process_group()


def test_gpu_autocast_really_engaged(runtime):
    a = torch.randn(64, 64, device=runtime.device)
    with runtime.autocast():
        assert torch.is_autocast_enabled("cuda")
        y = a @ a
    if _cc() >= (8, 0):
        assert runtime.amp.dtype == "bf16"
        assert y.dtype == torch.bfloat16
    else:
        assert runtime.amp.dtype == "fp16" and runtime.amp.grad_scaler
        assert y.dtype == torch.float16
    assert runtime.grad_scaler().is_enabled() == runtime.amp.grad_scaler


def test_gpu_tf32_flag_follows_the_policy(runtime):
    assert runtime.amp.tf32 == (_cc() >= (8, 0))
    if runtime.amp.tf32:
        precision = getattr(torch.backends.cuda.matmul, "fp32_precision", None)
        if precision is not None:
            assert precision == "tf32"
        else:
            assert torch.backends.cuda.matmul.allow_tf32


def test_gpu_nvtx_range_shows_in_the_torch_profiler(runtime):
    depth = runtime.profiling.range_push("ezpz_cuda_direct_nvtx")
    runtime.profiling.range_pop()
    ok, why = nvtx_push_result(depth)  # -2: no NVTX tool attached (the H200 run), not a failure
    assert ok, why
    a = torch.randn(256, 256, device=runtime.device)
    with runtime.profiler() as prof:
        with runtime.range("ezpz_cuda_range"):
            (a @ a).sum().item()
        torch.cuda.synchronize()
    assert torch.profiler.ProfilerActivity.CUDA in prof.activities
    assert "ezpz_cuda_range" in {e.key for e in prof.key_averages()}


def test_gpu_memory_stats(runtime):
    keep = torch.empty(1 << 20, dtype=torch.uint8, device=runtime.device)
    stats = runtime.memory_stats()
    assert stats["allocated_bytes"] >= keep.numel()
    assert stats["max_allocated_bytes"] >= stats["allocated_bytes"]
    assert stats["device_total_bytes"] == pytest.approx(torch.cuda.get_device_properties(0).total_memory, rel=0.01)
    assert all(isinstance(v, float) for v in stats.values())


def test_gpu_nvml_probe_agrees_with_torch():
    from ezpz_cuda import probe

    try:
        physical = probe.nvml_gpus()
    except probe.ProbeUnavailable as err:
        pytest.skip(f"NVML not usable here: {err}")
    seen = probe.torch_gpus()
    if not any(g.mig_enabled for g in physical) and "CUDA_VISIBLE_DEVICES" not in os.environ:
        assert [(g.name, g.capability) for g in physical] == [(g.name, g.capability) for g in seen]


def test_gpu_doctor_names_this_gpu():
    proc = _run([python(), "-m", "ezpz", "doctor"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "device: cuda:0" in proc.stdout and "backend: nccl" in proc.stdout, proc.stdout
    assert torch.cuda.get_device_name(0) in proc.stdout


def test_gpu_main_job_runs(tmp_path):
    report = tmp_path / "report.json"
    proc = _run([python(), "-m", "ezpz.examples.train", "--steps", "30", "--log-every", "10", "--report", str(report)])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    first = next(line for line in out.splitlines() if line.startswith("[ezpz]"))
    assert "device cuda:0" in first and "backend nccl" in first, first
    assert report.is_file(), out


def test_gpu_low_precision_training_step_with_rt_step(runtime):
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 512))
    model = model.to(runtime.device)
    opt = torch.optim.AdamW(model.parameters())
    scaler = runtime.grad_scaler()
    x = torch.randn(64, 512, device=runtime.device)
    losses, counts = [], []
    for _ in range(5):
        with runtime.range("fwd"), runtime.autocast():
            y = model(x)
            loss = y.float().pow(2).mean()
        assert y.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[runtime.amp.dtype]
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        counts.append(runtime.step())
        losses.append(loss.item())
    runtime.synchronize()
    assert counts == [1, 2, 3, 4, 5]
    assert losses[-1] < losses[0], losses


def test_gpu_profiler_trace_holds_cuda_kernels_and_our_range(runtime, tmp_path):
    a = torch.randn(2048, 2048, device=runtime.device)
    with runtime.profiler() as prof:
        with runtime.range("ezpz_matmul"):
            (a @ a).sum().item()
        torch.cuda.synchronize()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert kernels, "no CUDA kernel events in the profiler's trace"
    assert any("ezpz_matmul" in (e.get("name") or "") for e in events), "our range is not in the trace"


def test_gpu_device_timer_times_on_the_device(runtime):
    p = runtime.profiling
    assert p.new_event is not None, f"no device timer: {p.timer} / {p.timer_reason}"
    start, end = p.new_event(), p.new_event()
    a = torch.randn(4096, 4096, device=runtime.device)
    start.record()
    for _ in range(10):
        a @ a
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0.0


def test_gpu_inductor_matches_eager(runtime):
    if runtime.plan.compile.backend != "inductor":
        pytest.skip(f"the compile policy chose {runtime.plan.compile.backend}: {runtime.plan.compile.reason}")
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024))
    model = model.to(runtime.device)
    compiled = runtime.compile(model)
    x = torch.randn(256, 1024, device=runtime.device)
    with runtime.autocast():
        eager, fused = model(x), compiled(x)
    torch.cuda.synchronize()
    assert (eager.float() - fused.float()).abs().max().item() < 5e-2


def test_gpu_checkpoint_round_trip(runtime, tmp_path):
    from ezpz.examples import checkpoint

    model = torch.nn.Linear(8, 8).to(runtime.device)
    checkpoint.save(tmp_path, 3, {"model": model.state_dict(), "step": 3})
    got = checkpoint.load_latest(tmp_path, is_main=True, distributed=False)
    assert got is not None and got["step"] == 3
    for name, value in model.state_dict().items():
        assert torch.equal(got["model"][name].to(runtime.device), value), name


def test_gpu_live_conformance_kit():
    from ezpz.testing import check_plugin

    ezpz.hooks.teardown()
    report = check_plugin("cuda", live=True)
    failed = [f"{r.name}: {r.detail}" for r in report.results if not r.passed]
    assert not failed, failed
    assert any(r.name.startswith("live ") for r in report.results)


def test_gpu_ddp_world_of_one_under_torchrun():
    proc = _torchrun(1, SCRIPTS / "ddp_one.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = _rows(proc.stdout)
    assert (row["world_size"], row["device"], row["backend"]) == (1, "cuda:0", "nccl"), row


def test_gpu_two_ranks_on_one_gpu_are_refused():
    one = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    proc = _torchrun(2, SCRIPTS / "ddp_one.py", CUDA_VISIBLE_DEVICES=one)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "local rank=1 is not valid: expected below the 1 cuda device(s) visible" in out, out[-3000:]


def test_gpu_deepspeed_zero2():
    try:
        import deepspeed  # noqa: F401
    except Exception as err:  # absent, or installed without what it needs here
        pytest.skip(f"DeepSpeed is not usable here ({type(err).__name__}: {err})")
    proc = _torchrun(1, SCRIPTS / "ds_zero2.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = _rows(proc.stdout)
    assert row["device"] == "cuda:0" and row["ezpz_backend"] == row["dist_backend"] == "nccl", row
    if row["amp"] == "bf16":
        assert row["bf16"] == {"enabled": True} and row["param_dtype"] == "torch.bfloat16", row


def test_gpu_cuda_style_trainer_matches_its_port():
    """tests/scripts' CUDA-only trainer and its port to ``rt`` calls: same seed, same data, same loss."""
    args = ["--max-iters", "60", "--log-interval", "10"]
    original = _run([python(), str(ROOT / "tests" / "scripts" / "cuda_style_trainer.py"), *args])
    ported = _run([python(), str(ROOT / "tests" / "scripts" / "cuda_style_trainer_ported.py"), *args])
    assert original.returncode == 0, original.stdout + original.stderr
    assert ported.returncode == 0, ported.stdout + ported.stderr
    a, b = last_loss(original.stdout), last_loss(ported.stdout)
    assert abs(a - b) <= 0.02 * max(abs(a), 1e-6), (a, b)  # kernels are not bitwise deterministic


def test_gpu_cuda_compat_mode_redirects_nothing(tmp_path):
    """``python -m ezpz.cuda_compat`` where CUDA is chosen: no redirection, the plain run's loss, an empty report."""
    args = ["--max-iters", "40", "--log-interval", "10"]
    trainer = str(ROOT / "tests" / "scripts" / "cuda_style_trainer.py")
    plain = _run([python(), trainer, *args], cwd=tmp_path)
    compat = _run([python(), "-m", "ezpz.cuda_compat", trainer, *args], cwd=tmp_path,
                  EZPZ_CUDA_COMPAT_DIR=str(tmp_path / "report"))
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert compat.returncode == 0, compat.stdout + compat.stderr
    a, b = last_loss(plain.stdout), last_loss(compat.stdout)
    assert abs(a - b) <= 0.02 * max(abs(a), 1e-6), (a, b)  # kernels are not bitwise deterministic
    report = json.loads((tmp_path / "report" / "rank-0.json").read_text())
    assert report["redirecting"] is False and report["sites"] == [] and report["answers_from"] == "cuda", report
    assert "nothing redirected" in compat.stderr
