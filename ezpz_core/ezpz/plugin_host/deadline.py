"""A deadline on every hook call (``EZPZ_HOOK_TIMEOUT``).

A hook is third-party code that may block forever on a wedged device or
driver, and Python cannot kill a thread. So hook calls run on one reusable
daemon worker thread, ``ezpz-hooks``, while the calling thread watches it:

- the worker marks which plugin's hook it is in (:func:`calling`);
- a quarter of the deadline into one call, the watcher logs ``hook_slow``
  naming the plugin, so a slow probe shows in the logs;
- at the deadline it records the worker's stack, abandons the worker (the
  next hook call starts a fresh one) and raises
  :class:`~ezpz.errors.PluginTimeoutError` in the caller.

One hand-off per hook (not per plugin); a call made from the worker itself
runs inline. What an abandoned hook can still hold is documented in
``docs/plugins.md``: the thread itself (a daemon, so it never blocks exit),
any lock it took, and the whole interpreter if it is stuck in C code that does
not release the GIL, which no in-process deadline can interrupt.
"""

from __future__ import annotations

import _thread
import os
import sys
import threading
import time
from collections.abc import Callable
from _queue import SimpleQueue  # the C queue: `queue` costs an import
from typing import Any, NamedTuple, TypeVar

__all__ = ["HookTimeout", "called", "calling", "run_watched"]

T = TypeVar("T")
_STACK_FRAMES = 12


class Call(NamedTuple):
    """The hook call the worker is in."""

    hook: str
    plugin: str
    started: float


class HookTimeout(Exception):
    """Raised in the caller when ``call`` ran past ``timeout_s``; ``frames`` is where the worker was."""

    def __init__(self, call: Call, timeout_s: float, frames: list[Any]) -> None:
        self.call, self.timeout_s, self.frames = call, timeout_s, frames
        super().__init__(f"{call.plugin}: {call.hook} ran past {timeout_s:g}s")

    def __reduce__(self) -> tuple[Any, ...]:  # survives pickling, like every ezpz error (ezpz.errors)
        from ezpz.errors import _rebuild

        return _rebuild, (type(self), self.args, dict(self.__dict__))

    @property
    def where(self) -> str:
        """``file:line in function`` of the plugin's outermost frame (where its code was entered)."""
        f = self.frames[0] if self.frames else None
        return f"{f.filename}:{f.lineno} in {f.name}" if f else "unknown (the thread had finished)"

    @property
    def stack(self) -> str:
        import traceback

        return "".join(traceback.format_list(self.frames))


class _Job:
    __slots__ = ("done", "error", "fn", "result")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.result: Any = None
        self.error: BaseException | None = None


class _Worker:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.jobs: SimpleQueue[_Job] = SimpleQueue()
        self.current: Call | None = None
        self.abandoned = False
        self.thread = threading.Thread(target=self._loop, name="ezpz-hooks", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        _local.worker = self
        while not self.abandoned:
            job = self.jobs.get()
            try:
                job.result = job.fn()
            except BaseException as err:  # every fault, Ctrl-C included, goes back to the caller
                job.error = err
            self.current = None
            job.done.release()

    def stack(self) -> list[Any]:
        """The worker's frames (``traceback.FrameSummary``) from the plugin's inward; ezpz's and threading's dropped."""
        import traceback

        frame = sys._current_frames().get(self.thread.ident or -1)
        if frame is None:
            return []
        frames = traceback.extract_stack(frame)
        ours = (os.path.dirname(__file__), threading.__file__)
        start = next((i for i, f in enumerate(frames) if not f.filename.startswith(ours)), 0)
        return list(frames[start:][-_STACK_FRAMES:])


_local = threading.local()
_worker: _Worker | None = None
_start_lock = threading.Lock()


def _get_worker() -> _Worker:
    global _worker
    with _start_lock:
        if _worker is None or _worker.pid != os.getpid():  # none yet, abandoned, or we are a forked child
            _worker = _Worker()
        return _worker


def calling(hook: str, plugin: str) -> None:
    """Mark the start of one plugin's hook call on this worker (a no-op on other threads)."""
    worker = getattr(_local, "worker", None)
    if worker is not None:
        worker.current = Call(hook, plugin, time.monotonic())


def called() -> None:
    """Mark the end of the current hook call on this worker."""
    worker = getattr(_local, "worker", None)
    if worker is not None:
        worker.current = None


def run_watched(fn: Callable[[], T], timeout_s: float, on_slow: Callable[[Call, float], None]) -> T:
    """Run ``fn`` on the hook worker; raise :class:`HookTimeout` if one marked call outlives ``timeout_s``.

    ``on_slow(call, elapsed)`` is called once per call that passes a quarter of the deadline.
    """
    if getattr(_local, "worker", None) is not None:  # already on the worker: no second hand-off
        return fn()
    global _worker
    worker = _get_worker()
    job = _Job(fn)
    worker.jobs.put(job)
    warn_at = timeout_s / 4
    warned: Call | None = None
    wait = warn_at
    while not job.done.acquire(timeout=max(wait, 0.001)):
        call = worker.current
        if call is None:  # between calls: look again soon
            wait = min(warn_at, 0.05)
            continue
        elapsed = time.monotonic() - call.started
        if elapsed >= timeout_s:
            stack = worker.stack()
            if worker.current is call:
                worker.abandoned = True
                with _start_lock:
                    if _worker is worker:
                        _worker = None
                from ezpz.primitives.abandoned_threads import abandon

                # If the hook returns later, let it before the interpreter finalizes; one stuck for good is left be.
                abandon(worker.thread, wait_s=2.0, must_finish=False, what=f"{call.plugin}: {call.hook}")
                raise HookTimeout(call, timeout_s, stack)
            wait = 0.001
            continue
        if elapsed >= warn_at and warned is not call:
            warned = call
            on_slow(call, elapsed)
        wait = (timeout_s if warned is call else warn_at) - elapsed
    if job.error is not None:
        raise job.error
    return job.result  # type: ignore[no-any-return]
