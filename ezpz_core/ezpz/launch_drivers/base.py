"""The launch-driver interface and the records it passes around.

A driver is a class registered in entry-point group ``ezpz.launchers``; the
entry-point name is the launcher's name (``--launcher NAME``). It answers three
questions, none of which may start a process:

* :meth:`Launcher.match` — does it apply here, and why (or why not)?
* :meth:`Launcher.allocation` — which hosts did the scheduler give this job?
* :meth:`Launcher.build` — the command that starts ``argv`` on a :class:`Layout`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from attrs import field

from ezpz.primitives.converters import as_dict, as_tuple
from ezpz.primitives.frozen_records import frozen

__all__ = ["Allocation", "Command", "DeviceSlots", "Launcher", "Layout", "Match"]


@frozen
class Match:
    """Whether a driver applies to this environment, with the reason either way."""

    applies: bool
    reason: str


@frozen(kw_only=True)
class DeviceSlots:
    """Devices per node as ``setup()`` would see them, given by the caller (``ezpz launch`` asks ``plan()``).

    ``shared`` means one device all ranks share (a CPU): its count does not
    limit the ranks per node. ``why`` says where the count came from.
    """

    per_node: int
    shared: bool
    why: str

    @property
    def default_ppn(self) -> tuple[int, str]:
        """One process per device, or 1 where the device is shared; with why."""
        if self.shared or self.per_node < 1:
            return 1, f"{self.why}; pass -n or --ppn for more"
        return self.per_node, f"one per device: {self.why}"


#: What the drivers assume when the caller gives no device count: one shared device.
UNKNOWN_DEVICES = DeviceSlots(per_node=1, shared=True, why="device count not given")


@frozen(kw_only=True)
class Allocation:
    """The hosts a job may use. Empty ``hosts`` means this machine only."""

    hosts: tuple[str, ...] = field(default=(), converter=as_tuple)
    hostfile: str | None = None
    source: str = "this machine only"


@frozen(kw_only=True)
class Layout:
    """How many processes go where. ``why`` says where ``n`` and ``ppn`` came from."""

    n: int
    ppn: int
    nodes: int
    allocation: Allocation
    why: str = ""

    @property
    def local(self) -> bool:
        return not self.allocation.hosts


@frozen(kw_only=True)
class Command:
    """A ready-to-run launcher command: argv, extra environment for the child, and notes."""

    argv: tuple[str, ...] = field(converter=as_tuple)
    env: Mapping[str, str] = field(factory=dict, converter=as_dict, hash=False)
    notes: tuple[str, ...] = field(default=(), converter=as_tuple)

    def shell(self) -> str:
        """The command as one copy-pasteable shell line (extra env as ``VAR=value`` prefixes)."""
        prefix = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        return " ".join([*prefix, shlex.join(self.argv)])


@runtime_checkable
class Launcher(Protocol):
    """What a launch driver implements (see the module docstring)."""

    def match(self, environ: Mapping[str, str]) -> Match:
        """Whether this launcher is the right one for ``environ``, and why."""
        ...

    def allocation(self, environ: Mapping[str, str]) -> Allocation:
        """The hosts the scheduler allocated (empty for a local launch)."""
        ...

    def build(self, argv: Sequence[str], layout: Layout, environ: Mapping[str, str]) -> Command:
        """The command that runs ``argv`` as ``layout.n`` processes; raise ConfigError if impossible."""
        ...
