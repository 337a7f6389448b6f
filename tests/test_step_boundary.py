"""A lazy device's step boundary reaches a loop written for CUDA: after every optimizer.step(), once per step.

Real ``setup()`` and ``teardown()`` with a test plugin that declares cpu lazy and counts its boundaries
(ezpz.steps.boundary); then the recompile watch (ezpz.steps.recompiles) on a counter that compiles every step.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Iterator

import pytest
import torch
from torch import nn

import ezpz
from ezpz import hookimpl
from ezpz.decisions import StepBoundary
from ezpz.errors import ConfigError
from ezpz.steps.recompiles import RecompileWatch, changed_lines
from ezpz.testing import make_host

_LAUNCH_VARS = ("EZPZ_DEVICE", "EZPZ_STEP_HOOK", "RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID",
                "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")


class LazyCpu:
    """What a lazy device's plugin would report: its boundaries, and (optionally) one compile per boundary."""

    def __init__(self, *, recompiles: bool = False, compiles_until: int | None = None) -> None:
        self.marks = 0
        self.compiled = 0
        self.recompiles, self.compiles_until = recompiles, compiles_until
        self.lr = 0.0  # the value the "graph" bakes in: the test loop sets it every step

    def mark(self) -> None:
        self.marks += 1
        if self.recompiles and (self.compiles_until is None or self.marks <= self.compiles_until):
            self.compiled += 1

    def compiles(self) -> tuple[int, float]:
        return self.compiled, 0.25 * self.compiled

    def graph(self, tensors: list[torch.Tensor]) -> tuple[str, ...]:
        assert tensors and all(isinstance(t, torch.Tensor) for t in tensors)  # the stepped optimizer's parameters
        return ("% = f32[4]{0} parameter(0)", f"% = f32[] constant({self.lr:g})", "% = f32[4]{0} multiply(%, %)")

    def plugin(self) -> types.ModuleType:
        module = types.ModuleType("ezpz_test_lazy_cpu")
        lazy = self

        @hookimpl(tryfirst=True)
        def ezpz_step_boundary(device, build):  # type: ignore[no-untyped-def]
            if device.device_type != "cpu":
                return None
            return StepBoundary(
                name="lazy_cpu.flush()", reason="test: cpu declared lazy, its boundary counted", mark=lazy.mark,
                compiles=lazy.compiles if lazy.recompiles else None, graph_text=lazy.graph)

        module.ezpz_step_boundary = ezpz_step_boundary
        return module


@pytest.fixture
def lazy(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LazyCpu, pytest.MonkeyPatch]]:
    for name in _LAUNCH_VARS:
        monkeypatch.delenv(name, raising=False)
    yield LazyCpu(), monkeypatch
    ezpz.hooks.teardown()


def _setup(device: LazyCpu):  # type: ignore[no-untyped-def]
    with ezpz.hooks.using_plugin_host(make_host(device.plugin())):
        return ezpz.hooks.setup(device="cpu")


def _train(rt, device: LazyCpu, steps: int, *, rt_step: bool, optimizers: int = 1) -> list[int]:  # type: ignore[no-untyped-def]
    """A CUDA-style loop (backward, optimizer.step(), a Python-float lr schedule); the boundaries each step ran."""
    torch.manual_seed(0)
    models = [nn.Linear(4, 1) for _ in range(optimizers)]
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in models]
    per_step = []
    for step in range(steps):
        before = device.marks
        device.lr = 1e-2 * (1 - step / steps)
        for model, opt in zip(models, opts):
            for group in opt.param_groups:
                group["lr"] = device.lr
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if rt_step:
            rt.step()
        per_step.append(device.marks - before)
    return per_step


def test_a_loop_without_rt_step_gets_the_boundary_after_every_optimizer_step(lazy) -> None:
    device, _ = lazy
    rt = _setup(device)
    assert _train(rt, device, 6, rt_step=False) == [1] * 6
    assert rt.boundary.by_hook == 6 and rt.step_clock.count == 0


