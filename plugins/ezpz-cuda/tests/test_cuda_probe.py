"""The impure layer itself: NVML through a stand-in ``pynvml``, torch.cuda for real, NVTX and memory hooks."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

import cuda_recorded as rec
from cuda_testlib import plan_with
from ezpz_cuda import plugin, probe

# The autouse fixture replaces the probe functions; these tests need the originals.
_nvml_gpus = probe.nvml_gpus
_torch_gpus = probe.torch_gpus
_torch_arch_list = probe.torch_arch_list


class _NVMLError(Exception):
    pass


def fake_pynvml(gpus: list[dict[str, Any]], *, init_error: str | None = None) -> types.ModuleType:
    """A stand-in for nvidia-ml-py's ``pynvml`` with the calls the probe makes."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = _NVMLError  # type: ignore[attr-defined]
    mod.calls = []  # type: ignore[attr-defined]

    def init() -> None:
        mod.calls.append("init")
        if init_error:
            raise _NVMLError(init_error)

    def mig_mode(h: int) -> tuple[int, int]:
        if gpus[h].get("mig") is None:
            raise _NVMLError("Not Supported")
        return (int(gpus[h]["mig"]), 0)

    mod.nvmlInit = init  # type: ignore[attr-defined]
    mod.nvmlShutdown = lambda: mod.calls.append("shutdown")  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = lambda: len(gpus)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = lambda h: gpus[h]["name"]  # type: ignore[attr-defined]
    mod.nvmlDeviceGetUUID = lambda h: gpus[h]["uuid"]  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCudaComputeCapability = lambda h: gpus[h]["cc"]  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=gpus[h]["mem"], free=0, used=0)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=gpus[h]["bus"])  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMigMode = mig_mode  # type: ignore[attr-defined]
    return mod


def test_nvml_probe_reads_every_gpu_and_shuts_down(monkeypatch):
    nvml = fake_pynvml([
        # older nvidia-ml-py releases return bytes for strings
        {"name": b"NVIDIA A100-SXM4-40GB", "uuid": b"GPU-aaaa", "cc": (8, 0), "mem": 42298834944,
         "bus": b"00000000:07:00.0", "mig": 1},
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-bbbb", "cc": (9, 0), "mem": 81559 * rec.MiB,
         "bus": "00000000:18:00.0"},
    ])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    gpus = _nvml_gpus()
    assert [g.name for g in gpus] == ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"]
    assert [g.capability for g in gpus] == [(8, 0), (9, 0)]
    assert gpus[0].uuid == "GPU-aaaa" and gpus[0].pci_bus_id == "00000000:07:00.0"
    assert [g.mig_enabled for g in gpus] == [True, False]
    assert gpus[1].total_memory == 81559 * rec.MiB
    assert nvml.calls == ["init", "shutdown"]


