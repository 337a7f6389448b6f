"""``ezpz port`` on karpathy/nanoGPT's ``train.py``: what it changes, and the ported file's losses on CPU and emu.

nanoGPT is not part of this repository: point ``EZPZ_NANOGPT_DIR`` at a checkout (train.py, model.py,
configurator.py); without it these tests skip, naming the variable. The test copies the three files (never edits
them), writes a small low-entropy data set in nanoGPT's format (``data/<name>/train.bin``, ``val.bin``: uint16
tokens; ``meta.pkl`` with the vocabulary size), ports ``train.py`` and compares the ported run with nanoGPT's
plain ``--device=cpu`` run, logged step by logged step. CPU and the emulated ``emu`` device only; no real GPU.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import need_tool, skip_or_fail_in_ci

NANOGPT = os.environ.get("EZPZ_NANOGPT_DIR", "")
if not NANOGPT or not (Path(NANOGPT) / "train.py").is_file():
    pytest.skip("set EZPZ_NANOGPT_DIR to a karpathy/nanoGPT checkout to run these", allow_module_level=True)
if importlib.util.find_spec("libcst") is None:
    skip_or_fail_in_ci('libcst is not installed (pip install -e ".[port]")',
                       'CI must install ezpz[port] (libcst) for the ezpz port tests: scripts/test.sh')

#: The brief's small model, its eval every 10 iterations; 4 micro-steps per iteration (nanoGPT's default is 40)
#: and a short warm-up, so 20 iterations learn the data set within seconds.
ARGS = ["--dataset=lowent", "--compile=False", "--dtype=float32", "--n_layer=2", "--n_head=2", "--n_embd=64",
        "--block_size=64", "--batch_size=8", "--max_iters=20", "--eval_interval=10", "--eval_iters=2",
        "--gradient_accumulation_steps=4", "--learning_rate=1e-2", "--warmup_iters=2", "--lr_decay_iters=20",
        "--min_lr=1e-3"]
LINE = re.compile(r"^(?:iter (\d+): loss ([0-9.]+)|step (\d+): train loss ([0-9.]+), val loss ([0-9.]+))",
                  re.MULTILINE)


def _dataset(root: Path) -> None:
    """A fixed 48-token sequence repeated, 5% of tokens replaced at random: learnable, yet not constant."""
    import numpy as np

    period = np.random.default_rng(0).permutation(48).astype(np.uint16)
    folder = root / "data" / "lowent"
    folder.mkdir(parents=True)
    for name, size, seed in (("train.bin", 20000, 1), ("val.bin", 4000, 2)):
        rng = np.random.default_rng(seed)
        stream = np.tile(period, size // len(period) + 1)[:size].copy()
        noise = rng.random(size) < 0.05
        stream[noise] = rng.integers(0, 64, int(noise.sum()))
        stream.tofile(folder / name)
    (folder / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 64}))


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("nanogpt")
    for name in ("train.py", "model.py", "configurator.py"):
        shutil.copy(Path(NANOGPT) / name, root / name)
    _dataset(root)
    proc = subprocess.run([sys.executable, "-m", "ezpz", "port", "train.py", "-o", "train_ported.py"], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return root


def _run(root: Path, script: str, *extra: str, device: str = "cpu", out: str,
         launcher: tuple[str, ...] = (sys.executable,)) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EZPZ_")}
    env.update(OMP_NUM_THREADS="1", EZPZ_DEVICE=device)
    proc = subprocess.run([*launcher, script, *ARGS, f"--out_dir={out}", *extra], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    found: dict[str, float] = {}
    for it, loss, step, train, val in LINE.findall(proc.stdout):
        if it:
            found[f"iter {it}"] = float(loss)
        else:
            found[f"step {step} train"], found[f"step {step} val"] = float(train), float(val)
    assert "iter 20" in found and "step 20 val" in found, proc.stdout[-2000:]
    return found


def _same(got: dict[str, float], want: dict[str, float], keys=None) -> None:
    for key in keys or want:
        assert abs(got[key] - want[key]) <= 1e-4 * abs(want[key]), (key, got[key], want[key])


@pytest.fixture(scope="module")
def plain(work) -> dict[str, float]:
    """nanoGPT as it is, told --device=cpu (and, with no GPU, --backend is never used)."""
    losses = _run(work, "train.py", "--device=cpu", out="out_plain")
    assert losses["iter 20"] < 0.5 * losses["iter 0"], losses  # the data set is learnable: a broken step would show
    return losses


def test_the_port_changes_what_a_careful_hand_port_would(work):
    report = json.loads((work / "train_ported.port-report.json").read_text())
    (changes,) = [f["changes"] for f in report["files"]]
    rules = sorted(c["rule"] for c in changes)
    assert rules == sorted(["added", "added", "backend", "device", "dtype-choice", "init_process_group", "rank",
                            "rank", "rank", "device", "removed", "tf32", "tf32", "device-type", "grad_scaler",
                            "ddp", "save"])
    assert report["counts"]["unported"] == report["counts"]["unknown"] == 0
    text = (work / "train_ported.py").read_text()
    assert "cuda" not in text.replace("device_type == 'cuda'", "").split('"""', 2)[2]  # beyond the docstring
    again = subprocess.run([sys.executable, "-m", "ezpz", "port", "train_ported.py"], cwd=work,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout == ""  # idempotent


def test_the_ported_train_py_has_nanogpts_cpu_losses(work, plain):
    _same(_run(work, "train_ported.py", out="out_cpu"), plain)


def _model_locations(checkpoint: Path) -> set[str]:
    """Where the saved model's tensors lived when saved: each storage's location tag, read as torch.load meets it."""
    code = ("import sys, torch\nseen = {}\n"
            "def keep(storage, location):\n    seen[storage.data_ptr()] = location\n    return storage\n"
            "ckpt = torch.load(sys.argv[1], map_location=keep, weights_only=False)\n"
            "print(sorted({seen[t.untyped_storage().data_ptr()] for t in ckpt['model'].values()}))")
    proc = subprocess.run([sys.executable, "-c", code, str(checkpoint)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.replace("'", '"')))


def test_the_ported_train_py_has_nanogpts_cpu_losses_on_emu(work, plain):
    """On emu the ported file gives the plain CPU run's losses at every logged step.

    nanoGPT ties its embedding and output weights. torch's ``Module._apply`` makes a new parameter per module
    where the device's tensors cannot take a CPU tensor's place in place (``_has_compatible_shallow_copy_type`` is
    False for PrivateUse1 tensors), which would untie them; emu's plugin turns on torch's swap mode in
    ``ezpz_before_init`` (said in the trace), so ``model.to(rt.device)`` keeps them tied, as on CUDA.
    """
    if importlib.util.find_spec("ezpz_example_emu") is None:
        skip_or_fail_in_ci("ezpz-example-emu is not installed here", "ezpz-example-emu must be installed in CI")
    emu = _run(work, "train_ported.py", device="emu", out="out_emu")
    _same(emu, plain)
    assert emu["iter 20"] < 0.5 * emu["iter 0"], emu
    assert _model_locations(work / "out_emu" / "ckpt.pt") == {"emu:0"}  # the parameters lived on emu


@pytest.mark.launcher
def test_the_ported_train_py_runs_as_two_ranks_under_torchrun(work, plain):
    """nanoGPT's DDP path: setup() starts the group on gloo (its init_process_group call, now guarded, is skipped),
    the ranks come from rt, DDP gets no device_ids. Two ranks split the micro-steps, so only step 0 equals the
    single process's; the loss must still fall."""
    torchrun = need_tool("torchrun")
    two = _run(work, "train_ported.py", out="out_ddp", launcher=(torchrun, "--standalone", "--nproc-per-node", "2"))
    _same(two, plain, ["step 0 train", "step 0 val"])
    assert two["iter 20"] < 0.5 * two["iter 0"], two
