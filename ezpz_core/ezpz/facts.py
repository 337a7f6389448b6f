"""Facts: frozen records of what probes saw. Policies read these and nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attr
from attr import field

from ezpz.primitives.converters import as_dict, as_tuple
from ezpz.primitives.frozen_records import frozen

__all__ = ["Alternative", "DeviceCandidate", "LaunchEnv", "ProbeReport", "Rejection", "TorchBuild", "parse_release"]


def parse_release(version: str) -> tuple[int, int]:
    """``"2.8.0+xpu"`` -> ``(2, 8)``; ``"6.1.40091-a8dbc0c19"`` -> ``(6, 1)``; unparsable parts count as 0."""
    parts = version.split("+", 1)[0].split("-", 1)[0].split(".")
    nums = []
    for part in parts[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        nums.append(int(digits) if digits else 0)
    while len(nums) < 2:
        nums.append(0)
    return nums[0], nums[1]


@frozen(kw_only=True)
class TorchBuild:
    """What the installed torch was built with. Probed without touching any GPU.

    ``distributed_backends`` lists the collective backends this build can create
    (``gloo``, ``nccl``, ``mpi``, ``xccl``, ``ucc``), as torch reports them.
    """

    version: str
    cuda: str | None = None
    hip: str | None = None
    xpu_built: bool = False
    mps_built: bool = False
    distributed: bool = True
    distributed_backends: tuple[str, ...] = ()

    @property
    def release(self) -> tuple[int, int]:
        """``(major, minor)`` of the torch version, for version-keyed tables."""
        return parse_release(self.version)

    def at_least(self, major: int, minor: int) -> bool:
        return self.release >= (major, minor)


@frozen(kw_only=True)
class Alternative:
    """Something considered and not chosen, with why."""

    name: str
    reason: str
    plugin: str = ""
    problem: bool = False
    """True for a fault to fix (a plugin offered a device torch cannot make), not a device that is simply absent:
    ``ezpz doctor`` counts it as a problem."""


def _nonempty(instance: object, attribute: attr.Attribute[str], value: str) -> None:
    if not value or not value.strip():
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be a non-empty explanation")


@frozen(kw_only=True)
class DeviceCandidate:
    """A usable device type a plugin sees, with the facts behind it.

    ``priority`` orders candidates across plugins (higher wins; ties broken by
    plugin name, then device type). Built-ins use 0 (cpu) and 50 (mps);
    discrete accelerators use 100. ``shared`` means several ranks may use the
    same device (cpu, mps): no per-rank index is assigned. ``physical_ids``
    maps each torch index to the physical device it is, after the vendor's
    visible-devices variable. ``facts`` is the plugin's own record of vendor
    facts; the core passes the candidate back to the plugin's later hooks.
    """

    device_type: str = field(validator=_nonempty)
    vendor: str = field(validator=_nonempty)
    reason: str = field(validator=_nonempty)
    count: int = field(default=1, validator=attr.validators.ge(0))
    priority: int = 0
    shared: bool = False
    names: tuple[str, ...] = field(default=(), converter=as_tuple)
    arch: str | None = None
    total_memory: tuple[int, ...] = field(default=(), converter=as_tuple)
    physical_ids: tuple[str, ...] = field(default=(), converter=as_tuple)
    visible_devices_var: str | None = None
    details: Mapping[str, Any] = field(factory=dict, converter=as_dict, hash=False)
    facts: Any = field(default=None, eq=False, hash=False, repr=False)
    plugin: str = ""

    @property
    def label(self) -> str:
        return f"{self.device_type} ({self.vendor}, plugin {self.plugin or '?'})"


@frozen(kw_only=True)
class Rejection:
    """A device a plugin looked for and could not offer, with why."""

    device_type: str = field(validator=_nonempty)
    vendor: str = field(validator=_nonempty)
    reason: str = field(validator=_nonempty)
    plugin: str = ""
    problem: bool = False
    """True when the device was refused for a fault to fix, not for being absent (see :attr:`Alternative.problem`)."""


@frozen(kw_only=True)
class ProbeReport:
    """What one plugin's device probe found: candidates and rejections."""

    candidates: tuple[DeviceCandidate, ...] = field(default=(), converter=as_tuple)
    rejections: tuple[Rejection, ...] = field(default=(), converter=as_tuple)

    @classmethod
    def rejected(cls, device_type: str, vendor: str, reason: str) -> ProbeReport:
        return cls(rejections=(Rejection(device_type=device_type, vendor=vendor, reason=reason),))

    @classmethod
    def found(cls, candidate: DeviceCandidate) -> ProbeReport:
        return cls(candidates=(candidate,))


