"""The straggler report for ``ezpz launch``: followed during an attempt, printed and charted at the end.

Rank 0 of the job rewrites ``<failure dir>/stragglers.json`` at every report
(:mod:`ezpz.steps.straggler_exchange`). :class:`ReportFollower` reads it about once a
second while the attempt runs, says on stderr when the named stragglers
change, and (``--replace-stragglers M`` under ``--auto-retry``) asks to end the
attempt when one host has been a straggler in M consecutive reports. At the
end, :func:`chart_lines` draws every rank's time per report as a row of
unicode blocks and :func:`chart_svg` the same as an SVG line chart: text, so
no imaging library is needed, it opens in any browser, and it can carry the
rank and axis labels a bare-pixel image could not without a font.

The file is read as hostile input: too large, not JSON, or ill-typed gives
None, never an exception.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from ezpz.launch_drivers.retry import Verdict

__all__ = ["MAX_REPORT_BYTES", "ReportFollower", "chart_lines", "chart_svg", "read_report", "replacement_verdict",
           "summary_lines"]

MAX_REPORT_BYTES = 4 << 20
_BLOCKS = "▁▂▃▄▅▆▇█"


def read_report(path: Path) -> dict[str, Any] | None:
    """The report at ``path``, or None when absent, too large, not JSON or not the expected shape."""
    try:
        if path.stat().st_size > MAX_REPORT_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(data, dict) and isinstance(data.get("report"), dict)
            and isinstance(data["report"].get("stragglers"), list) and isinstance(data.get("history", []), list)
            and isinstance(data.get("consecutive", {}), dict)):
        return None
    return data


def _stragglers(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [s for s in data["report"]["stragglers"] if isinstance(s, dict) and "rank" in s and "host" in s]


def named(data: Mapping[str, Any]) -> tuple[tuple[int, str], ...]:
    """The (rank, host) pairs the report names as stragglers."""
    return tuple((int(s["rank"]), str(s["host"])) for s in _stragglers(data))


def summary_lines(data: Mapping[str, Any]) -> list[str]:
    """The report in words: the reason line, then one line per straggler with its scores."""
    report = data["report"]
    lines = [f"stragglers: {report.get('reason', '')}"]
    for s in _stragglers(data):
        sections = s.get("sections") or {}
        parts = ", ".join(f"{n} {float(v):.2f}" for n, v in sorted(sections.items()))
        lines.append(f"  rank {s['rank']} host {s['host']}: relative score {float(s.get('relative', 0)):.2f}, "
                     f"individual {float(s.get('individual', 0)):.2f}" + (f"; sections {parts}" if parts else ""))
    return lines


def _series(data: Mapping[str, Any]) -> tuple[list[int], dict[int, list[float]], str]:
    """Steps, each rank's compared time per report, and what that time is."""
    measure = "work_s" if data["report"].get("measure") == "sections" else "step_s"
    steps: list[int] = []
    ranks: dict[int, list[float]] = {}
    for entry in data.get("history", []):
        if not isinstance(entry, dict) or not isinstance(entry.get(measure), dict):
            continue
        steps.append(int(entry.get("step", 0)))
        for r, v in entry[measure].items():
            ranks.setdefault(int(r), []).append(float(v))
    n = len(steps)
    return steps, {r: v for r, v in sorted(ranks.items()) if len(v) == n}, \
        "time in sections" if measure == "work_s" else "step time"


def _buckets(values: Sequence[float], width: int) -> list[float]:
    if len(values) <= width:
        return list(values)
    return [sum(chunk) / len(chunk) for chunk in
            (values[i * len(values) // width:(i + 1) * len(values) // width] for i in range(width))]


def chart_lines(data: Mapping[str, Any], width: int = 60) -> list[str]:
    """Each rank's time per report as a row of unicode blocks (one scale for all ranks), with its median."""
    steps, series, what = _series(data)
    if not steps or not series:
        return []
    rows = {r: _buckets(v, width) for r, v in series.items()}
    lo = min(min(v) for v in rows.values())
    hi = max(max(v) for v in rows.values())
    span = (hi - lo) or 1.0
    hosts = data.get("hosts") or {}
    slow = {r for r, _ in named(data)}
    lines = [f"{what} per rank over steps {steps[0]}..{steps[-1]} (one column per report; "
             f"{_BLOCKS[0]} {lo * 1e3:.1f} ms .. {_BLOCKS[-1]} {hi * 1e3:.1f} ms)"]
    for r, v in rows.items():
        blocks = "".join(_BLOCKS[min(len(_BLOCKS) - 1, int((x - lo) / span * len(_BLOCKS)))] for x in v)
        mid = sorted(series[r])[len(series[r]) // 2]
        mark = "  <- straggler" if r in slow else ""
        lines.append(f"  rank {r:>4} {str(hosts.get(str(r), ''))[:16]:<16} {blocks} {mid * 1e3:8.1f} ms{mark}")
    return lines


def chart_svg(data: Mapping[str, Any], title: str = "ezpz: step time per rank") -> str:
    """Each rank's time per report as an SVG line chart (stragglers in red, the others in grey-blue)."""
    steps, series, what = _series(data)
    w, h, left, right, top, bottom = 720, 360, 70, 150, 40, 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="15">{escape(title)} ({escape(what)})</text>']
    if not steps or not series:
        out.append(f'<text x="{left}" y="{h // 2}">no report yet</text></svg>')
        return "\n".join(out)
    hi = max(max(v) for v in series.values()) * 1.05 or 1.0
    x0, x1 = steps[0], steps[-1] if steps[-1] > steps[0] else steps[0] + 1

    def px(step: int) -> float:
        return left + (step - x0) / (x1 - x0) * (w - left - right)

    def py(value: float) -> float:
        return h - bottom - value / hi * (h - top - bottom)

    out.append(f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>')
    for frac in (0.0, 0.5, 1.0):
        y = py(hi * frac)
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{hi * frac * 1e3:.0f} ms</text>')
    out.append(f'<text x="{left}" y="{h - bottom + 16}">step {x0}</text>')
    out.append(f'<text x="{w - right}" y="{h - bottom + 16}" text-anchor="end">step {steps[-1]}</text>')
    slow = {r for r, _ in named(data)}
    hosts = data.get("hosts") or {}
    for i, (r, values) in enumerate(series.items()):
        colour = "#d62728" if r in slow else "#4c72b0"
        points = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in zip(steps, values))
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="{2 if r in slow else 1}" '
                   f'points="{points}"><title>rank {r}</title></polyline>')
        if i < 24 or r in slow:
            label = f"rank {r} {hosts.get(str(r), '')}"[:22]
            out.append(f'<text x="{w - right + 6}" y="{py(values[-1]) + 4:.1f}" fill="{colour}">'
                       f'{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


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
