"""Background checkpoints on several ranks: train, save with ``background=True``, resume; for the kill/SIGTERM tests.

Resumes from ``rt.latest_checkpoint(--checkpoint-dir)`` if there is one, trains to ``--steps`` (the data of rank
``r`` at step ``s`` depends on (r, s) only, so runs from the same checkpoint end with the same weights) and saves in
the background every ``--every`` steps. ``--model`` is ``plain``, ``ddp`` or ``fsdp`` (``rt.shard``). Rank 0 writes
the full parameters to ``--final-weights``. On SIGTERM the script stops at the agreed step without a new save:
``teardown()`` finishes the save in flight, then exits 143.

TESTING ONLY (``--pause-dir D --pause-step S``): the background write of step S's save stops before it writes a
file, leaves ``D/paused-<rank>`` (holding its pid) and goes on once ``D/go-<rank>`` or ``D/go`` exists (at most
120 s); at a preemption each rank leaves ``D/preempted-<rank>`` before ``teardown()``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import ezpz
from ezpz.checkpoints import checkpoint_name

_pause_now = {"on": False}


def _pause_writes(pause_dir: Path, rank: int) -> None:
    from torch.distributed.checkpoint import FileSystemWriter

    original = FileSystemWriter.write_data

    def paused_write(self, plan, planner):  # type: ignore[no-untyped-def]
        if _pause_now["on"]:
            (pause_dir / f"paused-{rank}").write_text(str(os.getpid()))
            deadline = time.monotonic() + 120
            while not ((pause_dir / f"go-{rank}").exists() or (pause_dir / "go").exists()):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        return original(self, plan, planner)

    FileSystemWriter.write_data = paused_write  # type: ignore[method-assign]


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(rank * 10_007 + step)
    x = torch.randn(16, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=4)
    p.add_argument("--model", choices=("plain", "ddp", "fsdp"), default="ddp")
    p.add_argument("--checkpoint-dir", type=Path, required=True)
    p.add_argument("--final-weights", type=Path)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--pause-dir", type=Path)
    p.add_argument("--pause-step", type=int, default=-1)
    args = p.parse_args()
    rt = ezpz.hooks.setup()
    torch.manual_seed(0)
    model: nn.Module = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    if args.model == "fsdp":
        model = rt.shard(model)
    elif args.model == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    if args.pause_dir is not None:
        _pause_writes(args.pause_dir, rt.rank)
    start = 0
    latest = rt.latest_checkpoint(args.checkpoint_dir)
    if latest is not None:
        start = int(rt.load_checkpoint(latest, model=model, optim=opt)["step"])
    if rt.is_main:
        print(f"started from step {start}", flush=True)
    for step in range(start + 1, args.steps + 1):
        time.sleep(args.step_sleep)
        x, y = batch(rt.rank, step)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        rt.step()
        if rt.preempted:
            if args.pause_dir is not None:
                (args.pause_dir / f"preempted-{rt.rank}").write_text(str(step))
            break
        if step % args.every == 0:
            _pause_now["on"] = step == args.pause_step
            rt.save_checkpoint(args.checkpoint_dir / checkpoint_name(step), background=True, model=model, optim=opt,
                               step=step)
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rt.is_main and args.final_weights is not None:
        torch.save(full, args.final_weights)
    ezpz.hooks.teardown()


if __name__ == "__main__":
    main()
