"""Two 2-rank MPICH jobs started side by side on one host, no MASTER_PORT: does each get its own world?

Each round starts two ``mpiexec.mpich -n 2`` jobs at once running the all-reduce
check. Hydra exports no job identity, so before ezpz published rank 0's bound
port through PMI both jobs met on 29500 and could cross-join (a wrong sum, or
a hang). A round passes when both jobs exit 0 with the right sum on every rank
within the time limit. The count is reported, not asserted.

    python benchmarks/bench_concurrent_jobs.py [ROUNDS]   (default 10)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _util import CHILD_ENV

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
SCRIPT = str(Path(__file__).resolve().parent.parent / "tests" / "scripts" / "allreduce_check.py")
LIMIT_S = 180


def start() -> subprocess.Popen[str]:
    env = {k: v for k, v in CHILD_ENV.items() if k not in ("MASTER_PORT", "MASTER_ADDR", "RANK", "WORLD_SIZE")}
    cmd = [shutil.which("mpiexec.mpich") or "mpiexec.mpich", "-n", "2", "env", "OMP_NUM_THREADS=1",
           "EZPZ_TIMEOUT=60", sys.executable, SCRIPT, "2"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str]) -> tuple[bool, str]:
    try:
        out, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return False, f"hung past {LIMIT_S}s"
    rows = [json.loads(m) for m in re.findall(r"\{[^{}]*\}", out)]
    sums = sorted((r["rank"], r["sum"]) for r in rows)
    ok = proc.returncode == 0 and sums == [(0, 3.0), (1, 3.0)]
    return ok, "" if ok else f"rc={proc.returncode} sums={sums} {err.strip().splitlines()[-1:]}"


def main() -> None:
    good, problems, took = 0, [], []
    for _ in range(ROUNDS):
        t = time.monotonic()
        jobs = [start(), start()]
        results = [finish(j) for j in jobs]
        took.append(time.monotonic() - t)
        if all(ok for ok, _ in results):
            good += 1
        problems += [why for ok, why in results if not ok]
    print(f"two 2-rank MPICH jobs side by side, no MASTER_PORT: {good}/{ROUNDS} rounds with both jobs correct, "
          f"no hang (longest round {max(took):.1f}s)   target {ROUNDS}/{ROUNDS}")
    for why in problems[:5]:
        print(f"  failure: {why}")


if __name__ == "__main__":
    main()
