"""Single-process ``ezpz.hooks.setup()`` wall time with every plugin installed (probing only).

Reports the first call in a fresh interpreter (what a script pays) and repeated
calls after ``teardown()``, against ``torch.zeros(1)`` as a trivial baseline from
the same run, only to show the scale.
"""

from __future__ import annotations

from _util import median, py_json, warm_up

ROUNDS = 7
CODE = """
import gc, json, sys, time, torch, ezpz
if sys.argv[1:] == ["collected"]:
    gc.collect()  # pay torch's pending full collection first, so it is not billed to setup()
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
    collected = [py_json(CODE, args=["collected"]) for _ in range(ROUNDS)]
    first = median([r["first"] for r in runs]) * 1e3
    first_collected = median([r["first"] for r in collected]) * 1e3
    again = median([r["again"] for r in runs]) * 1e3
    print(f"setup() on {runs[0]['device']}, median of {ROUNDS} fresh interpreters")
    print(f"first setup() in a process                      {first:8.2f} ms")
    print(f"first setup() after gc.collect()                {first_collected:8.2f} ms   target < 20 ms"
          "   (first call also imports the decision modules kept out of `import ezpz`)")
    print(f"setup() again after teardown() (probing only)   {again:8.2f} ms   target < 20 ms")


if __name__ == "__main__":
    main()
