"""ezpz.original.compat: the original ezpz's names (setup_torch, get_rank, wrap_model, ...) over the runtime."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import ezpz
import ezpz.original.compat as compat
from conftest import clean_env, need_tool, rank_rows, unset_launch_env
from ezpz.errors import ConfigError, SetupError, UnavailableError

SCRIPT = str(Path(__file__).parent / "scripts" / "original_ezpz_script.py")
TORCHRUN_RANK1 = {
    "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
    "GROUP_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "compat",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def plain_env(monkeypatch: pytest.MonkeyPatch):
    """No launcher or ezpz variables in os.environ; compat's caches and env writes undone afterwards."""
    unset_launch_env(monkeypatch, "TORCH_DDP_TIMEOUT", "PYTHONHASHSEED")  # the CPU pin stays (conftest)
    yield monkeypatch
    compat.cleanup()


# -- wiring ------------------------------------------------------------------------------------------------


def test_every_compat_name_is_reachable_from_ezpz():
    for name in compat.__all__:
        assert getattr(ezpz, name) is getattr(compat, name)
    with pytest.raises(AttributeError):
        ezpz.no_such_helper  # noqa: B018


def test_import_ezpz_then_setup_torch_in_a_fresh_interpreter():
    """Exactly what an original-ezpz script does; needs ezpz.__getattr__ to forward ezpz.original.compat.__all__."""
    code = "import ezpz; r = ezpz.setup_torch(); print(r, ezpz.get_torch_device(), ezpz.get_world_size()); ezpz.cleanup()"
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["0", "cpu", "1"]


# -- getters before setup --------------------------------------------------------------------------------------


def test_rank_getters_before_setup_read_the_launcher(plain_env):
    for key, value in TORCHRUN_RANK1.items():
        plain_env.setenv(key, value)
    assert (compat.get_rank(), compat.get_local_rank(), compat.get_world_size()) == (1, 1, 2)
    assert (compat.get_num_nodes(), compat.get_node_index()) == (1, 0)
    assert ezpz.hooks.get_runtime() is None and not dist.is_initialized()


def test_rank_getters_default_to_a_single_process():
    assert (compat.get_rank(), compat.get_local_rank(), compat.get_world_size()) == (0, 0, 1)


def test_device_getters_before_setup_plan_without_side_effects():
    device = compat.get_torch_device()
    assert device == "cpu" and isinstance(device, str)
    assert compat.get_torch_device(as_torch_device=True) == torch.device("cpu")
    assert compat.get_torch_device_type() == "cpu"
    assert compat.get_torch_backend() == "gloo"
    assert compat.get_torch_device_type("CUDA:1") == "cuda"
    assert ezpz.hooks.get_runtime() is None


def test_torch_device_is_returned_as_given(plain_env):
    plain_env.setenv("TORCH_DEVICE", "cpu:0")
    assert compat.get_torch_device() == "cpu:0"
    assert compat.get_torch_device(as_torch_device=True) == torch.device("cpu:0")


def test_torch_backend_that_is_not_available_is_an_error(plain_env):
    plain_env.setenv("TORCH_BACKEND", "nccl")
    with pytest.raises(UnavailableError, match="TORCH_BACKEND"):
        compat.get_torch_backend()


# -- setup_torch / cleanup ------------------------------------------------------------------------------------


def test_setup_torch_single_process():
    assert compat.setup_torch() == 0
    rt = ezpz.hooks.get_runtime()
    assert rt is not None and rt.device_type == "cpu" and not dist.is_initialized()
    assert compat.get_rank() == 0 and compat.get_torch_device() == "cpu" and compat.get_torch_backend() == "gloo"
    assert compat.setup_torch() == 0 and ezpz.hooks.get_runtime() is rt  # again: same runtime
    compat.cleanup()
    assert ezpz.hooks.get_runtime() is None


def test_setup_torch_after_explicit_setup_reuses_it():
    rt = ezpz.hooks.setup(device="cpu")
    assert compat.setup_torch() == 0 and ezpz.hooks.get_runtime() is rt


@pytest.mark.parametrize("spelling", ["DDP", "ddp", "gloo", None])
def test_setup_torch_backend_spellings(spelling):
    compat.setup_torch(backend=spelling)
    assert compat.get_torch_backend() == "gloo"


def test_setup_torch_unavailable_backend_names_the_argument():
    with pytest.raises(UnavailableError, match=r"setup\(backend=...\)"):
        compat.setup_torch(backend="nccl")


@pytest.mark.parametrize("framework", ["deepspeed", "horovod"])
def test_setup_torch_frameworks_not_supported(framework):
    with pytest.raises(ConfigError, match="not part of ezpz's compatibility layer"):
        compat.setup_torch(backend=framework)


