"""A node's Open MPI daemon dying while the job starts, and ``mpiexec`` stopped then: Open MPI names no node (or a
healthy one). ezpz names the node from its own evidence: the ranks' markers, the launcher's connection that ended
first (:mod:`ezpz.launch_drivers.host_channels`); a launcher exit 0 with no rank reported in is ``false_success``
naming the launcher's host. Recorded Open MPI output: tests/fixtures/open_mpi_start_up (README there)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ezpz.failures.rank_markers import Markers
from ezpz.failures.record import FailureRecord
from ezpz.launch_drivers.false_success import judge_markers
from ezpz.launch_drivers.first_failure import first_failure
from ezpz.launch_drivers.host_channels import HostChannels, LostChannel
from ezpz.launch_drivers.log_signatures import LAUNCHER_SIGNATURES
from ezpz.launch_drivers.retry import AttemptFacts, classify, log_hits

RECORDED = Path(__file__).parent / "fixtures" / "open_mpi_start_up"
HOSTS = ("198.18.51.1", "198.18.51.2", "198.18.51.4")  # attempt 1 of the recorded daemon_death run
RANK_HOSTS = dict(enumerate(HOSTS))



def _facts(text: str, status: int, **kw) -> AttemptFacts:
    return AttemptFacts(attempt=1, status=status, hosts=HOSTS, rank_hosts=RANK_HOSTS, progress=False,
                        log_hits=log_hits(text, LAUNCHER_SIGNATURES, HOSTS), first_failure=first_failure(text, HOSTS),
                        **kw)


def test_open_mpi_names_no_failed_node_when_a_daemon_dies_at_start_up():
    text = (RECORDED / "daemon_death.log").read_text()
    v = classify(_facts(text, 137, markers=Markers(started={}, ended={})), spares_left=0, prior_progress=True,
                 attempts_left=3, min_nodes=2)
    assert v.outcome == "unknown" and v.exclude == ()  # the healthy spare Open MPI names (.4) is not blamed


def test_the_connection_that_ended_first_names_the_node():
    text = (RECORDED / "daemon_death.log").read_text()
    lost = LostChannel(host="198.18.51.2", pid=4037, command="/bin/sh agent.sh 198.18.51.2 orted",
                       still_up=("198.18.51.4",), after_s=1.2)
    v = classify(_facts(text, 137, markers=Markers(started={}, ended={}), lost_channel=lost), spares_left=0,
                 prior_progress=True, attempts_left=3, min_nodes=2)
    assert v.outcome == "shrink" and v.exclude == ("198.18.51.2",), v
    assert "connection to host 198.18.51.2" in v.evidence[0] and "198.18.51.4 ran" in v.evidence[0]


def test_the_one_daemon_host_whose_connection_was_never_seen_is_named():
    """Recorded run's miss: the killed daemon's connection started and ended between two looks; the launcher's node
    (.1) has none; the connection to .4 was seen (and ended with the launcher's teardown)."""
    text = (RECORDED / "daemon_death.log").read_text()
    kw = dict(markers=Markers(started={}, ended={}), unseen_hosts=("198.18.51.2",), channels_settled=True)
    v = classify(_facts(text, 137, launcher_here=("198.18.51.1",),
                        channel_note="the launcher's connections to 198.18.51.4 ended with no other host's "
                                     "connection up", **kw),
                 spares_left=0, prior_progress=True, attempts_left=3, min_nodes=2)
    assert v.outcome == "shrink" and v.exclude == ("198.18.51.2",), v
    assert "connection to host 198.18.51.2 was never seen up, while its connections to 198.18.51.4 were" \
        in v.evidence[0] and "runs on 198.18.51.1" in v.evidence[0]
    assert any("launcher ending the job after the failure" in why for _, why in v.rejected), v.rejected
    # the launcher's own node not known: it may be the host with no connection; nothing is named
    v = classify(_facts(text, 137, **kw), spares_left=0, prior_progress=True, attempts_left=3, min_nodes=2)
    assert v.outcome == "unknown" and v.exclude == () and any("not known" in why for _, why in v.rejected)
    # two daemon hosts never seen: too many to tell
    v = classify(_facts(text, 137, launcher_here=("198.18.51.1",), markers=Markers(started={}, ended={}),
                        unseen_hosts=("198.18.51.2", "198.18.51.4")),
                 spares_left=0, prior_progress=True, attempts_left=3, min_nodes=2)
    assert v.outcome == "unknown" and v.exclude == () and any("too many" in why for _, why in v.rejected)
    # the watcher never looked again before the first end (a loaded node): .2's connection may have been up all
    # along, started after its last look (and .4's the failed one, seen early): nothing is named
    v = classify(_facts(text, 137, launcher_here=("198.18.51.1",), **(kw | dict(channels_settled=False))),
                 spares_left=0, prior_progress=True, attempts_left=3, min_nodes=2)
    assert v.outcome == "unknown" and v.exclude == () and any("did not look again" in why for _, why in v.rejected)
    # the connection that was seen ending first outranks an inference from one never seen
    lost = LostChannel(host="198.18.51.4", pid=7, command="ssh 198.18.51.4 orted", still_up=("198.18.51.2",))
    v = classify(_facts(text, 137, launcher_here=("198.18.51.1",), lost_channel=lost, **kw), spares_left=0,
                 prior_progress=True, attempts_left=3, min_nodes=2)
    assert v.exclude == ("198.18.51.4",)


def test_records_outrank_a_lost_connection():
    lost = LostChannel(host="198.18.51.2", pid=1, command="ssh 198.18.51.2 orted", still_up=("198.18.51.4",))
    lost_peer = FailureRecord(attempt=1, rank=0, host="198.18.51.1", kind="lost_peer", first_line="rank 2 gone",
                              missing_ranks=(2,))
    v = classify(_facts("", 1, records=(lost_peer,), lost_channel=lost), spares_left=1)
    assert v.exclude == ("198.18.51.4",)


def test_markers_name_the_one_host_whose_ranks_stopped_reporting():
    both = Markers(started={0: "198.18.51.1", 1: "198.18.51.2", 2: "198.18.51.4"},
                   ended={0: "198.18.51.1", 2: "198.18.51.4"})
    v = classify(_facts("", 137, markers=both), spares_left=1)
    assert v.outcome == "bad_host" and v.exclude == ("198.18.51.2",), v
    assert v.evidence[0].startswith("ezpz's markers: every rank on host 198.18.51.2 (1) started and stopped")
    # a rank on another host neither ended nor recorded: too little to tell; two hosts silent: the same
    for markers in (Markers(started=both.started, ended={0: "198.18.51.1"}),
                    Markers(started=both.started, ended={})):
        v = classify(_facts("", 137, markers=markers), spares_left=1)
        assert v.outcome == "unknown" and v.exclude == () and any(k == "markers" for k, _ in v.rejected), v
    # a rank that recorded (SIGTERMed by the launcher) reported to the end
    term = FailureRecord(attempt=1, rank=2, host="198.18.51.4", kind="signal", first_line="SIGTERM")
    v = classify(_facts("", 137, markers=Markers(started=both.started, ended={0: "198.18.51.1"}), records=(term,)),
                 spares_left=1)
    assert v.exclude == ("198.18.51.2",)


def test_a_stopped_mpiexec_exit_0_is_a_false_success_naming_the_launchers_host():
    text = (RECORDED / "mpiexec_stopped.log").read_text()
    assert first_failure(text, HOSTS) is None  # Open MPI's line names a healthy node (.2), not a failure
    v = judge_markers(Markers(started={}, ended={}), 3, known_ezpz=True, attempts_left=2,
                      rank_hosts=RANK_HOSTS, spares_left=1, launcher_host="vm")
    assert v is not None and v.outcome == "false_success" and v.retry and v.exclude == ()
    assert any("the launcher on vm (where ezpz launch runs) exited 0 having run nothing" in e for e in v.evidence)


def _proc(root: Path, pid: int, ppid: int, argv: list[str], env: dict[str, str] | None = None,
          state: str = "S") -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "stat").write_text(f"{pid} ({Path(argv[0]).name}) {state} {ppid} 0 0\n")
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (d / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in (env or {}).items()))


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    root.mkdir(parents=True)
    _proc(root, 100, 1, ["mpiexec", "-n", "3", "--host", "n1,n2,n3"])
    _proc(root, 101, 100, ["ssh", "-x", "n2", "orted", "-mca", "ess_base_vpid", "1"])
    _proc(root, 102, 100, ["ssh", "-x", "user@n3", "orted"])
    _proc(root, 103, 100, ["python", "train.py", "--master", "n2"], {"OMPI_COMM_WORLD_RANK": "0"})  # a rank
    return root


