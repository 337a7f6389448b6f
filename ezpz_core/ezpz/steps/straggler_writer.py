"""Writing the straggler report off the training thread: one writer thread, the newest report wins.

Rank 0 hands each report to :meth:`ReportWriter.submit` as a function that
builds the files' contents (the expensive part: turning tensors into JSON) and
returns at once. A daemon thread writes each file atomically (a temporary file
beside it, then a rename). If the thread is still writing when the next report
comes, the waiting one is replaced: a slow disk costs reports on disk, never
steps. At exit (``atexit``, while the interpreter is still whole) the last
submitted report is written, waiting at most :data:`FLUSH_S` seconds, so the
report of a finished job is its last one.
"""

from __future__ import annotations

import atexit
import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ezpz.primitives import logger as _log
from ezpz.primitives.atomic_file import write_text_atomically

__all__ = ["FLUSH_S", "ReportWriter"]

FLUSH_S = 10.0
"""How long the exit waits for the last report to be written (a hung file system must not hang the exit)."""

log = _log.get_logger("ezpz.steps.straggler_scores")

Build = Callable[[], Mapping[str, Any]]


class ReportWriter:
    """Writes ``{file name: JSON-able data}`` into ``folder`` on its own thread; the newest submission wins."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._cond = threading.Condition()
        self._pending: Build | None = None
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self.written = 0
        """Reports written."""
        self.replaced = 0
        """Reports replaced by a newer one before they were written."""
        self.write_s = 0.0
        """Seconds the thread spent building and writing, in all."""

    def submit(self, build: Build) -> None:
        """Queue ``build`` (called on the writer's thread); returns at once."""
        with self._cond:
            if self._closed:
                return
            if self._pending is not None:
                self.replaced += 1
            self._pending = build
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ezpz-straggler-report", daemon=True)
                self._thread.start()
                atexit.register(self.close)
            self._cond.notify()

    def flush(self, timeout_s: float = FLUSH_S) -> bool:
        """Wait until everything submitted is written; False when ``timeout_s`` passed first."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._pending is not None or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout_s: float = FLUSH_S) -> None:
        """Write what is pending (bounded by ``timeout_s``), then stop the thread."""
        done = self.flush(timeout_s)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if not done:
            log.warning("straggler_report_not_flushed", folder=str(self.folder), waited_s=timeout_s)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._pending is None:
                    return
                build, self._pending, self._busy = self._pending, None, True
            t0 = time.perf_counter()
            try:
                files = build()
                self.folder.mkdir(parents=True, exist_ok=True)
                for name, data in files.items():
                    write_text_atomically(self.folder / name, json.dumps(data, separators=(",", ":")))
                self.written += 1
            except Exception as error:  # the report is for people: a full disk or a bad value must not end training
                log.warning("straggler_report_not_written", folder=str(self.folder),
                            error=f"{type(error).__name__}: {error}")
            finally:
                with self._cond:
                    self.write_s += time.perf_counter() - t0
                    self._busy = False
                    self._cond.notify_all()
