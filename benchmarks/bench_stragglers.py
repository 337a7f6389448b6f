"""Straggler detection's overhead on the main job: paired, alternating runs with it on and off, and its cost measured.

Part 1 runs the main job (``python -m ezpz.examples.train``, 2 ranks under
torchrun, gloo on CPU) in pairs, one with ``EZPZ_STRAGGLER_EVERY=25`` (the
default) and one with ``EZPZ_STRAGGLER_EVERY=0`` (off), alternating which goes
first; the figure is the median of the paired ratios of their step times (from
the job's own ``--report``, start-up excluded). On a shared machine the noise
of whole runs is larger than the effect, so part 2 measures the added work
itself, in one 2-rank job: one report (the median, the all-gather, the scores,
rank 0's atomic JSON write) and one ``rt.range()`` with detection on against
off. The per-step overhead is ``4 ranges' extra + one report / 25`` over the
main job's step time (its 4 ranges: data, forward, backward, step).

Run from the repository root: ``python benchmarks/bench_stragglers.py [pairs]``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _util import CHILD_ENV, machine  # noqa: E402

STEPS, EVERY = 300, 25

WORKER = r'''
import json, statistics, tempfile, time
import attrs
import ezpz
rt = ezpz.hooks.setup()
watch = rt.stragglers
watch.report_dir = __import__("pathlib").Path(tempfile.mkdtemp())
recent = tuple([0.01] * 256)
for c in range(1, 6):
    watch.report(c * watch.every, recent)  # warm up (first all-gather sets up pickling buffers)
n, t0 = 200, time.perf_counter()
for c in range(6, 6 + n):
    watch.report(c * watch.every, recent)
report_s = (time.perf_counter() - t0) / n
off = attrs.evolve(rt, stragglers=None)
def ranges(r, k):
    t0 = time.perf_counter()
    for _ in range(k):
        with r.range("forward"):
            pass
    return (time.perf_counter() - t0) / k
k, on_s, off_s = 20000, [], []
for i in range(10):
    on_s.append(ranges(rt, k)); off_s.append(ranges(off, k))
    watch._sections.clear()
if rt.rank == 0:
    print(json.dumps({"report_s": report_s, "range_on_s": statistics.median(on_s),
                      "range_off_s": statistics.median(off_s)}))
ezpz.hooks.teardown()
'''


def _torchrun(args: list[str], env: dict[str, str]) -> str:
    torchrun = shutil.which("torchrun") or "torchrun"
    out = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", *args], env=env, capture_output=True,
                         text=True, timeout=600)
    if out.returncode:
        raise SystemExit(f"torchrun {' '.join(args)} exited {out.returncode}:\n{out.stderr[-3000:]}")
    return out.stdout


def _main_job(every: int, report: Path) -> float:
    env = {**CHILD_ENV, "OMP_NUM_THREADS": "1", "EZPZ_STRAGGLER_EVERY": str(every)}
    _torchrun(["-m", "ezpz.examples.train", "--steps", str(STEPS), "--log-every", "100000", "--report",
               str(report)], env)
    return 1.0 / json.loads(report.read_text())["steps_per_s"]


def main() -> None:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    tmp = Path(tempfile.mkdtemp())
    print(f"straggler detection overhead; {machine()}")
    _main_job(EVERY, tmp / "warm.json")
    on, off, ratios = [], [], []
    for i in range(pairs):
        order = (EVERY, 0) if i % 2 == 0 else (0, EVERY)
        got = {every: _main_job(every, tmp / f"r{i}-{every}.json") for every in order}
        on.append(got[EVERY]); off.append(got[0]); ratios.append(got[EVERY] / got[0])
    step_s = statistics.median(off)
    print(f"main job, 2 ranks, {STEPS} steps, {pairs} alternating pairs")
    print(f"  step time, detection off (median)        {step_s * 1e3:9.3f} ms")
    print(f"  step time, detection on every {EVERY} (median) {statistics.median(on) * 1e3:9.3f} ms   "
          f"median paired ratio {statistics.median(ratios):6.3f}   target <= 1.01")
    env = {**CHILD_ENV, "OMP_NUM_THREADS": "1", "EZPZ_STRAGGLER_EVERY": str(EVERY)}
    script = tmp / "worker.py"
    script.write_text(WORKER)
    t0 = time.perf_counter()
    direct = json.loads(_torchrun(["--no-python", sys.executable, str(script)], env).strip().splitlines()[-1])
    added_range = max(0.0, direct["range_on_s"] - direct["range_off_s"])
    per_step = 4 * added_range + direct["report_s"] / EVERY
    print(f"added work, measured directly ({time.perf_counter() - t0:.0f} s)")
    print(f"  one report (median, all-gather of 2 ranks, scores, JSON) {direct['report_s'] * 1e6:9.1f} us")
    print(f"  one rt.range() on vs off                  {direct['range_on_s'] * 1e6:9.2f} vs "
          f"{direct['range_off_s'] * 1e6:.2f} us")
    print(f"  per step: 4 ranges + a report / {EVERY}        {per_step * 1e6:9.1f} us   "
          f"= {per_step / step_s:.4f} of the main job's step   target <= 0.01")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
