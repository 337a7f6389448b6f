"""The launcher prefix the original's ``build_launch_cmd`` returned, built by ezpz's launch drivers."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

__all__ = ["launch_prefix"]

if TYPE_CHECKING:
    from ezpz.launch_drivers.base import DeviceSlots

_PLACEHOLDER = "__ezpz_command__"


def launch_prefix(launcher: str, *, ngpus: int | None, nhosts: int | None, ngpu_per_host: int | None,
                  hostfile: str | os.PathLike[str] | None, cpu_bind: str | None,
                  environ: Mapping[str, str] | None = None) -> str:
    """``mpiexec --np 24 --ppn 12 --hostfile ...`` (or ``srun ...``): the command, less the program to run.

    ``ngpus`` is the total ranks, ``ngpu_per_host`` the ranks per node; with
    only ``nhosts``, every node of the job runs ``ngpu_per_host`` (else one per
    device, as ``ezpz launch`` decides). ``cpu_bind`` is passed as ``--cpu-bind``.
    """
    from ezpz.launch_drivers import prepare

    env = os.environ if environ is None else environ
    n = ngpus
    if n is None and nhosts is not None and ngpu_per_host is not None:
        n = nhosts * ngpu_per_host
    plan = prepare([_PLACEHOLDER], launcher=launcher, n=n, ppn=ngpu_per_host,
                   hostfile=None if hostfile is None else os.fspath(hostfile), environ=env,
                   devices=lambda: _device_slots(env))
    return plan.command.shell().rsplit(_PLACEHOLDER, 1)[0].rstrip() + (f" --cpu-bind={cpu_bind}" if cpu_bind else "")


def _device_slots(environ: Mapping[str, str]) -> DeviceSlots:
    """Devices per node as ``setup()`` would choose them; one shared device when planning fails."""
    from ezpz.hooks import plan
    from ezpz.launch_drivers.base import DeviceSlots

    try:
        cand = plan(environ=environ)[0].device.candidate
    except Exception as err:  # a broken plugin or launch variable must not stop building the command
        return DeviceSlots(per_node=1, shared=True, why=f"could not probe devices ({type(err).__name__}: {err})")
    if cand.shared or cand.count < 1:
        return DeviceSlots(per_node=1, shared=True, why=f"{cand.device_type} is one device shared by all ranks")
    return DeviceSlots(per_node=cand.count, shared=False, why=f"{cand.count} {cand.device_type} device(s) per node")
