"""Whether a string names a CUDA device: ``'cuda'`` or ``'cuda:N'`` (N in ASCII digits), as ``torch.device`` reads it.

The one answer for the CUDA-compat front (which redirects such strings at run time) and the porter (which rewrites
them in source). ``'cudagraph'``, ``'cuda:x'``, ``'cuda:'``, ``'cuda:0\\n'`` and ``'cuda:٣'`` are not device strings.
"""

from __future__ import annotations

__all__ = ["is_cuda_device_string"]


def is_cuda_device_string(value: str) -> bool:
    """``value`` is ``'cuda'`` or ``'cuda:'`` followed by one or more ASCII digits."""
    if value == "cuda":
        return True
    ordinal = value[5:]
    return value.startswith("cuda:") and ordinal.isascii() and ordinal.isdigit()
