"""Helpers for the ezpz-xpu suite (a uniquely named module, so suites of several plugins can run together)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import ezpz.hooks
from ezpz.decisions import SetupPlan
from ezpz.decisions import Explanation
from ezpz.facts import TorchBuild

from ezpz_xpu.facts import XpuDeviceProps


def torchrun_env(rank: int = 0, world: int = 1, local_rank: int | None = None, local_world: int | None = None,
                 **extra: str) -> dict[str, str]:
    """The variables torchrun sets for one worker, plus ``extra`` (``ZE_*``, ``EZPZ_*``)."""
    local_world = world if local_world is None else local_world
    env = {
        "RANK": str(rank), "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank % local_world if local_rank is None else local_rank),
        "LOCAL_WORLD_SIZE": str(local_world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
        "GROUP_RANK": str(rank // local_world), "TORCHELASTIC_RUN_ID": "ezpz-xpu-test",
    }
    env.update(extra)
    return env


@attrs.define
class FakeIntel:
    """What the replaced probe functions answer, and what they were asked to import."""

    devices: tuple[XpuDeviceProps, ...] = ()
    ccl: bool = False
    ipex: bool = False
    itt: bool = True
    imported: list[str] = attrs.field(factory=list)
    import_error: dict[str, Exception] = attrs.field(factory=dict)


def plan(build: TorchBuild, environ: Mapping[str, str] | None = None,
         **overrides: Any) -> tuple[SetupPlan, Explanation]:
    """``ezpz.hooks.plan`` with recorded build facts and an explicit environment (never os.environ)."""
    return ezpz.hooks.plan(environ=dict(environ or torchrun_env()), build=build, **overrides)
