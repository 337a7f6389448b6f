"""What the hook deadline costs: ``plan()`` with every hook on the watched worker thread against the
same calls made inline (no deadline), alternating blocks in one process.

``plan()`` and ``setup()`` hand the whole decision (5 hooks, every plugin) to
the ``ezpz-hooks`` worker at once; ``before_init`` and ``after_setup`` are one
hand-off each. This measures the hand-off inside the real decision path.
"""

from __future__ import annotations

import statistics
import sys
import time

import ezpz
from ezpz.plugin_host import calls

BLOCKS, PLANS = 60, 20


def block() -> float:
    t = time.perf_counter()
    for _ in range(PLANS):
        ezpz.hooks.plan()
    return (time.perf_counter() - t) / PLANS


def main() -> None:
    watched = calls.run_watched
    ezpz.hooks.plan()  # warm: decision modules imported, worker started
    with_deadline, inline = [], []
    for i in range(BLOCKS):
        for mode in ((0, 1) if i % 2 else (1, 0)):
            calls.run_watched = watched if mode else (lambda fn, timeout_s, on_slow: fn())
            (with_deadline if mode else inline).append(block())
    calls.run_watched = watched
    w, n = statistics.median(with_deadline) * 1e3, statistics.median(inline) * 1e3
    ratio = statistics.median(a / b for a, b in zip(with_deadline, inline))
    added = statistics.median(a - b for a, b in zip(with_deadline, inline)) * 1e6
    print(f"plan() with the hook deadline {w:7.3f} ms  vs inline {n:7.3f} ms  ratio {ratio:5.3f} (paired)  "
          f"added {added:.0f} us per plan() (paired median; {BLOCKS} alternating blocks of {PLANS} plans)")


if __name__ == "__main__":
    sys.exit(main())