def test_a_script_that_calls_rt_step_gets_exactly_one_boundary_per_step(lazy) -> None:
    device, _ = lazy
    rt = _setup(device)
    assert _train(rt, device, 6, rt_step=True) == [1] * 6
    assert rt.step_clock.count == 6
    assert rt.boundary.by_hook == 1  # the first step's, before the script was seen calling rt.step()


def test_with_two_optimizers_and_rt_step_only_the_first_step_gets_two(lazy) -> None:
    # The hook cannot know which optimizer.step() is a step's last; once rt.step() is seen, it is the boundary.
    device, _ = lazy
    rt = _setup(device)
    assert _train(rt, device, 4, rt_step=True, optimizers=2) == [2, 1, 1, 1]


def test_the_opt_out_leaves_the_boundary_to_rt_step(lazy) -> None:
    device, monkeypatch = lazy
    monkeypatch.setenv("EZPZ_STEP_HOOK", "0")
    rt = _setup(device)
    assert not rt.boundary.installed
    assert _train(rt, device, 3, rt_step=False) == [0, 0, 0]
    assert _train(rt, device, 3, rt_step=True) == [1, 1, 1]
    step = rt.explain()["step"]
    assert step.chosen == "Runtime.step() calls lazy_cpu.flush()"
    assert [a.name for a in step.alternatives] == ["lazy_cpu.flush() after every optimizer.step()"]
    assert "EZPZ_STEP_HOOK=0" in step.alternatives[0].reason


def test_explain_says_the_hook_is_in_force(lazy) -> None:
    device, _ = lazy
    rt = _setup(device)
    step = rt.explain()["step"]
    assert step.chosen == "Runtime.step() calls lazy_cpu.flush(); without rt.step(), every optimizer.step() does"
    assert "after every optimizer.step()" in step.reason and "one per step, never two" in step.reason
    assert "EZPZ_STEP_HOOK=0" in step.alternatives[0].reason


def test_teardown_removes_the_hook(lazy) -> None:
    device, _ = lazy
    rt = _setup(device)
    assert rt.boundary.installed
    ezpz.hooks.teardown()
    assert not rt.boundary.installed
    assert _train(rt, device, 2, rt_step=False) == [0, 0]


def test_an_eager_device_installs_no_hook(lazy) -> None:
    rt = ezpz.hooks.setup(device="cpu")
    assert rt.plan.step.mark is None and not rt.boundary.installed
    assert rt.explain()["step"].chosen == "Runtime.step() counts and times the step (no device call)"


@pytest.mark.parametrize("bad", ["maybe", "2", "yes please"])
def test_a_bad_opt_out_value_is_named(lazy, bad: str) -> None:
    device, monkeypatch = lazy
    monkeypatch.setenv("EZPZ_STEP_HOOK", bad)
    with pytest.raises(ConfigError, match="EZPZ_STEP_HOOK") as err:
        _setup(device)
    assert err.value.value == bad and "rt.step()" in err.value.fix


def test_rt_save_is_torch_save_on_an_eager_device(lazy, tmp_path) -> None:
    rt = ezpz.hooks.setup(device="cpu")
    model = nn.Linear(3, 2)
    rt.save({"model": model.state_dict()}, tmp_path / "ck.pt")
    back = torch.load(tmp_path / "ck.pt", weights_only=True)
    assert torch.equal(back["model"]["weight"], model.weight.detach())


def test_rt_save_brings_tensors_to_the_host_through_the_plugin(lazy, tmp_path) -> None:
    device, _ = lazy
    seen = []

    def to_host(obj):  # type: ignore[no-untyped-def]
        seen.append(sorted(obj))
        return {k: v.clone() for k, v in obj.items()}

    plugin = types.ModuleType("ezpz_test_lazy_save")

    @hookimpl(tryfirst=True)
    def ezpz_step_boundary(device, build):  # type: ignore[no-untyped-def]
        return StepBoundary(name="flush()", reason="test: a lazy device that saves", mark=lambda: None, to_host=to_host)

    plugin.ezpz_step_boundary = ezpz_step_boundary
    with ezpz.hooks.using_plugin_host(make_host(plugin)):
        rt = ezpz.hooks.setup(device="cpu")
    rt.save({"w": torch.ones(2)}, tmp_path / "ck.pt")
    assert seen == [["w"]] and torch.equal(torch.load(tmp_path / "ck.pt")["w"], torch.ones(2))


