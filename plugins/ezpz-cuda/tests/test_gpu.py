"""On a real NVIDIA GPU: setup() through the plugin, NCCL, autocast, TF32, NVTX under the profiler, memory.

Skipped unless ``torch.cuda.is_available()``. Single process; the NCCL check
creates a world-size-1 group itself with the backend ezpz chose, because
``setup()`` only creates a process group when the world size is above 1.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import torch

import ezpz

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)"),
]

_LAUNCH_VARS = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK", "PALS_RANKID", "SLURM_JOB_ID",
    "SLURM_STEP_NUM_TASKS", "EZPZ_DEVICE", "TORCH_DEVICE", "EZPZ_BACKEND", "TORCH_BACKEND", "EZPZ_PRECISION",
)


@pytest.fixture(autouse=True)
def real_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the suite's recorded-probe stubs: these tests read the real machine."""
    monkeypatch.undo()


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[ezpz.runtime.Runtime]:
    for var in _LAUNCH_VARS:
        monkeypatch.delenv(var, raising=False)
    matmul_before = torch.backends.cuda.matmul.allow_tf32
    cudnn_before = torch.backends.cudnn.allow_tf32
    ezpz.hooks.teardown()
    rt = ezpz.hooks.setup()
    yield rt
    ezpz.hooks.teardown()
    torch.backends.cuda.matmul.allow_tf32 = matmul_before
    torch.backends.cudnn.allow_tf32 = cudnn_before


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
    assert depth is None or depth >= 0
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
    if not any(g.mig_enabled for g in physical) and "CUDA_VISIBLE_DEVICES" not in __import__("os").environ:
        assert [(g.name, g.capability) for g in physical] == [(g.name, g.capability) for g in seen]
