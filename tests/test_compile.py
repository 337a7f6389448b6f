"""torch.compile through ezpz: the CPU answer from a real compiler probe, recorded facts for the rest, a real compile.

The compile-vs-eager test runs Inductor on this machine's CPU for real; it is
skipped, with the probe's reason, where no C++ compiler runs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import ezpz
from conftest import clean_env, unset_env
from ezpz.builtin.cxx import CxxFacts, cpu_compile_options, probe_cxx
from ezpz.builtin.mps import mps_compile_options
from ezpz.compiling import CompileOption, CompilePolicy, apply_compile_request, choose_compile, parse_compile_request
from ezpz.errors import ConfigError, UnavailableError
from ezpz.facts import TorchBuild

TORCH_2_13_CPU = TorchBuild(version="2.13.0+cpu", distributed_backends=("gloo",))
TORCH_2_4_CPU = TorchBuild(version="2.4.1+cpu", distributed_backends=("gloo",))
TORCH_1_13_CPU = TorchBuild(version="1.13.1+cpu", distributed_backends=("gloo",))
# macOS arm64 wheels are built with MPS (torch.backends.mps.is_built()).
TORCH_2_7_MAC = TorchBuild(version="2.7.1", mps_built=True, distributed_backends=("gloo",))
TORCH_2_8_MAC = TorchBuild(version="2.8.0", mps_built=True, distributed_backends=("gloo",))

GXX = CxxFacts(compiler="g++", platform="linux", path="/usr/bin/g++", version="g++ (Debian 12.2.0-14) 12.2.0")
NO_GXX = CxxFacts(compiler="g++", platform="linux", error="'g++' was not found on PATH")
MSVC = CxxFacts(compiler="cl", platform="win32", path="C:/VS/cl.exe", version="Microsoft (R) C/C++ Compiler")


@pytest.fixture
def env(monkeypatch):
    unset_env(monkeypatch, ("EZPZ_DEVICE", "EZPZ_PRECISION", "EZPZ_COMPILE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                            "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "DS_ACCELERATOR"))  # pin stays
    yield monkeypatch
    ezpz.hooks.teardown()


# -- recorded facts: the built-in cpu and mps answers -----------------------------------------------------------------

def test_recorded_cpu_with_a_working_gxx_uses_inductor():
    policy = choose_compile(cpu_compile_options(TORCH_2_13_CPU, GXX), device="cpu")
    assert policy.backend == "inductor" and "/usr/bin/g++" in policy.reason
    assert [(o.backend, o.available) for o in policy.alternatives] == [("aot_eager", True)]


def test_recorded_cpu_without_a_compiler_falls_back_to_aot_eager_and_says_why():
    policy = choose_compile(cpu_compile_options(TORCH_2_13_CPU, NO_GXX), device="cpu")
    assert policy.backend == "aot_eager"
    assert "needs a working C++ compiler: 'g++' was not found on PATH" in policy.alternatives[0].reason
    assert "after inductor unavailable" in policy.reason


def test_recorded_windows_cpu_inductor_needs_torch_2_5():
    assert choose_compile(cpu_compile_options(TORCH_2_4_CPU, MSVC), device="cpu").backend == "aot_eager"
    assert choose_compile(cpu_compile_options(TORCH_2_13_CPU, MSVC), device="cpu").backend == "inductor"


def test_recorded_torch_before_2_0_does_not_compile():
    policy = choose_compile(cpu_compile_options(TORCH_1_13_CPU, GXX), device="cpu")
    assert policy.backend == "none" and "torch 2.0" in policy.reason


@pytest.mark.parametrize(("build", "backend"), [(TORCH_2_7_MAC, "aot_eager"), (TORCH_2_8_MAC, "inductor")])
def test_recorded_mps_inductor_from_torch_2_8(build, backend):
    policy = choose_compile(mps_compile_options(build), device="mps")
    assert policy.backend == backend
    if backend == "aot_eager":
        assert "before torch 2.8's MPSInductor (have 2.7.1)" in policy.alternatives[0].reason


# -- the request: EZPZ_COMPILE / setup(compile=) -------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "parsed"), [("auto", "auto"), (" Inductor ", "inductor"), ("aot_eager", "aot_eager"),
                                             ("off", "none"), ("none", "none"), ("eager", "eager"), ("", "auto")])
def test_compile_request_values(raw, parsed):
    assert parse_compile_request(raw, name="EZPZ_COMPILE") == parsed


@pytest.mark.parametrize("raw", ["max-autotune", "cudagraphs", "yes", 3])
def test_bad_compile_request_is_named(raw):
    with pytest.raises(ConfigError) as err:
        parse_compile_request(raw, name="EZPZ_COMPILE")
    assert err.value.name == "EZPZ_COMPILE" and "auto, inductor, aot_eager, openxla, eager, none" in str(err.value)


def test_bad_ezpz_compile_and_keyword_are_named_by_setup(env):
    env.setenv("EZPZ_COMPILE", "fast")
    with pytest.raises(ConfigError, match="EZPZ_COMPILE='fast'"):
        ezpz.hooks.setup()
    env.delenv("EZPZ_COMPILE")
    with pytest.raises(ConfigError, match=r"setup\(compile=\.\.\.\)='fast'"):
        ezpz.hooks.setup(compile="fast")


def test_requesting_an_unavailable_backend_raises_naming_the_device():
    policy = choose_compile(cpu_compile_options(TORCH_2_13_CPU, NO_GXX), device="cpu (AMD EPYC 7763)")
    with pytest.raises(UnavailableError) as err:
        apply_compile_request(policy, "inductor", device="ignored")
    text = str(err.value)
    assert "cpu (AMD EPYC 7763)" in text and "was not found on PATH" in text and "aot_eager" in text
    assert apply_compile_request(policy, "eager", device="d").backend == "eager"  # needs nothing from the device
    assert apply_compile_request(policy, "none", device="d").backend == "none"


def test_no_plugin_answer_means_no_compile_and_inductor_cannot_be_forced():
    from ezpz.compiling import no_compile_answer

    policy = no_compile_answer("hpu (habana, plugin example-hpu)")
    assert policy.backend == "none" and "no plugin described torch.compile" in policy.reason
    with pytest.raises(UnavailableError, match="does not offer it"):
        apply_compile_request(policy, "inductor", device="hpu (habana, plugin example-hpu)")


def test_compile_policy_validates_its_backend():
    with pytest.raises(ValueError):
        CompileOption(backend="tvm", available=True, reason="x")
    with pytest.raises(ValueError):
        CompilePolicy(backend="inductor", reason=" ")


# -- this machine: the real probe, plan, setup and a real compile --------------------------------------------------

def test_a_missing_compiler_in_cxx_is_found_missing_by_the_real_probe(env):
    env.setenv("CXX", "/nonexistent/ezpz-no-such-g++")
    facts = probe_cxx()
    assert not facts.works and "was not found on PATH" in facts.error
    plan, explanation = ezpz.hooks.plan(environ={"CXX": "/nonexistent/ezpz-no-such-g++"}, compile="auto")
    # the plan's probe reads os.environ (like torch); the CXX set above is what it sees
    assert plan.compile.backend == "aot_eager"
    assert explanation["compile"].chosen == "aot_eager"
    with pytest.raises(UnavailableError, match="needs a working C\\+\\+ compiler"):
        ezpz.hooks.plan(environ={}, compile="inductor")


def test_setup_compile_none_returns_the_model_itself(env):
    rt = ezpz.hooks.setup(compile="none")
    model = torch.nn.Linear(2, 2)
    assert rt.compile(model) is model
    assert rt.explain()["compile"].chosen == "none"


@pytest.mark.timeout(600)
def test_rt_compile_matches_eager_on_this_cpu_with_inductor(env):
    facts = probe_cxx()
    if not facts.works:
        pytest.skip(f"no C++ compiler for Inductor here: {facts.error}")
    rt = ezpz.hooks.setup(precision="fp32")
    assert rt.explain()["compile"].chosen == "inductor"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    compiled = rt.compile(model)
    assert compiled is not model
    x = torch.randn(4, 16)
    with torch.no_grad():
        expected, got = model(x), compiled(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    # it really went through Inductor: torch counts the graphs Inductor compiled
    from torch._dynamo.utils import counters

    assert counters["inductor"]  # non-empty once Inductor lowered a graph


@pytest.mark.timeout(300)
def test_compile_is_a_decision_in_ezpz_doctor_json():
    proc = subprocess.run([sys.executable, "-m", "ezpz", "doctor", "--json"], env=clean_env(EZPZ_COMPILE="aot_eager"),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    decisions = {d["topic"]: d for d in report["decisions"]}
    assert decisions["compile"]["chosen"] == "aot_eager"
    assert "requested by EZPZ_COMPILE=aot_eager" in decisions["compile"]["reason"]


def test_import_ezpz_loads_no_compile_or_deepspeed_module():
    code = ("import sys, json, ezpz; print(json.dumps(sorted(m for m in sys.modules if m in WATCH)))"
            .replace("WATCH", repr({"ezpz.compiling", "ezpz.builtin.cxx", "ezpz.runtime.deepspeed",
                                    "ezpz_cuda.compile_policy", "ezpz_rocm.compile_policy", "ezpz_xpu.compile_policy",
                                    "deepspeed", "triton"})))
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


@pytest.mark.device_choice  # a recorded Mac: MPS and the built-ins, not this host's plugins (a GPU's would win)
@pytest.mark.parametrize(("build", "backend"), [(TORCH_2_7_MAC, "aot_eager"), (TORCH_2_8_MAC, "inductor")])
def test_recorded_mac_plan_compiles_per_torch_version_and_names_deepspeeds_mps_accelerator(monkeypatch, build, backend,
                                                                                           builtin_plugins_only):
    """A recorded Apple-silicon Mac (macOS 14.5; MPS available) through the real plan, and the lifecycle answer."""
    from ezpz.builtin import mps
    from ezpz.plugin_host.calls import Hooks

    monkeypatch.setattr(mps, "probe_mps", lambda: mps.MpsFacts(available=True, macos=(14, 5)))
    plan, explanation = ezpz.hooks.plan(environ={}, build=build)
    assert plan.device.candidate.device_type == "mps"
    assert plan.compile.backend == backend and explanation["compile"].chosen == backend
    actions = dict(Hooks(ezpz.hooks.get_plugin_host()).before_init(plan))
    assert actions["mps"].env_defaults["DS_ACCELERATOR"] == "mps"
    assert "cpu" not in actions


def test_eager_cannot_be_forced_on_a_torch_without_torch_compile():
    policy = choose_compile(cpu_compile_options(TORCH_1_13_CPU, GXX), device="cpu")
    with pytest.raises(UnavailableError, match="torch.compile arrived in torch 2.0"):
        apply_compile_request(policy, "eager", device="cpu", torch_has_compile=False)
    assert apply_compile_request(policy, "none", device="cpu", torch_has_compile=False).backend == "none"
