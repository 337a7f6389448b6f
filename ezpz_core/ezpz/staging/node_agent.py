"""The staging agent on one node: receive the tarball (shared file system or a peer), unpack, relocate, serve peers.

Started once per node through the job's own launcher (one process per node) as ``python -I -S node_agent.py --plan
PLAN``: the standard library only, no ``site``, so the agent itself stats next to nothing on the shared file system.
It says hello to the coordinator on the launch node (TCP, JSON lines), then carries out its orders (``fetch`` from a
source, ``exit``); meanwhile it serves its copy of the tarball to peers on ``data_port``, at most ``cap`` at once.
:func:`rewrite_text` (the path rewrite) is pure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

__all__ = ["RANK_VARS", "SHARED", "STAMP", "Stream", "accept_each", "held_here", "identify", "main", "read_msg",
           "read_stamp", "relocate_tree", "rewrite_text", "send_msg", "staged_path"]

SHARED = "<shared file system>"  # the same string as ezpz.staging.fanout.SHARED (this file imports no ezpz module)
_log = logging.getLogger("ezpz.staging.agent")
STAMP = ".ezpz-staged.json"
"""Written inside the unpacked environment last: its presence with the plan's sha256 means 'staged here'."""
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "PALS_RANKID", "SLURM_PROCID", "FLUX_TASK_RANK")
"""Where a launcher puts a process's rank: the last resort for which host this is (:func:`identify`)."""
_CHUNK = 4 << 20


def rewrite_text(data: bytes, old: str, new: str) -> bytes | None:
    """``data`` with the path ``old`` replaced by ``new`` where it stands as a path; None if binary or unchanged.

    A match must end the path or continue it (``/``, quote, space, ``:``, end): ``/env`` does not match ``/env2``.
    """
    if b"\0" in data[:8192]:
        return None
    pattern = re.compile(re.escape(old.encode()) + rb"(?=[/\s\"':]|$)", re.M)
    out = pattern.sub(new.encode().replace(b"\\", b"\\\\"), data)
    return out if out != data else None


def _rewrite_file(path: Path, old: str, new: str) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    out = rewrite_text(data, old, new)
    if out is None:
        return False
    mode = path.stat().st_mode
    path.write_bytes(out)
    path.chmod(mode)
    return True


def relocate_tree(root: Path, old: str, new: str) -> int:
    """Make an unpacked environment runnable at ``new``: shebangs, activate scripts and ``*.pth`` in place,
    ``pyvenv.cfg``, and symlinks that pointed into ``old``. Returns how many entries changed."""
    changed = 0
    candidates = [root / "pyvenv.cfg", *sorted(root.glob("bin/*")),
                  *sorted(root.glob("lib/python*/site-packages/*.pth")),
                  *sorted(root.glob("etc/conda/activate.d/*")), *sorted(root.glob("etc/conda/deactivate.d/*"))]
    for path in candidates:
        if path.is_file() and not path.is_symlink():
            changed += _rewrite_file(path, old, new)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                target = os.readlink(path)
                if target == old or target.startswith(old + "/"):
                    path.unlink()
                    path.symlink_to(new + target[len(old):])
                    changed += 1
    return changed


def staged_path(plan: dict[str, object]) -> Path:
    return Path(str(plan["stage_dir"])) / str(plan["name"])


def read_stamp(env: Path) -> dict[str, object] | None:
    """The stamp in an unpacked copy (sha256, the prefix it came from, host), or None where there is none that
    parses as a JSON object (whatever else the file holds)."""
    try:
        with (env / STAMP).open(encoding="utf-8") as fh:
            stamp = json.loads(fh.read(1 << 16))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def held_here(plan: dict[str, object]) -> str | None:
    """Why this node already holds the plan's environment (tarball and unpacked copy), or None."""
    env, tar = staged_path(plan), Path(str(plan["stage_dir"])) / f"{plan['name']}.tar"
    stamp = read_stamp(env)
    try:
        size = tar.stat().st_size
    except OSError:
        return None
    if stamp is not None and stamp.get("sha256") == plan["sha256"] and size == plan["size"]:
        return f"{env} holds the same environment (sha256 {str(plan['sha256'])[:12]}): no copy"
    return None


class Stream(Protocol):
    """A socket's file in ``rwb`` mode: JSON lines both ways."""

    def readline(self, size: int | None = -1, /) -> bytes: ...
    def write(self, data: bytes, /) -> int: ...
    def flush(self) -> None: ...


def send_msg(stream: Stream, msg: dict[str, object]) -> None:
    stream.write(json.dumps(msg).encode() + b"\n")
    stream.flush()


