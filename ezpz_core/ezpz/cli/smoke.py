"""``ezpz test``: a short run of the main job (``python -m ezpz.examples.train``) here, then a report.

With ``-n 1`` (the default) the job runs as one plain process; with more it
goes through the same launcher choice as ``ezpz launch``. Arguments after
``--`` go to the job.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ezpz.cli._util import err
from ezpz.cli.launch import add_launch_flags, describe, execute
from ezpz.cli.device_slots import planned_device_slots
from ezpz.launch_drivers import Command, LaunchPlan, Layout, prepare
from ezpz.launch_drivers.base import Allocation
from ezpz.primitives.redact import scrub

__all__ = ["add_parser", "run"]

JOB = "ezpz.examples.train"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("test", help="smoke-test the main job here and report speed and decisions",
                       description=__doc__, usage="ezpz test [options] [-- JOB ARGS...]")
    p.add_argument("--steps", type=int, default=20, metavar="S", help="training steps (default 20)")
    p.add_argument("--json", action="store_true",
                   help="print the job's JSON report instead of a summary (the job's own output goes to stderr)")
    add_launch_flags(p)
    p.add_argument("job_args", nargs=argparse.REMAINDER, help="extra arguments for the job, after --")
    p.set_defaults(func=run)


def _bytes(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(value)


def _memory(stats: Any) -> str:
    if not isinstance(stats, Mapping) or not stats:
        return str(stats)
    peaks = {k: v for k, v in stats.items() if "peak" in k or "max" in k} or dict(stats)
    shown = (f"{k} {_bytes(v) if 'bytes' in k and isinstance(v, (int, float)) else v}" for k, v in peaks.items())
    return ", ".join(shown)


def _summary(report: dict[str, Any], plan: LaunchPlan, wall: float) -> str:
    why = {d["topic"]: d["reason"] for d in report.get("decisions", [])}
    lines = [
        f"ezpz test: passed in {wall:.1f}s ({report.get('steps')} steps)",
        f"  launcher    {plan.launcher}: {plan.reason}",
        f"  ranks       {report.get('world_size')} on {report.get('num_nodes', 1)} node(s)",
        f"  device      {report.get('device')} ({report.get('vendor', '?')}): {why.get('device', '')}",
        f"  backend     {report.get('backend')}: {why.get('backend', '')}",
        f"  precision   {report.get('precision')} (autocast {'on' if report.get('autocast') else 'off'}): "
        f"{why.get('precision', '')}",
        f"  loss        {report.get('first_loss', float('nan')):.3f} -> {report.get('final_loss', float('nan')):.3f}",
        f"  speed       {report['steps_per_s']:.2f} steps/s, {report['samples_per_s']:.1f} samples/s"
        + (f", {report['tokens_per_s']:.0f} tokens/s" if "tokens_per_s" in report else ""),
        f"  peak memory {_memory(report.get('peak_memory'))}",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec(JOB) is None:
        err(f"ezpz test: error: the main job {JOB} is not installed with this ezpz. Fix: reinstall ezpz")
        return 2
    extra = list(args.job_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    with tempfile.TemporaryDirectory(prefix="ezpz-test-") as tmp:
        report_path = Path(tmp) / "report.json"
        argv = [sys.executable, "-m", JOB, "--steps", str(args.steps), "--report", str(report_path), *extra]
        n = 1 if args.n is None and args.ppn is None and not args.hostfile else args.n
        if n == 1 and not args.launcher:
            plan = LaunchPlan(launcher="none", reason="one process (-n 1): run directly",
                              layout=Layout(n=1, ppn=1, nodes=1, allocation=Allocation(), why="1 process (-n 1)"),
                              command=Command(argv=argv))
        else:
            plan = prepare(argv, launcher=args.launcher, n=n, ppn=args.ppn, hostfile=args.hostfile,
                                   devices=lambda: planned_device_slots(os.environ))
        describe(plan, "ezpz test", verbose=args.verbose > 0)
        start = time.perf_counter()
        code = execute(plan, "ezpz test", args.grace, job_stdout_to_stderr=args.json)
        wall = time.perf_counter() - start
        if code != 0:
            err(f"ezpz test: FAILED: the job exited with status {code} (its output is above)")
            return code
        if not report_path.exists():
            err(f"ezpz test: FAILED: the job exited 0 but wrote no report to {report_path}")
            return 1
        report = json.loads(report_path.read_text())
    print(scrub(json.dumps(report, indent=2) if args.json else _summary(report, plan, wall)))
    return 0
