"""``--min-nodes`` / ``--readmit`` / ``--retries`` that cannot succeed: the pure policy, the pool, the
``EZPZ_WORLD_SHRANK`` variable and what ``explain()`` says of it, and the argument checks (no job is run here;
the runs on network-namespace nodes are in ``test_netns_shrink.py``)."""

from __future__ import annotations

import pytest

from conftest import clean_env
from ezpz.errors import ConfigError
from ezpz.failures.record import FailureRecord
from ezpz.inputs.settings import SetupSettings, WorldShrank, parse_world_shrank
from ezpz.launch_drivers.allocation_split import HostPool
from ezpz.launch_drivers.log_signatures import LAUNCHER_SIGNATURES
from ezpz.launch_drivers.retry import AttemptFacts, classify, log_hits, same_hosts_cannot_succeed
from test_cli_support import ezpz

pytestmark = pytest.mark.one_torch  # launch plumbing: --min-nodes: runs on the pinned torch only (docs/ci.md)

HOSTS = ("n0", "n1", "n2", "n3")
RANK_HOSTS = {i: h for i, h in enumerate(HOSTS)}


def rec(rank: int, kind: str, line: str = "boom", **kw) -> FailureRecord:
    return FailureRecord(rank=rank, host="uts", attempt=0, kind=kind, first_line=line, **kw)


def lost(victim: int) -> AttemptFacts:
    """Every other rank recorded losing ``victim``'s rank; the victim's host left no record."""
    records = [rec(r, "lost_peer", missing_ranks=[victim]) for r in RANK_HOSTS if r != victim]
    return AttemptFacts(attempt=0, status=1, hosts=HOSTS, rank_hosts=RANK_HOSTS, records=records)


def test_without_min_nodes_a_bad_host_with_no_spare_stops_as_before():
    v = classify(lost(2), spares_left=0)
    assert (v.outcome, v.retry, v.exclude) == ("exhausted", False, ("n2",))
    assert "min-nodes" not in v.reason


def test_with_min_nodes_a_bad_host_with_no_spare_shrinks_the_world():
    v = classify(lost(2), spares_left=0, min_nodes=2)
    assert (v.outcome, v.retry, v.exclude) == ("shrink", True, ("n2",))
    assert "3 host(s) instead of 4" in v.reason and "--min-nodes 2" in v.reason
    assert any(name == "exhausted" for name, _ in v.rejected)


def test_below_min_nodes_it_stops_naming_every_host_lost_and_why():
    facts = AttemptFacts(attempt=2, status=1, hosts=("n0", "n3"), rank_hosts={0: "n0", 1: "n3"},
                         records=[rec(0, "lost_peer", missing_ranks=[1])])
    v = classify(facts, spares_left=0, min_nodes=2,
                 lost_before={"n1": "attempt 0: rank 0 lost rank 1", "n2": "attempt 1: rank 0 lost rank 2"})
    assert (v.outcome, v.retry, v.exclude) == ("exhausted", False, ("n3",))
    assert "fewer than --min-nodes 2" in v.reason
    for host, why in (("n1", "attempt 0"), ("n2", "attempt 1"), ("n3", "did not answer")):
        assert host in v.reason and why in v.reason, v.reason


def test_a_spare_is_used_before_the_world_shrinks():
    v = classify(lost(1), spares_left=1, min_nodes=2)
    assert v.outcome == "bad_host"
    pool, swaps, dropped = HostPool(active=HOSTS, spares=("s0",)).shrink(["n1", "n3"], 2)
    assert swaps == (("n1", "s0"),) and dropped == ("n3",)
    assert pool.active == ("n0", "s0", "n2") and pool.spares == () and pool.excluded == ("n1", "n3")


def test_the_pool_never_shrinks_below_min_nodes():
    with pytest.raises(ValueError, match="fewer than 3"):
        HostPool(active=HOSTS).shrink(["n0", "n1"], 3)


def test_an_excluded_host_is_a_spare_again_only_when_readmitted():
    pool, _, _ = HostPool(active=HOSTS).shrink(["n1"], 2)
    assert "n1" not in pool.active + pool.spares
    back = pool.readmit(["n1"])
    assert back.spares == ("n1",) and back.excluded == () and back.active == ("n0", "n2", "n3")
    assert pool.readmit([]).spares == ()


@pytest.mark.parametrize(("log", "why"), [
    ('  File "train.py", line 3\n    def f(:\n          ^\nSyntaxError: invalid syntax\n', "SyntaxError"),
    ("Traceback (most recent call last):\nModuleNotFoundError: No module named 'trainer'\n", "ModuleNotFoundError"),
    ("[1,0]<stderr>:NameError: name 'modle' is not defined\n", "NameError"),
])
def test_retries_stop_on_a_script_that_cannot_run_anywhere(log, why):
    facts = AttemptFacts(attempt=0, status=1, hosts=("n0",), log_hits=log_hits(log, LAUNCHER_SIGNATURES, ("n0",)))
    v = same_hosts_cannot_succeed(facts)
    assert v is not None and v.outcome == "code_error" and not v.retry
    assert why in v.reason and "--retries does not run it again" in v.reason
    assert classify(facts, spares_left=1).outcome == "code_error"  # --auto-retry: no spare spent on it either


