"""A gloo group that outlives teardown (as a DDP model's does) while a worker still holds a collective.

A backward pass leaves a Python object in every collective it starts (torch.autograd saves its context);
dropping that collective needs the GIL. Here rank 1 joins the last all-reduce late, so rank 0's worker
finishes it late, as a worker descheduled on a loaded machine would, but on every run. With ``destroy`` rank 1
joins once rank 0 is finalizing (held open): the drop comes then and aborts ("terminate called without an
active exception"). With ``teardown`` rank 0 must wait inside teardown, and rank 1 joins after 3 s.

    torchrun --nproc-per-node 2 gloo_kept_past_teardown.py teardown|destroy|raise SIGNAL_FILE

``destroy`` is the control: ``dist.destroy_process_group()`` alone. ``raise``: rank 0 fails and tears down
in ``finally``; rank 1 tears down normally.
"""

import logging
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

import ezpz


FINALIZING = Path(sys.argv[2])  # rank 0 creates it once its interpreter is finalizing


class SlowFinalization:  # holds finalization open without the GIL, as a loaded machine's scheduling can
    def __del__(self):
        if rt.rank == 0:
            FINALIZING.touch()
        time.sleep(2.0)


mode = sys.argv[1]
if mode == "raise":
    logging.basicConfig(level=logging.DEBUG, format="%(message)s")  # the script's choice: show teardown's reason
keep = SlowFinalization()
rt = ezpz.hooks.setup()
group = dist.group.WORLD  # held past teardown, as a DDP model holds it
if mode == "raise":
    dist.all_reduce(torch.ones(4))
    try:
        if rt.rank == 0:
            raise ValueError("rank 0 fails")
    finally:
        t0 = time.monotonic()
        ezpz.hooks.teardown()
        print(f"teardown rank {rt.rank} took {time.monotonic() - t0:.2f} s", flush=True)
    sys.exit(0)  # rank 1; rank 0's ValueError goes on from `finally`
if rt.rank == 1:  # join once rank 0 is finalizing, so its worker finishes after that; with teardown(), rank 0
    # never gets there first (it waits for this collective), and rank 1 joins after 3 s, within teardown's bound
    end = time.monotonic() + (30 if mode == "destroy" else 3)
    while not FINALIZING.exists() and time.monotonic() < end:
        time.sleep(0.01)
torch._C._stash_obj_in_tls("context", object())  # what torch.autograd's backward leaves in each collective
group.allreduce([torch.ones(4)])  # the Work is not kept: the worker that runs it holds the last reference
torch._C._remove_obj_from_tls("context")
if mode == "teardown":
    ezpz.hooks.teardown()
else:
    dist.destroy_process_group()
print(f"finished rank {rt.rank}", flush=True)
