"""Run by tests/test_adopt_live.py under torchrun: a process group exists before ezpz.hooks.setup().

argv[1] is who makes it first: ``user`` (init_process_group from torchrun's variables), ``accelerate``
(``PartialState()``) or ``mismatch`` (a one-rank group per process, so its world size differs from torchrun's 2).
Each rank prints one JSON line; exit status is non-zero on any mismatch.
"""

import json
import os
import sys

import torch
import torch.distributed as dist

import ezpz

mode = sys.argv[1]
if mode == "accelerate":
    from accelerate import PartialState

    state = PartialState(cpu=True)
elif mode == "mismatch":
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
else:
    dist.init_process_group("gloo")

inits = []
real_init = dist.init_process_group
dist.init_process_group = lambda *a, **k: inits.append(k) or real_init(*a, **k)  # a second init would show here
try:
    rt = ezpz.hooks.setup()
except ezpz.errors.EzpzError as err:
    print(json.dumps({"rank": dist.get_rank(), "launcher_rank": int(os.environ["RANK"]),
                      "error": type(err).__name__, "message": str(err)}), flush=True)
    # exit 0 on the refusal asked for: torchrun stops the other rank as soon as one fails, before it could say
    sys.exit(0 if mode == "mismatch" and isinstance(err, ezpz.errors.ProcessGroupMismatchError) else 3)
adopted = next((d for d in rt.explain().decisions if d.topic == "process_group"), None)
value = torch.tensor([float(rt.rank + 1)])
dist.all_reduce(value)
ezpz.hooks.teardown()
after = torch.tensor([10.0 * (dist.get_rank() + 1)])  # the owner's group still works after teardown()
dist.all_reduce(after)
ok = (value.item() == 3.0 and after.item() == 30.0 and not inits and adopted is not None and dist.is_initialized()
      and rt.rank == dist.get_rank() and rt.world_size == 2 and not rt.owns_process_group)
if mode == "accelerate":
    # not state.wait_for_everyone(): it barriers on torch's accelerator device even under cpu=True (accelerate
    # 1.15), so on a host with an accelerator this CPU-only test would depend on that device
    dist.barrier()
    ok = ok and state.num_processes == 2 and state.process_index == rt.rank
print(json.dumps({"rank": rt.rank, "world_size": rt.world_size, "sum": value.item(), "after": after.item(),
                  "second_init": len(inits), "adopted": adopted.chosen if adopted else None,
                  "pg_after_teardown": dist.is_initialized(), "ok": ok}), flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