def read_msg(stream: Stream) -> dict[str, object] | None:
    line = stream.readline()
    return json.loads(line) if line.strip() else None


def accept_each(sock: socket.socket, handle: Callable[[socket.socket], None]) -> None:
    """Hand each connection ``sock`` accepts to ``handle``, in a daemon thread of its own, until ``sock`` is closed."""
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


class _Server(threading.Thread):
    """Serves this node's tarball to peers: ``GET <sha256>`` -> ``OK <size>`` and the bytes, or ``NO <why>``."""

    def __init__(self, plan: dict[str, object], tar: Path) -> None:
        super().__init__(daemon=True)
        self.plan, self.tar, self.ready = plan, tar, threading.Event()
        self.slots = threading.Semaphore(int(str(plan["cap"])))
        self.sock = socket.create_server(("", int(str(plan["data_port"]))), reuse_port=False)

    def run(self) -> None:
        accept_each(self.sock, self._one)

    def _one(self, conn: socket.socket) -> None:
        timeout = float(str(self.plan["copy_timeout"]))
        with conn:
            conn.settimeout(timeout)
            try:
                asked = conn.makefile("rb").readline().decode().split()
                if not self.ready.is_set() or asked != ["GET", self.plan["sha256"]]:
                    conn.sendall(b"NO this node does not hold the tarball\n")
                    return
                if not self.slots.acquire(timeout=timeout):
                    conn.sendall(b"NO busy\n")
                    return
                try:
                    size = self.tar.stat().st_size
                    conn.sendall(f"OK {size}\n".encode())
                    with self.tar.open("rb") as f:
                        conn.sendfile(f)
                finally:
                    self.slots.release()
            except OSError:
                return


def _receive(plan: dict[str, object], source: str, part: Path, deadline: float) -> None:
    """Copy the tarball into ``part`` from the shared file system or a peer, checking size and sha256."""
    digest, got = hashlib.sha256(), 0
    timeout = float(str(plan["copy_timeout"]))
    with part.open("wb") as out:
        if source == SHARED:
            with open(str(plan["tarball"]), "rb") as f:
                while chunk := f.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    got += len(chunk)
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"reading {plan['tarball']} took over {timeout:g} s")
        else:
            with socket.create_connection((source, int(str(plan["data_port"]))), timeout=timeout) as conn:
                conn.sendall(f"GET {plan['sha256']}\n".encode())
                stream = conn.makefile("rb")
                head = stream.readline().decode().split(maxsplit=1)
                if head[:1] != ["OK"]:
                    raise ConnectionError(f"{source} refused: {' '.join(head[1:]) or 'closed'}")
                size = int(head[1])
                while got < size:
                    # Each read waits at most until the deadline: a peer that stalls mid-copy ends the copy then,
                    # reported as a failed copy the coordinator retries from another holder.
                    conn.settimeout(max(0.05, deadline - time.monotonic()))
                    try:
                        chunk = stream.read1(min(_CHUNK, size - got))  # what arrived, so the count is true
                    except TimeoutError:
                        raise TimeoutError(f"the copy from {source} took over {timeout:g} s (stalled after "
                                           f"{got} of {size} bytes)") from None
                    if not chunk:
                        break
                    digest.update(chunk)
                    out.write(chunk)
                    got += len(chunk)
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the copy from {source} took over {timeout:g} s")
    if got != plan["size"]:
        raise ValueError(f"received {got} bytes from {source}, expected {plan['size']} (cut short)")
    if digest.hexdigest() != plan["sha256"]:
        raise ValueError(f"the tarball from {source} is corrupt (sha256 {digest.hexdigest()[:12]}, "
                         f"expected {str(plan['sha256'])[:12]})")


