"""Lifecycle helpers for ``ezpz_before_init``: telling other frameworks what ezpz chose."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ezpz.decisions import LifecycleAction, SetupPlan

__all__ = ["HEARTBEAT_FLOOR_S", "nccl_watchdog_env", "with_ds_accelerator", "with_nccl_hang_budget"]

HEARTBEAT_FLOOR_S = 30
"""The heartbeat monitor never fires sooner than this: the watchdog's own loop must have time to run under load."""


def nccl_watchdog_env(timeout_s: float) -> dict[str, str]:
    """torch's NCCL watchdog settings (NCCL and RCCL alike) for a job whose collectives must fail within ``timeout_s``."""
    heartbeat = max(math.ceil(timeout_s), HEARTBEAT_FLOOR_S)
    return {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3", "TORCH_NCCL_ENABLE_MONITORING": "1",
            "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": str(heartbeat)}


def with_nccl_hang_budget(action: LifecycleAction, plan: SetupPlan, library: str) -> LifecycleAction:
    """Under torch's ``nccl`` backend across ranks, ``action`` plus the watchdog settings that fail a hang in time.

    ``library`` names the collective library in the reason (``NCCL``, ``RCCL``).
    """
    if plan.backend.name != "nccl" or not plan.launch.distributed:
        return action
    env = nccl_watchdog_env(plan.timeout_s)
    return action.also(f"{library} hang budget from the {plan.timeout_s:g}s timeout: the watchdog takes a rank down "
                       f"when a collective times out, and aborts a stuck watchdog after "
                       f"{env['TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC']}s", env)


def with_ds_accelerator(action: LifecycleAction | None, name: str, what: str) -> LifecycleAction:
    """``action`` (or a new one) that also sets ``DS_ACCELERATOR=name``, said in its reason.

    Device plugins call this from ``ezpz_before_init`` so DeepSpeed uses the accelerator ezpz chose
    instead of guessing (``name`` as in deepspeed/accelerator/real_accelerator.py: ``cuda``, ``xpu``,
    ``hpu``, ``mps``, ``cpu``; ``what`` names it in the reason); ``setup()`` keeps a ``DS_ACCELERATOR``
    the user set and says so in the lifecycle decision.
    """
    from ezpz.decisions import LifecycleAction

    said = f"DS_ACCELERATOR={name}: DeepSpeed uses its {what} accelerator"
    if action is None:
        return LifecycleAction(reason=said, env_defaults={"DS_ACCELERATOR": name})
    return LifecycleAction(reason=f"{action.reason}; {said}", plugin=action.plugin,
                           env_defaults={**action.env_defaults, "DS_ACCELERATOR": name})
