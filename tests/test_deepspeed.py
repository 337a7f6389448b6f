"""DeepSpeed from ezpz's decisions: precision sections (recorded facts), DS_ACCELERATOR, and real ZeRO steps.

The ZeRO-1/ZeRO-2 runs are real: DeepSpeed from PyPI, ``torchrun --nproc-per-node 2``,
gloo on this CPU. They are skipped, with the reason, where DeepSpeed is not
importable (scripts/test.sh installs it, so CI runs them).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import ezpz
from conftest import clean_env, rank_rows, unset_env
from ezpz.builtin.cpu import CpuFacts, cpu_precision_options
from ezpz.errors import ConfigError, UnavailableError
from ezpz.runtime.deepspeed import precision_sections

SCRIPT = str(Path(__file__).parent / "scripts" / "deepspeed_step.py")
DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
needs_deepspeed = pytest.mark.skipif(not DEEPSPEED, reason="deepspeed is not installed (scripts/test.sh installs it: "
                                     "pip install -c constraints.txt --no-build-isolation deepspeed)")
UNDETECTED = "unable to detect"

# Recorded CPUs (flags from /proc/cpuinfo as published): a Sapphire Rapids Xeon has AMX-BF16 and AVX512-FP16
# (Intel ARK, "Intel AMX" and "AVX-512" instruction set extensions); a Zen 3 EPYC has neither bf16 nor fp16 flags.
SAPPHIRE_RAPIDS = CpuFacts(model="Intel(R) Xeon(R) Platinum 8480+", machine="x86_64",
                           flags={"avx512f", "avx512_bf16", "amx_bf16", "avx512_fp16", "amx_tile"})
ZEN3 = CpuFacts(model="AMD EPYC 7763 64-Core Processor", machine="x86_64", flags={"avx2", "fma"})


def supports_for(facts: CpuFacts):
    options = {o.dtype: o for o in cpu_precision_options(facts)}

    def supports(dtype: str) -> str | None:
        return None if options[dtype].supported else options[dtype].reason

    return supports


def test_precision_sections_follow_a_bf16_policy_and_keep_the_users_keys():
    base = {"zero_optimization": {"stage": 2}, "bf16": {"immediate_grad_update": True}, "steps_per_print": 7}
    config = precision_sections(base, dtype="bf16", grad_scaler=False, device="cpu (SPR)",
                                supports=supports_for(SAPPHIRE_RAPIDS))
    assert config == {"zero_optimization": {"stage": 2}, "steps_per_print": 7,
                      "bf16": {"immediate_grad_update": True, "enabled": True}, "fp16": {"enabled": False}}
    assert base["bf16"] == {"immediate_grad_update": True}  # the caller's dict is not modified


def test_precision_sections_fp16_with_a_grad_scaler_is_dynamic_loss_scaling():
    config = precision_sections({}, dtype="fp16", grad_scaler=True, device="d", supports=lambda d: None)
    assert config["fp16"] == {"enabled": True, "loss_scale": 0} and config["bf16"] == {"enabled": False}
    config = precision_sections({"fp16": {"loss_scale": 128}}, dtype="fp16", grad_scaler=True, device="d",
                                supports=lambda d: None)
    assert config["fp16"] == {"enabled": True, "loss_scale": 128}  # a static scale the user chose is kept


def test_precision_sections_fp32_policy_disables_both_and_auto_is_filled():
    config = precision_sections({"bf16": {"enabled": "auto"}}, dtype="fp32", grad_scaler=False, device="d",
                                supports=supports_for(ZEN3))
    assert config["bf16"] == {"enabled": False} and config["fp16"] == {"enabled": False}


def test_a_user_section_the_device_cannot_do_raises_naming_the_key():
    with pytest.raises(UnavailableError) as err:
        precision_sections({"bf16": {"enabled": True}}, dtype="fp32", grad_scaler=False,
                           device="cpu (AMD EPYC 7763 64-Core Processor)", supports=supports_for(ZEN3))
    text = str(err.value)
    assert err.value.name == "deepspeed config bf16.enabled"
    assert "AMD EPYC 7763" in text and "no native bf16" in text


def test_a_user_section_the_device_can_do_is_kept_over_the_policy():
    config = precision_sections({"fp16": {"enabled": True}}, dtype="bf16", grad_scaler=False, device="d",
                                supports=supports_for(SAPPHIRE_RAPIDS))
    assert config["fp16"]["enabled"] is True and config["bf16"] == {"enabled": False}


@pytest.mark.parametrize(("base", "name"), [
    ({"bf16": {"enabled": True}, "fp16": {"enabled": True}}, "bf16.enabled and fp16.enabled"),
    ({"bf16": {"enabled": "yes"}}, "bf16.enabled"),
    ({"fp16": True}, "'fp16'"),
])
def test_bad_precision_sections_are_named(base, name):
    with pytest.raises(ConfigError) as err:
        precision_sections(base, dtype="bf16", grad_scaler=False, device="d", supports=lambda d: None)
    assert name in err.value.name


def test_base_must_be_a_dict():
    with pytest.raises(ConfigError, match="deepspeed_config"):
        precision_sections(["bf16"], dtype="bf16", grad_scaler=False, device="d", supports=lambda d: None)  # type: ignore[arg-type]


@pytest.fixture
def single(monkeypatch):
    unset_env(monkeypatch, ("EZPZ_DEVICE", "EZPZ_PRECISION", "EZPZ_COMPILE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                            "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "DS_ACCELERATOR"))  # pin stays
    yield monkeypatch
    ezpz.hooks.teardown()


def test_setup_sets_ds_accelerator_for_the_chosen_device_and_says_so(single):
    import os

    rt = ezpz.hooks.setup(precision="fp32")
    assert os.environ["DS_ACCELERATOR"] == "cpu"
    lifecycle = {d.chosen: d.reason for d in rt.explain().decisions if d.topic == "lifecycle"}
    assert "DS_ACCELERATOR=cpu" in lifecycle["cpu"]
    assert rt.deepspeed_config() == {"bf16": {"enabled": False}, "fp16": {"enabled": False}}
    ezpz.hooks.teardown()
    assert "DS_ACCELERATOR" not in os.environ  # what setup() set, teardown() unsets


def test_a_user_set_ds_accelerator_wins_and_the_lifecycle_decision_says_so(single):
    import os

    single.setenv("DS_ACCELERATOR", "hpu")
    rt = ezpz.hooks.setup(precision="fp32")
    assert os.environ["DS_ACCELERATOR"] == "hpu"
    lifecycle = {d.chosen: d.reason for d in rt.explain().decisions if d.topic == "lifecycle"}
    assert "DS_ACCELERATOR=hpu set by the user was kept (the plugin proposed cpu)" in lifecycle["cpu"]


@needs_deepspeed
def test_without_ezpz_deepspeed_guesses_and_warns():
    """The control: the warning the ZeRO runs below must not print does print when DeepSpeed guesses.

    DeepSpeed guesses where torch sees no GPU: the child sees none on any host (on the H200, with its GPU visible,
    DeepSpeed found CUDA by itself and printed no warning; ../shared/hardware and docs/hardware-validation.md).
    """
    code = "from deepspeed.accelerator import get_accelerator; print(get_accelerator().device_name())"
    env = clean_env(CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="", ROCR_VISIBLE_DEVICES="")
    env.pop("DS_ACCELERATOR", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert UNDETECTED in proc.stdout + proc.stderr


@needs_deepspeed
@pytest.mark.launcher
@pytest.mark.timeout(400)
@pytest.mark.parametrize("stage", [1, 2])
def test_zero_step_through_rt_deepspeed_config_on_two_torchrun_ranks(stage):
    from test_real_launchers import free_port

    env = clean_env(EZPZ_PRECISION="fp32", OMP_NUM_THREADS="1")  # fp32: the outcome must not depend on CPU flags
    env.pop("DS_ACCELERATOR", None)
    # torchrun of this interpreter (the console script on PATH may belong to another Python)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()), SCRIPT, str(stage)],
                          env=env, capture_output=True, text=True, timeout=360)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert UNDETECTED not in output, output[-4000:]
    rows = rank_rows(proc.stdout)
    assert [r["rank"] for r in rows] == [0, 1]
    for r in rows:
        assert r["stage"] == stage
        assert r["ds_accelerator_env"] == "cpu" and r["ds_accelerator"] == "cpu"
        assert r["torch_backend"] == r["ezpz_backend"] == "gloo"
        assert r["same_group"] is True  # DeepSpeed used the process group setup() made
        assert r["bf16"] is False and r["fp16"] is False and r["precision"] == "fp32"
        assert any("DS_ACCELERATOR=cpu" in reason for reason in r["lifecycle"])
    assert rows[0]["loss"] != rows[1]["loss"]  # different data per rank ...
    assert rows[0]["weights"] == pytest.approx(rows[1]["weights"], abs=1e-9)  # ... same weights after the step
