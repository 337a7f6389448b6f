"""Helpers for running karpathy/nanoGPT's ``train.py`` unedited: a copy of its files, a low-entropy dataset.

nanoGPT itself is not in this repository. ``EZPZ_NANOGPT_DIR`` names a checkout; its ``train.py``,
``model.py`` and ``configurator.py`` are copied byte for byte into a scratch directory (``train.py`` reads
``configurator.py`` and ``data/<dataset>`` relative to the current directory), next to a dataset made here in
nanoGPT's format: ``data/<name>/train.bin`` and ``val.bin`` (uint16 tokens) and ``meta.pkl`` (``vocab_size``).
The token stream repeats a short pattern, so the loss falls far only when the backward pass really works.
"""

from __future__ import annotations

import pickle
import re
import shutil
import struct
from pathlib import Path

FILES = ("train.py", "model.py", "configurator.py")
DATASET = "ezpz_lowent"
VOCAB = 32
#: Small and fast; float32 so the CPU reference and the redirected run do the same arithmetic.
ARGS = ["--compile=False", "--dtype=float32", "--n_layer=2", "--n_head=2", "--n_embd=64", "--block_size=32",
        "--batch_size=8", "--gradient_accumulation_steps=1", f"--dataset={DATASET}", "--eval_interval=10",
        "--eval_iters=2", "--log_interval=1", "--learning_rate=3e-3", "--warmup_iters=2", "--lr_decay_iters=30",
        "--min_lr=3e-4", "--dropout=0.0", "--always_save_checkpoint=True", "--out_dir=out"]
ITER = re.compile(r"^iter (\d+): loss ([\d.]+)", re.MULTILINE)


def prepare(checkout: Path, work: Path) -> Path:
    """Copy nanoGPT's files into ``work`` unchanged and write the dataset; return ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(checkout / name, work / name)
    data = work / "data" / DATASET
    data.mkdir(parents=True, exist_ok=True)
    pattern = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4]  # period 20 over a vocabulary of 32
    for split, length in (("train", 20000), ("val", 4000)):
        tokens = [pattern[i % len(pattern)] for i in range(length)]
        (data / f"{split}.bin").write_bytes(struct.pack(f"<{length}H", *tokens))
    (data / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": VOCAB}))
    return work


def losses(stdout: str) -> dict[int, float]:
    """nanoGPT's ``iter N: loss L`` lines."""
    return {int(i): float(v) for i, v in ITER.findall(stdout)}


def same_files(checkout: Path, work: Path) -> bool:
    """The copies are still byte-for-byte nanoGPT's (nothing edited them)."""
    return all((checkout / n).read_bytes() == (work / n).read_bytes() for n in FILES)
