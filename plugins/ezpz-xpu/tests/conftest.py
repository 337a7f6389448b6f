"""Fixtures that put recorded Intel GPU facts behind ``ezpz_xpu.probe`` and run the real plan.

Only functions in :mod:`ezpz_xpu.probe` are replaced; discovery (the installed
``xpu`` entry point), the policies, the core's choices and the hooks are real.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `import recorded` without a package

import ezpz.hooks  # noqa: E402
from ezpz.decisions import SetupPlan  # noqa: E402
from ezpz.explain import Explanation  # noqa: E402
from ezpz.facts import TorchBuild  # noqa: E402

from ezpz_xpu import probe  # noqa: E402
from ezpz_xpu.facts import XpuDeviceProps  # noqa: E402


def torchrun_env(rank: int = 0, world: int = 1, local_rank: int | None = None, local_world: int | None = None,
                 **extra: str) -> dict[str, str]:
    """The variables torchrun sets for one worker, plus ``extra`` (``ZE_*``, ``EZPZ_*``)."""
    local_world = world if local_world is None else local_world
    env = {
        "RANK": str(rank), "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank % local_world if local_rank is None else local_rank),
        "LOCAL_WORLD_SIZE": str(local_world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
        "GROUP_RANK": str(rank // local_world), "TORCHELASTIC_RUN_ID": "ezpz-xpu-test",
    }
    env.update(extra)
    return env


@attrs.define
class FakeIntel:
    """What the replaced probe functions answer, and what they were asked to import."""

    devices: tuple[XpuDeviceProps, ...] = ()
    ccl: bool = False
    ipex: bool = False
    itt: bool = True
    imported: list[str] = attrs.field(factory=list)
    import_error: dict[str, Exception] = attrs.field(factory=dict)


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
            return object()

        monkeypatch.setattr(probe, "device_count", lambda: len(fake.devices))
        monkeypatch.setattr(probe, "device_properties", device_properties)
        monkeypatch.setattr(probe, "module_available", module_available)
        monkeypatch.setattr(probe, "import_module", import_module)
        monkeypatch.setattr(probe, "itt_available", lambda: fake.itt)
        return fake

    return install


def plan(build: TorchBuild, environ: Mapping[str, str] | None = None, **overrides: Any) -> tuple[SetupPlan, Explanation]:
    """``ezpz.hooks.plan`` with recorded build facts and an explicit environment (never os.environ)."""
    return ezpz.hooks.plan(environ=dict(environ or torchrun_env()), build=build, **overrides)


@pytest.fixture(autouse=True)
def _xpu_plugin_loaded() -> None:
    """Every test here needs the real entry point: fail loudly if discovery did not load it."""
    record = ezpz.hooks.get_plugin_host().records.get("xpu")
    assert record is not None and record.status == "loaded", (
        f"the ezpz-xpu entry point is not loaded ({record}); pip install -e plugins/ezpz-xpu --no-build-isolation"
    )
