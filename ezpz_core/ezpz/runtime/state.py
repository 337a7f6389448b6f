"""What changes while a runtime is in use: the step clock, preemption, the step boundary, meshes, background saves.

:class:`~ezpz.runtime.Runtime` itself is frozen: its fields say what ``setup()`` decided and never change. What
moves as the script runs lives here, in one named, mutable object (``rt.state``), so "the runtime" and "where the
run is" are not mistaken for one another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attr
from attr import field

from ezpz.steps.boundary import StepMarker
from ezpz.steps.clock import StepClock
from ezpz.steps.preemption import Preemption

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from ezpz.checkpoints.background import BackgroundSaves

    from ezpz.steps.straggler_exchange import StragglerWatch

__all__ = ["MeshKey", "RuntimeState"]

#: A mesh's dimensions as ``rt.mesh(**dims)`` got them: ``(("dp", 2), ("tp", 2))``; ``()`` for ``rt.mesh()``.
MeshKey = tuple[tuple[str, int], ...]


@attr.define(kw_only=True, eq=False)
class RuntimeState:
    """The mutable part of a runtime: one per :class:`~ezpz.runtime.Runtime`, changed by its methods and watchers."""

    boundary: StepMarker
    """The device's step boundary, once per step: at ``rt.step()``, or after ``optimizer.step()`` (:mod:`ezpz.steps.boundary`)."""
    stragglers: StragglerWatch | None = None
    """Straggler detection (``EZPZ_STRAGGLER_EVERY``), or None when off or single-process."""
    step_clock: StepClock = field(factory=StepClock)
    """The steps ``rt.step()`` has ended and the wall time of the recent ones."""
    preemption: Preemption = field(factory=Preemption)
    """After a SIGTERM: the step every rank stops after (``rt.preempted``)."""
    meshes: dict[MeshKey, DeviceMesh] = field(factory=dict)
    """The DeviceMeshes ``rt.mesh(**dims)`` built, by their dimensions: each is built once."""
    background: BackgroundSaves | None = None
    """Background checkpoint saves (``rt.save_checkpoint(..., background=True)``), made at the first one."""
