"""Test helpers for ezpz plugins: a conformance check, fresh hosts, and recorded torch builds.

For a plugin's own test suite::

    from ezpz.testing import assert_conformant, recorded_build

    def test_conformant():
        assert_conformant("ezpz_cuda.plugin")                        # this machine's inputs

    def test_conformant_on_recorded_h100(h100_candidate):           # recorded inputs
        assert_conformant("ezpz_cuda.plugin", build=recorded_build("cuda"), candidates=[h100_candidate])

Fixtures (``ezpz_host``, ``recorded_build``) come with the pytest plugin
:mod:`ezpz.testing.pytest_plugin`: ``pytest -p ezpz.testing.pytest_plugin``,
``pytest_plugins = ["ezpz.testing.pytest_plugin"]`` in a top-level
``conftest.py``, or ``from ezpz.testing.pytest_plugin import ezpz_host`` in a
test module.

* :func:`check_plugin` / :func:`assert_conformant`: every hook matches a spec,
  registers without quarantine, returns its documented type with non-empty
  reasons, ignores devices it did not offer, and the module imports without
  vendor SDKs.
* ``check_plugin(..., live=True)``: also drive the plugin's device, where it
  is present, through a real ``setup()`` (:mod:`ezpz.testing.live`): tensors,
  autocast, a training step, the grad scaler, ``step()``, ``synchronize()``,
  memory stats, ranges, the profiler, ``compile()`` and a checkpoint, each a
  named result (``live tensor round trip`` ...); then on 2 ranks of its own
  (:mod:`ezpz.testing.live_ranks`): the collectives DDP and FSDP2 use, a DDP
  step, 1-D and 2-D device meshes, FSDP2 against DDP, a sharded checkpoint
  (``live ranks all_reduce`` ...); the ``ezpz_live`` fixture.
* :func:`make_host` / :func:`make_plan`: a fresh plugin host (built-ins plus
  the plugins you name) and the plan ``setup()`` would make with it.
* :func:`recorded_build`: representative :class:`~ezpz.facts.TorchBuild` facts
  per vendor wheel, adjustable per field.
"""

from __future__ import annotations

from ezpz.testing.builds import BUILDS, recorded_build
from ezpz.testing.conformance import (
    HOOK_RETURNS,
    VENDOR_SDK_MODULES,
    CheckResult,
    ConformanceReport,
    assert_conformant,
    check_plugin,
)
from ezpz.testing.hosts import builtin_plugins, make_host, make_plan

__all__ = [
    "BUILDS",
    "HOOK_RETURNS",
    "VENDOR_SDK_MODULES",
    "CheckResult",
    "ConformanceReport",
    "assert_conformant",
    "builtin_plugins",
    "check_plugin",
    "make_host",
    "make_plan",
    "recorded_build",
]
