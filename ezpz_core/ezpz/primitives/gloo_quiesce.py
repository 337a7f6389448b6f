"""Let gloo's worker threads let go of their last collectives before the interpreter finalizes.

Every gloo collective keeps a copy of the caller's thread-local state, and a
backward pass stashes a Python object there (torch's ``autograd.graph``
saves the ``contextvars`` context). A worker thread drops each finished
collective when it next goes round its loop, and dropping that object needs
the GIL. If the process group outlives :func:`ezpz.hooks.teardown` (a DDP
model still holds it) and a worker is late (a loaded machine), the drop
comes during interpreter finalization: the worker cannot take the GIL,
CPython ends it with ``pthread_exit``, and the unwinding through torch's
``noexcept`` destructors aborts the process (``terminate called without an
active exception``, SIGABRT, a finished job marked failed). Seen in CI and
reproduced with a core dump: ``ProcessGroupGloo::runLoop`` →
``~AsyncAllreduceWork`` → ``~ThreadLocalState`` → ``SafePyObject`` decref →
``take_gil`` → ``pthread_exit``.

:func:`quiesce` runs rounds of tiny all-reduces, each carrying a marker
object in its thread-local state. A worker takes a new collective only after
dropping its previous one, so once every worker thread has been seen
dropping a marker, none holds a collective from before teardown. The
all-reduces carry each rank's "not yet" (MAX), so every rank reads the same
answer and runs the same number of rounds: they always pair up. Each
collective has a short timeout and the whole a deadline; a group whose peers
are gone is reported, never waited on.
"""

from __future__ import annotations

import threading
import time
import weakref
from datetime import timedelta
from typing import Any

from ezpz.primitives.frozen_records import frozen
from ezpz.primitives.torch_private import GLOO_DEFAULT_THREADS, backend_for_device, gloo_threads, tls_stash

__all__ = ["QuiesceReport", "quiesce"]

MAX_ROUNDS = 8
_STASH_KEY = "ezpz-gloo-quiesce"


@frozen
class QuiesceReport:
    """Whether every gloo worker thread was seen past its last collective, and why (or why not)."""

    done: bool
    reason: str
    workers_seen: int = 0
    workers: int = 0
    attempted: bool = True  # False: not needed (no gloo) or not possible with this torch


class _Marker:
    """Carried in one collective's thread-local state; who drops it last tells which thread ran it."""


def _gloo_workers(torch: Any, group: Any) -> int | None:
    """How many gloo worker threads serve the group's CPU collectives; None when gloo does not serve them."""
    backend = backend_for_device(group, torch.device("cpu"))
    if backend is not None:
        return gloo_threads(backend) if type(backend).__name__ == "ProcessGroupGloo" else None
    try:  # this torch cannot hand out the backend object: the public name says whether gloo runs the CPU
        name = str(torch.distributed.get_backend(group))
    except Exception:  # not a group torch knows
        return None
    gloo = any(part.rsplit(":", 1)[-1] == "gloo" for part in name.split(","))  # "gloo", "cpu:gloo,cuda:nccl"
    return GLOO_DEFAULT_THREADS if gloo else None


def quiesce(torch: Any, group: Any, deadline_s: float = 5.0, op_timeout_s: float = 2.0) -> QuiesceReport:
    """Run the marker rounds on ``group`` (collective: every rank calls it) and report. Never raises."""
    workers = _gloo_workers(torch, group)
    if workers is None:
        return QuiesceReport(False, "not needed: the group has no gloo backend for the CPU", attempted=False)
    dist, stashing = torch.distributed, tls_stash()
    if stashing is None or not hasattr(dist, "AllreduceOptions"):
        return QuiesceReport(False, "skipped: this torch has no thread-local object stash to mark collectives with",
                             attempted=False)
    stash, unstash = stashing
    main = threading.get_native_id()
    seen: set[int] = set()
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MAX
    opts.timeout = timedelta(seconds=op_timeout_s)
    end = time.monotonic() + deadline_s
    for rounds in range(1, MAX_ROUNDS + 1):
        need = 1.0 if len(seen - {main}) < workers else 0.0
        markers, futures = [], []
        for _ in range(workers):  # as many at once as there are workers, so an idle one is woken too
            marker = _Marker()
            markers.append(weakref.ref(marker, lambda _ref: seen.add(threading.get_native_id())))
            stash(_STASH_KEY, marker)
            try:  # the Work is not kept: the worker that runs it holds the last reference
                futures.append(group.allreduce([torch.tensor([need])], opts).get_future())
            except Exception as err:  # teardown goes on whatever the group says
                return QuiesceReport(False, f"stopped: a marker all-reduce did not start ({err})",
                                     len(seen - {main}), workers)
            finally:
                unstash(_STASH_KEY)
            del marker
        while any(ref() is not None for ref in markers):
            if time.monotonic() > end:
                return QuiesceReport(False, f"gave up after {deadline_s:g} s: a marker all-reduce did not finish "
                                            "(a peer gone, or not in teardown)", len(seen - {main}), workers)
            time.sleep(0.0005)  # without the GIL, so a late worker can take it and finish
        try:
            anyone_short = max(float(f.value()[0][0]) for f in futures)
        except Exception as err:  # a failed collective (a peer gone) is reported, not raised
            return QuiesceReport(False, f"stopped: a marker all-reduce failed ({err})", len(seen - {main}), workers)
        if anyone_short == 0.0:
            got = len(seen - {main})
            return QuiesceReport(True, f"all {workers} gloo worker threads went past their last collective on "
                                       f"every rank ({rounds} rounds)", got, workers)
    return QuiesceReport(False, f"{len(seen - {main})} of {workers} gloo worker threads seen past their last "
                                f"collective after {MAX_ROUNDS} rounds", len(seen - {main}), workers)
