"""rt.mesh and rt.shard in one process: the precision FSDP2 gets, the mesh's shape, the groups' binding, refusals.

Training on several ranks (losses equal to DDP's, meshes of 1 and 2 dimensions, fp16 loss scaling on sharded
gradients) is tests/test_sharded_training.py's; XLA's refusal from its recorded plan is ezpz-tpu's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace

import attr
import pytest
import torch
from torch import nn

import ezpz
from ezpz.decisions import AmpPolicy, MeshSupport
from ezpz.errors import ConfigError, UnavailableError
from ezpz.runtime import Runtime
from ezpz.sharding.explained import sharding_decision
from ezpz.facts import TorchBuild
from ezpz.plugin_kit.gloo_reductions import gloo_mesh_support
from ezpz.sharding.fsdp import shard_model, shard_units
from ezpz.sharding.reductions import gradient_reduction
from ezpz.sharding.mesh import mesh_shape, unbound_default_group
from ezpz.sharding.precision import shard_precision


def _amp(dtype: str, scaler: bool = False) -> AmpPolicy:
    return AmpPolicy(dtype=dtype, autocast=dtype != "fp32", grad_scaler=scaler, tf32=False, reason=f"{dtype} here")


@pytest.mark.parametrize(("dtype", "scaler", "param", "kwargs"), [
    ("bf16", False, "bf16", {"param_dtype": torch.bfloat16, "reduce_dtype": torch.float32}),
    ("fp16", True, "fp16", {"param_dtype": torch.float16, "reduce_dtype": torch.float32}),
    ("fp32", False, None, {}),
])
def test_fsdp2_precision_follows_the_precision_policy(dtype, scaler, param, kwargs):
    precision = shard_precision(_amp(dtype, scaler), "dev")
    assert precision.param_dtype == param and precision.policy_kwargs() == kwargs
    assert precision.grad_scaler is scaler and f"{dtype} here" in precision.reason
    assert ("rt.grad_scaler()" in str(precision)) is scaler
    decision = sharding_decision(MeshSupport.default("dev"), _amp(dtype, scaler), "dev")
    assert decision.topic == "sharding" and f"{param or 'fp32'}" in decision.chosen
    assert precision.reason in decision.reason


def test_the_trace_names_a_refusal_with_its_alternative_and_sources():
    support = MeshSupport(reason="lazy device", fsdp2_unavailable="not FSDP2's", alternative="SPMD", sources=("u",))
    decision = sharding_decision(support, _amp("bf16"), "xla")
    assert decision.chosen.startswith("rt.shard() refuses on xla") and "not FSDP2's; use SPMD" in decision.reason
    assert decision.details["sources"] == ["u"]
    groups = sharding_decision(MeshSupport(reason="r", split_group=False), _amp("fp32"), "x").chosen
    assert "new_group" in groups


def test_sum_is_forced_only_where_the_backend_lacks_an_op_fsdp2_divides_in():
    own = gradient_reduction(MeshSupport(reason="r", unsupported_reduce_ops={"MIN"}, reduce_ops_reason="no MIN"), "d")
    assert not own.force_sum and not own.rejected and "AVG inside the reduce-scatter" in own.chosen
    both = gradient_reduction(MeshSupport(reason="r", unsupported_reduce_ops={"AVG", "PREMUL_SUM"},
                                          reduce_ops_reason="oneCCL raises"), "xpu")
    assert both.force_sum and "set_force_sum_reduction_for_comms(True)" in both.chosen
    assert "lacks AVG and PREMUL_SUM (oneCCL raises)" in both.reason and "would raise in the first backward" in both.reason
    assert "world-size times DDP's gradients" in both.rejected  # torchtitan's divide factor 1.0, not taken
    premul = gradient_reduction(MeshSupport(reason="r", unsupported_reduce_ops={"PREMUL_SUM"},
                                            reduce_ops_reason="gloo raises"), "cpu")
    assert premul.force_sum and "once a divide factor is set" in premul.reason
    decision = sharding_decision(MeshSupport(reason="r", unsupported_reduce_ops={"AVG"}, reduce_ops_reason="x"),
                                 _amp("bf16"), "xpu")
    assert "SUM reductions, divided once after" in decision.chosen and decision.details["unsupported_reduce_ops"] == ["AVG"]
    assert "divide factor 1.0" in [a.name for a in decision.alternatives]
    assert "SUM" not in sharding_decision(MeshSupport.default("dev"), _amp("fp32"), "dev").chosen


def test_reduce_ops_are_reduceop_names_and_come_with_a_reason():
    with pytest.raises(ValueError, match="not ReduceOp names"):
        MeshSupport(reason="r", unsupported_reduce_ops={"mean"}, reduce_ops_reason="x")
    with pytest.raises(ValueError, match="needs reduce_ops_reason"):
        MeshSupport(reason="r", unsupported_reduce_ops={"AVG"})


@pytest.mark.parametrize(("version", "lacking", "said"), [
    ("2.7.1", {"AVG", "PREMUL_SUM"}, "Cannot use ReduceOp.AVG with Gloo"),
    ("2.9.0", {"AVG", "PREMUL_SUM"}, "silently wrong"),
    ("2.13.0", {"PREMUL_SUM"}, "AVG works from 2.11"),
])
def test_gloo_lacks_premul_sum_always_and_avg_before_2_11(version, lacking, said):
    support = gloo_mesh_support(TorchBuild(version=version, distributed_backends=("gloo",)))
    assert support.unsupported_reduce_ops == lacking and said in support.reduce_ops_reason
    assert "https://github.com/pytorch/pytorch/pull/149781" in support.sources


def test_shard_model_refuses_a_torch_whose_fsdp2_cannot_force_sum():
    old = SimpleNamespace(FSDPModule=type("FSDPModule", (), {}), fully_shard=None)  # torch before 2.8
    support = MeshSupport(reason="r", unsupported_reduce_ops={"AVG"}, reduce_ops_reason="the backend raises")
    with pytest.raises(UnavailableError) as err:
        shard_model(nn.Linear(2, 2), None, old, shard_precision(_amp("fp32"), "d"), support)
    assert "set_force_sum_reduction_for_comms" in str(err.value) and "torch 2.8" in err.value.fix


def test_mesh_shape_names_the_dims_their_product_and_the_world():
    assert mesh_shape({}, 4) == ((4,), None)
    assert mesh_shape({"dp": 2, "tp": 2}, 4) == ((2, 2), ("dp", "tp"))
    with pytest.raises(ConfigError) as err:
        mesh_shape({"dp": 3, "tp": 2}, 4)
    said = str(err.value)
    assert "rt.mesh(dp=3, tp=2)" in said and "dp=3 x tp=2 = 6 ranks" in said and "world size, 4" in said
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ConfigError, match=r"rt.mesh\(dp=\.\.\.\).*positive number of ranks"):
            mesh_shape({"dp": bad}, 2)


def test_shard_units_look_inside_module_lists_and_dicts():
    model = nn.Module()
    model.embed = nn.Embedding(4, 2)
    model.blocks = nn.ModuleList([nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)])
    model.heads = nn.ModuleDict({"a": nn.Linear(2, 1)})
    model.act = nn.GELU()
    assert list(shard_units(model)) == [model.embed, model.blocks[0], model.blocks[2], model.heads["a"]]


@pytest.fixture
def gloo_group() -> Iterator[object]:
    """A one-rank gloo group in this process (a HashStore: no port, no peer)."""
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=timedelta(seconds=30))
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def test_the_default_groups_binding_is_lifted_only_where_the_backend_cannot_split(gloo_group):
    from ezpz.primitives.torch_private import backend_for_device

    bound = torch.device("cpu", 0)  # torch binds a device with an index
    saved = gloo_group.bound_device_id
    gloo_group.bound_device_id = bound
    try:
        with unbound_default_group(split_group=False):
            assert gloo_group.bound_device_id is None  # torch's DeviceMesh then takes new_group
        assert gloo_group.bound_device_id == bound
        with unbound_default_group(split_group=True):
            assert gloo_group.bound_device_id == bound
        backend = backend_for_device(gloo_group, bound)  # None: the plugin left it to the backend's own word
        splits = backend is None or bool(getattr(backend, "supports_splitting", True))
        with unbound_default_group(split_group=None):
            assert (gloo_group.bound_device_id == bound) is splits
        assert gloo_group.bound_device_id == bound
    finally:
        gloo_group.bound_device_id = saved


def test_hsdp_flatten_runs_with_the_binding_lifted_where_the_backend_cannot_split(gloo_group, monkeypatch):
    """The original ezpz's #189 (v0.21.12): HSDP's ``_flatten`` of (dp_replicate, dp_shard) called split_group on
    XCCL outside its workaround. flatten_device_mesh_safe flattens inside it, as the plan's answer says."""
    from ezpz import hooks
    from ezpz.original import meshes
    from ezpz.primitives.torch_private import flatten_mesh

    xccl = SimpleNamespace(plan=SimpleNamespace(mesh=MeshSupport(reason="xccl cannot split", split_group=False)))
    monkeypatch.setattr(hooks, "get_runtime", lambda: xccl)
    bound, saved = torch.device("cpu", 0), gloo_group.bound_device_id
    gloo_group.bound_device_id = bound
    seen = []

    def flatten_seeing_the_binding(submesh):  # type: ignore[no-untyped-def]
        real = flatten_mesh(submesh)
        return None if real is None else lambda name: (seen.append(gloo_group.bound_device_id), real(name))[1]

    monkeypatch.setattr(meshes, "flatten_mesh", flatten_seeing_the_binding)
    try:
        mesh = meshes.init_device_mesh_safe("cpu", (1, 1), mesh_dim_names=("dp_replicate", "dp_shard"))
        if flatten_mesh(mesh) is None:
            pytest.skip(f"torch {torch.__version__} has no DeviceMesh._flatten")
        assert meshes.flatten_device_mesh_safe(mesh["dp_replicate", "dp_shard"], "dp").size() == 1
        assert seen == [None] and gloo_group.bound_device_id == bound  # lifted while flattening, then put back
    finally:
        gloo_group.bound_device_id = saved


