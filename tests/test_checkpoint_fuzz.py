"""Hostile checkpoint directories (tests/checkpoint_cases.py): each load is a CheckpointError naming the cause in its
first line, on one process and on both ranks of one 2-rank torchrun job, within its deadline; nothing in a checkpoint
is executed (a sentinel file a pickle would create never appears) and nothing outside it changes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import ezpz
from checkpoint_cases import build, cases, snapshot
from conftest import clean_env, need_tool
from ezpz.errors import CheckpointError

SCRIPT = str(Path(__file__).parent / "scripts" / "checkpoint_fuzz.py")
DEADLINE_S = 20.0  # per load; a load that fails cleanly takes well under a second


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A good checkpoint and another of the same model from other values, saved once for every case."""
    root = tmp_path_factory.mktemp("fuzz")
    for name, seed in (("good", 0), ("other", 1)):
        model = build("same", seed)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        model(torch.randn(3, 4)).square().mean().backward()
        opt.step()
        rt = ezpz.hooks.setup()
        rt.save_checkpoint(root / name, model=model, optim=opt, step=seed)
    (root / "outside").mkdir()
    (root / "outside" / "keep.txt").write_text("the user's")
    return root


@pytest.mark.parametrize("case", cases(rank=0), ids=lambda c: c.name.replace(" ", "-"))
def test_a_hostile_checkpoint_is_a_checkpoint_error_naming_its_cause(case, saved, tmp_path, monkeypatch):
    if case.needs_non_root and os.geteuid() == 0:
        pytest.skip("root reads a chmod 000 file: the 'cannot read' path runs only as another user")
    monkeypatch.setenv("EZPZ_PRECISION", "fp32")
    rt = ezpz.hooks.setup()
    ck, outside, sentinel = tmp_path / "ck", tmp_path / "outside", tmp_path / "sentinel"
    shutil.copytree(saved / "good", ck)
    shutil.copytree(saved / "outside", outside)
    case.damage(ck, saved / "other", outside, sentinel)
    before = snapshot(outside)
    model = build(case.model, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    start = time.monotonic()
    with pytest.raises(Exception) as caught:  # noqa: PT011 - what a user's `except Exception` catches
        rt.load_checkpoint(ck, model=model, optim=opt)
    assert time.monotonic() - start < DEADLINE_S
    err = caught.value
    assert isinstance(err, CheckpointError), repr(err)
    first = str(err).splitlines()[0]
    assert case.expect in first and str(ck) in first, first
    assert "weights_only=False" not in str(err)
    assert not sentinel.exists() and snapshot(outside) == before


def test_a_shard_entry_that_would_run_code_is_refused(tmp_path, monkeypatch):
    """DCP reads a shard's non-tensor entries with torch.load(weights_only=False); ezpz's planner reads them
    weights_only. The checkpoint here is whole and consistent (ezpz wrote its marker), one entry hostile."""
    from checkpoint_cases import _RunsCode
    from ezpz.checkpoints import sharded

    monkeypatch.setenv("EZPZ_PRECISION", "fp32")
    rt = ezpz.hooks.setup()
    sentinel = tmp_path / "sentinel"
    model = build("same", 0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    real = sharded._State.tensor_state

    def hostile(self):
        state = real(self)
        state["optim"]["param_groups"][0]["lr"] = _RunsCode(sentinel)
        return state

    with monkeypatch.context() as patch:
        patch.setattr(sharded._State, "tensor_state", hostile)
        rt.save_checkpoint(tmp_path / "ck", model=model, optim=opt, step=1)
    fresh = build("same", 1)
    with pytest.raises(CheckpointError) as caught:
        rt.load_checkpoint(tmp_path / "ck", model=fresh, optim=torch.optim.AdamW(fresh.parameters()))
    first = str(caught.value).splitlines()[0]
    assert "optim.param_groups.0.lr holds a pickle that calls posix.system" in first, first
    assert "never executes" in first and not sentinel.exists()


def test_every_hostile_checkpoint_fails_on_both_ranks_of_one_job(tmp_path):
    """One 2-rank torchrun job loops over every case (CI cost: one job), shards named for rank 1."""
    from test_real_launchers import free_port

    torchrun = need_tool("torchrun")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep.txt").write_text("the user's")
    start = time.monotonic()
    done = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-port", str(free_port()), SCRIPT, str(tmp_path)],
                          env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="30", EZPZ_PRECISION="fp32"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    rows = [json.loads((tmp_path / f"rows-{rank}.json").read_text()) for rank in (0, 1)]
    for rank in (0, 1):
        refused = rows[rank].pop(0)
        assert refused["checkpoint_error"] and "a directory holding 'metrics.csv', 'sub'" in refused["first"], refused
    assert sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "results").rglob("*")) == [
        "results/metrics.csv", "results/sub", "results/sub/log.txt"]
    expected = cases(rank=1)
    assert [r["case"] for r in rows[0]] == [r["case"] for r in rows[1]] == [c.name for c in expected]
    for case, *both in zip(expected, *rows):
        for rank, row in enumerate(both):
            if "skipped" in row:
                assert case.needs_non_root and os.geteuid() == 0
                continue
            assert row["checkpoint_error"] and row["seconds"] < DEADLINE_S, (rank, row)
            assert case.expect in row["first"], (rank, case.expect, row)
    assert not (tmp_path / "sentinel").exists()
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["a-shard-elsewhere.distcp", "keep.txt"]
    assert (tmp_path / "outside" / "keep.txt").read_text() == "the user's"
    print(f"2-rank fuzz job: {time.monotonic() - start:.1f} s", file=sys.stderr)
