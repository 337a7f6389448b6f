"""The main job: a small, real, portable training run through ``ezpz.hooks.setup()``.

A tiny causal transformer learns a synthetic sequence rule (next token =
token + 1 mod vocab), so the loss really falls. Everything device-, launcher-
and precision-specific comes from the runtime: DDP when world size > 1,
autocast and grad scaler from the AMP policy, range markers, and a throughput
line every interval. Run it as ``python -m ezpz.examples.train`` under any
launcher (none, torchrun, mpiexec, srun).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

import ezpz
from ezpz.examples import checkpoint

if TYPE_CHECKING:
    from ezpz.runtime import Runtime


class TinyLM(nn.Module):
    mask: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, vocab: int, dim: int, layers: int, heads: int, seq: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        return self.head(self.blocks(x, mask=self.mask[: tokens.shape[1], : tokens.shape[1]], is_causal=True))


def batch(seed: int, rank: int, step: int, size: int, seq: int, vocab: int, device: torch.device
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Step ``step``'s batch for ``rank``: a function of (seed, rank, step) only, so a resumed run sees the same data."""
    generator = torch.Generator().manual_seed((seed * 1_000_003 + rank * 10_007 + step) % (2**63))
    start = torch.randint(0, vocab, (size, 1), generator=generator)
    seqs = (start + torch.arange(seq + 1)) % vocab
    seqs = seqs.to(device, non_blocking=True)
    return seqs[:, :-1], seqs[:, 1:]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ezpz.examples.train", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", type=Path, help="write a JSON report here (rank 0)")
    p.add_argument("--explain", action="store_true", help="print the decision trace on rank 0")
    p.add_argument("--checkpoint-dir", type=Path, default=_env_path("EZPZ_CHECKPOINT_DIR"),
                   help="rank 0 writes a checkpoint here every --checkpoint-every steps; a restarted attempt resumes "
                        "from the newest complete one (env EZPZ_CHECKPOINT_DIR)")
    p.add_argument("--checkpoint-every", type=_positive, default=_env_positive("EZPZ_CHECKPOINT_EVERY", 5),
                   help="steps between checkpoints (env EZPZ_CHECKPOINT_EVERY; default 5)")
    p.add_argument("--final-weights", type=Path, help="rank 0 saves the final model weights here (torch.save)")
    # TESTING ONLY: simulate a crash so tests can check resume; never set these in a real run.
    p.add_argument("--test-fail-at-step", type=int, default=0, help="TESTING ONLY: after this step (and its "
                   "checkpoint), --test-fail-rank kills itself with SIGKILL, on attempt 0 only")
    p.add_argument("--test-fail-rank", type=int, default=0, help="TESTING ONLY: the rank --test-fail-at-step kills")
    p.add_argument("--test-hang-at-step", type=int, default=0, help="TESTING ONLY: after this step, --test-fail-rank "
                   "stops answering (SIGSTOP to itself), on attempt 0 only")
    p.add_argument("--test-step-sleep", type=float, default=0.0, help="TESTING ONLY: every rank sleeps this many "
                   "seconds in every step (a slower step)")
    return p.parse_args(argv)


def _positive(raw: str, name: str = "--checkpoint-every") -> int:
    from ezpz.errors import ConfigError

    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(name=name, value=raw, expected="a whole number of steps, 1 or more", fix=f"set {name} to e.g. 5")
    return value


