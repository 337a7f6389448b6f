"""A 2-rank job that fails on purpose, for the failure-record tests: ``failing_rank.py MODE``.

hang: rank 1 sleeps forever after setup while rank 0 all-reduces; die: rank 1 exits at once; raise: every rank raises ValueError;
oom: rank 0 raises torch.OutOfMemoryError; ok: a clean all-reduce and teardown.
"""

import sys
import time

import torch
import torch.distributed as dist

import ezpz

mode = sys.argv[1]
rt = ezpz.hooks.setup()
print(f"ATTEMPT {rt.attempt}", flush=True)
print(f"SETUP_DONE {rt.rank} {time.time():.3f}", flush=True)  # wall clock: the failure record's own clock
if mode == "hang" and rt.rank == 1:
    time.sleep(3600)
if mode == "die" and rt.rank == 1:
    import os

    os._exit(3)  # gone without a word: no record of its own
if mode == "raise":
    raise ValueError(f"bad hyperparameter on rank {rt.rank}")
if mode == "oom" and rt.rank == 0:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
t = torch.ones(4)
dist.all_reduce(t)
ezpz.hooks.teardown()
