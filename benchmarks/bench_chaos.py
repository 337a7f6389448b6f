"""Chaos soak: a sharded-checkpoint job on 4 network-namespace nodes under ``ezpz launch --auto-retry --min-nodes 2``.

Every run starts on 3 active nodes with 1 spare and runs ``tests/scripts/sharded_resume.py`` (checkpoint every 5
steps, resumed at any world size). One seeded fault per run, at a random step after the warm-up, on a random node
other than the first (namespace 0 runs ``ezpz launch``, ``mpiexec`` and rank 0):

- ``kill``: every process in the node's namespace SIGKILLed;
- ``link``: the node's link cut (``ip link set eth0 down``);
- ``hang``: the node's rank frozen (SIGSTOP);
- ``slow``: the node's rank slowed 3x (SIGSTOP 2/3 of every 0.3 s, until the run ends);
- ``sigterm``: SIGTERM to every rank (a preemption of the ranks; ``ezpz launch`` itself is not signalled);
- ``kill_in_restart``: a node killed, then a second one as soon as the failover's next attempt starts;
- ``kill_in_save``: a node's rank dies inside a checkpoint save, after writing its shard (the save never completes);
- ``sigterm_in_restart``: a node killed, then SIGTERM to ``ezpz launch`` as the next attempt starts (it must stop,
  exit 143, naming the first cause);
- ``launcher_slow``: the launcher's own host slow: node 0 (``ezpz launch``, ``mpiexec``, rank 0) capped at a third
  of a CPU for the whole run (a CPU cgroup; SIGSTOP is not used there: Open MPI's ``mpiexec`` forwards the
  SIGCONT to the job, and stopped while it starts its daemons it exits 0 having run nothing);
- ``shrink``: a node killed (the spare replaces it), then another once the next attempt is past its resume step
  (no spare left: the world shrinks from 3 to 2 ranks);
- ``mpiexec_stopped``: Open MPI's ``mpiexec`` SIGSTOPped for 3 s as the first attempt's daemons start (once one is
  running), then SIGCONT: it can exit 0 having run nothing (the job must not be reported a success: the attempt is
  ``false_success`` and runs again; no host is struck, so none may be excluded);
- ``daemon_death``: a node killed, then, as the next attempt's daemons start (before any rank runs there), a
  second node's Open MPI daemon (``orted``) SIGKILLed, and only it.

Every run passes ``--expect-ezpz`` (the job calls ``setup()`` on every rank), so an attempt whose launcher exits 0
with no rank reported in is judged against the ranks' markers.

Per kind: runs, completed (exit 0), false successes (exit 0 while a rank of the last attempt never wrote its
``ended-<rank>`` marker or the log lacks the last step), struck nodes named (excluded by a verdict), stopped naming
the right first cause (``sigterm_in_restart``: exit 143 and
``first cause: attempt 0: bad_host``; any other stop must print a first cause), hangs (a run still going after
``--deadline`` seconds is killed and counted), hosts wrongly blamed (excluded but not a node the fault struck), and
steps lost beyond the last complete checkpoint (an attempt resuming from an older step than the newest checkpoint
reported complete before it). Each run's row also says which evidence named each struck node (``named_by``: the
records, the launcher's line, ezpz's markers, the launcher's connection that ended first or the one never seen).
Needs root (network namespaces) and Open MPI. Writes JSON to ``--out``.

    sudo python benchmarks/bench_chaos.py [--faults 20] [--seed 0] [--steps 25] [--kinds kill,link,...] [--out F]
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
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from netns import NetBed, cannot_make_namespaces, net_bed  # noqa: E402
from netns_launch import SHARDED, clean_nodes, launch_on_bed, ns_pids, signal_pids  # noqa: E402

KINDS = ("kill", "link", "hang", "slow", "sigterm", "kill_in_restart", "kill_in_save", "sigterm_in_restart",
         "launcher_slow", "shrink", "mpiexec_stopped", "daemon_death")
STOPS = {"sigterm_in_restart"}
"""Kinds whose right end is a stop (exit 143), not a completed job."""
TIMEOUT_S = 20
STEP = re.compile(r"\[ezpz\] step\s+(\d+)")
COMPLETE = re.compile(r"\[ezpz\] checkpoint step (\d+) complete")
STARTED = re.compile(r"\[ezpz\] attempt (\d+): world size (\d+); started from step (\d+)")
RUNNING = re.compile(r"ezpz launch: attempt (\d+): running: ")
STOP_MPIEXEC_S = 3.0
"""How long ``mpiexec_stopped`` holds ``mpiexec`` stopped."""


def _named(bed: NetBed, i: int, names: tuple[str, ...]) -> list[int]:
    """The processes in node ``i``'s namespace whose command name is one of ``names``."""
    found = []
    for pid in ns_pids(bed, i):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() in names:
                found.append(pid)
        except OSError:
            continue
    return found