def test_retries_stop_on_a_recorded_code_error_and_on_open_mpi_243():
    facts = AttemptFacts(attempt=0, status=1, hosts=("n0",), rank_hosts={0: "n0"},
                         records=[rec(0, "code_error", "name 'x' is not defined", exception_type="NameError")])
    v = same_hosts_cannot_succeed(facts)
    assert v is not None and v.outcome == "code_error" and "NameError" in v.reason
    text = ('An ORTE daemon has unexpectedly failed\nThe value of the MCA parameter "plm_rsh_agent" was set to a '
            'path\nthat could not be found:\n')
    facts = AttemptFacts(attempt=0, status=243, hosts=("n0",), log_hits=log_hits(text, LAUNCHER_SIGNATURES, ("n0",)))
    v = same_hosts_cannot_succeed(facts)
    assert v is not None and v.outcome == "launcher_config" and "openssh-client" in v.reason


@pytest.mark.parametrize("facts", [
    AttemptFacts(attempt=0, status=1, hosts=("n0", "n1"), rank_hosts={0: "n0", 1: "n1"},
                 records=[rec(0, "lost_peer", missing_ranks=[1])]),
    AttemptFacts(attempt=0, status=124, hosts=("n0",), timed_out=True),
    AttemptFacts(attempt=0, status=3, hosts=("n0",),
                 log_hits=log_hits("ValueError: loss is nan\n", LAUNCHER_SIGNATURES, ("n0",))),
])
def test_retries_still_rerun_failures_that_may_pass_next_time(facts):
    assert same_hosts_cannot_succeed(facts) is None


def test_world_shrank_is_parsed_and_explained():
    shrank = parse_world_shrank({"EZPZ_WORLD_SHRANK": "8->4: host nid01 excluded (lost_peer)"})
    assert shrank == WorldShrank(8, 4, "host nid01 excluded (lost_peer)")
    assert parse_world_shrank({}) is None
    assert SetupSettings.resolve({"EZPZ_WORLD_SHRANK": "3->2: host b excluded"}).world_shrank.after == 2


@pytest.mark.parametrize("raw", ["4->8: grew", "4->4: same", "4->0: none", "four->2: x", "8->4", "8->4:   "])
def test_a_bad_world_shrank_names_the_variable_and_the_fix(raw):
    with pytest.raises(ConfigError) as info:
        parse_world_shrank({"EZPZ_WORLD_SHRANK": raw})
    said = str(info.value)
    assert "EZPZ_WORLD_SHRANK" in said and "before > now >= 1" in said and "unset EZPZ_WORLD_SHRANK" in said


@pytest.mark.parametrize(("args", "words"), [
    (["--min-nodes", "2"], ["--min-nodes", "used with --auto-retry", "add --auto-retry"]),
    (["--readmit"], ["--readmit", "used with --auto-retry"]),
    (["--auto-retry", "--nhosts", "2", "--min-nodes", "0"], ["--min-nodes=0", "1 or more", "fix:"]),
    (["--auto-retry", "--nhosts", "2", "--min-nodes", "3"], ["--min-nodes=3", "the 2 active host(s)", "fix:"]),
])
def test_bad_min_nodes_arguments_name_input_value_allowed_and_fix(tmp_path, args, words):
    hosts = tmp_path / "hosts"
    hosts.write_text("h0\nh1\nh2\n")
    proc = ezpz("launch", "--hostfile", str(hosts), "--job-dir", str(tmp_path / "job"), *args, "--",
                "python", "-c", "pass", env=clean_env(EZPZ_DEVICE="cpu"))
    assert proc.returncode == 2, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr
    assert not (tmp_path / "job" / "attempt-0").exists()


def test_explain_says_the_world_shrank_from_what_to_what_and_why():
    code = ("import ezpz; rt = ezpz.hooks.setup(); "
            "print([(d.topic, d.chosen, d.reason) for d in rt.explain().decisions if d.topic == 'world'])")
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                          env=clean_env(EZPZ_DEVICE="cpu", EZPZ_WORLD_SHRANK="6->4: host n2 excluded (lost_peer)"))
    assert proc.returncode == 0, proc.stderr
    assert "('world', 'shrank 6 -> 4 ranks', 'host n2 excluded (lost_peer) (from EZPZ_WORLD_SHRANK" in proc.stdout


