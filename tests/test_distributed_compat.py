"""ezpz.distributed and the original's other portability names, in one process (multi-rank runs: test_original_scripts)."""

from __future__ import annotations

import logging
import os
import re
import sys
import types

import pytest
import torch
import torch.distributed as dist

import ezpz
import ezpz.original.compat as compat
import ezpz.distributed as ed
from conftest import unset_launch_env
from ezpz.original import memory
from ezpz.errors import ConfigError, LaunchEnvError, UnavailableError

#: The keys of the original's get_dist_info() (v0.26.1, src/ezpz/distributed.py).
ORIGINAL_DIST_INFO_KEYS = {
    "DEVICE", "DEVICE_ID", "DISTRIBUTED_BACKEND", "TORCHCOMMS", "GPUS_PER_NODE", "HOSTS", "HOSTFILE", "HOSTNAME",
    "LOCAL_RANK", "MACHINE", "NUM_NODES", "NGPUS", "NGPUS_AVAILABLE", "NODE_ID", "RANK", "SCHEDULER",
    "WORLD_SIZE_TOTAL", "WORLD_SIZE_IN_USE", "world_size", "EZPZ_RUN_COMMAND",
}


@pytest.fixture(autouse=True)
def plain_env(monkeypatch: pytest.MonkeyPatch, tmp_path):
    unset_launch_env(monkeypatch, "TORCH_DDP_TIMEOUT", "PYTHONHASHSEED")  # the CPU pin stays (conftest)
    monkeypatch.chdir(tmp_path)
    yield monkeypatch
    compat.cleanup()


# -- partial launcher environments ----------------------------------------------------------------------------


@pytest.mark.parametrize(("env", "expected"), [
    ({"RANK": "1"}, (1, 1, 0)),
    ({"PMI_RANK": "3"}, (3, 1, 0)),
    ({"LOCAL_RANK": "2"}, (0, 1, 2)),
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"}, (1, 4, 1)),
])
def test_getters_answer_on_partial_environments_as_the_original(plain_env, env, expected):
    for key, value in env.items():
        plain_env.setenv(key, value)
    with pytest.raises(LaunchEnvError):  # the plan itself still refuses the environment...
        ezpz.hooks.plan()
    assert (ezpz.get_rank(), ezpz.get_world_size(), ezpz.get_local_rank()) == expected  # ...the getters answer
    assert ezpz.get_torch_device() == "cpu" and ezpz.get_torch_backend() == "gloo"
    assert ed.get_dist_info()["RANK"] == expected[0]
    with pytest.raises(LaunchEnvError):
        ezpz.setup_torch()


def test_partial_environment_with_a_non_number_names_the_variable(plain_env):
    plain_env.setenv("RANK", "one")
    with pytest.raises(ConfigError, match="RANK='one'"):
        ezpz.get_rank()


# -- sizes ---------------------------------------------------------------------------------------------------


def test_world_size_total_and_in_use(plain_env, tmp_path):
    assert ezpz.get_world_size(total=True) == ed.get_world_size_total() == 1
    assert ezpz.get_world_size(in_use=True) == ed.get_world_size_in_use() == 1
    for key, value in {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "t"}.items():
        plain_env.setenv(key, value)
    assert ezpz.get_gpus_per_node() == 2 and ezpz.get_num_nodes() == 2
    assert ezpz.get_world_size(total=True) == 4 and ezpz.get_world_size(in_use=True) == 4


def test_num_nodes_from_a_hostfile(tmp_path):
    hostfile = tmp_path / "nodes"
    hostfile.write_text("x1001.cluster.org\nx1001\nx1002 slots=4\n\n")
    assert ezpz.get_num_nodes(hostfile=hostfile) == 2
    assert ezpz.get_num_nodes(hostfile=tmp_path / "absent") == 1  # not a file: the launcher's count
    assert ed.get_nodes_from_hostfile(hostfile) == ["x1001.cluster.org", "x1001", "x1002"]
    assert ed.get_nodes_from_hostfile(tmp_path / "absent") == [ed.get_hostname()]


def test_hostfile_fallback_never_writes(plain_env, tmp_path):
    assert ed.get_hostfile_with_fallback() is None and not (tmp_path / "hostfile").exists()
    nodes = ed.write_hostfile_from_list_of_hosts(["a", "b"], tmp_path / "sub" / "hosts")
    plain_env.setenv("PBS_NODEFILE", str(nodes))
    assert ed.get_hostfile_with_fallback() == nodes and ezpz.get_num_nodes(hostfile=nodes) == 2
    ed.write_localhost_to_hostfile(tmp_path / "me")
    assert (tmp_path / "me").read_text() == ed.get_hostname()


