"""Launch drivers: build the right ``torchrun``/``mpiexec``/``srun``/``flux run``/``jsrun`` command for where we are.

Drivers are classes registered in entry-point group ``ezpz.launchers`` (see
:mod:`ezpz.launch_drivers.base` for the interface), loaded one at a time by name with
stevedore, so a site adds its launcher by installing a package. :func:`prepare`
picks the driver (or takes the one named), works out the layout and builds the
command; :func:`ezpz.launch_drivers.run.run` runs it. Nothing here starts a process
except ``run``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from attrs import field

from ezpz.errors import ConfigError
from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen
from ezpz.launch_drivers.base import UNKNOWN_DEVICES, Allocation, Command, DeviceSlots, Launcher, Layout, Match
from ezpz.launch_drivers.grant import granted as granted_tasks
from ezpz.launch_drivers.grant import use_grant
from ezpz.launch_drivers.layout import hostfile_allocation, resolve_layout
from ezpz.launch_drivers.registry import DEFAULT_ORDER, GROUP, installed, load, select

__all__ = [
    "DEFAULT_ORDER", "GROUP", "Allocation", "Command", "DeviceSlots", "LaunchPlan", "Launcher", "Layout", "Match",
    "installed", "load", "prepare", "select",
]


@frozen(kw_only=True)
class LaunchPlan:
    """The launcher chosen and why, those passed over, the layout, and the command."""

    launcher: str
    reason: str
    layout: Layout
    command: Command
    passed_over: tuple[tuple[str, str], ...] = field(default=(), converter=as_tuple)


def prepare(
    argv: Sequence[str], *, launcher: str | None = None, n: int | None = None, ppn: int | None = None,
    hostfile: str | None = None, environ: Mapping[str, str] | None = None,
    devices: Callable[[], DeviceSlots] | None = None,
) -> LaunchPlan:
    """Choose a launcher and build the command that runs ``argv`` as ``n`` processes. No side effects.

    ``devices`` tells how many devices a node has (called only when the layout
    needs it; ``ezpz launch`` asks ``ezpz.hooks.plan()``); without it, one
    shared device is assumed and ``-n``/``--ppn`` decide.
    """
    env = os.environ if environ is None else environ
    if not argv:
        raise ConfigError(name="command", value="", expected="the command to launch",
                          fix="put it after --, e.g. ezpz launch -n 2 -- python train.py")
    if launcher:
        passed: tuple[tuple[str, str], ...] = ()
        driver = load(launcher)
        reason = f"--launcher {launcher}"
        found = driver.match(env)
        reason += f" ({found.reason})" if found.applies else f" (though: {found.reason})"
    else:
        launcher, driver, found, passed = select(env)
        reason = found.reason
    alloc = hostfile_allocation(hostfile) if hostfile else driver.allocation(env)
    grant = granted_tasks(env) if n is None and ppn is None and not hostfile else None
    used = None
    if grant is not None:
        slots = devices() if devices is not None else UNKNOWN_DEVICES
        g_n, g_ppn, g_why = use_grant(grant, (slots.per_node, slots.why), slots.shared)
        used = (g_n, g_ppn, grant.nodes, g_why)
    layout = resolve_layout(alloc, n, ppn, lambda: (devices() if devices is not None else UNKNOWN_DEVICES).default_ppn,
                            granted=used)
    command = driver.build(list(argv), layout, env)
    return LaunchPlan(launcher=launcher, reason=reason, layout=layout, command=command, passed_over=passed)
