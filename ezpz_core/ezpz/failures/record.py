"""One rank's failure record: a small JSON file ``<dir>/rank-<rank>.json``, written atomically.

The directory is ``EZPZ_FAILURE_DIR`` (set per attempt by ``ezpz launch``; a
user can set it too), else its per-user fallback when it cannot be written
(:mod:`ezpz.primitives.bookkeeping_dir`). Readers treat every file as hostile:
a file that is too large, not JSON, or has a missing or ill-typed field is
skipped with a reason, never raised.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attrs import field

from ezpz.primitives.atomic_file import write_json_atomically
from ezpz.primitives.frozen_records import frozen

__all__ = ["KINDS", "MAX_RECORD_BYTES", "FailureRecord", "Skipped", "read_failures", "read_failures_verbose",
           "write_failure"]

KINDS = ("code_error", "lost_peer", "timeout", "oom", "signal", "hang", "preempted", "launcher_config")
"""``code_error``: the user's code raised; ``lost_peer``: a peer went away; ``timeout``: a collective or the
rendezvous ran past ``EZPZ_TIMEOUT``; ``oom``: out of (device or host) memory; ``signal``: SIGTERM/SIGINT;
``hang``: a training step ran past its hang budget (:mod:`ezpz.steps.hang_budget`); ``preempted``: SIGTERM, and the
ranks stopped after an agreed step (:mod:`ezpz.steps.preemption`); ``launcher_config``: the launcher could not start
the job as configured (Open MPI without a remote-shell agent): no host is to blame and running again cannot help."""
MAX_RECORD_BYTES = 64 * 1024
_MAX_LINE = 500
_MAX_PEERS = 4096
_NAME = re.compile(r"^rank-(\d{1,9})\.json$")


def _kind(_inst: Any, _attr: Any, value: str) -> None:
    if value not in KINDS:
        raise ValueError(f"kind {value!r} is not one of {', '.join(KINDS)}")


def _non_negative(_inst: Any, attr: Any, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attr.name} {value!r} is not a non-negative integer")


def _line(value: object) -> str:
    from ezpz.primitives.redact import scrub

    text = str(value).strip().splitlines()
    return scrub(text[0] if text else "")[:_MAX_LINE]


def _sorted_ranks(value: Iterable[Any]) -> tuple[int, ...]:
    return tuple(sorted(int(r) for r in value))


def _sorted_hosts(value: Iterable[Any]) -> tuple[str, ...]:
    return tuple(sorted({str(h) for h in value}))


@frozen(kw_only=True)
class FailureRecord:
    """What one rank knew when it ended abnormally. ``first_line`` is scrubbed of secrets (:mod:`ezpz.primitives.redact`)."""

    rank: int = field(validator=_non_negative)
    host: str
    attempt: int = field(validator=_non_negative)
    kind: str = field(validator=_kind)
    first_line: str = field(converter=_line)
    missing_ranks: tuple[int, ...] = field(default=(), converter=_sorted_ranks)
    missing_hosts: tuple[str, ...] = field(default=(), converter=_sorted_hosts)
    exception_type: str = ""
    step: int | None = None
    """The training step (``rt.step()`` count + 1) the rank was in, when known (``hang``, ``preempted``)."""
    budget: str = field(default="", converter=_line)
    """For ``hang``: the budget in force and how it was derived."""
    pid: int = field(factory=os.getpid, validator=_non_negative)
    time: float = field(factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "attempt": self.attempt, "kind": self.kind,
                "first_line": self.first_line, "missing_ranks": list(self.missing_ranks),
                "missing_hosts": list(self.missing_hosts), "exception_type": self.exception_type,
                "step": self.step, "budget": self.budget, "pid": self.pid, "time": self.time}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FailureRecord:
        """A record from parsed JSON; ValueError/TypeError naming the bad field otherwise."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a record is a JSON object, not {type(data).__name__}")
        kw: dict[str, Any] = {}
        for name, kinds in (("rank", int), ("host", str), ("attempt", int), ("kind", str), ("first_line", str),
                            ("pid", int), ("time", (int, float))):
            if name not in data:
                raise ValueError(f"field {name!r} is missing")
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise TypeError(f"field {name!r} is {type(value).__name__}, not {getattr(kinds, '__name__', 'number')}")
            kw[name] = value
        ranks, hosts = data.get("missing_ranks", []), data.get("missing_hosts", [])
        if not (isinstance(ranks, list) and len(ranks) <= _MAX_PEERS
                and all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks)):
            raise TypeError("field 'missing_ranks' is not a list of non-negative integers")
        if not (isinstance(hosts, list) and len(hosts) <= _MAX_PEERS and all(isinstance(h, str) for h in hosts)):
            raise TypeError("field 'missing_hosts' is not a list of strings")
        etype = data.get("exception_type", "")
        if not isinstance(etype, str):
            raise TypeError("field 'exception_type' is not a string")
        step, budget = data.get("step"), data.get("budget", "")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
            raise TypeError("field 'step' is not a non-negative integer or null")
        if not isinstance(budget, str):
            raise TypeError("field 'budget' is not a string")
        return cls(missing_ranks=ranks, missing_hosts=hosts, exception_type=etype[:200], step=step, budget=budget,
                   **kw)


