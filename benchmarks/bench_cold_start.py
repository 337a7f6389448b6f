"""Cold start against what ezpz replaces, as paired alternating fresh interpreters in one run.

1. ``import ezpz`` without torch against ``import pluggy, importlib.metadata``
   (what discovery needs): target <= 1.5.
2. ``import ezpz; ezpz.hooks.setup()`` with torch imported against
   ``from accelerate import PartialState; PartialState()``: target <= 1.0
   with every plugin of this repository installed (issue 44; issue 34 had
   aimed at 0.75 and did not reach it, docs/performance.md).
   accelerate is not a dependency: install it normally in the same
   environment for this benchmark (``pip install -c constraints.txt
   accelerate``); without it this part is skipped, saying so.
3. ``setup()`` alone after ``import ezpz`` (target < 20 ms), split into
   importing attrs, building the record classes (importing ezpz's decision
   modules) and the rest, with ``import attrs`` alone as the floor.

Every child pays torch's deferred full GC before its timer (``gc.collect()``).
Medians of ROUNDS paired runs; ratios are medians of per-pair ratios.

The target is for a wheel install, as users have it (an editable install puts
a finder in front of every import). ``python benchmarks/bench_cold_start.py``
builds ``scripts/build-dists.sh``'s wheels and measures two installs made from
them in venvs of its own (:mod:`_wheel_installs`): the core with one vendor
plugin (``pip install ezpz ezpz-xpu``) and the core with every plugin of this
repository; for the second it also pairs ``setup()`` against the same run with
``EZPZ_DISABLE_PLUGINS`` naming the third-party plugins (target: within 10 ms).
``--in-venv`` measures the Python running it, as installed.
"""

from __future__ import annotations

import os
import statistics
import sys

from _util import CHILD_ENV, machine, median, py_json, warm_up

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "11"))

DEPS = """
import json, time
t = time.perf_counter(); import pluggy, importlib.metadata; t1 = time.perf_counter()
print(json.dumps({"s": t1 - t}))
"""
EZPZ_IMPORT = """
import json, sys, time
t = time.perf_counter(); import ezpz; t1 = time.perf_counter()
heavy = sorted(m for m in ("structlog", "attrs", "torch") if m in sys.modules)
print(json.dumps({"s": t1 - t, "heavy": heavy}))
"""
EZPZ_SETUP = """
import gc, json, time, torch
gc.collect()
t = time.perf_counter(); import ezpz; rt = ezpz.hooks.setup(); t1 = time.perf_counter()
print(json.dumps({"s": t1 - t, "device": str(rt.device)}))
"""
ACCELERATE = """
import gc, json, time, torch
gc.collect()
t = time.perf_counter()
from accelerate import PartialState
state = PartialState()
t1 = time.perf_counter()
print(json.dumps({"s": t1 - t, "device": str(state.device)}))
"""
SETUP_ALONE = """
import gc, json, time, torch, ezpz
gc.collect()
t0 = time.perf_counter(); import attrs
t1 = time.perf_counter()
import ezpz.facts, ezpz.decisions, ezpz.decisions, ezpz.runtime, ezpz.startup.planning, ezpz.plugin_host.calls
t2 = time.perf_counter(); rt = ezpz.hooks.setup(); t3 = time.perf_counter()
print(json.dumps({"attrs": t1 - t0, "records": t2 - t1, "rest": t3 - t2, "s": t3 - t0}))
"""
SETUP_PLAIN = """
import gc, json, time, torch, ezpz
gc.collect()
t0 = time.perf_counter(); rt = ezpz.hooks.setup(); t1 = time.perf_counter()
print(json.dumps({"s": t1 - t0}))
"""
ATTRS_ALONE = """
import gc, json, time, torch
gc.collect()
t0 = time.perf_counter(); import attrs; t1 = time.perf_counter()
print(json.dumps({"s": t1 - t0}))
"""


def paired(a: str, b: str) -> tuple[list[dict], list[dict]]:
    warm_up(a)
    warm_up(b)
    xs, ys = [], []
    for i in range(ROUNDS):  # alternate which goes first, so drift hits both alike
        if i % 2:
            ys.append(py_json(b)); xs.append(py_json(a))
        else:
            xs.append(py_json(a)); ys.append(py_json(b))
    return xs, ys


