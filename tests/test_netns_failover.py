"""``ezpz launch --auto-retry`` on 4 network-namespace nodes (3 active + 1 spare) running the main job.

At step 5 of 20 one node fails: every process in its namespace is killed, or its link is cut. The attempt's
records (or, for ranks that could not write, the log) must name that node; the next attempt must run on the
other two plus the spare, resume from the step-5 checkpoint and end with the same weights as an uninterrupted
run (bitwise: the data is a function of seed, rank and step, and the ranks keep their order). Skipped, with the
reason, where network namespaces cannot be made.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from conftest import need_tool
from netns import NetBed, cannot_make_namespaces, net_bed
from test_netns_nodes import node_env

_WHY_NOT = cannot_make_namespaces()
# The netns tests run without workers (scripts/test.sh: -m netns, after the -n 2 pass); under workers, --dist
# loadgroup keeps the jobs of the "netns" group on one (docs/ci.md). Two at once on a small machine
# stretch the failover runs past their bound (2x the uninterrupted run + timeout)
pytestmark = [pytest.mark.launcher, pytest.mark.netns, pytest.mark.xdist_group("netns"),
              pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or "")]
TIMEOUT_S = 20
STEPS = 20


def _ns_pids(bed: NetBed, i: int) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", bed.ns(i)], capture_output=True, text=True, timeout=30).stdout
    return [int(p) for p in out.split()]


def _kill_ns(bed: NetBed, i: int) -> int:
    pids = _ns_pids(bed, i)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


def _launch(bed: NetBed, tmp: Path, name: str, extra: list[str], hosts: list[str],
            job_extra: tuple[str, ...] = (), **env_extra: str) -> subprocess.Popen:
    (tmp / f"{name}.hosts").write_text("".join(h + "\n" for h in hosts))
    # Open MPI's daemons of different "nodes" share this machine's /tmp; one SIGKILLed leaves its session directory
    # behind, and the next daemon on another node can collide with it (orte_session_dir: "File exists"). Each
    # node gets its own session directory, as separate machines would have.
    agent = tmp / "agent-tmpdir.sh"
    agent.write_text(f'#!/bin/sh\nhost=$1; shift\nmkdir -p /tmp/ompi-$host\n'
                     f'exec {bed.agent(tmp / "agent.sh")} "$host" "OMPI_MCA_orte_tmpdir_base=/tmp/ompi-$host $*"\n')
    agent.chmod(0o755)
    env = node_env(EZPZ_TIMEOUT=str(TIMEOUT_S), OMPI_MCA_plm_rsh_agent=str(agent),
                   OMPI_MCA_oob_tcp_if_include="198.18.0.0/15", OMPI_MCA_btl_tcp_if_include="198.18.0.0/15",
                   **env_extra)
    argv = [*bed.exec_prefix(0), sys.executable, "-m", "ezpz", "launch", "--launcher", "mpiexec", "--ppn", "1",
            "--hostfile", str(tmp / f"{name}.hosts"), "--retry-delay", "0", "--job-dir", str(tmp / f"{name}-job"),
            *extra, "--", sys.executable, "-m", "ezpz.examples.train", "--steps", str(STEPS), "--log-every", "1",
            "--checkpoint-every", "5", "--checkpoint-dir", str(tmp / f"{name}-ck"),
            "--final-weights", str(tmp / f"{name}.pt"), "--report", str(tmp / f"{name}.json"), *job_extra]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _when_checkpoint(path: Path, action, deadline_s: float = 200) -> threading.Thread:
    def watch() -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end and not path.exists():
            time.sleep(0.05)
        if path.exists():
            action()
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _finish(p: subprocess.Popen, timeout: float = 400) -> tuple[str, str]:
    try:
        return p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()


@pytest.mark.parametrize("failure", ["killed", "link-cut"])
def test_a_failed_node_is_swapped_for_the_spare_and_the_job_resumes_to_the_same_weights(tmp_path, failure):
    need_tool("mpiexec")
    with net_bed(4, net=42 if failure == "killed" else 43) as bed:
        a = bed.addresses
        try:
            t0 = time.monotonic()
            ref = _launch(bed, tmp_path, "plain", ["-n", "3"], list(a[:3]))
            out, err = _finish(ref)
            plain_s = time.monotonic() - t0
            assert ref.returncode == 0, err[-4000:]

            victim = 1
            when: dict[str, float] = {}
            if failure == "killed":  # rank 1 SIGKILLs itself after the step-5 checkpoint; the test kills the rest
                job_extra = ("--test-fail-at-step", "5", "--test-fail-rank", "1")
                action = lambda: when.setdefault("at", time.time()) and _kill_ns(bed, victim)  # noqa: E731
            else:
                job_extra = ()
                action = lambda: when.setdefault("at", time.time()) and subprocess.run(  # noqa: E731
                    [*bed.exec_prefix(victim), "ip", "link", "set", "eth0", "down"], check=True, timeout=30)
            t0 = time.monotonic()
            # the fault comes at step 5: hang budgets are learned after 3 steps here (default 20), so the
            # survivors name a cut-off rank within the budget instead of EZPZ_TIMEOUT
            p = _launch(bed, tmp_path, "failover", ["--auto-retry", "--nhosts", "3", "--spare-nodes", "1",
                                                    "--timeout", "120"], list(a), job_extra,
                        EZPZ_HANG_BUDGET_WARMUP="3")
            _when_checkpoint(tmp_path / "failover-ck" / "step-00000005.pt", action)
            out, err = _finish(p)
            took = time.monotonic() - t0
        finally:
            for i in range(1, 4):  # strays (a cut-off rank waits out its timeout); namespace 0 holds the test's
                _kill_ns(bed, i)
    assert p.returncode == 0, err[-6000:]
    job = tmp_path / "failover-job"
    v0 = json.loads((job / "attempt-0" / "verdict.json").read_text())
    v1 = json.loads((job / "attempt-1" / "verdict.json").read_text())
    assert not (job / "attempt-2").exists()
    assert v0["verdict"]["outcome"] == "bad_host" and v0["verdict"]["exclude"] == [a[victim]], v0["verdict"]
    assert f"excluding host {a[victim]}, using spare {a[3]}" in err
    assert v1["hosts"] == [a[0], a[3], a[2]] and v1["status"] == 0
    report = json.loads((tmp_path / "failover.json").read_text())
    assert report["attempt"] == 1 and report["start_step"] == 5, report
    w0, w1 = torch.load(tmp_path / "plain.pt"), torch.load(tmp_path / "failover.pt")
    assert w0.keys() == w1.keys()
    diff = max((w0[k] - w1[k]).abs().max().item() for k in w0)
    print(f"\n{failure}: uninterrupted {plain_s:.1f} s; failover {took:.1f} s "
          f"(bound 2x + EZPZ_TIMEOUT = {2 * plain_s + TIMEOUT_S:.1f} s); attempt 0 ended after "
          f"{v0['result']['wall_s']} s; max |weight difference| {diff:.3g}; evidence: {v0['verdict']['evidence']}")
    survivors = [r for r in v0["records"] if r["rank"] != victim]
    if failure == "link-cut":  # the survivors fail within their hang budget, naming the unreachable rank
        assert survivors and all(r["missing_ranks"] == [victim] for r in survivors), survivors
        late = max(r["time"] for r in survivors) - when["at"]
        print(f"survivors' records {late:.1f} s after the cut (EZPZ_TIMEOUT {TIMEOUT_S} s; kinds "
              f"{sorted({r['kind'] for r in survivors})}; ended on the named host: "
              f"{v0['result']['ended_on_named_host']})")
        assert late < TIMEOUT_S + 10
        assert took < 2 * plain_s + TIMEOUT_S, (took, plain_s)  # issue 25's bound: 2x the uninterrupted run + timeout
    else:  # the node's ranks left no record: the survivors' records and the vanished host decide
        assert not [r for r in v0["records"] if r["rank"] == victim]
        assert took < 2 * plain_s + TIMEOUT_S + 10, (took, plain_s)
    # Bitwise is expected: the data is a function of (seed, rank, step), RNG state is checkpointed, and the main
    # job settles DDP's bucket layout before step 1 (ezpz.examples.train._settle_buckets), so every step reduces in
    # the same order as the uninterrupted run's (3.8e-4 apart before that fix). 1e-6 is the tolerance.
    assert diff <= 1e-6, f"final weights differ by {diff:.3g} from the uninterrupted run"
