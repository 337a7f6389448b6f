"""The CUDA-style single-file trainer and its ezpz port: the port changes exactly the CUDA lines, and runs on cpu."""

from __future__ import annotations

import ast
import difflib
import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.one_torch  # source rewriting (ezpz port): runs on the pinned torch only (docs/ci.md)

ORIGINAL = ROOT / "tests" / "scripts" / "cuda_style_trainer.py"
PORTED = ROOT / "tests" / "scripts" / "cuda_style_trainer_ported.py"


def _code_lines(path):
    """The file's lines after its module docstring (the docstrings say different things; the code may not)."""
    text = path.read_text(encoding="utf-8")
    doc = ast.parse(text).body[0]
    return text.splitlines()[doc.end_lineno:]


def test_the_port_changes_only_the_cuda_lines():
    diff = [d for d in difflib.ndiff(_code_lines(ORIGINAL), _code_lines(PORTED)) if d[:2] in ("- ", "+ ")]
    removed = [d[2:] for d in diff if d.startswith("- ")]
    added = [d[2:] for d in diff if d.startswith("+ ")]
    assert removed == [
        "device = 'cuda'  # examples: 'cpu', 'cuda', 'cuda:0', 'cuda:1'",
        "backend = 'nccl'  # 'nccl', 'gloo', etc.",
        "dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'",
    ]
    assert added == [
        "import ezpz",
        "rt = ezpz.hooks.setup()",
        "device = str(rt.device)",
        "backend = rt.backend",
        "dtype = {'bf16': 'bfloat16', 'fp16': 'float16', 'fp32': 'float32'}[rt.amp.dtype]",
    ]
    assert "cuda" not in "\n".join(_code_lines(PORTED)).replace("'cuda:0', 'cuda:1'", "")


def _checkpointed(out):
    """The trainer's plain torch.save at its eval step: the model's and the AdamW state, loadable back."""
    import torch

    ckpt = torch.load(out / "ckpt.pt", map_location="cpu", weights_only=False)
    assert ckpt["iter_num"] == 6 and ckpt["optimizer"]["state"], sorted(ckpt)
    assert all(v.device.type == "cpu" for v in ckpt["model"].values())  # map_location
    return ckpt


def test_the_port_runs_on_cpu(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EZPZ_")}
    env.update(OMP_NUM_THREADS="1", EZPZ_DEVICE="cpu")
    proc = subprocess.run([sys.executable, str(PORTED), "--max-iters", "10", "--eval-interval", "6", "--out-dir",
                           str(tmp_path)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "device cpu backend gloo" in proc.stdout and "iter 10: loss" in proc.stdout
    assert "step 6: val loss" in proc.stdout and "saving checkpoint" in proc.stdout
    _checkpointed(tmp_path)


def test_the_port_runs_on_emu_unchanged(tmp_path):
    """The same ported file on the emulated PrivateUse1 device (plugins/ezpz-example-emu, installed by test.sh)."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("ezpz_example_emu") is None:
        pytest.skip("ezpz-example-emu is not installed here (scripts/test.sh installs it)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EZPZ_")}
    env.update(OMP_NUM_THREADS="1", EZPZ_DEVICE="emu")
    proc = subprocess.run([sys.executable, str(PORTED), "--max-iters", "10", "--eval-interval", "6", "--out-dir",
                           str(tmp_path)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "device emu backend emuccl dtype bfloat16" in proc.stdout and "iter 10: loss" in proc.stdout
    assert "step 6: val loss" in proc.stdout and "saving checkpoint" in proc.stdout
    _checkpointed(tmp_path)
