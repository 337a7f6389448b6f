"""CPU probes (thin, impure, read-only): physical cores in this process's affinity and on the host, the load.

The topology comes from one read of ``/proc/cpuinfo`` (``processor``, ``physical id`` and ``core id`` of every
online CPU); where that file does not name them (aarch64 kernels, some VMs), from sysfs, two files per CPU
(``/sys/devices/system/cpu/cpuN/topology/{physical_package_id,core_id}``). Reading sysfs per CPU cost 4 files
per CPU for every ``setup()``: over a thousand opens on a 256-CPU node, for each rank.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cpuinfo_topology", "host_cores", "load_average_1min", "physical_cores", "read_topology"]

Topology = dict[int, tuple[str, str]]


def cpuinfo_topology(text: str) -> Topology | None:
    """``{logical cpu: (physical id, core id)}`` from ``/proc/cpuinfo``'s text; None when a CPU lacks either."""
    topo: Topology = {}
    cpu: int | None = None
    package = core = None
    for line in (*text.splitlines(), ""):
        key, _, value = line.partition(":")
        key = key.strip()
        if not key:  # a blank line ends one CPU's block
            if cpu is not None:
                if package is None or core is None:
                    return None
                topo[cpu] = (package, core)
            cpu = package = core = None
        elif key == "processor":
            try:
                cpu = int(value)
            except ValueError:
                return None
        elif key == "physical id":
            package = value.strip()
        elif key == "core id":
            core = value.strip()
    return topo or None


def read_topology() -> Topology | None:
    """The topology in ``/proc/cpuinfo`` (one read), or None: no such file, or it names no physical/core ids."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return cpuinfo_topology(fh.read())
    except OSError:
        return None


def _sysfs_core(cpu: int) -> tuple[str, str]:
    topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
    return topo.joinpath("physical_package_id").read_text(), topo.joinpath("core_id").read_text()


def physical_cores(topology: Topology | None = None) -> int:
    """Physical cores this process may run on (Open MPI's default slot count on a local launch).

    ``topology``: :func:`cpuinfo_topology`'s answer when the caller has read it (otherwise it is read here).
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    topo = read_topology() if topology is None else topology
    if topo is not None and all(cpu in topo for cpu in cpus):
        return len({topo[cpu] for cpu in cpus}) or len(cpus)
    cores = set()
    for cpu in cpus:
        try:
            cores.add(_sysfs_core(cpu))
        except OSError:
            return len(cpus)
    return len(cores) or len(cpus)


def load_average_1min() -> float | None:
    """The host's 1-minute load average (None where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def host_cores(topology: Topology | None = None) -> int | None:
    """Physical cores of every online CPU, whatever this process's affinity (None when unreadable).

    ``/proc/cpuinfo`` lists the online CPUs; without its topology fields, sysfs's ``online`` list is read.
    """
    topo = read_topology() if topology is None else topology
    if topo is not None:
        return len(set(topo.values())) or None
    try:
        online = Path("/sys/devices/system/cpu/online").read_text().strip()
        cores = set()
        for part in online.split(","):
            lo, _, hi = part.partition("-")
            for cpu in range(int(lo), int(hi or lo) + 1):
                cores.add(_sysfs_core(cpu))
    except (OSError, ValueError):
        return None
    return len(cores) or None
