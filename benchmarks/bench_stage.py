"""Environment staging on 4 network-namespace nodes: staging time, and the shared environment's file-metadata calls.

Needs root (network and mount namespaces), Open MPI and strace. Each node's processes see a private directory
bind-mounted over the stage dir; the environment (default: the running venv) stays on the host's file system,
shared by every node. Three runs of ``ezpz launch --launcher mpiexec --ppn 2`` on 4 nodes, each rank running
``import torch``:

1. ``--stage-env`` on empty node directories: the staging time, each copy's time, the fan-out's rounds;
2. ``--stage-env`` again under ``strace -f -e trace=%file,%stat``: the nodes hold the copy (no copy);
3. no staging, under the same strace.

For 2 and 3 it counts the traced calls whose path lies in the shared environment, split into the ranks' and the
rest's (``ezpz launch``, the staging agents, mpiexec). It prints the projection for 4,096 nodes from the measured
per-copy time (:func:`ezpz.staging.fanout.projected_seconds`). Quoted in docs/performance.md.

    sudo python benchmarks/bench_stage.py [--env PATH] [--work /tmp/ezpz-bench-stage] [--out result.json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "ezpz_core")]

from netns import cannot_make_namespaces, net_bed  # noqa: E402
from test_netns_nodes import node_env  # noqa: E402
from test_netns_stage import bed_agent  # noqa: E402

from ezpz.staging.fanout import projected_seconds, rounds_needed  # noqa: E402

RANK = "import sys, torch\nprint('RANK prefix=' + sys.prefix, flush=True)\n"


def mounts(work: Path, stage: Path, n: int) -> list[str]:
    out = []
    for i in range(n):
        d = work / "nodes" / f"n{i}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        (d / "node-id").write_text(str(i))
        out.append(f"mount --bind {d} {stage}")
    return out


def launch(bed, work: Path, env_dir: Path, stage: Path, m: list[str], name: str, staged: bool,
           trace: Path | None) -> tuple[subprocess.CompletedProcess[str], float]:
    hosts = work / "hosts"
    hosts.write_text("".join(a + "\n" for a in bed.addresses))
    env = node_env(OMPI_MCA_plm_rsh_agent=str(bed_agent(bed, work, m)),
                   OMPI_MCA_oob_tcp_if_include="198.18.0.0/15", OMPI_MCA_btl_tcp_if_include="198.18.0.0/15")
    argv = [str(env_dir / "bin" / "python"), "-m", "ezpz", "launch", "--launcher", "mpiexec", "--ppn", "2",
            "--hostfile", str(hosts), "--job-dir", str(work / name)]
    if staged:
        argv += ["--stage-env", "--stage-src", str(env_dir), "--stage-dir", str(stage), "--stage-pack-to",
                 str(work / "env.tar"), "--stage-timeout", "1200"]
    argv += ["--", str(env_dir / "bin" / "python"), str(work / "rank.py")]
    if trace is not None:
        shutil.rmtree(trace, ignore_errors=True)
        trace.mkdir()
        argv = ["strace", "-f", "-qq", "-s", "4096", "-e", "trace=%file,%stat,clone,clone3,fork,vfork",
                "-o", str(trace / "t"), *argv]
    line = " ".join(f"'{w}'" for w in argv)
    t0 = time.monotonic()
    proc = subprocess.run([*bed.exec_prefix(0), "/bin/sh", "-c", f"{m[0]} && exec {line}"], env=env,
                          capture_output=True, text=True, timeout=3600)
    return proc, time.monotonic() - t0


def count(trace: Path, env_dir: Path) -> dict[str, object]:
    """Calls naming a path in the shared env, by who made them: the ranks (a process whose python ran rank.py, with
    its threads and children, followed through the clone/fork results in the ``strace -f`` log), the staging agents,
    and the launcher (``ezpz launch`` itself, mpiexec, the launch agents)."""
    needle = (str(env_dir) + "/", f'"{env_dir}"')
    parent: dict[int, int] = {}
    ranks: set[int] = set()
    agents: set[int] = set()
    hits: dict[int, int] = {}
    spawn = re.compile(r"^(\d+)\s+(?:<\.\.\. )?(?:clone3?|fork|vfork)\b.*= (\d+)$")
    for line in (trace / "t").read_text(errors="replace").splitlines():
        pid_text = line.split(maxsplit=1)[0] if line else ""
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if (m := spawn.match(line)) is not None:
            parent[int(m.group(2))] = pid
        if re.search(r'execve\("[^"]*python[^"]*", \["[^"]*", "[^"]*rank\.py"', line):
            ranks.add(pid)
        if re.search(r'execve\("[^"]*", \["[^"]*", "-I", "-S", "[^"]*node_agent\.py"', line):
            agents.add(pid)
        if any(n in line for n in needle):
            hits[pid] = hits.get(pid, 0) + 1

    def in_rank(pid: int) -> bool:
        seen = set()
        while pid not in ranks and pid in parent and pid not in seen:
            seen.add(pid)
            pid = parent[pid]
        return pid in ranks

    def kind(pid: int) -> str:
        if in_rank(pid):
            return "ranks"
        return "agents" if pid in agents or parent.get(pid) in agents else "launcher"

    calls = {"ranks": 0, "agents": 0, "launcher": 0}
    for pid, n in hits.items():
        calls[kind(pid)] += n
    return {"rank_processes": len(ranks), "agent_processes": len(agents), "calls": calls,
            "per_rank": round(calls["ranks"] / max(1, len(ranks))),
            "per_agent": round(calls["agents"] / max(1, len(agents)))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default=sys.prefix, help="the shared environment (default: this venv)")
    p.add_argument("--work", default="/tmp/ezpz-bench-stage")
    p.add_argument("--net", type=int, default=48)
    p.add_argument("--out")
    args = p.parse_args()
    why = cannot_make_namespaces()
    if why or not shutil.which("strace") or not shutil.which("mpiexec"):
        print(f"cannot run: {why or 'strace and mpiexec are needed'}", file=sys.stderr)
        return 2
    env_dir, work = Path(args.env).resolve(), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    (work / "rank.py").write_text(RANK)
    stage = work / "stage"
    stage.mkdir(exist_ok=True)
    m = mounts(work, stage, 4)
    result: dict[str, object] = {"env": str(env_dir)}
    with net_bed(4, net=args.net) as bed:
        first, took = launch(bed, work, env_dir, stage, m, "job-stage", True, None)
        if first.returncode != 0:
            print(first.stderr[-4000:], file=sys.stderr)
            return 1
        log = first.stderr
        copies = [(float(c), float(u), s) for s, c, u in re.findall(
            r"staged from (<shared file system>|\S+): copy ([\d.]+) s, unpack\+relocate ([\d.]+) s", log)]
        staged_s = float(re.search(r"staged in ([\d.]+) s", log).group(1))
        tar = re.search(r"tarball: (.*)", log).group(1)
        print("\n".join(line for line in log.splitlines() if ": stage: " in line))
        peer = [c + u for c, u, s in copies if not s.startswith("<")] or [0.0]
        seed = [c + u for c, u, s in copies if s.startswith("<")] or [0.0]
        result.update(tarball=tar, staging_s=staged_s, launch_with_staging_s=round(took, 1),
                      copies=[{"source": s, "copy_s": c, "unpack_s": u} for c, u, s in copies])
        for nodes in (4, 128, 1024, 4096, 16384):
            result[f"projected_{nodes}_nodes"] = {
                "rounds": rounds_needed(nodes, 8),
                "seconds": round(projected_seconds(nodes, 8, max(peer), max(seed)), 1)}
        again, took2 = launch(bed, work, env_dir, stage, m, "job-staged-strace", True, work / "trace-staged")
        assert again.returncode == 0, again.stderr[-3000:]
        result["second_job_no_copy"] = again.stderr.count("holds the same environment")
        result["with_staging"] = count(work / "trace-staged", env_dir)
        plain, took3 = launch(bed, work, env_dir, stage, m, "job-plain-strace", False, work / "trace-plain")
        assert plain.returncode == 0, plain.stderr[-3000:]
        result["without_staging"] = count(work / "trace-plain", env_dir)
        result["traced_launch_s"] = {"with_staging": round(took2, 1), "without_staging": round(took3, 1)}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
