"""Straggler scoring (pure) over recorded timings, the settings, the rows, the history, and the exchange's seams."""

from __future__ import annotations

import json

import pytest
import torch

from ezpz.errors import ConfigError
from ezpz.inputs.settings import StragglerSettings, parse_stragglers
from ezpz.steps.straggler_exchange import HISTORY_NAME, REPORT_NAME, StragglerWatch
from ezpz.steps.straggler_history import StragglerHistory, unpack_ints
from ezpz.steps.straggler_rows import (HOST_BYTES, NAMED, ROW_SIZE, VERDICT_SIZE, RankTimes, StragglerVerdict,
                                       host_row, hosts_from_rows, section_key)
from ezpz.steps.straggler_scores import DETAILED, score, score_table, table_of
from ezpz.steps.straggler_writer import ReportWriter

pytestmark = pytest.mark.one_torch  # launch plumbing: the straggler watch: runs on the pinned torch only (docs/ci.md)

# Recorded: 4 ranks of a 0.05 s step on one host, rank 2 sleeping 0.2 s more (medians over 24 steps).
RECORDED = [(0, 0.0501), (1, 0.0500), (2, 0.2501), (3, 0.0502)]


def _times(pairs, *, sections=False, step=25, host="n{rank}"):
    return [RankTimes(rank=r, host=host.format(rank=r), step=step, step_s=0.2505 if sections else s, steps=24,
                      sections={"compute": s} if sections else {}) for r, s in pairs]


def test_the_slow_rank_is_named_with_its_host_and_its_scores():
    report = score(_times(RECORDED), factor=1.5)
    [s] = report.stragglers
    assert (s.rank, s.host) == (2, "n2")
    assert s.relative == pytest.approx(0.0500 / 0.2501)  # the best rank's time over its own
    assert s.individual == 1.0  # it has always been this slow
    assert report.measure == "step" and report.median_s == pytest.approx(0.05015)
    assert "rank 2 (host n2)" in report.reason and "5.0x the median" in report.reason


def test_sections_are_compared_when_every_rank_timed_them_since_step_times_are_equal():
    report = score(_times(RECORDED, sections=True), factor=1.5)
    assert report.measure == "sections" and [s.rank for s in report.stragglers] == [2]
    assert report.stragglers[0].sections["compute"] == pytest.approx(0.0500 / 0.2501)
    mixed = _times(RECORDED, sections=True)[:3] + _times(RECORDED)[3:]
    assert score(mixed, factor=1.5).measure == "step"  # one rank without sections: compare step times


def test_individual_score_is_against_the_ranks_own_best():
    report = score(_times([(0, 0.05), (1, 0.05), (2, 0.15)]), factor=1.5, own_best={2: 0.05})
    assert report.stragglers[0].individual == pytest.approx(1 / 3)
    best = torch.tensor([float("inf"), float("inf"), 0.05], dtype=torch.float64)
    scored = score_table(table_of(_times([(0, 0.05), (1, 0.05), (2, 0.15)])), factor=1.5, own_best=best)
    assert scored.individual.tolist() == pytest.approx([1.0, 1.0, 1 / 3])


def test_no_straggler_within_the_factor_and_the_median_not_the_best_is_the_yardstick():
    report = score(_times([(0, 0.030), (1, 0.050), (2, 0.052), (3, 0.051)]), factor=1.5)
    assert report.stragglers == () and report.count == 0 and "no straggler at step 25" in report.reason
    scored = score_table(table_of(_times([(0, 0.030), (1, 0.050), (2, 0.052), (3, 0.051)])), factor=1.5)
    assert scored.relative[1] == pytest.approx(0.6)  # scores still say who is slower than the best


def test_many_stragglers_are_counted_and_the_slowest_described_first():
    n = 4 * DETAILED
    times = [(r, 0.15 + r / 1e5 if r % 3 == 0 else 0.05) for r in range(n)]  # a third of the ranks 3x slow
    report = score(_times(times), factor=1.5)
    slow = len(range(0, n, 3))
    assert report.count == slow > DETAILED and len(report.stragglers) == DETAILED
    assert [s.rank for s in report.stragglers[:2]] == [255, 252]  # slowest first
    assert f"{slow} of {n} ranks" in report.reason and f"and {slow - 8} more" in report.reason


@pytest.mark.parametrize("factor", [1.0, 0.5])
def test_a_factor_of_one_or_less_is_refused(factor):
    with pytest.raises(ValueError, match="greater than 1"):
        score(_times(RECORDED), factor=factor)


