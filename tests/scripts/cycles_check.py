"""setup() -> all-reduce -> teardown(), CYCLES times in one process (argv: world size, cycles, mode).

mode ``ezpz`` goes through ezpz.hooks; mode ``torch`` is plain torch's own loop
(init_process_group(env:// or tcp://) / destroy_process_group), the baseline.
Prints one JSON line per rank: cycles completed, sums, and the first error.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

world, cycles, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


def torch_layout():
    if "OMPI_COMM_WORLD_RANK" in os.environ:
        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        return rank, f"tcp://127.0.0.1:{os.environ['CYCLES_PORT']}"
    return int(os.environ["RANK"]), "env://"


sums, error, rank = [], None, None
start = time.monotonic()
try:
    for _ in range(cycles):
        if mode == "ezpz":
            import ezpz

            rt = ezpz.hooks.setup()
            rank = rt.rank
        else:
            rank, method = torch_layout()
            dist.init_process_group("gloo", init_method=method, rank=rank, world_size=world,
                                    timeout=__import__("datetime").timedelta(seconds=float(os.environ["EZPZ_TIMEOUT"])))
        value = torch.tensor([float(rank + 1)])
        dist.all_reduce(value)
        sums.append(value.item())
        if mode == "ezpz":
            ezpz.hooks.teardown()
        else:
            dist.destroy_process_group()
except Exception as err:  # reported, not raised: the benchmark counts failures
    error = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
expected = world * (world + 1) / 2
ok = error is None and sums == [expected] * cycles
print(json.dumps({"rank": rank if rank is not None else -1, "sums": sums, "ok": ok, "error": error,
                  "seconds": round(time.monotonic() - start, 2)}), flush=True)
sys.exit(0 if ok else 1)
