"""Preemption at a step boundary: the state ``rt.step()`` and ``rt.preempted`` read after a SIGTERM.

The scheduler's SIGTERM (walltime, preemption) sets :attr:`Preemption.requested`
(:mod:`ezpz.failures.preemption` catches it and posts this rank's step to the
rendezvous store). At its next ``rt.step()`` a rank asks for the agreed stop
step (every rank finishes the step it was in when its signal came: the
largest such step wins, so a rank signalled a step later than another never
waits in a collective its peers left); at that step :attr:`Preemption.reached`
turns true and the script saves its checkpoint and leaves the loop. A script
that does not look goes on one step and is ended there, with status 143,
on every rank alike.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

__all__ = ["PREEMPTED_STATUS", "Preemption"]

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
