"""Preemption: a SIGTERM becomes a stop at an agreed step boundary, a checkpoint and exit status 143.

:class:`Preemption` is the state ``rt.step()`` and ``rt.preempted`` read; the rest of this
module turns the signal into that state.

``setup()`` calls :func:`install` with the runtime. From the first
``rt.step()`` on, a SIGTERM no longer ends the rank at once
(:mod:`ezpz.failures.capture`): it is a request to stop at a step boundary.

- **Seen at once.** Python runs signal handlers only in the main thread, and
  not while it is blocked in a collective. A listener thread reads the
  signal's number from :func:`signal.set_wakeup_fd` as soon as it arrives, and
  posts this rank's step count (steps ended) to the rendezvous store.
- **Agreed at the boundary.** At its next ``rt.step()`` a rank waits (at most
  half the grace) until every rank has posted; the stop step is the largest
  count posted plus one: each rank finishes the step it was in, and a rank
  signalled a step later than another finds its peers still stepping with it.
  A rank stalled in a step (its peers waiting at the boundary) that never got
  the signal learns of it from the store through the hang watchdog.
- **Bounded.** ``EZPZ_PREEMPT_GRACE`` seconds after the signal a rank still
  alive (a collective that cannot complete, a checkpoint too slow) writes its
  record and exits with 143.

Each rank writes a ``preempted`` failure record at the agreed step, so
``ezpz launch --auto-retry`` blames no host.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ezpz.primitives import logger as _log

if TYPE_CHECKING:
    from ezpz.steps.clock import StepClock

__all__ = ["PREEMPTED_STATUS", "Preemption", "PreemptibleRank", "check_store", "install", "requested", "take_signal",
           "uninstall"]

PREEMPTED_STATUS = 128 + signal.SIGTERM
"""The status of a preempted rank and job: 143, what a process ended by SIGTERM reports to a shell or Slurm."""


class Preemption:
    """One rank's preemption state. ``requested`` is the only thing ``rt.step()`` reads per step."""

    __slots__ = ("requested", "stop_after", "reached", "agree", "on_stop")

    def __init__(self) -> None:
        self.requested = False
        self.stop_after: int | None = None
        self.reached = False
        self.agree: Callable[[int], int] | None = None
        """Given the steps ended here, the step every rank stops after (installed by ``setup()``)."""
        self.on_stop: Callable[[int], None] | None = None
        """Called once, at the agreed step (writes the ``preempted`` failure record)."""

    def at_boundary(self, count: int) -> None:
        """``rt.step()`` after a SIGTERM: agree on the stop step once; mark it reached; end a script that went on."""
        if self.reached:
            raise SystemExit(PREEMPTED_STATUS)  # rt.preempted was not heeded: end here, as every rank does
        if self.stop_after is None:
            self.stop_after = self.agree(count) if self.agree is not None else count
        if count >= self.stop_after:
            self.reached = True
            if self.on_stop is not None:
                self.on_stop(count)


class PreemptibleRank(Protocol):
    """What :func:`install` reads of the runtime: its preemption state, step clock and place in the job."""

    @property
    def preemption(self) -> Preemption: ...

    @property
    def step_clock(self) -> StepClock: ...

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...


_PREFIX = "ezpz_preempt"
_MAX_ROLL = 4096
_state: dict[str, Any] = {}


def install(runtime: PreemptibleRank, *, grace_s: float, record: Callable[..., Any]) -> None:
    """Arm preemption for ``runtime`` (replacing an earlier one); a listener thread where signals allow it.

    ``record`` writes this rank's failure record (:func:`ezpz.failures.capture.record_event`).
    """
    uninstall()
    p = runtime.preemption
    _state.update(runtime=runtime, grace_s=grace_s, lock=threading.Lock(), record=record)
    p.agree = _agree
    p.on_stop = _on_stop
    if threading.current_thread() is not threading.main_thread():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(read_fd)
        os.close(write_fd)
        return
    if previous != -1:  # someone else's (an event loop): theirs stays, we rely on the handler
        signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return
    listener = threading.Thread(target=_listen, args=(read_fd,), name="ezpz-preempt-listener", daemon=True)
    _state.update(read_fd=read_fd, write_fd=write_fd, listener=listener)
    listener.start()


