"""CPU probes (thin, impure, read-only): physical cores in this process's affinity and on the host, the load."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["host_cores", "load_average_1min", "physical_cores"]


def physical_cores() -> int:
    """Physical cores this process may run on (Open MPI's default slot count on a local launch)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((topo.joinpath("physical_package_id").read_text(), topo.joinpath("core_id").read_text()))
        except OSError:
            return len(cpus)
    return len(cores) or len(cpus)


def load_average_1min() -> float | None:
    """The host's 1-minute load average (None where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def host_cores() -> int | None:
    """Physical cores of every online CPU, whatever this process's affinity (None when unreadable)."""
    try:
        online = Path("/sys/devices/system/cpu/online").read_text().strip()
        cores = set()
        for part in online.split(","):
            lo, _, hi = part.partition("-")
            for cpu in range(int(lo), int(hi or lo) + 1):
                topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
                cores.add((topo.joinpath("physical_package_id").read_text(), topo.joinpath("core_id").read_text()))
    except (OSError, ValueError):
        return None
    return len(cores) or None
