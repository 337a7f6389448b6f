"""Clean exit under load: N consecutive 2-rank torchrun runs of the main job while busy loops hold every core.

Counts the runs that exit 0 and the ones that abort ("terminate called without
an active exception", SIGABRT) or fail otherwise; the load is one busy process
per core (``yes > /dev/null``), stopped at the end.

``--kept-group`` runs ``tests/scripts/gloo_kept_past_teardown.py`` instead: a
gloo group outliving teardown (as a DDP model's does) while a worker still
holds the last collective, paired and alternating: ``ezpz.hooks.teardown()``
(which waits for gloo's workers, :mod:`ezpz.primitives.gloo_quiesce`) against
``dist.destroy_process_group()`` alone, the baseline that aborts.

    python benchmarks/bench_clean_exit.py [--runs 100] [--steps 3] [--no-load] [--kept-group]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _util import CHILD_ENV


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--no-load", action="store_true", help="do not start the busy loops")
    p.add_argument("--kept-group", action="store_true", help="the group kept past teardown, paired with "
                   "destroy_process_group() alone")
    args = p.parse_args()
    if args.kept_group:
        kept_group(args.runs)
        return
    load = [] if args.no_load else [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL)
                                    for _ in range(os.cpu_count() or 1)]
    ok = aborted = failed = 0
    start = time.monotonic()
    try:
        for i in range(1, args.runs + 1):
            argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                    str(free_port()), "-m", "ezpz.examples.train", "--steps", str(args.steps),
                    "--log-every", str(args.steps)]
            proc = subprocess.run(argv, env=CHILD_ENV, capture_output=True, text=True, timeout=600)
            if proc.returncode == 0:
                ok += 1
            elif "terminate called" in proc.stderr or "SIGABRT" in proc.stderr:
                aborted += 1
                print(f"run {i}: aborted at exit\n{proc.stderr[-1500:]}", flush=True)
            else:
                failed += 1
                print(f"run {i}: exit {proc.returncode}\n{proc.stderr[-1500:]}", flush=True)
    finally:
        for busy in load:
            busy.kill()
            busy.wait()
    print(f"clean exit: {ok}/{args.runs} runs exited 0, {aborted} aborted at exit, {failed} failed otherwise "
          f"({'no load' if args.no_load else f'{len(load)} busy loop(s)'}; {time.monotonic() - start:.0f}s)")
    sys.exit(0 if ok == args.runs else 1)


KEPT = Path(__file__).resolve().parent.parent / "tests" / "scripts" / "gloo_kept_past_teardown.py"


def kept_group(runs: int) -> None:
    """Paired, alternating: teardown() vs destroy_process_group() alone; aborts counted for each."""
    counts = {"teardown": [0, 0, 0], "destroy": [0, 0, 0]}  # exited 0, aborted, failed otherwise
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            for mode in (("teardown", "destroy") if i % 2 == 0 else ("destroy", "teardown")):
                argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                        str(free_port()), str(KEPT), mode, f"{tmp}/finalizing-{i}-{mode}"]
                proc = subprocess.run(argv, env=CHILD_ENV, capture_output=True, text=True, timeout=300)
                slot = 0 if proc.returncode == 0 else 1 if "terminate called" in proc.stderr else 2
                counts[mode][slot] += 1
                if slot == 2:
                    print(f"run {i} ({mode}): exit {proc.returncode}\n{proc.stderr[-1500:]}", flush=True)
    for mode, (ok, aborted, failed) in counts.items():
        print(f"{mode:9s} {ok}/{runs} exited 0, {aborted} aborted at exit, {failed} failed otherwise")
    sys.exit(0 if counts["teardown"][0] == runs else 1)


if __name__ == "__main__":
    main()
