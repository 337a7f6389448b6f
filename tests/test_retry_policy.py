"""The ``--auto-retry`` policy (pure): each row of the termination matrix from recorded attempt facts."""

from __future__ import annotations

import pytest

from ezpz.errors import ConfigError
from ezpz.failures.record import FailureRecord
from ezpz.launch_drivers.first_failure import first_failure
from ezpz.launch_drivers.allocation_split import HostPool, active_hosts_wanted, split_allocation
from ezpz.launch_drivers.log_signatures import LAUNCHER_SIGNATURES
from ezpz.launch_drivers.retry import AttemptFacts, backoff_s, classify, log_hits, records_name_hosts

HOSTS = ("n0", "n1", "n2")
RANK_HOSTS = {0: "n0", 1: "n0", 2: "n1", 3: "n1", 4: "n2", 5: "n2"}  # 2 ranks per host


def rec(rank: int, kind: str, line: str = "boom", **kw) -> FailureRecord:
    return FailureRecord(rank=rank, host="same-uts-name", attempt=0, kind=kind, first_line=line, **kw)


def facts(status: int = 1, **kw) -> AttemptFacts:
    return AttemptFacts(attempt=0, status=status, hosts=HOSTS, rank_hosts=RANK_HOSTS, **kw)


def test_success_stops():
    v = classify(facts(0), spares_left=1)
    assert (v.outcome, v.retry, v.exclude) == ("success", False, ())


def test_code_error_on_every_rank_stops_and_blames_no_host():
    records = [rec(r, "code_error", f"bad hyperparameter on rank {r}", exception_type="ValueError") for r in range(6)]
    v = classify(facts(records=records), spares_left=1)
    assert (v.outcome, v.retry, v.exclude) == ("code_error", False, ())
    assert "every rank" in v.reason and "ValueError" in v.reason and "no spare" in v.reason


def test_code_error_on_one_rank_wins_over_peers_that_lost_it():
    records = [rec(0, "code_error", exception_type="KeyError"), rec(2, "lost_peer", missing_ranks=[0])]
    v = classify(facts(records=records), spares_left=1)
    assert (v.outcome, v.exclude) == ("code_error", ())
    assert any(name == "bad_host" for name, _ in v.rejected)


def test_lost_peer_records_naming_missing_ranks_blame_their_host():
    records = [rec(0, "lost_peer", missing_ranks=[4, 5]), rec(2, "lost_peer", missing_ranks=[4])]
    v = classify(facts(records=records), spares_left=1)
    assert (v.outcome, v.retry, v.exclude) == ("bad_host", True, ("n2",))
    assert any("rank 0 (host n0) recorded lost_peer: rank 4 (host n2)" in e for e in v.evidence)


def test_a_host_whose_ranks_all_vanished_is_blamed():
    # n1's ranks were killed without a word; the others recorded losing a peer (which, they could not tell)
    records = [rec(0, "lost_peer"), rec(1, "signal"), rec(4, "lost_peer"), rec(5, "signal")]
    v = classify(facts(status=137, records=records), spares_left=1)
    assert (v.outcome, v.exclude) == ("bad_host", ("n1",))
    assert "vanished without a record" in v.evidence[0]


def test_too_few_spares_is_exhausted():
    v = classify(facts(records=[rec(0, "lost_peer", missing_ranks=[2, 4])]), spares_left=1)
    assert (v.outcome, v.retry, v.exclude) == ("exhausted", False, ("n1", "n2"))


def test_missing_hosts_outside_the_allocation_are_ignored():
    v = classify(facts(records=[rec(0, "timeout", missing_hosts=["elsewhere"])]), spares_left=1, prior_progress=True)
    assert v.outcome == "unknown" and v.exclude == ()


def test_walltime_stops():
    v = classify(facts(143), spares_left=2)
    assert (v.outcome, v.retry) == ("walltime", False)