def _daemons_starting(bed: NetBed) -> bool:
    """An Open MPI daemon runs on some node other than the launcher's (the start-up is under way)."""
    return any(_named(bed, i, ("orted", "prted")) for i in range(1, len(bed.addresses)))


def _false_success(status: int | None, text: str, steps: int, job_dir: Path) -> bool:
    """Exit 0 without the job done: the last step missing from the log, or a rank of the last attempt (by its
    verdict's world size) without its ``ended-<rank>`` marker."""
    if status != 0:
        return False
    if not re.search(rf"\[ezpz\] step\s+{steps}\b", text):
        return True
    attempts = sorted(job_dir.glob("attempt-*"), key=lambda d: int(d.name.split("-")[1]))
    if not attempts:
        return True
    try:
        world = int(json.loads((attempts[-1] / "verdict.json").read_text()).get("world_size") or 0)
    except (OSError, ValueError):
        return True
    failures = attempts[-1] / "failures"
    return world < 1 or any(not (failures / f"ended-{r}").exists() for r in range(world))


def _rank_pids(bed: NetBed, i: int, attempt: int | None = None) -> list[int]:
    """The ranks in node ``i``'s namespace (of ``attempt`` if given): Open MPI's rank variable in their environment."""
    found = []
    for pid in ns_pids(bed, i):
        try:
            env = b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if b"\0OMPI_COMM_WORLD_RANK=" in env and (attempt is None or f"\0EZPZ_ATTEMPT={attempt}\0".encode() in env):
            found.append(pid)
    return found


CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")
"""cgroup v1's cpu controller (``cpu.cfs_quota_us``); under cgroup v2 the same is ``cpu.max``."""


class _CpuCap:
    """A CPU cgroup capped at ``fraction`` of one CPU; ``add(pid)`` moves a process in (its children follow)."""

    def __init__(self, name: str, fraction: float) -> None:
        self.v2 = not (CPU_CGROUPS / "tasks").exists()
        root = Path("/sys/fs/cgroup") if self.v2 else CPU_CGROUPS
        self.root, self.dir = root, root / name
        self.dir.mkdir(exist_ok=True)
        if self.v2:
            (self.dir / "cpu.max").write_text(f"{int(100000 * fraction)} 100000\n")
        else:
            (self.dir / "cpu.cfs_period_us").write_text("100000\n")
            (self.dir / "cpu.cfs_quota_us").write_text(f"{int(100000 * fraction)}\n")

    def add(self, pid: int) -> None:
        (self.dir / "cgroup.procs").write_text(f"{pid}\n")

    def remove(self) -> None:
        for _ in range(20):  # move whatever is left back to the root, then remove the group
            try:
                left = (self.dir / "cgroup.procs").read_text().split()
            except OSError:
                return
            for pid in left:
                try:
                    (self.root / "cgroup.procs").write_text(f"{pid}\n")
                except OSError:
                    pass
            try:
                self.dir.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def cannot_cap_cpu() -> str | None:
    """None when a CPU cgroup can be made here (``launcher_slow`` needs one), else why not."""
    try:
        _CpuCap(f"ezpz-chaos-probe-{os.getpid()}", 0.5).remove()
    except OSError as error:
        return f"cannot make a CPU cgroup under /sys/fs/cgroup ({error})"
    return None


def _duty(pids_of: Callable[[], list[int]], stop: threading.Event) -> None:
    """3x slower: stopped 0.2 s of every 0.3 s, the pids re-read each cycle (new attempts, new processes)."""
    def run() -> None:
        while not stop.is_set():
            pids = pids_of()
            signal_pids(pids, signal.SIGSTOP)
            time.sleep(0.2)
            signal_pids(pids, signal.SIGCONT)
            time.sleep(0.1)
    threading.Thread(target=run, daemon=True).start()


