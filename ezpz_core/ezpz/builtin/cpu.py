"""Built-in CPU plugin: always offers ``cpu``; gloo; bf16 autocast only on CPUs with native bf16."""

from __future__ import annotations

from collections.abc import Mapping

from typing import TYPE_CHECKING, Any

from ezpz.primitives.markers import hookimpl

if TYPE_CHECKING:  # records and policies are imported in the hook bodies to keep `import ezpz` cheap
    from ezpz.compiling import CompilePolicy
    from ezpz.cuda_answers import CudaAnswers
    from ezpz.decisions import AmpPolicy, BackendChoice, LifecycleAction, PrecisionOption, ProfilingSupport, SetupPlan
    from ezpz.facts import DeviceCandidate, LaunchEnv, ProbeReport, TorchBuild
    from ezpz.failures.signatures import FailureSignature
    from ezpz.builtin.cpu_facts import CpuFacts

BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # x86 AVX512-BF16 / AMX-BF16; aarch64 FEAT_BF16
FP16_FLAGS = ("avx512_fp16", "amx_fp16")


#: This plugin's facts record, by path: :func:`ezpz.plugin_kit.facts_if_ours` never imports it to ask.
FACTS = "ezpz.builtin.cpu_facts:CpuFacts"


def __getattr__(name: str) -> Any:
    """``CpuFacts`` lives in :mod:`ezpz.builtin.cpu_facts`, imported on first use (it is an attrs record)."""
    if name == "CpuFacts":
        from ezpz.builtin.cpu_facts import CpuFacts

        return CpuFacts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def probe_cpu(cpuinfo_path: str = "/proc/cpuinfo", machine: str | None = None) -> CpuFacts:
    """Read the CPU model and feature flags (Linux ``/proc/cpuinfo``; elsewhere, no flags).

    ``cpuinfo_path`` and ``machine`` (default ``platform.machine()``) let tests feed a recorded machine.
    """
    import platform

    from ezpz.builtin.cpu_facts import CpuFacts

    machine = machine or platform.machine()
    model, flags = machine, set()  # not platform.processor(): it runs `uname -p` in a subprocess
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "cpu model") and model == machine:
                    model = value.strip()
                elif key in ("flags", "features"):
                    flags.update(value.split())
                    break
    except OSError:
        pass
    return CpuFacts(model=model, machine=machine, flags=flags)


def cpu_candidate(facts: CpuFacts) -> DeviceCandidate:
    from ezpz.facts import DeviceCandidate

    return DeviceCandidate(
        device_type="cpu", vendor="cpu", priority=0, shared=True, count=1, names=(facts.model,), facts=facts,
        reason="the CPU is always available (fallback of last resort)",
        details={"bf16_flags": ",".join(f for f in BF16_FLAGS if f in facts.flags) or "none"},
    )


def cpu_precision_options(facts: CpuFacts) -> list[PrecisionOption]:
    from ezpz.decisions import PrecisionOption

    bf16 = [f for f in BF16_FLAGS if f in facts.flags]
    fp16 = [f for f in FP16_FLAGS if f in facts.flags]
    return [
        PrecisionOption(
            dtype="bf16", supported=bool(bf16),
            reason=f"CPU has native bf16 ({', '.join(bf16)})" if bf16
            else f"CPU {facts.model!r} has no native bf16 (no {'/'.join(BF16_FLAGS)} flag): torch would emulate it slowly",
        ),
        PrecisionOption(
            dtype="fp16", supported=bool(fp16),
            reason=f"CPU has native fp16 ({', '.join(fp16)})" if fp16 else "CPU has no native fp16 (no avx512_fp16/amx_fp16)",
        ),
    ]


@hookimpl(trylast=True)
def ezpz_probe_devices(build: TorchBuild, environ: Mapping[str, str]) -> ProbeReport:
    from ezpz.facts import ProbeReport

    return ProbeReport.found(cpu_candidate(probe_cpu()))


@hookimpl(trylast=True)
def ezpz_select_backend(device: DeviceCandidate, build: TorchBuild, launch: LaunchEnv, requested: str | None) -> BackendChoice | None:
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None
    from ezpz.plugin_kit import backend_in_build
    from ezpz.policies import choose_backend

    options = [
        backend_in_build(build, "gloo", reason="gloo is torch's CPU collective backend", missing="torch built without gloo"),
        backend_in_build(build, "mpi", reason="torch built with MPI", missing="torch built without MPI support"),
    ]
    return choose_backend(options, requested=requested, device="cpu")


