"""Several "nodes" on one machine (network namespaces on a bridge, see ``netns.py``): real multi-node launches.

Open MPI's ``mpiexec`` (through ``ezpz launch --hostfile``) reaches the other
namespaces with a launch agent that enters them instead of ssh; ``torchrun
--nnodes 2`` runs one agent per namespace. Every rank's all-reduce crosses the
bridge (gloo on ``eth0``, since the machine's host name resolves to loopback
here and the tests pass addresses rather than edit ``/etc/hosts``). Skipped,
with the reason, where network namespaces cannot be made (no CAP_NET_ADMIN).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env, need_tool, rank_rows
from netns import NetBed, cannot_make_namespaces, net_bed

SCRIPT = str(Path(__file__).parent / "scripts" / "multinode_check.py")
_WHY_NOT = cannot_make_namespaces()
# The netns tests run without workers (scripts/test.sh: -m netns, after the -n 2 pass); under workers, --dist
# loadgroup keeps the jobs of the "netns" group on one (docs/ci.md). Two at once on a small machine
# stretch the failover runs past their bound (2x the uninterrupted run + timeout)
pytestmark = [pytest.mark.launcher, pytest.mark.netns, pytest.mark.xdist_group("netns"),
              pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or "")]
PORT = 29411


def node_env(**extra: str) -> dict[str, str]:
    # rtc_hwloc_vmhole=none: Open MPI 4.1's orted otherwise maps a shared hwloc topology into a guessed
    # address hole; with several orteds on one host it sometimes segfaults there (hwloc_shmem_topology_write,
    # seen in a CI-style run). Each orted then reads the topology itself.
    return clean_env(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="eth0", EZPZ_DEVICE="cpu",
                     OMPI_MCA_rtc_hwloc_vmhole="none", **extra)


def check(rows: list[dict], bed: NetBed, ppn: int) -> None:
    """Every rank summed right, sits in the namespace its node rank says, and met at the first host."""
    nodes, world = len(bed.addresses), len(bed.addresses) * ppn
    assert [r["rank"] for r in rows] == list(range(world)), rows
    for r in rows:
        assert r["ok"] and r["sum"] == world * (world + 1) / 2, r
        assert (r["num_nodes"], r["world_size"], r["local_world_size"]) == (nodes, world, ppn), r
        assert r["node_rank"] == r["rank"] // ppn and r["local_rank"] == r["rank"] % ppn, r
        assert r["address"] == bed.addresses[r["node_rank"]], r  # the rank really runs on that "node"
        assert r["master_addr"] == bed.addresses[0], r
    assert len({r["address"] for r in rows}) == nodes


@pytest.mark.parametrize(("nodes", "ppn", "net"), [(2, 2, 10), (4, 1, 11)], ids=["2-nodes-x2", "4-nodes-x1"])
def test_ezpz_launch_with_open_mpi_across_namespaces(tmp_path, nodes, ppn, net):
    need_tool("mpiexec")
    with net_bed(nodes, net=net) as bed:
        hostfile = bed.hostfile(tmp_path / "hosts", slots=ppn)
        env = node_env(EZPZ_TIMEOUT="120", OMPI_MCA_plm_rsh_agent=str(bed.agent(tmp_path / "agent.sh")),
                       OMPI_MCA_oob_tcp_if_include="198.18.0.0/15", OMPI_MCA_btl_tcp_if_include="198.18.0.0/15")
        argv = [*bed.exec_prefix(0), sys.executable, "-m", "ezpz", "launch", "--launcher", "mpiexec",
                "--hostfile", str(hostfile), "--ppn", str(ppn), "--", sys.executable, SCRIPT, str(nodes * ppn)]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rank_rows(proc.stdout)
    check(rows, bed, ppn)
    assert all(r["launcher"] == "openmpi" and "HOSTFILE" in r["master_addr_from"] for r in rows), rows


def test_torchrun_two_nodes_in_two_namespaces():
    torchrun = need_tool("torchrun")
    with net_bed(2, net=12) as bed:
        agents = [
            subprocess.Popen(
                [*bed.exec_prefix(i), torchrun, "--nnodes", "2", "--node-rank", str(i), "--nproc-per-node", "2",
                 "--master-addr", bed.addresses[0], "--master-port", str(PORT), SCRIPT, "4"],
                env=node_env(EZPZ_TIMEOUT="120"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)
        ]
        outs = []
        try:
            for a in agents:
                outs.append(a.communicate(timeout=240))
        finally:
            for a in agents:
                if a.poll() is None:
                    a.kill()
    assert [a.returncode for a in agents] == [0, 0], outs
    rows = rank_rows("".join(o for o, _ in outs))
    check(rows, bed, 2)
    assert all(r["launcher"] == "torchrun" for r in rows)


@pytest.mark.parametrize("missing", [1, 0], ids=["worker-node-missing", "rendezvous-node-missing"])
def test_a_missing_node_fails_every_rank_within_the_timeout_naming_the_rendezvous(tmp_path, missing):
    """2 nodes x 2 ranks; one node never starts. The other's ranks must all fail within EZPZ_TIMEOUT."""
    timeout_s = 8
    with net_bed(2, net=13 + missing) as bed:
        hostfile = bed.hostfile(tmp_path / "hosts", slots=2)
        present = 1 - missing
        start = time.monotonic()
        ranks = [
            subprocess.Popen(
                [*bed.exec_prefix(present), sys.executable, SCRIPT, "4"],
                env=node_env(RANK=str(present * 2 + local), WORLD_SIZE="4", LOCAL_RANK=str(local),
                             LOCAL_WORLD_SIZE="2", HOSTFILE=str(hostfile), MASTER_PORT=str(PORT + 1),
                             EZPZ_TIMEOUT=str(timeout_s)),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for local in range(2)
        ]
        try:
            outs = [r.communicate(timeout=120) for r in ranks]
        finally:
            for r in ranks:
                if r.poll() is None:
                    r.kill()
        took = time.monotonic() - start
    rendezvous = f"{bed.addresses[0]}:{PORT + 1}"
    for r, (_, err) in zip(ranks, outs):
        assert r.returncode != 0, err
        assert "RendezvousTimeoutError" in err and rendezvous in err and "EZPZ_TIMEOUT" in err, err
    assert took < timeout_s + 45, f"ranks took {took:.0f}s to give up on an {timeout_s}s timeout"
