"""Intra-op threads per rank: ``python -m ezpz.examples.train`` with torch's default threads vs one thread.

Paired runs (the settings alternate, so load from other users of the
machine hits all alike): a single process with torch's default (one thread
per core), one thread, and ezpz's `threads` decision; two ranks under torchrun
with one thread per core each and one thread each.
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
    env = {k: v for k, v in CHILD_ENV.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
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
        subprocess.run(argv, env=env, check=True, capture_output=True, timeout=600)
        return json.loads(report.read_text())["steps_per_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=60)
    args = p.parse_args()
    cores = os.cpu_count() or 1
    print(f"machine: {cores} logical CPU(s); load average {os.getloadavg()[0]:.1f} at start", flush=True)
    arms = {
        1: (("torch default", str(cores)), ("OMP_NUM_THREADS=1", "1"), ("ezpz's threads decision", None)),
        2: ((f"OMP_NUM_THREADS={cores} per rank", str(cores)), ("OMP_NUM_THREADS=1", "1")),
    }
    for ranks, label in ((1, "1 process"), (2, "2 ranks (torchrun)")):
        runs: dict[str, list[float]] = {name: [] for name, _ in arms[ranks]}
        for _ in range(args.pairs):  # arms alternate, so the machine's load drifts over all alike
            for name, threads in arms[ranks]:
                runs[name].append(train(threads, ranks, args.steps))
        base_name = arms[ranks][0][0]
        for name, values in runs.items():
            ratios = [v / b for v, b in zip(values, runs[base_name])]
            print(f"{label:<20} {name:<28} steps/s {' '.join(f'{x:6.1f}' for x in values)}   "
                  f"vs {base_name}: median {statistics.median(ratios):.2f}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at end", flush=True)


if __name__ == "__main__":
    main()
