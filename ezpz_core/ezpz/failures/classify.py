"""What kind of failure an exception is: ezpz's own knowledge first, then the plugins' signatures.

Order: exception types ezpz and torch define (out of memory, Ctrl-C, ezpz's
rendezvous errors, torch's distributed network errors), then the plugins'
:class:`~ezpz.failures.signatures.FailureSignature` patterns over the text of
the exception and its causes, then ``code_error``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ezpz.failures.signatures import FailureSignature, match_text
from ezpz.primitives.frozen_records import frozen

__all__ = ["Classified", "classify_exception", "exception_chain"]


@frozen
class Classified:
    """A kind, the line that shows it, and how it was decided (for the record and the log)."""

    kind: str
    first_line: str
    exception_type: str
    how: str
    blames_host: bool = False


def exception_chain(exc: BaseException, limit: int = 8) -> list[BaseException]:
    """``exc`` and its causes/contexts, outermost first, at most ``limit``, no cycles."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(seen) < limit and all(cur is not s for s in seen):
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__


def _by_type(exc: BaseException) -> tuple[str, str] | None:
    from ezpz.errors import RendezvousError, RendezvousTimeoutError

    if isinstance(exc, MemoryError):
        return "oom", "MemoryError: the host ran out of memory"
    torch = sys.modules.get("torch")
    oom = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if oom is not None and isinstance(exc, oom):
        return "oom", "torch.OutOfMemoryError: the device ran out of memory"
    if isinstance(exc, KeyboardInterrupt):
        return "signal", "KeyboardInterrupt (SIGINT)"
    if isinstance(exc, RendezvousTimeoutError):
        return "timeout", "ezpz RendezvousTimeoutError: not every rank arrived in time"
    if isinstance(exc, RendezvousError):
        return "lost_peer", "ezpz RendezvousError: the rendezvous store went away"
    dist = sys.modules.get("torch.distributed")
    network = getattr(dist, "DistNetworkError", None) if dist is not None else None
    if network is not None and isinstance(exc, network):
        return "lost_peer", "torch DistNetworkError: a peer or the store went away"
    return None


def classify_exception(exc: BaseException, signatures: Sequence[FailureSignature] = ()) -> Classified:
    """Classify ``exc`` (and its causes) into one of :data:`~ezpz.failures.record.KINDS`."""
    chain = exception_chain(exc)
    top = chain[0]
    for item in chain:
        found = _by_type(item)
        if found is not None:
            return Classified(found[0], _first_line(item), type(item).__name__, found[1])
    for item in chain:
        match = match_text(str(item), signatures)
        if match is not None:
            sig = match.signature
            who = f" ({sig.plugin})" if sig.plugin else ""
            return Classified(sig.kind, match.line, type(item).__name__, f"signature{who}: {sig.reason}",
                              sig.blames_host)
    return Classified("code_error", _first_line(top), type(top).__name__, "no failure signature matched: the code raised")
