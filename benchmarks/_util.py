"""Small helpers shared by the benchmark scripts (run them from the repository root)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable

#: Children run as a user's would: with bytecode caches. Some sandboxes export
#: PYTHONDONTWRITEBYTECODE=1, which makes every import recompile its source.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def py_json(code: str, env: dict[str, str] | None = None, args: list[str] | None = None,
            cwd: str | None = None) -> dict:
    """Run ``code`` in a fresh interpreter (in ``cwd``); it must print one JSON object last."""
    out = subprocess.run([sys.executable, "-c", code, *(args or [])], capture_output=True, text=True, check=True,
                         env=CHILD_ENV if env is None else env, cwd=cwd)
    return json.loads(out.stdout.strip().splitlines()[-1])


def warm_up(code: str) -> None:
    """One untimed run so bytecode caches exist, as after any first use."""
    py_json(code)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def alternating_blocks(ours: Callable[[], float], baseline: Callable[[], float], blocks: int,
                       warm_ups: int = 3) -> tuple[list[float], list[float], list[float]]:
    """Time two blocks paired: ``warm_ups`` untimed rounds, then ``blocks`` rounds that alternate which goes first.

    Each callable runs one block and returns its time. Returns (ours' times, the baseline's, the per-round
    ratios ours / baseline), so noise that hits one round hits both sides alike.
    """
    for _ in range(warm_ups):
        ours(), baseline()
    a_times, b_times, ratios = [], [], []
    for i in range(blocks):
        if i % 2:
            a = ours(); b = baseline()
        else:
            b = baseline(); a = ours()
        a_times.append(a); b_times.append(b); ratios.append(a / b)
    return a_times, b_times, ratios


def row(name: str, value: float, baseline: float, unit: str, target: str) -> str:
    return f"{name:<58} {value:9.2f} {unit:<3} vs {baseline:9.2f} {unit:<3} ratio {value / baseline:6.3f}   target {target}"


def machine() -> str:
    """The CPU model and core count from /proc/cpuinfo, and the load average now (the machine may be shared)."""
    model, cores = "unknown CPU", os.cpu_count() or 0
    try:
        with open("/proc/cpuinfo") as fh:
            names = [line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")]
        model, cores = (names[0], len(names)) if names else (model, cores)
    except OSError:
        pass
    try:
        load = "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "load average unknown"
    return f"{model}, {cores} cores, {load}"
