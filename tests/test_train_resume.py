"""The main job resumes: atomic checkpoints, and a torchrun restart that continues to the same final weights."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import clean_env
from ezpz.errors import ConfigError
from ezpz.examples import checkpoint
from ezpz.examples.train import parse_args


def test_checkpoints_are_atomic_and_pruned(tmp_path):
    for step in (5, 10, 15):
        checkpoint.save(tmp_path, step, {"w": torch.full((2,), float(step))})
    (tmp_path / ".step-00000020.abc.tmp").write_bytes(b"torn")  # a rank killed mid-write leaves this
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".step-00000020.abc.tmp", "step-00000010.pt", "step-00000015.pt"]
    assert checkpoint.latest(tmp_path).name == "step-00000015.pt"
    state = checkpoint.load_latest(tmp_path, is_main=True, distributed=False)
    assert state["step"] == 15 and torch.equal(state["w"], torch.full((2,), 15.0))
    assert checkpoint.load_latest(tmp_path / "none", is_main=True, distributed=False) is None


def test_checkpoint_flags_and_env(monkeypatch, tmp_path):
    monkeypatch.setenv("EZPZ_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("EZPZ_CHECKPOINT_EVERY", "3")
    args = parse_args([])
    assert args.checkpoint_dir == tmp_path and args.checkpoint_every == 3
    monkeypatch.setenv("EZPZ_CHECKPOINT_EVERY", "0")
    with pytest.raises(ConfigError) as err:
        parse_args([])
    assert err.value.name == "EZPZ_CHECKPOINT_EVERY"


def _train(tmp_path: Path, name: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    from test_real_launchers import free_port

    report = tmp_path / f"{name}.json"
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
            *extra, "-m", "ezpz.examples.train", "--steps", "12", "--log-every", "4", "--checkpoint-every", "5",
            "--checkpoint-dir", str(tmp_path / f"ck-{name}"), "--final-weights", str(tmp_path / f"{name}.pt"),
            "--report", str(report)]
    if extra:
        argv += ["--test-fail-at-step", "5", "--test-fail-rank", "1"]
    proc = subprocess.run(argv, env=clean_env(EZPZ_TIMEOUT="30"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads(report.read_text())


@pytest.mark.launcher  # a real torchrun with restarts
def test_torchrun_restart_resumes_to_the_same_weights(tmp_path):
    _, plain = _train(tmp_path, "plain")
    proc, resumed = _train(tmp_path, "restarted", "--max-restarts", "1")
    assert plain["attempt"] == 0 and plain["start_step"] == 0
    assert resumed["attempt"] == 1 and resumed["start_step"] == 5, resumed
    assert "resumed from the step-5 checkpoint" in proc.stdout
    attempt = next(d for d in resumed["decisions"] if d["topic"] == "attempt")
    assert attempt["chosen"] == "1" and "TORCHELASTIC_RESTART_COUNT=1" in attempt["reason"]
    a, b = torch.load(tmp_path / "plain.pt"), torch.load(tmp_path / "restarted.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # bitwise: same data, same order
