"""Failure capture: classification, the excepthook and SIGTERM, the signatures hook, and real 2-rank torchrun
failures (a hung rank, a code error, an out-of-memory) leaving records that name what went wrong."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import clean_env
from ezpz.errors import RendezvousError, RendezvousTimeoutError
from ezpz.failures import capture
from ezpz.failures.classify import classify_exception
from ezpz.failures.record import read_failures
from ezpz.failures.signatures import FailureSignature, match_text
from ezpz.primitives.markers import hookimpl
from ezpz.plugin_host.calls import Hooks
from ezpz.plugin_host.host import PluginHost
from ezpz.inputs.settings import PluginSettings

pytestmark = pytest.mark.one_torch  # launch plumbing: failure records of launched jobs: runs on the pinned torch only (docs/ci.md)

HERE = Path(__file__).parent
FAILING = str(HERE / "scripts" / "failing_rank.py")
GLOO_TIMEOUT = "[third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation"


def _sigs() -> list[FailureSignature]:
    from ezpz.builtin.cpu import ezpz_failure_signatures

    return ezpz_failure_signatures()


@pytest.mark.parametrize("exc, kind", [
    (MemoryError(), "oom"),
    (KeyboardInterrupt(), "signal"),
    (RendezvousTimeoutError("ranks 1 never arrived"), "timeout"),
    (RendezvousError("store went away"), "lost_peer"),
    (RuntimeError(GLOO_TIMEOUT), "timeout"),
    (RuntimeError("[pair.cc:534] Connection closed by peer [10.0.0.2]:4242"), "lost_peer"),
    (ValueError("bad hyperparameter"), "code_error"),
])
def test_classification_types_first_then_signatures(exc, kind):
    got = classify_exception(exc, _sigs())
    assert got.kind == kind, got


def test_torch_oom_and_network_errors_by_type():
    import torch
    import torch.distributed as dist

    assert classify_exception(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate")).kind == "oom"
    assert classify_exception(dist.DistNetworkError("whatever text")).kind == "lost_peer"


def test_cause_chain_is_followed_and_type_beats_text():
    try:
        try:
            raise MemoryError("host")
        except MemoryError as inner:
            raise RuntimeError("Timed out waiting 1ms for recv operation") from inner
    except RuntimeError as outer:
        assert classify_exception(outer, _sigs()).kind == "oom"


def test_signature_order_and_line():
    sigs = [FailureSignature(pattern="alpha", kind="lost_peer", reason="first"),
            FailureSignature(pattern="alpha|beta", kind="oom", reason="second")]
    found = match_text("noise\nsaw beta then alpha here\nmore", sigs)
    assert found.signature.reason == "first" and found.line == "saw beta then alpha here"
    assert match_text("nothing", sigs) is None


@pytest.mark.parametrize("bad", [dict(pattern="(", kind="oom"), dict(pattern="x", kind="boom"),
                                 dict(pattern="", kind="oom"), dict(pattern="x" * 501, kind="oom")])
def test_bad_signature_refused(bad):
    with pytest.raises(ValueError):
        FailureSignature(reason="r", **bad)


def test_signatures_hook_collects_and_quarantines_bad_lists():
    class Good:
        @hookimpl
        def ezpz_failure_signatures(self):
            return [FailureSignature(pattern="ACME_LINK_DOWN", kind="lost_peer", reason="acme link", blames_host=True)]

    class Bad:
        @hookimpl
        def ezpz_failure_signatures(self):
            return ["not a signature"]

    host = PluginHost(PluginSettings(allow=frozenset()))
    host.discover()
    assert host.register("acme", Good()) and host.register("broken", Bad())
    sigs = Hooks(host).failure_signatures()
    mine = [s for s in sigs if s.plugin == "acme"]
    assert len(mine) == 1 and mine[0].blames_host
    assert "broken" not in {s.plugin for s in sigs} and host.pm.get_plugin("broken") is None
    assert any(s.plugin == "cpu" for s in sigs)  # the built-in gloo signatures are there too


def test_install_uninstall_restores_hooks(tmp_path):
    before = sys.excepthook, signal.getsignal(signal.SIGTERM)
    capture.install(rank=3, world_size=1, host="h", attempt=2, directory=str(tmp_path))
    try:
        assert sys.excepthook is not before[0]
        record = capture.record_exception(MemoryError("no more"))
        assert record.kind == "oom" and record.attempt == 2
        assert read_failures(tmp_path) == [record]
    finally:
        capture.uninstall()
    assert (sys.excepthook, signal.getsignal(signal.SIGTERM)) == before
    assert capture.record_exception(ValueError()) is None


CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from ezpz.failures import capture
    capture.install(rank=0, world_size=1, host="h", attempt=0, directory=sys.argv[2])
    if sys.argv[1] == "raise":
        raise ValueError("the user's bug with token hf_SECRETSECRET")
    print("ready", flush=True)
    time.sleep(60)
""")


