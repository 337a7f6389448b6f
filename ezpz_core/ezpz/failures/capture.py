"""Write a :class:`~ezpz.failures.record.FailureRecord` when a rank that went through ``setup()`` ends abnormally.

``setup()`` calls :func:`install`; ``teardown()`` calls :func:`uninstall`.
Installed, this module

- chains ``sys.excepthook``: an uncaught exception is classified
  (:mod:`ezpz.failures.classify`); for a timeout or a lost peer the rank
  first holds a **roll call** in the rendezvous store (each failing rank
  reports, waits a short grace for the others; those that never report are
  the ranks that did not arrive) and logs ``rank_failed`` naming them and their
  hosts, then writes its record and hands the exception to the previous hook;
- catches SIGTERM (when nobody else handles it), writes a ``signal`` record,
  and dies of the same signal, so the exit status a launcher sees is unchanged.

Records are written only when ``EZPZ_FAILURE_DIR`` is set; the named log line
is written either way. Nothing here raises: a failure to record never hides
the failure itself.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from ezpz.primitives import logger as _log

if TYPE_CHECKING:  # classify/record/signatures load when a rank fails, not on every setup()
    from ezpz.failures.classify import Classified
    from ezpz.failures.record import FailureRecord
    from ezpz.failures.signatures import FailureSignature
    from ezpz.decisions import SetupPlan
    from ezpz.inputs.settings import SetupSettings

__all__ = ["ROLL_CALL_GRACE_S", "SigtermGate", "install", "install_for_setup", "installed", "record_event",
           "record_exception", "set_sigterm_gate", "uninstall"]

ROLL_CALL_GRACE_S = 5.0
"""How long a failing rank waits for the others to report in, at most (and at most a quarter of the timeout)."""

_state: dict[str, Any] = {}
_CATCH = (signal.SIGTERM,)


class SigtermGate(Protocol):
    """Who decides whether a SIGTERM is a preemption (:mod:`ezpz.steps.preemption`, set by ``setup()``)."""

    def requested(self) -> bool:
        """Whether a preemption was already requested on this rank."""

    def take_signal(self, how: str) -> bool:
        """Take the signal as a preemption request; False when it must end the rank now."""


def set_sigterm_gate(gate: SigtermGate | None) -> None:
    """Let ``gate`` turn a SIGTERM into a stop at a step boundary (None: a SIGTERM ends the rank, recorded)."""
    if gate is None:
        _state.pop("sigterm_gate", None)
    else:
        _state["sigterm_gate"] = gate


class _Capture:
    def __init__(self, *, rank: int, world_size: int, host: str, attempt: int, directory: str | None,
                 signatures: Sequence[FailureSignature] | Callable[[], Sequence[FailureSignature]],
                 timeout_s: float) -> None:
        self.rank, self.world_size, self.host, self.attempt = rank, world_size, host, attempt
        self.directory, self._signatures = directory, signatures
        self.grace_s = min(ROLL_CALL_GRACE_S, max(timeout_s / 4, 0.5))
        self.written: Path | None = None
        self.done = False
        self.kind = ""

    @property
    def signatures(self) -> tuple[FailureSignature, ...]:
        """The plugins' failure signatures, asked for at the first failure (setup() does not pay for them)."""
        if callable(self._signatures):
            try:
                self._signatures = tuple(self._signatures())
            except Exception as err:  # a failing rank still gets its record, classified without plugin help
                _log.get_logger("ezpz.failures").warning("failure_signatures_unavailable", error=repr(err))
                self._signatures = ()
        return tuple(self._signatures)


def installed() -> bool:
    return "capture" in _state


