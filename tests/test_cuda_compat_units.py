"""The CUDA-compat front's pure parts: device translation, where reports go, the default answers."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from ezpz.cuda_compat.answers import default_answers
from ezpz.cuda_compat.devices import DeviceMap
from ezpz.cuda_compat.report import report_dir
from ezpz.cuda_compat.session import INSTALLERS, installers_for
from ezpz.errors import ConfigError


def test_cuda_requests_go_to_this_ranks_device():
    emu = DeviceMap(torch.device("meta", 1), local_rank=1, count=4)
    assert emu.same_kind("cuda") == "meta:1"
    assert emu.same_kind("cuda:1") == "meta:1"  # f'cuda:{local_rank}'
    assert emu.same_kind("cuda:3") == "meta:3"
    assert emu.same_kind(torch.device("cuda", 2)) == torch.device("meta", 2)
    assert emu.same_kind(0) == torch.device("meta", 0)
    with pytest.raises(ConfigError, match="an ordinal below 4"):
        emu.device("cuda:7")
    cpu = DeviceMap(torch.device("cpu"), local_rank=1, count=1)
    assert cpu.same_kind("cuda:1") == "cpu" and cpu.same_kind(torch.device("cuda")) == torch.device("cpu")
    assert cpu.asks_cuda("cuda:0") and cpu.asks_cuda(3) and not cpu.asks_cuda(True)
    assert not cpu.asks_cuda("cpu") and not cpu.asks_cuda(torch.float16) and not cpu.asks_cuda(3, ordinals=False)


def test_reports_go_under_the_job_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert report_dir({"EZPZ_CUDA_COMPAT_DIR": "/x/y"}, 1) == Path("/x/y")
    assert report_dir({"EZPZ_FAILURE_DIR": "/jobs/j1/attempt-0/failures"}, 8) == Path("/jobs/j1/attempt-0/cuda-compat")
    assert report_dir({"TORCHELASTIC_RUN_ID": "abc"}, 2) == tmp_path / "ezpz-jobs" / "cuda-compat" / "abc"
    assert report_dir({}, 1).parent == tmp_path / "ezpz-jobs" / "cuda-compat"


def test_a_device_that_torch_cuda_drives_is_left_alone_and_others_read_their_torch_module():
    cuda = default_answers(types.SimpleNamespace(device_type="cuda", backend="nccl", device=torch.device("cuda")))
    assert cuda.redirect is False and installers_for(cuda) == ()
    cpu = default_answers(types.SimpleNamespace(device_type="cpu", backend="gloo", device=torch.device("cpu")))
    assert cpu.redirect and cpu.missing_reduce_ops == ("AVG",) and cpu.capability is None
    assert cpu.streams == (hasattr(torch.cpu, "Stream") and hasattr(torch.cpu, "current_stream"))
    assert installers_for(cpu) == INSTALLERS