def _steps_lost(text: str) -> tuple[int, list[tuple[int, int, int]]]:
    """Steps lost beyond the last complete checkpoint: for each resumed attempt, the newest checkpoint reported
    complete before it minus the step it resumed from (0 when it took the newest)."""
    complete, lost, resumes = 0, 0, []
    for line in text.splitlines():
        if (m := COMPLETE.search(line)) is not None:
            complete = max(complete, int(m.group(1)))
        elif (m := STARTED.search(line)) is not None and int(m.group(1)) > 0:
            resumed = int(m.group(3))
            resumes.append((int(m.group(1)), int(m.group(2)), resumed))
            lost += max(0, complete - resumed)
    return lost, resumes


def _one(bed: NetBed, tmp: Path, name: str, kind: str, victims: tuple[int, int], at_step: int, steps: int,
         deadline_s: float) -> dict:
    a = bed.addresses
    first, second = victims
    job = [SHARDED, "--steps", str(steps), "--checkpoint-every", "5", "--step-sleep", "0.25",
           "--checkpoint-dir", str(tmp / f"{name}-ck")]
    struck: set[str] = set()
    if kind == "kill_in_save":
        at_step = max(10, at_step - at_step % 5)
        job += ["--test-dies-in-save", f"0:{at_step}:{first}"]  # attempt 0 runs nodes 0, 1, 2 as ranks 0, 1, 2
        struck.add(a[first])
    lines: list[tuple[float, str]] = []
    p = launch_on_bed(bed, tmp, name, ["--auto-retry", "--nhosts", "3", "--spare-nodes", "1", "--min-nodes", "2",
                                       "--timeout", "120", "--expect-ezpz"], list(a), job, timeout_s=TIMEOUT_S, merged=True)
    reader = threading.Thread(target=lambda: [lines.append((time.monotonic(), ln)) for ln in iter(p.stdout.readline, "")],
                              daemon=True)
    reader.start()
    fault_at, stage, stop_slow, rank_first = None, 0, threading.Event(), None
    t0 = time.monotonic()
    cap = None
    if kind == "launcher_slow":  # node 0 (ezpz launch, mpiexec, rank 0) gets a third of a CPU for the whole run
        cap = _CpuCap(f"ezpz-chaos-{os.getpid()}-{name}", 1 / 3)
        cap.add(p.pid)
        fault_at = t0
    while p.poll() is None and time.monotonic() - t0 < deadline_s:
        seen = [ln for _, ln in lines]
        if kind == "mpiexec_stopped":
            if stage == 0 and _daemons_starting(bed):
                mpiexec = _named(bed, 0, ("mpiexec", "mpirun", "orterun", "prterun"))
                if mpiexec:
                    stage, fault_at = 2, time.monotonic()
                    signal_pids(mpiexec, signal.SIGSTOP)
                    time.sleep(STOP_MPIEXEC_S)
                    signal_pids(mpiexec, signal.SIGCONT)
            time.sleep(0.02)
            continue
        if stage == 0 and kind != "launcher_slow" and any((m := STEP.search(ln)) and int(m.group(1)) >= at_step
                                                          for ln in seen):
            stage, fault_at = 1, time.monotonic()
            if kind in ("kill", "kill_in_restart", "sigterm_in_restart", "shrink", "daemon_death"):
                struck.add(a[first])
                signal_pids(ns_pids(bed, first), signal.SIGKILL)
            elif kind == "link":
                struck.add(a[first])
                subprocess.run([*bed.exec_prefix(first), "ip", "link", "set", "eth0", "down"], check=True, timeout=30)
            elif kind == "hang":
                struck.add(a[first])
                signal_pids(_rank_pids(bed, first), signal.SIGSTOP)
            elif kind == "slow":
                _duty(lambda: _rank_pids(bed, first), stop_slow)
            elif kind == "sigterm":
                signal_pids([pid for i in range(len(a)) for pid in _rank_pids(bed, i)], signal.SIGTERM)
        elif stage == 0 and kind == "kill_in_save" and any(
                (m := STEP.search(ln)) and int(m.group(1)) >= at_step for ln in seen):
            stage, fault_at = 2, time.monotonic()  # the save of step at_step is under way (the rank dies in it)
        elif stage == 1 and kind in ("kill_in_restart", "sigterm_in_restart") and any(
                (m := RUNNING.search(ln)) and m.group(1) == "1" for ln in seen):
            if kind == "kill_in_restart":  # once attempt 1's rank runs there, before its first step
                if _rank_pids(bed, second, attempt=1) and not any(
                        (m := STARTED.search(ln)) and m.group(1) == "1" for ln in seen):
                    stage = 2
                    struck.add(a[second])
                    signal_pids(ns_pids(bed, second), signal.SIGKILL)
            else:
                stage = 2
                signal_pids([p.pid], signal.SIGTERM)  # the ip-netns-exec'd ezpz launch: same pid
        elif stage == 1 and kind == "daemon_death" and any((m := RUNNING.search(ln)) and m.group(1) == "1"
                                                           for ln in seen):
            daemon = _named(bed, second, ("orted", "prted"))  # attempt 1's daemon there, before its rank runs
            if daemon:
                stage, rank_first = 2, bool(_rank_pids(bed, second, attempt=1))
                struck.add(a[second])
                signal_pids(daemon, signal.SIGKILL)
            else:
                time.sleep(0.01)
                continue
        elif stage == 1 and kind == "shrink":
            starts = [(i, int(m.group(3))) for i, ln in enumerate(seen)
                      if (m := STARTED.search(ln)) and m.group(1) == "1"]
            if starts and any((m := STEP.search(ln)) and int(m.group(1)) >= starts[0][1] + 3
                              for ln in seen[starts[0][0]:]):
                stage = 2
                struck.add(a[second])
                signal_pids(ns_pids(bed, second), signal.SIGKILL)
        time.sleep(0.05)
    hung = p.poll() is None
    stop_slow.set()
    if hung:
        p.kill()
    p.wait()
    reader.join(timeout=10)
    if cap is not None:
        cap.remove()
    clean_nodes(bed)
    text = "".join(ln for _, ln in lines)
    job_dir = tmp / f"{name}-job"
    verdicts = [json.loads(v.read_text()) for v in sorted(job_dir.glob("attempt-*/verdict.json"),
                                                          key=lambda v: int(v.parent.name.split("-")[1]))]
    excluded = [h for v in verdicts for h in v["verdict"].get("exclude", [])]
    wrong = sorted(set(excluded) - struck)
    named = sorted(struck & set(excluded))
    cause = re.search(r"ezpz launch: first cause: (.*)", text)
    if kind in STOPS:
        right_stop = p.returncode == 143 and cause is not None and cause.group(1).startswith("attempt 0: bad_host")
    else:
        right_stop = p.returncode not in (0, None) and not hung and cause is not None
    lost, resumes = _steps_lost(text)
    row = {"kind": kind, "struck": sorted(struck), "at_step": at_step, "status": p.returncode,
           "completed": p.returncode == 0, "stopped_right": right_stop and p.returncode != 0, "hung": hung,
           "excluded": excluded, "wrong": wrong, "named": named, "named_by": _named_by(verdicts, struck),
           "false_success": _false_success(p.returncode, text, steps, job_dir),
           "rank_before_daemon_died": rank_first, "outcomes": [v["verdict"]["outcome"] for v in verdicts],
           "world_sizes": [v.get("world_size") for v in verdicts], "resumes": resumes, "steps_lost": lost,
           "first_cause": cause.group(1)[:300] if cause else None,
           "fault_to_end_s": round(time.monotonic() - fault_at, 1) if fault_at else None,
           "wall_s": round(time.monotonic() - t0, 1)}
    good = ((row["completed"] if kind not in STOPS else row["stopped_right"]) and not wrong and not hung and not lost
            and not row["false_success"])
    if not good or set(struck) - set(named):  # keep the evidence (each attempt's verdict, the log's tail), also
        # when a struck node went unnamed
        row["verdicts"] = [v["verdict"] for v in verdicts]
        row["log_tail"] = text[-6000:]
    return row


