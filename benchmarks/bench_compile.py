"""A compiled small transformer's training step: ``rt.compile`` vs the same hand-written ``torch.compile``, and eager.

Copies of one model (same weights, data and optimizer settings):
``rt.compile(model)``; ``torch.compile(model, backend=<the policy's backend>)``
written by hand, twice (the second copy is an A/A control: its ratio to the
first shows this run's noise floor); and the eager model. Rounds of a few
steps rotate between them so noise hits all alike; figures are medians of the
per-round times and of paired per-round ratios, all from this one run.
Target: rt.compile / hand-written <= 1.01 (``rt.compile`` returns exactly what
``torch.compile`` returns, so a difference beyond the A/A spread would be a
bug). The speed-up over eager is reported, not targeted: it depends on the
device and the model.
"""

from __future__ import annotations

import copy
import statistics
import time

import torch
import torch.nn.functional as F

import ezpz

ROUNDS, STEPS = 150, 3
D_MODEL, HEADS, FF, LAYERS, BATCH, SEQ = 64, 4, 128, 2, 8, 32


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
    names = ("eager", "rt", "hand", "hand_again")
    models = {k: copy.deepcopy(base) for k in names}

    def by_hand(m: torch.nn.Module) -> torch.nn.Module:
        return m if policy.backend == "none" else torch.compile(m, backend=policy.backend)

    runners = {"eager": models["eager"], "rt": rt.compile(models["rt"]), "hand": by_hand(models["hand"]),
               "hand_again": by_hand(models["hand_again"])}
    assert type(runners["rt"]) is type(runners["hand"]), "rt.compile must return what torch.compile returns"
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3) for k, m in models.items()}
    x, y = torch.randn(BATCH, SEQ, D_MODEL), torch.randn(BATCH, SEQ, D_MODEL)

    def run(name: str) -> float:
        t = time.perf_counter()
        for _ in range(STEPS):
            loss = F.mse_loss(runners[name](x), y)
            opts[name].zero_grad(set_to_none=True)
            loss.backward()
            opts[name].step()
        return (time.perf_counter() - t) / STEPS

    t0 = time.perf_counter()
    for name in names:  # first calls compile (the FX graph cache may serve the later ones)
        run(name)
    compile_s = time.perf_counter() - t0
    for _ in range(5):
        for name in names:
            run(name)
    times: dict[str, list[float]] = {k: [] for k in names}
    rt_vs_hand, aa, eager_vs_rt = [], [], []
    for i in range(ROUNDS):
        got = {}
        for name in names[i % 4:] + names[: i % 4]:  # rotate who goes first
            got[name] = run(name)
            times[name].append(got[name])
        rt_vs_hand.append(got["rt"] / got["hand"])
        aa.append(got["hand_again"] / got["hand"])
        eager_vs_rt.append(got["eager"] / got["rt"])
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    q = statistics.quantiles(aa, n=4)
    print(f"compiled transformer step on {rt.device}: compile decision {policy.label!r} ({policy.reason})")
    print(f"model: {LAYERS}-layer transformer encoder, d_model {D_MODEL}, {HEADS} heads, ff {FF}; batch {BATCH}x{SEQ}; "
          f"SGD; torch threads {torch.get_num_threads()}")
    print(f"first step of all four (compiling) {compile_s:.1f} s; {ROUNDS} rotating rounds x {STEPS} steps")
    print(f"eager step (median)                              {med['eager']:9.3f} ms")
    print(f"hand-written torch.compile step (median)         {med['hand']:9.3f} ms")
    print(f"rt.compile step (median)                         {med['rt']:9.3f} ms   "
          f"median paired ratio vs hand-written {statistics.median(rt_vs_hand):6.3f}   target <= 1.01")
    print(f"A/A control: hand-written again vs hand-written  median paired ratio {statistics.median(aa):6.3f} "
          f"(interquartile {q[0]:.3f}..{q[2]:.3f}: this run's noise)")
    print(f"speed-up of rt.compile over eager (median paired) {statistics.median(eager_vs_rt):8.2f}x")
    ezpz.hooks.teardown()


if __name__ == "__main__":
    main()
