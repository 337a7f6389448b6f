"""ezpz.primitives.device_module: the optional torch device module; and the kit's hand-offs for runtimes like torch_xla."""

from __future__ import annotations

import pytest

from ezpz.decisions import LifecycleAction, StepBoundary
from ezpz.primitives.device_module import device_module


def test_cpu_and_unregistered_device_types_have_no_module():
    assert device_module("cpu") is None
    assert device_module("xla") is None  # torch.get_device_module("xla") raises without torch_xla's registration


def test_a_registered_device_type_gives_its_module():
    import torch

    assert device_module("cuda") is torch.cuda  # present in every build, usable or not


def test_lifecycle_then_must_be_callable_and_survives_also():
    ran = []
    action = LifecycleAction(reason="set X", env_defaults={"X": "1"}, then=lambda: ran.append(1))
    both = action.also("and Y", {"Y": "2"})
    both.then()
    assert ran == [1] and dict(both.env_defaults) == {"X": "1", "Y": "2"}
    with pytest.raises(TypeError):
        LifecycleAction(reason="bad", then="import torch_xla")  # type: ignore[arg-type]


def test_step_boundary_wait_defaults_to_none():
    assert StepBoundary.eager("cpu").wait is None
