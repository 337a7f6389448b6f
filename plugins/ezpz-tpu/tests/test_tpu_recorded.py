"""The TPU plugin against recorded TPU VM environments and XLA's CPU runtime: runs without torch_xla."""

from __future__ import annotations

import re

import pytest

import tpu_recorded as rec
from ezpz.decisions import SetupPlan
from ezpz.testing import assert_conformant, make_host, make_plan, recorded_build
from ezpz_tpu import plugin
from ezpz_tpu.facts import GENERATIONS
from ezpz_tpu.policy import CPU_RUNTIME_PRIORITY, TPU_PRIORITY, tpu_candidate
from ezpz_tpu.probe import read_environment, read_slice

BUILD = recorded_build("cpu")


def with_torch_xla(name: str) -> bool:
    return name == "torch_xla"


def facts_of(environ):
    found = read_environment(environ, found=with_torch_xla)
    assert not isinstance(found, str) and found is not None, found
    return found


@pytest.mark.parametrize("name", list(rec.TPU_VMS))
def test_recorded_tpu_vm(name):
    environ, want = rec.TPU_VMS[name]
    facts = facts_of(environ)
    assert facts.on_tpu and facts.source == "TPU_ACCELERATOR_TYPE"
    assert facts.generation.name == want["generation"]
    assert (facts.slice_chips, facts.count) == (want["slice_chips"], want["count"])
    cand = tpu_candidate(facts)
    assert cand.device_type == "xla" and cand.priority == TPU_PRIORITY and cand.count == want["count"]
    assert cand.total_memory == (want["hbm_gb"] * 10**9,) * want["count"]
    assert cand.details["generation"] == want["generation"]
    assert str(facts.worker_id) == environ["TPU_WORKER_ID"]


def test_every_generation_has_a_recorded_vm_and_a_google_source():
    recorded = {want["generation"] for _, want in rec.TPU_VMS.values()}
    assert recorded == {g.name for g in GENERATIONS} == {"v4", "v5e", "v5p", "v6e"}
    for gen in GENERATIONS:
        assert gen.source.startswith("https://cloud.google.com/tpu/docs/")
        assert gen.name in rec.SOURCES


def test_accelerator_type_counts_cores_or_chips():
    assert read_slice("v4-8")[1] == 4 and read_slice("v5p-128")[1] == 64  # TensorCores: 2 per chip
    assert read_slice("v5litepod-8")[1] == 8 and read_slice("v6e-256")[1] == 256  # chips
    assert "no recorded facts" in read_slice("v7x-8") and "is not" in read_slice("tpu")


def test_no_torch_xla_rejects():
    assert read_environment({}, found=lambda name: False) is None
    report = plugin.ezpz_probe_devices(BUILD, {}) if not _torch_xla_installed() else None
    if report is not None:
        assert "torch_xla not installed" in report.rejections[0].reason


def _torch_xla_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch_xla") is not None


