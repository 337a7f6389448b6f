"""``LifecycleAction.undo``: what a plugin changed in the process, taken back by ``teardown()``, the latest first."""

from __future__ import annotations

import logging

import pytest

import ezpz
from ezpz import hookimpl
from ezpz.decisions import LifecycleAction, SetupPlan


class Changes:
    """A plugin that changes something in the process in ezpz_before_init and hands back how to undo it."""

    def __init__(self, name: str, done: list[str], *, broken: bool = False) -> None:
        self.name, self.done, self.broken = name, done, broken

    @hookimpl
    def ezpz_before_init(self, plan: SetupPlan) -> LifecycleAction:
        self.done.append(f"{self.name} on")

        def undo() -> None:
            if self.broken:
                raise RuntimeError("cannot undo")
            self.done.append(f"{self.name} off")

        return LifecycleAction(reason=f"{self.name}: changed the process for the run", undo=undo)


@pytest.fixture
def plugins():  # type: ignore[no-untyped-def]
    host, names = ezpz.hooks.get_plugin_host(), []

    def register(plugin: Changes) -> None:
        assert host.register(plugin.name, plugin)
        names.append(plugin.name)

    yield register
    for name in names:
        host.unregister(name)


def test_teardown_undoes_the_latest_first_and_a_second_setup_starts_afresh(plugins) -> None:  # type: ignore[no-untyped-def]
    done: list[str] = []
    plugins(Changes("first", done))
    plugins(Changes("second", done))
    for _ in range(2):
        ezpz.hooks.setup(device="cpu", precision="fp32")
        assert sorted(done[-2:]) == ["first on", "second on"]
        called = done[-2:]
        ezpz.hooks.teardown()
        assert done[-2:] == [f"{c.split()[0]} off" for c in reversed(called)]
    assert len(done) == 8


def test_an_undo_that_raises_is_named_and_teardown_goes_on(plugins, caplog) -> None:  # type: ignore[no-untyped-def]
    done: list[str] = []
    plugins(Changes("good", done))
    plugins(Changes("bad", done, broken=True))
    ezpz.hooks.setup(device="cpu", precision="fp32")
    with caplog.at_level(logging.WARNING, logger="ezpz.teardown"):
        ezpz.hooks.teardown()
    assert "good off" in done
    assert any("lifecycle_undo_failed" in r.getMessage() and "bad" in r.getMessage() for r in caplog.records)
