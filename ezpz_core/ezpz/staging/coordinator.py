"""The launch node's side of staging: agents report to it over TCP, it orders each copy (fan-out rule of
:func:`ezpz.staging.fanout.assign`), retries a failed copy from another holder, and gives up on a node by name.

A copy that runs past ``--stage-timeout`` is ended by its agent, which reports it like any failed copy, so it is
retried from another holder; the coordinator's own deadline (the timeout plus :func:`reply_grace_s`) only catches
an agent that stopped answering, which cannot take another order, so that node is left out."""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence

from attrs import field

from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen
from ezpz.staging.fanout import SHARED, assign
from ezpz.staging.node_agent import Stream, accept_each, read_msg, send_msg

__all__ = ["CopyRecord", "Coordinator", "Delivery", "reply_grace_s"]


def reply_grace_s(copy_timeout_s: float) -> float:
    """How long past ``--stage-timeout`` an agent may take to report a copy it ended (a tenth, 5-60 s)."""
    return min(60.0, max(5.0, 0.1 * copy_timeout_s))


@frozen
class CopyRecord:
    """A copy that succeeded: from where, to where, its generation (1 = from the shared FS) and its times."""

    source: str
    target: str
    generation: int
    copy_s: float
    unpack_s: float


@frozen(kw_only=True)
class Delivery:
    """What staging did on every node: held already, copied (records), failed (host -> why), and how long."""

    held: tuple[str, ...] = field(converter=as_tuple)
    copies: tuple[CopyRecord, ...] = field(converter=as_tuple)
    failed: tuple[tuple[str, str], ...] = field(converter=as_tuple)
    seconds: float

    @property
    def rounds(self) -> int:
        return max((c.generation for c in self.copies), default=0)


class Coordinator:
    """Listens for the agents; :meth:`run` drives the fan-out until every host holds the environment or failed."""

    def __init__(self, hosts: Sequence[str], *, cap: int, retries: int, copy_timeout_s: float,
                 register_timeout_s: float, say: Callable[[str], None]) -> None:
        self.hosts, self.cap, self.retries = list(hosts), cap, retries
        self.copy_timeout_s, self.register_timeout_s, self.say = copy_timeout_s, register_timeout_s, say
        self.sock = socket.create_server(("", 0))
        self.port = self.sock.getsockname()[1]
        self.events: queue.Queue[tuple[str, dict[str, object] | None, Stream | None]] = queue.Queue()
        threading.Thread(target=accept_each, args=(self.sock, self._read), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        stream = conn.makefile("rwb")
        host = ""
        try:
            while (msg := read_msg(stream)) is not None:
                host = str(msg.get("host", host))
                self.events.put((host, msg, stream))
        except (OSError, ValueError):
            pass
        self.events.put((host, None, None))

    def run(self, launcher_alive: Callable[[], int | None]) -> Delivery:
        """Drive the fan-out. ``launcher_alive()`` is the agents' launcher's exit status (None while running)."""
        t0 = time.monotonic()
        streams: dict[str, Stream] = {}
        holders: list[str] = []  # staged and serving
        staged: set[str] = set()
        generation: dict[str, int] = {SHARED: 0}
        busy: dict[str, int] = {}
        attempts: dict[str, int] = {}
        avoid: dict[str, set[str]] = {}
        in_flight: dict[str, tuple[str, float]] = {}
        failed: dict[str, str] = {}
        held: list[str] = []
        copies: list[CopyRecord] = []
        register_by = t0 + self.register_timeout_s

        def fail(host: str, why: str) -> None:
            failed[host] = why
            self.say(f"node {host} left out of staging: {why}")

        while len(staged) + len(failed) < len(self.hosts):
            now = time.monotonic()
            pending = [h for h in self.hosts if h in streams and h not in holders and h not in failed
                       and h not in in_flight]
            for c in assign(pending, holders, busy, self.cap, avoid):
                in_flight[c.target] = (c.source, now + self.copy_timeout_s + reply_grace_s(self.copy_timeout_s))
                busy[c.source] = busy.get(c.source, 0) + 1
                attempts[c.target] = attempts.get(c.target, 0) + 1
                self.say(f"copy to {c.target} from {c.source} (attempt {attempts[c.target]}): {c.why}")
                try:
                    send_msg(streams[c.target], {"op": "fetch", "source": c.source})
                except OSError as e:
                    in_flight.pop(c.target)
                    busy[c.source] -= 1
                    fail(c.target, f"its staging agent stopped answering ({e})")
            try:
                host, msg, stream = self.events.get(timeout=0.2)
            except queue.Empty:
                host, msg, stream = "", None, None
            if host and msg is not None and msg.get("op") == "hello" and stream is not None:
                if host not in self.hosts or host in streams:
                    continue
                streams[host] = stream
                if msg.get("broken"):
                    fail(host, str(msg["broken"]))
                elif msg.get("held"):
                    holders.append(host)
                    staged.add(host)
                    held.append(host)
                    generation[host] = 0
                    self.say(f"node {host}: {msg.get('why')}")
            elif host and msg is not None and msg.get("op") == "done" and host in in_flight:
                source, _ = in_flight.pop(host)
                busy[source] -= 1
                if msg.get("ok"):
                    holders.append(host)
                    staged.add(host)
                    generation[host] = generation.get(source, 0) + 1
                    rec = CopyRecord(source, host, generation[host], float(str(msg.get("copy_s", 0))),
                                     float(str(msg.get("unpack_s", 0))))
                    copies.append(rec)
                    self.say(f"node {host} staged from {source}: copy {rec.copy_s:.2f} s, unpack+relocate "
                             f"{rec.unpack_s:.2f} s")
                else:
                    why = str(msg.get("error"))
                    avoid.setdefault(host, set()).add(source)
                    if attempts[host] > self.retries:
                        fail(host, f"{why} (after {attempts[host]} attempt(s))")
                    else:
                        self.say(f"node {host}: {why}; retrying ({attempts[host]} of {self.retries + 1} attempts)")
            elif host and msg is None and host in streams and host not in failed:
                if host in in_flight:
                    source, _ = in_flight.pop(host)
                    busy[source] -= 1
                if host in staged:  # it holds the environment but no longer serves peers
                    if host in holders:
                        holders.remove(host)
                    streams.pop(host)
                    self.say(f"node {host}: its staging agent exited; it no longer serves peers")
                    continue
                fail(host, "its staging agent exited before staging finished")
            now = time.monotonic()
            for target, (source, deadline) in list(in_flight.items()):
                if now > deadline:
                    in_flight.pop(target)
                    busy[source] -= 1
                    fail(target, f"its staging agent did not report the copy from {source} within --stage-timeout "
                                 f"{self.copy_timeout_s:g} s + {reply_grace_s(self.copy_timeout_s):g} s: it stopped "
                                 f"answering")
            status = launcher_alive()
            if now > register_by or status is not None:
                for h in self.hosts:
                    if h not in streams and h not in failed:
                        cause = (f"the launcher exited ({status}) before its agent started" if status is not None
                                 else f"its staging agent did not start within {self.register_timeout_s:g} s")
                        fail(h, f"{cause}; check the agents' log")
        for h, s in streams.items():
            try:
                send_msg(s, {"op": "exit"})
            except OSError:
                pass
        self.sock.close()
        return Delivery(held=held, copies=copies, failed=tuple((h, failed[h]) for h in self.hosts if h in failed),
                        seconds=round(time.monotonic() - t0, 3))
