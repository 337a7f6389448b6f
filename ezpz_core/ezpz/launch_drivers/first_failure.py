"""The launcher's own word on which rank failed first: the line that names where a job's end began.

When one rank dies, the launcher ends the others, and a rank it ends while
blocked in a collective may die before it can write a record. Its peers then
record losing *it*, and the accusation points at a healthy host. Open MPI
says which process started the abort (``ORTE_JOB_ABORTED_PROC`` is set once,
by the first process to fail, and the end-of-job message names it); that
line outranks accusations against hosts whose ranks left no word.

Only lines whose meaning is "the first" are here; per-task lines that list
every casualty (srun's ``task N: Killed``) are not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ezpz.primitives.frozen_records import frozen

__all__ = ["FIRST_FAILURE_REPORTS", "FirstFailure", "FirstFailureReport", "first_failure"]


@frozen(kw_only=True)
class FirstFailureReport:
    """A launcher line naming the first process to fail: ``pattern`` has a ``host`` group (and maybe ``rank``)."""

    pattern: str
    launcher: str
    reason: str
    source: str


@frozen(kw_only=True)
class FirstFailure:
    """Where the launcher says the job's failure began: the host, the rank when the line names it, the line."""

    host: str
    rank: int | None
    line: str
    reason: str


FIRST_FAILURE_REPORTS: tuple[FirstFailureReport, ...] = (
    FirstFailureReport(
        pattern=r"mpiexec noticed that process rank (?P<rank>\d+) with PID \d+ on node (?P<host>\S+) "
                r"exited on signal 9\b",
        launcher="Open MPI",
        reason="Open MPI names the first process to end, here SIGKILLed from outside (node failure, OOM killer, "
               "operator); the ranks it then ended may have left no record",
        source="Open MPI 4.1 orte/mca/errmgr/default_hnp (ORTE_JOB_ABORTED_PROC is set by the first process to "
               "abort) and help-orterun.txt 'orterun:proc-aborted-signal'; seen on network-namespace nodes"),
    FirstFailureReport(
        pattern=r"Remote daemon:\s+\[\[[\d,]+\],\d+\] on node (?P<host>\S+)",
        launcher="Open MPI",
        reason="Open MPI lost contact with the daemon on this node, which ended the job",
        source="Open MPI 4.1 orte/mca/errmgr/base/help-errmgr-base.txt ('ORTE has lost communication with a "
               "remote daemon'); seen on network-namespace nodes with the link cut"),
)


def _known(name: str, hosts: Sequence[str]) -> str | None:
    """The active host ``name`` means: itself, or one of the two is the other's fully qualified form."""
    name = name.rstrip(".,;:")

    def qualifies(short: str, long: str) -> bool:  # "nid01" and "nid01.hsn.example"; not 10.0.0.1 and 10.0.0.1.5
        return long.startswith(short + ".") and not long[len(short) + 1:].replace(".", "").isdigit()

    for h in hosts:
        if name == h or qualifies(h, name) or qualifies(name, h):
            return h
    return None


def first_failure(text: str, hosts: Sequence[str],
                  reports: Sequence[FirstFailureReport] = FIRST_FAILURE_REPORTS) -> FirstFailure | None:
    """The first line of ``text`` where the launcher names the first failed process on one of ``hosts``."""
    compiled = [(r, re.compile(r.pattern, re.IGNORECASE)) for r in reports]
    for line in text.splitlines():
        for report, rx in compiled:
            found = rx.search(line)
            if not found:
                continue
            host = _known(found.group("host"), hosts)
            if host is None:
                continue
            rank = found.groupdict().get("rank")
            return FirstFailure(host=host, rank=int(rank) if rank is not None else None, line=line.strip()[:300],
                                reason=report.reason)
    return None
