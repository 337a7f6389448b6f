"""The chaos soak in small, for CI: ``benchmarks/bench_chaos.py`` with a fixed seed and two faults during recovery.

A node killed and a second one killed as the failover's next attempt starts (the job must complete); a node killed and SIGTERM to ``ezpz launch`` as the next attempt starts (it must stop with
143, naming the first cause). Neither may hang, blame a healthy host or lose steps beyond the last complete
checkpoint. The full soak (100+ faults over 5 seeds) is the benchmark, reported in docs/performance.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import need_tool
from netns import cannot_make_namespaces
from test_netns_nodes import node_env

_WHY_NOT = cannot_make_namespaces()
pytestmark = [pytest.mark.launcher, pytest.mark.netns, pytest.mark.xdist_group("netns"),
              pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or "")]
BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_chaos.py"


def test_a_small_fixed_seed_soak_of_faults_during_recovery_completes_or_stops_naming_the_first_cause(tmp_path):
    need_tool("mpiexec")
    out = tmp_path / "chaos.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--faults", "2", "--seed", "7", "--steps", "20", "--net", "46",
                           "--deadline", "200", "--kinds", "kill_in_restart,sigterm_in_restart", "--out", str(out)],
                          env=node_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    print("\n" + proc.stdout[-2000:])
    runs = {r["kind"]: r for r in json.loads(out.read_text())["runs"]}
    assert set(runs) == {"kill_in_restart", "sigterm_in_restart"}
    for kind, r in runs.items():
        assert not r["hung"] and r["wrong"] == [] and r["steps_lost"] == 0, (kind, r)
    both = runs["kill_in_restart"]
    assert both["completed"] and len(both["struck"]) == 2 and both["outcomes"][0] == "bad_host", both
    # the second node is named from the records, or, when its Open MPI daemon died first ("ORTE was unable to
    # reliably start one or more daemons" names no node), from the launcher's connection that ended first; when
    # neither can tell (two connections ended together) the same hosts run again: never a healthy host
    assert both["excluded"][0] in both["struck"] and set(both["excluded"]) <= set(both["struck"]), both
    stop = runs["sigterm_in_restart"]
    assert stop["status"] == 143 and stop["stopped_right"], stop
    assert stop["first_cause"].startswith("attempt 0: bad_host: bad host(s) " + stop["struck"][0]), stop
