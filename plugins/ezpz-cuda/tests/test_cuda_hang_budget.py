"""Recorded H100 nodes: the NCCL hang budget follows EZPZ_TIMEOUT, and the failure signatures classify CUDA texts."""

from __future__ import annotations

import pytest

import cuda_recorded as rec
from cuda_testlib import plan_with, torchrun
from ezpz.failures.classify import classify_exception
from ezpz_cuda import plugin


@pytest.mark.parametrize("timeout, heartbeat", [("5", "30"), ("120", "120"), ("120.2", "121")])
def test_hang_budget_follows_the_timeout(record, timeout, heartbeat):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    plan, _ = plan_with(torchrun(1, 16, 1, 8, EZPZ_TIMEOUT=timeout), rec.TORCH_2_13_CU130)
    assert plan.backend.name == "nccl"
    action = plugin.ezpz_before_init(plan=plan)
    env = dict(action.env_defaults)
    assert env == {"DS_ACCELERATOR": "cuda", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
                   "TORCH_NCCL_ENABLE_MONITORING": "1", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": heartbeat}
    assert "NCCL hang budget" in action.reason and f"{float(timeout):g}s timeout" in action.reason


def test_gloo_on_gpus_sets_no_nccl_watchdog(record):
    record(rec.node(rec.H100_SXM5_80GB, 8), rec.TORCH_2_13_CU130)
    plan, _ = plan_with(torchrun(0, 16, 0, 8, EZPZ_BACKEND="gloo"), rec.TORCH_2_13_CU130)
    assert not any(k.startswith("TORCH_NCCL_") for k in plugin.ezpz_before_init(plan=plan).env_defaults)


@pytest.mark.parametrize("text, kind, blames", [
    ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=10000)",
     "timeout", False),
    ("NCCL error in: ../ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details)",
     "lost_peer", False),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "lost_peer", True),
    ("CUDA out of memory. Tried to allocate 20.00 MiB", "oom", False),
    ("ValueError: shapes do not match", "code_error", False),
])
def test_cuda_failure_texts(text, kind, blames):
    got = classify_exception(RuntimeError(text), plugin.ezpz_failure_signatures())
    assert (got.kind, got.blames_host) == (kind, blames)
