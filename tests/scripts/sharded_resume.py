"""A portable sharded-checkpoint training script for the shrink/failover tests (what docs' sharded script does).

``rt.save_checkpoint`` / ``rt.load_checkpoint`` / ``rt.latest_checkpoint`` (docs/checkpoints.md).

Resumes from the latest complete checkpoint under ``--checkpoint-dir`` if there is one (at any world size), trains
to ``--steps``, and saves a sharded checkpoint every ``--checkpoint-every`` steps. The data of rank ``r`` at step
``s`` is a function of (seed, r, s) only, so two runs of the same world size from the same checkpoint end with the
same weights. On SIGTERM every rank stops after the agreed step, saves, and exits 143. Prints ``[ezpz] step N`` lines (``ezpz launch`` counts them as progress) and, with ``--report``,
writes (rank 0) the step it started from, the world size, the attempt and what ``rt.explain()`` said of the world.

TESTING ONLY faults (``A:S:R`` = attempt A, step S, rank R; several comma-separated):
``--test-node-dies``: after step S's checkpoint rank R kills its node's launcher daemon (its parent) and itself;
``--test-dies-in-save``: rank R dies the same way in the middle of step S's save, after writing its shard.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import ezpz
from ezpz.checkpoints import checkpoint_name


def batch(seed: int, rank: int, step: int, size: int = 16, dim: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed((seed * 1_000_003 + rank * 10_007 + step) % (2**63))
    x = torch.randn(size, dim, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def _faults(text: str) -> set[tuple[int, int, int]]:
    return {tuple(int(v) for v in part.split(":")) for part in text.split(",") if part.strip()}  # type: ignore[misc]


def _node_dies() -> None:
    """The node goes away: its launcher daemon (this rank's parent under mpiexec) and this rank, both SIGKILLed."""
    print(f"[ezpz] TESTING: node of pid {os.getpid()} dies at {time.time():.3f}", flush=True)
    parent = os.getppid()
    if parent > 1:
        os.kill(parent, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _die_in_save() -> None:
    """Make the next sharded save kill this rank's node after its shard is written, before the save completes."""
    from torch.distributed.checkpoint import FileSystemWriter

    original = FileSystemWriter.write_data

    def write_then_die(self, plan, planner):  # type: ignore[no-untyped-def]
        future = original(self, plan, planner)
        future.wait()
        _node_dies()
        return future

    FileSystemWriter.write_data = write_then_die  # type: ignore[method-assign]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--checkpoint-dir", type=Path, required=True)
    p.add_argument("--checkpoint-every", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--final-weights", type=Path)
    p.add_argument("--report", type=Path)
    p.add_argument("--test-node-dies", default="")
    p.add_argument("--test-dies-in-save", default="")
    args = p.parse_args()
    rt = ezpz.hooks.setup()
    torch.manual_seed(args.seed)
    model: nn.Module = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1)).to(rt.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if rt.distributed:
        model = nn.parallel.DistributedDataParallel(model)
    start = 0
    latest = rt.latest_checkpoint(args.checkpoint_dir)
    if latest is not None:  # the newest complete one: an interrupted save is never taken
        start = int(rt.load_checkpoint(latest, model=model, optimizer=opt)["step"])
    world = next((f"{d.chosen}: {d.reason}" for d in rt.explain().decisions if d.topic == "world"), None)
    if rt.is_main:
        print(f"[ezpz] attempt {rt.attempt}: world size {rt.world_size}; started from step {start}"
              + (f" ({latest})" if latest is not None else "") + (f"; world {world}" if world else ""), flush=True)
    dies = {(a, s) for a, s, r in _faults(args.test_node_dies) if r == rt.rank}
    dies_in_save = {(a, s) for a, s, r in _faults(args.test_dies_in_save) if r == rt.rank}
    for step in range(start + 1, args.steps + 1):
        if args.step_sleep:
            time.sleep(args.step_sleep)
        x, y = batch(args.seed, rt.rank, step)
        loss = F.mse_loss(model(x.to(rt.device)), y.to(rt.device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        rt.step()
        if rt.is_main:
            print(f"[ezpz] step {step:4d}  loss {loss.item():.5f}", flush=True)
        if step % args.checkpoint_every == 0 or rt.preempted:
            if (rt.attempt, step) in dies_in_save:
                _die_in_save()
            rt.save_checkpoint(args.checkpoint_dir / checkpoint_name(step), model=model, optimizer=opt, step=step)
            if rt.is_main:
                print(f"[ezpz] checkpoint step {step} complete", flush=True)
        if rt.preempted:  # SIGTERM: every rank stops after this agreed step, checkpointed above
            if rt.is_main:
                print(f"[ezpz] preempted: stopped after step {step}", flush=True)
            break
        if (rt.attempt, step) in dies:
            _node_dies()
    if rt.is_main:
        if args.final_weights is not None:
            inner = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
            torch.save({k: v.detach().cpu() for k, v in inner.state_dict().items()}, args.final_weights)
        if args.report is not None:
            args.report.write_text(json.dumps({"start_step": start, "world_size": rt.world_size,
                                               "attempt": rt.attempt, "world": world,
                                               "resumed_from": str(latest) if latest else None}))
    ezpz.hooks.teardown()  # after a preemption: exit 143


if __name__ == "__main__":
    main()