def uninstall() -> None:
    """Stop the listener and give the wakeup fd back (``teardown()``)."""
    write_fd = _state.pop("write_fd", None)
    if write_fd is not None:
        if threading.current_thread() is threading.main_thread():
            try:
                if signal.set_wakeup_fd(-1) != write_fd:
                    pass
            except ValueError:
                pass
        try:
            os.write(write_fd, b"\0")  # the listener's signal to leave
        except OSError:
            pass
        listener = _state.pop("listener", None)
        if listener is not None:
            listener.join(timeout=1.0)
        for fd in (write_fd, _state.pop("read_fd", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
    _state.clear()


def armed() -> bool:
    """Whether a SIGTERM now means "stop at a step boundary": installed, and the script has called ``rt.step()``."""
    runtime = _state.get("runtime")
    return runtime is not None and runtime.step_clock.count > 0


def requested() -> bool:
    """Whether a preemption was requested on this rank."""
    runtime = _state.get("runtime")
    return runtime is not None and runtime.preemption.requested


def _listen(read_fd: int) -> None:
    while True:
        try:
            select.select([read_fd], [], [])
            data = os.read(read_fd, 512)
        except OSError:
            return
        if not data or 0 in data:
            return
        if signal.SIGTERM in data and armed():
            take_signal("SIGTERM")


def take_signal(how: str) -> bool:
    """This rank is asked to stop (its SIGTERM, or another rank's seen in the store): post its step; True if armed."""
    runtime = _state.get("runtime")
    if runtime is None or not armed():
        return False
    with _state["lock"]:
        if runtime.preemption.requested:
            return True
        count = runtime.step_clock.count
        _state.update(since=time.monotonic(), count=count, how=how)
        runtime.preemption.requested = True
    _state["at"] = time.time()
    _log.get_logger("ezpz.failures").warning("preemption_requested", how=how, steps_ended=count,
                                             grace_s=_state["grace_s"])
    record = _state.get("record")
    if record is not None:  # at once: a rank a launcher kills before the boundary still said it was stopped
        record("preempted", f"{how}: stopping at the next step boundary after step {count}",
               "preemption requested", step=count + 1, at=_state["at"])
    _post(runtime, count)
    threading.Thread(target=_deadline, name="ezpz-preempt-deadline", daemon=True).start()
    return True


def check_store() -> bool:
    """For a rank stalled in a step: has another rank posted a preemption? If so, take it as this rank's own."""
    runtime = _state.get("runtime")
    if runtime is None or runtime.preemption.requested or not armed():
        return False
    gen = _gen()
    if gen is None:
        return False
    try:
        posted = _bounded(lambda: gen.check([f"{_PREFIX}/requested"]), 2.0)
    except Exception:
        return False
    return bool(posted) and take_signal("another rank's SIGTERM, seen in the rendezvous store")


def _gen() -> Any:
    from ezpz.launch_env import store

    rdzv = store.current()
    return rdzv.gen if rdzv is not None else None


def _bounded(fn: Any, seconds: float) -> Any:
    from ezpz.launch_env.store import run_bounded

    return run_bounded(fn, seconds, lambda: TimeoutError("the rendezvous store did not answer"))


def _post(runtime: PreemptibleRank, count: int) -> None:
    gen = _gen()
    if gen is None or runtime.world_size <= 1:
        return
    try:
        _bounded(lambda: (gen.set(f"{_PREFIX}/rank/{runtime.rank}", str(count)), gen.set(f"{_PREFIX}/requested", "1")),
                 5.0)
    except Exception as err:
        _log.get_logger("ezpz.failures").warning("preemption_not_posted", error=repr(err)[:200])


def _agree(count: int) -> int:
    """The step every rank stops after: the largest count posted, plus one (each finishes the step it was in)."""
    runtime = _state.get("runtime")
    mine: int = _state.get("count", count - 1)
    if runtime is None or runtime.world_size <= 1:
        return mine + 1
    gen = _gen()
    world = min(runtime.world_size, _MAX_ROLL)
    deadline = _state.get("since", time.monotonic()) + _state.get("grace_s", 20.0) / 2
    posted: dict[int, int] = {runtime.rank: mine}

    def gather() -> None:
        while True:
            for r in range(world):
                if r not in posted and gen.check([f"{_PREFIX}/rank/{r}"]):
                    posted[r] = int(gen.get(f"{_PREFIX}/rank/{r}"))
            if len(posted) >= world or time.monotonic() >= deadline:
                return
            time.sleep(0.05)

    if gen is not None:
        try:
            _bounded(gather, max(deadline - time.monotonic(), 0.0) + 5.0)
        except Exception as err:
            _log.get_logger("ezpz.failures").warning("preemption_agreement_incomplete", error=repr(err)[:200])
    stop = max(posted.values()) + 1
    missing = [r for r in range(world) if r not in posted]
    _state.update(stop=stop, missing=missing)
    _log.get_logger("ezpz.failures").warning(
        "preemption_agreed", stop_after_step=stop, posted=len(posted), world_size=runtime.world_size,
        not_posted=", ".join(map(str, missing[:32])) or "none")
    return stop


def _on_stop(count: int) -> None:
    record_event = _state.get("record") or (lambda *a, **k: None)
    missing = _state.get("missing") or []
    note = f"; rank(s) {', '.join(map(str, missing[:32]))} never posted theirs" if missing else ""
    record_event("preempted", f"{_state.get('how', 'SIGTERM')}: every rank stops after step {count} (rt.step() "
                              f"count), the job saves it{note}", "preemption agreed at the step boundary",
                 step=count, at=_state.get("at"), replace_kind="preempted")
    _state["stopped"] = True


def _deadline() -> None:
    grace = float(_state.get("grace_s", 20.0))
    time.sleep(grace)
    runtime = _state.get("runtime")
    if runtime is None:  # teardown() ran: the script ended in time
        return
    record_event = _state.get("record") or (lambda *a, **k: None)
    record_event("preempted", f"{_state.get('how', 'SIGTERM')}: EZPZ_PREEMPT_GRACE ({grace:g} s) ran out before the "
                              f"rank ended (a collective that could not complete, or a slow checkpoint)",
                 "preemption grace ran out", step=runtime.step_clock.count + 1, at=_state.get("at"),
                 replace_kind="preempted")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    from ezpz.launch_env.pmi_release import finalize_now

    finalize_now(2.0)  # under Hydra: so mpiexec reports this status, not "Hangup (signal 1)"
    os._exit(PREEMPTED_STATUS)
