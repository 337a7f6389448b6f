"""``ezpz launch --timeout/--retries/--auto-retry``: the flags to a :class:`~ezpz.launch_drivers.supervisor.Supervisor`.

The attempt loop is :mod:`ezpz.launch_drivers.supervisor`; here the parsed flags become its
:class:`~ezpz.launch_drivers.supervisor.SupervisionOptions`, the plugins' failure signatures are gathered, and
what it says goes to stderr.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from ezpz.cli._util import err
from ezpz.failures.signatures import FailureSignature
from ezpz.launch_drivers import DeviceSlots, LaunchPlan
from ezpz.launch_drivers.log_signatures import LAUNCHER_SIGNATURES
from ezpz.launch_drivers.supervisor import SupervisionOptions, Supervisor

__all__ = ["supervise"]

P = "ezpz launch"


def _signatures() -> list[FailureSignature]:
    """The launchers' failure signatures and every plugin's (``ezpz_failure_signatures``)."""
    try:
        from ezpz.hooks import get_plugin_host
        from ezpz.plugin_host.calls import Hooks

        return [*LAUNCHER_SIGNATURES, *Hooks(get_plugin_host()).failure_signatures()]
    except Exception as error:  # a broken plugin host must not stop the retry loop
        err(f"{P}: note: plugins' failure signatures unavailable ({type(error).__name__}: {error})")
        return list(LAUNCHER_SIGNATURES)


def supervise(args: argparse.Namespace, command: list[str], environ: Mapping[str, str],
              devices: Callable[[], DeviceSlots], describe: Callable[[LaunchPlan], None]) -> int:
    """Run ``command`` in attempts (:meth:`Supervisor.run <ezpz.launch_drivers.supervisor.Supervisor.run>`)."""
    supervisor = Supervisor(SupervisionOptions.from_args(args), command, environ, devices=devices, describe=describe,
                            signatures=_signatures(), say=err)
    return supervisor.run()
