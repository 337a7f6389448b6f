"""Intra-op threads per rank: ``python -m ezpz.examples.train`` with torch's default threads vs one thread.

Paired runs (the two settings alternate, so load from other users of the
machine hits both alike), single process and two ranks under torchrun.
Prints steps/s per run and the median ratio against the default in the same run.

    python benchmarks/bench_threads.py [--pairs 3] [--steps 60]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _util import CHILD_ENV


def train(threads: str | None, ranks: int, steps: int) -> float:
    """steps/s of one run; ``threads`` None leaves OMP_NUM_THREADS unset (ezpz's `threads` decision applies)."""
    env = {k: v for k, v in CHILD_ENV.items() if k not in ("OMP_NUM_THREADS", "EZPZ_THREADS")}
    env["EZPZ_DEVICE"] = "cpu"
    if threads is not None:
        env["OMP_NUM_THREADS"] = threads
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        args = ["-m", "ezpz.examples.train", "--steps", str(steps), "--log-every", str(steps), "--report", str(report)]
        if ranks == 1:
            argv = [sys.executable, *args]
        else:
            argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks), *args]
            if threads is None:  # torchrun would set OMP_NUM_THREADS=1 itself; measure torch's default instead
                env["OMP_NUM_THREADS"] = str(os.cpu_count() or 1)
        subprocess.run(argv, env=env, check=True, capture_output=True, timeout=600)
        return json.loads(report.read_text())["steps_per_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=60)
    args = p.parse_args()
    cores = os.cpu_count() or 1
    print(f"machine: {cores} logical CPU(s); load average {os.getloadavg()[0]:.1f} at start")
    for ranks, label in ((1, "1 process"), (2, "2 ranks (torchrun)")):
        base, one = [], []
        for _ in range(args.pairs):
            base.append(train(None, ranks, args.steps))
            one.append(train("1", ranks, args.steps))
        ratios = [o / b for o, b in zip(one, base)]
        default = "torch default" if ranks == 1 else f"OMP_NUM_THREADS={cores} per rank"
        print(f"{label:<20} {default:<28} steps/s {' '.join(f'{x:6.1f}' for x in base)}")
        print(f"{label:<20} {'OMP_NUM_THREADS=1':<28} steps/s {' '.join(f'{x:6.1f}' for x in one)}")
        print(f"{label:<20} ratio one thread / default: median {statistics.median(ratios):.2f} "
              f"(pairs: {' '.join(f'{r:.2f}' for r in ratios)})")
    print(f"load average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
