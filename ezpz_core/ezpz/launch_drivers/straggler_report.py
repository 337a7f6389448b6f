"""The straggler report for ``ezpz launch``: followed during an attempt, printed and charted at the end.

Rank 0 of the job rewrites two files in ``<failure dir>`` at every report
(:mod:`ezpz.steps.straggler_exchange`, off its training thread): the small
``stragglers.json`` (the verdict, the named stragglers, the consecutive
counts: tens of KiB at 16,384 ranks) and ``stragglers-history.json`` (per-rank
statistics and the heat map: about a MiB at 16,384 ranks).
:class:`ReportFollower` reads only the small one, and only when it changed,
about once a second while the attempt runs; it says on stderr when the named
stragglers change, and (``--replace-stragglers M`` under ``--auto-retry``) asks
to end the attempt when one host has been a straggler in M consecutive
reports. The history is read once, at the attempt's end, for the charts
(:mod:`ezpz.launch_drivers.straggler_charts`).

The files are read as hostile input: too large, not JSON, or ill-typed gives
None, never an exception.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ezpz.launch_drivers.retry import Verdict

__all__ = ["MAX_HISTORY_BYTES", "MAX_REPORT_BYTES", "ReportFollower", "read_history", "read_report",
           "replacement_verdict", "summary_lines"]

MAX_REPORT_BYTES = 1 << 20
MAX_HISTORY_BYTES = 16 << 20
_SHOWN = 8


def _read_json(path: Path, limit: int) -> Any:
    try:
        if path.stat().st_size > limit:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_report(path: Path) -> dict[str, Any] | None:
    """The report at ``path``, or None when absent, too large, not JSON or not the expected shape."""
    data = _read_json(path, MAX_REPORT_BYTES)
    if not (isinstance(data, dict) and isinstance(data.get("report"), dict)
            and isinstance(data["report"].get("stragglers"), list)
            and isinstance(data.get("consecutive", {}), dict) and isinstance(data.get("consecutive_ranks", {}), dict)):
        return None
    return data


def read_history(report_path: Path, data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The history file the report ``data`` names, beside ``report_path``; None when absent or ill-formed."""
    name = data.get("history")
    if not isinstance(name, str) or not name or Path(name).name != name:  # a plain name beside the report only
        return None
    history = _read_json(report_path.parent / name, MAX_HISTORY_BYTES)
    if not (isinstance(history, dict) and isinstance(history.get("heatmap"), dict)
            and isinstance(history.get("latest_us"), dict) and isinstance(history.get("hosts"), list)):
        return None
    return history


def _stragglers(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [s for s in data["report"]["stragglers"] if isinstance(s, dict) and "rank" in s and "host" in s]


def named(data: Mapping[str, Any]) -> tuple[tuple[int, str], ...]:
    """The (rank, host) pairs the report names as stragglers."""
    return tuple((int(s["rank"]), str(s["host"])) for s in _stragglers(data))


def summary_lines(data: Mapping[str, Any]) -> list[str]:
    """The report in words: the reason line, then a line per straggler with its scores (the slowest 8)."""
    report = data["report"]
    lines = [f"stragglers: {report.get('reason', '')}"]
    shown = _stragglers(data)
    try:
        count = max(int(report.get("count", len(shown))), len(shown))
    except (TypeError, ValueError):
        count = len(shown)
    if count > _SHOWN:
        lines.append(f"  the slowest {_SHOWN} of {count} stragglers:")
    for s in shown[:_SHOWN]:
        sections = s.get("sections") or {}
        parts = ", ".join(f"{n} {float(v):.2f}" for n, v in sorted(sections.items()))
        lines.append(f"  rank {s['rank']} host {s['host']}: relative score {float(s.get('relative', 0)):.2f}, "
                     f"individual {float(s.get('individual', 0)):.2f}" + (f"; sections {parts}" if parts else ""))
    return lines


def replacement_verdict(data: Mapping[str, Any], *, after: int, rank_hosts: Mapping[int, str],
                        spares_left: int) -> Verdict | None:
    """``--replace-stragglers M``: the hosts with a rank that was a straggler in ``after`` consecutive reports.

    Pure. Ranks are mapped to hosts by the launch's own placement (``rank_hosts``),
    not by the name a rank's machine gives itself, so the host is the one the
    hostfile names. None when no rank has reached ``after`` reports, or when
    there are fewer spares than such hosts (a slow host is better than none).
    """
    counts: dict[int, int] = {}
    for r, n in (data.get("consecutive_ranks") or {}).items():
        try:
            counts[int(r)] = int(n)
        except (TypeError, ValueError):
            continue
    due_ranks = sorted(r for r, n in counts.items() if n >= after and r in rank_hosts)
    due = list(dict.fromkeys(rank_hosts[r] for r in due_ranks))
    if not due or len(due) > spares_left:
        return None
    said = {int(s["rank"]): str(s["host"]) for s in _stragglers(data)}
    evidence = [f"rank {r} on host {rank_hosts[r]} (it calls itself {said.get(r, '?')}): a straggler in "
                f"{counts[r]} consecutive reports (--replace-stragglers {after})" for r in due_ranks]
    evidence += [line.strip() for line in summary_lines(data)]
    return Verdict(outcome="straggler", retry=True, exclude=tuple(due), evidence=tuple(evidence),
                   reason=f"host(s) {', '.join(due)} slower than the others in {after} consecutive straggler "
                          f"reports: ended, excluded and replaced by a spare")


class ReportFollower:
    """Follows one attempt's report: says what changed, and says when ``--replace-stragglers`` wants it ended."""

    def __init__(self, path: Path, say: Callable[[str], None], *, replace_after: int | None = None,
                 rank_hosts: Mapping[int, str] | None = None, spares_left: int = 0) -> None:
        self.path, self.say = path, say
        self.replace_after, self.rank_hosts, self.spares_left = replace_after, dict(rank_hosts or {}), spares_left
        self.data: dict[str, Any] | None = None
        self.replace: Verdict | None = None
        self._seen: tuple[float, int] | None = None
        self._named: tuple[tuple[int, str], ...] | None = None

    def history(self) -> dict[str, Any] | None:
        """The history file beside the last report read (once, for the charts at the attempt's end)."""
        return read_history(self.path, self.data) if self.data is not None else None

    def poll(self) -> bool:
        """Read the report if it changed; True when the attempt should be ended to replace a straggler."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        if self._seen == (st.st_mtime, st.st_size):
            return self.replace is not None
        self._seen = (st.st_mtime, st.st_size)
        data = read_report(self.path)
        if data is None:
            return self.replace is not None
        self.data = data
        now = named(data)
        if now != self._named and (now or self._named is not None):
            for line in summary_lines(data):
                self.say(line)
        self._named = now
        if self.replace_after and self.replace is None:
            self.replace = replacement_verdict(data, after=self.replace_after, rank_hosts=self.rank_hosts,
                                               spares_left=self.spares_left)
        return self.replace is not None