EVIDENCE_KINDS = (("was never seen up", "connection_never_seen"),
                  ("the launcher's connection to host", "connection_ended"), ("ezpz's markers", "markers"),
                  ("log: ", "log"), ("launcher: ", "launcher"), ("every rank on host", "vanished"),
                  ("recorded", "records"))
"""How a verdict's evidence line named its host (the first phrase found), for the rows' ``named_by``."""


def _named_by(verdicts: list[dict], struck: set[str]) -> dict[str, str]:
    """For each struck node a verdict excluded: which kind of evidence named it (the first line naming it)."""
    found: dict[str, str] = {}
    for v in verdicts:
        for host in v["verdict"].get("exclude", []):
            line = next((e for e in v["verdict"].get("evidence", []) if host in e), "")
            if host in struck and host not in found:
                found[host] = next((tag for phrase, tag in EVIDENCE_KINDS if phrase in line), "other")
    return found


def _table(runs: list[dict]) -> dict:
    table = {}
    for kind in KINDS:
        rows = [r for r in runs if r["kind"] == kind]
        if rows:
            table[kind] = {"runs": len(rows), "completed": sum(r["completed"] for r in rows),
                           "stopped_right": sum(r["stopped_right"] for r in rows),
                           "hangs": sum(r["hung"] for r in rows), "wrong_hosts": sum(len(r["wrong"]) for r in rows),
                           "steps_lost": sum(r["steps_lost"] for r in rows),
                           "false_successes": sum(r.get("false_success", False) for r in rows),
                           "struck": sum(len(r["struck"]) for r in rows),
                           "named": sum(len(r.get("named", [])) for r in rows),
                           "mean_wall_s": round(sum(r["wall_s"] for r in rows) / len(rows), 1)}
    return table


