"""``ezpz launch --auto-retry --min-nodes`` on network-namespace nodes with no spare: the world shrinks.

Each node is a namespace running its share of ``tests/scripts/sharded_resume.py`` (sharded checkpoints through
torch.distributed.checkpoint, resumed at any world size). A node "dies" when its rank SIGKILLs its Open MPI daemon
and itself. Runs on the CPU (gloo) only; skipped, with the reason, where network namespaces cannot be made.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch

from conftest import need_tool
from netns import cannot_make_namespaces, net_bed
from netns_launch import SHARDED, clean_nodes, launch_on_bed

_WHY_NOT = cannot_make_namespaces()
pytestmark = [pytest.mark.launcher, pytest.mark.netns, pytest.mark.xdist_group("netns"),
              pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or "")]
STEPS = 20


def _verdicts(job: Path) -> list[dict]:
    return [json.loads((d / "verdict.json").read_text())
            for d in sorted(job.glob("attempt-*"), key=lambda p: int(p.name.split("-")[1]))]


def _finish(p, timeout: float = 420) -> str:
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
    return (out or "") + (err or "")


def _job(tmp: Path, name: str, *extra: str) -> list[str]:
    return [SHARDED, "--steps", str(STEPS), "--checkpoint-every", "5", "--checkpoint-dir", str(tmp / f"{name}-ck"),
            "--final-weights", str(tmp / f"{name}.pt"), "--report", str(tmp / f"{name}.json"), *extra]


def test_two_nodes_lost_at_different_steps_the_job_completes_on_two_with_the_weights_of_a_restart_by_hand(tmp_path):
    need_tool("mpiexec")
    with net_bed(4, net=44) as bed:
        a = list(bed.addresses)
        try:
            t0 = time.monotonic()
            # attempt 0: rank 1 (node 1) dies after step 5's checkpoint; attempt 1 runs on nodes 0, 2, 3 and its
            # rank 2 (node 3) dies after step 10's checkpoint; attempt 2 runs on nodes 0 and 2
            p = launch_on_bed(bed, tmp_path, "shrink", ["--auto-retry", "--nhosts", "4", "--spare-nodes", "0",
                                                        "--min-nodes", "2", "--timeout", "120"], a,
                              _job(tmp_path, "shrink", "--test-node-dies", "0:5:1,1:10:2"))
            said = _finish(p)
            took = time.monotonic() - t0
            assert p.returncode == 0, said[-6000:]
            # by hand: the step-10 checkpoint the last attempt resumed from, on the same two nodes
            (tmp_path / "hand-ck").mkdir()
            shutil.copytree(tmp_path / "shrink-ck" / "step-000010", tmp_path / "hand-ck" / "step-000010")
            h = launch_on_bed(bed, tmp_path, "hand", ["-n", "2"], [a[0], a[2]], _job(tmp_path, "hand"))
            hand_said = _finish(h)
            assert h.returncode == 0, hand_said[-4000:]
        finally:
            clean_nodes(bed)
    v = _verdicts(tmp_path / "shrink-job")
    assert [x["verdict"]["outcome"] for x in v] == ["shrink", "shrink", "success"], [x["verdict"] for x in v]
    assert v[0]["verdict"]["exclude"] == [a[1]] and v[1]["verdict"]["exclude"] == [a[3]]
    assert [x["hosts"] for x in v] == [a, [a[0], a[2], a[3]], [a[0], a[2]]]
    assert [x["world_size"] for x in v] == [4, 3, 2]
    assert v[1]["world_shrank"].startswith(f"4->3: host {a[1]} excluded (attempt 0: ")
    assert v[2]["world_shrank"].startswith(f"4->2: host {a[1]} excluded") and f"host {a[3]} excluded" in \
        v[2]["world_shrank"]
    assert f"world shrinks from 3 to 2 host(s) (4 -> 2 ranks, 1 per host): host {a[1]} excluded" in said, said[-4000:]
    report, hand = json.loads((tmp_path / "shrink.json").read_text()), json.loads((tmp_path / "hand.json").read_text())
    assert (report["attempt"], report["world_size"], report["start_step"]) == (2, 2, 10), report
    assert report["world"].startswith("shrank 4 -> 2 ranks: host ") and "--min-nodes 2" in report["world"], report
    assert (hand["world_size"], hand["start_step"], hand["world"]) == (2, 10, None), hand
    w_job, w_hand = torch.load(tmp_path / "shrink.pt"), torch.load(tmp_path / "hand.pt")
    assert w_job.keys() == w_hand.keys()
    diff = max((w_job[k] - w_hand[k]).abs().max().item() for k in w_job)
    print(f"\nshrink 4 -> 3 -> 2 nodes: {took:.1f} s; max |weight difference| from the restart by hand {diff:.3g}")
    assert diff == 0.0, f"final weights differ by {diff:.3g} from the run restarted by hand"


def test_a_node_lost_during_a_checkpoint_save_the_next_attempt_loads_the_previous_complete_one(tmp_path):
    need_tool("mpiexec")
    with net_bed(3, net=45) as bed:
        a = list(bed.addresses)
        try:
            # rank 1 (node 1) dies inside step 10's save, after writing its shard: step 10 never completes
            p = launch_on_bed(bed, tmp_path, "save", ["--auto-retry", "--nhosts", "3", "--spare-nodes", "0",
                                                      "--min-nodes", "2", "--timeout", "120"], a,
                              _job(tmp_path, "save", "--test-dies-in-save", "0:10:1"))
            said = _finish(p)
        finally:
            clean_nodes(bed)
    assert p.returncode == 0, said[-6000:]
    v = _verdicts(tmp_path / "save-job")
    assert [x["verdict"]["outcome"] for x in v] == ["shrink", "success"], [x["verdict"] for x in v]
    assert v[0]["verdict"]["exclude"] == [a[1]]
    first = (tmp_path / "save-job" / "attempt-0" / "output.log").read_text()
    second = (tmp_path / "save-job" / "attempt-1" / "output.log").read_text()
    assert "checkpoint step 5 complete" in first and "checkpoint step 10 complete" not in first, first[-3000:]
    assert "started from step 5 (" in second and "step-000005" in second, second[-3000:]
    assert json.loads((tmp_path / "save.json").read_text())["start_step"] == 5
