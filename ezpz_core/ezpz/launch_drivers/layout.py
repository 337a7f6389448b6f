"""How many processes, how many per node, on which hosts: from flags, the allocation and the devices."""

from __future__ import annotations

import math
from collections.abc import Callable

from ezpz.errors import ConfigError
from ezpz.inputs.hostlist import hosts_from_file
from ezpz.launch_drivers.base import Allocation, Layout

__all__ = ["hostfile_allocation", "hosts_from_nodelist", "resolve_layout"]


def hosts_from_nodelist(text: str, name: str) -> tuple[str, ...]:
    """The hosts of a Slurm node list held by variable ``name``; ConfigError naming ``name`` otherwise."""
    from ezpz.inputs.hostlist import expand_nodelist

    try:
        return tuple(dict.fromkeys(h for h in expand_nodelist(text) if h))
    except ValueError as err:
        raise ConfigError(name=name, value=text, expected=f"a Slurm node list such as nid[001-004] ({err})",
                          fix=f"{name} is set by Slurm; unset it if you exported it by hand") from None


def hostfile_allocation(path: str) -> Allocation:
    """An allocation from a user's ``--hostfile`` (one host per line; repeats collapse)."""
    return Allocation(hosts=hosts_from_file(path, "--hostfile"), hostfile=path, source=f"--hostfile {path}")


def _positive(flag: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(name=flag, value=value, expected="a positive number of processes",
                          fix=f"pass {flag} 1 or more")


def resolve_layout(alloc: Allocation, n: int | None, ppn: int | None,
                   default_ppn: Callable[[], tuple[int, str]],
                   granted: tuple[int, int, int, str] | None = None) -> Layout:
    """Fill in whichever of ``n``/``ppn`` is missing and check the result fits the allocation.

    ``granted`` is ``(n, ppn, nodes, why)`` from the scheduler's allocation
    (:mod:`ezpz.launch_drivers.grant`); it is used only when neither ``n`` nor ``ppn`` is given.
    """
    _positive("-n", n)
    _positive("--ppn", ppn)
    avail = len(alloc.hosts) or 1
    if n is None and ppn is None and granted is not None:
        n, ppn, nodes_granted, why = granted
        avail = max(avail, nodes_granted) if not alloc.hosts else avail
        nodes = min(math.ceil(n / ppn), avail)
        return Layout(n=n, ppn=min(ppn, n), nodes=nodes, allocation=alloc,
                      why=f"{n} process(es), {min(ppn, n)} per node, on {nodes} of {avail} node(s): "
                          f"{why}; pass -n/--ppn to choose otherwise")
    if ppn is not None:
        why_ppn = "--ppn"
    elif n is not None:
        ppn, why_ppn = math.ceil(n / avail), f"-n spread over {avail} node(s)"
    else:
        ppn, why_ppn = default_ppn()
    why_n = "-n" if n is not None else f"{ppn} per node x {avail} node(s)"
    n = n if n is not None else ppn * avail
    nodes = math.ceil(n / ppn)
    if nodes > avail:
        raise ConfigError(
            name="-n", value=n, expected=f"at most {ppn * avail}: {ppn} per node on {avail} node(s) ({alloc.source})",
            fix="lower -n, raise --ppn, or launch on more nodes (--hostfile, or a bigger allocation)",
        )
    return Layout(n=n, ppn=min(ppn, n), nodes=nodes, allocation=alloc,
                  why=f"{n} process(es) ({why_n}), {min(ppn, n)} per node ({why_ppn}), "
                      f"on {nodes} of {avail} node(s) ({alloc.source})")
