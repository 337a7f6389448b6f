"""ezpz-rocm: the AMD ROCm plugin for ezpz.

ROCm builds of torch expose AMD GPUs as ``cuda`` (HIP behind ``torch.cuda``)
and RCCL behind the backend name ``nccl``. This plugin claims the device only
when ``torch.version.hip`` is set, picks bf16 or fp16 from the GPU
architecture (``gcnArchName``), keeps TF32 off, and uses roctx ranges.

Importing this package imports only the standard library, attrs and ezpz;
vendor modules (``amdsmi``, ``torch``) are imported inside the probe and hooks.
"""

from __future__ import annotations

__version__ = "1.0.0"

__all__ = ["__version__"]
