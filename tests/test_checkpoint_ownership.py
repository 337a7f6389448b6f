"""A save writes only where nothing is, into an empty directory, or over an ezpz checkpoint; a replace killed
halfway (SIGKILL, in a subprocess) leaves one complete checkpoint, and the next save tidies what it left.

The 2-rank refusal and loads are tests/test_checkpoint_fuzz.py's (one torchrun job).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import ezpz
from checkpoint_cases import snapshot
from conftest import clean_env
from ezpz.checkpoints import is_complete
from ezpz.checkpoints.layout import MARKER, set_aside_path, staging_path
from ezpz.errors import CheckpointError


@pytest.fixture
def rt(monkeypatch):
    monkeypatch.setenv("EZPZ_PRECISION", "fp32")
    return ezpz.hooks.setup()


def _model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(4, 3)


def _user_results(root: Path) -> Path:
    results = root / "results"
    (results / "sub").mkdir(parents=True)
    (results / "metrics.csv").write_text("step,loss\n1,0.5\n")
    (results / "sub" / "log.txt").write_text("a week of runs\n")
    return results


def _refused(rt, path: Path, found: str) -> None:
    before = snapshot(path.parent)
    with pytest.raises(CheckpointError) as err:
        rt.save_checkpoint(path, model=_model(0), step=1)
    first = str(err.value).splitlines()[0]
    assert str(path) in first and found in first, first
    assert snapshot(path.parent) == before  # every file intact, nothing staged beside it


def test_what_ezpz_did_not_write_is_refused_and_left_intact(rt, tmp_path):
    _refused(rt, _user_results(tmp_path / "a"), "a directory holding 'metrics.csv', 'sub' (a directory)")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "afile").write_text("notes")
    _refused(rt, tmp_path / "b" / "afile", "is a file")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "link").symlink_to(_user_results(tmp_path / "c2"))
    _refused(rt, tmp_path / "c" / "link", "a symbolic link (to ")
    rt.save_checkpoint(tmp_path / "d" / "ck", model=_model(0), step=1)
    (tmp_path / "d" / "ck" / MARKER).unlink()  # checkpoint files without ezpz's marker
    _refused(rt, tmp_path / "d" / "ck", f"without ezpz's marker {MARKER}")
    rt.save_checkpoint(tmp_path / "e" / "ck", model=_model(0), step=1)
    (tmp_path / "e" / "ck" / "notes.txt").write_text("mine")  # a checkpoint the user added a file to
    _refused(rt, tmp_path / "e" / "ck", "a directory holding 'notes.txt'")
    (tmp_path / "f").mkdir()
    os.mkfifo(tmp_path / "f" / "pipe")
    _refused(rt, tmp_path / "f" / "pipe", "is a FIFO")
    (tmp_path / "g").mkdir()
    _user_results(tmp_path / "g")
    (tmp_path / "g" / "results").rename(set_aside_path(tmp_path / "g" / "ck"))  # a user's dir with ezpz's hidden name
    _refused(rt, tmp_path / "g" / "ck", "besides checkpoint files; ezpz removes only what it wrote")


def test_an_empty_directory_and_an_ezpz_checkpoint_are_written(rt, tmp_path):
    (tmp_path / "empty").mkdir()
    rt.save_checkpoint(tmp_path / "empty", model=_model(0), step=1)
    assert is_complete(tmp_path / "empty")
    rt.save_checkpoint(tmp_path / "empty", model=_model(1), step=2)  # the previous ezpz checkpoint is replaced
    fresh = _model(5)
    assert rt.load_checkpoint(tmp_path / "empty", model=fresh) == {"step": 2}
    assert torch.equal(fresh.weight, _model(1).weight)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # nothing set aside or staged is left


_KILL = """
import os, signal, sys
from pathlib import Path
import torch
from torch import nn
import ezpz
from ezpz.checkpoints import replace, sharded

final, point = Path(sys.argv[1]), sys.argv[2]
rt = ezpz.hooks.setup()
torch.manual_seed(0)
rt.save_checkpoint(final, model=nn.Linear(4, 3), step=1)
real_exchange, real_rename = replace.exchange, os.rename

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if point == "after-exchange":  # the names swapped; the old checkpoint not yet removed
    replace.exchange = lambda a, b: real_exchange(a, b) and die()
elif point == "between-renames":  # no exchange here: the old one set aside, the new one not yet in
    replace.exchange = lambda a, b: False
    replace.os.rename = lambda a, b: (real_rename(a, b), Path(a) == final and die())
elif point == "before-install":  # the new one complete under its staging name
    sharded.install = lambda *args: die()
torch.manual_seed(1)
rt.save_checkpoint(final, model=nn.Linear(4, 3), step=2)
"""


@pytest.mark.parametrize("point", ["after-exchange", "between-renames", "before-install"])
def test_a_replace_killed_halfway_leaves_one_complete_checkpoint(rt, tmp_path, point):
    final = tmp_path / "ck"
    done = subprocess.run([sys.executable, "-c", _KILL, str(final), point], env=clean_env(EZPZ_PRECISION="fp32"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == -9, done.stderr[-3000:]  # SIGKILL, at the point named
    fresh = _model(5)
    if point == "between-renames":  # the path is empty for a moment; the next save puts the old one back
        assert not final.exists() and is_complete(set_aside_path(final))
        with pytest.raises(CheckpointError, match="the next save_checkpoint puts it back"):
            rt.load_checkpoint(final, model=fresh)
        rt.save_checkpoint(tmp_path / "unrelated", model=_model(0))  # another path's save leaves it alone
        assert is_complete(set_aside_path(final))
    else:
        step = rt.load_checkpoint(final, model=fresh)["step"]
        assert step == (2 if point == "after-exchange" else 1)
        assert torch.equal(fresh.weight, _model(step - 1).weight)  # complete: these are that save's parameters
        assert staging_path(final).is_dir()  # what the kill left
    rt.save_checkpoint(final, model=_model(2), step=3)
    assert rt.load_checkpoint(final, model=fresh) == {"step": 3}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "unrelated") == ["ck"]  # tidied
