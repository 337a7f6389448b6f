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
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import ezpz


class TinyLM(nn.Module):
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


def batch(generator: torch.Generator, size: int, seq: int, vocab: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
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
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    rt = ezpz.hooks.setup()
    say = print if rt.is_main else (lambda *a, **k: None)
    say(f"[ezpz] {rt.plan.launch.summary}; device {rt.device} ({rt.vendor}), "
        f"backend {rt.backend}, precision {rt.amp.dtype} (autocast {'on' if rt.amp.autocast else 'off'}): {rt.amp.reason}")
    if args.explain:
        say(rt.explain())

    torch.manual_seed(args.seed)  # same initial weights on every rank
    model: nn.Module = TinyLM(args.vocab, args.dim, args.layers, heads=4, seq=args.seq).to(rt.device)
    if rt.distributed:
        ids = [rt.device.index] if rt.device.index is not None else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = rt.grad_scaler()
    gen = torch.Generator().manual_seed(args.seed + 1000 * rt.rank)

    first_loss = last_loss = float("nan")
    t0 = t_interval = time.perf_counter()
    for step in range(1, args.steps + 1):
        with rt.range("data"):
            x, y = batch(gen, args.batch_size, args.seq, args.vocab, rt.device)
        with rt.range("forward"), rt.autocast():
            loss = F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
        with rt.range("backward"):
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
        with rt.range("step"):
            scaler.step(opt)
            scaler.update()
        if step == 1:
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
    rt.synchronize()
    elapsed = time.perf_counter() - t0
    mem = rt.memory_stats()
    report = {
        "device": str(rt.device), "device_type": rt.device_type, "vendor": rt.vendor, "backend": rt.backend,
        "precision": rt.amp.dtype, "autocast": rt.amp.autocast, "world_size": rt.world_size, "num_nodes": rt.num_nodes,
        "steps": args.steps, "first_loss": first_loss, "final_loss": last_loss,
        "steps_per_s": args.steps / elapsed,
        "samples_per_s": args.steps * args.batch_size * rt.world_size / elapsed,
        "tokens_per_s": args.steps * args.batch_size * args.seq * rt.world_size / elapsed,
        "peak_memory": mem, "decisions": rt.explain().to_dict()["decisions"],
    }
    say(f"[ezpz] done: loss {first_loss:.3f} -> {last_loss:.3f} in {elapsed:.1f}s "
        f"({report['samples_per_s']:.0f} samples/s over {rt.world_size} rank(s))")
    if args.report and rt.is_main:
        args.report.write_text(json.dumps(report, indent=2, default=str))
    ezpz.hooks.teardown()
    return report


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # the script's own choice
    main(sys.argv[1:])
