"""Pictures of a straggler history that stay readable at 16,384 ranks: a text chart and an SVG heat map.

Both read the history file rank 0 writes (``stragglers-history.json``,
:mod:`ezpz.steps.straggler_history`), never one line per rank:

- :func:`chart_lines`: the distribution of the last report (percentiles and a
  histogram of ranks per time bin), then the slowest ranks (at most 8), each
  with its recent reports as a row of unicode blocks on one scale.
- :func:`chart_svg`: a rank x time heat map. Rows are rank buckets (ranks in
  host order, one rank per row up to 256 ranks, else runs of whole hosts where
  they fit); columns are spans of reports; a cell's colour is the slowest
  rank of its bucket over that column's median time. The stragglers of the
  last report are labelled on the right, each label on its own line (labels
  that would not fit are counted, never stacked).

SVG rather than PNG: text written with the standard library, no imaging
dependency, it opens in any browser and carries labels and hover titles.
Everything read is checked: a malformed history gives no chart, not an error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from xml.sax.saxutils import escape

from ezpz.steps.straggler_history import unpack_ints

__all__ = ["LABEL_GAP", "SLOWEST_SHOWN", "chart_lines", "chart_svg"]

SLOWEST_SHOWN = 8
LABEL_GAP = 13
"""Pixels between two straggler labels (11 px text): labels are never closer."""
_BLOCKS = "▁▂▃▄▅▆▇█"
# colour by the cell's time over its column's median: pale below 1.1x, darker red above the factor
_PALETTE = ("#eef3f8", "#dbe6f1", "#fde0c5", "#fbb47a", "#f4794a", "#d7301f", "#a50f15", "#67000d")


def _ints(value: Any, n: int | None = None) -> list[int] | None:
    """A list of whole numbers (``n`` of them when given), plain or packed; None when it is not that."""
    if isinstance(value, dict):
        return unpack_ints(value, n)
    if not isinstance(value, list) or (n is not None and len(value) != n):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return value


def _ms(us: float) -> str:
    return f"{us / 1e3:.1f}"


def _what(history: Mapping[str, Any]) -> str:
    return "time in sections" if history.get("measure") == "sections" else "step time"


def _buckets(values: Sequence[int], width: int) -> list[float]:
    if len(values) <= width:
        return [float(v) for v in values]
    return [sum(chunk) / len(chunk) for chunk in
            (values[i * len(values) // width:(i + 1) * len(values) // width] for i in range(width))]


def chart_lines(history: Mapping[str, Any], width: int = 60) -> list[str]:
    """The last report's distribution, then the slowest ranks' recent reports as rows of blocks."""
    try:
        return _chart_lines(history, width)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError):
        return []


def _chart_lines(history: Mapping[str, Any], width: int) -> list[str]:
    n = int(history["ranks"])
    pct = {int(k): int(v) for k, v in history["distribution"]["percentiles_us"].items()}
    counts = _ints(history["distribution"]["counts"])
    edges = _ints(history["distribution"]["edges_us"])
    slowest = [s for s in history.get("slowest", []) if isinstance(s, dict) and _ints(s.get("recent_us"))]
    straggling = set(_ints(history.get("stragglers")) or [])
    hosts, host_of = history["hosts"], _ints(history["host_of_rank"], n)
    if counts is None or edges is None or host_of is None:
        return []
    lines = [f"{_what(history)} at step {history['step']} over {n} ranks; {len(straggling)} above "
             f"{float(history['factor']):g}x the median {_ms(history['median_us'])} ms"]
    lines.append("  distribution: " + "  ".join(
        f"{'min' if p == 0 else 'max' if p == 100 else 'median' if p == 50 else f'p{p}'} {_ms(v)}"
        for p, v in sorted(pct.items())) + " ms")
    top = max(counts) or 1
    bars = "".join(" " if c == 0 else _BLOCKS[min(len(_BLOCKS) - 1, int(math.log1p(c) / math.log1p(top)
                                                                         * (len(_BLOCKS) - 1)))] for c in counts)
    lines.append(f"  ranks per bin: {_ms(edges[0])} ms |{bars}| {_ms(edges[-1])} ms  (the fullest bin: {top} ranks)")
    rows = {int(s["rank"]): _buckets(s["recent_us"], width) for s in slowest[:SLOWEST_SHOWN]}
    if not rows:
        return lines
    lo = min(min(v) for v in rows.values())
    hi = max(max(v) for v in rows.values())
    span = (hi - lo) or 1.0
    steps = _ints(history.get("recent_steps")) or [0]
    lines.append(f"  the slowest {len(rows)} ranks over steps {steps[0]}..{steps[-1]} (one column per report; "
                 f"{_BLOCKS[0]} {_ms(lo)} ms .. {_BLOCKS[-1]} {_ms(hi)} ms), and their median:")
    for s in slowest[:SLOWEST_SHOWN]:
        r, values = int(s["rank"]), s["recent_us"]
        blocks = "".join(_BLOCKS[min(len(_BLOCKS) - 1, int((x - lo) / span * len(_BLOCKS)))] for x in rows[r])
        mid = sorted(values)[len(values) // 2]
        host = str(hosts[host_of[r]]) if 0 <= r < n and 0 <= host_of[r] < len(hosts) else "?"
        mark = "  <- straggler" if r in straggling else ""
        lines.append(f"  rank {r:>4} {host[:16]:<16} {blocks} {mid / 1e3:8.1f} ms{mark}")
    return lines


def _bounds(factor: float) -> tuple[float, ...]:
    """Where each colour of :data:`_PALETTE` after the first begins, as time / median: rising for any factor."""
    return (1 + (factor - 1) / 4, 1 + (factor - 1) / 2, 1 + (factor - 1) * 3 / 4, factor, factor * 1.5,
            factor * 2.5, factor * 4)


def _level(ratio: float, factor: float) -> int:
    return sum(ratio >= b for b in _bounds(factor))


def _place(wanted: list[float], top: float, bottom: float, gap: float) -> list[float]:
    """Y positions near ``wanted`` (sorted) at least ``gap`` apart inside [top, bottom]; as many as fit."""
    fit = wanted[:max(0, int((bottom - top) // gap) + 1)]
    ys: list[float] = []
    for y in fit:
        ys.append(max(y, top, ys[-1] + gap if ys else top))
    for i in range(len(ys) - 1, -1, -1):  # pushed past the bottom: move back up, keeping the gaps
        limit = bottom if i == len(ys) - 1 else ys[i + 1] - gap
        ys[i] = min(ys[i], limit)
    return ys


def chart_svg(history: Mapping[str, Any] | None, title: str = "ezpz: straggler heat map") -> str:
    """The history as an SVG heat map (rank buckets x spans of reports), stragglers labelled."""
    try:
        body = _heat_map(history) if history is not None else None
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError):
        body = None
    w = 980
    if body is None:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="120" viewBox="0 0 {w} 120" '
                f'font-family="sans-serif" font-size="12"><rect width="{w}" height="120" fill="white"/>'
                f'<text x="20" y="30" font-size="15">{escape(title)}</text>'
                f'<text x="20" y="70">no report yet</text></svg>')
    parts, height, subtitle = body
    head = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" viewBox="0 0 {w} {height}" '
            f'font-family="sans-serif" font-size="11">',
            f'<rect width="{w}" height="{height}" fill="white"/>',
            f'<text x="20" y="22" font-size="15">{escape(title)}</text>',
            f'<text x="20" y="40" fill="#444">{escape(subtitle)}</text>']
    return "\n".join(head + parts + ["</svg>"])


def _heat_map(history: Mapping[str, Any]) -> tuple[list[str], int, str] | None:
    hm = history["heatmap"]
    rows, columns = hm["rows"], hm["columns"]
    if not (isinstance(rows, list) and rows and isinstance(columns, list) and columns):
        return None
    medians = _ints(hm["median_us"], len(columns))
    flat = _ints(hm["cells_us"], len(rows) * len(columns))
    if medians is None or flat is None:
        return None
    cells = [flat[j * len(rows):(j + 1) * len(rows)] for j in range(len(columns))]
    n, factor = int(history["ranks"]), float(history["factor"])
    hosts, host_of = history["hosts"], _ints(history["host_of_rank"], n)
    if host_of is None:
        return None
    left, top, plot_w = 200, 60, 500
    plot_h = min(760, max(len(rows) * 16, 160))
    row_h, col_w = plot_h / len(rows), plot_w / len(columns)
    per_row = max(int(r["n"]) for r in rows)
    subtitle = (f"{_what(history)}, {n} ranks in {len(rows)} rows (host order, up to {per_row} ranks a row: "
                f"the slowest one's time), {len(columns)} columns ({hm['reports_per_column']} report(s) each); "
                f"colour: time / the column's median")
    out = ['<g id="cells" shape-rendering="crispEdges">']
    for i, row in enumerate(rows):
        a, b = int(row["ranks"][0]), int(row["ranks"][1])
        h0, h1 = (str(h) for h in row["hosts"])
        what = f"rank {a}" if a == b else f"{row['n']} ranks from {a} to {b}"
        where = h0 if h0 == h1 else f"{h0} .. {h1}"
        y = top + i * row_h
        out.append(f'<g data-row="{i}" data-ranks="{a}-{b}"><title>{escape(what)} on {escape(where)}</title>')
        for j, column in enumerate(cells):
            ratio = column[i] / medians[j] if medians[j] > 0 else 1.0
            out.append(f'<rect x="{left + j * col_w:.1f}" y="{y:.1f}" width="{col_w + 0.05:.2f}" '
                       f'height="{row_h + 0.05:.2f}" fill="{_PALETTE[_level(ratio, factor)]}"/>')
        out.append("</g>")
    out.append("</g>")
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h:.1f}" fill="none" stroke="#333"/>')
    out += _row_labels(rows, left, top, row_h)
    out += _column_labels(columns, left, top + plot_h, col_w)
    out += _straggler_labels(history, rows, host_of, hosts, left + plot_w, top, row_h, plot_h)
    legend_y = top + plot_h + 40
    out.append(f'<text x="{left}" y="{legend_y + 11}">time / median:</text>')
    bounds = _bounds(factor)
    labels = [f"< {bounds[0]:.3g}"] + [f"≥ {b:.3g}" + (" straggler" if b == factor else "") for b in bounds]
    x = left + 90
    for colour, label in zip(_PALETTE, labels):
        out.append(f'<rect x="{x}" y="{legend_y}" width="14" height="14" fill="{colour}" stroke="#999"/>')
        out.append(f'<text x="{x + 18}" y="{legend_y + 11}">{escape(label)}</text>')
        x += 26 + 6 * len(label)
    return out, int(legend_y + 30), subtitle


def _row_labels(rows: list[Any], left: float, top: float, row_h: float) -> list[str]:
    """A label every few rows (never closer than :data:`LABEL_GAP`), naming the first rank and host of the row."""
    every = max(1, math.ceil(LABEL_GAP / row_h))
    out = ['<g id="row-labels" text-anchor="end">']
    last_host = None
    for i in range(0, len(rows), every):
        a, host = int(rows[i]["ranks"][0]), str(rows[i]["hosts"][0])
        label = f"rank {a} {host}" if host != last_host else f"rank {a}"
        last_host = host
        out.append(f'<text x="{left - 6}" y="{top + (i + 0.5) * row_h + 4:.1f}">{escape(label[:32])}</text>')
    out.append("</g>")
    if every == 1:  # a line between hosts, where a row is tall enough to see it
        for i in range(1, len(rows)):
            if rows[i]["hosts"][0] != rows[i - 1]["hosts"][1]:
                y = top + i * row_h
                out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + 500}" y2="{y:.1f}" stroke="#333" '
                           f'stroke-width="0.6"/>')
    return out


def _column_labels(columns: list[Any], left: float, bottom: float, col_w: float) -> list[str]:
    every = max(1, math.ceil(90 / col_w))
    out = ['<g id="column-labels" text-anchor="middle">']
    for j in range(0, len(columns), every):
        out.append(f'<text x="{left + (j + 0.5) * col_w:.1f}" y="{bottom + 16}">step {int(columns[j]["steps"][1])}'
                   f'</text>')
    out.append("</g>")
    return out


def _straggler_labels(history: Mapping[str, Any], rows: list[Any], host_of: list[int], hosts: list[Any],
                      right: float, top: float, row_h: float, plot_h: float) -> list[str]:
    """The last report's stragglers beside their rows, at least :data:`LABEL_GAP` apart; the rest counted."""
    straggling = _ints(history.get("stragglers")) or []
    latest = _ints(history.get("latest_us"), int(history["ranks"])) or []
    median = float(history.get("median_us") or 0) or 1.0
    row_of: dict[int, int] = {}
    order = sorted(range(len(host_of)), key=lambda r: (host_of[r], r))  # the history's row order: host, then rank
    position = {r: p for p, r in enumerate(order)}
    n = len(order)
    for r in straggling:
        if 0 <= r < n:
            row_of[r] = position[r] * len(rows) // n
    wanted = sorted(((top + (row_of[r] + 0.5) * row_h, r) for r in row_of), key=lambda t: t[0])
    # most important first when they cannot all fit: keep the slowest, in row order
    room = int((plot_h - 4) // LABEL_GAP) + 1  # label positions in [top + 4, top + plot_h]
    if len(wanted) > room:  # the last position says how many more
        keep = set(sorted(row_of, key=lambda r: -(latest[r] if r < len(latest) else 0))[:max(room - 1, 0)])
        wanted = [t for t in wanted if t[1] in keep]
    ys = _place([y for y, _ in wanted], top + 4, top + plot_h, LABEL_GAP)
    out = ['<g id="straggler-labels">']
    for (y_row, r), y in zip(wanted, ys):
        host = str(hosts[host_of[r]]) if 0 <= host_of[r] < len(hosts) else "?"
        times = f" {latest[r] / median:.1f}x" if r < len(latest) else ""
        out.append(f'<line x1="{right}" y1="{y_row:.1f}" x2="{right + 14}" y2="{y - 4:.1f}" stroke="#d62728"/>')
        out.append(f'<text x="{right + 16}" y="{y:.1f}" fill="#d62728" data-rank="{r}">'
                   f'{escape(f"rank {r} {host[:20]}{times}")}</text>')
    hidden = len(straggling) - len(wanted)
    if hidden > 0:
        more_y = (ys[-1] + LABEL_GAP) if ys else top + 4
        out.append(f'<text x="{right + 16}" y="{more_y:.1f}" fill="#d62728">+ {hidden} more stragglers</text>')
    out.append("</g>")
    return out
