"""``ezpz launch`` (Open MPI) on network-namespace nodes (:mod:`netns`): the shared launch and clean-up helpers of
the shrink tests and the chaos soak (``benchmarks/bench_chaos.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from netns import NetBed
from test_netns_nodes import node_env

__all__ = ["SHARDED", "clean_nodes", "launch_on_bed", "ns_pids", "signal_pids"]

SHARDED = str(Path(__file__).resolve().parent / "scripts" / "sharded_resume.py")
"""The sharded-checkpoint training script (resumes from its latest complete checkpoint at any world size)."""


def ns_pids(bed: NetBed, i: int) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", bed.ns(i)], capture_output=True, text=True, timeout=30).stdout
    return [int(p) for p in out.split()]


def signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def clean_nodes(bed: NetBed, first: int = 1) -> None:
    """Strays (a cut-off rank waits out its timeout; a frozen one never ends) on nodes ``first``.. and links up."""
    for i in range(first, len(bed.addresses)):
        signal_pids(ns_pids(bed, i), signal.SIGCONT)
        signal_pids(ns_pids(bed, i), signal.SIGKILL)
        subprocess.run([*bed.exec_prefix(i), "ip", "link", "set", "eth0", "up"], capture_output=True, timeout=30)


def launch_on_bed(bed: NetBed, tmp: Path, name: str, ezpz_args: list[str], hosts: list[str], job: list[str],
                  timeout_s: int = 20, merged: bool = False, **env_extra: str) -> subprocess.Popen:
    """``ezpz launch --launcher mpiexec --ppn 1`` from node 0 on ``hosts``, job dir ``<tmp>/<name>-job``."""
    (tmp / f"{name}.hosts").write_text("".join(h + "\n" for h in hosts))
    # each node its own Open MPI session directory, as separate machines would have (tests/test_netns_failover.py);
    # not exec'd: like ssh, the launcher's child names the host and lives as long as the node's daemon
    agent = tmp / "agent-tmpdir.sh"
    agent.write_text(f'#!/bin/sh\nhost=$1; shift\nmkdir -p /tmp/ompi-$host\n'
                     f'{bed.agent(tmp / "agent.sh")} "$host" "OMPI_MCA_orte_tmpdir_base=/tmp/ompi-$host $*"\n')
    agent.chmod(0o755)
    env = node_env(EZPZ_TIMEOUT=str(timeout_s), OMPI_MCA_plm_rsh_agent=str(agent), EZPZ_HANG_BUDGET_WARMUP="3",
                   OMPI_MCA_oob_tcp_if_include="198.18.0.0/15", OMPI_MCA_btl_tcp_if_include="198.18.0.0/15",
                   **env_extra)
    argv = [*bed.exec_prefix(0), sys.executable, "-m", "ezpz", "launch", "--launcher", "mpiexec", "--ppn", "1",
            "--hostfile", str(tmp / f"{name}.hosts"), "--retry-delay", "0", "--job-dir", str(tmp / f"{name}-job"),
            *ezpz_args, "--", sys.executable, *job]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if merged else subprocess.PIPE, text=True,
                            errors="replace")  # a line cut mid-character (ranks interleave) must not stop a reader