def test_rt_save_refuses_a_sharded_state_dict_naming_save_checkpoint(gloo_group, tmp_path, monkeypatch):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    monkeypatch.setenv("EZPZ_PRECISION", "fp32")
    rt = ezpz.hooks.setup()  # adopts the one-rank group
    model = fully_shard(nn.Linear(4, 4), mesh=init_device_mesh("cpu", (1,)))
    with pytest.raises(ConfigError) as err:
        rt.save({"model": model.state_dict()}, tmp_path / "m.pt")
    assert "obj['model']['weight'] is a DTensor" in str(err.value) and "rt.save_checkpoint(" in str(err.value)
    assert not (tmp_path / "m.pt").exists()
    rt.save({"model": nn.Linear(4, 4).state_dict(), "step": 3}, tmp_path / "plain.pt")  # whole tensors: saved
    assert torch.load(tmp_path / "plain.pt")["step"] == 3


def test_one_process_shard_is_the_model_on_the_device_and_a_refusal_is_named(monkeypatch):
    monkeypatch.setenv("EZPZ_PRECISION", "fp32")
    rt = ezpz.hooks.setup()
    model = nn.Linear(2, 2)
    assert rt.shard(model) is model and model.weight.device == rt.device
    with pytest.raises(UnavailableError, match=r"rt.mesh\(\).*no process group"):
        rt.mesh()
    refusing = MeshSupport(reason="a fake device", fsdp2_unavailable="no FSDP2 here", alternative="the other thing")
    fake = Runtime.from_plan(attr.evolve(rt.plan, mesh=refusing), rt.explanation, device=rt.device)
    with pytest.raises(UnavailableError) as err:
        fake.shard(nn.Linear(2, 2))
    assert "rt.shard(model)" in str(err.value) and "no FSDP2 here" in str(err.value)
    assert "use the other thing" in str(err.value)