def test_nvml_probe_without_bindings_says_how_to_install_them(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(probe.ProbeUnavailable, match=r"ezpz-cuda\[nvml\]"):
        _nvml_gpus()


def test_nvml_probe_without_driver(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([], init_error="Driver Not Loaded"))
    with pytest.raises(probe.ProbeUnavailable, match="Driver Not Loaded"):
        _nvml_gpus()


def test_torch_probe_on_this_torch_matches_device_count():
    import torch

    gpus = _torch_gpus()
    assert len(gpus) == torch.cuda.device_count()


def test_arch_list_probe_matches_torch():
    import torch

    assert _torch_arch_list() == tuple(torch.cuda.get_arch_list())


def test_real_probe_with_the_installed_torch_build(monkeypatch):
    """The real probes and the real build facts of this machine: a clear answer either way."""
    import torch

    from ezpz.probes.torch_build import probe_torch_build

    monkeypatch.setattr(probe, "nvml_gpus", _nvml_gpus)
    monkeypatch.setattr(probe, "torch_gpus", _torch_gpus)
    monkeypatch.setattr(probe, "torch_arch_list", _torch_arch_list)
    report = plugin.ezpz_probe_devices(build=probe_torch_build(), environ={})
    if torch.version.cuda is None:
        assert not report.candidates
        assert report.rejections[0].reason.startswith(("torch built without CUDA", "torch is a ROCm build"))
    elif torch.cuda.device_count() == 0:
        assert not report.candidates and "0 CUDA devices visible" in report.rejections[0].reason
    else:  # a GPU this torch has kernels for, or a rejection that says it has none
        assert report.candidates or "no kernels" in report.rejections[0].reason


# -- profiling hooks -------------------------------------------------------------------------------


def test_recorded_h100_nvtx_ranges_call_torch_cuda_nvtx_lazily(record, monkeypatch):
    import torch.cuda.nvtx

    record(rec.node(rec.H100_SXM5_80GB, 1), rec.TORCH_2_13_CU130)
    plan, _ = plan_with({}, rec.TORCH_2_13_CU130)
    seen: list[str] = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: seen.append(f"push {name}") or 0)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: seen.append("pop") or 0)
    plan.profiling.range_push("train_step")
    plan.profiling.range_pop()
    assert seen == ["push train_step", "pop"]


def test_recorded_h100_memory_stats_are_a_flat_mapping(record, monkeypatch):
    import torch

    record(rec.node(rec.H100_SXM5_80GB, 1), rec.TORCH_2_13_CU130)
    plan, _ = plan_with({}, rec.TORCH_2_13_CU130)
    fakes = {
        "memory_stats": lambda d: {"num_alloc_retries": 2, "num_ooms": 0, "allocated_bytes.all.current": 512},
        "mem_get_info": lambda d: (70 * rec.GiB, 81559 * rec.MiB),
        "memory_allocated": lambda d: 512,
        "memory_reserved": lambda d: 2 * rec.MiB,
        "max_memory_allocated": lambda d: 1024,
        "max_memory_reserved": lambda d: 4 * rec.MiB,
    }
    for name, fn in fakes.items():
        monkeypatch.setattr(torch.cuda, name, fn)
    stats = plan.profiling.memory_stats("cuda:0")
    assert stats == {
        "allocated_bytes": 512.0, "reserved_bytes": float(2 * rec.MiB), "max_allocated_bytes": 1024.0,
        "max_reserved_bytes": float(4 * rec.MiB), "alloc_retries": 2.0, "ooms": 0.0,
        "device_free_bytes": float(70 * rec.GiB), "device_total_bytes": float(81559 * rec.MiB),
    }


def test_before_init_only_names_deepspeeds_accelerator_when_nvml_probed(record):
    record(rec.node(rec.H100_SXM5_80GB, 1), rec.TORCH_2_13_CU130)
    plan, _ = plan_with({}, rec.TORCH_2_13_CU130)
    action = plugin.ezpz_before_init(plan=plan)
    assert dict(action.env_defaults) == {"DS_ACCELERATOR": "cuda"}
    assert "spawn" not in action.reason and "DS_ACCELERATOR=cuda" in action.reason


def test_recorded_h100_device_timer_is_cuda_events_made_from_torch_cuda(record, monkeypatch):
    """Recorded facts, no GPU: the choice, its reason and that the event comes from torch.cuda with timing on
    (torch.cuda.Event is replaced by a recorder; not run on a GPU here)."""
    import torch

    record(rec.node(rec.H100_SXM5_80GB, 1), rec.TORCH_2_13_CU130)
    plan, _ = plan_with({}, rec.TORCH_2_13_CU130)
    assert plan.profiling.timer == "cuda events" and "torch.cuda.Event(enable_timing=True)" in plan.profiling.timer_reason
    made: list[dict] = []
    monkeypatch.setattr(torch.cuda, "Event", lambda **kw: made.append(kw) or "event")
    assert plan.profiling.new_event() == "event" and made == [{"enable_timing": True}]