def test_host_channels_keep_the_connection_that_ended_first(tmp_path):
    root, fdir = _tree(tmp_path), tmp_path / "failures"
    fdir.mkdir()
    watch = HostChannels(100, ("n1", "n2", "n3"), fdir, proc=str(root))
    watch.poll()
    assert watch.lost is None and sorted(h for h, _ in watch._pids.values()) == ["n2", "n3"]  # not the rank
    (root / "101" / "stat").write_text("101 (ssh) Z 100 0 0\n")  # ended, not yet reaped by mpiexec
    watch.poll()
    assert watch.lost is not None and watch.lost.host == "n2" and watch.lost.still_up == ("n3",)


def test_a_loss_after_a_record_or_together_or_after_the_launcher_is_no_cause(tmp_path):
    for case in ("record", "both", "launcher"):
        root, fdir = _tree(tmp_path / case), tmp_path / case / "failures"
        fdir.mkdir()
        watch = HostChannels(100, ("n1", "n2", "n3"), fdir, proc=str(root))
        watch.poll()
        os.rename(root / "101", root / "gone")
        if case == "record":
            (fdir / "rank-1.json").write_text("{}")
        elif case == "both":
            os.rename(root / "102", root / "gone2")
        else:
            (root / "100" / "stat").write_text("100 (mpiexec) Z 1 0 0\n")
        watch.poll()
        assert watch.lost is None and watch.done, case
        assert ("ended together" in watch.note) == (case == "both"), watch.note


