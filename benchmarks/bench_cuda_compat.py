"""A training step under ``python -m ezpz.cuda_compat`` against the hand-ported step, paired in one run.

The CUDA-style step (``x.to('cuda')``, ``torch.autocast('cuda', dtype=torch.bfloat16)`` made once,
``torch.amp.GradScaler('cuda')``, a model built with ``.to('cuda')`` whose forward makes
``torch.arange(..., device=idx.device)``) lives in a generated project file, so the mode's scope treats it as
the user's; the ported step is the same code written against ``rt`` (``rt.device``, ``rt.autocast()``,
``rt.grad_scaler()``), run with the mode's redirections taken out. Blocks of steps alternate between the two
(redirections in for one, out for the other) so noise hits both alike; the figure is the median of the
paired per-block ratios (target <= 1.02). The model and optimizer are shared, so both do the same work.

    python benchmarks/bench_cuda_compat.py [--blocks 40] [--steps 10]
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _util import alternating_blocks

PROJECT = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    from torch.nn import functional as F


    class TinyGPT(nn.Module):
        def __init__(self, vocab=128, block=32, width=64, layers=2):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(block, width)
            self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(width, 2, 4 * width, batch_first=True)
                                        for _ in range(layers))
            self.head = nn.Linear(width, vocab)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
            for block in self.blocks:
                x = block(x, is_causal=True, src_mask=nn.Transformer.generate_square_subsequent_mask(
                    idx.size(1), device=idx.device))
            return self.head(x)


    def cuda_setup(model):
        model.to('cuda')
        return torch.autocast('cuda', dtype=torch.bfloat16), torch.amp.GradScaler('cuda', enabled=False)


    def cuda_step(model, opt, ctx, scaler, data):
        x, y = data[0].to('cuda'), data[1].to('cuda')
        with ctx:
            loss = F.cross_entropy(model(x).float().view(-1, 128), y.view(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)


    def ported_step(rt, model, opt, scaler, data):
        x, y = data[0].to(rt.device), data[1].to(rt.device)
        with rt.autocast():
            loss = F.cross_entropy(model(x).float().view(-1, 128), y.view(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
    """)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("EZPZ_PRECISION", "bf16")  # the policy's dtype = the dtype the CUDA step names
    import torch

    import ezpz
    from ezpz.cuda_compat.session import compat_for, redirect

    torch.set_num_threads(1)
    rt = ezpz.hooks.setup()
    project = Path(tempfile.mkdtemp(prefix="bench-cuda-compat-"))
    (project / "cuda_project.py").write_text(PROJECT)
    sys.path.insert(0, str(project))
    mod = importlib.import_module("cuda_project")
    compat = compat_for(rt, [str(project)], precision_asked="auto")  # what Session.start() builds, then puts in place

    def redirections_in() -> None:
        redirect(compat)

    torch.manual_seed(0)
    model = mod.TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = (torch.randint(128, (8, 32)), torch.randint(128, (8, 32)))
    redirections_in()
    ctx, cuda_scaler = mod.cuda_setup(model)
    compat.patches.undo()
    scaler = rt.grad_scaler(enabled=False)

    def block(mode: bool) -> float:
        if mode:
            redirections_in()
        t = time.perf_counter()
        for _ in range(args.steps):
            if mode:
                mod.cuda_step(model, opt, ctx, cuda_scaler, data)
            else:
                mod.ported_step(rt, model, opt, scaler, data)
        rt.synchronize()
        spent = (time.perf_counter() - t) / args.steps
        if mode:
            compat.patches.undo()
        return spent

    modes, ports, ratios = alternating_blocks(lambda: block(True), lambda: block(False), args.blocks)
    sites = [(Path(s.file).name, s.line, call) for s in compat.scope.redirected for (call, _) in s.entries]
    print(f"device {rt.device} ({torch.__version__}), {args.blocks} blocks x {args.steps} steps, wall clock")
    print(f"redirected call sites: {len(sites)}: {sorted({c for _, _, c in sites})}")
    print(f"step under the mode: median {statistics.median(modes) * 1e3:.3f} ms; "
          f"hand-ported: median {statistics.median(ports) * 1e3:.3f} ms")
    print(f"ratio mode/ported (median of paired blocks): {statistics.median(ratios):.4f} (target <= 1.02)")
    print(f"per call, redirections in minus out (median of 5 x 20000 calls): {_per_call(redirections_in, compat, rt)}")


def _per_call(redirections_in, compat, rt) -> str:
    """What a wrapper adds to one call: a factory with a non-CUDA device (the fast path torch's and the
    model's code take) and ``x.to('cuda')`` from the project (frame check cached after the first call)."""
    import torch

    x, dev = torch.zeros(4), rt.device
    code = compile("for _ in range(n): x.to('cuda')", str(compat.scope.root) + "bench_site.py", "exec")

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) / 20000 * 1e9

    def fast() -> None:
        for _ in range(20000):
            torch.arange(4, device=dev)

    def redirected() -> None:
        exec(code, {"x": x, "n": 20000})

    out = {}
    for name, fn, plain in (("torch.arange(device=<chosen>)", fast, fast),
                            ("x.to('cuda') from the project", redirected,
                             lambda: exec(compile("for _ in range(n): x.to(d)", "bench_plain.py", "exec"),
                                          {"x": x, "n": 20000, "d": dev}))):
        deltas = []
        for _ in range(5):
            redirections_in()
            on = timed(fn)
            compat.patches.undo()
            deltas.append(on - timed(plain))
        out[name] = f"{statistics.median(deltas):+.0f} ns"
    return ", ".join(f"{k}: {v}" for k, v in out.items())


if __name__ == "__main__":
    main()
