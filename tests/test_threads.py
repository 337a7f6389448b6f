"""The `threads` decision: intra-op CPU threads per rank (pure policy on recorded core counts, then real runs)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import clean_env, need_tool, rank_rows
from ezpz.startup.threads import ThreadFacts, choose_threads


@pytest.mark.parametrize(("cores", "local", "want"), [
    (2, 2, 1), (2, 4, 1), (64, 8, 8), (104, 12, 8), (8, 3, 2), (52, 6, 8),  # recorded: laptop, Aurora's 2 x 52 ...
])
def test_several_local_ranks_split_the_cores(cores, local, want):
    choice = choose_threads(ThreadFacts(cores=cores, local_world_size=local, torch_threads=cores))
    assert choice.threads == want and choice.set_to == want
    assert f"{cores} core(s) / {local} rank(s)" in choice.reason
    assert any("oversubscribes" in a.reason for a in choice.alternatives)


def test_a_rank_bound_to_some_cores_keeps_torchs_count():
    """Open MPI binds each of 2 ranks to a core: torch already counts the bound cores; no second split."""
    choice = choose_threads(ThreadFacts(cores=2, host_cores=8, local_world_size=4, torch_threads=2))
    assert (choice.threads, choice.set_to) == (2, None)
    assert "bound to 2 of the host's 8 core(s)" in choice.reason


@pytest.mark.parametrize(("load1", "cores", "local", "want"), [
    (12.6, 2, 1, 1),    # recorded on the shared 2-core development host
    (9.0, 8, 1, 1),     # 8 others busy on 8 cores
    (3.0, 8, 1, 8),     # quiet: torch's default stands
    (14.0, 52, 12, 4),  # this job's own 12 ranks do not count as "busy"
])
def test_a_busy_host_gets_one_thread_per_rank(load1, cores, local, want):
    choice = choose_threads(ThreadFacts(cores=cores, local_world_size=local, torch_threads=cores, load1=load1))
    assert choice.threads == want
    assert ("host busy" in choice.reason) == (want == 1)


def test_one_rank_keeps_torchs_default():
    choice = choose_threads(ThreadFacts(cores=16, local_world_size=1, torch_threads=16))
    assert (choice.threads, choice.set_to) == (16, None)


@pytest.mark.parametrize("var", ["OMP_NUM_THREADS", "MKL_NUM_THREADS"])
def test_a_thread_variable_wins(var):
    choice = choose_threads(ThreadFacts(cores=64, local_world_size=4, torch_threads=3, set_vars=((var, "3"),)))
    assert (choice.threads, choice.set_to) == (3, None)
    assert f"{var}=3 set by the user" in choice.reason
    assert choice.alternatives and "16 thread(s)" in choice.alternatives[0].name


def test_torchruns_own_omp_default_is_named():
    facts = ThreadFacts(cores=64, local_world_size=4, torch_threads=1, set_vars=(("OMP_NUM_THREADS", "1"),),
                        launcher="torchrun")
    assert "or torchrun" in choose_threads(facts).reason


def test_set_num_threads_before_setup_is_respected():
    choice = choose_threads(ThreadFacts(cores=64, local_world_size=4, torch_threads=24))
    assert (choice.threads, choice.set_to) == (24, None)
    assert "torch.set_num_threads(24) was called" in choice.reason


def test_a_count_already_within_the_share_is_left_alone():
    """Recorded: under Open MPI (--bind-to none) torch starts with 1 thread on a 2-core host."""
    choice = choose_threads(ThreadFacts(cores=2, host_cores=2, local_world_size=2, torch_threads=1))
    assert (choice.threads, choice.set_to) == (1, None)
    assert "within this rank's share (2 core(s) / 2 rank(s) on this host = 1)" in choice.reason


def test_a_count_ezpz_set_earlier_is_not_taken_for_the_users():
    choice = choose_threads(ThreadFacts(cores=64, local_world_size=4, torch_threads=16, set_by_ezpz=16))
    assert choice.set_to == 16 and "set_num_threads" not in choice.reason.split("(")[0]


CHECK = r"""
import json, sys, torch
pre = sys.argv[1]
if pre != "none":
    torch.set_num_threads(int(pre))