def test_a_loss_while_another_hosts_connection_was_never_seen_is_no_cause(tmp_path):
    """Four hosts, the launcher on n1: n4's connection never appears (it ended between two looks); n2's ends
    first, alone, when the launcher tears the job down. n2 is not kept: n4 may have ended first, unseen."""
    root, fdir = _tree(tmp_path), tmp_path / "failures"
    fdir.mkdir()
    watch = HostChannels(100, ("n1", "n2", "n3", "n4"), fdir, here=("n1",), proc=str(root))
    watch.poll()
    assert watch.never_seen() == ("n4",) and watch.remote == ("n2", "n3", "n4")
    os.rename(root / "101", root / "gone")
    watch.poll()
    assert watch.lost is None and watch.done and "n4 was never seen" in watch.note, watch.note
    # the launcher's node not known: one host without a connection may be it, so the loss is kept
    root = _tree(tmp_path / "unknown")
    watch = HostChannels(100, ("n1", "n2", "n3"), fdir, proc=str(root))
    watch.poll()
    os.rename(root / "101", root / "gone")
    watch.poll()
    assert watch.lost is not None and watch.lost.host == "n2" and watch.never_seen() == ("n1",)


def test_settled_says_the_last_look_before_the_first_end_found_every_connection_up_and_none_new(tmp_path):
    """A look that found a new connection, or after one ended, does not settle: a connection never seen may have
    started after it. The first end freezes the answer."""
    root, fdir = _tree(tmp_path), tmp_path / "failures"
    fdir.mkdir()
    watch = HostChannels(100, ("n1", "n2", "n3", "n4"), fdir, here=("n1",), proc=str(root))
    watch.poll()
    assert not watch.settled  # n2 and n3 were new at this look
    watch.poll()
    assert watch.settled  # looked again: both up, none new
    _proc(root, 104, 100, ["ssh", "n4", "orted"])
    watch.poll()
    assert not watch.settled and watch.never_seen() == ()
    os.rename(root / "104", root / "gone")  # n4 ends before another look: the look before it found n4 new
    watch.poll()
    assert not watch.settled and watch.done
    # the healthy host's connection starts after the only look that found the failing one, then both end
    root = tmp_path / "late"
    root.mkdir()
    _proc(root, 100, 1, ["mpiexec"])
    _proc(root, 102, 100, ["ssh", "n3", "orted"])
    watch = HostChannels(100, ("n1", "n2", "n3"), fdir, here=("n1",), proc=str(root))
    watch.poll()
    os.rename(root / "102", root / "gone")
    watch.poll()
    assert watch.never_seen() == ("n2",) and not watch.settled


