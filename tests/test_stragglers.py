"""Straggler scoring (pure) over recorded timings, the settings, and the exchange with a recorded gather."""

from __future__ import annotations

import json

import pytest

from ezpz.errors import ConfigError
from ezpz.inputs.settings import StragglerSettings, parse_stragglers
from ezpz.steps.straggler_exchange import REPORT_NAME, StragglerWatch
from ezpz.steps.straggler_scores import RankTimes, score

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
    assert report.individual[2] == pytest.approx(1 / 3) and report.individual[0] == 1.0


def test_no_straggler_within_the_factor_and_the_median_not_the_best_is_the_yardstick():
    report = score(_times([(0, 0.030), (1, 0.050), (2, 0.052), (3, 0.051)]), factor=1.5)
    assert report.stragglers == () and "no straggler at step 25" in report.reason
    assert report.relative[1] == pytest.approx(0.6)  # scores still say who is slower than the best


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


def test_the_watch_reports_every_n_steps_and_rank_0_writes_the_json(tmp_path):
    others = [RankTimes(rank=r, host=f"n{r}", step=4, step_s=s, steps=3).to_dict() for r, s in RECORDED[1:]]
    sent = []

    def gather(mine):
        sent.append(mine)
        return [mine, *others]

    watch = StragglerWatch(rank=0, world_size=4, every=4, factor=1.5, report_dir=str(tmp_path), host="n0",
                           gather=gather)
    watch.section("compute", 0.04)
    assert [watch.due(c) for c in range(1, 9)] == [False, False, False, True] * 2
    report = watch.report(4, (0.05, 0.05, 0.06))
    assert sent[0]["steps"] == 3 and sent[0]["step_s"] == 0.05 and sent[0]["sections"] == {"compute": 0.04}
    assert [s.rank for s in report.stragglers] == [2]  # rank 0 timed a section, the others did not: step times
    data = json.loads((tmp_path / REPORT_NAME).read_text())
    assert data["report"]["stragglers"][0]["host"] == "n2" and data["consecutive"] == {"n2": 1}
    watch.report(8, (0.05,) * 7)
    data = json.loads((tmp_path / REPORT_NAME).read_text())
    assert data["consecutive"] == {"n2": 2} and [h["step"] for h in data["history"]] == [4, 8]
    assert data["consecutive_ranks"] == {"2": 2}
    assert sent[1]["steps"] == 4 and sent[1]["sections"] == {}  # only the steps since the last report


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

    watch = StragglerWatch(rank=0, world_size=1, every=10, factor=1.5, report_dir=None, host="n0",
                           gather=lambda mine: [mine], new_event=new_event, timer="cuda events")
    assert watch.report(10, (0.05,) * 9).stragglers == () and len(made) == 1  # the first report starts the timer
    clock[0] = 0.4  # 10 steps of 40 ms on the device
    sent = watch.report(20, (0.05,) * 19)
    assert made[-1].synced and watch._history[-1]["device_s"]["0"] == pytest.approx(0.04)

    def broken():
        raise RuntimeError("no events here")

    watch = StragglerWatch(rank=0, world_size=1, every=10, factor=1.5, report_dir=None, host="n0",
                           gather=lambda mine: [mine], new_event=broken)
    watch.report(10, (0.05,) * 9)
    assert watch._new_event is None and "device_s" not in watch._history[-1] and sent is not None
