"""Environment staging's pure parts, fast and with no process: the fan-out schedule (to 16,384 nodes), the
go-on-or-stop verdict, the tarball reuse decision, the path rewrite, the staged command; and one local stage."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ezpz.staging import node_agent
from ezpz.staging.fanout import MAX_CAP, SHARED, assign, plan_rounds, projected_seconds, rounds_needed
from ezpz.staging.fingerprint import content_fingerprint, reuse_decision
from ezpz.staging.node_agent import relocate_tree, rewrite_text
from ezpz.staging.stage import cache_env, staged_argv
from ezpz.staging.verdict import decide


def _nodes(n: int) -> list[str]:
    return [f"nid{i:05d}" for i in range(n)]


@pytest.mark.parametrize(("n", "cap"), [(1, 8), (4, 8), (9, 8), (10, 8), (4096, 8), (16384, 8), (100, 1), (1000, 3)])
def test_the_schedule_reaches_every_node_once_within_the_cap_in_log_rounds(n, cap):
    nodes = _nodes(n)
    rounds = plan_rounds(nodes, cap)
    targets = [c.target for r in rounds for c in r]
    assert sorted(targets) == sorted(nodes)  # every node once
    holders: set[str] = set()
    for r in rounds:
        per_source: dict[str, int] = {}
        for c in r:
            assert c.source == SHARED or c.source in holders, c  # only a node that holds it sends
            per_source[c.source] = per_source.get(c.source, 0) + 1
        assert all(k <= (1 if s == SHARED else cap) for s, k in per_source.items()), per_source
        holders |= {c.target for c in r}
    assert len(rounds) == rounds_needed(n, cap) == 1 + math.ceil(round(math.log(n, 1 + cap), 9))
    assert sum(c.source == SHARED for r in rounds for c in r) == 1  # the shared file system is read once


def test_rounds_at_scale_match_the_closed_form():
    assert [rounds_needed(n, 8) for n in (1, 8, 9, 128, 1024, 4096, 16384)] == [1, 2, 2, 4, 5, 5, 6]
    assert projected_seconds(4096, 8, per_copy_s=10.0, shared_copy_s=4.0) == 4.0 + 4 * 10.0


def test_held_nodes_copy_nothing_and_serve_from_the_start():
    nodes = _nodes(20)
    rounds = plan_rounds(nodes, 8, held=nodes[:2])
    assert len(rounds) == 2 and not any(c.source == SHARED for r in rounds for c in r)
    assert {c.target for r in rounds for c in r} == set(nodes[2:])


def test_a_retry_goes_to_another_holder_and_the_cap_holds_with_copies_in_flight():
    copies = assign(["c"], ["a", "b"], {"a": 0, "b": 3}, 8, avoid={"c": {"a"}})
    assert [(c.source, c.target) for c in copies] == [("b", "c")] and "retry" in copies[0].why
    assert assign(["c", "d"], ["a"], {"a": 7}, 8) == assign(["c"], ["a"], {"a": 7}, 8)  # one slot left
    assert assign(["c"], [], {SHARED: 1}, 8) == []  # the shared FS serves one node at a time
    with pytest.raises(ValueError, match="expected 1 to 8"):
        assign(["c"], ["a"], {}, MAX_CAP + 1)


def test_the_verdict_goes_on_without_failed_nodes_only_when_min_nodes_allows():
    hosts = ["n0", "n1", "n2", "n3"]
    ok = decide(hosts, {}, None)
    assert ok.go_on and ok.hosts == tuple(hosts)
    left = decide(hosts, {"n2": "stage dir not writable"}, 3)
    assert left.go_on and left.hosts == ("n0", "n1", "n3") and left.left_out == (("n2", "stage dir not writable"),)
    assert "left out 1 node(s)" in left.reason and "n2: stage dir not writable" in left.reason
    stop = decide(hosts, {"n2": "timed out"}, None)
    assert not stop.go_on and "no rank started" in stop.reason and "--min-nodes" in stop.reason and "n2" in stop.reason
    below = decide(hosts, {"n1": "x", "n2": "y"}, 3)
    assert not below.go_on and "fewer than --min-nodes 3" in below.reason


def test_the_tarball_is_reused_only_while_the_content_hash_and_size_match(tmp_path):
    env = tmp_path / "env"
    site = env / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (env / "bin").mkdir()
    (site / "torch-2.5.0.dist-info").mkdir()
    (site / "__pycache__").mkdir()
    fp = content_fingerprint(env)
    assert content_fingerprint(env) == fp
    (site / "__pycache__" / "m.pyc").write_bytes(b"x")
    stamp = {"fingerprint": fp, "size": 10}
    assert reuse_decision(stamp, fp, 10).reuse
    (site / "torch-2.5.0.dist-info").rename(site / "torch-2.6.0.dist-info")  # an upgrade
    assert not reuse_decision(stamp, content_fingerprint(env), 10).reuse
    fp2 = content_fingerprint(env)
    (env / "bin" / "new-tool").write_text("y")  # an entry point added
    assert content_fingerprint(env) != fp2
    assert "changed" in reuse_decision(stamp, "other", 10).reason
    assert "cut short" in reuse_decision(stamp, fp, 9).reason
    assert not reuse_decision(None, fp, 10).reuse and not reuse_decision(stamp, fp, None).reuse


def test_the_path_rewrite_touches_only_the_whole_path_and_leaves_binaries_alone():
    old, new = "/lus/proj/env", "/tmp/ezpz-stage-u/env"
    assert rewrite_text(b"#!/lus/proj/env/bin/python\nimport x\n", old, new) == \
        b"#!/tmp/ezpz-stage-u/env/bin/python\nimport x\n"
    assert rewrite_text(b'VIRTUAL_ENV="/lus/proj/env"\nexport PATH\n', old, new) == \
        b'VIRTUAL_ENV="/tmp/ezpz-stage-u/env"\nexport PATH\n'
    assert rewrite_text(b"#!/lus/proj/env2/bin/python\n", old, new) is None  # another environment
    assert rewrite_text(b"\x7fELF\0\0/lus/proj/env/lib", old, new) is None  # a binary is never edited
    assert rewrite_text(b"nothing here\n", old, new) is None


def test_relocate_tree_fixes_shebangs_activate_pth_and_symlinks(tmp_path):
    old = "/shared/env"
    root = tmp_path / "env"
    (root / "bin").mkdir(parents=True)
    (root / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (root / "bin" / "torchrun").write_text(f"#!{old}/bin/python\nfrom x import main\n")
    (root / "bin" / "torchrun").chmod(0o755)
    (root / "bin" / "activate").write_text(f'VIRTUAL_ENV="{old}"\n')
    (root / "lib" / "python3.11" / "site-packages" / "p.pth").write_text(f"{old}/src\n")
    (root / "pyvenv.cfg").write_text(f"home = /usr/bin\ncommand = /usr/bin/python -m venv {old}\n")
    (root / "bin" / "py").symlink_to(f"{old}/bin/torchrun")
    (root / "bin" / "sys").symlink_to("/usr/bin/python3")
    assert relocate_tree(root, old, str(root)) == 5
    assert (root / "bin" / "torchrun").read_text().startswith(f"#!{root}/bin/python\n")
    assert (root / "bin" / "torchrun").stat().st_mode & 0o777 == 0o755
    assert str(root) in (root / "bin" / "activate").read_text()
    assert (root / "bin" / "py").readlink() == root / "bin" / "torchrun"
    assert str((root / "bin" / "sys").readlink()) == "/usr/bin/python3"  # outside the env: left alone


def test_the_staged_command_runs_the_staged_interpreter_with_node_local_caches():
    environ = {"PATH": "/shared/env/bin:/usr/bin"}
    caches, why = cache_env("/tmp/st", environ)
    assert caches == {"TORCHINDUCTOR_CACHE_DIR": "/tmp/st/torchinductor", "TRITON_CACHE_DIR": "/tmp/st/triton"}
    argv, reason = staged_argv(["python", "train.py"], "/shared/env", "/tmp/st/env", environ, caches,
                               which=lambda name: f"/shared/env/bin/{name}")
    assert argv == ["env", "PATH=/tmp/st/env/bin:/usr/bin", "VIRTUAL_ENV=/tmp/st/env",
                    "TORCHINDUCTOR_CACHE_DIR=/tmp/st/torchinductor", "TRITON_CACHE_DIR=/tmp/st/triton",
                    "/tmp/st/env/bin/python", "train.py"]
    assert "the ranks run /tmp/st/env/bin/python" in reason
    other, why_other = staged_argv(["/opt/bin/app"], "/shared/env", "/tmp/st/env", environ)
    assert other[-1] == "/opt/bin/app" and "runs as given" in why_other
    kept, said = cache_env("/tmp/st", {"TRITON_CACHE_DIR": "/mine"})
    assert "TRITON_CACHE_DIR" not in kept and "kept as set (/mine)" in said[1]


def test_the_agent_shares_the_fanout_name_for_the_shared_file_system():
    assert node_agent.SHARED == SHARED


def test_an_agent_knows_its_host_by_address_then_name_then_rank():
    hosts = ["198.18.0.1", "198.18.0.2"]
    assert node_agent.identify(hosts, "198.18.0.2", "box", 0) == ("198.18.0.2", "its address")
    named = ["nid001.hsn", "nid002.hsn"]
    assert node_agent.identify(named, "10.0.0.9", "nid002", 0)[0] == "nid002.hsn"  # Slurm may order ranks otherwise
    assert node_agent.identify(named, None, "login", 1) == ("nid002.hsn", "its rank 1 (host 1 of the plan)")
    with pytest.raises(SystemExit, match="not one of the plan's hosts"):
        node_agent.identify(named, None, "login", None)


def test_the_agent_runs_with_the_standard_library_alone():
    """As the nodes run it (``python -I -S node_agent.py``): no site, no ezpz module loaded."""
    code = (f"import runpy, sys; runpy.run_path({node_agent.__file__!r}, run_name='agent'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ezpz', 'torch', 'attrs', 'site')))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_ezpz_stage_on_this_node_alone_then_reuses_the_copy(tmp_path):
    env = tmp_path / "shared" / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    stage = tmp_path / "stage"

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ezpz", "stage", str(env), "--stage-dir", str(stage),
                               "--job-dir", str(tmp_path / "job"), "--launcher", "torchrun"],
                              capture_output=True, text=True, timeout=120)

    first, second = run(), run()
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(stage / "env")
    out = subprocess.run([str(stage / "env" / "bin" / "python"), "-c", "import sys; print(sys.prefix)"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == str(stage / "env")
    assert str(stage / "env") in (stage / "env" / "bin" / "activate").read_text()
    assert "tarball: reused" in second.stderr and "holds the same environment" in second.stderr, second.stderr
    assert "copy to" not in second.stderr


def test_a_corrupt_tarball_is_named_and_the_node_left_out(tmp_path):
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "x").write_text("x")
    stage = tmp_path / "stage"
    first = subprocess.run([sys.executable, "-m", "ezpz", "stage", str(env), "--stage-dir", str(stage), "--job-dir",
                            str(tmp_path / "job"), "--launcher", "torchrun", "--pack-only"],
                           capture_output=True, text=True, timeout=120)
    tar = Path(first.stdout.strip())
    assert first.returncode == 0 and tar.is_file(), first.stderr
    data = bytearray(tar.read_bytes())
    data[600] ^= 0xFF  # same size, other bytes: the stamp's sha256 no longer matches
    tar.write_bytes(bytes(data))
    import json
    stamp = json.loads(Path(f"{tar}.json").read_text())
    stamp["mtime_ns"] = tar.stat().st_mtime_ns
    Path(f"{tar}.json").write_text(json.dumps(stamp))
    proc = subprocess.run([sys.executable, "-m", "ezpz", "stage", str(tar), "--stage-dir", str(stage), "--job-dir",
                           str(tmp_path / "job"), "--launcher", "torchrun", "--stage-retries", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "is corrupt (sha256" in proc.stderr and "127.0.0.1 left out" in proc.stderr, proc.stderr
    assert "(after 2 attempt(s))" in proc.stderr


def _fake_agent(port: int, host: str, replies: list[dict | None], held: bool = False) -> None:
    """An agent that says hello, then answers each fetch order with the next reply (None: never answers)."""
    import socket
    import threading

    def run() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            stream = conn.makefile("rwb")
            node_agent.send_msg(stream, {"op": "hello", "host": host, "held": held, "why": "held" if held else ""})
            for reply in replies:
                order = node_agent.read_msg(stream)
                if order is None or order.get("op") != "fetch":
                    return
                if reply is None:
                    node_agent.read_msg(stream)  # stuck: wait for the exit order
                    return
                node_agent.send_msg(stream, {"op": "done", "host": host, **reply})
            node_agent.read_msg(stream)

    threading.Thread(target=run, daemon=True).start()


def test_the_coordinator_retries_a_failed_or_timed_out_copy_and_names_an_agent_that_stops_answering():
    from ezpz.staging.coordinator import Coordinator, reply_grace_s

    said: list[str] = []
    coord = Coordinator(["a", "b", "c", "d", "e"], cap=8, retries=1, copy_timeout_s=1.5, register_timeout_s=10,
                        say=said.append)
    ok = {"ok": True, "copy_s": 0.1, "unpack_s": 0.2}
    timed_out = {"ok": False, "error": "copy to e:/stage/env.tar from a failed: the copy from a took over 1.5 s"}
    _fake_agent(coord.port, "a", [], held=True)
    _fake_agent(coord.port, "b", [ok])
    _fake_agent(coord.port, "c", [{"ok": False, "error": "corrupt"}, ok])
    _fake_agent(coord.port, "d", [None])
    _fake_agent(coord.port, "e", [timed_out, ok])  # its agent ended a stalled copy at --stage-timeout: retried
    delivery = coord.run(lambda: None)
    assert delivery.held == ("a",)
    assert sorted(c.target for c in delivery.copies) == ["b", "c", "e"]
    assert list(dict(delivery.failed)) == ["d"], delivery.failed
    assert reply_grace_s(1.5) == 5.0
    sources = "|".join(map(re.escape, ("a", "b", "c", SHARED)))  # whichever holder it was sent to
    assert re.fullmatch(rf"its staging agent did not report the copy from ({sources}) within --stage-timeout 1.5 s "
                        r"\+ 5 s: it stopped answering", dict(delivery.failed)["d"]), delivery.failed
    assert any("node c: corrupt; retrying (1 of 2 attempts)" in line for line in said), said
    assert any("node e: copy to e:/stage/env.tar from a failed: the copy from a took over 1.5 s; retrying" in line
               for line in said), said
    assert sum("copy to c from" in line for line in said) == 2 and sum("copy to e from" in line for line in said) == 2


def test_a_peer_that_stalls_mid_copy_ends_the_copy_at_the_deadline_not_a_read_timeout_later(tmp_path):
    import socket
    import threading
    import time

    server = socket.create_server(("127.0.0.1", 0))
    release = threading.Event()

    def stall() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(200)
            conn.sendall(b"OK 1000\n" + b"x" * 100)  # a tenth of the tarball, then nothing
            release.wait(30)

    threading.Thread(target=stall, daemon=True).start()
    plan = {"copy_timeout": 20.0, "data_port": server.getsockname()[1], "sha256": "0" * 64, "size": 1000,
            "tarball": "/shared/env.tar"}
    start = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match=r"took over 20 s \(stalled after 100 of 1000 bytes\)"):
            node_agent._receive(plan, "127.0.0.1", tmp_path / "env.tar.part", deadline=start + 1.0)
        assert time.monotonic() - start < 5.0  # the deadline (1 s), not the socket's own 20 s
    finally:
        release.set()
        server.close()


def test_the_coordinator_names_an_agent_that_never_starts():
    from ezpz.staging.coordinator import Coordinator

    coord = Coordinator(["a", "b"], cap=8, retries=2, copy_timeout_s=5, register_timeout_s=1, say=lambda _: None)
    _fake_agent(coord.port, "a", [{"ok": True, "copy_s": 0.1, "unpack_s": 0.1}])
    delivery = coord.run(lambda: None)
    assert [c.target for c in delivery.copies] == ["a"] and delivery.copies[0].source == SHARED
    assert dict(delivery.failed) == {"b": "its staging agent did not start within 1 s; check the agents' log"}


# /proc/self/mountinfo lines in the kernel's format (proc(5): mount id, parent id, major:minor, root, mount point,
# options, optional fields, "-", type, source, super options), as a Lustre compute node, an NFS home and a local
# /tmp show them; the space in a mount point is written \\040.
MOUNTINFO = """\
22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/root rw
40 22 0:41 / /lus/flare rw,relatime shared:20 - lustre 10.115.0.1@kfi:/flare rw,flock,lazystatfs
41 22 0:42 / /home rw,relatime shared:21 - nfs4 home.example:/home rw,vers=4.2
42 22 0:43 / /tmp rw,nosuid,nodev shared:22 - tmpfs tmpfs rw
43 22 0:44 / /lus/flare\\040scratch rw - xfs /dev/sdb rw
bad line without the separator
"""


def test_the_mount_of_a_path_is_the_longest_mount_point_above_it():
    from ezpz.probes.filesystems import mount_of, parse_mountinfo

    mounts = parse_mountinfo(MOUNTINFO)
    assert len(mounts) == 5 and mounts[4][0] == "/lus/flare scratch"
    assert mount_of("/lus/flare/projects/me/venv", mounts)[:2] == ("/lus/flare", "lustre")
    assert mount_of("/lus/flare", mounts)[:2] == ("/lus/flare", "lustre")
    assert mount_of("/lus/flarex/venv", mounts)[:2] == ("/", "ext4")  # a name that only starts alike
    assert mount_of("/lus/flare scratch/env", mounts)[:2] == ("/lus/flare scratch", "xfs")
    assert mount_of("/home/me/.venv", mounts)[1] == "nfs4" and mount_of("/tmp/ezpz-stage-me/env", mounts)[1] == "tmpfs"
    assert mount_of("/anything", []) is None


@pytest.mark.parametrize(("facts", "where", "words"), [
    (dict(prefix="/lus/flare/me/venv", mount_point="/lus/flare", fs_type="lustre"), "shared",
     ["/lus/flare (lustre), a shared file system", "--stage-env"]),
    (dict(prefix="/home/me/.venv", mount_point="/home", fs_type="nfs4"), "shared", ["(nfs4)"]),
    (dict(prefix="/tmp/env", mount_point="/tmp", fs_type="tmpfs"), "node-local", ["would change nothing"]),
    (dict(prefix="/tmp/ezpz-stage-me/venv", mount_point="/tmp", fs_type="tmpfs", staged_from="/lus/flare/me/venv"),
     "staged", ["node-local copy of /lus/flare/me/venv"]),
    (dict(prefix="/opt/env"), "unknown", ["no mount table"]),
])
def test_staging_advice_says_where_the_environment_lives_and_what_to_do(facts, where, words):
    from ezpz.staging.advice import EnvironmentPlacement, staging_advice

    advice = staging_advice(EnvironmentPlacement(**facts))
    assert advice.where == where
    for w in words:
        assert w in advice.reason, advice.reason


@pytest.mark.parametrize(("stamp", "staged_from"), [
    ('{"sha256": "ab", "prefix": "/lus/flare/me/venv", "host": "x1"}', "/lus/flare/me/venv"),
    ("not json", None), ('["/lus/flare/me/venv"]', None), ('{"prefix": 7}', None), ('{"prefix": ""}', None),
])
def test_doctor_reads_a_staged_copys_stamp_as_hostile_input(tmp_path, stamp, staged_from):
    from ezpz.cli.doctor import _python_environment

    (tmp_path / node_agent.STAMP).write_text(stamp)
    placement = _python_environment(str(tmp_path))
    assert placement["staged_from"] == staged_from
    assert placement["where"] == ("staged" if staged_from else placement["where"])
    assert placement["where"] != "staged" or "node-local copy of /lus/flare/me/venv" in placement["reason"]
