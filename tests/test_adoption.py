"""The policy that adopts a process group made before setup(): recorded facts, no torch.distributed needed."""

from __future__ import annotations

import pickle

import attrs
import pytest

import ezpz
from ezpz.startup.adoption import ExistingGroup, adopt_group, group_backends
from ezpz.decisions import BackendChoice
from ezpz.errors import ConfigError, ProcessGroupMismatchError
from ezpz.facts import Alternative, TorchBuild

BUILD = TorchBuild(version="2.13.0+cpu", distributed_backends=("gloo",))
# What Ray Train's TorchTrainer gives worker 1 of 2 (ray/train/torch/config.py: _set_torch_distributed_env_vars).
RAY_WORKER_1 = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "NODE_RANK": "0",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "47687", "EZPZ_DEVICE": "cpu"}


@pytest.fixture(scope="module")
def plan():
    the_plan, _ = ezpz.hooks.plan(environ=RAY_WORKER_1, build=BUILD)
    assert (the_plan.launch.rank, the_plan.launch.world_size, the_plan.backend.name) == (1, 2, "gloo")
    return the_plan


def _cuda(plan):
    """The same layout on a CUDA device whose plugin offers nccl, then gloo."""
    cand = attrs.evolve(plan.device.candidate, device_type="cuda", plugin="cuda")
    backend = BackendChoice(name="nccl", reason="nccl is the CUDA backend",
                            alternatives=[Alternative(name="gloo", reason="gloo also runs CUDA tensors")])
    return attrs.evolve(plan, device=attrs.evolve(plan.device, candidate=cand), backend=backend)


def test_matching_group_is_adopted_and_says_by_whom(plan):
    decision = adopt_group(ExistingGroup(backend="gloo", rank=1, world_size=2, frameworks=("Ray Train",)), plan)
    assert decision.topic == "process_group"
    assert decision.chosen.startswith("adopted from Ray Train (gloo, rank 1 of 2)")
    assert "did not rendezvous again" in decision.reason and "owner" in decision.details["teardown"]


def test_unknown_owner_is_named_as_the_caller(plan):
    decision = adopt_group(ExistingGroup(backend="gloo", rank=1, world_size=2), plan)
    assert "adopted from the caller" in decision.chosen


@pytest.mark.parametrize(("world", "rank", "what"), [(4, 1, "world size"), (1, 0, "world size"), (2, 0, "rank")])
def test_disagreeing_layout_is_a_named_error(plan, world, rank, what):
    group = ExistingGroup(backend="gloo", rank=rank, world_size=world, frameworks=("accelerate",))
    with pytest.raises(ProcessGroupMismatchError) as caught:
        adopt_group(group, plan)
    err = caught.value
    assert isinstance(err, ConfigError) and what in err.name
    assert err.value == (world if what == "world size" else rank)
    assert "accelerate" in err.fix and ("world size 2" in err.expected or "rank 1 of 2" in err.expected)
    assert str(pickle.loads(pickle.dumps(err))) == str(err)  # survives Ray/multiprocessing


def test_backend_must_serve_the_chosen_device(plan):
    cuda = _cuda(plan)
    ok = adopt_group(ExistingGroup(backend="cpu:gloo,cuda:nccl", rank=1, world_size=2), cuda)
    assert "nccl serves cuda" in ok.reason and "would have chosen" not in ok.reason
    slower = adopt_group(ExistingGroup(backend="gloo", rank=1, world_size=2), cuda)
    assert "would have chosen nccl" in slower.reason  # offered by the plugin, so adopted, and said
    with pytest.raises(ProcessGroupMismatchError, match="backend") as caught:
        adopt_group(ExistingGroup(backend="cpu:gloo", rank=1, world_size=2), cuda)  # nothing for cuda
    assert "backend='nccl'" in caught.value.fix
    with pytest.raises(ProcessGroupMismatchError, match="backend"):
        adopt_group(ExistingGroup(backend="nccl", rank=1, world_size=2), plan)  # nccl cannot serve cpu


def test_group_backends_parses_torchs_forms():
    assert group_backends("gloo") == {"*": "gloo"}
    assert group_backends("cpu:gloo,cuda:nccl") == {"cpu": "gloo", "cuda": "nccl"}
    assert group_backends("cpu:gloo, xpu:xccl") == {"cpu": "gloo", "xpu": "xccl"}