def test_settings_defaults_values_and_named_errors():
    assert parse_stragglers({}) == StragglerSettings()
    got = parse_stragglers({"EZPZ_STRAGGLER_EVERY": "10", "EZPZ_STRAGGLER_FACTOR": "2"})
    assert (got.every, got.factor) == (10, 2.0) and "EZPZ_STRAGGLER_EVERY=10" in got.source
    assert parse_stragglers({"EZPZ_STRAGGLER_EVERY": "0"}).every == 0
    for name, value in (("EZPZ_STRAGGLER_EVERY", "-1"), ("EZPZ_STRAGGLER_EVERY", "ten"),
                        ("EZPZ_STRAGGLER_FACTOR", "1"), ("EZPZ_STRAGGLER_FACTOR", "nan"),
                        ("EZPZ_STRAGGLER_FACTOR", "x")):
        with pytest.raises(ConfigError, match=name) as info:
            parse_stragglers({name: value})
        assert info.value.value == value and info.value.fix


def _peers(step, times, host="n{rank}"):
    """The table rank 0's gather returns: recorded rows of every rank but rank 0, whose own row is ``mine``."""
    return [RankTimes(rank=r, host=host.format(rank=r), step=step, step_s=t, steps=3).row() for r, t in times]


def _seams(world, others):
    """gather/broadcast for rank 0 of a recorded job: its own row first, then the recorded ranks'."""
    sent, hosts = [], torch.tensor([host_row(f"n{r}") for r in range(world)], dtype=torch.uint8)

    def gather(mine):
        if mine.dtype == torch.uint8:
            assert mine.tolist() == host_row("n0")
            return hosts
        sent.append(mine.tolist())
        return torch.tensor([mine.tolist(), *others(int(mine[0]))], dtype=torch.float64)

    return gather, sent


def test_the_watch_reports_every_n_steps_and_rank_0_writes_both_files(tmp_path):
    gather, sent = _seams(4, lambda step: _peers(step, RECORDED[1:]))
    shared = []
    watch = StragglerWatch(rank=0, world_size=4, every=4, factor=1.5, report_dir=str(tmp_path), host="n0",
                           gather=gather, broadcast=lambda v: shared.append(v.clone()) or v)
    watch.section("compute", 0.04)
    assert [watch.due(c) for c in range(1, 9)] == [False, False, False, True] * 2
    verdict = watch.report(4, (0.05, 0.05, 0.06))
    assert len(sent[0]) == ROW_SIZE and sent[0][1] == 3 and sent[0][2] == 0.05  # steps, the median step time
    assert sent[0][6:8] == [section_key("compute"), 0.04]
    assert verdict.ranks == (2,) and verdict.count == 1 and not verdict.is_straggler  # step times (rank 0 alone timed)
    assert len(shared[0]) == VERDICT_SIZE
    watch.writer.flush()
    data = json.loads((tmp_path / REPORT_NAME).read_text())
    assert data["report"]["stragglers"][0]["host"] == "n2" and data["consecutive"] == {"n2": 1}
    assert data["history"] == HISTORY_NAME and data["ranks"] == 4
    watch.report(8, (0.05,) * 7)
    watch.close()
    data = json.loads((tmp_path / REPORT_NAME).read_text())
    assert data["consecutive"] == {"n2": 2} and data["consecutive_ranks"] == {"2": 2}
    history = json.loads((tmp_path / HISTORY_NAME).read_text())
    assert history["reports"] == 2 and history["hosts"] == ["n0", "n1", "n2", "n3"]
    assert [c["steps"] for c in history["heatmap"]["columns"]] == [[4, 4], [8, 8]]
    assert unpack_ints(history["latest_us"], 4)[2] == 250100 and history["stragglers"] == [2]
    assert sent[1][1] == 4 and sent[1][5] == 0  # only the steps since the last report; no section this time


def test_a_non_zero_rank_sends_its_row_learns_the_verdict_and_scores_itself_in_o1():
    gathered = []
    verdict_row = StragglerVerdict(step=25, measure="step", median_s=0.05, best_s=0.05, factor=1.5, count=1,
                                   ranks=(3,), rank=0, took_s=0, relative=1, individual=1).row()
    watch = StragglerWatch(rank=3, world_size=4, every=25, factor=1.5, report_dir="/nonexistent", host="n3",
                           gather=lambda mine: gathered.append(mine) or None,
                           broadcast=lambda v: torch.tensor(verdict_row, dtype=torch.float64))
    verdict = watch.report(25, (0.25,) * 25)
    assert [t.dtype for t in gathered] == [torch.uint8, torch.float64] and len(gathered[0]) == HOST_BYTES
    assert verdict.is_straggler and verdict.rank == 3 and verdict.relative == pytest.approx(0.2)
    assert watch.consecutive == 1 and watch.history is None and watch.writer is None  # nothing of the others kept
    watch.report(50, (0.25,) * 50)
    assert len(gathered) == 3  # host names travel once
    assert watch.consecutive == 2


