"""Recorded Aurora nodes: XCCL has no watchdog to set, and the plugin says so; Level Zero failure texts classify."""

from __future__ import annotations

import pytest
from xpu_recorded import AURORA_FLAT, TORCH_2_13_XPU
from xpu_testlib import plan, torchrun_env

from ezpz.failures.classify import classify_exception
from ezpz_xpu import plugin


def test_xccl_across_ranks_says_what_bounds_a_hang_and_sets_nothing(intel) -> None:
    intel(AURORA_FLAT)
    the_plan, _ = plan(TORCH_2_13_XPU, {**torchrun_env(rank=0, world=2), "EZPZ_TIMEOUT": "10"})
    assert the_plan.backend.name == "xccl"
    action = plugin.ezpz_before_init(the_plan)
    assert "no XCCL/oneCCL watchdog" in action.reason and "ezpz launch --timeout" in action.reason
    assert dict(action.env_defaults) == {"DS_ACCELERATOR": "xpu"}


def test_single_process_says_nothing_about_hangs(intel) -> None:
    intel(AURORA_FLAT)
    action = plugin.ezpz_before_init(plan(TORCH_2_13_XPU)[0])
    assert "watchdog" not in action.reason


@pytest.mark.parametrize("text, kind, blames", [
    ("RuntimeError: UR backend failed. UR backend returns:40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)", "oom", False),
    ("UR_RESULT_ERROR_DEVICE_LOST", "lost_peer", True),
    ("XPU out of memory. Tried to allocate 1.00 GiB", "oom", False),
])
def test_level_zero_failure_texts(text, kind, blames) -> None:
    got = classify_exception(RuntimeError(text), plugin.ezpz_failure_signatures())
    assert (got.kind, got.blames_host) == (kind, blames)
