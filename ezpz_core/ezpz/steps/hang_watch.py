"""The hang watchdog: a daemon thread per rank that names a training step running past its learned budget.

``setup()`` starts it (:func:`start`), ``teardown()`` stops it (:func:`stop`).
It reads the runtime's :class:`~ezpz.steps.clock.StepClock` (the main thread
only assigns two fields per ``rt.step()``) every ``poll`` seconds and asks
:func:`ezpz.steps.hang_budget.hang_budget` for the current step's budget. Only a
learned budget fires: during the warm-up (compiling, the first collectives)
the collective timeout ``EZPZ_TIMEOUT`` alone applies.

A rank whose step runs past its budget holds a **stall roll call** in the
rendezvous store: it posts where it is (its step, how long, the main
thread's frame), and every rank whose own step has run past half its budget
answers the same way. The ranks that never answer within the grace are the
ones that stopped answering (frozen, dead, cut off): the first verdict
written to the store names them and their hosts, and every stalled rank
writes a ``hang`` failure record with the step and the budget (how it was
derived), logs ``rank_failed`` and exits with :data:`HANG_EXIT_STATUS`, so
the launcher ends the job and ``ezpz launch --auto-retry`` can exclude the
host. A store that does not answer is rank 0's: then rank 0 is named.

Nothing here raises into the training loop, and the thread never keeps the
process alive (daemon, and :func:`stop` ends it at once).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from ezpz.primitives import logger as _log
from ezpz.steps import preemption
from ezpz.steps.hang_budget import Budget, hang_budget

if TYPE_CHECKING:
    from ezpz.inputs.settings import HangSettings
    from ezpz.steps.clock import StepClock

__all__ = ["HANG_EXIT_STATUS", "start", "stop", "watching"]

HANG_EXIT_STATUS = 124
"""The status a rank exits with after its stalled step was named (GNU ``timeout``'s: it ran out of time)."""
_PREFIX = "ezpz_stall"
_VERDICT_READ_S = 2.0
"""How long rank 0, whose process holds the store, stays after the verdict so every stalled rank can read it."""
_MAX_ROLL = 4096

_state: dict[str, Any] = {}


def start(clock: StepClock, *, rank: int, world_size: int, host: str, timeout_s: float, settings: HangSettings,
          grace_s: float = 5.0) -> None:
    """Watch ``clock`` on a daemon thread (replacing a previous watch).

    With budgets off (``EZPZ_HANG_BUDGET=0``) it never names a stall, but still lets a long step learn of a
    peer's preemption (:func:`ezpz.steps.preemption.check_store`).
    """
    stop()
    watch = _Watch(clock, rank=rank, world_size=world_size, host=host, timeout_s=timeout_s, settings=settings,
                   grace_s=min(grace_s, max(settings.floor_s / 2, 0.5)))
    _state["watch"] = watch
    watch.start()


def stop() -> None:
    """Stop the watchdog (``teardown()``); returns at once, the thread ends within one poll."""
    watch = _state.pop("watch", None)
    if watch is not None:
        watch.halt.set()


def watching() -> bool:
    """Whether a watchdog is running in this process."""
    watch = _state.get("watch")
    return watch is not None and watch.is_alive()


def _main_frame() -> str:
    """Where the main thread is now: ``file:line in function`` of its innermost Python frame."""
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    if frame is None:
        return "unknown"
    code = frame.f_code
    return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"


class _Watch(threading.Thread):
    def __init__(self, clock: StepClock, *, rank: int, world_size: int, host: str, timeout_s: float,
                 settings: HangSettings, grace_s: float) -> None:
        super().__init__(name="ezpz-hang-watch", daemon=True)
        self.clock, self.rank, self.world_size, self.host = clock, rank, world_size, host
        self.timeout_s, self.settings, self.grace_s = timeout_s, settings, grace_s
        self.poll_s = max(0.05, min(1.0, settings.floor_s / 10))
        self.halt = threading.Event()
        self._seen = -1
        self._budget = Budget(timeout_s, False, "")
        self._next_look = 0.0
        self._posted = False

    def budget(self) -> Budget:
        """The budget for the current step, recomputed only when a step has ended since the last look."""
        count = self.clock.count
        if count != self._seen:
            self._seen = count
            self._budget = hang_budget(self.clock.recent(), count, self.settings, self.timeout_s)
        return self._budget

    def run(self) -> None:
        try:
            while not self.halt.wait(self.poll_s):
                since = self.clock.since_last()
                if since is None:  # no step ended yet: start-up is EZPZ_TIMEOUT's
                    continue
                if preemption.requested():  # the ranks are agreeing on a stop step: not a hang
                    continue
                if since > 2.0 and time.monotonic() >= self._next_look:  # peers at a preemption boundary?
                    self._next_look = time.monotonic() + 1.0
                    if preemption.check_store():
                        continue
                budget = self.budget()
                if not budget.learned:
                    continue
                if since > budget.seconds or (self.world_size > 1 and since > budget.seconds / 2
                                              and self._called()):
                    self._stalled(budget)
                    return
        except Exception as err:  # the watchdog must never take the rank down by itself
            _log.get_logger("ezpz.failures").warning("hang_watch_failed", error=repr(err)[:300])

    # -- the stall roll call ------------------------------------------------------------------------------------
    def _gen(self) -> Any:
        from ezpz.launch_env import store

        rdzv = store.current()
        return rdzv, (rdzv.gen if rdzv is not None else None)

    def _bounded(self, fn: Any, seconds: float) -> Any:
        from ezpz.launch_env.store import run_bounded

        return run_bounded(fn, seconds, lambda: TimeoutError("the rendezvous store did not answer"))

    def _called(self) -> bool:
        """Whether another rank has started a stall roll call (looked at only while this step is long)."""
        _, gen = self._gen()
        if gen is None:
            return False
        try:
            return bool(self._bounded(lambda: gen.check([f"{_PREFIX}/call"]), 2.0))
        except Exception:
            return False

    def _stalled(self, budget: Budget) -> None:
        step = self.clock.count + 1
        since = self.clock.since_last() or 0.0
        frame = _main_frame()
        missing, hosts, said = self._roll_call(step, since, frame)
        budget_text = f"{budget.seconds:g} s: {budget.how}"
        if missing:
            named = ", ".join(f"{r} (host {hosts[r]})" if r in hosts else str(r) for r in missing[:32])
            line = (f"rank(s) {named} stopped answering: rank {self.rank} stalled in step {step} for {since:.1f} s, "
                    f"past its hang budget {budget.seconds:g} s")
        else:
            line = (f"rank {self.rank} (host {self.host}) stalled in step {step} for {since:.1f} s, past its hang "
                    f"budget {budget.seconds:g} s; {said}; main thread at {frame}")
        from ezpz.failures.capture import record_event

        record_event("hang", line, f"hang budget: {budget.how}", missing_ranks=missing,
                     missing_hosts=[hosts[r] for r in missing if r in hosts], step=step, budget=budget_text)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        if self.rank == 0 and self.world_size > 1:  # the store lives here: let the others read the verdict first
            self.halt.wait(_VERDICT_READ_S)
        if not self.halt.is_set():  # teardown() did not stop us meanwhile: the step will never end
            from ezpz.launch_env.pmi_release import finalize_now

            finalize_now(2.0)  # under Hydra: so mpiexec reports this status, not "Hangup (signal 1)"
            os._exit(HANG_EXIT_STATUS)

    def _roll_call(self, step: int, since: float, frame: str) -> tuple[list[int], dict[int, str], str]:
        """The ranks that did not answer (with their hosts), and what the others said."""
        if self.world_size <= 1:
            return [], {}, "a single process: no peers to ask"
        rdzv, gen = self._gen()
        if gen is None:
            return [], {}, "no rendezvous store to ask the peers"
        world = min(self.world_size, _MAX_ROLL)
        note = json.dumps({"step": step, "stalled_s": round(since, 2), "frame": frame[:300]})
        self._posted = False
        try:
            verdict = self._bounded(lambda: self._ask(gen, world, note), self.grace_s + 10.0)
        except Exception:  # the store lives with rank 0: no answer means rank 0 stopped answering
            if self.rank == 0:
                return [], {}, "the rendezvous store did not answer"
            if self._posted:  # it answered this roll call before: rank 0 ended after its own verdict
                return [], {}, "the rendezvous store went away during the roll call (rank 0 ended)"
            first = rdzv.launch.hosts[0] if rdzv.launch.hosts else rdzv.addr
            return [0], {0: first}, "the rendezvous store (rank 0's) did not answer"
        missing = [r for r in verdict.get("missing", []) if isinstance(r, int) and r != self.rank]
        hosts = {int(k): str(v) for k, v in verdict.get("hosts", {}).items() if str(k).isdigit()}
        return missing, hosts, f"{verdict.get('answered', '?')} rank(s) answered the stall roll call"

    def _ask(self, gen: Any, world: int, note: str) -> dict[str, Any]:
        gen.set(f"{_PREFIX}/call", "1")
        gen.set(f"{_PREFIX}/rank/{self.rank}", note)
        self._posted = True
        deadline = time.monotonic() + self.grace_s
        key = f"{_PREFIX}/verdict"
        while True:
            if gen.check([key]):
                verdict: dict[str, Any] = json.loads(gen.get(key))
                return verdict
            missing = [r for r in range(world) if not gen.check([f"{_PREFIX}/rank/{r}"])]
            if not missing or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        from ezpz.launch_env.store import current

        rdzv = current()
        arrived = rdzv.arrived() if rdzv is not None else {}
        mine = json.dumps({"missing": missing, "hosts": {str(r): arrived[r] for r in missing if r in arrived},
                           "answered": world - len(missing), "by": self.rank})
        first: dict[str, Any] = json.loads(gen.compare_set(key, "", mine))  # the first verdict written is everyone's
        return first
