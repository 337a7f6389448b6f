"""setup(), the runtime and the overrides, in this process on this machine's CPU (real torch)."""

from __future__ import annotations

import pytest
import torch

import ezpz
from ezpz.builtin.cpu import CpuFacts, cpu_candidate, cpu_precision_options, probe_cpu
from ezpz.errors import ConfigError, LaunchEnvError, SetupError, UnavailableError
from ezpz.policies import choose_precision

from conftest import unset_env


@pytest.fixture
def env(monkeypatch):
    unset_env(monkeypatch, ("EZPZ_DEVICE", "TORCH_DEVICE", "EZPZ_BACKEND", "TORCH_BACKEND", "EZPZ_PRECISION",
                            "EZPZ_TIMEOUT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                            "TORCHELASTIC_RUN_ID"))  # the CPU pin stays (conftest)
    return monkeypatch


def test_single_process_setup_returns_a_complete_runtime(env):
    rt = ezpz.hooks.setup()
    assert rt.device == torch.device("cpu") and rt.device_type == "cpu" and rt.vendor == "cpu"
    assert rt.backend == "gloo"
    assert (rt.rank, rt.local_rank, rt.world_size, rt.local_world_size, rt.node_rank, rt.num_nodes) == (0, 0, 1, 1, 0, 1)
    assert not rt.process_group and not torch.distributed.is_initialized()
    assert ezpz.hooks.setup() is rt  # same runtime twice
    assert ezpz.hooks.get_runtime() is rt


def test_setup_again_with_other_overrides_raises(env, recorded_cpu):
    recorded_cpu("sapphire-rapids-8470")  # a CPU where bf16 is allowed, whatever this host is
    ezpz.hooks.setup(precision="fp32")
    with pytest.raises(SetupError, match="teardown"):
        ezpz.hooks.setup(precision="bf16")
    ezpz.hooks.teardown()
    assert ezpz.hooks.setup(precision="bf16").amp.dtype == "bf16"


def test_explain_lists_every_topic_with_reasons(env):
    text = str(ezpz.hooks.setup().explain())
    for topic in ("torch:", "launch:", "device: cpu", "backend: gloo", "precision:", "profiling:", "timeout:"):
        assert topic in text
    assert "not mps [mps]: apple: torch built without MPS" in text
    data = ezpz.hooks.get_runtime().explain().to_dict()
    assert {d["topic"] for d in data["decisions"]} >= {"launch", "device", "backend", "precision", "profiling"}
    device = next(d for d in data["decisions"] if d["topic"] == "device")
    assert {"name": "mps", "plugin": "mps"}.items() <= device["alternatives"][-1].items()  # records, not reprs
    assert all(d["reason"] for d in data["decisions"])


def test_cpu_with_native_bf16_autocasts_in_bf16(env):
    """A real bf16 autocast on this host's CPU: runs only where the probe finds native bf16."""
    facts = probe_cpu()
    bf16 = next(o for o in cpu_precision_options(facts) if o.dtype == "bf16")
    if not bf16.supported:
        pytest.skip(f"this host's CPU probe says: {bf16.reason}")
    rt = ezpz.hooks.setup(precision="bf16")
    assert rt.amp.dtype == "bf16" and rt.amp.autocast and not rt.amp.grad_scaler
    lin = torch.nn.Linear(8, 8)
    with rt.autocast():
        out = lin(torch.randn(2, 8))
    assert out.dtype == torch.bfloat16  # autocast really engaged


def test_cpu_without_native_bf16_defaults_to_fp32_and_refuses_bf16():
    facts = CpuFacts(model="Intel Xeon E5-2680 v4 (Broadwell)", machine="x86_64", flags={"avx2", "fma"})
    auto = choose_precision(cpu_precision_options(facts), requested="auto", device="cpu (Broadwell)")
    assert auto.dtype == "fp32" and not auto.autocast
    assert "no low-precision dtype supported" in auto.reason
    with pytest.raises(UnavailableError) as err:
        choose_precision(cpu_precision_options(facts), requested="bf16", device="cpu (Broadwell)")
    msg = str(err.value)
    assert "EZPZ_PRECISION='bf16'" in msg and "cpu (Broadwell)" in msg and "no native bf16" in msg


def test_fp32_policy_means_autocast_is_a_no_op(env):
    rt = ezpz.hooks.setup(precision="fp32")
    with rt.autocast():
        assert torch.nn.Linear(4, 4)(torch.randn(1, 4)).dtype == torch.float32
    assert not rt.grad_scaler().is_enabled()


@pytest.mark.parametrize(
    ("var", "value", "needle"),
    [
        ("EZPZ_DEVICE", "warp-drive", "EZPZ_DEVICE='warp-drive'"),
        ("TORCH_DEVICE", "cuda", "TORCH_DEVICE='cuda'"),
        ("EZPZ_DEVICE", "cpu:x", "EZPZ_DEVICE='cpu:x'"),
        ("EZPZ_BACKEND", "nccl", "EZPZ_BACKEND='nccl'"),
        ("TORCH_BACKEND", "ccl", "TORCH_BACKEND='ccl'"),
        ("EZPZ_PRECISION", "fp8", "EZPZ_PRECISION='fp8'"),
        ("EZPZ_TIMEOUT", "soon", "EZPZ_TIMEOUT='soon'"),
        ("EZPZ_TIMEOUT", "-1", "EZPZ_TIMEOUT='-1'"),
    ],
)
@pytest.mark.device_choice  # TORCH_DEVICE=cuda must be a device this host does not offer: the cpu plugin's facts only
def test_bad_overrides_name_the_variable_and_what_is_allowed(env, builtin_plugins_only, var, value, needle):
    env.setenv(var, value)
    with pytest.raises(ConfigError) as err:
        ezpz.hooks.setup()
    msg = str(err.value)
    assert needle in msg and "expected" in msg and "Fix:" in msg


@pytest.mark.device_choice  # what is offered: the cpu plugin's facts, not this host's accelerators
def test_unknown_device_error_lists_what_is_offered(env, builtin_plugins_only):
    env.setenv("EZPZ_DEVICE", "cuda")
    with pytest.raises(UnavailableError, match=r"offer here: .*cpu \(cpu\)"):
        ezpz.hooks.setup()


def test_keyword_overrides_win_over_environment(env):
    env.setenv("EZPZ_PRECISION", "bf16")
    rt = ezpz.hooks.setup(precision="fp32", device="cpu", backend="gloo", timeout=7)
    assert rt.amp.dtype == "fp32" and rt.plan.timeout_s == 7
    assert "requested by setup(device=...)=cpu" in str(rt.explain())


def test_range_is_free_without_profiler_and_recorded_under_it(env):
    rt = ezpz.hooks.setup()
    assert rt.range("a") is rt.range("b")  # the shared no-op context, nothing allocated
    with rt.profiler() as prof:
        with rt.range("ezpz-range-marker"):
            torch.ones(4) @ torch.ones(4)
    assert any(evt.key == "ezpz-range-marker" for evt in prof.key_averages())


def test_memory_stats_and_profiler_activities(env):
    rt = ezpz.hooks.setup()
    assert rt.memory_stats()["host_peak_rss_bytes"] > 10e6
    assert rt.profiling.activities == ("CPU",)


def test_plan_has_no_side_effects(env):
    plan, explanation = ezpz.hooks.plan(environ={"EZPZ_PRECISION": "fp32"})
    assert plan.amp.dtype == "fp32" and ezpz.hooks.get_runtime() is None
    assert explanation["device"].chosen == "cpu"


def test_cpu_candidate_is_shared_and_lowest_priority():
    c = cpu_candidate(CpuFacts(model="x", machine="x86_64", flags=set()))
    assert c.shared and c.priority == 0 and c.reason


def test_tf32_uses_the_api_this_torch_wants():
    """torch 2.9+: ``fp32_precision`` (mixing in the legacy flags is refused); before: ``allow_tf32``."""
    from ezpz.hooks import _enable_tf32

    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision"):
        owners, names, on = (matmul, cudnn.conv), ("fp32_precision", "fp32_precision"), ("tf32", "tf32")
    else:
        owners, names, on = (matmul, cudnn), ("allow_tf32", "allow_tf32"), (True, True)
    before = tuple(getattr(o, n) for o, n in zip(owners, names))
    try:
        _enable_tf32(torch)
        assert tuple(getattr(o, n) for o, n in zip(owners, names)) == on
    finally:
        for o, n, value in zip(owners, names, before):
            setattr(o, n, value)


def test_reasons_name_the_variable_the_user_set(env):
    env.setenv("TORCH_BACKEND", "gloo")
    plan, _ = ezpz.hooks.plan()
    assert plan.backend.reason.startswith("requested by TORCH_BACKEND=gloo")


def test_core_resolves_a_rendezvous_a_site_plugin_left_open():
    """A site launcher plugin may return a multi-rank LaunchEnv without master address/port."""
    from ezpz import hookimpl
    from ezpz.facts import LaunchEnv

    class SiteLauncher:
        @hookimpl(tryfirst=True)
        def ezpz_detect_launch_env(self, environ):
            return LaunchEnv(launcher="site", rank=1, world_size=2, local_rank=1, local_world_size=2, reason="site")

    host = ezpz.hooks.get_plugin_host()
    assert host.register("site-launcher", SiteLauncher())
    try:
        plan, _ = ezpz.hooks.plan(environ={"SLURM_JOB_ID": "1234", "MASTER_PORT": "29511"})
        with pytest.raises(LaunchEnvError, match="MASTER_PORT"):  # a job-wide id is no launch identity
            ezpz.hooks.plan(environ={"SLURM_JOB_ID": "1234"})
    finally:
        host.pm.unregister(name="site-launcher")
        host.records.pop("site-launcher", None)
    assert plan.launch.launcher == "site"
    assert plan.launch.master_addr == "127.0.0.1" and plan.launch.master_port == 29511
