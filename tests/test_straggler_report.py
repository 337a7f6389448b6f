"""``ezpz launch``'s side of the straggler report: reading it as hostile input, the charts, replacement.

The reports are made by the real exchange (``StragglerWatch``) through its seams, for simulated jobs of up to
1,024 ranks: the same files rank 0 writes in a real job.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import torch

from ezpz.launch_drivers.straggler_charts import LABEL_GAP, chart_lines, chart_svg
from ezpz.launch_drivers.straggler_report import (ReportFollower, read_history, read_report, replacement_verdict,
                                                  summary_lines)
from ezpz.steps.straggler_exchange import HISTORY_NAME, REPORT_NAME, StragglerWatch
from ezpz.steps.straggler_history import pack_ints, unpack_ints
from ezpz.steps.straggler_rows import RankTimes, host_row
from ezpz.steps.straggler_scores import score

SVG = "{http://www.w3.org/2000/svg}"


def simulate(folder: Path, n: int, reports: int, slow: dict[int, float], per_host: int = 4, every: int = 25) -> Path:
    """Rank 0 of an ``n``-rank job through the real watch: every rank a 50 ms section, ``slow`` ranks times more."""
    hosts = torch.tensor([host_row(f"node-{r // per_host}") for r in range(n)], dtype=torch.uint8)
    row = torch.tensor(RankTimes(rank=0, host="-", step=0, step_s=0.25, steps=every,
                                 sections={"compute": 0.05}).row(), dtype=torch.float64).repeat(n, 1)
    gen = torch.Generator().manual_seed(1)

    def gather(mine):
        if mine.dtype == torch.uint8:
            return hosts
        table = row.clone()
        table[:, 0] = mine[0]
        table[:, 7] *= 1 + 0.02 * torch.rand(n, generator=gen, dtype=torch.float64)
        for r, times in slow.items():
            table[r, 7] *= times
        table[:, 3] = table[:, 7]
        table[0] = mine
        return table

    watch = StragglerWatch(rank=0, world_size=n, every=every, factor=1.5, report_dir=str(folder), host="node-0",
                           gather=gather, broadcast=lambda v: v)
    for i in range(1, reports + 1):
        watch.section("compute", 0.05)
        watch.report(i * every, (0.25,) * every)
    watch.close()
    return folder / REPORT_NAME


def _head(slow_rank=2, consecutive=None, consecutive_ranks=None):
    times = [RankTimes(rank=r, host=f"node-{r // 2}", step=75, step_s=0.25, steps=24,
                       sections={"compute": 0.25 if r == slow_rank else 0.05}) for r in range(4)]
    return {"version": 2, "report": score(times, factor=1.5).to_dict(),
            "consecutive": consecutive if consecutive is not None else {f"node-{slow_rank // 2}": 3},
            "consecutive_ranks": consecutive_ranks if consecutive_ranks is not None else {str(slow_rank): 3},
            "history": HISTORY_NAME}


def test_hostile_files_read_as_none(tmp_path):
    path = tmp_path / REPORT_NAME
    assert read_report(path) is None
    for text in ("not json", "[]", '{"report": {}}', '{"report": {"stragglers": 3}}',
                 '{"report": {"stragglers": []}, "consecutive_ranks": []}'):
        path.write_text(text)
        assert read_report(path) is None, text
    path.write_text(json.dumps(_head()))
    assert read_report(path)["report"]["stragglers"][0]["host"] == "node-1"
    assert read_history(path, read_report(path)) is None  # named, absent
    (tmp_path / HISTORY_NAME).write_text('{"heatmap": []}')
    assert read_history(path, read_report(path)) is None
    (tmp_path / "elsewhere").mkdir()
    for name in ("../x.json", "elsewhere/x.json", "", 3):
        assert read_history(path, {**_head(), "history": name}) is None, name


def test_a_4_rank_report_in_words_and_the_chart_of_its_slowest_ranks(tmp_path):
    path = simulate(tmp_path, 4, 3, {2: 5.0}, per_host=2)
    head = read_report(path)
    summary = summary_lines(head)
    assert "rank 2 (host node-1)" in summary[0] and "relative score 0.2" in summary[1]
    chart = chart_lines(read_history(path, head))
    assert "time in sections at step 75 over 4 ranks; 1 above 1.5x the median" in chart[0]
    assert chart[1].startswith("  distribution: min ") and " max " in chart[1]
    rows = [c for c in chart if c.startswith("  rank ")]
    assert len(rows) == 4 and rows[0].startswith("  rank    2 node-1") and rows[0].endswith("<- straggler")
    assert "███" in rows[0] and all("<- straggler" not in r for r in rows[1:])


def test_at_1024_ranks_the_text_chart_shows_the_distribution_and_8_slowest_not_a_line_per_rank(tmp_path):
    path = simulate(tmp_path, 1024, 40, {5: 4.0, 700: 3.0})
    history = read_history(path, read_report(path))
    chart = chart_lines(history, width=60)
    assert len(chart) == 4 + 8
    assert [line.split()[1] for line in chart[4:6]] == ["5", "700"]
    assert sum("<- straggler" in c for c in chart) == 2
    assert "(the fullest bin: 1022 ranks)" in chart[2]
    assert all(line.count("█") <= 60 for line in chart)


def _svg(tmp_path, n, reports, slow):
    path = simulate(tmp_path, n, reports, slow)
    history = read_history(path, read_report(path))
    text = chart_svg(history, title="test")
    return history, text, ET.fromstring(text)


def _labels_apart(root):
    labels = root.find(f".//{SVG}g[@id='straggler-labels']").findall(f"{SVG}text")
    ys = sorted(float(t.get("y")) for t in labels)
    assert all(b - a >= LABEL_GAP - 1e-6 for a, b in zip(ys, ys[1:])), ys
    return labels


def test_the_svg_heat_map_of_1024_ranks_has_a_cell_per_rank_bucket_and_labels_its_stragglers(tmp_path):
    history, text, root = _svg(tmp_path, 1024, 150, {5: 5.0, 6: 4.0, 700: 3.0})
    columns = len(history["heatmap"]["columns"])
    assert 60 <= columns <= 120 and history["heatmap"]["reports_per_column"] == 2  # 150 reports: merged once
    rows = root.find(f".//{SVG}g[@id='cells']").findall(f"{SVG}g")
    assert len(rows) == 256 and all(len(r.findall(f"{SVG}rect")) == columns for r in rows)
    spans = [tuple(int(x) for x in r.get("data-ranks").split("-")) for r in rows]
    assert spans[0] == (0, 3) and spans[-1] == (1020, 1023)  # 4 ranks a row, in host order (one host a row here)
    fills = {i: {rect.get("fill") for rect in r.findall(f"{SVG}rect")} for i, r in enumerate(rows)}
    quiet = fills[100]
    assert fills[1] != quiet and fills[175] != quiet and fills[1].isdisjoint(quiet)  # the slow rows stand out
    labels = _labels_apart(root)
    said = {int(t.get("data-rank")): t.text for t in labels}
    assert set(said) == {5, 6, 700} and said[5].startswith("rank 5 node-1 5.0x")
    assert "rank 6 node-1" in said[6]  # two stragglers in one row: two labels, one below the other


def test_labels_of_many_stragglers_never_overlap_and_the_rest_are_counted(tmp_path):
    slow = {r: 3.0 + r / 100 for r in range(4, 1024, 4)}  # 255 stragglers, one in every row but the first
    history, text, root = _svg(tmp_path, 1024, 3, slow)
    assert len(history["stragglers"]) == 255
    labels = _labels_apart(root)
    named = [int(t.get("data-rank")) for t in labels if t.get("data-rank") is not None]
    more = [t for t in labels if t.get("data-rank") is None]
    assert 20 < len(named) < 255 and len(more) == 1
    assert more[0].text == f"+ {255 - len(named)} more stragglers"
    latest = unpack_ints(history["latest_us"], 1024)
    hidden = set(history["stragglers"]) - set(named)
    assert min(latest[r] for r in named) >= max(latest[r] for r in hidden)  # the slowest are the ones kept


def test_packed_arrays_round_trip_and_bad_ones_read_as_none():
    values = [0, -1, 2**31 - 1, 250100]
    assert unpack_ints(pack_ints(values), 4) == values
    assert unpack_ints(pack_ints(values), 3) is None
    for bad in ([1, 2], {"int32_b64": "***"}, {"int32_b64": "AAA="}, {"int32_b64": 5}):
        assert unpack_ints(bad) is None, bad


def test_an_svg_without_a_report_says_so():
    assert "no report yet" in chart_svg(None)
    assert ET.fromstring(chart_svg({"heatmap": {"rows": []}})) is not None


def test_replacement_after_m_consecutive_reports_with_a_spare_only():
    data = _head(consecutive_ranks={"2": 3})
    placed = {0: "10.0.0.1", 1: "10.0.0.1", 2: "10.0.0.2", 3: "10.0.0.2"}  # the launch's own host names
    verdict = replacement_verdict(data, after=3, rank_hosts=placed, spares_left=1)
    assert verdict.outcome == "straggler" and verdict.retry and verdict.exclude == ("10.0.0.2",)
    assert "rank 2 on host 10.0.0.2 (it calls itself node-1): a straggler in 3 consecutive reports" in verdict.evidence[0]
    assert replacement_verdict(data, after=4, rank_hosts=placed, spares_left=1) is None
    assert replacement_verdict(data, after=3, rank_hosts=placed, spares_left=0) is None
    assert replacement_verdict(data, after=3, rank_hosts={0: "a", 1: "b"}, spares_left=1) is None


def test_the_follower_reads_only_the_small_file_says_changes_once_and_asks_to_end_when_due(tmp_path):
    path, said = tmp_path / REPORT_NAME, []
    follower = ReportFollower(path, said.append, replace_after=2, rank_hosts={r: f"h{r}" for r in range(4)},
                              spares_left=1)
    assert follower.poll() is False and said == []
    (tmp_path / HISTORY_NAME).write_text("not read while the job runs")
    path.write_text(json.dumps(_head(consecutive_ranks={"2": 1})))
    assert follower.poll() is False and len(said) == 2
    path.write_text(json.dumps(_head(consecutive_ranks={"2": 1})) + " ")  # a new report, the same stragglers
    follower.poll()
    assert len(said) == 2
    path.write_text(json.dumps(_head(consecutive_ranks={"2": 2})) + "  ")
    assert follower.poll() is True and follower.replace.exclude == ("h2",)
    assert follower.history() is None  # the history file is not valid: no chart, no error
