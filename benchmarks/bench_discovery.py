"""Plugin discovery with 2,000 unrelated distributions installed against 20, same run (target <= 1.5).

Each distribution is a ``*.dist-info`` directory (METADATA, an unrelated
``console_scripts`` entry point, RECORD) on ``PYTHONPATH``, as pip would leave
it; the figure is ``import ezpz`` in fresh interpreters, paired and
alternating between the two environments, with ezpz's entry-point index
(:mod:`ezpz.plugin_host.ep_cache`) built by the warm-up runs, as after any
first use; the same figure without the index (``EZPZ_CACHE=0``)
is printed for comparison. A third figure runs every child in a directory
created just before it (``mkdir run-N && cd run-N && python -c ...``, as a job
script does), the first run of each environment untimed: the index must serve
a job whose directory is new (target <= 1.5).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _util import CHILD_ENV, machine, median, py_json

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "11"))
CODE = """
import json, time
t = time.perf_counter(); import ezpz; t1 = time.perf_counter()
from ezpz.plugin_host import ep_cache
print(json.dumps({"s": t1 - t, "plugins": len(ezpz.hooks.get_plugin_host().records), "index": ep_cache.last_status()}))
"""


def fake_site(root: Path, n: int) -> Path:
    for i in range(n):
        info = root / f"unrelated_pkg_{i:04d}-1.0.{i}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: unrelated-pkg-{i:04d}\nVersion: 1.0.{i}\n")
        (info / "entry_points.txt").write_text(f"[console_scripts]\nunrelated-{i} = unrelated_pkg_{i:04d}:main\n")
        (info / "RECORD").write_text(f"unrelated_pkg_{i:04d}/__init__.py,,\n")
        (info / "top_level.txt").write_text(f"unrelated_pkg_{i:04d}\n")
    return root


def measure(envs: dict[int, dict[str, str]], new_dirs: Path | None = None) -> tuple[float, float, float, str]:
    """Paired medians; with ``new_dirs``, each child runs in a directory made under it just before."""
    made = iter(range(10**6))

    def run(n: int) -> dict:
        if new_dirs is None:
            return py_json(CODE, env=envs[n])
        cwd = new_dirs / f"run-{next(made)}"
        cwd.mkdir()
        return py_json(CODE, env=envs[n], cwd=str(cwd))

    for n in envs:  # warm-up: bytecode caches and the entry-point index, as after any first use
        run(n)
    rows: dict[int, list[dict]] = {20: [], 2000: []}
    for i in range(ROUNDS):
        for n in ((20, 2000) if i % 2 else (2000, 20)):
            rows[n].append(run(n))
    few, many = median([r["s"] for r in rows[20]]) * 1e3, median([r["s"] for r in rows[2000]]) * 1e3
    r = statistics.median(a["s"] / b["s"] for a, b in zip(rows[2000], rows[20]))
    return many, few, r, rows[2000][-1]["index"]


def main() -> None:
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        envs = {n: dict(CHILD_ENV, PYTHONPATH=os.pathsep.join(filter(None, [str(fake_site(Path(tmp) / str(n), n)),
                                                                             CHILD_ENV.get("PYTHONPATH")])))
                for n in (20, 2000)}
        time.sleep(2.5)  # an index is not written for a directory modified moments ago (ep_cache.RACY_WINDOW_NS)
        many, few, r, index = measure(envs)
        print(f"import ezpz with 2,000 unrelated distributions  {many:8.1f} ms  vs 20: {few:8.1f} ms  ratio {r:6.3f}"
              f"  target <= 1.5   (median of {ROUNDS} paired runs; index: {index})")
        many, few, r, index = measure({n: dict(e, EZPZ_CACHE="0") for n, e in envs.items()})
        print(f"... without the index (EZPZ_CACHE=0) {many:8.1f} ms  vs 20: {few:8.1f} ms  ratio {r:6.3f}"
              f"  (for comparison)")
        jobs = Path(tmp) / "jobs"
        jobs.mkdir()
        many, few, r, index = measure(envs, new_dirs=jobs)
        print(f"... each run in a directory created just before {many:8.1f} ms  vs 20: {few:8.1f} ms  ratio {r:6.3f}"
              f"  target <= 1.5   (from the second run on; index: {index})")


if __name__ == "__main__":
    sys.exit(main())
