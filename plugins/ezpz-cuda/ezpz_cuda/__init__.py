"""ezpz-cuda: the NVIDIA plugin for ezpz.

Importing this package imports only the standard library, attrs and ezpz; the
NVML bindings and ``torch.cuda`` are imported inside the functions that need them.
"""

from __future__ import annotations

__version__ = "1.0.0"