def test_a_pals_143_after_a_rank_exited_nonzero_is_retried_not_walltime():
    """PALS ends every rank with SIGTERM when one exits nonzero: status 143, like the walltime (original ezpz
    v0.22.2, Sunspot job 12471663). Code-0 lines are every rank's clean exit and leave it the walltime."""
    cascade = "n2: rank 4 died from signal 15\nn2: rank 5 died from signal 15\n"
    failed = log_hits("n1: rank 3 exited with code 1\n" + cascade, LAUNCHER_SIGNATURES, HOSTS)
    v = classify(facts(143, log_hits=failed), spares_left=2)
    assert (v.outcome, v.retry, v.exclude) == ("unknown", True, ())  # the same hosts again: no host is blamed
    assert any(name == "walltime" and "rank 3 exited with code 1" in why for name, why in v.rejected)
    clean = log_hits("n1: rank 3 exited with code 0\n" + cascade, LAUNCHER_SIGNATURES, HOSTS)
    assert clean == () and classify(facts(143, log_hits=clean), spares_left=2).outcome == "walltime"


def test_no_progress_twice_is_stuck():
    assert classify(facts(1, progress=False), spares_left=2, prior_progress=False).outcome == "stuck"
    assert classify(facts(1, progress=False), spares_left=2, prior_progress=None).outcome == "unknown"


def test_a_hang_nobody_explains_runs_again_on_the_same_hosts():
    v = classify(facts(124, timed_out=True, alive_ranks=(3,)), spares_left=1, prior_progress=True)
    assert (v.outcome, v.retry, v.exclude) == ("hang", True, ())
    assert "3 (host n1)" in v.reason


def test_interrupt_stops_at_once():
    assert classify(facts(130, interrupted=True), spares_left=1).outcome == "interrupted"


def test_the_limit_stops():
    v = classify(facts(1, records=[rec(0, "lost_peer", missing_ranks=[4])]), spares_left=1, attempts_left=0)
    assert (v.outcome, v.retry) == ("limit", False)


def test_log_fallback_gloo_peer_address_and_pals_shepherd():
    hosts = ("198.18.0.1", "198.18.0.2", "198.18.0.3")
    text = ("[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
            "Connection closed by peer [198.18.0.3]:41781\n"
            "198.18.0.2.hsn.cm.example: shepherd died from signal 9\nrank 0 step 3\n")
    hits = log_hits(text, LAUNCHER_SIGNATURES, hosts)
    assert [h.hosts for h in hits] == [("198.18.0.3",), ("198.18.0.2",)]
    f = AttemptFacts(attempt=0, status=1, hosts=hosts, rank_hosts={0: hosts[0], 1: hosts[1], 2: hosts[2]},
                     log_hits=hits)
    v = classify(f, spares_left=2)
    assert (v.outcome, v.exclude) == ("bad_host", ("198.18.0.3", "198.18.0.2"))
    assert all(e.startswith("log: ") for e in v.evidence)
    # 198.18.0.1 must not match inside 198.18.0.10
    assert log_hits("Connection closed by peer [198.18.0.10]:1", LAUNCHER_SIGNATURES, hosts)[0].hosts == ()


def test_records_outrank_the_log():
    hits = log_hits("Connection closed by peer [n0]:1", LAUNCHER_SIGNATURES, HOSTS)
    v = classify(facts(records=[rec(0, "lost_peer", missing_ranks=[4])], log_hits=hits), spares_left=1)
    assert v.exclude == ("n2",) and any(name == "log" for name, _ in v.rejected)


def test_backoff_doubles_and_is_capped():
    assert [backoff_s(k, 5.0) for k in (1, 2, 3, 4, 5)] == [5.0, 10.0, 20.0, 40.0, 60.0]
    assert backoff_s(3, 0.0) == 0.0


def test_split_and_swap():
    pool = split_allocation(["a", "b", "c", "d", "a"], active=3, spares=None, source="--hostfile h")
    assert pool == HostPool(active=("a", "b", "c"), spares=("d",))
    after, swaps = pool.swap(["b"])
    assert after.active == ("a", "d", "c") and after.spares == () and after.excluded == ("b",)
    assert swaps == (("b", "d"),)
    with pytest.raises(ValueError):
        after.swap(["a"])


