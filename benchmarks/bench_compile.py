"""A compiled small transformer's training step: ``rt.compile`` vs the same hand-written ``torch.compile``, and eager.

Three copies of one model (same weights, data and optimizer settings):
``rt.compile(model)``; ``torch.compile(model, backend=<the policy's backend>)``
written by hand; and the eager model. Blocks of steps rotate between them so
noise hits all alike; the figures are medians of per-block times and of the
paired per-block ratios, all from this one run. Target: rt.compile / hand-written
<= 1.01 (``rt.compile`` returns exactly what ``torch.compile`` returns, so any
difference is noise). The speed-up over eager is reported, not targeted: it
depends on the device and the model.
"""

from __future__ import annotations

import copy
import statistics
import time

import torch
import torch.nn.functional as F

import ezpz

BLOCKS, STEPS = 30, 4
D_MODEL, HEADS, FF, LAYERS, BATCH, SEQ = 256, 4, 1024, 2, 8, 64


def make_model() -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(d_model=D_MODEL, nhead=HEADS, dim_feedforward=FF, dropout=0.0,
                                             batch_first=True)
    return torch.nn.Sequential(torch.nn.TransformerEncoder(layer, num_layers=LAYERS, enable_nested_tensor=False),
                               torch.nn.Linear(D_MODEL, D_MODEL))


def main() -> None:
    torch.set_num_threads(1)
    rt = ezpz.hooks.setup()
    policy = rt.plan.compile
    torch.manual_seed(0)
    base = make_model()
    models = {"eager": copy.deepcopy(base), "rt": copy.deepcopy(base), "hand": copy.deepcopy(base)}
    runners = {
        "eager": models["eager"],
        "rt": rt.compile(models["rt"]),
        "hand": models["hand"] if policy.backend == "none" else torch.compile(models["hand"], backend=policy.backend),
    }
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3) for k, m in models.items()}
    x, y = torch.randn(BATCH, SEQ, D_MODEL), torch.randn(BATCH, SEQ, D_MODEL)

    def step(name: str) -> None:
        loss = F.mse_loss(runners[name](x), y)
        opts[name].zero_grad(set_to_none=True)
        loss.backward()
        opts[name].step()

    def block(name: str) -> float:
        t = time.perf_counter()
        for _ in range(STEPS):
            step(name)
        return (time.perf_counter() - t) / STEPS

    t0 = time.perf_counter()
    for name in runners:  # first calls compile (the FX graph cache may serve the second compile)
        step(name)
    compile_s = time.perf_counter() - t0
    for _ in range(3):
        for name in runners:
            block(name)
    times: dict[str, list[float]] = {k: [] for k in runners}
    rt_vs_hand, eager_vs_rt = [], []
    order = list(runners)
    for i in range(BLOCKS):
        got = {}
        for name in order[i % 3:] + order[: i % 3]:  # rotate who goes first
            got[name] = block(name)
            times[name].append(got[name])
        rt_vs_hand.append(got["rt"] / got["hand"])
        eager_vs_rt.append(got["eager"] / got["rt"])
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"compiled transformer step on {rt.device}: compile decision {policy.label!r} ({policy.reason})")
    print(f"model: {LAYERS}-layer transformer encoder, d_model {D_MODEL}, {HEADS} heads, ff {FF}; batch {BATCH}x{SEQ}; "
          f"SGD; torch threads {torch.get_num_threads()}")
    print(f"first step of all three (compiling) {compile_s:.1f} s; {BLOCKS} rotating blocks x {STEPS} steps")
    print(f"eager step (median)                              {med['eager']:9.3f} ms")
    print(f"hand-written torch.compile step (median)         {med['hand']:9.3f} ms")
    print(f"rt.compile step (median)                         {med['rt']:9.3f} ms   "
          f"median paired ratio vs hand-written {statistics.median(rt_vs_hand):6.3f}   target <= 1.01")
    print(f"speed-up of rt.compile over eager (median paired) {statistics.median(eager_vs_rt):8.2f}x")
    ezpz.hooks.teardown()


if __name__ == "__main__":
    main()
