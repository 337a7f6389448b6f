"""What one rank of a very large job pays: planning time as the job grows, and file-system metadata operations.

1. ``ezpz.hooks.plan()`` for one rank of a 4,096-rank and a 16,384-rank job on
   2,048 nodes, fed the environment PALS (Aurora-style, PBS node file), Slurm
   (srun step, compressed node list) and Open MPI (``HOSTFILE``) give a rank,
   against ``plan()`` for a single process in the same run. Flat per-rank cost
   means no work grows with the world size (the node list is read once).
2. File-system metadata operations (path lookups: open, stat, access,
   readlink, getdents ... counted by ``strace -f -c -e trace=%file,getdents64``,
   a deterministic figure) that ``import ezpz`` and ``setup()`` add to
   ``import torch``, next to accelerate's ``PartialState()`` when accelerate is
   installed (``pip install -c constraints.txt accelerate``; only this benchmark uses it).

    python benchmarks/bench_scale.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _util import CHILD_ENV

NODES = 2048


def _envs(world: int, rank: int, nodefile: str, hostfile: str) -> dict[str, dict[str, str]]:
    """Recorded variable sets (names and formats as each launcher writes them), scaled to ``world`` ranks."""
    ppn = world // NODES
    node, local = divmod(rank, ppn)
    pals = {  # Aurora: mpiexec (Cray PALS) under PBS, recorded names (PALS_* and PMI_*)
        "PBS_JOBID": "8675309.aurora-pbs-0001", "PBS_NODEFILE": nodefile, "PALS_APID": "2b4d7c9e-aaaa-bbbb-cccc",
        "PALS_RANKID": str(rank), "PALS_LOCAL_RANKID": str(local), "PALS_NODEID": str(node), "PALS_DEPTH": "1",
        "PMI_RANK": str(rank), "PMI_SIZE": str(world), "PMI_LOCAL_RANK": str(local), "PMI_LOCAL_SIZE": str(ppn),
    }
    slurm = {  # srun job step (Slurm's env.c names)
        "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local),
        "SLURM_NODEID": str(node), "SLURM_STEP_NUM_TASKS": str(world), "SLURM_STEP_NUM_NODES": str(NODES),
        "SLURM_STEP_TASKS_PER_NODE": f"{ppn}(x{NODES})", "SLURM_STEP_NODELIST": f"nid[{1:06d}-{NODES:06d}]",
        "SLURM_JOB_NODELIST": f"nid[{1:06d}-{NODES:06d}]", "SLURM_NTASKS": str(world),
    }
    openmpi = {  # Open MPI 4.1 mpiexec (recorded names) with the hostfile passed as HOSTFILE
        "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(world),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(local), "OMPI_COMM_WORLD_LOCAL_SIZE": str(ppn),
        "OMPI_MCA_ess_base_jobid": "3405643777", "PMIX_RANK": str(rank), "PMIX_NAMESPACE": "prterun-x-1234@1",
        "HOSTFILE": hostfile,
    }
    return {"PALS": pals, "Slurm": slurm, "Open MPI": openmpi}


def _plan_once(environ: dict[str, str]) -> tuple[float, object]:
    import ezpz

    t0 = time.perf_counter()
    the_plan, _ = ezpz.hooks.plan(environ=environ)
    return time.perf_counter() - t0, the_plan


def _said(the_plan) -> str:  # type: ignore[no-untyped-def]
    launch = the_plan.launch
    return (f"{launch.launcher} rank {launch.rank}/{launch.world_size} node {launch.node_rank}/{launch.num_nodes} "
            f"rendezvous {launch.master_addr}:{launch.master_port}")


def planning(rounds: int) -> None:
    """Configurations are interleaved round by round, so the machine's load drifts over all alike."""
    with tempfile.TemporaryDirectory() as tmp:
        hosts = [f"x{4000 + i // 64}c{(i // 8) % 8}s{i % 8}b0n0" for i in range(NODES)]
        nodefile = Path(tmp, "nodefile")
        nodefile.write_text("".join(f"{h}.hostmgmt.cm.aurora.alcf.anl.gov\n" for h in hosts))
        hostfile = Path(tmp, "hostfile")
        hostfile.write_text("".join(f"{h} slots=8\n" for h in hosts))
        base_env = {"PATH": os.environ.get("PATH", ""), "EZPZ_DEVICE": "cpu"}
        configs = {("single", 1, 0): base_env}
        for world in (4096, 16384):
            for rank in (0, world - 1):
                for name, env in _envs(world, rank, str(nodefile), str(hostfile)).items():
                    configs[(name, world, rank)] = {**base_env, **env}
        times: dict[tuple[str, int, int], list[float]] = {k: [] for k in configs}
        said = {}
        for key, env in configs.items():  # warm-up: modules imported, plugins loaded
            said[key] = _said(_plan_once(env)[1])
        for _ in range(rounds):
            for key, env in configs.items():
                times[key].append(_plan_once(env)[0] * 1e3)
        best = {k: min(v) for k, v in times.items()}
        single = best[("single", 1, 0)]
        print(f"plan() for one rank: fastest and median of {rounds} interleaved rounds; "
              f"baseline plan() for a single process {single:.2f} ms (median {statistics.median(times[('single', 1, 0)]):.2f})")
        print(f"{'launcher':<9} {'ranks':>6} {'rank':>6} {'min ms':>7} {'median':>7} {'vs single':>9}   decided")
        for name in ("PALS", "Slurm", "Open MPI"):
            for world in (4096, 16384):
                for rank in (0, world - 1):
                    key = (name, world, rank)
                    print(f"{name:<9} {world:>6} {rank:>6} {best[key]:7.2f} {statistics.median(times[key]):7.2f} "
                          f"{best[key] / single:9.2f}   {said[key]}")
            big = statistics.mean(best[(name, 16384, r)] for r in (0, 16383))
            small = statistics.mean(best[(name, 4096, r)] for r in (0, 4095))
            print(f"{name:<9} per-rank cost, 16,384 vs 4,096 ranks (fastest runs): ratio {big / small:.2f}   "
                  "target ~1.0 (flat)")