def test_cpu_runtime_is_a_testing_device_below_cpu():
    facts = facts_of({})
    assert (facts.pjrt_device, facts.source) == ("CPU", "default")
    cand = tpu_candidate(facts)
    assert cand.priority == CPU_RUNTIME_PRIORITY < 0
    assert "never the default" in cand.reason and "EZPZ_DEVICE=xla" in cand.reason
    assert facts_of({"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "4"}).count == 4


def test_pjrt_device_decides_and_gpu_is_refused():
    assert facts_of({"PJRT_DEVICE": "TPU"}).on_tpu
    assert facts_of({"PJRT_DEVICE": "TPU", "TPU_ACCELERATOR_TYPE": "v5p-8"}).count == 4
    refused = read_environment({"PJRT_DEVICE": "CUDA"}, found=with_torch_xla)
    assert isinstance(refused, str) and "PJRT_DEVICE='CUDA'" in refused
    assert read_environment({}, found=lambda n: n in ("torch_xla", "libtpu")).source == "libtpu"


def _host_plan(environ, monkeypatch, device=None):
    monkeypatch.setattr("ezpz_tpu.probe.installed", with_torch_xla)
    monkeypatch.setattr("ezpz_tpu.probe.read_environment.__defaults__", (with_torch_xla,))
    return make_plan(make_host(names={"tpu": plugin}), environ=environ, build=BUILD, device=device)


def test_cpu_stays_the_default_and_says_why_not_xla(monkeypatch):
    plan = _host_plan({}, monkeypatch)
    assert plan.device.candidate.device_type == "cpu"
    (xla,) = [a for a in plan.device.alternatives if a.name == "xla"]
    assert "priority -10" in xla.reason and "testing device" in xla.reason and "EZPZ_DEVICE=xla" in xla.reason


def test_ezpz_device_xla_chooses_it(monkeypatch):
    plan = _host_plan({"EZPZ_DEVICE": "xla"}, monkeypatch, device=None)
    assert plan.device.candidate.device_type == "xla" and plan.device.torch_device == "xla"
    assert plan.backend.name == "gloo"  # a single process; xla is unavailable on the CPU runtime, and says why
    assert plan.amp.dtype == "bf16" and not plan.amp.grad_scaler
    assert plan.compile.backend == "openxla"
    assert plan.step.name == "torch_xla.sync()" and plan.step.wait is not None


def test_tpu_plan(monkeypatch):
    environ, _ = rec.TPU_VMS["v6e-8"]
    plan = _host_plan(environ, monkeypatch)
    assert plan.device.candidate.device_type == "xla" and plan.device.candidate.details["generation"] == "v6e"
    assert plan.amp.dtype == "bf16" and "TPU" in plan.amp.reason
    action = plugin.ezpz_before_init(plan)
    assert plan.backend.name == "xla" and action.env_defaults == {"PJRT_DEVICE": "TPU"}
    assert action.then is plugin.import_xla_backend


def test_tpu_backend_is_xla_across_ranks(monkeypatch):
    environ, _ = rec.TPU_VMS["v4-8"]
    torchrun = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "0",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "tpu"}
    plan = _host_plan({**environ, **torchrun}, monkeypatch)
    assert plan.backend.name == "xla"
    action = plugin.ezpz_before_init(plan)
    assert action.then is plugin.import_xla_backend and "xla process-group backend" in action.reason
    cpu_plan = _host_plan({**torchrun, "EZPZ_DEVICE": "xla"}, monkeypatch)
    assert plugin.ezpz_before_init(cpu_plan).then is plugin.import_torch_xla
    assert cpu_plan.backend.name == "gloo"
    assert any("rank 0 of 1" in a.reason for a in cpu_plan.backend.alternatives)


def test_conformant_without_torch_xla_and_with_recorded_devices():
    candidates = [tpu_candidate(facts_of(env)) for env, _ in rec.TPU_VMS.values()] + [tpu_candidate(facts_of({}))]
    assert_conformant(plugin, environ={}, candidates=candidates, isolated_import=False)


@pytest.mark.parametrize("text, kind", [
    ("RuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 8.00G. "
     "That was not possible. There are 2.5G free.; (0x0x0_HBM0)", "oom"),
    ("RuntimeError: Bad StatusOr access: DEADLINE_EXCEEDED: Barrier timed out", "timeout"),
    ("The TPU is already in use by process with pid 1234. Not attempting to load libtpu.so in this process.",
     "lost_peer"),
    ("LLVM compilation error: Cannot allocate memory", "oom"),  # issue 33: a graph nothing cut, at torch.save
])
def test_failure_signatures(text, kind):
    sigs = plugin.ezpz_failure_signatures()
    hits = [s for s in sigs if re.search(s.pattern, text, re.IGNORECASE)]
    assert hits and hits[0].kind == kind and all(s.source for s in sigs)


def test_the_compiler_out_of_memory_signature_names_the_fix():
    sig = next(s for s in plugin.ezpz_failure_signatures() if "LLVM" in s.pattern)
    assert "EZPZ_STEP_HOOK" in sig.reason and "rt.step()" in sig.reason and "rt.save()" in sig.reason


def test_the_step_boundary_offers_the_compile_counter_the_graph_and_one_host_transfer():
    from ezpz_tpu.lazy_steps import XlaCompiles, graph_lines, to_host

    step = plugin.ezpz_step_boundary(tpu_candidate(facts_of({})), BUILD)
    assert step.name == "torch_xla.sync()" and isinstance(step.compiles, XlaCompiles)
    assert step.graph_text is graph_lines and step.to_host is to_host


def test_hlo_lines_differ_only_where_a_step_bakes_a_value_in():
    from ezpz_tpu.lazy_steps import hlo_lines

    def hlo(exponent: float, param: int) -> str:  # the shape of torch_xla's _get_xla_tensors_hlo text (2.9.0)
        return (f"HloModule IrToHlo.{param}, entry_computation_layout={{(f32[8,8]{{1,0}})->(f32[8,8]{{1,0}})}}\n\n"
                f"ENTRY %IrToHlo.{param} (p0.{param}: f32[8,8]) -> (f32[8,8]) {{\n"
                f"  %p0.{param} = f32[8,8]{{1,0}} parameter(0)\n"
                f"  %constant.{param + 1} = f32[] constant({exponent}), metadata={{op_type=\"aten__pow\" source_line=12}}\n"
                f"  %power.{param + 2} = f32[8,8]{{1,0}} power(f32[8,8]{{1,0}} %p0.{param}, f32[] %constant.{param + 1})\n"
                f"  ROOT %tuple.{param + 3} = (f32[8,8]{{1,0}}) tuple(f32[8,8]{{1,0}} %power.{param + 2})\n}}\n")

    a, b = hlo_lines(hlo(1.5, 2)), hlo_lines(hlo(1.25, 7))
    assert len(a) == len(b) == 4
    assert [(x, y) for x, y in zip(a, b) if x != y] == [("% = f32[] constant(1.5)", "% = f32[] constant(1.25)")]


def test_tpu_answers_cuda_questions_as_a_lazy_device_without_cuda_features(monkeypatch):
    """Recorded v6e-8 facts through plan(); what ``python -m ezpz.cuda_compat`` would be told (not run on a TPU)."""
    from ezpz.cuda_answers import CudaAnswers

    environ, _ = rec.TPU_VMS["v6e-8"]
    plan = _host_plan(environ, monkeypatch)
    answers = plugin.ezpz_cuda_answers(plan.device.candidate, plan.build, plan.backend.name)
    assert isinstance(answers, CudaAnswers) and answers.redirect and answers.capability is None
    assert (answers.streams, answers.events, answers.graphs, answers.pinned_memory) == (False, False, False, False)
    assert answers.missing_reduce_ops == ("AVG",) and "torch_xla.sync()" in answers.reason
    cpu = _host_plan({}, monkeypatch)
    assert plugin.ezpz_cuda_answers(cpu.device.candidate, cpu.build, cpu.backend.name) is None  # not its device


def test_rt_shard_refuses_on_a_recorded_tpu_naming_spmd(monkeypatch):
    """From the recorded v6e-8 VM's plan (no TPU, no torch_xla here): FSDP2 is refused, SPMD named."""
    import torch

    from ezpz.decisions import Explanation
    from ezpz.errors import UnavailableError
    from ezpz.runtime import Runtime
    from ezpz.sharding.explained import sharding_decision

    environ, _ = rec.TPU_VMS["v6e-8"]
    plan = _host_plan(environ, monkeypatch)
    support = plan.mesh
    assert support.fsdp2_unavailable and "SpmdFullyShardedDataParallel" in support.alternative
    assert all(s.startswith("https://docs.pytorch.org/xla/") for s in support.sources) and support.sources
    decision = sharding_decision(support, plan.amp, "xla")
    assert decision.chosen == "rt.shard() refuses on xla; mesh groups as torch makes them (split_group where the " \
                              "backend says it supports splitting)"
    rt = Runtime.from_plan(plan, Explanation(decisions=()), device=torch.device("cpu"))  # no torch_xla to make xla
    with pytest.raises(UnavailableError) as err:
        rt.shard(torch.nn.Linear(2, 2))
    said = str(err.value)
    assert "rt.shard(model)" in said and "FSDP2 on xla" in said and "use torch_xla's SPMD: FSDPv2" in said
