"""Run by tests/test_checkpoint_fuzz.py under torchrun, 2 CPU ranks: every hostile checkpoint, loaded by both ranks.

``checkpoint_fuzz.py OUT``: both ranks save two checkpoints of a sharded model (OUT/good, OUT/other,
different values); then, for each case of tests/checkpoint_cases.py (shards named for rank 1), rank 0
damages a copy and both ranks load it into a fresh sharded model and optimizer, catching ``Exception``;
first, both ranks save over a user's directory (OUT/results), which must be refused on both.
Each rank writes OUT/rows-<rank>.json: per case the error's type, whether it is a CheckpointError, its
first line, its cause's type and the seconds the load took.
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checkpoint_cases import build, cases  # noqa: E402

import ezpz  # noqa: E402
from ezpz.errors import CheckpointError  # noqa: E402

OUT = Path(sys.argv[1])
rt = ezpz.hooks.setup()


def trained(kind: str, seed: int):
    model = rt.shard(build(kind, seed))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.randn(3, 4, dtype=next(model.parameters()).dtype)).square().mean().backward()
    opt.step()
    return model, opt


for name, seed in (("good", 0), ("other", 1)):
    model, opt = trained("same", seed)
    rt.save_checkpoint(OUT / name, model=model, optim=opt, step=seed)
rows = []
if rt.rank == 0:  # a user's directory where a save is pointed: refused on both ranks, every file intact
    (OUT / "results" / "sub").mkdir(parents=True)
    (OUT / "results" / "metrics.csv").write_text("step,loss\n")
    (OUT / "results" / "sub" / "log.txt").write_text("a week of runs\n")
rt.barrier()
try:
    rt.save_checkpoint(OUT / "results", model=trained("same", 0)[0], step=1)
    rows.append({"case": "save over a user's directory", "error": None})
except Exception as err:
    rows.append({"case": "save over a user's directory", "error": type(err).__name__,
                 "checkpoint_error": isinstance(err, CheckpointError), "first": str(err).splitlines()[0]})
for n, case in enumerate(cases(rank=rt.world_size - 1)):
    ck = OUT / "cases" / f"case-{n:02d}"
    if rt.rank == 0:
        shutil.copytree(OUT / "good", ck)
        case.damage(ck, OUT / "other", OUT / "outside", OUT / "sentinel")
    rt.barrier()
    if case.needs_non_root and os.geteuid() == 0:
        rows.append({"case": case.name, "skipped": "root reads a chmod 000 file"})
        continue
    model, opt = trained(case.model, 2)
    start = time.monotonic()
    try:
        rt.load_checkpoint(ck, model=model, optim=opt)
        row = {"error": None}
    except Exception as err:  # what a user's script catches
        row = {"error": type(err).__name__, "checkpoint_error": isinstance(err, CheckpointError),
               "first": str(err).splitlines()[0], "cause": type(err.__cause__).__name__}
    rows.append({"case": case.name, "seconds": time.monotonic() - start, **row})
    rt.barrier()
(OUT / f"rows-{rt.rank}.json").write_text(json.dumps(rows))
ezpz.hooks.teardown()