def test_split_rejects_what_does_not_fit():
    with pytest.raises(ConfigError) as e:
        split_allocation(["a", "b"], active=3, spares=None, source="PBS_NODEFILE=/x")
    assert e.value.name == "--nhosts" and "PBS_NODEFILE" in e.value.expected
    with pytest.raises(ConfigError) as e:
        split_allocation(["a", "b", "c"], active=2, spares=2, source="s")
    assert e.value.name == "--spare-nodes"
    assert active_hosts_wanted(None, 6, 2) == 3 and active_hosts_wanted(2, None, None) == 2
    with pytest.raises(ConfigError):
        active_hosts_wanted(None, None, None)


def test_a_peer_the_launcher_stopped_first_is_not_blamed():
    # recorded on 4 namespace nodes: rank 1 (n1) SIGKILLed; mpiexec SIGTERMed rank 0 (n0, record at t=10.25),
    # then rank 2 (n2) lost rank 0 (t=10.31). The dead node is n1, whose rank left no record.
    rank_hosts = {0: "n0", 1: "n1", 2: "n2"}
    records = [rec(0, "signal", "SIGTERM: the rank was told to stop", time=10.25),
               rec(2, "lost_peer", "Connection closed by peer [n0]:39313", missing_ranks=[0], missing_hosts=["n0"],
                   exception_type="RuntimeError", time=10.31)]
    f = AttemptFacts(attempt=0, status=137, hosts=HOSTS, rank_hosts=rank_hosts, records=records)
    v = classify(f, spares_left=1)
    assert (v.outcome, v.exclude) == ("bad_host", ("n1",)), v
    assert any("had recorded a stop signal first" in why for _, why in v.rejected)
    # the same records in the other order (rank 0 lost first, stopped later) do blame n0
    early = [records[0].__class__(**{**records[0].to_dict(), "time": 10.40}), records[1]]
    assert classify(AttemptFacts(attempt=0, status=137, hosts=HOSTS, rank_hosts=rank_hosts, records=early),
                    spares_left=1).exclude == ("n0",)


# Recorded in CI (network-namespace nodes, Open MPI 4.1): rank 1 (198.18.42.2) SIGKILLed itself after step 5;
# mpiexec ended rank 0 before it could write a record, and rank 2 then recorded losing rank 0.
CI_HOSTS = ("198.18.42.1", "198.18.42.2", "198.18.42.3")
CI_LOG = ("[ezpz] step    5  loss 2.1275     20.2 steps/s      62112 tokens/s\n"
          "Primary job  terminated normally, but 1 process returned\n"
          "a non-zero exit code. Per user-direction, the job has been aborted.\n"
          "[rank2]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
          "Connection closed by peer [198.18.42.1]:55177. This is typically caused by a remote worker crashing.\n"
          "mpiexec noticed that process rank 1 with PID 21155 on node 198.18.42.2 exited on signal 9 (Killed).\n")
CI_RECORD = FailureRecord(
    rank=2, host="198.18.42.3", attempt=0, kind="lost_peer", exception_type="RuntimeError",
    first_line="[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
               "[198.18.42.1]:55177.", missing_ranks=[0], missing_hosts=["198.18.42.1"], time=1795486956.86)


def ci_facts(log: str, records=(CI_RECORD,)) -> AttemptFacts:
    return AttemptFacts(attempt=0, status=137, hosts=CI_HOSTS, rank_hosts=dict(enumerate(CI_HOSTS)), records=records,
                        log_hits=log_hits(log, LAUNCHER_SIGNATURES, CI_HOSTS), first_failure=first_failure(log, CI_HOSTS))


def test_the_launchers_first_failure_outranks_an_accusation_against_a_host_its_abort_silenced():
    v = classify(ci_facts(CI_LOG), spares_left=1)
    assert (v.outcome, v.exclude) == ("bad_host", ("198.18.42.2",)), v
    assert v.evidence[0].startswith("launcher: ") and "rank 1 with PID 21155" in v.evidence[0]
    assert any("the launcher reports rank 1 on host 198.18.42.2 failed first" in why for _, why in v.rejected), v