def install(*, rank: int, world_size: int, host: str, attempt: int, directory: str | None,
            signatures: Sequence[FailureSignature] | Callable[[], Sequence[FailureSignature]] = (),
            timeout_s: float = 300.0) -> None:
    """Start capturing failures of this rank (idempotent: a second call replaces the facts, not the hooks)."""
    _state["capture"] = _Capture(rank=rank, world_size=world_size, host=host, attempt=attempt, directory=directory,
                                 signatures=signatures, timeout_s=timeout_s)
    if "excepthook" not in _state:
        _state["excepthook"] = sys.excepthook
        sys.excepthook = _excepthook
    if threading.current_thread() is threading.main_thread():
        for sig in _CATCH:
            if sig in _state.get("signals", {}):
                continue
            previous = signal.getsignal(sig)
            if previous in (signal.SIG_DFL, None):  # someone else's handler stays theirs
                signal.signal(sig, _on_signal)
                _state.setdefault("signals", {})[sig] = previous


def install_for_setup(plan: SetupPlan, settings: SetupSettings,
                      signatures: Callable[[], Sequence[FailureSignature]]) -> None:
    """:func:`install` with what ``setup()`` knows: the plan's rank and layout, the attempt, the plugins' signatures."""
    from ezpz.launch_env.rendezvous import this_host

    install(rank=plan.launch.rank, world_size=plan.launch.world_size, host=this_host(plan.launch),
            attempt=settings.attempt, directory=settings.failure_dir, signatures=signatures,
            timeout_s=plan.timeout_s)


def uninstall() -> None:
    """Stop capturing; restore the previous excepthook and signal handlers (if still ours)."""
    hook = _state.pop("excepthook", None)
    if hook is not None and sys.excepthook is _excepthook:
        sys.excepthook = hook
    if threading.current_thread() is threading.main_thread():
        for sig, previous in _state.pop("signals", {}).items():
            if signal.getsignal(sig) is _on_signal:
                signal.signal(sig, previous)
    _state.pop("capture", None)
    _state.pop("sigterm_gate", None)


def record_exception(exc: BaseException) -> FailureRecord | None:
    """Classify ``exc``, hold a roll call when it is a timeout or lost peer, log it and write the record.

    For code that catches its own failure and still wants it recorded; the
    excepthook calls this too. Returns the record (also when nothing is written
    because ``EZPZ_FAILURE_DIR`` is unset), or None when not installed.
    """
    cap: _Capture | None = _state.get("capture")
    if cap is None:
        return None
    from ezpz.failures.classify import Classified, classify_exception

    found = classify_exception(exc, cap.signatures)
    gate: SigtermGate | None = _state.get("sigterm_gate")
    if gate is not None and gate.requested() and found.kind not in ("code_error", "oom"):  # a collective its preempted peers left
        return _write(cap, Classified("preempted", f"SIGTERM (preemption): the step could not complete: "
                                      f"{found.first_line}", found.exception_type, "preempted: " + found.how), (), ())
    missing_ranks: tuple[int, ...] = tuple(getattr(exc, "missing_ranks", ()) or ())
    missing_hosts: tuple[str, ...] = ()
    if found.kind in ("timeout", "lost_peer") and cap.world_size > 1:
        ranks, hosts = _roll_call(cap)
        missing_ranks = missing_ranks or ranks
        missing_hosts = hosts
    return _write(cap, found, missing_ranks, missing_hosts)


def _roll_call(cap: _Capture) -> tuple[tuple[int, ...], tuple[str, ...]]:
    from ezpz.launch_env import store

    rdzv = store.current()
    if rdzv is None or rdzv.gen is None:
        return (), ()
    try:
        missing, hosts = store.run_bounded(lambda: rdzv.roll_call(cap.grace_s), cap.grace_s + 3.0,
                                           lambda: TimeoutError("the store did not answer the roll call"))
    except Exception:  # the store is gone: it lives with rank 0, on the first host
        if cap.rank == 0:
            return (), ()
        return (0,), ((rdzv.launch.hosts[0],) if rdzv.launch.hosts else (rdzv.addr,))
    missing = [r for r in missing if r != cap.rank]
    return tuple(missing), tuple(hosts[r] for r in missing if r in hosts)