# -- get_dist_info and friends -----------------------------------------------------------------------------------


def test_dist_info_has_the_original_keys_and_agrees_with_the_getters(tmp_path):
    info = ezpz.get_dist_info()
    assert set(info) == ORIGINAL_DIST_INFO_KEYS
    assert (info["RANK"], info["LOCAL_RANK"], info["world_size"], info["DEVICE"]) == (0, 0, 1, "cpu")
    assert info["DEVICE_ID"] == "cpu:0" and info["DISTRIBUTED_BACKEND"] == "gloo" and info["SCHEDULER"] == "single"
    assert info["NUM_NODES"] == 1 and info["HOSTFILE"] == "" and not (tmp_path / "hostfile").exists()
    assert ed.query_environment() == {"world_size": 1, "rank": 0, "local_rank": 0}
    assert ed.print_dist_setup(display=False).endswith("[device='cpu'][node=0/0][local_rank=0/0][rank=0/0]")
    assert ed.get_device_properties() == {"name": "cpu", "total_memory": -1}
    assert ed.get_cpus_per_node() == (os.cpu_count() or 1)


def test_dist_info_verbose_logs_through_a_stdlib_logger(caplog):
    with caplog.at_level(logging.INFO, logger="ezpz.distributed"):
        ezpz.get_dist_info(verbose=True)
        ed.log_dict_as_bulleted_list({"a": 1}, name="cfg")
    text = caplog.text
    assert "DistInfo=" in text and '"RANK": 0' in text and "[cfg]:\n  - a=1" in text


def test_dtype_map_is_built_on_first_use():
    assert ed.TORCH_DTYPES_MAP["bf16"] is torch.bfloat16 and ed.TORCH_DTYPES_MAP["half"] is torch.float16
    assert ezpz.get_torch_version_tuple() == tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


# -- collectives, meshes ------------------------------------------------------------------------------------------


def test_collectives_without_a_process_group_return_the_value():
    assert ed.broadcast({"x": 1}) == {"x": 1} and ed.all_reduce(3) == 3
    with pytest.raises(ConfigError, match="all_reduce"):
        ed.all_reduce(1, implementation="nccl-ish")


def test_collectives_and_mesh_in_a_one_rank_group(free_port=None):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    assert ed.all_reduce(2.5) == 2.5 and ed.broadcast([1, 2]) == [1, 2]
    mesh = ezpz.init_device_mesh_safe("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
    assert mesh.shape == (1, 1) and mesh["tp"].size() == 1
    from ezpz.primitives.torch_private import flatten_mesh

    if flatten_mesh(mesh) is None:  # a torch without DeviceMesh._flatten (2.4.1): named, not an AttributeError
        with pytest.raises(UnavailableError, match="DeviceMesh has _flatten"):
            ezpz.flatten_device_mesh_safe(mesh["dp", "tp"], "dp_tp")
    else:
        assert ezpz.flatten_device_mesh_safe(mesh["dp", "tp"], "dp_tp").size() == 1


def test_parallel_sizes_must_divide_the_world():
    with pytest.raises(ConfigError, match=r"tensor_parallel_size.*divides the world size \(1\)"):
        ezpz.setup_torch(tensor_parallel_size=2)
    with pytest.raises(ConfigError, match="positive integer"):
        ezpz.setup_torch(pipeline_parallel_size=0)
    with pytest.raises(ConfigError, match="per-group backends"):
        ezpz.setup_torch(tensor_parallel_backend="gloo")
    assert ezpz.setup_torch(tensor_parallel_size=1) == 0 and ed.get_device_mesh() is None


def test_setup_torch_newer_positional_order_and_device_id(plain_env):
    assert ezpz.setup_torch(29871, 7) == 0  # v0.26: setup_torch(port, seed, ...)
    assert os.environ["MASTER_PORT"] == "29871" and torch.initial_seed() == 7
    compat.cleanup()
    assert ezpz.setup_torch(device_id=0) == 0  # no ordinals on the CPU: ignored, as the original did
    assert ezpz.hooks.get_runtime().device == torch.device("cpu")
    with pytest.raises(ConfigError, match="device_id"):
        compat._device_for_id("first")


def test_wrap_model_accepts_device_id_and_returns_one_process_models_unchanged():
    ezpz.setup_torch()
    model = torch.nn.Linear(2, 2)
    assert ezpz.wrap_model(model, device_id=0) is model and ezpz.wrap_model_for_ddp(model) is model
    assert ezpz.wrap_model_for_fsdp2(model) is model and ezpz.wrap_model_for_fsdp(model) is model


# -- timing ---------------------------------------------------------------------------------------------------


def test_timeitlogit_decorates_without_work_and_logs_on_rank_zero(caplog, monkeypatch):
    calls = []

    @ezpz.timeitlogit(rank=0, verbose=True)
    def step(x, scale=1):
        """Doc kept."""
        calls.append(x)
        return x * scale

    @ezpz.timeitlogit(rank=1, verbose=True)
    def quiet(x):
        return x

    assert step.__name__ == "step" and step.__doc__ == "Doc kept." and calls == []
    with caplog.at_level(logging.INFO, logger="ezpz.timing"):
        assert step(3, scale=2) == 6 and quiet(1) == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "ezpz.timing"]
    assert len(lines) == 1 and re.fullmatch(r".*<locals>\.step\(3, scale=2\) took \d+\.\d{4} s", lines[0]), lines


