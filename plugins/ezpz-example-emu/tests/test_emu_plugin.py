"""The plugin's decisions from recorded facts, through the real plan() path: invisible unless asked for, never the default."""

from __future__ import annotations

import pytest

from ezpz.errors import ConfigError, UnavailableError
from ezpz.testing import assert_conformant, make_host, make_plan, recorded_build
from ezpz_example_emu import core, plugin

ASKED = {"EZPZ_DEVICE": "emu"}
FACTS = core.EmuFacts(requested_by="EZPZ_DEVICE=emu", torch_version="2.13.0", python_backend=True)


def test_the_probe_says_nothing_unless_asked_for():
    assert plugin.ezpz_probe_devices(build=recorded_build("cpu"), environ={}) is None
    assert plugin.ezpz_probe_devices(build=recorded_build("cpu"), environ={"EZPZ_DEVICE": "cuda"}) is None
    assert plugin.ezpz_probe_devices(build=recorded_build("cpu"), environ={core.OFFER_VAR: "0"}) is None


@pytest.mark.parametrize("environ", [{}, {"EZPZ_DEVICE": "cuda"}, {"EZPZ_DEVICE": "emulator"}, {"EZPZ_DEVICE": "emu"},
                                     {"EZPZ_DEVICE": " EMU:1"}, {core.OFFER_VAR: ""}, {core.OFFER_VAR: "0"},
                                     {core.OFFER_VAR: "maybe"}, {"TORCH_DEVICE": "emu"}])
def test_the_quick_check_only_skips_what_read_request_would_skip(environ):
    """The probe's check before importing core says "not asked" only where core.read_request returns None."""
    assert plugin._ASKED_BY == ("EZPZ_DEVICE", core.OFFER_VAR) and core.DEVICE_TYPE == "emu"
    if not plugin._maybe_asked(environ):
        assert core.read_request(environ) is None


@pytest.mark.parametrize("environ, said", [({"EZPZ_DEVICE": "emu"}, "EZPZ_DEVICE=emu"),
                                           ({"EZPZ_DEVICE": " EMU:0 "}, "EZPZ_DEVICE=EMU:0"),
                                           ({core.OFFER_VAR: "yes"}, f"{core.OFFER_VAR}=yes")])
def test_asked_for_by_either_variable(environ, said):
    assert core.read_request(environ) == said


def test_a_bad_offer_variable_is_named():
    with pytest.raises(ConfigError) as err:
        core.read_request({core.OFFER_VAR: "maybe"})
    assert err.value.name == core.OFFER_VAR


def test_offered_below_cpu_so_it_never_wins_by_default():
    host = make_host(plugin)
    plan = make_plan(host, environ={core.OFFER_VAR: "1"}, build=recorded_build("cpu"))
    assert plan.device.candidate.device_type == "cpu"
    emu = next(a for a in plan.device.alternatives if a.name == "emu")
    assert "priority -10" in emu.reason and "offered because EZPZ_EXAMPLE_EMU=1" in emu.reason
    plan = make_plan(host, environ={}, build=recorded_build("cpu"))
    assert not any(a.name == "emu" for a in plan.device.alternatives)  # invisible: nothing said at all


def test_chosen_by_name_with_its_backend_precision_profiling_and_compile():
    plan = make_plan(make_host(plugin), environ=ASKED, build=recorded_build("cpu"))
    assert plan.device.torch_device == "emu" and plan.device.index is None  # one emu per process, shared like cpu
    assert plan.device.reason.startswith("requested by EZPZ_DEVICE=emu")
    assert plan.backend.name == "emuccl" and [a.name for a in plan.backend.alternatives] == ["gloo"]
    assert plan.amp.dtype == "bf16" and plan.amp.autocast and not plan.amp.grad_scaler
    assert plan.profiling.activities == ("CPU",) and plan.profiling.memory_stats is plugin.emu_memory_stats
    assert plan.compile.backend == "aot_eager" and plan.compile.alternatives[0].backend == "inductor"
    assert "register_backend_for_device" in plan.compile.alternatives[0].reason
    assert plan.step is None or plan.step.mark is None  # eager: no step boundary


def test_fp16_brings_a_grad_scaler_and_fp32_turns_autocast_off():
    host = make_host(plugin)
    fp16 = make_plan(host, environ=ASKED, build=recorded_build("cpu"), precision="fp16")
    fp32 = make_plan(host, environ=ASKED, build=recorded_build("cpu"), precision="fp32")
    assert fp16.amp.grad_scaler and fp16.amp.autocast and not fp32.amp.autocast


def test_gloo_alone_is_refused_for_emu_tensors():
    with pytest.raises(UnavailableError, match="emuccl"):
        make_plan(make_host(plugin), environ=ASKED, build=recorded_build("cpu"), backend="gloo")


def test_without_gloo_emuccl_is_unavailable_and_says_why():
    options = core.backend_options(FACTS, recorded_build("cpu", distributed_backends=("mpi",)))
    assert not any(o.available for o in options)
    assert "built without gloo" in options[0].reason


def test_a_torch_that_cannot_host_it_is_a_rejection_with_the_reason():
    old = core.EmuFacts(requested_by="EZPZ_DEVICE=emu", torch_version="2.4.1", python_backend=False)
    taken = core.EmuFacts(requested_by="EZPZ_DEVICE=emu", torch_version="2.13.0", python_backend=True,
                          privateuse1_owner="npu")
    assert "install torch 2.13" in core.rejection(old)
    assert "already the 'npu' backend" in core.rejection(taken)
    assert core.rejection(FACTS) is None


def test_conformant_when_absent_and_when_asked_for():
    assert_conformant("example-emu", environ={})
    report = assert_conformant("ezpz_example_emu.plugin", environ=ASKED, isolated_import=False)
    assert report["plan with the built-ins"].detail.startswith("device emu, backend emuccl")


def test_answers_cuda_questions_for_emu_only():
    from ezpz.cuda_answers import CudaAnswers

    plan = make_plan(make_host(plugin), environ=ASKED, build=recorded_build("cpu"))
    answers = plugin.ezpz_cuda_answers(plan.device.candidate, plan.build, plan.backend.name)
    assert isinstance(answers, CudaAnswers) and answers.redirect and answers.pinned_memory is False
    assert answers.missing_reduce_ops == ("AVG",) and "emuccl reduces through gloo" in answers.reason
    cpu = make_plan(make_host(plugin), environ={}, build=recorded_build("cpu"))
    assert plugin.ezpz_cuda_answers(cpu.device.candidate, cpu.build, cpu.backend.name) is None


def test_swap_mode_is_on_for_the_run_and_off_again_after_its_undo():
    """ezpz_before_init turns torch's swap-module-params mode on; the action's undo (run by teardown()) turns it off,
    and a mode the process had on already is left on."""
    import torch

    plan = make_plan(make_host(plugin), environ=ASKED, build=recorded_build("cpu"))
    flag = torch.__future__
    was = flag.get_swap_module_params_on_conversion()  # another test in this process may have called the hook
    flag.set_swap_module_params_on_conversion(False)
    try:
        action = plugin.ezpz_before_init(plan)
        assert flag.get_swap_module_params_on_conversion() and "until teardown()" in action.reason
        action.undo()
        assert not flag.get_swap_module_params_on_conversion()
        flag.set_swap_module_params_on_conversion(True)  # someone else's: not emu's to undo
        again = plugin.ezpz_before_init(plan)
        assert again.undo is None and flag.get_swap_module_params_on_conversion()
    finally:
        flag.set_swap_module_params_on_conversion(was)
