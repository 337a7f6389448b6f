"""Straggler detection end to end: ``ezpz launch -n 4`` with one rank 0.2 s slower in every 0.05 s step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, need_tool
from ezpz.steps.straggler_history import unpack_ints
from netns import cannot_make_namespaces, net_bed
from test_netns_failover import _kill_ns
from test_netns_nodes import node_env

PY = sys.executable
SLOW = str(Path(__file__).parent / "scripts" / "slow_rank.py")
pytestmark = [pytest.mark.launcher]


def test_the_report_names_the_slow_rank_and_its_host_within_50_steps_and_the_job_finishes(tmp_path):
    need_tool("torchrun")
    proc = subprocess.run([PY, "-m", "ezpz", "launch", "-n", "4", "--job-dir", "job", "--", PY, SLOW, "2", "50"],
                          env=clean_env(OMP_NUM_THREADS="1"), cwd=tmp_path, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.count("DONE rank") == 4 and "steps 50 sum 4" in proc.stdout, proc.stdout
    report = json.loads((tmp_path / "job" / "attempt-0" / "failures" / "stragglers.json").read_text())
    assert report["report"]["step"] <= 50
    [straggler] = report["report"]["stragglers"]
    history = json.loads((tmp_path / "job" / "attempt-0" / "failures" / report["history"]).read_text())
    assert history["ranks"] == 4 and history["stragglers"] == [2]
    host = history["hosts"][unpack_ints(history["host_of_rank"], 4)[2]]
    assert straggler["rank"] == 2 and straggler["host"] == host and host
    assert 0.0 < straggler["relative"] < 0.4, straggler  # 0.05 s vs 0.25 s: about 0.2
    assert "sections" in straggler and straggler["sections"]["compute"] < 0.4
    assert report["report"]["measure"] == "sections"  # step times are equal: every rank waits in the all-reduce
    log = (tmp_path / "job" / "attempt-0" / "output.log").read_text()
    assert "straggler step=25 ranks=2@" + host in log, log[-4000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("ezpz launch: attempt 0: ")]
    assert any(f"rank 2 host {host}: relative score 0." in line for line in said), proc.stderr  # when it changed
    chart = [line for line in said if line.startswith("ezpz launch: attempt 0:   rank    ")]
    assert [c for c in chart if "<- straggler" in c] == [c for c in chart if " rank    2 " in c] and len(chart) == 4
    assert any("  distribution: min " in line for line in said)
    svg = (tmp_path / "job" / "stragglers-attempt-0.svg").read_text()
    assert svg.startswith("<svg") and svg.count('data-ranks="') == 4 and f'data-rank="2">rank 2 {host}' in svg
    print("\n" + "\n".join(said))


_WHY_NOT = cannot_make_namespaces()


@pytest.mark.netns
@pytest.mark.xdist_group("netns")  # beside the other multi-node jobs, never at the same time (test_netns_failover.py)
@pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or "")
def test_replace_stragglers_ends_excludes_and_replaces_the_slow_node_by_the_spare(tmp_path):
    """4 network-namespace nodes (3 active + 1 spare), one rank per node; the second node is slow."""
    need_tool("mpiexec")
    with net_bed(4, net=44) as bed:
        a = bed.addresses
        (tmp_path / "hosts").write_text("".join(h + "\n" for h in a))
        agent = tmp_path / "agent-tmpdir.sh"  # each node its own Open MPI session directory (test_netns_failover)
        agent.write_text(f'#!/bin/sh\nhost=$1; shift\nmkdir -p /tmp/ompi-$host\n'
                         f'exec {bed.agent(tmp_path / "agent.sh")} "$host" "OMPI_MCA_orte_tmpdir_base=/tmp/ompi-$host $*"\n')
        agent.chmod(0o755)
        env = node_env(EZPZ_TIMEOUT="20", EZPZ_STRAGGLER_EVERY="5", OMPI_MCA_plm_rsh_agent=str(agent),
                       OMPI_MCA_oob_tcp_if_include="198.18.0.0/15", OMPI_MCA_btl_tcp_if_include="198.18.0.0/15")
        try:
            proc = subprocess.run(
                [*bed.exec_prefix(0), PY, "-m", "ezpz", "launch", "--launcher", "mpiexec", "--ppn", "1", "--hostfile",
                 str(tmp_path / "hosts"), "--auto-retry", "--nhosts", "3", "--spare-nodes", "1",
                 "--replace-stragglers", "2", "--retry-delay", "0", "--timeout", "120", "--job-dir",
                 str(tmp_path / "job"), "--", PY, SLOW, f"addr:{a[1]}", "40"],
                env=env, capture_output=True, text=True, timeout=400)
        finally:
            for i in range(1, 4):
                _kill_ns(bed, i)
    assert proc.returncode == 0, proc.stderr[-6000:]
    job = tmp_path / "job"
    v0 = json.loads((job / "attempt-0" / "verdict.json").read_text())
    v1 = json.loads((job / "attempt-1" / "verdict.json").read_text())
    assert v0["verdict"]["outcome"] == "straggler" and v0["verdict"]["exclude"] == [a[1]], v0["verdict"]
    assert v0["result"]["ended_by_watch"] and not (job / "attempt-2").exists()
    assert f"rank 1 on host {a[1]}" in v0["verdict"]["evidence"][0]
    assert f"excluding host {a[1]}, using spare {a[3]}" in proc.stderr
    assert v1["hosts"] == [a[0], a[3], a[2]] and v1["status"] == 0
    assert proc.stdout.count("DONE rank") >= 3 and "steps 40 sum 3" in proc.stdout
    print(f"\nattempt 0 ended after {v0['result']['wall_s']} s; evidence: {v0['verdict']['evidence'][:2]}")
