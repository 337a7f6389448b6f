"""Sharded checkpoints in one process (no process group): the format, completeness, errors, the latest one.

Several ranks (FSDP2 and DDP, resharded on 4, 2 and 1 rank(s)) are tests/test_sharded_training.py's.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from torch import nn

import ezpz
from ezpz.checkpoints import checkpoint_name, is_complete, latest_checkpoint
from ezpz.checkpoints import sharded
from ezpz.checkpoints.layout import MARKER, staging_path
from ezpz.errors import CheckpointError


@pytest.fixture
def rt(monkeypatch):
    monkeypatch.setenv("EZPZ_PRECISION", "fp32")
    return ezpz.hooks.setup()


def _trained(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    for _ in range(3):
        model(torch.randn(5, 4)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    return model, opt, sched


def test_a_checkpoint_round_trips_modules_optimizers_schedulers_and_values(rt, tmp_path):
    model, opt, sched = _trained()
    path = rt.save_checkpoint(tmp_path / checkpoint_name(3), model=model, optim=opt, sched=sched, step=3, tag="a")
    assert path == tmp_path / "step-000003" and is_complete(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000003"]  # no staging directory left behind

    fresh, fresh_opt, fresh_sched = _trained(seed=1)
    values = rt.load_checkpoint(path, model=fresh, optim=fresh_opt, sched=fresh_sched)
    assert values == {"step": 3, "tag": "a"}
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values()))
    assert torch.equal(opt.state_dict()["state"][0]["exp_avg"], fresh_opt.state_dict()["state"][0]["exp_avg"])
    assert fresh_sched.state_dict() == sched.state_dict()


def test_an_interrupted_save_is_never_taken_as_a_checkpoint(rt, tmp_path, monkeypatch):
    model, opt, _ = _trained()
    rt.save_checkpoint(tmp_path / checkpoint_name(10), model=model, optim=opt, step=10)

    def power_cut(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(sharded, "write_json_atomically", power_cut)  # the marker is the last thing written
    target = tmp_path / checkpoint_name(20)
    with pytest.raises(CheckpointError, match="No space left on device"):
        rt.save_checkpoint(target, model=model, optim=opt, step=20)
    assert not target.exists() and staging_path(target).is_dir()  # the shards are there, under the hidden name
    assert latest_checkpoint(tmp_path) == tmp_path / "step-000010"
    with pytest.raises(CheckpointError) as err:
        rt.load_checkpoint(target, model=model)
    message = str(err.value)
    assert str(target) in message and "missing the directory itself" in message
    assert "latest_checkpoint" in message and "save that never finished" in message

    # A directory holding every shard but not the marker (copied by hand, say) is not one either.
    staging_path(target).rename(target)
    assert not is_complete(target) and latest_checkpoint(tmp_path) == tmp_path / "step-000010"
    with pytest.raises(CheckpointError, match=f"missing '{MARKER}'"):
        rt.load_checkpoint(target, model=model)

    monkeypatch.undo()  # without the marker ezpz cannot tell it from another tool's files: a save refuses it
    model2, opt2, _ = _trained(seed=2)
    with pytest.raises(CheckpointError, match=f"without ezpz's marker {MARKER}"):
        rt.save_checkpoint(target, model=model2, optim=opt2, step=20)
    shutil.rmtree(target)  # the user's call
    rt.save_checkpoint(target, model=model2, optim=opt2, step=20)
    assert latest_checkpoint(tmp_path) == target
    rt.save_checkpoint(target, model=model2, optim=opt2, step=20)  # an ezpz checkpoint is replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000010", "step-000020"]
    assert rt.load_checkpoint(target, model=model, optim=opt) == {"step": 20}
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model2.state_dict().values()))


def test_latest_checkpoint_takes_the_highest_complete_step(rt, tmp_path):
    assert latest_checkpoint(tmp_path / "absent") is None and latest_checkpoint(tmp_path) is None
    model, _, _ = _trained()
    for step in (9, 10, 100):
        rt.save_checkpoint(tmp_path / checkpoint_name(step), model=model)
    (tmp_path / "step-000200").mkdir()  # incomplete
    (tmp_path / "step-000300").write_text("a file")
    (tmp_path / "best").mkdir()
    assert latest_checkpoint(tmp_path) == rt.latest_checkpoint(tmp_path) == tmp_path / "step-000100"
    assert checkpoint_name(1234567) == "step-1234567"
    with pytest.raises(CheckpointError, match="checkpoint_name"):
        checkpoint_name(-1)


def test_wrong_state_is_refused_naming_the_input(rt, tmp_path):
    model, opt, _ = _trained()
    with pytest.raises(CheckpointError, match=r"save_checkpoint\(optim=\.\.\.\).*pass the model it optimizes"):
        rt.save_checkpoint(tmp_path / "a", optim=opt)
    with pytest.raises(CheckpointError, match="at least one thing"):
        rt.save_checkpoint(tmp_path / "a")
    with pytest.raises(CheckpointError, match=r"save_checkpoint\(thing\).*weights_only"):
        rt.save_checkpoint(tmp_path / "a", model=model, thing=object())
    assert list(tmp_path.iterdir()) == []  # each was refused before anything was written
    path = rt.save_checkpoint(tmp_path / "b", model=model, optim=opt, step=1)
    with pytest.raises(CheckpointError, match=r"load_checkpoint\(step=\.\.\.\).*values\['step'\]"):
        rt.load_checkpoint(path, model=model, step=1)
    with pytest.raises(CheckpointError, match=r"load_checkpoint\(net=\.\.\.\).*'modules': \['model'\]"):
        rt.load_checkpoint(path, net=model)


def test_runtime_methods_name_a_wrong_argument_and_what_is_allowed(rt, tmp_path):
    from ezpz.errors import ConfigError

    model = nn.Linear(2, 2)
    for call, said in ((lambda: rt.shard("model"), r"rt\.shard\(model\)='model'.*torch\.nn\.Module"),
                       (lambda: rt.shard(model, mesh="dp"), r"rt\.shard\(model, mesh\).*DeviceMesh"),
                       (lambda: rt.mesh(dp="1"), r"rt\.mesh\(dp=\.\.\.\)='1'.*positive number"),
                       (lambda: rt.save_checkpoint(7, model=model), r"rt\.save_checkpoint\(directory\)=7.*os\.PathLike"),
                       (lambda: rt.save_checkpoint("", model=model), r"rt\.save_checkpoint\(directory\)=''"),
                       (lambda: rt.load_checkpoint(b"ck", model=model), r"rt\.load_checkpoint\(directory\)=b'ck'"),
                       (lambda: rt.load_checkpoint(tmp_path, model="model"), r"load_checkpoint\(model=\.\.\.\)='model'.*modules")):
        with pytest.raises(ConfigError, match=said):
            call()
    assert list(tmp_path.iterdir()) == []


def test_finding_the_latest_checkpoint_imports_no_torch(tmp_path):
    """A launcher asks where a job resumes without paying for torch."""
    import subprocess
    import sys

    code = ("import sys; from ezpz.checkpoints import latest_checkpoint; "
            f"print(latest_checkpoint({str(tmp_path)!r}), 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["None", "False"], done.stdout + done.stderr
