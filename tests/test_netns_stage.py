"""``ezpz launch --stage-env`` on 4 network-namespace nodes, each with its own node-local stage directory.

Each node's processes see a private directory bind-mounted over the stage dir (``ip netns exec`` gives every
command its own mount namespace; the launch agent mounts the node's directory there first), and the environment
lives on the host's file system, shared by all. One node's stage dir is read-only: staging it fails, is retried,
and the node is left out, named; with ``--min-nodes 3`` the ranks run on the other three, with ``sys.prefix`` in
their node-local copy. A second job reuses the tarball and the staged copies (no copy). Skipped, with the reason,
where network namespaces cannot be made. The strace counts of file-metadata calls are ``benchmarks/bench_stage.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import need_tool
from netns import NetBed, cannot_make_namespaces, net_bed
from test_netns_nodes import node_env

_WHY_NOT = cannot_make_namespaces()
pytestmark = [pytest.mark.launcher, pytest.mark.netns, pytest.mark.xdist_group("netns"),
              pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or "")]
BROKEN = 2  # the node whose stage dir is read-only
RANK = """import json, os, sys
print("ROW " + json.dumps({"rank": int(os.environ["OMPI_COMM_WORLD_RANK"]), "prefix": sys.prefix,
                           "node": open(os.path.join(sys.argv[1], "node-id")).read(),
                           "inductor": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}), flush=True)
"""


def node_mounts(tmp: Path, stage: Path, n: int) -> list[str]:
    """Per node, the shell words that bind its private directory over ``stage`` (read-only on BROKEN)."""
    out = []
    for i in range(n):
        d = tmp / "nodes" / f"n{i}"
        d.mkdir(parents=True)
        (d / "node-id").write_text(str(i))
        ro = f" && mount -o remount,bind,ro {stage}" if i == BROKEN else ""
        out.append(f"mount --bind {d} {stage}{ro}")
    return out


def bed_agent(bed: NetBed, tmp: Path, mounts: list[str]) -> Path:
    """Open MPI's launch agent: enter the node's namespace, mount its stage dir, own session directory."""
    cases = "\n".join(f"  {a}) ns={bed.ns(i)}; m='{mounts[i]}' ;;" for i, a in enumerate(bed.addresses))
    path = tmp / "agent.sh"
    path.write_text(f"#!/bin/sh\nhost=$1; shift\ncase $host in\n{cases}\n  *) exit 255 ;;\nesac\n"
                    'mkdir -p /tmp/ompi-$host\n'
                    'exec ip netns exec "$ns" /bin/sh -c "$m && OMPI_MCA_orte_tmpdir_base=/tmp/ompi-$host $*"\n')
    path.chmod(0o755)
    return path


def launch(bed: NetBed, tmp: Path, env_dir: Path, stage: Path, mounts: list[str], name: str,
           extra: list[str]) -> subprocess.CompletedProcess[str]:
    hosts = tmp / "hosts"
    (tmp / "rank.py").write_text(RANK)
    hosts.write_text("".join(a + "\n" for a in bed.addresses))
    env = node_env(OMPI_MCA_plm_rsh_agent=str(bed_agent(bed, tmp, mounts)),
                   OMPI_MCA_oob_tcp_if_include="198.18.0.0/15", OMPI_MCA_btl_tcp_if_include="198.18.0.0/15")
    ezpz = [sys.executable, "-m", "ezpz", "launch", "--launcher", "mpiexec", "--ppn", "2", "--hostfile", str(hosts),
            "--job-dir", str(tmp / name), "--stage-env", "--stage-src", str(env_dir), "--stage-dir", str(stage),
            "--stage-retries", "1", "--stage-timeout", "60", *extra,
            "--", str(env_dir / "bin" / "python"), str(tmp / "rank.py"), str(stage)]
    line = " ".join(f"'{w}'" for w in ezpz)
    return subprocess.run([*bed.exec_prefix(0), "/bin/sh", "-c", f"{mounts[0]} && exec {line}"], env=env,
                          capture_output=True, text=True, timeout=120)


def rows(out: str) -> list[dict]:
    """The ranks' rows (Open MPI may interleave two ranks' lines)."""
    return sorted((json.loads(m) for m in re.findall(r"ROW (\{[^{}]*\})", out)), key=lambda r: r["rank"])


def test_ranks_run_the_node_local_copy_and_a_node_that_cannot_stage_is_left_out_named(tmp_path):
    need_tool("mpiexec")
    env_dir = tmp_path / "shared" / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    stage = tmp_path / "stage"
    stage.mkdir()
    mounts = node_mounts(tmp_path, stage, 4)
    with net_bed(4, net=47) as bed:
        a = bed.addresses
        first = launch(bed, tmp_path, env_dir, stage, mounts, "job1", ["--min-nodes", "3"])
        second = launch(bed, tmp_path, env_dir, stage, mounts, "job2", ["--min-nodes", "3"])
        stopped = launch(bed, tmp_path, env_dir, stage, mounts, "job3", [])
    err = first.stderr
    print("\n" + "\n".join(line for line in err.splitlines() if "stage" in line))
    assert first.returncode == 0, err[-4000:]
    got = rows(first.stdout)
    assert [r["rank"] for r in got] == list(range(6)), first.stdout
    staged = str(stage / "env")
    assert {r["prefix"] for r in got} == {staged}, got  # the interpreter's prefix is the node-local copy
    assert sorted(r["node"] for r in got) == ["0", "0", "1", "1", "3", "3"], got  # each rank on its node's own dir
    assert {r["inductor"] for r in got} == {f"{stage}/torchinductor"}
    # the broken node: retried, then left out and named, with the path and the fix
    assert f"node {a[BROKEN]}: stage dir {stage} on {a[BROKEN]} is not writable" in err and "retrying" in err, err
    assert f"node {a[BROKEN]} left out: stage dir {stage} on {a[BROKEN]} is not writable" in err, err
    assert "--stage-dir a writable node-local directory" in err and "(after 2 attempt(s))" in err
    assert (tmp_path / "nodes" / "n1" / "env" / "pyvenv.cfg").exists()
    assert not (tmp_path / "nodes" / f"n{BROKEN}" / "env").exists()
    # the second job: the tarball is reused and the three nodes that hold the copy skip it
    assert second.returncode == 0, second.stderr[-4000:]
    assert "tarball: reused" in second.stderr, second.stderr
    for i in (0, 1, 3):
        assert f"node {a[i]}: {staged} holds the same environment" in second.stderr, second.stderr
        assert f"copy to {a[i]} " not in second.stderr
    assert len(rows(second.stdout)) == 6
    # without --min-nodes the job stops before any rank starts, naming the node
    assert stopped.returncode == 1 and not rows(stopped.stdout), stopped.stdout
    assert f"staging stopped the job before any rank started: 1 of 4 node(s) failed to stage ({a[BROKEN]}: " \
        in stopped.stderr, stopped.stderr[-3000:]
