"""Adopting a process group that existed before ``setup()`` (Ray Train, Lightning, accelerate, DeepSpeed, a user).

Pure: :func:`adopt_group` reads an :class:`ExistingGroup` (what the probe in
:mod:`ezpz.startup.process_group` saw) and the plan, and either returns the decision
to adopt it or raises :class:`~ezpz.errors.ProcessGroupMismatchError`. Every
check is local to the rank (no collective, so nothing can hang here): a world
size that differs is seen, and raised, on every rank; a rank that differs is
raised on each rank whose own number differs.
"""

from __future__ import annotations

from attrs import field

from ezpz.primitives.converters import as_tuple
from ezpz.decisions import Decision, SetupPlan
from ezpz.errors import ProcessGroupMismatchError
from ezpz.primitives.frozen_records import frozen

__all__ = ["ExistingGroup", "adopt_group", "group_backends"]


@frozen(kw_only=True)
class ExistingGroup:
    """The default ``torch.distributed`` process group found initialised when ``setup()`` ran.

    ``backend`` is what ``torch.distributed.get_backend()`` said (``"gloo"``,
    ``"nccl"`` or ``"cpu:gloo,cuda:nccl"``). ``frameworks`` are the frameworks
    that can create a group and were imported (``ray.train``, ``accelerate`` ...),
    named in the trace as the likely owner.
    """

    backend: str
    rank: int
    world_size: int
    frameworks: tuple[str, ...] = field(default=(), converter=as_tuple)

    @property
    def owner(self) -> str:
        return " or ".join(self.frameworks) if self.frameworks else "the caller (no known framework imported)"


def group_backends(backend: str) -> dict[str, str]:
    """``"cpu:gloo,cuda:nccl"`` -> ``{"cpu": "gloo", "cuda": "nccl"}``; ``"gloo"`` -> ``{"*": "gloo"}``."""
    out: dict[str, str] = {}
    for part in backend.lower().replace(" ", "").split(","):
        if not part:
            continue
        device, sep, name = part.partition(":")
        out[device if sep else "*"] = name if sep else device
    return out


def _mismatch(what: str, value: object, expected: str, group: ExistingGroup, fix: str) -> ProcessGroupMismatchError:
    return ProcessGroupMismatchError(
        name=f"existing torch.distributed process group ({what})", value=value, expected=expected,
        fix=f"the group was created before ezpz.hooks.setup() by {group.owner}; {fix}",
    )


def adopt_group(group: ExistingGroup, plan: SetupPlan) -> Decision:
    """Adopt ``group`` if it matches the launcher's layout and serves the chosen device; raise otherwise."""
    launch, device_type = plan.launch, plan.device.candidate.device_type
    said = f"{launch.launcher} ({launch.sources.get('world_size', 'its variables')})"
    relaunch = ("start every rank through one launcher, so the group and the launcher's variables describe "
                "the same job, or create the group with the launcher's RANK and WORLD_SIZE")
    if group.world_size != launch.world_size:
        raise _mismatch("world size", group.world_size, f"world size {launch.world_size}, as {said} says",
                        group, relaunch)
    if group.rank != launch.rank:
        raise _mismatch("rank", group.rank, f"rank {launch.rank} of {launch.world_size}, as {launch.launcher} "
                        f"says ({launch.sources.get('rank', 'its variables')})", group, relaunch)
    backends = group_backends(group.backend)
    serving = backends.get(device_type, backends.get("*"))
    offered = (plan.backend.name, *(a.name for a in plan.backend.alternatives if not a.reason.startswith("unavail")))
    if serving not in offered:
        raise _mismatch(
            "backend", group.backend,
            f"a backend for {device_type} ({', '.join(offered)}: what the {plan.device.candidate.plugin or 'device'} "
            "plugin offers)", group,
            f"create the group with backend={plan.backend.name!r} (or {device_type}:{plan.backend.name}), "
            f"or choose the device that group serves with EZPZ_DEVICE",
        )
    note = "" if serving == plan.backend.name else f"; ezpz would have chosen {plan.backend.name} ({plan.backend.reason})"
    return Decision(
        topic="process_group",
        chosen=f"adopted from {group.owner} ({group.backend}, rank {group.rank} of {group.world_size})",
        reason=(f"torch.distributed was already initialised when setup() ran; its rank and world size match "
                f"{launch.launcher} and its backend {serving} serves {device_type}{note}. ezpz did not rendezvous "
                "again and leaves the group for its owner to destroy"),
        details={"backend": group.backend, "rank": f"{group.rank} (group) = {launch.rank} ({launch.launcher})",
                 "world_size": f"{group.world_size} (group) = {launch.world_size} ({launch.launcher})",
                 "teardown": "not destroyed by ezpz.hooks.teardown(); its owner destroys it"},
    )
