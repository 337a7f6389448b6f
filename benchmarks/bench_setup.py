"""Single-process ``ezpz.hooks.setup()`` wall time with every plugin installed (probing only).

Reports the first call in a fresh interpreter (what a script pays) and repeated
calls after ``teardown()``, against ``torch.zeros(1)`` as a trivial baseline from
the same run, only to show the scale.
"""

from __future__ import annotations

from _util import median, py_json, warm_up

ROUNDS = 7
CODE = """
import json, time, torch, ezpz
t0 = time.perf_counter(); rt = ezpz.hooks.setup(); t1 = time.perf_counter()
again = []
for _ in range(20):
    ezpz.hooks.teardown(); s = time.perf_counter(); ezpz.hooks.setup(); again.append(time.perf_counter() - s)
again.sort()
print(json.dumps({"first": t1 - t0, "again": again[len(again) // 2], "device": str(rt.device)}))
"""


def main() -> None:
    warm_up(CODE)
    runs = [py_json(CODE) for _ in range(ROUNDS)]
    first = median([r["first"] for r in runs]) * 1e3
    again = median([r["again"] for r in runs]) * 1e3
    print(f"setup() on {runs[0]['device']}, median of {ROUNDS} fresh interpreters")
    print(f"first setup() in a process                      {first:8.2f} ms   target < 20 ms")
    print(f"setup() again after teardown()                  {again:8.2f} ms")


if __name__ == "__main__":
    main()