def test_without_the_launchers_line_the_accusation_decides():
    # the same records, the Open MPI line cut from the log: the only evidence left is rank 2's accusation
    log = CI_LOG.rsplit("mpiexec noticed", 1)[0]
    assert first_failure(log, CI_HOSTS) is None
    assert classify(ci_facts(log), spares_left=1).exclude == ("198.18.42.1",)


def test_the_launchers_first_failure_does_not_override_records_from_its_host():
    # rank 1 wrote a record (it lived long enough to say what it lost): the records decide, the line is set aside
    lost = FailureRecord(rank=1, host="198.18.42.2", attempt=0, kind="lost_peer", first_line="x", missing_ranks=[0])
    v = classify(ci_facts(CI_LOG, records=(CI_RECORD, lost)), spares_left=1)
    assert v.exclude == ("198.18.42.1",), v
    assert any(name == "launcher" and "its ranks wrote records" in why for name, why in v.rejected)


def test_first_failure_reads_only_active_hosts_and_their_qualified_names():
    line = "mpiexec noticed that process rank 3 with PID 9 on node nid0002.hsn.example exited on signal 9 (Killed)."
    found = first_failure(line, ("nid0001", "nid0002"))
    assert (found.host, found.rank) == ("nid0002", 3)
    assert first_failure(line, ("nid0001", "nid000")) is None
    assert first_failure(line.replace(".hsn.example", ""), ("nid0002.hsn.example",)).host == "nid0002.hsn.example"
    assert first_failure(line.replace("signal 9", "signal 6"), ("nid0002",)) is None  # an abort is the code's
    lost = "  Remote daemon: [[9244,0],2] on node 198.18.41.2\n"
    found = first_failure(lost, ("198.18.41.1", "198.18.41.2"))
    assert (found.host, found.rank) == ("198.18.41.2", None)
    assert first_failure(lost, ("198.18.41.20",)) is None


def test_open_mpi_first_failure_line_names_the_node():
    line = "mpiexec noticed that process rank 1 with PID 7349 on node 198.18.40.2 exited on signal 9 (Killed)."
    hits = log_hits(line, LAUNCHER_SIGNATURES, ("198.18.40.1", "198.18.40.2"))
    assert hits[0].hosts == ("198.18.40.2",) and hits[0].blames_host


def test_a_cut_off_host_is_the_one_most_hosts_name():
    # n1's link is down: ranks on n0 and n2 miss rank 1; rank 1 (which can still write here) misses everyone
    rank_hosts = {0: "n0", 1: "n1", 2: "n2"}
    records = [rec(0, "timeout", missing_ranks=[1]), rec(2, "timeout", missing_ranks=[1]),
               rec(1, "timeout", missing_ranks=[0, 2])]
    v = classify(AttemptFacts(attempt=0, status=1, hosts=HOSTS, rank_hosts=rank_hosts, records=records),
                 spares_left=1)
    assert (v.outcome, v.exclude) == ("bad_host", ("n1",)), v
    assert sum("named by ranks on 1 host(s) only" in why for _, why in v.rejected) == 2


def test_open_mpi_lost_daemon_line_names_the_node():
    text = ("ORTE has lost communication with a remote daemon.\n\n  HNP daemon   : [[9244,0],0] on node 198.18.41.1\n"
            "  Remote daemon: [[9244,0],2] on node 198.18.41.2\n")
    hits = log_hits(text, LAUNCHER_SIGNATURES, ("198.18.41.1", "198.18.41.2"))
    assert [h.hosts for h in hits] == [("198.18.41.2",)]


def test_marked_processes_without_proc_find_nothing(tmp_path):
    from ezpz.launch_drivers.marked import marked_processes

    assert list(marked_processes(proc=str(tmp_path / "no-proc"))) == []


def test_a_hang_roll_call_naming_a_rank_blames_its_host():
    records = [rec(0, "hang", "rank(s) 2 stopped answering", missing_ranks=[2], step=41,
                   budget="10 s: 10 x p99 0.2 s = 2 s, raised to the floor")]
    v = classify(facts(records=records), spares_left=1, prior_progress=True)
    assert v.outcome == "bad_host" and v.exclude == (RANK_HOSTS[2],), v
    assert any("recorded hang" in e for e in v.evidence)


