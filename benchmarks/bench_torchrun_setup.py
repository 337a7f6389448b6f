"""``ezpz.hooks.setup()`` on 4 ranks under torchrun against a plain ``init_process_group`` (gloo), same run.

Every rank first sleeps until a common wall-clock start time (so the figure is
not how late the last rank's interpreter started, which on a 2-core machine
running 4 ranks dominates everything else), then times its own call; a run's
figure is the slowest rank. Runs alternate between the two so machine noise
hits both alike.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from _util import CHILD_ENV, median

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
START_DELAY = float(os.environ.get("BENCH_START_DELAY", "12"))  # seconds for 4 interpreters to import torch (and ezpz) on 2 cores
NPROC = 4
WAIT = """
late = float(os.environ["BENCH_START_AT"]) - time.time()
if late < 0:
    raise SystemExit(f"rank started {-late:.1f}s after the common start time; raise START_DELAY")
time.sleep(late)
"""
EZPZ = """
import gc, json, os, time, torch, ezpz
gc.collect()  # both variants pay torch's deferred full collection before the timer
""" + WAIT + """
t = time.perf_counter(); rt = ezpz.hooks.setup(); dt = time.perf_counter() - t
print(json.dumps({"rank": rt.rank, "s": dt}))
torch.distributed.barrier()  # no rank tears down while a slower one is still connecting
ezpz.hooks.teardown()
"""
EZPZ_WARM = EZPZ.replace("gc.collect()", "ezpz.hooks.plan()  # loads the decision modules (no process group)\ngc.collect()", 1)
PLAIN = """
import gc, json, os, time, torch, torch.distributed as dist, datetime
gc.collect()
""" + WAIT + """
t = time.perf_counter()
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=300))
dt = time.perf_counter() - t
print(json.dumps({"rank": dist.get_rank(), "s": dt}))
dist.barrier()  # no rank tears down while a slower one is still connecting
dist.destroy_process_group()
"""

#: What a hand-written script does besides init_process_group: the device and backend lookups ezpz replaces.
LOOKUPS = """
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
dtype = torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
"""
PLAIN_LOOKUPS = PLAIN.replace('t = time.perf_counter()\n', 't = time.perf_counter()\n' + LOOKUPS, 1).replace(
    'dist.init_process_group("gloo"', 'dist.init_process_group(backend', 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(code: str) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(code)
    try:
        env = dict(CHILD_ENV, OMP_NUM_THREADS="1", BENCH_START_AT=str(time.time() + START_DELAY))
        proc = subprocess.run(
            [shutil.which("torchrun") or "torchrun", "--nproc-per-node", str(NPROC), "--master-port", str(free_port()), fh.name],
            capture_output=True, text=True, env=env,
        )
        if proc.returncode != 0:
            raise SystemExit(f"torchrun failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}")
        out = proc.stdout
    finally:
        os.unlink(fh.name)
    rows = [json.loads(m) for m in re.findall(r"\{[^{}]*\}", out)]  # ranks' lines may be merged
    assert len(rows) == NPROC, out
    return max(r["s"] for r in rows)


def main() -> None:
    run(PLAIN), run(EZPZ)  # warm-up: bytecode caches, as after any first use
    ezpz_s, warm_s, plain_s, lookups_s = [], [], [], []
    for _ in range(ROUNDS):
        plain_s.append(run(PLAIN))
        lookups_s.append(run(PLAIN_LOOKUPS))
        ezpz_s.append(run(EZPZ))
        warm_s.append(run(EZPZ_WARM))
    e, w, p = median(ezpz_s) * 1e3, median(warm_s) * 1e3, median(plain_s) * 1e3
    q = median(lookups_s) * 1e3
    paired = median([a / b for a, b in zip(ezpz_s, lookups_s)])
    print(f"{NPROC} ranks under torchrun, slowest rank from a common start, median of {ROUNDS} alternating runs")
    print(f"plain init_process_group(gloo)                  {p:8.1f} ms")
    print(f"plain init_process_group + device/backend lookups {q:6.1f} ms")
    print(f"ezpz.hooks.setup(), first call in the process   {e:8.1f} ms   ratio {e / q:6.3f} to plain+lookups "
          f"(paired median {paired:.3f})   target <= 1.1")
    print(f"ezpz.hooks.setup(), decision modules loaded     {w:8.1f} ms   ratio {w / p:6.3f}"
          "   (the difference is the one-time import of ezpz's and the plugins' decision modules)")


if __name__ == "__main__":
    sys.exit(main())
