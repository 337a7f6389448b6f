"""Helpers for running pytorch/examples' scripts unedited: a copy of a script's folder, small MNIST, the losses.

pytorch/examples is not in this repository. A checkout's example folder (``mnist``, ``vae``, ...) is copied byte
for byte into a scratch directory, next to a small MNIST written here in the raw idx format torchvision's
``datasets.MNIST`` reads (``<root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte``): with those four
files present it never downloads. The images are digit-like, not random noise: each label draws its own
fixed stroke pattern plus seeded noise, so a classifier can learn and the losses move.
"""

from __future__ import annotations

import random
import re
import shutil
import struct
from pathlib import Path

#: torchvision's names for MNIST's raw files (``datasets.MNIST.resources`` without ``.gz``).
RAW = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
       "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
SIDE = 28
#: Any ``loss``/``Loss``/``Loss_D``... number a script prints, in order (the values compared between runs).
LOSS = re.compile(r"(?:loss|Loss(?:_[DG])?|D\(x\)|D\(G\(z\)\)|error)[^0-9\-\n]*(-?\d+\.\d+(?:e-?\d+)?)")


def write_mnist(root: Path, train: int = 320, test: int = 128, seed: int = 0) -> Path:
    """Write ``train`` + ``test`` 28x28 uint8 samples under ``root/MNIST/raw``; return ``root``."""
    rng = random.Random(seed)
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", train), ("test", test)):
        labels = [i % 10 for i in range(count)]
        rng.shuffle(labels)
        pixels = bytearray()
        for label in labels:
            pixels += _digit(label, rng)
        images_name, labels_name = RAW[split]
        (raw / images_name).write_bytes(struct.pack(">IIII", 0x803, count, SIDE, SIDE) + bytes(pixels))
        (raw / labels_name).write_bytes(struct.pack(">II", 0x801, count) + bytes(labels))
    return root


def _digit(label: int, rng: random.Random) -> bytes:
    """A 28x28 image: a bar whose row and column depend on ``label``, plus noise."""
    row, col = 4 + 2 * label, 3 + (label * 7) % 20
    image = bytearray(rng.randrange(0, 40) for _ in range(SIDE * SIDE))
    for x in range(4, 24):
        image[row * SIDE + x] = 255
        image[x * SIDE + col] = 200
    return bytes(image)


def copy_example(checkout: Path, name: str, work: Path) -> Path:
    """Copy the ``name`` folder of a pytorch/examples checkout into ``work/name`` unchanged; return that folder."""
    target = work / name
    shutil.copytree(checkout / name, target, ignore=shutil.ignore_patterns("data", "*.pt"))
    return target


def same_files(checkout: Path, name: str, work: Path) -> bool:
    """The copied ``.py`` files are still byte-for-byte the checkout's (nothing edited them)."""
    files = sorted(p.relative_to(checkout / name) for p in (checkout / name).glob("*.py"))
    return bool(files) and all((checkout / name / f).read_bytes() == (work / name / f).read_bytes() for f in files)


def losses(stdout: str) -> list[float]:
    """Every logged loss-like number, in the order printed."""
    return [float(v) for v in LOSS.findall(stdout)]