def _layout_consistent(instance: LaunchEnv, attribute: attr.Attribute[int], value: object) -> None:
    """Safety net; detectors raise LaunchEnvError naming the variable first."""
    env = instance
    if not (0 <= env.rank < env.world_size):
        raise ValueError(f"rank {env.rank} outside world size {env.world_size}")
    if not (0 <= env.local_rank < env.local_world_size <= env.world_size):
        raise ValueError(
            f"local rank {env.local_rank} / local world size {env.local_world_size} "
            f"inconsistent with world size {env.world_size}"
        )
    if not (0 <= env.node_rank < env.num_nodes <= env.world_size):
        raise ValueError(f"node rank {env.node_rank} outside {env.num_nodes} nodes")
    if env.master_port is not None and not (1 <= env.master_port <= 65535):
        raise ValueError(f"master port {env.master_port} outside 1..65535")


@frozen(kw_only=True)
class LaunchEnv:
    """Where this process sits in the job, as the launcher described it.

    ``sources`` says, for each field, where its value came from
    (``"OMPI_COMM_WORLD_RANK"``, ``"derived: rank // local_world_size"``), for
    ``ezpz doctor``. ``master_addr``/``master_port`` are the rendezvous once
    resolved (``None`` for a single process). ``rejected`` holds the launchers
    that were checked and did not match, with why. ``ignored`` lists
    torch-style variables (``RANK=0 (openmpi says rank 1)``) that disagreed
    with the launcher that started the process and were not used; why is in
    ``sources["ignored"]``. ``exchange`` is ``"pmi"`` when rank 0 publishes
    the address it bound through the process manager (MPICH/Intel MPI Hydra),
    so ``master_port`` (and, across nodes, ``master_addr``) is known only then.
    """

    launcher: str
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0
    num_nodes: int = field(default=1, validator=_layout_consistent)
    master_addr: str | None = None
    master_port: int | None = None
    job_id: str | None = None
    hosts: tuple[str, ...] = field(default=(), converter=as_tuple)
    sources: Mapping[str, str] = field(factory=dict, converter=as_dict, hash=False)
    reason: str = ""
    rejected: tuple[Alternative, ...] = field(default=(), converter=as_tuple)
    ignored: tuple[str, ...] = field(default=(), converter=as_tuple)
    exchange: str | None = None

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def summary(self) -> str:
        """One line: the launcher, the layout and where it was read, e.g.
        ``torchrun: 2 ranks on 1 node (TORCHELASTIC_RUN_ID, RANK)``."""
        ranks = f"{self.world_size} rank{'s' if self.world_size != 1 else ''}"
        nodes = f"{self.num_nodes} node{'s' if self.num_nodes != 1 else ''}"
        if self.launcher == "single":
            said = self.reason.removeprefix("one process: ") if self.reason.startswith("one process: ") else ""
            return f"no launcher: {ranks} on {nodes} ({said or 'no launcher variables set'})"
        variables = [_variable(self.sources.get(k, "")) for k in ("launcher", "rank")]
        named = ", ".join(dict.fromkeys(s for s in variables if s)) or self.reason
        return f"{self.launcher}: {ranks} on {nodes} ({named})"


def _variable(source: str) -> str:
    """The variable a ``sources`` entry names first (``RANK (why ...)`` -> ``RANK``); empty when it names none."""
    head = source.split(" ", 1)[0].strip(",;:()")
    return head if head and head.replace("_", "").isalnum() and head.upper() == head and head[0].isalpha() else ""