def test_a_gathered_table_of_the_wrong_shape_is_refused_with_its_shape():
    watch = StragglerWatch(rank=0, world_size=4, every=25, factor=1.5, report_dir=None, host="n0",
                           gather=lambda mine: torch.zeros((3, mine.numel()), dtype=mine.dtype),
                           broadcast=lambda v: v)
    with pytest.raises(ValueError, match=r"shape \(3, 64\), not \(4, 64\)"):
        watch.report(25, (0.05,) * 25)


def test_rows_round_trip_and_host_names_are_cut_safely():
    t = RankTimes(rank=5, host="h", step=50, step_s=0.1, steps=25, sections={f"s{i}": i / 100 for i in range(10)},
                  device_s=0.09)
    row = t.row()
    assert len(row) == ROW_SIZE and row[5] == 10 and row[3] == pytest.approx(t.work_s)  # the sum covers all 10
    back = RankTimes.from_row(row, rank=5, host="h", names={section_key(f"s{i}"): f"s{i}" for i in range(10)})
    assert back.device_s == 0.09 and dict(back.sections) == {f"s{i}": i / 100 for i in range(8)}
    long = "ü" * 40  # 80 bytes: cut inside a character
    names = hosts_from_rows(bytes(host_row("node-1") + host_row(long) + [0] * HOST_BYTES))
    assert names[0] == "node-1" and names[1].startswith("ü" * 31) and names[2] == "?"
    v = StragglerVerdict(step=7, measure="sections", median_s=0.05, best_s=0.04, factor=1.5, count=40,
                         ranks=tuple(range(40)), rank=0, took_s=0, relative=1, individual=1)
    back = StragglerVerdict.from_row(v.row(), rank=9, took_s=0.08, own_best_s=0.06)
    assert back.ranks == tuple(range(NAMED)) and back.count == 40 and back.measure == "sections"
    assert back.relative == pytest.approx(0.5) and back.individual == pytest.approx(0.75)


def _scored(took, slow=()):
    n = len(took)
    table = torch.tensor([RankTimes(rank=r, host="-", step=1, step_s=t, steps=1).row() for r, t in enumerate(took)],
                         dtype=torch.float64)
    return score_table(table, factor=1.5)


def test_the_history_is_bounded_whatever_the_number_of_reports():
    n = 600
    h = StragglerHistory([f"h{r % 50}" for r in range(n)], rows=256, columns=8, recent=5)  # round-robin placement
    took = [0.05] * n
    took[7] = 0.3
    sizes = None
    for i in range(1, 101):
        s = _scored(took)
        h.add(s)
        now = [t.numel() for t in (h._cells, h._recent, h.own_best, h.consecutive)] + [len(h._col_reports)]
        assert sizes is None or now == sizes
        sizes = now
    assert h.span == 16 and h._ncols == 7  # 8 columns of 16 reports fill at 128: 100 reports in 7
    snap = h.snapshot().to_json()
    assert sum(c["reports"] for c in snap["heatmap"]["columns"]) == 100
    assert [c["steps"] for c in snap["heatmap"]["columns"]][0] == [1, 1]
    assert len(snap["slowest"][0]["recent_us"]) == 5 and snap["slowest"][0]["rank"] == 7
    assert h.consecutive[7] == 100 and h.consecutive_hosts == {"h7": 100}
    # rows are runs of the host order: rank 7 (host h7) is in the row whose hosts cover h7
    rows = snap["heatmap"]["rows"]
    assert len(rows) == 256 and sum(r["n"] for r in rows) == n
    row7 = int(h.row_of[7])
    assert rows[row7]["hosts"][0] <= "h7" <= rows[row7]["hosts"][1] or rows[row7]["hosts"] == ["h7", "h7"]
    cells = unpack_ints(snap["heatmap"]["cells_us"])[:256]  # the first column
    assert cells[row7] == 300000 and max(c for i, c in enumerate(cells) if i != row7) == 50000


def test_the_writer_keeps_only_the_newest_report_and_flushes(tmp_path):
    import threading

    gate, started = threading.Event(), threading.Event()
    writer = ReportWriter(tmp_path)
    writer.submit(lambda: started.set() or gate.wait(5) and {"a.json": {"n": 1}})
    assert started.wait(10)  # the thread is busy with the first report
    for n in (2, 3, 4):
        writer.submit(lambda n=n: {"a.json": {"n": n}})
    gate.set()
    assert writer.flush(10)
    assert json.loads((tmp_path / "a.json").read_text()) == {"n": 4} and writer.replaced == 2
    writer.submit(lambda: {"b.json": 1 / 0})  # a broken report is logged, never raised
    assert writer.flush(10) and not (tmp_path / "b.json").exists() and writer.written == 2


