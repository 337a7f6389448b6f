"""A whole 4-rank torchrun job with ezpz against the same job written with plain torch, same run (target <= 1.10).

The job: import torch, set up (``ezpz.hooks.setup()``, or the hand-written
device/backend lookups plus ``init_process_group``), one ``all_reduce``, tear
down. The figure is the wall time from launching ``torchrun`` to its exit,
what a user waits for; runs alternate between the two so machine noise hits
both alike, and the ratio is the median of per-pair ratios. Bytecode caches
and ezpz's entry-point index exist (one untimed run of each first).
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from _util import CHILD_ENV, machine, median

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
NPROC = 4
EZPZ = """
import torch, ezpz
rt = ezpz.hooks.setup()
x = torch.ones(4, device=rt.device)
torch.distributed.all_reduce(x)
assert x[0].item() == rt.world_size
ezpz.hooks.teardown()
"""
PLAIN = """
import datetime, os, torch, torch.distributed as dist
rank, local_rank, world = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
if torch.cuda.is_available():
    device = torch.device("cuda", local_rank); torch.cuda.set_device(device)
elif hasattr(torch, "xpu") and torch.xpu.is_available():
    device = torch.device("xpu", local_rank); torch.xpu.set_device(device)
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")
backend = "nccl" if device.type == "cuda" and dist.is_nccl_available() else "gloo"
dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=300))
x = torch.ones(4, device=device)
dist.all_reduce(x)
assert x[0].item() == world
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(script: str) -> float:
    """Seconds from launching torchrun to its exit."""
    env = dict(CHILD_ENV, OMP_NUM_THREADS="1")
    cmd = [shutil.which("torchrun") or "torchrun", "--nproc-per-node", str(NPROC), "--master-port", str(free_port()),
           script]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"torchrun failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}")
    return dt


def main() -> None:
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {}
        for name, code in (("ezpz", EZPZ), ("plain", PLAIN)):
            scripts[name] = os.path.join(tmp, f"job_{name}.py")
            with open(scripts[name], "w") as fh:
                fh.write(code)
        time.sleep(2.5)  # the script directory is sys.path[0]: let it settle so ezpz's index is written
        run(scripts["plain"]), run(scripts["ezpz"])  # warm-up: bytecode caches, entry-point index
        ez, plain = [], []
        for i in range(ROUNDS):
            for name in (("ezpz", "plain") if i % 2 else ("plain", "ezpz")):
                (ez if name == "ezpz" else plain).append(run(scripts[name]))
    e, p = median(ez) * 1e3, median(plain) * 1e3
    r = statistics.median(a / b for a, b in zip(ez, plain))
    print(f"{NPROC}-rank torchrun job, launch to exit (import torch, set up, one all_reduce, tear down), "
          f"median of {ROUNDS} alternating pairs")
    print(f"with ezpz.hooks.setup()                          {e:8.1f} ms")
    print(f"plain torch (lookups + init_process_group)       {p:8.1f} ms")
    print(f"ratio (median of per-pair ratios) {r:6.3f}   target <= 1.10   "
          f"(spread of the ezpz/plain pairs: {min(a / b for a, b in zip(ez, plain)):.3f}..{max(a / b for a, b in zip(ez, plain)):.3f})")
    print(f"machine after: {machine()}")


if __name__ == "__main__":
    sys.exit(main())
