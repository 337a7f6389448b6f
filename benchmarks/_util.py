"""Small helpers shared by the benchmark scripts (run them from the repository root)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys


def py_json(code: str, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` in a fresh interpreter; it must print one JSON object last."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def row(name: str, value: float, baseline: float, unit: str, target: str) -> str:
    return f"{name:<58} {value:9.2f} {unit:<3} vs {baseline:9.2f} {unit:<3} ratio {value / baseline:6.3f}   target {target}"