# ---- a graph that compiles anew every step ----

def test_a_step_that_recompiles_every_step_is_named_once(lazy, caplog) -> None:
    device, _ = lazy
    device.recompiles = True
    rt = _setup(device)
    with caplog.at_level(logging.WARNING, logger="ezpz.step"):
        _train(rt, device, 20, rt_step=False)
    found = [r.getMessage() for r in caplog.records if "graph_recompiles_every_step" in r.getMessage()]
    assert len(found) == 1, found
    text = found[0]
    assert "compiles=5" in text and "compile_s_per_step=0.25" in text
    assert "changed='f32[] constant(0.007) -> constant(0.0065)'" in text  # the lr of the window's last two steps (7 and 8)
    assert "baked into the graph" in text and "in a tensor on the device" in text
    assert rt.boundary.recompiling is not None and rt.boundary.recompiling.steps == 5


def test_a_step_that_stops_compiling_after_the_warm_up_is_not_named(lazy, caplog) -> None:
    device, _ = lazy
    device.recompiles, device.compiles_until = True, 3
    rt = _setup(device)
    with caplog.at_level(logging.WARNING, logger="ezpz.step"):
        _train(rt, device, 20, rt_step=True)
    assert not [r for r in caplog.records if "graph_recompiles" in r.getMessage()]
    assert rt.boundary.recompiling is None


def test_the_watch_judges_after_the_warm_up_and_says_once() -> None:
    watch = RecompileWatch(warmup=2, window=3)
    verdicts = [watch.observe(n, 0.5 * n, ("% = s64[] parameter(0)", f"% = s64[] constant({n})") if watch.wants_graph()
                              else None)
                for n in range(1, 10)]
    first = next(i for i, v in enumerate(verdicts) if v is not None)
    assert first == 4 and sum(v is not None for v in verdicts) == 1  # 2 warm-up boundaries, then 3 that compiled
    found = verdicts[first]
    assert found.steps == 3 and found.compiles == 3 and found.seconds_per_step == pytest.approx(0.5)
    assert found.changed == ("s64[] constant(4) -> constant(5)",) and "Python number" in found.cause


def test_a_step_without_a_compile_restarts_the_count() -> None:
    watch = RecompileWatch(warmup=0, window=3)
    counts = [1, 2, 3, 3, 4, 5, 5, 6]  # never three compiling boundaries in a row
    assert all(watch.observe(c, 0.0) is None for c in counts)


def test_changed_lines_tell_a_value_from_a_shape() -> None:
    lines = ("% = f32[8,8]{1,0} parameter(0)", "% = f32[8,1]{1,0} slice(f32[8,8]{1,0} %), slice={[0:8], [2:3]}")
    moved = (lines[0], "% = f32[8,1]{1,0} slice(f32[8,8]{1,0} %), slice={[0:8], [3:4]}")
    changed, why = changed_lines(lines, moved)
    assert changed == ("f32[8,1]{1,0} slice(f32[8,8]{1,0} %), slice={[0:8], [2:3]} -> [3:4]}",)
    assert "Python number" in why
    shape, why = changed_lines(lines, lines[:1])
    assert shape == () and "shape or a code path" in why
    same, why = changed_lines(lines, lines)
    assert same == () and "the same" in why
    unknown, why = changed_lines((), ())
    assert unknown == () and "could not be read" in why
    many, _ = changed_lines(tuple(f"% = f32[] constant({i})" for i in range(10)),
                            tuple(f"% = f32[] constant({i + 1})" for i in range(10)))
    assert len(many) == 5 and many[-1] == "... and 6 more"