import ezpz
rt = ezpz.hooks.setup()
d = {x.topic: x for x in rt.explain().decisions}["threads"]
print(json.dumps({"rank": rt.rank, "threads": torch.get_num_threads(), "decided": d.chosen, "reason": d.reason}))
ezpz.hooks.teardown()
"""


@pytest.mark.launcher
@pytest.mark.parametrize("pre", ["none", "user"])
def test_two_ranks_under_mpiexec_apply_the_decision(tmp_path, pre):
    """Whatever this host's core count, each rank runs the count its `threads` decision names."""
    mpiexec = need_tool("mpiexec")
    from ezpz.probes.cpu import physical_cores

    user = physical_cores() + 1  # never torch's default here, so it reads as the user's choice
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    env = {k: v for k, v in clean_env(EZPZ_DEVICE="cpu", EZPZ_TIMEOUT="120").items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}  # scripts/test.sh exports OMP_NUM_THREADS=1
    proc = subprocess.run(
        [mpiexec, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", "2", sys.executable, str(script),
         "none" if pre == "none" else str(user)],
        env=env, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rank_rows(proc.stdout)
    assert len(rows) == 2
    for r in rows:
        assert r["decided"] == f"{r['threads']} intra-op thread(s)", r
        if pre == "user":
            assert r["threads"] == user and f"torch.set_num_threads({user})" in r["reason"]
        else:
            assert "rank(s) on this host" in r["reason"]
            assert 1 <= r["threads"] <= max(1, physical_cores() // 2)


def test_doctor_shows_the_threads_decision():
    proc = subprocess.run([sys.executable, "-m", "ezpz", "doctor", "--json"], capture_output=True, text=True,
                          env=clean_env(EZPZ_DEVICE="cpu", OMP_NUM_THREADS="3"), timeout=120)
    report = json.loads(proc.stdout)
    (threads,) = [d for d in report["decisions"] if d["topic"] == "threads"]
    assert "OMP_NUM_THREADS=3 set by the user" in threads["reason"]


# Recorded /proc/cpuinfo blocks (fields trimmed): two sockets with hyperthreads, and an aarch64 kernel without ids.
TWO_SOCKETS_HT = "".join(f"processor\t: {cpu}\nmodel name\t: Xeon\nphysical id\t: {cpu // 4 % 2}\nsiblings\t: 4\n"
                         f"core id\t\t: {cpu % 2}\ncpu cores\t: 2\n\n" for cpu in range(8))
AARCH64 = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n\nprocessor\t: 1\nBogoMIPS\t: 50.00\n\n"


def test_cpu_topology_comes_from_one_read_of_cpuinfo():
    from ezpz.probes.cpu import cpuinfo_topology, host_cores

    topo = cpuinfo_topology(TWO_SOCKETS_HT)
    assert topo is not None and sorted(topo) == list(range(8)) and topo[5] == ("1", "1")
    assert host_cores(topo) == 4  # 8 logical CPUs: 2 sockets x 2 cores, each with two hyperthreads
    assert cpuinfo_topology(AARCH64) is None  # no ids: the probe reads sysfs instead
    assert cpuinfo_topology("") is None


def test_thread_facts_read_cpuinfo_once_and_no_sysfs_file_per_cpu(monkeypatch):
    """Counting reads, not timing: the per-CPU sysfs files cost four opens per CPU on every setup()."""
    import builtins

    from ezpz.probes import cpu
    from ezpz.startup.threads import probe_thread_facts

    if cpu.read_topology() is None:
        pytest.skip("this host's /proc/cpuinfo names no physical/core ids (the probe reads sysfs here)")
    opened: list[str] = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: (opened.append(str(f)), real_open(f, *a, **k))[1])
    monkeypatch.setattr(cpu, "_sysfs_core", lambda c: pytest.fail(f"read sysfs for cpu {c}"))
    probe_thread_facts({}, 1)
    assert opened.count("/proc/cpuinfo") == 1
