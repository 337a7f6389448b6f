"""Run a training script unchanged and count torch_xla's graph compilations per optimizer step.

``python count_compiles.py SCRIPT [ARGS...]``: runs SCRIPT as ``__main__`` with ARGS. A global optimizer step
post-hook, registered before the script's own ``setup()``, reads torch_xla's ``UncachedCompile`` counter at
every ``optimizer.step()``: it runs before ezpz's boundary, so entry ``i`` holds what compiled up to the end
of step ``i - 1`` (the step's graph, and any eval or checkpoint graphs between the steps). At exit the last
line of stdout is JSON: ``per_step`` (compilations between consecutive optimizer steps, the last one closed by
the end of the run), ``total`` and ``compile_s`` (torch_xla's ``CompileTime``).
"""

import atexit
import json
import runpy
import sys

from torch.optim.optimizer import register_optimizer_step_post_hook

counts: list[int] = []


def _count() -> int:
    import torch_xla.debug.metrics as met

    return met.counter_value("UncachedCompile") or 0


def _after_step(optimizer, args, kwargs) -> None:
    counts.append(_count())


def _report() -> None:
    import torch_xla.debug.metrics as met

    marks = [*counts, _count()]
    data = met.metric_data("CompileTime")
    print(json.dumps({"per_step": [b - a for a, b in zip(marks, marks[1:])], "before_first_step": marks[0] if marks else 0,
                      "total": marks[-1], "compile_s": round(data[1] / 1e9, 2) if data else 0.0}), flush=True)


register_optimizer_step_post_hook(_after_step)
atexit.register(_report)
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