def test_a_preempted_attempt_blames_no_host_and_stops_when_ezpz_launch_was_signalled_too():
    records = [rec(0, "preempted", "SIGTERM: every rank stops after step 22", step=22),
               rec(2, "preempted", "SIGTERM: every rank stops after step 22", step=22)]
    v = classify(facts(status=143, records=records, interrupted=True), spares_left=1, prior_progress=True)
    assert v.outcome == "preempted" and not v.retry and v.exclude == () and "after step 22" in v.reason, v
    again = classify(facts(status=143, records=records), spares_left=1, prior_progress=True)
    assert again.outcome == "preempted" and again.retry and again.exclude == (), again


def test_a_rank_the_launcher_sigtermed_before_a_peer_lost_it_is_not_blamed():
    """Open MPI SIGTERMs the survivors when a node's daemon dies: the preempted rank's peer losing it is a
    consequence; the host whose ranks all vanished is the one to exclude."""
    records = [rec(0, "preempted", "SIGTERM: stopping at the next step boundary", step=6, time=100.0),
               rec(1, "preempted", "SIGTERM: stopping at the next step boundary", step=6, time=100.0),
               rec(2, "lost_peer", "Connection closed by peer", missing_ranks=[0], time=101.0),
               rec(3, "lost_peer", "Connection closed by peer", missing_ranks=[0], time=101.0)]
    v = classify(facts(status=9, records=records), spares_left=1, prior_progress=True)
    assert v.outcome == "bad_host" and v.exclude == ("n2",), v
    assert records_name_hosts(records, RANK_HOSTS, HOSTS) == ("n2",)


def test_up_hosts_that_only_accuse_each_other_yield_to_the_host_that_left_no_record():
    # chaos soak, seed 0 (a node's processes SIGKILLed at step 22): the launcher's abort reached the two survivors
    # mid roll call, so each recorded losing the other; rank 0 also named the killed rank. No host is named most.
    rank_hosts = {0: "n0", 1: "n1", 2: "n2"}
    records = [rec(0, "lost_peer", missing_ranks=[1, 2]), rec(1, "lost_peer", missing_ranks=[0])]
    v = classify(AttemptFacts(attempt=0, status=9, hosts=HOSTS, rank_hosts=rank_hosts, records=records),
                 spares_left=1)
    assert (v.outcome, v.exclude) == ("bad_host", ("n2",)), v
    assert sum("is named only by host(s) it names in turn" in why for _, why in v.rejected) == 2, v.rejected


def test_mutual_accusations_yield_to_the_launchers_first_failure():
    rank_hosts = {0: "n0", 1: "n1", 2: "n2"}
    records = [rec(0, "lost_peer", missing_ranks=[1]), rec(1, "lost_peer", missing_ranks=[0])]
    log = "mpiexec noticed that process rank 2 with PID 77 on node n2 exited on signal 9 (Killed).\n"
    v = classify(AttemptFacts(attempt=0, status=9, hosts=HOSTS, rank_hosts=rank_hosts, records=records,
                              first_failure=first_failure(log, HOSTS)), spares_left=1)
    assert (v.outcome, v.exclude) == ("bad_host", ("n2",)), v


def test_mutual_accusations_alone_still_blame_both():
    # nothing else is named: no silent host, no launcher line, so the accusations stand (too few spares: exhausted)
    rank_hosts = {0: "n0", 1: "n1", 2: "n2"}
    records = [rec(0, "lost_peer", missing_ranks=[1]), rec(1, "lost_peer", missing_ranks=[0]), rec(2, "signal")]
    v = classify(AttemptFacts(attempt=0, status=1, hosts=HOSTS, rank_hosts=rank_hosts, records=records),
                 spares_left=1)
    assert (v.outcome, set(v.exclude)) == ("exhausted", {"n0", "n1"}), v


