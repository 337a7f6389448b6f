"""Helpers the ezpz-cuda tests import (kept out of conftest.py: several suites have a conftest module)."""

from __future__ import annotations

import ezpz
from ezpz.decisions import SetupPlan
from ezpz.decisions import Explanation
from ezpz.facts import TorchBuild


def torchrun(rank: int, world_size: int, local_rank: int, local_world_size: int, **extra: str) -> dict[str, str]:
    """The variables torchrun (torch.distributed.run) sets for one worker."""
    env = {
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(local_world_size),
        "GROUP_RANK": str(rank // local_world_size),
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": "10.1.0.1",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": "ezpz-cuda-recorded",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
    }
    env.update(extra)
    return env


def plan_with(environ: dict[str, str], build: TorchBuild) -> tuple[SetupPlan, Explanation]:
    """``ezpz.hooks.plan`` with the recorded build and environment: the real decision path."""
    return ezpz.hooks.plan(environ=environ, build=build)


def rejection(plan: SetupPlan, plugin: str = "cuda") -> str:
    """The reason ``plugin`` gave for not offering its device, from the plan's trace."""
    found = [a.reason for a in plan.device.alternatives if a.plugin == plugin]
    assert found, f"plugin {plugin!r} neither won nor said why not: {plan.device.alternatives}"
    return found[0]
