"""setup()/teardown() cycles in one process: ezpz against plain torch's own init/destroy loop, same run.

Each run starts 2 ranks (torchrun, then Open MPI's mpiexec) that each do
CYCLES x (set up, all-reduce, tear down) in one process. A run succeeds when
every rank finishes every cycle with the right sum. Plain torch re-reads the
previous generation's gloo addresses from the same store and fails a share of
runs ("connectFullMesh failed ... connection refused"); ezpz gives each
``setup()`` its own store namespace. Runs alternate between the two so machine
noise hits both alike. Success rates are reported, not asserted.

    python benchmarks/bench_setup_cycles.py [RUNS]   (default 20)
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from _util import CHILD_ENV

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
CYCLES = 3
SCRIPT = str(Path(__file__).resolve().parent.parent / "tests" / "scripts" / "cycles_check.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(launcher: str, mode: str) -> list[str]:
    if launcher == "torchrun":
        return [shutil.which("torchrun") or "torchrun", "--nproc-per-node", "2", "--master-port", str(free_port()),
                SCRIPT, "2", str(CYCLES), mode]
    return [shutil.which("mpiexec") or "mpiexec", "--allow-run-as-root", "--oversubscribe", "-n", "2",
            "-x", "CYCLES_PORT", "-x", "EZPZ_TIMEOUT", "-x", "OMP_NUM_THREADS", sys.executable, SCRIPT, "2",
            str(CYCLES), mode]


def one_run(launcher: str, mode: str) -> tuple[bool, str]:
    env = {**CHILD_ENV, "EZPZ_TIMEOUT": "60", "OMP_NUM_THREADS": "1", "CYCLES_PORT": str(free_port())}
    try:
        proc = subprocess.run(command(launcher, mode), env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return False, "hung past 300s"
    rows = [json.loads(m) for m in re.findall(r"\{[^{}]*\}", proc.stdout)]
    ok = proc.returncode == 0 and len(rows) == 2 and all(r["ok"] for r in rows)
    errors = sorted({r["error"][:90] for r in rows if r.get("error")}) or ([] if ok else [f"rc={proc.returncode}"])
    return ok, "; ".join(errors)


def main() -> None:
    print(f"{RUNS} runs of 2 ranks x {CYCLES} setup/teardown cycles each, per launcher; success rate (not timing)")
    for launcher in ("torchrun", "openmpi"):
        tally: dict[str, list[bool]] = {"ezpz": [], "torch": []}
        failures: dict[str, list[str]] = {"ezpz": [], "torch": []}
        for _ in range(RUNS):
            for mode in ("ezpz", "torch"):
                ok, why = one_run(launcher, mode)
                tally[mode].append(ok)
                if not ok:
                    failures[mode].append(why)
        for mode, label in (("ezpz", "ezpz setup()/teardown()"), ("torch", "plain torch init/destroy")):
            good = sum(tally[mode])
            print(f"{launcher:<9} {label:<28} {good:3d}/{RUNS} runs complete")
            for why in sorted(set(failures[mode]))[:3]:
                print(f"          failure: {why}")
        ratio = sum(tally["ezpz"]) / max(sum(tally["torch"]), 1)
        print(f"{launcher:<9} ratio ezpz/torch successes {ratio:.2f}   target: ezpz {RUNS}/{RUNS}")


if __name__ == "__main__":
    main()
