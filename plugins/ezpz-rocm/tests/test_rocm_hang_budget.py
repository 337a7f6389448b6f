"""Recorded MI300X nodes: the RCCL hang budget follows EZPZ_TIMEOUT, and the failure signatures classify ROCm texts."""

from __future__ import annotations

import pytest
from rocm_recorded import torchrun_env
from test_rocm_recorded import before_init, plan

from ezpz.failures.classify import classify_exception
from ezpz_rocm.plugin import ezpz_failure_signatures


@pytest.mark.parametrize("timeout, heartbeat", [("10", "30"), ("90", "90"), ("90.5", "91")])
def test_hang_budget_follows_the_timeout(use_amdsmi, timeout, heartbeat) -> None:
    use_amdsmi("mi300x")
    action = before_init(plan(torchrun_env(local_rank=0, local_world_size=8, EZPZ_TIMEOUT=timeout)))["rocm"]
    env = dict(action.env_defaults)
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3" and env["TORCH_NCCL_ENABLE_MONITORING"] == "1"
    assert env["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] == heartbeat
    assert "RCCL hang budget" in action.reason


def test_single_process_sets_no_watchdog(use_amdsmi) -> None:
    use_amdsmi("mi300x")
    env = before_init(plan({"EZPZ_TIMEOUT": "10"}))["rocm"].env_defaults
    assert not any(k.startswith("TORCH_NCCL_") for k in env)


@pytest.mark.parametrize("text, kind, blames", [
    ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE)", "timeout", False),
    ("HW Exception by GPU node-2 (Agent handle: 0x5) reason :GPU Hang", "lost_peer", True),
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB", "oom", False),
    ("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error", "lost_peer", False),
])
def test_rocm_failure_texts(text, kind, blames) -> None:
    got = classify_exception(RuntimeError(text), ezpz_failure_signatures())
    assert (got.kind, got.blames_host) == (kind, blames)
