"""This machine's own IP addresses (thin, impure, read-only), from the kernel's tables of the network namespace.

IPv4 from ``/proc/net/fib_trie`` (the ``/32 host LOCAL`` entries), IPv6 from ``/proc/net/if_inet6``. No name is
resolved (nothing here waits on DNS). Elsewhere, or when a table cannot be read, that family gives nothing.
"""

from __future__ import annotations

import ipaddress

__all__ = ["own_addresses", "parse_fib_trie", "parse_if_inet6"]

_LIMIT = 1 << 22
"""Read at most this much of a table (a node's tables are a few KiB; a router's can be large)."""


def parse_fib_trie(text: str) -> frozenset[str]:
    """The IPv4 addresses ``/proc/net/fib_trie`` marks ``/32 host LOCAL`` (assigned to this namespace)."""
    found: set[str] = set()
    last: str | None = None
    for line in text.splitlines():
        item = line.strip()
        if item.startswith("|-- "):
            last = item[4:].strip()
        elif last is not None and item.split()[:3] == ["/32", "host", "LOCAL"]:
            try:
                found.add(str(ipaddress.IPv4Address(last)))
            except ValueError:
                pass
    return frozenset(found)


def parse_if_inet6(text: str) -> frozenset[str]:
    """The IPv6 addresses ``/proc/net/if_inet6`` lists (32 hex digits first on each line), compressed."""
    found: set[str] = set()
    for line in text.splitlines():
        fields = line.split()
        if fields and len(fields[0]) == 32:
            try:
                found.add(str(ipaddress.IPv6Address(int(fields[0], 16))))
            except ValueError:
                pass
    return frozenset(found)


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read(_LIMIT)
    except OSError:
        return ""


def own_addresses() -> frozenset[str]:
    """Every address assigned to this machine (its network namespace), IPv4 and IPv6, as ``ipaddress`` writes
    them; empty where the tables cannot be read."""
    return parse_fib_trie(_read("/proc/net/fib_trie")) | parse_if_inet6(_read("/proc/net/if_inet6"))