TRACE = "%file,getdents64"
STEPS = {
    "import torch (baseline)": "import torch",
    "import torch; import ezpz": "import torch; import ezpz",
    "... ; ezpz.hooks.setup()": "import torch; import ezpz; ezpz.hooks.setup()",
    "import torch; accelerate PartialState()": "import torch; from accelerate import PartialState; PartialState()",
}


def _file_ops(code: str) -> int | None:
    """Path-based file-system calls of ``python -c code`` and its children (strace -f -c)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "strace.txt")
        env = {**CHILD_ENV, "EZPZ_DEVICE": "cpu"}
        for k in [k for k in env if k.startswith(("SLURM_", "PBS_", "OMPI_", "PMI_", "PALS_"))]:
            del env[k]
        subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)  # caches warm
        done = subprocess.run(["strace", "-f", "-c", "-e", f"trace={TRACE}", "-o", str(out), sys.executable, "-c",
                               code], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            return None
        m = re.search(r"^\s*100\.00\s+\S+\s+\S+\s+(\d+)", out.read_text(), re.M)
        return int(m.group(1)) if m else None


def metadata() -> None:
    if shutil.which("strace") is None:
        print("metadata operations: strace not installed (apt-get install strace); skipped")
        return
    counts: dict[str, int | None] = {}
    for label, code in STEPS.items():
        if "accelerate" in code:
            try:
                import accelerate  # noqa: F401
            except ImportError:
                print(f"{label:<42} skipped: accelerate not installed (pip install -c constraints.txt accelerate)")
                continue
        counts[label] = _file_ops(code)
    base = counts.get("import torch (baseline)")
    print(f"file-system metadata calls (strace -f -c -e trace={TRACE}), one process")
    for label, n in counts.items():
        added = "" if base is None or n is None or label.endswith("(baseline)") else f"  adds {n - base:6d}"
        print(f"{label:<42} {n if n is not None else 'failed':>7}{added}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--skip-strace", action="store_true")
    args = p.parse_args()
    planning(args.rounds)
    print()
    if not args.skip_strace:
        metadata()


if __name__ == "__main__":
    main()
