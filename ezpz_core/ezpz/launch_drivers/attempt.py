"""Run one attempt of a launched job under an idle-output watchdog, keeping its log.

The launcher runs in its own process group (session), its standard output and
error merged into one pipe that a thread copies, byte for byte, to our output
and to the attempt's log file. If nothing arrives for ``idle_timeout_s``
seconds the watchdog ends the job: SIGTERM to the group, SIGKILL after
``grace_s``, then SIGKILL to any process still carrying this launch's marker
here (a rank that left the group). Like GNU ``timeout``, that attempt's status is 124.

Once a rank has written a failure record (``failure_dir``), the launcher has
``failure_grace_s`` seconds to end the job itself; a launcher still waiting
then (Open MPI aborting towards a node it can no longer reach) is ended the
same way, so a failure the ranks already named does not wait for the watchdog.
Sooner still, when ``names_host`` (asked once a second while records exist)
says the records already name a host to exclude, the attempt is ended
:data:`SETTLE_S` seconds later (for the other ranks' records to land): the
launcher would only be waiting for the lost node. With ``channel_hosts``, the
launcher's connections to those hosts are watched
(:class:`~ezpz.launch_drivers.host_channels.HostChannels`): the first to end
on its own names the host when the launcher names none.

Interrupts are handled by :class:`Interrupts` (one for the whole retry loop):
the first SIGINT/SIGTERM/SIGHUP is forwarded to the job's group and stops the
loop; a second sends SIGTERM, a third SIGKILL; and ``grace_s`` after the first
the job is killed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import IO

from attrs import field

from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen
from ezpz.launch_drivers.base import Command
from ezpz.launch_drivers.host_channels import HostChannels, LostChannel
from ezpz.launch_drivers.marked import marked_processes
from ezpz.launch_drivers.run import exit_code

__all__ = ["SETTLE_S", "TIMEOUT_STATUS", "AttemptResult", "Interrupts", "PROGRESS", "run_attempt"]

TIMEOUT_STATUS = 124
"""The status of an attempt the watchdog ended (GNU ``timeout``'s)."""

PROGRESS = re.compile(rb"\bstep[ =:]+\s*\d+", re.IGNORECASE)
"""A training-step line (``step=5``, ``[ezpz] step    5``): the attempt got past start-up."""

_STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SETTLE_S = 2.0
"""After the records first name a host: how long the other ranks get to write theirs before the attempt ends."""


@frozen(kw_only=True)
class AttemptResult:
    """What one attempt did: its status, whether the watchdog or an interrupt ended it, and what was seen."""

    attempt: int
    status: int
    timed_out: bool = False
    interrupted: bool = False
    idle_s: float = 0.0
    wall_s: float = 0.0
    progress: bool = False
    alive_ranks: tuple[int, ...] = field(default=(), converter=as_tuple)
    """Ranks (on this host) still running when the watchdog fired: the silent ones."""
    ended_after_failure: bool = False
    """The launcher was still running ``failure_grace_s`` after the first failure record, and was ended."""
    ended_on_named_host: bool = False
    """The records named a host (``names_host``), and the attempt was ended without waiting for the launcher."""
    ended_by_watch: bool = False
    """The caller's ``watch`` asked for the attempt to end (e.g. ``--replace-stragglers``), and it was ended."""
    lost_channel: LostChannel | None = None
    """The launcher's connection to a host that ended first, before any rank recorded a failure or exited
    (:mod:`ezpz.launch_drivers.host_channels`; watched only when ``channel_hosts`` is given)."""
    channel_note: str = ""
    """Why a connection that ended was not kept as the cause."""
    unseen_hosts: tuple[str, ...] = field(default=(), converter=as_tuple)
    """The remote hosts whose connection was never seen (watched hosts less ``channel_here``)."""
    channel_here: tuple[str, ...] = field(default=(), converter=as_tuple)
    """The watched hosts that are the launcher's own node (empty: not known, or not watched)."""
    channels_settled: bool = False
    """The watcher's last look before the first connection ended found every connection it knew up and none new
    (:attr:`~ezpz.launch_drivers.host_channels.HostChannels.settled`)."""
    log: Path | None = None


class Interrupts:
    """Counts SIGINT/SIGTERM/SIGHUP for the whole supervised run and passes them to the running job's group."""

    def __init__(self) -> None:
        self.count = 0
        self.first_at = 0.0
        self.signum = 0
        self.group: int | None = None
        self.wake = threading.Event()

    @property
    def stopped(self) -> bool:
        return self.count > 0

    def _signal_group(self, signum: int) -> None:
        if self.group is not None:
            try:
                os.killpg(self.group, signum)
            except (ProcessLookupError, PermissionError):
                pass

    def on_signal(self, signum: int, _frame: FrameType | None = None) -> None:
        self.count += 1
        if self.count == 1:
            self.first_at, self.signum = time.monotonic(), signum
        self._signal_group(signum if self.count == 1 else signal.SIGTERM if self.count == 2 else signal.SIGKILL)
        self.wake.set()

    @contextmanager
    def installed(self) -> Iterator[Interrupts]:
        """Handle the stop signals while inside (main thread only; elsewhere nothing is installed)."""
        main = threading.current_thread() is threading.main_thread()
        saved = {s: signal.signal(s, self.on_signal) for s in _STOP} if main else {}
        try:
            yield self
        finally:
            for s, handler in saved.items():
                signal.signal(s, handler)

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` unless interrupted first; True if the wait ran out uninterrupted."""
        if self.stopped:
            return False
        self.wake.wait(max(0.0, seconds))
        return not self.stopped


class _Pump(threading.Thread):
    """Copies the job's merged output to ``sink`` and the log, noting when it last spoke and any step line."""

    def __init__(self, fd: int, sink: IO[bytes] | None, log: IO[bytes] | None) -> None:
        super().__init__(name="ezpz-output-pump", daemon=True)
        self.fd, self.sink, self.log = fd, sink, log
        self.last = time.monotonic()
        self.progress = False
        self._tail = b""

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.last = time.monotonic()
            if not self.progress:
                self.progress = PROGRESS.search(self._tail + chunk) is not None
                self._tail = chunk[-64:]
            for out in (self.sink, self.log):
                if out is not None:
                    try:
                        out.write(chunk)
                        out.flush()
                    except (OSError, ValueError):  # a closed terminal must not stop the draining
                        pass
        os.close(self.fd)


def _has_record(directory: Path) -> bool:
    try:
        return any(e.name.startswith("rank-") and e.name.endswith(".json") for e in os.scandir(directory))
    except OSError:
        return False


def _kill_marked(launch_id: str, attempt: int) -> None:
    for p in marked_processes(launch_id):
        if p.attempt == str(attempt):
            try:
                os.kill(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _end_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the job's process group; SIGKILL it if still there after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _open_log(path: Path | None) -> IO[bytes] | None:
    """The attempt's output log, appended to; None (said once) when it cannot be opened: the job runs anyway."""
    if path is None:
        return None
    try:
        return path.open("ab")
    except OSError as error:
        from ezpz.primitives import bookkeeping_dir

        bookkeeping_dir.write_failed(path, what="attempt output log", error=error)
        return None


def run_attempt(command: Command, *, attempt: int, launch_id: str, environ: Mapping[str, str],
                interrupts: Interrupts, idle_timeout_s: float | None = None, grace_s: float = 10.0,
                log_path: Path | None = None, sink: IO[bytes] | None = None, failure_dir: Path | None = None,
                failure_grace_s: float | None = None, names_host: Callable[[], bool] | None = None,
                watch: Callable[[], bool] | None = None,
                channel_hosts: Sequence[str] | None = None, channel_here: Sequence[str] = ()) -> AttemptResult:
    """Run ``command`` once (raises OSError if it cannot start); see the module docstring.

    ``watch`` is called about once a second while the job runs; when it returns True the job is ended.
    ``channel_hosts``: the hosts whose launcher connections to watch (:class:`HostChannels`); ``channel_here``:
    those that are the launcher's own node (no connection).
    """
    env = dict(environ)
    env.update(command.env)
    read_fd, write_fd = os.pipe()
    log = _open_log(log_path)
    started = time.monotonic()
    try:
        try:
            proc = subprocess.Popen(command.argv, env=env, stdin=subprocess.DEVNULL, stdout=write_fd,
                                    stderr=write_fd, start_new_session=True)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        pump = _Pump(read_fd, sink, log)
        pump.start()
        interrupts.group = proc.pid
        channels = HostChannels(proc.pid, channel_hosts, failure_dir, here=channel_here) if channel_hosts else None
        alive: tuple[int, ...] = ()
        timed_out, idle, after_failure, on_named, by_watch = False, 0.0, False, False, False
        first_record: float | None = None
        named_at: float | None = None
        next_look = next_watch = 0.0
        try:
            while proc.poll() is None:
                if interrupts.wake.wait(0.2):
                    interrupts.wake.clear()
                now = time.monotonic()
                idle = now - pump.last
                if channels is not None:
                    if interrupts.stopped or timed_out or after_failure or on_named or by_watch:
                        channels.stop()  # ezpz itself is ending the job: connections close in any order
                    channels.poll()
                if failure_dir is not None and now >= next_look and (first_record is None or named_at is None):
                    next_look = now + 1.0
                    if first_record is None and _has_record(failure_dir):
                        first_record = now
                    if first_record is not None and names_host is not None and named_at is None and names_host():
                        named_at = now
                if watch is not None and not by_watch and now >= next_watch:
                    next_watch = now + 1.0
                    by_watch = watch()
                if interrupts.stopped and now - interrupts.first_at > grace_s:
                    _end_group(proc, 0.0)
                elif named_at is not None and now - named_at > SETTLE_S:
                    on_named = True
                    _end_group(proc, grace_s)
                elif first_record is not None and failure_grace_s is not None \
                        and now - first_record > failure_grace_s:
                    after_failure = True
                    _end_group(proc, grace_s)
                elif by_watch:
                    _end_group(proc, grace_s)
                elif not interrupts.stopped and idle_timeout_s and idle >= idle_timeout_s:
                    timed_out = True
                    alive = tuple(sorted({p.rank for p in marked_processes(launch_id)
                                          if p.rank is not None and p.attempt == str(attempt)}))
                    _end_group(proc, grace_s)
        finally:
            if channels is not None:
                channels.finish()
            if proc.poll() is None:  # an exception (not a signal) got us here
                _end_group(proc, 0.0)
            proc.wait()
            interrupts.group = None
            if timed_out or after_failure or on_named or by_watch:
                _kill_marked(launch_id, attempt)
            pump.join(timeout=10.0)
        status = TIMEOUT_STATUS if timed_out else exit_code(proc.returncode)
        return AttemptResult(attempt=attempt, status=status, timed_out=timed_out, interrupted=interrupts.stopped,
                             idle_s=round(idle, 1), wall_s=round(time.monotonic() - started, 1),
                             progress=pump.progress, alive_ranks=alive, ended_after_failure=after_failure,
                             ended_on_named_host=on_named, ended_by_watch=by_watch, log=log_path,
                             lost_channel=channels.lost if channels is not None and not (
                                 interrupts.stopped or timed_out or after_failure or on_named or by_watch) else None,
                             channel_note=channels.note if channels is not None else "",
                             unseen_hosts=channels.never_seen() if channels is not None else (),
                             channel_here=channels.here if channels is not None else (),
                             channels_settled=channels is not None and channels.settled)
    finally:
        if log is not None:
            log.close()