def test_a_cut_off_host_among_four_is_still_the_one_most_hosts_name_when_another_left_no_record():
    # n1 cut off names everyone; n0 and n2 name n1; n3's ranks were ended by the abort before writing
    hosts = ("n0", "n1", "n2", "n3")
    rank_hosts = {0: "n0", 1: "n1", 2: "n2", 3: "n3"}
    records = [rec(0, "timeout", missing_ranks=[1]), rec(2, "timeout", missing_ranks=[1]),
               rec(1, "timeout", missing_ranks=[0, 2, 3])]
    v = classify(AttemptFacts(attempt=0, status=1, hosts=hosts, rank_hosts=rank_hosts, records=records),
                 spares_left=1)
    assert (v.outcome, v.exclude) == ("bad_host", ("n1",)), v


# Recorded on an NVIDIA H200 host without ssh (2026-11-27, ../shared/hardware/nvidia-h200-2026-11-27/
# core-suite-on-a-gpu-host.log, test_auto_retry_stops_after_one_attempt_on_a_code_error): mpiexec exited 243
# before any rank started, and --auto-retry ran the same hosts again as an "unknown" failure.
OPENMPI_NO_RSH_AGENT_LOG = """\
--------------------------------------------------------------------------
The value of the MCA parameter "plm_rsh_agent" was set to a path
that could not be found:

  plm_rsh_agent: ssh : rsh

Please either unset the parameter, or check that the path is correct
--------------------------------------------------------------------------
[vm:05995] [[INVALID],INVALID] FORCE-TERMINATE AT Not found:-13 - error ../../../../../../orte/mca/plm/rsh/plm_rsh_component.c(335)
"""


def test_open_mpi_without_an_rsh_agent_is_a_launcher_config_error_that_stops_naming_the_fix():
    hits = log_hits(OPENMPI_NO_RSH_AGENT_LOG, LAUNCHER_SIGNATURES, HOSTS)
    assert [h.kind for h in hits] == ["launcher_config"] and not hits[0].blames_host
    assert "plm_rsh_agent" in hits[0].line
    v = classify(facts(243, log_hits=hits, progress=False), spares_left=1, prior_progress=None)
    assert (v.outcome, v.retry, v.exclude) == ("launcher_config", False, ())
    assert "status 243" in v.reason
    assert "openssh-client" in v.reason and "OMPI_MCA_plm_rsh_agent=" in v.reason  # the fix, named
    assert {name for name, _ in v.rejected} == {"unknown", "bad_host"}


def test_without_the_signature_the_same_text_is_retried_on_the_same_hosts():
    """The control: what --auto-retry did on the H200 before the signature (the test above can fail)."""
    others = [s for s in LAUNCHER_SIGNATURES if s.kind != "launcher_config"]
    v = classify(facts(243, log_hits=log_hits(OPENMPI_NO_RSH_AGENT_LOG, others, HOSTS)), spares_left=1)
    assert (v.outcome, v.retry, v.exclude) == ("unknown", True, ())


def test_a_rank_recording_launcher_config_stops_too():
    v = classify(facts(1, records=[rec(0, "launcher_config", "the launcher could not start")]), spares_left=1)
    assert (v.outcome, v.retry) == ("launcher_config", False)


def test_a_log_line_blames_the_host_its_signature_points_at_not_every_host_it_names():
    """Seen in the chaos soak (a node killed, the survivors' roll call disturbed by the launcher's abort): a rank's
    echoed record names its own host and a missing peer's, and gloo's error inside it names the dead one."""
    hosts = ("198.18.46.1", "198.18.46.2", "198.18.46.3")
    line = ("[rank2]: rank_failed kind=lost_peer host=198.18.46.3 attempt=0 missing='rank(s) 0 on 198.18.46.1 did not "
            "arrive' error='[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
            "[198.18.46.2]:17802. This is typically caused by a remote worker crashing.'")
    hits = log_hits(line, LAUNCHER_SIGNATURES, hosts)
    assert [h.hosts for h in hits] == [("198.18.46.2",)]
    v = classify(AttemptFacts(attempt=0, status=1, hosts=hosts, log_hits=hits), spares_left=1)
    assert (v.outcome, v.exclude) == ("bad_host", ("198.18.46.2",))
    pals = log_hits("x1000c0s0b0n0: shepherd died from signal 9", LAUNCHER_SIGNATURES, ("x1000c0s0b0n0",))
    assert pals[0].hosts == ("x1000c0s0b0n0",)  # no host inside the match: the line's hosts count