def test_setup_torch_port_sets_master_port_only_when_unset(plain_env):
    compat.setup_torch(29876)  # newer ezpz: the first parameter is the port
    assert os.environ["MASTER_PORT"] == "29876"
    compat.cleanup()
    assert "MASTER_PORT" not in os.environ
    plain_env.setenv("MASTER_PORT", "29001")
    compat.setup_torch(port=29876)
    assert os.environ["MASTER_PORT"] == "29001"


def test_setup_torch_keyword_arguments():
    with pytest.raises(TypeError, match="unexpected keyword argument.*bogus"):
        compat.setup_torch(bogus=1)
    with pytest.raises(ConfigError, match="tensor_parallel_size"):
        compat.setup_torch(tensor_parallel_size=2)
    assert compat.setup_torch(verbose=True, tensor_parallel_size=1, precision="fp32") == 0
    assert ezpz.hooks.get_runtime().amp.dtype == "fp32"


def test_timeout_from_torch_ddp_timeout_or_argument(plain_env):
    plain_env.setenv("TORCH_DDP_TIMEOUT", "42")
    compat.setup_torch()
    assert ezpz.hooks.get_runtime().plan.timeout_s == 42
    compat.cleanup()
    compat.setup_torch(timeout=7)
    assert ezpz.hooks.get_runtime().plan.timeout_s == 7


def test_setup_torch_seed_is_seed_plus_rank():
    compat.setup_torch(seed=5)
    assert torch.initial_seed() == 5
    first = random.random()
    random.seed(5)
    assert first == random.random()
    assert os.environ["PYTHONHASHSEED"] == "5"


def test_seed_everything_reproduces_torch_and_numpy():
    np = pytest.importorskip("numpy")
    compat.seed_everything(11)
    a, b = torch.rand(3), np.random.rand(2)
    compat.seed_everything(11)
    assert torch.equal(a, torch.rand(3)) and (b == np.random.rand(2)).all()


def test_cleanup_destroys_a_process_group_made_outside_ezpz():
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    compat.barrier()  # a one-rank barrier returns at once
    compat.cleanup()
    assert not dist.is_initialized()


# -- synchronize / barrier / wrap_model in one process ------------------------------------------------------------------


def test_synchronize_and_barrier_are_no_ops_in_one_process():
    compat.synchronize()
    compat.barrier()
    compat.setup_torch()
    compat.synchronize()
    compat.synchronize("cpu")
    compat.barrier(implementation="mpi")


@pytest.mark.parametrize("use_fsdp", [False, True])
def test_wrap_model_returns_the_model_unchanged_for_one_process(use_fsdp):
    compat.setup_torch()
    model = torch.nn.Linear(3, 2)
    assert compat.wrap_model(model, use_fsdp=use_fsdp, dtype="bf16") is model


def test_wrap_model_without_a_process_group_says_what_to_do(plain_env):
    for key, value in TORCHRUN_RANK1.items():
        plain_env.setenv(key, value)
    with pytest.raises(SetupError, match="call ezpz.setup_torch"):
        compat.wrap_model(torch.nn.Linear(3, 2))


def test_wrap_model_dtype_names():
    assert compat._torch_dtype("bf16") is torch.bfloat16 and compat._torch_dtype("half") is torch.float16
    assert compat._torch_dtype(torch.float32) is torch.float32 and compat._torch_dtype(None) is None
    with pytest.raises(ConfigError, match="wrap_model"):
        compat._torch_dtype("int8")


# -- a real two-rank run of a script written for the original ezpz ------------------------------------------------------


@pytest.mark.launcher
@pytest.mark.parametrize("wrapper", ["ddp", "fsdp"])
def test_original_script_under_torchrun(wrapper):
    torchrun = need_tool("torchrun")
    proc = subprocess.run(
        [torchrun, "--nproc-per-node", "2", "--master-port", str(free_port()), SCRIPT, "2", wrapper],
        env=clean_env(OMP_NUM_THREADS="1", EZPZ_TIMEOUT="120"), capture_output=True, text=True, timeout=300,
    )
    from ezpz.primitives.torch_private import fsdp2

    if wrapper == "fsdp" and fsdp2().__name__ != "torch.distributed.fsdp":  # torch 2.4/2.5: FSDP2 needs CUDA
        assert proc.returncode != 0 and "UnavailableError: wrap_model(use_fsdp=True)" in proc.stderr, proc.stderr
        return
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = rank_rows(proc.stdout)
    assert [r["rank"] for r in rows] == [0, 1]
    for row in rows:
        assert row["ok"], row
        assert row["world_size"] == 2 and row["rank_before_setup"] == row["rank"] and row["sum"] == 3.0
        assert row["device"] == "cpu" and row["backend"] == "gloo"
        assert row["wrapper"] == ("FSDPSequential" if wrapper == "fsdp" else "DistributedDataParallel")
