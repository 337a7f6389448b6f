"""Runtime.step(): the device's step boundary from its plugin (ezpz_step_boundary), then the step clock."""

from __future__ import annotations

import types

import pytest

from ezpz import hookimpl
from ezpz.decisions import StepBoundary
from ezpz.decisions import Explanation
from ezpz.runtime import Runtime
from ezpz.steps.clock import StepClock
from ezpz.testing import check_plugin, make_host, make_plan, recorded_build

from conftest import unset_env


def _lazy_cpu_plugin(marks: list[str], answer: object = None, *, any_device: bool = False) -> types.ModuleType:
    """A plugin that claims cpu is lazy: its step boundary appends to ``marks`` (or it returns ``answer``)."""
    plugin = types.ModuleType("ezpz_test_lazy_cpu")

    @hookimpl(tryfirst=True)
    def ezpz_step_boundary(device, build):
        if device.device_type != "cpu" and not any_device:
            return None
        if answer is not None:
            return answer
        return StepBoundary(name="lazy_cpu.flush()", reason="test: a lazy device flushes its graph here",
                            mark=lambda: marks.append("flush"))

    plugin.ezpz_step_boundary = ezpz_step_boundary
    return plugin


def _runtime(host) -> Runtime:  # type: ignore[no-untyped-def]
    plan = make_plan(host, build=recorded_build("cpu"))
    return Runtime.from_plan(plan, Explanation(decisions=()))


def test_eager_device_step_only_counts_and_times() -> None:
    host = make_host()
    plan = make_plan(host, build=recorded_build("cpu"))
    assert plan.step is not None and plan.step.mark is None and plan.step.name == "none"
    assert "runs eagerly" in plan.step.reason
    rt = Runtime.from_plan(plan, Explanation(decisions=()))
    assert [rt.step() for _ in range(4)] == [1, 2, 3, 4]
    assert rt.step_clock.count == 4
    assert len(rt.step_clock.recent()) == 3  # the first boundary starts the clock
    assert all(t >= 0 for t in rt.step_clock.recent())


def test_a_lazy_devices_plugin_marks_every_step() -> None:
    marks: list[str] = []
    rt = _runtime(make_host(_lazy_cpu_plugin(marks)))
    assert rt.plan.step.name == "lazy_cpu.flush()"
    rt.step()
    rt.step()
    assert marks == ["flush", "flush"]


def test_explain_names_the_step_boundary() -> None:
    from ezpz.startup.planning import explain_plan
    from ezpz.inputs.settings import SetupSettings

    marks: list[str] = []
    plan = make_plan(make_host(_lazy_cpu_plugin(marks)), build=recorded_build("cpu"))
    step = explain_plan(plan, SetupSettings.resolve({}))["step"]
    assert step.chosen == "Runtime.step() calls lazy_cpu.flush(); without rt.step(), every optimizer.step() does"
    assert step.reason.startswith("test: a lazy device flushes its graph here; a loop written for CUDA gets it")
    off = explain_plan(plan, SetupSettings.resolve({"EZPZ_STEP_HOOK": "0"}))["step"]
    assert off.chosen == "Runtime.step() calls lazy_cpu.flush()" and off.reason == "test: a lazy device flushes its graph here"
    eager = explain_plan(make_plan(make_host(), build=recorded_build("cpu")), SetupSettings.resolve({}))["step"]
    assert "no device call" in eager.chosen and "cpu" in eager.reason


def test_a_wrong_answer_quarantines_the_plugin_and_the_step_stays_eager() -> None:
    host = make_host(_lazy_cpu_plugin([], answer="torch_xla.sync"))
    plan = make_plan(host, build=recorded_build("cpu"))
    assert plan.step.mark is None
    failure = host.records["ezpz_test_lazy_cpu"]
    assert failure.status == "failed" and "ezpz_step_boundary returned str" in str(failure.error)


def test_conformance_fails_a_step_boundary_for_a_device_the_plugin_did_not_offer() -> None:
    careless = _lazy_cpu_plugin([], any_device=True)  # answers for every device, its own or not
    report = check_plugin(careless, isolated_import=False, build=recorded_build("cpu"), environ={})
    failed = {r.name: r.detail for r in report.failures}
    assert any("ezpz_step_boundary" in name and "foreign" in name for name in failed), failed
    assert check_plugin(_lazy_cpu_plugin([]), isolated_import=False, build=recorded_build("cpu"), environ={}).passed


def test_real_setup_steps(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import ezpz

    unset_env(monkeypatch, ("EZPZ_DEVICE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"))  # pin stays
    rt = ezpz.hooks.setup()
    try:
        assert rt.step() == 1 and rt.step() == 2
        assert rt.explain()["step"].topic == "step"
    finally:
        ezpz.hooks.teardown()


def test_step_clock_keeps_only_the_recent_steps() -> None:
    clock = StepClock(keep=3)
    assert clock.last_s is None and clock.since_last() is None and clock.recent() == ()
    for _ in range(10):
        clock.tick()
    assert clock.count == 10 and len(clock.recent()) == 3
    assert clock.last_s == clock.recent()[-1]
    assert clock.since_last() is not None and clock.since_last() >= 0


def test_step_clock_refuses_a_bad_size() -> None:
    with pytest.raises(ValueError, match="keep must be a positive"):
        StepClock(keep=0)


def test_the_runtime_is_frozen_and_what_moves_is_in_its_state() -> None:
    """Runtime's fields are what setup() decided and never change; steps change ``rt.state`` alone."""
    import attr
    import pytest

    from ezpz.runtime import RuntimeState

    rt = _runtime(make_host())
    before = {f.name: getattr(rt, f.name) for f in attr.fields(Runtime)}
    with pytest.raises(attr.exceptions.FrozenInstanceError):
        rt.rank = 3  # type: ignore[misc]
    with pytest.raises(attr.exceptions.FrozenInstanceError):
        rt.state = RuntimeState(boundary=rt.boundary)  # type: ignore[misc]
    assert rt.step() == 1 and rt.step() == 2
    after = {f.name: getattr(rt, f.name) for f in attr.fields(Runtime)}
    assert all(after[name] is value for name, value in before.items())
    assert rt.state.step_clock.count == 2 and rt.step_clock is rt.state.step_clock
    assert rt.preemption is rt.state.preemption and rt.boundary is rt.state.boundary
    mutable = [f.name for f in attr.fields(Runtime)
               if f.name != "state" and isinstance(getattr(rt, f.name), (dict, list, set, bytearray))]
    assert mutable == [], f"Runtime fields holding mutable containers: {mutable}"
