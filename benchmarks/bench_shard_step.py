"""A training step of an ``rt.shard`` model against the same model sharded by hand with ``fully_shard``, same run.

    python benchmarks/bench_shard_step.py          # starts 2 CPU ranks under torchrun itself
    torchrun --nproc-per-node 2 benchmarks/bench_shard_step.py

Both models have the same layers and initial weights and the same ``MixedPrecisionPolicy`` (the one
``rt.shard`` derives from the precision decision, written out by hand for the other), and run the same
loop (forward, backward, AdamW step) on the same data. Blocks of steps alternate between the two, in the
same order on every rank (they are collectives), so noise hits both alike; rank 0 prints the median of
the paired per-block ratios (target <= 1.01x), timed by the wall clock after ``rt.synchronize()``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from _util import alternating_blocks

BLOCKS, STEPS, WIDTH = 80, 5, 512


def main() -> None:
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    import ezpz
    from ezpz.sharding.precision import shard_precision

    torch.set_num_threads(1)
    rt = ezpz.hooks.setup()

    def new_model() -> nn.Module:
        torch.manual_seed(0)
        layers = [m for _ in range(4) for m in (nn.Linear(WIDTH, WIDTH), nn.GELU())]
        return nn.Sequential(*layers, nn.Linear(WIDTH, 1))

    ours = rt.shard(new_model())
    by_hand = new_model()
    policy = MixedPrecisionPolicy(**shard_precision(rt.amp, rt.device_type).policy_kwargs())
    mesh = rt.mesh()
    for layer in by_hand:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(by_hand, mesh=mesh, mp_policy=policy)

    x = torch.randn(64, WIDTH, generator=torch.Generator().manual_seed(rt.rank)).to(rt.device)
    y = torch.randn(64, 1, generator=torch.Generator().manual_seed(100 + rt.rank)).to(rt.device)

    def stepper(model: nn.Module):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step() -> None:
            loss = F.mse_loss(model(x).float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step

    ours_step, hand_step = stepper(ours), stepper(by_hand)

    def block(step) -> float:
        rt.synchronize()
        t = time.perf_counter()
        for _ in range(STEPS):
            step()
        rt.synchronize()
        return (time.perf_counter() - t) / STEPS

    a_times, b_times, ratios = alternating_blocks(lambda: block(ours_step), lambda: block(hand_step), BLOCKS)
    if rt.is_main:
        a_med, b_med = statistics.median(a_times) * 1e3, statistics.median(b_times) * 1e3
        precision = shard_precision(rt.amp, rt.device_type)
        print(f"FSDP2 step on {rt.world_size} x {rt.device} ({rt.backend}; parameters {precision.param_dtype or 'fp32'}, "
              f"reductions {precision.reduce_dtype or 'fp32'}), {BLOCKS} alternating blocks x {STEPS} steps, wall clock")
        print(f"fully_shard by hand (median)   {b_med:9.2f} ms")
        print(f"rt.shard (median)              {a_med:9.2f} ms   median paired ratio "
              f"{statistics.median(ratios):6.3f}   target <= 1.01")
    del ours, by_hand, ours_step, hand_step
    ezpz.hooks.teardown()


if __name__ == "__main__":
    if "WORLD_SIZE" in os.environ or "OMPI_COMM_WORLD_SIZE" in os.environ:
        main()
    else:  # start 2 CPU ranks of this script under torchrun
        env = {**os.environ, "EZPZ_DEVICE": os.environ.get("EZPZ_DEVICE", "cpu"), "OMP_NUM_THREADS": "1"}
        sys.exit(subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                                 "2", __file__], env=env, check=False).returncode)
