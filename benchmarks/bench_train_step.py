"""A training step through ``runtime.autocast()`` + ``runtime.range()`` against hand-written torch, same run.

Both loops run the same model, data and optimizer with the same autocast
dtype; the hand-written one calls ``torch.autocast`` directly and has no
ranges. Blocks of steps alternate between the two so noise hits both alike;
the figure is the median per-step time over blocks.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

import ezpz

BLOCKS, STEPS = 30, 20


def main() -> None:
    torch.set_num_threads(1)
    rt = ezpz.hooks.setup()
    dtype = rt.amp.torch_dtype
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randn(64, 256)

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
        t = time.perf_counter()
        for _ in range(STEPS):
            step()
        return (time.perf_counter() - t) / STEPS

    for _ in range(3):  # warm up both
        block(ezpz_step), block(torch_step)
    ours, theirs = [], []
    for i in range(BLOCKS):
        if i % 2:
            ours.append(block(ezpz_step)); theirs.append(block(torch_step))
        else:
            theirs.append(block(torch_step)); ours.append(block(ezpz_step))
    e, t = statistics.median(ours) * 1e6, statistics.median(theirs) * 1e6
    print(f"training step on {rt.device} ({rt.amp.dtype} autocast {'on' if rt.amp.autocast else 'off'}), "
          f"median of {BLOCKS} blocks x {STEPS} steps")
    print(f"hand-written torch step                          {t:9.1f} us")
    print(f"runtime.autocast() + 3x runtime.range() step     {e:9.1f} us   ratio {e / t:6.3f}   target < 1.01")
    ezpz.hooks.teardown()


if __name__ == "__main__":
    main()
