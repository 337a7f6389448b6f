"""pytest fixtures for ezpz plugin tests.

Enable with ``pytest -p ezpz.testing.pytest_plugin``, with
``pytest_plugins = ["ezpz.testing.pytest_plugin"]`` in a top-level
``conftest.py``, or by importing the fixtures into a test module or a
nested ``conftest.py`` (``from ezpz.testing.pytest_plugin import ezpz_host``).

* ``ezpz_host``: a fresh :class:`~ezpz.plugin_host.host.PluginHost` holding only the
  built-in plugins; ``ezpz_host.register(name, plugin)`` adds yours, and
  :func:`ezpz.testing.make_plan` plans with it.
* ``recorded_build``: the :func:`ezpz.testing.recorded_build` factory,
  ``recorded_build("rocm", hip="6.4.1")``.
* ``ezpz_live``: :func:`ezpz.testing.assert_conformant` with ``live=True``
  (``ezpz_live("example-emu", environ={"EZPZ_DEVICE": "emu"})``): the plugin's
  device driven through a real ``setup()``, here and on 2 ranks of the kit's
  own, torn down after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ezpz.facts import TorchBuild
from ezpz.plugin_host.host import PluginHost
from ezpz.testing.builds import recorded_build as _recorded_build
from ezpz.testing.conformance import assert_conformant
from ezpz.testing.hosts import make_host
from ezpz.testing.report import ConformanceReport

__all__ = ["ezpz_host", "ezpz_live", "recorded_build"]


@pytest.fixture
def ezpz_host() -> Iterator[PluginHost]:
    """A fresh plugin host with the built-ins only; discarded after the test."""
    host = make_host(builtins=True)
    yield host
    for name in list(host.loaded()):
        plugin = host.pm.get_plugin(name)
        if plugin is not None:
            host.pm.unregister(plugin)


@pytest.fixture
def recorded_build() -> Callable[..., TorchBuild]:
    """Factory for recorded torch build facts: ``recorded_build("xpu", version="2.7.0+xpu")``."""

    def factory(kind: str = "cpu", **overrides: Any) -> TorchBuild:
        return _recorded_build(kind, **overrides)

    return factory


@pytest.fixture
def ezpz_live() -> Iterator[Callable[..., ConformanceReport]]:
    """``ezpz_live(plugin, **kwargs)``: the conformance kit with its live checks, asserted; teardown() after."""
    import ezpz

    def check(plugin: object | str, **kwargs: Any) -> ConformanceReport:
        return assert_conformant(plugin, live=True, **kwargs)

    yield check
    ezpz.hooks.teardown()