_COLUMNS = (("runs", 4), ("completed", 9), ("false_successes", 15), ("stopped_right", 13), ("hangs", 5),
            ("wrong_hosts", 11), ("struck", 6), ("named", 5), ("steps_lost", 10))


def print_table(table: dict, title: str) -> None:
    print(title)
    print(f"{'kind':19} " + " ".join(f"{name:>{width}}" for name, width in _COLUMNS) + f" {'mean_s':>6}")
    for kind, r in table.items():
        print(f"{kind:19} " + " ".join(f"{r.get(name, 0):{width}d}" for name, width in _COLUMNS)
              + f" {r['mean_wall_s']:6.1f}")
    print(f"{'all':19} " + " ".join(f"{sum(r.get(name, 0) for r in table.values()):{width}d}"
                                     for name, width in _COLUMNS))


def soak(faults: int, seed: int, steps: int, kinds: tuple[str, ...], net: int = 60, deadline_s: float = 360,
         out: Path | None = None, log=print) -> list[dict]:
    """Run ``faults`` seeded faults (kinds in turn, shuffled) and return one row per run."""
    rng = random.Random(seed)
    plan = []
    for i in range(faults):  # the kinds in turn, from a different one each seed (fewer faults than kinds)
        first, second = rng.sample((1, 2), 2)
        plan.append((kinds[(i + seed * faults) % len(kinds)], (first, second), rng.randint(7, steps - 8)))
    rng.shuffle(plan)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ezpz-chaos-") as d, net_bed(4, net=net) as bed:
        for i, (kind, victims, at) in enumerate(plan):
            # kill_in_restart's second node is the spare (node 3) or a survivor: both run attempt 1
            if kind == "kill_in_restart":
                victims = (victims[0], rng.choice((victims[1], 3)))
            row = _one(bed, Path(d), f"run{i}", kind, victims, at, steps, deadline_s)
            row["seed"] = seed
            runs.append(row)
            log(json.dumps({k: v for k, v in row.items() if k not in ("verdicts", "log_tail")}))
            if out is not None:
                out.write_text(json.dumps({"seed": seed, "steps": steps, "table": _table(runs), "runs": runs},
                                          indent=1))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults", type=int, default=20, help="faults per seed")
    ap.add_argument("--seed", type=int, default=0, help="the first seed")
    ap.add_argument("--seeds", type=int, default=1, help="how many seeds, from --seed on")
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--deadline", type=float, default=360.0, help="a run still going after this long is a hang")
    ap.add_argument("--out", type=Path, default=Path("chaos.json"))
    ap.add_argument("--kinds", default=",".join(KINDS), help="the fault kinds to draw from, comma-separated")
    ap.add_argument("--net", type=int, default=60, help="the test bed's addresses: 198.18.NET.1-4")
    args = ap.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not kinds or set(kinds) - set(KINDS):
        sys.exit(f"bench_chaos: --kinds {args.kinds!r}: expected some of {', '.join(KINDS)}")
    if args.steps < 18:
        sys.exit(f"bench_chaos: --steps {args.steps}: expected 18 or more (faults strike from step 7 to steps - 8)")
    why = cannot_make_namespaces() or ("launcher_slow" in kinds and cannot_cap_cpu()) or None
    if why is not None:
        sys.exit(f"bench_chaos: {why}")
    runs: list[dict] = []
    t0 = time.monotonic()
    for seed in range(args.seed, args.seed + args.seeds):
        runs += soak(args.faults, seed, args.steps, kinds, net=args.net, deadline_s=args.deadline)
        args.out.write_text(json.dumps({"seeds": list(range(args.seed, seed + 1)), "steps": args.steps,
                                        "table": _table(runs), "runs": runs}, indent=1))
    print_table(_table(runs), f"{len(runs)} faults over seeds {args.seed}..{args.seed + args.seeds - 1}, "
                              f"{args.steps} steps each, {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
