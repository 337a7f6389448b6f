"""``ezpz launch``'s side of the straggler report: reading it as hostile input, the chart, the SVG, replacement."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from ezpz.launch_drivers.straggler_report import (ReportFollower, chart_lines, chart_svg, read_report,
                                                  replacement_verdict, summary_lines)
from ezpz.steps.straggler_scores import RankTimes, score


def _data(slow_rank=2, reports=3, host_of=lambda r: f"node-{r // 2}", consecutive=None, consecutive_ranks=None):
    history = []
    for i in range(reports):
        history.append({"step": 25 * (i + 1), "step_s": {str(r): 0.25 for r in range(4)},
                        "work_s": {str(r): 0.25 if r == slow_rank else 0.05 for r in range(4)}})
    times = [RankTimes(rank=r, host=host_of(r), step=25 * reports, step_s=0.25, steps=24,
                       sections={"compute": 0.25 if r == slow_rank else 0.05}) for r in range(4)]
    report = score(times, factor=1.5)
    return {"version": 1, "report": report.to_dict(), "hosts": {str(r): host_of(r) for r in range(4)},
            "consecutive": consecutive if consecutive is not None else {host_of(slow_rank): reports},
            "consecutive_ranks": consecutive_ranks if consecutive_ranks is not None else {str(slow_rank): reports},
            "history": history}


def test_hostile_files_read_as_none(tmp_path):
    path = tmp_path / "stragglers.json"
    assert read_report(path) is None
    for text in ("not json", "[]", '{"report": {}}', '{"report": {"stragglers": 3}}'):
        path.write_text(text)
        assert read_report(path) is None, text
    path.write_text(json.dumps(_data()))
    assert read_report(path)["hosts"]["2"] == "node-1"


def test_summary_and_chart_name_the_straggler_and_its_row():
    data = _data()
    summary = summary_lines(data)
    assert "rank 2 (host node-1)" in summary[0] and "relative score 0.20" in summary[1]
    chart = chart_lines(data)
    assert "time in sections" in chart[0] and len(chart) == 5
    row = [c for c in chart if "rank    2" in c][0]
    assert row.endswith("<- straggler") and "███" in row and "▁▁▁" in chart[1]


def test_the_chart_fits_a_long_job_into_its_width():
    data = _data(reports=500)
    assert all(line.count("█") <= 60 for line in chart_lines(data, width=60)[1:])


def test_the_svg_is_well_formed_with_one_line_per_rank_and_the_straggler_in_red():
    root = ET.fromstring(chart_svg(_data()))
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 4 and [p.get("stroke") for p in lines].count("#d62728") == 1
    assert ET.fromstring(chart_svg({"report": {"stragglers": []}, "history": []})) is not None


def test_replacement_after_m_consecutive_reports_with_a_spare_only():
    data = _data(consecutive_ranks={"2": 3})
    placed = {0: "10.0.0.1", 1: "10.0.0.1", 2: "10.0.0.2", 3: "10.0.0.2"}  # the launch's own host names
    verdict = replacement_verdict(data, after=3, rank_hosts=placed, spares_left=1)
    assert verdict.outcome == "straggler" and verdict.retry and verdict.exclude == ("10.0.0.2",)
    assert "rank 2 on host 10.0.0.2 (it calls itself node-1): a straggler in 3 consecutive reports" in verdict.evidence[0]
    assert replacement_verdict(data, after=4, rank_hosts=placed, spares_left=1) is None
    assert replacement_verdict(data, after=3, rank_hosts=placed, spares_left=0) is None
    assert replacement_verdict(data, after=3, rank_hosts={0: "a", 1: "b"}, spares_left=1) is None


def test_the_follower_says_changes_once_and_asks_to_end_when_replacement_is_due(tmp_path):
    path, said = tmp_path / "stragglers.json", []
    follower = ReportFollower(path, said.append, replace_after=2, rank_hosts={r: f"h{r}" for r in range(4)},
                              spares_left=1)
    assert follower.poll() is False and said == []
    path.write_text(json.dumps(_data(consecutive_ranks={"2": 1})))
    assert follower.poll() is False and len(said) == 2
    path.write_text(json.dumps(_data(consecutive_ranks={"2": 1})) + " ")  # a new report, the same stragglers
    follower.poll()
    assert len(said) == 2
    path.write_text(json.dumps(_data(consecutive_ranks={"2": 2})) + "  ")
    assert follower.poll() is True and follower.replace.exclude == ("h2",)
