"""The launcher's connections to its hosts: the processes below it that name one active host (``ssh HOST orted``).

``mpiexec`` reaches each remote node through a child process naming the node on its command line (Open MPI's and
MPICH's rsh/ssh agent), which lives as long as the node's daemon. When a node's daemon dies while the job starts,
Open MPI says only "ORTE was unable to reliably start one or more daemons", naming no node (:data:`DAEMON_FAILED`):
the connection that ended first names it. :class:`HostChannels` finds them (Linux ``/proc``, by parent pid),
learns the order they end in from a thread waiting on their pidfds (exact, where the kernel has ``pidfd_open``;
else the next poll, at most 0.2 s later), and keeps the first loss only when it came alone: the launcher still
running, another host's connection still up, no rank record or exit marker written yet (a launcher ending the
job closes every connection, in some order), and every remote host's connection seen up before it (a connection
never seen may have ended first, unseen: then the launcher's teardown ends the seen ones, and the first of those
is no cause). The launcher's own node (``here``) has no connection. Ranks (a rank variable in their environment)
are never connections, whatever their arguments name. :attr:`HostChannels.never_seen` lists the remote hosts
whose connection was never seen, and :attr:`HostChannels.settled` says whether the watcher's last look before the
first end found every connection it knew up and none new (else a healthy host's connection, up all along, may
simply have started after that look: a loaded node's looks are far apart). The supervisor uses all this only when
the launcher's log says a daemon failed.
"""

from __future__ import annotations

import os
import re
import select
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from attrs import field

from ezpz.launch_drivers.marked import rank_of
from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen

__all__ = ["DAEMON_FAILED", "HostChannels", "LostChannel", "daemon_failed"]

DAEMON_FAILED = (
    # Open MPI 4.1 orte/mca/plm/base/help-plm-base.txt [daemon-failed-to-start-...]: printed when a daemon's agent
    # (ssh) exits abnormally (plm_rsh_module.c rsh_wait_daemon); seen on network-namespace nodes (Open MPI 4.1.4)
    # with a node's orted SIGKILLed at start-up: tests/fixtures/open_mpi_start_up/daemon_death.log
    r"ORTE was unable to reliably start one or more daemons",
    # PRRTE (Open MPI 5), the same help text under its own name: prrte src/mca/plm/base/help-plm-base.txt
    r"PRTE was unable to reliably start one or more daemons",
)
"""Launcher lines saying a daemon's connection failed (rather than the launcher ending the job for a rank)."""

_DEPTH = 3
"""How far below the launcher a connection may be (a wrapper script, then the agent)."""
_SCAN_EVERY_S = 1.0
"""After the start-up: how often to look for new connections (the liveness of known ones is checked every poll)."""
_STARTUP_S = 30.0
_FAST_S = 10.0
"""For this long after the launcher starts, until every remote host's connection is found, the waiter thread looks
for new ones every :data:`_FAST_SCAN_S` (or five times a scan's own CPU time, on a node with many processes; CPU
time, not wall time, so that a loaded node goes on looking as often): a node that is down ends its connection within
moments."""
_FAST_SCAN_S = 0.02


@frozen(kw_only=True)
class LostChannel:
    """The first connection to end while the launcher ran: its host, pid, command, and the hosts still connected."""

    host: str
    pid: int
    command: str
    still_up: tuple[str, ...] = field(converter=as_tuple)
    after_s: float = 0.0
    """Seconds after the launcher started."""


def daemon_failed(text: str) -> str | None:
    """The first launcher line in ``text`` saying a daemon's connection failed (:data:`DAEMON_FAILED`), if any."""
    for line in text.splitlines():
        if any(re.search(p, line) for p in DAEMON_FAILED):
            return line.strip()[:300]
    return None


def _read(path: str, limit: int = 1 << 16) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _parent_and_state(pid: int, proc: str) -> tuple[int, str] | None:
    raw = _read(f"{proc}/{pid}/stat", 4096)
    if not raw:
        return None
    try:
        rest = raw.rsplit(b")", 1)[1].split()
        return int(rest[1]), rest[0].decode()
    except (IndexError, ValueError):
        return None


def _running(found: tuple[int, str] | None) -> bool:
    """A process's (parent, state) says it runs: present, neither a zombie nor dead."""
    return found is not None and found[1] not in ("Z", "X")


def _named_host(argv: list[str], hosts: Sequence[str]) -> str | None:
    """The one active host an argument names exactly (``user@host`` too); None for none or several."""
    named = {a.rsplit("@", 1)[-1] for a in argv[1:]} & set(hosts)
    return named.pop() if len(named) == 1 else None


