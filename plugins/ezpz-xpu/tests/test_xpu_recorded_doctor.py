"""``ezpz doctor`` on a recorded Aurora node (12 Max 1550 tiles, torch 2.13 XPU, XCCL): how rt.shard reduces, and why.

The torch build probe answers :data:`xpu_recorded.TORCH_2_13_XPU` and ``ezpz_xpu.probe`` the recorded tiles;
the doctor command itself (``ezpz.cli.doctor.run``) runs as a user would run it on rank 0 of a 24-rank job.
"""

from __future__ import annotations

import argparse
import json
import os

import pytest
from xpu_recorded import AURORA_FLAT, TORCH_2_13_XPU
from xpu_testlib import torchrun_env

from ezpz.cli import doctor
from ezpz.probes import torch_build

_LEAKY = ("EZPZ_", "OMPI_", "PMI_", "PMIX_", "PALS_", "SLURM_", "TORCHELASTIC_", "PBS_", "ZE_")


@pytest.fixture
def aurora(intel, monkeypatch):  # type: ignore[no-untyped-def]
    """Rank 0 of 2 nodes x 12 ranks under torchrun, on the recorded Aurora node and torch build."""
    intel(AURORA_FLAT, ccl=False)
    monkeypatch.setattr(torch_build, "probe_torch_build", lambda *a, **k: TORCH_2_13_XPU)
    for name in list(os.environ):
        if name.startswith(_LEAKY) or name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                               "MASTER_PORT", "GROUP_RANK", "TORCH_DEVICE", "TORCH_BACKEND"):
            monkeypatch.delenv(name)
    for name, value in torchrun_env(rank=0, world=24, local_world=12, ZE_FLAT_DEVICE_HIERARCHY="FLAT").items():
        monkeypatch.setenv(name, value)


def test_doctor_on_recorded_aurora_says_rt_shard_reduces_with_sum_and_why(aurora, capsys) -> None:
    doctor.run(argparse.Namespace(json=False))
    text = capsys.readouterr().out
    assert "backends=gloo,xccl" in text
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("sharding"))
    assert "SUM reductions, divided once after" in line and "mesh groups by new_group" in line
    assert "lacks AVG and PREMUL_SUM (xccl runs oneCCL" in text
    assert "'Cannot use ReduceOp.PREMUL_SUM with XCCL'" in text and "scheduler path" in text
    assert "DDP's mean gradient" in text
    assert "divide factor 1.0" in text and "world-size times DDP's gradients" in text

    doctor.run(argparse.Namespace(json=True))
    report = json.loads(capsys.readouterr().out)
    sharding = next(d for d in report["decisions"] if d["topic"] == "sharding")
    assert sharding["details"]["unsupported_reduce_ops"] == ["AVG", "PREMUL_SUM"]
    assert "set_force_sum_reduction_for_comms(True)" in sharding["details"]["gradient reduction"]
    assert "https://github.com/pytorch/torchtitan/pull/2332" in sharding["details"]["sources"]