def _env_positive(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return _positive(raw, name) if raw else default


def _env_path(name: str) -> Path | None:
    raw = os.environ.get(name, "").strip()
    return Path(raw) if raw else None


def _unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def _settle_buckets(model: nn.Module, rt: Runtime, args: argparse.Namespace) -> None:
    """One zero-loss backward right after DDP is built, so every real step reduces in the same bucket layout.

    DDP rebuilds its gradient buckets after the first backward. Without this, the
    first step of a resumed attempt would reduce in the initial layout while the
    uninterrupted run reduced that step in the rebuilt one; with 3 or more ranks
    gloo's ring then sums some elements in another order ((a+b)+c vs a+(b+c)) and
    the weights drift (3.8e-4 after 15 steps, measured). Zero gradients, no
    optimizer step: the weights and every RNG are left as they were.
    """
    x, _ = batch(args.seed, rt.rank, 0, 1, args.seq, args.vocab, rt.device)
    with rt.autocast():
        (model(x).float().sum() * 0.0).backward()
    model.zero_grad(set_to_none=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    rt = ezpz.hooks.setup()
    say = print if rt.is_main else (lambda *a, **k: None)
    say(f"[ezpz] {rt.plan.launch.summary}; device {rt.device} ({rt.vendor}), "
        f"backend {rt.backend}, precision {rt.amp.dtype} (autocast {'on' if rt.amp.autocast else 'off'}): {rt.amp.reason}")
    if args.explain:
        say(rt.explain())

    torch.manual_seed(args.seed)  # same initial weights on every rank
    model: nn.Module = TinyLM(args.vocab, args.dim, args.layers, heads=4, seq=args.seq).to(rt.device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = rt.grad_scaler()
    start_step = 0
    resumed = checkpoint.load_latest(args.checkpoint_dir, is_main=rt.is_main, distributed=rt.distributed)
    if resumed is not None:  # load before DDP wraps the model: DDP broadcasts rank 0's weights at construction
        model.load_state_dict(resumed["model"])
        opt.load_state_dict(resumed["optimizer"])
        scaler.load_state_dict(resumed["scaler"])
        torch.set_rng_state(resumed["torch_rng"])
        start_step = int(resumed["step"])
        say(f"[ezpz] attempt {rt.attempt}: resumed from the step-{start_step} checkpoint in {args.checkpoint_dir}")
    if rt.distributed:
        ids = [rt.device.index] if rt.device.index is not None else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        _settle_buckets(model, rt, args)

    first_loss = last_loss = float("nan")
    t0 = t_interval = time.perf_counter()
    for step in range(start_step + 1, args.steps + 1):
        if args.test_step_sleep:
            time.sleep(args.test_step_sleep)  # TESTING ONLY (--test-step-sleep)
        with rt.range("data"):
            x, y = batch(args.seed, rt.rank, step, args.batch_size, args.seq, args.vocab, rt.device)
        with rt.range("forward"), rt.autocast():
            loss = F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
        with rt.range("backward"):
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
        with rt.range("step"):
            scaler.step(opt)
            scaler.update()
        rt.step()  # the step is over: a lazy device runs its graph here, an eager one only times it
        if step == start_step + 1:
            first_loss = loss.item()
        if step % args.log_every == 0 or step == args.steps:
            rt.synchronize()
            last_loss = loss.item()
            now = time.perf_counter()
            steps = args.log_every if step % args.log_every == 0 else step % args.log_every
            sps = steps / (now - t_interval)
            say(f"[ezpz] step {step:4d}  loss {last_loss:.4f}  {sps:7.1f} steps/s  "
                f"{sps * args.batch_size * args.seq * rt.world_size:9.0f} tokens/s")
            t_interval = now
        if args.checkpoint_dir is not None and rt.is_main and (step % args.checkpoint_every == 0 or rt.preempted):
            checkpoint.save(args.checkpoint_dir, step, {
                "model": _unwrap(model).state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict(),
                "torch_rng": torch.get_rng_state()}, write=rt.save)  # rt.save: torch.save on every device
        if rt.preempted:  # SIGTERM: every rank stops after this step, checkpointed above; teardown() exits 143
            say(f"[ezpz] preempted: stopped after step {step}"
                + (f", checkpoint in {args.checkpoint_dir}" if args.checkpoint_dir is not None else ""), flush=True)
            break
        if step == args.test_fail_at_step and rt.rank == args.test_fail_rank and rt.attempt == 0:
            os.kill(os.getpid(), signal.SIGKILL)  # TESTING ONLY (--test-fail-at-step): a crash nothing can catch
        if step == args.test_hang_at_step and rt.rank == args.test_fail_rank and rt.attempt == 0:
            print(f"[ezpz] TESTING: rank {rt.rank} stops answering after step {step} at {time.time():.3f}",
                  flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)  # TESTING ONLY (--test-hang-at-step): frozen, nothing answers
    rt.synchronize()
    elapsed = time.perf_counter() - t0
    ran = (step if rt.preempted else args.steps) - start_step
    mem = rt.memory_stats()
    report = {
        "device": str(rt.device), "device_type": rt.device_type, "vendor": rt.vendor, "backend": rt.backend,
        "precision": rt.amp.dtype, "autocast": rt.amp.autocast, "world_size": rt.world_size, "num_nodes": rt.num_nodes,
        "steps": args.steps, "start_step": start_step, "attempt": rt.attempt, "first_loss": first_loss, "final_loss": last_loss,
        "steps_per_s": ran / elapsed,
        "samples_per_s": ran * args.batch_size * rt.world_size / elapsed,
        "tokens_per_s": ran * args.batch_size * args.seq * rt.world_size / elapsed,
        "peak_memory": mem, "decisions": rt.explain().to_dict()["decisions"],
    }
    say(f"[ezpz] done: loss {first_loss:.3f} -> {last_loss:.3f} in {elapsed:.1f}s "
        f"({report['samples_per_s']:.0f} samples/s over {rt.world_size} rank(s))")
    if args.report and rt.is_main:
        args.report.write_text(json.dumps(report, indent=2, default=str))
    if args.final_weights and rt.is_main:
        rt.save(_unwrap(model).state_dict(), args.final_weights)
    ezpz.hooks.teardown()
    return report


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # the script's own choice
    main(sys.argv[1:])