def test_uncaught_exception_and_sigterm_leave_records(tmp_path):
    env = clean_env(HF_TOKEN="hf_SECRETSECRET")
    proc = subprocess.run([sys.executable, "-c", CHILD, "raise", str(tmp_path / "a")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and "ValueError: the user's bug" in proc.stderr  # the traceback still shows
    (rec,) = read_failures(tmp_path / "a")
    assert rec.kind == "code_error" and "hf_SECRETSECRET" not in rec.first_line and rec.exception_type == "ValueError"

    child = subprocess.Popen([sys.executable, "-c", CHILD, "sleep", str(tmp_path / "b")], env=env,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == -signal.SIGTERM  # still dies of the signal
    (rec,) = read_failures(tmp_path / "b")
    assert rec.kind == "signal" and "SIGTERM" in rec.first_line


def _torchrun(mode: str, tmp_path: Path, port: int, timeout_s: int = 10, **extra: str) -> tuple[subprocess.CompletedProcess, float]:
    env = clean_env(EZPZ_TIMEOUT=str(timeout_s), EZPZ_FAILURE_DIR=str(tmp_path), **extra)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                           str(port), FAILING, mode], env=env, capture_output=True, text=True, timeout=timeout_s + 90)
    return proc, time.monotonic() - start


def test_hung_rank_is_named_by_the_survivor_within_the_timeout(tmp_path):
    from test_real_launchers import free_port

    proc, took = _torchrun("hang", tmp_path, free_port(), EZPZ_ATTEMPT="1")
    assert proc.returncode != 0
    records = {r.rank: r for r in read_failures(tmp_path)}
    survivor = records[0]
    assert survivor.kind == "timeout" and survivor.missing_ranks == (1,) and survivor.attempt == 1
    assert survivor.missing_hosts == (survivor.host,)  # one node: the silent rank is on this host
    assert "missing='rank(s) 1 on" in proc.stderr  # the named line, next to gloo's raw one
    # Named within EZPZ_TIMEOUT + the roll call's grace of the hang's start (rank 0's setup done), not after
    # torch's 30 minutes; timed from there, so a slow start-up on a loaded machine cannot move the bound.
    setup_done = {int(r): float(t) for r, t in re.findall(r"^SETUP_DONE (\d+) ([\d.]+)$", proc.stdout, re.M)}
    assert 0 in setup_done, proc.stdout[-2000:]
    assert survivor.time - setup_done[0] < 10 + 10 + 8, (survivor.time - setup_done[0], took)


@pytest.mark.parametrize("mode, kind", [("raise", "code_error"), ("oom", "oom")])
def test_code_error_and_oom_records(tmp_path, mode, kind):
    from test_real_launchers import free_port

    proc, _ = _torchrun(mode, tmp_path, free_port())
    assert proc.returncode != 0
    records = {r.rank: r for r in read_failures(tmp_path)}
    assert records[0].kind == kind and records[0].missing_ranks == ()
    if mode == "raise":
        assert records[1].kind in ("code_error", "signal")  # torchrun may stop it first: either way no peer blamed
        assert records[1].missing_ranks == ()


def test_pals_shepherd_kill_blames_the_named_host_and_cascades_do_not():
    from ezpz.builtin.launch_env import ezpz_failure_signatures

    sigs = ezpz_failure_signatures()
    hit = match_text("x4102c5s0b0n0: shepherd died from signal 9", sigs)
    assert hit is not None and hit.signature.blames_host and hit.line.startswith("x4102c5s0b0n0")
    assert match_text("rank 17 died from signal 15", sigs) is None  # a cascade on an innocent node


def test_rendezvous_timeout_names_the_ranks_that_never_arrived(tmp_path):
    from test_real_launchers import free_port

    env = clean_env(RANK="0", WORLD_SIZE="3", LOCAL_RANK="0", LOCAL_WORLD_SIZE="3", MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(free_port()), EZPZ_TIMEOUT="3", EZPZ_FAILURE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", "import ezpz; ezpz.hooks.setup()"], env=env, capture_output=True,
                          text=True, timeout=90)
    assert proc.returncode == 1 and "RendezvousTimeoutError" in proc.stderr
    assert "ranks that never arrived: 1, 2" in proc.stderr
    (rec,) = read_failures(tmp_path)
    assert rec.kind == "timeout" and rec.missing_ranks == (1, 2) and rec.rank == 0


def test_doctor_plan_shows_the_attempt_and_where_it_came_from(tmp_path):
    import ezpz

    _, explanation = ezpz.hooks.plan(environ={"EZPZ_ATTEMPT": "2", "TORCHELASTIC_RESTART_COUNT": "1",
                                              "EZPZ_FAILURE_DIR": str(tmp_path)})
    attempt = next(d for d in explanation.decisions if d.topic == "attempt")
    assert attempt.chosen == "3" and "EZPZ_ATTEMPT=2 + TORCHELASTIC_RESTART_COUNT=1" in attempt.reason
    assert attempt.details["failure records"] == str(tmp_path)


def test_each_attempt_meets_under_its_own_store_prefix():
    from test_real_launchers import free_port

    from ezpz.facts import LaunchEnv
    from ezpz.launch_env import store

    launch = LaunchEnv(launcher="env", rank=0, world_size=1, master_addr="127.0.0.1", master_port=free_port())
    first = store.connect(launch, 10, {"EZPZ_ATTEMPT": "0"})
    first.open()
    again = store.connect(launch, 10, {"EZPZ_ATTEMPT": "1", "TORCHELASTIC_RESTART_COUNT": "1"})
    again.open()  # same store, same process: a restarted attempt must not read the first one's keys
    assert (first.attempt, again.attempt) == (0, 2)
    base = again.base
    assert base.check([f"ezpz/{first.fingerprint}/a0/g{first.generation}/ezpz-arrived/0"])
    assert base.check([f"ezpz/{again.fingerprint}/a2/g{again.generation}/ezpz-arrived/0"])
    assert again.arrived() == {0: first.arrived()[0]}


def test_a_dead_peer_is_named_by_the_survivor(tmp_path):
    from test_real_launchers import free_port

    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, FAILING, "die"], env=clean_env(
        RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
        EZPZ_TIMEOUT="20", EZPZ_FAILURE_DIR=str(tmp_path)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in (0, 1)]
    codes = [p.wait(timeout=90) for p in procs]
    assert codes[1] == 3 and codes[0] == 1
    (rec,) = read_failures(tmp_path)  # only the survivor wrote one
    assert rec.rank == 0 and rec.kind == "lost_peer" and rec.missing_ranks == (1,), rec
