"""Background checkpoints (``rt.save_checkpoint(..., background=True)``): one process here; 2 ranks under torchrun
(FSDP2 resharded on load; DDP a rank SIGKILLed mid-write; SIGTERM mid-write) below, marked ``launcher``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import ezpz
from conftest import clean_env
from ezpz.checkpoints import checkpoint_name, is_complete, latest_checkpoint
from ezpz.checkpoints.host_copy import HostCopy
from ezpz.checkpoints.layout import staging_path
from ezpz.errors import CheckpointError

SCRIPT = Path(__file__).parent / "scripts" / "background_checkpoint.py"


@pytest.fixture
def rt(monkeypatch):
    monkeypatch.setenv("EZPZ_PRECISION", "fp32")
    runtime = ezpz.hooks.setup()
    yield runtime
    ezpz.hooks.teardown()


def _model() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return model, opt


def _train(model: nn.Module, opt: torch.optim.Optimizer) -> None:
    model(torch.randn(5, 4)).square().mean().backward()
    opt.step()
    opt.zero_grad()


def test_the_host_copy_is_a_copy_and_its_buffers_are_reused():
    t = torch.arange(6.0)
    host = HostCopy()
    first = host.copy({"m": {"w": t, "lr": 0.1}})
    t.add_(1)  # training changes the tensor in place after the save returned
    assert torch.equal(first["m"]["w"], torch.arange(6.0)) and first["m"]["lr"] == 0.1
    assert not host.pinned and "host memory already" in host.why
    second = host.copy({"m": {"w": t, "lr": 0.1}})
    assert second["m"]["w"].data_ptr() == first["m"]["w"].data_ptr()  # the same buffer, refilled
    assert torch.equal(second["m"]["w"], t)
    third = host.copy({"m": {"w": torch.zeros(3), "lr": 0.1}})  # another shape: a new buffer
    assert third["m"]["w"].shape == (3,)


def test_a_background_save_holds_the_state_at_the_call_and_loads(rt, tmp_path):
    model, opt = _model()
    _train(model, opt)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    path = rt.save_checkpoint(tmp_path / checkpoint_name(1), background=True, model=model, optim=opt, step=1)
    for _ in range(3):  # the write may still run: these steps must not leak into it
        _train(model, opt)
        rt.step()
    rt.state.background.wait()
    assert is_complete(path) and latest_checkpoint(tmp_path) == path
    fresh, fresh_opt = _model()
    assert rt.load_checkpoint(path, model=fresh, optim=fresh_opt) == {"step": 1}
    assert all(torch.equal(fresh.state_dict()[k], saved[k]) for k in saved)


def test_the_next_save_waits_for_the_one_in_flight(rt, tmp_path):
    model, opt = _model()
    first = rt.save_checkpoint(tmp_path / checkpoint_name(1), background=True, model=model, step=1)
    second = rt.save_checkpoint(tmp_path / checkpoint_name(2), model=model, step=2)  # synchronous, after it
    assert is_complete(first) and is_complete(second) and not rt.state.background.in_flight


def _failing_writes(monkeypatch):
    from torch.distributed.checkpoint import FileSystemWriter

    def fail(self, plan, planner):  # the disk fills while this rank writes its shard
        raise OSError(28, "No space left on device", str(Path(self.path) / "__0_0.distcp"))

    monkeypatch.setattr(FileSystemWriter, "write_data", fail)


def test_a_failed_background_write_is_raised_at_the_next_step_naming_rank_and_file(rt, tmp_path, monkeypatch):
    model, opt = _model()
    previous = rt.save_checkpoint(tmp_path / checkpoint_name(1), model=model, step=1)
    _failing_writes(monkeypatch)
    rt.save_checkpoint(tmp_path / checkpoint_name(2), background=True, model=model, step=2)
    deadline = time.monotonic() + 30
    while rt.state.background.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(CheckpointError) as err:
        rt.step()
    text = str(err.value)
    assert "rank 0" in text and "__0_0.distcp" in text and "No space left on device" in text, text
    assert latest_checkpoint(tmp_path) == previous and not (tmp_path / checkpoint_name(2)).exists()
    rt.step()  # raised once, not at every step after


def test_a_failed_background_write_is_raised_by_teardown(monkeypatch, tmp_path):
    monkeypatch.setenv("EZPZ_PRECISION", "fp32")
    runtime = ezpz.hooks.setup()
    model, _ = _model()
    _failing_writes(monkeypatch)
    runtime.save_checkpoint(tmp_path / checkpoint_name(1), background=True, model=model, step=1)
    with pytest.raises(CheckpointError, match="No space left on device"):
        ezpz.hooks.teardown()
    assert staging_path(tmp_path / checkpoint_name(1)).exists() and latest_checkpoint(tmp_path) is None


def test_background_must_be_a_bool(rt, tmp_path):
    model, _ = _model()
    with pytest.raises(CheckpointError, match="True or False"):
        rt.save_checkpoint(tmp_path / "x", background="yes", model=model)


# -- 2 ranks under torchrun ------------------------------------------------------------------------------------------

def _torchrun(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    from test_real_launchers import free_port

    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
            str(SCRIPT), *args]
    return subprocess.Popen(argv, env=clean_env(EZPZ_TIMEOUT="30", **(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finished(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def _wait_for(*paths: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"waited {timeout} s for {[str(p) for p in paths]}"
        time.sleep(0.02)


def _same_weights(a: Path, b: Path) -> None:
    x, y = torch.load(a), torch.load(b)
    assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    """2 FSDP2 ranks, 12 steps, a background save every 4: its directory, with ``final.pt`` (the full weights)."""
    out = tmp_path_factory.mktemp("uninterrupted")
    code, text = _finished(_torchrun("--model", "fsdp", "--steps", "12", "--checkpoint-dir", str(out / "ck"),
                                     "--final-weights", str(out / "final.pt")))
    assert code == 0, text[-3000:]
    return out


@pytest.mark.launcher
def test_two_fsdp2_ranks_save_in_the_background_and_one_process_loads_it(uninterrupted):
    latest = latest_checkpoint(uninterrupted / "ck")
    assert latest == uninterrupted / "ck" / checkpoint_name(12)
    assert all(is_complete(uninterrupted / "ck" / checkpoint_name(s)) for s in (4, 8, 12))
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    from ezpz.checkpoints.sharded import load_checkpoint

    assert load_checkpoint(latest, {"model": model}) == {"step": 12}  # resharded: 2 ranks saved, one process loads
    final = torch.load(uninterrupted / "final.pt")
    assert final.keys() == model.state_dict().keys()
    assert all(torch.equal(model.state_dict()[k], final[k]) for k in final)


@pytest.mark.launcher
def test_a_rank_killed_mid_write_leaves_the_previous_checkpoint_and_the_resumed_run_ends_the_same(
        tmp_path, uninterrupted):
    pause, ck = tmp_path / "pause", tmp_path / "ck"
    pause.mkdir()
    proc = _torchrun("--model", "fsdp", "--steps", "12", "--checkpoint-dir", str(ck), "--pause-dir", str(pause),
                     "--pause-step", "8", "--step-sleep", "0.05")
    _wait_for(pause / "paused-0", pause / "paused-1")
    (pause / "go-0").touch()  # rank 0 writes its shard; rank 1 is killed before it writes its own
    _wait_for(staging_path(ck / checkpoint_name(8)) / "__0_0.distcp")
    os.kill(int((pause / "paused-1").read_text()), signal.SIGKILL)
    code, out = _finished(proc)
    assert code != 0, out[-3000:]
    assert latest_checkpoint(ck) == ck / checkpoint_name(4), sorted(p.name for p in ck.iterdir())
    code, out = _finished(_torchrun("--model", "fsdp", "--steps", "12", "--checkpoint-dir", str(ck),
                                    "--final-weights", str(tmp_path / "resumed.pt")))
    assert code == 0 and "started from step 4" in out, out[-3000:]
    _same_weights(tmp_path / "resumed.pt", uninterrupted / "final.pt")  # as the run that was never interrupted


@pytest.mark.launcher
def test_sigterm_mid_write_completes_the_checkpoint_before_exit(tmp_path):
    pause, ck = tmp_path / "pause", tmp_path / "ck"
    pause.mkdir()
    proc = _torchrun("--steps", "1000", "--checkpoint-dir", str(ck), "--pause-dir", str(pause), "--pause-step", "4",
                     "--step-sleep", "0.05", env={"EZPZ_PREEMPT_GRACE": "60"})
    _wait_for(pause / "paused-0", pause / "paused-1")
    for rank in (0, 1):
        os.kill(int((pause / f"paused-{rank}").read_text()), signal.SIGTERM)
    _wait_for(pause / "preempted-0", pause / "preempted-1")  # both stopped, in teardown() waiting for the write
    assert not (ck / checkpoint_name(4)).exists()
    (pause / "go").touch()
    code, out = _finished(proc)
    assert is_complete(ck / checkpoint_name(4)) and latest_checkpoint(ck) == ck / checkpoint_name(4), out[-3000:]
    assert code != 0 and "exitcode  : 143" in out and "CheckpointError" not in out, out[-3000:]  # 143: preempted


@pytest.mark.launcher
def test_a_failed_background_write_is_raised_on_every_rank_naming_rank_and_file(tmp_path):
    pause, ck = tmp_path / "pause", tmp_path / "ck"
    pause.mkdir()
    proc = _torchrun("--steps", "1000", "--checkpoint-dir", str(ck), "--pause-dir", str(pause), "--pause-step", "4",
                     "--step-sleep", "0.05")
    _wait_for(pause / "paused-0", pause / "paused-1")
    staging = staging_path(ck / checkpoint_name(4))
    staging.rmdir()  # the disk goes away under the write: its directory is now a file
    staging.write_text("not a directory")
    (pause / "go").touch()
    code, out = _finished(proc)
    assert code != 0
    for rank in (0, 1):  # raised by each rank's own rt.step(), the ranks named, the file named
        line = next((x for x in out.splitlines() if x.startswith(f"[rank{rank}]:") and "CheckpointError" in x), "")
        assert "rank 0" in line and "rank 1" in line and staging.name in line, out[-4000:]
    assert latest_checkpoint(ck) is None
