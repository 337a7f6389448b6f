"""ezpz's Lightning Fabric bridge: cluster environment, accelerator and precision from recorded plans."""

from __future__ import annotations

import importlib.util

import attrs
import pytest

import ezpz
import test_launch_env
from conftest import skip_or_fail_in_ci
from ezpz.errors import ConfigError
from ezpz.facts import TorchBuild
from ezpz.integrations.lightning import FABRIC_PRECISION, fabric_precision

BUILD = TorchBuild(version="2.13.0+cpu", distributed_backends=("gloo",))
# PBS + Cray PALS (recorded, sources in tests/test_launch_env.py): rank 17 of 24, 12 per node, on node 1 of 2.
PALS = {**test_launch_env.PALS, "MASTER_ADDR": "x1000c0s0b0n0", "EZPZ_DEVICE": "cpu"}


def _need_lightning() -> None:
    if importlib.util.find_spec("lightning") is None:
        skip_or_fail_in_ci("lightning not installed (pip install -c constraints.txt -e '.[lightning]')",
                           "lightning is required in CI (scripts/test.sh installs ezpz[lightning])")


@pytest.mark.parametrize(("dtype", "autocast", "flag"), [("bf16", True, "bf16-mixed"), ("fp16", True, "16-mixed"),
                                                         ("fp32", False, "32-true")])
def test_fabric_precision_follows_the_amp_policy(dtype, autocast, flag):
    plan, _ = ezpz.hooks.plan(environ={"EZPZ_DEVICE": "cpu"}, build=BUILD)
    amp = attrs.evolve(plan.amp, dtype=dtype, autocast=autocast, grad_scaler=dtype == "fp16")
    assert fabric_precision(amp) == flag
    assert set(FABRIC_PRECISION) == {"bf16", "fp16"}


def test_cluster_environment_answers_from_the_launch_decision():
    _need_lightning()
    from lightning.fabric.plugins.environments import ClusterEnvironment

    from ezpz.integrations.lightning import cluster_environment

    plan, _ = ezpz.hooks.plan(environ=PALS, build=BUILD)
    launch = plan.launch
    env = cluster_environment(plan)
    assert isinstance(env, ClusterEnvironment) and env.creates_processes_externally and not env.detect()
    assert (env.global_rank(), env.world_size(), env.local_rank(), env.node_rank()) == (
        launch.rank, launch.world_size, launch.local_rank, launch.node_rank)
    assert (env.main_address, env.main_port) == (launch.master_addr, launch.master_port)
    env.set_global_rank(0)  # Fabric's node * devices + local arithmetic is ignored: the launcher decided
    assert env.global_rank() == launch.rank
    env.validate_settings(num_devices=launch.local_world_size, num_nodes=launch.num_nodes)
    with pytest.raises(ConfigError, match="devices=12, num_nodes=2"):
        env.validate_settings(num_devices=1, num_nodes=2)


def test_rendezvous_published_at_setup_is_a_named_error_before_setup():
    _need_lightning()
    from ezpz.integrations.lightning import cluster_environment

    # Hydra without MASTER_PORT: rank 0 publishes the port it bound through PMI at setup, so no plan holds it
    hydra = {**test_launch_env.HYDRA, "EZPZ_DEVICE": "cpu"}
    plan, _ = ezpz.hooks.plan(environ=hydra, build=BUILD)
    assert plan.launch.master_port is None and plan.launch.exchange == "pmi"
    env = cluster_environment(plan)
    with pytest.raises(ConfigError, match="call ezpz.hooks.setup\\(\\) before Fabric"):
        env.main_port


def test_accelerator_and_arguments_use_the_planned_device_and_backend():
    _need_lightning()
    import torch
    from lightning.fabric.strategies import DDPStrategy

    from ezpz.integrations.lightning import accelerator, fabric_arguments

    plan, _ = ezpz.hooks.plan(environ=PALS, build=BUILD)
    acc = accelerator(plan)
    assert type(acc).is_available() and type(acc).name() == "ezpz"
    assert type(acc).get_parallel_devices(type(acc).parse_devices(12)) == [torch.device("cpu")] * 12
    args = fabric_arguments(plan)
    assert (args["devices"], args["num_nodes"]) == (12, 2)
    assert isinstance(args["strategy"], DDPStrategy) and args["strategy"]._process_group_backend == plan.backend.name
    precision = args["plugins"][1]
    if plan.amp.autocast:  # the autocast device is ezpz's device type, not Fabric's "cuda" guess
        assert precision.device == plan.device.candidate.device_type
    assert fabric_arguments(plan, strategy="ddp")["strategy"] == "ddp"
