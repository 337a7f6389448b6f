"""Pure ROCm torch.compile policy: recorded facts in, explained decision out. No torch, no triton import.

Recorded facts (public sources):
- torch.compile with TorchInductor generating Triton kernels supports AMD
  Instinct and Radeon GPUs on ROCm from PyTorch 2.0 (AMD, "Experience the
  power of PyTorch 2.0 on AMD Solutions", https://pytorch.org/blog/experience-power-pytorch-2.0/;
  torch.compile is listed for ROCm in the ROCm PyTorch compatibility page,
  https://rocm.docs.amd.com/en/latest/compatibility/ml-compatibility/pytorch-compatibility.html).
- ROCm wheels of torch ship Triton as ``pytorch-triton-rocm`` (import name
  ``triton``); without it torch raises ``TritonMissing``, whose message is
  used below (``torch/_inductor/exc.py``, torch 2.13).
- ``aot_eager`` (AOTAutograd with eager HIP kernels) needs no Triton.
- DeepSpeed drives ROCm builds through its CUDA accelerator (torch's HIP
  backend answers to ``torch.cuda``; ``deepspeed/accelerator/cuda_accelerator.py``).
"""

from __future__ import annotations

from ezpz.compiling import CompileOption
from ezpz.facts import TorchBuild

__all__ = ["DS_ACCELERATOR", "compile_options"]

COMPILE_FROM = (2, 0)
DS_ACCELERATOR = "cuda"
TRITON_MISSING = ("Cannot find a working triton installation. Either the package is not installed or it is too old. "
                  "More information on installing Triton can be found at: https://github.com/triton-lang/triton")


def compile_options(build: TorchBuild, label: str, *, triton_found: bool) -> list[CompileOption]:
    """Inductor on a ROCm build of torch 2.0+ with Triton installed, else aot_eager."""
    if not build.at_least(*COMPILE_FROM):
        why = f"torch.compile on ROCm arrived in torch 2.0 (have {build.version})"
        return [CompileOption(backend="inductor", available=False, reason=why),
                CompileOption(backend="aot_eager", available=False, reason=why)]
    if triton_found:
        inductor = CompileOption(backend="inductor", available=True,
                                 reason=f"Inductor with Triton's AMD backend on {label} (ROCm torch 2.0+)")
    else:
        inductor = CompileOption(backend="inductor", available=False,
                                 reason=f"torch says: {TRITON_MISSING} (ROCm wheels ship it as pytorch-triton-rocm)")
    return [inductor, CompileOption(backend="aot_eager", available=True,
                                    reason="AOTAutograd with eager HIP kernels needs no Triton")]