@hookimpl(trylast=True)
def ezpz_amp_policy(device: DeviceCandidate, build: TorchBuild, requested: str) -> AmpPolicy | None:
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.policies import choose_precision

    return choose_precision(cpu_precision_options(facts), requested=requested, device=f"cpu ({facts.model})")


@hookimpl(trylast=True)
def ezpz_profiling(device: DeviceCandidate, build: TorchBuild) -> ProfilingSupport | None:
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None
    from ezpz.decisions import ProfilingSupport

    return ProfilingSupport(activities=("CPU",), reason="CPU profiler activity; ranges via torch record_function under the profiler")


@hookimpl(trylast=True)
def ezpz_compile_policy(device: DeviceCandidate, build: TorchBuild) -> CompilePolicy | None:
    """Inductor when the C++ compiler Inductor would use runs (probed once per process), else aot_eager."""
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(device, FACTS) is None:
        return None
    from ezpz.builtin.cxx import cpu_compile_options, probe_cxx
    from ezpz.compiling import choose_compile

    return choose_compile(cpu_compile_options(build, probe_cxx()), device="cpu")


#: DeepSpeed's accelerator name for this device (deepspeed/accelerator/real_accelerator.py).
DS_ACCELERATOR = "cpu"


@hookimpl(trylast=True)
def ezpz_before_init(plan: SetupPlan) -> LifecycleAction | None:
    """Tell DeepSpeed to use its CPU accelerator instead of guessing (``DS_ACCELERATOR=cpu``)."""
    from ezpz.plugin_kit import facts_if_ours

    if facts_if_ours(plan.device.candidate, FACTS) is None:
        return None
    from ezpz.plugin_kit import with_ds_accelerator

    return with_ds_accelerator(None, DS_ACCELERATOR, "CPU")


#: gloo's and torch's store failure texts (gloo is the CPU backend, and the side channel of every other one).
#: Sources: gloo/transport/tcp/unbound_buffer.cc ("Timed out waiting {}ms for recv|send operation to complete"),
#: gloo/transport/tcp/pair.cc ("Connection closed by peer", "Read error ... Connection reset by peer"),
#: torch/csrc/distributed/c10d/TCPStore.cpp ("wait timeout after ...ms", "Socket Timeout").
GLOO_SIGNATURES = (
    (r"Timed out waiting \d+ ?ms for (recv|send) operation", "timeout",
     "gloo: a peer did not send or receive within the process-group timeout", "gloo/transport/tcp/unbound_buffer.cc"),
    (r"Connection closed by peer|Connection reset by peer|Broken pipe", "lost_peer",
     "gloo: a peer's connection closed mid-collective (the peer process or its host went away)",
     "gloo/transport/tcp/pair.cc"),
    (r"wait timeout after \d+ ?ms|Socket Timeout", "timeout",
     "torch store: a key every rank should set did not appear in time", "torch/csrc/distributed/c10d/TCPStore.cpp"),
)


@hookimpl(trylast=True)
def ezpz_failure_signatures() -> list[FailureSignature]:
    """gloo's and torch's store failure texts (every job has them: gloo carries CPU collectives everywhere)."""
    from ezpz.failures.signatures import FailureSignature

    return [FailureSignature(pattern=p, kind=k, reason=r, source=s) for p, k, r, s in GLOO_SIGNATURES]


@hookimpl(trylast=True)
def ezpz_cuda_answers(device: DeviceCandidate, build: TorchBuild, backend: str) -> CudaAnswers | None:
    """What the CPU answers a script written for CUDA (``python -m ezpz.cuda_compat``): no CUDA features."""
    from ezpz.plugin_kit import facts_if_ours

    facts = facts_if_ours(device, FACTS)
    if facts is None:
        return None
    from ezpz.cuda_answers import CudaAnswers

    return CudaAnswers(
        reason=f"cpu ({facts.model}): no CUDA compute capability, no streams, events, graphs or pinned host memory "
               "(work runs in issue order on the host)" + ("; gloo has no ReduceOp.AVG" if backend == "gloo" else ""),
        properties={"name": facts.model, "total_memory": device.total_memory[0] if device.total_memory else 0},
        streams=False, events=False, graphs=False, pinned_memory=False,
        missing_reduce_ops=("AVG",) if backend == "gloo" else (),
    )