class HostChannels:
    """Watch the connections below ``launcher_pid`` to ``hosts``; :attr:`lost` is the first that ended first.

    ``failure_dir`` is the attempt's: a rank record (``rank-*.json``) or exit marker (``ended-*``) there before
    the loss makes the loss a consequence, not the cause, and nothing is kept. ``here``: the hosts that are the
    launcher's own node (no connection to them is looked for).
    """

    def __init__(self, launcher_pid: int, hosts: Sequence[str], failure_dir: Path | None, *,
                 here: Sequence[str] = (), proc: str = "/proc") -> None:
        self.launcher_pid, self.hosts, self.failure_dir, self.proc = launcher_pid, tuple(hosts), failure_dir, proc
        self.here = tuple(h for h in here if h in self.hosts)
        """The launcher's own node(s) among ``hosts`` (:mod:`ezpz.launch_drivers.launcher_node`); empty: not known."""
        self.remote = tuple(h for h in self.hosts if h not in self.here)
        self._expected = len(self.remote) if self.here else len(self.hosts) - 1
        """How many hosts' connections to look for (one host, not told, may be the launcher's own)."""
        self.started = time.monotonic()
        self.lost: LostChannel | None = None
        self.note = ""
        """Why no loss was kept, when one was seen (told as evidence set aside)."""
        self.done = False
        self.settled = False
        """The last look before the first end found every connection known so far up, no new one, and no process
        between fork and exec (a healthy host's connection, up from the start to the launcher's teardown, was up and
        seen at that look)."""
        self._pids: dict[int, tuple[str, str]] = {}  # pid -> (host, command)
        self._seen: set[int] = set()
        """Processes looked at for good (a connection, a rank, or neither once it has run its own program)."""
        self._ranks: set[int] = set()
        self._next_scan = 0.0
        self._ended: list[tuple[float, int, bool]] = []  # (when, pid, launcher up and no record yet at the first)
        self._fds: dict[int, int] = {}  # pidfd -> pid, for the waiter
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe() if hasattr(os, "pidfd_open") and proc == "/proc" else (-1, -1)
        self._waiter: threading.Thread | None = None
        self._scan_every = _FAST_SCAN_S
        if self._wake_r >= 0:  # the waiter looks for connections from the start (see _FAST_S)
            self._waiter = threading.Thread(target=self._wait, name="ezpz-host-channels", daemon=True)
            self._waiter.start()

    def stop(self) -> None:
        """The launcher is being ended (or is gone): losses from now on are its doing. Ends the waiter."""
        self.done = True
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass
        if self._waiter is not None:
            self._waiter.join(timeout=5.0)
        for fd in (*self._fds, self._wake_r, self._wake_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fds, self._wake_r, self._wake_w = {}, -1, -1

    def _watch_exit(self, pid: int) -> None:
        """Wait on ``pid``'s pidfd in the waiter thread, when the kernel has pidfds."""
        if self._wake_r < 0:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return
        self._fds[fd] = pid  # under the lock: called from _scan
        if threading.current_thread() is not self._waiter:
            os.write(self._wake_w, b"+")

    def _wait(self) -> None:
        try:
            self._waiting()
        except Exception:  # bookkeeping: never a traceback in the job's output; the main thread's polls go on
            self.done = True

    def _waiting(self) -> None:
        while not self.done:
            poller = select.poll()
            with self._lock:
                fds = dict(self._fds)
            for fd in fds:
                poller.register(fd, select.POLLIN)
            poller.register(self._wake_r, select.POLLIN)
            fast = time.monotonic() - self.started < _FAST_S and len(self.seen_hosts()) < self._expected
            try:
                ready = [fd for fd, _ in poller.poll(int(1000 * self._scan_every) if fast else 1000)]
            except OSError:
                return
            now = time.monotonic()
            if self._wake_r in ready:
                try:
                    os.read(self._wake_r, 64)
                except OSError:
                    return
            exited = [fds[fd] for fd in ready if fd in fds]
            calm = bool(exited) and not self._ended and self._alive(self.launcher_pid) and self._quiet()
            with self._lock:
                for fd in ready:
                    self._fds.pop(fd, None)
                self._ended += [(now, pid, calm) for pid in exited]
            if fast and not self.done:
                cpu = time.thread_time()
                self._scan()
                self._scan_every = max(_FAST_SCAN_S, 5 * (time.thread_time() - cpu))

    def _alive(self, pid: int) -> bool:
        return _running(_parent_and_state(pid, self.proc))

    def _scan(self) -> None:
        with self._lock:
            self._scan_locked()

    def _scan_locked(self) -> None:
        try:
            entries = [int(e.name) for e in os.scandir(self.proc) if e.name.isdigit()]
        except OSError:
            self.done = True  # no /proc: nothing to watch
            return
        table = {pid: found for pid in entries if (found := _parent_and_state(pid, self.proc)) is not None}
        intact = all(_running(table.get(pid)) for pid in self._pids)
        cmdlines: dict[int, bytes | None] = {}  # the parents' command lines, read once a look
        looks: list[bool | None] = []
        below: set[int] = set()
        level = {self.launcher_pid}
        for _ in range(_DEPTH):  # a level at a time: a rank's own children (loaders, compilers) are not looked at
            level = {pid for pid, (parent, _) in table.items() if parent in level and parent not in self._ranks}
            level -= below
            below |= level
            for pid in sorted(level - self._seen):
                parent = table[pid][0]
                if parent not in cmdlines:
                    cmdlines[parent] = _read(f"{self.proc}/{parent}/cmdline")
                looks.append(self._examine(pid, cmdlines[parent]))
        if intact and not self._ended and not self.done:  # after the first end, the last look before it stands
            self.settled = all(found is False for found in looks)

    def _examine(self, pid: int, parent_cmdline: bytes | None) -> bool | None:
        """Look at a process below the launcher: True when it is a new connection to a host, None when it is not
        running its own program yet (looked at again next time)."""
        raw = _read(f"{self.proc}/{pid}/cmdline")
        if raw is not None and raw == parent_cmdline:
            return None  # forked, not yet running its own program (its parent's command line)
        self._seen.add(pid)
        env = _read(f"{self.proc}/{pid}/environ", 1 << 20)
        if not raw or env is None:
            return False
        if rank_of(dict(item.decode("utf-8", "replace").partition("=")[::2] for item in env.split(b"\0")
                        if b"=" in item)) is not None:
            self._ranks.add(pid)
            return False  # a rank, whatever its arguments name
        argv = [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")]
        host = _named_host(argv, self.hosts)
        if host is None:
            return False
        self._pids[pid] = (host, " ".join(argv)[:200])
        self._watch_exit(pid)
        return True

    def _quiet(self) -> bool:
        """No rank has recorded a failure or exited yet."""
        if self.failure_dir is None:
            return True
        try:
            return not any((e.name.startswith("rank-") and e.name.endswith(".json")) or e.name.startswith("ended-")
                           for e in os.scandir(self.failure_dir))
        except OSError:
            return True

    def poll(self) -> None:
        """Look once (cheap: the known connections' ``/proc`` entries; all processes every second at most after
        the start-up). Never raises: an error ends the watching, never the attempt."""
        if self.done or self.lost is not None:
            return
        try:
            self._poll()
        except Exception:  # bookkeeping: whatever /proc holds must not stop the supervision
            self.stop()

    def _poll(self) -> None:
        now = time.monotonic()
        if now >= self._next_scan and (self._waiter is None or now - self.started >= _FAST_S):
            self._scan()
            self._next_scan = now + (0.0 if now - self.started < _STARTUP_S else _SCAN_EVERY_S)
        if not self._pids:
            return
        with self._lock:
            pids = dict(self._pids)
        up: dict[str, list[int]] = {}
        for pid, (host, _) in pids.items():
            if self._alive(pid):
                up.setdefault(host, []).append(pid)
        gone = sorted({h for h, _ in pids.values()} - set(up))
        if not gone:
            return
        with self._lock:  # the waiter's order, from when it saw the ends: the first host, alone
            ended = sorted(self._ended)
        self._judge(pids, up, gone, ended, now)

    def seen_hosts(self) -> set[str]:
        """The hosts whose connection was seen up at some look."""
        with self._lock:
            return {h for h, _ in self._pids.values()}

    def never_seen(self) -> tuple[str, ...]:
        """The remote hosts (``hosts`` less ``here``) whose connection was never seen, in host order."""
        seen = self.seen_hosts()
        return tuple(h for h in self.remote if h not in seen)

    def finish(self) -> None:
        """The launcher has exited: stop, and judge the ends the waiter saw that no poll got to (the launcher may
        exit within a poll's interval of the first end)."""
        self.stop()
        if self.lost is not None or self.note or self._waiter is None:
            return
        with self._lock:
            ended, pids = sorted(self._ended), dict(self._pids)
        if ended:
            gone = sorted({pids[p][0] for _, p, _ in ended})
            self._judge(pids, {h: [] for h, _ in pids.values() if h not in gone}, gone, ended, ended[0][0])

    def _judge(self, pids: dict[int, tuple[str, str]], up: dict[str, list[int]], gone: list[str],
               ended: list[tuple[float, int, bool]], now: float) -> None:
        """Keep the first loss as :attr:`lost` when it came alone, else say why not (:attr:`note`); stop."""
        if ended:
            first = pids[ended[0][1]][0]
            # another host's connection ended in the same wake-up of the waiter, or nearly: no order to go by
            together = any(t - ended[0][0] < 0.002 and pids[p][0] != first for t, p, _ in ended[1:])
            up = {h: v for h, v in up.items() if h != first} | {h: [] for h in gone if h != first}
            gone = [first] if not together else gone
            calm = ended[0][2]
        else:
            calm = self._alive(self.launcher_pid) and self._quiet()
        unseen = self.never_seen()
        all_seen = len(unseen) <= (0 if self.here else 1)  # not told apart: one may be the launcher's own node
        alone = len(gone) == 1 and bool(up) and calm and all_seen
        self.stop()  # only the first loss can be the cause
        if not alone:
            self.note = (f"the launcher's connections to {', '.join(gone)} ended "
                         + ("together (no order to go by)" if len(gone) > 1 else
                            "with no other host's connection up" if not up else
                            "after a rank recorded a failure or exited, or with the launcher" if not calm else
                            f"while the connection to {', '.join(unseen)} was never seen (it may have ended "
                            f"first, unseen)"))
        if alone:
            pid, (host, command) = next((p, hc) for p, hc in pids.items() if hc[0] == gone[0])
            self.lost = LostChannel(host=host, pid=pid, command=command, still_up=sorted(up),
                                    after_s=round(now - self.started, 1))