def record_event(kind: str, first_line: str, how: str, *, missing_ranks: Sequence[int] = (),
                 missing_hosts: Sequence[str] = (), step: int | None = None, budget: str = "",
                 at: float | None = None, replace_kind: str | None = None) -> FailureRecord | None:
    """Write this rank's record for a failure ezpz itself found (a stalled step, a preemption); log it.

    The first record a rank writes is the one kept: later exceptions (a collective that fails because the
    watchdog ended a peer) do not replace it, unless it is of ``replace_kind`` (a preemption's record at the
    signal, completed at the agreed step). ``at``: the record's time (default now). None when not installed.
    """
    cap: _Capture | None = _state.get("capture")
    if cap is None:
        return None
    from ezpz.failures.classify import Classified

    if replace_kind is not None and cap.kind == replace_kind:
        cap.done = False
    return _write(cap, Classified(kind, first_line, "", how), missing_ranks, missing_hosts, step=step, budget=budget,
                  at=at)


def _write(cap: _Capture, found: Classified, missing_ranks: Sequence[int], missing_hosts: Sequence[str], *,
           step: int | None = None, budget: str = "", at: float | None = None) -> FailureRecord:
    from ezpz.failures.record import FailureRecord, write_failure

    when: dict[str, Any] = {"time": at} if at is not None else {}
    record = FailureRecord(rank=cap.rank, host=cap.host, attempt=cap.attempt, kind=found.kind,
                           first_line=found.first_line, missing_ranks=missing_ranks, missing_hosts=missing_hosts,
                           exception_type=found.exception_type, step=step, budget=budget, **when)
    where = None
    if not cap.done:
        cap.kind = record.kind
    if cap.directory is not None and not cap.done:
        try:  # an unwritable directory is redirected or dropped, with one warning (ezpz.primitives.bookkeeping_dir)
            where = cap.written = write_failure(record, cap.directory)
        except OSError as err:
            from ezpz.primitives import bookkeeping_dir

            bookkeeping_dir.write_failed(Path(cap.directory) / f"rank-{record.rank}.json", what="failure record",
                                         error=err)
    cap.done = True
    absent = ""
    if record.missing_ranks:
        hosts = f" on {', '.join(record.missing_hosts)}" if record.missing_hosts else ""
        absent = f"rank(s) {', '.join(map(str, record.missing_ranks[:32]))}{hosts} did not arrive"
    extra = {"step": record.step, "budget": record.budget} if record.budget else {}
    _log.get_logger("ezpz.failures").error(
        "rank_failed", kind=record.kind, host=record.host, attempt=record.attempt, missing=absent or "none known",
        error=record.first_line, how=found.how, **extra,
        record=str(where) if where else ("not written (EZPZ_FAILURE_DIR unset)" if cap.directory is None
                                         else "not written (see the warning above)"))
    return record


def _excepthook(etype: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    try:
        if not isinstance(value, SystemExit):
            record_exception(value)
    except Exception:  # recording must never hide the failure
        pass
    previous = _state.get("excepthook") or sys.__excepthook__
    previous(etype, value, tb)


def _on_signal(signum: int, _frame: Any) -> None:
    gate: SigtermGate | None = _state.get("sigterm_gate")
    if signum == signal.SIGTERM and gate is not None:
        # a step loop: stop at the agreed step boundary. Later SIGTERMs change nothing (a launcher and the
        # scheduler may both send one); EZPZ_PREEMPT_GRACE bounds the rank's end
        if gate.requested() or gate.take_signal("SIGTERM"):
            return
    cap: _Capture | None = _state.get("capture")
    if cap is not None and not cap.done:
        name = signal.Signals(signum).name
        try:
            from ezpz.failures.classify import Classified

            _write(cap, Classified("signal", f"{name}: the rank was told to stop", "", f"caught {name}"), (), ())
        except Exception:
            pass
    previous = _state.get("signals", {}).get(signum, signal.SIG_DFL)
    signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # die of the same signal: the launcher sees what it would have seen
