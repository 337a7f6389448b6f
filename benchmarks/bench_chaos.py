"""Chaos soak: the main job on 4 network-namespace nodes (3 active, 1 spare) under ``ezpz launch --auto-retry``.

Seeded random faults, one per run, at a random step after the warm-up, on a random node other than the first
(namespace 0 also runs ``ezpz launch`` and holds rank 0's rendezvous store):

- ``kill``: every process in the node's namespace SIGKILLed;
- ``link``: the node's link cut (``ip link set eth0 down``);
- ``hang``: the node's rank frozen (SIGSTOP);
- ``slow``: the node's rank slowed 3x (SIGSTOP 2/3 of every 0.3 s, until the run ends);
- ``sigterm``: SIGTERM to every rank (a preemption of the ranks; ``ezpz launch`` itself is not signalled).

Per kind: runs, completed (exit 0), final weights equal to the uninterrupted run (max |difference| <= 1e-6),
wrong hosts blamed (excluded but not the faulty node, or any host for slow/sigterm), and the mean time from the
fault to the next step running (a step line two past the step at the fault). Needs root (network namespaces)
and Open MPI. Writes JSON to ``--out``.

    sudo python benchmarks/bench_chaos.py [--faults 25] [--seed 0] [--steps 40] [--kinds kill,link,...] [--out F]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from netns import NetBed, cannot_make_namespaces, net_bed  # noqa: E402
from test_netns_nodes import node_env  # noqa: E402

KINDS = ("kill", "link", "hang", "slow", "sigterm")
TIMEOUT_S = 20
STEP = re.compile(r"\[ezpz\] step\s+(\d+)")


def _ns_pids(bed: NetBed, i: int) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", bed.ns(i)], capture_output=True, text=True, timeout=30).stdout
    return [int(p) for p in out.split()]


def _rank_pids(bed: NetBed, i: int) -> list[int]:
    """The ranks in node ``i``'s namespace: Open MPI's rank variable in their environment (not ``ezpz launch``,
    ``mpiexec`` or ``orted``, whose command lines name the job too)."""
    found = []
    for pid in _ns_pids(bed, i):
        try:
            if b"\0OMPI_COMM_WORLD_RANK=" in b"\0" + Path(f"/proc/{pid}/environ").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _launch(bed: NetBed, tmp: Path, name: str, extra: list[str], hosts: list[str], steps: int) -> subprocess.Popen:
    (tmp / f"{name}.hosts").write_text("".join(h + "\n" for h in hosts))
    agent = tmp / "agent-tmpdir.sh"  # each node its own Open MPI session directory (tests/test_netns_failover.py)
    agent.write_text(f'#!/bin/sh\nhost=$1; shift\nmkdir -p /tmp/ompi-$host\n'
                     f'exec {bed.agent(tmp / "agent.sh")} "$host" "OMPI_MCA_orte_tmpdir_base=/tmp/ompi-$host $*"\n')
    agent.chmod(0o755)
    env = node_env(EZPZ_TIMEOUT=str(TIMEOUT_S), OMPI_MCA_plm_rsh_agent=str(agent), EZPZ_HANG_BUDGET_WARMUP="3",
                   OMPI_MCA_oob_tcp_if_include="198.18.0.0/15", OMPI_MCA_btl_tcp_if_include="198.18.0.0/15")
    argv = [*bed.exec_prefix(0), sys.executable, "-m", "ezpz", "launch", "--launcher", "mpiexec", "--ppn", "1",
            "--hostfile", str(tmp / f"{name}.hosts"), "--retry-delay", "0", "--job-dir", str(tmp / f"{name}-job"),
            *extra, "--", sys.executable, "-m", "ezpz.examples.train", "--steps", str(steps), "--log-every", "1",
            "--checkpoint-every", "5", "--checkpoint-dir", str(tmp / f"{name}-ck"),
            "--final-weights", str(tmp / f"{name}.pt")]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _watch(p: subprocess.Popen, lines: list[tuple[float, str]]) -> threading.Thread:
    t = threading.Thread(target=lambda: [lines.append((time.monotonic(), ln)) for ln in iter(p.stdout.readline, "")],
                         daemon=True)
    t.start()
    return t


def _one(bed: NetBed, tmp: Path, name: str, kind: str, victim: int, at_step: int, steps: int) -> dict:
    import torch

    a = bed.addresses
    lines: list[tuple[float, str]] = []
    p = _launch(bed, tmp, name, ["--auto-retry", "--nhosts", "3", "--spare-nodes", "1", "--timeout", "120"],
                list(a), steps)
    reader = _watch(p, lines)
    fault_at, stop_slow = None, threading.Event()
    t0 = time.monotonic()
    while p.poll() is None and time.monotonic() - t0 < 600:
        if fault_at is None and any((m := STEP.search(ln)) and int(m.group(1)) >= at_step for _, ln in lines):
            fault_at = time.monotonic()
            if kind == "kill":
                _signal(_ns_pids(bed, victim), signal.SIGKILL)
            elif kind == "link":
                subprocess.run([*bed.exec_prefix(victim), "ip", "link", "set", "eth0", "down"], check=True, timeout=30)
            elif kind == "hang":
                _signal(_rank_pids(bed, victim), signal.SIGSTOP)
            elif kind == "slow":
                pids = _rank_pids(bed, victim)

                def duty() -> None:
                    while not stop_slow.is_set():
                        _signal(pids, signal.SIGSTOP)
                        time.sleep(0.2)
                        _signal(pids, signal.SIGCONT)
                        time.sleep(0.1)
                threading.Thread(target=duty, daemon=True).start()
            elif kind == "sigterm":
                _signal([pid for i in range(3) for pid in _rank_pids(bed, i)], signal.SIGTERM)
        time.sleep(0.05)
    stop_slow.set()
    if p.poll() is None:
        p.kill()
    p.wait()
    reader.join(timeout=10)
    for i in range(1, 4):  # strays and frozen ranks; namespace 0 holds ezpz launch, already ended
        _signal(_ns_pids(bed, i), signal.SIGCONT)
        _signal(_ns_pids(bed, i), signal.SIGKILL)
        subprocess.run([*bed.exec_prefix(i), "ip", "link", "set", "eth0", "up"], capture_output=True, timeout=30)
    job = tmp / f"{name}-job"
    verdicts = [json.loads(v.read_text()) for v in sorted(job.glob("attempt-*/verdict.json"),
                                                          key=lambda v: int(v.parent.name.split("-")[1]))]
    excluded = [h for v in verdicts for h in v["verdict"].get("exclude", [])]
    expected = {a[victim]} if kind in ("kill", "link", "hang") else set()
    wrong = sorted(set(excluded) - expected)
    equal, diff = False, None
    if p.returncode == 0 and (tmp / f"{name}.pt").exists():
        w0, w1 = torch.load(tmp / "plain.pt"), torch.load(tmp / f"{name}.pt")
        diff = max((w0[k] - w1[k]).abs().max().item() for k in w0)
        equal = diff <= 1e-6
    fault_step = None
    recover_s = None
    if fault_at is not None:
        before = [int(m.group(1)) for t, ln in lines if t <= fault_at and (m := STEP.search(ln))]
        fault_step = max(before) if before else at_step
        after = [t for t, ln in lines if t > fault_at and (m := STEP.search(ln)) and int(m.group(1)) >= fault_step + 2]
        recover_s = round(after[0] - fault_at, 1) if after else None
    row = {"kind": kind, "victim": a[victim], "at_step": fault_step, "status": p.returncode,
           "completed": p.returncode == 0, "equal": equal, "max_diff": diff, "excluded": excluded, "wrong": wrong,
           "outcomes": [v["verdict"]["outcome"] for v in verdicts], "fault_to_next_step_s": recover_s,
           "wall_s": round(time.monotonic() - t0, 1)}
    if wrong or not equal:  # keep the evidence: each attempt's verdict with the records it read, and the log's tail
        row["verdicts"] = verdicts
        row["log_tail"] = "".join(ln for _, ln in lines)[-6000:]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--out", type=Path, default=Path("chaos.json"))
    ap.add_argument("--kinds", default=",".join(KINDS), help="the fault kinds to draw from, comma-separated")
    args = ap.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not kinds or set(kinds) - set(KINDS):
        sys.exit(f"bench_chaos: --kinds {args.kinds!r}: expected some of {', '.join(KINDS)}")
    why = cannot_make_namespaces()
    if why is not None:
        sys.exit(f"bench_chaos: {why}")
    rng = random.Random(args.seed)
    plan = [(kinds[i % len(kinds)], rng.choice((1, 2)), rng.randint(8, args.steps - 12)) for i in range(args.faults)]
    rng.shuffle(plan)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ezpz-chaos-") as d, net_bed(4, net=60) as bed:
        tmp = Path(d)
        t0 = time.monotonic()
        ref = _launch(bed, tmp, "plain", ["-n", "3"], list(bed.addresses[:3]), args.steps)
        out, _ = ref.communicate(timeout=600)
        if ref.returncode != 0:
            sys.exit(f"bench_chaos: the uninterrupted run failed:\n{out[-3000:]}")
        plain_s = time.monotonic() - t0
        for i, (kind, victim, at) in enumerate(plan):
            row = _one(bed, tmp, f"run{i}", kind, victim, at, args.steps)
            runs.append(row)
            print(json.dumps(row), flush=True)
            args.out.write_text(json.dumps({"seed": args.seed, "steps": args.steps, "plain_s": round(plain_s, 1),
                                            "runs": runs}, indent=1))
    table = {}
    for kind in KINDS:
        rows = [r for r in runs if r["kind"] == kind]
        if not rows:
            continue
        rec = [r["fault_to_next_step_s"] for r in rows if r["fault_to_next_step_s"] is not None]
        table[kind] = {"runs": len(rows), "completed": sum(r["completed"] for r in rows),
                       "equal": sum(r["equal"] for r in rows), "wrong_hosts": sum(len(r["wrong"]) for r in rows),
                       "mean_fault_to_next_step_s": round(sum(rec) / len(rec), 1) if rec else None}
    args.out.write_text(json.dumps({"seed": args.seed, "steps": args.steps, "plain_s": round(plain_s, 1),
                                    "table": table, "runs": runs}, indent=1))
    print(f"uninterrupted run {plain_s:.1f} s")
    print(f"{'kind':8} {'runs':>4} {'completed':>9} {'equal':>5} {'wrong hosts':>11} {'fault->step s':>13}")
    for kind, r in table.items():
        print(f"{kind:8} {r['runs']:4d} {r['completed']:9d} {r['equal']:5d} {r['wrong_hosts']:11d} "
              f"{r['mean_fault_to_next_step_s']!s:>13}")


if __name__ == "__main__":
    main()
