"""Fixtures that put recorded Intel GPU facts behind ``ezpz_xpu.probe`` and run the real plan.

Only functions in :mod:`ezpz_xpu.probe` are replaced; discovery (the installed
``xpu`` entry point), the policies, the core's choices and the hooks are real.
Helpers live in ``xpu_testlib`` and facts in ``xpu_recorded`` (unique names, so
several plugins' suites can run in one pytest session).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ezpz.hooks  # noqa: E402
from xpu_testlib import FakeIntel  # noqa: E402

from ezpz_xpu import probe  # noqa: E402
from ezpz_xpu.facts import XpuDeviceProps  # noqa: E402


@pytest.fixture
def intel(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeIntel]:
    """``intel(devices, ccl=..., ipex=..., itt=...)`` installs a recorded machine behind ``ezpz_xpu.probe``."""

    def install(devices: Sequence[XpuDeviceProps] = (), *, ccl: bool = False, ipex: bool = False,
                itt: bool = True) -> FakeIntel:
        fake = FakeIntel(devices=tuple(devices), ccl=ccl, ipex=ipex, itt=itt)

        def device_properties(index: int) -> XpuDeviceProps:
            return fake.devices[index]

        def module_available(name: str) -> bool:
            return {probe.CCL_MODULE: fake.ccl, probe.IPEX_MODULE: fake.ipex}.get(name, False)

        def import_module(name: str) -> Any:
            fake.imported.append(name)
            if name in fake.import_error:
                raise fake.import_error[name]
            if name == probe.CCL_MODULE:  # the real bindings register "ccl" with torch.distributed on import
                import torch.distributed as dist

                monkeypatch.setattr(dist.Backend, "backend_list", [*dist.Backend.backend_list, "ccl"])
            return object()

        monkeypatch.setattr(probe, "device_count", lambda: len(fake.devices))
        monkeypatch.setattr(probe, "device_properties", device_properties)
        monkeypatch.setattr(probe, "module_available", module_available)
        monkeypatch.setattr(probe, "import_module", import_module)
        monkeypatch.setattr(probe, "itt_available", lambda: fake.itt)
        return fake

    return install


@pytest.fixture(autouse=True)
def _xpu_plugin_loaded() -> None:
    """Every test here needs the real entry point: fail loudly if discovery did not load it."""
    record = ezpz.hooks.get_plugin_host().records.get("xpu")
    assert record is not None and record.status == "loaded", (
        f"the ezpz-xpu entry point is not loaded ({record}); pip install -e plugins/ezpz-xpu --no-build-isolation"
    )
