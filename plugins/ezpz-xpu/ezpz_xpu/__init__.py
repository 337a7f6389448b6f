"""ezpz plugin for Intel GPUs (``xpu``): XCCL/oneCCL/gloo, bf16 AMP, ITT ranges, ZE_* visible devices.

Importing this package imports only the standard library, ``ezpz`` and ``attrs``;
IPEX and the oneCCL bindings are imported inside hooks, only when needed.
"""

from __future__ import annotations

__version__ = "1.0.0"

__all__ = ["__version__"]
