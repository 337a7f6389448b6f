"""How long a save stops training: ``rt.save_checkpoint(..., background=True)`` against the synchronous save, paired.

    python benchmarks/bench_background_checkpoint.py            # starts 2 CPU ranks under torchrun itself
    python benchmarks/bench_background_checkpoint.py --layers 17 --width 4096 --rounds 3 --steps 3
    torchrun --nproc-per-node 2 benchmarks/bench_background_checkpoint.py [same flags]

The model is ``--layers`` bias-free ``Linear(width, width)`` layers (17 x 4096 x 4096: 285 M parameters,
1.14 GB in fp32), sharded with FSDP2 (``rt.shard``) and trained with AdamW, so a checkpoint holds the
parameters and two Adam moments: 3.4 GB, 1.7 GB per rank on 2 ranks. Each round runs two blocks, one per
kind of save, in alternating order (sync first in even rounds); a block is one save followed by ``--steps``
training steps, and for the background save the wait for its write at the block's end (the drain), so both
blocks do the same work and the block's wall time is what a run with a save every ``--steps`` steps pays.

Printed, the maximum over ranks per save: the **stall** (time inside ``rt.save_checkpoint``: the training loop
is blocked), the **drain** (the write still running once the block's steps are done) and the **block** time,
with the per-round ratio of each to the synchronous save of the same round. One untimed round of each comes
first (the first background save allocates the host buffers and makes its gloo group: printed apart). Saves go to ``--dir`` (default a
fresh directory under the system's temporary one, removed at the end), two checkpoints replaced in turn.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=17)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=3, help="training steps after each save (a save every N steps)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dir", type=Path)
    p.add_argument("--json", type=Path, help="also write the results here (rank 0)")
    return p.parse_args()


def main() -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    import ezpz

    args = _args()
    torch.set_num_threads(1)
    rt = ezpz.hooks.setup()
    torch.manual_seed(0)
    model = rt.shard(nn.Sequential(*[nn.Linear(args.width, args.width, bias=False) for _ in range(args.layers)]))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    x = torch.randn(args.batch, args.width, generator=torch.Generator().manual_seed(rt.rank))
    params = sum(p.numel() for p in model.parameters())  # a DTensor's numel() is the whole parameter's

    def step() -> None:
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        rt.step()

    step()  # AdamW's moments exist from the first step: the checkpoint's full size from here on
    root = args.dir or Path(tempfile.gettempdir()) / f"ezpz-bench-ckpt-{os.environ.get('TORCHELASTIC_RUN_ID', 'x')}"

    def block(background: bool) -> dict[str, float]:
        rt.barrier()
        t0 = time.perf_counter()
        rt.save_checkpoint(root / ("step-000002" if background else "step-000001"), background=background,
                           model=model, optim=opt, step=1)
        stall = time.perf_counter() - t0
        for _ in range(args.steps):
            step()
        t1 = time.perf_counter()
        if background:
            rt.background_saves().wait()
        drain = time.perf_counter() - t1
        return {"stall": stall, "drain": drain, "block": time.perf_counter() - t0}

    def slowest(t: float) -> float:
        mine = torch.tensor([t])
        if rt.distributed:
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        return float(mine.item())

    first = {"sync": slowest(block(False)["stall"]), "background": slowest(block(True)["stall"])}  # untimed warm-up
    rounds: list[dict[str, dict[str, float]]] = []
    for r in range(args.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        got = {("background" if bg else "sync"): block(bg) for bg in order}
        mine = torch.tensor([got[k][m] for k in ("sync", "background") for m in ("stall", "drain", "block")])
        if rt.distributed:
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)  # the slowest rank is what the job waits for
        values = mine.tolist()
        rounds.append({k: dict(zip(("stall", "drain", "block"), values[3 * i:3 * i + 3]))
                       for i, k in enumerate(("sync", "background"))})
    if rt.is_main:
        _report(rounds, first, args, params, rt)
    main_rank = rt.is_main
    ezpz.hooks.teardown()
    if main_rank:
        shutil.rmtree(root, ignore_errors=True)


def _report(rounds: list[dict[str, dict[str, float]]], first: dict[str, float], args: argparse.Namespace,
            params: int, rt: object) -> None:
    pinned = rt.background_saves().host  # type: ignore[attr-defined]
    gb = params * 4 / 1e9
    print(f"{params / 1e6:.0f} M parameters ({gb:.2f} GB fp32) + AdamW state, FSDP2 over {rt.world_size} x "  # type: ignore[attr-defined]
          f"{rt.device} ({rt.backend}); a save, then {args.steps} steps, per block; "  # type: ignore[attr-defined]
          f"{args.rounds} rounds alternating; host copy: {pinned.why}")
    print(f"warm-up (untimed round, first of each): sync stall {first['sync']:.2f} s, background stall "
          f"{first['background']:.2f} s (allocates the host buffers, makes the background gloo group)")
    print(f"{'round':>5} {'sync stall':>11} {'bg stall':>9} {'stall ratio':>11} {'bg drain':>9} "
          f"{'sync block':>11} {'bg block':>9} {'block ratio':>11}")
    stall_ratios, block_ratios = [], []
    for i, r in enumerate(rounds):
        s, b = r["sync"], r["background"]
        stall_ratios.append(b["stall"] / s["stall"])
        block_ratios.append(b["block"] / s["block"])
        print(f"{i:>5} {s['stall']:>10.2f}s {b['stall']:>8.2f}s {stall_ratios[-1]:>11.3f} {b['drain']:>8.2f}s "
              f"{s['block']:>10.2f}s {b['block']:>8.2f}s {block_ratios[-1]:>11.3f}")
    med = statistics.median
    print(f"median stall: sync {med(r['sync']['stall'] for r in rounds):.2f} s, background "
          f"{med(r['background']['stall'] for r in rounds):.2f} s; stall ratio median {med(stall_ratios):.3f} "
          f"(max {max(stall_ratios):.3f}; target <= 0.25)")
    print(f"block (a save + {args.steps} steps, background including its drain): ratio median {med(block_ratios):.3f} "
          f"(max {max(block_ratios):.3f}; target <= 1.0)")
    total = {k: sum(r[k]["block"] for r in rounds) for k in ("sync", "background")}
    print(f"the run's blocks in total: sync {total['sync']:.1f} s, background {total['background']:.1f} s, ratio "
          f"{total['background'] / total['sync']:.3f} (target <= 1.0)")
    if args.json is not None:
        args.json.write_text(json.dumps({"params": params, "first": first, "rounds": rounds,
                                         "stall_ratios": stall_ratios,
                                         "block_ratios": block_ratios, "host_copy": pinned.why}, indent=1))


if __name__ == "__main__":
    if "WORLD_SIZE" in os.environ or "OMPI_COMM_WORLD_SIZE" in os.environ:
        main()
    else:  # start 2 CPU ranks of this script under torchrun
        env = {**os.environ, "EZPZ_DEVICE": os.environ.get("EZPZ_DEVICE", "cpu"), "OMP_NUM_THREADS": "1",
               "EZPZ_TIMEOUT": os.environ.get("EZPZ_TIMEOUT", "900")}
        sys.exit(subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                                 "2", __file__, *sys.argv[1:]], env=env, check=False).returncode)