def _fetch(plan: dict[str, object], source: str, host: str, server: _Server) -> dict[str, object]:
    stage = Path(str(plan["stage_dir"]))
    name, timeout = str(plan["name"]), float(str(plan["copy_timeout"]))
    t0 = time.monotonic()
    deadline = t0 + timeout
    try:
        stage.mkdir(parents=True, exist_ok=True)
        probe = stage / f".{name}.probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        return {"ok": False, "error": f"stage dir {stage} on {host} is not writable ({e.strerror or e}); fix: pass "
                                      f"--stage-dir a writable node-local directory"}
    part, tar = stage / f".{name}.tar.part", stage / f"{name}.tar"
    try:
        _receive(plan, source, part, deadline)
        part.replace(tar)
    except (OSError, ValueError, TimeoutError) as e:
        part.unlink(missing_ok=True)
        return {"ok": False, "error": f"copy to {host}:{tar} from {source} failed: {e}"}
    copied = time.monotonic() - t0
    server.ready.set()  # peers may copy from here while this node unpacks
    env, tmp = stage / name, stage / f".{name}.unpacking"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        proc = subprocess.run(["tar", "-xf", str(tar), "-C", str(tmp)], capture_output=True, text=True,
                              timeout=max(1.0, deadline - time.monotonic()))
        if proc.returncode != 0:
            raise ValueError(f"tar -xf {tar} failed: {proc.stderr.strip()[-300:]}")
        top = tmp / str(plan["top"])
        if not top.is_dir():
            raise ValueError(f"the tarball has no top directory {plan['top']!r}")
        changed = relocate_tree(top, str(plan["prefix"]), str(env)) if plan.get("prefix") else 0
        shutil.rmtree(env, ignore_errors=True)
        top.replace(env)
        (env / STAMP).write_text(json.dumps({"sha256": plan["sha256"], "prefix": plan.get("prefix"), "host": host}))
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"ok": False, "error": f"unpacking {tar} into {env} on {host} failed: {e}"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"ok": True, "copy_s": round(copied, 3), "unpack_s": round(time.monotonic() - t0 - copied, 3),
            "relocated": changed}


def identify(hosts: list[str], own_address: str | None, hostname: str, rank: int | None) -> tuple[str, str]:
    """Which host of the plan this node is, and how that was found (pure): its address on the route to the
    coordinator, else its host name (short names compared), else its rank (one agent per node, in host order)."""
    if own_address in hosts:
        return str(own_address), "its address"
    short = hostname.split(".")[0]
    for h in hosts:
        if h == hostname or (short and h.split(".")[0] == short):
            return h, f"its host name {hostname}"
    if rank is not None and 0 <= rank < len(hosts):
        return hosts[rank], f"its rank {rank} (host {rank} of the plan)"
    raise SystemExit(f"staging agent on {hostname}: not one of the plan's hosts, and no rank variable set "
                     f"({', '.join(RANK_VARS)}); pass --index")


def _own_address(addr: str) -> str | None:
    """This node's address on the route to ``addr`` (a UDP socket's connect sends nothing)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((addr, 9))
            return str(s.getsockname()[0])
    except OSError:
        return None


def _rank(explicit: int | None) -> int | None:
    if explicit is not None:
        return explicit
    for var in RANK_VARS:
        if os.environ.get(var, "").strip().isdigit():
            return int(os.environ[var])
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="node_agent.py")
    p.add_argument("--plan", required=True)
    p.add_argument("--index", type=int)
    args = p.parse_args(argv)
    plan = json.loads(Path(args.plan).read_text())
    addr, port = plan["coordinator"]
    hosts = [str(h) for h in plan["hosts"]]
    host, how = identify(hosts, _own_address(str(addr)), socket.gethostname(), _rank(args.index))
    env = staged_path(plan)
    held = held_here(plan)
    server: _Server | None = None
    broken = ""
    try:
        server = _Server(plan, Path(str(plan["stage_dir"])) / f"{plan['name']}.tar")
    except OSError as e:  # still say hello: the coordinator names the node and why instead of waiting for it
        broken = f"cannot listen on port {plan['data_port']} on {host} ({e}); fix: free the port"
    if server is not None:
        if held:
            server.ready.set()
        server.start()
    end = time.monotonic() + float(str(plan["deadline_s"]))
    try:
        with socket.create_connection((str(addr), int(str(port))), timeout=float(str(plan["copy_timeout"]))) as conn:
            conn.settimeout(max(1.0, end - time.monotonic()))
            stream = conn.makefile("rwb")
            send_msg(stream, {"op": "hello", "host": host, "how": how, "held": held is not None and server is not None,
                              "why": held or "", "broken": broken, "env": str(env)})
            while (order := read_msg(stream)) is not None and order.get("op") == "fetch":
                reply = _fetch(plan, str(order["source"]), host, server) if server else {"ok": False, "error": broken}
                send_msg(stream, {"op": "done", "host": host, **reply})
    except (OSError, ValueError) as e:
        _log.warning("staging agent on %s: coordinator connection ended: %s", host, e)
    finally:
        if server is not None:
            server.sock.close()
    return 0


if __name__ == "__main__":  # the agent's own process (python -I -S): with no handler configured, logging's last
    sys.exit(main())  # resort writes the warnings, message only, to its stderr, which is the agents' log
