"""The original ezpz's Aurora FSDP2 hang (v0.18.4, saforem2/ezpz#149), checked on a recorded Aurora node.

Its first all-gather deadlocked because the process group was made before ``torch.xpu.set_device(local_rank)``
and without ``device_id``: XCCL put some ranks' collectives on xpu:0 and others on xpu:LOCAL_RANK. ezpz's
``setup()`` sets the rank's device first and binds the default group to it (``device_id=xpu:LOCAL_RANK``).
Here torch's ``set_device`` and ``init_process_group`` are recorded (no Intel GPU in CI); the plan, the
plugins and ``setup()`` are real.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch
import torch.distributed as dist
from xpu_recorded import AURORA_FLAT, TORCH_2_13_XPU
from xpu_testlib import plan, torchrun_env

import ezpz.hooks
from ezpz.launch_env import store
from ezpz.probes import torch_build
from ezpz.startup import process_group

RANK_3 = torchrun_env(rank=3, world=24, local_world=12, ZE_FLAT_DEVICE_HIERARCHY="FLAT")


class _Stop(Exception):
    """Ends setup() at the process group: what follows needs a real XPU."""


def test_setup_sets_the_xpu_device_before_it_makes_the_process_group(intel, monkeypatch) -> None:
    intel(AURORA_FLAT)
    monkeypatch.setattr(torch_build, "probe_torch_build", lambda *a, **k: TORCH_2_13_XPU)
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if not k.startswith("EZPZ_")} | RANK_3)
    calls: list[str] = []
    monkeypatch.setattr(torch.xpu, "set_device", lambda index: calls.append(f"set_device({index})"))

    def made(the_plan: Any, environ: Any = None) -> None:
        calls.append(f"init_process_group({the_plan.backend.name})")
        raise _Stop

    monkeypatch.setattr(process_group, "init_process_group", made)
    with pytest.raises(_Stop):
        ezpz.hooks.setup()
    assert calls == ["set_device(3)", "init_process_group(xccl)"]


def test_the_xccl_default_group_is_bound_to_this_ranks_tile(intel, monkeypatch) -> None:
    intel(AURORA_FLAT)
    the_plan, _ = plan(TORCH_2_13_XPU, RANK_3)
    assert the_plan.backend.name == "xccl" and the_plan.device.torch_device == "xpu:3"
    seen: dict[str, Any] = {}

    class Rendezvous:  # the store itself is ezpz.launch_env.store's (tested there); here only its prefix
        where = "127.0.0.1:29500"

        def open(self) -> Any:
            return dist.HashStore()

    monkeypatch.setattr(store, "connect", lambda *a, **k: Rendezvous())
    monkeypatch.setattr(dist, "init_process_group", lambda **kwargs: seen.update(kwargs))
    process_group.init_process_group(the_plan, environ=RANK_3)
    assert seen["backend"] == "xccl" and seen["rank"] == 3 and seen["world_size"] == 24
    assert seen["device_id"] == torch.device("xpu:3")
