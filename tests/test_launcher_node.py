"""Which of the job's hosts is the launcher's own node: this machine's addresses read from the kernel's tables
(recorded: tests/fixtures/own_addresses, README there) and the host name, matched without resolving anything."""

from __future__ import annotations

from pathlib import Path

from ezpz.launch_drivers.launcher_node import launcher_nodes
from ezpz.probes.own_addresses import own_addresses, parse_fib_trie, parse_if_inet6

RECORDED = Path(__file__).parent / "fixtures" / "own_addresses"


def test_the_recorded_tables_give_the_machines_own_addresses_only():
    v4 = parse_fib_trie((RECORDED / "fib_trie.txt").read_text())
    assert v4 == {"127.0.0.1", "192.0.2.2"}  # not the /8 entry, the broadcast, the route 0.0.0.0
    assert parse_if_inet6((RECORDED / "if_inet6.txt").read_text()) == {"::1", "fd00::2", "fe80::fc:ff:fe00:1"}


def test_malformed_tables_give_nothing_rather_than_raise():
    assert parse_fib_trie("|-- not-an-address\n   /32 host LOCAL\n/32 host LOCAL\n\n") == frozenset()
    assert parse_if_inet6("zz" * 16 + " 01 80\nshort 1\n\n") == frozenset()


def test_the_live_probe_reads_this_namespaces_tables():
    """Whatever this host has (a namespace's loopback may even be down): the probe is the parse of its two tables."""
    def table(path: str) -> str:
        try:
            return Path(path).read_text(errors="replace")
        except OSError:
            return ""
    assert own_addresses() == parse_fib_trie(table("/proc/net/fib_trie")) | parse_if_inet6(table("/proc/net/if_inet6"))


def test_the_launchers_node_by_address_name_or_localhost():
    own = parse_fib_trie((RECORDED / "fib_trie.txt").read_text()) | parse_if_inet6(
        (RECORDED / "if_inet6.txt").read_text())
    assert launcher_nodes(("192.0.2.1", "192.0.2.2", "192.0.2.3"), "vm", own) == ("192.0.2.2",)
    assert launcher_nodes(("fd00::1", "[fd00::2]"), "vm", own) == ("[fd00::2]",)
    assert launcher_nodes(("x1000c0s0b0n0", "VM.cluster.example", "vm2"), "vm", own) == ("VM.cluster.example",)
    assert launcher_nodes(("nid001", "nid002"), "nid002.hsn.example", ()) == ("nid002",)
    assert launcher_nodes(("localhost", "127.0.0.1", "n1"), "vm", ()) == ("localhost", "127.0.0.1")
    # a host name that looks like an address is compared whole, never by its first label
    assert launcher_nodes(("10.0.0.5",), "10.0.0.9", ()) == ()
    assert launcher_nodes(("n1", "n2"), "login1", own) == ()  # not told apart: the caller treats it as not known
