"""Several "nodes" on one machine: Linux network namespaces joined by a bridge, made and removed by a test.

Layout for a test bed with tag ``T`` and ``k`` nodes::

    namespace T-sw : bridge br0 (no address; nothing routes through it)
    namespace T-n0 : eth0 198.18.<net>.1/24  <-veth->  T-sw port
    ...
    namespace T-nk : eth0 198.18.<net>.<k>/24

Addresses come from 198.18.0.0/15 (RFC 2544, reserved for network test beds).
No namespace gets a default route, and nothing is added to the machine's own
namespace or ``/etc/hosts``: traffic flows only between the test's namespaces
(and each one's loopback). Hosts are passed around as addresses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

__all__ = ["NetBed", "cannot_make_namespaces", "net_bed"]


def _ip(*args: str, ns: str | None = None) -> None:
    argv = ["ip", *(("netns", "exec", ns, "ip") if ns else ()), *args]
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30)


def cannot_make_namespaces() -> str | None:
    """None when this process may make network namespaces (CAP_NET_ADMIN and ``ip``), else why not."""
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"ezpz-probe-{os.getpid()}"
    made = False
    try:  # what a test bed needs: a namespace, and a bridge and a veth pair inside it
        for argv in (["ip", "netns", "add", probe],
                     ["ip", "netns", "exec", probe, "ip", "link", "add", "br0", "type", "bridge"],
                     ["ip", "netns", "exec", probe, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb"]):
            subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30)
            made = True
    except (OSError, subprocess.SubprocessError) as err:
        said = (getattr(err, "stderr", "") or str(err)).strip()[:200]
        return f"cannot make network namespaces with a bridge and veth pairs (needs CAP_NET_ADMIN, e.g. root): {said}"
    finally:
        if made:
            subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


@attrs.frozen
class NetBed:
    """The namespaces and their addresses; ``exec_prefix(i)`` runs a command on node ``i``."""

    tag: str
    addresses: tuple[str, ...]

    def ns(self, i: int) -> str:
        return f"{self.tag}-n{i}"

    def exec_prefix(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(i)]

    def hostfile(self, path: Path, slots: int = 1) -> Path:
        path.write_text("".join(f"{a} slots={slots}\n" for a in self.addresses))
        return path

    def agent(self, path: Path) -> Path:
        """A launch agent for Open MPI (``--mca plm_rsh_agent``): enters the node's namespace instead of ssh.

        Called as ``agent HOST COMMAND...``; like ssh, it runs the words as one shell command line, and like ssh it
        stays, with the host on its command line, as long as the remote command runs (the launcher's connection
        to the node, which ``ezpz.launch_drivers.host_channels`` names a node by), passing on a signal to end it
        and returning its exit status. (An agent that exec'd the command would keep its pid but lose the host from
        its command line moments after it started.)
        """
        cases = "\n".join(f"  {a}) ns={self.ns(i)} ;;" for i, a in enumerate(self.addresses))
        path.write_text(f"#!/bin/sh\nhost=$1; shift\ncase $host in\n{cases}\n"
                        f'  *) echo "agent: unknown host $host" >&2; exit 255 ;;\nesac\n'
                        'exec 3<&0\n'  # the remote command keeps this stdin (a background job's is /dev/null)
                        'ip netns exec "$ns" /bin/sh -c "$*" <&3 3<&- &\n'
                        'child=$!\n'
                        "trap 'kill -TERM $child 2>/dev/null' TERM INT HUP\n"
                        'rc=0\n'
                        'while :; do wait $child; rc=$?; kill -0 $child 2>/dev/null || break; done\n'
                        'exit $rc\n')
        path.chmod(0o755)
        return path


def _remove_stale() -> None:
    """Namespaces a killed test run left behind (their process is gone); only this module's own names."""
    import re

    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    for name in re.findall(r"^(ezpz(\d+)x\d+-(?:sw|n\d+))\b", listed, re.M):
        ns, pid = name[0], int(name[1])
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


@contextmanager
def net_bed(nodes: int, net: int = 0) -> Iterator[NetBed]:
    """``nodes`` namespaces on one bridge, addresses 198.18.<net>.1..nodes; removed on exit."""
    if not 0 <= net <= 255 or not 1 <= nodes <= 250:
        raise ValueError(f"net {net} / nodes {nodes} out of range")
    _remove_stale()
    tag = f"ezpz{os.getpid()}x{net}"
    switch = f"{tag}-sw"
    made: list[str] = []
    try:
        subprocess.run(["ip", "netns", "add", switch], check=True, capture_output=True, timeout=30)
        made.append(switch)
        _ip("link", "add", "br0", "type", "bridge", ns=switch)
        _ip("link", "set", "br0", "up", ns=switch)
        addresses = []
        for i in range(nodes):
            ns, addr = f"{tag}-n{i}", f"198.18.{net}.{i + 1}"
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=30)
            made.append(ns)
            inner, outer = f"e{tag[4:]}a{i}"[:15], f"e{tag[4:]}b{i}"[:15]
            _ip("link", "add", inner, "netns", ns, "type", "veth", "peer", "name", outer, "netns", switch)
            _ip("link", "set", inner, "name", "eth0", ns=ns)
            _ip("addr", "add", f"{addr}/24", "dev", "eth0", ns=ns)
            _ip("link", "set", "eth0", "up", ns=ns)
            _ip("link", "set", "lo", "up", ns=ns)
            _ip("link", "set", outer, "master", "br0", ns=switch)
            _ip("link", "set", outer, "up", ns=switch)
            addresses.append(addr)
        yield NetBed(tag=tag, addresses=tuple(addresses))
    finally:
        for ns in reversed(made):  # deleting a namespace removes its veth ends and the bridge
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
