"""Plugin discovery with 2,000 unrelated distributions installed against 20, same run (target <= 1.5).

Each distribution is a ``*.dist-info`` directory (METADATA, an unrelated
``console_scripts`` entry point, RECORD) on ``PYTHONPATH``, as pip would leave
it; the figure is ``import ezpz`` in fresh interpreters, paired and
alternating between the two environments.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

from _util import CHILD_ENV, median, py_json

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "11"))
CODE = """
import json, time
t = time.perf_counter(); import ezpz; t1 = time.perf_counter()
print(json.dumps({"s": t1 - t, "plugins": len(ezpz.hooks.get_plugin_host().records)}))
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


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        envs = {n: dict(CHILD_ENV, PYTHONPATH=os.pathsep.join(filter(None, [str(fake_site(Path(tmp) / str(n), n)),
                                                                             CHILD_ENV.get("PYTHONPATH")])))
                for n in (20, 2000)}
        for n in envs:
            py_json(CODE, env=envs[n])  # warm-up (bytecode, stevedore's entry-point cache)
        rows: dict[int, list[dict]] = {20: [], 2000: []}
        for i in range(ROUNDS):
            for n in ((20, 2000) if i % 2 else (2000, 20)):
                rows[n].append(py_json(CODE, env=envs[n]))
    few, many = median([r["s"] for r in rows[20]]) * 1e3, median([r["s"] for r in rows[2000]]) * 1e3
    r = statistics.median(a["s"] / b["s"] for a, b in zip(rows[2000], rows[20]))
    print(f"import ezpz with 2,000 unrelated distributions  {many:8.1f} ms  vs 20: {few:8.1f} ms  ratio {r:6.3f}"
          f"  target <= 1.5   (median of {ROUNDS} paired runs)")


if __name__ == "__main__":
    sys.exit(main())
