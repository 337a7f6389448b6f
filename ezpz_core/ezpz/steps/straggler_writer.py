"""Writing the straggler report off the training thread: one writer thread, the newest report wins.

Rank 0 hands each report to :meth:`ReportWriter.submit` as two functions that
build files' contents: the light one (the small report ``ezpz launch``
follows) and the heavy one (the history, turned from tensors into JSON), and
returns at once. A daemon thread writes each file atomically (a temporary file
beside it, then a rename), into the folder or, where it cannot be written, its
per-user fallback (:mod:`ezpz.primitives.bookkeeping_dir`: one warning says
where). If the thread is still busy when the next report comes, the waiting
one is replaced: a slow disk costs reports on disk, never steps.

The heavy file is written at most :data:`DUTY` of the time: after a write that
took ``w`` seconds the next waits ``w / DUTY``. The writer shares the
interpreter's lock with the training thread, and a C call that holds it (a
``tolist``, ``json.dumps``) makes the training thread wait; bounded this way,
the writer never has the lock for more than a twentieth of the job's time.
At exit (``atexit``, while the interpreter is still whole) the last report is
written, both files, waiting at most :data:`FLUSH_S` seconds, so the report of
a finished job is its last one.
"""

from __future__ import annotations

import atexit
import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ezpz.primitives import bookkeeping_dir
from ezpz.primitives import logger as _log
from ezpz.primitives.atomic_file import write_text_atomically

__all__ = ["DUTY", "FLUSH_S", "ReportWriter"]

DUTY = 0.05
"""The most of the time the writer spends on the heavy file."""

FLUSH_S = 10.0
"""How long the exit waits for the last report to be written (a hung file system must not hang the exit)."""

log = _log.get_logger("ezpz.steps.straggler_scores")

Build = Callable[[], Mapping[str, Any]]


class ReportWriter:
    """Writes ``{file name: JSON-able data}`` into ``folder`` on its own thread; the newest submission wins."""

    def __init__(self, folder: Path, duty: float = DUTY) -> None:
        self.folder = folder
        self.duty = duty
        self._cond = threading.Condition()
        self._pending: Build | None = None
        self._heavy: Build | None = None
        self._heavy_at = 0.0
        self._flushing = 0
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self.written = 0
        """Reports written."""
        self.replaced = 0
        """Reports replaced by a newer one before they were written."""
        self.write_s = 0.0
        """Seconds the thread spent building and writing, in all."""
        self.heavy_written = 0

    def submit(self, build: Build, heavy: Build | None = None) -> None:
        """Queue ``build`` and ``heavy`` (called on the writer's thread, ``heavy`` when due); returns at once."""
        with self._cond:
            if self._closed:
                return
            if self._pending is not None:
                self.replaced += 1
            self._pending = build
            self._heavy = heavy if heavy is not None else self._heavy
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ezpz-straggler-report", daemon=True)
                self._thread.start()
                atexit.register(self.close)
            self._cond.notify()

    def flush(self, timeout_s: float = FLUSH_S) -> bool:
        """Wait until everything submitted is written; False when ``timeout_s`` passed first."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._flushing += 1  # while someone flushes, the heavy file is due at once
            self._cond.notify_all()
            try:
                while self._pending is not None or self._heavy is not None or self._busy:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(left)
            finally:
                self._flushing -= 1
        return True

    def close(self, timeout_s: float = FLUSH_S) -> None:
        """Write what is pending, then stop the thread and wait for it, all within ``timeout_s``.

        Waiting matters at exit: a thread still inside torch when the interpreter finalizes aborts the process
        (``terminate called without an active exception``, see :mod:`ezpz.primitives.abandoned_threads`).
        """
        deadline = time.monotonic() + timeout_s
        done = self.flush(timeout_s)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(deadline - time.monotonic(), 0.0))
            done = done and not thread.is_alive()
        if not done:
            log.warning("straggler_report_not_flushed", folder=str(self.folder), waited_s=timeout_s)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    heavy_due = self._heavy is not None and (self._flushing > 0 or now >= self._heavy_at)
                    if self._pending is not None or heavy_due:
                        break
                    if self._closed:
                        return
                    self._cond.wait(max(self._heavy_at - now, 0.001) if self._heavy is not None else None)
                build, self._pending = self._pending, None
                heavy, self._heavy = (self._heavy, None) if heavy_due else (None, self._heavy)
                self._busy = True
            t0 = time.perf_counter()
            spent_heavy = 0.0
            try:
                if heavy is not None:  # first: the small file never names a history older than itself
                    self._write(heavy())
                    spent_heavy = time.perf_counter() - t0
                    self.heavy_written += 1
                if build is not None:
                    self._write(build())
                    self.written += 1
            except OSError as error:  # the report is for people: a full disk must not end training; said once
                bookkeeping_dir.write_failed(self.folder / "stragglers.json", what="straggler report", error=error)
            except Exception as error:  # nor a bad value
                log.warning("straggler_report_not_written", folder=str(self.folder),
                            error=f"{type(error).__name__}: {error}")
            finally:
                with self._cond:
                    self.write_s += time.perf_counter() - t0
                    if heavy is not None:
                        self._heavy_at = time.monotonic() + spent_heavy / self.duty
                    self._busy = False
                    self._cond.notify_all()

    def _write(self, files: Mapping[str, Any]) -> None:
        folder = bookkeeping_dir.usable_dir(self.folder, what="straggler report",
                                            fix="set EZPZ_FAILURE_DIR to a directory rank 0 can write")
        if folder is None:  # nothing writable: said once, the log lines still carry the report
            return
        for name, data in files.items():
            write_text_atomically(folder / name, json.dumps(data, separators=(",", ":")))
