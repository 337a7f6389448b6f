"""Pure NVIDIA torch.compile policy: facts in, explained decision out. No torch, no triton import.

Recorded facts (public sources):
- Inductor generates Triton kernels for CUDA GPUs
  (https://docs.pytorch.org/docs/stable/torch.compiler.html: "For NVIDIA, AMD
  and Intel GPUs, it leverages OpenAI Triton").
- Triton supports compute capability 7.0 and newer; torch refuses older GPUs
  with ``GPUTooOldForTriton`` and, without Triton, ``TritonMissing``
  (``torch/_inductor/exc.py``, ``torch/_inductor/scheduler.py``, torch 2.13);
  the messages below are torch's own.
- ``aot_eager`` (AOTAutograd with eager CUDA kernels) needs neither.
- torch.compile arrived in torch 2.0.
"""

from __future__ import annotations

from ezpz.compiling import CompileOption
from ezpz.facts import TorchBuild
from ezpz_cuda.facts import GpuFacts

__all__ = ["DS_ACCELERATOR", "TRITON_MIN_CC", "compile_options", "torch_gpu_too_old", "torch_triton_missing"]

TRITON_MIN_CC = (7, 0)
COMPILE_FROM = (2, 0)
#: DeepSpeed's accelerator for NVIDIA GPUs (deepspeed/accelerator/real_accelerator.py).
DS_ACCELERATOR = "cuda"


def torch_gpu_too_old(gpu: GpuFacts) -> str:
    """torch's ``GPUTooOldForTriton`` message for ``gpu``."""
    return (f"Found {gpu.name} which is too old to be supported by the triton GPU compiler, which is used as the "
            "backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA capability "
            f"{gpu.major}.{gpu.minor}")


def torch_triton_missing() -> str:
    """torch's ``TritonMissing`` message."""
    return ("Cannot find a working triton installation. Either the package is not installed or it is too old. "
            "More information on installing Triton can be found at: https://github.com/triton-lang/triton")


def compile_options(gpu: GpuFacts, build: TorchBuild, *, triton_found: bool) -> list[CompileOption]:
    """Inductor for ``gpu`` (the least capable visible one) when Triton can target it, else aot_eager."""
    if not build.at_least(*COMPILE_FROM):
        why = f"torch.compile arrived in torch 2.0 (have {build.version})"
        return [CompileOption(backend="inductor", available=False, reason=why),
                CompileOption(backend="aot_eager", available=False, reason=why)]
    if gpu.capability < TRITON_MIN_CC:
        inductor = CompileOption(backend="inductor", available=False, reason=f"torch says: {torch_gpu_too_old(gpu)}")
    elif not triton_found:
        inductor = CompileOption(backend="inductor", available=False, reason=f"torch says: {torch_triton_missing()}")
    else:
        inductor = CompileOption(backend="inductor", available=True,
                                 reason=f"Inductor with Triton kernels on {gpu.label} (Triton needs 7.0+)")
    return [inductor, CompileOption(backend="aot_eager", available=True,
                                    reason="AOTAutograd with eager CUDA kernels needs neither Triton nor 7.0+")]
