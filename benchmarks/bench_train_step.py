"""A training step through ``runtime.autocast()`` + ``runtime.range()`` against hand-written torch, same run.

Both loops run the same model, data and optimizer with the same autocast
dtype; the hand-written one calls ``torch.autocast`` directly and has no
ranges. Blocks of steps alternate between the two so noise hits both alike;
the figure is the median of the paired per-block ratios. Because a shared
machine's noise is larger than the effect, the script also measures ezpz's
added work directly: the per-step cost of entering ``rt.autocast()`` and three
``rt.range()`` against entering ``torch.autocast`` alone, with no model.

Model, data and optimizer live on ``rt.device`` (the device ezpz chose: a GPU
where there is one). A block is timed with the plugin's device timer
(``rt.profiling.new_event``, CUDA events on NVIDIA: the device's own time
between the block's first and last kernel) where there is one, else with the
wall clock after ``rt.synchronize()``; the output names which.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

import ezpz
from _util import alternating_blocks

BLOCKS, STEPS = 60, 10


def main() -> None:
    torch.set_num_threads(1)
    rt = ezpz.hooks.setup()
    dtype = rt.amp.torch_dtype
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).to(rt.device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256, device=rt.device), torch.randn(64, 256, device=rt.device)
    new_event = rt.profiling.new_event

    def ezpz_step() -> None:
        with rt.range("forward"), rt.autocast():
            loss = F.mse_loss(model(x).float(), y)
        with rt.range("backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with rt.range("step"):
            opt.step()

    def torch_step() -> None:
        with torch.autocast(device_type=rt.device_type, dtype=dtype, enabled=rt.amp.autocast):
            loss = F.mse_loss(model(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def block(step) -> float:
        """Seconds per step over STEPS steps: the device timer where the plugin has one, else the wall clock."""
        rt.synchronize()
        if new_event is not None:
            start, end = new_event(), new_event()
            start.record()
            for _ in range(STEPS):
                step()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / STEPS  # elapsed_time is in milliseconds
        t = time.perf_counter()
        for _ in range(STEPS):
            step()
        rt.synchronize()
        return (time.perf_counter() - t) / STEPS

    ours, theirs, ratios = alternating_blocks(lambda: block(ezpz_step), lambda: block(torch_step), BLOCKS)
    e, t = statistics.median(ours) * 1e6, statistics.median(theirs) * 1e6
    print(f"training step on {rt.device} ({rt.amp.dtype} autocast {'on' if rt.amp.autocast else 'off'}), "
          f"{BLOCKS} alternating blocks x {STEPS} steps, timed by {rt.profiling.timer} ({rt.profiling.timer_reason})")
    print(f"hand-written torch step (median)                 {t:9.1f} us")
    print(f"runtime.autocast() + 3x runtime.range() (median) {e:9.1f} us   "
          f"median paired ratio {statistics.median(ratios):6.3f}   target < 1.01")

    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        with torch.autocast(device_type=rt.device_type, dtype=dtype, enabled=rt.amp.autocast):
            pass
    bare = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        with rt.range("forward"), rt.autocast():
            pass
        with rt.range("backward"):
            pass
        with rt.range("step"):
            pass
    wrapped = (time.perf_counter() - t0) / n
    added = (wrapped - bare) * 1e6
    print(f"ezpz's added work per step (no profiler)         {added:9.2f} us   = {added / t:.5f} of a step")
    ezpz.hooks.teardown()


if __name__ == "__main__":
    main()
