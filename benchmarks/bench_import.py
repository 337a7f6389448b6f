"""Cost of ``import ezpz`` with torch already imported, against ``import torch`` itself, same run.

Also splits it into the third-party libraries ezpz needs (pluggy, attrs,
structlog, stevedore) and ezpz's own modules plus plugin discovery.
Run with every plugin installed: ``python benchmarks/bench_import.py``.
"""

from __future__ import annotations

from _util import median, py_json, warm_up

ROUNDS = 9
CODE = """
import json, time
t0 = time.perf_counter(); import torch; t1 = time.perf_counter()
import pluggy, attrs, structlog, stevedore, importlib.metadata; t2 = time.perf_counter()
import ezpz; t3 = time.perf_counter()
plugins = sorted(n for n, r in ezpz.hooks.get_plugin_host().records.items() if r.status == "loaded")
print(json.dumps({"torch": t1 - t0, "deps": t2 - t1, "own": t3 - t2, "plugins": plugins}))
"""
CODE_TOTAL = """
import gc, json, sys, time
import torch
if sys.argv[1:] == ["collected"]:
    gc.collect()  # pay torch's pending full collection before timing, so it is not billed to ezpz
t0 = time.perf_counter(); import ezpz; t1 = time.perf_counter()
print(json.dumps({"ezpz": t1 - t0}))
"""


def main() -> None:
    warm_up(CODE)
    split = [py_json(CODE) for _ in range(ROUNDS)]
    total = [py_json(CODE_TOTAL)["ezpz"] for _ in range(ROUNDS)]
    collected = [py_json(CODE_TOTAL, args=["collected"])["ezpz"] for _ in range(ROUNDS)]
    torch_ms = median([s["torch"] for s in split]) * 1e3
    deps_ms = median([s["deps"] for s in split]) * 1e3
    own_ms = median([s["own"] for s in split]) * 1e3
    total_ms = median(total) * 1e3
    collected_ms = median(collected) * 1e3
    print(f"plugins loaded: {', '.join(split[0]['plugins'])}  (median of {ROUNDS} fresh interpreters)")
    print(f"import torch                                   {torch_ms:8.1f} ms")
    print(f"import ezpz after torch (total)                {total_ms:8.1f} ms   ratio to torch {total_ms / torch_ms:6.3f}   target < 0.05")
    print(f"import ezpz after torch and gc.collect()       {collected_ms:8.1f} ms   ratio to torch {collected_ms / torch_ms:6.3f}"
          "   (the difference is torch's deferred full GC, paid by whatever allocates next)")
    print(f"  of which pluggy+attrs+structlog+stevedore    {deps_ms:8.1f} ms")
    print(f"  of which ezpz modules + plugin discovery     {own_ms:8.1f} ms   target < 10 ms")


if __name__ == "__main__":
    main()
