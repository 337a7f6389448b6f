"""Lifecycle helpers for ``ezpz_before_init``: telling other frameworks what ezpz chose."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ezpz.decisions import LifecycleAction

__all__ = ["with_ds_accelerator"]


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