def write_failure(record: FailureRecord, directory: str | os.PathLike[str]) -> Path | None:
    """Write ``record`` to ``<directory>/rank-<rank>.json`` atomically (temporary file, then ``os.replace``).

    Where ``directory`` cannot be written, the record goes to its per-user fallback
    (:mod:`ezpz.primitives.bookkeeping_dir`, one warning says where); None when nothing could be written.
    Raises OSError only when the file itself could not be written (a full disk).
    """
    from ezpz.primitives import bookkeeping_dir

    folder = bookkeeping_dir.usable_dir(directory, what="failure records",
                                        fix="set EZPZ_FAILURE_DIR to a directory every rank can write "
                                            "(ezpz launch --job-dir)")
    if folder is None:
        return None
    final = folder / f"rank-{record.rank}.json"
    write_json_atomically(final, record.to_dict(), prefix=f".rank-{record.rank}.", sort_keys=True, fsync=True)
    return final


@frozen
class Skipped:
    """A file :func:`read_failures_verbose` did not accept, and why."""

    path: Path
    reason: str


def read_failures_verbose(directory: str | os.PathLike[str]) -> tuple[list[FailureRecord], list[Skipped]]:
    """Every valid ``rank-*.json`` in ``directory`` (sorted by rank), and each file skipped with its reason."""
    folder = Path(directory)
    records: list[FailureRecord] = []
    skipped: list[Skipped] = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return records, skipped
    for path in entries:
        if not _NAME.match(path.name):
            continue
        try:
            if not path.is_file():
                raise ValueError("not a regular file")
            size = path.stat().st_size
            if size > MAX_RECORD_BYTES:
                raise ValueError(f"{size} bytes, more than the {MAX_RECORD_BYTES} a record may have")
            with path.open("rb") as fh:
                data = json.loads(fh.read(MAX_RECORD_BYTES + 1).decode("utf-8"))
            record = FailureRecord.from_dict(data)
            if f"rank-{record.rank}.json" != path.name:
                raise ValueError(f"holds rank {record.rank}, but its name says otherwise")
            records.append(record)
        except (OSError, ValueError, TypeError, UnicodeDecodeError, RecursionError) as err:
            skipped.append(Skipped(path, f"{type(err).__name__}: {err}"[:300]))
    records.sort(key=lambda r: r.rank)
    return records, skipped


def read_failures(directory: str | os.PathLike[str]) -> list[FailureRecord]:
    """Every valid record in ``directory``, sorted by rank; each bad file is skipped and logged with its reason
    (``failure_record_skipped``; :func:`read_failures_verbose` returns them instead)."""
    records, skipped = read_failures_verbose(directory)
    if skipped:
        from ezpz.primitives.logger import get_logger

        log = get_logger("ezpz.failures")
        for bad in skipped:
            log.warning("failure_record_skipped", path=str(bad.path), reason=bad.reason)
    return records