def ratio(xs: list[dict], ys: list[dict]) -> float:
    return statistics.median(x["s"] / y["s"] for x, y in zip(xs, ys))


def ms(rows: list[dict], key: str = "s") -> float:
    return median([r[key] for r in rows]) * 1e3


def install_kind() -> str:
    """``wheel install`` or ``editable install``, from ezpz's own ``direct_url.json`` (PEP 610); no import of ezpz."""
    import importlib.metadata
    import json

    try:
        raw = importlib.metadata.distribution("ezpz").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
    editable = bool(raw) and json.loads(raw).get("dir_info", {}).get("editable", False)
    return "editable install" if editable else "wheel install"


def main() -> None:
    print(f"machine: {machine()}")
    print(f"ezpz: {install_kind()} in {sys.prefix}")
    print(f"median of {ROUNDS} paired, alternating fresh interpreters (ratio = median of per-pair ratios)")
    ez, deps = paired(EZPZ_IMPORT, DEPS)
    print(f"import ezpz, no torch                         {ms(ez):8.1f} ms  vs pluggy+importlib.metadata {ms(deps):6.1f} ms"
          f"  ratio {ratio(ez, deps):6.3f}  target <= 1.5   (loaded at import: {', '.join(ez[0]['heavy']) or 'none of structlog/attrs/torch'})")

    try:
        import accelerate  # noqa: F401  (only whether it is installed; the children import it)
    except ImportError:
        print("import ezpz; setup() vs accelerate PartialState(): skipped (pip install -c constraints.txt accelerate)")
    else:
        st, acc = paired(EZPZ_SETUP, ACCELERATE)
        print(f"import ezpz; setup() (torch imported)         {ms(st):8.1f} ms  vs accelerate PartialState() {ms(acc):8.1f} ms"
              f"  ratio {ratio(st, acc):6.3f}  target <= 1.0  (both on {st[0]['device']}/{acc[0]['device']})")
        floor = [py_json(SETUP_ALONE) for _ in range(ROUNDS)]
        f = ms(floor, "attrs") + ms(floor, "records")
        print(f"  measured floor with attrs records: import attrs + building the record classes {f:.1f} ms"
              f" = {f / ms(acc):.3f} of accelerate's PartialState() before ezpz discovers, probes or decides anything")

    alone, floor = paired(SETUP_PLAIN, ATTRS_ALONE)
    split = [py_json(SETUP_ALONE) for _ in range(ROUNDS)]
    print(f"setup() alone, after import ezpz              {ms(alone):8.1f} ms  target < 20 ms")
    print(f"  of which import attrs                       {ms(split, 'attrs'):8.1f} ms  (attrs alone, same run: {ms(floor):.1f} ms;"
          f" setup()/attrs-import ratio {ratio(alone, floor):.2f})")
    print(f"  of which building the record classes        {ms(split, 'records'):8.1f} ms")
    print(f"  of which probing, deciding, the trace       {ms(split, 'rest'):8.1f} ms")
    if os.environ.get("EZPZ_BENCH_INSTALL") == "core+all":
        third_party_cost()


def third_party_cost() -> None:
    """``setup()`` with every plugin, paired against the same with the third-party ones disabled."""
    from _wheel_installs import THIRD_PARTY

    without = {**CHILD_ENV, "EZPZ_DISABLE_PLUGINS": THIRD_PARTY}
    warm_up(SETUP_PLAIN)
    py_json(SETUP_PLAIN, env=without)
    xs, ys = [], []
    for i in range(ROUNDS):
        pair = [lambda: xs.append(py_json(SETUP_PLAIN)), lambda: ys.append(py_json(SETUP_PLAIN, env=without))]
        for run in pair if i % 2 == 0 else pair[::-1]:
            run()
    diff = statistics.median((x["s"] - y["s"]) * 1e3 for x, y in zip(xs, ys))
    print(f"setup() alone, every plugin                   {ms(xs):8.1f} ms  vs EZPZ_DISABLE_PLUGINS={THIRD_PARTY} "
          f"{ms(ys):6.1f} ms  median paired difference {diff:+6.1f} ms  ratio {ratio(xs, ys):6.3f}  target within 10 ms")


if __name__ == "__main__":
    if "--in-venv" in sys.argv:
        sys.exit(main())
    from _wheel_installs import rerun_in_each

    rerun_in_each("bench_cold_start.py")
