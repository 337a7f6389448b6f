"""Run a launcher command, pass signals on, and never leave a job behind.

The child runs in our process group, so a Ctrl-C typed at the terminal reaches
it directly (and is not sent twice); a signal sent to ezpz alone (the
scheduler's SIGTERM, ``kill -INT``) is forwarded. A second SIGINT/SIGTERM/SIGHUP
terminates the launcher, a third kills it and every process it started, and so
does still running ``grace_s`` seconds after the first. A job that a stop
signal ended without success exits ``128 + N`` for the first signal N (143
for the scheduler's SIGTERM), whatever status the launcher chose (torchrun's is 1).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import IO, Any

from ezpz.launch_drivers.base import Command

__all__ = ["exit_code", "run"]

_STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PASS = tuple(getattr(signal, s) for s in ("SIGUSR1", "SIGUSR2") if hasattr(signal, s))


def exit_code(returncode: int) -> int:
    """A shell-style status: ``128 + N`` for a child killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def _terminal_sent(signum: int) -> bool:
    """SIGINT typed at our terminal also reached the child (same foreground process group)."""
    if signum != signal.SIGINT:
        return False
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    for pid in [*_descendants(proc.pid), proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run(command: Command, *, environ: Mapping[str, str] | None = None, grace_s: float = 30.0,
        stdout: IO[Any] | None = None) -> int:
    """Run ``command`` to completion and return its exit status (raises OSError if it cannot start).

    ``stdout`` redirects the job's standard output (default: ours).
    """
    env = dict(os.environ if environ is None else environ)
    env.update(command.env)
    sys.stdout.flush()
    sys.stderr.flush()
    proc = subprocess.Popen(command.argv, env=env, stdout=stdout)
    state = {"count": 0, "since": 0.0, "signum": 0}

    def on_stop(signum: int, _frame: FrameType | None) -> None:
        state["count"] += 1
        if state["count"] == 1:
            state["since"], state["signum"] = time.monotonic(), signum
            if not _terminal_sent(signum):
                proc.send_signal(signum)
        elif state["count"] == 2:
            proc.terminate()
        else:
            _kill_tree(proc)

    def on_pass(signum: int, _frame: FrameType | None) -> None:
        proc.send_signal(signum)

    main = threading.current_thread() is threading.main_thread()
    saved = {s: signal.signal(s, on_stop if s in _STOP else on_pass) for s in (*_STOP, *_PASS)} if main else {}
    try:
        while True:
            try:
                status = exit_code(proc.wait(timeout=0.2))
                return 128 + int(state["signum"]) if state["count"] and status else status
            except subprocess.TimeoutExpired:
                if state["count"] and time.monotonic() - state["since"] > grace_s:
                    _kill_tree(proc)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
        if proc.poll() is None:  # an exception (not a signal) got us here
            _kill_tree(proc)
            proc.wait()
