"""Clean exit under load: N consecutive 2-rank torchrun runs of the main job while busy loops hold every core.

Counts the runs that exit 0 and the ones that abort ("terminate called without
an active exception", SIGABRT) or fail otherwise; the load is one busy process
per core (``yes > /dev/null``), stopped at the end.

    python benchmarks/bench_clean_exit.py [--runs 100] [--steps 3] [--no-load]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

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
    args = p.parse_args()
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


if __name__ == "__main__":
    main()
