"""Threads ezpz stopped waiting for, and an exit that never finalizes the interpreter under them.

ezpz bounds calls that can block forever by running them in a daemon thread
and giving up on it at a deadline (:func:`ezpz.launch_env.store.run_bounded`,
the hook deadline). Python cannot kill that thread. If it is still inside
torch's C++ when the interpreter finalizes, it wakes, cannot take the GIL,
and CPython ends it with ``pthread_exit``, whose unwinding through C++ frames
that may not throw aborts the process: ``terminate called without an active
exception``, SIGABRT, a job marked failed although the script finished.

So every abandoned thread is registered here, and an ``atexit`` handler (which
runs while the interpreter is still whole) waits for them to finish, up to
their own bound. A thread that finishes is harmless. One still running after
the wait is reported on stderr and, when it was marked ``must_finish`` (it is
inside a call that will return, such as a store request with a timeout), the
process leaves with ``os._exit(1)`` instead of finalizing under it.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time

__all__ = ["abandon", "pending"]

_lock = threading.Lock()
_threads: list[tuple[threading.Thread, float, bool, str]] = []
_registered = False


def abandon(thread: threading.Thread, *, wait_s: float, must_finish: bool, what: str) -> None:
    """Remember ``thread`` (given up on while running ``what``); at exit wait up to ``wait_s`` for it."""
    global _registered
    with _lock:
        _threads.append((thread, wait_s, must_finish, what))
        if not _registered:
            atexit.register(_at_exit)
            _registered = True


def pending() -> list[str]:
    """What the abandoned threads that are still running were doing."""
    with _lock:
        return [what for thread, _, _, what in _threads if thread.is_alive()]


def _at_exit() -> None:
    with _lock:
        threads = list(_threads)
    start = time.monotonic()
    stuck = []
    for thread, wait_s, must_finish, what in threads:
        thread.join(max(wait_s - (time.monotonic() - start), 0.0))
        if thread.is_alive():
            stuck.append((must_finish, what))
    if not stuck:
        return
    names = "; ".join(what for _, what in stuck)
    if any(must for must, _ in stuck):
        try:
            sys.stderr.write(f"ezpz: at exit, still inside torch: {names}; exiting without interpreter finalization "
                             "(a thread waking up during finalization would abort the process)\n")
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(1)
