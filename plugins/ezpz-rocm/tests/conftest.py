"""Fixtures for the ezpz-rocm suite: recorded machines fed through the real plugin via its probe functions only."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ezpz_rocm.probe  # noqa: E402
from rocm_recorded import NODES, Node  # noqa: E402

from ezpz_rocm.facts import RocmGpu  # noqa: E402


@pytest.fixture(autouse=True)
def _no_live_runtime() -> Iterator[None]:
    import ezpz

    ezpz.hooks.teardown()
    yield
    ezpz.hooks.teardown()


@pytest.fixture(autouse=True)
def _probes_must_be_recorded(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here may reach the real amdsmi or torch.cuda probe by accident (``gpu`` tests excepted)."""
    if request.node.get_closest_marker("gpu") is not None:
        return

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("a test reached the real ROCm probe; use the use_amdsmi / use_torch fixtures")

    monkeypatch.setattr(ezpz_rocm.probe, "amdsmi_gpus", refuse)
    monkeypatch.setattr(ezpz_rocm.probe, "torch_gpus", refuse)


@pytest.fixture
def use_amdsmi(monkeypatch: pytest.MonkeyPatch) -> Callable[[Node | str], Node]:
    """Make ``ezpz_rocm.probe.amdsmi_gpus`` return a recorded node; torch.cuda must then not be touched."""

    def apply(node: Node | str) -> Node:
        node = NODES[node] if isinstance(node, str) else node
        monkeypatch.setattr(ezpz_rocm.probe, "amdsmi_gpus", lambda: list(node.gpus))

        def torch_not_needed() -> list[RocmGpu]:
            raise AssertionError("amdsmi answered, so the probe must not initialise HIP through torch.cuda")

        monkeypatch.setattr(ezpz_rocm.probe, "torch_gpus", torch_not_needed)
        return node

    return apply


@pytest.fixture
def use_torch(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[RocmGpu]], None]:
    """No amdsmi here: ``torch_gpus`` returns the given (already masked) devices."""

    def apply(gpus: list[RocmGpu]) -> None:
        monkeypatch.setattr(ezpz_rocm.probe, "amdsmi_gpus", lambda: None)
        monkeypatch.setattr(ezpz_rocm.probe, "torch_gpus", lambda: list(gpus))

    return apply