def test_the_heavy_file_waits_its_turn_but_a_flush_writes_it(tmp_path):
    writer = ReportWriter(tmp_path, duty=1e-6)  # after one heavy write, the next is due in ages
    writer.submit(lambda: {"head.json": 1}, lambda: {"history.json": 1})
    assert writer.flush(10) and writer.heavy_written == 1
    for n in (2, 3):
        writer.submit(lambda n=n: {"head.json": n}, lambda n=n: {"history.json": n})
    deadline = __import__("time").monotonic() + 10
    while writer.written < 3 and __import__("time").monotonic() < deadline:
        __import__("time").sleep(0.01)
    assert json.loads((tmp_path / "history.json").read_text()) == 1  # not due yet: the small file goes on alone
    writer.close()
    assert json.loads((tmp_path / "history.json").read_text()) == 3 and writer.heavy_written == 2


class _Event:
    """A recorded device event: ``elapsed_time`` in milliseconds, as torch's events answer."""

    def __init__(self, clock: list[float]) -> None:
        self.clock, self.at, self.synced = clock, None, False

    def record(self) -> None:
        self.at = self.clock[0]

    def synchronize(self) -> None:
        self.synced = True

    def elapsed_time(self, end: "_Event") -> float:
        return (end.at - self.at) * 1e3


def test_the_device_timer_gives_the_mean_device_step_time_between_reports_and_a_broken_one_falls_back():
    clock, made = [0.0], []

    def new_event():
        made.append(_Event(clock))
        return made[-1]

    one = {"gather": lambda mine: mine[None], "broadcast": lambda v: v}
    watch = StragglerWatch(rank=0, world_size=1, every=10, factor=1.5, report_dir=None, host="n0",
                           new_event=new_event, timer="cuda events", **one)
    assert watch.report(10, (0.05,) * 9).count == 0 and len(made) == 1  # the first report starts the timer
    assert watch.sent.device_s is None
    clock[0] = 0.4  # 10 steps of 40 ms on the device
    sent = watch.report(20, (0.05,) * 19)
    assert made[-1].synced and watch.sent.device_s == pytest.approx(0.04)
    assert unpack_ints(watch.history.snapshot().to_json()["device_us"]) == [40000]

    def broken():
        raise RuntimeError("no events here")

    watch = StragglerWatch(rank=0, world_size=1, every=10, factor=1.5, report_dir=None, host="n0",
                           new_event=broken, **one)
    watch.report(10, (0.05,) * 9)
    assert watch._new_event is None and watch.sent.device_s is None and sent is not None
    assert "device_us" not in watch.history.snapshot().to_json()


_EXIT_SCRIPT = r'''
import sys, torch
from ezpz.steps.straggler_exchange import StragglerWatch
from ezpz.steps.straggler_rows import RankTimes
n = 64
table = torch.tensor(RankTimes(rank=0, host="-", step=0, step_s=0.05, steps=5).row(), dtype=torch.float64).repeat(n, 1)
table[3, 2] = 0.5
def gather(mine):
    if mine.dtype == torch.uint8:
        return torch.zeros((n, mine.numel()), dtype=torch.uint8)
    table[:, 0] = mine[0]
    return table
w = StragglerWatch(rank=0, world_size=n, every=5, factor=1.5, report_dir=sys.argv[1], host="h",
                   gather=gather, broadcast=lambda v: v)
for i in range(1, 41):
    w.report(5 * i, (0.05,) * 5)
'''


def test_the_last_report_is_written_at_exit_and_the_exit_is_clean(tmp_path):
    import subprocess
    import sys

    for attempt in range(3):  # the history is due only 5 % of the time: the exit writes the last one
        out = tmp_path / str(attempt)
        proc = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, str(out)], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0 and "terminate called" not in proc.stderr, proc.stderr[-2000:]
        assert json.loads((out / REPORT_NAME).read_text())["report"]["step"] == 200
        assert json.loads((out / HISTORY_NAME).read_text())["step"] == 200


def test_the_default_exchange_runs_on_torch_distributed_and_gloo_takes_cpu_tensors(tmp_path):
    """The real collectives (gather, broadcast) in a one-rank gloo group; a device gloo serves means the CPU."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        watch = StragglerWatch(rank=0, world_size=1, every=5, factor=1.5, report_dir=str(tmp_path), host="n0",
                               device="cuda:0")  # the plan's device; gloo serves it, so the rows stay on the CPU
        watch.section("compute", 0.01)
        first = watch.report(5, (0.02,) * 5)
        second = watch.report(10, (0.02,) * 10)
        assert watch._collective_device() == torch.device("cpu")
        assert (first.step, second.step, second.count, second.measure) == (5, 10, 0, "step")
        assert watch.history.host_names == ["n0"] and watch.history.reports == 2
        watch.close()
        assert json.loads((tmp_path / REPORT_NAME).read_text())["report"]["step"] == 10
    finally:
        dist.destroy_process_group()
