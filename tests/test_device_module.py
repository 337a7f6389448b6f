"""ezpz.primitives.device_module: the optional torch device module; and the kit's hand-offs for runtimes like torch_xla."""

from __future__ import annotations

import pytest

from ezpz.decisions import LifecycleAction, StepBoundary
from ezpz.primitives.device_module import device_module


def test_unregistered_and_unknown_device_types_have_no_module():
    assert device_module("xla") is None  # torch.get_device_module("xla") raises without torch_xla's registration
    assert device_module("not-a-device") is None  # torch raises RuntimeError naming the device types it knows


def test_cpu_has_torch_cpu_as_torch_says():
    import torch

    assert device_module("cpu") is torch.cpu is torch.get_device_module("cpu")


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


@pytest.mark.parametrize("value, named", [("cuda", True), ("cuda:0", True), ("cuda:12", True), ("cpu", False),
                                          ("cudagraph", False), ("cuda:", False), ("cuda:x", False),
                                          ("cuda:0\n", False), ("cuda:\u0663", False), ("cuda:1:2", False)])
def test_one_answer_to_is_this_a_cuda_device_string(value, named):
    """The compat front (at run time) and the porter (in source) ask the same helper, so they agree on every string."""
    import libcst
    import torch

    from ezpz.cuda_compat.devices import DeviceMap
    from ezpz.porting.rewriter import _is_cuda_string
    from ezpz.primitives.cuda_device import is_cuda_device_string

    assert is_cuda_device_string(value) is named
    assert DeviceMap(torch.device("cpu"), local_rank=0, count=1).asks_cuda(value) is named
    assert _is_cuda_string(libcst.parse_expression(repr(value))) is named
    if named:
        assert torch.device(value).type == "cuda"
