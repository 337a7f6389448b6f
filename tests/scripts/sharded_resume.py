"""A portable sharded-checkpoint training script for the shrink/failover tests (what docs' sharded script does).

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


class _StandIn:
    """Sharded checkpoints through torch.distributed.checkpoint, for a runtime without ``rt.save_checkpoint``:
    written to ``<dir>.incomplete``, renamed to ``<dir>`` by rank 0 once every rank's shard is in (atomic)."""

    def __init__(self, rt) -> None:  # type: ignore[no-untyped-def]
        self.rt = rt

    def _states(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        msd, osd = get_state_dict(model, optimizer)
        return {"model": msd, "optimizer": osd, "step": torch.zeros((), dtype=torch.int64)}

    def save_checkpoint(self, directory: Path, *, model: nn.Module, optimizer: torch.optim.Optimizer,
                        step: int) -> None:
        import torch.distributed.checkpoint as dcp

        tmp = directory.with_name(directory.name + ".incomplete")
        state = self._states(model, optimizer)
        state["step"] = torch.tensor(step, dtype=torch.int64)
        dcp.save(state, checkpoint_id=str(tmp))
        self.rt.barrier()
        if self.rt.is_main:
            os.replace(tmp, directory)
        self.rt.barrier()

    def load_checkpoint(self, directory: Path, *, model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import set_state_dict

        state = self._states(model, optimizer)
        dcp.load(state, checkpoint_id=str(directory))
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
        return int(state["step"])

    @staticmethod
    def latest_checkpoint(parent: Path) -> Path | None:
        found = [d for d in parent.glob("step-*") if d.is_dir() and not d.name.endswith(".incomplete")
                 and (d / ".metadata").is_file()] if parent.is_dir() else []
        return max(found, key=lambda d: d.name, default=None)


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
    ck = _StandIn(rt)
    start = 0
    latest = ck.latest_checkpoint(args.checkpoint_dir)
    if latest is not None:
        start = ck.load_checkpoint(latest, model=model, optimizer=opt)
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
            ck.save_checkpoint(args.checkpoint_dir / f"step-{step:08d}", model=model, optimizer=opt, step=step)
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