FAKE_MPIEXEC = '''#!{py}
"""Stands in for mpiexec: notes each attempt's hosts, then fails the way Open MPI does when it loses a node's
daemon (naming the node) for the attempts in BLAME, else succeeds."""
import json, os, sys
argv = sys.argv[1:]
if argv[:1] == ["--version"]:
    print("mpiexec (OpenRTE) 4.1.4"); sys.exit(0)
hosts = list(dict.fromkeys(open(argv[argv.index("--hostfile") + 1]).read().split()))
attempt = int(os.environ["EZPZ_ATTEMPT"])
with open(os.environ["FAKE_NOTES"], "a") as notes:
    notes.write(json.dumps({{"attempt": attempt, "hosts": hosts, "n": argv[argv.index("-n") + 1],
                            "shrank": os.environ.get("EZPZ_WORLD_SHRANK")}}) + "\\n")
print("step 1", flush=True)
blame = json.loads(os.environ["FAKE_BLAME"]).get(str(attempt))
if blame:
    print(f"Remote daemon: [[1234,0],{{hosts.index(blame)}}] on node {{blame}}", flush=True)
    sys.exit(1)
'''


def _fake_run(tmp_path, blame: dict[int, str], *flags: str):
    import json
    import sys

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mpiexec").write_text(FAKE_MPIEXEC.format(py=sys.executable))
    (bindir / "mpiexec").chmod(0o755)
    (tmp_path / "hosts").write_text("h0\nh1\nh2\n")
    env = clean_env(EZPZ_DEVICE="cpu", FAKE_NOTES=str(tmp_path / "notes"), FAKE_BLAME=json.dumps(blame))
    env["PATH"] = f"{bindir}:{env['PATH']}"
    proc = ezpz("launch", "--launcher", "mpiexec", "--hostfile", str(tmp_path / "hosts"), "--ppn", "2", "--auto-retry",
                "--nhosts", "2", "--spare-nodes", "1", "--min-nodes", "1", "--retry-delay", "0", "--timeout", "60",
                "--job-dir", str(tmp_path / "job"), *flags, "--", "python", "train.py", env=env)
    notes = [json.loads(line) for line in (tmp_path / "notes").read_text().splitlines()]
    return proc, notes


def test_the_launcher_swaps_then_shrinks_then_readmits_with_the_world_named_on_each_attempt(tmp_path):
    proc, notes = _fake_run(tmp_path, {0: "h1", 1: "h2", 2: "h0"}, "--readmit")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [x["hosts"] for x in notes] == [["h0", "h1"], ["h0", "h2"], ["h0"], ["h1"]], notes
    assert [x["n"] for x in notes] == ["4", "4", "2", "2"]
    assert notes[0]["shrank"] is None and notes[1]["shrank"] is None
    for x in notes[2:]:
        assert x["shrank"].startswith("4->2: host h2 excluded (attempt 1: launcher: ") and "--min-nodes 1" in x["shrank"]
    assert "excluding host h1, using spare h2" in proc.stderr
    assert "world shrinks from 2 to 1 host(s) (4 -> 2 ranks, 2 per host): host h2 excluded" in proc.stderr
    assert "--readmit: host(s) h1 sat out an attempt: spare(s) again" in proc.stderr
    assert "excluding host h0, using spare h1" in proc.stderr


def test_without_readmit_an_excluded_host_is_not_taken_again_and_below_k_it_stops_naming_the_hosts_lost(tmp_path):
    proc, notes = _fake_run(tmp_path, {0: "h1", 1: "h2", 2: "h0"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert [x["hosts"] for x in notes] == [["h0", "h1"], ["h0", "h2"], ["h0"]], notes
    stop = [line for line in proc.stderr.splitlines() if "attempt 2: exhausted:" in line]
    assert stop and "fewer than --min-nodes 1" in stop[0], proc.stderr[-3000:]
    for host, when in (("h1", "attempt 0"), ("h2", "attempt 1"), ("h0", "launcher")):
        assert f"{host} ({when}" in stop[0], stop[0]
    assert "ezpz launch: first cause: attempt 0: bad_host: bad host(s) h1" in proc.stderr


def test_one_name_from_flag_to_field() -> None:
    """Every supervision option is the parsed flag of the same name (``--min-nodes`` -> ``min_nodes``), read as is."""
    import attrs

    from ezpz.cli import build_parser
    from ezpz.launch_drivers.supervisor import SupervisionOptions

    args = build_parser().parse_args(["launch", "--auto-retry", "--min-nodes", "2", "--readmit", "--timeout", "7",
                                      "--", "true"])
    options = SupervisionOptions.from_args(args)
    assert options.min_nodes == 2 and options.readmit and options.timeout_s == 7.0 and options.auto_retry
    defaults = SupervisionOptions.from_args(build_parser().parse_args(["launch", "--", "true"]))
    for field in attrs.fields(SupervisionOptions):  # the record's defaults are the parser's
        assert getattr(defaults, field.name) == field.default, field.name