def test_a_connection_caught_before_it_runs_its_program_is_looked_at_again(tmp_path):
    """A child of the launcher seen between fork and exec has the launcher's command line (naming no host): it is
    looked at again until it runs its own (``ssh n2 orted``), else a connection up all along goes unseen. A rank's
    own children are never connections."""
    root = tmp_path / "proc"
    root.mkdir()
    launcher = ["mpiexec", "-n", "3", "--hostfile", "hosts"]
    _proc(root, 100, 1, launcher)
    _proc(root, 101, 100, launcher)  # forked, not yet exec'd
    _proc(root, 103, 100, ["python", "train.py"], {"OMPI_COMM_WORLD_RANK": "0"})
    _proc(root, 104, 103, ["ssh", "n3", "true"])  # a rank's child: not the launcher's connection
    watch = HostChannels(100, ("n1", "n2", "n3"), None, here=("n1",), proc=str(root))
    watch.poll()
    watch.poll()
    assert watch.never_seen() == ("n2", "n3") and not watch.settled  # a look with a process between fork and exec
    (root / "101" / "cmdline").write_bytes(b"ssh\0-x\0n2\0orted\0")
    watch.poll()
    assert watch.never_seen() == ("n3",) and [h for h, _ in watch._pids.values()] == ["n2"]


@contextmanager
def _stand_in_launcher() -> Iterator[tuple[int, list[int]]]:
    """A launcher with one child per host (``python -c ... HOST``, like ``ssh HOST orted``) for n2 and n3: its pid
    and its children's pids, the children left unreaped when killed (as an ``mpiexec`` busy elsewhere)."""
    script = ("import subprocess, sys, time\n"
              "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', h]) for h in ('n2', 'n3')]\n"
              "print(' '.join(str(k.pid) for k in kids), flush=True)\n"
              "time.sleep(60)\n")
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert launcher.stdout is not None
        yield launcher.pid, [int(p) for p in launcher.stdout.readline().split()]
    finally:
        launcher.kill()
        launcher.wait()


def test_real_connections_their_end_order_from_pidfds(tmp_path):
    """A stand-in launcher's connections to n2 and n3; n2's killed first."""
    with _stand_in_launcher() as (launcher, kids):
        watch = HostChannels(launcher, ("n1", "n2", "n3"), tmp_path)
        for _ in range(100):  # the waiter thread finds them (every 20 ms while some are missing)
            watch.poll()
            if len(watch._pids) == 2:
                break
            time.sleep(0.02)
        assert sorted(h for h, _ in watch._pids.values()) == ["n2", "n3"]
        os.kill(kids[0], signal.SIGKILL)
        time.sleep(0.3)
        os.kill(kids[1], signal.SIGKILL)  # later: the launcher ending the rest
        time.sleep(0.3)
        watch.poll()
        assert watch.lost is not None and watch.lost.host == "n2" and watch.lost.still_up == ("n3",), watch.lost
        assert watch.done and watch._waiter is None or not watch._waiter.is_alive()


def test_the_first_end_is_judged_when_the_launcher_exits_before_a_poll(tmp_path):
    """The waiter saw n2's connection end, then n3's; the launcher exited before any poll: finish() keeps n2."""
    if not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd_open on this platform: the ends' order comes from polls only")
    with _stand_in_launcher() as (launcher, kids):
        watch = HostChannels(launcher, ("n1", "n2", "n3"), tmp_path, here=("n1",))
        for _ in range(250):  # the waiter finds both (no poll: the waiter alone looks, every 20 ms)
            if watch.seen_hosts() == {"n2", "n3"}:
                break
            time.sleep(0.02)
        assert watch.seen_hosts() == {"n2", "n3"}
        os.kill(kids[0], signal.SIGKILL)
        time.sleep(0.3)
        os.kill(kids[1], signal.SIGKILL)
        time.sleep(0.3)
        watch.finish()
        assert watch.lost is not None and watch.lost.host == "n2" and watch.lost.still_up == ("n3",), watch.note
        assert watch.never_seen() == ()