def test_timeitlogit_records_to_a_running_wandb_only_if_the_application_has_one(monkeypatch):
    logged = []
    fake = types.SimpleNamespace(run=object(), log=lambda d, commit: logged.append((d, commit)))
    monkeypatch.setitem(sys.modules, "wandb", fake)
    ezpz.timeitlogit(prefix="t")(lambda: None)()
    ((data, commit),) = logged
    (key,) = data
    assert key.startswith("t/") and key.endswith("<lambda>") and commit is False
    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(run=None, log=lambda *a, **k: 1 / 0))
    ezpz.timeitlogit()(lambda: None)()  # no run: nothing logged, nothing raised


# -- memory -------------------------------------------------------------------------------------------------------


def test_memory_metrics_are_empty_on_cpu_or_when_turned_off(plain_env):
    assert ezpz.get_memory_metrics() == {} and ezpz.get_memory_metrics("cpu") == {}
    assert ezpz.get_max_memory_allocated("cpu") == 0.0 and ezpz.get_current_memory_reserved(0) == 0.0
    ezpz.reset_peak_memory_stats("cpu")
    plain_env.setenv("EZPZ_TRACK_MEMORY", "0")
    assert ezpz.get_memory_metrics("cuda:0") == {}
    plain_env.setenv("EZPZ_TRACK_MEMORY", "sometimes")
    with pytest.raises(ConfigError, match="EZPZ_TRACK_MEMORY"):
        ezpz.get_memory_metrics()


def test_memory_metrics_map_the_plugin_counters_to_the_original_keys(monkeypatch):
    """Fed recorded counters (no accelerator here): GiB under the original's names, with the prefix."""
    gib = 1024**3
    counters = {"allocated_bytes": 1 * gib, "max_allocated_bytes": 2 * gib, "reserved_bytes": 3 * gib,
                "max_reserved_bytes": 4 * gib, "alloc_retries": 0.0}
    monkeypatch.setattr(memory, "_stats", lambda device: counters)
    got = ezpz.get_memory_metrics("cuda:0", reset_peak=False, prefix="train/")
    assert got == {"train/mem_alloc": 1.0, "train/mem_peak_alloc": 2.0, "train/mem_reserved": 3.0,
                   "train/mem_peak_reserved": 4.0}
    monkeypatch.setattr(memory, "_stats", lambda device: {"allocated_bytes": 1.0})  # MPS-like: not all four
    assert ezpz.get_memory_metrics("mps", reset_peak=False) == {}


@pytest.mark.parametrize(("key", "expected"), [
    ("mem_alloc", True), ("train/mem_peak_reserved", True), ("mem_alloc/mean", True), ("train/mem_reserved/std", True),
    ("mem_loss", False), ("memo_field", False), ("mem_alloc/median", False),
])
def test_is_memory_metric_key(key, expected):
    assert ezpz.is_memory_metric_key(key) is expected


def test_fsdp1_refuses_the_cpu_plainly(plain_env):
    for key, value in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "t"}.items():
        plain_env.setenv(key, value)
    with pytest.raises(UnavailableError, match="wrap_model_for_fsdp2"):
        ezpz.wrap_model_for_fsdp(torch.nn.Linear(2, 2))


def test_fsdp_strategy_names():
    assert [ed.resolve_fsdp_strategy(n) for n in ("full-shard", "shard-grad-op", "no-shard")] == [True, False, None]
    assert ed.resolve_fsdp_strategy("hybrid-shard") == ezpz.get_gpus_per_node()
    with pytest.raises(ConfigError, match="full-shard"):
        ed.resolve_fsdp_strategy("zero3")
