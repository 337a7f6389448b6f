"""Which of the job's hosts is the launcher's own node, where ``mpiexec`` starts no daemon (pure).

It has no connection from the launcher (:mod:`ezpz.launch_drivers.host_channels`).

A host is the launcher's node when it names this machine as ``mpiexec`` would tell: the host name (short names
compared, for names that are not addresses), ``localhost``, or one of the machine's own addresses
(:func:`ezpz.probes.own_addresses.own_addresses`). Nothing is resolved: a name that is neither is not matched,
and the caller treats "none matched" as "not known", never as "the launcher runs elsewhere".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

__all__ = ["launcher_nodes"]


def _address(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        return None


def launcher_nodes(hosts: Sequence[str], hostname: str, addresses: Iterable[str]) -> tuple[str, ...]:
    """The hosts (in their order) that are this machine: by address, by host name, or ``localhost``."""
    own = {a for a in (_address(x) for x in addresses) if a is not None}
    name = hostname.strip().lower()
    short = name.split(".")[0] if _address(name) is None else name
    here = []
    for host in hosts:
        as_address = _address(host)
        if as_address is not None:
            if as_address in own or ipaddress.ip_address(as_address).is_loopback:
                here.append(host)
            continue
        h = host.strip().lower()
        if h == "localhost" or (name and (h == name or (short and h.split(".")[0] == short))):
            here.append(host)
    return tuple(here)
